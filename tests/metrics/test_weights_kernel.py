"""The compiled bootstrap weights (many queries): replicates are independent streams, drawn in parallel."""

import numpy as np
import pytest

pytest.importorskip("numba")

from toolbias_stats._weights_kernel import weights_block


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


def _splitmix_reference(n_rows, q, seed, first, poisson):
    """The documented stream in plain Python integers: SplitMix64 per replicate, Lemire's bounded integers for the
    multinomial weights, inversion of Poisson(1) for the Poisson ones (an independent implementation)."""
    import math

    mask, golden = 2**64 - 1, 0x9E3779B97F4A7C15

    def mix(z):
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & mask
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & mask
        return z ^ (z >> 31)

    out = np.zeros((n_rows, q))
    for i in range(n_rows):
        state = mix((seed + mix((first + i + golden) & mask)) & mask)
        for j in range(q):
            if poisson:
                state = (state + golden) & mask
                u = (mix(state) >> 11) * (1.0 / 2**53)
                k, p = 0, math.exp(-1.0)
                cdf = p
                while u > cdf and k < 60:
                    k += 1
                    p /= k
                    cdf += p
                out[i, j] = k
            else:
                while True:
                    state = (state + golden) & mask
                    m = (mix(state) >> 32) * q
                    if (m & 0xFFFFFFFF) >= (2**32 - q) % q:
                        break
                out[i, (m >> 32)] += 1
    return out


@pytest.mark.parametrize("poisson", [False, True])
@pytest.mark.parametrize("q", [1, 7, 300])
def test_weights_equal_an_independent_implementation_of_the_stream(poisson, q):
    np.testing.assert_array_equal(weights_block(5, q, 2**62 + 12345, 3, poisson),
                                  _splitmix_reference(5, q, 2**62 + 12345, 3, poisson))
