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
from dataclasses import dataclass
from typing import cast

import numpy as np
import pandas as pd

from .._schema import STATUSES
from .._validation import check_by
from ..exceptions import SelectionLogError, problem
from ..io._counts import SelectionCounts, tool_columns

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


def pilot_groups(obj, by, *, source="pilot") -> tuple[list, str, list]:
    """Split a pilot (SelectionLog, SelectionCounts, Study or manifest path) into per-group, per-cluster arrays.

    Returns ``(groups, layout, by)``.
    """
    from ..io._load import load_selection_log
    from ..io._manifest import Study
    from ..io._selection_log import SelectionLog

    log = None
    if isinstance(obj, SelectionCounts):
        counts = obj
    elif isinstance(obj, Study) and obj.log is None:
        counts = obj.counts
    elif isinstance(obj, (SelectionLog, Study, str, bytes)) or hasattr(obj, "__fspath__"):
        log = obj.log if isinstance(obj, Study) else (obj if isinstance(obj, SelectionLog) else load_selection_log(obj))
        counts = None
    else:
        raise TypeError(f"`pilot` must be a SelectionLog, SelectionCounts, Study or manifest path; got "
                        f"{type(obj).__name__} instead.")
    design = tuple(log.design_columns) if log is not None else tuple(cast(SelectionCounts, counts).design_columns)
    by = check_by(by, design)
    if "run" in by:
        raise ValueError("`by` may not contain 'run': repeated runs are a variance component, not a group.")
    table = log.data if log is not None else cast(SelectionCounts, counts).table
    others = [c for c in design if c not in by and c != "run"]
    varying = [c for c in others if (table.groupby(by, observed=True)[c].nunique(dropna=False).max() if by
                                     else table[c].nunique(dropna=False)) > 1]
    if varying:
        warnings.warn(f"design column(s) {varying} vary within the `by` groups {by or '(all)'}; their levels are "
                      "pooled as if they were one condition (add them to `by` to plan each level)", UserWarning,
                      stacklevel=3)
    if log is not None:
        d = log.data
        grouped = list(d.groupby(by, sort=True, dropna=False, observed=True)) if by else [((), d)]
        ok_keys = [k for k, sub in grouped if _log_layout_ok(log, sub, by)]
        groups = _groups_from_log(log, by, source, [(k, sub) for k, sub in grouped if k in ok_keys])
        if len(ok_keys) < len(grouped):
            # count only the rows of the groups without the log layout (their counts are those of the whole log)
            rest_rows = np.zeros(len(d), bool)
            for k, sub in grouped:
                if k not in ok_keys:
                    rest_rows[d.index.get_indexer(sub.index)] = True
            counts = dataclasses.replace(log, data=d[rest_rows].reset_index(drop=True)).counts(level="query")
            rest = _groups_from_counts(counts, by, source)
            done = [tuple(g.keys.values()) for g in groups]
            groups += [g for g in rest if tuple(g.keys.values()) not in done]
            groups.sort(key=lambda g: tuple(str(v) for v in g.keys.values()))
        layouts = {g.layout for g in groups}
        return groups, (layouts.pop() if len(layouts) == 1 else "mixed"), by
    counts = cast(SelectionCounts, counts)   # set whenever `log` is None
    if counts.level != "query":
        raise ValueError("the variance decomposition needs query-level counts (queries are a component); got counts "
                         f"at level {counts.level!r} (count the log with level='query').")
    return _groups_from_counts(counts, by, source), "counts", by


def _log_layout_ok(log, d, by) -> bool:
    if log.weighted or "rotation" not in d.columns or d["rotation"].isna().any():
        return False
    keys = list(by) + ["cluster_id", "query_id", "run", "rotation"]
    return not d.duplicated(keys).any()


def _check_design(keys, cluster, n_q, source):
    if n_q < 2:
        raise SelectionLogError(problem(source, None, "query_id",
                                        f"group {keys}, cluster {cluster!r}: {n_q} query; the query component (and "
                                        "the query bootstrap) needs at least 2 queries per cluster"))


def _rows(status_counts) -> dict:
    total = int(sum(status_counts.values()))
    return {"total": total, "used": int(status_counts.get("ok", 0)),
            "excluded": {s: int(n) for s, n in status_counts.items() if s != "ok" and n}}


def _groups_from_log(log, by, source, grouped):
    catalog = log.catalog
    out = []
    for key, sub in grouped:
        key = key if isinstance(key, tuple) else (key,)
        keys = dict(zip(by, (k.item() if hasattr(k, "item") else k for k in key)))
        status = sub["status"].value_counts().to_dict()
        clusters = []
        parts = dict(list(sub.groupby("cluster_id", sort=False, observed=True)))
        for c in [c for c in catalog.clusters if c in parts]:
            part = parts[c]
            qc, queries = pd.factorize(part["query_id"], sort=True)
            sc, runs = pd.factorize(part["run"], sort=True)
            rc, rots = pd.factorize(part["rotation"], sort=True)
            n_q, n_s, n_r = len(queries), len(runs), len(rots)
            _check_design(keys, c, n_q, source)
            k = catalog.n_tools(c)
            ok = (part["status"] == "ok").to_numpy()
            idx = pd.Index(catalog.tools(c)).get_indexer(part["chosen_tool"]) + 1      # 0: no catalog tool
            x_api = np.zeros((n_q, n_s, n_r, k))
            sel = ok & (idx > 0)
            x_api[qc[sel], sc[sel], rc[sel], idx[sel] - 1] = 1.0
            o_api = x_api.sum(-1)
            ncand = np.unique(part["n_candidates"].to_numpy())
            x_pos = o_pos = None
            k_pos = None
            pos = part["chosen_position"].to_numpy(dtype=float, na_value=np.nan)
            if len(ncand) == 1 and np.isfinite(pos[ok]).any():
                k_pos = int(ncand[0])
                x_pos = np.zeros((n_q, n_s, n_r, k_pos))
                pk = ok & np.isfinite(pos)
                x_pos[qc[pk], sc[pk], rc[pk], pos[pk].astype(int) - 1] = 1.0
                o_pos = x_pos.sum(-1)
            clusters.append(ClusterData(c, k, k_pos, x_api, x_pos, o_api, o_pos, 1, n_q * n_s * n_r - len(part),
                                        list(queries), list(runs), list(rots)))
        out.append(GroupData(keys, "log", clusters, _rows(status)))
    return out


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
