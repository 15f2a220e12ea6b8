"""Intervals for aggregated counts (issue 13): no per-query rows, so the replicates are multinomial draws.

Checked against theory (the moments of the multinomial and Poisson replicates, scipy's multinomial), by a small
coverage simulation (the big one is ``analyses/aggregated_multinomial_coverage.py``, docs/guide/scale.md), and
for the invariances a user relies on (same seed, same result; a query-level log is untouched).
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
from scipy import stats

import toolbias_stats as tbs
from toolbias_stats._text import format_bias_table
from toolbias_stats.io._catalog import ToolCatalog
from toolbias_stats.io._counts import SelectionCounts, finalize_table
from toolbias_stats.metrics._bias import INTERVAL_MULTINOMIAL, INTERVAL_NONE, INTERVAL_QUERY, parametric_counts
from toolbias_stats.simulate import simulate_selection_log

DESIGN = ("model", "run", "condition")


def _catalog(n_clusters, k):
    return ToolCatalog.from_records([{"tool_id": f"c{c}_t{i}", "cluster_id": f"c{c}"}
                                     for c in range(n_clusters) for i in range(k)])


def _counts(draws, catalog, positions=None):
    """Cluster counts (C, K) of one model and run as a query-level SelectionCounts with one pseudo-query each."""
    n_clusters, k = draws.shape
    rows = []
    for c in range(n_clusters):
        row = {"model": "m", "run": 1, "condition": "base", "cluster_id": f"c{c}", "query_id": "(aggregated)",
               "n_candidates": k, **{f"n_{s}": 0 for s in tbs.STATUSES}, "n_ok": int(draws[c].sum())}
        row.update({f"tool_{i + 1}": int(draws[c, i]) for i in range(k)})
        pos = np.zeros(k, dtype=int) if positions is None else positions[c]
        row.update({f"pos_{i + 1}": int(pos[i]) for i in range(k)})
        rows.append(row)
    table = finalize_table(pd.DataFrame(rows), DESIGN, k)
    return SelectionCounts(table, None, catalog, DESIGN, "query")


def _bias(counts, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return tbs.selection_bias(counts, **kw)


class TestParametricCounts:
    def test_multinomial_moments(self):
        counts = np.array([[50, 30, 20], [0, 0, 0], [7, 2, 1]])            # three runs, one without choices
        reps = parametric_counts(counts, 20000, np.random.default_rng(0))
        assert reps.shape == (20000, 3, 3)
        np.testing.assert_array_equal(reps.sum(-1), np.broadcast_to(counts.sum(-1), (20000, 3)))
        np.testing.assert_array_equal(reps[:, 1], 0)
        p = counts[0] / 100
        cov = stats.multinomial(100, p).cov()
        np.testing.assert_allclose(reps[:, 0].mean(0), counts[0], rtol=0.01)
        np.testing.assert_allclose(np.cov(reps[:, 0].T), cov, atol=0.06 * cov.max())

    def test_poisson_moments(self):
        counts = np.array([[40, 10]])
        reps = parametric_counts(counts, 20000, np.random.default_rng(1), method="poisson")
        np.testing.assert_allclose(reps.mean(0)[0], counts[0], rtol=0.02)
        np.testing.assert_allclose(reps.var(0)[0], counts[0], rtol=0.05)

    def test_no_replicates(self):
        assert parametric_counts(np.array([[1, 2]]), 0, np.random.default_rng(0)).shape == (0, 1, 2)


class TestMultinomialIntervals:
    def test_coverage_small_simulation(self):
        """Independent attempts (the assumption), 5 clusters x K = 5 x n = 250: the calibrated interval covers the
        true mean TV in about 95% of studies; the percentile interval of the biased plug-in does not near uniform."""
        k, n_clusters, n = 5, 5, 250
        catalog = _catalog(n_clusters, k)
        rng = np.random.default_rng(2026)
        cases = {"skewed": np.array([0.4, 0.25, 0.15, 0.12, 0.08]), "mild": np.array([0.24, 0.22, 0.2, 0.18, 0.16])}
        for name, p in cases.items():
            truth = 0.5 * np.abs(p - 1 / k).sum()
            hits = pct = 0
            n_studies = 40
            for s in range(n_studies):
                res = _bias(_counts(rng.multinomial(n, p, size=n_clusters), catalog), n_resamples=200, n_null=0,
                            rng=s)
                r = res.groups[0].delta_api
                assert res.interval_method == INTERVAL_MULTINOMIAL
                hits += r.corrected_ci.low <= truth <= r.corrected_ci.high
                pct += r.ci.low <= truth <= r.ci.high
            # 95% nominal; with 40 studies a coverage below 85% is > 3 binomial sd away
            assert hits / n_studies >= 0.85, (name, hits)
            if name == "mild":
                assert pct / n_studies < 0.5, pct    # the plug-in's own interval sits above the truth

    def test_query_level_logs_are_untouched(self):
        """Clusters with >= 2 queries keep the query bootstrap, BCa and their random stream."""
        sim = simulate_selection_log(n_clusters=2, n_tools=3, n_queries=15, n_runs=1, tool_probs=[3, 1, 1],
                                     position_probs=[2, 1, 1], rng=4).log
        res = _bias(sim, n_resamples=100, n_null=50, rng=9)
        assert res.interval_method == INTERVAL_QUERY and res.resample == "query"
        assert res.groups[0].delta_api.ci_method == "bca"
        assert res.groups[0].delta_api.corrected_method == "test-inversion"
        assert "Intervals:" not in format_bias_table(res)
        assert _bias(sim, n_resamples=0, n_null=0).interval_method == INTERVAL_NONE

    def test_positions_and_model(self):
        """Aggregated counts with known positions: delta_pos and delta_model get multinomial intervals too."""
        k, n_clusters = 4, 3
        catalog = _catalog(n_clusters, k)
        rng = np.random.default_rng(5)
        tools = rng.multinomial(400, [0.4, 0.3, 0.2, 0.1], size=n_clusters)
        positions = rng.multinomial(400, [0.5, 0.2, 0.2, 0.1], size=n_clusters)
        res = _bias(_counts(tools, catalog, positions), n_resamples=300, n_null=100, rng=1)
        g = res.groups[0]
        for m in ("delta_api", "delta_pos", "delta_model"):
            r = getattr(g, m)
            assert r.ci_method == "percentile" and r.ci.low <= r.mean_over_runs <= r.ci.high
            assert "multinomial replicates" in r.corrected_method
            assert 0 <= r.corrected_ci.low <= r.corrected <= r.corrected_ci.high
        np.testing.assert_allclose(g.delta_model.mean_over_runs,
                                   (g.delta_api.mean_over_runs + g.delta_pos.mean_over_runs) / 2, rtol=1e-12)
        text = format_bias_table(res)
        assert "Intervals: multinomial (attempts assumed independent)" in text

    def test_same_seed_same_result(self):
        catalog = _catalog(3, 3)
        draws = np.array([[80, 15, 5], [30, 30, 40], [0, 50, 50]])
        a = _bias(_counts(draws, catalog), n_resamples=200, n_null=100, rng=11, cluster_corrected=True)
        b = _bias(_counts(draws, catalog), n_resamples=200, n_null=100, rng=11, cluster_corrected=True)
        assert a.to_dict() == b.to_dict()
        for c in a.groups[0].clusters:
            assert c.interval_method == INTERVAL_MULTINOMIAL
            assert c.delta_api.corrected_method == "test-inversion on multinomial replicates"
            assert np.isfinite(c.rate_table["bootstrap_low"]).all()

    def test_warns_that_no_query_bootstrap_is_possible(self):
        catalog = _catalog(2, 2)
        with pytest.warns(tbs.exceptions.SmallSampleWarning, match="no query bootstrap is possible"):
            tbs.selection_bias(_counts(np.array([[1101, 59], [600, 560]]), catalog), n_resamples=50, n_null=0)


def test_cluster_without_valid_choice_is_left_out_of_the_calibrated_interval():
    """A cluster with attempts but no valid choice (all unknown_tool) has NaN TV and no calibrated interval; the
    group's values come from the other cluster (regression: the calibrated inversion raised 'no observations')."""
    from pathlib import Path

    from toolbias_stats.io.readers.openai import read_openai

    fixture = Path(__file__).parents[1] / "io" / "fixtures" / "api_logs" / "openai" / "responses_pairs.jsonl"
    log = read_openai(fixture, meta={"model": "m"}, model_override=True)   # issue 36: "m" is a label
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = tbs.selection_bias(log, n_resamples=200, rng=1)
    per_cluster = res.clusters_frame().set_index(["cluster", "metric"])
    empty = next(c for c in per_cluster.index.get_level_values(0).unique() if c.startswith("wx"))
    assert np.isnan(per_cluster.loc[(empty, "delta_api"), "mean_over_runs"])
    geo = next(c for c in per_cluster.index.get_level_values(0).unique() if c.startswith("geo"))
    frame = res.to_frame().set_index("metric")
    # the group's delta_API is the one cluster that has valid choices (2 of 3 tools never chosen: TV = 1/3)
    assert frame.loc["delta_api", "mean_over_runs"] == pytest.approx(per_cluster.loc[(geo, "delta_api"),
                                                                                     "mean_over_runs"])
    assert frame.loc["delta_api", "mean_over_runs"] == pytest.approx(1 / 3)
    assert np.isfinite(frame.loc["delta_api", "corrected"])
