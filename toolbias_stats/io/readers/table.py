"""Reader for the generic tabular format (CSV, JSONL or Parquet) of ``docs/schema.md``.

:meth:`SelectionLog.write` writes this format, so a log written and read back is identical,
dtypes included. Other teams' files are accepted too: ``columns`` maps their column names to
ours and the study design (``model``, ``run``, ``condition``, extra keys) may come from the
manifest entry instead of the file.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import numpy as np
import pandas as pd

from ..._schema import COUNT_COLUMN, LOG_COLUMNS
from ...exceptions import SelectionLogError, problem
from .._catalog import ToolCatalog
from .._dataset import TABLE_SUFFIXES
from .._selection_log import SelectionLog
from ._common import TOO_DEEP, check_meta, check_regular_file, no_duplicate_keys, utf8_problem
from ._spreadsheet import (
    ATTEMPT_ID,
    COMBO_KEYS,
    attempt_id_message,
    check_options,
    combo_problems,
    notes_of,
    prepare_combos,
    select_columns,
)

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from ._common import Meta, PathLike

__all__ = ["read_table", "read_catalog_table", "engine_entry", "split_columns", "SHEET_SUFFIXES", "check_cells"]

# TABLE_SUFFIXES (file extensions of the tabular format, by reader) lives in io/_dataset.py.
#: Catalog tables also accept a plain JSON list of records.
CATALOG_SUFFIXES = {**TABLE_SUFFIXES, ".json": "json"}
#: Spreadsheets read with openpyxl (issue 36): the first worksheet, its first row the header. The count engines
#: get them as an in-memory frame (:func:`engine_entry`).
SHEET_SUFFIXES = {".xlsx": "xlsx"}
_READ_SUFFIXES = {**TABLE_SUFFIXES, **SHEET_SUFFIXES}

_DESIGN = ("model", "run", "condition")
_PROVENANCE = ("source_file", "source_row")
_INT_RE = re.compile(r"^[+-]?\d+$")


def read_table(path: PathLike, *, catalog: ToolCatalog, meta: Meta = None, columns: Mapping[str, str] | None = None,
               design: Sequence[str] | None = None, positions: Literal["error", "recompute"] = "error",
               duplicates: Literal["count", "error"] = "count") -> SelectionLog:
    """Read a selection log in the generic tabular format (CSV, JSONL or Parquet).

    Parameters
    ----------
    path : path-like
        A ``.csv``, ``.jsonl`` / ``.ndjson`` or ``.parquet`` file with the SelectionLog columns
        of ``docs/schema.md``; the extension picks the parser. Required columns: ``cluster_id``,
        ``query_id``, ``status``, plus ``chosen_tool`` on ``ok`` rows. ``ordering`` may replace
        ``rotation``; ``chosen_position`` is derived from ``ordering`` when absent. An optional
        ``count`` column makes the file *aggregated*: each row stands for ``count`` identical
        attempts (a whole number >= 0; 0 is allowed and adds nothing) and ``query_id`` may then be
        absent (see Notes).
    catalog : ToolCatalog
        The tools the rows refer to.
    meta : dict, optional
        Design metadata of the manifest entry: ``model``, ``run``, ``condition`` and extra
        scalar keys. A key that is also a column of the file must agree with it on every row
        (missing cells of that column are filled from ``meta``); a key that is not a column
        becomes one. Without ``meta``, the file must have a ``model`` column; ``run`` and
        ``condition`` default to 1 and ``"base"``.
    columns : dict, optional
        ``{their_name: our_name}``: renames the file's columns before anything else. Every
        name on the left must be a column of the file.
    design : list of str, optional
        The file's extra columns that are study design (e.g. ``["temperature"]``): they become
        SelectionLog columns, like ``model`` and ``run``. Other columns that are neither schema
        columns nor mapped are ignored and listed in the diagnostics (``toolbias-stats validate``
        shows them). Without ``design``, a file written by :meth:`SelectionLog.write` (it has
        ``source_file`` and ``source_row``) keeps all its extra columns; other files keep none.
    positions : {"error", "recompute"}, default "error"
        A ``chosen_position`` that contradicts the list shown and the pick is an error naming the
        row; ``"recompute"`` replaces it by the pick's position in the list (counted in the
        diagnostics).
    duplicates : {"count", "error"}, default "count"
        The same query shown the same list again (no attempt column): counted as separate
        attempts and reported (``"count"``), or an error naming both rows (``"error"``). Two rows
        with the same ``attempt_id`` (a column naming each attempt) are always an error.

    Returns
    -------
    SelectionLog
        One row per line / record of the file, in file order. ``diagnostics[str(path)]`` holds
        the row count, counts by status and where ``source_file`` / ``source_row`` came from; for an
        aggregated file also ``attempts`` and ``attempt_status`` (sums of ``count``).

    Raises
    ------
    SelectionLogError
        A missing file, an unknown extension, an empty file, a malformed CSV / JSONL line or
        Parquet file, a ``columns`` name absent from the file, a design column that disagrees
        with ``meta``, or any row-level problem found by :meth:`SelectionLog.from_frame`
        (missing required column, status not allowed, unknown cluster, tool not in the
        cluster, ``chosen_position`` outside 1..K, duplicate attempt, a ``count`` that is missing
        or not a whole number in 0..10^15, the same cell twice in an aggregated file). All
        problems of one stage are collected and raised together, each as ``file:row:field: message``.

    Notes
    -----
    *Row numbers.* Every message names the 1-based **data row**: for CSV, row 1 is the first
    record after the header (line 2 of the file when no field spans several lines); for
    Parquet, row 1 is the first row; for JSONL, the row is the **line number** (blank lines
    are skipped but counted, so row ``n`` is what an editor shows as line ``n``).

    *Provenance.* Rows are validated with ``source_file = path`` and ``source_row`` = the row
    number above, so errors point into this file. When the file itself carries both
    ``source_file`` and ``source_row`` (a log written by :meth:`SelectionLog.write`), those
    values are kept in the returned log, so that the provenance still points at the original
    source and a written log reads back unchanged; cells missing there are filled with this
    file and row.

    *Aggregated files (a ``count`` column).* A row stands for ``count`` attempts with the same
    design, query, list and outcome; every count and statistic sums ``count`` instead of counting
    rows (the result equals that of the expanded file with one row per attempt). Without a
    ``query_id`` column all rows of a (design, cluster) form one pseudo-query ``"(aggregated)"``:
    no query bootstrap is then possible and :func:`selection_bias` reports multinomial intervals.
    The duplicate rule becomes: the same *cell* (design, query, rotation / ordering, status,
    chosen tool, chosen position, raw choice) may appear once; two rows of one cell are an error
    naming both rows (add their counts). ``count`` is validated like the other columns
    (``file:row:count: ...`` for a missing, fractional, negative, boolean or non-numeric value).

    *Spreadsheets and hand-made tables.* Tool names (the pick and the list shown) match a tool
    of the cluster after Unicode NFC normalisation, trimming and case folding (the raw text goes
    to ``raw_choice``); ``ordering`` may be ``a | b | c`` or a JSON / Python list of names; without
    a ``status`` column it is derived (a pick of a tool shown -> ``ok``, an empty pick ->
    ``no_call``, another name -> ``unknown_tool``); without a ``cluster_id`` column the cluster is
    the one catalog cluster that holds the tools shown. Each of these is reported in
    ``diagnostics[str(path)]["notes"]`` with its number of rows.

    *Types.* JSONL and Parquet keep their types. CSV has none: schema columns get their
    schema dtypes (so ``cluster_id`` ``"1"`` and ``query_id`` ``"7"`` stay strings), an
    empty cell is a missing value, and each extra design column is inferred: all
    ``True``/``False`` -> bool, all integers -> int64 (Int64 with missing cells), all numbers
    -> float64, otherwise string. Use JSONL or Parquet to keep an extra string column that
    looks like a number (``checkpoint = "8"``) a string.

    Examples
    --------
    A round trip through Parquet (CSV and JSONL work the same way):

    >>> import tempfile
    >>> from pathlib import Path
    >>> from toolbias_stats.simulate import simulate_selection_log
    >>> log = simulate_selection_log(n_clusters=2, n_queries=5, rng=0).log
    >>> tmp = Path(tempfile.mkdtemp())
    >>> path = log.write(tmp / "log.parquet")
    >>> read_table(tmp / "log.parquet", catalog=log.catalog).data.equals(log.data)
    True
    """
    from .._catalog import check_cluster_sizes

    path = Path(path)
    kind = _check_path(path, _READ_SUFFIXES)
    check_cluster_sizes(catalog)
    frame, rows = _read_frame(path, kind)
    renames, values = split_columns(columns, path)
    frame = _map_values(frame, values, path)
    frame = _rename(frame, renames, path)
    if kind in ("csv", "xlsx"):
        frame = _type_csv(frame)
    frame = _merge_design(frame, meta, path, rows)
    check_options(path, design=design, positions=positions, duplicates=duplicates)
    frame, notes, weighted = _spreadsheet(frame, catalog, path, rows, meta_keys=tuple((meta or {}).keys()),
                                          design=design, positions=positions, duplicates=duplicates)

    has_provenance = all(c in frame.columns for c in _PROVENANCE)
    kept = {c: frame[c].copy() for c in _PROVENANCE if c in frame.columns}
    frame["source_file"] = str(path)
    frame["source_row"] = rows
    mode = "error" if weighted or duplicates == "error" else "count"
    log = SelectionLog.from_frame(frame, catalog, source=str(path), duplicates=mode)

    data = log.data
    provenance = "this file"
    if has_provenance:
        data = _restore_provenance(data, kept, path, rows)
        provenance = "file columns source_file/source_row"
    status = data["status"].value_counts(sort=False)
    diagnostics = {str(path): {"rows": len(data), "status": {str(k): int(v) for k, v in status.items()},
                               "provenance": provenance, "duplicates": mode}}
    if notes:
        diagnostics[str(path)]["notes"] = notes
    if COUNT_COLUMN in data.columns:
        weights = data.groupby("status", sort=False, observed=True)[COUNT_COLUMN].sum()
        diagnostics[str(path)].update(attempts=int(data[COUNT_COLUMN].sum()),
                                      attempt_status={str(k): int(v) for k, v in weights.items()})
    return SelectionLog(data, catalog, diagnostics)


def read_catalog_table(path: PathLike) -> ToolCatalog:
    """Read a ToolCatalog from a CSV, JSONL, Parquet or JSON (list of records) file.

    Parameters
    ----------
    path : path-like
        One row per tool with the ToolCatalog columns of ``docs/schema.md``. ``tool_id`` may
        be absent (it is then the ToolBench function name ``{api}_for_{tool}``), but not empty in a
        row when the column exists; ``api_index`` may be absent (then the order of the rows within
        each cluster).

    Returns
    -------
    ToolCatalog

    Raises
    ------
    SelectionLogError
        A missing file, an unknown extension, an empty or malformed file, a missing required
        column, a value of the wrong type or a duplicate ``tool_id``.

    Notes
    -----
    In CSV files every cell is read as text and an empty cell is missing; the catalog then
    casts each column to its schema dtype. Numeric cluster ids in JSON / Parquet become strings,
    integral floats without their ``.0`` (``1.0`` -> ``"1"``).

    Examples
    --------
    >>> import toolbias_stats as tbs
    >>> catalog = read_catalog_table(tbs.datasets.path("choice/tools_catalog.csv"))
    >>> catalog.clusters, catalog.n_tools("geocoding")
    (['geocoding'], 5)
    """
    path = Path(path)
    kind = _check_path(path, CATALOG_SUFFIXES)
    if kind == "json":
        from ._common import load_json

        raw = load_json(path)
        if not isinstance(raw, list) or not all(isinstance(r, dict) for r in raw):
            raise SelectionLogError(problem(path, None, None, "expected a JSON list of tool records (objects)"))
        if not raw:
            raise SelectionLogError(problem(path, None, None, "the catalog is empty (no tools)"))
        frame = pd.DataFrame(raw)
    else:
        frame, _ = _read_frame(path, kind, what="catalog")
    if "tool_id" in frame.columns:   # issue 37: an empty id is not derived from api_name when the column exists
        empty = [i + 1 for i, v in enumerate(frame["tool_id"]) if _is_missing(v) or not str(v).strip()]
        if empty:
            raise SelectionLogError([problem(path, r, "tool_id", "missing value: the catalog has a tool_id column, "
                                                                 "so every row needs its id (an id filled from "
                                                                 "api_name would take the log's picks silently)")
                                     for r in empty])
    records = []
    for rec in frame.to_dict(orient="records"):
        clean = {k: (None if _is_missing(v) else v) for k, v in rec.items()}
        if clean.get("api_index") is None:
            clean.pop("api_index", None)  # from_records derives it from the row order
        if clean.get("cluster_id") is not None:
            clean["cluster_id"] = _id_str(clean["cluster_id"])
        records.append(clean)
    return ToolCatalog.from_records(records, source=str(path))


# ---------------------------------------------------------------------------------------
# reading
def _check_path(path: Path, suffixes: dict) -> str:
    if not path.exists():
        raise SelectionLogError(problem(path, None, None, "file not found"))
    kind = suffixes.get(path.suffix.lower())
    if kind is None:
        raise SelectionLogError(problem(path, None, None, f"expected a file ending in {', '.join(suffixes)}; "
                                                          f"got {path.name!r} instead"))
    check_regular_file(path)
    return kind


def _read_frame(path: Path, kind: str, what="selection log") -> tuple[pd.DataFrame, np.ndarray]:
    """Parse the file; return the frame and each row's 1-based row (CSV/Parquet) or line (JSONL)."""
    empty = problem(path, None, None, f"the {what} is empty (no data rows)")
    check_cells(path, kind)
    if kind in ("csv", "jsonl"):   # issue 37: under a memory cap, a message instead of the parser's SIGSEGV
        from ..._memory import READ_FACTOR, check_headroom

        check_headroom(READ_FACTOR * path.stat().st_size, f"{path}: reading this file with pandas")
    if kind == "csv":
        _check_csv_shape(path)
        try:
            frame = pd.read_csv(path, dtype=str, keep_default_na=False, na_values=[""], encoding="utf-8-sig")
        except pd.errors.EmptyDataError:
            raise SelectionLogError(empty) from None
        except pd.errors.ParserError as exc:
            m = re.search(r"Expected (\d+) fields in line (\d+), saw (\d+)", str(exc))
            if m:
                n, line, saw = (int(g) for g in m.groups())
                msg = problem(path, line - 1, None, f"malformed CSV: expected {n} fields, got {saw} (line {line})")
            else:
                msg = problem(path, None, None, f"malformed CSV: {exc}")
            raise SelectionLogError(msg) from None
        except UnicodeDecodeError:
            raise SelectionLogError(utf8_problem(path, data_rows=True)) from None
        rows = np.arange(1, len(frame) + 1)
    elif kind == "jsonl":
        records = read_jsonl(path)
        problems = [problem(path, ln, None, f"expected a JSON object per line, got {type(r).__name__}")
                    for ln, r in records if not isinstance(r, dict)]
        if problems:
            raise SelectionLogError(problems)
        _check_scalars(records, path)
        frame = pd.DataFrame([rec for _, rec in records])
        rows = np.array([ln for ln, _ in records], dtype=np.int64)
    elif kind == "xlsx":
        frame = _read_sheet(path)
        rows = np.arange(1, len(frame) + 1)
    else:
        try:
            frame = pd.read_parquet(path)
        except (OSError, ValueError) as exc:
            raise SelectionLogError(problem(path, None, None, f"not a readable Parquet file: {exc}")) from None
        frame = frame.reset_index(drop=True)
        rows = np.arange(1, len(frame) + 1)
    if len(frame) == 0:
        raise SelectionLogError(empty)
    return frame, rows


