"""The count table as the bias engine reads it: per cluster, per-query count tensors (Q, S, K) of the chosen
tool and of the chosen position, and the position labels (ranks, or the list positions shown) of each cluster."""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .._schema import STATUSES
from ..exceptions import DegenerateDataWarning
from ..io._counts import QueryArrays, position_columns, tool_columns

__all__: list[str] = []   # private to the bias computation (metrics/_bias.py, _bias_engine.py)


@dataclass
class _Target:
    """Per-query count tensors of one cluster for one target (api or pos)."""

    counts: np.ndarray  # (Q, S, K)
    k: int



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
        cache = self.__dict__.setdefault("_tool_index", {})   # k -> the columns' positions (once per k, not per
        at = cache.get(k)                                       # cluster: 2,000 clusters, issue 37)
        if at is None:
            at = cache[k] = np.array([self._tool_at[c] for c in tool_columns(k)], dtype=np.intp)
        return self.tool[rows[:, None], at].astype(float)


def _cluster_tensors(columns: _Columns, rows, catalog, cluster, runs, caught, keys, stacklevel=5):
    """:func:`_tensors` of the table rows ``rows`` (positions in ``columns``)."""
    tools = catalog.tools(cluster)
    k = len(tools)
    g = columns.query[rows]
    known = g >= 0
    if known.all():
        q_codes = np.unique(g, return_inverse=True)[1].reshape(-1)
    else:
        q_codes = np.zeros(len(rows), dtype=np.int64)     # cluster-level counts: no query id, one pseudo-query
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
    m = values.shape[1]
    # one bincount over (cell, column) pairs rather than one per column (per cluster: 2,000 clusters, issue 37)
    flat = (np.asarray(cell, dtype=np.intp)[:, None] * m + np.arange(m)).reshape(-1)
    return np.bincount(flat, weights=np.asarray(values, dtype=float).reshape(-1),
                       minlength=n_cells * m).reshape(n_cells, m)


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


def _group_tensors(columns: _Columns, parts: list, catalog, clusters: list, runs, caught, keys, stacklevel=6):
    """:func:`_cluster_tensors` of every cluster of a group (``parts[i]``: the rows of ``clusters[i]``), the same
    arrays bit for bit and the same warnings in the same order, from one gather and one ``bincount`` per number of
    tools rather than a dozen NumPy calls per cluster (issue 37: 2,000 clusters x 7 groups cost 0.6 s in calls).

    Also returns, per cluster, whether any of its rows has a known position (``int(columns.pos[part].sum()) > 0``).
    The tensors are views of one array per number of tools; the counts are integers, so every sum is exact (and a
    bin of the shared ``bincount`` adds the same rows in the same order as the cluster's own)."""
    tools = [catalog.tools(c) for c in clusters]
    by_k: dict = {}
    for i, t in enumerate(tools):
        by_k.setdefault(len(t), []).append(i)
    api: list = [None] * len(clusters)
    pos: list = [None] * len(clusters)
    seen: list = [False] * len(clusters)
    kps: list = [None] * len(clusters)           # one list length (int), or the sorted lengths (list: a warning)
    n_runs = len(runs)
    for k, members in by_k.items():
        rows = np.concatenate([parts[i] for i in members])
        sizes = np.array([len(parts[i]) for i in members])
        who = np.repeat(np.arange(len(members)), sizes)                      # the member of each row
        g = columns.query[rows]
        known = g >= 0
        span = int(g.max(initial=-1)) + 1
        key = who[known].astype(np.int64) * span + g[known]
        uniq, inv = np.unique(key, return_inverse=True)
        first = np.searchsorted(uniq, np.arange(len(members), dtype=np.int64) * span)   # each member's first query
        q_codes = np.zeros(len(rows), dtype=np.int64)   # no query id: one pseudo-query (code 0), as the cluster's own
        q_codes[known] = inv.reshape(-1) - first[who[known]]
        n_q = np.maximum(np.diff(np.append(first, len(uniq))), 1)            # distinct known queries, at least 1
        offset = np.concatenate([[0], np.cumsum(n_q * n_runs)])               # each member's first cell
        cell = offset[who] + q_codes * n_runs + np.searchsorted(runs, columns.run[rows])
        api_all = _cell_sums(cell, columns.tools(rows, k), int(offset[-1]))
        pos_n = columns.pos[rows].astype(float)
        row_pos = pos_n.sum(1)
        pos_known = row_pos > 0
        totals = np.bincount(who, weights=row_pos, minlength=len(members))
        n_cand, n_code = np.unique(columns.n_candidates[rows][pos_known], return_inverse=True)
        pairs = np.unique(who[pos_known].astype(np.int64) * len(n_cand) + n_code.reshape(-1))   # (member, length)
        for j, i in enumerate(members):
            api[i] = _Target(api_all[offset[j]:offset[j + 1]].reshape(int(n_q[j]), n_runs, k), k)
            seen[i] = int(totals[j]) > 0
        lengths: dict = {}
        for j, n in zip((pairs // max(len(n_cand), 1)).tolist(), (pairs % max(len(n_cand), 1)).tolist()):
            lengths.setdefault(j, []).append(n)
        by_kp: dict = {}
        for j, ns in lengths.items():   # each member's list lengths (codes into n_cand, ascending)
            kps[members[j]] = int(n_cand[ns[0]]) if len(ns) == 1 else sorted(n_cand[ns].tolist())
            if len(ns) == 1:
                by_kp.setdefault(kps[members[j]], []).append(j)
        for kp, js in by_kp.items():
            take = pos_known & np.isin(who, js)
            pos_all = _cell_sums(cell[take], pos_n[take][:, :kp], int(offset[-1]))
            for j in js:
                pos[members[j]] = _Target(pos_all[offset[j]:offset[j + 1]].reshape(int(n_q[j]), n_runs, kp), kp)
    for i, c in enumerate(clusters):   # the warnings in the clusters' order, as one call per cluster gives them
        if isinstance(kps[i], list):
            msg = (f"group {keys}, cluster {c}: lists of different lengths {kps[i]} were "
                   "shown; the position distribution is undefined and delta_pos is skipped for this cluster")
            warnings.warn(msg, DegenerateDataWarning, stacklevel=stacklevel)
            caught.append(msg)
    return [(api[i], pos[i], tools[i]) for i in range(len(clusters))], seen
