"""Per-attempt arrays of a pilot study, per group and cluster: what the variance decomposition works on.

Two layouts, chosen from what the input keeps:

* ``"log"``: a :class:`SelectionLog` whose attempts carry a ``rotation`` and are unique per (group, cluster,
  query, run, rotation). One attempt per cell of the crossed query x run x rotation design, so the rotation
  (ordering) component within a query is separable from the attempt-level noise.
* ``"counts"``: :class:`SelectionCounts` at query level (or a log without rotations). The cells are
  (query, run) with all their attempts summed; rotations within a query and attempt noise are not separable.

Every attempt of the design is kept: one without a valid choice contributes a zero to the linearised
statistic (the rate is a ratio of valid choices to valid attempts), so the design stays balanced and nothing is
dropped. An attempt absent from a complete design (a (query, run, rotation) cell with no row) counts as an
attempt without a valid choice; :attr:`ClusterData.n_absent` says how many.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, cast

import numpy as np
import pandas as pd

from .._schema import STATUSES
from .._validation import check_by
from ..exceptions import SelectionLogError, problem
from ..io import SelectionCounts
from ..io._counts import tool_columns

__all__ = ["ClusterData", "GroupData", "pilot_groups"]


@dataclass(frozen=True)
class ClusterData:
    """One cluster of one group: indicator sums per design cell.

    Attributes
    ----------
    cluster : str
    k : int
        Tools in the cluster (catalog).
    k_pos : int or None
        Length of the lists shown (positions); None when positions are unknown or mixed.
    x_api : numpy.ndarray, shape (Q, S, R, K)
        Valid choices of each tool per cell (0/1 in the log layout).
    x_pos : numpy.ndarray, shape (Q, S, R, k_pos) or None
        Valid choices of each position per cell.
    o_api, o_pos : numpy.ndarray, shape (Q, S, R)
        Valid choices (with a known position, for ``o_pos``) per cell.
    n : int
        Attempts per cell (1 in the log layout; the rotations per query in the counts layout).
    n_absent : int
        Attempts of the balanced design with no row (counted as attempts without a valid choice).
    queries, runs, rotations : list
    """

    cluster: str
    k: int
    k_pos: int | None
    x_api: np.ndarray
    x_pos: np.ndarray | None
    o_api: np.ndarray
    o_pos: np.ndarray | None
    n: int
    n_absent: int
    queries: list
    runs: list
    rotations: list

    @property
    def shape(self):
        return self.x_api.shape[:3]


@dataclass(frozen=True)
class GroupData:
    keys: dict
    layout: str
    clusters: list
    rows: dict


def pilot_groups(obj: Any, by: str | Sequence[str] | None, *,
                 source: str = "pilot") -> tuple[list[GroupData], str, list[str]]:
    """Split a pilot (SelectionLog, SelectionCounts, Study or manifest path) into per-group, per-cluster arrays.

    Parameters
    ----------
    obj : SelectionLog, SelectionCounts, Study or path
        The pilot.
    by : str or sequence of str or None
        Grouping columns (design columns other than ``run``).
    source : str, default "pilot"
        Name of the input in error messages.

    Returns
    -------
    groups : list of GroupData
    layout : {"log", "counts", "mixed"}
    by : list of str
        The checked grouping columns.

    Examples
    --------
    >>> from toolbias_stats.simulate import simulate_selection_log
    >>> log = simulate_selection_log(n_clusters=2, n_tools=3, n_queries=4, n_runs=2, rng=0).log
    >>> groups, layout, by = pilot_groups(log, "model")
    >>> layout, by, groups[0].clusters[0].shape
    ('log', ['model'], (4, 2, 3))
    """
    log, counts = _resolve_pilot(obj)
    design = tuple(log.design_columns) if log is not None else tuple(cast(SelectionCounts, counts).design_columns)
    by = check_by(by, design)
    if "run" in by:
        raise ValueError("`by` may not contain 'run': repeated runs are a variance component, not a group.")
    _warn_pooled(log.data if log is not None else cast(SelectionCounts, counts).table, design, by)
    if log is not None:
        groups = _log_groups(log, by, source)
        layouts = {g.layout for g in groups}
        return groups, (layouts.pop() if len(layouts) == 1 else "mixed"), by
    counts = cast(SelectionCounts, counts)   # set whenever `log` is None
    if counts.level != "query":
        raise ValueError("the variance decomposition needs query-level counts (queries are a component); got counts "
                         f"at level {counts.level!r} (count the log with level='query').")
    return _groups_from_counts(counts, by, source), "counts", by


def _resolve_pilot(obj):
    """``(log, counts)`` of a pilot: exactly one of them is set."""
    from ..io import SelectionLog, Study, load_selection_log

    if isinstance(obj, SelectionCounts):
        return None, obj
    if isinstance(obj, Study) and obj.log is None:
        return None, obj.counts
    if isinstance(obj, Study):
        return obj.log, None
    if isinstance(obj, SelectionLog):
        return obj, None
    if isinstance(obj, (str, bytes)) or hasattr(obj, "__fspath__"):
        return load_selection_log(obj), None
    raise TypeError(f"`pilot` must be a SelectionLog, SelectionCounts, Study or manifest path; got "
                    f"{type(obj).__name__} instead.")


def _warn_pooled(table, design, by):
    """Warn when design columns other than ``by`` and ``run`` vary within the groups (their levels are pooled)."""
    others = [c for c in design if c not in by and c != "run"]
    varying = [c for c in others if (table.groupby(by, observed=True)[c].nunique(dropna=False).max() if by
                                     else table[c].nunique(dropna=False)) > 1]
    if varying:
        warnings.warn(f"design column(s) {varying} vary within the `by` groups {by or '(all)'}; their levels are "
                      "pooled as if they were one condition (add them to `by` to plan each level)", UserWarning,
                      stacklevel=4)


class _LogCodes:
    """The log's columns that the arrays need, factorised once (sorted codes; -1: missing) or as numpy arrays."""

    def __init__(self, d):
        self.query, self.query_values = pd.factorize(d["query_id"], sort=True)
        self.run, self.run_values = pd.factorize(d["run"], sort=True)
        self.cluster, self.cluster_values = pd.factorize(d["cluster_id"], sort=True)
        self.tool, self.tool_values = pd.factorize(d["chosen_tool"], sort=True)
        has_rotation = "rotation" in d.columns
        self.rotation, self.rotation_values = (pd.factorize(d["rotation"], sort=True) if has_rotation
                                               else (np.full(len(d), -1), None))
        self.rotation_missing = d["rotation"].isna().to_numpy() if has_rotation else None
        self.levels = {name: list(v) for name, v in (("query", self.query_values), ("run", self.run_values),
                                                      ("rotation", self.rotation_values)) if v is not None}
        self._tool_index: dict = {}
        self.ok = (d["status"] == "ok").to_numpy()
        self.n_candidates = d["n_candidates"].to_numpy()
        self.position = d["chosen_position"].to_numpy(dtype=float, na_value=np.nan)

    def tool_index(self, catalog, cluster):
        """Position in the cluster's catalog tools of each tool code, -1 for other tools; code -1 (no tool) at the
        end, so that ``tool_index(...)[self.tool]`` is ``Index(tools).get_indexer(chosen_tool)``."""
        if cluster not in self._tool_index:
            self._tool_index[cluster] = np.append(pd.Index(catalog.tools(cluster)).get_indexer(self.tool_values), -1)
        return self._tool_index[cluster]


