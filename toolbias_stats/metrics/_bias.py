"""Tool-selection bias (delta_API, delta_pos, delta_model) per group, with honest uncertainty.

:func:`selection_bias` is a short sequence of named stages: validate the arguments (:func:`_checked`), read the
count table (:func:`_count_rows`, :func:`_report_excluded`), compute every group in the order of the random stream
(:func:`_group_results`: per group the replicates, the point estimates, the intervals and the references of "no
bias", by the engine in :mod:`._bias_engine`) and assemble the :class:`BiasResult` (:func:`_assembled`). The result
classes live in :mod:`._bias_results`, the count tensors in :mod:`._bias_tensors`.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import numpy as np
import pandas as pd

from .._resampling import BOOTSTRAP_CI_METHODS, BOOTSTRAP_WEIGHTS
from .._resampling import wilson_interval as wilson_interval
from .._validation import check_by, check_choice, check_confidence_level, check_n_resamples, check_rng
from ..exceptions import ExcludedRowsWarning
from ..io._load import load_counts
from ._bias_engine import NOTE_SPARSE as NOTE_SPARSE
from ._bias_engine import P_EXACT as P_EXACT
from ._bias_engine import P_MULTINOMIAL as P_MULTINOMIAL
from ._bias_engine import P_QUERY as P_QUERY
from ._bias_engine import P_RELABEL as P_RELABEL
from ._bias_engine import SPARSE_PER_TOOL as SPARSE_PER_TOOL
from ._bias_engine import _calibration_pool, _group_stage
from ._bias_engine import _Metric as _Metric
from ._bias_engine import _nanmean as _nanmean
from ._bias_engine import _rate_table as _rate_table
from ._bias_engine import _tv_runs as _tv_runs
from ._bias_engine import parametric_counts as parametric_counts
from ._bias_results import INTERVAL_MULTINOMIAL, INTERVAL_NONE, INTERVAL_QUERY, POSITIONS, BiasResult
from ._bias_results import ClusterBias as ClusterBias
from ._bias_results import GroupBias as GroupBias
from ._bias_results import TVResult as TVResult
from ._bias_results import _json_num as _json_num
from ._bias_tensors import _Columns, _order_unknown, list_slots
from ._bias_tensors import _tensors as _tensors
from ._vectorised import study_exact_null

# The ``X as X`` imports above are re-exports: names that other modules import from here today (an import rewrite
# points them at their homes), and the names that results pickled before the split refer to
# (``toolbias_stats.metrics._bias.BiasResult``, ``..._bias._rate_table``).

if TYPE_CHECKING:
    from ..io import SelectionCounts, SelectionLog, Study

__all__ = ["selection_bias", "BiasResult", "GroupBias", "ClusterBias", "TVResult", "INTERVAL_QUERY",
           "INTERVAL_MULTINOMIAL", "POSITIONS"]


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
    settings = _checked(counts, by=by, n_resamples=n_resamples, n_null=n_null, confidence_level=confidence_level,
                        ci_method=ci_method, bootstrap=bootstrap, position=position,
                        cluster_corrected=cluster_corrected, rng=rng)
    rows = _count_rows(counts, settings.by)
    caught: list = []
    _report_excluded(counts, caught)
    groups = _group_results(counts, rows, settings, caught, progress)
    return _assembled(groups, settings, caught)


@dataclass(frozen=True)
class _Settings:
    """The checked arguments of one :func:`selection_bias` call, and its generator."""

    by: list
    n_resamples: int
    n_null: int
    confidence_level: float
    ci_method: str
    bootstrap: str
    position: str
    cluster_corrected: bool
    seed: object
    gen: np.random.Generator


def _checked(counts, *, by, n_resamples, n_null, confidence_level, ci_method, bootstrap, position, cluster_corrected,
             rng) -> _Settings:
    """Validate the inputs (the first bad argument raises, in the order of the signature) and make the generator."""
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
    return _Settings(by=by, n_resamples=n_resamples, n_null=n_null, confidence_level=confidence_level,
                     ci_method=ci_method, bootstrap=bootstrap, position=position,
                     cluster_corrected=cluster_corrected, seed=seed, gen=check_rng(rng))


@dataclass(frozen=True)
class _Rows:
    """The count table as the engine reads it: its columns as numpy arrays, and the grouping columns (and ``run``)
    of every row, whose index is the row's position in ``columns``."""

    columns: _Columns
    frame: pd.DataFrame


