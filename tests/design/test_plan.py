"""plan_study: analytic widths against direct simulation, the cheapest design, MDE, reproducibility, errors."""

import json
import warnings

import numpy as np
import pandas as pd
import pytest

import toolbias_stats as tbs
from toolbias_stats.design import check_plan, plan_study, simulate_from_pilot, variance_components
from toolbias_stats.exceptions import SelectionLogError
from toolbias_stats.simulate import simulate_selection_log

Z95 = 1.959963984540054
P = np.array([[0.45, 0.25, 0.15, 0.15], [0.25, 0.25, 0.3, 0.2], [0.7, 0.1, 0.1, 0.1]])


def _quiet(fn, *a, **k):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(*a, **k)


def _direct(p, n, reps, gen):
    """Mean over clusters of the plug-in TV of multinomial(n, p_c) rates, reps times (an independent simulation)."""
    k = p.shape[1]
    draws = np.stack([gen.multinomial(n, pc, size=reps) for pc in p], 1) / n          # (reps, C, K)
    return (0.5 * np.abs(draws - 1 / k).sum(-1)).mean(1)


@pytest.fixture(scope="module")
def pilot():
    log = tbs.experiments.simulate_conditions({"base": (np.array([[6, 3, 1, 1, 1]] * 3), [3, 1, 1, 1, 1])},
                                              n_queries=40, n_runs=2, query_effect=0.5, rng=2)
    return log


class TestAnalyticAgainstSimulation:
    def test_assumed_distributions_match_multinomial_simulation(self):
        # no heterogeneity: every attempt a draw from p; the plan's Gaussian-fold draws against exact multinomials
        gen = np.random.default_rng(0)
        for q, r in ((40, 4), (10, 4)):
            plan = plan_study(P, metrics=["delta_api"], queries=[q], runs=[1], n_draws=4000, rng=1)
            row = plan.grid.iloc[0]
            assert row["rotations"] == 4 and row["calls"] == 3 * q * r
            est = _direct(P, q * r, 20000, gen)
            assert row["half_width"] == pytest.approx(Z95 * est.std(), rel=0.05)
            # the plug-in bias is part of the expected estimate (the cluster at [0.25, 0.25, 0.3, 0.2] folds)
            assert row["expected_estimate"] == pytest.approx(est.mean(), rel=0.02)

    def test_check_plan_small(self, pilot):
        res = _quiet(check_plan, pilot, [(40, 2, 5), (80, 1, 5)], metrics=["delta_api"], n_sims=25,
                     n_resamples=200, plan_from="pilot", run_effect=False, n_draws=2000, rng=3)
        assert len(res) == 2
        assert res["ratio_percentile"].between(0.8, 1.25).all(), res
        assert res["ratio_sd"].between(0.7, 1.4).all(), res

    def test_simulate_from_pilot(self, pilot):
        counts = simulate_from_pilot(pilot, queries=7, runs=3, rotations=2, n_sims=2, rng=0)
        assert len(counts) == 2 and counts[0].n_rows == 3 * 7 * 3 * 2
        logs = simulate_from_pilot(pilot, queries=5, runs=1, as_log=True, rng=0)
        assert len(logs[0].data) == 3 * 5 * 5
        a = simulate_from_pilot(pilot, queries=5, runs=2, rng=4)[0].table
        b = simulate_from_pilot(pilot, queries=5, runs=2, rng=4)[0].table
        pd.testing.assert_frame_equal(a, b)
        with pytest.raises(ValueError, match="rotations"):
            simulate_from_pilot(pilot, queries=5, runs=1, rotations=9)


