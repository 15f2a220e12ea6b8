"""Issue 37, 2,000 clusters: the per-cluster results are built from reductions over all clusters at once; each number
equals the one-cluster-at-a-time definition exactly (the JSON output stays byte-identical), and the garbage
collector, paused while the results are built, is always turned back on."""

from __future__ import annotations

import gc
import types

import numpy as np
import pytest

from toolbias_stats.metrics._bias_engine import _mean_of_finite, _Metric, _summed_rates
from toolbias_stats.metrics._bias_results import collector_paused
from toolbias_stats.metrics._tv import rates_from_counts


def test_cluster_runs_equal_one_cluster_at_a_time():
    rng = np.random.default_rng(0)
    for s in (1, 3, 8, 13):
        obs = rng.random((50, s))
        null = rng.random((50, s))
        obs[rng.random((50, s)) < 0.2] = np.nan          # runs without a valid choice
        obs[7] = np.nan                                   # a cluster without any
        null[3, 0] = np.nan
        stub = types.SimpleNamespace(per_cluster_obs=obs, null_cluster_runs=null)
        n_runs, sd, expected = _Metric._cluster_runs.func(stub)
        for i in range(len(obs)):
            row = obs[i][np.isfinite(obs[i])]
            assert n_runs[i] == row.size and type(n_runs[i]) is int
            want = float(np.std(row)) if row.size else np.nan
            assert sd[i] == want or (np.isnan(sd[i]) and np.isnan(want))
            want = _mean_of_finite(null[i][np.isfinite(obs[i])])
            assert expected[i] == want or (np.isnan(expected[i]) and np.isnan(want))


def test_summed_rates_equal_one_cluster_at_a_time():
    rng = np.random.default_rng(1)
    obs = {f"c{i}": rng.integers(0, 4, size=(int(rng.integers(1, 4)), int(rng.integers(2, 6)))) for i in range(40)}
    obs["zero"] = np.zeros((2, 3), dtype=int)                        # no valid choice: NaN rates
    obs["float"] = rng.random((2, 3)) * 7                             # weighted counts
    out = _summed_rates(obs, list(obs))
    for c, x in obs.items():
        counts, total, rates = out[c]
        np.testing.assert_array_equal(counts, x.sum(0))
        assert total == int(x.sum(0).sum())
        np.testing.assert_array_equal(rates, rates_from_counts(x.sum(0)))


def test_collector_turned_back_on():
    assert gc.isenabled()
    with pytest.raises(ZeroDivisionError), collector_paused():
        assert not gc.isenabled()
        1 / 0
    assert gc.isenabled()
    gc.disable()
    try:
        with collector_paused():
            pass
        assert not gc.isenabled()     # left as it was found
    finally:
        gc.enable()


def test_to_dict_leaves_the_collector_on():
    import toolbias_stats as tbs
    from toolbias_stats.simulate import simulate_selection_log

    sim = simulate_selection_log(n_clusters=3, n_queries=10, n_runs=2, position_probs=[0.6, 0.1, 0.1, 0.1, 0.1],
                                 rng=0)
    res = tbs.selection_bias(sim.log, n_resamples=20, rng=1)
    assert gc.isenabled()
    d = res.to_dict()
    assert gc.isenabled() and len(d["groups"][0]["clusters"]) == 3
