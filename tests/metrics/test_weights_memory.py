"""The bootstrap of large studies with its weights written into one reused block (issue 37, 10M rows at 2,000
replicates): the replicates are bit for bit those of the former code (a fresh block per ``chunk_bytes`` of
replicates, drawn by :func:`weights_block_max`, times the counts in float32 or float64)."""

import numpy as np
import pytest

pytest.importorskip("numba")

from toolbias_stats import _resampling
from toolbias_stats._resampling import resampled_counts
from toolbias_stats._weights_kernel import weights_block, weights_block_max


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


def test_a_reused_block_never_carries_an_earlier_call_into_a_later_one():
    # a large call leaves its block; smaller, larger and other-width calls after it give the former numbers
    _resampling._BLOCKS.clear()
    calls = [(2000, 90, 11), (300, 41, 12), (2000, 90, 13), (2500, 120, 14), (301, 39, 15)]
    for q, r, seed in calls:
        targets = _targets(q, seed, high=3)
        chunk = q * 8 * 25
        assert q * r * 8 > chunk     # the compiled path (the NumPy one draws from `rng` in one block)
        new = resampled_counts(targets, r, np.random.default_rng(seed), chunk_bytes=chunk)
        old = _former(targets, r, np.random.default_rng(seed), "multinomial", chunk)
        for a, b in zip(new, old):
            np.testing.assert_array_equal(a, b)
        assert len(_resampling._BLOCKS) == 1
    assert _resampling._BLOCKS[0].size == 2500 * 40     # the largest block (3 blocks of 40 rows) kept, one only


def test_two_callers_never_share_the_held_block():
    _resampling._BLOCKS.clear()
    _resampling._BLOCKS.append(np.empty(1000, dtype=np.float32))
    first = _resampling._weights_memory(800)
    second = _resampling._weights_memory(800)     # the first has not put its block back: a new one
    assert not np.shares_memory(first, second)
    assert _resampling._weights_memory(2000).size == 2000


@pytest.mark.parametrize("poisson", [False, True])
def test_the_kernel_writes_every_weight_of_a_given_block(poisson):
    out = np.full((7, 333), np.nan, dtype=np.float32)    # garbage left by an earlier call
    w, top = weights_block_max(7, 333, 99, 4, poisson, out=out)
    assert w is out
    np.testing.assert_array_equal(w, weights_block(7, 333, 99, 4, poisson))
    assert top == w.max()


def test_a_block_of_the_wrong_shape_or_type_is_refused():
    with pytest.raises(ValueError, match="C-contiguous float32"):
        weights_block_max(3, 10, 1, 0, False, out=np.empty((3, 11), dtype=np.float32))
    with pytest.raises(ValueError, match="C-contiguous float32"):
        weights_block_max(3, 10, 1, 0, False, out=np.empty((3, 10)))
    with pytest.raises(ValueError, match="C-contiguous float32"):
        weights_block_max(3, 10, 1, 0, False, out=np.empty((10, 3), dtype=np.float32).T)
