"""Variance components: the ANOVA algebra on data with known components, degenerate choosers, layouts, errors."""

import warnings
from typing import ClassVar

import numpy as np
import pandas as pd
import pytest

import toolbias_stats as tbs
from toolbias_stats.design import variance_components
from toolbias_stats.design._components import _components_from_ms, _divisors, _mean_squares
from toolbias_stats.exceptions import SelectionLogError
from toolbias_stats.simulate import simulate_selection_log


def _quiet(fn, *a, **k):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(*a, **k)


def _row(vc, metric, component):
    t = vc.table
    return t[(t["metric"] == metric) & (t["component"] == component)].iloc[0]


class TestMomentsRecoverKnownComponents:
    """y = a_q + b_s + h_qs + w_qr + e on a crossed Q x S x R design, Gaussian, known variances."""

    truth: ClassVar[dict[str, float]] = {"query": 0.04, "run": 0.01, "query_x_run": 0.02, "rotation": 0.09,
                                         "attempt": 0.25}

    def _draw(self, gen, b, q, s, r):
        t = self.truth
        w = gen.normal(0, np.sqrt(t["rotation"]), (b, q, 1, r))
        w -= w.mean(-1, keepdims=True)      # r orderings summing to 0 per query; variance (divisor r - 1) = t
        y = (gen.normal(0, np.sqrt(t["query"]), (b, q, 1, 1)) + gen.normal(0, np.sqrt(t["run"]), (b, 1, s, 1))
             + gen.normal(0, np.sqrt(t["query_x_run"]), (b, q, s, 1)) + w
             + gen.normal(0, np.sqrt(t["attempt"]), (b, q, s, r)))
        return y[..., None]

    def test_log_layout_unbiased(self):
        gen = np.random.default_rng(0)
        b, q, s, r = 400, 60, 4, 5
        y = self._draw(gen, b, q, s, r)
        comp, ident = _components_from_ms(_mean_squares(y, None, 1, "log"), q, s, r, 1, "log")
        assert all(ident.values())
        for name, true in self.truth.items():
            est = comp[name][..., 0, 0]
            se = est.std() / np.sqrt(b)
            assert abs(est.mean() - true) < 4 * se + 1e-3 * true, name

    def test_total_equals_variance_of_the_design_mean(self):
        # the components, divided as the design divides them, give Var(grand mean) (rotations: all shown -> 0)
        gen = np.random.default_rng(1)
        b, q, s, r = 2000, 30, 3, 5
        y = self._draw(gen, b, q, s, r)
        div = _divisors(q, s, r, 1, r)
        assert div["rotation"] == 0
        theory = sum(self.truth[c] * div[c] for c in self.truth)
        assert y.mean((1, 2, 3, 4)).var(ddof=1) == pytest.approx(theory, rel=0.1)
        comp, _ = _components_from_ms(_mean_squares(y, None, 1, "log"), q, s, r, 1, "log")
        est = sum(comp[c][..., 0, 0] * div[c] for c in self.truth)
        assert est.mean() == pytest.approx(theory, rel=0.05)

    def test_one_rotation_per_query_adds_the_rotation_component(self):
        div = _divisors(100, 2, 1, 1, 5)
        assert div["rotation"] == pytest.approx((1 - 1 / 5) / 100)


def _deterministic_log(n_queries=40, n_runs=3, k=4, n_clusters=2, seed=0):
    """Each query always picks its own tool (whatever the rotation and run); tools drawn unevenly over queries."""
    gen = np.random.default_rng(seed)
    catalog = tbs.ToolCatalog.from_records(
        [{"cluster_id": str(c + 1), "tool_name": f"tool {c + 1}.{j + 1}", "api_name": "endpoint"}
         for c in range(n_clusters) for j in range(k)], source="<test>")
    rows = []
    for c in catalog.clusters:
        tools = catalog.tools(c)
        pick = gen.choice(k, size=n_queries, p=[0.55, 0.25, 0.15, 0.05])
        for q in range(n_queries):
            for s in range(1, n_runs + 1):
                for r in range(1, k + 1):
                    rows.append({"model": "det", "run": s, "cluster_id": c, "query_id": f"q{q}", "rotation": r,
                                 "status": "ok", "chosen_tool": tools[pick[q]]})
    return tbs.SelectionLog.from_frame(pd.DataFrame(rows), catalog)


class TestDegenerateChoosers:
    def test_deterministic_per_query_chooser_is_all_query(self):
        vc = _quiet(variance_components, _deterministic_log(), metrics=["delta_api"], n_resamples=0)
        assert vc.layout == "log"
        assert _row(vc, "delta_api", "query")["share"] == pytest.approx(1.0)
        for c in ("rotation", "run", "query_x_run", "attempt"):
            assert _row(vc, "delta_api", c)["variance"] == pytest.approx(0.0, abs=1e-12), c

    def test_no_query_heterogeneity_gives_a_small_query_component(self):
        sim = simulate_selection_log(n_clusters=4, n_queries=150, n_runs=2, tool_probs=[6, 2, 1, 1, 1], rng=3)
        vc = _quiet(variance_components, sim.log, metrics=["delta_api"], n_resamples=100, rng=0)
        q = _row(vc, "delta_api", "query")
        att = _row(vc, "delta_api", "attempt")
        assert q["share"] < 0.15 and att["share"] > 0.7
        assert q["ci_low"] == 0.0 or q["ci_low"] < 0.2 * att["contribution"]
        # no position effect: rotations within a query change nothing for the tool distribution
        assert _row(vc, "delta_api", "rotation")["variance"] < 0.1 * att["variance"]

    def test_position_effect_shows_as_a_rotation_component(self):
        sim = simulate_selection_log(n_clusters=4, n_queries=150, n_runs=2, tool_probs=[2, 1, 1, 1, 1],
                                     position_probs=[8, 1, 1, 1, 1], rng=4)
        vc = _quiet(variance_components, sim.log, metrics=["delta_api"], n_resamples=0)
        rot = _row(vc, "delta_api", "rotation")
        att = _row(vc, "delta_api", "attempt")
        assert rot["variance"] > 0.5 * att["variance"]
        assert rot["contribution"] == 0.0          # every query was shown in all 5 rotations
        assert vc.overview["se_one_rotation"].iloc[0] > vc.overview["se"].iloc[0]