def _log_groups(log, by, source):
    """Groups of a log: the log layout where it holds, query-level counts for the other groups."""
    d = log.data
    if by:
        keyed = d[by].reset_index(drop=True)
        grouped = [(k, sub.index.to_numpy()) for k, sub in keyed.groupby(by, sort=True, dropna=False, observed=True)]
    else:
        grouped = [((), np.arange(len(d)))]
    codes = _LogCodes(d)
    ok_keys = [k for k, rows in grouped if _log_layout_ok(log, codes, rows)]
    groups = _groups_from_log(log, by, source, [(k, rows) for k, rows in grouped if k in ok_keys], codes)
    if len(ok_keys) < len(grouped):
        # count only the rows of the groups without the log layout (their counts are those of the whole log)
        rest_rows = np.zeros(len(d), bool)
        for k, rows in grouped:
            if k not in ok_keys:
                rest_rows[rows] = True
        counts = dataclasses.replace(log, data=d[rest_rows].reset_index(drop=True)).counts(level="query")
        rest = _groups_from_counts(counts, by, source)
        done = [tuple(g.keys.values()) for g in groups]
        groups += [g for g in rest if tuple(g.keys.values()) not in done]
        groups.sort(key=lambda g: tuple(str(v) for v in g.keys.values()))
    return groups


def _log_layout_ok(log, codes, rows) -> bool:
    """One attempt per (cluster, query, run, rotation) of the group, each with a rotation."""
    if log.weighted or codes.rotation_missing is None or codes.rotation_missing[rows].any():
        return False
    # codes + 1: a missing value is one more level (as DataFrame.duplicated treats it)
    parts = [codes.cluster[rows] + 1, codes.query[rows] + 1, codes.run[rows] + 1, codes.rotation[rows] + 1]
    dims = (len(codes.cluster_values) + 1, len(codes.query_values) + 1, len(codes.run_values) + 1,
            len(codes.rotation_values) + 1)
    key = np.ravel_multi_index(parts, dims)
    return len(np.unique(key)) == len(key)


def _check_design(keys, cluster, n_q, source):
    if n_q < 2:
        raise SelectionLogError(problem(source, None, "query_id",
                                        f"group {keys}, cluster {cluster!r}: {n_q} query; the query component (and "
                                        "the query bootstrap) needs at least 2 queries per cluster"))


def _rows(status_counts) -> dict:
    total = int(sum(status_counts.values()))
    return {"total": total, "used": int(status_counts.get("ok", 0)),
            "excluded": {s: int(n) for s, n in status_counts.items() if s != "ok" and n}}


