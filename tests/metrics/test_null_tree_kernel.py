"""Issue 37, K = 40 tools per cluster: the uniform chooser's null drawn on a compiled binary tree of the tools
(``metrics/_null_kernel.py``) when the multinomial draws would count ``TREE_MIN_BINOMIALS`` binomials or more.
Checked: the binomial tables are scipy's law; the tree's TV has the exact law of ``tv_uniform_pmf`` (chi-square)
and the law of the multinomial draws it replaces (two-sample KS, at the k40 shape's n); a total beyond its table
gives the same draw; the same seed gives the same output; below the threshold the multinomial stream is kept bit
for bit; end to end the p-values reject at 5% about 5% of the time.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from toolbias_stats.metrics import _null_kernel as nk
from toolbias_stats.metrics import _vectorised as vec


@pytest.mark.parametrize(("t", "p"), [(0, 0.5), (1, 0.5), (7, 2 / 5), (231, 0.5), (346, 1 / 3), (4620, 0.5),
                                      (50_000, 0.5)])
def test_binomial_tables_are_scipys_law(t, p):
    buf = np.empty(t + 1)
    lo, size = nk._binomial_cdf(t, p, buf)
    x = np.arange(lo, lo + size)
    ref = stats.binom.cdf(x, t, p)
    np.testing.assert_allclose(buf[:size - 1], ref[:-1], rtol=0, atol=1e-12)
    assert buf[size - 1] == np.inf
    # the support cut leaves out less than 1e-15 of the probability on either side
    assert stats.binom.cdf(lo - 1, t, p) < 1e-15 and stats.binom.sf(lo + size - 1, t, p) < 1e-15


@pytest.mark.parametrize(("n", "k"), [(30, 5), (12, 40), (60, 7), (60, 40), (25, 3), (9, 2)])
def test_tree_draws_have_the_exact_law(n, k):
    """Chi-square of 40,000 draws against the exact law of the TV (``tv_uniform_pmf``), cells of expected >= 5."""
    draws = nk.tree_tv(np.array([n] * 4), k, 10_000, seed=n * 100 + k).ravel()
    e = np.rint(draws * n * k).astype(np.int64)                    # the lattice e / (n K)
    assert np.allclose(e / (n * k), draws, rtol=0, atol=1e-12)
    pmf = vec.tv_uniform_pmf(n, k)
    seen = np.bincount(e, minlength=pmf.size)
    expected = pmf * e.size
    big = expected >= 5
    obs = np.r_[seen[big], seen[~big].sum()]
    exp = np.r_[expected[big], expected[~big].sum()]
    keep = exp > 0
    assert stats.chisquare(obs[keep], exp[keep] * obs[keep].sum() / exp[keep].sum()).pvalue > 1e-3


def test_tree_route_has_the_multinomial_law_at_the_k40_shape():
    """Two-sample KS against the multinomial draws it replaces, at the k40 shape's valid choices per run."""
    n_cs = [np.array([4617, 4603, 4631]), np.array([4622, 0, 4610])]
    ks = [40, 40]
    a = vec.tree_null_tv(np.random.default_rng(1), n_cs, ks, 20_000)
    b = vec.uniform_null_tv(np.random.default_rng(2), n_cs, ks, 20_000)
    assert np.isnan(a[:, 1, 1]).all() and np.isfinite(a[:, 0]).all()
    for c, s in [(0, 0), (0, 1), (0, 2), (1, 0), (1, 2)]:
        assert stats.ks_2samp(a[:, c, s].round(10), b[:, c, s].round(10)).pvalue > 1e-3
    ma, mb = np.nanmean(np.nanmean(a, 1), 1), np.nanmean(np.nanmean(b, 1), 1)
    assert stats.ks_2samp(ma.round(10), mb.round(10)).pvalue > 1e-3
    valid = np.stack(n_cs) > 0
    np.testing.assert_allclose(a.mean(0)[valid], vec.uniform_expected_tv(n_cs, ks)[valid], rtol=5e-3)


def test_totals_beyond_their_table_give_the_same_draws(monkeypatch):
    """Tables of no margin: nearly every total below the root is drawn from the law computed on the spot, and the draws
    are those of the full tables (the same cumulative probabilities, the same uniforms)."""
    ns = np.array([57, 300, 301])
    full = nk.tree_tv(ns, 17, 500, seed=3)
    monkeypatch.setattr(nk, "_WIDTH_SD", 0.0)
    monkeypatch.setattr(nk, "_WIDTH_ADD", 0)
    nk.tables.cache_clear()
    try:
        narrow = nk.tree_tv(ns, 17, 500, seed=3)
    finally:
        nk.tables.cache_clear()
    np.testing.assert_array_equal(full, narrow)


