"""The four TOOL-SHADOW domains (L, D, S, R) for one harness: point estimates and bootstrap replicates.

Every domain is computed from per-unit sufficient statistics (a unit is a turn unless the audit says
otherwise), so that a turn-level bootstrap replicate is one matrix product of the unit weights with those
statistics (:func:`toolbias_stats._resampling.resampled_counts`), never a refit in a Python loop:

* **L** -- per unit and description-length stratum, the 2x2 counts (top / bottom quartile x called / not)
  among relevant tools; the Mantel-Haenszel pooled odds ratio with the Robins-Breslow-Greenland variance
  (statsmodels ``StratifiedTable`` for the estimate itself; a vectorised copy of the same formulas for the
  replicates, checked against statsmodels in the tests).
* **D**, **R** -- logistic regressions (statsmodels GLM Binomial, turn-clustered sandwich covariance). A
  replicate is the one-step Newton update from the full-sample fit with the replicate's summed unit scores
  and Hessians, and its cluster-robust variance uses the replicate's summed score outer products (the
  estimating-equation bootstrap of Hu & Kalbfleisch 2000, first order equivalent to refitting).
* **S** -- per unit and tool, relevant / called-and-relevant counts and similarity sums on the held-out units;
  a replicate recomputes the per-tool rates and their Pearson correlation with the per-tool mean similarity.

Nothing here reads files or draws random numbers: the caller passes the weights' generator.
"""

from __future__ import annotations

import math
import warnings

import numpy as np

__all__ = ["quartile_size", "length_strata", "mh_logor", "domain_L", "domain_logit", "domain_S",
           "tool_correlation", "logit_replicates", "LOGIT_SCALE"]

#: Covariates of the logistic domains are centred and divided by two standard deviations (Gelman 2008), so a
#: coefficient is comparable with the log odds ratio of a binary contrast such as L's top vs bottom quartile.
LOGIT_SCALE = 2.0


def quartile_size(n_tools):
    """Positions in the top (and in the bottom) quartile of a manifest of ``n_tools``: ``max(1, round(n/4))``.

    ``round`` is half-up (``floor(n/4 + 1/2)``): 4 -> 1, 5 -> 1, 6 -> 2, 12 -> 3, 20 -> 5.

    Examples
    --------
    >>> [int(quartile_size(n)) for n in (2, 4, 5, 6, 12, 20)]
    [1, 1, 1, 2, 3, 5]
    """
    n = np.asarray(n_tools)
    return np.maximum(1, np.floor(n / 4 + 0.5)).astype(np.int64)


def length_strata(tool_len: dict, n_strata: int = 3):
    """Description-length stratum (0..k-1) of each tool: cuts at the tertiles of the tools' lengths.

    Ties at a cut fall into the lower stratum; with fewer distinct lengths than strata there are fewer strata.
    """
    vals = np.array(sorted({float(v) for v in tool_len.values() if np.isfinite(v)}))
    if vals.size <= 1:
        return dict.fromkeys(tool_len, 0)
    cuts = np.unique(np.quantile(np.array(list(tool_len.values()), dtype=float), np.arange(1, n_strata) / n_strata))
    return {k: int(np.searchsorted(cuts, float(v), side="left")) for k, v in tool_len.items()}


