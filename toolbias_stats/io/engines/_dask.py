"""The Dask engine: count partitioned Parquet logs on a dask.distributed cluster.

Each partition is validated and counted on a worker (by the DuckDB engine, on the partition in memory, so
the row-level checks and messages are those of the other engines, with rows numbered across the whole
dataset); only the partial counts travel to the client, where they are summed. Duplicate attempts across
partitions are found with a distributed ``value_counts`` of a 64-bit hash of each attempt's identity;
candidate collisions are confirmed on the rows themselves before anything is reported.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..._schema import COUNT_COLUMN, STATUSES
from ..._schema import DESIGN_COLUMNS as _DESIGN
from ...exceptions import SelectionLogError, problem
from .._catalog import ToolCatalog
from .._counts import CELL_KEYS, ROW_COLUMNS, SelectionCounts, finalize_table, position_columns, tool_columns
from .._selection_log import CELL_OUTCOME, _plain, duplicate_cell_message, duplicate_message
from ._narrow import counted_design

__all__ = ["count_tables_dask", "local_client"]


def local_client(n_workers: int = 2):
    """A LocalCluster client (processes, one thread each) for a single machine."""
    from distributed import Client, LocalCluster

    cluster = LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=True, dashboard_address=None)
    return Client(cluster)


def _import_dask():
    try:
        import dask  # noqa: F401
        import dask.dataframe as dd
        import distributed  # noqa: F401
    except ImportError as exc:  # pragma: no cover - exercised only without the extra
        raise ImportError("engine='dask' needs dask and distributed: pip install 'toolbias_stats[dask]'") from exc
    return dd


def _partition_counts(frame: pd.DataFrame, offset: int, path: str, catalog: ToolCatalog, meta, columns, level,
                      cells, options=None):
    """Validate and count one partition (on a worker) with the DuckDB engine."""
    from ._duckdb import count_tables_duckdb

    counts = count_tables_duckdb([{"path": path, "meta": meta, "columns": columns, "frame": frame,
                                   "row_offset": offset, **(options or {})}], catalog, level=level,
                                 check_duplicates=False, cells=cells)
    return counts.table, counts.cells, counts.design_columns, counts.diagnostics.get(path, {}).get("notes", {})


def count_tables_dask(entries, catalog: ToolCatalog, *, level: str = "query", scheduler=None,
                      progress: bool = False, cells: bool = True, count_by=None) -> SelectionCounts:
    """Validate and count Parquet datasets (files, directories or globs on any fsspec path) with Dask.

    Parameters
    ----------
    entries : list of dict
        ``path`` (a Parquet file, a directory of part files or a glob; local or any fsspec URL such as
        ``s3://bucket/logs/``), optional ``meta`` and ``columns``, as for the DuckDB engine.
    catalog : ToolCatalog
    level : {"query", "cluster"}
    scheduler : str, distributed.Client or None
        A scheduler address (``"tcp://10.0.0.5:8786"``), a Client, or None for a LocalCluster of 2
        workers that is closed afterwards.
    progress : bool
        A progress bar over the partitions' tasks.
    cells : bool
        Also count the per-ordering ``cells`` (for the Bayesian model).
    count_by : sequence of str, optional
        Sum the partitions' counts by ``model``, ``run``, ``condition`` and only these extra design columns
        (default: every design column); duplicates are looked for on every design column all the same.

    Returns
    -------
    SelectionCounts
        Identical (to the last bit) to the DuckDB and pandas engines' counts of the same rows.
    """
    dd = _import_dask()
    client, own = _client(scheduler)
    try:
        tables, cell_parts, designs, diagnostics, datasets = [], [], [], {}, []
        for entry in entries:
            path, results, diag, dataset = _count_dataset(dd, client, entry, catalog, level, cells, progress)
            for t, c, d in results:
                tables.append(t)
                cell_parts.append(c)
                designs.append(d)
            diagnostics[path] = diag
            datasets.append(dataset)
        design = []
        for d in designs:
            design += [c for c in d if c not in design]
        if any(e.get("duplicates") == "error" or d.get("attempts") is not None
               for (_, _, e, _, _), d in zip(datasets, diagnostics.values())):
            _check_duplicates(client, datasets, design)
        counted = counted_design(design, count_by)
        table, cell = _combine(tables, cell_parts, counted, level, catalog)
        return SelectionCounts(table, cell, catalog, tuple(counted), level, diagnostics, "dask")
    finally:
        if own is not None:
            own.close()
            own.cluster.close()


def _client(scheduler):
    """``(client, own)``: the client to compute with, and the same when it was made here (closed afterwards)."""
    from distributed import Client

    if scheduler is None:
        client = local_client()
        return client, client
    if isinstance(scheduler, Client):
        return scheduler, None
    return Client(scheduler), None


def _count_dataset(dd, client, entry, catalog, level, cells, progress):
    """Count one entry's dataset partition by partition: ``(path, [(table, cells, design)], diagnostics,
    (path, dask frame, entry, offsets, lengths))``."""
    import dask

    path = str(entry["path"])
    try:
        ddf = dd.read_parquet(path)
    except (OSError, ValueError) as exc:
        raise SelectionLogError(problem(path, None, None, f"not a readable Parquet dataset: {exc}")) from None
    lengths = client.compute(ddf.map_partitions(len)).result().to_numpy()
    if lengths.sum() == 0:
        raise SelectionLogError(problem(path, None, None, "the selection log is empty (no data rows)"))
    offsets = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    options = {k: entry[k] for k in ("design", "positions", "duplicates") if k in entry}
    tasks = [dask.delayed(_partition_counts)(part, int(off), path, catalog, entry.get("meta"),
                                             entry.get("columns"), level, cells, options)
             for part, off, n in zip(ddf.to_delayed(), offsets, lengths) if n]
    futures = client.compute(tasks)
    if progress:
        from distributed import progress as dask_progress

        dask_progress(futures)
    results = client.gather(futures)
    notes: dict = {}
    for _, _, _, nt in results:
        for k, v in nt.items():   # per-partition notes: counts add up (repeats: within partitions)
            notes[k] = v if k.startswith("columns ignored") else notes.get(k, 0) + v
    results = [r[:3] for r in results]
    return path, results, _diagnostics(path, entry, lengths, results, notes), (path, ddf, entry, offsets, lengths)


def _diagnostics(path, entry, lengths, results, notes) -> dict:
    """The dataset's diagnostics: rows (and attempts of an aggregated log) by status, partitions, notes."""
    weighted = ROW_COLUMNS[0] in results[0][0].columns
    status = {st: int(sum(t[f"rows_{st}" if weighted else f"n_{st}"].sum() for t, _, _ in results))
              for st in STATUSES}
    diag = {"rows": int(lengths.sum()), "status": status, "partitions": int(len(lengths)),
            "provenance": "this dataset", "engine": "dask", "duplicates": entry.get("duplicates", "count")}
    if notes:
        diag["notes"] = notes
    if weighted:
        aw = {st: int(sum(t[f"n_{st}"].sum() for t, _, _ in results)) for st in STATUSES}
        diag.update(attempts=sum(aw.values()), attempt_status={k: v for k, v in aw.items() if v})
        diag["status"] = {k: v for k, v in status.items() if v}
    return diag


