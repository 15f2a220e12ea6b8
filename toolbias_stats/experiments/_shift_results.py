"""Results of :func:`~toolbias_stats.experiments.selection_shift`: per-level shift and change-in-bias estimates,
per-group comparisons, trends over numeric levels, and the constants that name them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from .._display import ReprHTMLMixin
from .._resampling import ConfidenceInterval
from ..metrics._bias import _json_num
from ._shift_levels import _py

__all__ = ["ShiftResult", "ShiftGroup", "ShiftEstimate", "ChangeEstimate", "TrendResult", "PAIRINGS",
           "SHIFT_METRICS", "CHANGE_METRICS"]

#: Accepted ``pairing`` values.
PAIRINGS = ("auto", "paired", "independent")
#: Distribution-shift metrics (TV between a level's and the base's selection distributions).
SHIFT_METRICS = ("shift_api", "shift_pos")
#: Change-in-bias metrics (level minus base).
CHANGE_METRICS = ("delta_api", "delta_pos", "delta_model")
#: Share of the smaller level's query ids the two levels must have in common for ``pairing="auto"`` to pair them.
PAIRED_OVERLAP = 0.5
#: Fewest queries with valid choices that each level needs in every compared cluster for bootstrap intervals: a query
#: bootstrap of fewer units understates the spread, and a level of a few repeated attempts gives intervals that cover
#: a true zero shift in 10-15% of studies (issue 35); below it the intervals are NaN and ``note`` says why.
MIN_UNITS = 10

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
    note : str
        Why no interval is given (empty when one is): a level with valid choices on fewer than
        :data:`MIN_UNITS` queries of a compared cluster (issue 35).

    Examples
    --------
    A condition that favours the first listed position against a uniform base (simulated, 3 clusters of 4 tools):

    >>> import numpy as np
    >>> import toolbias_stats as tbs
    >>> from toolbias_stats.experiments import simulate_conditions
    >>> pref = np.ones((3, 4))
    >>> log = simulate_conditions({"base": (pref, None), "first_wins": (pref, [4, 1, 1, 1])}, n_queries=20, rng=0)
    >>> res = tbs.selection_shift(log, between="condition", base="base", n_resamples=200, rng=1)
    >>> s = res.groups[0].shift_pos
    >>> s.metric, round(s.mean_over_clusters, 3), s.n_clusters, s.null_method
    ('shift_pos', 0.283, 3, 'permute valid choices within query and list')
    >>> s.ci.low < s.mean_over_clusters < s.ci.high, s.p_value < 0.01
    (True, True)
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
    note: str = ""

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
            "note": self.note,
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
        Two-sided permutation p-value of "no change" (valid choices dealt within query; the distance from the
        permutation law's centre, which is not 0 when the two levels' plug-in biases differ).
    p_adjusted, p_adjusted_bh : float
    standard_error : float
    bootstrap_distribution : numpy.ndarray
    corrected : float
        Bias-corrected change: the difference of the two levels' calibrated deltas
        (:func:`~toolbias_stats.calibrated_mean_tv` of each level's valid choices, runs pooled).
    corrected_ci : ConfidenceInterval
        MOVER interval of that difference (Zou & Donner 2008) from the two calibrated intervals: it follows the
        plug-in kink of a level without effect, which the percentile ``ci`` does not (issue 35).
    note : str
        Why no interval is given (empty when one is): a level with valid choices on fewer than
        :data:`MIN_UNITS` queries of a compared cluster.

    Examples
    --------
    >>> import numpy as np
    >>> import toolbias_stats as tbs
    >>> from toolbias_stats.experiments import simulate_conditions
    >>> pref = np.ones((3, 4))
    >>> log = simulate_conditions({"base": (pref, None), "first_wins": (pref, [4, 1, 1, 1])}, n_queries=20, rng=0)
    >>> res = tbs.selection_shift(log, between="condition", base="base", n_resamples=200, rng=1)
    >>> c = res.groups[0].change["delta_pos"]
    >>> round(c.base_value, 3), round(c.value, 3), round(c.estimate, 3), round(c.normalised_estimate, 3)
    (0.054, 0.267, 0.212, 0.283)
    >>> c.to_dict()["ci"] == [c.ci.low, c.ci.high]
    True
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
    corrected: float = np.nan
    corrected_ci: ConfidenceInterval = _NAN_CI
    note: str = ""

    def to_dict(self) -> dict:
        return {"base_value": _json_num(self.base_value), "value": _json_num(self.value),
                "estimate": _json_num(self.estimate), "ci": [_json_num(x) for x in self.ci],
                "normalised_estimate": _json_num(self.normalised_estimate),
                "normalised_ci": [_json_num(x) for x in self.normalised_ci],
                "p_value": _json_num(self.p_value), "p_adjusted": _json_num(self.p_adjusted),
                "p_adjusted_bh": _json_num(self.p_adjusted_bh), "standard_error": _json_num(self.standard_error),
                "corrected": _json_num(self.corrected), "corrected_ci": [_json_num(x) for x in self.corrected_ci],
                "note": self.note}


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

    Examples
    --------
    >>> import numpy as np
    >>> import toolbias_stats as tbs
    >>> from toolbias_stats.experiments import simulate_conditions
    >>> pref = np.ones((3, 4))
    >>> log = simulate_conditions({"base": (pref, None), "first_wins": (pref, [4, 1, 1, 1])}, n_queries=20, rng=0)
    >>> res = tbs.selection_shift(log, between="condition", base="base", n_resamples=200, rng=1)
    >>> g = res.groups[0]
    >>> g.keys, g.base, g.pairing, g.n_clusters
    ({'model': 'SIMULATED', 'condition': 'first_wins'}, 'base', 'paired', 3)
    >>> g.rows
    {'base': {'attempts': 240, 'valid': 240}, 'level': {'attempts': 240, 'valid': 240}}
    >>> sorted(g.change), len(g.tools)
    (['delta_api', 'delta_model', 'delta_pos'], 12)
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

    def to_dict(self, trend: TrendResult | None = None) -> dict[str, Any]:
        """The group's object of ``toolbias-stats shift --json`` (strict JSON: NaN becomes null).

        Parameters
        ----------
        trend : TrendResult, optional
            Added as ``"trend"`` (slopes of a numeric ``between`` column).

        Returns
        -------
        dict
        """
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

    Examples
    --------
    A temperature sweep whose position preference grows with the temperature (simulated):

    >>> import numpy as np
    >>> import toolbias_stats as tbs
    >>> from toolbias_stats.experiments import simulate_conditions
    >>> pref = np.ones((3, 4))
    >>> log = simulate_conditions({0.0: (pref, None), 0.5: (pref, [2, 1, 1, 1]), 1.0: (pref, [4, 1, 1, 1])},
    ...                           n_queries=10, column="temperature", rng=0)
    >>> res = tbs.selection_shift(log, between="temperature", base=0.0, n_resamples=100, n_permutations=100, rng=1)
    >>> res.trends[0].to_frame().round(3)
           model       metric  slope  ci_low  ci_high  n_clusters
    0  SIMULATED    delta_api -0.017  -0.079    0.038           3
    1  SIMULATED    delta_pos  0.158   0.033    0.225           3
    2  SIMULATED  delta_model  0.071  -0.004    0.113           3
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

    Examples
    --------
    >>> import numpy as np
    >>> import toolbias_stats as tbs
    >>> from toolbias_stats.experiments import simulate_conditions
    >>> pref = np.ones((3, 4))
    >>> log = simulate_conditions({"base": (pref, None), "first_wins": (pref, [4, 1, 1, 1])}, n_queries=20, rng=0)
    >>> res = tbs.selection_shift(log, between="condition", base="base", n_resamples=200, rng=1)
    >>> res.to_frame()[["condition", "metric", "estimate", "p_value"]].round(3)
        condition       metric  estimate  p_value
    0  first_wins    shift_api     0.112    0.441
    1  first_wins    shift_pos     0.283    0.000
    2  first_wins    delta_api    -0.046    0.055
    3  first_wins    delta_pos     0.212    0.000
    4  first_wins  delta_model     0.083    0.000
    >>> res.clusters_frame().shape[0], res.tools_frame().shape[0], res.to_dict()["between"]
    (3, 12, 'condition')
    >>> res.design
    'unit query_id (60 units); replicates: run; factors: model, condition; strata: cluster_id, n_candidates'
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
    #: the study design the comparison honoured, with its number of units (issue 35; ``DeclaredDesign.describe``)
    design: str = ""

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
                             "corrected": c.corrected, "corrected_ci_low": c.corrected_ci.low,
                             "corrected_ci_high": c.corrected_ci.high,
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
            "design": self.design,
        }
