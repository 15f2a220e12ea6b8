"""The uniform null's exact-law draws (issue 37, second pass on 2,000 clusters) against the former computation,
bit for bit: one ``Generator.random`` call per law, ``np.searchsorted`` on its CDF, a dict of laws built cluster by
cluster and the clusters' weights from a Python loop. The new code draws in blocks of rows from a value table,
groups the laws with ``np.unique`` and computes the weights in arrays: the same uniforms, indices and numbers."""

from __future__ import annotations

import numpy as np
import pytest

from toolbias_stats.metrics import _vectorised as vec


def _former_weights(valid):
    per_run = valid.sum(0)
    runs = int((per_run > 0).sum())
    if not runs:
        return None
    out = np.zeros(valid.shape[0])
    for c, row in enumerate(valid):
        counts = set(per_run[row].tolist())
        if len(counts) > 1:
            return None
        if counts:
            out[c] = row.sum() / (runs * counts.pop())
    return out


def _former_means(gen, n_cs, ks, n_null, valid):
    """The former exact route of ``uniform_null_means`` (every law computable)."""
    weights = _former_weights(valid)
    out = np.full((len(n_cs), n_null), np.nan)
    laws: dict[tuple, list[int]] = {}
    for c, (n, k) in enumerate(zip(n_cs, ks)):
        if valid[c].any():
            laws.setdefault((int(k), tuple(sorted(int(v) for v in n[valid[c]]))), []).append(c)
    for (k, ns), rows in sorted(laws.items()):
        values, probs = vec._cluster_law(ns, k)
        cdf = np.cumsum(probs)
        cdf[-1] = np.inf
        out[rows] = values[np.searchsorted(cdf, gen.random((len(rows), n_null)), side="right")]
    seen = np.flatnonzero(weights > 0)
    return weights[seen] @ out[seen], out.T


def _study(seed, clusters, runs, missing_share):
    rng = np.random.default_rng(seed)
    n_cs = [rng.binomial(25, 0.97, runs).astype(np.int64) for _ in range(clusters)]
    ks = [float(k) for k in rng.choice([3, 5], clusters)]
    missing = rng.random((clusters, runs)) < missing_share
    if missing_share:                                  # the same runs missing in a cluster's every run: weights hold
        missing[:] = False
        missing[::7] = True                            # clusters without a valid run
    return n_cs, ks, missing


@pytest.mark.parametrize("clusters, n_null", [(2000, 2000), (300, 7), (50, 70_000)])
def test_exact_route_equals_the_former_draws_bit_for_bit(clusters, n_null, monkeypatch):
    monkeypatch.setattr(vec, "EXACT_MIN_DRAWS", 0)
    n_cs, ks, missing = _study(clusters, clusters, 3, 0.0 if clusters != 300 else 0.1)
    valid = ~missing & (np.stack(n_cs) > 0)
    got = vec.uniform_null_means(np.random.default_rng(3), n_cs, ks, n_null, missing)
    ref = _former_means(np.random.default_rng(3), n_cs, ks, n_null, valid)
    np.testing.assert_array_equal(got[0], ref[0])
    np.testing.assert_array_equal(got[1], ref[1])
    assert np.isnan(got[1]).any() == bool((~valid.any(1)).any())


def test_cluster_weights_equal_the_former_loop():
    rng = np.random.default_rng(0)
    for _ in range(200):
        valid = rng.random((int(rng.integers(1, 9)), int(rng.integers(1, 5)))) < rng.random()
        if rng.random() < 0.5:                          # whole runs or clusters left out: weights exist
            valid = np.outer(rng.random(valid.shape[0]) < 0.8, rng.random(valid.shape[1]) < 0.8)
        got, ref = vec._cluster_weights(valid), _former_weights(valid)
        assert (got is None) == (ref is None)
        if ref is not None:
            np.testing.assert_array_equal(got, ref)


def test_laws_grouped_as_the_former_dict():
    rng = np.random.default_rng(1)
    n_cs = [rng.integers(0, 6, 4) for _ in range(500)]
    ks = [float(k) for k in rng.choice([2, 4, 5], 500)]
    valid = (np.stack(n_cs) > 0) & (rng.random((500, 4)) < 0.8)
    ref: dict[tuple, list[int]] = {}
    for c, (n, k) in enumerate(zip(n_cs, ks)):
        if valid[c].any():
            ref.setdefault((int(k), tuple(sorted(int(v) for v in n[valid[c]]))), []).append(c)
    got = vec._cluster_laws(n_cs, ks, valid)
    assert [key for key, _ in got] == sorted(ref)
    assert all(rows.tolist() == ref[key] for key, rows in got)


def test_blocks_of_rows_draw_the_same_uniforms_as_one_call(monkeypatch):
    monkeypatch.setattr(vec, "DRAW_CHUNK", 1000)       # blocks of 3 rows of 300 uniforms
    sampler = vec._cluster_sampler((20, 24, 25), 5)
    out = np.full((40, 300), np.nan)
    rows = np.arange(1, 40, 2)
    vec._draw_rows(np.random.default_rng(9), sampler, out, rows)
    u = np.random.default_rng(9).random((rows.size, 300))
    np.testing.assert_array_equal(out[rows], sampler.values[np.searchsorted(sampler.cdf, u, side="right")])
    assert np.isnan(out[::2]).all()


def test_value_table_is_sure_only_where_no_step_of_the_cdf_lies():
    sampler = vec._cluster_sampler((23, 24, 25), 5)
    buckets = sampler.table.size - 1
    assert vec.TABLE_MIN <= buckets <= vec.TABLE_MAX
    u = np.random.default_rng(2).random(200_000)
    at = (u * buckets).astype(np.intp)
    sure = ~sampler.unsure[at]
    assert sure.mean() > 0.9                            # the search is the exception
    np.testing.assert_array_equal(sampler.table[at][sure],
                                  sampler.values[np.searchsorted(sampler.cdf, u[sure], side="right")])
