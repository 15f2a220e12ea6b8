"""Reader for the BiasBusters native format (clusters JSON + queries JSON + selection-stats JSON)."""

from __future__ import annotations

import functools
import itertools
import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, cast

import numpy as np
import pandas as pd

from ..._schema import COUNT_COLUMN, DESIGN_COLUMNS, LOG_COLUMNS
from ..._validation import check_choice
from ...exceptions import SelectionLogError, problem
from .._catalog import ToolCatalog
from .._selection_log import SelectionLog
from ._common import add_meta, check_meta, check_regular_file, load_json

if TYPE_CHECKING:
    from ._common import Meta, PathLike

__all__ = ["read_biasbusters", "read_biasbusters_catalog", "read_biasbusters_queries", "read_tool_dates"]


def _cluster_names(path: PathLike) -> dict:
    """``{cluster: name}`` of a cluster_names.json: an object of strings (issue 37: a list where a name belongs
    is an error naming the key)."""
    raw = load_json(path)
    if not isinstance(raw, dict):
        raise SelectionLogError(problem(path, None, None, f"expected a JSON object {{cluster: name}}, got "
                                                          f"{type(raw).__name__}"))
    bad = [problem(path, None, str(k), f"expected a cluster name (a string), got {v!r}"[:300])
           for k, v in raw.items() if v is not None and not isinstance(v, str)]
    if bad:
        raise SelectionLogError(bad)
    return {str(k): v for k, v in raw.items()}


def read_biasbusters_catalog(clusters: PathLike, *, api_meta: PathLike | None = None,
                             cluster_names: PathLike | None = None, dates: PathLike | None = None) -> ToolCatalog:
    """Read a BiasBusters ``clusters.json`` (list of clusters, each a list of tools) into a ToolCatalog.

    Parameters
    ----------
    clusters : path-like
        ``clusters.json``: cluster ``c`` (1-based) is the c-th list entry, API ``j`` its j-th tool.
    api_meta : path-like, optional
        ``api_meta.json`` with the ToolBench function name and URL per (cluster, api). Its names
        become the ``tool_id`` so that ids match the authors' logs; without it, ids are derived
        with :func:`toolbias_stats.function_name`.
    cluster_names : path-like, optional
        JSON object ``{"1": "Address->Coordinates", ...}``.
    dates : path-like, optional
        CSV of tool creation dates (``tool_id, created``), applied with :func:`read_tool_dates`.

    Returns
    -------
    ToolCatalog
        With ``api_meta``, two extra text columns keep the ToolBench descriptions of each API as
        that file gives them: ``toolbench_tool_description`` and ``toolbench_api_description``.
        They differ from ``clusters.json`` for 18 of the 50 BiasBusters tool descriptions
        (longer texts, one literal ``"None"``) and are the texts from which the authors computed
        their features (``authors_features.json``).

    Examples
    --------
    >>> import toolbias_stats as tbs
    >>> p = tbs.datasets.path
    >>> cat = read_biasbusters_catalog(p("biasbusters/clusters.json"), api_meta=p("biasbusters/api_meta.json"),
    ...                                cluster_names=p("biasbusters/cluster_names.json"))
    >>> cat.to_frame().shape            # 50 tools in 10 clusters, one row per tool
    (50, 16)
    """
    clusters = Path(clusters)
    raw = load_json(clusters)
    if not isinstance(raw, list) or not all(isinstance(c, list) for c in raw):
        raise SelectionLogError(problem(clusters, None, None, "expected a JSON list of clusters (lists of tools)"))
    meta = {}
    if api_meta is not None:
        for i, m in enumerate(load_json(api_meta), start=1):
            try:
                meta[(int(m["cluster_id"]), int(m["api"]))] = m
            except (KeyError, TypeError, ValueError):
                raise SelectionLogError(problem(api_meta, i, "cluster_id/api", "expected integer fields")) from None
    names = _cluster_names(cluster_names) if cluster_names is not None else {}
    records, problems = [], []
    for c, tools in enumerate(raw, start=1):
        for j, t in enumerate(tools, start=1):
            where = f"cluster {c} tool {j}"
            if not isinstance(t, dict) or "tool" not in t or "api_name" not in t:
                problems.append(problem(clusters, where, "tool/api_name",
                                        "expected an object with 'tool' and 'api_name'"))
                continue
            req = t.get("required_parameters") or []
            opt = t.get("optional_parameters") or []
            m = meta.get((c, j - 1), {})
            records.append({
                "tool_id": m.get("name"),
                "cluster_id": str(c),
                "cluster_name": names.get(str(c)),
                "api_index": j,
                "category": t.get("category"),
                "tool_name": t["tool"],
                "tool_description": t.get("tool_desc"),
                "api_name": t["api_name"],
                "api_description": t.get("api_desc"),
                "required_parameters": json.dumps(req),
                "optional_parameters": json.dumps(opt),
                "num_parameters": len(req) + len(opt),
                "created": t.get("created"),
                "url": m.get("url") or t.get("url"),
            })
            if meta:
                records[-1].update({
                    "toolbench_tool_description": m.get("tool_desc"),
                    "toolbench_api_description": m.get("api_desc"),
                })
    if problems:
        raise SelectionLogError(problems)
    catalog = ToolCatalog.from_records(records, source=str(clusters))
    if dates is not None:
        catalog = read_tool_dates(dates, catalog=catalog)
    return catalog