def _count_rows(counts, by) -> _Rows:
    """The count table's rows: at scale (DuckDB) from the table's compact arrays, never the int64 table."""
    compact = counts.compact if counts.level == "query" else None
    if compact is None:
        table = counts.table.reset_index(drop=True)
        return _Rows(_Columns(table), table[list(dict.fromkeys([*by, "run"]))])
    # the grouping columns as the table holds them; `run` (for its distinct values only) in its small type
    frame = pd.DataFrame({c: compact.key(c) if c in by else compact.keys[c] for c in dict.fromkeys([*by, "run"])})
    return _Rows(_Columns.of_arrays(compact), frame)


def _report_excluded(counts, caught: list) -> None:
    """Rows without a valid selection: counted by status, warned about once (to the caller of selection_bias)."""
    totals = counts.status_totals()
    excluded = {s: n for s, n in sorted(totals.items(), key=lambda kv: -kv[1]) if s != "ok" and n}
    if excluded:
        n_all = sum(totals.values())
        unit = "attempts (sums of `count`)" if counts.weighted else "rows"
        msg = (f"{sum(excluded.values())} of {n_all} {unit} have no valid selection and are excluded: {excluded}")
        warnings.warn(msg, ExcludedRowsWarning, stacklevel=3)
        caught.append(msg)


def _group_results(counts, rows: _Rows, settings: _Settings, caught: list, progress: bool) -> list:
    """Every group's :class:`GroupBias`, one group's rows at a time (the grouping columns only: a copy of the table
    per group costs memory).

    Per group, in the order of the random stream (:func:`._bias_engine._group_stage`): resample (every cluster's
    replicates), then per metric the point estimates, the intervals and the references of "no bias". The calibrated
    intervals are computed beside the next group's draws (:func:`._bias_engine._calibration_pool`) and collected
    when that group is drawn (:meth:`._bias_engine._PendingGroup.finish`), so that one group's arrays are held at a
    time. The uniform chooser's null takes the exact laws in every group when the study's draws are many
    (:func:`._vectorised.study_exact_null`)."""
    by, s = settings.by, settings
    by_groups = rows.frame.groupby(by, sort=True, dropna=False) if by else None
    exact = study_exact_null(s.n_null, 1 if by_groups is None else by_groups.ngroups, len(rows.columns.cluster_ids),
                             int(rows.frame["run"].nunique()))
    grouped = [((), rows.frame)] if by_groups is None else by_groups
    if progress:
        from tqdm.auto import tqdm

        grouped = tqdm(grouped, desc="bias (bootstrap)", unit="group", leave=False)
    slots = list_slots(counts, by) if s.position == "list" else None
    unknown = _order_unknown(counts)
    pool = _calibration_pool(s.n_resamples)
    try:
        pending, done = [], []
        for key, sub in grouped:
            key = key if isinstance(key, tuple) else (key,)
            keys = dict(zip(by, (k.item() if hasattr(k, "item") else k for k in key)))
            pos_of = None if slots is None else {c: v for (g, c), v in slots.items() if g == tuple(key)[:len(by)]}
            pending.append(_group_stage(sub, counts.catalog, keys, s.n_resamples, s.n_null, s.confidence_level,
                                        s.ci_method, s.gen, caught, s.cluster_corrected, s.bootstrap, pos_of, unknown,
                                        rows.columns, pool, exact))
            if len(pending) > 1:   # the group before is finished while this one's intervals compute: its arrays go
                done.append(pending.pop(0).finish())
        return done + [p.finish() for p in pending]
    finally:
        if pool is not None:
            pool.shutdown(cancel_futures=True)


def _assembled(groups: list, settings: _Settings, caught: list) -> BiasResult:
    """The :class:`BiasResult`: the groups, the call's settings and the warnings issued."""
    kinds = {g.interval_method for g in groups}
    resample = ("query" if kinds <= {INTERVAL_QUERY, INTERVAL_NONE}
                else "multinomial" if kinds == {INTERVAL_MULTINOMIAL} else "mixed")
    s = settings
    return BiasResult(groups=groups, by=s.by, n_resamples=s.n_resamples, n_null=s.n_null,
                      cluster_corrected=s.cluster_corrected, confidence_level=s.confidence_level,
                      ci_method=s.ci_method, resample=resample, seed=s.seed, warnings=caught, bootstrap=s.bootstrap,
                      position=s.position)
