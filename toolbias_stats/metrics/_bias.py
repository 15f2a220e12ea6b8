"""Tool-selection bias (delta_API, delta_pos, delta_model) per group, with honest uncertainty."""

from __future__ import annotations

import functools
import os
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, cast, overload

import numpy as np
import pandas as pd
from scipy import special

from .._display import ReprHTMLMixin
from .._resampling import (
    BOOTSTRAP_CI_METHODS,
    BOOTSTRAP_WEIGHTS,
    ConfidenceInterval,
    bca_bias_z0,
    bca_ci,
    percentile_ci,
    resampled_counts,
)
from .._schema import STATUSES
from .._validation import check_by, check_choice, check_confidence_level, check_n_resamples, check_rng
from ..exceptions import DegenerateDataWarning, ExcludedRowsWarning, SmallSampleWarning
from ..io._counts import QueryArrays, position_columns, tool_columns
from ..io._load import load_counts
from ._calibrated import FULL_LEVEL_ATTEMPTS, CalibratedTV, _upper_tail, calibrated_mean_tv
from ._tv import expected_tv_uniform, rates_from_counts
from ._vectorised import (
    centred_null_tv,
    jackknife_means,
    leave_one_out_tv,
    percentile_cis,
    stacked,
    tv_runs,
    uniform_expected_tv,
    uniform_null_means,
)

if TYPE_CHECKING:
    from ..io import SelectionCounts, SelectionLog, Study

__all__ = ["selection_bias", "BiasResult", "GroupBias", "ClusterBias", "TVResult", "INTERVAL_QUERY",
           "INTERVAL_MULTINOMIAL", "POSITIONS"]

_NAN_CI = ConfidenceInterval(np.nan, np.nan)
METRICS = ("delta_api", "delta_pos", "delta_model")
#: ``interval_method`` of a cluster whose queries are resampled (the default).
INTERVAL_QUERY = "query bootstrap"
#: ``interval_method`` of a cluster with a single (pseudo-)query, e.g. an aggregated table of counts: the
#: replicates are drawn from the observed distribution with the observed n, which assumes independent attempts.
INTERVAL_MULTINOMIAL = "multinomial (attempts assumed independent)"
#: ``interval_method`` when no interval is computed (``n_resamples=0``).
INTERVAL_NONE = "none (n_resamples=0)"
#: What ``corrected_ci`` is (``corrected_label`` in the JSON).
CORRECTED_LABEL = ("interval for the true delta: bias-corrected estimate with its calibrated (test-inversion) "
                   "interval; the interval to report")
#: What the plug-in's bootstrap intervals are (``ci_label`` in the JSON).
PLUGIN_CI_LABEL = ("plug-in intervals: bootstrap intervals of the plug-in mean_over_runs (ci) and pooled (ci_pooled); "
                   "they cover the true delta only far from uniformity, and near uniformity neither the true delta "
                   "nor E[plug-in] (docs/guide/metrics.md); not shown in the tables: report corrected_ci")
#: ``p_value_method`` of the test of "no bias" that keeps the resampling unit (the default whenever queries are
#: resampled): the law of the statistic under a fair chooser is that of the centred query-bootstrap replicates.
P_QUERY = "query bootstrap (centred replicates: a fair chooser with the observed query heterogeneity)"
#: ``p_value_method`` of the uniform multinomial chooser (independent attempts): the only test for aggregated logs.
P_MULTINOMIAL = "uniform multinomial chooser (attempts assumed independent)"
#: ``p_value_method`` where every cluster has one valid attempt per query (issue 35): the attempts are then independent
#: draws of the population's choice distribution whatever the queries' preferences, the uniform multinomial chooser is
#: the exact law under "no bias", and the centred query bootstrap (a tool never chosen never varies) is too narrow.
P_EXACT = ("exact multinomial reference, ties broken by the squared deviations (one valid attempt per query: attempts "
           "independent; the centred query bootstrap's null is too narrow there)")
#: How the discrete references (:data:`P_EXACT`, :data:`P_RELABEL`) order the outcomes (issue 35): by the statistic,
#: and among equal values by the mean over clusters of ``sum_i (p_i - 1/K)^2`` (larger = further from uniform). An
#: ordinary Monte-Carlo p-value of this finer order keeps the level (the plain one of the TV alone is conservative,
#: 2.4-3.4% at 5%; the mid-p of the TV exceeded it, 7.2-7.4%).
TIE_BREAK = "ties broken by the squared deviations"
#: Pseudo-counts per category of the rates whose multinomial draws give the calibrated interval's errors in a cluster
#: with one valid attempt per query (Jeffreys' 1/2): the query bootstrap draws from the observed rates, where a tool
#: never chosen has no variance (5 clusters x 10 attempts, fair chooser: 90% coverage; with these 96%).
SINGLE_PSEUDO = 0.5
#: Valid attempts per cluster below which the calibrated upper bound inverts at a smaller one-sided level, which
#: ``corrected_method`` says (issue 35: at the nominal level 10 attempts missed delta 0.25 from above in 7.6% of
#: studies; at 0.3 of it, 2.4%). The same number as ``_calibrated.FULL_LEVEL_ATTEMPTS``.
FEW_ATTEMPTS = FULL_LEVEL_ATTEMPTS
#: The smallest number of valid attempts per cluster at which the calibrated interval was checked to hold its
#: targets (5 clusters x 10 attempts, docs/guide/metrics.md); ``corrected_method`` notes clusters with fewer.
SMALLEST_CHECKED = 10
#: Valid attempts per tool below which a cluster whose queries have several attempts each takes the tool-relabelling
#: reference: the centred query bootstrap's null is too narrow there (issue 35: K = 20, 20 queries x 4 attempts, fair
#: on average with query favourites: 17.6% rejections at 5%) and the multinomial one ignores the correlation (47%).
SPARSE_PER_TOOL = 5
#: ``p_value_method`` of such a cluster: every query's counts permuted over the tools (independently per query and
#: replicate) is a fair chooser with the observed query heterogeneity, exact when the queries' preferences are
#: exchangeable over the tools.
P_RELABEL = ("tool-relabelling reference, ties broken by the squared deviations (each query's counts permuted over "
             "the tools: a fair chooser with the observed query heterogeneity)")
#: The note on such clusters in a group's ``p_value_method``.
NOTE_SPARSE = ("clusters with fewer than {n} valid attempts per tool and several attempts per query: " + P_RELABEL +
               " (the centred query bootstrap's null is too narrow there)")
#: What delta_pos is computed on (issue 20): the rank of the chosen tool among its cluster's tools as shown
#: (default; the cluster's uniform reference), or its position in the whole list offered (see docs/schema.md).
POSITIONS = ("cluster_rank", "list")


@dataclass(frozen=True)
class TVResult(ReprHTMLMixin):
    """One TV bias metric (delta_API, delta_pos or delta_model) with its uncertainty.

    Attributes
    ----------
    metric : str
        ``"delta_api"``, ``"delta_pos"`` or ``"delta_model"``.
    mean_over_runs : float
        The paper's estimate: per run the mean over clusters of the plug-in TV, then the mean over runs.
    sd_over_runs : float
        Population standard deviation (ddof 0) over runs of the per-run values (the paper's "±").
    pooled : float
        Mean over clusters of the plug-in TV of all runs' rows together.
    n_runs : int
    ci : ConfidenceInterval
        Plug-in interval: bootstrap CI of ``mean_over_runs`` (``ci_method``; every replicate recomputes that
        statistic). It covers the true delta only far from uniformity; near uniformity it covers neither the true
        delta nor E[plug-in] (issue 35: fair chooser, K = 5 / 7, it excludes its own estimate in 60% / 89% of
        studies), so the tables and the report do not show it: report ``corrected_ci`` (:attr:`interval`). BCa only
        where its bias correction is not degenerate (see ``ci_note``).
    ci_method : str
    ci_percentile : ConfidenceInterval
        Percentile CI of ``mean_over_runs`` (shown alongside BCa).
    ci_pooled : ConfidenceInterval
        Percentile CI of ``pooled``.
    corrected : float
        Bias-corrected estimate of the true cluster-averaged TV (plug-in TV is biased upward).
    corrected_ci : ConfidenceInterval
        Calibrated CI for the true cluster-averaged TV (see :func:`calibrated_mean_tv`); this is the
        interval whose coverage is checked by simulation in the user guide (docs/guide/metrics.md).
    corrected_method : str
    null_expected : float
        Exact expected ``mean_over_runs`` of a uniform chooser with the same numbers of valid choices.
    null_expected_pooled : float
        The same for ``pooled``.
    p_value : float
        p-value of "no bias" for ``mean_over_runs`` (``p_value_method`` says which test): with per-query rows,
        a fair chooser with the observed query heterogeneity (the centred query-bootstrap replicates, scaled by
        ``sqrt(Q / (Q - 1))``), which keeps its level when queries have favourite tools; in clusters with one valid
        attempt per query the exact uniform multinomial reference (ties of the TV broken by the squared deviations;
        ``P_EXACT``: attempts are independent
        there and a tool never chosen has no bootstrap variance, issue 35); for aggregated logs (no per-query rows)
        or ``n_resamples=0`` the uniform multinomial chooser (independent attempts).
    p_value_method : str
    p_value_multinomial : float
        The uniform multinomial chooser's p-value (``n_null`` draws); too small when queries differ.
    ci_note : str
        Why ``ci`` is the percentile interval although BCa was asked for (degenerate bias correction near
        uniformity, or no jackknife over queries); empty otherwise.
    normalised : float
        ``mean_over_runs`` of TV / (1 - 1/K) (1 = degenerate chooser).
    normalised_pooled : float
    normalised_ci : ConfidenceInterval
        Percentile CI of ``normalised`` (same replicates).
    standard_error : float
        Bootstrap standard error of ``mean_over_runs``.
    bootstrap_distribution : numpy.ndarray
        The replicates of ``mean_over_runs`` (empty when ``n_resamples == 0``).
    confidence_level : float

    Examples
    --------
    >>> import toolbias_stats as tbs
    >>> from toolbias_stats.simulate import simulate_selection_log
    >>> sim = simulate_selection_log(n_clusters=2, n_queries=10, position_probs=[0.6, 0.1, 0.1, 0.1, 0.1], rng=0)
    >>> res = tbs.selection_bias(sim.log, n_resamples=100, rng=1)
    >>> d = res.groups[0].delta_pos          # a TVResult
    >>> d.metric, d.bootstrap_distribution.shape, d.interval == d.corrected_ci
    ('delta_pos', (100,), True)
    """

    metric: str
    mean_over_runs: float
    sd_over_runs: float
    pooled: float
    n_runs: int
    ci: ConfidenceInterval = _NAN_CI
    ci_method: str = "none"
    ci_percentile: ConfidenceInterval = _NAN_CI
    ci_pooled: ConfidenceInterval = _NAN_CI
    corrected: float = np.nan
    corrected_ci: ConfidenceInterval = _NAN_CI
    corrected_method: str = "none"
    null_expected: float = np.nan
    null_expected_pooled: float = np.nan
    p_value: float = np.nan
    normalised: float = np.nan
    normalised_pooled: float = np.nan
    normalised_ci: ConfidenceInterval = _NAN_CI
    standard_error: float = np.nan
    bootstrap_distribution: np.ndarray = field(default_factory=lambda: np.empty(0), repr=False)
    confidence_level: float = 0.95
    p_value_method: str = "none"
    p_value_multinomial: float = np.nan
    ci_note: str = ""

    @property
    def interval(self) -> ConfidenceInterval:
        """The interval to report for the true delta: the calibrated ``corrected_ci`` (see the class notes)."""
        return self.corrected_ci

    def to_frame(self) -> pd.DataFrame:
        """One row (the columns of :meth:`BiasResult.to_frame` for this metric), unrounded."""
        return pd.DataFrame([{"metric": self.metric, **_tv_row(self)}])

    def _headline(self):
        cols = ["metric", "corrected", "corrected_ci_low", "corrected_ci_high", "mean_over_runs", "null_expected",
                "p_value"]
        return f"TVResult ({self.metric})", self.to_frame()[cols], CORRECTED_LABEL

    def to_dict(self) -> dict:
        """JSON-ready dict (the ``delta_*`` objects of ``toolbias-stats bias --json``).

        The interval for the true delta comes first (``corrected``, ``corrected_ci``); the plug-in's bootstrap
        intervals (``ci``, ``ci_percentile``, ``ci_pooled``) follow with a ``ci_label`` saying what they cover.
        """
        out = {
            "corrected": self.corrected,
            "corrected_ci": [_json_num(x) for x in self.corrected_ci],
            "corrected_method": self.corrected_method,
            "corrected_label": CORRECTED_LABEL,
            "mean_over_runs": self.mean_over_runs,
            "sd_over_runs": self.sd_over_runs,
            "pooled": self.pooled,
            "n_runs": self.n_runs,
            "ci": [_json_num(x) for x in self.ci],
            "ci_method": self.ci_method,
            "ci_percentile": [_json_num(x) for x in self.ci_percentile],
            "ci_pooled": [_json_num(x) for x in self.ci_pooled],
            "ci_label": PLUGIN_CI_LABEL,
            "ci_note": self.ci_note,
            "null_expected": self.null_expected,
            "null_expected_pooled": self.null_expected_pooled,
            "p_value": self.p_value,
            "p_value_method": self.p_value_method,
            "p_value_multinomial": self.p_value_multinomial,
            "normalised": self.normalised,
            "normalised_pooled": self.normalised_pooled,
            "normalised_ci": [_json_num(x) for x in self.normalised_ci],
            "standard_error": self.standard_error,
            "confidence_level": self.confidence_level,
        }
        return {k: _json_num(v) for k, v in out.items()}


