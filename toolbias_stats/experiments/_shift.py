"""Effects of an intervention on tool selection: distribution shift, change in bias, per-tool shares.

One function, :func:`selection_shift`, serves every BiasBusters experiment that compares conditions
(metadata perturbations, mitigation, temperature / top-p / size sweeps, orderings, system prompts, tool
count, continued pre-training checkpoints): it compares each level of a design column with a base level,
within groups, from :class:`~toolbias_stats.SelectionCounts`, with paired query-bootstrap intervals, a
label-permutation test of "no change", the noise floor of the shift and a bias-corrected shift whose
interval is calibrated like :func:`~toolbias_stats.calibrated_mean_tv`.
"""

from __future__ import annotations

import numbers
import warnings
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from .._display import ReprHTMLMixin
from .._schema import STATUSES
from .._validation import check_by, check_choice, check_confidence_level, check_n_resamples, check_rng
from ..exceptions import DegenerateDataWarning, ExcludedRowsWarning
from ..io._counts import load_counts
from ..metrics._bias import _json_num, _tensors, _tv_runs
from ..metrics._bootstrap import ConfidenceInterval, percentile_ci, resampled_counts
from ..metrics._calibrated import CalibratedTV, _invert, _path
from ..metrics._tv import rates_from_counts

__all__ = ["selection_shift", "ShiftResult", "ShiftGroup", "ShiftEstimate", "ChangeEstimate", "TrendResult",
           "calibrated_mean_shift", "PAIRINGS", "SHIFT_METRICS", "CHANGE_METRICS"]

#: Accepted ``pairing`` values.
PAIRINGS = ("auto", "paired", "independent")
#: Distribution-shift metrics (TV between a level's and the base's selection distributions).
SHIFT_METRICS = ("shift_api", "shift_pos")
#: Change-in-bias metrics (level minus base).
CHANGE_METRICS = ("delta_api", "delta_pos", "delta_model")
#: Share of the union of query ids two levels must have in common for ``pairing="auto"`` to pair them.
PAIRED_OVERLAP = 0.5

ERR_BETWEEN = "`between` names column {col!r} that the selection counts do not have; available: {cols}."
ERR_BETWEEN_IN_BY = "`between` ({col!r}) cannot also be a `by` column; got by={by}."
ERR_BASE = "`base` level {base!r} does not occur in column {col!r}; levels present: {levels}."

_NAN_CI = ConfidenceInterval(np.nan, np.nan)


# ------------------------------------------------------------------------------------------------
# results
@dataclass(frozen=True)
class ShiftEstimate:
    """Distribution shift TV(P_level, P_base) averaged over clusters, with its uncertainty.

    Attributes
    ----------
    metric : str
        ``"shift_api"`` (tool distributions) or ``"shift_pos"`` (position distributions).
    mean_over_clusters : float
        Mean over clusters of TV(P_level, P_base), each P the mean over that level's runs of the per-run
        selection rates (BiasBusters Fig. 5).
    sd_over_clusters : float
        Standard deviation (ddof 1) over clusters of the per-cluster TVs (the error bars of Fig. 5).
    pooled : float
        The same with each level's runs pooled into one distribution.
    n_clusters : int
        Clusters both levels have (valid choices in each).
    ci : ConfidenceInterval
        Percentile query-bootstrap interval of ``mean_over_clusters`` (the plug-in; see ``corrected_ci``).
    corrected : float
        Bias-corrected estimate of the true cluster-averaged shift.
    corrected_ci : ConfidenceInterval
        Calibrated interval for the true cluster-averaged shift (:func:`calibrated_mean_shift`).
    null_expected : float
        Mean of the statistic over label permutations: the shift two samples of the same distribution
        with these counts show (the plug-in TV between two noisy distributions is biased upward).
    p_value : float
        Permutation p-value of "no change" (level labels exchanged within query).
    p_adjusted, p_adjusted_bh : float
        Holm and Benjamini-Hochberg adjustments across every level and metric of the result.
    null_method : str
        What the permutation exchanged (see :func:`selection_shift`, Notes).
    standard_error : float
    bootstrap_distribution : numpy.ndarray
    confidence_level : float
    """

    metric: str
    mean_over_clusters: float
    sd_over_clusters: float
    pooled: float
    n_clusters: int
    ci: ConfidenceInterval = _NAN_CI
    corrected: float = np.nan
    corrected_ci: ConfidenceInterval = _NAN_CI
    null_expected: float = np.nan
    p_value: float = np.nan
    p_adjusted: float = np.nan
    p_adjusted_bh: float = np.nan
    null_method: str = "none"
    standard_error: float = np.nan
    bootstrap_distribution: np.ndarray = field(default_factory=lambda: np.empty(0), repr=False)
    confidence_level: float = 0.95

    def to_dict(self) -> dict:
        """The ``shift_api`` / ``shift_pos`` objects of ``toolbias-stats shift --json``."""
        return {
            "mean_over_clusters": _json_num(self.mean_over_clusters),
            "sd_over_clusters": _json_num(self.sd_over_clusters),
            "pooled": _json_num(self.pooled),
            "n_clusters": int(self.n_clusters),
            "ci": [_json_num(x) for x in self.ci],
            "corrected": _json_num(self.corrected),
            "corrected_ci": [_json_num(x) for x in self.corrected_ci],
            "null_expected": _json_num(self.null_expected),
            "p_value": _json_num(self.p_value),
            "p_adjusted": _json_num(self.p_adjusted),
            "p_adjusted_bh": _json_num(self.p_adjusted_bh),
            "null_method": self.null_method,
            "standard_error": _json_num(self.standard_error),
        }


@dataclass(frozen=True)
class ChangeEstimate:
    """Change in one bias metric, level minus base (delta_API, delta_pos or delta_model).

    Attributes
    ----------
    metric : str
    base_value, value : float
        The metric of the base and of the level (per run the mean over the compared clusters of the plug-in
        TV to uniform, then the mean over runs: ``mean_over_runs`` of :func:`~toolbias_stats.selection_bias`
        restricted to those clusters).
    estimate : float
        ``value - base_value``.
    ci : ConfidenceInterval
        Percentile query-bootstrap interval of the difference (paired replicates when the levels share queries).
    normalised_estimate : float
        The same difference of TV / (1 - 1/K).
    normalised_ci : ConfidenceInterval
    p_value : float
        Two-sided permutation p-value of "no change".
    p_adjusted, p_adjusted_bh : float
    standard_error : float
    bootstrap_distribution : numpy.ndarray
    """

    metric: str
    base_value: float
    value: float
    estimate: float
    ci: ConfidenceInterval = _NAN_CI
    normalised_estimate: float = np.nan
    normalised_ci: ConfidenceInterval = _NAN_CI
    p_value: float = np.nan
    p_adjusted: float = np.nan
    p_adjusted_bh: float = np.nan
    standard_error: float = np.nan
    bootstrap_distribution: np.ndarray = field(default_factory=lambda: np.empty(0), repr=False)

    def to_dict(self) -> dict:
        return {"base_value": _json_num(self.base_value), "value": _json_num(self.value),
                "estimate": _json_num(self.estimate), "ci": [_json_num(x) for x in self.ci],
                "normalised_estimate": _json_num(self.normalised_estimate),
                "normalised_ci": [_json_num(x) for x in self.normalised_ci],
                "p_value": _json_num(self.p_value), "p_adjusted": _json_num(self.p_adjusted),
                "p_adjusted_bh": _json_num(self.p_adjusted_bh), "standard_error": _json_num(self.standard_error)}


