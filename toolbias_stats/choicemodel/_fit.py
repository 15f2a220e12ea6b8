"""Conditional and mixed logit likelihoods over weighted choice cells (NumPy; analytic scores and information).

Notation: ``X`` is (C, K, P), the regressors of the option shown at position j of cell c; ``mask`` (C, K) marks
real options (sets shorter than K are padded); ``chosen`` (C,) the chosen position; ``w`` (C,) the attempts in the
cell. The utility is ``X @ theta``; the choice probability the softmax over the options shown.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

import numpy as np

# scipy.sparse and scipy.special are imported where a fit uses them: `validate` imports this module (through the
# comparison graph) and fits nothing (issue 37: a quarter of a second of its start).

__all__ = ["FitOutput", "fit_clogit", "fit_mixed", "mixed_sandwich", "clogit_parts", "cell_scores",
           "aggregate_cells"]

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
    hessian: np.ndarray | None = None  # mixed logit: minus the Hessian of the objective (finite differences)
    scores: np.ndarray | None = None   # mixed logit: per-query scores of the log-likelihood at theta (Q, P + 1)


def aggregate_cells(X, mask, chosen, w, key=None):
    """Merge cells with identical regressors and choice (the likelihood only needs their summed weight).

    ``key`` (C, m) integer codes that determine a cell's regressors (the tools shown, design codes); by
    default the regressors themselves. Returns the merged (X, mask, chosen, w) and the index of the merged
    cell of every input cell.
    """
    import pandas as pd

    c = X.shape[0]
    if key is None:
        key = np.concatenate([X.reshape(c, -1), mask.astype(float)], axis=1)
    frame = pd.DataFrame(np.column_stack([key, chosen]))
    inv = frame.groupby(list(frame.columns), sort=False).ngroup().to_numpy()
    first = np.unique(inv, return_index=True)[1]
    wa = np.bincount(inv, weights=w, minlength=len(first))
    return X[first], mask[first], chosen[first], wa, inv


def _probs(X, mask, theta):
    v = X @ theta
    v = np.where(mask, v, -np.inf)
    from scipy.special import logsumexp

    lse = logsumexp(v, axis=1, keepdims=True)
    logp = v - lse
    return np.exp(logp), logp


def clogit_parts(theta, X, mask, chosen, w, *, need_info=True):
    """Log-likelihood, score, information, probabilities and centred regressors of a conditional logit."""
    p, logp = _probs(X, mask, theta)
    rows = np.arange(X.shape[0])
    ll = float(np.sum(w * logp[rows, chosen]))
    xbar = np.matmul(p[:, None, :], X)[:, 0, :]
    score_c = X[rows, chosen] - xbar
    grad = w @ score_c
    if not need_info:
        return ll, grad, None, p, None
    D = X - xbar[:, None, :]
    P = X.shape[2]
    Df = D.reshape(-1, P)
    info = Df.T @ (Df * (p * w[:, None]).reshape(-1, 1))
    return ll, grad, info, p, D


def cell_scores(theta, X, mask, chosen):
    """Per-cell score of one attempt (C, P): x_chosen - E_p[x]."""
    p, _ = _probs(X, mask, theta)
    rows = np.arange(X.shape[0])
    return X[rows, chosen] - np.matmul(p[:, None, :], X)[:, 0, :]


def _penalised(theta, X, mask, chosen, w, penalty, prior_prec):
    ll, grad, info, p, D = clogit_parts(theta, X, mask, chosen, w)
    obj, g, metric = ll, grad.copy(), info.copy()
    if penalty == "firth":
        sign, logdet = np.linalg.slogdet(info)
        if sign <= 0:
            return ll, -np.inf, g, metric, info
        A = np.linalg.inv(info)
        q = ((D @ A) * D).sum(axis=2)
        g = g + 0.5 * (p * q * w[:, None]).reshape(-1) @ D.reshape(-1, D.shape[2])
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
    for it in range(1, max_iter + 1):  # noqa: B007 (the count is returned)
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
class _MixedData:
    """Draws gathered per cell and option once (they do not change during the fit).

    Laid out option-major, (K, R, C): the reductions over the few options of a list are then sums of K
    contiguous (R, C) slices, much faster than reductions over a short last axis.
    """

    def __init__(self, X, mask, chosen, w, query, n_q, pair, Z):
        self.X, self.mask, self.chosen, self.w, self.query, self.n_q = X, mask, chosen, w, query, n_q
        self.rows = np.arange(X.shape[0])
        self.K = X.shape[1]
        # float32 for the (K, R, C) arrays: half the memory traffic; sums over queries are done in float64
        Zt = np.ascontiguousarray(Z.T, dtype=np.float32)                                      # (pairs, R)
        zc = Zt[pair.T]                                                                       # (K, C, R)
        zc[~mask.T] = 0.0
        self.Zc = np.ascontiguousarray(zc.transpose(0, 2, 1))                                 # (K, R, C)
        self.Zch = np.take_along_axis(self.Zc, chosen[None, None, :], axis=0)[0]              # (R, C)
        self.pad = np.where(mask, 0.0, -np.inf)
        self.Xch = X[self.rows, chosen]
        import scipy.sparse as sp

        self.S = sp.csr_matrix((w, (query, self.rows)), shape=(n_q, len(w)))
        # unweighted query x cell indicator: per-query sums of per-cell scores (faster than np.add.at)
        self.Q1 = sp.csr_matrix((np.ones(len(w)), (query, self.rows)), shape=(n_q, len(w)))
        self.R = Z.shape[0]


def _mixed_ll(beta, sigma, d: _MixedData, prior_prec):
    """Simulated log-likelihood of the query x tool random-effects logit (and what its gradient reuses)."""
    v = d.X @ beta + d.pad                                        # (C, K)
    v32 = v.astype(np.float32)
    s32 = np.float32(sigma)
    u = [v32[:, k][None] + s32 * d.Zc[k] for k in range(d.K)]     # K x (R, C)
    m = u[0].copy()
    for k in range(1, d.K):
        np.maximum(m, u[k], out=m)
    e = [np.exp(uk - m) for uk in u]
    tot = e[0].copy()
    for k in range(1, d.K):
        tot += e[k]
    lpc = ((v32[d.rows, d.chosen][None] + s32 * d.Zch) - m - np.log(tot)).astype(np.float64)   # (R, C)
    lq = (d.S @ lpc.T).T                                          # (R, Q)
    from scipy.special import logsumexp

    Lq = logsumexp(lq, axis=0) - np.log(d.R)
    obj = float(Lq.sum()) - 0.5 * float(beta @ (prior_prec * beta))
    return obj, float(Lq.sum()), (e, tot, lq, Lq)


def _mixed_grad(state, d: _MixedData, want_info=False):
    """Per-query scores (Q, P + 1) at the point ``state`` was computed at; optionally the Newton metric."""
    e, tot, lq, Lq = state
    omega = np.exp(lq - (Lq + np.log(d.R))[None])                 # (R, Q) posterior weights of the draws
    om_q = omega[:, d.query].astype(np.float32)
    om_c = om_q / tot                                             # (R, C), folds in the softmax denominator
    pbar = np.stack([(om_c * e[k]).sum(axis=0) for k in range(d.K)], axis=1).astype(np.float64)     # (C, K)
    s_beta = d.Xch - np.matmul(pbar[:, None, :], d.X)[:, 0, :]
    ez = e[0] * d.Zc[0]
    for k in range(1, d.K):
        ez += e[k] * d.Zc[k]
    s_sig = ((om_q * d.Zch).sum(axis=0) - (om_c * ez).sum(axis=0)).astype(np.float64)
    s_cell = np.concatenate([s_beta, s_sig[:, None]], axis=1) * d.w[:, None]
    sq = np.asarray(d.Q1 @ s_cell)
    if not want_info:
        return sq, None
    # information of the conditional logit at the draw-averaged probabilities: a positive-definite Newton
    # metric for beta (BHHH alone converges slowly when some worths are large); only the start metric
    xbar = np.matmul(pbar[:, None, :], d.X)[:, 0, :]
    D = (d.X - xbar[:, None, :]).reshape(-1, d.X.shape[2])
    info = D.T @ (D * (pbar * d.w[:, None]).reshape(-1, 1))
    return sq, info


def fit_mixed(X, mask, chosen, w, query, n_q, pair, n_pairs, *, rng, n_draws=100, prior_prec=None, beta0=None,
              sigma0=1.0, max_iter=100, tol=1e-5):
    """Mixed logit with independent N(0, sigma^2) query x tool effects, by simulated maximum likelihood.

    The random effects of one query are shared by all its attempts (its lists and runs), which is what lets
    the model separate a query's stable preference from position effects. ``n_draws`` antithetic normal draws
    per (query, tool) pair; maximised by quasi-Newton steps (a BHHH start for sigma, queries being
    independent) with step halving, started from the conditional-logit estimates. The returned ``hessian`` and
    ``scores`` give the query-clustered sandwich (:func:`mixed_sandwich`).
    """
    P = X.shape[2]
    prior_prec = np.zeros(P) if prior_prec is None else np.asarray(prior_prec, float)
    half = max(1, n_draws // 2)
    z = rng.standard_normal((half, n_pairs))
    d = _MixedData(X, mask, chosen, w, query, n_q, pair, np.concatenate([z, -z], axis=0))
    pp = np.concatenate([prior_prec, [0.0]])
    theta = np.concatenate([np.zeros(P) if beta0 is None else np.asarray(beta0, float), [sigma0]])
    obj, ll, state = _mixed_ll(theta[:-1], theta[-1], d, prior_prec)
    sq, info = _mixed_grad(state, d, want_info=True)
    converged = False
    it = 0
    g = sq.sum(axis=0) - pp * theta
    # metric: block-diagonal start (p-bar information for beta, BHHH for sigma), then BFGS updates with the
    # exact simulated gradient (the block start ignores the beta-sigma coupling; BFGS learns it)
    M = np.zeros((P + 1, P + 1))
    M[:-1, :-1] = info + np.diag(prior_prec)
    M[-1, -1] = max(float(sq[:, -1] @ sq[:, -1]), 1e-8)
    for _ in range(1, max_iter + 1):
        step = np.linalg.lstsq(M, g, rcond=None)[0]
        if float(g @ step) <= 0:
            B = sq.T @ sq + np.diag(pp)
            M = B
            step = np.linalg.lstsq(B, g, rcond=None)[0]
        if float(g @ step) < tol:
            converged = True
            break
        t = 1.0
        while True:
            cand = theta + t * step
            cand[-1] = abs(cand[-1])
            new = _mixed_ll(cand[:-1], cand[-1], d, prior_prec)
            if new[0] >= obj or t < 1e-4:
                break
            t *= 0.5
        if new[0] < obj:                 # no ascent along the direction: at the optimum (up to simulation)
            converged = float(g @ step) < 1e-3
            break
        obj, ll, state = new                  # the accepted point's likelihood terms, reused for its gradient
        sq, _ = _mixed_grad(state, d)
        g_new = sq.sum(axis=0) - pp * cand
        sv, yv = cand - theta, g - g_new          # y: change of the negative gradient (minimisation form)
        sy = float(sv @ yv)
        if sy > 1e-12:
            Ms = M @ sv
            M = M - np.outer(Ms, Ms) / float(sv @ Ms) + np.outer(yv, yv) / sy
        theta, g = cand, g_new
    B = sq.T @ sq + np.diag(pp)
    boundary = abs(float(theta[-1])) <= SIGMA_BOUNDARY
    H = _mixed_information(theta, d, prior_prec, pp, only_beta=boundary)
    return FitOutput(theta[:-1], ll, obj, B[:-1, :-1], converged and np.all(np.abs(theta) < DIVERGED), it,
                     sigma=float(abs(theta[-1])), bhhh=B, hessian=H, scores=sq)


#: Random-effect sd at or below which the mixed logit is at its boundary (no query heterogeneity).
SIGMA_BOUNDARY = 1e-3


def _mixed_information(theta, d: _MixedData, prior_prec, pp, *, only_beta=False):
    """Minus the Hessian of the simulated objective at ``theta``, in closed form (Louis' identity).

    With ``L_q = mean_r exp(l_rq)`` (``l_rq`` the log-likelihood of query ``q``'s attempts under draw ``r``, a
    conditional logit in ``x_rck = (X_ck, z_rck)``) and posterior draw weights ``w_rq``:
    ``-d2 log L_q = sum_r w_rq (-d2 l_rq) - Var_w(g_rq)``, where ``-d2 l_rq`` is the logit information
    ``sum_c n_c sum_k p_rck (x_rck - xbar_rc)(x_rck - xbar_rc)'`` and ``g_rq`` the score of query ``q`` under draw
    ``r``. The first term needs only per-cell K x K sums over draws; the second one small product per query.
    Equal to central differences of the analytic gradient (``tests/choicemodel/test_heterogeneity.py``) at a
    fraction of their cost. ``only_beta``: the ``sigma`` row and column are 0 (the boundary ``sigma = 0``).
    """
    K, P = d.K, d.X.shape[2]
    _, _, (e, tot, lq, Lq) = _mixed_ll(theta[:-1], theta[-1], d, prior_prec)
    omega = np.exp(lq - (Lq + np.log(d.R))[None])                   # (R, Q)
    om = omega[:, d.query].astype(np.float32)                       # (R, C)
    p = np.stack([ek / tot for ek in e], axis=2)                    # (R, C, K)
    X, w = d.X, d.w
    zc = np.moveaxis(d.Zc, 0, 2)                                    # (R, C, K)
    zbar = (p * zc).sum(axis=2)                                     # (R, C)
    A = np.zeros((P + 1, P + 1))
    # beta block: sum_c n_c X_c' (diag(pbar_c) - Q_c) X_c, Q_c[k, j] = sum_r w_r p_rck p_rcj
    pw = p * om[:, :, None]
    M = np.einsum("rck,rcj->ckj", pw, p, dtype=np.float64)
    M = np.einsum("ck,kj->ckj", pw.sum(axis=0, dtype=np.float64), np.eye(K)) - M
    Y = np.einsum("ckj,cjp->ckp", M * w[:, None, None], X)
    A[:P, :P] = X.reshape(-1, P).T @ Y.reshape(-1, P)
    a = (pw * (zc - zbar[:, :, None])).sum(axis=0, dtype=np.float64)                # (C, K)
    A[:P, P] = np.einsum("ck,ckp->p", a * w[:, None], X)
    A[P, :P] = A[:P, P]
    A[P, P] = float(w @ (om * ((p * zc * zc).sum(axis=2) - zbar * zbar)).sum(axis=0, dtype=np.float64))
    # posterior variance of the per-draw query scores, one query at a time
    g_sig = np.asarray(d.S @ (d.Zch - zbar).T.astype(np.float64))  # (Q, R)
    Xw = X * w[:, None, None]
    ch = d.S @ d.Xch                                                # (Q, P)
    order = np.argsort(d.query, kind="stable")
    cuts = np.searchsorted(d.query[order], np.arange(d.n_q + 1))
    B = np.zeros((P + 1, P + 1))
    for q in range(d.n_q):
        idx = order[cuts[q]:cuts[q + 1]]
        if not len(idx):
            continue
        G = np.empty((d.R, P + 1))
        G[:, :P] = ch[q][None] - p[:, idx, :].reshape(d.R, -1) @ Xw[idx].reshape(-1, P)
        G[:, P] = g_sig[q]
        wq = omega[:, q]
        gbar = wq @ G
        B += (G * wq[:, None]).T @ G - np.outer(gbar, gbar)
    H = A - B + np.diag(pp)
    if only_beta:
        H[-1, :] = 0.0
        H[:, -1] = 0.0
    return 0.5 * (H + H.T)


def mixed_sandwich(fit: FitOutput) -> tuple[np.ndarray, np.ndarray]:
    """``(sandwich, model-based)`` covariance of the mixed logit's ``(beta, sigma)`` (scaled regressors).

    Sandwich: ``H^-1 (G/(G-1) sum_q s_q s_q') H^-1`` with ``H`` minus the Hessian of the objective and ``s_q``
    the score of query ``q`` (the unit: its attempts share the random effects, and a position effect that
    varies between queries makes them dependent beyond the model). Model-based: ``H^-1``. At the boundary
    ``sigma = 0`` only the ``beta`` block is returned (``sigma``'s row and column are NaN); the sandwich then
    equals the conditional logit's query-clustered sandwich at the same estimates.
    """
    H, sq = cast(np.ndarray, fit.hessian), cast(np.ndarray, fit.scores)
    G = sq.shape[0]
    boundary = not np.any(H[-1])
    k = H.shape[0] - (1 if boundary else 0)
    try:
        bread = np.linalg.inv(H[:k, :k])
    except np.linalg.LinAlgError:
        bread = np.linalg.pinv(H[:k, :k])
    meat = sq[:, :k].T @ sq[:, :k] * (G / max(G - 1, 1))
    sand = np.full(H.shape, np.nan)
    model = np.full(H.shape, np.nan)
    sand[:k, :k] = bread @ meat @ bread
    model[:k, :k] = bread
    return sand, model