def _combine(tables, cells, design, level, catalog):
    """Sum partial counts over partitions (a query may span partitions) into the engines' common layout."""
    k_max = max(catalog.n_tools(c) for c in catalog.clusters)
    value_cols = [f"n_{s}" for s in STATUSES] + tool_columns(k_max) + position_columns(k_max)
    keys = list(design) + ["cluster_id", "query_id", "n_candidates"]
    if any(ROW_COLUMNS[0] in t.columns for t in tables):   # aggregated data: rows by status too
        value_cols += list(ROW_COLUMNS)
        tables = [t if ROW_COLUMNS[0] in t.columns
                  else t.assign(**{r: t[f"n_{s}"] for r, s in zip(ROW_COLUMNS, STATUSES)}) for t in tables]
    tab = pd.concat(tables, ignore_index=True)
    for c in design:
        if c not in tab.columns:
            tab[c] = pd.NA
    for c in keys:   # partitions have their own categories: sum over the text keys
        if isinstance(tab[c].dtype, pd.CategoricalDtype):
            tab[c] = tab[c].astype("string")
    tab = tab.groupby(keys, sort=False, dropna=False)[value_cols].sum().reset_index()
    tab = finalize_table(tab, design, k_max)
    if any(c is None for c in cells):
        return tab, None
    cell = pd.concat(cells, ignore_index=True)
    ckeys = list(design) + list(CELL_KEYS)
    cell = cell.groupby(ckeys, sort=True, dropna=False)["count"].sum().astype(np.int64).reset_index()
    return tab, cell