def test_same_seed_same_draws_and_cells_independent_of_bands():
    ns = np.array([5, 4620, 40, 4700, 9000])
    a = nk.tree_tv(ns, 40, 300, seed=7)
    np.testing.assert_array_equal(a, nk.tree_tv(ns, 40, 300, seed=7))
    for j in range(ns.size):
        np.testing.assert_array_equal(a[:, j], nk.tree_tv(ns[j:j + 1], 40, 300, seed=7, first=j)[:, 0])
    assert not np.array_equal(a, nk.tree_tv(ns, 40, 300, seed=8))
    np.testing.assert_array_equal(nk.tree_tv(np.array([9, 9]), 1, 4, seed=0), np.zeros((4, 2)))


def test_threshold_keeps_the_multinomial_stream_below_it(monkeypatch):
    n_cs, ks = [np.array([4617, 4603, 4631])] * 10, [5] * 10             # the base shape: 240,000 binomials
    got = vec.null_tv_draws(np.random.default_rng(3), n_cs, ks, 2000)
    np.testing.assert_array_equal(got, vec.uniform_null_tv(np.random.default_rng(3), n_cs, ks, 2000))
    n_cs = [np.array([4617, 4603, 4631])] * 100                            # 2.4M binomials, but K < TREE_MIN_K
    got = vec.null_tv_draws(np.random.default_rng(3), n_cs, [5] * 100, 2000)
    np.testing.assert_array_equal(got, vec.uniform_null_tv(np.random.default_rng(3), n_cs, [5] * 100, 2000))
    n_cs, ks = [np.array([119, 120, 118])] * 10, [40] * 10               # 2,000 x 30 x 39 = 2.34M binomials
    got = vec.null_tv_draws(np.random.default_rng(3), n_cs, ks, 2000)
    np.testing.assert_array_equal(got, vec.tree_null_tv(np.random.default_rng(3), n_cs, ks, 2000))
    monkeypatch.setattr(vec, "TREE_MIN_BINOMIALS", 2000 * 30 * 39 + 1)    # one binomial short of it
    got = vec.null_tv_draws(np.random.default_rng(3), n_cs, ks, 2000)
    np.testing.assert_array_equal(got, vec.uniform_null_tv(np.random.default_rng(3), n_cs, ks, 2000))


def test_many_tools_end_to_end_size_and_seed(monkeypatch):
    """Through ``selection_bias``: a uniform chooser over 16 tools in 6 models (groups) of 4 clusters, the
    threshold lowered so that every group's null takes the tree. The p-values reject at 5% about 5% of the time
    (48 cluster and 12 group p-values per metric; bounds ~3 MC SE) and the same seed gives the same result."""
    import warnings

    from toolbias_stats import SelectionLog
    from toolbias_stats.metrics import selection_bias
    from toolbias_stats.simulate import simulate_selection_log

    monkeypatch.setattr(vec, "TREE_MIN_BINOMIALS", 1000)
    calls = []
    real = vec.tree_null_tv
    monkeypatch.setattr(vec, "tree_null_tv", lambda *a: calls.append(1) or real(*a))
    sims = [simulate_selection_log(n_clusters=4, n_tools=16, n_queries=5, n_runs=2, p_no_call=0.05,
                                   model=f"m{i}", rng=100 + i) for i in range(6)]
    log = SelectionLog.concat([s.log for s in sims])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = selection_bias(log, n_resamples=0, n_null=400, rng=5)
        again = selection_bias(log, n_resamples=0, n_null=400, rng=5)
    assert len(res.groups) == 6 and len(calls) == 2 * 2 * 6                # both metrics, every group, twice
    p_clusters = [getattr(c, m).p_value for g in res.groups for c in g.clusters for m in ("delta_api", "delta_pos")]
    p_groups = [getattr(g, m).p_value for g in res.groups for m in ("delta_api", "delta_pos")]
    assert np.mean(np.array(p_clusters) <= 0.05) <= 0.05 + 3 * np.sqrt(0.05 * 0.95 / len(p_clusters))
    assert np.mean(np.array(p_groups) <= 0.05) <= 0.05 + 3 * np.sqrt(0.05 * 0.95 / len(p_groups))
    assert 0.35 <= np.mean(p_clusters) <= 0.65                              # uniform p-values: mean 1/2
    assert [g.delta_api.p_value for g in res.groups] == [g.delta_api.p_value for g in again.groups]
    assert [c.delta_pos.p_value for g in res.groups for c in g.clusters] == \
        [c.delta_pos.p_value for g in again.groups for c in g.clusters]


def test_tables_too_large_keep_the_multinomial_draws():
    """Tens of thousands of choices per run with 40 tools: the tables would exceed ``TREE_MAX_ENTRIES``."""
    assert nk.table_entries(np.array([4617, 4603]), 40) <= vec.TREE_MAX_ENTRIES
    n_cs, ks = [np.array([47_600, 47_512, 47_633])] * 10, [40] * 10
    assert nk.table_entries(np.concatenate(n_cs), 40) > vec.TREE_MAX_ENTRIES
    got = vec.null_tv_draws(np.random.default_rng(3), n_cs, ks, 20)
    np.testing.assert_array_equal(got, vec.uniform_null_tv(np.random.default_rng(3), n_cs, ks, 20))