def _sheet_text(v):
    """A spreadsheet cell as the text a CSV export would hold (None: empty): whole numbers without ``.0``,
    booleans ``true`` / ``false``, dates in ISO format."""
    if v is None or (isinstance(v, str) and not v.strip()):
        return None
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    if hasattr(v, "isoformat"):
        return v.isoformat()
    return str(v)


def _read_sheet(path: Path) -> pd.DataFrame:
    """The first worksheet of an ``.xlsx`` workbook as text columns (openpyxl, read-only, cached values of
    formulas); trailing empty rows are dropped, an empty header cell is named as pandas names it."""
    try:
        import openpyxl
    except ImportError:
        raise SelectionLogError(problem(path, None, None, "reading .xlsx files needs openpyxl (pip install "
                                                          "'toolbias-stats[xlsx]' or pip install openpyxl)")) from None
    try:
        wb = openpyxl.load_workbook(path, read_only=True, data_only=True)
    except Exception as exc:   # a corrupt or encrypted workbook: openpyxl raises many types
        raise SelectionLogError(problem(path, None, None, f"not a readable .xlsx workbook: {exc}")) from None
    try:
        rows = [[_sheet_text(v) for v in r] for r in wb.worksheets[0].iter_rows(values_only=True)]
    finally:
        wb.close()
    while rows and all(v is None for v in rows[-1]):
        rows.pop()
    if len(rows) < 2:
        raise SelectionLogError(problem(path, None, None, "the selection log is empty (no data rows)"))
    header = [h if h is not None else f"Unnamed: {i}" for i, h in enumerate(rows[0])]
    width = len(header)
    body = [(r + [None] * width)[:width] for r in rows[1:]]
    for i, r in enumerate(body, start=1):   # issue 37: a NUL or an oversized cell, as in the other formats
        for name, v in zip(header, r):
            if (found := _cell_problem(path, i, name, v)) is not None:
                raise SelectionLogError(found)
    return pd.DataFrame(body, columns=header, dtype=object)