class TestAgainstTheBootstrap:
    def test_se_matches_query_bootstrap(self):
        # rates far from 1/K: the linearisation holds and its se is the query bootstrap's
        log = tbs.experiments.simulate_conditions({"base": (np.array([[5, 2, 1, 1, 1]] * 4), [6, 2, 1, 1, 1])},
                                                  n_queries=120, n_runs=2, query_effect=0.6, rng=5)
        vc = _quiet(variance_components, log, by=[], metrics=["delta_api", "delta_pos"], n_resamples=0)
        res = _quiet(tbs.selection_bias, log, by=[], n_resamples=1500, n_null=0, rng=1)
        for m in ("delta_api", "delta_pos"):
            se_boot = getattr(res.groups[0], m).standard_error
            se_lin = vc.overview.set_index("metric").loc[m, "se_without_run_effect"]
            assert se_lin == pytest.approx(se_boot, rel=0.15), m

    def test_planner_keeps_the_fold_at_uniform(self):
        # positions near uniform: the linearised se overstates, the planner's Gaussian-fold draws do not
        log = tbs.experiments.simulate_conditions({"base": (np.array([[5, 2, 1, 1, 1]] * 4), None)}, n_queries=120,
                                                  n_runs=2, query_effect=0.6, rng=5)
        vc = _quiet(variance_components, log, by=[], metrics=["delta_pos"], n_resamples=0)
        res = _quiet(tbs.selection_bias, log, by=[], n_resamples=1500, n_null=0, rng=1)
        se_boot = res.groups[0].delta_pos.standard_error
        plan = _quiet(tbs.plan_study, vc, metrics=["delta_pos"], queries=[120], runs=[2], run_effect=False, rng=0)
        se_plan = plan.achieved["half_width"].iloc[0] / 1.959964
        assert vc.overview["se"].iloc[0] > 1.2 * se_boot
        assert se_plan == pytest.approx(se_boot, rel=0.15)

    def test_counts_and_log_give_the_same_total(self):
        sim = simulate_selection_log(n_clusters=3, n_queries=60, n_runs=3, tool_probs=[4, 2, 1, 1, 1],
                                     position_probs=[2, 1, 1, 1, 1], rng=6)
        a = _quiet(variance_components, sim.log, metrics=["delta_api"], n_resamples=0)
        b = _quiet(variance_components, sim.log.counts(), metrics=["delta_api"], n_resamples=0)
        assert a.layout == "log" and b.layout == "counts"

        def raw_total(vc):
            fcs = vc.fits[0]["clusters"]
            return sum(sum(fc["scalar"][c] * _divisors(fc["Q"], fc["S"], fc["R"], fc["n"], fc["k_rot"])[c]
                           for c in fc["scalar"]) for fc in fcs)
        assert raw_total(a) == pytest.approx(raw_total(b), rel=1e-9)
        assert not _row(b, "delta_api", "rotation")["identified"]


class TestReproducibilityAndOutput:
    def test_same_seed_same_table(self):
        sim = simulate_selection_log(n_clusters=2, n_queries=30, n_runs=2, tool_probs=[3, 1, 1, 1, 1], rng=7)
        a = _quiet(variance_components, sim.log, n_resamples=50, rng=11)
        b = _quiet(variance_components, sim.log, n_resamples=50, rng=11)
        pd.testing.assert_frame_equal(a.table, b.table)
        assert set(a.table["metric"]) == {"delta_api", "delta_pos", "delta_model"}
        d = a.to_dict()
        import json

        json.dumps(d, allow_nan=False)
        assert {"components", "summary", "layout"} <= set(d)
        assert "<table" in a._repr_html_()

    def test_one_run_warns_and_flags(self):
        sim = simulate_selection_log(n_clusters=2, n_queries=30, n_runs=1, rng=8)
        with pytest.warns(tbs.SmallSampleWarning, match="one run"):
            vc = variance_components(sim.log, metrics=["delta_api"], n_resamples=0)
        assert not _row(vc, "delta_api", "run")["identified"]


class TestErrors:
    def test_one_query_per_cluster(self):
        sim = simulate_selection_log(n_clusters=2, n_queries=1, n_runs=2, rng=0)
        with pytest.raises(SelectionLogError, match=r"query_id.*1 query"):
            _quiet(variance_components, sim.log)

    def test_unknown_columns_and_bad_arguments(self):
        sim = simulate_selection_log(n_clusters=2, n_queries=10, n_runs=2, rng=0)
        with pytest.raises(ValueError, match="does not have"):
            variance_components(sim.log, by=["nonexistent"])
        with pytest.raises(ValueError, match="'run'"):
            variance_components(sim.log, by=["model", "run"])
        with pytest.raises(ValueError, match="metrics"):
            variance_components(sim.log, metrics=["delta_foo"])
        with pytest.raises(ValueError, match="n_resamples"):
            variance_components(sim.log, n_resamples=-1)
        with pytest.raises(TypeError, match="pilot"):
            variance_components(42)
