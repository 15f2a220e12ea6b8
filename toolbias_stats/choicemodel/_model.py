"""``choice_model``: conditional (and mixed) logit of tool worth, position and features over the lists shown."""

from __future__ import annotations

import itertools
import math
import numbers
import warnings
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal, cast

import numpy as np
import pandas as pd

from .._validation import check_choice, check_confidence_level, check_n_resamples, check_rng
from ..exceptions import ConvergenceWarning, DegenerateDataWarning, ExcludedRowsWarning
from ._data import GroupData, prepare_groups
from ._fit import SIGMA_BOUNDARY, aggregate_cells, cell_scores, clogit_parts, fit_clogit, fit_mixed, mixed_sandwich
from ._result import ChoiceModelResult

if TYPE_CHECKING:
    from ..features import ToolFeatures
    from ..io import SelectionCounts, SelectionLog, Study


def _stats():
    """``scipy.stats``, imported on first use: ``validate`` imports this module for the comparison graph only, and
    scipy.stats costs a fifth of a second to import (issue 37)."""
    from scipy import stats

    return stats


__all__ = ["choice_model", "comparison_components", "POSITION_FORMS", "PENALTIES", "SE_METHODS", "WORTHS"]

#: Position terms: one per position (position 1 the reference), first/last indicators, log-position decay, none.
POSITION_FORMS = ("free", "first_last", "decay", "none")
#: Penalised likelihood: Firth (Jeffreys prior), a weak normal prior, none (maximum likelihood).
PENALTIES = ("firth", "prior", "none")
#: Standard errors: query-clustered sandwich, query bootstrap, model-based (inverse information).
SE_METHODS = ("sandwich", "bootstrap", "model")
#: Tool worth: one free worth per tool, or a linear function of the tool features.
WORTHS = ("tool", "features")

#: Message for a tool whose maximum-likelihood worth is infinite.
SEPARATION_MESSAGE = ("tool {tool!r} is {what} in every attempt that shows it ({n} attempt(s){where}); its maximum-"
                      "likelihood worth is {inf}. Use penalty='firth' (the default) or penalty='prior' for a finite "
                      "estimate with an honest interval.")


def choice_model(log_or_counts: SelectionLog | SelectionCounts | Study, *, by: str | Sequence[str] | None = ("model",),
                 position: Literal["free", "first_last", "decay", "none"] = "free",
                 features: str | Sequence[str] | pd.DataFrame | ToolFeatures | None = None,
                 worth: Literal["tool", "features"] | None = None, interactions: str | Sequence[str] = (),
                 penalty: Literal["firth", "prior", "none"] | None = "firth", prior_scale: float = 2.5,
                 se: Literal["sandwich", "bootstrap", "model"] = "sandwich", mixed: bool = False,
                 n_draws: int = 100, n_resamples: int = 200, confidence_level: float = 0.95,
                 reference: str | Sequence[str] | None = None,
                 mismatch: Literal["exclude", "tool", "position"] = "exclude",
                 rng: np.random.Generator | int | None = None) -> ChoiceModelResult:
    """Fit a conditional logit (or mixed logit) of which tool is chosen from the list shown.

    The utility of tool ``t`` shown at position ``p`` of a list of ``K`` tools is
    ``u = worth[t] + position[p] + features[t] @ beta (+ interactions)``, and the chosen tool follows
    ``P(t | list) = exp(u_t) / sum_{s in list} exp(u_s)``. One worth per tool across every list it appears
    in; identified within each connected component of the comparison graph (one reference tool each).

    Parameters
    ----------
    log_or_counts : SelectionLog, SelectionCounts or Study
        The attempts, with the list shown (``ordering``). A SelectionCounts has no queries: its standard
        errors then treat attempts as independent (``result.warnings`` says so).
    by : str or sequence of str, default ("model",)
        Design columns; one model per group.
    position : {"free", "first_last", "decay", "none"}, default "free"
        ``free``: one effect per position 2..K relative to position 1. ``first_last``: an effect for the
        first and one for the last position (relative to the middle). ``decay``: ``gamma * log(p)``.
    features : sequence of str, pandas.DataFrame or ToolFeatures, optional
        Tool features: names of numeric catalog columns, or a table with ``tool_id`` and numeric columns
        (all of them used), or a :class:`ToolFeatures`.
    worth : {"tool", "features"}, optional
        ``tool`` (default without features): a free worth per tool. ``features`` (default with features):
        the worth is ``features @ beta`` (a free worth per tool would absorb any tool-level feature).
    interactions : sequence of str, default ()
        Design columns (not in ``by``) interacting with the position terms and the features (numeric
        columns as they are; text columns as indicators against their first level).
    penalty : {"firth", "prior", "none"}, default "firth"
        ``firth``: maximise ``loglik + ½ log det I`` (finite estimates when a tool always or never wins;
        first-order bias removed). ``prior``: independent ``N(0, prior_scale²)`` priors on every coefficient.
        ``none``: maximum likelihood (raises when a worth is infinite). The mixed logit uses the prior
        whenever the penalty is not ``"none"``.
    prior_scale : float, default 2.5
        Prior standard deviation (log-odds) for ``penalty="prior"`` and the mixed logit.
    se : {"sandwich", "bootstrap", "model"}, default "sandwich"
        Query-clustered sandwich, query bootstrap (percentile intervals, ``n_resamples`` replicates) or
        inverse information. The mixed logit's sandwich is ``H^-1 (sum_q s_q s_q') H^-1 · G/(G-1)`` with ``H``
        minus the Hessian of its simulated likelihood (``model``: ``H^-1``).
    mixed : bool, default False
        Add independent ``N(0, sigma²)`` query x tool random effects (shared by every attempt of a query),
        fitted by simulated maximum likelihood with ``n_draws`` antithetic draws.
    n_draws : int, default 100
    n_resamples : int, default 200
    confidence_level : float, default 0.95
    reference : str or sequence of str, optional
        Reference tool(s), one per component; default the first tool of each component in catalog order.
    mismatch : {"exclude", "tool", "position"}, default "exclude"
        Attempts whose recorded position disagrees with the list: excluded and counted, or the tool (or
        the recorded position) trusted.
    rng : None, int or numpy.random.Generator
        For the mixed-logit draws and the bootstrap.

    Returns
    -------
    ChoiceModelResult
        Frozen; ``tool_effects``, ``position_effects``, ``feature_effects``, ``implied_bias``,
        ``fit_table``, ``groups`` (one row per group: rows used and excluded, convergence, log-likelihood,
        dispersion, position tests), ``components``; ``to_frame()``, ``to_dict()``.

    Raises
    ------
    ValueError
        No list shown, unknown options, a feature missing for a tool, parameters the data cannot separate
        (e.g. a fixed ordering confounds positions with tools), or an infinite ML worth with ``penalty="none"``.

    Warns
    -----
    ExcludedRowsWarning
        When attempts are excluded (by reason in ``groups``).
    DegenerateDataWarning
        Several components, tools not in any comparison, attempts without queries.
    ConvergenceWarning
        When a fit did not converge (or a worth diverges).

    Notes
    -----
    Identical attempts (same query, list and choice) are merged into weighted cells, and the Newton
    iterations run on cells merged over queries too; the query-clustered sandwich is
    ``I^-1 (sum_q s_q s_q') I^-1 · G/(G-1)`` with ``s_q`` the score of query ``q``.

    Examples
    --------
    >>> import toolbias_stats as tbs
    >>> from toolbias_stats.choicemodel import simulate_logit_log
    >>> log = simulate_logit_log(n_queries=60, rng=1)
    >>> res = tbs.choice_model(log, by=None)
    >>> res.position_effects["position"].tolist()     # position 1 is the reference (0)
    [1, 2, 3, 4]
    >>> bool(res.converged)
    True
    """
    position_form, penalty_form, se_method, on_mismatch, confidence_level, n_resamples = _check_options(
        position, penalty, se, mismatch, confidence_level, n_resamples, n_draws, prior_scale, mixed)
    rng = check_rng(rng)
    by, interactions = _by_and_interactions(by, interactions)
    groups, catalog, _design = prepare_groups(log_or_counts, by, mismatch=on_mismatch, extra=tuple(interactions))
    feat = _feature_table(features, catalog)
    worth_form = _check_worth(worth, feat, interactions)
    settings = dict(by=tuple(by), position=position_form, worth=worth_form,
                    features=None if feat is None else tuple(feat.columns),
                    interactions=tuple(interactions), penalty=penalty_form, prior_scale=float(prior_scale),
                    se=se_method, mixed=bool(mixed), n_draws=int(n_draws), n_resamples=int(n_resamples),
                    confidence_level=confidence_level, mismatch=on_mismatch)
    z = _stats().norm.ppf(0.5 + confidence_level / 2)
    # the matrices are small (P x P, a few hundred merged cells): one BLAS thread is fastest and avoids
    # thread oversubscription (measured 50x slower with 2 busy threads on a shared machine)
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1, user_api="blas"):
        out = [_fit_group(g, catalog, feat, reference, settings, z, rng) for g in groups]
    if not any(g.get("fitted", True) for g in out):
        raise ValueError("no attempt can be used by the choice model in any group (excluded by reason: "
                         + "; ".join(f"{_label(g['keys']) or 'all'}: {g['excluded']}" for g in out) + ").")
    warn_list: list[str] = []
    for g in out:
        warn_list.extend(f"{_label(g['keys'])}: {m}" if g["keys"] else m for m in g["warnings"])
    n_ex = sum(g["n_excluded"] for g in out)
    if n_ex:
        warnings.warn(f"{n_ex} attempt(s) excluded from the choice model (by reason in `result.groups`).",
                      ExcludedRowsWarning, stacklevel=2)
    for m in warn_list:
        cls = ConvergenceWarning if "converge" in m or "diverg" in m else DegenerateDataWarning
        warnings.warn(m, cls, stacklevel=2)
    return ChoiceModelResult.from_groups(out, settings, tuple(warn_list))


