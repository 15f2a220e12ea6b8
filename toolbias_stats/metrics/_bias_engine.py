"""The bootstrap engine of :func:`~toolbias_stats.selection_bias`: one group at a time, the replicates of every
cluster (the query bootstrap, or multinomial draws of the attempts where no query can be resampled), then per metric
the point estimates, the bootstrap and jackknife values, the calibrated intervals and the references of "no bias"
(:class:`_Metric`), assembled into the results of :mod:`._bias_results` (:class:`_PendingGroup`).

Every random draw comes from one generator in a fixed order (group by group; in a group the replicates, then each
metric's draws), so the same seed gives the same numbers.
"""

from __future__ import annotations

import functools
import os
import warnings
from dataclasses import dataclass
from typing import Any, cast

import numpy as np
import pandas as pd
from scipy import special

from .._resampling import (
    ConfidenceInterval,
    _belt_kernel,
    bca_bias_z0,
    bca_ci,
    percentile_ci,
    resampled_counts,
    wilson_interval,
)
from .._schema import STATUSES
from ..exceptions import DegenerateDataWarning, SmallSampleWarning
from ._bias_results import (
    INTERVAL_MULTINOMIAL,
    INTERVAL_NONE,
    INTERVAL_QUERY,
    ClusterBias,
    GroupBias,
    TVResult,
    collector_paused,
)
from ._bias_tensors import NOTE_LENGTHS, _Columns, _group_tensors, _positions
from ._calibrated import FULL_LEVEL_ATTEMPTS, CalibratedTV, _upper_tail, calibrated_mean_tv
from ._tv import expected_tv_uniform, rates_from_counts
from ._vectorised import (
    MAX_FUSED_RUNS,
    centred_null_tv,
    compact_replicates,
    jackknife_means,
    leave_one_out_tv,
    nanmean,
    percentile_cis,
    replicate_means,
    replicate_tv,
    stacked,
    tv_runs,
    uniform_expected_tv,
    uniform_null_means,
)

__all__ = ["parametric_counts", "P_QUERY", "P_MULTINOMIAL", "P_EXACT", "P_RELABEL"]

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


@dataclass
class _GroupDraws:
    """One group's per-query tensors and bootstrap replicates, cluster by cluster (catalog order)."""

    clusters: list
    api_t: dict
    pos_t: dict
    tools_of: dict
    boot_api: dict      # (R, S, K) replicate counts per cluster; (R, K), summed over runs, once the metrics are built
    boot_pos: dict      # (R, S, K) per cluster; None once the metrics are built
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
    # every cluster's rows in table order (as a groupby by cluster keeps it), from one stable sort of the codes: a
    # comparison of all the group's rows per cluster costs rows x clusters (issue 37: 2,000 clusters)
    order = np.argsort(code, kind="stable")
    bounds = np.searchsorted(code[order], np.arange(len(columns.cluster_ids) + 1))
    parts = [at[order[bounds[code_of[c]]:bounds[code_of[c] + 1]]] for c in clusters]
    # every cluster's tensors at once: one bincount per number of tools, not a dozen NumPy calls per cluster
    tensors, seen_of = _group_tensors(columns, parts, catalog, clusters, runs, caught, keys, stacklevel=7)
    compact = n_resamples > 0 and 2 <= len(runs) <= MAX_FUSED_RUNS
    for c, (api_t, pos_t, tools), seen in zip(clusters, tensors, seen_of):
        d.api_t[c], d.pos_t[c], d.tools_of[c] = api_t, pos_t, tools
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
        if compact:   # uint16 where the compiled passes read them (a quarter of the memory; issue 37)
            reps = [compact_replicates(x) for x in reps]
        d.boot_api[c] = reps[0]
        d.boot_pos[c] = None if d.pos_t[c] is None else reps[1]
    return d