def split_columns(columns, path) -> tuple[dict | None, dict]:
    """``(renames, value maps)`` of a ``columns`` mapping (issue 36).

    A value is the new name (``{"http_status": "status"}``) or a table ``{"to": new name (default: the same),
    "values": {their value: ours}}`` that also translates the column's cells (``{"http_status": {"to": "status",
    "values": {"500": "parse_error", "200": "ok"}}}``). Value-map keys are compared with each cell's text
    (``500``, ``500.0`` and ``"500"`` are the same cell); a cell not in the map is kept as it is.

    Examples
    --------
    >>> split_columns({"pick": "chosen_tool", "code": {"to": "status", "values": {"500": "parse_error"}}}, "f.csv")
    ({'pick': 'chosen_tool', 'code': 'status'}, {'code': {'500': 'parse_error'}})
    """
    if columns is None:
        return None, {}
    if not isinstance(columns, dict):
        raise SelectionLogError(problem(path, None, "columns",
                                        f"expected a mapping {{their_name: our_name}} of strings, got {columns!r}"))
    renames, values, problems = {}, {}, []
    for k, v in columns.items():
        if isinstance(v, dict):
            bad = sorted(set(v) - {"to", "values"})
            to, vmap = v.get("to", k), v.get("values", {})
            if bad or not isinstance(to, str) or not isinstance(vmap, dict) or not all(
                    isinstance(x, (str, int, float, bool)) and isinstance(y, str) for x, y in vmap.items()):
                problems.append(problem(path, None, "columns", f"{k!r}: expected {{to = \"our_name\", values = "
                                                               f"{{their_value = \"our_value\"}}}}, got {v!r}"))
                continue
            renames[k] = to
            values[k] = {_cell_key(x): y for x, y in vmap.items()}
        else:
            renames[k] = v
    if problems:
        raise SelectionLogError(problems)
    return renames, values


