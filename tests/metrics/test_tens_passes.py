"""The compiled per-cluster passes of issue 37 (2,000 clusters x 2,000 replicates): the means of the replicate TVs,
the sums over runs, the pooled TVs and the means of the centred null, bit for bit the NumPy route they replace (a
copy of the former code is kept here), with strided views like the bootstrap's, replicate-runs without a valid
choice (NaN), one tool, eight tools, one run and eight runs; and a whole ``selection_bias`` result with and without
them."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest

from toolbias_stats.metrics import _bias_engine, _vectorised
from toolbias_stats.metrics._tv import rates_from_counts, sum_last
from toolbias_stats.metrics._vectorised import (
    centred_null_tv,
    nanmean,
    replicate_means,
    replicate_tv,
)


@pytest.fixture
def kernels():
    pytest.importorskip("numba")
    if _vectorised._cluster_kernels() is None:   # pragma: no cover - numba missing
        pytest.skip("numba is not installed")


def _same(a, b) -> bool:
    """Equal shapes, NaN at the same places and every other number the same bits."""
    a, b = np.asarray(a), np.asarray(b)
    na, nb = np.isnan(a), np.isnan(b)
    return a.shape == b.shape and np.array_equal(na, nb) and np.array_equal(a[~na].view(np.int64),
                                                                             b[~nb].view(np.int64))


def _former_replicate(boot, norm):
    """A copy of the engine's former NumPy route (``_Metric._replicate_values`` before issue 37's fused pass)."""
    b = replicate_tv(boot)                                                      # (R, C, S)
    sums = [x.sum(1) for x in boot]
    with np.errstate(invalid="ignore"):                                         # one tool: 0 / 0
        return (nanmean(b, 2), nanmean(b, 1), nanmean(b / norm[None, :, None], 1), sums, replicate_tv(sums))


def _former_centred(boot, scale):
    """The former route of ``_Metric._null``'s means of the centred replicates."""
    nq = centred_null_tv(boot, scale)
    return nanmean(nq, 2), nanmean(nq, 1)


def _former_centred_rates(boot, scale):
    """A copy of centred_null_tv's rates route (a mean over the replicates of the (R, C, S, K) rates)."""
    rates = rates_from_counts(np.stack(boot, axis=1))                 # (R, C, S, K)
    np.subtract(rates, nanmean(rates, 0)[None], out=rates)
    np.multiply(rates, np.asarray(scale, dtype=float)[None, :, None, None], out=rates)
    nq = 0.5 * sum_last(np.abs(rates, out=rates))
    return nanmean(nq, 2), nanmean(nq, 1)


def _clusters(rng, r, s, ks, kind):
    out = []
    for k in ks:
        if kind == "counts":            # integer counts, some replicate-runs without a valid choice (NaN routes)
            x = rng.integers(0, 3, size=(r, s, k)).astype(float)
        elif kind == "positive":
            x = rng.integers(0, 4, size=(r, s, k)).astype(float) + 1.0
        elif kind == "floats":          # not integers: every sum's order shows
            x = rng.random((r, s, k)) * rng.choice([1e-3, 1.0, 1e5])
        else:                           # a strided view, as resampled_counts returns (one matrix for both metrics)
            big = rng.integers(0, 4, size=(r, s * k + 7)).astype(float) + 1.0
            x = big[:, 3:3 + s * k].reshape(r, s, k)
        out.append(x)
    return out


CASES = [(r, s, kind, seed) for seed, (r, s) in enumerate([(40, 3), (7, 2), (25, 7), (60, 5), (1, 3), (33, 4)])
         for kind in ("counts", "positive", "floats", "view")]
TOOLS = [5, 5, 5, 3, 3, 8, 1, 2, 7, 5, 5]


@pytest.mark.parametrize("numpy_tv", [False, True])
@pytest.mark.parametrize("r, s, kind, seed", CASES)
def test_replicate_means_equal_the_former_route(kernels, monkeypatch, r, s, kind, seed, numpy_tv):
    rng = np.random.default_rng(seed)
    boot = _clusters(rng, r, s, TOOLS[: 2 + seed], kind)
    norm = 1 - 1 / np.array([b.shape[-1] for b in boot], dtype=float)
    got = replicate_means(boot, norm)
    if numpy_tv:      # the former route's TVs without their compiled pass: stacked tv_runs
        monkeypatch.setattr(_vectorised, "_TV_KERNEL", [None])
    ref = _former_replicate(boot, norm)
    assert _same(got.cluster_means, ref[0]) and _same(got.run_means, ref[1]) and _same(got.norm_run_means, ref[2])
    assert len(got.sums) == len(boot) and all(_same(a, b) for a, b in zip(got.sums, ref[3]))
    assert _same(got.pooled, ref[4])