def _group_stage(sub, catalog, keys, n_resamples, n_null, level, ci_method, gen, caught,
                 cluster_corrected, bootstrap, pos_of=None, unknown=None, columns=None, pool=None,
                 study_exact=False) -> _PendingGroup:
    """Every random draw of one group (replicates, then the null draws of each metric), in the order of the
    stream; the calibrated intervals go to ``pool`` (None: computed here). :meth:`_PendingGroup.finish` builds
    the :class:`GroupBias`. ``study_exact``: the uniform chooser's null from exact laws (:func:`study_exact_null`)."""
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
        warnings.warn(msg, SmallSampleWarning, stacklevel=5)
        caught.append(msg)

    api = _Metric("delta_api", clusters, d.api_t, obs_api, d.boot_api, gen, n_null, level, cluster_corrected,
                  multinomial, pool, study_exact)
    # the metric holds what it needs: of the tools' replicates only the rate table's sums over runs (R, K) stay, not
    # the (R, S, K) counts (issue 37: 240 groups x 10 clusters x 2,000 replicates held 1.2 GB until every group was
    # done), and they go before the positions' metric is built (2,000 clusters x 2,000 replicates: 0.5 GB)
    shared = api.compact_sums   # the calibrated interval's counts where they are these sums (_calibrate)
    for c in clusters:
        d.boot_api[c] = (shared[c] if c in shared else
                         _compact(api.run_sums[c] if api.run_sums else d.boot_api[c].sum(1)))
    api.compact_sums = {}
    api.run_sums = {}
    has_pos = [c for c in clusters if d.pos_t[c] is not None]
    pos = (_Metric("delta_pos", has_pos, d.pos_t, obs_pos, d.boot_pos, gen, n_null, level, cluster_corrected,
                   multinomial, pool, study_exact) if has_pos else None)
    for c in clusters:
        d.boot_pos[c] = None
    if pos is not None:
        pos.run_sums, pos.compact_sums = {}, {}
    for m in (api, pos):
        if m is not None and np.isnan(m.per_cluster_obs).any():
            msg = f"group {keys}: clusters without a valid choice in some run are left out of the means"
            warnings.warn(msg, DegenerateDataWarning, stacklevel=5)
            caught.append(msg)
    model_cal = _Metric.model_calibration(api, pos, level, pool) if pos else None
    for m in (api, pos):   # every calibration is submitted: its replicate counts go with it, not with the group
        if m is not None and m.n_resamples:
            m.cal_inputs = (m.cal_inputs[0], None, m.cal_inputs[2])
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

    @functools.cached_property
    def pos_index(self) -> dict:
        """``{cluster: its index among the clusters with positions}`` (a list's ``index`` per cluster is quadratic)."""
        return {c: j for j, c in enumerate(self.has_pos)}

    def finish(self) -> GroupBias:
        d, api, pos, level = self.draws, self.api, self.pos, self.level
        delta_api = api.result(level, self.ci_method)
        delta_pos = pos.result(level, self.ci_method) if pos else None
        delta_model = (_Metric.average(api, pos, delta_api, delta_pos, level, self.ci_method, self.model_cal)
                       if pos else None)
        with collector_paused():   # thousands of results that all live on (issue 37)
            cluster_results = [self._cluster(i, c) for i, c in enumerate(d.clusters)]
        interval_method = (_interval_method(len(d.clusters), len(d.multinomial)) if self.n_resamples
                           else INTERVAL_NONE)
        return GroupBias(keys=self.keys, rows=self.rows, delta_api=delta_api, delta_pos=delta_pos,
                         delta_model=delta_model, clusters=cluster_results, interval_method=interval_method)

    @functools.cached_property
    def _summed(self) -> tuple[dict, dict]:
        """Every cluster's counts summed over runs, their total and rates, for the tools and the positions: one
        sum and one division per shape of cluster, not per cluster (issue 37)."""
        return _summed_rates(self.obs_api, self.draws.clusters), _summed_rates(self.obs_pos, self.has_pos)

    def _cluster(self, i, c) -> ClusterBias:
        d, level = self.draws, self.level
        counts, n_used, rates = self._summed[0][c]
        j = self.pos_index.get(c)
        pcounts, n_pos, prates = (None, 0, None) if j is None else self._summed[1][c]
        return ClusterBias(
            cluster=c, K=d.api_t[c].k, n_used=n_used, n_position_known=n_pos,
            tools=d.tools_of[c], counts=counts, rates=dict(zip(d.tools_of[c], rates)),
            position_counts=pcounts, position_rates=prates,
            delta_api=self.api.cluster_result(i, level),
            delta_pos=None if j is None else cast(_Metric, self.pos).cluster_result(j, level),
            rate_table=functools.partial(_rate_table, c, d.tools_of[c], counts, d.boot_api[c], level,
                                         getattr(self.api, "units", {}).get(c)),
            interval_method=(INTERVAL_NONE if not self.n_resamples else INTERVAL_MULTINOMIAL
                             if c in d.multinomial else INTERVAL_QUERY),
            positions=d.labels[c], position_note=d.notes[c],
        )


