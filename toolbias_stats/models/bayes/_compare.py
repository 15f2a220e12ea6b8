"""Comparing fitted variants: PSIS-LOO over queries (ArviZ ``az.compare``) next to their predictive checks.

LOO is only meaningful between models scored on the same data units. The variants are fitted to
different units (v1: one multinomial per (LLM, cluster, ordering); the Dirichlet-multinomial
variants: prompts), so every variant is scored on the one unit they share: **all attempts of one
query of one LLM** (every ordering and run), ``log p(y_q | theta)`` with its full coefficients. Leaving
one query out is also the question a user asks: how well does the model predict a new query?

For variants with query effects ``eta`` the query's likelihood must integrate its own effects out
(``p(y_q | theta) = E_eta[p(y_q | theta, eta)]``; the conditional likelihood given the fitted ``eta``
is not a leave-one-query-out quantity). It is computed by importance sampling with, per query, a
Gaussian proposal fitted to the posterior draws of its effects (variance inflated by 1.5^2) and
``n_nodes`` fixed nodes, on ``n_draws`` thinned posterior draws.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
from scipy.special import gammaln, logsumexp

from ._common import _basis
from ._summaries import _thin, _unit_logits

if TYPE_CHECKING:
    from collections.abc import Mapping

    from ._result import BayesResult

__all__ = ["compare_bayes", "query_loglik"]


def query_loglik(result, *, n_draws=400, n_nodes=64, rng=0):
    """Pointwise log-likelihood per (LLM, cluster, query) of a fit: an ``xarray.DataArray`` (chain, draw, query).

    Parameters
    ----------
    result : BayesResult
        A fit on a SelectionLog (the queries must be known).
    n_draws, n_nodes : int
        For variants with query effects only: thinned posterior draws and importance-sampling nodes
        per query (see the module notes). Other variants use every draw and are exact.
    rng : int or Generator
        Seeds the importance-sampling nodes.

    Returns
    -------
    xarray.DataArray
    """
    import xarray as xr

    ll = getattr(result.idata, "log_likelihood", None)
    if ll is not None and "y_query" in ll:
        return ll["y_query"]
    spec, post = result._spec, result._post
    if spec is None or spec.design.prompts is None:
        raise ValueError("this fit does not know the queries (it was fitted on counts only): refit it on the "
                         "SelectionLog to compare it.")
    if not spec.qe:
        from ._loglik import pointwise_query_loglik

        nch, ndr = post["shape"]
        return xr.DataArray(pointwise_query_loglik(post, spec).reshape(nch, ndr, -1), dims=("chain", "draw", "query"))
    tp, sel = _thin(post, n_draws)
    nch, ndr = tp["shape"]
    vals = _marginal_query_loglik(spec, post, tp, n_nodes, np.random.default_rng(rng))
    draws = sel[:ndr] % post["shape"][1]                                        # the draws kept in each chain
    return xr.DataArray(vals.reshape(nch, ndr, -1), dims=("chain", "draw", "query"), coords={"draw": draws})


def _prompt_loglik(logp, y, n, lk, I):
    """log-likelihood of prompts (..., U) from log-probabilities (..., U, P); Dirichlet-multinomial when
    ``lk`` (log kappa, broadcastable to (..., U)) is given, else multinomial; with the coefficient."""
    coef = gammaln(n + 1) - gammaln(y + 1).sum(-1)
    lp = np.where(np.isfinite(logp), logp, 0.0)
    if lk is None:
        return coef + (y * lp).sum(-1)
    x = lk[..., None] + lp
    out = coef + np.zeros(x.shape[:-1])
    for i in range(I):
        term = x if i == 0 else np.logaddexp(np.log(i), x)
        out = out + np.where(y > i, term, 0.0).sum(-1)
        out = out - np.where(n > i, np.log(np.exp(lk) + i), 0.0)
    return out


def _marginal_query_loglik(spec, post, tp, n_nodes, gen, q_chunk=25):
    """(S', Q) log p(y_q | theta) with the query's effects integrated out (importance sampling)."""
    D = spec.design
    pr = D.prompts
    S = tp["alpha"].shape[0]
    out = np.zeros((S, pr.Q))
    I = max(int(pr.y.max()), 1)
    mask_all = D.row_tools[pr.row] >= 0
    tools_all = np.where(mask_all, D.row_tools[pr.row], 0)
    base = {k: v for k, v in tp.items() if k != "eta"}
    lg_rows, _ = _unit_logits(base, D, 0, S, "rows")                            # (S, R, P) without eta
    for g in spec.qgroups:
        k = g["k"]
        H = _basis(k)                                                           # (k-1, k)
        qs = g["queries"]
        # proposal per query from the posterior draws of its effects (orthonormal coordinates)
        u = post["eta"][:, qs, :k].astype(float) @ H.T                          # (S_all, Qg, k-1)
        mean = u.mean(0)
        cov = np.einsum("sqi,sqj->qij", u - mean, u - mean) / max(u.shape[0] - 1, 1)
        cov = 2.25 * cov + 1e-6 * np.eye(k - 1)
        L = np.linalg.cholesky(cov)                                             # (Qg, k-1, k-1)
        z = gen.standard_normal((n_nodes // 2, k - 1))
        z = np.concatenate([z, -z])                                             # antithetic
        T = len(z)
        nodes = mean[:, None, :] + np.einsum("qij,tj->qti", L, z)               # (Qg, T, k-1)
        logdet = np.log(np.diagonal(L, axis1=1, axis2=2)).sum(-1)               # (Qg,)
        log_q = -0.5 * (z ** 2).sum(-1)[None, :] - logdet[:, None]              # (Qg, T), constants cancel
        eta_nodes = nodes @ H                                                   # (Qg, T, k)
        se = tp["sigma_eta"][:, g["llm"]]                                       # (S, Qg)
        sq = (nodes ** 2).sum(-1)                                               # (Qg, T)
        log_prior = -0.5 * sq[None] / se[..., None] ** 2 - (k - 1) * np.log(se)[..., None]   # (S, Qg, T)
        for c0 in range(0, len(qs), q_chunk):
            qc = qs[c0:c0 + q_chunk]
            local = np.full(pr.Q, -1)
            local[qc] = np.arange(len(qc))
            units = np.flatnonzero(local[pr.query] >= 0)
            if not len(units):
                continue
            uq = local[pr.query[units]]
            rows = pr.row[units]
            mask = mask_all[units]
            tools = tools_all[units]
            # logits without eta (S, U, P), then + the eta of every node: (S, T, U, P)
            lg = lg_rows[:, rows]
            en = eta_nodes[c0:c0 + len(qc)][uq]                                 # (U, T, k)
            eta_u = np.take_along_axis(en, np.broadcast_to(tools[:, None, :], (len(units), T, D.P)), axis=2)
            logits = lg[:, None] + np.transpose(eta_u, (1, 0, 2))[None]
            logits = np.where(mask[None, None], logits, -np.inf)
            logp = logits - logsumexp(logits, axis=-1, keepdims=True)
            lk = np.log(tp["kappa"][:, D.row_llm[rows], D.row_cluster[rows]])[:, None, :] if spec.dm else None
            llu = _prompt_loglik(logp, pr.y[units], pr.n[units], lk, I)          # (S, T, U)
            llq = np.zeros((S, T, len(qc)))
            np.add.at(llq, (slice(None), slice(None), uq), llu)
            w = llq + np.transpose(log_prior[:, c0:c0 + len(qc)], (0, 2, 1)) - log_q[c0:c0 + len(qc)].T[None]
            out[:, qc] = logsumexp(w, axis=1) - np.log(T)
    return out


def compare_bayes(fits: Mapping[str, BayesResult], *, n_draws: int = 400, n_nodes: int = 64,
                  rng: np.random.Generator | int | None = 0) -> pd.DataFrame:
    """Compare fitted variants by PSIS-LOO over queries (``az.compare``) and their predictive checks.

    Parameters
    ----------
    fits : dict
        ``{name: BayesResult}``, all fitted on the same SelectionLog with the same ``by`` and
        ``mismatch`` (the same queries).
    n_draws, n_nodes, rng
        Passed to :func:`query_loglik` for variants with query effects.

    Returns
    -------
    pandas.DataFrame
        One row per fit, best first: ArviZ's ``elpd_loo``, ``p_loo``, ``elpd_diff``, ``dse``,
        ``weight``, ``se``, plus ``n_queries``, ``pareto_k_max``, ``pareto_k_bad`` (k > 0.7), the
        posterior predictive p-values ``ppc_p_cluster_position``, ``ppc_p_rows`` (finest table),
        ``ppc_p_dispersion`` (per query), ``dispersion_ratio`` (observed / replicated), and the
        fit's ``converged`` flag and ``seconds``.

    Raises
    ------
    ValueError
        Fewer than two fits, a fit without known queries, or fits on different data.

    Examples
    --------
    Two parameterisations of the same model on a tiny simulated study (short single chains so that the example
    runs in seconds; real comparisons use converged fits of different models, e.g. ``model="v1"`` and ``"v2"``):

    >>> import warnings
    >>> import numpy as np
    >>> from toolbias_stats.models import compare_bayes, fit_bayes, simulate_bayes_log
    >>> alpha = np.array([[[1.0, 0.0, -1.0], [0.0, 0.5, -0.5]]])     # API effects: LLM x cluster x tool
    >>> log = simulate_bayes_log(alpha, np.array([[1.0, 0.0, -1.0]]), n_per_ordering=20, rng=1)
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore")
    ...     fits = {p: fit_bayes(log, model="v1", parameterization=p, draws=50, tune=50, chains=1, cores=1,
    ...                          sampler="pymc", rng=1) for p in ("centered", "noncentered")}
    ...     table = compare_bayes(fits)
    >>> sorted(table.index), table["n_queries"].tolist()
    (['centered', 'noncentered'], [120, 120])
    """
    import arviz as az

    if not isinstance(fits, dict) or len(fits) < 2:
        raise ValueError("`fits` must be a dict of at least two {name: BayesResult}.")
    ref = None
    data, extra = {}, {}
    for name, res in fits.items():
        spec = res._spec
        if spec is None or spec.design.prompts is None:
            raise ValueError(f"fit {name!r} does not know the queries (it was fitted on counts only); refit it on "
                             "the SelectionLog.")
        pr = spec.design.prompts
        key = (tuple(spec.design.llms), tuple(spec.design.clusters), tuple(pr.query_ids), int(pr.y.sum()),
               res.mismatch, tuple(res.by))
        if ref is None:
            ref = key
        elif key != ref:
            raise ValueError(f"fit {name!r} was fitted on other data (LLMs, queries, rows used, by or mismatch "
                             "differ): LOO compares models only on the same data.")
        ll = query_loglik(res, n_draws=n_draws, n_nodes=n_nodes, rng=rng)
        ndr = ll.sizes["draw"]
        sel_post = res.idata.posterior
        if "draw" in ll.coords and sel_post.sizes["draw"] != ndr:
            sel_post = sel_post.sel(draw=ll["draw"].values)
        keep = [v for v in ("beta_bar", "sigma_alpha", "sigma_beta", "sigma_delta", "kappa", "gamma", "sigma_eta")
                if v in sel_post]
        idata = az.InferenceData(posterior=sel_post[keep],
                                 log_likelihood=ll.to_dataset(name="y_query").assign_coords(
                                     chain=sel_post["chain"].values, draw=sel_post["draw"].values))
        data[name] = idata
        loo = az.loo(idata, var_name="y_query", pointwise=True)
        k = np.asarray(loo.pareto_k)
        disp = res.ppc.dispersion
        extra[name] = {"n_queries": int(k.size), "pareto_k_max": float(k.max()), "pareto_k_bad": int((k > 0.7).sum()),
                       "ppc_p_cluster_position": res.ppc.p_value, "ppc_p_rows": res.ppc.p_value_rows,
                       "ppc_p_dispersion": res.ppc.p_value_dispersion,
                       "dispersion_ratio": (float(disp.loc[disp["llm"] == "(all)", "ratio"].iloc[0])
                                            if disp is not None else np.nan),
                       "converged": res.diagnostics.converged, "seconds": res.diagnostics.seconds}
    table = az.compare(data, ic="loo", var_name="y_query")
    extra = pd.DataFrame(extra).T
    out = table.join(extra)
    out.index.name = "model"
    return out