def _cell_key(v) -> str:
    """The text a value map compares a cell on."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    if isinstance(v, np.generic):
        return _cell_key(v.item())
    return str(v).strip()


def _map_values(frame: pd.DataFrame, values: dict, path: Path) -> pd.DataFrame:
    """Translate the cells of value-mapped columns (before renaming; a column not in the file is an error)."""
    if not values:
        return frame
    missing = [problem(path, None, k, f"column named in `columns` ({k!r}) is not in the file; the file has "
                                      f"{list(frame.columns)}") for k in values if k not in frame.columns]
    if missing:
        raise SelectionLogError(missing)
    frame = frame.copy()
    for col, vmap in values.items():
        frame[col] = frame[col].map(lambda v, m=vmap: v if _is_missing(v) else m.get(_cell_key(v), v)).astype(object)
    return frame


def engine_entry(entry: dict) -> dict:
    """A table entry as the count engines take it: an ``.xlsx`` file or a file with value-mapped ``columns`` is
    read here (the same frame :func:`read_table` reads, typed as a CSV's text) and handed over in memory
    (``frame``, the path kept for messages), so every engine applies the same rules; other entries unchanged."""
    path = entry["path"]
    if entry.get("frame") is None and Path(path).suffix.lower() not in _READ_SUFFIXES and Path(path).is_file():
        _check_path(Path(path), _READ_SUFFIXES)     # the message read_table gives (naming .xlsx too)
    if entry.get("frame") is None and not isinstance(path, (list, tuple)):
        check_cells(path)     # issue 37: NUL, oversized cells, JSON NaN: the message read_table gives
    renames, values = split_columns(entry.get("columns"), path)
    sheet = Path(path).suffix.lower() in SHEET_SUFFIXES
    if not sheet and not values:
        return entry
    kind = _check_path(Path(path), _READ_SUFFIXES)
    frame, _rows = _read_frame(Path(path), kind)
    frame = _map_values(frame, values, Path(path))
    if kind in ("csv", "xlsx"):   # typed under our names (schema columns stay text), as read_table does
        back = {v: k for k, v in (renames or {}).items()}
        frame = _type_csv(frame.rename(columns=renames or {})).rename(columns=back)
    return {**entry, "path": str(path), "frame": frame, "columns": renames}


def _check_csv_shape(path: Path) -> None:
    """A header naming a column twice, or a record with too few or too many fields, is an error naming the line
    (pandas would rename the second column ``status.1`` and fill a short row with missing values)."""
    import csv

    try:
        with path.open(encoding="utf-8-sig", newline="") as fh:
            reader = csv.reader(fh)
            header = next(reader, None)
            if header is None:
                return
            dup = sorted({c for c in header if header.count(c) > 1})
            if dup:
                raise SelectionLogError([problem(path, None, c, "the header names this column twice") for c in dup])
            n = len(header)
            for i, rec in enumerate(reader, start=1):
                if len(rec) != n and rec:   # blank lines are skipped, as by pandas
                    line = reader.line_num
                    raise SelectionLogError(problem(path, i, None, f"malformed CSV: expected {n} fields, "
                                                                   f"got {len(rec)} (line {line})"))
    except UnicodeDecodeError:
        raise SelectionLogError(utf8_problem(path, data_rows=True)) from None
    except csv.Error as exc:
        raise SelectionLogError(problem(path, None, None, f"malformed CSV: {exc}")) from None


def read_jsonl(path: Path) -> list[tuple[int, object]]:
    """Parse a JSON Lines file into ``[(line_number, value), ...]``, skipping blank lines.

    Every malformed line is collected and reported at once as ``file:line: malformed JSON``.
    An empty file (no non-blank line) is an error.
    """
    path = Path(path)
    out, problems = [], []
    try:
        with path.open(encoding="utf-8-sig") as fh:
            for lineno, line in enumerate(fh, start=1):
                if not line.strip():
                    continue
                try:
                    out.append((lineno, json.loads(line, object_pairs_hook=no_duplicate_keys(path, lineno),
                                                   parse_constant=_json_constant)))
                except json.JSONDecodeError as exc:
                    problems.append(problem(path, lineno, None,
                                            f"malformed JSON (line {lineno}, column {exc.colno}): {exc.msg}"))
                except RecursionError:
                    problems.append(problem(path, lineno, None, TOO_DEEP))
                except SelectionLogError as exc:   # a key twice in one object
                    problems += exc.problems
    except UnicodeDecodeError:
        raise SelectionLogError(utf8_problem(path)) from None
    if problems:
        raise SelectionLogError(problems)
    if not out:
        raise SelectionLogError(problem(path, None, None, "the file is empty (no JSON records)"))
    return out


def _check_scalars(records, path):
    # lists are checked after renaming (an `ordering` may be a list of names)
    problems = [problem(path, ln, key, f"expected a scalar value, got {val!r}")
                for ln, rec in records for key, val in rec.items() if isinstance(val, dict)]
    if problems:
        raise SelectionLogError(problems)


def _spreadsheet(frame, catalog, path, rows, *, meta_keys, design, positions, duplicates):
    """Design columns, names, derived status / cluster, positions and repeats (see read_table Notes)."""
    own = all(c in frame.columns for c in _PROVENANCE)
    kept, ignored, problems = select_columns(list(frame.columns), design=design, meta_keys=meta_keys,
                                             own_format=own, source=path)
    if problems:
        raise SelectionLogError(problems)
    frame = frame.drop(columns=ignored)
    _check_list_cells(frame, path, rows)
    keys, codes, uniq, combos = _distinct_combos(frame)
    res = prepare_combos(combos, catalog, positions=positions, own_format=own)
    order = np.argsort(codes, kind="stable")
    bounds = np.searchsorted(codes[order], uniq)
    ends = np.append(bounds[1:], len(codes))
    problems = combo_problems(path, res, lambda i: rows[order[bounds[i]:ends[i]]])
    if problems:
        raise SelectionLogError(problems)
    frame = _apply_combos(frame, res.iloc[codes].reset_index(drop=True))
    weighted = COUNT_COLUMN in frame.columns
    frame, repeats = _attempts(frame, path, rows, kept=kept, weighted=weighted, duplicates=duplicates)
    notes = notes_of(combos, res, status_derived="status" not in keys, cluster_inferred="cluster_id" not in keys,
                     catalog=catalog, ignored=ignored, repeats=repeats)
    return frame, notes, weighted


def _check_list_cells(frame: pd.DataFrame, path: Path, rows) -> None:
    """List cells: only ``ordering`` may hold a list of names (JSON lines / Parquet)."""
    problems = []
    for col in frame.columns:
        if frame[col].dtype != object or col == "ordering":
            continue
        is_list = frame[col].map(lambda v: isinstance(v, (list, tuple, dict, np.ndarray))).to_numpy()
        problems += [problem(path, rows[i], col, f"expected a scalar value, got {_plain_value(frame[col].iat[i])!r}")
                     for i in np.flatnonzero(is_list)]
    if problems:
        raise SelectionLogError(problems)


def _distinct_combos(frame: pd.DataFrame):
    """``(keys, codes, uniq, combos)``: the :data:`COMBO_KEYS` present, each row's combination code, the codes
    in use and one row per distinct combination (with ``n``, its number of rows)."""
    keys = [c for c in COMBO_KEYS if c in frame.columns]
    work = frame[keys].copy()
    if "ordering" in work.columns and work["ordering"].dtype == object:
        work["ordering"] = work["ordering"].map(
            lambda v: json.dumps(_plain_list(v), separators=(",", ":"), ensure_ascii=False)
            if isinstance(v, (list, tuple, np.ndarray)) else v)
    for col in work.columns:   # one key per value: missing cells alike, numbers as they are
        work[col] = work[col].astype(object).where(work[col].notna(), None)
    codes = work.groupby(keys, dropna=False, sort=False).ngroup().to_numpy() if keys else np.zeros(len(work), int)
    uniq, first = np.unique(codes, return_index=True)
    combos = work.iloc[first].reset_index(drop=True)
    combos["n"] = np.bincount(codes)[uniq]
    return keys, codes, uniq, combos


def _apply_combos(frame: pd.DataFrame, per_row: pd.DataFrame) -> pd.DataFrame:
    """Write the cleaned values of each row's combination (``per_row``, aligned with ``frame``) into the frame."""
    frame = frame.reset_index(drop=True).copy()
    if "cluster_id" not in frame.columns:
        frame.insert(_insert_at(frame, "cluster_id"), "cluster_id", per_row["cluster_new"].to_numpy(object))
    if "ordering" in frame.columns:
        has = per_row["ordering_new"].notna().to_numpy()
        frame["ordering"] = np.where(has, per_row["ordering_new"].to_numpy(object),
                                     frame["ordering"].astype(object).to_numpy())
        frame["ordering"] = frame["ordering"].where(frame["ordering"].notna(), None)
    if "chosen_tool" in frame.columns:
        tool = per_row["tool_new"]
        frame["chosen_tool"] = tool.where(tool.notna(), frame["chosen_tool"].astype(object).map(
            lambda v: None if _is_missing(v) else _id_str(v)).astype("string"))
    if "status" not in frame.columns:
        frame["status"] = per_row["status_new"].to_numpy(object)
    raw = per_row["raw_new"]
    if "raw_choice" not in frame.columns:
        frame["raw_choice"] = raw.to_numpy(object)
    else:
        frame["raw_choice"] = frame["raw_choice"].astype(object).where(frame["raw_choice"].notna(),
                                                                       raw.to_numpy(object))
    if "chosen_position" in frame.columns:
        new = per_row["position_new"]
        if new.notna().any():
            frame["chosen_position"] = frame["chosen_position"].astype(object).where(
                new.isna().to_numpy(), new.astype(object).to_numpy())
    return frame


def _attempts(frame: pd.DataFrame, path: Path, rows, *, kept, weighted: bool, duplicates: str):
    """``(frame, repeats)``: two rows with one ``attempt_id`` are an error (the column is then dropped); without
    that column, the number of repeated attempts (the same query shown the same list again) is counted."""
    design_cols = [c for c in ("model", "run", "condition") if c in frame.columns] + kept
    if ATTEMPT_ID in frame.columns:
        key = design_cols + ["cluster_id"] + (["query_id"] if "query_id" in frame.columns else []) + [ATTEMPT_ID]
        ident = frame[key].astype("string").fillna("\x00<NA>")
        dup = ident.duplicated(keep="first").to_numpy()
        if dup.any() and frame[ATTEMPT_ID].notna().any():
            first_row: dict = {}
            for j, k in enumerate(map(tuple, ident.to_numpy())):
                first_row.setdefault(k, rows[j])
            problems = []
            for i in np.flatnonzero(dup & frame[ATTEMPT_ID].notna().to_numpy()):
                values = {c: (None if _is_missing(v) else _id_str(v)) for c, v in zip(key, frame[key].iloc[i])}
                problems.append(problem(path, rows[i], ATTEMPT_ID,
                                        attempt_id_message(values, first_row[tuple(ident.iloc[i])])))
            if problems:
                raise SelectionLogError(problems)
        return frame.drop(columns=ATTEMPT_ID), 0
    if not weighted and duplicates == "count":
        ident_cols = design_cols + ["cluster_id"] + [c for c in ("query_id", "rotation", "ordering")
                                                     if c in frame.columns]
        return frame, int(frame[ident_cols].astype("string").fillna("\x00<NA>").duplicated().sum())
    return frame, 0


def _plain_value(v):
    return {k: _plain_value(x) for k, x in v.items()} if isinstance(v, dict) else _plain_list(v)


def _plain_list(v):
    if isinstance(v, np.ndarray):
        return [_plain_list(x) for x in v.tolist()]
    if isinstance(v, (list, tuple)):
        return [_plain_list(x) for x in v]
    return v


def _type_csv(frame: pd.DataFrame) -> pd.DataFrame:
    """Give CSV text columns types: schema columns are left to the validator, extras are inferred."""
    frame = frame.copy()
    for col in frame.columns:
        if col not in LOG_COLUMNS and col != COUNT_COLUMN:   # `count` is checked (as text) by the validator
            frame[col] = _infer(frame[col])
    return frame


def _infer(col: pd.Series) -> pd.Series:
    present = col.dropna().astype(str)
    if len(present) == 0:
        return col
    has_na = len(present) < len(col)
    if present.isin(["True", "False", "true", "false"]).all():
        out = col.map(lambda v: v if _is_missing(v) else str(v).lower() == "true")
        return out.astype("boolean" if has_na else bool)
    if present.map(lambda v: bool(_INT_RE.match(v.strip()))).all():
        return pd.to_numeric(col).astype("Int64" if has_na else "int64")
    num = pd.to_numeric(col, errors="coerce")
    if num[col.notna()].notna().all():
        return num.astype("float64")
    return col


def _rename(frame: pd.DataFrame, columns, path: Path) -> pd.DataFrame:
    if columns is None:
        return frame
    if not isinstance(columns, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in columns.items()):
        raise SelectionLogError(problem(path, None, "columns",
                                        f"expected a mapping {{their_name: our_name}} of strings, got {columns!r}"))
    problems = [problem(path, None, k, f"column named in `columns` ({k!r} -> {v!r}) is not in the file; "
                                       f"the file has {list(frame.columns)}")
                for k, v in columns.items() if k not in frame.columns]
    renamed = [columns.get(c, c) for c in frame.columns]
    dups = sorted({c for c in renamed if renamed.count(c) > 1})
    problems += [problem(path, None, c, "two columns of the file would be called this after applying `columns`")
                 for c in dups]
    if problems:
        raise SelectionLogError(problems)
    return frame.rename(columns=columns)


def _merge_design(frame: pd.DataFrame, meta, path: Path, rows) -> pd.DataFrame:
    """Combine the file's design columns with the manifest metadata (see read_table Notes)."""
    meta = dict(meta or {})
    attempt = (set(LOG_COLUMNS) | {COUNT_COLUMN}) - set(_DESIGN)
    problems = [problem(path, None, k, "is an attempt column of the schema, not a design key; remove it from meta")
                for k in meta if k in attempt]
    if problems:
        raise SelectionLogError(problems)
    # check_meta validates types; it needs a model, which may come from the file instead.
    check_meta({"model": "<from file>", **meta} if "model" not in meta else meta, path)
    if "model" not in meta and "model" not in frame.columns:
        raise SelectionLogError(problem(path, None, "model", "no `model` column in the file and no model in `meta` "
                                                             "(set `model` in the manifest entry)"))
    frame = frame.copy()
    new = {}
    for key, value in meta.items():
        if key not in frame.columns:
            new[key] = value
            continue
        col = frame[key]
        missing = col.isna().to_numpy()
        differs = np.array([not m and not _same(v, value) for v, m in zip(col.to_numpy(object), missing)])
        for i in np.flatnonzero(differs):
            problems.append(problem(path, rows[i], key, f"the file has {col.iloc[i]!r} but the manifest entry "
                                                        f"(meta) says {value!r}"))
        if missing.any():
            frame[key] = col.astype(object).where(~missing, value).infer_objects()
    if problems:
        raise SelectionLogError(problems)
    if new:
        front = [c for c in _DESIGN if c in new]
        for key in front + [k for k in new if k not in front]:
            pos = _insert_at(frame, key)
            frame.insert(pos, key, new[key])
    return frame


def _insert_at(frame: pd.DataFrame, key: str) -> int:
    """Design columns go before the attempt columns (model, run, condition first)."""
    cols = list(frame.columns)
    if key in _DESIGN:
        before = [c for c in _DESIGN[: _DESIGN.index(key)] if c in cols]
        return cols.index(before[-1]) + 1 if before else 0
    attempt = [i for i, c in enumerate(cols) if c in LOG_COLUMNS and c not in _DESIGN]
    return attempt[0] if attempt else len(cols)


def _same(v, ref) -> bool:
    if isinstance(v, (bool, np.bool_)) != isinstance(ref, bool):
        return str(v) == str(ref)
    try:
        if v == ref:
            return True
    except (TypeError, ValueError):
        pass
    return str(v) == str(ref)


def _restore_provenance(data: pd.DataFrame, kept: dict, path: Path, rows) -> pd.DataFrame:
    sf = kept["source_file"].reset_index(drop=True)
    sr = kept["source_row"].reset_index(drop=True)
    num = pd.to_numeric(sr, errors="coerce")
    bad = (sr.notna() & (num.isna() | (num != np.round(num)) | (num < 0))).to_numpy()
    problems = [problem(path, rows[i], "source_row", f"expected an integer >= 0, got {sr.iloc[i]!r}")
                for i in np.flatnonzero(bad)]
    if problems:
        raise SelectionLogError(problems)
    fill = (sf.isna() | sr.isna()).to_numpy()
    data = data.copy()
    data["source_file"] = pd.array(np.where(fill, str(path), sf.astype(object).to_numpy()), dtype="string")
    data["source_row"] = np.where(fill, rows, num.fillna(0).to_numpy()).astype("int64")
    return data


def _is_missing(v) -> bool:
    return v is None or (np.isscalar(v) and pd.isna(v)) or v is pd.NA


def _id_str(v) -> str:
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return str(v)


# -- cells every engine refuses (issue 37): a NUL character, a cell over the size limit, a JSON NaN ------------
class _NotANumber(float):
    """A JSON ``NaN`` as parsed (kept as a marker so that the cell can be named)."""


def _json_constant(name: str) -> float:
    return _NotANumber("nan") if name == "NaN" else float(name.replace("Infinity", "inf"))


#: A JSON ``NaN`` (not a JSON value; Python's parser accepts it, and it would read as a missing cell).
JSON_NAN = ("NaN is not a JSON value: write null (or leave the key out) for a missing value, or the number that "
            "was meant (a NaN would drop the row from the analysis without a word)")


def check_cells(path: PathLike, kind: str | None = None) -> None:
    """Refuse a NUL character in a cell, a cell over :data:`~toolbias_stats.io._row_rules.MAX_CELL_BYTES` and a
    JSON ``NaN``: one message naming file, row and column (every engine calls this before reading a file).

    A fast byte scan of the file (or of the Parquet text columns) finds whether anything is suspicious; only
    then is the file parsed again to name the cell.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "log.csv"
    >>> _ = p.write_text("query_id,chosen_tool\\nq1,t\\x001\\n")
    >>> try:
    ...     check_cells(p)
    ... except SelectionLogError as exc:
    ...     print(str(exc).replace(str(p), "log.csv"))
    log.csv:1:chosen_tool: contains a NUL character (\\x00); remove it (a NUL ends text in C libraries and terminals)
    """
    path = Path(path)
    kind = kind or _READ_SUFFIXES.get(path.suffix.lower())
    if not path.is_file():
        return
    if kind in ("csv", "jsonl") and _suspicious_text(path, kind):
        found = _locate_csv(path) if kind == "csv" else _locate_jsonl(path)
    elif kind == "parquet":
        found = _locate_parquet(path)
    else:
        return
    if found is not None:
        raise SelectionLogError(found)


def _suspicious_text(path: Path, kind: str) -> bool:
    """Whether a text file may hold a NUL, a JSON NaN or a line longer than the cell limit (a byte scan)."""
    from .._row_rules import MAX_CELL_BYTES

    marks = (b"\x00",) + ((b"\\u0000", b"NaN") if kind == "jsonl" else ())
    long_lines = path.stat().st_size > MAX_CELL_BYTES
    run = 0    # bytes of the current line before this chunk
    with path.open("rb") as fh:
        while chunk := fh.read(1 << 24):
            if any(m in chunk for m in marks):
                return True
            if not long_lines:
                continue
            nl = np.flatnonzero(np.frombuffer(chunk, dtype=np.uint8) == 10)
            if not len(nl):
                run += len(chunk)
            else:
                longest = max(run + int(nl[0]), int(np.diff(nl).max()) if len(nl) > 1 else 0)
                run = len(chunk) - 1 - int(nl[-1])
                if longest > MAX_CELL_BYTES:
                    return True
            if run > MAX_CELL_BYTES:
                return True
    return False


def _cell_problem(path, row, column, value) -> str | None:
    from .._row_rules import BIG_CELL, MAX_CELL_BYTES, NUL_IN_CELL

    if isinstance(value, _NotANumber):
        return problem(path, row, column, JSON_NAN)
    if not isinstance(value, str):
        return None
    if "\x00" in value:
        return problem(path, row, column, NUL_IN_CELL)
    if len(value) > MAX_CELL_BYTES // 4 and len(value.encode("utf-8")) > MAX_CELL_BYTES:
        return problem(path, row, column, BIG_CELL.format(value=len(value.encode("utf-8"))))
    return None


def _locate_csv(path: Path) -> str | None:
    import csv
    import sys

    old = csv.field_size_limit(sys.maxsize)
    try:
        with path.open(encoding="utf-8-sig", newline="", errors="replace") as fh:
            reader = csv.reader(fh)
            header = next(reader, [])
            for i, rec in enumerate(reader, start=1):
                for j, v in enumerate(rec):
                    found = _cell_problem(path, i, header[j] if j < len(header) else None, v)
                    if found is not None:
                        return found
    except csv.Error:
        return None     # the reader names a malformed file
    finally:
        csv.field_size_limit(old)
    return None


def _locate_jsonl(path: Path) -> str | None:
    with path.open(encoding="utf-8-sig", errors="replace") as fh:
        for lineno, line in enumerate(fh, start=1):
            try:
                rec = json.loads(line, parse_constant=_json_constant)
            except (ValueError, RecursionError):
                continue   # the reader names a malformed line
            if isinstance(rec, dict):
                for key, v in rec.items():
                    found = _cell_problem(path, lineno, key, v)
                    if found is not None:
                        return found
    return None


def _text_suspicious(arr) -> bool:
    """Whether a pyarrow string array may hold a NUL or a value over the cell limit: a scan of its raw buffers
    (a dictionary array: of its dictionary), no per-value work."""
    from .._row_rules import MAX_CELL_BYTES

    if hasattr(arr, "dictionary"):
        arr = arr.dictionary
    if len(arr) == 0:
        return False
    _validity, offsets, data = arr.buffers()[:3]
    width = np.int64 if "large" in str(arr.type) else np.int32
    off = np.frombuffer(offsets, dtype=width)[arr.offset:arr.offset + len(arr) + 1]
    if data is None:
        return False
    return bool(np.diff(off).max() > MAX_CELL_BYTES) or b"\x00" in memoryview(data)[int(off[0]):int(off[-1])].tobytes()


def _locate_parquet(path: Path) -> str | None:
    """The first text cell of a Parquet file holding a NUL or over the size limit (pyarrow compute, by batch)."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from .._row_rules import MAX_CELL_BYTES

    try:
        schema = pq.read_schema(path)
        names = [f.name for f in schema
                 if pa.types.is_string(f.type) or pa.types.is_large_string(f.type)
                 or (pa.types.is_dictionary(f.type) and pa.types.is_string(f.type.value_type))]
        if not names:
            return None
        pf = pq.ParquetFile(path)
        # columns stored with a dictionary in every row group are read as dictionaries: only the dictionary is
        # scanned (_text_suspicious), not every row's text (issue 37: 1.6 s of CPU at 10M rows)
        md = pf.metadata
        at = {md.schema.column(j).path: j for j in range(md.num_columns)}
        coded = [n for n in names if n in at and all(md.row_group(i).column(at[n]).has_dictionary_page
                                                     for i in range(md.num_row_groups))]
        if coded:
            pf = pq.ParquetFile(path, read_dictionary=coded)
        offset = 0
        for batch in pf.iter_batches(columns=names, batch_size=1 << 20):
            for name in names:
                col = batch.column(name)
                if not _text_suspicious(col):
                    continue
                if pa.types.is_dictionary(col.type):
                    col = col.dictionary_decode()
                bad = pc.or_(pc.match_substring(col, "\x00"), pc.greater(pc.binary_length(col), MAX_CELL_BYTES))
                if pc.any(bad).as_py():
                    i = int(np.flatnonzero(bad.fill_null(False).to_numpy(zero_copy_only=False))[0])
                    return _cell_problem(path, offset + i + 1, name, col[i].as_py())
            offset += batch.num_rows
    except (OSError, ValueError, pa.ArrowException):
        return None   # the reader names an unreadable file
    return None