class _LazyFrame:
    """A dataclass field holding a DataFrame given as it is or as a function making it on first use."""

    def __set_name__(self, owner, name):
        self._slot = "_lazy_" + name

    @overload
    def __get__(self, obj: None, objtype: Any = None) -> None: ...

    @overload
    def __get__(self, obj: object, objtype: Any = None) -> pd.DataFrame: ...

    def __get__(self, obj, objtype=None):
        if obj is None:
            return None
        value = obj.__dict__[self._slot]
        if callable(value):
            value = value()
            obj.__dict__[self._slot] = value
        return value

    def __set__(self, obj, value: pd.DataFrame | Callable[[], pd.DataFrame] | None) -> None:
        obj.__dict__[self._slot] = value


@dataclass(frozen=True)
class ClusterBias:
    """Bias in one cluster for one group.

    Attributes
    ----------
    cluster : str
    K : int
        Tools in the cluster (catalog).
    n_used : int
        Rows with a valid choice (all runs).
    n_position_known : int
        Valid rows whose chosen position is known.
    tools : list of str
        Tool ids in catalog order.
    counts : numpy.ndarray
        Choices per tool (all runs), catalog order.
    rates : dict
        ``{tool_id: selection rate}``.
    position_counts, position_rates : numpy.ndarray or None
        Choices / rates per position 1..K (None when positions are unknown).
    delta_api, delta_pos : TVResult
        The cluster's own metrics (``delta_pos`` None when positions are unknown).
    rate_table : pandas.DataFrame
        Per tool: count, rate, Wilson CI and query-bootstrap percentile CI.

    Examples
    --------
    >>> import toolbias_stats as tbs
    >>> from toolbias_stats.simulate import simulate_selection_log
    >>> sim = simulate_selection_log(n_clusters=2, n_queries=10, position_probs=[0.6, 0.1, 0.1, 0.1, 0.1], rng=0)
    >>> res = tbs.selection_bias(sim.log, n_resamples=100, rng=1)
    >>> c = res.groups[0].clusters[0]          # a ClusterBias
    >>> c.K, c.n_used, list(c.rate_table.columns[:4])
    (5, 50, ['cluster', 'tool_id', 'api_index', 'count'])
    """

    cluster: str
    K: int
    n_used: int
    n_position_known: int
    tools: list
    counts: np.ndarray
    rates: dict
    position_counts: np.ndarray | None
    position_rates: np.ndarray | None
    delta_api: TVResult
    delta_pos: TVResult | None
    #: built on first use (a frame per cluster costs more than the cluster's statistics)
    rate_table: _LazyFrame = _LazyFrame()
    interval_method: str = INTERVAL_QUERY
    #: labels of ``position_counts``: ranks 1..K (``position="cluster_rank"``) or the list positions at which
    #: the cluster's tools were shown (``position="list"``); None when positions are unknown
    positions: list | None = None
    #: why ``delta_pos`` is None for this cluster (None when it is computed)
    position_note: str | None = None

    def to_dict(self) -> dict:
        return {
            "cluster": self.cluster,
            "K": self.K,
            "n_used": self.n_used,
            "interval_method": self.interval_method,
            "n_position_known": self.n_position_known,
            "rates": {t: _json_num(r) for t, r in self.rates.items()},
            "positions": self.positions,
            "position_note": self.position_note,
            "position_rates": None if self.position_rates is None else [_json_num(r) for r in self.position_rates],
            "delta_api": self.delta_api.to_dict(),
            "delta_pos": None if self.delta_pos is None else self.delta_pos.to_dict(),
        }


@dataclass(frozen=True)
class GroupBias:
    """All bias metrics for one group (e.g. one model).

    Attributes
    ----------
    keys : dict
        Values of the ``by`` columns.
    rows : dict
        ``{"total": n, "used": n, "excluded": {status: n}}``: attempts. For an aggregated log (a
        ``count`` column) these are sums of ``count`` and ``rows["table_rows"]`` has the same three
        entries counted in table rows.
    delta_api, delta_pos, delta_model : TVResult
        Cluster-averaged metrics (``delta_pos``/``delta_model`` None when no position is known).
    clusters : list of ClusterBias
    interval_method : str
        How the intervals were obtained: ``"query bootstrap"`` (queries resampled), ``"multinomial
        (attempts assumed independent)"`` (no cluster has two queries, e.g. a table of counts: a
        query bootstrap is impossible), ``"mixed: ..."`` naming how many clusters used each, or
        ``"none (n_resamples=0)"``.

    Examples
    --------
    >>> import toolbias_stats as tbs
    >>> from toolbias_stats.simulate import simulate_selection_log
    >>> sim = simulate_selection_log(n_clusters=2, n_queries=10, position_probs=[0.6, 0.1, 0.1, 0.1, 0.1], rng=0)
    >>> res = tbs.selection_bias(sim.log, n_resamples=100, rng=1)
    >>> g = res.groups[0]                      # a GroupBias
    >>> g.keys, g.rows["total"], len(g.clusters), g.interval_method
    ({'model': 'simulated'}, 100, 2, 'query bootstrap')
    """

    keys: dict
    rows: dict
    delta_api: TVResult
    delta_pos: TVResult | None
    delta_model: TVResult | None
    clusters: list
    interval_method: str = INTERVAL_QUERY

    @property
    def position_note(self) -> str | None:
        """Why delta_pos is missing for some (or all) clusters of this group; None when it is computed for all."""
        notes = [f"{c.cluster}: {c.position_note}" for c in self.clusters if c.position_note]
        return "; ".join(notes) if notes else None

    def to_dict(self) -> dict:
        return {
            "keys": {k: _json_num(v) for k, v in self.keys.items()},
            "rows": self.rows,
            "interval_method": self.interval_method,
            "position_note": self.position_note,
            **{m: (None if getattr(self, m) is None else getattr(self, m).to_dict()) for m in METRICS},
            "clusters": [c.to_dict() for c in self.clusters],
        }


