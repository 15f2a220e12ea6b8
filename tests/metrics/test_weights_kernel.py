"""The compiled bootstrap weights (many queries): replicates are independent streams, drawn in parallel."""

import numpy as np
import pytest

pytest.importorskip("numba")

from toolbias_stats.metrics._weights_kernel import weights_block


@pytest.mark.parametrize("poisson", [False, True])
def test_a_replicate_does_not_depend_on_its_block_or_thread(poisson):
    whole = weights_block(40, 1001, 12345, 0, poisson)
    parts = np.concatenate([weights_block(13, 1001, 12345, 0, poisson), weights_block(27, 1001, 12345, 13, poisson)])
    np.testing.assert_array_equal(whole, parts)
    np.testing.assert_array_equal(whole[7:9], weights_block(2, 1001, 12345, 7, poisson))


def test_multinomial_weights_draw_q_queries_uniformly():
    w = weights_block(400, 50, 7, 0, False)
    assert (w.sum(1) == 50).all()                       # Q queries drawn with replacement in every replicate
    # each query is drawn Binomial(50, 1/50) times: mean 1, variance 0.98
    assert abs(w.mean() - 1) < 0.02 and abs(w.var() - 0.98) < 0.05


def test_poisson_weights_have_mean_and_variance_one():
    w = weights_block(400, 500, 3, 0, True)
    assert abs(w.mean() - 1) < 0.01 and abs(w.var() - 1) < 0.02
