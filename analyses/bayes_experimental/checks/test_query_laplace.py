"""The query-Laplace model's building blocks: the Laplace approximation against brute-force integration, the
Newton optimum, its gradient (the implicit-function step) and the population-implied delta at zero effects."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import log_softmax, logsumexp

from bayes_experimental.query_laplace import (
    laplace_query_marginal,
    population_implied,
)


def _query(rng, k, sd, runs=3, alpha_sd=1.0):
    """One query shown in the k cyclic rotations, ``runs`` attempts each: tool-space logits and counts."""
    a = rng.normal(0, alpha_sd, k)
    b = np.linspace(0.8, -0.8, k)
    u = rng.normal(0, sd, k)
    lt = np.zeros((k, k))
    y = np.zeros((k, k))
    for o in range(k):
        perm = np.roll(np.arange(k), -o)
        lt[o, perm] = a[perm] + b
        y[o] = rng.multinomial(runs, np.exp(log_softmax(lt[o] + u)))
    return lt, y


def _brute_force(lt, y, sd, half_width=9.0, n=361):
    """log int prod_o Mult(y_o | softmax(l_o + u)) N(u | 0, sd^2 I) du for K = 3 (no multinomial coefficient).

    The integrand depends on u only through its zero-sum part: with an orthonormal basis B of the zero-sum plane,
    u = B v + s 1 / sqrt(3), v ~ N(0, sd^2 I_2) and s integrates out to 1; v on a fine grid (trapezoid).
    """
    B = np.array([[1, -1, 0], [1, 1, -2]], dtype=float)
    B /= np.linalg.norm(B, axis=1, keepdims=True)
    g = np.linspace(-half_width * sd, half_width * sd, n)
    v1, v2 = np.meshgrid(g, g, indexing="ij")
    v = np.stack([v1.ravel(), v2.ravel()], 1)
    u = v @ B
    ll = (y[None] * log_softmax(lt[None] + u[:, None, :], axis=-1)).sum((-1, -2))
    lprior = -0.5 * (v ** 2).sum(1) / sd ** 2 - np.log(2 * np.pi * sd ** 2)
    h = g[1] - g[0]
    return float(logsumexp(ll + lprior) + 2 * np.log(h))


@pytest.mark.parametrize("sd", [0.5, 1.0, 2.0])
def test_laplace_matches_brute_force(sd):
    rng = np.random.default_rng(7)
    errs = []
    for _ in range(5):
        lt, y = _query(rng, 3, sd)
        lm, _, _ = laplace_query_marginal(lt[None], y[None], y.sum(-1)[None], np.array([1 / sd ** 2]))
        errs.append(float(lm[0]) - _brute_force(lt, y, sd))
    errs = np.array(errs)
    # measured: |error| <= 0.01 (sd 0.5), 0.05 (sd 1), 0.12 (sd 2) nats per query; Laplace is below the integral
    assert np.abs(errs).max() < {0.5: 0.02, 1.0: 0.06, 2.0: 0.15}[sd]
    assert errs.max() < 0.005


def test_laplace_no_data_is_exact_and_optimum_converged():
    rng = np.random.default_rng(1)
    lt = rng.normal(size=(4, 3, 3))
    y = np.zeros((4, 3, 3))
    lm, u, _ = laplace_query_marginal(lt, y, y.sum(-1), np.full(4, 2.0))
    np.testing.assert_allclose(lm, 0.0, atol=1e-12)                 # the prior integrates to 1
    np.testing.assert_allclose(u, 0.0, atol=1e-12)
    # with data, a large scale and a query that always gets one tool: the gradient vanishes at u*
    lt, y = _query(rng, 4, 3.0)
    y[:] = 0
    y[:, 0] = 3
    lm, u, _ = laplace_query_marginal(lt[None], y[None], y.sum(-1)[None], np.array([1 / 9.0]))
    p = np.exp(log_softmax(lt + u[0], axis=-1))
    g = (y - y.sum(-1)[:, None] * p).sum(0) - u[0] / 9.0
    assert np.abs(g).max() < 1e-8


def test_pytensor_gradient_matches_finite_differences():
    """The sampled log-density differentiates only the last Newton step (implicit function theorem): its gradient
    with respect to the logits and the scale must equal finite differences of the converged Laplace value."""
    import pytensor
    import pytensor.tensor as pt
    from pytensor.gradient import disconnected_grad

    rng = np.random.default_rng(3)
    qs = [_query(rng, 4, 1.0) for _ in range(3)]
    lt0 = np.stack([q[0] for q in qs])
    y = np.stack([q[1] for q in qs])
    n = y.sum(-1)
    x = pt.dtensor3("lt")
    s = pt.dscalar("s2inv")
    lm, _, _ = laplace_query_marginal(x, y, n, s * pt.ones((3,)), xp=pt, stop=disconnected_grad)
    mode = pytensor.compile.mode.Mode(linker="py", optimizer="fast_compile")      # no C compilation
    f = pytensor.function([x, s], [lm.sum(), *pytensor.grad(lm.sum(), [x, s])], mode=mode)
    val, gx, gs = f(lt0, 0.8)

    def num(lt, s2):
        return float(laplace_query_marginal(lt, y, n, np.full(3, s2))[0].sum())

    assert abs(val - num(lt0, 0.8)) < 1e-9
    eps = 1e-6
    for idx in [(0, 0, 1), (1, 2, 3), (2, 3, 0)]:
        d = np.zeros_like(lt0)
        d[idx] = eps
        assert abs(gx[idx] - (num(lt0 + d, 0.8) - num(lt0 - d, 0.8)) / (2 * eps)) < 1e-5
    assert abs(gs - (num(lt0, 0.8 + eps) - num(lt0, 0.8 - eps)) / (2 * eps)) < 1e-5


def test_population_implied_zero_without_effects():
    """No tool effects: delta_API is 0 under balanced rotations whatever the position and query effects; no
    position effects: delta_pos is 0 whatever the tool and query effects."""
    from toolbias_stats.models import simulate_bayes_log
    from toolbias_stats.models.bayes._common import MODEL_VARIANTS
    from toolbias_stats.models.bayes._design import _attach_prompts, _design
    from toolbias_stats.models.bayes._fit import _counts_and_rows

    log = simulate_bayes_log(np.zeros((2, 2, 4)), np.zeros((2, 4)), queries=3, runs=2, rng=0)
    counts, rows = _counts_and_rows(log, MODEL_VARIANTS["v2"])
    D = _attach_prompts(_design(counts, ["model"], "exclude"), rows, ["model"], "exclude")
    alpha = np.zeros((1, 2, 2, 4))
    alpha[0, 1, 0] = [1.0, 0.0, -0.5, -0.5]
    beta = np.zeros((1, 2, 2, 4))
    beta[0, 0] = [0.9, 0.1, -0.2, -0.8]
    api, pos = population_implied(alpha, beta, np.array([[1.5, 0.7]]), D)
    assert abs(api[0, 0]).max() < 1e-12                              # LLM 1: no tool effects
    assert abs(pos[0, 1]).max() < 1e-12                              # LLM 2: no position effects
    assert api[0, 1, 0] > 0.05 and pos[0, 0].min() > 0.05
