"""The sixth attempt's experimental prior of the query mixture's free class weights (moved from
tests/models/test_bayes_warm.py in issue 38)."""

from __future__ import annotations

import numpy as np

from bayes_experimental._model import ExperimentalSpec as _ModelSpec


def test_split_class_prior_matches_scipy():
    """The experimental prior of the free class weights (epsilon ~ Beta(b1, b0), the needed tools' shares ~
    Dirichlet(a)): in the coordinates t (w = softmax(0, t)) its log density differs between two points as
    scipy's Beta + Dirichlet, minus log eps^(K - 1) (the change of variables), plus the softmax Jacobian."""
    import pytensor
    import pytensor.tensor as pt
    from scipy.stats import beta as sbeta
    from scipy.stats import dirichlet

    valid = np.array([[True, True, True, False], [True, True, True, True]])       # K = 3 and 4, Kmax = 4
    prior = (1.0, 1.5, 2.0)
    t = pt.matrix("t")
    z = pt.concatenate([pt.zeros((2, 1)), t + np.where(valid, 0.0, -1.0e4)], axis=1)
    lw = z - pt.logsumexp(z, axis=1, keepdims=True)
    vmask = np.concatenate([np.ones((2, 1)), valid.astype(float)], 1)
    dens = pytensor.function([t], (lw * vmask).sum() + _ModelSpec._split_class_prior(pt, lw, valid, prior))

    def reference(tv):
        total = 0.0
        for row, v in zip(tv, valid):
            w = np.exp(np.r_[0.0, row[v]] - np.logaddexp.reduce(np.r_[0.0, row[v]]))
            eps, k = 1.0 - w[0], v.sum()
            total += (sbeta.logpdf(eps, prior[0], prior[1]) + dirichlet.logpdf(w[1:] / eps, np.full(k, prior[2]))
                      - (k - 1) * np.log(eps) + np.log(w).sum())
        return total

    gen = np.random.default_rng(4)
    t1, t2 = gen.normal(size=(2, 4)), gen.normal(size=(2, 4))
    np.testing.assert_allclose(dens(t1) - dens(t2), reference(t1) - reference(t2), rtol=1e-9, atol=1e-9)
