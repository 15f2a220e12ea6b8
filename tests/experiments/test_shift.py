"""selection_shift: formulas against direct computations from the rows, design-aware uncertainty, bad input."""

import json
import warnings

import numpy as np
import pandas as pd
import pytest
from statsmodels.stats.multitest import multipletests

import toolbias_stats as tbs
from toolbias_stats.experiments import calibrated_mean_shift, choice_probabilities, selection_shift, simulate_conditions
from toolbias_stats.experiments._shift import ERR_BASE, ERR_BETWEEN, ERR_BETWEEN_IN_BY

C, K = 3, 5
BASE = np.array([[0.5, 0.2, 0.15, 0.1, 0.05], [0.3, 0.3, 0.2, 0.1, 0.1], [0.2, 0.2, 0.2, 0.2, 0.2]])
LEVEL = np.array([[0.2, 0.5, 0.15, 0.1, 0.05], [0.3, 0.3, 0.2, 0.1, 0.1], [0.6, 0.1, 0.1, 0.1, 0.1]])


def _strict(obj):
    def bad(x):
        raise ValueError(f"non-finite JSON constant {x}")
    return json.loads(json.dumps(obj), parse_constant=bad)


@pytest.fixture(scope="module")
def log():
    return simulate_conditions({"base": (BASE, None), "pert": (LEVEL, None), "same": (BASE, None)}, n_queries=30,
                               n_runs=2, rng=3)


@pytest.fixture(scope="module")
def res(log):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return selection_shift(log, between="condition", base="base", by=["model"], n_resamples=400,
                               n_permutations=400, rng=11)


def _direct_rates(d, what):
    """Mean over runs of per-run rates, computed from the rows with pandas (independent of the package)."""
    d = d[d["status"] == "ok"]
    out = {}
    for c, dc in d.groupby("cluster_id"):
        runs = []
        for _, dr in dc.groupby("run"):
            col = dr["chosen_tool"] if what == "api" else dr["chosen_position"].astype(int)
            cats = tbs_catalog_tools(c) if what == "api" else list(range(1, K + 1))
            runs.append(col.value_counts(normalize=True).reindex(cats, fill_value=0).to_numpy())
        out[c] = np.mean(runs, axis=0)
    return out


_CAT = {}


def tbs_catalog_tools(c):
    return _CAT["cat"].tools(c)


class TestFig5Formula:
    def test_per_cluster_tv_mean_and_sd_equal_numpy(self, log, res):
        _CAT["cat"] = log.catalog
        d = log.data
        for what, metric in (("api", "shift_api"), ("pos", "shift_pos")):
            pb = _direct_rates(d[d["condition"] == "base"], what)
            pl = _direct_rates(d[d["condition"] == "pert"], what)
            tv = np.array([0.5 * np.abs(pl[c] - pb[c]).sum() for c in sorted(pb)])
            g = next(g for g in res.groups if g.keys["condition"] == "pert")
            s = getattr(g, metric)
            assert s.mean_over_clusters == pytest.approx(tv.mean(), abs=1e-12)
            assert s.sd_over_clusters == pytest.approx(np.std(tv, ddof=1), abs=1e-12)
            per = [c[metric] for c in g.clusters]
            np.testing.assert_allclose(per, tv, atol=1e-12)

    def test_pooled_uses_all_runs_together(self, log, res):
        d = log.data[(log.data["status"] == "ok")]
        g = next(g for g in res.groups if g.keys["condition"] == "pert")
        tvs = []
        for c in log.catalog.clusters:
            a = d[(d["condition"] == "base") & (d["cluster_id"] == c)]["chosen_tool"].value_counts(normalize=True)
            b = d[(d["condition"] == "pert") & (d["cluster_id"] == c)]["chosen_tool"].value_counts(normalize=True)
            idx = log.catalog.tools(c)
            tvs.append(0.5 * np.abs(a.reindex(idx, fill_value=0) - b.reindex(idx, fill_value=0)).sum())
        assert g.shift_api.pooled == pytest.approx(np.mean(tvs), abs=1e-12)

    def test_tool_shares_are_the_rates(self, log, res):
        _CAT["cat"] = log.catalog
        d = log.data
        pb = _direct_rates(d[d["condition"] == "base"], "api")
        t = res.tools_frame()
        t = t[t["condition"] == "pert"]
        for c, tc in t.groupby("cluster"):
            np.testing.assert_allclose(tc["share_base"], pb[c], atol=1e-12)
            np.testing.assert_allclose(tc["difference"], tc["share"] - tc["share_base"], atol=1e-15)