@dataclass(frozen=True)
class ShiftGroup:
    """One level compared with the base level within one ``by`` group.

    Attributes
    ----------
    keys : dict
        The ``by`` values and ``{between: level}``.
    base : object
        The base level.
    pairing : str
        ``"paired"`` (queries resampled jointly across levels) or ``"independent"``.
    n_clusters : int
        Clusters compared (both levels have valid choices there).
    clusters : list of dict
        Per cluster: ``cluster``, ``K``, ``n_base``, ``n_level`` (valid choices), ``shift_api``, ``shift_pos``
        with percentile CIs, and the base's and level's delta_API / delta_pos.
    shift_api, shift_pos : ShiftEstimate
        ``shift_pos`` is None when no compared cluster has known positions in both levels.
    change : dict
        ``{"delta_api": ChangeEstimate, "delta_pos": ..., "delta_model": ...}`` (None where undefined).
    tools : pandas.DataFrame
        Per cluster and tool: ``share_base``, ``share``, ``difference`` with CI and two-sided permutation
        ``p_value``; ``p_adjusted`` (Holm) and ``p_adjusted_bh`` across every level x cluster x tool of the
        result, and ``significant`` (Holm-adjusted p <= 1 - confidence level).
    rows : dict
        Attempts and valid choices of each level in the compared clusters.
    """

    keys: dict
    base: object
    pairing: str
    n_clusters: int
    clusters: list
    shift_api: ShiftEstimate
    shift_pos: ShiftEstimate | None
    change: dict
    tools: pd.DataFrame
    rows: dict

    def to_dict(self, trend=None) -> dict:
        out = {
            "keys": {k: _json_num(_py(v)) for k, v in self.keys.items()},
            "base": _json_num(_py(self.base)),
            "pairing": self.pairing,
            "n_clusters": int(self.n_clusters),
            "rows": self.rows,
            "shift_api": self.shift_api.to_dict(),
            "shift_pos": None if self.shift_pos is None else self.shift_pos.to_dict(),
            "change": {m: (None if self.change.get(m) is None else self.change[m].to_dict()) for m in CHANGE_METRICS},
            "clusters": [{k: (_json_num(v) if not isinstance(v, list) else [_json_num(x) for x in v])
                          for k, v in c.items()} for c in self.clusters],
            "tools": [{"cluster": str(r.cluster), "tool_id": str(r.tool_id), "share_base": _json_num(r.share_base),
                       "share": _json_num(r.share), "difference": _json_num(r.difference),
                       "ci": [_json_num(r.ci_low), _json_num(r.ci_high)], "p_value": _json_num(r.p_value),
                       "p_adjusted": _json_num(getattr(r, "p_adjusted", np.nan)),
                       "p_adjusted_bh": _json_num(getattr(r, "p_adjusted_bh", np.nan)),
                       "significant": bool(getattr(r, "significant", False))}
                      for r in self.tools.itertuples(index=False)],
        }
        if trend is not None:
            out["trend"] = trend.trend_dict()
        return out


@dataclass(frozen=True)
class TrendResult(ReprHTMLMixin):
    """Trend of the bias metrics against a numeric ``between`` column within one ``by`` group.

    Attributes
    ----------
    keys : dict
        The ``by`` values.
    levels : pandas.DataFrame
        One row per level and metric: ``value`` (the level), ``estimate`` with percentile CI, ``n_clusters``.
    slopes : dict
        ``{metric: (slope, ConfidenceInterval)}``: least-squares slope of the metric against the level value
        (unweighted, one point per level), with a query-bootstrap percentile interval.
    clusters : list
        Clusters common to every level (the trend is computed over them only).
    """

    keys: dict
    levels: pd.DataFrame
    slopes: dict
    clusters: list

    def to_frame(self) -> pd.DataFrame:
        """One row per metric: the ``by`` values, the slope and its interval, clusters used (unrounded)."""
        return pd.DataFrame([{**{str(k): _py(v) for k, v in self.keys.items()}, "metric": m, "slope": s,
                              "ci_low": ci.low, "ci_high": ci.high, "n_clusters": len(self.clusters)}
                             for m, (s, ci) in self.slopes.items()])

    def trend_dict(self) -> dict:
        return {m: {"slope": _json_num(s), "ci": [_json_num(x) for x in ci]} for m, (s, ci) in self.slopes.items()}

    def to_dict(self) -> dict:
        return {"keys": {k: _json_num(_py(v)) for k, v in self.keys.items()}, "n_clusters": len(self.clusters),
                "trend": self.trend_dict(),
                "levels": [{k: _json_num(_py(v)) for k, v in r.items()} for r in self.levels.to_dict("records")]}