def read_tool_dates(path: PathLike, *, catalog: ToolCatalog) -> ToolCatalog:
    """Fill a catalog's ``created`` column from a CSV of tool creation dates.

    Parameters
    ----------
    path : path-like
        CSV with a header and at least the columns ``tool_id`` and ``created`` (``YYYY-MM-DD``;
        an empty cell is a missing date). Other columns (notes, provenance) are ignored.
    catalog : ToolCatalog
        The catalog to complete; it is not modified.

    Returns
    -------
    ToolCatalog
        A copy whose ``created`` is the file's date for every tool the file lists (an empty
        cell clears it); tools the file does not list keep their catalog date.

    Raises
    ------
    SelectionLogError
        A missing column, a ``tool_id`` that is not in the catalog or listed twice, or a value
        that is not a date; every problem names file, row (1-based data row) and column.

    Examples
    --------
    The bundled BiasBusters catalog (ToolBench ids from ``api_meta.json``) and the creation dates of its tools:

    >>> import toolbias_stats as tbs
    >>> from toolbias_stats.io.readers.biasbusters import read_tool_dates
    >>> p = tbs.datasets.path
    >>> cat = read_biasbusters_catalog(p("biasbusters/clusters.json"), api_meta=p("biasbusters/api_meta.json"))
    >>> dated = read_tool_dates(p("biasbusters/tool_dates.csv"), catalog=cat)
    >>> int(dated.table["created"].notna().sum()), str(dated.table["created"].min().date())
    (43, '2012-12-19')
    """
    path = Path(path)
    if not path.exists():
        raise SelectionLogError(problem(path, None, None, "file not found"))
    try:
        frame = pd.read_csv(path, dtype=str, keep_default_na=False)
    except (ValueError, pd.errors.ParserError) as exc:
        raise SelectionLogError(problem(path, None, None, f"malformed CSV: {exc}")) from None
    problems = [problem(path, None, col, "required column is missing") for col in ("tool_id", "created")
                if col not in frame.columns]
    if problems:
        raise SelectionLogError(problems)
    known = set(catalog.table["tool_id"])
    dates, seen = {}, set()
    for i, (tool, value) in enumerate(zip(frame["tool_id"], frame["created"]), start=1):
        tool, value = tool.strip(), value.strip()
        if tool not in known:
            problems.append(problem(path, i, "tool_id", f"unknown tool_id {tool!r} (not in catalog {catalog.source})"))
            continue
        if tool in seen:
            problems.append(problem(path, i, "tool_id", f"tool_id {tool!r} is listed twice"))
            continue
        seen.add(tool)
        if not value:
            dates[tool] = pd.NaT
            continue
        try:
            dates[tool] = pd.Timestamp(_dt_date(value))
        except ValueError:
            problems.append(problem(path, i, "created", f"expected a date YYYY-MM-DD, got {value!r}"))
    if problems:
        raise SelectionLogError(problems)
    table = catalog.table.copy()
    listed = table["tool_id"].isin(list(dates))
    table.loc[listed, "created"] = table.loc[listed, "tool_id"].map(dates).astype("datetime64[ns]")
    return ToolCatalog(table, source=catalog.source)


