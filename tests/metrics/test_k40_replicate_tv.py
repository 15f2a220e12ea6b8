"""Issue 37, K = 40: the replicates' rates and TVs are computed without the mask pass, the temporaries and the
stacked copy of large arrays. The numbers must be those of the former code bit for bit (the JSON outputs of
``bias`` are compared byte for byte in the benchmark; here the kernels themselves)."""

from __future__ import annotations

import numpy as np
import pytest

from toolbias_stats.metrics import _vectorised as vec
from toolbias_stats.metrics import rates_from_counts


def _former_rates(counts):
    counts = np.asarray(counts, dtype=float)
    total = counts.sum(axis=-1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(total > 0, counts / np.where(total > 0, total, 1), np.nan)


def _former_tv_runs(counts):
    return 0.5 * np.abs(_former_rates(counts) - 1.0 / counts.shape[-1]).sum(-1)


def _former_centred(boot, scale):
    def one(b, sc):
        rates = _former_rates(b)
        return 0.5 * np.abs((rates - vec.nanmean(rates, 0)[None]) * sc).sum(-1)

    parts = []
    for s in vec.same_shape_runs([b.shape for b in boot]):
        sc = np.asarray(scale[s], dtype=float)[None, :, None, None]
        parts.append(one(np.stack(boot[s], axis=1), sc))
    return parts[0] if len(parts) == 1 else np.concatenate(parts, axis=1)


def _replicates(rng, r, s, k, zero_run=False):
    b = rng.poisson(3.0, size=(r, s, k)).astype(np.float32).astype(float) * rng.random((r, s, k)) * 7
    if zero_run:
        b[:, -1] = 0.0                                              # a run with no valid choice: NaN
    return b


@pytest.mark.parametrize("zero", [False, True])
def test_rates_and_tv_runs_are_the_former_numbers(zero):
    rng = np.random.default_rng(1)
    b = _replicates(rng, 300, 3, 40, zero_run=zero)
    b[5, 0] = 0.0
    np.testing.assert_array_equal(rates_from_counts(b), _former_rates(b))
    np.testing.assert_array_equal(vec.tv_runs(b), _former_tv_runs(b))
    assert np.isnan(rates_from_counts(b)[5, 0]).all()
    ints = rng.integers(0, 5, size=(50, 3, 7))
    np.testing.assert_array_equal(rates_from_counts(ints), _former_rates(ints))


def test_large_replicates_one_cluster_at_a_time_are_the_stacked_numbers(monkeypatch):
    rng = np.random.default_rng(2)
    boot = [_replicates(rng, 2000, 3, 40, zero_run=(c == 3)) for c in range(6)]
    scale = [1.0 + c / 10 for c in range(6)]
    assert boot[0].size >= vec.LARGE_ARRAY
    per_array = vec.stacked(vec.tv_runs, boot, axis=1)
    centred = vec.centred_null_tv(boot, scale)
    monkeypatch.setattr(vec, "LARGE_ARRAY", 1 << 40)               # the stacked path
    np.testing.assert_array_equal(per_array, vec.stacked(vec.tv_runs, boot, axis=1))
    np.testing.assert_array_equal(per_array, np.stack([_former_tv_runs(b) for b in boot], axis=1))
    np.testing.assert_array_equal(centred, vec.centred_null_tv(boot, scale))
    np.testing.assert_array_equal(centred, _former_centred(boot, scale))
    assert centred.shape == (2000, 6, 3) and np.isnan(centred[:, 3, -1]).all()