@pytest.mark.parametrize("r, s, kind, seed", CASES)
def test_centred_means_equal_the_former_route(kernels, r, s, kind, seed):
    rng = np.random.default_rng(100 + seed)
    boot = _clusters(rng, r, s, TOOLS[: 2 + seed], kind)
    scale = list(1.0 + rng.random(len(boot)))
    norm = 1 - 1 / np.array([b.shape[-1] for b in boot], dtype=float)
    got, ref = replicate_means(boot, norm, scale), _former_centred(boot, scale)
    assert _same(got.centred[0], ref[0]) and _same(got.centred[1], ref[1])
    plain = replicate_means(boot, norm)                   # the other values do not depend on the centred ones
    assert plain.centred is None and all(_same(a, b) for a, b in zip(got[:3], plain[:3]))
    same_k = [b for b in boot if b.shape[-1] == boot[0].shape[-1]]      # the rates route of one stack
    got = replicate_means(same_k, norm[: len(same_k)], scale[: len(same_k)]).centred
    ref = _former_centred_rates(same_k, scale[: len(same_k)])
    assert _same(got[0], ref[0]) and _same(got[1], ref[1])


def test_large_replicates_one_cluster_at_a_time(kernels):
    """Clusters of LARGE_ARRAY numbers or more take the former functions' one-at-a-time routes: the same numbers."""
    rng = np.random.default_rng(7)
    boot = _clusters(rng, 3000, 3, [8, 5, 5], "counts")                 # 72,000 and 45,000 numbers
    assert boot[0].size >= _vectorised.LARGE_ARRAY
    scale, norm = [1.2, 1.0, 1.05], np.array([7 / 8, 0.8, 0.8])
    got, ref = replicate_means(boot, norm, scale).centred, _former_centred(boot, scale)
    assert _same(got[0], ref[0]) and _same(got[1], ref[1])
    got, ref = replicate_means(boot, norm), _former_replicate(boot, norm)
    assert _same(got.cluster_means, ref[0]) and _same(got.run_means, ref[1]) and _same(got.norm_run_means, ref[2])


def test_not_taken_where_the_order_or_shapes_differ(kernels):
    a, norm = np.ones((4, 2, 3)), np.array([2 / 3, 2 / 3])
    assert replicate_means([a, np.ones((5, 2, 3))], norm) is None          # replicates differ
    assert replicate_means([a, np.ones((4, 3, 3))], norm) is None          # runs differ
    assert replicate_means([a, np.ones((4, 2, 3), dtype=np.float32)], norm) is None
    assert replicate_means([np.ones((4, 3))], norm) is None                 # not (R, S, K)
    assert replicate_means([np.ones((4, 1, 3))], norm) is None              # one run: NumPy sums clusters pairwise
    assert replicate_means([np.ones((4, 8, 3))], norm) is None              # 8 runs: NumPy sums them pairwise
    assert replicate_means([a, np.ones((5, 2, 3))], norm, [1.0, 1.0]) is None
    assert replicate_means([], norm) is None


def test_none_without_numba(monkeypatch):
    monkeypatch.setattr(_vectorised, "_CLUSTER_KERNELS", [None])
    assert replicate_means([np.ones((2, 2, 2))], np.array([0.5])) is None
    assert replicate_means([np.ones((2, 2, 2))], np.array([0.5]), [1.0]) is None


def test_zero_ties_equal_the_mean_of_zeros():
    rng = np.random.default_rng(3)
    for missing in (np.zeros((4, 3), bool), rng.random((6, 3)) < 0.5, np.ones((2, 2), bool),
                    np.array([[True, True, True], [False, True, False]])):
        sq = np.zeros((5,) + missing.shape)
        sq[:, missing] = np.nan
        assert _same(_bias_engine._zero_ties(5, missing), _bias_engine._nanmean(sq, 2))


def _study_json(monkeypatch, compiled: bool, **sim) -> str:
    from toolbias_stats import selection_bias
    from toolbias_stats._json import dumps_indented
    from toolbias_stats.simulate import simulate_selection_log

    if not compiled:
        monkeypatch.setattr(_vectorised, "_CLUSTER_KERNELS", [None])
    log = simulate_selection_log(rng=5, **sim).log
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = selection_bias(log, n_resamples=120, n_null=200, rng=11)
    monkeypatch.undo()
    return dumps_indented(res.to_dict())


