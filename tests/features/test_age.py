"""Tool age: a fixed reference date, missing dates, the reconstructed BiasBusters creation dates."""

import datetime as dt
import json
import math

import numpy as np
import pytest

from toolbias_stats.features import age_days, check_reference_date


class TestAgeDays:
    def test_fixed_reference_date(self):
        out = age_days(["2025-08-31", "2024-09-01", "2020-02-29"], reference_date=dt.date(2025, 9, 1))
        # 2024-09-01 -> 2025-09-01 spans no 29 February: 365 days; 2020-02-29 -> 2025-09-01: 2011 days
        assert out.tolist() == [1.0, 365.0, 2011.0]

    def test_missing_dates_stay_nan(self):
        out = age_days([None, "2025-01-01", float("nan")], reference_date="2025-01-11")
        assert math.isnan(out[0]) and out[1] == 10 and math.isnan(out[2])

    def test_future_date_is_negative(self):
        assert age_days(["2025-09-03"], reference_date="2025-09-01")[0] == -2

    def test_time_of_day_ignored(self):
        assert age_days(["2025-08-31T23:59:00"], reference_date="2025-09-01")[0] == 1

    @pytest.mark.parametrize("bad", ["01/09/2025", 20250901, "tomorrow"])
    def test_bad_reference_date(self, bad):
        with pytest.raises(ValueError, match=r"`reference_date` must be a date \(YYYY-MM-DD\)"):
            check_reference_date(bad)

    def test_none_is_today(self):
        assert check_reference_date(None) == dt.date.today()


class TestBiasBustersDates:
    def test_reconstructed_dates_give_the_authors_ages(self, bb_study, bb_data_dir):
        """tool_dates.csv = 2025-09-01 - authors' age_days; with that reference date the ages are theirs."""
        authors = json.loads((bb_data_dir / "authors_features.json").read_text())
        tools = {(int(c), i): t for c in bb_study.catalog.clusters for i, t in enumerate(bb_study.catalog.tools(c))}
        want = {tools[(r["cluster_id"], r["api"])]: r["age_days"] for r in authors}
        tab = bb_study.catalog.table
        got = dict(zip(tab["tool_id"], age_days(tab["created"], reference_date=bb_study.reference_date)))
        assert bb_study.reference_date == dt.date(2025, 9, 1)
        for tool, age in want.items():
            if age is None:
                assert math.isnan(got[tool]), tool
            else:
                assert got[tool] == age, tool
        assert sum(a is None for a in want.values()) == 7

    def test_centred_ages_do_not_depend_on_the_reference_date(self, bb_study):
        import pandas as pd

        tab = bb_study.catalog.table
        frames = []
        for ref in ("2025-09-01", "2031-01-17"):
            df = pd.DataFrame({"cluster_id": tab["cluster_id"], "a": age_days(tab["created"], reference_date=ref)})
            frames.append(df["a"] - df.groupby("cluster_id")["a"].transform("mean"))
        np.testing.assert_allclose(frames[0], frames[1], equal_nan=True)