@dataclass(frozen=True)
class BiasResult(ReprHTMLMixin):
    """Result of :func:`selection_bias`: one :class:`GroupBias` per group, plus the call's settings.

    Use :meth:`to_frame` (one row per group x metric), :meth:`clusters_frame` (group x cluster x
    metric), :meth:`rates_frame` (group x cluster x tool) or :meth:`to_dict` (JSON).

    Examples
    --------
    >>> import toolbias_stats as tbs
    >>> from toolbias_stats.simulate import simulate_selection_log
    >>> sim = simulate_selection_log(n_clusters=2, n_queries=10, position_probs=[0.6, 0.1, 0.1, 0.1, 0.1], rng=0)
    >>> res = tbs.selection_bias(sim.log, n_resamples=100, rng=1)
    >>> res.to_frame().shape, res.clusters_frame().shape, res.rates_frame().shape
    ((3, 24), (4, 24), (10, 12))
    """

    groups: list
    by: list
    n_resamples: int
    n_null: int
    confidence_level: float
    cluster_corrected: bool
    ci_method: str
    resample: str
    seed: object
    warnings: list = field(default_factory=list)
    bootstrap: str = "multinomial"
    #: what delta_pos (and delta_model) are computed on: ``"cluster_rank"`` or ``"list"`` (see :func:`selection_bias`)
    position: str = "cluster_rank"

    @property
    def interval_method(self) -> str:
        """How the intervals were obtained over all groups (see :attr:`GroupBias.interval_method`)."""
        methods = sorted({g.interval_method for g in self.groups})
        return methods[0] if len(methods) == 1 else "; ".join(methods) if methods else INTERVAL_QUERY

    def _headline(self):
        # the plug-in's bootstrap interval is not shown (issue 35: near uniformity it covers neither the true delta
        # nor E[plug-in]); it stays in to_frame / to_dict as ci_low / ci_high, after the p-values
        cols = list(self.by) + ["metric", "corrected", "corrected_ci_low", "corrected_ci_high", "mean_over_runs",
                                "null_expected", "p_value", "n_used", "n_excluded"]
        frame = self.to_frame()
        kind = "query-bootstrap" if self.interval_method in (INTERVAL_QUERY, INTERVAL_NONE) else self.interval_method
        title = (f"BiasResult: {len(self.groups)} group(s) by {self.by or 'nothing'}; {self.n_resamples} "
                 f"{kind} replicates, {self.confidence_level:.0%} intervals; delta_pos on {self.position_label}")
        return title, frame[[c for c in cols if c in frame.columns]], None

    @property
    def position_label(self) -> str:
        """One phrase for outputs: what delta_pos is computed on."""
        return POSITION_LABELS.get(self.position, self.position)

    def to_frame(self) -> pd.DataFrame:
        """Tidy, unrounded table: one row per group and metric.

        ``position`` says what delta_pos (and delta_model) are computed on; ``position_note`` why delta_pos is
        missing for some clusters of the group (None when it is computed for all)."""
        rows = []
        for g in self.groups:
            for m in METRICS:
                r = getattr(g, m)
                if r is None:
                    continue
                rows.append({**g.keys, "metric": m, **_tv_row(r), "n_used": g.rows["used"],
                             "n_excluded": g.rows["total"] - g.rows["used"], "position": self.position,
                             "position_note": g.position_note})
        return pd.DataFrame(rows)

    def clusters_frame(self) -> pd.DataFrame:
        """Tidy table: one row per group, cluster and metric (delta_api, delta_pos)."""
        rows = []
        for g in self.groups:
            for c in g.clusters:
                for m in ("delta_api", "delta_pos"):
                    r = getattr(c, m)
                    if r is None:
                        continue
                    rows.append({**g.keys, "cluster": c.cluster, "K": c.K, "metric": m, **_tv_row(r),
                                 "n_used": c.n_used, "position": self.position})
        return pd.DataFrame(rows)

    def rates_frame(self) -> pd.DataFrame:
        """Selection rate per tool with Wilson and query-bootstrap CIs: one row per group, cluster and tool."""
        parts = []
        for g in self.groups:
            for c in g.clusters:
                t = c.rate_table.copy()
                for i, (k, v) in enumerate(g.keys.items()):
                    t.insert(i, k, v)
                parts.append(t)
        return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()

    def to_dict(self) -> dict:
        """The documented JSON object of ``toolbias-stats bias --json``."""
        return {
            "by": self.by,
            "n_resamples": self.n_resamples,
            "n_null": self.n_null,
            "cluster_corrected": self.cluster_corrected,
            "confidence_level": self.confidence_level,
            "ci_method": self.ci_method,
            "resample": self.resample,
            "interval_method": self.interval_method,
            "bootstrap": self.bootstrap,
            "position": self.position,
            "seed": self.seed if isinstance(self.seed, (int, type(None))) else repr(self.seed),
            "groups": [g.to_dict() for g in self.groups],
            "warnings": [_json_num(x) for x in self.warnings],
        }


def selection_bias(log: SelectionLog | SelectionCounts | Study | str | os.PathLike, *,
                   by: str | Sequence[str] = ("model",), n_resamples: int = 2000, confidence_level: float = 0.95,
                   ci_method: Literal["bca", "percentile"] = "bca", n_null: int = 2000, cluster_corrected: bool = False,
                   bootstrap: Literal["multinomial", "poisson"] = "multinomial",
                   rng: np.random.Generator | int | None = None, progress: bool = False,
                   position: Literal["cluster_rank", "list"] = "cluster_rank") -> BiasResult:
    """Cluster-level API and position bias per group, with bootstrap CIs and a uniform-chooser reference.

    Parameters
    ----------
    log : SelectionLog, SelectionCounts, Study or path to a manifest
        The attempts, or their counts (every statistic depends on the rows only through
        :class:`~toolbias_stats.SelectionCounts`; a log is counted first). Only attempts with
        ``status == "ok"`` enter the rates, the others are counted.
    by : str or sequence of str, default ``("model",)``
        Grouping columns: any design column (``model``, ``run``, ``condition``, extra manifest keys, numeric
        ones included). ``[]`` pools everything.
    n_resamples : int, default 2000
        Bootstrap replicates; 0 skips every interval and the bias correction.
    confidence_level : float, default 0.95
    ci_method : {"bca", "percentile"}, default "bca"
        Interval reported as ``ci`` for ``mean_over_runs`` (the other is in ``ci_percentile``).
    n_null : int, default 2000
        Monte-Carlo draws of the uniform multinomial chooser for ``p_value_multinomial`` (and for ``p_value``
        where no query bootstrap is possible: aggregated counts, or ``n_resamples=0``); 0 skips it. Where queries
        are resampled, ``p_value`` uses the ``n_resamples`` replicates (a fair chooser with the observed query
        heterogeneity).
    cluster_corrected : bool, default False
        Also compute the bias-corrected value and calibrated interval of every single cluster
        (about 7 ms per cluster and metric; the cluster-averaged ones are always computed).
    bootstrap : {"multinomial", "poisson"}, default "multinomial"
        Query weights of a replicate: ``"multinomial"`` draws Q queries with replacement (the
        classical bootstrap); ``"poisson"`` gives every query an independent Poisson(1) weight
        (the streaming / distributed bootstrap; no query count is fixed). Weights are generated in
        chunks of replicates, so memory stays bounded whatever the number of queries.
    rng : None, int or numpy.random.Generator
        The only source of randomness; the same seed gives identical output.
    progress : bool, default False
        Show a progress bar over groups on stderr (the CLI turns it on for terminals only).
    position : {"cluster_rank", "list"}, default "cluster_rank"
        What delta_pos is computed on when a request offered other tools besides the cluster's (issue 20).
        ``"cluster_rank"``: the rank of the chosen tool among its cluster's tools as shown (``chosen_rank``),
        against the uniform over those K ranks -- what a uniform chooser among the cluster's tools gives.
        ``"list"``: the position in the whole list offered (``chosen_position``), against the uniform over
        the list positions at which the cluster's tools were shown. That reference is one uniform distribution
        only when the cluster's tools occupy the same K list positions in every attempt (an agent's fixed tool
        layout, the cluster's block rotated in place); the statistic then equals the cluster-rank one (TV is
        invariant to relabelling the K positions) and ``ClusterBias.positions`` gives the list positions. When
        the positions vary between attempts the uniform chooser's expected distribution over list positions
        is a mixture, not a uniform, so no TV-to-uniform is defined: delta_pos is None for that cluster, with
        the reason in ``ClusterBias.position_note``. Both are identical for lists of the cluster's tools only.
        Every output states the choice (``position`` in ``to_frame``/``to_dict``).

    Returns
    -------
    BiasResult

    Warns
    -----
    ExcludedRowsWarning
        When rows without a valid choice are excluded (their counts are in ``rows``).
    DegenerateDataWarning
        When a cluster has no valid choice in a group (its TV is NaN and it is left out of the means).

    Notes
    -----
    For cluster ``c`` with ``K`` tools, ``P_API`` are the selection rates of its tools and
    ``P_pos`` those of the positions 1..K, both over rows with a valid choice;
    ``delta = TV(P, U) = 1/2 * sum_i |P_i - 1/K|`` and ``delta_model = (delta_API + delta_pos)/2``
    (BiasBusters, section 3.1). As in the paper's Table 1, ``mean_over_runs`` averages the
    per-run TV over clusters, then over runs; ``sd_over_runs`` is the population sd (ddof 0) of the
    per-run values. ``pooled`` uses all runs' rows together.

    The bootstrap resamples queries with replacement within each cluster, keeping every
    rotation and run of a query together (``resample="query"``); the same replicate is used for
    every metric, so ``delta_model`` replicates are exact averages. The plug-in TV is biased
    upward (a uniform chooser with K = 5 and 100 choices has E[TV] = 0.079), so each estimate comes
    with ``null_expected`` (exact), a ``p_value`` for "no bias", and a bias-corrected
    ``corrected`` value with its calibrated interval ``corrected_ci``: the interval to report for the true
    delta (first in ``to_dict``, ``to_frame`` and the CLI and HTML tables).

    *The test of "no bias"* respects the resampling unit: a chooser that is fair on average but whose
    queries have favourite tools makes attempts of a query correlated, and a uniform multinomial reference
    (independent attempts) then rejects far too often (24% at 5% in the audit of issue 21). ``p_value``
    compares the statistic with its law in the centred query-bootstrap replicates (TV of
    ``1/K + sqrt(Q/(Q-1)) (p* - mean p*)`` per cluster and run), i.e. a fair chooser with the observed
    heterogeneity; the multinomial p-value is kept as ``p_value_multinomial`` and is ``p_value`` only where
    it is the only choice (no per-query rows, or no bootstrap), which ``p_value_method`` says.

    *One valid attempt per query (issue 35).* Where every query of a cluster has at most one valid attempt
    (one rotation, one run), the attempts are independent draws of the population's choice distribution
    whatever the queries' preferences, so the uniform multinomial chooser is the exact law of the statistic
    under "no bias"; the centred query bootstrap is too narrow there (a tool never chosen never varies: 5
    clusters x 10 attempts, 16% rejections at 5%). Such clusters take the exact reference (Monte-Carlo draws of
    the uniform chooser with the cluster's n, combined with the other clusters' centred replicates; as the TV is
    discrete, its ties are broken by the squared deviations from uniform, which keeps the level) and their
    calibrated interval takes multinomial replicates of the attempts at the rates smoothed by 1/2 per tool;
    ``p_value_method`` and ``corrected_method`` say so. Below 25 valid attempts per cluster the calibrated upper
    bound inverts at a smaller one-sided level (0.3 of it at 10 attempts; see ``calibrated_mean_tv``).

    *Weighting.* ``delta_api`` and ``delta_pos`` are unweighted means over clusters (then over runs), as in the
    paper: every cluster counts once whatever its number of attempts or tools K (each cluster's delta_pos is
    over its own K positions). The per-cluster values, with ``K`` and ``n_used``, are in ``clusters_frame``.

    *Aggregated counts (no per-query rows).* A cluster with a single query in a group (typically an
    aggregated table with a ``count`` column and no ``query_id``, where all attempts form one
    pseudo-query) cannot be query-bootstrapped: resampling one unit reproduces the data. Its
    replicates are then drawn from the observed distribution with the observed n, per run
    (``Multinomial(n_s, p_hat_s)``; with ``bootstrap="poisson"`` every count is ``Poisson(count)``),
    which **assumes independent attempts**: when attempts of the same query are correlated the
    intervals are too narrow, and nothing in aggregated data can detect it. Tool and position counts
    are drawn independently (their joint is not in the counts). Those replicates feed the same
    percentile and calibrated (``corrected_ci``) intervals; ``ci`` is then the percentile interval
    (BCa needs a jackknife over queries). ``GroupBias.interval_method`` / ``ClusterBias.interval_method``
    and the JSON's ``interval_method`` say which kind each interval is
    (``"multinomial (attempts assumed independent)"``), and a :class:`SmallSampleWarning` is issued.
    Point estimates, null references and p-values use the counts and are exactly those of the
    expanded log (one row per attempt).

    References
    ----------
    Blankenstein et al., "BiasBusters: Uncovering and Mitigating Tool Selection Bias in LLMs", sec. 3.1, Table 1.
    Efron & Tibshirani (1993), An Introduction to the Bootstrap, ch. 13-14.

    Examples
    --------
    A simulated chooser that favours the first listed position (true δ_API = 0, δ_pos = 0.4):

    >>> import toolbias_stats as tbs
    >>> from toolbias_stats.simulate import simulate_selection_log
    >>> sim = simulate_selection_log(n_clusters=4, n_queries=20, position_probs=[0.6, 0.1, 0.1, 0.1, 0.1], rng=0)
    >>> res = tbs.selection_bias(sim.log, n_resamples=200, rng=1)
    >>> res.to_frame()[["metric", "pooled", "corrected", "corrected_ci_low", "corrected_ci_high", "p_value"]].round(3)
            metric  pooled  corrected  corrected_ci_low  corrected_ci_high  p_value
    0    delta_api   0.080      0.034             0.000              0.104    0.194
    1    delta_pos   0.368      0.364             0.302              0.421    0.005
    2  delta_model   0.224      0.204             0.153              0.249    0.005

    On the bundled BiasBusters study (105,500 attempts; a few seconds):
    ``tbs.selection_bias(tbs.read_study(tbs.datasets.path("biasbusters/study.toml")).log, by="model", rng=1)``.
    """
    counts = load_counts(log)
    confidence_level = check_confidence_level(confidence_level)
    n_resamples = check_n_resamples(n_resamples)
    n_null = check_n_resamples(n_null)
    check_choice("ci_method", ci_method, BOOTSTRAP_CI_METHODS)
    check_choice("bootstrap", bootstrap, BOOTSTRAP_WEIGHTS)
    check_choice("position", position, POSITIONS)
    by = check_by(by, counts.design_columns)
    if n_resamples and counts.level != "query":
        raise ValueError(f"the bootstrap resamples queries, so it needs query-level counts; got counts at level "
                         f"{counts.level!r} instead (count with level='query', or set n_resamples=0).")
    seed = rng if isinstance(rng, (int, type(None))) else "generator"
    gen = check_rng(rng)
    # group rows are positions in `columns`; at scale (DuckDB) the table's compact arrays, never the int64 table
    compact = counts.compact if counts.level == "query" else None
    if compact is None:
        table = counts.table.reset_index(drop=True)
        columns = _Columns(table)
        frame = table[list(dict.fromkeys([*by, "run"]))]
    else:
        columns = _Columns.of_arrays(compact)
        # the grouping columns as the table holds them; `run` (for its distinct values only) in its small type
        frame = pd.DataFrame({c: compact.key(c) if c in by else compact.keys[c] for c in dict.fromkeys([*by, "run"])})
    caught = []
    totals = counts.status_totals()
    excluded = {s: n for s, n in sorted(totals.items(), key=lambda kv: -kv[1]) if s != "ok" and n}
    if excluded:
        n_all = sum(totals.values())
        unit = "attempts (sums of `count`)" if counts.weighted else "rows"
        msg = (f"{sum(excluded.values())} of {n_all} {unit} have no valid selection and are excluded: {excluded}")
        warnings.warn(msg, ExcludedRowsWarning, stacklevel=2)
        caught.append(msg)
    # one group's rows at a time (the grouping columns only: a copy of the table per group costs memory)
    grouped = frame.groupby(by, sort=True, dropna=False) if by else [((), frame)]
    if progress:
        from tqdm.auto import tqdm

        grouped = tqdm(grouped, desc="bias (bootstrap)", unit="group", leave=False)
    slots = list_slots(counts, by) if position == "list" else None
    unknown = _order_unknown(counts)
    pool = _calibration_pool(n_resamples)
    try:
        pending = []
        for key, sub in grouped:
            key = key if isinstance(key, tuple) else (key,)
            keys = dict(zip(by, (k.item() if hasattr(k, "item") else k for k in key)))
            pos_of = None if slots is None else {c: v for (g, c), v in slots.items() if g == tuple(key)[:len(by)]}
            pending.append(_group_stage(sub, counts.catalog, keys, n_resamples, n_null, confidence_level, ci_method,
                                        gen, caught, cluster_corrected, bootstrap, pos_of, unknown, columns, pool))
        groups = [p.finish() for p in pending]
    finally:
        if pool is not None:
            pool.shutdown(cancel_futures=True)
    kinds = {g.interval_method for g in groups}
    resample = ("query" if kinds <= {INTERVAL_QUERY, INTERVAL_NONE}
                else "multinomial" if kinds == {INTERVAL_MULTINOMIAL} else "mixed")
    return BiasResult(groups=groups, by=by, n_resamples=n_resamples, n_null=n_null, cluster_corrected=cluster_corrected,
                      confidence_level=confidence_level, ci_method=ci_method, resample=resample, seed=seed,
                      warnings=caught, bootstrap=bootstrap, position=position)


