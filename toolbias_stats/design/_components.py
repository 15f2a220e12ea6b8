"""Variance components of the delta estimators: queries, rotations, runs, attempts (and clusters).

See :func:`variance_components` and docs/design.md.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
from scipy import special

from .._display import ReprHTMLMixin
from .._json import records as _records
from .._validation import check_choice, check_confidence_level, check_n_resamples, check_rng, renamed_attribute
from ..exceptions import DegenerateDataWarning, SmallSampleWarning
from ._data import pilot_groups

if TYPE_CHECKING:
    import os

    from ..io import SelectionCounts, SelectionLog, Study

__all__ = ["variance_components", "VarianceComponents", "pairing_correlation", "COMPONENTS", "DESIGN_METRICS"]

#: Components, in table order. ``cluster`` is reported beside the others and is not part of the total.
COMPONENTS = ("query", "rotation", "run", "query_x_run", "attempt", "cluster")
#: Metrics the decomposition and the planner support.
DESIGN_METRICS = ("delta_api", "delta_pos", "delta_model")
_MATRIX = ("query", "rotation", "run", "query_x_run", "attempt")


# -- the linearised statistic ------------------------------------------------------------------
def _z_parts(cd, which):
    """Per-attempt linearised rate deviations of one target: cell means (Q,S,R,D), per-cell within SSCP or None."""
    if which == "api":
        x, o, k = cd.x_api, cd.o_api, cd.k
    else:
        x, o, k = cd.x_pos, cd.o_pos, cd.k_pos
    n = cd.n
    n_att = o.size * n
    tot = o.sum()
    if tot <= 0:
        return None
    p = x.sum((0, 1, 2)) / tot
    v = tot / n_att                                       # valid choices per attempt
    zsum = (x - p * o[..., None]) / v                     # (Q,S,R,D): sum over the cell's attempts
    m = zsum / n
    within = None
    if n > 1:
        # sum over a cell's valid attempts of (x - p)(x - p)^T, from counts: indicators are idempotent
        xx = x[..., :, None] * np.eye(k)
        px = p[:, None] * x[..., None, :]
        sscp = (xx - px - np.swapaxes(px, -1, -2) + o[..., None, None] * np.outer(p, p)) / v**2
        within = sscp - n * m[..., :, None] * m[..., None, :]
    return dict(m=m, within=within, p=p, u=np.full(k, 1.0 / k), v=v, k=k)


def _linearised(cd, metric, layout):
    """Cell means of the per-attempt vector z (D), its weights a, target u and rates p."""
    parts = []
    for which in ({"delta_api": ["api"], "delta_pos": ["pos"], "delta_model": ["api", "pos"]}[metric]):
        if which == "pos" and cd.x_pos is None:
            return None
        z = _z_parts(cd, which)
        if z is None:
            return None
        parts.append(z)
    if metric == "delta_model" and layout != "log":
        return None    # the tool-position cross products within a cell need the log
    w = 0.5 / len(parts)
    m = np.concatenate([z["m"] for z in parts], -1)
    within = None if parts[0]["within"] is None else parts[0]["within"]
    p = np.concatenate([z["p"] for z in parts])
    u = np.concatenate([z["u"] for z in parts])
    a = np.full(len(p), w)
    return dict(m=m, within=within, p=p, u=u, a=a, sign=np.sign(np.round(p - u, 12)))


# -- moments -----------------------------------------------------------------------------------
def _ss(dev, axes):
    """Sum over ``axes`` of the outer products of the last axis of ``dev``."""
    return np.einsum("...d,...e->...de", dev, dev).sum(axis=tuple(axes))


def _mean_squares(m, within, n, layout):
    """Mean squares of the crossed query x run (x rotation) design; ``m`` is (..., Q, S, R, D)."""
    q, s, r = m.shape[-4:-1]
    ax_q, ax_s, ax_r = -4, -3, -2
    g = m.mean((ax_q, ax_s, ax_r), keepdims=True)
    mq = m.mean((ax_s, ax_r), keepdims=True)
    ms_ = m.mean((ax_q, ax_r), keepdims=True)
    mqs = m.mean(ax_r, keepdims=True)
    mqr = m.mean(ax_s, keepdims=True)
    rn = r * n
    lead = m.ndim - 4
    qsr = tuple(range(lead, lead + 3))
    out = {"Q": _ss(mq - g, qsr) * s * rn / (q - 1)}
    if s > 1:
        out["S"] = _ss(ms_ - g, qsr) * q * rn / (s - 1)
        out["QS"] = _ss(mqs - mq - ms_ + g, qsr) * rn / ((q - 1) * (s - 1))
    if layout == "log" and r > 1:
        out["W"] = _ss(mqr - mq, qsr) * s / (q * (r - 1))
        if s > 1:
            out["E"] = _ss(m - mqs - mqr + mq, qsr) / (q * (s - 1) * (r - 1))
    if within is not None and n > 1:
        out["0"] = within.sum(tuple(range(lead, lead + 3))) / (q * s * r * (n - 1))
    return out


def _coefficients(ms, q, s, r, n, layout):
    """Each component as a linear combination of mean squares, and which components the design identifies."""
    if layout == "log" and s > 1 and "E" in ms:
        coef = {"attempt": {"E": 1.0}, "rotation": {"W": 1 / s, "E": -1 / s}, "query_x_run": {"QS": 1 / r, "E": -1 / r},
                "run": {"S": 1 / (q * r), "QS": -1 / (q * r)}, "query": {"Q": 1 / (s * r), "QS": -1 / (s * r)}}
        ident = dict.fromkeys(_MATRIX, True)
    elif layout == "log" and "W" in ms:          # one run: rotation and attempt noise are not separable
        coef = {"attempt": {"W": 1.0}, "query": {"Q": 1 / r, "W": -1 / r}}
        ident = {"query": True, "attempt": True, "rotation": False, "query_x_run": False, "run": False}
    elif s > 1:                                  # counts: (query, run) cells of n attempts
        coef = {"attempt": {"QS": 1.0}, "run": {"S": 1 / (q * n), "QS": -1 / (q * n)},
                "query": {"Q": 1 / (s * n), "QS": -1 / (s * n)}}
        ident = {"query": True, "attempt": True, "run": True, "rotation": False, "query_x_run": False}
    else:
        coef = {"attempt": {"0": 1.0}, "query": {"Q": 1 / n, "0": -1 / n}} if "0" in ms else {"query": {"Q": 1 / n}}
        ident = {"query": True, "attempt": "0" in ms, "rotation": False, "query_x_run": False, "run": False}
    return coef, ident


def _ms_df(q, s, r, n):
    """Degrees of freedom of each mean square."""
    return {"Q": q - 1, "S": s - 1, "QS": (q - 1) * (s - 1), "W": q * (r - 1), "E": q * (s - 1) * (r - 1),
            "0": q * s * r * (n - 1)}


def _components_from_ms(ms, q, s, r, n, layout):
    """Method-of-moments components (per-attempt units) and which of them the design identifies."""
    coef, ident = _coefficients(ms, q, s, r, n, layout)
    zero = np.zeros_like(ms["Q"])
    comp = {c: sum((a * ms[k] for k, a in coef.get(c, {}).items()), zero) for c in _MATRIX}
    return comp, ident


def _component_interval(terms, alpha, df_cap=None):
    """Interval of ``theta = sum a_i E[MS_i]`` from independent mean squares ``MS_i ~ E[MS_i] chi2(df_i) / df_i``.

    ``terms``: (a_i, MS_i, df_i). The terms with a positive and with a negative coefficient are pooled into
    ``A - B``, each with Satterthwaite's degrees of freedom (accurate for sums of positive terms; ``df_cap`` caps
    those of ``A``: a run-level shift shared by the clusters has ``S - 1``). ``A - B`` gets the modified
    large-sample (MLS) interval of Ting, Burdick, Graybill, Jeyaratnam & Lu (1990; Burdick & Graybill 1992, sec.
    3.3), which keeps its coverage when the difference is small against its terms, where Satterthwaite's
    approximation gives it a fraction of a degree of freedom and an astronomical upper bound. Without negative
    terms it is the chi-square interval. Both bounds are truncated at 0.
    """
    def pooled(sign, cap=None):
        part = [(sign * a * m, d) for a, m, d in terms if sign * a > 0 and d > 0 and m > 0]
        total = sum(v for v, _ in part)
        if total <= 0:
            return 0.0, np.inf
        nu = total**2 / sum(v**2 / d for v, d in part)
        return total, (min(nu, cap) if cap is not None else nu)

    big_a, nu_a = pooled(1.0, df_cap)
    big_b, nu_b = pooled(-1.0)
    if big_a <= 0:
        return 0.0, 0.0
    a2 = alpha / 2
    # chi-square quantiles as scipy.stats.chi2.ppf computes them (without importing scipy.stats)
    chi_hi_a, chi_lo_a = 2 * special.gammaincinv(nu_a / 2, np.array([1 - a2, a2]))
    g_a, h_a = 1 - nu_a / chi_hi_a, (nu_a / chi_lo_a - 1 if chi_lo_a > 0 else np.inf)
    if big_b <= 0:
        return float(big_a * (1 - g_a)), float(big_a * (1 + h_a))
    chi_hi_b, chi_lo_b = 2 * special.gammaincinv(nu_b / 2, np.array([1 - a2, a2]))
    g_b, h_b = 1 - nu_b / chi_hi_b, nu_b / chi_lo_b - 1
    f_hi, f_lo = special.fdtri(nu_a, nu_b, 1 - a2), special.fdtri(nu_a, nu_b, a2)
    g_ab = ((f_hi - 1) ** 2 - g_a**2 * f_hi**2 - h_b**2) / f_hi
    h_ab = ((1 - f_lo) ** 2 - h_a**2 * f_lo**2 - g_b**2) / f_lo if f_lo > 0 else np.inf
    est = big_a - big_b
    v_lo = g_a**2 * big_a**2 + h_b**2 * big_b**2 + g_ab * big_a * big_b
    v_hi = h_a**2 * big_a**2 + g_b**2 * big_b**2 + h_ab * big_a * big_b
    lo = est - np.sqrt(max(v_lo, 0.0))
    hi = est + np.sqrt(max(v_hi, 0.0))
    return float(max(lo, 0.0)), float(max(hi, 0.0))


def _divisors(q, s, r, n, k_rot):
    """Variance of the design mean per unit of each component (rotation: finite population of k_rot orderings)."""
    return {"query": 1.0 / q, "rotation": (1.0 / r - 1.0 / k_rot) / q if k_rot > 1 else 0.0, "run": 1.0 / s,
            "query_x_run": 1.0 / (q * s), "attempt": 1.0 / (q * s * r * n)}


# -- result ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class VarianceComponents(ReprHTMLMixin):
    """Result of :func:`variance_components`.

    Attributes
    ----------
    table : pandas.DataFrame
        One row per group, metric and component: ``variance`` (the component, per unit: the variance of one
        query's, run's, ... contribution to the linearised estimator), ``divisor`` (how the study's design divides
        it), ``contribution`` (its part of Var(estimate) at the study's design), ``share`` of the total, the
        contribution's ``ci_low``/``ci_high`` (modified large-sample intervals of the mean squares; the
        ``cluster`` row: query bootstrap) and ``identified`` (False: the design cannot separate
        it; it is folded into another component, named in ``note``). The ``cluster`` row is what clusters would add
        if they were a sample from a population of clusters; it is not part of the total.
    overview : pandas.DataFrame
        One row per group and metric (also :meth:`summary_frame`; named ``summary`` until 0.1.0, which still works
        for one release with a DeprecationWarning): the estimate, the design (queries, runs, rotations, clusters,
        calls), the linearised standard error at the study's design, the same without the run main effect (what the
        query bootstrap estimates) and what other allocations of the same calls would give; ``n_rows``, ``n_used``,
        ``n_excluded`` and ``excluded`` (attempts without a valid choice, by status: they stay in the design as
        zeros of the linearised statistic) and ``n_absent`` (cells of the balanced design without a row).
    layout : {"log", "counts"}
    by : list of str
    n_resamples : int
    confidence_level : float
    seed : object
    fits : list
        Per group and metric, per cluster: rates, weights and component matrices (the planner's input).
    warnings : list of str

    Examples
    --------
    A simulated study (2 clusters of 3 tools, 8 queries in all 3 rotations, 2 runs): the pooled δ_API, its
    linearised standard error and where its variance comes from.

    >>> import toolbias_stats as tbs
    >>> from toolbias_stats.simulate import simulate_selection_log
    >>> log = simulate_selection_log(n_clusters=2, n_tools=3, n_queries=8, n_runs=2, rng=0).log
    >>> vc = tbs.variance_components(log, metrics=["delta_api"], n_resamples=0)
    >>> vc.summary_frame()[["metric", "queries", "runs", "rotations", "calls"]]
          metric  queries  runs  rotations  calls
    0  delta_api        8     2          3     96
    >>> vc.summary_frame()[["pooled", "se"]].round(3)
       pooled     se
    0   0.094  0.059
    >>> vc.to_frame().set_index("component")["share"].round(3).to_dict()
    {'query': 0.375, 'rotation': 0.0, 'run': 0.0, 'query_x_run': 0.281, 'attempt': 0.344, 'cluster': nan}
    """

    table: pd.DataFrame
    overview: pd.DataFrame
    layout: str
    by: list
    n_resamples: int
    confidence_level: float
    seed: object
    fits: list = field(default_factory=list, repr=False)
    warnings: list = field(default_factory=list)

    summary = renamed_attribute("summary", "overview", since="0.1.0")

    def _headline(self):
        cols = list(self.by) + ["metric", "component", "contribution", "share", "ci_low", "ci_high", "identified"]
        title = (f"VarianceComponents ({self.layout} layout): share of Var(delta estimate) by source; "
                 f"{self.n_resamples} query-bootstrap replicates")
        return title, self.table[cols], "cluster: added only if clusters were sampled (not in the total)."

    def to_frame(self) -> pd.DataFrame:
        """The component table (one row per group, metric and component), unrounded."""
        return self.table.copy()

    def summary_frame(self) -> pd.DataFrame:
        """The summary table (one row per group and metric: estimate, design, standard errors, rows), unrounded."""
        return self.overview.copy()

    def to_dict(self) -> dict[str, Any]:
        """Strict-JSON mapping: the settings, the component table and the summary as records (NaN -> None)."""
        return {"layout": self.layout, "by": list(self.by), "n_resamples": self.n_resamples,
                "confidence_level": self.confidence_level,
                "seed": self.seed if isinstance(self.seed, (int, type(None))) else repr(self.seed),
                "components": _records(self.table), "summary": _records(self.overview),
                "warnings": list(self.warnings)}


# -- main function -----------------------------------------------------------------------------
def variance_components(log_or_counts: SelectionLog | SelectionCounts | Study | str | os.PathLike[str], *,
                        by: str | Sequence[str] | None = ("model",),
                        metrics: str | Sequence[str] = ("delta_api", "delta_pos", "delta_model"),
                        n_resamples: int = 200, confidence_level: float = 0.95,
                        rng: np.random.Generator | int | None = None) -> VarianceComponents:
    """Where the variance of each delta estimate comes from: queries, rotations, runs, attempts, clusters.

    Parameters
    ----------
    log_or_counts : SelectionLog, SelectionCounts, Study or manifest path
        The pilot. A log whose attempts carry a ``rotation`` (one attempt per query, run and rotation) separates
        rotations from attempt noise; query-level counts separate queries, runs and the rest.
    by : str or sequence of str, default ``("model",)``
        Grouping columns (design columns; not ``run``, which is a component).
    metrics : sequence of {"delta_api", "delta_pos", "delta_model"}
        ``delta_model`` needs the log layout (tool and position of the same attempt).
    n_resamples : int, default 200
        Query-bootstrap replicates (queries resampled within clusters, with all their runs and rotations) for the
        interval of the total standard error (``se_ci_low``, ``se_ci_high``) and of the cluster component; 0 skips
        them. The other components get modified large-sample (MLS) intervals of their mean squares.
    confidence_level : float, default 0.95
    rng : None, int or numpy.random.Generator

    Returns
    -------
    VarianceComponents

    Raises
    ------
    SelectionLogError
        A cluster with fewer than 2 queries in some group.
    ValueError
        Unknown ``by`` columns or metrics, ``by`` containing ``run``, bad ``n_resamples`` or level.

    Notes
    -----
    delta = mean over clusters of TV(p_c, U) is not linear in the attempts, so the decomposition is of its
    linearisation: with ``s_j = sign(p_j - 1/K)`` and the valid-choice rate ``v`` of the cluster, attempt
    ``i`` contributes ``y_i = 1/2 * sum_j s_j (x_ij - p_j o_i) / v`` (``x`` its indicator vector, ``o`` whether
    it is valid; the ratio linearisation of the rate, so invalid attempts stay in the design with ``y = 0``), and
    ``delta_hat - delta ~ mean(y)`` per cluster. On the crossed query x run x rotation design,
    ``y = a_q + b_s + h_qs + w_qr + e_qsr``; expected mean squares give the components (method of moments;
    negative estimates are reported as 0). The rotation effects sum to zero within a query, so a study that
    shows every query in all K rotations pays nothing for them; the ``rotation`` row says what fewer rotations
    per query would add. The planner uses the same decomposition of the full covariance matrices of the rates
    (``fits``), and the folded-normal distribution of TV around them, instead of the linearisation.

    Examples
    --------
    A simulated uniform chooser, 20 queries per cluster in all 5 rotations, 3 runs: the share of the variance of
    the δ_API estimate that each source contributes.

    >>> import toolbias_stats as tbs
    >>> from toolbias_stats.simulate import simulate_selection_log
    >>> sim = simulate_selection_log(n_clusters=3, n_queries=20, n_runs=3, rng=0)
    >>> vc = tbs.variance_components(sim.log, metrics=["delta_api"], n_resamples=50, rng=1)
    >>> vc.to_frame()[["metric", "component", "share"]].round(3)
          metric    component  share
    0  delta_api        query  0.205
    1  delta_api     rotation  0.000
    2  delta_api          run  0.000
    3  delta_api  query_x_run  0.000
    4  delta_api      attempt  0.795
    5  delta_api      cluster    NaN
    """
    confidence_level = check_confidence_level(confidence_level)
    n_resamples = check_n_resamples(n_resamples)
    metrics = [metrics] if isinstance(metrics, str) else list(metrics)
    if not metrics:
        raise ValueError("`metrics` must name at least one of " + ", ".join(DESIGN_METRICS) + "; got none.")
    for mname in metrics:
        check_choice("metrics", mname, DESIGN_METRICS)
    seed = rng if isinstance(rng, (int, type(None))) else "generator"
    gen = check_rng(rng)
    groups, layout, by = pilot_groups(log_or_counts, by)
    caught = []
    if layout != "log" and "delta_model" in metrics:
        msg = ("delta_model needs the log (tool and position of each attempt); it is skipped for counts, and for "
               "groups without one attempt per query, run and rotation")
        warnings.warn(msg, DegenerateDataWarning, stacklevel=2)
        caught.append(msg)
    rows, summ, fits = [], [], []
    for g in groups:
        if g.clusters and g.clusters[0].shape[1] == 1:
            msg = (f"group {g.keys}: one run; rotation, run and query x run components are not identified (run "
                   "noise is counted as attempt noise, query x run as query)")
            warnings.warn(msg, SmallSampleWarning, stacklevel=2)
            caught.append(msg)
        for metric in metrics:
            if metric == "delta_model" and g.layout != "log":
                continue
            r, s_, fit = _fit_group(g, metric, g.layout, n_resamples, confidence_level, gen, caught)
            rows.extend(r)
            if s_ is not None:
                summ.append(s_)
                fits.append(fit)
    return VarianceComponents(table=pd.DataFrame(rows), overview=pd.DataFrame(summ), layout=layout, by=by,
                              n_resamples=n_resamples, confidence_level=confidence_level, seed=seed, fits=fits,
                              warnings=caught)


def _fit_group(g, metric, layout, n_resamples, level, gen, caught):
    """Components of one group and metric: ``(table rows, summary row, fit)``; ``([], None, None)`` without data."""
    fit_clusters = [fc for fc in (_fit_cluster(cd, metric, layout) for cd in g.clusters) if fc is not None]
    if not fit_clusters:
        what = "valid choices with known positions" if metric != "delta_api" else "valid choices"
        msg = f"group {g.keys}: no cluster has {what} for {metric}; skipped"
        warnings.warn(msg, DegenerateDataWarning, stacklevel=3)
        caught.append(msg)
        return [], None, None
    n_c = len(fit_clusters)
    ident = fit_clusters[0]["ident"]
    contrib, per_unit = _aggregate([fc["scalar"] for fc in fit_clusters], fit_clusters)
    var_within = np.array([sum(fc["scalar"][c] * _divisors(fc["Q"], fc["S"], fc["R"], fc["n"], fc["k_rot"])[c]
                               for c in _MATRIX) for fc in fit_clusters])
    deltas = np.array([fc["delta"] for fc in fit_clusters])
    cl_var = float(max(np.var(deltas, ddof=1) - var_within.mean(), 0.0)) if n_c > 1 else np.nan
    total = sum(contrib.values())
    # query bootstrap of every component (scalar projections; the sign vectors stay at the pilot's rates)
    boot = _bootstrap(fit_clusters, layout, n_resamples, gen) if n_resamples else None
    alpha = 1 - level
    rows = [{**g.keys, "metric": metric, "component": c,
             **(_cluster_row(cl_var, n_c, boot, alpha) if c == "cluster" else
                _component_row(c, fit_clusters, per_unit, contrib, total, ident, alpha))}
            for c in COMPONENTS]
    summary = _summary_row(g, metric, layout, fit_clusters, contrib, total, deltas)
    if boot is not None:
        summary["se_ci_low"], summary["se_ci_high"] = np.sqrt(np.quantile(boot["total"], [alpha / 2, 1 - alpha / 2]))
    fit = dict(keys=g.keys, metric=metric, layout=layout, clusters=fit_clusters, ident=ident, rows=g.rows)
    return rows, summary, fit


def _fit_cluster(cd, metric, layout):
    """Mean squares, components (matrices and their scalar projections) of one cluster; None without data."""
    lin = _linearised(cd, metric, layout)
    if lin is None:
        return None
    q, s, r = cd.shape
    ms = _mean_squares(lin["m"], lin["within"], cd.n, layout)
    comp, ident = _components_from_ms(ms, q, s, r, cd.n, layout)
    w = lin["a"] * lin["sign"]
    coef, _ = _coefficients(ms, q, s, r, cd.n, layout)
    return dict(cluster=cd.cluster, p=lin["p"], u=lin["u"], a=lin["a"],
                M={c: (comp[c] + comp[c].T) / 2 for c in _MATRIX}, scalar={c: float(w @ comp[c] @ w) for c in _MATRIX},
                ident=ident, coef=coef, ms_y={k: float(w @ v @ w) for k, v in ms.items()}, df=_ms_df(q, s, r, cd.n),
                Q=q, S=s, R=r, n=cd.n, k_rot=r if layout == "log" else 1, y=lin["m"] @ w,
                within_y=None if lin["within"] is None else np.einsum("...de,d,e->...", lin["within"], w, w),
                delta=float(np.sum(lin["a"] * np.abs(lin["p"] - lin["u"]))))


_NOTES = {"rotation": "needs a log with a rotation per attempt and >= 2 runs; folded into attempt",
          "run": "needs >= 2 runs; not estimated (taken as 0)"}


def _cluster_row(cl_var, n_c, boot, alpha):
    """The cluster component (beside the others, not in the total) and its query-bootstrap interval."""
    con = cl_var / n_c if np.isfinite(cl_var) else np.nan
    lo = hi = np.nan
    if boot is not None and np.isfinite(con):
        lo, hi = np.nanquantile(boot["cluster"] / n_c, [alpha / 2, 1 - alpha / 2])
    return {"variance": cl_var, "divisor": 1 / n_c, "contribution": con, "share": np.nan, "ci_low": lo,
            "ci_high": hi, "identified": n_c > 1,
            "note": "only if clusters were a sample of a population of clusters; not in the total"}


def _component_row(c, fit_clusters, per_unit, contrib, total, ident, alpha):
    """One design component: its value, contribution, share and MLS interval."""
    val, con = per_unit[c], contrib[c]
    share = con / total if total > 0 else np.nan
    folded = "query" if fit_clusters[0]["S"] == 1 else "attempt"
    notes = {**_NOTES, "query_x_run": "needs >= 2 runs and the log; folded into " + folded}
    note = "" if ident[c] else notes.get(c, "")
    lo = hi = np.nan
    if ident[c] and any(c in fc["coef"] for fc in fit_clusters):
        # MLS: the contribution is a linear combination of independent mean squares
        n_c = len(fit_clusters)
        terms = [(a * _divisors(fc["Q"], fc["S"], fc["R"], fc["n"], fc["k_rot"])[c] / n_c**2,
                  fc["ms_y"][k], fc["df"][k]) for fc in fit_clusters for k, a in fc["coef"].get(c, {}).items()]
        s_runs = fit_clusters[0]["S"]
        # a run-level shift is shared by the clusters: S - 1 degrees of freedom at most
        lo, hi = _component_interval(terms, alpha, df_cap=s_runs - 1 if c == "run" else None)
        if c == "run":
            note = f"only {s_runs} runs: {s_runs - 1} degrees of freedom"
    return {"variance": val, "divisor": con / val if val > 0 else np.nan, "contribution": con, "share": share,
            "ci_low": lo, "ci_high": hi, "identified": bool(ident[c]), "note": note}


def _summary_row(g, metric, layout, fit_clusters, contrib, total, deltas):
    """The group's summary: pooled delta, design, standard errors at the pilot's and related designs, rows."""
    fc0 = fit_clusters[0]
    n_c = len(fit_clusters)
    q, s, r, n = fc0["Q"], fc0["S"], fc0["R"], fc0["n"]

    def se_at(qq, ss, rr=None):
        return float(np.sqrt(sum(sum(max(fc["scalar"][c], 0.0) * _divisors(qq, ss, rr or fc["R"], fc["n"],
                                                                           fc["k_rot"])[c]
                                     for c in _MATRIX) for fc in fit_clusters) / n_c**2))
    return {**g.keys, "metric": metric, "pooled": float(deltas.mean()), "queries": q, "runs": s,
            "rotations": r * n, "clusters": n_c,
            "calls": int(sum(fc["Q"] * fc["S"] * fc["R"] * fc["n"] for fc in fit_clusters)),
            "se": float(np.sqrt(total)), "se_without_run_effect": float(np.sqrt(max(total - contrib["run"], 0.0))),
            "se_one_run": se_at(q, 1), "se_same_calls_one_run": se_at(q * s, 1),
            "se_one_rotation": se_at(q, s, 1) if layout == "log" and fc0["ident"]["rotation"] else np.nan,
            "se_ci_low": np.nan, "se_ci_high": np.nan, "layout": layout,
            "n_rows": g.rows.get("total", 0), "n_used": g.rows.get("used", 0),
            "n_excluded": g.rows.get("total", 0) - g.rows.get("used", 0),
            "excluded": ", ".join(f"{k}: {v}" for k, v in g.rows.get("excluded", {}).items()),
            "n_absent": int(sum(cd.n_absent for cd in g.clusters))}


def _aggregate(scalars, fit_clusters):
    """Contribution of each component to Var(mean over clusters) and its per-unit value (mean over clusters)."""
    n_c = len(fit_clusters)
    contrib = dict.fromkeys(_MATRIX, 0.0)
    per_unit = dict.fromkeys(_MATRIX, 0.0)
    for sc, fc in zip(scalars, fit_clusters):
        div = _divisors(fc["Q"], fc["S"], fc["R"], fc["n"], fc["k_rot"])
        for c in _MATRIX:
            v = max(sc[c], 0.0)
            contrib[c] += v * div[c] / n_c**2
            per_unit[c] += v / n_c
    return contrib, per_unit


def _bootstrap_mean_squares(y, within, n, layout, idx):
    """:func:`_mean_squares` of the query-bootstrap replicates ``y[idx]`` (``idx``: (B, Q) resampled queries) of
    the scalar cell means ``y`` (Q, S, R), from per-query means weighted by how often each query is drawn
    (no (B, Q, S, R) copies). Returns the mean squares as (B, 1, 1) arrays and the replicates' grand means."""
    b, q = idx.shape
    s, r = y.shape[1:]
    w = np.bincount((idx + q * np.arange(b)[:, None]).ravel(), minlength=b * q).reshape(b, q).astype(float)
    yq, yqs, yqr = y.mean((1, 2)), y.mean(2), y.mean(1)           # query, query x run, query x rotation means
    g = w @ yq / q                                                # (B,) grand means
    rn = r * n
    out = {"Q": (w * (yq[None, :] - g[:, None]) ** 2).sum(1) * s * rn / (q - 1)}
    if s > 1:
        dev_s = w @ yqs / q - g[:, None]                          # (B, S) run means - grand mean
        out["S"] = (dev_s**2).sum(1) * q * rn / (s - 1)
        inter = (yqs - yq[:, None])[None, :, :] - dev_s[:, None, :]     # (B, Q, S)
        out["QS"] = (w * (inter**2).sum(2)).sum(1) * rn / ((q - 1) * (s - 1))
    if layout == "log" and r > 1:
        out["W"] = w @ ((yqr - yq[:, None]) ** 2).sum(1) * s / (q * (r - 1))
        if s > 1:
            resid = y - yqs[:, :, None] - yqr[:, None, :] + yq[:, None, None]
            out["E"] = w @ (resid**2).sum((1, 2)) / (q * (s - 1) * (r - 1))
    if within is not None and n > 1:
        out["0"] = w @ within.sum((1, 2)) / (q * s * r * (n - 1))
    return {k: v[:, None, None] for k, v in out.items()}, g


def _bootstrap(fit_clusters, layout, b, gen):
    """Query-bootstrap replicates of each component's contribution (and the cluster component)."""
    n_c = len(fit_clusters)
    out = {c: np.zeros(b) for c in _MATRIX}
    out["total"] = np.zeros(b)
    var_within = np.zeros((b, n_c))
    dev = np.zeros((b, n_c))
    for i, fc in enumerate(fit_clusters):
        q = fc["Q"]
        idx = gen.integers(0, q, size=(b, q))
        ms, grand = _bootstrap_mean_squares(fc["y"], fc["within_y"], fc["n"], layout, idx)
        comp, _ = _components_from_ms(ms, q, fc["S"], fc["R"], fc["n"], layout)
        div = _divisors(q, fc["S"], fc["R"], fc["n"], fc["k_rot"])
        for c in _MATRIX:
            v = np.clip(comp[c][..., 0, 0], 0, None) * div[c]
            out[c] += v / n_c**2
            var_within[:, i] += v
        dev[:, i] = fc["delta"] + grand - fc["y"].mean()
    out["total"] = sum(out[c] for c in _MATRIX)
    out["cluster"] = (np.clip(np.var(dev, axis=1, ddof=1) - var_within.mean(1), 0, None) if n_c > 1
                      else np.full(b, np.nan))
    return out


def pairing_correlation(log: SelectionLog | SelectionCounts | Study | str | os.PathLike[str], *,
                        between: str = "condition", levels: Sequence[Any] | None = None,
                        by: str | Sequence[str] = ("model",), metric: str = "delta_api") -> pd.DataFrame:
    """Correlation of two conditions' delta estimates when the same queries are run under both (for ``plan_study``).

    Parameters
    ----------
    log : SelectionLog, SelectionCounts, Study or manifest path
        A pilot with both levels of ``between`` on shared queries.
    between : str, default "condition"
        The design column whose two levels are compared.
    levels : (base, other), optional
        Default: the two levels of ``between`` (an error when there are more).
    by : sequence of str, default ``("model",)``
    metric : {"delta_api", "delta_pos", "delta_model"}, default "delta_api"

    Returns
    -------
    pandas.DataFrame
        One row per group: ``correlation`` (of the linearised estimation errors under query resampling: the
        covariance of the per-query contributions of the two levels over the shared queries, summed over clusters,
        over the product of their standard deviations), ``n_clusters`` and ``n_shared_queries``. Pass it as
        ``plan_study(..., correlation=...)`` for the shift's half-width and MDS of a paired design.

    Examples
    --------
    Two conditions that share their queries, with a per-query difficulty common to both (``query_effect``):

    >>> import numpy as np
    >>> from toolbias_stats.experiments import simulate_conditions
    >>> pref = np.ones((3, 4))
    >>> log = simulate_conditions({"base": (pref, None), "first_wins": (pref, [4, 1, 1, 1])}, n_queries=20,
    ...                           query_effect=1.0, rng=0)
    >>> pairing_correlation(log, between="condition", metric="delta_pos")[["levels", "correlation",
    ...                                                                    "n_shared_queries"]].round(3)
                   levels  correlation  n_shared_queries
    0  base vs first_wins        0.145                60
    """
    check_choice("metric", metric, DESIGN_METRICS)
    by = [by] if isinstance(by, str) else list(by)
    groups, _, _ = pilot_groups(log, by + [between])
    found = sorted({g.keys[between] for g in groups}, key=str)
    if levels is None:
        if len(found) != 2:
            raise ValueError(f"`between` column {between!r} has levels {found}; name the two to compare with "
                             "`levels=(base, other)`.")
        levels = tuple(found)
    missing = [lv for lv in levels if lv not in found]
    if missing:
        raise ValueError(f"`levels` {missing} are not levels of {between!r} (levels: {found}).")
    index = {(tuple(g.keys[b] for b in by), g.keys[between]): g for g in groups}
    rows = []
    for key in sorted({k for k, _ in index}, key=str):
        ga, gb = index.get((key, levels[0])), index.get((key, levels[1]))
        if ga is None or gb is None:
            continue
        cov = var_a = var_b = 0.0
        n_c = n_q = 0
        clusters_b = {cd.cluster: cd for cd in gb.clusters}
        for ca in ga.clusters:
            cb = clusters_b.get(ca.cluster)
            if cb is None:
                continue
            la, lb = _linearised(ca, metric, ga.layout), _linearised(cb, metric, gb.layout)
            if la is None or lb is None:
                continue
            ya = (la["m"] @ (la["a"] * la["sign"])).mean((1, 2))                  # per-query means
            yb = (lb["m"] @ (lb["a"] * lb["sign"])).mean((1, 2))
            qa, qb = {q: i for i, q in enumerate(ca.queries)}, {q: i for i, q in enumerate(cb.queries)}
            shared = [q for q in qa if q in qb]
            if len(shared) < 2:
                continue
            xa = ya[[qa[q] for q in shared]]
            xb = yb[[qb[q] for q in shared]]
            cov += float(np.cov(xa, xb)[0, 1]) / len(shared)
            var_a += float(np.var(ya, ddof=1)) / len(ya)
            var_b += float(np.var(yb, ddof=1)) / len(yb)
            n_c += 1
            n_q += len(shared)
        corr = cov / np.sqrt(var_a * var_b) if var_a > 0 and var_b > 0 else np.nan
        rows.append({**dict(zip(by, key)), "levels": f"{levels[0]} vs {levels[1]}", "metric": metric,
                     "correlation": float(np.clip(corr, -1, 1)) if np.isfinite(corr) else np.nan,
                     "n_clusters": n_c, "n_shared_queries": n_q})
    return pd.DataFrame(rows)
