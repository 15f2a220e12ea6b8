"""Pointwise log-likelihoods for model comparison (PSIS-LOO), per design row and per query.

LOO compares models only on the same data units. v1 is fitted to one multinomial per (LLM, cluster,
ordering) row, the Dirichlet-multinomial variants to prompts; the unit every variant can be scored
on is the query: all attempts of one query of one LLM (every ordering and run), i.e. "leave one
query out". ``pointwise_query_loglik`` returns ``log p(y_q | theta)`` per posterior draw and query,
with the full multinomial / Dirichlet-multinomial coefficients (so that the numbers are comparable
between variants).
"""

from __future__ import annotations

import numpy as np
from scipy import sparse
from scipy.special import gammaln

from ._summaries import _beta_index


def row_loglik(post, D):
    """(S, R) multinomial log-likelihood of every design row (v1's ``log_likelihood['y']``)."""
    S = post["alpha"].shape[0]
    C, Kmax = D.C, D.Kmax
    mask = D.row_tools >= 0
    tools = np.where(mask, D.row_tools, 0)
    cells = D.row_llm * C + D.row_cluster
    al = post["alpha"].reshape(S, -1)
    name, bidx = _beta_index(D, post, np.arange(len(D.y)))
    be = post[name].reshape(S, -1)
    logits = al[:, (cells * Kmax)[:, None] + tools] + be[:, bidx]
    z = np.where(mask[None], logits, -np.inf)
    lse = np.log(np.exp(z - z.max(-1, keepdims=True)).sum(-1)) + z.max(-1)
    return (np.where(mask[None], D.y[None] * logits, 0).sum(-1) - D.n[None] * lse
            + gammaln(D.n + 1)[None] - gammaln(D.y + 1).sum(-1)[None])


def _row_logp(post, D, a, b):
    """log softmax (s, R, P) of draws a:b for the design rows (-inf where nothing is shown)."""
    C, Kmax = D.C, D.Kmax
    mask = D.row_tools >= 0
    tools = np.where(mask, D.row_tools, 0)
    cells = D.row_llm * C + D.row_cluster
    al = post["alpha"][a:b]
    al = al.reshape(al.shape[0], -1)
    name, bidx = _beta_index(D, post, np.arange(len(D.y)))
    be = post[name][a:b].reshape(al.shape[0], -1)
    logits = np.where(mask[None], al[:, (cells * Kmax)[:, None] + tools] + be[:, bidx], -np.inf)
    mx = logits.max(-1, keepdims=True)
    return logits - (np.log(np.exp(logits - mx).sum(-1, keepdims=True)) + mx)


def _dm_query_terms(D):
    """The Dirichlet-multinomial's per-query terms as sparse products: ``F`` (Q x R*P*I) counts the indicators
    1(y_p > i) per (query, row, position, i), ``Bq`` (Q, I) the indicators 1(n > i) per query; I = most runs."""
    pr = D.prompts
    R, P = D.y.shape
    Q = pr.Q
    y, n = pr.y, pr.n
    I = max(int(y.max()), 1)
    # sum_{p, i < y_p} log(kappa p + i) - sum_{i < n} log(kappa + i): indicator counts per (query, row, p, i)
    qi, pi, ii, rr = [], [], [], []
    for i in range(I):
        r, p = np.nonzero(y > i)
        qi.append(pr.query[r])
        rr.append(pr.row[r])
        pi.append(p)
        ii.append(np.full(len(r), i))
    qi, rr, pi, ii = (np.concatenate(x) for x in (qi, rr, pi, ii))
    F = sparse.csr_matrix((np.ones(len(qi)), (qi, (rr * P + pi) * I + ii)), shape=(Q, R * P * I))
    Bq = np.zeros((Q, I))
    for i in range(I):
        Bq[:, i] = np.bincount(pr.query, weights=(n > i).astype(float), minlength=Q)
    return F, Bq, I


def pointwise_query_loglik(post, spec, chunk=200):
    """(S, Q) log-likelihood of every query's attempts (all its prompts) for models without query effects.

    Multinomial variants: ``sum over the query's prompts of log Multinomial(y | n, p)``; Dirichlet-
    multinomial variants: ``log DM(y | n, kappa p)`` per prompt. Both are linear in a few per-row
    terms (``log p`` and ``log(kappa p + i)``), so they are computed as sparse products.
    """
    D = spec.design
    pr = D.prompts
    S = post["alpha"].shape[0]
    R, P = D.y.shape
    Q = pr.Q
    y = pr.y
    n = pr.n
    coef = np.bincount(pr.query, weights=gammaln(n + 1) - gammaln(y + 1).sum(1), minlength=Q)
    out = np.empty((S, Q))
    if not spec.dm:
        # sum_p y_p log p[row, p]: a sparse (Q x R*P) matrix of counts
        r, p = np.nonzero(y)
        F = sparse.csr_matrix((y[r, p], (pr.query[r], pr.row[r] * P + p)), shape=(Q, R * P))
        for a in range(0, S, chunk):
            lp = _row_logp(post, D, a, a + chunk)
            lp = np.where(np.isfinite(lp), lp, 0.0).reshape(lp.shape[0], -1)
            out[a:a + lp.shape[0]] = (F @ lp.T).T + coef[None]
        return out
    own = spec.query_loglik(post, coef, chunk)                                   # a model extension's own
    if own is not None:
        return own
    F, Bq, I = _dm_query_terms(D)
    q_llm = pr.query_llm
    row_llm = D.row_llm
    for a in range(0, S, chunk):
        lp = _row_logp(post, D, a, a + chunk)                                    # (s, R, P)
        s = lp.shape[0]
        lk = np.log(post["kappa"][a:a + s])                                      # (s, M, C)
        x = lk[:, row_llm, D.row_cluster][:, :, None] + lp                       # log(kappa p)
        terms = np.empty((s, R, P, I))
        terms[..., 0] = x
        for i in range(1, I):
            terms[..., i] = np.logaddexp(np.log(i), x)
        terms = np.where(np.isfinite(terms), terms, 0.0).reshape(s, -1)
        kap = post["kappa"][a:a + s][:, q_llm, pr.query_cluster]                 # (s, Q)
        norm = sum(Bq[None, :, i] * np.log(kap + i) for i in range(I))
        out[a:a + s] = (F @ terms.T).T - norm + coef[None]
    return out