def _dt_date(value: str):
    import datetime as _dt

    return _dt.date.fromisoformat(value)


def read_biasbusters_queries(path: PathLike) -> dict[str, list[str]]:
    """Read ``queries.json`` into ``{cluster_id: [query text, ...]}`` (query q is list entry q-1).

    Parameters
    ----------
    path : path-like
        A JSON list of ``{"cluster_id": ..., "queries": [query text, ...]}`` objects.

    Returns
    -------
    dict of str to list of str
        The query texts of each cluster, in file order (query ``q`` of the qid encoding is entry ``q - 1``).

    Raises
    ------
    SelectionLogError
        Malformed JSON, a file that is not a list, or an entry without ``cluster_id`` and a ``queries`` list.

    Examples
    --------
    >>> import toolbias_stats as tbs
    >>> queries = read_biasbusters_queries(tbs.datasets.path("biasbusters/queries.json"))
    >>> len(queries), len(queries["1"])
    (10, 100)
    """
    path = Path(path)
    raw = load_json(path)
    out = {}
    for i, entry in enumerate(raw if isinstance(raw, list) else [], start=1):
        if not isinstance(entry, dict) or "cluster_id" not in entry or not isinstance(entry.get("queries"), list):
            raise SelectionLogError(problem(path, i, "cluster_id/queries", "expected {cluster_id, queries: [...]}"))
        out[str(entry["cluster_id"])] = [str(q) for q in entry["queries"]]
    if not isinstance(raw, list):
        raise SelectionLogError(problem(path, None, None, "expected a JSON list of {cluster_id, queries}"))
    return out


