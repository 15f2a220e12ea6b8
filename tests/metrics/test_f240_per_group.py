"""Issue 37 (240 groups at 2,000 replicates): the per-group kernels computed with fewer passes give the former
computations' numbers bit for bit (sums over a short last axis, the NaN-free mean, the bootstrap weights)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from toolbias_stats._resampling import query_weights
from toolbias_stats.metrics._tv import SEQUENTIAL_MAX_K, rates_from_counts, sum_last
from toolbias_stats.metrics._vectorised import centred_null_tv, nanmean, stacked, tv_runs


def _values(rng, shape):
    """Floats of mixed magnitudes and signs, with zeros of both signs."""
    x = rng.random(shape) * rng.choice([1e-9, 1e-3, 1.0, 1e3, 1e12], size=shape) * rng.choice([1.0, -1.0], size=shape)
    x[rng.random(shape) < 0.05] = 0.0
    x[rng.random(shape) < 0.05] = -0.0
    return x


@pytest.mark.filterwarnings("ignore::RuntimeWarning")   # inf - inf in the sums, as in NumPy's
@pytest.mark.parametrize("k", range(1, SEQUENTIAL_MAX_K + 3))
def test_sum_last_is_numpy_sum_bit_for_bit(k):
    rng = np.random.default_rng(k)
    for shape in [(k,), (3, k), (200, 4, 3, k)]:
        a = _values(rng, shape)
        wide = np.concatenate([a, a, a], axis=-1)[..., k:2 * k]      # a strided view, as the replicates are
        special = a.copy()
        special.flat[::7] = np.nan
        special.flat[3::11] = np.inf
        special.flat[5::13] = -np.inf
        for x in (a, wide, special):
            got, want = sum_last(x), x.sum(-1)
            assert got.dtype == want.dtype and got.shape == want.shape
            assert np.array_equal(got, want, equal_nan=True)
            assert np.array_equal(np.signbit(got), np.signbit(want))


def test_sum_last_other_dtypes_and_empty():
    a = np.arange(12, dtype=np.int64).reshape(3, 4)
    assert np.array_equal(sum_last(a), a.sum(-1)) and sum_last(a).dtype == a.sum(-1).dtype
    e = np.zeros((3, 0))
    assert np.array_equal(sum_last(e), e.sum(-1))


def _former_rates(counts, axis=-1):
    counts = np.asarray(counts, dtype=float)
    total = counts.sum(axis=axis, keepdims=True)
    positive = total > 0
    if positive.all():
        return counts / total
    with np.errstate(invalid="ignore", divide="ignore"):
        rates = counts / np.where(positive, total, 1)
    np.copyto(rates, np.nan, where=~positive)
    return rates


@pytest.mark.parametrize("k", [2, 5, 7, 8, 40])
def test_rates_from_counts_as_before(k):
    rng = np.random.default_rng(k)
    c = rng.poisson(1.0, size=(300, 3, k)).astype(float)
    c[::17] = 0.0
    for axis in (-1, 2, 0, 1):
        assert np.array_equal(rates_from_counts(c, axis=axis), _former_rates(c, axis=axis), equal_nan=True)
    assert np.array_equal(rates_from_counts(c[0, 0].tolist()), _former_rates(c[0, 0].tolist()), equal_nan=True)


def _former_nanmean(x, axis):
    x = np.asarray(x)
    if x.dtype.kind == "f" and x.size and not np.isnan(x).any():
        return x.mean(axis=axis)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return np.nanmean(x, axis=axis)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_nanmean_as_before():
    rng = np.random.default_rng(3)
    for shape in [(7,), (2000, 10), (2000, 10, 3), (1, 1)]:
        x = _values(rng, shape)
        holes = x.copy()
        holes.flat[::5] = np.nan
        infs = x.copy()
        infs.flat[::4], infs.flat[1::4] = np.inf, -np.inf       # NaN sums without a NaN
        for y in (x, holes, infs, x.astype(np.float32)):
            for axis in range(-1, len(shape)):
                got, want = nanmean(y, axis), _former_nanmean(y, axis)
                assert np.shape(got) == np.shape(want) and np.asarray(got).dtype == np.asarray(want).dtype
                assert np.array_equal(got, want, equal_nan=True)
    assert np.array_equal(nanmean(np.arange(6).reshape(2, 3), 1), _former_nanmean(np.arange(6).reshape(2, 3), 1))


def test_query_weights_as_before():
    for n, r in [(1, 5), (7, 0), (40, 2000), (3, 1)]:
        got = query_weights(n, r, np.random.default_rng(n + r))
        gen = np.random.default_rng(n + r)
        draws = gen.integers(0, n, size=(r, n))
        flat = draws + (np.arange(r) * n)[:, None]
        want = np.bincount(flat.ravel(), minlength=r * n).reshape(r, n).astype(float)
        assert got.dtype == want.dtype and np.array_equal(got, want)


def test_replicate_kernels_as_before():
    """tv_runs and centred_null_tv (sums of |deviations| in K - 1 additions) give numpy's ``sum(-1)`` values."""
    rng = np.random.default_rng(5)
    for k, zeros in [(1, False), (3, True), (3, False), (5, True), (5, False), (7, False), (9, False)]:
        joined = rng.poisson(2.0, size=(2000, 10 * 3 * k)).astype(float) + (0.0 if zeros else 1.0)
        if zeros:        # runs without a valid choice: the NaN route
            joined[:, :3 * k][::13] = 0.0
        boot = [joined[:, i * 3 * k:(i + 1) * 3 * k].reshape(2000, 3, k) for i in range(10)]
        scale = [1.0 + i / 50 for i in range(10)]

        def former_tv(c):
            dev = _former_rates(c) - 1.0 / c.shape[-1]
            return 0.5 * np.abs(dev).sum(-1)

        def former_centred(b, sc):
            rates = _former_rates(b)
            rates = (rates - _former_nanmean(rates, 0)[None]) * sc
            return 0.5 * np.abs(rates).sum(-1)

        want = former_tv(np.stack(boot, axis=1))
        assert np.array_equal(stacked(tv_runs, boot, axis=1), want, equal_nan=True)
        sc = np.asarray(scale)[None, :, None, None]
        assert np.array_equal(centred_null_tv(boot, scale), former_centred(np.stack(boot, axis=1), sc), equal_nan=True)
        one = [b[:, None] for b in boot]              # a cluster at a time (the route of large replicates)
        assert np.array_equal(former_centred(one[1], scale[1])[:, 0], centred_null_tv(boot[1:2], scale[1:2])[:, 0],
                              equal_nan=True)


@pytest.mark.parametrize("integer", [True, False])
def test_resampled_counts_as_before(integer):
    """The replicates written into their array by the product itself: the former ``out[:] = w @ joined``."""
    from toolbias_stats._resampling import resampled_counts

    rng = np.random.default_rng(9)
    api = rng.poisson(3.0, size=(37, 3, 5)).astype(float)
    pos = rng.poisson(3.0, size=(37, 3, 4)).astype(float)
    if not integer:
        api, pos = api * 0.37, pos / 3.0
    got = resampled_counts([api, pos], 2000, np.random.default_rng(1))
    w = query_weights(37, 2000, np.random.default_rng(1))
    joined = np.concatenate([api.reshape(37, -1), pos.reshape(37, -1)], axis=1)
    want = np.empty((2000, joined.shape[1]))
    want[:] = w @ joined
    assert np.array_equal(got[0], want[:, :15].reshape(2000, 3, 5))
    assert np.array_equal(got[1], want[:, 15:].reshape(2000, 3, 4))
