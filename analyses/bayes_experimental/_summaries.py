"""Summaries of the experimental variants: the query mixture's class probabilities and weights, fresh query
effects for the replications, the query-level urn's replications and the per-query log-likelihoods of the urn and
the mixture (moved out of ``toolbias_stats.models.bayes._summaries`` / ``_loglik`` in issue 38)."""

from __future__ import annotations

import numpy as np
from scipy import sparse

from toolbias_stats.models.bayes._common import _zerosum_extend
from toolbias_stats.models.bayes._loglik import _row_logp
from toolbias_stats.models.bayes._summaries import _unit_logits

from . import _variants as V


def _mixture_weights(post, design, a=None, b=None):
    """Class weights (s, M * C, Kmax + 1) of the query mixture for draws a:b: ``1 - epsilon`` (indifferent),
    then ``epsilon * softmax(alpha)[j]`` (needs tool j; 0 for tools a cluster does not have)."""
    D = design
    if "class_weights" in post:                                                 # free weights per cell
        cw = post["class_weights"][a:b]
        return cw.reshape(cw.shape[0], D.M * D.C, D.Kmax + 1)
    al = post["alpha"][a:b]                                                     # (s, M, C, Kmax), NaN padding
    valid = np.arange(D.Kmax)[None, :] < D.K[:, None]
    z = np.where(valid[None, None], al if V._MIXTURE_TIED else 0.0, -np.inf)
    z = np.exp(z - z.max(-1, keepdims=True))
    pi = z / z.sum(-1, keepdims=True)
    eps = post["epsilon"][a:b]
    w = np.concatenate([(1.0 - eps)[..., None], eps[..., None] * pi], -1)
    return w.reshape(w.shape[0], D.M * D.C, D.Kmax + 1)


def _boost(post, a, b, llm, cluster):
    """The query mixture's boost ``lambda`` (s, U) of draws a:b for units of the given LLMs and clusters: per LLM
    (``lambda`` (S, M)) or per (LLM, cluster) (``lambda`` (S, M, C), ``model="query-mixture-id"``)."""
    lam = post["lambda"][a:b]
    return lam[:, llm, cluster] if lam.ndim == 3 else lam[:, llm]


def _mixture_class_onehot(design, rows):
    """(U, P, Kmax + 1): 1 where class k >= 1 boosts the tool shown at the position (class 0: nothing)."""
    D = design
    t = D.row_tools[rows]
    return np.concatenate([np.zeros(t.shape + (1,)), (t[:, :, None] == np.arange(D.Kmax)[None, None, :])], -1)


def _mixture_probs(post, design, a, b, rows):
    """Per-class choice probabilities (s, U, P, Kmax + 1) of the given design rows and the class weights
    (s, U, Kmax + 1) of their cells."""
    D = design
    logits, mask = _unit_logits(post, D, a, b, "rows")
    logits = logits[:, rows]
    mask = mask[rows]
    lam = _boost(post, a, b, D.row_llm[rows], D.row_cluster[rows])              # (s, U)
    lg = logits[..., None] + lam[:, :, None, None] * _mixture_class_onehot(D, rows)[None]
    z = np.where(mask[None, :, :, None], lg, -np.inf)
    z = np.exp(z - z.max(2, keepdims=True))
    p = z / z.sum(2, keepdims=True)
    w = _mixture_weights(post, D, a, b)[:, D.row_llm[rows] * D.C + D.row_cluster[rows]]
    return p, w


def _fresh_eta(post, spec, draws, gen):
    """Query effects of new queries (from the fitted population) for the given draws: (len(draws), Q, Kmax)."""
    D = spec.design
    pr = D.prompts
    eta = np.zeros((len(draws), pr.Q, D.Kmax))
    for g in spec.qgroups:
        k = g["k"]
        if getattr(spec, "shared", False):
            # a new query is new for every LLM: one fresh latent vector per shared query
            z = gen.standard_normal((len(draws), g["n_shared"], k - 1))[:, g["shared"]]
        else:
            z = gen.standard_normal((len(draws), len(g["queries"]), k - 1))
        eta[:, g["queries"], :k] = post["sigma_eta"][draws][:, g["llm"]][..., None] * _zerosum_extend(z, np)
    return eta


def _urn_slots(prompts):
    """(Q, n_max) the prompt of each attempt slot of every query in the urn's order (-1 = none)."""
    from ._model import _urn_order

    order = _urn_order(prompts)
    n = prompts.n.astype(np.int64)[order]
    u = np.repeat(order, n)
    q = prompts.query[u]
    nq = np.bincount(q, minlength=prompts.Q)
    start = np.r_[0, np.cumsum(nq)[:-1]]
    slot = np.arange(len(u)) - start[q]
    out = np.full((prompts.Q, int(nq.max()) if len(nq) else 0), -1, dtype=np.int64)
    out[q, slot] = u
    return out