# -- choice_model's stages: check the options -> prepare the groups -> fit each group -> collect -----------------
def _check_options(position: Any, penalty: Any, se: Any, mismatch: Any, confidence_level: Any, n_resamples: Any,
                   n_draws: Any, prior_scale: Any, mixed: Any) -> tuple[str, str, str, str, float, int]:
    """The checked options ``(position, penalty, se, mismatch, confidence_level, n_resamples)``."""
    position = check_choice("position", position, POSITION_FORMS)
    penalty = check_choice("penalty", "none" if penalty is None else penalty, PENALTIES)
    se = check_choice("se", se, SE_METHODS)
    mismatch = check_choice("mismatch", mismatch, ("exclude", "tool", "position"))
    confidence_level = check_confidence_level(confidence_level)
    n_resamples = check_n_resamples(n_resamples)
    if isinstance(n_draws, bool) or not isinstance(n_draws, numbers.Integral) or n_draws < 2:
        raise ValueError(f"`n_draws` must be an integer >= 2; got {n_draws!r} instead.")
    if isinstance(prior_scale, bool) or not isinstance(prior_scale, numbers.Real) or not float(prior_scale) > 0:
        raise ValueError(f"`prior_scale` must be a positive number; got {prior_scale!r} instead.")
    if se == "bootstrap" and mixed:
        raise ValueError("se='bootstrap' is not available with mixed=True (each replicate would be a full simulated "
                         "fit); the mixed logit's intervals use the query-clustered sandwich.")
    if se == "bootstrap" and n_resamples < 2:
        raise ValueError("se='bootstrap' needs `n_resamples` >= 2.")
    return position, penalty, se, mismatch, confidence_level, n_resamples


def _by_and_interactions(by: Any, interactions: Any) -> tuple[list, list]:
    """``by`` and ``interactions`` as lists of column names (no column in both)."""
    by = [b.strip() for b in by.split(",") if b.strip()] if isinstance(by, str) else list(by or [])
    interactions = [interactions] if isinstance(interactions, str) else list(interactions or [])
    if set(interactions) & set(by):
        raise ValueError(f"`interactions` {sorted(set(interactions) & set(by))} are also in `by`: inside a group they "
                         "are constant.")
    return by, interactions


def _check_worth(worth: Any, feat: pd.DataFrame | None, interactions: list) -> str:
    """The worth form: given, or ``features`` with features and ``tool`` without; checked against the features."""
    worth = check_choice("worth", worth if worth is not None else ("features" if feat is not None else "tool"), WORTHS)
    if worth == "features" and feat is None:
        raise ValueError("worth='features' needs `features`.")
    if worth == "tool" and feat is not None and not interactions:
        raise ValueError("tool features are constant per tool, so a free worth per tool absorbs them: use "
                         "worth='features' (the default with features), or give `interactions` so that the "
                         "features' effects vary with a design column.")
    return worth


def _label(keys):
    return ", ".join(f"{k}={v}" for k, v in keys.items())


