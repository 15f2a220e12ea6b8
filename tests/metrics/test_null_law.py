"""Issue 37: the uniform chooser's null drawn from its exact law has the law of the multinomial draws it replaces.

Many clusters made the null cost follow clusters x runs (n_null multinomial vectors per cluster and run: 91% of the
2,000-cluster shape). Past :data:`EXACT_MIN_DRAWS` draws each cluster's mean over runs is drawn from its exact law
instead. Checked here: the per-run law against full enumeration of the multinomial and the exact expectation, the
cluster law's moments, two-sample KS tests against direct multinomial draws, the size of the p-value under a
uniform chooser, the same output for the same seed, and the multinomial route kept below the threshold and where
the means do not factor.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import stats

from toolbias_stats.metrics import _vectorised as vec
from toolbias_stats.metrics._tv import expected_tv_uniform


def _enumerated(n, k):
    """P(TV = e / (n K)) by enumerating every count vector (the multinomial pmf summed per value of e)."""
    p = np.zeros(n * (k - 1) + 1)
    for head in itertools.product(range(n + 1), repeat=k - 1):
        if sum(head) > n:
            continue
        x = (*head, n - sum(head))
        prob = math.factorial(n) / math.prod(math.factorial(v) for v in x) / k ** n
        p[sum(max(k * v - n, 0) for v in x)] += prob
    return p


@pytest.mark.parametrize(("n", "k"), [(1, 2), (4, 2), (9, 3), (7, 4), (11, 5), (5, 7), (3, 1)])
def test_per_run_law_is_the_enumerated_multinomial(n, k):
    np.testing.assert_allclose(vec.tv_uniform_pmf(n, k), _enumerated(n, k), rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize(("n", "k"), [(1, 5), (24, 5), (97, 5), (60, 12), (25, 40), (150, 3)])
def test_per_run_law_mean_is_the_exact_expectation(n, k):
    p = vec.tv_uniform_pmf(n, k)
    assert p.sum() == pytest.approx(1.0, abs=1e-12)
    assert p @ (np.arange(p.size) / (n * k)) == pytest.approx(expected_tv_uniform(n, k), rel=1e-11)


def test_cluster_law_is_the_law_of_the_mean_over_runs():
    ns, k = (21, 24, 24, 25), 5
    values, probs = vec._cluster_law(ns, k)
    laws = [(np.arange(vec.tv_uniform_pmf(n, k).size) / (n * k), vec.tv_uniform_pmf(n, k)) for n in ns]
    mean = sum(v @ p for v, p in laws) / len(ns)
    var = sum(v ** 2 @ p - (v @ p) ** 2 for v, p in laws) / len(ns) ** 2
    assert probs.sum() == pytest.approx(1.0, abs=1e-12)
    assert values @ probs == pytest.approx(mean, rel=1e-12)
    assert (values - mean) ** 2 @ probs == pytest.approx(var, rel=1e-9)
    assert np.all(np.diff(values) > 0)


def _study(rng, n_clusters, n_runs=3, k_choices=(5, 5, 3, 8)):
    ks = [int(rng.choice(k_choices)) for _ in range(n_clusters)]
    n_cs = [rng.binomial(26, 0.9, n_runs).astype(np.int64) for _ in range(n_clusters)]
    return n_cs, ks


def _multinomial_route(gen, n_cs, ks, n_null, missing):
    sims = vec.uniform_null_tv(gen, n_cs, ks, n_null)
    sims[:, missing] = np.nan
    return vec.nanmean(vec.nanmean(sims, 1), 1), vec.nanmean(sims, 2)


def test_exact_route_draws_pass_ks_against_multinomial_draws(monkeypatch):
    monkeypatch.setattr(vec, "EXACT_MIN_DRAWS", 0)
    n_cs, ks = _study(np.random.default_rng(5), 12)
    missing = np.zeros((12, 3), bool)
    missing[:, 2] = True                                    # a run without any valid choice: left out everywhere
    stat, sims = vec.uniform_null_means(np.random.default_rng(1), n_cs, ks, 20_000, missing)
    ref_stat, ref_sims = _multinomial_route(np.random.default_rng(2), n_cs, ks, 20_000, missing)
    assert stats.ks_2samp(stat, ref_stat).pvalue > 1e-3
    # the same values computed two ways differ in the last bits: rounded, so that equal values tie
    sims, ref_sims = sims.round(10), ref_sims.round(10)
    pvals = [stats.ks_2samp(sims[:, c], ref_sims[:, c]).pvalue for c in range(12)]
    assert min(pvals) > 1e-3 / 12                           # Bonferroni over the clusters
    # moments of the group statistic: mean within 4 standard errors, variance ratio within 5%
    se = ref_stat.std() / np.sqrt(len(ref_stat))
    assert abs(stat.mean() - ref_stat.mean()) < 4 * np.sqrt(2) * se
    assert stat.var() / ref_stat.var() == pytest.approx(1.0, abs=0.05)


def test_p_value_size_under_a_uniform_chooser(monkeypatch):
    """600 studies of a uniform chooser: the group p-value read from the exact-law null rejects at 5% about 5% of
    the time (binomial 99.9% band 2.6%-8.0% at 600; the statistic is discrete, so at most nominal)."""
    monkeypatch.setattr(vec, "EXACT_MIN_DRAWS", 0)
    rng = np.random.default_rng(11)
    n_cs, ks = _study(rng, 30)
    missing = np.zeros((30, 3), bool)
    observed = vec.uniform_null_tv(rng, n_cs, ks, 600).mean(1).mean(1)      # 600 studies' statistics at once
    rejected = []
    for stat in observed:
        null, _ = vec.uniform_null_means(rng, n_cs, ks, 199, missing)
        rejected.append((1 + np.sum(null >= stat - 1e-12)) / 200 <= 0.05)
    assert 0.026 <= np.mean(rejected) <= 0.08


def test_same_seed_same_draws_and_the_small_route_unchanged(monkeypatch):
    n_cs, ks = _study(np.random.default_rng(3), 8)
    missing = np.zeros((8, 3), bool)
    # below the threshold: bit for bit the multinomial route (the numbers of earlier versions)
    small = vec.uniform_null_means(np.random.default_rng(4), n_cs, ks, 50, missing)
    ref = _multinomial_route(np.random.default_rng(4), n_cs, ks, 50, missing)
    np.testing.assert_array_equal(small[0], ref[0])
    np.testing.assert_array_equal(small[1], ref[1])
    monkeypatch.setattr(vec, "EXACT_MIN_DRAWS", 0)
    a = vec.uniform_null_means(np.random.default_rng(4), n_cs, ks, 50, missing)
    b = vec.uniform_null_means(np.random.default_rng(4), n_cs, ks, 50, missing)
    np.testing.assert_array_equal(a[0], b[0])
    np.testing.assert_array_equal(a[1], b[1])
    np.testing.assert_allclose(a[0], a[1].mean(1), rtol=1e-13)


def test_runs_missing_in_some_clusters_only_take_per_run_exact_draws(monkeypatch):
    """The group's mean does not factor through the clusters' means: each cluster-run from its own law."""
    monkeypatch.setattr(vec, "EXACT_MIN_DRAWS", 0)
    n_cs, ks = _study(np.random.default_rng(6), 6)
    n_cs[2][1] = 0                                           # cluster 2 has no valid choice in run 1
    missing = np.array([n == 0 for n in n_cs])
    assert vec._cluster_weights(~missing) is None
    stat, sims = vec.uniform_null_means(np.random.default_rng(8), n_cs, ks, 20_000, missing)
    ref_stat, ref_sims = _multinomial_route(np.random.default_rng(9), n_cs, ks, 20_000, missing)
    assert stats.ks_2samp(stat, ref_stat).pvalue > 1e-3
    assert min(stats.ks_2samp(sims[:, c].round(10), ref_sims[:, c].round(10)).pvalue for c in range(6)) > 1e-3 / 6
    monkeypatch.setattr(vec, "EXACT_MAX_OPS", 0)              # no law computable: the multinomial route, as before
    got = vec.uniform_null_means(np.random.default_rng(8), n_cs, ks, 40, missing)
    ref = _multinomial_route(np.random.default_rng(8), n_cs, ks, 40, missing)
    np.testing.assert_array_equal(got[0], ref[0])
    np.testing.assert_array_equal(got[1], ref[1])


def test_clusters_too_large_for_an_exact_law_keep_multinomial_draws(monkeypatch):
    monkeypatch.setattr(vec, "EXACT_MIN_DRAWS", 0)
    monkeypatch.setattr(vec, "EXACT_MAX_OPS", vec._pmf_ops(30, 5))
    vec._cluster_sampler.cache_clear()
    try:
        n_cs = [np.array([20, 22, 21]), np.array([400, 380, 390])]
        stat, sims = vec.uniform_null_means(np.random.default_rng(1), n_cs, [5, 5], 4000, np.zeros((2, 3), bool))
    finally:
        vec._cluster_sampler.cache_clear()
    big = sims[:, 1]
    assert len(np.unique(big)) > 100                       # multinomial draws (many distinct means)
    assert big.mean() == pytest.approx(np.mean([expected_tv_uniform(n, 5) for n in n_cs[1]]), rel=0.02)
    np.testing.assert_allclose(stat, sims.mean(1), rtol=1e-13)


def test_inverse_cdf_values_equal_searchsorted():
    rng = np.random.default_rng(0)
    probs = np.r_[rng.random(50), np.full(3000, 1e-9), rng.random(20)]   # a bucket with many tiny probabilities
    values = rng.random(probs.size)
    sampler = vec._value_table(values, probs / probs.sum())
    u = np.r_[rng.random(300 * 700 - 3), 0.0, 1 - 2.0 ** -53, sampler.cdf[100]].reshape(300, 700)
    np.testing.assert_array_equal(vec.inverse_cdf_values(u, sampler),
                                  values[np.searchsorted(sampler.cdf, u, side="right")])


def test_clusters_whose_law_is_too_large_draw_each_run_from_its_own_law(monkeypatch):
    monkeypatch.setattr(vec, "EXACT_MIN_DRAWS", 0)
    monkeypatch.setattr(vec, "EXACT_MAX_SUPPORT", 500)      # a run's law (<= 97 values) fits, a cluster's does not
    vec._cluster_sampler.cache_clear()
    try:
        n_cs = [np.array([21, 24, 25]), np.array([22, 23, 26])]
        stat, sims = vec.uniform_null_means(np.random.default_rng(1), n_cs, [5, 5], 20_000, np.zeros((2, 3), bool))
    finally:
        vec._cluster_sampler.cache_clear()
    ref_stat, ref_sims = _multinomial_route(np.random.default_rng(2), n_cs, [5, 5], 20_000, np.zeros((2, 3), bool))
    assert stats.ks_2samp(stat.round(10), ref_stat.round(10)).pvalue > 1e-3
    assert min(stats.ks_2samp(sims[:, c].round(10), ref_sims[:, c].round(10)).pvalue for c in range(2)) > 5e-4