@dataclass(frozen=True)
class ShiftResult(ReprHTMLMixin):
    """Result of :func:`selection_shift`.

    Use :meth:`to_frame` (one row per compared level and metric), :meth:`clusters_frame` (per cluster),
    :meth:`tools_frame` (per tool share), :meth:`trend_frame` (numeric ``between`` columns) or
    :meth:`to_dict` (the JSON of ``toolbias-stats shift --json``).
    """

    groups: list
    trends: list
    between: str
    base: object
    by: list
    numeric: bool
    n_resamples: int
    n_permutations: int
    confidence_level: float
    pairing: str
    seed: object
    skipped: list = field(default_factory=list)
    warnings: list = field(default_factory=list)

    def _headline(self):
        frame = self.to_frame()
        cols = [c for c in list(self.by) + [self.between, "metric", "estimate", "ci_low", "ci_high", "corrected",
                                            "null_expected", "p_value", "p_adjusted", "n_clusters"]
                if c in frame.columns]
        title = (f"ShiftResult: {len(self.groups)} level(s) of {self.between!r} vs base {self.base!r}; "
                 f"{self.n_resamples} replicates, {self.n_permutations} permutations")
        return title, frame[cols] if len(frame) else frame, None

    def to_frame(self) -> pd.DataFrame:
        """Tidy, unrounded: one row per compared level and metric (shifts and changes in bias)."""
        rows = []
        for g in self.groups:
            for m in SHIFT_METRICS:
                s = getattr(g, m)
                if s is None:
                    continue
                rows.append({**g.keys, "base": g.base, "metric": m, "estimate": s.mean_over_clusters,
                             "sd_over_clusters": s.sd_over_clusters, "pooled": s.pooled, "ci_low": s.ci.low,
                             "ci_high": s.ci.high, "corrected": s.corrected, "corrected_ci_low": s.corrected_ci.low,
                             "corrected_ci_high": s.corrected_ci.high, "null_expected": s.null_expected,
                             "p_value": s.p_value, "p_adjusted": s.p_adjusted, "p_adjusted_bh": s.p_adjusted_bh,
                             "n_clusters": s.n_clusters, "pairing": g.pairing})
            for m in CHANGE_METRICS:
                c = g.change.get(m)
                if c is None:
                    continue
                rows.append({**g.keys, "base": g.base, "metric": m, "estimate": c.estimate,
                             "base_value": c.base_value, "value": c.value, "ci_low": c.ci.low, "ci_high": c.ci.high,
                             "normalised_estimate": c.normalised_estimate, "normalised_ci_low": c.normalised_ci.low,
                             "normalised_ci_high": c.normalised_ci.high, "p_value": c.p_value,
                             "p_adjusted": c.p_adjusted, "p_adjusted_bh": c.p_adjusted_bh,
                             "n_clusters": g.n_clusters, "pairing": g.pairing})
        return pd.DataFrame(rows)

    def clusters_frame(self) -> pd.DataFrame:
        """One row per compared level and cluster: shifts, the two levels' deltas and valid-choice counts."""
        rows = []
        for g in self.groups:
            for c in g.clusters:
                flat = {k: v for k, v in c.items() if not isinstance(v, list)}
                for k, v in c.items():
                    if isinstance(v, list):
                        flat[f"{k}_low"], flat[f"{k}_high"] = v
                rows.append({**g.keys, "base": g.base, **flat})
        return pd.DataFrame(rows)

    def tools_frame(self) -> pd.DataFrame:
        """One row per compared level, cluster and tool: selection shares and their difference.

        Columns ``share_base``, ``share``, ``difference``, ``ci_low``, ``ci_high``, ``p_value`` and the
        multiplicity-adjusted ``p_adjusted`` (Holm), ``p_adjusted_bh`` (Benjamini-Hochberg) and ``significant``
        (Holm-adjusted p <= 1 - confidence level); the family is every level x cluster x tool of the result.
        """
        parts = []
        for g in self.groups:
            t = g.tools.copy()
            for i, (k, v) in enumerate({**g.keys, "base": g.base}.items()):
                t.insert(i, k, v)
            parts.append(t)
        return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()

    def trend_frame(self) -> pd.DataFrame:
        """Per ``by`` group and level of a numeric ``between`` column: each metric with its CI (Fig. 9 style)."""
        parts = []
        for t in self.trends:
            lv = t.levels.copy()
            for i, (k, v) in enumerate(t.keys.items()):
                lv.insert(i, k, v)
            parts.append(lv)
        return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()

    def to_dict(self) -> dict:
        """The documented JSON object of ``toolbias-stats shift --json`` (strict: NaN becomes null)."""
        trend_of = {tuple(sorted((k, str(v)) for k, v in t.keys.items())): t for t in self.trends}

        def trend(g):
            if not self.numeric:
                return None
            key = tuple(sorted((k, str(v)) for k, v in g.keys.items() if k != self.between))
            return trend_of.get(key)

        return {
            "between": self.between,
            "base": _json_num(_py(self.base)),
            "by": list(self.by),
            "numeric": self.numeric,
            "n_resamples": self.n_resamples,
            "n_permutations": self.n_permutations,
            "confidence_level": self.confidence_level,
            "pairing": self.pairing,
            "seed": self.seed if isinstance(self.seed, (int, type(None))) else repr(self.seed),
            "groups": [g.to_dict(trend(g)) for g in self.groups],
            "trends": [t.to_dict() for t in self.trends] if self.numeric else [],
            "skipped": [str(s) for s in self.skipped],
            "warnings": [str(w) for w in self.warnings],
        }


