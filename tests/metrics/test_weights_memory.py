"""The bootstrap of large studies without a block of weights in memory (issue 37, 10M rows at 2,000 replicates):
each thread draws a few replicates into a buffer and multiplies them there (:func:`weighted_sums`). The replicates
are bit for bit those of the former code (a block of weights per ``chunk_bytes`` of replicates, drawn by
:func:`weights_block_max`, times the counts in float32 or float64)."""

import numpy as np
import pytest

pytest.importorskip("numba")

import numba

from toolbias_stats._resampling import resampled_counts
from toolbias_stats._weights_kernel import weighted_sums, weights_block_max


def _former(targets, n_resamples, rng, method, chunk_bytes):
    """The large-study path as it was before the block was reused: blocks of ``chunk_bytes // (4 Q)`` replicates
    and a remainder, each a new array from the kernel, the float32 product where it is exact, else float64."""
    q = targets[0].shape[0]
    joined = np.concatenate([np.asarray(t, dtype=float).reshape(q, -1) for t in targets], axis=1)
    out = np.empty((n_resamples, joined.shape[1]))
    seed = int(rng.integers(0, 2**63))
    step = max(1, int(chunk_bytes // (4 * q)))
    col_total = float(joined.sum(0).max())
    for start in range(0, n_resamples, step):
        r = min(step, n_resamples - start)
        w, top = weights_block_max(r, q, seed, start, method == "poisson")
        out[start:start + r] = w @ joined.astype(np.float32) if top * col_total < 2**24 else w.astype(float) @ joined
    widths = np.cumsum([0] + [np.reshape(t, (q, -1)).shape[1] for t in targets])
    return [out[:, a:b].reshape((n_resamples,) + np.shape(t)[1:]) for a, b, t in zip(widths[:-1], widths[1:], targets)]


def _targets(q, seed, high=4):
    rng = np.random.default_rng(seed)
    return [rng.integers(0, high, size=(q, 3, 5)), rng.integers(0, high, size=(q, 3, 5))]


@pytest.mark.parametrize("method", ["multinomial", "poisson"])
@pytest.mark.parametrize(("q", "n_resamples", "chunk_bytes"), [
    (700, 301, 700 * 8 * 100),     # blocks of 200 rows before (200 + 101), two of 151 now
    (997, 64, 997 * 8 * 3),        # blocks of 6 before (10 x 6 + 4), 11 of at most 6 now
    (313, 5, 313 * 8 * 2),         # one row more than a block
    (1500, 40, 1500 * 8 * 39),     # one block (all rows fit a float32 block)
    (2, 12, 64),                   # two queries: blocks of 8 before (8 + 4), two of 6 now
])
def test_replicates_equal_the_former_blocks_bit_for_bit(method, q, n_resamples, chunk_bytes):
    targets = _targets(q, q + n_resamples)
    new = resampled_counts(targets, n_resamples, np.random.default_rng(11), method=method, chunk_bytes=chunk_bytes)
    old = _former(targets, n_resamples, np.random.default_rng(11), method, chunk_bytes)
    for a, b in zip(new, old):
        assert a.dtype == b.dtype and a.shape == b.shape
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("shapes", [[(1,)], [(8,)], [(13,)], [(2, 3), (4,)], [(3, 5), (3, 5), (2,)]])
def test_counts_of_any_width_equal_the_former_product(shapes):
    # the float32 counts are padded with zero columns to a multiple of 8 for BLAS: every width gives the former sums
    q = 900
    rng = np.random.default_rng(len(shapes))
    targets = [rng.integers(0, 6, size=(q,) + shape) for shape in shapes]
    new = resampled_counts(targets, 70, np.random.default_rng(2), chunk_bytes=q * 8 * 30)
    old = _former(targets, 70, np.random.default_rng(2), "multinomial", q * 8 * 30)
    for a, b, t in zip(new, old, targets):
        assert a.shape == (70,) + t.shape[1:]
        np.testing.assert_array_equal(a, b)


def test_float64_products_where_float32_is_not_exact():
    # counts so large that a float32 sum could round: both paths take the float64 product, and agree
    q = 600
    targets = [np.random.default_rng(3).integers(0, 2**20, size=(q, 4))]
    new = resampled_counts(targets, 50, np.random.default_rng(5), chunk_bytes=q * 8 * 20)
    old = _former(targets, 50, np.random.default_rng(5), "multinomial", q * 8 * 20)
    np.testing.assert_array_equal(new[0], old[0])
    assert new[0].max() > 2**24     # the float64 product was needed


def test_counts_that_are_not_integers_take_the_former_path():
    # a weighted table's counts: float32 sums would round, in BLAS's order; the former blocks give the same numbers
    q = 700
    targets = [np.random.default_rng(4).random((q, 6)) * 3]
    new = resampled_counts(targets, 60, np.random.default_rng(8), chunk_bytes=q * 8 * 20)
    old = _former(targets, 60, np.random.default_rng(8), "multinomial", q * 8 * 20)
    np.testing.assert_array_equal(new[0], old[0])


@pytest.mark.parametrize("poisson", [False, True])
def test_weighted_sums_do_not_depend_on_buffers_or_threads(poisson):
    q = 1200
    counts = np.random.default_rng(6).integers(0, 5, size=(q, 11)).astype(float)
    w = weights_block_max(97, q, 2024, 0, poisson)[0].astype(float)
    expected = w @ counts                            # exact: integers far below 2^53
    for chunk_bytes in (1, 4 * q * 3, 64 * 2**20):   # buffers of 1, 1 or 3, and 64 replicates per thread
        np.testing.assert_array_equal(weighted_sums(counts, 97, 2024, poisson, chunk_bytes), expected)
    threads = numba.get_num_threads()
    try:
        numba.set_num_threads(1)
        np.testing.assert_array_equal(weighted_sums(counts, 97, 2024, poisson, 2**20), expected)
    finally:
        numba.set_num_threads(threads)
