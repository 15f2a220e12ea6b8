"""The model's data: counts per (LLM, cluster, ordering), and per prompt (LLM, cluster, query, ordering).

``_design(counts, by, mismatch)`` turns the ``cells`` of a :class:`SelectionCounts` into multinomial
rows (what the main-effects model and the per-cluster position model need). The query-level variants
also need to know which attempts belong to one query; the counts do not keep that pairing, so
``_attach_prompts(design, log, ...)`` counts the rows of the :class:`SelectionLog` per prompt, with the
same exclusions, and checks that the prompts add up to the design's rows exactly.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ._common import _natural


@dataclass
class _Prompts:
    """Per-prompt counts: one row per (LLM, cluster, query, ordering) with its valid choices by position."""

    row: np.ndarray           # (Rq,) the design row (LLM, cluster, ordering) of each prompt
    query: np.ndarray         # (Rq,) global query index (an LLM's query in a cluster)
    y: np.ndarray             # (Rq, P) valid choices per position
    query_llm: np.ndarray     # (Q,)
    query_cluster: np.ndarray  # (Q,)
    query_ids: list           # (Q,) the query_id of each query

    @property
    def n(self):
        return self.y.sum(1)

    @property
    def Q(self):
        return len(self.query_ids)

    @property
    def max_repeats(self) -> int:
        return int(self.n.max()) if len(self.n) else 0


@dataclass
class _Design:
    llms: list
    llm_keys: list
    clusters: list
    tools: list               # per cluster: tool ids (catalog order, shown at least once)
    K: np.ndarray             # (C,) tools per cluster
    P: int                    # longest list shown
    row_llm: np.ndarray       # (R,)
    row_cluster: np.ndarray   # (R,)
    row_len: np.ndarray       # (R,) positions shown
    row_tools: np.ndarray     # (R, P) tool index (within the cluster) at each position, -1 = padding
    y: np.ndarray             # (R, P) valid choices per position
    orderings: list           # (R,) the ordering strings
    rows: dict
    rows_by_llm: dict
    prompts: _Prompts | None = None  # per-prompt counts (query-level variants only)

    @property
    def n(self):
        return self.y.sum(1)

    @property
    def M(self):
        return len(self.llms)

    @property
    def C(self):
        return len(self.clusters)

    @property
    def Kmax(self):
        return int(self.K.max())

    def cell_counts(self) -> np.ndarray:
        """(M, C) valid choices per (LLM, cluster)."""
        out = np.zeros((self.M, self.C))
        np.add.at(out, (self.row_llm, self.row_cluster), self.n)
        return out

    def tool_counts(self) -> np.ndarray:
        """(M, C, Kmax) valid choices per tool."""
        out = np.zeros((self.M, self.C, self.Kmax))
        r, p = np.nonzero(self.row_tools >= 0)
        np.add.at(out, (self.row_llm[r], self.row_cluster[r], self.row_tools[r, p]), self.y[r, p])
        return out

    def position_counts(self) -> np.ndarray:
        """(M, P) valid choices per position."""
        out = np.zeros((self.M, self.P))
        np.add.at(out, self.row_llm, self.y)
        return out

    def cell_position_counts(self) -> np.ndarray:
        """(M, C, P) valid choices per position within each (LLM, cluster)."""
        out = np.zeros((self.M, self.C, self.P))
        np.add.at(out, (self.row_llm, self.row_cluster), self.y)
        return out

    def min_per_tool(self) -> float:
        cc = self.cell_counts()
        obs = cc > 0
        return float((cc / self.K[None, :])[obs].min())


def _labels(d, by) -> np.ndarray:
    if by:
        labels = d[by].astype(str).agg(", ".join, axis=1) if len(by) > 1 else d[by[0]].astype(str)
    else:
        labels = pd.Series("all", index=d.index)
    return labels.astype(object).to_numpy()


def _classify(d, mismatch):
    """Per row of a cells-like frame: the exclusion reason (None = used) and the 0-based chosen position."""
    n_cells = len(d)
    reason = np.full(n_cells, None, dtype=object)
    status = d["status"].astype(str).to_numpy()
    reason[status != "ok"] = status[status != "ok"]
    ordering = d["ordering"].astype(object).to_numpy()
    unknown = np.array([o is None or o is pd.NA or (isinstance(o, float) and np.isnan(o)) for o in ordering])
    reason[(reason == None) & unknown] = "ordering_unknown"  # noqa: E711 (element-wise on an object array)
    live = np.flatnonzero(reason == None)  # noqa: E711
    chosen_tool = d["chosen_tool"].astype(object).to_numpy()
    chosen_pos = d["chosen_position"].to_numpy(dtype=float, na_value=np.nan)
    pos0 = np.full(n_cells, -1, dtype=np.int64)
    for i in live:
        shown = str(ordering[i]).split("|")
        t = chosen_tool[i]
        p_tool = shown.index(t) if t in shown else -1
        p_rec = int(chosen_pos[i]) - 1 if np.isfinite(chosen_pos[i]) else p_tool
        if p_tool < 0 and mismatch != "position":
            reason[i] = "chosen_not_shown"
        elif p_rec != p_tool and p_rec >= 0:
            if mismatch == "exclude":
                reason[i] = "position_mismatch"
            elif mismatch == "tool":
                pos0[i] = p_tool
            else:
                pos0[i] = p_rec
        else:
            pos0[i] = p_tool
    return reason, pos0, ordering


def _cluster_view(cells, catalog):
    """Cells whose list offered other tools too (issue 20) seen as the cluster's tools as shown: the ordering
    restricted to the cluster's tools and the recorded position turned into the rank among them (the model's
    positions are those of the cluster's tools; unchanged when every list is the cluster's tools)."""
    members = {c: set(catalog.tools(c)) for c in catalog.clusters}
    orderings = cells["ordering"].astype(object).to_numpy()
    clusters = cells["cluster_id"].astype(str).to_numpy()
    extra = np.array([isinstance(o, str) and any(t not in members.get(c, ()) for t in o.split("|"))
                      for o, c in zip(orderings, clusters)], dtype=bool)
    if not extra.any():
        return cells
    d = cells.copy()
    pos = d["chosen_position"].to_numpy(dtype=float, na_value=np.nan)
    new_o, new_p = list(orderings), pos.copy()
    for i in np.flatnonzero(extra):
        shown = orderings[i].split("|")
        m = members.get(clusters[i], set())
        new_o[i] = "|".join(t for t in shown if t in m)
        p = int(pos[i]) if np.isfinite(pos[i]) else 0
        new_p[i] = (sum(t in m for t in shown[:p]) if 1 <= p <= len(shown) and shown[p - 1] in m
                    else np.nan)
    d["ordering"] = pd.array(new_o, dtype="string")
    d["chosen_position"] = pd.array(np.where(np.isfinite(new_p), new_p, np.nan)).astype("Float64").astype("Int64")
    return d


def _design(counts, by, mismatch) -> _Design:
    """The model's data from the counts' ``cells`` (one row per design, cluster, ordering, status, chosen
    tool and recorded position, with a ``count``): multinomial counts per (LLM, cluster, ordering)."""
    d = _cluster_view(counts.cells, counts.catalog)
    w = d["count"].to_numpy(dtype=np.int64)
    total = int(w.sum())
    labels = _labels(d, by)
    n_cells = len(d)
    reason, pos0, ordering = _classify(d, mismatch)
    use = reason == None  # noqa: E711

    def by_reason(sel):
        ex = pd.Series(w[sel & ~use]).groupby(reason[sel & ~use].astype(str)).sum().sort_values(ascending=False)
        return {str(k): int(v) for k, v in ex.items()}

    everything = np.ones(n_cells, dtype=bool)
    rows = {"total": total, "used": int(w[use].sum()), "excluded": by_reason(everything)}
    rows_by_llm = {}
    for lab in pd.unique(labels):
        sel = labels == lab
        rows_by_llm[str(lab)] = {"total": int(w[sel].sum()), "used": int(w[sel & use].sum()),
                                 "excluded": by_reason(sel)}
    if not use.any():
        raise ValueError(f"no row has a valid choice and a known ordering, so the model has nothing to fit "
                         f"(excluded: {rows['excluded']}).")
    sub = pd.DataFrame({"llm": labels[use], "cluster": d["cluster_id"].astype(str).to_numpy()[use],
                        "ordering": ordering[use].astype(str), "pos": pos0[use], "count": w[use]})
    llms = sorted(pd.unique(sub["llm"]), key=_natural)
    present = set(sub["cluster"])
    catalog = counts.catalog
    clusters_all = [c for c in catalog.clusters if c in present]
    tools, keep = [], []
    for c in clusters_all:
        shown = set()
        for o in sub.loc[sub["cluster"] == c, "ordering"].unique():
            shown.update(o.split("|"))
        tl = [t for t in catalog.tools(c) if t in shown]
        if len(tl) >= 2:
            tools.append(tl)
            keep.append(c)
    if len(keep) < len(clusters_all):
        single = sub["cluster"].isin(set(clusters_all) - set(keep))
        n_single = int(sub.loc[single, "count"].sum())
        rows["used"] -= n_single
        rows["excluded"]["single_tool_cluster"] = n_single
        for lab, n in sub.loc[single].groupby("llm")["count"].sum().items():
            rows_by_llm[lab]["used"] -= int(n)
            rows_by_llm[lab]["excluded"]["single_tool_cluster"] = int(n)
        sub = sub[~single]
        if sub.empty:
            raise ValueError("every cluster with usable rows shows a single tool: there is no choice to model.")
        llms = [lab for lab in llms if lab in set(sub["llm"])]
    clusters = keep
    llm_keys = []
    for lab in llms:
        first = d.loc[labels == lab, by].iloc[0] if by else {}
        llm_keys.append({b: (first[b].item() if hasattr(first[b], "item") else first[b]) for b in by})
    agg = sub.groupby(["llm", "cluster", "ordering", "pos"], sort=False)["count"].sum().reset_index()
    llm_idx = {lab: i for i, lab in enumerate(llms)}
    cl_idx = {c: i for i, c in enumerate(clusters)}
    keys = agg[["llm", "cluster", "ordering"]].drop_duplicates()
    keys = keys.assign(m=keys["llm"].map(llm_idx), c=keys["cluster"].map(cl_idx))
    keys = keys.sort_values(["m", "c", "ordering"], kind="stable").reset_index(drop=True)
    lengths = keys["ordering"].str.count(r"\|").to_numpy() + 1
    P = int(lengths.max())
    R = len(keys)
    row_tools = np.full((R, P), -1, dtype=np.int64)
    tool_index = [{t: j for j, t in enumerate(tl)} for tl in tools]
    for r, (c, o) in enumerate(zip(keys["c"], keys["ordering"])):
        shown = o.split("|")
        row_tools[r, :len(shown)] = [tool_index[c][t] for t in shown]
    row_of = {(a, b, o): r for r, (a, b, o) in enumerate(zip(keys["llm"], keys["cluster"], keys["ordering"]))}
    y = np.zeros((R, P))
    for a, b, o, p, n in zip(agg["llm"], agg["cluster"], agg["ordering"], agg["pos"], agg["count"]):
        y[row_of[(a, b, o)], p] += n
    return _Design(llms=list(llms), llm_keys=[llm_keys[i] for i in range(len(llms))],
                   clusters=clusters, tools=tools, K=np.array([len(t) for t in tools]), P=P,
                   row_llm=keys["m"].to_numpy(np.int64), row_cluster=keys["c"].to_numpy(np.int64),
                   row_len=lengths.astype(np.int64), row_tools=row_tools, y=y,
                   orderings=keys["ordering"].tolist(), rows=rows, rows_by_llm=rows_by_llm)


def _prompt_cells(log, by) -> pd.DataFrame:
    """Count a SelectionLog's rows per (``by`` columns, cluster, query, ordering, status, choice).

    A missing ``query_id`` makes the row a query of its own (nothing is assumed about it). A row of an
    aggregated log (with a ``count`` column) stands for ``count`` attempts.
    """
    from ..._schema import COUNT_COLUMN

    d = log.data
    cols = list(dict.fromkeys([*by, "cluster_id", "query_id", "ordering", "status", "chosen_tool",
                               "chosen_position"]))
    frame = d[cols].copy()
    weights = d[COUNT_COLUMN].to_numpy(dtype=np.int64) if COUNT_COLUMN in d.columns else None
    qid = frame["query_id"].astype(object)
    missing = qid.isna().to_numpy()
    if missing.any():
        qid = qid.where(~missing, pd.Series([f"\x00row{i}" for i in range(len(frame))], index=frame.index))
    frame["query_id"] = qid.astype(str)
    for c in ("ordering", "chosen_tool", "status", "cluster_id"):
        frame[c] = frame[c].astype(object)
    if weights is None:
        return frame.groupby(cols, dropna=False, sort=False, observed=True).size().rename("count").reset_index()
    frame["count"] = weights
    return frame.groupby(cols, dropna=False, sort=False, observed=True)["count"].sum().reset_index()


def _attach_prompts(design: _Design, log, by, mismatch) -> _Design:
    """Add per-prompt counts (from the log's rows) to a design built from the counts; they must add up."""
    d = _prompt_cells(log, by)
    labels = _labels(d, by)
    reason, pos0, ordering = _classify(d, mismatch)
    use = reason == None  # noqa: E711
    llm_idx = {lab: i for i, lab in enumerate(design.llms)}
    cl_idx = {c: i for i, c in enumerate(design.clusters)}
    m = pd.Series(labels).map(llm_idx).to_numpy(dtype=float)
    c = d["cluster_id"].astype(str).map(cl_idx).to_numpy(dtype=float)
    use &= np.isfinite(m) & np.isfinite(c)
    row_of = {(a, b, o): r for r, (a, b, o) in enumerate(zip(design.row_llm, design.row_cluster, design.orderings))}
    sub = pd.DataFrame({"m": m[use].astype(np.int64), "c": c[use].astype(np.int64),
                        "query": d["query_id"].to_numpy()[use], "ordering": ordering[use].astype(str),
                        "pos": pos0[use], "count": d["count"].to_numpy(np.int64)[use]})
    sub["row"] = [row_of.get((a, b, o), -1) for a, b, o in zip(sub["m"], sub["c"], sub["ordering"])]
    qkeys = sub[["m", "c", "query"]].drop_duplicates()
    qkeys = qkeys.assign(_k=[_natural(q) for q in qkeys["query"]])
    qkeys = qkeys.sort_values(["m", "c", "_k"], kind="stable").reset_index(drop=True)
    q_of = {(a, b, q): i for i, (a, b, q) in enumerate(zip(qkeys["m"], qkeys["c"], qkeys["query"]))}
    sub["q"] = [q_of[(a, b, q)] for a, b, q in zip(sub["m"], sub["c"], sub["query"])]
    pk = sub[["q", "row"]].drop_duplicates().sort_values(["q", "row"], kind="stable").reset_index(drop=True)
    p_of = {(q, r): i for i, (q, r) in enumerate(zip(pk["q"], pk["row"]))}
    y = np.zeros((len(pk), design.P))
    idx = np.array([p_of[(q, r)] for q, r in zip(sub["q"], sub["row"])], dtype=np.int64)
    np.add.at(y, (idx, sub["pos"].to_numpy()), sub["count"].to_numpy(dtype=float))
    agg = np.zeros_like(design.y)
    ok_rows = pk["row"].to_numpy() >= 0
    np.add.at(agg, pk["row"].to_numpy()[ok_rows], y[ok_rows])
    if (~ok_rows).any() or not np.array_equal(agg, design.y):
        raise ValueError("the log's rows do not add up to its counts (the counts were made from other rows?): "
                         "fit the query-level model on the SelectionLog or Study itself.")
    design.prompts = _Prompts(row=pk["row"].to_numpy(np.int64), query=pk["q"].to_numpy(np.int64), y=y,
                              query_llm=qkeys["m"].to_numpy(np.int64), query_cluster=qkeys["c"].to_numpy(np.int64),
                              query_ids=[str(q) for q in qkeys["query"]])
    return design