def _feature_table(features, catalog):
    """Tool features as a DataFrame indexed by tool_id (numeric columns), or None."""
    if features is None:
        return None
    if hasattr(features, "table") and hasattr(features, "feature_names"):
        t = features.table.set_index(features.table["tool_id"].astype(str))[list(features.feature_names)]
    elif isinstance(features, pd.DataFrame):
        if "tool_id" not in features.columns:
            raise ValueError("a feature table must have a `tool_id` column.")
        t = features.set_index(features["tool_id"].astype(str))
        t = t[[c for c in t.columns if c not in ("tool_id", "cluster_id", "api_index")
               and pd.api.types.is_numeric_dtype(t[c]) and not pd.api.types.is_bool_dtype(t[c])]]
    else:
        names = [features] if isinstance(features, str) else list(features)
        cat = catalog.table
        bad = [n for n in names if n not in cat.columns]
        if bad:
            raise ValueError(f"features {bad} are not columns of the catalog; numeric catalog columns: "
                             f"{[c for c in cat.columns if pd.api.types.is_numeric_dtype(cat[c])]}.")
        t = cat.set_index(cat["tool_id"].astype(str))[names]
        nonnum = [n for n in names if not pd.api.types.is_numeric_dtype(t[n])]
        if nonnum:
            raise ValueError(f"features {nonnum} are not numeric catalog columns.")
    if t.shape[1] == 0:
        raise ValueError("`features` has no numeric feature column.")
    t = t[~t.index.duplicated()]
    return t.astype(float)


# -- design matrix -----------------------------------------------------------------------------------------------
def _interaction_columns(g: GroupData, interactions):
    """(names, values (C, m)) of the interacting design columns: numbers as they are, text as indicators."""
    names, cols = [], []
    design = cast(pd.DataFrame, g.design)   # interactions are only built for groups with design columns
    for col in interactions:
        v = design[col]
        if pd.api.types.is_numeric_dtype(v) and not pd.api.types.is_bool_dtype(v):
            names.append(col)
            cols.append(v.to_numpy(float))
        else:
            levels = sorted(v.astype(str).unique())
            for lev in levels[1:]:
                names.append(f"{col}={lev}")
                cols.append((v.astype(str) == lev).to_numpy(float))
    return names, (np.column_stack(cols) if cols else np.zeros((len(g.chosen), 0)))


def _design(g: GroupData, feat, position, worth, refs, interactions):
    """X (C, K, P), mask, and the parameter table (kind, term, column)."""
    C, K = g.items.shape
    mask = g.items >= 0
    sizes = mask.sum(axis=1)
    blocks, terms = [], []
    if worth == "tool":
        free = [i for i in range(len(g.tools)) if i not in refs]
        Xt = np.zeros((C, K, len(free)))
        for j, t in enumerate(free):
            Xt[:, :, j] = g.items == t
        blocks.append(Xt)
        terms += [("tool", g.tools[t]) for t in free]
    pos = np.arange(1, K + 1)[None, :].repeat(C, axis=0).astype(float)
    if position == "free":
        Xp = np.stack([(pos == p) & mask for p in range(2, K + 1)], axis=2).astype(float)
        pterms = [("position", str(p)) for p in range(2, K + 1)]
    elif position == "first_last":
        Xp = np.stack([(pos == 1) & mask, (pos == sizes[:, None]) & mask], axis=2).astype(float)
        pterms = [("position", "first"), ("position", "last")]
    elif position == "decay":
        Xp = (np.log(pos) * mask)[:, :, None]
        pterms = [("position", "log_position")]
    else:
        Xp = np.zeros((C, K, 0))
        pterms = []
    blocks.append(Xp)
    terms += pterms
    Xf = None
    if feat is not None:
        tool_ids = np.array(g.tools, dtype=object)
        missing = [t for t in g.tools if t not in feat.index]
        if missing:
            raise ValueError(f"features are missing for {len(missing)} tool(s) shown: {missing[:10]}.")
        F = feat.loc[list(tool_ids)].to_numpy(float)
        bad = ~np.isfinite(F)
        if bad.any():
            rows, cols = np.nonzero(bad)
            raise ValueError("features have missing or infinite values for tool(s) "
                             f"{sorted({g.tools[r] for r in rows})[:10]} in {sorted({feat.columns[c] for c in cols})}.")
        Xf = np.where(mask[:, :, None], F[np.maximum(g.items, 0)], 0.0)
        if worth == "features":
            blocks.append(Xf)
            terms += [("feature", f) for f in feat.columns]
    if interactions:
        inames, D = _interaction_columns(g, interactions)
        for m, nm in enumerate(inames):
            if Xp.shape[2]:
                blocks.append(Xp * D[:, m][:, None, None])
                terms += [("position_x", f"{t}:{nm}") for _, t in pterms]
            if Xf is not None:
                blocks.append(Xf * D[:, m][:, None, None])
                terms += [("feature_x", f"{f}:{nm}") for f in feat.columns]
    X = np.concatenate(blocks, axis=2) if blocks else np.zeros((C, K, 0))
    return X, mask, terms


def _components(g: GroupData):
    """Connected components of the comparison graph (tools shown together); component id per tool."""
    n = len(g.tools)
    parent = list(range(n))

    def find(a):
        while parent[a] != a:
            parent[a] = parent[parent[a]]
            a = parent[a]
        return a

    for row in np.unique(g.items, axis=0):
        row = row[row >= 0]
        for t in row[1:]:
            ra, rb = find(int(row[0])), find(int(t))
            if ra != rb:
                parent[max(ra, rb)] = min(ra, rb)
    roots = [find(i) for i in range(n)]
    order = {r: k for k, r in enumerate(dict.fromkeys(roots))}
    return np.array([order[r] for r in roots], dtype=np.int64)


def _references(g, comp, reference):
    refs = {}
    wanted = [] if reference is None else ([reference] if isinstance(reference, str) else list(reference))
    unknown = [r for r in wanted if r not in g.tools]
    if unknown and reference is not None and len(g.tools):
        raise ValueError(f"reference tool(s) {unknown} are not shown in any used list of group {g.keys or 'all'}.")
    for r in wanted:
        c = comp[g.tools.index(r)]
        if c in refs:
            raise ValueError(f"reference tools {g.tools[refs[c]]!r} and {r!r} are in the same component; give one "
                             "per component.")
        refs[c] = g.tools.index(r)
    for i, c in enumerate(comp):
        refs.setdefault(int(c), i)
    return refs