class TestChangeInBias:
    def test_delta_change_equals_selection_bias_difference(self, log, res):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ref = tbs.selection_bias(log, by=["condition"], n_resamples=0, n_null=0).to_frame()
        ref = ref.set_index(["condition", "metric"])["mean_over_runs"]
        g = next(g for g in res.groups if g.keys["condition"] == "pert")
        for m in ("delta_api", "delta_pos", "delta_model"):
            c = g.change[m]
            assert c.base_value == pytest.approx(ref["base", m], abs=1e-12)
            assert c.value == pytest.approx(ref["pert", m], abs=1e-12)
            assert c.estimate == pytest.approx(ref["pert", m] - ref["base", m], abs=1e-12)

    def test_normalised_change(self, res):
        g = next(g for g in res.groups if g.keys["condition"] == "pert")
        c = g.change["delta_api"]
        assert c.normalised_estimate == pytest.approx(c.estimate / (1 - 1 / K), abs=1e-12)


class TestUncertainty:
    def test_identical_levels_give_zero_shift(self, log):
        d = log.data.copy()
        twin = d[d["condition"] == "base"].copy()
        twin["condition"] = "copy"
        twin["source_row"] = twin["source_row"] + 10**7
        both = tbs.SelectionLog.from_frame(pd.concat([d[d["condition"] == "base"], twin]), log.catalog)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            g = selection_shift(both, by=[], n_resamples=200, n_permutations=200, rng=1).groups[0]
        assert g.shift_api.mean_over_clusters == 0 and g.shift_api.corrected_ci.low == 0
        assert g.shift_api.corrected == 0 and g.change["delta_api"].estimate == 0
        assert g.shift_api.p_value == 1.0 and g.pairing == "paired"

    def test_null_expected_is_positive_and_pvalues_separate(self, res):
        same = next(g for g in res.groups if g.keys["condition"] == "same")
        pert = next(g for g in res.groups if g.keys["condition"] == "pert")
        assert same.shift_api.null_expected > 0
        assert same.shift_api.p_value > 0.05
        assert pert.shift_api.p_value < 0.01
        # a shift of the same distribution is about the null's size; the real one far above it
        assert same.shift_api.mean_over_clusters < 2 * same.shift_api.null_expected
        assert pert.shift_api.corrected_ci.low > 0

    def test_holm_and_bh_across_levels_and_metrics(self, res):
        ps, adj = [], []
        for g in res.groups:
            for m in ("shift_api", "shift_pos"):
                ps.append(getattr(g, m).p_value)
                adj.append((getattr(g, m).p_adjusted, getattr(g, m).p_adjusted_bh))
            for m in ("delta_api", "delta_pos", "delta_model"):
                ps.append(g.change[m].p_value)
                adj.append((g.change[m].p_adjusted, g.change[m].p_adjusted_bh))
        np.testing.assert_allclose([a[0] for a in adj], multipletests(ps, method="holm")[1])
        np.testing.assert_allclose([a[1] for a in adj], multipletests(ps, method="fdr_bh")[1])

    def test_seeded_output_is_reproducible(self, log):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            a = selection_shift(log, n_resamples=100, n_permutations=100, rng=5).to_frame()
            b = selection_shift(log, n_resamples=100, n_permutations=100, rng=5).to_frame()
        pd.testing.assert_frame_equal(a, b)

    def test_paired_interval_is_narrower_with_shared_query_difficulty(self):
        tb = np.tile([0.4, 0.25, 0.15, 0.12, 0.08], (4, 1))
        lg = simulate_conditions({"base": (tb, None), "level": (0.5 * tb + 0.1, None)}, n_queries=60,
                                 query_effect=1.2, rng=2).counts()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            w = {p: selection_shift(lg, by=[], pairing=p, n_resamples=1000, n_permutations=0, rng=4)
                 .groups[0].change["delta_api"] for p in ("paired", "independent")}
        width = {p: c.ci.high - c.ci.low for p, c in w.items()}
        assert width["paired"] < 0.85 * width["independent"]
        assert w["paired"].estimate == w["independent"].estimate

    def test_independent_design_when_queries_differ(self):
        tb = np.tile([0.4, 0.25, 0.15, 0.12, 0.08], (2, 1))
        lg = simulate_conditions({"base": (tb, None), "level": (tb, None)}, n_queries=20, rng=2)
        d = lg.data.copy()
        d.loc[d["condition"] == "level", "query_id"] = "L" + d.loc[d["condition"] == "level", "query_id"]
        lg = tbs.SelectionLog.from_frame(d, lg.catalog)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            g = selection_shift(lg, by=[], n_resamples=100, n_permutations=200, rng=1).groups[0]
        assert g.pairing == "independent"
        assert g.shift_api.null_method == "re-allocate queries (runs pooled)"
        assert 0 < g.shift_api.p_value <= 1


