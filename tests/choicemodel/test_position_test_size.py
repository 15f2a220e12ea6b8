"""Size of the tests of "no position effect" (issue 22 follow-up; large version: analyses/choice_model_size.py).

Under query heterogeneity with repeated runs of a list, the attempts of a query are dependent: the model-based
likelihood-ratio test referred to chi2(q) rejected a true null in about 20% of studies, and the clustered Wald
test referred to chi2(q) rejects too often with few queries. The tests now use the Rao-Scott design effect and
an F(q, G - q) reference (docs/choice_model.md, "Size of the test of no position effect").
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from scipy import stats

from toolbias_stats.choicemodel import choice_model, simulate_logit_log


def _fit(log, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return choice_model(log, by=None, **kw)


def _small_study(seed, positions=(0.0, 0.0, 0.0), query_sd=1.5):
    return simulate_logit_log(n_tools=5, set_size=3, n_queries=20, n_lists=3, n_runs=3, positions=list(positions),
                               query_sd=query_sd, rng=np.random.default_rng([7, seed]))


@pytest.fixture(scope="module")
def null_studies():
    """150 small studies (20 queries, 3 orders x 3 runs each) with query heterogeneity and no position effect."""
    rows = []
    for s in range(150):
        g = _fit(_small_study(s)).groups.iloc[0]
        q = int(g["wald_df"])
        rows.append(dict(lr_chi2=stats.chi2.sf(g["lr_stat"], q), wald_chi2=stats.chi2.sf(g["wald_stat"], q),
                         lr=g["lr_p"], wald=g["wald_p"], deff=g["lr_deff"]))
    return {k: np.array([r[k] for r in rows]) for k in rows[0]}


def test_lr_chi2_reference_was_oversized_under_query_heterogeneity(null_studies):
    # the failure the correction repairs: the model-based LR treats dependent attempts as independent
    assert np.mean(null_studies["lr_chi2"] <= 0.05) >= 0.12
    assert np.mean(null_studies["deff"]) > 1.2


def test_corrected_tests_hold_their_size(null_studies):
    # 150 studies: a correct 5% test rejects 7.5 on average; P(Bin(150, 0.05) >= 15) < 0.01
    for k in ("lr", "wald"):
        rate = np.mean(null_studies[k] <= 0.05)
        assert rate < 0.10, (k, rate)
    # and they are not degenerate: p-values of a true null spread over (0, 1)
    for k in ("lr", "wald"):
        assert 0.35 < np.median(null_studies[k]) < 0.65


def test_power_kept_with_a_position_effect():
    rej = []
    for s in range(30):
        g = _fit(_small_study(1000 + s, positions=(0.0, -1.0, -1.0))).groups.iloc[0]
        rej.append((g["wald_p"] <= 0.05, g["lr_p"] <= 0.05))
    assert np.mean(rej, axis=0).min() >= 0.7


def test_references_are_the_documented_formulas():
    """One position term (decay): d = se_sandwich^2 / se_model^2, computed from two independent fits."""
    log = _small_study(3, positions=(0.0, -0.3, -0.4))
    rob = _fit(log, position="decay")
    mod = _fit(log, position="decay", se="model")
    g, gm = rob.groups.iloc[0], mod.groups.iloc[0]
    G, q = int(g["n_queries"]), 1
    assert g["wald_df_resid"] == G - q
    assert g["wald_p"] == pytest.approx(stats.f.sf(g["wald_stat"] * (G - q) / (q * (G - 1)), q, G - q), rel=1e-10)
    d = (rob.position_effects["se"].iloc[1] / mod.position_effects["se"].iloc[1]) ** 2
    assert g["lr_deff"] == pytest.approx(d, rel=1e-8)
    assert g["lr_p"] == pytest.approx(stats.f.sf(g["lr_stat"] / (d * q), q, G - q), rel=1e-8)
    # model-based intervals: the chi2 references, no design effect
    assert gm["lr_deff"] == 1.0 and gm["wald_df_resid"] == np.inf
    assert gm["wald_p"] == pytest.approx(stats.chi2.sf(gm["wald_stat"], q), rel=1e-10)
    assert gm["lr_p"] == pytest.approx(stats.chi2.sf(gm["lr_stat"], q), rel=1e-10)


def test_mixed_logit_score_is_the_gradient_of_the_simulated_loglik():
    """The per-query scores that the faster mixed-logit fit reuses from its line search equal the finite-difference
    gradient of the simulated log-likelihood (same draws), for every coefficient and for sigma."""
    from toolbias_stats.choicemodel._fit import _mixed_grad, _mixed_ll, _MixedData

    rng = np.random.default_rng(5)
    C, K, P, n_q = 60, 3, 2, 12
    X = rng.normal(size=(C, K, P))
    mask = np.ones((C, K), bool)
    mask[:10, 2] = False                                     # some lists of two
    chosen = rng.integers(0, 2, C)
    w = rng.integers(1, 4, C).astype(float)
    query = np.repeat(np.arange(n_q), C // n_q)
    pair = query[:, None] * K + np.arange(K)[None]
    z = rng.standard_normal((20, n_q * K))
    d = _MixedData(X, mask, chosen, w, query, n_q, pair, np.concatenate([z, -z]))
    beta, sigma, prior = np.array([0.3, -0.5]), 0.8, np.zeros(P)
    _, _, state = _mixed_ll(beta, sigma, d, prior)
    sq, info = _mixed_grad(state, d, want_info=True)
    assert sq.shape == (n_q, P + 1) and info.shape == (P, P)
    theta, h, num = np.r_[beta, sigma], 1e-3, []
    for j in range(P + 1):
        e = np.zeros(P + 1)
        e[j] = h
        up = _mixed_ll((theta + e)[:P], (theta + e)[P], d, prior)[1]
        dn = _mixed_ll((theta - e)[:P], (theta - e)[P], d, prior)[1]
        num.append((up - dn) / (2 * h))
    np.testing.assert_allclose(sq.sum(axis=0), num, rtol=1e-4, atol=1e-3)