def read_biasbusters(path: PathLike, *, catalog: ToolCatalog, meta: Meta = None, n_queries: int = 100,
                     position: Literal["recorded", "rotation"] = "recorded",
                     clusters: Sequence[str] | None = None) -> SelectionLog:
    """Read one BiasBusters selection-stats file into a SelectionLog of every attempt.

    Each record is ``[qid, cluster_id, api_index, position]`` (all 1-based) with
    ``qid = (c-1)*n_queries*K + (q-1)*K + r`` for cluster ``c``, query ``q`` and cyclic rotation ``r``.
    A qid absent from the file is an attempt without a valid selection and becomes a ``no_call``
    row, so the log has one row per (cluster, query, rotation): 5,000 for the BiasBusters design.

    Parameters
    ----------
    path : path-like
        The ``api_selection_stats_*.json`` file.
    catalog : ToolCatalog
        Clusters in the order of ``clusters.json``; every cluster must have the same K.
    meta : dict
        Design metadata for every row: ``model`` (required), ``run``, ``condition`` and extra keys.
    n_queries : int, default 100
        Queries per cluster in the qid encoding.
    position : {"recorded", "rotation"}, default "recorded"
        Which chosen position to keep. The authors' files record the position; in a few hundred
        records per file it disagrees with the rotation formula ``((j - r) mod K) + 1``. The paper's
        Table 1 uses the recorded one (the default); the disagreements are counted in
        ``log.diagnostics[path]["position_mismatch"]`` either way.
    clusters : list of str, optional
        The clusters this file's condition was run on (manifest key ``clusters``; e.g. a targeted
        perturbation of 4 of 10 clusters). Attempts are expected only for them: qids of other clusters
        are not turned into ``no_call`` rows, and a record in another cluster is an error. Default: all.

    Returns
    -------
    SelectionLog

    Raises
    ------
    SelectionLogError
        Malformed JSON, a record that is not 4 integers, a cluster outside the catalog, an api
        index or position outside 1..K, a qid outside the design or inconsistent with its cluster,
        a duplicate qid, an empty file. Every problem names file, record and field.

    Examples
    --------
    One of the 21 bundled selection-statistics files (GPT-4.1 mini, run 1; 10 clusters x 100 queries x 5
    rotations):

    >>> import toolbias_stats as tbs
    >>> p = tbs.datasets.path
    >>> cat = tbs.read_biasbusters_catalog(p("biasbusters/clusters.json"))
    >>> read_biasbusters(p("biasbusters/selection_logs/api_selection_stats_chatgpt_4.json"), catalog=cat,
    ...                  meta={"model": "GPT-4.1 mini", "run": 1})
    SelectionLog(5000 rows, status={'ok': 3989, 'no_call': 1011}, clusters=10)
    """
    path = Path(path)
    check_choice("position", position, ("recorded", "rotation"))
    meta = check_meta(meta, path)
    arr, raw = _load_records(path)
    run_on, clusters = clusters, catalog.clusters
    k = _same_k(catalog)
    n_c = len(clusters)
    per_cluster = n_queries * k
    covered = _covered(path, run_on, clusters)
    arr = _record_array(path, raw) if arr is None else arr
    _check_records(path, arr, n_c=n_c, k=k, per_cluster=per_cluster, covered=covered)
    # one row per attempt of the design
    qid, cid, api, pos = arr.T
    all_q = np.arange(1, n_c * per_cluster + 1)
    all_q = all_q[covered[(all_q - 1) // per_cluster]]       # attempts only in the clusters the entry covers
    row_of = np.full(n_c * per_cluster + 1, -1)
    row_of[qid] = np.arange(len(qid))
    hit = row_of[all_q] >= 0
    idx = row_of[all_q][hit]
    r_all = (all_q - 1) % k + 1
    tools = np.array([catalog.tools(c) for c in clusters], dtype=object)  # (C, K)
    expected_pos = (api[idx] - r_all[hit]) % k + 1
    mismatch = int((expected_pos != pos[idx]).sum())
    kept_pos = pos[idx] if position == "recorded" else expected_pos
    source_row = np.zeros(len(all_q), dtype=np.int64)
    source_row[hit] = idx + 1  # JSON record number; absent attempts point to record 0
    diagnostics = {str(path): {"records": len(arr), "attempts": len(all_q), "absent_qids": int((~hit).sum()),
                               "position_mismatch": mismatch, "position": position}}
    if _FAST and _trusted(tools, meta):
        frame = _validated_frame(path, meta, clusters, tools, covered, n_queries, hit, cid[idx], api[idx], pos[idx],
                                 kept_pos, source_row)
        return SelectionLog(frame, catalog, diagnostics)
    frame = _plain_frame(path, meta, clusters, tools, all_q, k=k, per_cluster=per_cluster, hit=hit,
                         picks=(cid[idx], api[idx], pos[idx]), kept_pos=kept_pos, source_row=source_row)
    return SelectionLog.from_frame(frame, catalog, diagnostics=diagnostics, source=str(path))


_FIELDS = ("qid", "cluster_id", "api_index", "position")


def _load_records(path: Path):
    """``(array, raw)``: the records as an ``(n, 4)`` array when the fast decoder reads them (``raw`` is then
    ``()``), else ``(None, the parsed JSON list)``; a file that is no list or an empty one is an error."""
    arr = _decode_records(path)       # None: the standard library reads the file and the checks name what is wrong
    raw = load_json(path) if arr is None else ()
    if arr is None and not isinstance(raw, list):
        raise SelectionLogError(problem(path, None, None,
                                        "expected a JSON list of [qid, cluster_id, api_index, position]"))
    if arr is None and len(raw) == 0:
        raise SelectionLogError(problem(path, None, None, "the selection log is empty (no records)"))
    return arr, raw


def _same_k(catalog: ToolCatalog) -> int:
    """The number of tools K, which the qid encoding needs to be the same in every cluster."""
    ks = {catalog.n_tools(c) for c in catalog.clusters}
    if len(ks) != 1:
        raise SelectionLogError(problem(catalog.source, None, None,
                                        "the BiasBusters format needs the same K in every cluster"))
    return ks.pop()


def _covered(path: Path, run_on, clusters) -> np.ndarray:
    """Which catalog clusters the entry was run on (manifest key ``clusters``; default all), as a mask."""
    if run_on is None:
        return np.ones(len(clusters), dtype=bool)
    clusters_run = [str(c) for c in run_on]
    unknown = [c for c in clusters_run if c not in clusters]
    if unknown or not clusters_run:
        raise SelectionLogError(problem(path, None, "clusters", f"unknown cluster id(s) {unknown} (catalog has "
                                                               f"{list(clusters)})" if unknown else "empty list"))
    return np.array([c in set(clusters_run) for c in clusters])


def _record_array(path: Path, raw: Sequence[Any]) -> np.ndarray:
    """The parsed records as an ``(n, 4)`` int64 array; every record that is not 4 integers is an error."""
    arr = _int_records(raw)     # None: some record needs the checks one by one (they name it)
    if arr is not None:
        return arr
    arr = np.zeros((len(raw), 4), dtype=np.int64)
    problems = []
    for i, rec in enumerate(raw, start=1):
        if not isinstance(rec, list) or len(rec) != 4:
            problems.append(problem(path, i, "record", f"expected [qid, cluster_id, api_index, position], got {rec!r}"))
            continue
        for f, (name, v) in enumerate(zip(_FIELDS, rec)):
            if isinstance(v, bool) or not isinstance(v, int):
                problems.append(problem(path, i, name, f"expected an integer, got {v!r}"))
            elif not -2**62 < v < 2**62:   # would overflow the int64 table (a qid of 10**30)
                problems.append(problem(path, i, name, f"expected an integer of at most 18 digits, got {v!r}"))
            else:
                arr[i - 1, f] = v
    if problems:
        raise SelectionLogError(problems)
    return arr


def _check_records(path: Path, arr: np.ndarray, *, n_c: int, k: int, per_cluster: int, covered: np.ndarray) -> None:
    """Every record in the design: cluster, api index and position in range, qid consistent with its cluster,
    in a covered cluster and unique."""
    qid, cid, api, pos = arr.T
    rec_no = np.arange(1, len(arr) + 1)
    problems: list = []

    def flag(mask, name, msg):
        for i in np.flatnonzero(mask):
            problems.append(problem(path, rec_no[i], name, msg.format(v=arr[i, _FIELDS.index(name)])))

    flag((cid < 1) | (cid > n_c), "cluster_id", f"unknown cluster id {{v}} (catalog has clusters 1..{n_c})")
    flag((api < 1) | (api > k), "api_index", f"api index {{v}} outside 1..{k}")
    flag((pos < 1) | (pos > k), "position", f"position {{v}} outside 1..{k}")
    flag((qid < 1) | (qid > n_c * per_cluster), "qid", f"qid {{v}} outside 1..{n_c * per_cluster}")
    flag(((qid - 1) // per_cluster + 1 != cid) & (qid >= 1), "cluster_id",
         f"cluster id {{v}} disagrees with its qid (qid encodes cluster (qid-1)//{per_cluster}+1)")
    in_range = (cid >= 1) & (cid <= n_c)
    flag(in_range & ~covered[np.clip(cid - 1, 0, n_c - 1)], "cluster_id",
         "cluster id {v} is not one of the clusters this entry was run on (manifest key `clusters`)")
    _, first_idx, inverse, counts = np.unique(qid, return_index=True, return_inverse=True, return_counts=True)
    dup = counts[inverse] > 1
    dup[first_idx] = False
    flag(dup, "qid", "duplicate qid {v}")
    if problems:
        raise SelectionLogError(problems)


def _plain_frame(path, meta, clusters, tools, all_q, *, k, per_cluster, hit, picks, kept_pos, source_row):
    """The attempts as a plain frame for :meth:`SelectionLog.from_frame` (when :func:`_trusted` says no)."""
    cid, api, pos = picks
    c_all = (all_q - 1) // per_cluster + 1
    q_all = (all_q - 1) % per_cluster // k + 1
    r_all = (all_q - 1) % k + 1
    chosen = np.full(len(all_q), None, dtype=object)
    chosen[hit] = tools[cid - 1, api - 1]
    chosen_pos = np.full(len(all_q), np.nan)
    chosen_pos[hit] = kept_pos
    raw_choice = np.full(len(all_q), None, dtype=object)
    raw_choice[hit] = [f"api={a} position={p}" for a, p in zip(api, pos)]
    frame = pd.DataFrame({
        "cluster_id": [clusters[c - 1] for c in c_all],
        "query_id": q_all.astype(str),
        "rotation": r_all,
        "chosen_tool": chosen,
        "chosen_position": pd.array(np.where(np.isnan(chosen_pos), cast(Any, None), chosen_pos), dtype="Int64"),
        "status": np.where(hit, "ok", "no_call"),
        "raw_choice": raw_choice,
        "source_file": str(path),
        "source_row": source_row,
    })
    return add_meta(frame, meta)


#: Build the validated table directly when the reader's checks already guarantee it (see :func:`_trusted`); False
#: sends every file through :meth:`SelectionLog.from_frame` (tests compare the two).
_FAST = True


def _decode_records(path: Path):
    """The records as an ``(n, 4)`` int64 array when msgspec decodes the file as a non-empty JSON list of lists of 4
    integers that :func:`_int_records` accepts; else None (no msgspec, or anything else: the standard library then
    reads the file and the reader's checks word the error, so messages do not depend on msgspec)."""
    check_regular_file(path)
    if _RECORDS is None:
        return None
    data = path.read_bytes()
    if data.startswith(b"\xef\xbb\xbf"):      # a BOM: json refuses it (and says so)
        return None
    try:
        records = _RECORDS.decode(data)
    except (_msgspec.DecodeError, ValueError, RecursionError):
        return None
    if not records:
        return None
    try:
        arr = np.array(records, dtype=np.int64)
    except OverflowError:
        return None
    return None if ((arr <= -2**62) | (arr >= 2**62)).any() else arr


_RECORDS: Any = None
try:
    import msgspec as _msgspec

    _RECORDS = _msgspec.json.Decoder(list[tuple[int, int, int, int]])
except ImportError:   # pragma: no cover - the json path is tested by hiding the decoder
    _msgspec = None   # type: ignore[assignment]  # the module's absence (read only when _RECORDS is set)


def _int_records(raw: Sequence[Any]):
    """The records as an ``(n, 4)`` int64 array when every one is a list of 4 plain integers strictly between
    -2**62 and 2**62, i.e. when the record-by-record checks would find nothing; else None (they run and name it)."""
    if set(map(type, raw)) != {list} or set(map(len, raw)) != {4}:
        return None
    if set(map(type, itertools.chain.from_iterable(raw))) != {int}:
        return None
    try:
        arr = np.array(raw, dtype=np.int64)
    except OverflowError:
        return None
    if ((arr <= -2**62) | (arr >= 2**62)).any():
        return None
    return arr


def _trusted(tools: np.ndarray, meta: dict) -> bool:
    """Whether :meth:`SelectionLog.from_frame` could only confirm what this reader built (so it can be skipped).

    The reader has checked every record (cluster, api index and position in range, qid consistent and unique) and
    ``check_meta`` the design keys; what remains is the catalog (tool ids distinct plain strings without ``|`` in each
    cluster, so the rotated lists split back into the cluster's tools) and design keys that are not schema columns.
    """
    from .._selection_log import MAX_INT

    names = tools.ravel().tolist()
    if not all(type(t) is str and t and "|" not in t for t in names):
        return False
    if any(len(set(row)) != len(row) for row in tools.tolist()):
        return False
    if any(k in LOG_COLUMNS or k == COUNT_COLUMN for k in meta if k not in DESIGN_COLUMNS):
        return False
    return meta["run"] <= MAX_INT


def _validated_frame(path, meta, clusters, tools, covered, n_queries, hit, cid, api, pos, kept_pos, source_row):
    """The table :meth:`SelectionLog.from_frame` makes of this reader's rows, built column by column.

    Every attempt's list is its cluster's tools under a cyclic rotation, all of them members: ``ordering`` is the
    rotated list, ``n_candidates`` is K and ``chosen_rank`` equals ``chosen_position``; tools, positions and
    raw choices exist for hits only.
    """
    k = tools.shape[1]
    design = _design_text(tuple(clusters), tuple(map(tuple, tools.tolist())), tuple(covered.tolist()), n_queries)
    n = len(hit)
    chosen_code = np.full(n, -1, dtype=np.int64)
    chosen_code[hit] = (cid - 1) * k + (api - 1)
    pair_code = np.full(n, -1, dtype=np.int64)
    pair_code[hit] = (api - 1) * k + (pos - 1)
    choices = [f"api={a} position={p}" for a in range(1, k + 1) for p in range(1, k + 1)]
    position = np.zeros(n, dtype=np.int64)
    position[hit] = kept_pos
    position = pd.arrays.IntegerArray(position, ~hit)
    rotation = (np.arange(n) % k + 1).astype(np.int64)       # qids run rotation fastest (see the docstring above)
    head = {"model": _constant(meta["model"], n).copy(), "run": np.full(n, meta["run"], dtype=np.int64),
            "condition": _constant(meta["condition"], n).copy()}
    frame = pd.DataFrame({
        **head,
        "cluster_id": design["cluster_id"].copy(),
        "query_id": design["query_id"].copy(),
        "rotation": pd.arrays.IntegerArray(rotation, np.zeros(n, dtype=bool)),
        "ordering": design["ordering"].copy(),
        "n_candidates": np.full(n, k, dtype=np.int64),
        "chosen_tool": _text(tools.ravel().tolist(), chosen_code),
        "chosen_position": position,
        "chosen_rank": position.copy(),
        "status": _text(["no_call", "ok"], hit.astype(np.int64)),
        "raw_choice": _text(choices, pair_code),
        "source_file": _text([str(path)], np.zeros(n, dtype=np.int64)),
        "source_row": source_row,
    })
    for i, (key, value) in enumerate((kv for kv in meta.items() if kv[0] not in head), start=len(head)):
        frame.insert(i, key, value)           # extra design keys: as add_meta puts them
    return frame


def _text(values, codes):
    """``values[codes]`` as a pandas string array (code -1: missing)."""
    return pd.array(values, dtype="string").take(codes, allow_fill=True)


@functools.lru_cache(maxsize=16)
def _constant(value: str, n: int):
    """``n`` times ``value`` (a model or condition name) as a string array (shared and immutable: callers take a
    ``.copy()``)."""
    return _text([value], np.zeros(n, dtype=np.int64))


@functools.lru_cache(maxsize=8)
def _design_text(clusters: tuple, tools: tuple, covered: tuple, n_queries: int) -> dict:
    """``cluster_id``, ``query_id`` and ``ordering`` of every attempt of the design, in qid order (the same for every
    file of a study; shared and immutable: callers take a ``.copy()``)."""
    k = len(tools[0])
    per_cluster = n_queries * k
    all_q = np.arange(1, len(clusters) * per_cluster + 1)
    all_q = all_q[np.array(covered)[(all_q - 1) // per_cluster]]
    c_all = (all_q - 1) // per_cluster + 1
    q_all = (all_q - 1) % per_cluster // k + 1
    r_all = (all_q - 1) % k + 1
    orders = ["|".join(row[r:] + row[:r]) for row in tools for r in range(k)]
    return {"cluster_id": _text([str(c) for c in clusters], c_all - 1),
            "query_id": _text([str(q) for q in range(1, int(q_all.max()) + 1)], q_all - 1),
            "ordering": _text(orders, (c_all - 1) * k + (r_all - 1))}