# ---------------------------------------------------------------------------------------------
@dataclass
class _Target:
    """Per-query count tensors of one cluster for one target (api or pos)."""

    counts: np.ndarray  # (Q, S, K)
    k: int


@dataclass
class _GroupDraws:
    """One group's per-query tensors and bootstrap replicates, cluster by cluster (catalog order)."""

    clusters: list
    api_t: dict
    pos_t: dict
    tools_of: dict
    boot_api: dict
    boot_pos: dict
    multinomial: set
    labels: dict
    notes: dict


def _draw_group(sub, catalog, keys, n_resamples, gen, caught, bootstrap, pos_of, unknown, columns) -> _GroupDraws:
    """Tensors of every cluster of the group and their replicates, drawn from ``gen`` cluster by cluster."""
    at = sub.index.to_numpy()                          # the group's rows in `columns`
    runs = np.sort(sub["run"].unique())
    code = columns.cluster_code[at]
    present = {columns.cluster_ids[i] for i in np.unique(code[code >= 0])}
    clusters = [c for c in catalog.clusters if c in present]
    d = _GroupDraws(clusters, {}, {}, {}, {}, {}, set(), {}, {})
    code_of = {c: i for i, c in enumerate(columns.cluster_ids)}
    for c in clusters:
        part = at[code == code_of[c]]                  # table order, as a groupby by cluster keeps it
        d.api_t[c], d.pos_t[c], d.tools_of[c] = _cluster_tensors(columns, part, catalog, c, runs, caught, keys,
                                                                 stacklevel=6)
        seen = int(columns.pos[part].sum()) > 0
        d.labels[c], d.notes[c] = _positions(d.pos_t[c], pos_of, c, unknown if not seen else NOTE_LENGTHS)
        if d.labels[c] is None:
            d.pos_t[c] = None
        # Cluster-level replicate counts (R, S, K), shared by every metric of this group; the same query
        # weights serve the tool and the position counts.
        targets = [d.api_t[c].counts] + ([] if d.pos_t[c] is None else [d.pos_t[c].counts])
        if d.api_t[c].counts.shape[0] >= 2:
            reps = resampled_counts(targets, n_resamples, gen, method=bootstrap)
        else:
            # one (pseudo-)query, e.g. an aggregated table of counts: nothing to resample; draw the attempts
            d.multinomial.add(c)
            reps = [parametric_counts(t.sum(0), n_resamples, gen, method=bootstrap) for t in targets]
        d.boot_api[c] = reps[0]
        d.boot_pos[c] = None if d.pos_t[c] is None else reps[1]
    return d


def _group_stage(sub, catalog, keys, n_resamples, n_null, level, ci_method, gen, caught,
                 cluster_corrected, bootstrap, pos_of=None, unknown=None, columns=None, pool=None) -> _PendingGroup:
    """Every random draw of one group (replicates, then the null draws of each metric), in the order of the
    stream; the calibrated intervals go to ``pool`` (None: computed here). :meth:`_PendingGroup.finish` builds
    the :class:`GroupBias`."""
    if columns is None:
        columns, sub = _Columns(sub), sub.reset_index(drop=True)
    at = sub.index.to_numpy()
    rows = _rows(columns.status, at)
    if columns.table_rows is not None:   # an aggregated log: n_* are attempts (sums of count); rows_* table rows
        rows["table_rows"] = _rows(columns.table_rows, at)
    d = _draw_group(sub, catalog, keys, n_resamples, gen, caught, bootstrap, pos_of, unknown, columns)
    clusters, multinomial = d.clusters, d.multinomial
    obs_api = {c: d.api_t[c].counts.sum(0) for c in clusters}
    obs_pos = {c: (None if d.pos_t[c] is None else d.pos_t[c].counts.sum(0)) for c in clusters}
    if multinomial and n_resamples:
        msg = (f"group {keys}: {len(multinomial)} of {len(clusters)} clusters have no per-query rows (one query or "
               "an aggregated table of counts), so no query bootstrap is possible for them; their intervals are "
               f"{INTERVAL_MULTINOMIAL} (draws of the observed distribution with the observed n), and `ci` is the "
               "percentile interval")
        warnings.warn(msg, SmallSampleWarning, stacklevel=4)
        caught.append(msg)

    api = _Metric("delta_api", clusters, d.api_t, obs_api, d.boot_api, gen, n_null, level, cluster_corrected,
                  multinomial, pool)
    has_pos = [c for c in clusters if d.pos_t[c] is not None]
    pos = (_Metric("delta_pos", has_pos, d.pos_t, obs_pos, d.boot_pos, gen, n_null, level, cluster_corrected,
                   multinomial, pool) if has_pos else None)
    for m in (api, pos):
        if m is not None and np.isnan(m.per_cluster_obs).any():
            msg = f"group {keys}: clusters without a valid choice in some run are left out of the means"
            warnings.warn(msg, DegenerateDataWarning, stacklevel=4)
            caught.append(msg)
    model_cal = _Metric.model_calibration(api, pos, level, pool) if pos else None
    for c in clusters:   # the metrics hold what they need: the per-query tensors go before the next group's come
        for t in (d.api_t[c], d.pos_t[c]):
            if t is not None:
                t.counts = np.empty((0,) + t.counts.shape[1:])
    return _PendingGroup(keys, rows, d, obs_api, obs_pos, api, pos, has_pos, model_cal, n_resamples, level,
                         ci_method)