def _check_identified(info, terms, label):
    """Raise when the information is singular (parameters the data cannot separate)."""
    if not info.size:
        return
    d = np.sqrt(np.clip(np.diag(info), 1e-300, None))
    R = info / np.outer(d, d)
    ev, evec = np.linalg.eigh(R)
    tiny = ev < 1e-9 * max(1.0, ev.max())
    zero_diag = np.diag(info) <= 1e-12
    if zero_diag.any():
        names = [f"{k} {t}" for (k, t), z in zip(terms, zero_diag) if z]
        raise ValueError(f"{label}the data carry no information on {names} (the term never varies within a list).")
    if tiny.any():
        v = evec[:, np.argmin(ev)]
        names = [f"{terms[i][0]} {terms[i][1]}" for i in np.argsort(-np.abs(v))[:4] if abs(v[i]) > 0.1]
        raise ValueError(f"{label}the data cannot separate {names}: they are confounded (e.g. every tool is always "
                         "shown at the same position, or a feature is a combination of others). Vary the orderings, "
                         "drop a term or use position='none'.")


# -- one group -------------------------------------------------------------------------------------------------
def _fit_group(g: GroupData, catalog, feat, reference, st, z, rng):
    label = f"group {_label(g.keys)}: " if g.keys else ""
    res: dict[str, Any] = dict(keys=g.keys, n_used=g.n_used, n_excluded=g.n_excluded, excluded=dict(g.excluded),
                               warnings=[], tools=list(g.tools))
    if g.n_used == 0 or not len(g.tools):
        return _empty_group(res, g)
    comp, refs_by_comp = _group_components(g, catalog, reference, st, res)
    X, mask, terms = _design(g, feat, st["position"], st["worth"], set(refs_by_comp.values()), st["interactions"])
    P = X.shape[2]
    scale = _regressor_scale(X, mask, terms)
    Xs = X / scale
    key = g.items if g.design is None else np.column_stack(
        [g.items] + [pd.factorize(g.design[c])[0] for c in g.design.columns])
    Xa, ma, ca, wa, inv = aggregate_cells(Xs, mask, g.chosen, g.weight, key=key)
    # merged cells that also keep the cluster apart (for the per-cluster implied bias)
    key_cl = np.column_stack([key, pd.factorize(g.cluster)[0]])
    _, _, _, wa_cl, inv_cl = aggregate_cells(Xs, mask, g.chosen, g.weight, key=key_cl)
    first = np.unique(inv_cl, return_index=True)[1]
    _, _, info0, _, _ = clogit_parts(np.zeros(P), Xa, ma, ca, wa)
    _check_identified(info0, terms, label)
    if st["penalty"] == "none" and st["worth"] == "tool":
        _check_separation(g, label)
    # N(0, prior_scale^2) on the original scale: theta = theta_scaled / scale, so precision / scale^2
    prior_prec = np.full(P, 1.0 / st["prior_scale"] ** 2) / scale ** 2
    pen = st["penalty"]
    fit = fit_clogit(Xa, ma, ca, wa, penalty=None if pen == "none" else pen, prior_prec=prior_prec)
    res["converged"] = bool(fit.converged)
    if st["mixed"]:
        theta_s, cov_s, loglik, sigma, sigma_se = _mixed_fit(g, Xs, mask, fit, st, prior_prec, rng, res)
        cov_model = res.pop("cov_model_scaled") / np.outer(scale, scale)     # H^-1: model-based, original scale
    else:
        sigma = sigma_se = None
        theta_s, loglik = fit.theta, fit.loglik
        cov_s, cov_model = _clogit_cov(g, fit, Xs, mask, scale, st["se"])
    theta = theta_s / scale
    cov = cov_s / np.outer(scale, scale)
    se = np.sqrt(np.clip(np.diag(cov), 0, None))
    lo, hi = theta - z * se, theta + z * se
    if st["se"] == "bootstrap" and not st["mixed"]:
        boot = _bootstrap(g, Xa, ma, ca, inv, fit.theta, pen, prior_prec, st["n_resamples"], rng) / scale
        a = (1 - st["confidence_level"]) / 2
        se = boot.std(axis=0, ddof=1)
        lo, hi = np.quantile(boot, a, axis=0), np.quantile(boot, 1 - a, axis=0)
        cov = np.cov(boot, rowvar=False).reshape(P, P)
    if not res["converged"]:
        res["warnings"].append("the fit did not converge (or an estimate diverges): estimates are unreliable")
    res.update(terms=terms, theta=theta, cov=cov, se=se, lo=lo, hi=hi, loglik=loglik, n_params=P, sigma=sigma,
               sigma_se=sigma_se, n_queries=len(g.query_labels) if g.queries_known else None, z=z)
    _effect_tables(res, g, terms, theta, cov, se, lo, hi, comp, refs_by_comp, st["position"], z)
    # fitted probabilities with the logged lists (random effects integrated out for the mixed logit: the
    # conditional-logit fit is the population-averaged description used for the fit tables)
    p_fit, _ = _probs_np(Xs, mask, theta_s if not st["mixed"] else fit.theta)
    res["fit_table"], res["dispersion"] = _fit_tables(g, p_fit, P)
    res["heterogeneity"] = _position_heterogeneity(g, p_fit, terms, cov, cov_model, st)
    if st["se"] == "model" and res["heterogeneity"]["detected"]:
        res["warnings"].append("queries differ in their position effect: the model-based intervals (se='model') "
                               "are too narrow; use the query-clustered sandwich (se='sandwich')")
    res["implied_bias"] = _implied_bias(g.items[first], g.chosen[first], g.cluster[first], wa_cl, X[first],
                                        mask[first], terms, theta if not st["mixed"] else fit.theta / scale, rng)
    # the Wald test's covariance is estimated from the queries (clusters) unless it is model-based
    n_clusters = len(g.query_labels) if (g.queries_known and (st["se"] != "model" or st["mixed"])) else None
    res.update(_position_tests(terms, theta, cov, cov_model, n_clusters, Xa, ma, ca, wa, loglik, st, pen,
                               prior_prec))
    return res


