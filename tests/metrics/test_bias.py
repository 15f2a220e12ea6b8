"""selection_bias: theory (uniform and degenerate choosers), a brute-force bootstrap, the paper's Table 1."""

import re
import warnings

import numpy as np
import pandas as pd
import pytest
from reference.table1 import TABLE1

import toolbias_stats as tbs
from toolbias_stats.simulate import simulate_selection_log


def _bias(log, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return tbs.selection_bias(log, **kw)


class TestTheory:
    def test_degenerate_tool_chooser(self):
        sim = simulate_selection_log(n_clusters=3, n_queries=20, tool_probs=[1, 0, 0, 0, 0], rng=0)
        g = _bias(sim.log, n_resamples=200, n_null=200, rng=1).groups[0]
        assert g.delta_api.mean_over_runs == pytest.approx(0.8)
        # cyclic rotations spread one tool evenly over the positions
        assert g.delta_pos.mean_over_runs == pytest.approx(0.0)
        assert g.delta_model.mean_over_runs == pytest.approx(0.4)
        assert g.delta_api.normalised == pytest.approx(1.0)
        assert g.delta_api.normalised_ci.low == pytest.approx(1.0)
        assert g.delta_api.normalised_ci.high == pytest.approx(1.0)
        assert g.delta_api.p_value == pytest.approx(1 / 201)
        assert g.delta_api.ci.low == pytest.approx(0.8) and g.delta_api.ci.high == pytest.approx(0.8)

    def test_degenerate_position_chooser(self):
        sim = simulate_selection_log(n_clusters=2, n_queries=20, position_probs=[1, 0, 0, 0, 0], rng=0)
        g = _bias(sim.log, n_resamples=0, n_null=0).groups[0]
        assert g.delta_pos.mean_over_runs == pytest.approx(0.8)
        assert g.delta_api.mean_over_runs == pytest.approx(0.0)

    def test_uniform_chooser_is_not_called_biased(self):
        sim = simulate_selection_log(n_clusters=10, n_queries=100, rng=11)
        g = _bias(sim.log, n_resamples=1000, n_null=1000, rng=2).groups[0]
        for r in (g.delta_api, g.delta_pos):
            # the plug-in is biased upward by about the null expectation ...
            assert r.mean_over_runs == pytest.approx(r.null_expected, abs=0.01)
            assert r.null_expected == pytest.approx(tbs.expected_tv_uniform(500, 5))
            # ... the corrected interval still contains the truth (0) and the test does not reject
            assert r.corrected_ci.low == 0.0
            assert r.p_value > 0.01

    def test_simulated_truth_inside_corrected_ci(self):
        sim = simulate_selection_log(tool_probs=[0.4, 0.25, 0.15, 0.12, 0.08],
                                     position_probs=[0.3, 0.2, 0.2, 0.15, 0.15], n_runs=2, rng=5)
        g = _bias(sim.log, n_resamples=1000, n_null=0, rng=3).groups[0]
        assert g.delta_api.corrected_ci.low <= sim.delta_api <= g.delta_api.corrected_ci.high
        assert g.delta_pos.corrected_ci.low <= sim.delta_pos <= g.delta_pos.corrected_ci.high


def test_normalised_is_a_rescaling_when_k_is_constant():
    sim = simulate_selection_log(n_clusters=3, n_queries=30, tool_probs=[0.5, 0.2, 0.1, 0.1, 0.1], rng=3)
    r = _bias(sim.log, n_resamples=300, n_null=0, rng=1).groups[0].delta_api
    assert r.normalised == pytest.approx(r.mean_over_runs / 0.8)
    assert r.normalised_ci.low == pytest.approx(r.ci_percentile.low / 0.8)
    assert r.normalised_ci.high == pytest.approx(r.ci_percentile.high / 0.8)


class TestBootstrapAgainstLoop:
    def test_standard_error_matches_brute_force(self):
        sim = simulate_selection_log(n_clusters=2, n_queries=30, n_runs=2, tool_probs=[0.5, 0.3, 0.2],
                                     n_tools=3, position_probs=[0.5, 0.3, 0.2], rng=4)
        res = _bias(sim.log, n_resamples=4000, n_null=0, rng=9).groups[0]
        # brute force: resample queries with a Python loop and recount the chosen tools row by row
        data = sim.log.data
        tools = {c: sim.log.catalog.tools(c) for c in data["cluster_id"].unique()}
        rows = {c: {q: (sub2["run"].to_numpy() - 1, sub2["chosen_tool"].map(tools[c].index).to_numpy())
                    for q, sub2 in sub.groupby("query_id")} for c, sub in data.groupby("cluster_id")}
        rng = np.random.default_rng(0)
        stat = []
        for _ in range(1500):
            tv = np.zeros((2, len(rows)))
            for j, per_q in enumerate(rows.values()):
                pick = rng.choice(list(per_q), size=len(per_q), replace=True)
                run = np.concatenate([per_q[q][0] for q in pick])
                tool = np.concatenate([per_q[q][1] for q in pick])
                for s in (0, 1):
                    counts = np.bincount(tool[run == s], minlength=3)
                    tv[s, j] = tbs.tv_to_uniform(counts / counts.sum())
            stat.append(tv.mean())
        assert res.delta_api.standard_error == pytest.approx(np.std(stat, ddof=1), rel=0.1)
        # the replicate distribution has the same centre too
        assert np.mean(res.delta_api.bootstrap_distribution) == pytest.approx(np.mean(stat), abs=0.005)


class TestReproducibility:
    def test_same_seed_same_output(self):
        sim = simulate_selection_log(n_clusters=3, n_queries=20, tool_probs=[0.3, 0.3, 0.2, 0.1, 0.1], rng=0)
        a = _bias(sim.log, n_resamples=300, n_null=300, rng=7).to_frame()
        b = _bias(sim.log, n_resamples=300, n_null=300, rng=7).to_frame()
        c = _bias(sim.log, n_resamples=300, n_null=300, rng=8).to_frame()
        pd.testing.assert_frame_equal(a, b)
        assert not a["ci_low"].equals(c["ci_low"])


class TestRowsAndGroups:
    def test_excluded_rows_counted_and_warned(self):
        sim = simulate_selection_log(n_clusters=2, n_queries=20, p_no_call=0.2, rng=1)
        with pytest.warns(tbs.ExcludedRowsWarning, match="excluded"):
            res = tbs.selection_bias(sim.log, n_resamples=0, n_null=0)
        rows = res.groups[0].rows
        n_no_call = int((sim.log.data["status"] == "no_call").sum())
        assert rows == {"total": 200, "used": 200 - n_no_call, "excluded": {"no_call": n_no_call}}

    def test_group_by_numeric_manifest_column(self):
        a = simulate_selection_log(n_clusters=2, n_queries=10, model="m", rng=1).log.data.assign(temperature=0.0)
        b = simulate_selection_log(n_clusters=2, n_queries=10, model="m", rng=2).log.data.assign(temperature=1.5)
        log = tbs.SelectionLog.from_frame(pd.concat([a, b]), simulate_selection_log(n_clusters=2, rng=0).log.catalog)
        res = _bias(log, by="model,temperature", n_resamples=0, n_null=0)
        assert [g.keys for g in res.groups] == [{"model": "m", "temperature": 0.0}, {"model": "m", "temperature": 1.5}]
        assert isinstance(res.to_dict()["groups"][1]["keys"]["temperature"], float)

    def test_unknown_positions_give_no_delta_pos(self):
        sim = simulate_selection_log(n_clusters=2, n_queries=10, rng=1)
        data = sim.log.data.assign(rotation=pd.NA, ordering=pd.NA, chosen_position=pd.NA)
        log = tbs.SelectionLog.from_frame(data.drop_duplicates(["cluster_id", "query_id"]), sim.log.catalog)
        g = _bias(log, n_resamples=50, n_null=50, rng=0).groups[0]
        assert g.delta_pos is None and g.delta_model is None
        assert g.to_dict()["delta_pos"] is None


class TestValidation:
    @pytest.fixture()
    def log(self):
        return simulate_selection_log(n_clusters=1, n_queries=5, rng=0).log

    def test_bad_ci_method(self, log):
        with pytest.raises(ValueError, match="`ci_method` must be one of 'bca', 'percentile'; got 'basic'"):
            tbs.selection_bias(log, ci_method="basic")

    def test_bad_by(self, log):
        with pytest.raises(ValueError, match=r"`by` names column\(s\) \['temp'\]"):
            tbs.selection_bias(log, by="temp")

    def test_bad_confidence_level(self, log):
        with pytest.raises(ValueError, match=re.escape("`confidence_level` must be in (0, 1); got 1.5")):
            tbs.selection_bias(log, confidence_level=1.5)

    def test_bad_input_type(self):
        with pytest.raises(TypeError, match="expected a SelectionLog, a Study"):
            tbs.selection_bias([1, 2, 3])


@pytest.fixture(scope="module")
def table1_result(bb_study):
    return _bias(bb_study.log, by="model", n_resamples=0, n_null=0)


class TestPaperTable1:
    """BiasBusters Table 1 reproduced from the vendored logs (the 21 means and their run-to-run sds)."""

    @pytest.mark.parametrize("model", sorted(TABLE1))
    def test_model_row(self, table1_result, model):
        g = {g.keys["model"]: g for g in table1_result.groups}[model]
        for metric, (mean, sd) in zip(("delta_api", "delta_pos", "delta_model"), TABLE1[model]):
            r = getattr(g, metric)
            assert r.mean_over_runs == pytest.approx(mean, abs=5e-4), metric
            assert r.sd_over_runs == pytest.approx(sd, abs=5e-4 + 1e-9), metric
            assert r.n_runs == 3


class TestIssue14Defects:
    def test_delta_model_has_corrected_interval(self):
        """delta_model gets a calibrated interval from the same replicates (it had none)."""
        sim = simulate_selection_log(n_clusters=6, n_queries=80, tool_probs=[5, 3, 2, 1, 1],
                                     position_probs=[3, 2, 1, 1, 1], rng=4)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            g = tbs.selection_bias(sim.log, by=[], n_resamples=1000, n_null=0, rng=2).groups[0]
        m = g.delta_model
        lo, hi = m.corrected_ci
        assert np.isfinite(lo) and np.isfinite(hi) and lo <= m.corrected <= hi
        assert "jointly" in m.corrected_method
        truth = (sim.delta_api + sim.delta_pos) / 2
        assert lo <= truth <= hi
        # the joint estimate is close to the mean of the two separately corrected values
        assert m.corrected == pytest.approx((g.delta_api.corrected + g.delta_pos.corrected) / 2, abs=0.01)

    def test_json_has_no_nan(self):
        """`--json` had `corrected_ci: [NaN, NaN]`; every non-finite number is now null (strict RFC 8259)."""
        import json

        sim = simulate_selection_log(n_clusters=2, n_queries=20, rng=1)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res = tbs.selection_bias(sim.log, by=[], n_resamples=0, n_null=0)

        def refuse(c):
            raise ValueError(c)
        doc = json.loads(json.dumps(res.to_dict()), parse_constant=refuse)
        assert doc["groups"][0]["delta_api"]["corrected_ci"] == [None, None]