def _local(codes, values):
    """Codes of a subset renumbered as ``pd.factorize(subset, sort=True)`` numbers them, and the subset's levels
    (``values``: the list of all levels)."""
    present = np.flatnonzero(np.bincount(codes[codes >= 0], minlength=len(values)))
    lookup = np.full(len(values) + 1, -1)          # the last entry: code -1 (missing) stays -1
    lookup[present] = np.arange(len(present))
    return lookup[codes], [values[i] for i in present]


def _groups_from_log(log, by, source, grouped, codes):
    catalog = log.catalog
    status = log.data["status"]
    out = []
    for key, rows in grouped:
        key = key if isinstance(key, tuple) else (key,)
        keys = dict(zip(by, (k.item() if hasattr(k, "item") else k for k in key)))
        cl = codes.cluster[rows]
        present = {codes.cluster_values[i]: i for i in np.unique(cl[cl >= 0])}
        clusters = [_cluster_from_log(catalog, codes, rows[cl == present[c]], c, keys, source)
                    for c in catalog.clusters if c in present]
        out.append(GroupData(keys, "log", clusters, _rows(status.iloc[rows].value_counts().to_dict())))
    return out


def _cluster_from_log(catalog, codes, rows, c, keys, source):
    """The log-layout arrays of one cluster of one group (``rows``: its row positions)."""
    qc, queries = _local(codes.query[rows], codes.levels["query"])
    sc, runs = _local(codes.run[rows], codes.levels["run"])
    rc, rots = _local(codes.rotation[rows], codes.levels["rotation"])
    n_q, n_s, n_r = len(queries), len(runs), len(rots)
    _check_design(keys, c, n_q, source)
    k = catalog.n_tools(c)
    ok = codes.ok[rows]
    idx = codes.tool_index(catalog, c)[codes.tool[rows]] + 1      # 0: no catalog tool
    x_api = np.zeros((n_q, n_s, n_r, k))
    sel = ok & (idx > 0)
    x_api[qc[sel], sc[sel], rc[sel], idx[sel] - 1] = 1.0
    o_api = x_api.sum(-1)
    ncand = np.unique(codes.n_candidates[rows])
    x_pos = o_pos = None
    k_pos = None
    pos = codes.position[rows]
    if len(ncand) == 1 and np.isfinite(pos[ok]).any():
        k_pos = int(ncand[0])
        x_pos = np.zeros((n_q, n_s, n_r, k_pos))
        pk = ok & np.isfinite(pos)
        x_pos[qc[pk], sc[pk], rc[pk], pos[pk].astype(int) - 1] = 1.0
        o_pos = x_pos.sum(-1)
    return ClusterData(c, k, k_pos, x_api, x_pos, o_api, o_pos, 1, n_q * n_s * n_r - len(rows), queries, runs, rots)


def _groups_from_counts(counts, by, source):
    tab = counts.table
    catalog = counts.catalog
    out = []
    grouped = list(tab.groupby(by, sort=True, dropna=False, observed=True)) if by else [((), tab)]
    status_cols = [f"n_{s}" for s in STATUSES]
    for key, sub in grouped:
        key = key if isinstance(key, tuple) else (key,)
        keys = dict(zip(by, (k.item() if hasattr(k, "item") else k for k in key)))
        status = {s: int(sub[f"n_{s}"].sum()) for s in STATUSES}
        clusters = []
        present = set(sub["cluster_id"].astype(str))
        for c in [c for c in catalog.clusters if c in present]:
            part = sub[sub["cluster_id"].astype(str) == c]
            qc, queries = pd.factorize(part["query_id"].astype(str), sort=True)
            sc, runs = pd.factorize(part["run"], sort=True)
            n_q, n_s = len(queries), len(runs)
            _check_design(keys, c, n_q, source)
            k = catalog.n_tools(c)
            n_att = np.zeros((n_q, n_s))
            np.add.at(n_att, (qc, sc), part[status_cols].to_numpy(float).sum(1))
            n = int(n_att.max())
            x_api = np.zeros((n_q, n_s, 1, k))
            np.add.at(x_api, (qc, sc, 0), part[tool_columns(k)].to_numpy(float))
            pos_cols = [col for col in part.columns if col.startswith("pos_")]
            pos_n = part[pos_cols].to_numpy(float)
            known = pos_n.sum(1) > 0
            ncand = np.unique(part["n_candidates"].to_numpy()[known]) if known.any() else []
            x_pos = o_pos = None
            k_pos = None
            if len(ncand) == 1:
                k_pos = int(ncand[0])
                x_pos = np.zeros((n_q, n_s, 1, k_pos))
                np.add.at(x_pos, (qc, sc, 0), pos_n[:, :k_pos])
                o_pos = x_pos.sum(-1)
            clusters.append(ClusterData(c, k, k_pos, x_api, x_pos, x_api.sum(-1), o_pos, n,
                                        int(n * n_q * n_s - n_att.sum()), list(queries), list(runs), []))
        out.append(GroupData(keys, "counts", clusters, _rows(status)))
    return out