@pytest.mark.parametrize("sim", [
    dict(n_clusters=40, n_queries=6, n_runs=2, position_probs=[0.4, 0.2, 0.2, 0.1, 0.1]),
    dict(n_clusters=12, n_queries=3, n_runs=3, p_no_call=0.6),  # few attempts per tool, runs without a choice
    dict(n_clusters=8, n_queries=20, n_runs=1),                # one run
    dict(n_clusters=30, n_queries=8, n_runs=3, p_no_call=0.05),  # every compiled pass
])
def test_whole_result_equals_the_numpy_passes(kernels, monkeypatch, sim):
    compiled, plain = _study_json(monkeypatch, True, **sim), _study_json(monkeypatch, False, **sim)
    assert compiled == plain
    assert json.loads(plain)["groups"][0]["delta_api"]["corrected_ci"][1] is not None


def test_compact_replicates_keep_every_number(kernels):
    rng = np.random.default_rng(9)
    big = rng.integers(0, 65536, size=(50, 3 * 5 + 4)).astype(float)
    for x in (rng.integers(0, 300, size=(40, 3, 5)).astype(float), big[:, 2:17].reshape(50, 3, 5),
              np.zeros((3, 2, 2))):
        c = _vectorised.compact_replicates(x)
        assert c.dtype == np.uint16 and _same(c.astype(float), x)
    for bad in (0.5, -1.0, 65536.0, np.nan, np.inf, -0.0):       # not an integer count of uint16: kept as it is
        x = np.ones((4, 2, 3))
        x[3, 1, 2] = bad
        assert _vectorised.compact_replicates(x) is x
    assert _vectorised.compact_replicates(np.ones((4, 3))).dtype == np.float64


@pytest.mark.parametrize("kind, seed", [("counts", 1), ("positive", 2), ("view", 3)])
def test_compact_replicates_give_the_same_means(kernels, kind, seed):
    rng = np.random.default_rng(seed)
    boot = _clusters(rng, 30, 3, TOOLS, kind)
    norm = 1 - 1 / np.array([b.shape[-1] for b in boot], dtype=float)
    scale = list(1.0 + rng.random(len(boot)))
    compact = [_vectorised.compact_replicates(b) for b in boot]
    assert all(c.dtype == np.uint16 for c in compact)
    got, ref = replicate_means(compact, norm, scale), replicate_means(boot, norm, scale)
    assert all(_same(a, b) for a, b in zip(got[:3], ref[:3])) and _same(got.pooled, ref.pooled)
    assert all(_same(a, b) and a.dtype == np.float64 for a, b in zip(got.sums, ref.sums))
    assert _same(got.centred[0], ref.centred[0]) and _same(got.centred[1], ref.centred[1])
    assert _same(centred_null_tv(compact, scale), centred_null_tv(boot, scale))   # the NumPy route reads them too


def test_integer_counts_are_the_former_int64_counts():
    rng = np.random.default_rng(4)
    cases = [rng.integers(0, 200, size=(30, 5)).astype(float), rng.integers(0, 70_000, size=(30, 4)).astype(float),
             rng.random((30, 5)) * 10, np.array([[-1.0, 3.0]]), np.array([[2.0**31, 1.0]]), np.zeros((0, 3))]
    for x in cases:
        got, former = _bias_engine._integer_counts(x), np.rint(x).astype(np.int64)
        assert got.dtype.kind in "ui" and np.array_equal(got, former) and got.shape == former.shape


def test_calibrated_interval_reads_compact_counts_as_int64():
    """The calibrated interval of compact (uint8/uint16) replicate counts is the one of their int64 copies."""
    from toolbias_stats.metrics._calibrated import calibrated_mean_tv

    rng = np.random.default_rng(6)
    counts = [np.array([30, 10, 5, 5]), np.array([12, 12, 20, 6]), np.array([40, 2, 3, 5])]
    boot = [rng.multinomial(50, c / 50, size=300).astype(float) for c in counts]
    compact = [_bias_engine._integer_counts(b) for b in boot]
    assert {b.dtype for b in compact} == {np.dtype(np.uint8)}
    a = calibrated_mean_tv(counts, compact, n_units=[50, 50, 50], confidence_level=0.9)
    b = calibrated_mean_tv(counts, [np.rint(x).astype(np.int64) for x in boot], n_units=[50, 50, 50],
                           confidence_level=0.9)
    assert (a.estimate, a.ci_low, a.ci_high, a.method) == (b.estimate, b.ci_low, b.ci_high, b.method)
