"""Issue 37: `toolsense agreement` with one rater stopped with krippendorff's own message (naming no file);
agreement is undefined there, so the coefficients are NaN (null in JSON) with a warning naming the group."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pandas as pd
import pytest

from toolbias_stats.cli._commands import main
from toolbias_stats.exceptions import DegenerateDataWarning
from toolbias_stats.toolsense import agreement


def _annotations(raters_by_domain: dict) -> pd.DataFrame:
    rows = []
    for domain, n_raters in raters_by_domain.items():
        for i in range(8):
            for r in range(n_raters):
                rows.append({"item_id": f"{domain}{i}", "rater": f"r{r}", "label": (i + (r and i % 3 == 0)) % 2,
                             "domain": domain})
    return pd.DataFrame(rows)


def test_one_rater_gives_nan_with_a_warning():
    with pytest.warns(DegenerateDataWarning, match="all: no item has more than one rater"):
        res = agreement(_annotations({"a": 1}), n_resamples=50, rng=1)
    frame = res.to_frame()
    assert frame["estimate"].isna().all() and (frame["n_raters"] == 1).all() and (frame["n_items"] == 8).all()
    assert len(res.warnings) == 1


def test_only_the_one_rater_group_is_undefined():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = agreement(_annotations({"a": 1, "b": 3}), by="domain", n_resamples=50, rng=1)
        both = agreement(_annotations({"b": 3}), n_resamples=50, rng=1)
    frame = res.to_frame().set_index(["group", "coefficient"])
    assert frame.xs("domain=a")["estimate"].isna().all()
    b = frame.xs("domain=b")["estimate"].to_numpy()
    assert np.isfinite(b).all() and np.allclose(b, both.to_frame()["estimate"].to_numpy())
    assert ("domain=a: no item has more than one rater (8 item(s), one rating each); agreement coefficients are "
            "undefined (NaN)") in res.warnings
    assert not [w for w in res.warnings if w.startswith("domain=b")]


def test_cli_one_rater(tmp_path, capsys):
    path = tmp_path / "ann.csv"
    _annotations({"a": 1}).drop(columns="domain").to_csv(path, index=False)
    assert main(["toolsense", "agreement", str(path), "--json", "--bootstrap", "50"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["groups"][0]["fleiss_kappa"]["estimate"] is None and out["groups"][0]["n_raters"] == 1
    assert main(["toolsense", "agreement", str(path), "--bootstrap", "50"]) == 0
    captured = capsys.readouterr()
    assert "warning: all: no item has more than one rater" in captured.out + captured.err
    assert "Traceback" not in captured.err