@dataclass
class _PendingGroup:
    """A group whose draws are done and whose calibrated intervals may still be computing."""

    keys: dict
    rows: dict
    draws: _GroupDraws
    obs_api: dict
    obs_pos: dict
    api: _Metric
    pos: _Metric | None
    has_pos: list
    model_cal: Any
    n_resamples: int
    level: float
    ci_method: str

    def finish(self) -> GroupBias:
        d, api, pos, level = self.draws, self.api, self.pos, self.level
        delta_api = api.result(level, self.ci_method)
        delta_pos = pos.result(level, self.ci_method) if pos else None
        delta_model = (_Metric.average(api, pos, delta_api, delta_pos, level, self.ci_method, self.model_cal)
                       if pos else None)
        cluster_results = [self._cluster(i, c) for i, c in enumerate(d.clusters)]
        interval_method = (_interval_method(len(d.clusters), len(d.multinomial)) if self.n_resamples
                           else INTERVAL_NONE)
        return GroupBias(keys=self.keys, rows=self.rows, delta_api=delta_api, delta_pos=delta_pos,
                         delta_model=delta_model, clusters=cluster_results, interval_method=interval_method)

    def _cluster(self, i, c) -> ClusterBias:
        d, level = self.draws, self.level
        counts = self.obs_api[c].sum(0)
        n_used = int(counts.sum())
        rates = rates_from_counts(counts)
        j = self.has_pos.index(c) if c in self.has_pos else None
        pcounts = None if j is None else cast(np.ndarray, self.obs_pos[c]).sum(0)
        return ClusterBias(
            cluster=c, K=d.api_t[c].k, n_used=n_used,
            n_position_known=0 if pcounts is None else int(pcounts.sum()),
            tools=d.tools_of[c], counts=counts, rates=dict(zip(d.tools_of[c], rates)),
            position_counts=pcounts, position_rates=None if pcounts is None else rates_from_counts(pcounts),
            delta_api=self.api.cluster_result(i, level),
            delta_pos=None if j is None else cast(_Metric, self.pos).cluster_result(j, level),
            rate_table=functools.partial(_rate_table, c, d.tools_of[c], counts, d.boot_api[c].sum(1), level,
                                         getattr(self.api, "units", {}).get(c)),
            interval_method=(INTERVAL_NONE if not self.n_resamples else INTERVAL_MULTINOMIAL
                             if c in d.multinomial else INTERVAL_QUERY),
            positions=d.labels[c], position_note=d.notes[c],
        )


def _rows(by_status, at) -> dict:
    """``{"total", "used", "excluded": {status: n}}`` from the rows ``at`` of a (rows, status) count matrix."""
    sums = by_status[at].sum(0, dtype=np.int64)
    status = {s: int(sums[j]) for j, s in enumerate(STATUSES)}
    return {"total": sum(status.values()), "used": status["ok"],
            "excluded": {s: n for s, n in sorted(status.items(), key=lambda kv: -kv[1]) if s != "ok" and n}}


def _interval_method(n_clusters, n_multinomial) -> str:
    if n_multinomial == 0:
        return INTERVAL_QUERY
    if n_multinomial == n_clusters:
        return INTERVAL_MULTINOMIAL
    return (f"mixed: {INTERVAL_QUERY} for {n_clusters - n_multinomial} clusters, {INTERVAL_MULTINOMIAL} for "
            f"{n_multinomial} clusters without per-query rows")


def parametric_counts(counts, n_resamples, rng, *, method="multinomial"):
    """Replicates of (S, K) counts drawn from their own proportions: the bootstrap of independent attempts.

    ``"multinomial"``: per run ``s``, ``Multinomial(n_s, counts[s] / n_s)`` (the observed n, the observed
    distribution); ``"poisson"``: every count ``Poisson(counts[s, k])`` (each attempt weighted Poisson(1), the
    attempt-level analogue of the Poisson query bootstrap). Returns an array of shape (R, S, K).
    """
    counts = np.asarray(counts, dtype=np.int64)
    if n_resamples == 0:
        return np.zeros((0,) + counts.shape)
    if method == "poisson":
        return rng.poisson(counts, size=(n_resamples,) + counts.shape).astype(float)
    n = counts.sum(-1)
    k = counts.shape[-1]
    p = np.where(n[:, None] > 0, counts / np.maximum(n, 1)[:, None], 1.0 / k)
    return rng.multinomial(n, p, size=(n_resamples, counts.shape[0])).astype(float)


def _tensors(part, catalog, cluster, runs, caught, keys):
    """Per-query count tensors (Q, S, K) for the chosen tool and the chosen position, from count rows."""
    return _cluster_tensors(_Columns(part), np.arange(len(part)), catalog, cluster, runs, caught, keys, stacklevel=6)


class _Columns:
    """The count table's columns that the bias reads, as numpy arrays converted once (selecting DataFrame columns
    group by group and cluster by cluster costs more than the arithmetic)."""

    query: np.ndarray
    cluster_code: np.ndarray
    cluster_ids: list
    run: np.ndarray
    n_candidates: np.ndarray
    _tool_at: dict
    tool: np.ndarray
    pos: np.ndarray
    status: np.ndarray
    table_rows: np.ndarray | None

    def __init__(self, table: pd.DataFrame | None):
        if table is None:
            return
        # queries in sorted order (missing: -1): sorting a subset keeps this order, so the codes of a cluster's rows
        # rank its queries as pd.factorize(part, sort=True) does
        self.query, _ = pd.factorize(table["query_id"], sort=True)
        self.cluster_code, ids = pd.factorize(table["cluster_id"])
        self.cluster_ids = list(ids)
        self.run = table["run"].to_numpy()
        self.n_candidates = table["n_candidates"].to_numpy()
        self._tool_at = {c: i for i, c in enumerate(c for c in table.columns if c.startswith("tool_"))}
        self.tool = table[list(self._tool_at)].to_numpy()
        self.pos = table[[c for c in table.columns if c.startswith("pos_")]].to_numpy()
        self.status = table[[f"n_{s}" for s in STATUSES]].to_numpy()
        self.table_rows = (table[[f"rows_{s}" for s in STATUSES]].to_numpy() if "rows_ok" in table.columns
                           else None)

    @classmethod
    def of_arrays(cls, qa: QueryArrays) -> _Columns:
        """The same columns from an engine's compact arrays (integer counts stay in their small type)."""
        self = cls(None)
        # the categories are sorted, so the codes rank the queries as the table's factorisation does
        self.query = np.asarray(qa.keys["query_id"].codes)
        self.cluster_code = np.asarray(qa.keys["cluster_id"].codes)
        self.cluster_ids = list(qa.keys["cluster_id"].categories)
        self.run = qa.keys["run"]
        self.n_candidates = qa.keys["n_candidates"]
        self._tool_at = {c: i for i, c in enumerate(tool_columns(qa.k_max))}
        self.tool = qa.matrix(tool_columns(qa.k_max))
        self.pos = qa.matrix(position_columns(qa.k_max))
        self.status = qa.matrix([f"n_{s}" for s in STATUSES])
        self.table_rows = None
        return self

    def tools(self, rows, k):
        """Counts of ``tool_1 .. tool_k`` in ``rows`` (float)."""
        return self.tool[np.ix_(rows, [self._tool_at[c] for c in tool_columns(k)])].astype(float)


def _cluster_tensors(columns: _Columns, rows, catalog, cluster, runs, caught, keys, stacklevel=5):
    """:func:`_tensors` of the table rows ``rows`` (positions in ``columns``)."""
    tools = catalog.tools(cluster)
    k = len(tools)
    g = columns.query[rows]
    q_codes = np.zeros(len(rows), dtype=np.int64)     # cluster-level counts: no query id, one pseudo-query
    known = g >= 0
    q_codes[known] = np.searchsorted(np.unique(g[known]), g[known])
    s_codes = np.searchsorted(runs, columns.run[rows])
    n_q = int(q_codes.max()) + 1
    cell = q_codes * len(runs) + s_codes
    api = _cell_sums(cell, columns.tools(rows, k), n_q * len(runs)).reshape(n_q, len(runs), k)
    pos_n = columns.pos[rows].astype(float)
    pos_known = pos_n.sum(1) > 0
    pos: _Target | None = None
    if pos_known.any():
        n_cand = np.unique(columns.n_candidates[rows][pos_known])
        if len(n_cand) > 1:
            msg = (f"group {keys}, cluster {cluster}: lists of different lengths {sorted(n_cand.tolist())} were "
                   "shown; the position distribution is undefined and delta_pos is skipped for this cluster")
            warnings.warn(msg, DegenerateDataWarning, stacklevel=stacklevel)
            caught.append(msg)
        else:
            kp = int(n_cand[0])
            pos_counts = _cell_sums(cell[pos_known], pos_n[pos_known][:, :kp], n_q * len(runs))
            pos = _Target(pos_counts.reshape(n_q, len(runs), kp), kp)
    return _Target(api, k), pos, tools


def _cell_sums(cell, values, n_cells):
    """Per cell, the column sums of the rows' ``values`` (rows, m) -> (n_cells, m), float.

    The values are counts (integers), so the sums are exact in any order: the same numbers as ``np.add.at``
    into zeros, several times faster."""
    out = np.empty((n_cells, values.shape[1]))
    for j in range(values.shape[1]):
        out[:, j] = np.bincount(cell, weights=values[:, j], minlength=n_cells)
    return out


#: ``BiasResult.position`` in words.
POSITION_LABELS = {"cluster_rank": "the rank among the cluster's tools as shown",
                   "list": "the position in the whole list offered"}
#: Why delta_pos is None for a cluster.
NOTE_NO_POSITION = "no valid choice has a known position (the order shown is unknown)"
NOTE_LENGTHS = "lists with different numbers of the cluster's tools were shown"
NOTE_NO_CELLS = ("position='list' needs the lists shown (the counts' cells); these counts were made without them "
                 "(count with cells=True)")


def list_slots(counts, by) -> dict:
    """``{(group key, cluster): (list positions, None) or (None, reason)}``: the list positions at which each
    cluster's tools were shown to its valid attempts, when they are the same in every attempt of the group.

    Read from ``counts.cells`` (the orderings shown, with counts); ``(None, reason)`` when the positions vary
    between attempts or the cells were not counted."""
    cells = counts.cells
    if cells is None:
        return {}
    ok = cells[(cells["status"] == "ok") & (cells["count"] > 0)]
    out: dict = {}
    members = {c: set(counts.catalog.tools(c)) for c in counts.catalog.clusters}
    keys = list(by) + ["cluster_id"]
    if not len(ok):
        return out
    for key, part in ok.groupby(keys, sort=False, dropna=False, observed=True):
        key = key if isinstance(key, tuple) else (key,)
        c = key[-1]
        sets: set[tuple[int, ...]] = set()
        for o in part["ordering"].dropna().unique():
            shown = str(o).split("|")
            sets.add(tuple(i for i, t in enumerate(shown, start=1) if t in members.get(c, ())))
        some_unshown = bool(part["ordering"].isna().any())   # an attempt without the list shown
        if len(sets) == 1 and not some_unshown:
            out[(tuple(key[:-1]), c)] = (list(next(iter(sets))), None)
        elif some_unshown:
            out[(tuple(key[:-1]), c)] = (None, "position='list' needs the list shown; some attempts have none")
        else:
            ex = sorted(sets)[:2]
            out[(tuple(key[:-1]), c)] = (None, (
                f"position='list': the cluster's tools were shown at different list positions ({len(sets)} "
                f"layouts, e.g. {list(ex[0])} and {list(ex[1])}); the uniform chooser's distribution over list "
                "positions is then a mixture, not a uniform, so delta_pos has no uniform reference (use "
                "position='cluster_rank')"))
    return out


