"""The Polya-urn replications of the posterior predictive checks (``_summaries._polya``).

Checked against the urn written the direct way (a cumulative sum over the categories: the same picks for the
same random numbers) and against the Dirichlet-multinomial's moments.
"""

from __future__ import annotations

import numpy as np
import pytest

from toolbias_stats.models.bayes._summaries import _polya


def _direct(p, n, kappa, gen):
    """Attempt t picks j with probability (kappa p_j + c_j) / (kappa + t): the first j whose cumulative sum
    reaches a uniform draw."""
    s, U, P = p.shape
    counts = np.zeros((s, U, P))
    for t in range(int(n.max())):
        w = p if kappa is None else kappa[..., None] * p + counts
        cum = np.cumsum(w, -1) / (1.0 if kappa is None else kappa[..., None] + t)
        u = gen.random((s, U, 1))
        pick = np.minimum((u > cum).sum(-1), P - 1)
        counts += (pick[..., None] == np.arange(P)) & (n > t)[None, :, None]
    return counts


@pytest.mark.parametrize("dirichlet", [True, False])
def test_same_picks_as_the_direct_urn(dirichlet):
    rng = np.random.default_rng(7)
    s, U, P = 6, 400, 5
    p = rng.dirichlet(np.ones(P), size=(s, U))
    p[:, :50, 3:] = 0.0                                        # lists of three tools: positions 4 and 5 not shown
    p[:, :50] /= p[:, :50].sum(-1, keepdims=True)
    n = rng.integers(1, 5, size=U)
    kappa = rng.gamma(1.0, 2.0, size=(s, U)) if dirichlet else None
    got = _polya(p, n, kappa, np.random.default_rng(3))
    want = _direct(p, n, kappa, np.random.default_rng(3))
    np.testing.assert_array_equal(got, want)
    assert got.shape == (s, U, P) and (got[:, :50, 3:] == 0).all()
    np.testing.assert_array_equal(got.sum(-1), np.broadcast_to(n, (s, U)))


def test_dirichlet_multinomial_moments():
    p = np.array([0.5, 0.3, 0.2])
    n, kappa, S = 3, 1.5, 200_000
    draws = _polya(np.broadcast_to(p, (S, 1, 3)).copy(), np.array([n]), np.full((S, 1), kappa),
                   np.random.default_rng(11))[:, 0]
    var = n * p * (1 - p) * (n + kappa) / (1 + kappa)          # Dirichlet-multinomial variance
    se_mean = np.sqrt(var / S)
    np.testing.assert_allclose(draws.mean(0), n * p, atol=4 * se_mean.max())
    np.testing.assert_allclose(draws.var(0), var, rtol=0.03)
