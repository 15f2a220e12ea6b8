"""TV distances and the uniform-chooser reference, against theory and simulation."""

import numpy as np
import pytest
from scipy import stats

import toolbias_stats as tbs


class TestTvDistance:
    def test_known_values(self):
        assert tbs.tv_distance([1, 0], [0, 1]) == 1.0
        assert tbs.tv_distance([0.5, 0.5], [0.5, 0.5]) == 0.0
        assert tbs.tv_distance([0.7, 0.2, 0.1], [0.2, 0.3, 0.5]) == pytest.approx(0.5)

    def test_matches_scipy_wasserstein_free_definition(self):
        # TV = 1 - sum(min(p, q)) is an independent identity
        rng = np.random.default_rng(1)
        p, q = rng.dirichlet(np.ones(6), size=2)
        assert tbs.tv_distance(p, q) == pytest.approx(1 - np.minimum(p, q).sum())

    def test_vectorised_along_last_axis(self):
        p = np.array([[1, 0, 0], [1 / 3, 1 / 3, 1 / 3]])
        np.testing.assert_allclose(tbs.tv_to_uniform(p), [2 / 3, 0])


class TestTvToUniform:
    def test_degenerate_chooser_reaches_maximum(self):
        for k in (2, 3, 5, 10):
            p = np.zeros(k)
            p[0] = 1
            assert tbs.tv_to_uniform(p) == pytest.approx(1 - 1 / k)
            assert tbs.normalised_tv(tbs.tv_to_uniform(p), k) == pytest.approx(1.0)

    def test_paper_choosers(self):
        assert tbs.tv_to_uniform([0.40, 0.25, 0.15, 0.12, 0.08]) == pytest.approx(0.25)
        assert tbs.tv_to_uniform([0.22, 0.21, 0.20, 0.19, 0.18]) == pytest.approx(0.03)


class TestExpectedTvUniform:
    def test_issue_example(self):
        # "a perfectly uniform chooser with K=5 and 100 choices has E[TV] ~ 0.08"
        assert tbs.expected_tv_uniform(100, 5) == pytest.approx(0.0794, abs=5e-4)

    @pytest.mark.parametrize("n,k", [(20, 2), (100, 5), (37, 4)])
    def test_matches_monte_carlo(self, n, k):
        rng = np.random.default_rng(0)
        draws = rng.multinomial(n, np.full(k, 1 / k), size=200_000) / n
        mc = tbs.tv_to_uniform(draws)
        se = mc.std() / np.sqrt(len(mc))
        assert tbs.expected_tv_uniform(n, k) == pytest.approx(mc.mean(), abs=4 * se)

    def test_large_n_normal_approximation(self):
        # E|X/n - 1/k| -> sqrt(2/pi) * sqrt(p(1-p)/n) as n grows
        n, k = 20_000, 5
        p = 1 / k
        approx = 0.5 * k * np.sqrt(2 / np.pi) * np.sqrt(p * (1 - p) / n)
        assert tbs.expected_tv_uniform(n, k) == pytest.approx(approx, rel=2e-3)

    def test_zero_choices_is_nan_and_arrays_work(self):
        out = tbs.expected_tv_uniform(np.array([0, 10]), 2)
        assert np.isnan(out[0]) and out[1] == pytest.approx(stats.binom(10, 0.5).expect(lambda x: abs(x / 10 - 0.5)))