def _order_unknown(counts):
    """The reader's reason when the order shown is unknown (e.g. OTel spans without tool definitions)."""
    for d in (counts.diagnostics or {}).values():
        if isinstance(d, dict) and isinstance(d.get("order_unknown"), dict):
            return d["order_unknown"].get("reason")
    return None


def _positions(pos_t, pos_of, cluster, unknown):
    """(labels of the position counts, note): ranks 1..K, the cluster's list positions, or (None, why not)."""
    if pos_t is None:
        return None, unknown or NOTE_NO_POSITION
    if pos_of is None:
        return list(range(1, pos_t.k + 1)), None
    if cluster not in pos_of:
        return None, NOTE_NO_CELLS
    slots, why = pos_of[cluster]
    if slots is None:
        return None, why
    if len(slots) != pos_t.k:
        return None, NOTE_LENGTHS
    return slots, None


def _tv_runs(counts):
    """Plug-in TV to uniform of (..., S, K) counts -> (..., S); NaN where a run has no valid choice."""
    k = counts.shape[-1]
    return 0.5 * np.abs(rates_from_counts(counts) - 1.0 / k).sum(-1)


def _sq_runs(counts):
    """Squared deviations from uniform, ``sum_i (p_i - 1/K)^2``, of (..., S, K) counts -> (..., S) (the discrete
    references' tie-break, :data:`TIE_BREAK`)."""
    k = counts.shape[-1]
    return ((rates_from_counts(counts) - 1.0 / k) ** 2).sum(-1)


def _nanmean(x, axis):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return np.nanmean(x, axis=axis)