def _summed_rates(obs: dict, clusters: list) -> dict:
    """``{cluster: (counts summed over runs, their total as int, rates)}`` of the (S, K) ``obs`` of ``clusters``,
    with the clusters of one shape and type summed and divided together (each row the same sums and quotients as
    the cluster's own)."""
    kinds: dict = {}
    for c in clusters:
        kinds.setdefault((obs[c].shape, obs[c].dtype), []).append(c)
    out = {}
    for same in kinds.values():
        summed = np.stack([obs[c] for c in same]).sum(1)                          # (n, K)
        for c, counts, total, rates in zip(same, summed, summed.sum(1).tolist(), rates_from_counts(summed)):
            out[c] = (counts, int(total), rates)
    return out


def _compact(counts: np.ndarray) -> np.ndarray:
    """Replicate counts in the smallest unsigned integer type that holds them when they are integers below 2^31
    (the rate table converts them back to float, exactly; issue 37: every finished group keeps them for its rate
    tables, 2,000 clusters x 2,000 replicates x 5 tools, 80 MB per group as int32 and 20 MB as uint8), else as they
    are.

    Examples
    --------
    >>> _compact(np.array([[1.0, 2.0]])).dtype, _compact(np.array([[1.0, 300.0]])).dtype
    (dtype('uint8'), dtype('uint16'))
    >>> _compact(np.array([[0.5, 2.0]])).dtype, _compact(np.array([[-1.0, 2.0]])).dtype
    (dtype('float64'), dtype('float64'))
    """
    top = counts.max() if counts.size else None
    if top is not None and top < 2**31 and counts.min() >= 0 and np.array_equal(counts, np.rint(counts)):
        return counts.astype(np.min_scalar_type(int(top)))
    return counts


def _integer_counts(sums: np.ndarray) -> np.ndarray:
    """``np.rint(sums).astype(np.int64)``, the same numbers in the smallest unsigned type where ``sums`` are integers
    below 2^31 (:func:`_compact`; the calibrated intervals convert them to float once): the replicate counts that a
    group's intervals hold while the next group is drawn (issue 37: 2,000 clusters x 2,000 replicates x 5 tools per
    metric, 160 MB as int64, 20 MB as uint8).

    Examples
    --------
    >>> _integer_counts(np.array([[2.0, 300.0]])).dtype, _integer_counts(np.array([[0.4, 2.6]]))
    (dtype('uint16'), array([[0, 3]]))
    """
    out = _compact(sums)
    return out if out.dtype.kind == "u" else np.rint(sums).astype(np.int64)


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


def _tv_runs(counts):
    """Plug-in TV to uniform of (..., S, K) counts -> (..., S); NaN where a run has no valid choice."""
    k = counts.shape[-1]
    return 0.5 * np.abs(rates_from_counts(counts) - 1.0 / k).sum(-1)


def _sq_runs(counts):
    """Squared deviations from uniform, ``sum_i (p_i - 1/K)^2``, of (..., S, K) counts -> (..., S) (the discrete
    references' tie-break, :data:`TIE_BREAK`)."""
    k = counts.shape[-1]
    return ((rates_from_counts(counts) - 1.0 / k) ** 2).sum(-1)


def _centred_scale(clusters, targets, obs, multinomial) -> list:
    """The centred null's factor ``sqrt(u / (u - 1))`` of every cluster (``u``: its resampled units, queries or, for
    multinomial replicates, attempts; 1.0 where ``u < 2``), as :meth:`_Metric._null` takes them from
    :meth:`_Metric._calibrate`'s ``units``.

    Examples
    --------
    >>> from types import SimpleNamespace
    >>> t = {"a": SimpleNamespace(counts=np.zeros((5, 1, 2))), "b": SimpleNamespace(counts=np.zeros((1, 1, 2)))}
    >>> _centred_scale(["a", "b"], t, {"a": np.ones((1, 2)), "b": np.ones((1, 2))}, {"b"})
    [np.float64(1.118033988749895), np.float64(1.4142135623730951)]
    """
    units = _resampled_units(clusters, targets, obs, multinomial)
    return [_centred_factor(units[c]) for c in clusters]