def _prepared(frame: pd.DataFrame, entry, key) -> pd.DataFrame:
    """The attempt-identity columns of a partition, renamed and completed from the manifest entry."""
    ren = entry.get("columns") or {}
    frame = frame.rename(columns=ren) if ren else frame
    out = pd.DataFrame(index=frame.index)
    defaults = {"run": 1, "condition": "base"}
    for k in key:
        if k in frame.columns:
            col = frame[k]
            if k in (entry.get("meta") or {}):
                col = col.where(col.notna(), entry["meta"][k])
            out[k] = col
        else:
            out[k] = (entry.get("meta") or {}).get(k, defaults.get(k))
    if COUNT_COLUMN in frame.columns:   # aggregated: the pseudo-query and the outcome as the validator sees it
        from ..._schema import AGGREGATED_QUERY_ID

        if "query_id" not in frame.columns:
            out["query_id"] = AGGREGATED_QUERY_ID
        not_ok = (frame["status"].astype("string") != "ok").fillna(True).to_numpy() if "status" in frame else None
        for c in ("chosen_tool", "chosen_position"):
            if c in out.columns and not_ok is not None:
                out[c] = out[c].astype(object).where(~not_ok, None)
    return out


def _hashes(frame, entry, key):
    keys = _prepared(frame, entry, key)
    return pd.DataFrame({"h": pd.util.hash_pandas_object(keys.astype("string"), index=False).to_numpy()})


def _candidates(frame, offset, entry, key, wanted):
    keys = _prepared(frame, entry, key)
    h = pd.util.hash_pandas_object(keys.astype("string"), index=False).to_numpy()
    hit = np.isin(h, wanted)
    out = keys[hit].reset_index(drop=True)
    out.insert(0, "__row", offset + 1 + np.flatnonzero(hit))
    return out


def _check_duplicates(client, datasets, design):
    """Duplicate attempts anywhere: a distributed count of 64-bit hashes of each attempt's identity, then an
    exact check of the few candidate rows (a hash collision is not a duplicate)."""
    import dask
    import dask.dataframe as dd

    # the identity of the other engines: design, query, rotation and the ordering as given
    key = list(_DESIGN) + [c for c in design if c not in _DESIGN] + ["cluster_id", "query_id", "rotation", "ordering"]
    # an aggregated dataset: rows are cells, identified by the attempt identity and the outcome
    weighted = any(COUNT_COLUMN in [(e.get("columns") or {}).get(c, c) for c in ddf.columns]
                   for _, ddf, e, _, _ in datasets)
    if weighted:
        key += list(CELL_OUTCOME)
    parts = []
    for _path, ddf, entry, _offsets, lengths in datasets:
        parts += [dask.delayed(_hashes)(p, entry, key) for p, n in zip(ddf.to_delayed(), lengths) if n]
    hashes = dd.from_delayed(parts, meta={"h": "uint64"})["h"]
    counts = client.compute(hashes.value_counts(split_out=max(1, hashes.npartitions // 8))).result()
    wanted = counts.index[counts.to_numpy() > 1].to_numpy(dtype=np.uint64)
    if not len(wanted):
        return
    rows = []
    for fileno, (path, ddf, entry, offsets, lengths) in enumerate(datasets):
        tasks = [dask.delayed(_candidates)(p, int(off), entry, key, wanted)
                 for p, off, n in zip(ddf.to_delayed(), offsets, lengths) if n]
        for frame in client.gather(client.compute(tasks)):
            rows.append(frame.assign(__file=path, __fileno=fileno))
    cand = pd.concat(rows, ignore_index=True).sort_values(["__fileno", "__row"], kind="stable")
    ident = cand[key].astype("string").fillna("\x00<NA>")
    dup = ident.duplicated(keep="first").to_numpy()
    if not dup.any():
        return
    firsts = cand.assign(__k=list(map(tuple, ident.to_numpy()))).groupby("__k", sort=False)[["__row", "__file"]].first()
    problems = []
    for i in np.flatnonzero(dup):
        values = {k: _plain(v) for k, v in zip(key, cand[key].iloc[i])}
        values["query_id"] = None if values["query_id"] is None else str(values["query_id"])
        if values["rotation"] is not None:
            values.pop("ordering")
        row, ffile = firsts.loc[[tuple(ident.iloc[i])]].iloc[0]
        here = cand["__file"].iloc[i]
        message = duplicate_cell_message if weighted else duplicate_message
        problems.append(problem(here, int(cand["__row"].iloc[i]), "query_id",
                                message(values, int(row), None if ffile == here else ffile)))
    raise SelectionLogError(problems)
