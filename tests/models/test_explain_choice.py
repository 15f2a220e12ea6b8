"""The attempt-level explanation (conditional logit with features) next to OLS over per-tool rates."""

import warnings

import numpy as np
import pandas as pd
import pytest

from toolbias_stats.choicemodel import choice_model, simulate_logit_log
from toolbias_stats.features import ToolFeatures
from toolbias_stats.metrics import selection_bias
from toolbias_stats.models import choice_explanation, explain_selection

F = np.array([[-1.5, 0.3], [-1.0, -1.2], [-0.5, 0.8], [0.0, -0.4], [0.3, 1.1], [0.6, -0.9], [1.0, 0.2], [1.4, 0.5]])
BETA = np.array([0.6, 0.0])


@pytest.fixture(scope="module")
def sim():
    log = simulate_logit_log(n_tools=8, set_size=4, n_queries=300, n_lists=2, worths=np.zeros(8), features=F,
                              beta=BETA, rng=11)
    table = pd.DataFrame({"tool_id": [f"t{i + 1}" for i in range(8)], "cluster_id": "all",
                          "api_index": range(1, 9), "f1": F[:, 0], "f2": F[:, 1]})
    feats = ToolFeatures(table=table, feature_names=("f1", "f2"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rates = selection_bias(log, by="model", n_resamples=0, n_null=0)
    return log, feats, rates


def _explain(feats, rates, log=None):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return explain_selection(feats, rates, ensembles=False, n_resamples=50, rng=3, log=log)


def test_recovers_the_feature_effect_per_sd(sim):
    log, feats, rates = sim
    res = _explain(feats, rates, log).choice
    comp = res.comparison.set_index("feature")
    sd = F.std(axis=0, ddof=1)
    # truth per 1 sd of the feature: beta * sd
    for j, f in enumerate(("f1", "f2")):
        r = comp.loc[f]
        assert r["sd"] == pytest.approx(sd[j])
        se = (r["clogit_ci_high"] - r["clogit_ci_low"]) / (2 * 1.959964)
        assert abs(r["clogit_estimate"] - BETA[j] * sd[j]) < 3.5 * se
    assert comp.loc["f1", "clogit_ci_low"] > 0          # a clear effect is found
    assert res.n_in == res.n_used + res.n_excluded == log.n_attempts


def test_equals_the_choice_model_on_raw_features_rescaled(sim):
    log, feats, rates = sim
    res = _explain(feats, rates, log).choice
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        raw = choice_model(log, by="model", features=feats.table[["tool_id", "f1", "f2"]])
    est = raw.feature_effects.set_index("feature")["estimate"]
    comp = res.comparison.set_index("feature")
    for f in ("f1", "f2"):   # Firth penalty is invariant to linear rescaling of a covariate
        assert comp.loc[f, "clogit_estimate"] == pytest.approx(est[f] * comp.loc[f, "sd"], rel=1e-5, abs=1e-8)


def test_other_outputs_unchanged_and_json_key_added(sim):
    log, feats, rates = sim
    a, b = _explain(feats, rates), _explain(feats, rates, log)
    da, db = a.to_dict(), b.to_dict()
    assert a.choice is None and "choice_model" not in da
    cm = db.pop("choice_model")
    assert da == db
    assert cm["n_in"] == cm["n_used"] + cm["n_excluded"]
    assert set(cm["models"]["sim"]) == {"f1", "f2"}


def test_lists_with_a_tool_without_features_are_excluded_and_counted(sim):
    log, feats, rates = sim
    table = feats.table.copy()
    table.loc[table["tool_id"] == "t3", "f2"] = np.nan
    res = choice_explanation(ToolFeatures(table=table, feature_names=("f1", "f2")), log,
                             ols=_explain(feats, rates).ols)
    shows_t3 = int(log.data["ordering"].str.split("|").map(lambda o: "t3" in o).sum())
    assert res.excluded["tool_without_features"] == shows_t3 > 0
    assert res.n_in == res.n_used + res.n_excluded
    assert "missing feature value" in res.warnings[0]