class _Metric:
    """Observed, bootstrap, jackknife and null values of one cluster-averaged TV metric."""

    def __init__(self, name, clusters, targets, obs, boot, gen, n_null, level, cluster_corrected, multinomial=(),
                 pool=None):
        self.name = name
        self.clusters = clusters
        self.level = level
        # clusters whose replicates are multinomial draws of attempts (no queries to resample): no jackknife over
        # queries, so BCa is not available and `ci` is the percentile interval
        self._multinomial = {c for c in clusters if c in multinomial}
        self.n_multinomial = len(self._multinomial)
        # clusters whose queries each have at most one valid attempt (issue 35): attempts independent, exact multinomial
        self.single = {c for c in clusters if c not in self._multinomial and targets[c].counts.shape[0] >= 2
                       and float(targets[c].counts.sum(axis=(1, 2)).max(initial=0)) <= 1}
        # clusters with few attempts per tool and several per query: the tool-relabelling reference (P_RELABEL)
        self.sparse = {c for c in clusters if c not in self._multinomial and c not in self.single
                       and float(obs[c].sum()) < SPARSE_PER_TOOL * targets[c].k}
        # their draws come from a child of ``gen`` (the stream of every other draw, and so every other group's
        # numbers, stays what it was)
        self._single_rng = _child_rng(gen) if self.single or self.sparse else None
        self.relabelled = {}
        ks = np.array([targets[c].k for c in clusters], dtype=float)
        self.ks = ks
        norm = (1 - 1 / ks)
        # observed per-cluster, per-run TV: (C, S); pooled: (C,)
        self.per_cluster_obs = stacked(tv_runs, [obs[c] for c in clusters])
        self.pooled_cluster_obs = stacked(tv_runs, [obs[c].sum(0) for c in clusters])
        self.per_run = _nanmean(self.per_cluster_obs, 0)                       # (S,)
        self.norm_per_run = _nanmean(self.per_cluster_obs / norm[:, None], 0)
        r = boot[clusters[0]].shape[0]
        self.n_resamples = r
        if r:
            b = stacked(tv_runs, [boot[c] for c in clusters], axis=1)           # (R, C, S)
            self.boot_cluster_runs = b
            self.boot_stat = _nanmean(_nanmean(b, 1), 1)                      # (R,)
            self.boot_norm = _nanmean(_nanmean(b / norm[None, :, None], 1), 1)
            self.boot_pooled_cluster = stacked(tv_runs, [boot[c].sum(1) for c in clusters], axis=1)  # (R, C)
            self.boot_pooled = _nanmean(self.boot_pooled_cluster, 1)
            self.jack = self._jackknife(targets)
            self.relabelled = {c: _relabelled(targets[c].counts, r, self._single_rng) for c in self.sparse}
            self._calibrate(targets, obs, boot, level, cluster_corrected, pool)
        self._null(obs, boot, clusters, ks, gen, n_null, r)

    def _calibrate(self, targets, obs, boot, level, cluster_corrected, pool):
        """The calibrated intervals' inputs, and the intervals themselves (computed by ``pool`` when given).

        A cluster with one valid attempt per query (:attr:`single`) gets multinomial replicates of its attempts at
        the rates smoothed by :data:`SINGLE_PSEUDO` (drawn from a child of the group's generator) instead of its
        query-bootstrap ones."""
        clusters = self.clusters
        # pooled-over-runs counts per cluster and their replicates: the calibrated interval's inputs
        # (clusters without a valid choice are left out, as they are of the means)
        seen = [c for c in clusters if obs[c].sum() > 0]
        # resampled units per cluster (queries; attempts for multinomial replicates): the errors' small-sample
        # variance correction
        units = {c: int(obs[c].sum()) if c in self._multinomial else int(targets[c].counts.shape[0])
                 for c in clusters}
        reps = {c: np.rint(boot[c].sum(1)).astype(np.int64) for c in seen}
        cal_units = dict(units)
        for c in seen:
            if c in self.sparse:   # relabelled replicates: the errors of a fair chooser, no bootstrap shrinkage
                reps[c] = np.rint(self.relabelled[c].sum(1)).astype(np.int64)
                cal_units[c] = 1
        for c in seen:
            if c in self.single and self._single_rng is not None:
                x = obs[c].sum(0)
                smoothed = (x + SINGLE_PSEUDO) / (x.sum() + SINGLE_PSEUDO * x.size)
                reps[c] = self._single_rng.multinomial(int(x.sum()), smoothed, size=len(reps[c]))
        self.cal_inputs = ([obs[c].sum(0) for c in seen], [reps[c] for c in seen], [cal_units[c] for c in seen])
        self.units = units
        self._calibrated = (_submit(pool, calibrated_mean_tv, *self.cal_inputs[:2], n_units=self.cal_inputs[2],
                                    confidence_level=level) if seen
                            else CalibratedTV(np.nan, np.nan, np.nan, level, "none (no valid choice)", np.nan, np.nan))
        self._cal_cluster = [_submit(pool, calibrated_mean_tv, [obs[c].sum(0)], [reps[c]], n_units=[cal_units[c]],
                                     confidence_level=level)
                             if cluster_corrected and obs[c].sum() > 0 else None
                             for c in clusters]

    @property
    def calibrated(self) -> CalibratedTV:
        """The calibrated interval of the cluster average (waits for it when it is being computed)."""
        return _resolved(self._calibrated)

    @property
    def cal_cluster(self) -> list:
        """The calibrated interval of every cluster (None where not computed)."""
        return [_resolved(c) for c in self._cal_cluster]

    @property
    def cal_method(self) -> str:
        single = (f"; {len(self.single)} of {len(self.clusters)} clusters with one valid attempt per query: "
                  f"multinomial replicates at rates smoothed by {SINGLE_PSEUDO:g} per tool" if self.single else "")
        few = sum(1 for x in self.cal_inputs[0] if x.sum() < FEW_ATTEMPTS)
        mean_n = float(np.mean([x.sum() for x in self.cal_inputs[0]])) if self.cal_inputs[0] else 0.0
        few_note = (f"; {few} clusters with fewer than {FEW_ATTEMPTS} valid attempts: upper bound at the one-sided "
                    f"level {_upper_tail(1 - self.level, mean_n):.2%} instead of {(1 - self.level) / 2:.2%} (the "
                    "nominal one misses above more often with few attempts; docs/guide/metrics.md)" if few else "")
        tiny = sum(1 for x in self.cal_inputs[0] if x.sum() < SMALLEST_CHECKED)
        few_note += (f"; {tiny} clusters with fewer than {SMALLEST_CHECKED} valid attempts: below the smallest design "
                     "checked (10 per cluster), the interval's coverage is not known there; the p-value stays exact "
                     "where attempts are independent" if tiny else "")
        return self.calibrated.method + (
            "" if not self.n_multinomial else " on multinomial replicates" if self.n_multinomial == len(self.clusters)
            else " on query-bootstrap and multinomial replicates") + single + few_note

    def _null(self, obs, boot, clusters, ks, gen, n_null, r):
        """The null references: exact expectations, the centred replicates and the uniform chooser's draws."""
        # Null: uniform multinomial chooser with the same valid counts per (cluster, run).
        n_cs = [obs[c].sum(-1).astype(np.int64) for c in clusters]             # each (S,)
        self.null_cluster_runs = uniform_expected_tv(n_cs, ks)
        self.null_cluster_pooled = np.array([expected_tv_uniform(int(n.sum()), int(k)) for n, k in zip(n_cs, ks)])
        # Test of "no bias" that respects the resampling unit: a fair chooser with the observed query heterogeneity.
        # The replicates' per-run rates, centred on their mean (and scaled by sqrt(Q / (Q - 1)), the bootstrap's
        # small-sample variance), are the errors of the rates; TV(1/K + error) is the statistic's law at delta = 0.
        self.null_query = None
        if r:
            scale = {c: np.sqrt(u / (u - 1)) if u > 1 else 1.0 for c, u in self.units.items()}
            nq = centred_null_tv([boot[c] for c in clusters], [scale[c] for c in clusters])   # (R, C, S); NaN: none
            # the discrete references' tie-break (TIE_BREAK): squared deviations, 0 in the other clusters
            sq, sq_obs = np.zeros_like(nq), np.zeros_like(self.per_cluster_obs)
            for j, (c, n, k) in enumerate(zip(clusters, n_cs, ks)):
                draws = (self._single_rng.multinomial(n, np.full(int(k), 1.0 / k), size=(r, len(n)))
                         if c in self.single   # attempts independent: the uniform chooser's own draws (exact)
                         else self.relabelled[c] if c in self.sparse   # queries' counts permuted over the tools
                         else None)
                if draws is not None:
                    nq[:, j, :], sq[:, j, :] = _tv_runs(draws), _sq_runs(draws)
                    sq_obs[j] = _sq_runs(obs[c])
            missing = np.isnan(self.per_cluster_obs)
            nq[:, missing] = np.nan
            sq[:, missing], sq_obs[missing] = np.nan, np.nan
            self.null_query_sims = _nanmean(nq, 2)    # (R, C): what the clusters' p-values read (1/S of the memory)
            self.null_query = _nanmean(_nanmean(nq, 1), 1)
            self.tie_sims, self.tie_obs = _nanmean(sq, 2), _nanmean(sq_obs, 1)       # (R, C), (C,)
        self.null_stat = None
        if n_null:
            # (N,) and (N, C): multinomial draws, or each cluster's mean from its exact law when they would be many
            self.null_stat, self.null_sims = uniform_null_means(gen, n_cs, ks, n_null, np.isnan(self.per_cluster_obs))

    def _jackknife(self, targets):
        """Leave-one-query-out values of mean_over_runs (one per query of every cluster)."""
        loo, cluster = leave_one_out_tv([targets[c].counts for c in self.clusters])   # (sum Q, S)
        return jackknife_means(self.per_cluster_obs, loo, cluster)

    @property
    def stat(self):
        return float(_nanmean(self.per_run, 0))

    @property
    def p_method(self):
        """``p_value_method`` of this metric's reported p-value (see :meth:`_p_values`)."""
        if self.null_query is not None and self.single and len(self.single) == len(self.clusters):
            return P_EXACT
        if self.null_query is not None and self.n_multinomial < len(self.clusters):
            return P_QUERY + ("" if not self.n_multinomial else
                              f"; {self.n_multinomial} clusters without per-query rows: multinomial replicates "
                              "(attempts assumed independent)") + (
                f"; {len(self.single)} clusters with one valid attempt per query: exact multinomial reference, "
                + TIE_BREAK if self.single else "") + (
                f"; {len(self.sparse)} " + NOTE_SPARSE.format(n=SPARSE_PER_TOOL) if self.sparse else "")
        if self.null_stat is not None:
            return P_MULTINOMIAL + (": no per-query rows (aggregated counts), the only test available"
                                    if self.n_multinomial == len(self.clusters) and self.n_resamples
                                    else ": no query bootstrap (n_resamples=0)")
        return "none"

    def _p_values(self, stat, null_query, null_multinomial, method=None, tie=None):
        """``p_value`` (query test unless every cluster is aggregated), ``p_value_multinomial`` and the method.

        ``tie``: (observed, null) secondary statistics that order equal values of the statistic (:data:`TIE_BREAK`)
        where the method names it."""
        def mc(null, tied=None):
            if tied is not None:   # lexicographic order (statistic, squared deviations): a finer exact reference
                same = np.abs(null - stat) <= 1e-12
                above = np.sum(null > stat + 1e-12) + np.sum(same & (tied[1] >= tied[0] - 1e-12))
                return float((1 + above) / (1 + len(null)))
            return float((1 + np.sum(null >= stat - 1e-12)) / (1 + len(null)))
        out = {"p_value_method": self.p_method if method is None else method}
        if null_multinomial is not None:
            out["p_value_multinomial"] = mc(null_multinomial)
        if out["p_value_method"].startswith((P_QUERY, P_EXACT)):
            out["p_value"] = mc(null_query, tie if TIE_BREAK in out["p_value_method"] else None)
        elif null_multinomial is not None:
            out["p_value"] = out["p_value_multinomial"]
        return out

    def result(self, level, ci_method) -> TVResult:
        per_run = self.per_run[np.isfinite(self.per_run)]
        kw: dict[str, Any] = {}
        if self.n_resamples:
            pct = percentile_ci(self.boot_stat, level)
            bca, note = _bca_usable(ci_method, not self.n_multinomial, self.boot_stat, self.stat, level)
            kw = dict(ci=bca_ci(self.boot_stat, self.stat, self.jack, level) if bca else pct,
                      ci_method="bca" if bca else "percentile", ci_percentile=pct, ci_note=note,
                      ci_pooled=percentile_ci(self.boot_pooled, level),
                      corrected=self.calibrated.estimate,
                      corrected_ci=ConfidenceInterval(self.calibrated.ci_low, self.calibrated.ci_high),
                      corrected_method=self.cal_method,
                      normalised_ci=percentile_ci(self.boot_norm, level),
                      standard_error=float(np.nanstd(self.boot_stat, ddof=1)),
                      bootstrap_distribution=self.boot_stat)
        tie = None if self.null_query is None else (float(_nanmean(self.tie_obs, 0)), _nanmean(self.tie_sims, 1))
        kw.update(self._p_values(self.stat, self.null_query, self.null_stat, tie=tie))
        return TVResult(
            metric=self.name, mean_over_runs=self.stat, sd_over_runs=float(np.std(per_run, ddof=0)),
            pooled=float(_nanmean(self.pooled_cluster_obs, 0)), n_runs=int(len(per_run)),
            null_expected=float(_nanmean(_nanmean(np.where(np.isnan(self.per_cluster_obs), np.nan,
                                                           self.null_cluster_runs), 0), 0)),
            null_expected_pooled=float(_nanmean(self.null_cluster_pooled, 0)),
            normalised=float(_nanmean(self.norm_per_run, 0)),
            normalised_pooled=float(_nanmean(self.pooled_cluster_obs / (1 - 1 / self.ks), 0)),
            confidence_level=level, **kw)

    def cluster_result(self, i, level) -> TVResult:
        per_run = self.per_cluster_obs[i]
        per_run = per_run[np.isfinite(per_run)]
        kw: dict[str, Any] = {}
        if self.n_resamples:
            b = _nanmean(self.boot_cluster_runs[:, i, :], 1)
            cal = _resolved(self._cal_cluster[i])
            cis = self._cluster_cis(level)
            kw = dict(ci=ConfidenceInterval(*cis[0][:, i]), ci_method="percentile",
                      ci_percentile=ConfidenceInterval(*cis[0][:, i]), ci_pooled=ConfidenceInterval(*cis[1][:, i]),
                      normalised_ci=ConfidenceInterval(*cis[2][:, i]),
                      standard_error=float(np.nanstd(b, ddof=1)))
            if cal is not None:
                kw.update(corrected=cal.estimate, corrected_ci=ConfidenceInterval(cal.ci_low, cal.ci_high),
                          corrected_method=cal.method + (" on multinomial replicates"
                                                         if self.clusters[i] in self._multinomial else ""))
        stat = float(per_run.mean()) if per_run.size else np.nan
        multinomial = self.clusters[i] in self._multinomial
        nq = None if self.null_query is None or multinomial else self.null_query_sims[:, i]
        nm = None if self.null_stat is None else self.null_sims[:, i]
        method = ((P_EXACT if self.clusters[i] in self.single else P_RELABEL if self.clusters[i] in self.sparse
                   else P_QUERY) if nq is not None else
                  "none" if nm is None else
                  P_MULTINOMIAL + (": no per-query rows (aggregated counts), the only test available"
                                   if multinomial and self.n_resamples   # as the group-level `p_method`
                                   else ": no query bootstrap (n_resamples=0)"))
        tie = None if nq is None else (float(self.tie_obs[i]), self.tie_sims[:, i])
        kw.update(self._p_values(stat, nq, nm, method, tie=tie))
        k = self.ks[i]
        return TVResult(
            metric=self.name, mean_over_runs=stat, sd_over_runs=float(np.std(per_run)) if per_run.size else np.nan,
            pooled=float(self.pooled_cluster_obs[i]), n_runs=int(per_run.size),
            null_expected=float(_nanmean(self.null_cluster_runs[i][np.isfinite(self.per_cluster_obs[i])], 0)),
            null_expected_pooled=float(self.null_cluster_pooled[i]),
            normalised=stat / (1 - 1 / k), normalised_pooled=float(self.pooled_cluster_obs[i]) / (1 - 1 / k),
            confidence_level=level, **kw)

    def _cluster_cis(self, level):
        """Every cluster's percentile intervals (of its mean over runs, pooled and normalised), computed for all
        clusters at once on first use: arrays (2, C) of (low, high)."""
        if getattr(self, "_cis", (None,))[0] != level:
            b = _nanmean(self.boot_cluster_runs, 2)                                       # (R, C)
            self._cis = (level, [np.array(percentile_cis(x, level)) for x in
                                 (b, self.boot_pooled_cluster, b / (1 - 1 / self.ks)[None, :])])
        return self._cis[1]

    @staticmethod
    def model_calibration(api, pos, level, pool=None):
        """delta_model's calibrated interval (a future when ``pool`` is given), or None where it has none.

        delta_model is the mean TV over 2C distributions (each cluster's tools and its positions); the same joint
        replicates carry the dependence between them, so the calibrated inversion applies as it is (issue 14:
        delta_model had no interval). Only when both metrics have the same clusters.
        """
        if not api.n_resamples or list(pos.clusters) != list(api.clusters):
            return None
        return _submit(pool, calibrated_mean_tv, api.cal_inputs[0] + pos.cal_inputs[0],
                       api.cal_inputs[1] + pos.cal_inputs[1], n_units=api.cal_inputs[2] + pos.cal_inputs[2],
                       confidence_level=level)

    @staticmethod
    def average(api, pos, a, p, level, ci_method, calibration=None) -> TVResult:
        """delta_model = (delta_API + delta_pos) / 2, replicate by replicate (same resampled queries).

        ``a`` and ``p`` are the already computed TVResults of ``api`` and ``pos``; ``calibration`` the result of
        :meth:`model_calibration` (computed here when None).
        """
        per_run = (api.per_run + pos.per_run) / 2
        finite = per_run[np.isfinite(per_run)]
        stat = float(finite.mean()) if finite.size else np.nan
        kw: dict[str, Any] = {}
        if api.n_resamples:
            boot = (api.boot_stat + pos.boot_stat) / 2
            pct = percentile_ci(boot, level)
            # the jackknife pairs leave-one-query-out values of both metrics: only when they share their clusters
            bca, note = _bca_usable(ci_method, not (api.n_multinomial or pos.n_multinomial)
                                    and list(pos.clusters) == list(api.clusters), boot, stat, level)
            kw = dict(ci=bca_ci(boot, stat, (api.jack + pos.jack) / 2, level) if bca else pct, ci_note=note,
                      ci_method="bca" if bca else "percentile",
                      ci_percentile=pct, ci_pooled=percentile_ci((api.boot_pooled + pos.boot_pooled) / 2, level),
                      normalised_ci=percentile_ci((api.boot_norm + pos.boot_norm) / 2, level),
                      standard_error=float(np.nanstd(boot, ddof=1)), bootstrap_distribution=boot)
            if list(pos.clusters) == list(api.clusters):
                cal = _resolved(calibration if calibration is not None else _Metric.model_calibration(api, pos, level))
                kw.update(corrected=cal.estimate, corrected_ci=ConfidenceInterval(cal.ci_low, cal.ci_high),
                          corrected_method=api.cal_method + " (tool and position distributions jointly)")
            else:
                kw.update(corrected=(api.calibrated.estimate + pos.calibrated.estimate) / 2,
                          corrected_method="mean of the two corrected values (no interval: some clusters have no "
                                           "known positions)")
        nq = (None if api.null_query is None or pos.null_query is None else (api.null_query + pos.null_query) / 2)
        nm = (None if api.null_stat is None or pos.null_stat is None else (api.null_stat + pos.null_stat) / 2)
        method = api.p_method if api.p_method == pos.p_method else (
            P_QUERY + "; mixed with multinomial replicates" + ("; exact multinomial reference, " + TIE_BREAK +
                                                               ", where a cluster has one valid attempt per query"
                                                               if api.single or pos.single else "")
            if nq is not None and api.p_method.startswith((P_QUERY, P_EXACT)) else pos.p_method)
        tie = (None if nq is None else
               (float(_nanmean(api.tie_obs, 0) + _nanmean(pos.tie_obs, 0)) / 2,
                (_nanmean(api.tie_sims, 1) + _nanmean(pos.tie_sims, 1)) / 2))
        kw.update(api._p_values(stat, nq, nm, method, tie=tie))
        return TVResult(
            metric="delta_model", mean_over_runs=stat, sd_over_runs=float(np.std(finite)) if finite.size else np.nan,
            pooled=(a.pooled + p.pooled) / 2, n_runs=int(finite.size),
            null_expected=(a.null_expected + p.null_expected) / 2,
            null_expected_pooled=(a.null_expected_pooled + p.null_expected_pooled) / 2,
            normalised=(a.normalised + p.normalised) / 2,
            normalised_pooled=(a.normalised_pooled + p.normalised_pooled) / 2,
            confidence_level=level, **kw)


