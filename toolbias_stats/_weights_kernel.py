"""Compiled bootstrap weights for many queries: a counter-based generator, one stream per replicate.

Drawing R x Q multinomial weights with NumPy costs a bounded-integer draw, a flat ``bincount`` and two casts per
query and replicate; for the 10,000 queries per cluster of a large log that is most of the bootstrap. Here each
replicate has its own SplitMix64 stream (Steele, Lea & Flood 2014), seeded by hashing (seed, replicate), so the
draws do not depend on the block they are drawn in, and integers in [0, Q) come from Lemire's unbiased
multiply-and-reject method (Lemire 2019). The weights are written into a float32 block that a BLAS product then
multiplies with the per-query counts. Replicates are drawn in parallel (numba's ``prange``; each writes only its own
row from its own stream, so the numbers do not depend on the threads). This module imports numba; ``_resampling``
imports it only when needed.
"""

from __future__ import annotations

import numba
import numpy as np

__all__ = ["weights_block", "weights_block_max"]

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_S11, _S27, _S30, _S31, _S32 = (np.uint64(s) for s in (11, 27, 30, 31, 32))
_LOW32 = np.uint64(0xFFFFFFFF)
_TWO32 = np.uint64(4294967296)


@numba.njit(inline="always")
def _mix(z):
    """SplitMix64's output function (a bijective 64-bit hash)."""
    z = (z ^ (z >> _S30)) * _M1
    z = (z ^ (z >> _S27)) * _M2
    return z ^ (z >> _S31)


@numba.njit(cache=True, parallel=True)
def _kernel(out, top, seed, first, q, poisson):
    n = out.shape[0]
    qq = np.uint64(q)
    threshold = (_TWO32 - qq) % qq          # Lemire: reject the 2^32 mod q low products
    e1 = np.exp(-1.0)
    # replicates are independent streams written to their own rows: drawn on all cores, the same numbers
    for i in numba.prange(n):
        row = out[i]
        state = _mix(seed + _mix(first + np.uint64(i) + _GOLDEN))
        if poisson:
            for j in range(q):
                state += _GOLDEN
                u = (_mix(state) >> _S11) * (1.0 / 9007199254740992.0)
                k = 0
                p = e1
                cdf = p
                while u > cdf and k < 60:   # inversion; P(k > 20) < 1e-19
                    k += 1
                    p /= k
                    cdf += p
                row[j] = k
            top[i] = row.max() if q else 0.0   # the row's largest weight, read while the row is in cache
        else:
            # counted in integers (an int32 increment is cheaper than a float32 one: ~15 % of the draws' time),
            # then written as float32 (exact: a count is at most q) with the row's largest weight
            cnt = np.zeros(q, dtype=np.int32)
            for _ in range(q):
                while True:
                    state += _GOLDEN
                    m = (_mix(state) >> _S32) * qq
                    if (m & _LOW32) >= threshold:
                        break
                cnt[m >> _S32] += 1
            largest = 0
            for j in range(q):
                v = cnt[j]
                row[j] = v
                largest = max(largest, v)
            top[i] = largest


def weights_block(n_rows: int, q: int, seed: int, first: int, poisson: bool) -> np.ndarray:
    """Weights of replicates ``first .. first + n_rows - 1`` (float32, shape (n_rows, q)).

    Multinomial (Q queries drawn with replacement) or independent Poisson(1) weights. Replicate ``r`` of a
    given ``seed`` is the same whatever block it is drawn in.
    """
    return weights_block_max(n_rows, q, seed, first, poisson)[0]


def weights_block_max(n_rows: int, q: int, seed: int, first: int, poisson: bool,
                      out: np.ndarray | None = None) -> tuple[np.ndarray, float]:
    """:func:`weights_block` and its largest weight (found row by row as the rows are drawn: no second pass).

    ``out``: a C-contiguous float32 array of shape (n_rows, q) to write the weights into (a block reused for
    every block of replicates: a fresh 64 MB block costs ~16,000 page faults, as much system time as a quarter
    of its draws); a new one by default.
    """
    if out is None:
        out = np.empty((n_rows, q), dtype=np.float32)
    elif out.shape != (n_rows, q) or out.dtype != np.float32 or not out.flags.c_contiguous:
        raise ValueError(f"`out` must be a C-contiguous float32 array of shape {(n_rows, q)}")
    top = np.zeros(n_rows, dtype=np.float32)
    _kernel(out, top, np.uint64(seed), np.uint64(first), q, bool(poisson))
    return out, float(top.max()) if n_rows else 0.0
