"""Conditional and mixed logit likelihoods over weighted choice cells (NumPy; analytic scores and information).

Notation: ``X`` is (C, K, P), the regressors of the option shown at position j of cell c; ``mask`` (C, K) marks
real options (sets shorter than K are padded); ``chosen`` (C,) the chosen position; ``w`` (C,) the attempts in the
cell. The utility is ``X @ theta``; the choice probability the softmax over the options shown.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from scipy.special import logsumexp

__all__ = ["FitOutput", "fit_clogit", "fit_mixed", "clogit_parts", "cell_scores", "aggregate_cells"]

#: Largest |estimate| (log-odds) still treated as finite: beyond it a worth is reported as diverging.
DIVERGED = 20.0


@dataclass
class FitOutput:
    theta: np.ndarray
    loglik: float              # unpenalised log-likelihood at theta
    objective: float           # the penalised objective that was maximised
    info: np.ndarray           # Fisher information of the log-likelihood at theta (plus the prior precision)
    converged: bool
    n_iter: int
    sigma: float | None = None  # mixed logit: sd of the query x tool random effects
    bhhh: np.ndarray | None = None


def aggregate_cells(X, mask, chosen, w):
    """Merge cells with identical regressors and choice (the likelihood only needs their summed weight).

    Returns the merged (X, mask, chosen, w) and the index of the merged cell of every input cell.
    """
    c = X.shape[0]
    key = np.concatenate([X.reshape(c, -1), mask.astype(float), chosen[:, None].astype(float)], axis=1)
    _, first, inv = np.unique(key, axis=0, return_index=True, return_inverse=True)
    inv = inv.ravel()
    wa = np.bincount(inv, weights=w, minlength=len(first))
    return X[first], mask[first], chosen[first], wa, inv


def _probs(X, mask, theta):
    v = X @ theta
    v = np.where(mask, v, -np.inf)
    lse = logsumexp(v, axis=1, keepdims=True)
    logp = v - lse
    return np.exp(logp), logp


def clogit_parts(theta, X, mask, chosen, w, *, need_info=True):
    """Log-likelihood, score, information, probabilities and centred regressors of a conditional logit."""
    p, logp = _probs(X, mask, theta)
    rows = np.arange(X.shape[0])
    ll = float(np.sum(w * logp[rows, chosen]))
    xbar = np.einsum("ck,ckp->cp", p, X)
    score_c = X[rows, chosen] - xbar
    grad = w @ score_c
    if not need_info:
        return ll, grad, None, p, None
    D = X - xbar[:, None, :]
    info = np.einsum("ck,ckp,ckq->pq", p * w[:, None], D, D)
    return ll, grad, info, p, D


def cell_scores(theta, X, mask, chosen):
    """Per-cell score of one attempt (C, P): x_chosen - E_p[x]."""
    p, _ = _probs(X, mask, theta)
    rows = np.arange(X.shape[0])
    return X[rows, chosen] - np.einsum("ck,ckp->cp", p, X)


def _penalised(theta, X, mask, chosen, w, penalty, prior_prec):
    ll, grad, info, p, D = clogit_parts(theta, X, mask, chosen, w)
    obj, g, metric = ll, grad.copy(), info.copy()
    if penalty == "firth":
        sign, logdet = np.linalg.slogdet(info)
        if sign <= 0:
            return ll, -np.inf, g, metric, info
        A = np.linalg.inv(info)
        q = np.einsum("ckp,pq,ckq->ck", D, A, D)
        g = g + 0.5 * np.einsum("ck,ckp->p", p * q * w[:, None], D)
        obj = ll + 0.5 * logdet
    elif penalty == "prior":
        obj = ll - 0.5 * float(theta @ (prior_prec * theta))
        g = g - prior_prec * theta
        metric = info + np.diag(prior_prec)
    return ll, obj, g, metric, info


def fit_clogit(X, mask, chosen, w, *, penalty="firth", prior_prec=None, theta0=None, max_iter=100, tol=1e-9):
    """Maximise the (penalised) conditional-logit likelihood by Newton steps with step halving.

    ``penalty``: None (maximum likelihood), ``"firth"`` (Jeffreys-prior penalty ½·log det I) or ``"prior"``
    (independent normal priors with precisions ``prior_prec``). The Newton metric is the Fisher information
    (plus the prior precision), exact for ML and the prior and a standard quasi-Newton choice for Firth.
    """
    n_par = X.shape[2]
    prior_prec = np.zeros(n_par) if prior_prec is None else np.asarray(prior_prec, float)
    theta = np.zeros(n_par) if theta0 is None else np.array(theta0, float)
    ll, obj, g, metric, info = _penalised(theta, X, mask, chosen, w, penalty, prior_prec)
    converged = False
    it = 0
    for it in range(1, max_iter + 1):
        try:
            step = np.linalg.solve(metric, g)
        except np.linalg.LinAlgError:
            step = np.linalg.lstsq(metric, g, rcond=None)[0]
        if not np.all(np.isfinite(step)):
            break
        t = 1.0
        while True:
            cand = theta + t * step
            out = _penalised(cand, X, mask, chosen, w, penalty, prior_prec)
            if out[1] >= obj - 1e-12 * max(1.0, abs(obj)) or t < 1e-8:
                break
            t *= 0.5
        theta = cand
        dec = float(g @ step)
        ll, obj, g, metric, info = out
        if dec < tol and np.max(np.abs(t * step)) < 1e-6:
            converged = True
            break
        if np.max(np.abs(theta)) > 5 * DIVERGED:
            break
    if penalty == "prior":
        info = info + np.diag(prior_prec)
    return FitOutput(theta, ll, obj, info, converged and np.all(np.abs(theta) < DIVERGED), it)


# -- mixed logit ------------------------------------------------------------------------------------------
def _mixed_eval(beta, sigma, X, mask, chosen, w, pair, Z, S, query, n_q, prior_prec, want_grad=True):
    """Simulated log-likelihood of the query x tool random-effects logit, its per-query scores."""
    R = Z.shape[0]
    c = X.shape[0]
    rows = np.arange(c)
    v = X @ beta                                                  # (C, K)
    zc = Z[:, pair]                                               # (R, C, K)
    u = v[None] + sigma * zc
    u = np.where(mask[None], u, -np.inf)
    lse = logsumexp(u, axis=2, keepdims=True)
    logp = u - lse                                                # (R, C, K)
    lpc = logp[:, rows, chosen]                                   # (R, C)
    lq = (S @ lpc.T).T                                            # (R, Q): sum over the query's cells, weighted
    Lq = logsumexp(lq, axis=0) - np.log(R)
    obj = float(Lq.sum()) - 0.5 * float(beta @ (prior_prec * beta))
    if not want_grad:
        return obj, float(Lq.sum())
    omega = np.exp(lq - (Lq + np.log(R))[None])                   # (R, Q) posterior weights of the draws
    p = np.exp(logp)
    om_c = omega[:, query]                                        # (R, C)
    pbar = np.einsum("rc,rck->ck", om_c, p)
    s_beta = X[rows, chosen] - np.einsum("ck,ckp->cp", pbar, X)
    s_sig = np.einsum("rc,rc->c", om_c, zc[:, rows, chosen] - np.einsum("rck,rck->rc", p, np.where(mask[None], zc, 0)))
    s_cell = np.concatenate([s_beta, s_sig[:, None]], axis=1) * w[:, None]
    sq = np.zeros((n_q, s_cell.shape[1]))
    np.add.at(sq, query, s_cell)
    return obj, float(Lq.sum()), sq


def fit_mixed(X, mask, chosen, w, query, n_q, pair, n_pairs, *, rng, n_draws=200, prior_prec=None, beta0=None,
              sigma0=0.5, max_iter=200, tol=1e-7):
    """Mixed logit with independent N(0, sigma^2) query x tool effects, by simulated maximum likelihood.

    The random effects of one query are shared by all its attempts (its lists and runs), which is what lets
    the model separate a query's stable preference from position effects. ``n_draws`` antithetic normal draws
    per (query, tool) pair; maximised by BHHH steps (the outer product of per-query scores) with step halving.
    """
    P = X.shape[2]
    prior_prec = np.zeros(P) if prior_prec is None else np.asarray(prior_prec, float)
    half = max(1, n_draws // 2)
    z = rng.standard_normal((half, n_pairs))
    Z = np.concatenate([z, -z], axis=0)
    S = sp.csr_matrix((w, (query, np.arange(len(w)))), shape=(n_q, len(w)))
    theta0 = np.concatenate([np.zeros(P) if beta0 is None else np.asarray(beta0, float), [sigma0]])
    args = (X, mask, chosen, w, pair, Z, S, query, n_q, prior_prec)
    pp = np.concatenate([prior_prec, [0.0]])
    cache = {}

    def fun(th):
        obj, ll, sq = _mixed_eval(th[:-1], th[-1], *args)
        cache["last"] = (th.copy(), obj, ll, sq)
        g = sq.sum(axis=0) - pp * th
        return -obj, -g

    from scipy.optimize import minimize
    bounds = [(None, None)] * P + [(0.0, 20.0)]
    opt = minimize(fun, theta0, jac=True, method="L-BFGS-B", bounds=bounds,
                   options=dict(maxiter=max_iter, gtol=1e-6, ftol=1e-12, maxcor=30))
    theta = opt.x
    obj, ll, sq = _mixed_eval(theta[:-1], theta[-1], *args)
    converged = bool(opt.success) or float(np.max(np.abs(sq.sum(axis=0) - pp * theta)[:-1])) < 1e-3
    it = int(opt.nit)
    B = sq.T @ sq + np.diag(pp)
    return FitOutput(theta[:-1], ll, obj, B[:-1, :-1], converged and np.all(np.abs(theta) < DIVERGED), it,
                     sigma=float(theta[-1]), bhhh=B)