class TestCalibratedMeanShift:
    def test_no_difference_gives_zero_lower_bound(self):
        gen = np.random.default_rng(0)
        e = [gen.normal(0, 0.02, size=(500, 5)) for _ in range(4)]
        e = [x - x.mean(1, keepdims=True) for x in e]
        x = [gen.normal(0, 0.02, size=5) for _ in range(4)]        # a difference that is pure noise
        x = [v - v.mean() for v in x]
        cal = calibrated_mean_shift(x, e)
        assert cal.ci_low == 0 and cal.estimate < cal.plugin and cal.ci_high > 0 and cal.p_value_uniform > 0.025

    def test_far_from_zero_matches_the_plugin(self):
        gen = np.random.default_rng(1)
        d = np.array([0.3, -0.3, 0.1, -0.1, 0.0])
        boots = [d + gen.normal(0, 0.01, size=(1000, 5)) for _ in range(3)]
        cal = calibrated_mean_shift([d] * 3, boots)
        assert cal.plugin == pytest.approx(0.4)
        assert cal.ci_low < 0.4 < cal.ci_high
        assert abs(cal.estimate - 0.4) < 0.01

    def test_needs_replicates(self):
        with pytest.raises(ValueError, match="at least 20 replicates"):
            calibrated_mean_shift([np.zeros(3)], [np.zeros((5, 3))])


class TestPartialClusters:
    def test_shift_over_common_clusters_with_count(self, log):
        d = log.data.copy()
        keep = (d["condition"] != "pert") | d["cluster_id"].isin(["1", "3"])
        lg = tbs.SelectionLog.from_frame(d[keep], log.catalog)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            g = next(g for g in selection_shift(lg, n_resamples=50, n_permutations=50, rng=1).groups
                     if g.keys["condition"] == "pert")
        assert g.n_clusters == 2 and [c["cluster"] for c in g.clusters] == ["1", "3"]
        assert g.shift_api.n_clusters == 2 and g.pairing == "paired"