def _relabelled(counts, n_resamples, rng, chunk=64):
    """(R, S, K) sums over queries of the (Q, S, K) counts with every query's tools permuted at random (the same
    permutation for all runs of a query; independently per query and replicate)."""
    q, s, k = counts.shape
    out = np.empty((n_resamples, s, k))
    for start in range(0, n_resamples, chunk):
        r = min(chunk, n_resamples - start)
        perm = np.argsort(rng.random((r, q, k)), axis=-1)                          # (r, Q, K)
        moved = np.take_along_axis(np.broadcast_to(counts[None], (r, q, s, k)),
                                   np.broadcast_to(perm[:, :, None, :], (r, q, s, k)), axis=-1)
        out[start:start + r] = moved.sum(1)
    return out


def _child_rng(gen):
    """An independent generator derived from ``gen`` without drawing from it (``Generator.spawn``), so that draws
    made only in some designs leave ``gen``'s stream, and every number drawn from it, unchanged."""
    try:
        return gen.spawn(1)[0]
    except (AttributeError, TypeError, ValueError):   # pragma: no cover - a bit generator without a seed sequence
        return np.random.default_rng(gen.integers(0, 2**63))


def _calibration_pool(n_resamples):
    """A worker thread for the calibrated intervals, or None (no interval, or one core).

    The test inversion draws nothing (a deterministic function of the replicates) and spends its time in NumPy,
    which releases the GIL: computed beside the next groups' draws, the intervals cost little wall time on a
    machine with two cores or more. One worker: with the main thread, which computes the intervals nobody has
    started when it needs them (:class:`_Task`), two threads run, so a busy machine is not oversubscribed. The
    results are the same as computed in turn.
    """
    if not n_resamples or (os.cpu_count() or 1) < 2:
        return None
    from concurrent.futures import ThreadPoolExecutor

    return ThreadPoolExecutor(max_workers=1, thread_name_prefix="toolbias-calibrated")


class _Task:
    """``fn(*args, **kwargs)`` submitted to a pool; computed by the caller of :meth:`result` if not started yet."""

    __slots__ = ("call", "done", "future", "value")

    def __init__(self, pool, fn, args, kwargs):
        self.call = (fn, args, kwargs)
        self.future = pool.submit(fn, *args, **kwargs)
        self.done = False
        self.value = None

    def result(self):
        if not self.done:
            fn, args, kwargs = self.call
            self.value = fn(*args, **kwargs) if self.future.cancel() else self.future.result()
            self.done = True
            self.call = None
        return self.value


def _submit(pool, fn, *args, **kwargs):
    """``fn(*args, **kwargs)`` now (``pool`` None) or as a :class:`_Task` of ``pool``."""
    return fn(*args, **kwargs) if pool is None else _Task(pool, fn, args, kwargs)


def _resolved(value):
    """The result of a :class:`_Task`, or the value itself."""
    return value.result() if isinstance(value, _Task) else value


def _bca_usable(ci_method, jackknife_ok, boot, stat, level):
    """Whether ``ci`` may be the BCa interval, and the note saying why not: ``(bool, str)``."""
    if ci_method != "bca":
        return False, ""
    if not jackknife_ok:
        return False, "BCa needs a jackknife over queries (some clusters have none); percentile interval shown"
    z0, degenerate = bca_bias_z0(boot, stat, level)
    if degenerate:
        share = float(np.mean(np.asarray(boot)[np.isfinite(boot)] < stat)) if np.isfinite(stat) else np.nan
        return False, (f"BCa bias correction degenerate (z0 = {z0:.2f}: {share:.1%} of the replicates lie below the "
                       "estimate, as near uniformity); percentile interval shown")
    return True, ""


def wilson_interval(count, n, confidence_level):
    """Wilson score interval for a binomial proportion (Wilson 1927), vectorised over ``count``.

    The same interval as ``statsmodels.stats.proportion.proportion_confint(method="wilson")`` (a test
    checks this); written out so that computing selection rates does not import statsmodels (0.8 s).
    """
    count = np.asarray(count, dtype=float)
    z = special.ndtri(1 - (1 - confidence_level) / 2)
    p = count / n
    denom = 1 + z**2 / n
    centre = (p + z**2 / (2 * n)) / denom
    half = z * np.sqrt(p * (1 - p) / n + z**2 / (4 * n**2)) / denom
    return centre - half, centre + half


def _design_effect_wilson(count, n, boot_rates, n_units, confidence_level):
    """Wilson interval at the effective sample size of the resampled units (Korn & Graubard 1998), per category.

    The design effect is the query bootstrap's variance of the rate (scaled by ``Q / (Q - 1)``, the bootstrap's
    small-sample variance of a mean of ``Q`` units) over the binomial one, ``p (1 - p) / n``, never below 1; the
    interval is Wilson's with ``n / deff`` trials. Where the rate is 0 or 1 (no variance to compare) or ``Q < 2``
    it is Wilson's interval with ``n`` trials; with one attempt per query (independent attempts, design effect 1)
    it is Wilson's interval up to the noise of the estimated design effect (never narrower).
    The query bootstrap's percentile interval (the former ``bootstrap_low`` / ``bootstrap_high``) misses a small
    rate from below in up to 7.4% of studies with 10-25 queries (issue 35; ``analyses/rate_interval_coverage.py``).

    Korn, E. L. & Graubard, B. I. (1998). Confidence intervals for proportions with small expected number of
    positive counts estimated from survey data. Survey Methodology 24, 193-201.

    Examples
    --------
    One attempt per query (design effect about 1): Wilson's interval, 0.145-0.519 for 6 of 20, up to the noise of
    the estimated design effect:

    >>> rng = np.random.default_rng(0)
    >>> boot = rng.multinomial(20, [0.3, 0.7], size=1000) / 20
    >>> lo, hi = _design_effect_wilson(np.array([6, 14]), 20, boot, 20, 0.95)
    >>> np.round(lo, 3), np.round(hi, 3)
    (array([0.144, 0.477]), array([0.523, 0.856]))
    """
    count = np.asarray(count, dtype=float)
    p = count / n
    v_bin = p * (1 - p) / n
    q = 1 if n_units is None else int(n_units)
    v_boot = np.nanvar(boot_rates, axis=0, ddof=1) * (q / (q - 1) if q > 1 else 1.0)
    usable = (v_bin > 0) & np.isfinite(v_boot) & (q > 1)
    deff = np.where(usable, np.maximum(v_boot / np.where(v_bin > 0, v_bin, 1.0), 1.0), 1.0)
    n_eff = n / deff
    z = float(special.ndtri(1 - (1 - confidence_level) / 2))
    denom = 1 + z**2 / n_eff
    centre = (p + z**2 / (2 * n_eff)) / denom
    half = z * np.sqrt(p * (1 - p) / n_eff + z**2 / (4 * n_eff**2)) / denom
    return np.clip(centre - half, 0.0, 1.0), np.clip(centre + half, 0.0, 1.0)


def _rate_table(cluster, tools, counts, boot_counts, level, n_units=None) -> pd.DataFrame:
    """Per-tool selection rates with Wilson (independent trials) and query-level (design-effect Wilson) CIs."""
    n = counts.sum()
    rate = rates_from_counts(counts)
    if n > 0:
        w_lo, w_hi = wilson_interval(counts, n, level)
    else:
        w_lo = w_hi = np.full(len(tools), np.nan)
    if len(boot_counts) and n > 0:
        b_lo, b_hi = _design_effect_wilson(counts, n, rates_from_counts(boot_counts), n_units, level)
    else:
        b_lo = b_hi = np.full(len(tools), np.nan)
    return pd.DataFrame({
        "cluster": cluster, "tool_id": tools, "api_index": np.arange(1, len(tools) + 1), "count": counts.astype(int),
        "n_used": int(n), "rate": rate, "uniform": 1.0 / len(tools), "wilson_low": w_lo, "wilson_high": w_hi,
        "bootstrap_low": b_lo, "bootstrap_high": b_hi,
    })


def _tv_row(r: TVResult) -> dict:
    return {
        "corrected": r.corrected, "corrected_ci_low": r.corrected_ci.low, "corrected_ci_high": r.corrected_ci.high,
        "mean_over_runs": r.mean_over_runs, "sd_over_runs": r.sd_over_runs, "pooled": r.pooled, "n_runs": r.n_runs,
        "null_expected": r.null_expected, "p_value": r.p_value, "p_value_method": r.p_value_method,
        "p_value_multinomial": r.p_value_multinomial, "normalised": r.normalised,
        "standard_error": r.standard_error,
        # the plug-in's bootstrap intervals last (issue 35): they cover the true delta only far from uniformity
        "ci_low": r.ci.low, "ci_high": r.ci.high, "ci_method": r.ci_method,
        "ci_percentile_low": r.ci_percentile.low, "ci_percentile_high": r.ci_percentile.high,
    }


def _json_num(v):
    if isinstance(v, (np.integer,)):
        return int(v)
    if isinstance(v, (float, np.floating)):
        return None if not np.isfinite(v) else float(v)
    return v