def _query_urn(p, kappa, gamma, slots, tools, n_queries, gen):
    """Replications of the query-level urn: (s, U, P) counts per prompt.

    Each query's attempts are taken in the urn's order (``slots``); an attempt of prompt ``u`` picks
    position ``j`` with probability proportional to ``kappa_u * p[u, j] + c_same[j] + gamma_u *
    c_other[tool at j]``: the earlier picks of the same prompt and of the query's other prompts.
    ``p`` (s, U, P), ``kappa``, ``gamma`` (s, U), ``tools`` (U, P) (-1 = not shown).
    """
    s, U, P = p.shape
    kmax = int(tools.max()) + 1
    counts = np.zeros((s, U, P))
    c = np.zeros((s, n_queries, kmax))
    tl = np.where(tools >= 0, tools, 0)
    qs = np.arange(n_queries)
    for i in range(slots.shape[1]):
        live = slots[:, i] >= 0
        q = qs[live]
        u = slots[live, i]
        prev = np.take_along_axis(c[:, q], np.broadcast_to(tl[u][None], (s, len(u), P)), 2)
        same = counts[:, u]
        w = kappa[:, u, None] * p[:, u] + same + gamma[:, u, None] * np.where(tools[u][None] >= 0, prev - same, 0.0)
        cum = np.cumsum(w, -1) / w.sum(-1, keepdims=True)
        pick = np.minimum((gen.random((s, len(u), 1)) > cum).sum(-1), P - 1)     # (s, n)
        si = np.arange(s)[:, None]
        np.add.at(counts, (si, u[None], pick), 1.0)
        np.add.at(c, (si, q[None], tl[u][None].repeat(s, 0)[si, np.arange(len(u))[None], pick]), 1.0)
    return counts


def _urn_query_loglik(post, spec, coef, chunk):
    """(S, Q) log-likelihood of every query under the query-level urn (``model="query-urn"``).

    ``sum over attempts of log(kappa p_row[pos] + c_same + gamma c_other) - log(kappa + n_same + gamma
    n_other)`` (:func:`_urn_terms`), plus the multinomial coefficients of the prompts (the runs of one
    prompt are exchangeable).
    """
    from ._model import _urn_terms

    D = spec.design
    pr = D.prompts
    S = post["alpha"].shape[0]
    _R, _P = D.y.shape
    Q = pr.Q
    (u, p, cs, co), (ud, ns, no) = _urn_terms(pr, D.row_tools)
    row = pr.row[u]
    cell_m, cell_c = D.row_llm[row], D.row_cluster[row]
    Fn = sparse.csr_matrix((np.ones(len(u)), (pr.query[u], np.arange(len(u)))), shape=(Q, len(u)))
    dm_, dc_ = D.row_llm[pr.row[ud]], D.row_cluster[pr.row[ud]]
    Fd = sparse.csr_matrix((np.ones(len(ud)), (pr.query[ud], np.arange(len(ud)))), shape=(Q, len(ud)))
    out = np.empty((S, Q))
    for a in range(0, S, chunk):
        lp = _row_logp(post, D, a, a + chunk)                                    # (s, R, P)
        s = lp.shape[0]
        kap = post["kappa"][a:a + s]
        gam = post["gamma"][a:a + s]
        num = np.log(kap[:, cell_m, cell_c] * np.exp(lp[:, row, p]) + cs + gam[:, cell_m, cell_c] * co)
        den = np.log(kap[:, dm_, dc_] + ns + gam[:, dm_, dc_] * no)
        out[a:a + s] = (Fn @ num.T).T - (Fd @ den.T).T + coef[None]
    return out


def _mixture_query_loglik(post, spec, F, Bq, coef, n_runs, chunk):
    """(S, Q) log-likelihood of every query under the query mixture (``model="query-mixture"``):
    ``logsumexp_k(log w[cell, k] + sum over its prompts of log DM(y | n, kappa p_k))``."""
    from scipy.special import logsumexp

    D = spec.design
    pr = D.prompts
    S = post["alpha"].shape[0]
    R = len(D.y)
    Q = pr.Q
    qcell = pr.query_llm * D.C + pr.query_cluster
    out = np.empty((S, Q))
    chunk = max(1, chunk // 4)
    with np.errstate(divide="ignore"):
        for a in range(0, S, chunk):
            pk, _ = _mixture_probs(post, D, a, a + chunk, np.arange(R))            # (s, R, P, K+1)
            s = pk.shape[0]
            lk = np.log(post["kappa"][a:a + s])[:, D.row_llm, D.row_cluster]     # (s, R)
            x = lk[:, :, None, None] + np.log(pk)
            lw = np.log(_mixture_weights(post, D, a, a + s))[:, qcell]           # (s, Q, K+1)
            kap = post["kappa"][a:a + s][:, pr.query_llm, pr.query_cluster]     # (s, Q)
            norm = sum(Bq[None, :, i] * np.log(kap + i) for i in range(n_runs))
            per_class = np.empty((s, Q, x.shape[-1]))
            for k in range(x.shape[-1]):
                terms = np.empty((s, R, D.P, n_runs))
                terms[..., 0] = x[..., k]
                for i in range(1, n_runs):
                    terms[..., i] = np.logaddexp(np.log(i), x[..., k])
                terms = np.where(np.isfinite(terms), terms, 0.0).reshape(s, -1)
                per_class[..., k] = (F @ terms.T).T
            out[a:a + s] = logsumexp(per_class + lw, axis=-1) - norm + coef[None]
    return out