class TestPlan:
    def test_achieved_grid_and_cheapest(self, pilot):
        plan = _quiet(plan_study, pilot, target=0.03, metrics=["delta_api", "delta_pos"], by=[],
                      queries=[20, 40, 80], runs=[1, 2], rotations=[1, 5], cost_per_call=0.01, rng=0)
        a = plan.achieved.set_index("metric")
        assert (a["queries"] == 40).all() and (a["runs"] == 2).all() and (a["rotations"] == 5).all()
        assert len(plan.grid) == 2 * 3 * 2 * 2
        g = plan.grid[(plan.grid["metric"] == "delta_api") & (plan.grid["rotations"] == 5)
                      & (plan.grid["runs"] == 1)].sort_values("queries")
        assert np.all(np.diff(g["half_width"]) < 0)              # more queries, narrower
        assert np.allclose(g["cost"], g["calls"] * 0.01)
        c = plan.cheapest.iloc[0]
        assert c["feasible"] and c["delta_api_half_width"] <= 0.03 and c["delta_pos_half_width"] <= 0.03
        # one query fewer with the same runs and rotations misses the target (the search is exact in queries)
        fewer = _quiet(plan_study, plan.components, metrics=["delta_api", "delta_pos"], queries=[int(c["queries"]) - 1],
                       runs=[int(c["runs"])], rotations=[int(c["rotations"])], rng=0)
        assert fewer.grid["half_width"].max() > 0.03 * 0.98
        assert c["calls"] == 3 * c["queries"] * c["runs"] * c["rotations"]

    def test_mde_and_shift(self, pilot):
        comps = _quiet(variance_components, pilot, by=[], metrics=["delta_api"], n_resamples=0)
        p1 = plan_study(comps, metrics=["delta_api"], queries=[20, 200], runs=[1], mde_grid=True, rng=0)
        m = p1.grid.set_index("queries")
        assert m.loc[200, "mde"] < m.loc[20, "mde"]
        assert m.loc[200, "mds"] == pytest.approx(m.loc[200, "shift_half_width"] * (1.959964 + 0.841621) / 1.959964)
        paired = plan_study(comps, metrics=["delta_api"], queries=[20], runs=[1], correlation=0.5, rng=0)
        assert paired.grid["mds"].iloc[0] == pytest.approx(m.loc[20, "mds"] * np.sqrt(0.5), rel=1e-9)
        # the MDE target: the cheapest design detects the target delta with at least the requested power
        p2 = plan_study(comps, target=0.08, target_kind="mde", metrics=["delta_api"], runs=[1], rng=0)
        c = p2.cheapest.iloc[0]
        assert c["feasible"] and c["delta_api_mde"] <= 0.08 * 1.05

    def test_same_seed_same_plan_and_json(self, pilot):
        a = _quiet(plan_study, pilot, target=0.04, by=[], queries=[30], runs=[1, 2], rng=5)
        b = _quiet(plan_study, pilot, target=0.04, by=[], queries=[30], runs=[1, 2], rng=5)
        pd.testing.assert_frame_equal(a.grid, b.grid)
        pd.testing.assert_frame_equal(a.cheapest, b.cheapest)
        d = json.loads(json.dumps(a.to_dict(), allow_nan=False))
        assert d["target"] == {"kind": "width", "value": 0.04, "metrics": ["delta_api", "delta_pos"]}
        g = d["groups"][0]
        assert set(g) == {"keys", "pilot", "achieved", "cheapest"}
        assert set(g["achieved"]) == {"delta_api", "delta_pos"}
        assert g["cheapest"]["feasible"] and g["cheapest"]["calls"] > 0
        assert "<table" in a._repr_html_()

    def test_run_effect_is_only_averaged_by_runs(self):
        # a pilot whose runs differ systematically: no number of queries reaches a tight width with one run
        sim = [simulate_selection_log(n_clusters=3, n_queries=40, n_runs=1, tool_probs=tp, permute_tools=False,
                                      rng=i) for i, tp in enumerate(([5, 1, 1, 1, 1], [1, 1, 1, 1, 5]))]
        frames = []
        for run, s in enumerate(sim, start=1):
            f = s.log.data.copy()
            f["run"] = run
            frames.append(f)
        log = tbs.SelectionLog.from_frame(pd.concat(frames, ignore_index=True), sim[0].log.catalog)
        plan = _quiet(plan_study, log, target=0.01, metrics=["delta_api"], runs=[1], max_queries=5000, rng=0)
        assert not plan.cheapest["feasible"].iloc[0]
        assert "run" in plan.cheapest["reason"].iloc[0]
        comps = plan.components.table
        assert comps.set_index("component").loc["run", "share"] > 0.3


