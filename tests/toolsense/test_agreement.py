"""Agreement: Fleiss' kappa on the textbook example and statsmodels, Krippendorff's alpha on Krippendorff's
worked example and the krippendorff package, Gwet's AC1 by hand, the kappa paradox."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from toolbias_stats.exceptions import ExcludedRowsWarning
from toolbias_stats.toolsense import agreement, agreement_coefficients

# Fleiss (1971)-style example as printed in many textbooks (10 subjects, 14 raters, 5 categories):
# P-bar = 0.378, P-e = 0.213, kappa = 0.210.
FLEISS_TABLE = np.array([[0, 0, 0, 0, 14], [0, 2, 6, 4, 2], [0, 0, 3, 5, 6], [0, 3, 9, 2, 0], [2, 2, 8, 1, 1],
                         [7, 7, 0, 0, 0], [3, 2, 6, 3, 0], [2, 5, 3, 2, 2], [6, 5, 2, 1, 0], [0, 2, 2, 3, 7]])

# Krippendorff (2011), "Computing Krippendorff's alpha-reliability", nominal example with missing values
# (4 observers x 12 units): alpha_nominal = 0.743.
KRIPP = [[1, 2, 3, 3, 2, 1, 4, 1, 2, None, None, None],
         [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, None, 3],
         [None, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, None],
         [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, None]]


def long_from_rows(rows):
    recs = []
    for r, row in enumerate(rows):
        for u, v in enumerate(row):
            if v is not None:
                recs.append({"item_id": f"u{u:02d}", "rater": f"r{r}", "label": str(v)})
    return pd.DataFrame(recs)


def long_from_counts(table):
    recs = []
    for i, row in enumerate(table):
        r = 0
        for j, c in enumerate(row):
            for _ in range(int(c)):
                recs.append({"item_id": f"i{i:03d}", "rater": f"r{r}", "label": f"c{j}"})
                r += 1
    return pd.DataFrame(recs)


class TestAgreementCoefficients:
    def test_fleiss_textbook_and_statsmodels(self):
        from statsmodels.stats.inter_rater import fleiss_kappa

        out = agreement_coefficients(FLEISS_TABLE)
        assert out["fleiss_kappa"] == pytest.approx(0.210, abs=5e-4)
        assert out["percent_agreement"] == pytest.approx(0.378, abs=5e-4)
        assert out["fleiss_kappa"] == pytest.approx(fleiss_kappa(FLEISS_TABLE, method="fleiss"))

    def test_krippendorff_worked_example_and_package(self):
        import krippendorff

        ann = long_from_rows(KRIPP)
        res = agreement(ann, n_resamples=0)
        alpha = res.table.set_index("coefficient").loc["krippendorff_alpha"]
        assert alpha.estimate == pytest.approx(0.743, abs=5e-4)
        data = np.array([[np.nan if v is None else v for v in row] for row in KRIPP], dtype=float)
        ref = krippendorff.alpha(reliability_data=data, level_of_measurement="nominal")
        assert alpha.estimate == pytest.approx(ref)
        assert alpha.reference == pytest.approx(alpha.estimate)

    def test_ac1_by_hand(self):
        # 3 raters, 4 items: Pa = (1 + 1 + 1/3 + 1)/4 = 5/6; pi = (2/3, 1/3); Pe' = 2 * 2/9 = 4/9
        out = agreement_coefficients([[3, 0], [0, 3], [2, 1], [3, 0]])
        assert out["gwet_ac1"] == pytest.approx((5 / 6 - 4 / 9) / (1 - 4 / 9))
        assert out["fleiss_kappa"] == pytest.approx((5 / 6 - 5 / 9) / (1 - 5 / 9))

    def test_kappa_paradox(self):
        # 100 items, 3 raters: 97 unanimous "no", 3 with one "yes" -> 98% agreement, kappa ~ 0, AC1 ~ 0.98
        table = np.array([[3, 0]] * 97 + [[2, 1]] * 3)
        out = agreement_coefficients(table)
        pa = (97 + 3 / 3) / 100
        pi1 = 3 / 300
        pe = (1 - pi1) ** 2 + pi1**2
        assert out["percent_agreement"] == pytest.approx(pa)
        assert out["fleiss_kappa"] == pytest.approx((pa - pe) / (1 - pe))
        assert out["fleiss_kappa"] < 0.05
        assert out["gwet_ac1"] == pytest.approx((pa - 2 * pi1 * (1 - pi1)) / (1 - 2 * pi1 * (1 - pi1)))
        assert out["gwet_ac1"] > 0.97


class TestAgreement:
    def test_groups_bootstrap_and_incomplete_items(self):
        ann = long_from_counts(FLEISS_TABLE)
        ann["benchmark"] = np.where(ann["item_id"] < "i005", "mcq", "qa")
        # drop one rating: that item is left out of kappa and AC1 (with a warning), kept in alpha
        ann = ann.iloc[1:]
        with pytest.warns(ExcludedRowsWarning):
            res = agreement(ann, by="benchmark", n_resamples=300, rng=1)
        t = res.to_frame()
        assert t["group"].unique().tolist() == ["all", "benchmark=mcq", "benchmark=qa"]
        allk = t[(t.group == "all") & (t.coefficient == "fleiss_kappa")].iloc[0]
        assert allk.n_items_incomplete == 1
        assert allk.ci_low <= allk.estimate <= allk.ci_high
        import json

        json.loads(json.dumps(res.to_dict(), allow_nan=False))

    def test_bca_option_and_seed(self):
        ann = long_from_counts(FLEISS_TABLE)
        a = agreement(ann, n_resamples=200, rng=5, ci_method="bca").to_frame()
        b = agreement(ann, n_resamples=200, rng=5, ci_method="bca").to_frame()
        pd.testing.assert_frame_equal(a, b)

    def test_bad_by(self):
        with pytest.raises(ValueError, match="`by` names column 'tier'"):
            agreement(long_from_counts(FLEISS_TABLE), by="tier")
