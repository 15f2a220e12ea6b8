"""From a SelectionLog (or its counts) to weighted choice cells, one set of cells per ``by`` group.

A *cell* is one (query, list shown in order, chosen position) with a weight: the number of attempts that
showed that list for that query and chose that position. Identical attempts (the runs of a study repeat the
same lists) are merged, so the likelihood is evaluated once per distinct cell.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from .._schema import COUNT_COLUMN

__all__ = ["GroupData", "prepare_groups", "EXCLUSION_REASONS"]

#: Why an attempt is not used by the choice model (besides its ``status``).
EXCLUSION_REASONS = ("ordering_unknown", "chosen_not_shown", "position_mismatch", "single_tool_set")

#: Message when the input has no ordering at all.
NO_ORDERING_MESSAGE = ("the choice model needs the list shown at each attempt (`ordering`, or a `rotation` the catalog "
                       "turns into one); no attempt of {what} has one")


@dataclass
class GroupData:
    """The cells of one ``by`` group.

    Attributes
    ----------
    keys : dict
        Values of the ``by`` columns.
    tools : list of str
        Tool ids that appear in a used set (the model's tool index).
    items : ndarray (C, K) of int
        Tool index of the tool shown at each position of each cell (-1 = padding, sets shorter than K).
    chosen : ndarray (C,) of int
        0-based chosen position of each cell.
    weight : ndarray (C,) of float
        Attempts in the cell.
    query : ndarray (C,) of int
        Query index of the cell (the clustering unit of the sandwich and of the bootstrap).
    query_labels : list
        (cluster_id, query_id) of every query index.
    cluster : ndarray (C,) of object
        ``cluster_id`` of the cell (for the per-cluster tables and the implied bias).
    n_used, n_excluded : int
        Attempts used and excluded; ``excluded`` by reason.
    """

    keys: dict
    tools: list
    items: np.ndarray
    chosen: np.ndarray
    weight: np.ndarray
    query: np.ndarray
    query_labels: list
    cluster: np.ndarray
    n_used: int
    n_excluded: int
    excluded: dict = field(default_factory=dict)
    queries_known: bool = True
    design: pd.DataFrame | None = None

    @property
    def k_max(self) -> int:
        return int(self.items.shape[1])

    def set_sizes(self) -> np.ndarray:
        return (self.items >= 0).sum(axis=1)


def _frame_of(obj):
    """(frame, catalog, queries_known) from a SelectionLog, a Study or a SelectionCounts."""
    from ..io import SelectionCounts, SelectionLog

    if hasattr(obj, "log") and hasattr(obj, "catalog") and not isinstance(obj, (SelectionLog, SelectionCounts)):
        obj = obj.log                                              # a Study
    if isinstance(obj, SelectionLog):
        d = obj.data
        cols = list(obj.design_columns) + ["cluster_id", "query_id", "ordering", "status", "chosen_tool",
                                          "chosen_position"]
        f = d[cols].copy()
        f["_w"] = d[COUNT_COLUMN].to_numpy(dtype=float) if obj.weighted else 1.0
        return f, obj.catalog, list(obj.design_columns), True
    if isinstance(obj, SelectionCounts):
        if obj.cells is None:
            raise ValueError("the counts have no `cells` table (which tool was chosen under which list); count the "
                             "log with cells, e.g. `log.counts()`.")
        f = obj.cells.copy()
        f["query_id"] = pd.NA                                       # the cells do not keep the query
        f["_w"] = f["count"].to_numpy(dtype=float)
        return f, obj.catalog, list(obj.design_columns), False
    raise ValueError("`log_or_counts` must be a SelectionLog, a SelectionCounts or a Study; "
                     f"got {type(obj).__name__} instead.")


def _missing(v) -> bool:
    return v is None or v is pd.NA or (isinstance(v, float) and np.isnan(v))


def prepare_groups(obj, by, *, mismatch="exclude", extra=()):
    """Split the input into ``by`` groups of weighted cells.

    Returns
    -------
    groups : list of GroupData
    catalog : ToolCatalog
    design_columns : list of str
    """
    frame, catalog, design, queries_known = _frame_of(obj)
    missing_by = [b for b in by if b not in design and b != "cluster_id"]
    if missing_by:
        raise ValueError(f"`by` names column(s) {missing_by} that the selection log does not have; "
                         f"available: {sorted(design + ['cluster_id'])}.")
    frame = frame[frame["_w"] > 0]
    for e in extra:
        if e not in design:
            raise ValueError(f"`interactions` names column {e!r} that the selection log does not have; "
                             f"design columns: {design}.")
    keys = list(by) + [e for e in extra if e not in by] + ["cluster_id", "query_id", "ordering", "status",
                                                           "chosen_tool", "chosen_position"]
    g = frame.groupby(keys, sort=True, dropna=False, observed=True)["_w"].sum().reset_index()
    if not len(g):
        raise ValueError("the selection log has no attempts.")
    if g["ordering"].isna().all():
        raise ValueError(NO_ORDERING_MESSAGE.format(what="the log"))
    # classify each distinct (ordering, status, chosen tool, recorded position) once
    status = g["status"].astype(str).to_numpy()
    ordering = g["ordering"].astype(object).to_numpy()
    chosen_tool = g["chosen_tool"].astype(object).to_numpy()
    chosen_pos = g["chosen_position"].to_numpy(dtype=float, na_value=np.nan)
    reason = np.where(status != "ok", status, None).astype(object)
    pos0 = np.full(len(g), -1, dtype=np.int64)
    parsed: dict = {}
    memo: dict = {}
    for i in np.flatnonzero(reason == None):  # noqa: E711 (element-wise on an object array)
        o = ordering[i]
        if _missing(o):
            reason[i] = "ordering_unknown"
            continue
        key = (o, chosen_tool[i], chosen_pos[i])
        if key not in memo:
            shown = parsed.setdefault(o, str(o).split("|"))
            t = chosen_tool[i]
            p_tool = shown.index(t) if t in shown else -1
            p_rec = int(chosen_pos[i]) - 1 if np.isfinite(chosen_pos[i]) else p_tool
            if len(shown) < 2:
                memo[key] = ("single_tool_set", -1)
            elif p_tool < 0:
                memo[key] = ("chosen_not_shown", -1)
            elif p_rec != p_tool:
                if mismatch == "exclude":
                    memo[key] = ("position_mismatch", -1)
                elif mismatch == "tool":
                    memo[key] = (None, p_tool)
                else:
                    memo[key] = (None, p_rec) if 0 <= p_rec < len(shown) else ("position_mismatch", -1)
            else:
                memo[key] = (None, p_tool)
        reason[i], pos0[i] = memo[key]
    g["_reason"] = pd.Series(reason, index=g.index, dtype=object)
    g["_pos0"] = pos0
    groups = []
    by_iter = g.groupby(list(by), sort=True, dropna=False, observed=True) if by else [((), g)]
    for kv, sub in by_iter:
        kv = kv if isinstance(kv, tuple) else (kv,)
        gd = _group(dict(zip(by, [_plain(v) for v in kv])), sub, catalog, queries_known)
        gd.design = sub[sub["_reason"].isna()][list(extra)].reset_index(drop=True) if extra else None
        groups.append(gd)
    return groups, catalog, design


def _plain(v):
    return v.item() if hasattr(v, "item") else v


def _group(keys, sub, catalog, queries_known) -> GroupData:
    w = sub["_w"].to_numpy(dtype=float)
    reason = sub["_reason"].to_numpy(dtype=object)
    used = pd.isna(sub["_reason"]).to_numpy()
    excluded: dict = {}
    for r, ww in zip(reason[~used], w[~used]):
        excluded[r] = excluded.get(r, 0) + int(round(ww))
    u = sub[used]
    if not len(u):
        return GroupData(keys, [], np.zeros((0, 2), np.int64), np.zeros(0, np.int64), np.zeros(0),
                         np.zeros(0, np.int64),
                         [], np.zeros(0, object), 0, int(round(w.sum())), excluded, queries_known)
    orderings = u["ordering"].astype(str).to_numpy()
    uniq, inv = np.unique(orderings, return_inverse=True)
    lists = [o.split("|") for o in uniq]
    # tools in catalog order first (so that the default reference is the catalog's first tool), then the rest
    present = {t for lst in lists for t in lst}
    cat_order = [t for t in catalog.table["tool_id"].astype(str) if t in present]
    extra = sorted(present - set(cat_order))
    tools = list(dict.fromkeys(cat_order + extra))
    index = {t: i for i, t in enumerate(tools)}
    k = max(len(lst) for lst in lists)
    table = np.full((len(lists), k), -1, dtype=np.int64)
    for r, lst in enumerate(lists):
        table[r, :len(lst)] = [index[t] for t in lst]
    items = table[inv]
    qkey = list(zip(u["cluster_id"].astype(str), u["query_id"].astype(object)))
    if queries_known:
        qlab, qidx = np.unique(np.array([f"{c}\x00{q}" for c, q in qkey], dtype=object), return_inverse=True)
        query_labels = [tuple(s.split("\x00", 1)) for s in qlab]
    else:                     # counts: no queries, each cell is its own unit (attempts assumed independent)
        qidx = np.arange(len(u))
        query_labels = [(c, None) for c, _ in qkey]
    return GroupData(keys, tools, items, u["_pos0"].to_numpy(np.int64), u["_w"].to_numpy(float),
                     np.asarray(qidx, np.int64), query_labels, u["cluster_id"].astype(str).to_numpy(object),
                     int(round(u["_w"].sum())), int(round(w[~used].sum())), excluded, queries_known)