# -- _fit_group's stages: components -> design -> fit (conditional or mixed) -> covariance -> tables --------------
def _group_components(g: GroupData, catalog: Any, reference: Any, st: dict, res: dict) -> tuple[np.ndarray, dict]:
    """``(component per tool, {component: reference tool index})``; the group's notes and components in ``res``."""
    if not g.queries_known:
        res["warnings"].append("the input has no query ids (counts): standard errors treat attempts as independent")
    if st["worth"] == "features":
        res["warnings"].append("worth = features @ beta: the feature intervals assume the features explain the tools' "
                               "worths; residual tool differences are not covered (docs/choice_model.md, Limits)")
    comp = _components(g)
    refs_by_comp = _references(g, comp, reference) if st["worth"] == "tool" else {}
    n_comp = int(comp.max()) + 1
    # components that are the catalog's clusters (BiasBusters) are the design, not a problem worth a warning
    if n_comp > max(1, len(set(g.cluster.tolist()))) and st["worth"] == "tool":
        res["warnings"].append(f"the comparison graph has {n_comp} connected components: worths are comparable "
                               "only within a component (one reference tool each; see `result.components`)")
    never_shown = [t for t in catalog.table["tool_id"].astype(str) if t not in set(g.tools)]
    res["components"] = pd.DataFrame({"tool_id": g.tools, "component": comp + 1,
                                      "reference_tool": [g.tools[refs_by_comp[c]] if refs_by_comp else None
                                                         for c in comp]})
    res["not_compared"] = never_shown
    return comp, refs_by_comp


def _regressor_scale(X: np.ndarray, mask: np.ndarray, terms: list) -> np.ndarray:
    """Root mean square of each non-tool regressor over the shown items (1 for tools and constant columns): the
    Newton iterations run on ``X / scale`` (well conditioned); estimates are transformed back."""
    P = X.shape[2]
    scale = np.ones(P)
    for j in range(P):
        if terms[j][0] not in ("tool",):
            s = np.sqrt(np.average(X[:, :, j][mask] ** 2))
            scale[j] = s if s > 0 else 1.0
    return scale


def _mixed_fit(g: GroupData, Xs: np.ndarray, mask: np.ndarray, fit: Any, st: dict, prior_prec: np.ndarray,
               rng: np.random.Generator, res: dict) -> tuple:
    """``(theta, covariance, loglik, sigma, sigma_se)`` of the mixed logit (scaled regressors), started at the
    conditional-logit fit."""
    pen = st["penalty"]
    qp = g.query[:, None] * len(g.tools) + np.maximum(g.items, 0)
    uniq, pair = np.unique(qp[mask], return_inverse=True)
    pair_full = np.zeros(mask.shape, dtype=np.int64)
    pair_full[mask] = pair.ravel()
    mfit = fit_mixed(Xs, mask, g.chosen, g.weight, g.query, len(g.query_labels), pair_full, len(uniq),
                     rng=rng, n_draws=st["n_draws"],
                     prior_prec=None if pen == "none" else prior_prec, beta0=fit.theta)
    # the query-clustered sandwich (issue 35): the model-based (or score outer-product) covariance shrinks when
    # queries differ in ways the query x tool effects do not describe, e.g. in their position effect
    sand, model = mixed_sandwich(mfit)
    cov_full = model if st["se"] == "model" else sand
    cov_s = cov_full[:-1, :-1]
    sigma = mfit.sigma
    if mfit.sigma > SIGMA_BOUNDARY:
        sigma_se = float(np.sqrt(max(cov_full[-1, -1], 0.0)))
    else:   # at the boundary sigma = 0 the score of sigma vanishes: no Wald interval for it
        sigma_se = float("nan")
        res["warnings"].append("the random-effect sd is estimated at its boundary 0 (no query heterogeneity "
                               "detected); the mixed logit reduces to the conditional logit")
    res["cov_model_scaled"] = model[:-1, :-1]
    res["converged"] = bool(mfit.converged)
    return mfit.theta, cov_s, mfit.loglik, sigma, sigma_se


def _clogit_cov(g: GroupData, fit: Any, Xs: np.ndarray, mask: np.ndarray, scale: np.ndarray,
                se: str) -> tuple[np.ndarray, np.ndarray]:
    """``(covariance on the scaled regressors, model-based covariance on the original scale)`` of the conditional
    logit: inverse information, or the query-clustered sandwich ``I^-1 (sum_q s_q s_q') I^-1 G/(G-1)``."""
    P = Xs.shape[2]
    bread = _safe_inv(fit.info)
    cov_model = bread / np.outer(scale, scale)
    if se == "model":
        return bread, cov_model
    sc = cell_scores(fit.theta, Xs, mask, g.chosen) * g.weight[:, None]
    if g.queries_known:
        G = len(g.query_labels)
        sq = np.zeros((G, P))
        np.add.at(sq, g.query, sc)
        meat = sq.T @ sq * (G / max(G - 1, 1))
    else:
        s1 = sc / g.weight[:, None]
        meat = (s1 * g.weight[:, None]).T @ s1
    return bread @ meat @ bread, cov_model


def _effect_tables(res: dict, g: GroupData, terms: list, theta: np.ndarray, cov: np.ndarray, se: np.ndarray,
                   lo: np.ndarray, hi: np.ndarray, comp: np.ndarray, refs_by_comp: dict, position: str,
                   z: float) -> None:
    """The tool, position and feature effect tables of one group (in ``res``)."""
    res["tool_effects"] = _tool_table(g, terms, theta, se, lo, hi, comp, refs_by_comp)
    res["position_effects"] = _position_table(g, terms, theta, cov, se, lo, hi, position, z)
    res["feature_effects"] = pd.DataFrame(
        [dict(feature=t, estimate=theta[i], se=se[i], ci_low=lo[i], ci_high=hi[i], kind=k)
         for i, (k, t) in enumerate(terms) if k in ("feature", "feature_x", "position_x")],
        columns=["feature", "estimate", "se", "ci_low", "ci_high", "kind"])


def _empty_group(res, g):
    """A group with no usable attempt: reported (rows excluded by reason), not fitted."""
    res["warnings"].append(f"no attempt can be used (excluded by reason: {g.excluded}); the group is not fitted")
    nan = float("nan")
    empty = pd.DataFrame()
    res.update(converged=False, components=pd.DataFrame(columns=["tool_id", "component", "reference_tool"]),
               not_compared=[], terms=[], loglik=nan, n_params=0, sigma=None, sigma_se=None, n_queries=None,
               tool_effects=empty, position_effects=empty, feature_effects=empty, fit_table=empty,
               implied_bias=empty, dispersion=dict(pearson_chi2=nan, df=nan, dispersion=nan, p_value=nan),
               heterogeneity=dict(position_dispersion=nan, position_dispersion_df=nan, position_dispersion_p=nan,
                                  se_ratio=nan, detected=False, advice=""),
               wald_stat=nan, wald_df=0, wald_p=nan, wald_df_resid=nan, lr_stat=nan, lr_deff=nan, lr_p=nan,
               fitted=False)
    return res


def _safe_inv(a):
    try:
        return np.linalg.inv(a)
    except np.linalg.LinAlgError:
        return np.linalg.pinv(a)


