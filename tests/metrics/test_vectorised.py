"""Issue 37: the cluster-batched kernels give the numbers of the cluster-by-cluster loops they replace.

The uniform chooser's null draws consume the random stream in the same order (bit-identical draws), also when
clusters of different K alternate and when the clusters are split into batches; the TVs, the centred replicates
and the percentile intervals are bit-identical; the jackknife (summed in another order) agrees to rounding.
"""

from __future__ import annotations

import numpy as np
import pytest

from toolbias_stats._resampling import percentile_ci
from toolbias_stats.metrics import _vectorised as vec
from toolbias_stats.metrics._bias import _nanmean, _tv_runs
from toolbias_stats.metrics._tv import expected_tv_uniform, rates_from_counts


def _clusters(rng, ks, n_runs=3, n_q=(1, 6)):
    """Per-query counts (Q, S, K) of clusters with the given K, some runs without a valid choice."""
    out = []
    for k in ks:
        q = int(rng.integers(*n_q))
        c = rng.integers(0, 3, size=(q, n_runs, k)).astype(float)
        if rng.random() < 0.3:
            c[:, int(rng.integers(n_runs)), :] = 0
        out.append(c)
    return out


KS = [5, 5, 5, 3, 3, 5, 40, 40, 2]


@pytest.mark.parametrize("max_batch", [vec.MAX_BATCH, 100])
def test_null_draws_are_the_stream_of_one_call_per_cluster(monkeypatch, max_batch):
    monkeypatch.setattr(vec, "MAX_BATCH", max_batch)
    monkeypatch.setattr(vec.same_shape_runs, "__defaults__", (1, max_batch))
    counts = _clusters(np.random.default_rng(1), KS)
    n_cs = [c.sum(0).sum(-1).astype(np.int64) for c in counts]
    g1, g2 = np.random.default_rng(9), np.random.default_rng(9)
    loop = np.stack([_tv_runs(g1.multinomial(n, np.full(k, 1.0 / k), size=(50, len(n))))
                     for n, k in zip(n_cs, KS)], axis=1)
    batched = vec.uniform_null_tv(g2, n_cs, KS, 50)
    np.testing.assert_array_equal(batched, loop)
    assert g1.random() == g2.random()                # the generator is left in the same state


@pytest.mark.parametrize("max_batch", [vec.MAX_BATCH, 50])
def test_tvs_centred_replicates_and_expectations_equal_the_loops(monkeypatch, max_batch):
    monkeypatch.setattr(vec.same_shape_runs, "__defaults__", (1, max_batch))
    rng = np.random.default_rng(2)
    counts = _clusters(rng, KS)
    obs = [c.sum(0) for c in counts]
    boot = [rng.integers(0, 4, size=(30,) + o.shape).astype(float) for o in obs]
    np.testing.assert_array_equal(vec.stacked(vec.tv_runs, obs), np.stack([_tv_runs(o) for o in obs]))
    np.testing.assert_array_equal(vec.stacked(vec.tv_runs, boot, axis=1),
                                  np.stack([_tv_runs(b) for b in boot], axis=1))
    scale = list(rng.uniform(1, 2, len(boot)))
    loop = []
    for b, sc in zip(boot, scale):
        rates = rates_from_counts(b)
        loop.append(0.5 * np.abs((rates - _nanmean(rates, 0)[None]) * sc).sum(-1))
    np.testing.assert_array_equal(vec.centred_null_tv(boot, scale), np.stack(loop, axis=1))
    n_cs = [o.sum(-1).astype(np.int64) for o in obs]
    np.testing.assert_array_equal(vec.uniform_expected_tv(n_cs, KS),
                                  np.stack([expected_tv_uniform(n, k) for n, k in zip(n_cs, KS)]))


def test_jackknife_agrees_with_the_loop():
    counts = _clusters(np.random.default_rng(3), KS * 20)
    full = np.stack([_tv_runs(c.sum(0)) for c in counts])
    loop = []
    for i, cnt in enumerate(counts):
        tv = np.repeat(full[None], len(cnt), axis=0)
        tv[:, i, :] = _tv_runs(cnt.sum(0)[None] - cnt)
        loop.append(_nanmean(_nanmean(tv, 1), 1))
    loo, cluster = vec.leave_one_out_tv(counts)
    np.testing.assert_allclose(vec.jackknife_means(full, loo, cluster), np.concatenate(loop), rtol=1e-13,
                               atol=0)


def test_percentile_intervals_equal_one_by_one():
    d = np.random.default_rng(4).normal(size=(200, 30))
    d[3, 5] = np.nan
    d[:, 7] = np.nan
    low, high = vec.percentile_cis(d, 0.9)
    for j in range(d.shape[1]):
        ci = percentile_ci(d[:, j], 0.9)
        np.testing.assert_array_equal([low[j], high[j]], [ci.low, ci.high])
