"""Issue 37, K = 40 without numba: the NumPy port of the tree null (``metrics/_null_tree_numpy.py``) against the
compiled kernel (``metrics/_null_kernel.py``), bit for bit: the binomial laws, the tables, the draws over many
(n, K, seed, first) cases (K = 1, 2, odd K, n = 1, large n, totals at the bands' edges, totals beyond their
tables), and the dispatch; and, in a fresh interpreter, a k40-like study without replicates that takes the tree
without importing numba, with the numbers it gives once numba is loaded.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest

from toolbias_stats.metrics import _null_kernel as nk
from toolbias_stats.metrics import _null_tree_numpy as tn
from toolbias_stats.metrics import _vectorised as vec


@pytest.fixture
def fresh_tables():
    """Empty the ports' caches before and after (a test that changes the tables' widths)."""
    tn._layout.cache_clear()
    tn.tables.cache_clear()
    yield
    tn._layout.cache_clear()
    tn.tables.cache_clear()


@pytest.mark.parametrize(("t", "p"), [(1, 0.5), (2, 0.5), (7, 2 / 5), (8, 1 / 3), (231, 0.5), (346, 1 / 3),
                                      (4620, 0.5), (50_000, 0.5), (1001, 3 / 7), (60_000, 1 / 3)])
def test_binomial_laws_are_the_kernels(t, p):
    buf = np.empty(t + 1)
    lo, size = nk._binomial_cdf(t, p, buf)
    cdf, low = tn._law(t, p)
    assert low == lo and cdf.size == size
    assert np.array_equal(cdf, buf[:size])             # every bit, the infinite last value included


def test_laws_of_many_totals_at_once_are_each_totals():
    """One pass over a range of totals (the tables' build) gives each total's law alone."""
    ts = np.arange(1, 400)
    cdfs, lows = tn._laws(ts, 2 / 5)
    for t, cdf, low in zip(ts.tolist(), cdfs, lows.tolist()):
        alone, alone_low = tn._law(t, 2 / 5)
        assert low == alone_low and np.array_equal(cdf, alone)


@pytest.mark.parametrize(("k", "lo", "hi"), [(40, 4608, 4735), (17, 288, 303), (3, 0, 15), (2, 49152, 50175),
                                             (33, 16, 31), (64, 1024, 1087)])
def test_tables_are_the_kernels(k, lo, hi):
    for mine, theirs in zip(tn.tables(k, lo, hi), nk.tables(k, lo, hi)):
        assert mine.dtype == theirs.dtype if isinstance(mine, np.ndarray) else True
        np.testing.assert_array_equal(mine, theirs)


CASES = [
    (np.array([10, 200]), 40, 3, 1, 0),
    (np.array([1]), 2, 7, 0, 0),                                        # n = 1, K = 2
    (np.array([1, 1, 1]), 40, 9, 4, 0),                                 # n = 1, many tools
    (np.array([1, 2, 3]), 3, 5, 5, 2),                                  # odd K, tiny n
    (np.array([9, 9]), 1, 4, 0, 0),                                     # K = 1: TV 0
    (np.array([15, 16, 31, 32, 63, 64, 4607, 4608, 4735, 4736]), 40, 31, 11, 0),   # the bands' edges
    (np.array([5, 4620, 40, 4700, 9000]), 40, 301, 7, 0),              # several bands, odd n_null
    (np.array([57, 300, 301]), 17, 500, 3, 0),
    (np.array([20_000]), 2, 11, 9, 3),                                  # large n
    (np.array([6_001, 9_999]), 33, 5, 12, 0),                           # large n, odd K
    (np.array([33, 7, 1000]), 5, 99, 2**63 - 1, 10**6),                 # the largest seed, a far first cell
    (np.array([4617, 4603, 4631] * 4), 40, 400, 123, 0),                # the k40 shape's totals
    (np.array([100, 101]), 7, 1, 2**40, 5),                             # one draw
    (np.array([777]), 64, 50, 6, 0),                                    # a power of two of tools
]


@pytest.mark.parametrize(("ns", "k", "n_null", "seed", "first"), CASES)
def test_draws_are_the_kernels_bit_for_bit(ns, k, n_null, seed, first):
    want = nk.tree_tv(ns, k, n_null, seed, first)
    got = tn.tree_tv(ns, k, n_null, seed, first)
    assert got.shape == want.shape and np.array_equal(got, want)


def test_totals_beyond_their_tables_are_the_kernels(monkeypatch, fresh_tables):
    """Tables without margins: most totals below the root are drawn from laws computed on the spot, and the
    draws are the compiled kernel's (with its full tables)."""
    ns = np.array([57, 300, 301])
    want = nk.tree_tv(ns, 17, 60, seed=3)
    monkeypatch.setattr(tn, "WIDTH_SD", 0.0)
    monkeypatch.setattr(tn, "WIDTH_ADD", -5)                            # empty ranges below the root
    _, laws = tn._layout(17, 288, 303)
    assert any(law.rows == 0 for law in laws)
    np.testing.assert_array_equal(tn.tree_tv(ns, 17, 60, seed=3), want)


def test_chunks_do_not_change_the_draws(monkeypatch):
    ns = np.array([4617, 4603, 30])
    want = tn.tree_tv(ns, 40, 70, seed=5)
    monkeypatch.setattr(tn, "_CHUNK", 100)                              # a few draws per pass
    np.testing.assert_array_equal(tn.tree_tv(ns, 40, 70, seed=5), want)


def test_bad_input_and_empty():
    with pytest.raises(ValueError, match="n >= 1"):
        tn.tree_tv(np.array([3, 0]), 5, 2, seed=0)
    assert tn.tree_tv(np.array([], dtype=np.int64), 5, 3, seed=0).shape == (3, 0)
    assert tn.tree_tv(np.array([4]), 5, 0, seed=0).shape == (0, 1)


def test_dispatch(monkeypatch):
    """The compiled kernel where numba is loaded or a call is large; otherwise the port."""
    assert vec._tree_sampler(10) is nk.tree_tv                          # numba is loaded here
    monkeypatch.delitem(sys.modules, "numba")
    assert vec._tree_sampler(vec.TREE_NUMPY_MAX_BINOMIALS, vec.TREE_NUMPY_MAX_ENTRIES) is tn.tree_tv
    assert vec._tree_sampler(vec.TREE_NUMPY_MAX_BINOMIALS + 1) is nk.tree_tv
    assert vec._tree_sampler(10, vec.TREE_NUMPY_MAX_ENTRIES + 1) is nk.tree_tv
    # the k40 shape's calls: 2,000 draws x 30 cells x 39 binomials, its tables
    ns = np.array([4617, 4603, 4631] * 10)
    assert vec._tree_sampler(2000 * 30 * 39, tn.table_entries(ns, 40)) is tn.tree_tv


def test_tree_null_tv_is_the_same_on_both_routes(monkeypatch):
    n_cs, ks = [np.array([4617, 0, 4631]), np.array([120, 118, 119]), np.array([30, 31, 0])], [40, 40, 17]
    compiled = vec.tree_null_tv(np.random.default_rng(4), n_cs, ks, 300)
    monkeypatch.setattr(vec, "_tree_sampler", lambda binomials, entries: tn.tree_tv)
    np.testing.assert_array_equal(vec.tree_null_tv(np.random.default_rng(4), n_cs, ks, 300), compiled)


def test_a_k40_study_without_replicates_does_not_import_numba():
    """In a fresh interpreter: 40 tools in 10 clusters x 3 runs take the tree (2,000 x 30 x 39 binomials), by the
    port; numba is not imported. Loaded afterwards, the compiled kernel gives the same result."""
    code = textwrap.dedent("""
        import sys, warnings
        import toolbias_stats
        from toolbias_stats.metrics import selection_bias
        from toolbias_stats.simulate import simulate_selection_log
        from toolbias_stats.metrics import _vectorised as vec

        log = simulate_selection_log(n_clusters=10, n_tools=40, n_queries=3, n_runs=3, p_no_call=0.05,
                                     model="m", rng=1).log
        calls = []
        real = vec.tree_null_tv
        vec.tree_null_tv = lambda *a: calls.append(1) or real(*a)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res = selection_bias(log, n_resamples=0, rng=7).to_dict()
        assert "numba" not in sys.modules, "numba imported"
        assert "toolbias_stats.metrics._null_kernel" not in sys.modules
        assert len(calls) == 2, calls                          # both metrics took the tree
        import numba  # noqa: F401 - now the compiled kernel draws
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            again = selection_bias(log, n_resamples=0, rng=7).to_dict()
        assert "toolbias_stats.metrics._null_kernel" in sys.modules and len(calls) == 4
        assert repr(res) == repr(again)
        print("OK")
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip().endswith("OK")