def _probs_np(X, mask, theta):
    from ._fit import _probs
    return _probs(X, mask, theta)


def _check_separation(g, label):
    """Maximum likelihood only: a tool never (or always) chosen where shown has an infinite worth."""
    C, K = g.items.shape
    rows = np.arange(C)
    chosen_tool = g.items[rows, g.chosen]
    n = len(g.tools)
    shown = np.zeros(n)
    won = np.zeros(n)
    for j in range(K):
        ok = g.items[:, j] >= 0
        np.add.at(shown, g.items[ok, j], g.weight[ok])
    np.add.at(won, chosen_tool, g.weight)
    for t in range(n):
        if won[t] == 0:
            raise ValueError(label + SEPARATION_MESSAGE.format(tool=g.tools[t], what="never chosen", n=int(shown[t]),
                                                               where="", inf="-infinity"))
        if won[t] == shown[t]:
            raise ValueError(label + SEPARATION_MESSAGE.format(tool=g.tools[t], what="chosen", n=int(shown[t]),
                                                               where="", inf="+infinity"))


def _tool_table(g, terms, theta, se, lo, hi, comp, refs_by_comp):
    C, K = g.items.shape
    n = len(g.tools)
    shown = np.zeros(n)
    won = np.zeros(n)
    for j in range(K):
        ok = g.items[:, j] >= 0
        np.add.at(shown, g.items[ok, j], g.weight[ok])
    np.add.at(won, g.items[np.arange(C), g.chosen], g.weight)
    idx = {t: i for i, (k, t) in enumerate(terms) if k == "tool"}
    rows = []
    if not refs_by_comp:
        return pd.DataFrame(columns=["tool_id", "component", "reference_tool", "estimate", "se", "ci_low", "ci_high",
                                     "n_shown", "n_chosen"])
    for i, t in enumerate(g.tools):
        ref = g.tools[refs_by_comp[int(comp[i])]]
        if t in idx:
            j = idx[t]
            e, s, a, b = theta[j], se[j], lo[j], hi[j]
        else:
            e, s, a, b = 0.0, 0.0, 0.0, 0.0
        rows.append(dict(tool_id=t, component=int(comp[i]) + 1, reference_tool=ref, estimate=e, se=s, ci_low=a,
                         ci_high=b, n_shown=int(round(shown[i])), n_chosen=int(round(won[i]))))
    return pd.DataFrame(rows)


def _position_table(g, terms, theta, cov, se, lo, hi, form, z):
    """Effect of every position 2..K relative to position 1 (log-odds), and implied shares with equal worths."""
    K = g.k_max
    pidx = [i for i, (k, _) in enumerate(terms) if k == "position"]
    if form == "none" or not pidx:
        return pd.DataFrame(columns=["position", "estimate", "se", "ci_low", "ci_high", "share", "share_ci_low",
                                     "share_ci_high"])
    # L maps the position parameters to the log-odds of positions 1..K relative to position 1 (sets of size K)
    L = np.zeros((K, len(pidx)))
    for p in range(1, K + 1):
        if form == "free":
            if p >= 2:
                L[p - 1, p - 2] = 1.0
        elif form == "first_last":
            L[p - 1] = [(1.0 if p == 1 else 0.0) - 1.0, 1.0 if p == K else 0.0]
        else:
            L[p - 1, 0] = math.log(p)
    th = theta[pidx]
    V = cov[np.ix_(pidx, pidx)]
    eff = L @ th
    eff_se = np.sqrt(np.clip(np.einsum("ij,jk,ik->i", L, V, L), 0, None))
    sh = np.exp(eff - eff.max())
    sh = sh / sh.sum()
    J = (np.diag(sh) - np.outer(sh, sh)) @ L                    # d share / d position parameters
    sh_se = np.sqrt(np.clip(np.einsum("ij,jk,ik->i", J, V, J), 0, None))
    rows = []
    for p in range(1, K + 1):
        if form == "free" and p >= 2:
            e, s, a, b = theta[pidx[p - 2]], se[pidx[p - 2]], lo[pidx[p - 2]], hi[pidx[p - 2]]
        else:
            e, s = eff[p - 1], eff_se[p - 1]
            a, b = e - z * s, e + z * s
        if p == 1:
            continue
        rows.append(dict(position=p, estimate=e, se=s, ci_low=a, ci_high=b, share=sh[p - 1],
                         share_ci_low=max(0.0, sh[p - 1] - z * sh_se[p - 1]),
                         share_ci_high=min(1.0, sh[p - 1] + z * sh_se[p - 1])))
    first = dict(position=1, estimate=0.0, se=0.0, ci_low=0.0, ci_high=0.0, share=sh[0],
                 share_ci_low=max(0.0, sh[0] - z * sh_se[0]), share_ci_high=min(1.0, sh[0] + z * sh_se[0]))
    return pd.DataFrame([first] + rows)