def _resampled_units(clusters, targets, obs, multinomial) -> dict:
    """Resampled units per cluster: its queries, or its attempts for multinomial replicates."""
    return {c: int(obs[c].sum()) if c in multinomial else int(targets[c].counts.shape[0]) for c in clusters}


def _centred_factor(u: int):
    """The bootstrap's small-sample variance factor ``sqrt(u / (u - 1))`` of ``u`` resampled units (1.0 below 2)."""
    return np.sqrt(u / (u - 1)) if u > 1 else 1.0


def _zero_ties(r: int, missing: np.ndarray) -> np.ndarray:
    """``_nanmean(sq, 2)`` of the (R, C, S) squared deviations of a group without exact or relabelled draws: 0
    everywhere but NaN at the ``missing`` (C, S) cells, so 0, or NaN for a cluster without a valid run (the mean of
    zeros is 0.0; of none, NaN). (R, C), without the (R, C, S) array and its reduction.

    Examples
    --------
    >>> missing = np.array([[False, True], [True, True]])
    >>> _zero_ties(2, missing)
    array([[ 0., nan],
           [ 0., nan]])
    >>> bool(np.array_equal(_zero_ties(2, missing), _nanmean(np.where(missing, np.nan, np.zeros((2, 2, 2))), 2),
    ...                     equal_nan=True))
    True
    """
    out = np.zeros((r, missing.shape[0]))
    if missing.shape[1]:
        out[:, missing.all(1)] = np.nan
    else:
        out[:] = np.nan
    return out


def _mean_of_finite(x) -> float:
    """``float(_nanmean(x, 0))`` of a 1-D array, without its warning filters where ``x`` holds no NaN (the same sum
    divided by the same count: the same number; a tenth of the cost, once per cluster and metric)."""
    if x.size and not np.isnan(x).any():
        return float(np.add.reduce(x) / x.size)
    return float(_nanmean(x, 0))


def _nanmean(x, axis):
    """:func:`._vectorised.nanmean` (``np.mean`` where there is no NaN: the same numbers, a fraction of the cost)."""
    return nanmean(x, axis)


