"""Issue 37, fourth pass: a study of many small groups (240 files, one model each) draws the uniform chooser's null
of each group from the exact laws of its cluster-runs (``study_exact``), so its cost follows the rows, not groups x
clusters multinomial vectors. Checked: the route is taken only when the study's draws reach ``EXACT_MIN_DRAWS``
(small studies keep the numbers of their seed); the draws have the law of the multinomial ones (two-sample KS, group
and every cluster, with a run missing in some clusters); the same seed gives the same output; the Poisson weights
of the exact law are scipy's to the last bit.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from toolbias_stats.metrics import _vectorised as vec


def _multinomial_route(gen, n_cs, ks, n_null, missing):
    sims = vec.uniform_null_tv(gen, n_cs, ks, n_null)
    sims[:, missing] = np.nan
    return vec.nanmean(vec.nanmean(sims, 1), 1), vec.nanmean(sims, 2)


def test_study_threshold():
    assert not vec.study_exact_null(2000, 7, 10, 3)              # the 1M-row base shape: multinomial as before
    assert vec.study_exact_null(2000, 240, 10, 3)                # 240 groups of 10 clusters x 3 runs
    assert not vec.study_exact_null(0, 240, 10, 3)


def test_small_group_of_a_small_study_keeps_its_multinomial_draws():
    n_cs, ks = [np.array([30, 28, 29]), np.array([25, 26, 0])], [5, 4]
    missing = np.array([[False] * 3, [False, False, True]])
    got = vec.uniform_null_means(np.random.default_rng(3), n_cs, ks, 200, missing)
    ref = _multinomial_route(np.random.default_rng(3), n_cs, ks, 200, missing)
    np.testing.assert_array_equal(got[0], ref[0])
    np.testing.assert_array_equal(got[1], ref[1])


def test_study_exact_route_has_the_multinomial_law():
    rng = np.random.default_rng(11)
    n_cs = [rng.binomial(40, 0.9, 3).astype(np.int64) for _ in range(4)] + [np.array([31, 0, 33])]
    ks = [5, 3, 8, 5, 4]
    missing = np.zeros((5, 3), bool)
    missing[1, 2] = True                                          # a run missing in one cluster only
    n_null = 20_000
    stat, sims = vec.uniform_null_means(np.random.default_rng(1), n_cs, ks, n_null, missing, study_exact=True)
    ref_stat, ref_sims = _multinomial_route(np.random.default_rng(2), n_cs, ks, n_null, missing)
    assert len(np.unique(stat)) > 1000                            # not the multinomial stream: new draws
    assert stats.ks_2samp(stat.round(10), ref_stat.round(10)).pvalue > 1e-3
    assert min(stats.ks_2samp(sims[:, c].round(10), ref_sims[:, c].round(10)).pvalue for c in range(5)) > 2e-4
    # the group's statistic is the mean over runs of the mean over the clusters with that run
    np.testing.assert_allclose(stat.mean(), np.nanmean(ref_stat), rtol=0.01)


def test_study_exact_route_same_seed_same_draws_and_means():
    n_cs, ks = [np.array([12, 14, 13]), np.array([9, 0, 10])], [5, 5]
    missing = np.array([[False] * 3, [False, True, False]])
    a = vec.uniform_null_means(np.random.default_rng(5), n_cs, ks, 300, missing, study_exact=True)
    b = vec.uniform_null_means(np.random.default_rng(5), n_cs, ks, 300, missing, study_exact=True)
    np.testing.assert_array_equal(a[0], b[0])
    np.testing.assert_array_equal(a[1], b[1])
    assert np.isfinite(a[1]).all() and a[1].shape == (300, 2)
    # the group's statistic from the clusters' draws: run 2 has cluster 0 only, runs 1 and 3 both clusters; cluster
    # 1's mean is over its two valid runs, so the group's mean is not the mean of the clusters' means
    assert not np.allclose(a[0], a[1].mean(1))


def test_study_exact_route_falls_back_to_multinomial_when_a_law_is_too_large(monkeypatch):
    monkeypatch.setattr(vec, "EXACT_MAX_OPS", vec._pmf_ops(30, 5))
    n_cs, ks = [np.array([20, 22, 21]), np.array([400, 380, 390])], [5, 5]
    missing = np.zeros((2, 3), bool)
    got = vec.uniform_null_means(np.random.default_rng(4), n_cs, ks, 100, missing, study_exact=True)
    ref = _multinomial_route(np.random.default_rng(4), n_cs, ks, 100, missing)
    np.testing.assert_array_equal(got[0], ref[0])
    np.testing.assert_array_equal(got[1], ref[1])


def test_no_valid_run_gives_nan():
    stat, sims = vec.uniform_null_means(np.random.default_rng(0), [np.array([0, 0])], [5], 10,
                                        np.zeros((1, 2), bool), study_exact=True)
    assert np.isnan(stat).all() and np.isnan(sims).all()


@pytest.mark.parametrize(("n", "k"), [(1, 5), (24, 5), (140, 5), (60, 12), (4760, 40)])
def test_poisson_weights_are_scipys(n, k):
    x = np.arange(n + 1)
    np.testing.assert_array_equal(vec._poisson_pmf(x, n / k), stats.poisson.pmf(x, n / k))


def test_many_groups_end_to_end_size_and_seed(monkeypatch):
    """Through ``selection_bias``: a uniform chooser in 16 models (groups) of 4 clusters; the study's draws pass the
    (lowered) threshold, so every group takes the study-level exact route. Its p-values reject at 5% about 5% of
    the time (128 cluster and 32 group p-values; bounds ~3 MC SE) and the same seed gives the same result."""
    import warnings

    from toolbias_stats import SelectionLog
    from toolbias_stats.metrics import selection_bias
    from toolbias_stats.simulate import simulate_selection_log

    monkeypatch.setattr(vec, "EXACT_MIN_DRAWS", 16 * 4 * 3 * 400)         # the study reaches it, no group does
    sims = [simulate_selection_log(n_clusters=4, n_queries=8, n_runs=3, p_no_call=0.05, model=f"m{i}", rng=i)
            for i in range(16)]
    log = SelectionLog.concat([s.log for s in sims])
    calls = []
    real = vec._run_means
    monkeypatch.setattr(vec, "_run_means", lambda *a: calls.append(1) or real(*a))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = selection_bias(log, n_resamples=0, n_null=400, rng=5)
        again = selection_bias(log, n_resamples=0, n_null=400, rng=5)
    assert len(res.groups) == 16 and len(calls) == 2 * 2 * 16              # both metrics, every group, twice
    p_clusters = [getattr(c, m).p_value for g in res.groups for c in g.clusters for m in ("delta_api", "delta_pos")]
    p_groups = [getattr(g, m).p_value for g in res.groups for m in ("delta_api", "delta_pos")]
    assert 0.005 <= np.mean(np.array(p_clusters) <= 0.05) <= 0.11
    assert np.mean(np.array(p_groups) <= 0.05) <= 0.19
    assert 0.35 <= np.mean(p_clusters) <= 0.65                              # uniform p-values: mean 1/2
    assert [g.delta_api.p_value for g in res.groups] == [g.delta_api.p_value for g in again.groups]
    assert [c.delta_pos.p_value for g in res.groups for c in g.clusters] == \
        [c.delta_pos.p_value for g in again.groups for c in g.clusters]
