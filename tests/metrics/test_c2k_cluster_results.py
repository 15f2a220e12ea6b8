"""Per-cluster results from batched arrays (issue 37, 2,000 clusters): each batched path gives the numbers of the
former per-cluster code (kept here as a simple loop), bit for bit."""

from __future__ import annotations

import types
import warnings

import numpy as np
import pytest

from toolbias_stats.metrics._bias_engine import _Metric


def _bits(values):
    return np.asarray(values, dtype=float).view(np.int64)


def _former_se(b):
    """The former ``standard_error`` of cluster ``i``: ``float(np.nanstd(b[:, i], ddof=1))``, one call each."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return [float(np.nanstd(b[:, i], ddof=1)) for i in range(b.shape[1])]


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("shape", [(2000, 7), (200, 301), (2, 5), (1, 4), (0, 3), (129, 9), (1000, 1)])
def test_standard_errors_equal_the_per_cluster_calls(seed, shape):
    rng = np.random.default_rng(seed)
    b = rng.random(shape) * rng.choice([1e-3, 1.0, 1e3], size=shape[1])[None, :]
    if shape[0] > 2 and shape[1] > 2:
        b[rng.integers(0, shape[0], 3), 0] = np.nan        # a few NaN replicates in one cluster
        b[:, 1] = np.nan                                    # a cluster without any
        b[:, 2] = b[0, 2]                                   # a constant one
    metric = types.SimpleNamespace(boot_cluster_means=b)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        got = _Metric._cluster_se.func(metric)
    assert all(type(v) is float for v in got)
    assert np.array_equal(_bits(got), _bits(_former_se(b)))


def test_rate_tables_read_the_replicates_summed_over_runs(monkeypatch):
    """The rate tables' replicates (kept as the tools' sums over runs, computed once per cluster and read by the
    pooled values, the calibrated inputs and the tables) are the sums over runs of the replicates drawn."""
    from toolbias_stats import selection_bias
    from toolbias_stats.metrics import _bias_engine
    from toolbias_stats.metrics._bias_engine import _rate_table
    from toolbias_stats.simulate import simulate_selection_log

    drawn = []
    former = _bias_engine.resampled_counts

    def spy(targets, n_resamples, rng, **kw):
        out = former(targets, n_resamples, rng, **kw)
        drawn.append(out[0].copy())          # the tools' (R, S, K) replicates, in the order of the clusters
        return out

    monkeypatch.setattr(_bias_engine, "resampled_counts", spy)
    sim = simulate_selection_log(n_clusters=6, n_queries=8, n_runs=3, position_probs=[0.4, 0.2, 0.2, 0.1, 0.1],
                                 rng=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = selection_bias(sim.log, n_resamples=150, rng=4)
        clusters = res.groups[0].clusters
        assert len(drawn) == len(clusters) == 6
        for c, boot in zip(clusters, drawn):
            want = _rate_table(c.cluster, c.tools, c.counts, boot.sum(1), 0.95, 8)
            got = c.rate_table
            for col in ("bootstrap_low", "bootstrap_high", "wilson_low", "rate", "count"):
                assert np.array_equal(np.asarray(got[col], dtype=float).view(np.int64),
                                      np.asarray(want[col], dtype=float).view(np.int64)), col