class _Metric:
    """Observed, bootstrap, jackknife and null values of one cluster-averaged TV metric."""

    def __init__(self, name, clusters, targets, obs, boot, gen, n_null, level, cluster_corrected, multinomial=(),
                 pool=None, study_exact=False):
        """The stages in the order of the random stream: kinds of clusters (a child generator spawned), point
        estimates, replicate values (jackknife, relabelled draws), calibrated intervals, references of "no bias"."""
        self.name = name
        self.clusters = clusters
        self.level = level
        self.study_exact = study_exact
        self._kinds(clusters, targets, obs, multinomial, gen)
        self._point_estimates(clusters, targets, obs)
        r = boot[clusters[0]].shape[0]
        self.n_resamples = r
        if r:
            _compiled_belt(r, sum(targets[c].k for c in clusters))
            self._replicate_values(clusters, targets, obs, boot, r)
            self._calibrate(targets, obs, boot, level, cluster_corrected, pool)
        self._null(obs, boot, clusters, self.ks, gen, n_null, r)

    def _kinds(self, clusters, targets, obs, multinomial, gen):
        """Which clusters take multinomial replicates, the exact reference (:attr:`single`) or the relabelling one
        (:attr:`sparse`); the child generator of the latter two's draws."""
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
        self.run_sums: dict = {}
        self._centred = None   # the centred null's means, when computed with the replicates' (_replicate_values)
        self.compact_sums: dict = {}

    def _point_estimates(self, clusters, targets, obs):
        """The observed per-cluster, per-run TV (C, S), pooled over runs (C,), and their means over clusters."""
        self.ks = np.array([targets[c].k for c in clusters], dtype=float)
        norm = (1 - 1 / self.ks)
        self.per_cluster_obs = stacked(tv_runs, [obs[c] for c in clusters])
        self.pooled_cluster_obs = stacked(tv_runs, [obs[c].sum(0) for c in clusters])
        self.per_run = _nanmean(self.per_cluster_obs, 0)                       # (S,)
        self.norm_per_run = _nanmean(self.per_cluster_obs / norm[:, None], 0)

    def _replicate_values(self, clusters, targets, obs, boot, r):
        """The statistics of the ``r`` replicates, the jackknife over queries and the relabelled draws."""
        norm = (1 - 1 / self.ks)
        # the means of every cluster's replicate TVs, its sums over runs and their TVs, and the means of the centred
        # null's values (:meth:`_null`) where nothing replaces or masks them, in one compiled pass per cluster where
        # numba is loaded, without the (R, C, S) values (issue 37: 2,000 clusters x 2,000 replicates); else the NumPy
        # passes (the same numbers)
        centred = not (self.single or self.sparse or np.isnan(self.per_cluster_obs).any())
        fused = replicate_means([boot[c] for c in clusters], norm,
                                _centred_scale(clusters, targets, obs, self._multinomial) if centred else None)
        self._centred = None if fused is None else fused.centred
        if fused is not None:
            self.boot_cluster_means = fused.cluster_means                              # (R, C)
            self.boot_stat = _nanmean(fused.run_means, 1)                               # (R,)
            self.boot_norm = _nanmean(fused.norm_run_means, 1)
            self.run_sums = sums = dict(zip(clusters, fused.sums))
            self.boot_pooled_cluster = fused.pooled                                     # (R, C)
        else:
            b = replicate_tv([boot[c] for c in clusters])                               # (R, C, S)
            # the clusters' replicate means over runs (R, C): what their intervals and standard errors read (the
            # (R, C, S) values are not kept: 1/S of the memory while the other groups are drawn)
            self.boot_cluster_means = _nanmean(b, 2)
            self.boot_stat = _nanmean(_nanmean(b, 1), 1)                              # (R,)
            self.boot_norm = _nanmean(_nanmean(b / norm[None, :, None], 1), 1)
            del b
            # every cluster's replicate counts summed over runs (R, K), once: the pooled values, the calibrated
            # intervals' inputs and the rate tables' replicates read the same sums (issue 37: three sums per cluster)
            self.run_sums = sums = {c: boot[c].sum(1) for c in clusters}
            self.boot_pooled_cluster = replicate_tv([sums[c] for c in clusters])   # (R, C)
        del fused
        self.boot_pooled = _nanmean(self.boot_pooled_cluster, 1)
        self.jack = self._jackknife(targets)
        # in catalog order (the set's order follows the hash of the cluster ids, which changes between processes)
        self.relabelled = {c: _relabelled(targets[c].counts, r, self._single_rng) for c in clusters
                           if c in self.sparse}

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
        units = _resampled_units(clusters, targets, obs, self._multinomial)
        reps = {c: _integer_counts(self.run_sums[c]) for c in seen}
        # the compact sums are also the rate tables' replicates (_group_stage): one array, converted once
        self.compact_sums = {c: v for c, v in reps.items() if v.dtype.kind == "u"}
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
        self.null_cluster_pooled = np.array(_expected_tv_uniform_of([(int(n.sum()), int(k)) for n, k in zip(n_cs, ks)]))
        # Test of "no bias" that respects the resampling unit: a fair chooser with the observed query heterogeneity.
        # The replicates' per-run rates, centred on their mean (and scaled by sqrt(Q / (Q - 1)), the bootstrap's
        # small-sample variance), are the errors of the rates; TV(1/K + error) is the statistic's law at delta = 0.
        self.null_query = None
        if r:
            scale = {c: _centred_factor(u) for c, u in self.units.items()}
            missing = np.isnan(self.per_cluster_obs)
            if self._centred is not None:   # nothing replaces or masks the centred values: their means, compiled
                self.null_query_sims, self.null_query = self._centred[0], _nanmean(self._centred[1], 1)
                self.tie_sims, self.tie_obs = _zero_ties(r, missing), _nanmean(np.zeros_like(missing, float), 1)
                self._centred = None
                self._null_multinomial(obs, clusters, ks, gen, n_null, n_cs)
                return
            nq = centred_null_tv([boot[c] for c in clusters], [scale[c] for c in clusters])   # (R, C, S); NaN: none
            # the discrete references' tie-break (TIE_BREAK): squared deviations, 0 in the other clusters
            # (no cluster with such draws: the (R, C, S) zeros are not made, their means are known, _zero_ties)
            drawn = any(c in self.single or c in self.sparse for c in clusters)
            sq, sq_obs = (np.zeros_like(nq) if drawn else None), np.zeros_like(self.per_cluster_obs)
            for j, (c, n, k) in enumerate(zip(clusters, n_cs, ks) if drawn else ()):
                draws = (self._single_rng.multinomial(n, np.full(int(k), 1.0 / k), size=(r, len(n)))
                         if c in self.single   # attempts independent: the uniform chooser's own draws (exact)
                         else self.relabelled[c] if c in self.sparse   # queries' counts permuted over the tools
                         else None)
                if draws is not None:
                    nq[:, j, :], sq[:, j, :] = _tv_runs(draws), _sq_runs(draws)
                    sq_obs[j] = _sq_runs(obs[c])
            nq[:, missing] = np.nan
            sq_obs[missing] = np.nan
            if sq is not None:
                sq[:, missing] = np.nan
            self.null_query_sims = _nanmean(nq, 2)    # (R, C): what the clusters' p-values read (1/S of the memory)
            self.null_query = _nanmean(_nanmean(nq, 1), 1)
            self.tie_sims = _zero_ties(r, missing) if sq is None else _nanmean(sq, 2)          # (R, C)
            self.tie_obs = _nanmean(sq_obs, 1)                                                  # (C,)
        self._null_multinomial(obs, clusters, ks, gen, n_null, n_cs)

    def _null_multinomial(self, obs, clusters, ks, gen, n_null, n_cs):
        """The uniform multinomial chooser's null draws (:attr:`null_stat`, :attr:`null_sims`), or None."""
        self.null_stat = None
        if n_null:
            # (N,) and (N, C): multinomial draws, or each cluster's mean from its exact law when they would be many
            self.null_stat, self.null_sims = uniform_null_means(gen, n_cs, ks, n_null, np.isnan(self.per_cluster_obs),
                                                                 self.study_exact)

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

    def _p_values(self, stat, null_query, null_multinomial, method=None, tie=None, known=(None, None)):
        """``p_value`` (query test unless every cluster is aggregated), ``p_value_multinomial`` and the method.

        ``tie``: (observed, null) secondary statistics that order equal values of the statistic (:data:`TIE_BREAK`)
        where the method names it. ``known``: the query and multinomial p-values without tie-break when already
        computed (:meth:`_cluster_p`), used instead of counting again."""
        def mc(null, tied=None):
            if tied is not None:   # lexicographic order (statistic, squared deviations): a finer exact reference
                same = np.abs(null - stat) <= 1e-12
                above = np.sum(null > stat + 1e-12) + np.sum(same & (tied[1] >= tied[0] - 1e-12))
                return float((1 + above) / (1 + len(null)))
            return float((1 + np.sum(null >= stat - 1e-12)) / (1 + len(null)))
        out = {"p_value_method": self.p_method if method is None else method}
        if null_multinomial is not None:
            out["p_value_multinomial"] = mc(null_multinomial) if known[1] is None else known[1]
        if out["p_value_method"].startswith((P_QUERY, P_EXACT)):
            tied = tie if TIE_BREAK in out["p_value_method"] else None
            out["p_value"] = known[0] if known[0] is not None and tied is None else mc(null_query, tied)
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
        n_runs, sd_runs, null_expected = self._cluster_runs
        kw: dict[str, Any] = {}
        if self.n_resamples:
            cal = _resolved(self._cal_cluster[i])
            cis = self._cluster_cis(level)
            kw = dict(ci=ConfidenceInterval(*cis[0][:, i]), ci_method="percentile",
                      ci_percentile=ConfidenceInterval(*cis[0][:, i]), ci_pooled=ConfidenceInterval(*cis[1][:, i]),
                      normalised_ci=ConfidenceInterval(*cis[2][:, i]),
                      standard_error=self._cluster_se[i])
            if cal is not None:
                kw.update(corrected=cal.estimate, corrected_ci=ConfidenceInterval(cal.ci_low, cal.ci_high),
                          corrected_method=cal.method + (" on multinomial replicates"
                                                         if self.clusters[i] in self._multinomial else ""))
        stat, pooled, null_pooled = (v[i] for v in self._cluster_floats)
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
        known = (None if nq is None else self._cluster_p_list("null_query_sims")[i],
                 None if nm is None else self._cluster_p_list("null_sims")[i])
        kw.update(self._p_values(stat, nq, nm, method, tie=tie, known=known))
        k = self.ks[i]
        return TVResult(
            metric=self.name, mean_over_runs=stat, sd_over_runs=sd_runs[i],
            pooled=pooled, n_runs=n_runs[i], null_expected=null_expected[i], null_expected_pooled=null_pooled,
            normalised=stat / (1 - 1 / k), normalised_pooled=pooled / (1 - 1 / k),
            confidence_level=level, **kw)

    @functools.cached_property
    def _cluster_stats(self) -> np.ndarray:
        """Every cluster's mean over its runs with a valid choice (NaN where none): ``mean_over_runs`` of
        :meth:`cluster_result`, (C,). The clusters valid in every run take one reduction along their rows (the sum
        and the division of ``row.mean()``: the same numbers), the others one at a time (issue 37: 2,000 clusters)."""
        obs = self.per_cluster_obs
        out = np.full(len(self.clusters), np.nan)
        finite = np.isfinite(obs)
        full = finite.all(1) if obs.shape[1] else np.zeros(len(obs), dtype=bool)
        out[full] = np.add.reduce(obs[full], axis=1) / obs.shape[1]
        for i in np.flatnonzero(~full).tolist():
            row = obs[i][finite[i]]
            if row.size:
                out[i] = float(row.mean())
        return out

    @functools.cached_property
    def _cluster_se(self) -> list:
        """Every cluster's ``standard_error`` (``np.nanstd`` of its replicate means, ddof 1) as Python floats. The
        clusters whose replicates hold no NaN take one ``nanstd`` along the rows of the transposed means (each row
        contiguous: the same pairwise sums as the cluster's own column, so the same numbers); the others one at a time
        (with their warnings), as before (issue 37: 28,000 calls at 2,000 clusters)."""
        b = self.boot_cluster_means                                                   # (R, C)
        out: list = [None] * b.shape[1]
        clean = np.flatnonzero(~np.isnan(b).any(0)) if b.shape[0] >= 2 else np.empty(0, dtype=int)
        if clean.size:
            for i, v in zip(clean.tolist(), np.nanstd(np.ascontiguousarray(b[:, clean].T), axis=1, ddof=1).tolist()):
                out[i] = v
        for i in np.setdiff1d(np.arange(b.shape[1]), clean).tolist():
            out[i] = float(np.nanstd(b[:, i], ddof=1))
        return out

    @functools.cached_property
    def _cluster_runs(self) -> tuple[list, list, list]:
        """Every cluster's number of runs with a valid choice, standard deviation over them (ddof 0; NaN where none)
        and the uniform chooser's expected TV averaged over them: ``n_runs``, ``sd_over_runs`` and ``null_expected``
        of :meth:`cluster_result`, as Python numbers. The clusters valid in every run take one reduction along their
        rows (the same sums as one row at a time: the same numbers), the others one at a time (issue 37)."""
        obs, null = self.per_cluster_obs, self.null_cluster_runs
        finite = np.isfinite(obs)
        n_runs = finite.sum(1).tolist()
        sd, expected = [np.nan] * len(obs), [np.nan] * len(obs)
        full = np.flatnonzero(finite.all(1) & ~np.isnan(null).any(1)) if obs.shape[1] else np.empty(0, dtype=int)
        for i, v, e in zip(full.tolist(), np.std(obs[full], axis=1).tolist(),
                           (np.add.reduce(null[full], axis=1) / obs.shape[1]).tolist()):
            sd[i], expected[i] = v, e
        for i in np.setdiff1d(np.arange(len(obs)), full).tolist():
            per_run = obs[i][finite[i]]
            sd[i] = float(np.std(per_run)) if per_run.size else np.nan
            expected[i] = _mean_of_finite(null[i][finite[i]])
        return n_runs, sd, expected

    @functools.cached_property
    def _cluster_floats(self) -> tuple[list, list, list]:
        """Every cluster's ``mean_over_runs``, ``pooled`` and ``null_expected_pooled`` as Python floats, converted
        in one ``tolist`` each rather than one ``float(array[i])`` per cluster (the same numbers; issue 37)."""
        return (self._cluster_stats.tolist(), np.asarray(self.pooled_cluster_obs, dtype=float).tolist(),
                np.asarray(self.null_cluster_pooled, dtype=float).tolist())

    def _cluster_p_list(self, sims: str) -> list:
        """:meth:`_cluster_p` as a list of Python floats (converted once). Cached."""
        cache = self.__dict__.setdefault("_cluster_p_lists", {})
        if sims not in cache:
            cache[sims] = np.asarray(self._cluster_p(sims), dtype=float).tolist()
        return cache[sims]

    def _cluster_p(self, sims: str) -> np.ndarray:
        """The Monte-Carlo p-value of every cluster at once against its column of the null draws ``sims``
        (``"null_sims"`` or ``"null_query_sims"``, (N, C)): the counts of :meth:`_p_values` (without tie-break) in one
        comparison instead of one per cluster (issue 37: 2,000 clusters x 7 groups x 2 metrics). Cached."""
        cache = self.__dict__.setdefault("_cluster_p_cache", {})
        if sims not in cache:
            null = getattr(self, sims)
            cache[sims] = (1 + np.sum(null >= self._cluster_stats[None, :] - 1e-12, axis=0)) / (1 + null.shape[0])
        return cache[sims]

    def _cluster_cis(self, level):
        """Every cluster's percentile intervals (of its mean over runs, pooled and normalised), computed for all
        clusters at once on first use: arrays (2, C) of (low, high)."""
        if getattr(self, "_cis", (None,))[0] != level:
            b = self.boot_cluster_means                                                   # (R, C)
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