# ------------------------------------------------------------------------------------------------
def selection_shift(log, *, between="condition", base="base", by=("model",), n_resamples=2000,
                    n_permutations=2000, confidence_level=0.95, pairing="auto", rng=None) -> ShiftResult:
    """Compare every level of a design column with a base level: distribution shift and change in bias.

    Parameters
    ----------
    log : SelectionLog, SelectionCounts, Study or path to a manifest
        The attempts or their per-query counts; only ``status == "ok"`` attempts enter the rates.
    between : str, default "condition"
        The design column whose levels are compared (any manifest column: ``condition``, ``temperature``,
        ``checkpoint``, ``prompt``, ``ordering_scheme`` ...).
    base : object, default "base"
        The reference level. For a numeric column a string is read as a number (``"0.5"``).
    by : str or sequence of str, default ``("model",)``
        Comparisons are made within each group of these columns.
    n_resamples : int, default 2000
        Query-bootstrap replicates (0: no intervals, no bias correction).
    n_permutations : int, default 2000
        Label permutations for ``null_expected`` and the p-values (0: skipped).
    confidence_level : float, default 0.95
    pairing : {"auto", "paired", "independent"}, default "auto"
        ``"paired"``: queries are resampled jointly across the levels of a group (all rotations and runs of
        a query in every level together), so shared query difficulty cancels in the differences.
        ``"independent"``: each level's queries are resampled on their own. ``"auto"``: paired when each
        level shares at least half of the union of its and the base's query ids (per group), else independent;
        the choice is recorded in ``ShiftGroup.pairing``.
    rng : None, int or numpy.random.Generator

    Returns
    -------
    ShiftResult

    Raises
    ------
    ValueError
        ``between`` is not a design column (or is also in ``by``), ``base`` is not a level of it, a bad option.

    Warns
    -----
    ExcludedRowsWarning
        Attempts without a valid choice are excluded (counts in ``ShiftGroup.rows``).
    DegenerateDataWarning
        A group without the base level or without another level is skipped (listed in ``skipped``); clusters
        that only one level has are left out of that comparison.

    Notes
    -----
    *Shift.* For cluster ``c`` and level ``L``, ``P_L`` is the mean over the level's runs of the per-run
    selection rates (tools, or positions 1..K); the shift is ``TV(P_L, P_base) = 1/2 sum_i |P_L,i - P_base,i|``,
    averaged over the clusters both levels have (``mean_over_clusters``) with the sd (ddof 1) over clusters, as
    BiasBusters Fig. 5 reports it. A *run* is one combination of the design columns other than ``by`` and
    ``between`` (``run``, and e.g. ``temperature`` when comparing conditions).

    *Change in bias.* ``delta`` of a level is ``mean_over_runs`` of :func:`~toolbias_stats.selection_bias`
    over the compared clusters; ``delta_model = (delta_API + delta_pos) / 2`` over clusters with known
    positions. Changes are level minus base, also normalised by ``1 - 1/K``.

    *Uncertainty.* Query-bootstrap replicates (within cluster; every rotation and run of a query together) are
    drawn jointly for all levels of a group when they share queries (paired), else per level; every statistic
    is recomputed in each replicate (percentile intervals). The plug-in shift has a kink at zero exactly like
    TV to uniform, so ``corrected`` / ``corrected_ci`` invert the bootstrap law of the plug-in along the two
    calibration paths of :func:`~toolbias_stats.calibrated_mean_tv`, with the deviations ``P_L - P_base``
    (see :func:`calibrated_mean_shift`).

    *Null.* Under "no change" the level labels are exchangeable within a query. With paired data and the
    same number of runs in both levels a permutation swaps a query's whole block (all runs and rotations)
    between the two levels with probability 1/2 (``null_method = "swap query blocks"``). With paired data and
    different numbers of runs, each query's ``S_base + S_level`` run blocks are dealt at random to the two
    levels' run slots (``"permute runs within query"``). In both cases the run axis is kept and every
    statistic (per-tool difference, shift, change in bias) is recomputed exactly as observed. Independent
    levels re-allocate whole queries at random (``"re-allocate queries (runs pooled)"``; with different numbers
    of runs a query carries the mean of its runs' counts, ``"... (runs averaged)"``, so that it weighs the same
    in either level), and the observed statistic is computed in the same representation. Swapping or
    re-allocating pooled blocks of unequal size would balance the two levels' sample sizes in every
    permutation, a permutation law narrower than the observed statistic's (size 8-24% at nominal 5%;
    ``analyses/shift_pvalue_size.py``). ``null_expected`` is the permutation mean, ``p_value = (1 + #{T* >= T})
    / (1 + N)`` (two-sided ``|T*| >= |T|`` for changes in bias and per-tool differences). Holm and
    Benjamini-Hochberg adjust all levels x metrics of the result together, and separately all per-tool tests
    (levels x clusters x tools) of the result (statsmodels ``multipletests``).

    References
    ----------
    Blankenstein et al., "BiasBusters", sec. 4.3 (Fig. 5), 4.4 (Table 5), App. E (Fig. 9), J, Fig. 17.
    Good, P. (2005), Permutation, Parametric and Bootstrap Tests of Hypotheses, ch. 3.
    Efron & Tibshirani (1993), An Introduction to the Bootstrap, ch. 13.

    Examples
    --------
    The same queries under a base condition (a uniform chooser) and a condition that favours the first listed
    position (simulated; 3 clusters of 4 tools, 20 queries in all 4 rotations):

    >>> import numpy as np
    >>> import toolbias_stats as tbs
    >>> from toolbias_stats.experiments import simulate_conditions
    >>> pref = np.ones((3, 4))
    >>> log = simulate_conditions({"base": (pref, None), "first_wins": (pref, [4, 1, 1, 1])}, n_queries=20, rng=0)
    >>> res = tbs.selection_shift(log, between="condition", base="base", n_resamples=200, rng=1)
    >>> res.to_frame()[["condition", "metric", "estimate", "ci_low", "ci_high", "p_value"]].round(3)
        condition       metric  estimate  ci_low  ci_high  p_value
    0  first_wins    shift_api     0.112   0.092    0.234    0.507
    1  first_wins    shift_pos     0.283   0.225    0.362    0.000
    2  first_wins    delta_api    -0.046  -0.092    0.021    0.089
    3  first_wins    delta_pos     0.212   0.096    0.242    0.000
    4  first_wins  delta_model     0.083   0.023    0.113    0.000

    The bundled SIMULATED experiment (44,000 attempts, about 15 s):
    ``tbs.selection_shift(tbs.read_study(tbs.datasets.path("experiments/study.toml")), between="condition",
    base="base", rng=1)``.
    """
    counts = load_counts(log)
    confidence_level = check_confidence_level(confidence_level)
    n_resamples = check_n_resamples(n_resamples)
    if isinstance(n_permutations, bool) or not isinstance(n_permutations, numbers.Integral) or n_permutations < 0:
        raise ValueError(f"`n_permutations` must be a non-negative integer; got {n_permutations!r} instead.")
    n_permutations = int(n_permutations)
    check_choice("pairing", pairing, PAIRINGS)
    design = list(counts.design_columns)
    if not isinstance(between, str) or between not in design:
        raise ValueError(ERR_BETWEEN.format(col=between, cols=sorted(design)))
    by = check_by(by, design)
    if between in by:
        raise ValueError(ERR_BETWEEN_IN_BY.format(col=between, by=by))
    if (n_resamples or n_permutations) and counts.level != "query":
        raise ValueError("the bootstrap and the permutation test work on queries, so they need query-level counts; "
                         f"got counts at level {counts.level!r} instead (count with level='query').")
    table = counts.table
    numeric = _is_numeric(table[between])
    all_levels = _levels(table[between])
    base_value = _match_level(base, all_levels, numeric)
    if base_value is None:
        raise ValueError(ERR_BASE.format(base=base, col=between, levels=[_py(v) for v in all_levels]))
    seed = rng if isinstance(rng, (int, type(None))) else "generator"
    gen = check_rng(rng)
    caught, skipped = [], []
    totals = counts.status_totals()
    excluded = {s: n for s, n in totals.items() if s != "ok" and n}
    if excluded:
        msg = f"{sum(excluded.values())} of {sum(totals.values())} attempts have no valid selection and are excluded: {excluded}"
        warnings.warn(msg, ExcludedRowsWarning, stacklevel=2)
        caught.append(msg)
    others = [c for c in design if c not in by and c != between]
    groups, trends = [], []
    grouped = list(table.groupby(by, sort=True, dropna=False, observed=True)) if by else [((), table)]
    for key, sub in grouped:
        key = key if isinstance(key, tuple) else (key,)
        keys = {b: _py(k) for b, k in zip(by, key)}
        levels = _levels(sub[between])
        base_here = _match_level(base_value, levels, numeric)
        if base_here is None or len(levels) < 2:
            why = "has no base level" if base_here is None else "has only the base level"
            skipped.append(f"group {keys} {why} ({between!r} levels: {[_py(v) for v in levels]})")
            continue
        ctx = _GroupData(sub, counts.catalog, between, base_here, levels, others, keys, pairing, n_resamples, gen,
                         caught, numeric)
        for level in ctx.others:
            g = ctx.compare(level, n_permutations, confidence_level)
            if g is not None:
                groups.append(g)
        if numeric and len(levels) >= 2 and n_resamples:
            t = ctx.trend(confidence_level)
            if t is not None:
                trends.append(t)
    for s in skipped:
        warnings.warn(s, DegenerateDataWarning, stacklevel=2)
    caught.extend(skipped)
    groups = _adjust_tools(_adjust(groups), 1.0 - confidence_level)
    return ShiftResult(groups=groups, trends=trends, between=between, base=_py(base_value), by=by, numeric=numeric,
                       n_resamples=n_resamples, n_permutations=n_permutations, confidence_level=confidence_level,
                       pairing=pairing, seed=seed, skipped=skipped, warnings=caught)


