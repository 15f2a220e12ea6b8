"""Bootstrap helpers against scipy.stats.bootstrap and a brute-force loop."""

import numpy as np
import pytest
from scipy import stats

from toolbias_stats._resampling import bca_ci, percentile_ci, query_weights


class TestQueryWeights:
    def test_rows_sum_to_units_and_are_reproducible(self):
        w1 = query_weights(7, 100, np.random.default_rng(3))
        w2 = query_weights(7, 100, np.random.default_rng(3))
        np.testing.assert_array_equal(w1, w2)
        np.testing.assert_array_equal(w1.sum(1), 7)

    def test_marginal_is_binomial(self):
        w = query_weights(10, 20_000, np.random.default_rng(0))
        # each unit is drawn Binomial(10, 1/10) times: mean 1, variance 0.9
        assert w.mean() == pytest.approx(1.0, abs=0.01)
        assert w[:, 0].var() == pytest.approx(0.9, rel=0.05)


class TestBcaCi:
    def test_matches_scipy_for_the_mean(self):
        rng = np.random.default_rng(42)
        x = rng.exponential(size=60)
        ref = stats.bootstrap((x,), np.mean, n_resamples=20_000, method="BCa", random_state=1).confidence_interval
        w = query_weights(len(x), 20_000, np.random.default_rng(2))
        boot = w @ x / len(x)
        jack = (x.sum() - x) / (len(x) - 1)
        ours = bca_ci(boot, x.mean(), jack, 0.95)
        assert ours.low == pytest.approx(ref.low, abs=0.02)
        assert ours.high == pytest.approx(ref.high, abs=0.02)

    def test_percentile_matches_scipy(self):
        rng = np.random.default_rng(5)
        x = rng.normal(size=80)
        ref = stats.bootstrap((x,), np.mean, n_resamples=20_000, method="percentile", random_state=1)
        w = query_weights(len(x), 20_000, np.random.default_rng(2))
        ours = percentile_ci(w @ x / len(x), 0.95)
        assert ours.low == pytest.approx(ref.confidence_interval.low, abs=0.02)
        assert ours.high == pytest.approx(ref.confidence_interval.high, abs=0.02)

    def test_all_replicates_one_side_falls_back_to_percentile(self):
        boot = np.linspace(1, 2, 101)
        assert bca_ci(boot, 0.5, np.ones(5), 0.9) == percentile_ci(boot, 0.9)