# -- L ------------------------------------------------------------------------------------------------------------
def mh_logor(tables):
    """Mantel-Haenszel pooled log odds ratio and its Robins-Breslow-Greenland SE, vectorised over leading axes.

    Parameters
    ----------
    tables : array of shape (..., S, 4)
        Per stratum ``a, b, c, d`` of the table ``[[a, b], [c, d]]`` (top: called, not called; bottom:
        called, not called).

    Returns
    -------
    (log_or, se) : arrays of shape (...)
        When either pooled sum is zero (an infinite or zero odds ratio), 0.5 is added to every cell of every
        non-empty stratum (Haldane-Anscombe) for that replicate only.

    Notes
    -----
    With ``n = a+b+c+d``, ``R = ad/n``, ``S = bc/n``, ``P = (a+d)/n``, ``Q = (b+c)/n``:
    ``log OR = log(sum R / sum S)`` and
    ``Var = sum PR / (2 (sum R)^2) + sum (PS + QR) / (2 sum R sum S) + sum QS / (2 (sum S)^2)``
    (Robins, Breslow & Greenland 1986; statsmodels ``StratifiedTable.logodds_pooled_se``).
    """
    t = np.asarray(tables, dtype=float)
    n = t.sum(-1)
    has_both = ((t[..., 0] + t[..., 1]) > 0) & ((t[..., 2] + t[..., 3]) > 0)
    t = np.where(has_both[..., None], t, 0.0)
    n = np.where(has_both, n, 0.0)

    def sums(tt, nn):
        safe = np.where(nn > 0, nn, 1.0)
        a, b, c, d = (tt[..., i] for i in range(4))
        R, S = a * d / safe, b * c / safe
        P, Q = (a + d) / safe, (b + c) / safe
        return R, S, P, Q

    R, S, P, Q = sums(t, n)
    sr, ss = R.sum(-1), S.sum(-1)
    bad = (sr <= 0) | (ss <= 0)
    if np.any(bad):
        t2 = np.where(has_both[..., None], t + 0.5, 0.0)
        n2 = t2.sum(-1)
        R2, S2, P2, Q2 = sums(t2, n2)
        R, S, P, Q = (np.where(bad[..., None], x2, x) for x, x2 in ((R, R2), (S, S2), (P, P2), (Q, Q2)))
        sr, ss = R.sum(-1), S.sum(-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        logor = np.log(sr / ss)
        var = ((P * R).sum(-1) / (2 * sr ** 2) + (P * S + Q * R).sum(-1) / (2 * sr * ss)
               + (Q * S).sum(-1) / (2 * ss ** 2))
        se = np.sqrt(var)
    ok = (sr > 0) & (ss > 0) & np.isfinite(se)
    return np.where(ok, logor, np.nan), np.where(ok, se, np.nan)


def domain_L(unit, position, n_tools, called, relevant, stratum, n_units, n_strata):
    """Per-unit stratified 2x2 counts for domain L and the point estimate (statsmodels).

    Returns
    -------
    dict
        ``tables`` (n_units, S, 4), ``log_or``, ``se``, ``z``, ``n`` (relevant rows in the two quartiles),
        ``note`` (why it is missing, when it is).
    """
    q = quartile_size(n_tools)
    top = position <= q
    bottom = position > n_tools - q
    keep = (relevant == 1) & (top | bottom) & (n_tools >= 2)
    cell = np.where(top, 0, 2) + np.where(called == 1, 0, 1)
    idx = (unit[keep] * n_strata + stratum[keep]) * 4 + cell[keep]
    tables = np.bincount(idx, minlength=n_units * n_strata * 4).reshape(n_units, n_strata, 4).astype(float)
    out = {"tables": tables, "n": int(keep.sum()), "log_or": np.nan, "se": np.nan, "z": np.nan, "note": None}
    total = tables.sum(0)
    usable = ((total[:, 0] + total[:, 1]) > 0) & ((total[:, 2] + total[:, 3]) > 0)
    if not usable.any():
        out["note"] = "no description-length stratum has relevant tools in both the top and the bottom quartile"
        return out
    from statsmodels.stats.contingency_tables import StratifiedTable

    tab = total[usable]
    r = (tab[:, 0] * tab[:, 3] / tab.sum(1)).sum()
    s = (tab[:, 1] * tab[:, 2] / tab.sum(1)).sum()
    if r <= 0 or s <= 0:
        tab = tab + 0.5  # Haldane-Anscombe: a zero pooled sum would make the odds ratio 0 or infinite
        out["note"] = "0.5 added to every cell (a pooled Mantel-Haenszel sum was zero)"
    st = StratifiedTable([t.reshape(2, 2) for t in tab])
    out["log_or"] = float(st.logodds_pooled)
    out["se"] = float(st.logodds_pooled_se)
    out["z"] = out["log_or"] / out["se"] if out["se"] > 0 else np.nan
    out["n_strata_used"] = int(usable.sum())
    return out


# -- D and R ------------------------------------------------------------------------------------------------------
def _standardise(x):
    x = np.asarray(x, dtype=float)
    sd = x.std()
    if not np.isfinite(sd) or sd <= 0:
        return None
    return (x - x.mean()) / (LOGIT_SCALE * sd)


def domain_logit(y, columns: dict, unit, n_units, *, target: str):
    """Logistic regression of ``y`` on ``columns`` (standardised by 2 SD) with unit-clustered SEs.

    Parameters
    ----------
    y : array of 0/1
    columns : dict name -> array
        Covariates; constant ones are dropped (listed in ``dropped``). ``relevant`` is kept as 0/1.
    unit : array of int
        Cluster code of each row (0..n_units-1).
    target : str
        The covariate whose coefficient the domain reports.

    Returns
    -------
    dict
        ``beta``, ``se`` (statsmodels cluster-robust, small-sample corrected), ``z``, ``names``, ``dropped``,
        ``index`` of the target, per-unit ``score`` (G, p), ``hess`` (G, p*p), ``outer`` (G, p*p) at the
        estimate, ``correction`` factor, ``n``; ``note`` when the domain cannot be computed.
    """
    import statsmodels.api as sm

    names, cols, dropped = [], [], []
    for name, x in columns.items():
        x = np.asarray(x, dtype=float)
        if name == "relevant":
            z = x if np.unique(x).size > 1 else None
        else:
            z = _standardise(x) if np.all(np.isfinite(x)) else None
        if z is None:
            dropped.append(name)
            continue
        names.append(name)
        cols.append(z)
    out = {"names": names, "dropped": dropped, "n": len(y), "note": None, "beta": np.nan, "se": np.nan,
           "z": np.nan}
    if target not in names:
        out["note"] = f"`{target}` is constant or missing: the coefficient is not identified"
        return out
    if y.size == 0 or np.unique(y).size < 2:
        out["note"] = "`called` does not vary among the rows used"
        return out
    X = np.column_stack([np.ones(len(y))] + cols)
    j = 1 + names.index(target)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            fit = sm.GLM(y.astype(float), X, family=sm.families.Binomial()).fit(
                cov_type="cluster", cov_kwds={"groups": unit})
        except Exception as exc:  # perfect separation, singular design
            out["note"] = f"logistic fit failed: {type(exc).__name__}: {exc}"
            return out
    beta = np.asarray(fit.params, dtype=float)
    se = np.asarray(fit.bse, dtype=float)
    if not (np.all(np.isfinite(beta)) and np.isfinite(se[j]) and se[j] > 0):
        out["note"] = "logistic fit did not converge to finite estimates (separation?)"
        return out
    mu = 1.0 / (1.0 + np.exp(-(X @ beta)))
    resid = y - mu
    p = X.shape[1]
    score = np.zeros((n_units, p))
    for k in range(p):
        score[:, k] = np.bincount(unit, weights=X[:, k] * resid, minlength=n_units)
    wgt = mu * (1 - mu)
    hess = np.zeros((n_units, p * p))
    for a in range(p):
        for b in range(a, p):
            h = np.bincount(unit, weights=wgt * X[:, a] * X[:, b], minlength=n_units)
            hess[:, a * p + b] = h
            hess[:, b * p + a] = h
    outer = (score[:, :, None] * score[:, None, :]).reshape(n_units, p * p)
    g_used = int(np.unique(unit).size)
    nobs = len(y)
    correction = g_used / (g_used - 1.0) * (nobs - 1.0) / (nobs - p) if g_used > 1 else np.nan
    out.update(beta=float(beta[j]), se=float(se[j]), z=float(beta[j] / se[j]), index=j, names=names,
               beta_all=beta, score=score, hess=hess, outer=outer, correction=correction, p=p, n_units_used=g_used)
    return out


def logit_replicates(fit: dict, score_b, hess_b, outer_b, n_b):
    """One-step bootstrap replicates of a :func:`domain_logit` fit.

    Parameters
    ----------
    score_b, hess_b, outer_b : arrays (B, p), (B, p*p), (B, p*p)
        Replicate sums of the per-unit score, Hessian and score outer products at the full-sample estimate.
    n_b : array (B,)
        Units drawn per replicate (for centring the meat).

    Returns
    -------
    (beta_b, z_b) : arrays (B,)
        The target coefficient after one Newton step and its cluster-robust z.
    """
    p = fit["p"]
    j = fit["index"]
    B = score_b.shape[0]
    H = hess_b.reshape(B, p, p)
    with np.errstate(all="ignore"):
        try:
            Hinv = np.linalg.inv(H)
        except np.linalg.LinAlgError:
            Hinv = np.linalg.pinv(H)
        step = np.einsum("bij,bj->bi", Hinv, score_b)
        beta_b = fit["beta_all"][j] + step[:, j]
        mean_outer = score_b[:, :, None] * score_b[:, None, :] / np.maximum(n_b, 1)[:, None, None]
        centred = outer_b.reshape(B, p, p) - mean_outer
        V = np.einsum("bij,bjk,bkl->bil", Hinv, centred, Hinv) * fit["correction"]
        se_b = np.sqrt(np.clip(V[:, j, j], 0, None))
        z_b = np.where(se_b > 0, beta_b / se_b, np.nan)
    return beta_b, z_b


# -- S ------------------------------------------------------------------------------------------------------------
def tool_correlation(called_rel, rel, sim_rel, min_tools=4):
    """Pearson r across tools between mean similarity and call rate (vectorised over leading axes)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        used = rel > 0
        rate = np.where(used, called_rel / np.where(used, rel, 1), np.nan)
        msim = np.where(used, sim_rel / np.where(used, rel, 1), np.nan)
        k = used.sum(-1)
        mr = np.nansum(rate, -1) / k
        ms = np.nansum(msim, -1) / k
        dr = np.where(used, rate - mr[..., None], 0.0)
        ds = np.where(used, msim - ms[..., None], 0.0)
        r = (dr * ds).sum(-1) / np.sqrt((dr ** 2).sum(-1) * (ds ** 2).sum(-1))
    return np.where(k >= min_tools, r, np.nan), k


def domain_S(unit, tool, called, relevant, sim, holdout_units, n_units, n_tools_total):
    """Per-unit tool sums on the held-out units and the Pearson correlation (scipy) with its Fisher z.

    Returns
    -------
    dict
        ``called_rel``, ``rel``, ``sim_rel`` (n_units, J), ``r``, ``z`` = atanh(r) sqrt(J - 3), ``n`` (tools
        with a relevant row in the held-out units), ``n_turns_heldout``, ``note``.
    """
    from scipy import stats

    out = {"r": np.nan, "z": np.nan, "n": 0, "note": None}
    ok = np.isfinite(sim) & holdout_units[unit]
    shape = n_units * n_tools_total
    idx = unit[ok] * n_tools_total + tool[ok]
    rel = (relevant[ok] == 1).astype(float)
    out["rel"] = np.bincount(idx, weights=rel, minlength=shape).reshape(n_units, n_tools_total)
    out["called_rel"] = np.bincount(idx, weights=rel * called[ok], minlength=shape).reshape(n_units, n_tools_total)
    out["sim_rel"] = np.bincount(idx, weights=rel * sim[ok], minlength=shape).reshape(n_units, n_tools_total)
    out["n_turns_heldout"] = int(holdout_units.sum())
    if not ok.any():
        out["note"] = "no turn text / similarity: S needs the turns' task text (or a `similarity` column)"
        return out
    R, Rel, Sim = out["called_rel"].sum(0), out["rel"].sum(0), out["sim_rel"].sum(0)
    used = Rel > 0
    out["n"] = int(used.sum())
    if out["n"] < 4:
        out["note"] = f"S needs at least 4 tools with relevant held-out rows; got {out['n']}"
        return out
    rate, msim = R[used] / Rel[used], Sim[used] / Rel[used]
    if np.ptp(rate) == 0 or np.ptp(msim) == 0:
        out["note"] = "call rate or mean similarity is constant across tools: r is undefined"
        return out
    r = float(stats.pearsonr(msim, rate).statistic)
    out["r"] = r
    out["z"] = float(np.arctanh(np.clip(r, -0.999999, 0.999999)) * math.sqrt(out["n"] - 3))
    return out