#: Replicates x categories of one calibrated interval from which its belt searches take the compiled pass (issue 37:
#: 2,000 clusters of 5 tools at 2,000 replicates are 2 x 10^7 per metric). Loading numba costs about 0.2 s of CPU and
#: 0.1 GiB once; the compiled pass then computes each full pass over the errors in about 40 % of the CPU of NumPy's
#: (the same numbers: ``_resampling._belt_kernel``), and the replicates' TVs take their compiled pass too
#: (:func:`._vectorised.replicate_tv`). Smaller studies keep the NumPy passes unless numba is loaded.
COMPILED_BELT_SIZE = 1 << 22


def _compiled_belt(n_resamples: int, n_categories: int) -> None:
    """Load the compiled pass of the calibrated intervals' belt searches where one interval's errors (replicates x
    categories) hold at least :data:`COMPILED_BELT_SIZE` numbers (a no-op once loaded, or without numba).

    Examples
    --------
    >>> _compiled_belt(2000, 50)      # 10 clusters of 5 tools: the NumPy passes (nothing loaded here)
    """
    if n_resamples * n_categories >= COMPILED_BELT_SIZE:
        _belt_kernel(load=True)


def _expected_tv_uniform_of(pairs) -> list:
    """:func:`expected_tv_uniform` of every ``(n, k)`` pair, each distinct pair computed once (clusters of one
    study share their numbers of attempts: 14,000 calls for 2,000 clusters, a few dozen distinct)."""
    values = {nk: expected_tv_uniform(*nk) for nk in dict.fromkeys(pairs)}
    return [values[nk] for nk in pairs]


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
        # computed by the pool: its arguments (replicate counts) are not needed any more (issue 37: memory held by
        # every group until all are done); a cancelled task keeps them for result()
        self.future.add_done_callback(self._release)

    def _release(self, future):
        if not future.cancelled():
            self.call = None

    def result(self):
        if not self.done:
            call = self.call
            self.value = call[0](*call[1], **call[2]) if self.future.cancel() else self.future.result()
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