# ------------------------------------------------------------------------------------------------
def calibrated_mean_shift(diffs, boot_diffs, *, confidence_level=0.95) -> CalibratedTV:
    r"""Bias-corrected estimate and calibrated CI for the mean TV between two distributions per cluster.

    Target: :math:`S = \frac1C \sum_c \tfrac12 \sum_i |p_{L,ci} - p_{B,ci}|`.

    Parameters
    ----------
    diffs : sequence of 1-D arrays, length C
        Observed ``P_L - P_base`` per cluster (shape ``(K_c,)``).
    boot_diffs : sequence of 2-D arrays, length C
        The same difference in R joint bootstrap replicates (shape ``(R, K_c)``; one replicate across all
        clusters, paired across the two levels where they share queries).
    confidence_level : float, default 0.95

    Returns
    -------
    CalibratedTV
        ``estimate``, ``ci_low``, ``ci_high``, ``p_value_uniform`` (here: the bootstrap test of "no shift")
        and ``plugin``.

    Notes
    -----
    The plug-in :math:`T = \frac{1}{2C}\sum|x|` with :math:`x = \hat p_L - \hat p_B` has the same kink at
    :math:`x = 0` as TV to uniform, with :math:`\hat p_B` in the role of ``1/K`` (itself noisy). The errors of
    :math:`x` are taken from the replicates (centred), so the correlation of the two levels under pairing is
    kept; then the belt inversion of :func:`toolbias_stats.calibrated_mean_tv` is run (shrinkage path for the
    lower bound, median-matched estimate from the shrinkage and linear paths). The upper bound is the largest of
    three: the shrinkage path, the linear path ``t x`` and a more evenly spread path ``t x_m`` with
    ``x_m = 0.75 x + 0.25 sign(x) mean|x|`` (rescaled to the same total). The third one is needed here and not for
    TV to uniform: both distributions are noisy, so a moderate true difference is often observed near 0, and a
    path that keeps it near 0 attributes too much of the plug-in to noise (upper coverage 89-92% without it in the
    "moderate" simulation, 96-97% with it, at about 9% more width). When the observed shift lies below the
    ``alpha/2`` quantile of the no-shift law the belt is empty; the upper bound is then inverted at half the
    observed lower-tail probability, which gives a short interval ``[0, hi]`` instead of ``[0, 0]``. Coverage is checked by
    simulation in ``analyses/experiments_shift_coverage.py`` (docs/guide/experiments_overview.md).
    """
    confidence_level = check_confidence_level(confidence_level)
    xs, es = [], []
    for d, b in zip(diffs, boot_diffs):
        d = np.asarray(d, dtype=float)
        b = np.asarray(b, dtype=float)
        b = np.where(np.isfinite(b), b, d[None, :])   # a replicate without valid choices carries no information
        xs.append(d)
        es.append(b - b.mean(0))
    if not xs:
        raise ValueError("`diffs` must contain at least one cluster; got none.")
    x = np.concatenate(xs)
    e = np.concatenate(es, axis=1)
    if e.shape[0] < 20:
        raise ValueError(f"`boot_diffs` needs at least 20 replicates; got {e.shape[0]} instead.")
    w = 0.5 / len(xs)
    v = e.var(axis=0)
    t_obs = w * np.abs(x).sum()
    pos_v = v > 0
    lam_max = float(np.max(x[pos_v] ** 2 / v[pos_v])) if np.any(pos_v) else 0.0
    alpha = 1.0 - confidence_level
    null = w * np.abs(e).sum(axis=1)
    # When the observed shift lies below the alpha/2 quantile of the no-shift law (the two samples agree better
    # than noise predicts), the belt is empty and the upper bound would collapse to 0, missing small true shifts.
    # Invert at half the observed lower-tail probability instead: a short, non-degenerate interval [0, hi].
    p_low = float(np.mean(null <= t_obs))
    q_up = alpha / 2.0 if p_low >= alpha / 2.0 else max(p_low / 2.0, 1.0 / null.size)
    qs = (1.0 - alpha / 2.0, q_up, 0.5)
    lo_s, hi_s, est_s = _invert(lambda t: _path(t, x, v, lam_max), e, w, t_obs, qs)
    _, hi_l, est_l = _invert(lambda t: t * x, e, w, t_obs, qs, lower=False)
    # a third, more evenly spread shape for the upper bound: a quarter of the way from the data's shape to equal
    # magnitudes (same total). Noise can push a moderate true difference towards 0, and a path that keeps it small
    # overstates the bias there and the upper bound comes out too low (simulation: 89-92% instead of 95%).
    mag = np.abs(x).mean()
    xm = 0.75 * x + 0.25 * np.where(x == 0, mag, np.sign(x) * mag)
    xm = xm * (np.abs(x).sum() / np.abs(xm).sum()) if np.abs(xm).sum() > 0 else xm
    _, hi_m, _ = _invert(lambda t: t * xm, e, w, t_obs, qs, lower=False)
    p = float((1 + np.sum(null >= t_obs - 1e-15)) / (1 + null.size))
    high = max(hi_s, hi_l, hi_m)
    est = min(max(0.5 * (est_s + est_l), lo_s), high)
    return CalibratedTV(estimate=float(est), ci_low=float(lo_s), ci_high=float(high),
                        confidence_level=confidence_level, method="test-inversion (differences)",
                        p_value_uniform=p, plugin=float(t_obs))


# ------------------------------------------------------------------------------------------------
# per-level statistics from count arrays (..., S, K)
def _mean_rates(c):
    """Mean over runs (axis -2) of the per-run rates; runs without a valid choice are ignored."""
    return _nanmean(rates_from_counts(c), -2)


def _delta(c):
    """delta (TV to uniform) per run, averaged over runs: (..., S, K) -> (...)."""
    return _nanmean(_tv_runs(c), -1)


def _nanmean(x, axis):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return np.nanmean(x, axis=axis)


def _nansd(x):
    x = np.asarray(x, dtype=float)
    x = x[np.isfinite(x)]
    return float(np.std(x, ddof=1)) if x.size > 1 else np.nan