class TestErrors:
    def test_targets(self, pilot):
        for bad in (0, -0.01, float("nan"), True, "0.02"):
            with pytest.raises(ValueError, match="target"):
                plan_study(P, target=bad)
        with pytest.raises(ValueError, match="target_kind"):
            plan_study(P, target=0.02, target_kind="width2")
        with pytest.raises(ValueError, match="power"):
            plan_study(P, power=1.2)
        with pytest.raises(ValueError, match="correlation"):
            plan_study(P, correlation=1.0)
        with pytest.raises(ValueError, match="queries"):
            plan_study(P, queries=[0, 10])
        with pytest.raises(ValueError, match="pilot"):
            plan_study(None)

    def test_bad_pilots(self):
        with pytest.raises(ValueError, match="shape"):
            plan_study(np.array([0.5, 0.5]))
        with pytest.raises(ValueError, match="delta_model"):
            plan_study(P, metrics=["delta_model"])
        one = simulate_selection_log(n_clusters=2, n_queries=1, n_runs=2, rng=0)
        with pytest.raises(SelectionLogError, match="at least 2 queries"):
            _quiet(plan_study, one.log, target=0.02)
        with pytest.raises(ValueError, match="does not have"):
            _quiet(plan_study, simulate_selection_log(n_clusters=2, n_queries=5, rng=0).log, by=["nope"])

    def test_rotations_need_the_log(self):
        sim = simulate_selection_log(n_clusters=2, n_queries=20, n_runs=2, rng=0)
        with pytest.raises(ValueError, match="rotations"):
            _quiet(plan_study, sim.log.counts(), rotations=[1], metrics=["delta_api"])
        plan = _quiet(plan_study, sim.log, rotations=[1, 5], queries=[20], runs=[1], metrics=["delta_api"], rng=0)
        assert set(plan.grid["rotations"]) == {1, 5}


def test_plots(pilot):
    from toolbias_stats.plots import plot_plan_widths, plot_variance_shares

    plan = _quiet(plan_study, pilot, target=0.03, by=[], queries=[20, 40], runs=[1, 2], rng=0)
    fig = plot_plan_widths(plan, metric="delta_api")
    ax = fig.axes[0]
    assert ax.get_xscale() == "log" and len(ax.lines) >= 2
    fig = plot_variance_shares(plan.components, metric="delta_pos")
    assert len(fig.axes[0].patches) == 5            # one bar segment per component


def test_pairing_correlation_matches_the_paired_shift_bootstrap():
    from toolbias_stats.design import pairing_correlation

    tp = np.array([[5, 2, 1, 1, 1]] * 4)
    log = tbs.experiments.simulate_conditions({"base": (tp, None), "b": (tp * np.array([1, 1, 2, 1, 1]), None)},
                                              n_queries=100, n_runs=1, query_effect=1.0, rng=3)
    rho = pairing_correlation(log, by=[]).correlation.iloc[0]
    assert 0.2 < rho < 0.6                      # shared query effects make the two estimates co-vary
    shift = _quiet(tbs.selection_shift, log, between="condition", base="base", by=[], n_resamples=1000,
                   n_permutations=0, rng=1)
    res = _quiet(tbs.selection_bias, log, by=["condition"], n_resamples=1000, n_null=0, rng=1)
    se = [g.delta_api.standard_error for g in res.groups]
    predicted = np.sqrt(se[0] ** 2 + se[1] ** 2 - 2 * rho * se[0] * se[1])
    assert shift.groups[0].pairing == "paired"
    assert predicted == pytest.approx(shift.groups[0].change["delta_api"].standard_error, rel=0.12)
    independent = tbs.experiments.simulate_conditions({"base": (tp, None), "b": (tp, None)}, n_queries=100,
                                                      query_effect=0.0, rng=4)
    assert abs(pairing_correlation(independent, by=[]).correlation.iloc[0]) < 0.25
    with pytest.raises(ValueError, match="levels"):
        pairing_correlation(log, by=[], levels=("base", "nope"))