class TestTrend:
    def test_slope_equals_polyfit_of_level_estimates(self):
        tb = np.tile([0.4, 0.25, 0.15, 0.12, 0.08], (3, 1))
        conds = {t: (tb ** (1 / (0.5 + t)), None) for t in (0.0, 0.5, 1.0)}
        lg = simulate_conditions(conds, n_queries=30, column="temperature", rng=7)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            r = selection_shift(lg, between="temperature", base="0.5", by=[], n_resamples=300,
                                n_permutations=0, rng=2)
            ref = tbs.selection_bias(lg, by=["temperature"], n_resamples=0, n_null=0).to_frame()
        assert r.numeric and r.base == 0.5 and len(r.trends) == 1
        for m in ("delta_api", "delta_pos", "delta_model"):
            y = ref[ref["metric"] == m].sort_values("temperature")["mean_over_runs"].to_numpy()
            slope, ci = r.trends[0].slopes[m]
            assert slope == pytest.approx(np.polyfit([0.0, 0.5, 1.0], y, 1)[0], abs=1e-12)
            assert ci.low <= slope <= ci.high
        assert r.trends[0].slopes["delta_api"][1].high < 0          # preferences flatten with temperature
        tf = r.trend_frame()
        assert set(tf["level"]) == {0.0, 0.5, 1.0} and (tf["ci_low"] <= tf["ci_high"]).all()
        out = _strict(r.to_dict())
        assert set(out["groups"][0]["trend"]) == {"delta_api", "delta_pos", "delta_model"}


class TestBadInput:
    def test_between_column_missing(self, log):
        msg = ERR_BETWEEN.format(col="prompt", cols=sorted(log.design_columns))
        with pytest.raises(ValueError, match=r"^`between` names column 'prompt'") as e:
            selection_shift(log, between="prompt")
        assert str(e.value) == msg

    def test_base_level_missing(self, log):
        with pytest.raises(ValueError) as e:
            selection_shift(log, base="nope")
        assert str(e.value) == ERR_BASE.format(base="nope", col="condition", levels=["base", "pert", "same"])

    def test_between_in_by(self, log):
        with pytest.raises(ValueError) as e:
            selection_shift(log, by=["condition"])
        assert str(e.value) == ERR_BETWEEN_IN_BY.format(col="condition", by=["condition"])

    def test_bad_options(self, log):
        with pytest.raises(ValueError, match="`pairing` must be one of"):
            selection_shift(log, pairing="both")
        with pytest.raises(ValueError, match="`n_permutations` must be a non-negative integer"):
            selection_shift(log, n_permutations=-1)


class TestOutputs:
    def test_json_is_strict_and_has_the_documented_shape(self, res):
        out = _strict(res.to_dict())
        g = out["groups"][0]
        assert set(g["keys"]) == {"model", "condition"} and g["base"] == "base"
        for m in ("shift_api", "shift_pos"):
            assert {"mean_over_clusters", "sd_over_clusters", "pooled", "ci", "corrected", "corrected_ci",
                    "null_expected", "p_value", "p_adjusted"} <= set(g[m])
        assert set(g["change"]) == {"delta_api", "delta_pos", "delta_model"}
        assert {"estimate", "ci", "p_value"} <= set(g["change"]["delta_api"])
        assert {"tool_id", "share_base", "share", "difference", "ci"} <= set(g["tools"][0])
        assert g["n_clusters"] == C and len(g["clusters"]) == C

    def test_frames(self, res):
        f = res.to_frame()
        assert set(f["metric"]) == {"shift_api", "shift_pos", "delta_api", "delta_pos", "delta_model"}
        assert len(res.clusters_frame()) == 2 * C
        assert "<table" in res._repr_html_()

    def test_true_shift_inside_calibrated_interval_on_large_sample(self):
        tb = np.tile([0.4, 0.25, 0.15, 0.12, 0.08], (4, 1))
        tl = 0.6 * tb + 0.08
        lg = simulate_conditions({"base": (tb, None), "level": (tl, None)}, n_queries=200, rng=9)
        a, _, _ = choice_probabilities(tb)
        b, _, _ = choice_probabilities(tl)
        truth = 0.5 * np.abs(a - b).sum(1).mean()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            s = selection_shift(lg, by=[], n_resamples=500, n_permutations=0, rng=3).groups[0].shift_api
        assert s.corrected_ci.low <= truth <= s.corrected_ci.high