class _GroupData:
    """Per-cluster count tensors of every level of one ``by`` group, and their bootstrap replicates."""

    def __init__(self, sub, catalog, between, base, levels, others, keys, pairing, n_resamples, gen, caught,
                 numeric):
        self.keys, self.between, self.base, self.gen, self.caught = keys, between, base, gen, caught
        self.n_resamples = n_resamples
        self.levels = levels
        self.others = [lv for lv in levels if not _same(lv, base)]
        self.numeric = numeric
        sub = sub.copy()
        # one "run" = one combination of the design columns other than by/between; sorted by level first so
        # that every level's runs are contiguous on the run axis
        sub["_level"] = _level_codes(sub[between], levels)
        run_cols = ["_level"] + others
        sub["run"] = sub.groupby(run_cols, sort=True, dropna=False, observed=True).ngroup().to_numpy()
        level_of_run = sub.groupby("run", sort=True)["_level"].first().to_numpy()
        self.runs_of = {i: np.flatnonzero(level_of_run == i) for i in range(len(levels))}
        self.n_runs = len(level_of_run)
        present = set(sub["cluster_id"].unique())
        self.clusters = [c for c in catalog.clusters if c in present]
        self.catalog = catalog
        self.k = {}
        self.api, self.pos, self.qmask, self.rows = {}, {}, {}, {}
        by_cluster = dict(iter(sub.groupby("cluster_id", sort=False, observed=True)))
        for c in self.clusters:
            part = by_cluster[c]
            api, pos, tools = _tensors(part, catalog, c, np.arange(self.n_runs), caught, keys)
            self.k[c] = (api.k, None if pos is None else pos.k, tools)
            self.api[c] = api.counts
            self.pos[c] = None if pos is None else pos.counts
            # which queries each level has attempts for (any status)
            q_codes, _ = pd.factorize(part["query_id"], sort=True)
            att = part[[f"n_{s}" for s in STATUSES]].to_numpy().sum(1)
            mask = np.zeros((api.counts.shape[0], len(levels)), dtype=bool)
            np.logical_or.at(mask, (q_codes, part["_level"].to_numpy()), att > 0)
            self.qmask[c] = mask
            self.rows[c] = {i: (int(att[part["_level"].to_numpy() == i].sum()),
                                int(part["n_ok"].to_numpy()[part["_level"].to_numpy() == i].sum()))
                            for i in range(len(levels))}
        self.pairing = self._pairing(pairing)
        self.boot_api, self.boot_pos = self._bootstrap()

    # -- design -----------------------------------------------------------------------------
    def _idx(self, level):
        return next(i for i, lv in enumerate(self.levels) if _same(lv, level))

    def _pairing(self, pairing):
        if pairing != "auto":
            return pairing
        b = self._idx(self.base)
        for lv in self.others:
            i = self._idx(lv)
            # only clusters both levels were run on (a targeted condition covers some clusters only)
            both = [m for m in self.qmask.values() if m[:, b].any() and m[:, i].any()]
            inter = sum(int((m[:, b] & m[:, i]).sum()) for m in both)
            union = sum(int((m[:, b] | m[:, i]).sum()) for m in both)
            if union == 0 or inter / union < PAIRED_OVERLAP:
                return "independent"
        return "paired"

    def _bootstrap(self):
        """Replicate counts (R, S, K) per cluster, api and pos, on the full run axis."""
        r = self.n_resamples
        boot_api, boot_pos = {}, {}
        for c in self.clusters:
            api, pos = self.api[c], self.pos[c]
            if not r:
                boot_api[c] = boot_pos[c] = None
                continue
            if self.pairing == "paired":
                reps = resampled_counts([api] + ([] if pos is None else [pos]), r, self.gen)
                boot_api[c] = reps[0]
                boot_pos[c] = None if pos is None else reps[1]
            else:
                ba = np.zeros((r,) + api.shape[1:])
                bp = None if pos is None else np.zeros((r,) + pos.shape[1:])
                for i in range(len(self.levels)):
                    q = self.qmask[c][:, i]
                    runs = self.runs_of[i]
                    if not q.any():
                        continue
                    targets = [api[q][:, runs]] + ([] if pos is None else [pos[q][:, runs]])
                    reps = resampled_counts(targets, r, self.gen)
                    ba[:, runs] = reps[0]
                    if pos is not None:
                        bp[:, runs] = reps[1]
                boot_api[c], boot_pos[c] = ba, bp
        return boot_api, boot_pos

    # -- one comparison ---------------------------------------------------------------------
    def compare(self, level, n_perm, conf) -> ShiftGroup | None:
        b, i = self._idx(self.base), self._idx(level)
        rb, rl = self.runs_of[b], self.runs_of[i]
        keys = {**self.keys, self.between: _py(level)}
        clusters = [c for c in self.clusters
                    if self.api[c][:, rb].sum() > 0 and self.api[c][:, rl].sum() > 0]
        dropped = [c for c in self.clusters if c not in clusters]
        if not clusters:
            msg = f"group {keys}: no cluster has valid choices in both {self.base!r} and {level!r}; skipped"
            warnings.warn(msg, DegenerateDataWarning, stacklevel=4)
            self.caught.append(msg)
            return None
        if dropped:
            msg = (f"group {keys}: clusters {dropped} lack valid choices in one of the two levels and are left out "
                   f"of this comparison ({len(clusters)} clusters compared)")
            self.caught.append(msg)
        pos_clusters = [c for c in clusters if self.pos[c] is not None
                        and self.pos[c][:, rb].sum() > 0 and self.pos[c][:, rl].sum() > 0]
        r = self.n_resamples
        perms = {c: self._permute(c, rb, rl, b, i, n_perm) for c in clusters} if n_perm else {}
        null_method = next(iter(perms.values()))[2] if perms else "none"

        def target_stats(tensors, boots, cl, kind):
            """Per-cluster observed / bootstrap / permutation values of the shift and of delta."""
            out = {"shift": [], "pooled": [], "diff": [], "bdiff": [], "bshift": [], "db": [], "dl": [],
                   "bdb": [], "bdl": [], "norm": [], "pshift": [], "pdelta_b": [], "pdelta_l": [], "pdiff": [],
                   "pstat_obs": [], "pdelta_obs": []}
            for c in cl:
                t = tensors[c]
                ob, ol = t[:, rb].sum(0), t[:, rl].sum(0)
                pb, pl = _mean_rates(ob), _mean_rates(ol)
                out["diff"].append(pl - pb)
                out["shift"].append(0.5 * np.abs(pl - pb).sum())
                out["pooled"].append(0.5 * np.abs(rates_from_counts(ol.sum(0)) - rates_from_counts(ob.sum(0))).sum())
                out["db"].append(_delta(ob))
                out["dl"].append(_delta(ol))
                k = t.shape[-1]
                out["norm"].append(1 - 1 / k)
                if r:
                    bt = boots[c]
                    bb, bl = bt[:, rb], bt[:, rl]
                    d = _mean_rates(bl) - _mean_rates(bb)
                    out["bdiff"].append(d)
                    out["bshift"].append(0.5 * np.abs(d).sum(-1))
                    out["bdb"].append(_delta(bb))
                    out["bdl"].append(_delta(bl))
                if n_perm:
                    pb_, pl_, _, ob_, ol_, off = perms[c]
                    sl = slice(0, k) if kind == "api" else slice(off, off + k)
                    qb, ql = pb_[..., sl], pl_[..., sl]
                    d = _mean_rates(ql) - _mean_rates(qb)
                    out["pshift"].append(0.5 * np.abs(d).sum(-1))
                    out["pdiff"].append(d)
                    out["pdelta_b"].append(_delta(qb))
                    out["pdelta_l"].append(_delta(ql))
                    o = _mean_rates(ol_[..., sl]) - _mean_rates(ob_[..., sl])
                    out["pstat_obs"].append(0.5 * np.abs(o).sum())
                    out["pdelta_obs"].append(_delta(ol_[..., sl]) - _delta(ob_[..., sl]))
            return out

        api = target_stats(self.api, self.boot_api, clusters, "api")
        pos = target_stats(self.pos, self.boot_pos, pos_clusters, "pos") if pos_clusters else None
        shift_api = self._shift_estimate("shift_api", api, conf, null_method)
        shift_pos = self._shift_estimate("shift_pos", pos, conf, null_method) if pos else None
        change = {"delta_api": self._change("delta_api", [api], conf),
                  "delta_pos": self._change("delta_pos", [pos], conf) if pos else None,
                  "delta_model": self._change("delta_model", [api, pos], conf) if pos and pos_clusters == clusters
                  else None}
        # per-cluster table
        crow = []
        for j, c in enumerate(clusters):
            row = {"cluster": str(c), "K": int(self.k[c][0]), "n_base": self.rows[c][b][1],
                   "n_level": self.rows[c][i][1], "shift_api": float(api["shift"][j]),
                   "shift_api_ci": list(percentile_ci(api["bshift"][j], conf)) if r else [np.nan, np.nan],
                   "delta_api_base": float(api["db"][j]), "delta_api": float(api["dl"][j])}
            if pos and c in pos_clusters:
                jj = pos_clusters.index(c)
                row.update({"shift_pos": float(pos["shift"][jj]),
                            "shift_pos_ci": list(percentile_ci(pos["bshift"][jj], conf)) if r else [np.nan, np.nan],
                            "delta_pos_base": float(pos["db"][jj]), "delta_pos": float(pos["dl"][jj])})
            else:
                row.update({"shift_pos": np.nan, "shift_pos_ci": [np.nan, np.nan], "delta_pos_base": np.nan,
                            "delta_pos": np.nan})
            crow.append(row)
        # per-tool shares
        trow = []
        for j, c in enumerate(clusters):
            tools = self.k[c][2]
            pb = _mean_rates(self.api[c][:, rb].sum(0))
            pl = _mean_rates(self.api[c][:, rl].sum(0))
            if r:
                lo, hi = np.nanquantile(api["bdiff"][j], [(1 - conf) / 2, 1 - (1 - conf) / 2], axis=0)
            else:
                lo = hi = np.full(len(tools), np.nan)
            if n_perm:
                pd_ = api["pdiff"][j]
                # the observed difference in the representation the permutations use (runs pooled or not), so
                # that it and its permutation distribution are the same statistic; with equal runs this is pl - pb
                obs = _mean_rates(perms[c][4][..., :len(tools)]) - _mean_rates(perms[c][3][..., :len(tools)])
                pv = (1 + np.sum(np.abs(pd_) >= np.abs(obs)[None, :] - 1e-12, axis=0)) / (1 + len(pd_))
            else:
                pv = np.full(len(tools), np.nan)
            for t, tool in enumerate(tools):
                trow.append({"cluster": str(c), "tool_id": tool, "api_index": t + 1, "share_base": float(pb[t]),
                             "share": float(pl[t]), "difference": float(pl[t] - pb[t]), "ci_low": float(lo[t]),
                             "ci_high": float(hi[t]), "p_value": float(pv[t])})
        rows = {"base": {"attempts": sum(self.rows[c][b][0] for c in clusters),
                         "valid": sum(self.rows[c][b][1] for c in clusters)},
                "level": {"attempts": sum(self.rows[c][i][0] for c in clusters),
                          "valid": sum(self.rows[c][i][1] for c in clusters)}}
        return ShiftGroup(keys=keys, base=_py(self.base), pairing=self.pairing, n_clusters=len(clusters),
                          clusters=crow, shift_api=shift_api, shift_pos=shift_pos, change=change,
                          tools=pd.DataFrame(trow), rows=rows)

    def _permute(self, c, rb, rl, b, i, n_perm):
        """Permuted (base, level) counts (N, S', K_api + K_pos) of cluster ``c`` under "no change".

        Returns ``(perm_base, perm_level, method, obs_base, obs_level, pos_offset)``; ``obs_*`` are the
        unpermuted counts in the same representation (runs pooled or not).
        """
        api, pos = self.api[c], self.pos[c]
        joined = api if pos is None else np.concatenate([api, pos], axis=-1)     # (Q, S, K + Kp)
        off = api.shape[-1]
        gen = self.gen
        if self.pairing == "paired" and len(rb) != len(rl):
            return self._permute_runs(joined, rb, rl, n_perm) + (off,)
        if self.pairing == "paired":
            xb, xl = joined[:, rb], joined[:, rl]
            method = "swap query blocks"
            q = xb.shape[0]
            z = (gen.random((n_perm, q)) < 0.5).astype(float)
            d = (xl - xb).reshape(q, -1)
            moved = (z @ d).reshape((n_perm,) + xb.shape[1:])
            sb, sl = xb.sum(0), xl.sum(0)
            return sb + moved, sl - moved, method, sb, sl, off
        # independent: re-allocate whole queries (runs pooled) between the levels
        mb, ml = self.qmask[c][:, b], self.qmask[c][:, i]
        yb = joined[mb][:, rb].sum(1)
        yl = joined[ml][:, rl].sum(1)
        method = "re-allocate queries (runs pooled)"
        if len(rb) != len(rl):
            # a query carries the mean of its runs' counts, so that one run by more cannot weigh more where it is
            # moved (pooled blocks would balance the levels' sample sizes in every permutation: too narrow a law)
            yb, yl = yb / len(rb), yl / len(rl)
            method = "re-allocate queries (runs averaged)"
        y = np.concatenate([yb, yl])                                              # (Qb + Ql, K)
        nb = len(yb)
        order = np.argsort(gen.random((n_perm, len(y))), axis=1)
        m = np.zeros((n_perm, len(y)))
        np.put_along_axis(m, order[:, :nb], 1.0, axis=1)
        pb = (m @ y)[:, None, :]
        pl = y.sum(0)[None, None, :] - pb
        return pb, pl, method, yb.sum(0)[None], yl.sum(0)[None], off

    def _permute_runs(self, joined, rb, rl, n_perm, chunk_elements=2_000_000):
        """Paired levels with different numbers of runs: permute each query's run blocks between the levels.

        Under "no change" the ``S_b + S_l`` run blocks of one query (all its rotations in one run) are
        exchangeable, whatever level they were run under. Each permutation draws, independently per query, which
        ``S_b`` of them fill the base's run slots and which ``S_l`` the level's; the run axis is kept, so every
        statistic is recomputed exactly as observed (mean over runs of the per-run rates). Swapping pooled
        blocks instead would balance the two levels' sample sizes in every permutation, so that the permutation
        law is narrower than the observed statistic's (size 8-24% at nominal 5%, ``analyses/shift_pvalue_size.py``).
        """
        x = joined[:, np.concatenate([rb, rl])]                                   # (Q, S_b + S_l, K')
        q, s_tot, kk = x.shape
        nb = len(rb)
        out = np.empty((n_perm, s_tot, kk))
        qi = np.arange(q)[None, :]
        step = max(1, chunk_elements // max(1, q * kk))
        for start in range(0, n_perm, step):
            stop = min(n_perm, start + step)
            order = np.argsort(self.gen.random((stop - start, q, s_tot)), axis=-1)   # slot -> source run, per query
            for j in range(s_tot):
                out[start:stop, j] = x[qi, order[:, :, j]].sum(1)
        obs = x.sum(0)
        return out[:, :nb], out[:, nb:], "permute runs within query", obs[:nb], obs[nb:]

    def _shift_estimate(self, name, st, conf, null_method) -> ShiftEstimate:
        shift = np.array(st["shift"])
        stat = float(shift.mean())
        kw = {}
        if self.n_resamples:
            boot = np.stack(st["bshift"], axis=1).mean(1)
            cal = calibrated_mean_shift(st["diff"], st["bdiff"], confidence_level=conf)
            kw.update(ci=percentile_ci(boot, conf), corrected=cal.estimate,
                      corrected_ci=ConfidenceInterval(cal.ci_low, cal.ci_high),
                      standard_error=float(np.nanstd(boot, ddof=1)), bootstrap_distribution=boot)
        if st["pshift"]:
            perm = np.stack(st["pshift"], axis=1).mean(1)
            obs = float(np.mean(st["pstat_obs"]))
            kw.update(null_expected=float(np.mean(perm)), null_method=null_method,
                      p_value=float((1 + np.sum(perm >= obs - 1e-12)) / (1 + len(perm))))
        return ShiftEstimate(metric=name, mean_over_clusters=stat, sd_over_clusters=_nansd(shift),
                             pooled=float(np.mean(st["pooled"])), n_clusters=len(shift), confidence_level=conf, **kw)

    def _change(self, name, parts, conf) -> ChangeEstimate:
        """Change in delta (level - base); ``parts`` = [api] or [api, pos] (delta_model averages them)."""
        def avg(key, stack_axis=None):
            vals = []
            for p in parts:
                x = np.asarray(p[key]) if stack_axis is None else np.stack(p[key], axis=stack_axis)
                vals.append(_nanmean(x, 0 if stack_axis is None else stack_axis))
            return sum(vals) / len(vals)

        def avg_norm(key_b, key_l, stack_axis=None):
            vals = []
            for p in parts:
                nb = np.asarray(p["norm"])
                xb = np.asarray(p[key_b]) if stack_axis is None else np.stack(p[key_b], axis=1)
                xl = np.asarray(p[key_l]) if stack_axis is None else np.stack(p[key_l], axis=1)
                vals.append(_nanmean((xl - xb) / nb, 0 if stack_axis is None else 1))
            return sum(vals) / len(vals)

        base_v, val = float(avg("db")), float(avg("dl"))
        kw = {"normalised_estimate": float(avg_norm("db", "dl"))}
        if self.n_resamples:
            boot = avg("bdl", 1) - avg("bdb", 1)
            kw.update(ci=percentile_ci(boot, conf), normalised_ci=percentile_ci(avg_norm("bdb", "bdl", 1), conf),
                      standard_error=float(np.nanstd(boot, ddof=1)), bootstrap_distribution=boot)
        if parts[0]["pdelta_b"]:
            perm = avg("pdelta_l", 1) - avg("pdelta_b", 1)
            obs = float(avg("pdelta_obs"))
            kw["p_value"] = float((1 + np.sum(np.abs(perm) >= abs(obs) - 1e-12)) / (1 + len(perm)))
        return ChangeEstimate(metric=name, base_value=base_v, value=val, estimate=val - base_v, **kw)

    # -- trend over a numeric column ----------------------------------------------------------
    def trend(self, conf) -> TrendResult | None:
        common = [c for c in self.clusters if all(self.api[c][:, self.runs_of[i]].sum() > 0
                                                  for i in range(len(self.levels)))]
        if not common:
            msg = f"group {self.keys}: no cluster has valid choices at every level; no trend"
            self.caught.append(msg)
            return None
        pos_common = [c for c in common if self.pos[c] is not None
                      and all(self.pos[c][:, self.runs_of[i]].sum() > 0 for i in range(len(self.levels)))]
        x = np.array([float(lv) for lv in self.levels])
        est, boot = {}, {}
        for m, tensors, boots, cl in (("delta_api", self.api, self.boot_api, common),
                                      ("delta_pos", self.pos, self.boot_pos, pos_common)):
            if not cl:
                continue
            est[m] = np.array([np.mean([_delta(tensors[c][:, self.runs_of[i]].sum(0)) for c in cl])
                               for i in range(len(self.levels))])
            boot[m] = np.stack([_nanmean(np.stack([_delta(boots[c][:, self.runs_of[i]]) for c in cl], 1), 1)
                                for i in range(len(self.levels))], axis=1)            # (R, L)
        if "delta_pos" in est and pos_common == common:
            est["delta_model"] = (est["delta_api"] + est["delta_pos"]) / 2
            boot["delta_model"] = (boot["delta_api"] + boot["delta_pos"]) / 2
        xc = x - x.mean()
        denom = float((xc ** 2).sum())
        slopes, rows = {}, []
        for m in est:
            s = float((xc * (est[m] - est[m].mean())).sum() / denom) if denom > 0 else np.nan
            bs = ((boot[m] - _nanmean(boot[m], 1)[:, None]) * xc[None]).sum(1) / denom if denom > 0 else \
                np.full(len(boot[m]), np.nan)
            slopes[m] = (s, percentile_ci(bs, conf))
            for i, lv in enumerate(self.levels):
                ci = percentile_ci(boot[m][:, i], conf)
                rows.append({"level": _py(lv), "metric": m, "estimate": float(est[m][i]), "ci_low": ci.low,
                             "ci_high": ci.high, "n_clusters": len(common if m == "delta_api" else pos_common)})
        return TrendResult(keys=dict(self.keys), levels=pd.DataFrame(rows), slopes=slopes, clusters=list(common))


# ------------------------------------------------------------------------------------------------
def _adjust_tools(groups, alpha):
    """Holm and BH adjusted per-tool p-values: one family of every level x cluster x tool of the result.

    Adds ``p_adjusted`` (Holm), ``p_adjusted_bh`` and ``significant`` (Holm-adjusted p <= ``alpha``) to each
    group's ``tools`` table. A separate family from the levels x metrics one, so that adding tools does not dilute
    the shift and change-in-bias tests (and conversely).
    """
    from statsmodels.stats.multitest import multipletests

    tables = [g.tools.copy() for g in groups]
    p = np.concatenate([t["p_value"].to_numpy(float) if len(t) else np.empty(0) for t in tables]) if tables \
        else np.empty(0)
    ok = np.isfinite(p)
    holm, bh = np.full(p.shape, np.nan), np.full(p.shape, np.nan)
    if ok.any():
        holm[ok] = multipletests(p[ok], method="holm")[1]
        bh[ok] = multipletests(p[ok], method="fdr_bh")[1]
    out, start = [], 0
    for g, t in zip(groups, tables):
        n = len(t)
        t["p_adjusted"] = holm[start:start + n]
        t["p_adjusted_bh"] = bh[start:start + n]
        t["significant"] = np.nan_to_num(holm[start:start + n], nan=np.inf) <= alpha
        start += n
        out.append(_replace(g, tools=t))
    return out


def _adjust(groups):
    """Holm and BH adjusted p-values across every level x metric of the result."""
    entries = []
    for gi, g in enumerate(groups):
        for m in SHIFT_METRICS + CHANGE_METRICS:
            obj = getattr(g, m) if m in SHIFT_METRICS else g.change.get(m)
            if obj is not None and np.isfinite(obj.p_value):
                entries.append((gi, m, obj.p_value))
    if not entries:
        return groups
    from statsmodels.stats.multitest import multipletests

    p = np.array([e[2] for e in entries])
    holm = multipletests(p, method="holm")[1]
    bh = multipletests(p, method="fdr_bh")[1]
    adj = {(gi, m): (h, f) for (gi, m, _), h, f in zip(entries, holm, bh)}
    out = []
    for gi, g in enumerate(groups):
        repl = {}
        for m in SHIFT_METRICS:
            obj = getattr(g, m)
            if obj is not None and (gi, m) in adj:
                repl[m] = _replace(obj, p_adjusted=float(adj[gi, m][0]), p_adjusted_bh=float(adj[gi, m][1]))
        change = dict(g.change)
        for m in CHANGE_METRICS:
            if change.get(m) is not None and (gi, m) in adj:
                change[m] = _replace(change[m], p_adjusted=float(adj[gi, m][0]), p_adjusted_bh=float(adj[gi, m][1]))
        out.append(_replace(g, change=change, **repl))
    return out


def _replace(obj, **kw):
    from dataclasses import replace

    return replace(obj, **kw)


def _is_numeric(col) -> bool:
    return (pd.api.types.is_numeric_dtype(col) and not pd.api.types.is_bool_dtype(col)
            and not isinstance(col.dtype, pd.CategoricalDtype))


def _levels(col) -> list:
    vals = pd.unique(col.dropna()) if not isinstance(col.dtype, pd.CategoricalDtype) else \
        pd.unique(col.dropna().astype(object))
    vals = [_py(v) for v in vals]
    if _is_numeric(col):
        return sorted(vals)
    return sorted(vals, key=lambda v: (0, int(v), "") if str(v).isdigit() else (1, 0, str(v)))


def _match_level(base, levels, numeric):
    for lv in levels:
        if _same(lv, base, numeric):
            return lv
    return None


def _same(a, b, numeric=None) -> bool:
    if isinstance(a, numbers.Number) and not isinstance(a, bool):
        try:
            return bool(np.isclose(float(a), float(b), rtol=0, atol=1e-12))
        except (TypeError, ValueError):
            return False
    return str(a) == str(b)


def _level_codes(col, levels):
    """Index of each row's level in ``levels`` (-1 for a missing value); compared once per distinct value."""
    inv, uniques = pd.factorize(col.astype(object), use_na_sentinel=True)
    code_of = np.array([next((i for i, lv in enumerate(levels) if _same(lv, _py(u))), -1) for u in uniques] + [-1],
                       dtype=np.int64)
    return code_of[inv]


def _py(v):
    if isinstance(v, np.generic):
        return v.item()
    return v
