"""Compiled bootstrap weights for many queries: a counter-based generator, one stream per replicate.

Drawing R x Q multinomial weights with NumPy costs a bounded-integer draw, a flat ``bincount`` and two casts per
query and replicate; for the 10,000 queries per cluster of a large log that is most of the bootstrap. Here each
replicate has its own SplitMix64 stream (Steele, Lea & Flood 2014), seeded by hashing (seed, replicate), so the
draws do not depend on the block they are drawn in, and integers in [0, Q) come from Lemire's unbiased
multiply-and-reject method (Lemire 2019). :func:`weighted_sums` draws a few replicates per thread into a float32
buffer that stays in the core's cache and multiplies it there with the per-query counts (BLAS through numba's
``np.dot``; integer sums, exact, so the order of summation does not matter); :func:`weights_block` returns the
weights themselves. Replicates are drawn in parallel (numba's ``prange``; each writes only its own row from its own
stream, so the numbers do not depend on the threads). This module imports numba; ``_resampling`` imports it only
when needed.
"""

from __future__ import annotations

import numba
import numpy as np

__all__ = ["weights_block", "weights_block_max", "weighted_sums"]

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


@numba.njit(inline="always")
def _row_state(seed, replicate):
    """The start of replicate ``replicate``'s stream."""
    return _mix(seed + _mix(replicate + _GOLDEN))


@numba.njit(inline="always")
def _poisson_row(row, state, q, e1):
    """Independent Poisson(1) weights of one replicate into ``row`` by inversion; returns the largest."""
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
    return row.max() if q else 0.0   # the row's largest weight, read while the row is in cache


@numba.njit(inline="always")
def _multinomial_row(row, state, q, cnt):
    """Multinomial weights of one replicate (Q draws) into ``row``; returns the largest.

    Counted in integers (an int32 increment is cheaper than a float32 one: ~15 % of the draws' time), then
    written as float32 (exact: a count is at most q) with the row's largest weight.
    """
    qq = np.uint64(q)
    threshold = (_TWO32 - qq) % qq          # Lemire: reject the 2^32 mod q low products
    cnt[:] = 0
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
    return largest


@numba.njit(cache=True, parallel=True)
def _kernel(out, top, seed, first, q, poisson):
    n = out.shape[0]
    e1 = np.exp(-1.0)
    # replicates are independent streams written to their own rows: drawn on all cores, the same numbers
    for i in numba.prange(n):
        state = _row_state(seed, first + np.uint64(i))
        if poisson:
            top[i] = _poisson_row(out[i], state, q, e1)
        else:
            top[i] = _multinomial_row(out[i], np.uint64(state), q, np.zeros(q, dtype=np.int32))


@numba.njit(cache=True, parallel=True)
def _sums_kernel(out, counts32, counts64, bufs, seed, q, poisson, col_total):
    n, width = out.shape
    n_threads, rows = bufs.shape[0], bufs.shape[1]
    e1 = np.exp(-1.0)
    n_chunks = (n + rows - 1) // rows
    # thread t takes chunks t, t + n_threads, ... into its own buffer; a replicate's numbers depend on its
    # number only, not on its chunk or thread
    for t in numba.prange(n_threads):
        buf = bufs[t]
        cnt = np.zeros(q, dtype=np.int32)
        for chunk in range(t, n_chunks, n_threads):
            lo = chunk * rows
            r = min(rows, n - lo)
            top = 0.0
            for b in range(r):
                state = _row_state(seed, np.uint64(lo + b))
                if poisson:
                    top = max(top, _poisson_row(buf[b], state, q, e1))
                else:
                    top = max(top, np.float64(_multinomial_row(buf[b], state, q, cnt)))
            # exact integer sums: float32 while every sum stays below 2^24, else float64
            if top * col_total < 16777216.0:
                res = np.dot(buf[:r], counts32)
                for b in range(r):
                    for c in range(width):
                        out[lo + b, c] = res[b, c]
            else:
                res64 = np.dot(buf[:r].astype(np.float64), counts64)
                for b in range(r):
                    for c in range(width):
                        out[lo + b, c] = res64[b, c]


def weighted_sums(counts: np.ndarray, n_resamples: int, seed: int, poisson: bool, chunk_bytes: int) -> np.ndarray:
    """``w @ counts`` for the weights ``w`` of replicates ``0 .. n_resamples - 1`` (:func:`weights_block`), without
    the (n_resamples, Q) weights in memory.

    Each thread draws a few replicates' weights into its own float32 buffer (together at most ``chunk_bytes``;
    small enough to stay in the core's cache) and multiplies them at once with the counts (BLAS, through numba's
    ``np.dot``). The counts must be integers (as float64, shape (Q, width)): every sum is then exact, in float32
    while the buffer's largest weight times the largest column total stays below 2^24, else in float64, so the
    result does not depend on the buffers, the threads or BLAS's order of summation.
    """
    q, width = counts.shape
    out = np.empty((n_resamples, width))
    n_threads = numba.get_num_threads()
    rows = int(max(1, min(64, chunk_bytes // (4 * max(q, 1) * n_threads))))
    # padded with zero columns to a multiple of 8: BLAS's kernels take 8 or 16 columns at a time, and 30 columns
    # cost ~25 % more than 32 (zero columns change no other column's sums)
    counts32 = np.zeros((q, -(-width // 8) * 8), dtype=np.float32)
    counts32[:, :width] = counts
    counts64 = np.zeros(counts32.shape)
    counts64[:, :width] = counts
    col_total = float(np.abs(counts).sum(0).max()) if counts.size else 0.0
    bufs = np.empty((n_threads, rows, q), dtype=np.float32)
    _sums_kernel(out, counts32, counts64, bufs, np.uint64(seed), q, bool(poisson), col_total)
    return out


def weights_block(n_rows: int, q: int, seed: int, first: int, poisson: bool) -> np.ndarray:
    """Weights of replicates ``first .. first + n_rows - 1`` (float32, shape (n_rows, q)).

    Multinomial (Q queries drawn with replacement) or independent Poisson(1) weights. Replicate ``r`` of a
    given ``seed`` is the same whatever block it is drawn in.
    """
    return weights_block_max(n_rows, q, seed, first, poisson)[0]


def weights_block_max(n_rows: int, q: int, seed: int, first: int, poisson: bool) -> tuple[np.ndarray, float]:
    """:func:`weights_block` and its largest weight (found row by row as the rows are drawn: no second pass)."""
    out = np.empty((n_rows, q), dtype=np.float32)
    top = np.zeros(n_rows, dtype=np.float32)
    _kernel(out, top, np.uint64(seed), np.uint64(first), q, bool(poisson))
    return out, float(top.max()) if n_rows else 0.0