def _fit_tables(g, p, n_params):
    """Observed vs expected choices per cluster x position; Pearson dispersion over queries x tools."""
    C, K = g.items.shape
    rows = np.arange(C)
    exp_pos = p * g.weight[:, None]
    obs_pos = np.zeros((C, K))
    obs_pos[rows, g.chosen] = g.weight
    recs = []
    for cl in sorted(set(g.cluster)):
        sel = g.cluster == cl
        o, e = obs_pos[sel].sum(axis=0), exp_pos[sel].sum(axis=0)
        for j in range(K):
            if e[j] > 0 or o[j] > 0:
                recs.append(dict(cluster_id=cl, position=j + 1, observed=o[j], expected=e[j],
                                 pearson_residual=(o[j] - e[j]) / np.sqrt(e[j]) if e[j] > 0 else np.nan))
    table = pd.DataFrame(recs)
    disp = dict(pearson_chi2=np.nan, df=np.nan, dispersion=np.nan, p_value=np.nan)
    if g.queries_known:
        n = len(g.tools)
        key_o = g.query * n + g.items[rows, g.chosen]
        O = np.bincount(key_o, weights=g.weight, minlength=len(g.query_labels) * n)
        ok = g.items >= 0
        key_e = (g.query[:, None] * n + np.maximum(g.items, 0))[ok]
        E = np.bincount(key_e, weights=exp_pos[ok], minlength=len(g.query_labels) * n)
        shown = np.bincount(key_e, minlength=len(g.query_labels) * n) > 0
        chi2 = float(np.sum((O[shown] - E[shown]) ** 2 / np.where(E[shown] > 0, E[shown], np.inf)))
        n_tools_q = np.bincount(np.unique(key_e) // n, minlength=len(g.query_labels))
        df = float(np.sum(np.maximum(n_tools_q - 1, 0)) - n_params)
        if df > 0:
            disp = dict(pearson_chi2=chi2, df=df, dispersion=chi2 / df, p_value=float(_stats().chi2.sf(chi2, df)))
    return table, disp


#: Per-query first-position dispersion p-value and sandwich / model-based SE ratio beyond which queries are said to
#: differ in their position effect (docs/choice_model.md, "Which interval to trust").
HETEROGENEITY_P = 0.01
HETEROGENEITY_SE_RATIO = 1.5


def _position_heterogeneity(g, p, terms, cov, cov_model, st):
    """Do queries differ in their position effect? Two checks and the interval they recommend.

    ``position_dispersion``: Pearson ``X2 = sum_q (O_q - E_q)^2 / V_q / (G - 1)`` of each query's first-position
    choices ``O_q`` against the fit (``E_q = sum w p_1``, ``V_q = sum w p_1 (1 - p_1)``, attempts independent given
    the model); about 1 when queries share one position effect, larger when it varies between them (issue 35).
    ``se_ratio``: ``sqrt(tr(V_model^-1 V) / q)`` over the ``q`` position terms, the interval covariance ``V`` against
    the model-based one (1 when the model's variance holds).
    """
    nan = float("nan")
    out = dict(position_dispersion=nan, position_dispersion_df=nan, position_dispersion_p=nan, se_ratio=nan,
               detected=False, advice="")
    pidx = [i for i, (k, _) in enumerate(terms) if k == "position"]
    if g.queries_known and len(g.query_labels) > 1:
        first = (g.chosen == 0).astype(float) * g.weight
        p1 = p[:, 0]
        G = len(g.query_labels)
        O, E = (np.bincount(g.query, weights=v, minlength=G) for v in (first, g.weight * p1))
        V = np.bincount(g.query, weights=g.weight * p1 * (1 - p1), minlength=G)
        ok = V > 1e-12
        df = int(ok.sum()) - 1
        if df > 0:
            x2 = float(np.sum((O[ok] - E[ok]) ** 2 / V[ok]))
            out.update(position_dispersion=x2 / df, position_dispersion_df=df,
                       position_dispersion_p=float(_stats().chi2.sf(x2, df)))
    if pidx and cov_model is not None:
        try:
            V_m = cov_model[np.ix_(pidx, pidx)]
            other = cov[np.ix_(pidx, pidx)]
            out["se_ratio"] = float(np.sqrt(max(np.trace(np.linalg.solve(V_m, other)) / len(pidx), 0.0)))
        except np.linalg.LinAlgError:
            pass
    if st["se"] == "model":      # the interval is the model-based one: compare the sandwich instead
        out["se_ratio"] = nan
    det = bool(out["position_dispersion_p"] < HETEROGENEITY_P) or bool(out["se_ratio"] > HETEROGENEITY_SE_RATIO)
    out["detected"] = det
    if not g.queries_known:
        out["advice"] = "no query ids: position heterogeneity between queries cannot be checked"
    elif det:
        out["advice"] = ("queries differ in their position effect (per-query first-position dispersion "
                         f"{out['position_dispersion']:.2f}, p = {out['position_dispersion_p']:.2g}; sandwich SE "
                         f"{out['se_ratio']:.1f}x the model-based): trust the query-clustered sandwich intervals, "
                         "not model-based ones")
    else:
        out["advice"] = ("no position heterogeneity between queries detected (per-query first-position dispersion "
                         f"{out['position_dispersion']:.2f}): sandwich and model-based intervals agree")
    return out


def _perms(k, rng, max_perm=5040):
    if math.factorial(k) <= max_perm:
        return np.array(list(itertools.permutations(range(k))))
    return np.array([rng.permutation(k) for _ in range(max_perm)])


def _implied_bias(items, chosen, cluster, weight, X, mask, terms, theta, rng):
    """delta_API and delta_pos per cluster implied by the fit, with the logged lists and with shuffled lists.

    Works on cells merged over queries (list, choice, cluster) with their weights. The tool part of the
    utility (worth, features) moves with the tool; the position part stays with the slot.
    """
    C, K = mask.shape
    tool_cols = [i for i, (k, _) in enumerate(terms) if k in ("tool", "feature")]
    pos_cols = [i for i, (k, _) in enumerate(terms) if k not in ("tool", "feature")]
    util_tool = X[:, :, tool_cols] @ theta[tool_cols]
    util_pos = X[:, :, pos_cols] @ theta[pos_cols]
    v = np.where(mask, util_tool + util_pos, -np.inf)
    p = np.exp(v - v.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    sizes = mask.sum(axis=1)
    # shuffled lists: the probability of the tool at index j and of each slot, averaged over permutations
    p_shuf_tool = np.zeros((C, K))
    p_shuf_pos = np.zeros((C, K))
    for kk in sorted(set(sizes.tolist())):
        perms = _perms(kk, rng)
        slot = np.argsort(perms, axis=1)                        # slot holding original index i, per perm
        rows = np.flatnonzero(sizes == kk)
        a = util_tool[rows][:, :kk][:, perms]                   # (n, n_perm, kk): tool part in each slot
        u = a + util_pos[rows][:, None, :kk]
        q = np.exp(u - u.max(axis=2, keepdims=True))
        q /= q.sum(axis=2, keepdims=True)
        p_shuf_pos[rows, :kk] = q.mean(axis=1)
        p_shuf_tool[rows, :kk] = np.take_along_axis(q, np.broadcast_to(slot, q.shape), axis=2).mean(axis=1)
    obs = np.zeros((C, K))
    obs[np.arange(C), chosen] = 1.0
    recs = []
    for cl in sorted(set(cluster.tolist())):
        sel = cluster == cl
        w = weight[sel]
        W = w.sum()
        it = items[sel]
        ok = it >= 0
        tools_cl, tcode = np.unique(it[ok], return_inverse=True)
        k_cl = len(tools_cl)
        sz = sorted(set(sizes[sel].tolist()))
        for name, pt, pp in (("observed", obs[sel], obs[sel]), ("logged", p[sel], p[sel]),
                             ("shuffled", p_shuf_tool[sel], p_shuf_pos[sel])):
            ts = np.bincount(tcode.ravel(), weights=(pt * w[:, None])[ok], minlength=k_cl) / W
            d_api = 0.5 * np.abs(ts - 1.0 / k_cl).sum()
            if len(sz) == 1:
                ps = (pp * w[:, None]).sum(axis=0)[:sz[0]] / W
                d_pos = 0.5 * np.abs(ps - 1.0 / sz[0]).sum()
            else:                 # lists of several lengths: no single uniform position reference
                d_pos = float("nan")
            recs.append(dict(cluster_id=cl, orderings=name, delta_api=d_api, delta_pos=d_pos, n_attempts=W))
    return pd.DataFrame(recs)


def _position_tests(terms, theta, cov, cov_model, n_clusters, Xa, ma, ca, wa, loglik, st, pen, prior_prec):
    """Wald and likelihood-ratio tests of 'no position effect', with small-sample references.

    Wald: ``W = b' V^-1 b`` with the interval covariance ``V`` of the ``q`` position terms. When ``V`` is
    estimated from ``G`` queries (clustered sandwich, bootstrap, the mixed logit's clustered sandwich), ``W`` is
    referred to Hotelling's ``T^2``: ``W (G - q) / (q (G - 1)) ~ F(q, G - q)`` (the chi2(q) reference is its
    ``G -> inf`` limit and rejects too often with few queries; docs/choice_model.md, "Size of the test").
    LR: ``2 (l1 - l0)`` (conditional logit only), divided by the Rao-Scott design effect
    ``d = tr(V_model^-1 V) / q`` of the position terms when ``V`` is clustered (the attempts of a query are
    dependent under query heterogeneity; ``d = 1`` for independent attempts) and referred to
    ``F(q, G - q)`` as ``LR / (d q)``; with model-based intervals, ``chi2(q)``.
    """
    pidx = [i for i, (k, _) in enumerate(terms) if k in ("position", "position_x")]
    out = dict(wald_stat=np.nan, wald_df=0, wald_p=np.nan, wald_df_resid=np.nan, lr_stat=np.nan, lr_deff=np.nan,
               lr_p=np.nan)
    if not pidx:
        return out
    q = len(pidx)
    G = n_clusters
    small = G is not None and q < G
    th = theta[pidx]
    V = cov[np.ix_(pidx, pidx)]
    try:
        w = float(th @ np.linalg.solve(V, th))
        dist = _stats()
        p = float(dist.f.sf(w * (G - q) / (q * (G - 1)), q, G - q)) if small else float(dist.chi2.sf(w, q))
        out.update(wald_stat=w, wald_df=q, wald_p=p, wald_df_resid=float(G - q) if small else np.inf)
    except np.linalg.LinAlgError:
        pass
    if not st["mixed"]:
        keep = [i for i in range(len(terms)) if i not in pidx]
        f0 = fit_clogit(Xa[:, :, keep], ma, ca, wa, penalty=None if pen == "none" else pen,
                        prior_prec=prior_prec[keep])
        lr = max(0.0, 2 * (loglik - f0.loglik))
        deff = 1.0
        if small and cov_model is not None:
            try:
                deff = float(np.trace(np.linalg.solve(cov_model[np.ix_(pidx, pidx)], V))) / q
            except np.linalg.LinAlgError:
                deff = np.nan
        if small and np.isfinite(deff) and deff > 0:
            p = float(_stats().f.sf(lr / (deff * q), q, G - q))
        else:
            p = float(_stats().chi2.sf(lr, q))
        out.update(lr_stat=lr, lr_deff=deff, lr_p=p)
    return out


def _bootstrap(g, Xa, ma, ca, inv, theta0, pen, prior_prec, n_resamples, rng):
    """Query bootstrap: resample queries with replacement, refit on the re-weighted merged cells."""
    G = len(g.query_labels)
    out = np.empty((n_resamples, Xa.shape[2]))
    for b in range(n_resamples):
        m = np.bincount(rng.integers(0, G, G), minlength=G)
        w = np.bincount(inv, weights=g.weight * m[g.query], minlength=Xa.shape[0])
        keep = w > 0
        f = fit_clogit(Xa[keep], ma[keep], ca[keep], w[keep], penalty=None if pen == "none" else pen,
                       prior_prec=prior_prec, theta0=theta0)
        out[b] = f.theta
    return out


def comparison_components(log_or_counts: SelectionLog | SelectionCounts | Study, *,
                          by: str | Sequence[str] | None = None,
                          reference: str | Sequence[str] | None = None) -> pd.DataFrame:
    """Which tools are compared with which: the connected components of the comparison graph (no fit).

    Two tools are connected when some usable attempt showed them in the same list (directly or through other
    tools). Worths are identified only within a component; :func:`choice_model` fixes one reference per
    component. Meant for ``validate``: a study whose components are not what its author expects (e.g. two
    description variants never shown together) is found before any model is fitted.

    Parameters
    ----------
    log_or_counts : SelectionLog, SelectionCounts or Study
    by : str or sequence of str, optional
        Design columns; one graph per group.
    reference : str or sequence of str, optional
        Reference tools (default: the first tool of each component in catalog order).

    Returns
    -------
    pandas.DataFrame
        By-keys, ``tool_id``, ``component`` (1-based), ``reference_tool``, ``n_shown`` (attempts that showed
        the tool in a usable list); catalog tools never shown in a usable list have ``component`` 0.

    Examples
    --------
    >>> from toolbias_stats.choicemodel import comparison_components, simulate_logit_log
    >>> comparison_components(simulate_logit_log(n_queries=20, rng=1))["component"].unique().tolist()
    [1]
    """
    by = [b.strip() for b in by.split(",") if b.strip()] if isinstance(by, str) else list(by or [])
    groups, catalog, _ = prepare_groups(log_or_counts, by)
    frames = []
    for g in groups:
        if g.tools:
            comp = _components(g)
            refs = _references(g, comp, reference)
            shown = np.zeros(len(g.tools))
            for j in range(g.items.shape[1]):
                ok = g.items[:, j] >= 0
                np.add.at(shown, g.items[ok, j], g.weight[ok])
            f = pd.DataFrame({"tool_id": g.tools, "component": comp + 1,
                              "reference_tool": [g.tools[refs[c]] for c in comp], "n_shown": shown.astype(np.int64)})
        else:
            f = pd.DataFrame(columns=["tool_id", "component", "reference_tool", "n_shown"])
        rest = [t for t in catalog.table["tool_id"].astype(str) if t not in set(g.tools)]
        f = pd.concat([f, pd.DataFrame({"tool_id": rest, "component": 0, "reference_tool": None, "n_shown": 0})],
                      ignore_index=True) if rest else f
        for i, (k, v) in enumerate(g.keys.items()):
            f.insert(i, k, v)
        frames.append(f)
    return pd.concat(frames, ignore_index=True)
