"""Holm's adjustment (toolbias_stats._multitest) equals statsmodels' multipletests(method="holm") bit for bit."""
import numpy as np
import pytest
from statsmodels.stats.multitest import multipletests

from toolbias_stats._multitest import holm_adjusted


@pytest.mark.parametrize("seed", range(20))
def test_equals_statsmodels(seed):
    gen = np.random.default_rng(seed)
    m = int(gen.integers(1, 60))
    p = gen.uniform(0, 1, m) ** gen.uniform(0.2, 4)
    p[gen.random(m) < 0.2] = p[0]          # ties
    p[gen.random(m) < 0.1] = 1.0
    np.testing.assert_array_equal(holm_adjusted(p), multipletests(p, method="holm")[1])


def test_known_values_and_edges():
    # m = 3: sorted 0.01, 0.02, 0.04 -> 0.03, 0.04, 0.04
    np.testing.assert_allclose(holm_adjusted([0.04, 0.01, 0.02]), [0.04, 0.03, 0.04])
    assert holm_adjusted([0.9, 0.8]).tolist() == [1.0, 1.0]
    assert holm_adjusted([0.3]).tolist() == [0.3]
    assert holm_adjusted(np.array([], dtype=float)).shape == (0,)
