"""The DuckDB engine: validate table files in SQL and count them in place, out of core.

The rows never enter Python. Every row-level check of :meth:`SelectionLog.from_frame` is a SQL predicate
here, and the rows it finds are reported with the same ``file:row:column: message`` text as the pandas
path (the reader tests run against both engines). Malformed files (a CSV row with too many fields, a bad
JSON line, a nested JSON value, an unreadable Parquet file) are re-read by the pandas reader, which names
the line; DuckDB only has to notice that something is wrong.
"""

from __future__ import annotations

import contextlib
import numbers
import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import numpy as np
import pandas as pd

from ..._schema import AGGREGATED_QUERY_ID, COUNT_COLUMN, LOG_COLUMNS, STATUSES
from ..._schema import DESIGN_COLUMNS as _DESIGN
from ...exceptions import SelectionLogError, problem
from .._catalog import ToolCatalog
from .._counts import (
    CELL_KEYS,
    QUERY_ORDERINGS_MAX_OK,
    ROW_COLUMNS,
    QueryArrays,
    SelectionCounts,
    finalize_query_orderings,
    finalize_table,
    position_columns,
    tool_columns,
)
from .._row_rules import (
    MISSING,
    NOT_INTEGER,
    OK_WITHOUT_TOOL,
    POSITION_RANGE,
    REQUIRED_COLUMN,
    ROTATION_RANGE,
    RUN_BELOW_ONE,
    one_of_message,
    ordering_message,
    unknown_cluster_message,
)
from .._selection_log import (
    CELL_OUTCOME,
    COUNT_MESSAGE,
    MAX_COUNT,
    MAX_INT,
    UNASSIGNABLE,
    duplicate_cell_message,
    duplicate_message,
    not_in_cluster_message,
)
from ..readers._common import utf8_problem
from ..readers._spreadsheet import (
    ATTEMPT_ID,
    COMBO_KEYS,
    attempt_id_message,
    check_options,
    notes_of,
    prepare_combos,
    select_columns,
)
from ..readers.table import TABLE_SUFFIXES, _check_path, _merge_design, _read_frame, _rename
from ._narrow import counted_design

__all__ = ["count_tables_duckdb"]

#: Problems listed per check before stopping (the message shows the first 20 of all).
_MAX_PER_CHECK = 1000
_INTEGER_TYPES = ("BIGINT", "INTEGER", "SMALLINT", "TINYINT", "UBIGINT", "UINTEGER", "USMALLINT", "UTINYINT",
                  "HUGEINT")
_INT_COLS = (("run", False), ("rotation", True), ("n_candidates", True), ("chosen_position", True))
#: A row check: ``(column, predicate_sql, value_sql, message(value) -> str)`` (see :func:`_run_checks`).
_Check = tuple[str, str, str, Callable[[Any], str]]


def _q(name: str) -> str:
    """A quoted SQL identifier."""
    return '"' + str(name).replace('"', '""') + '"'


def _lit(value) -> str:
    """A SQL literal for a manifest scalar."""
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, numbers.Integral):
        return f"CAST({int(value)} AS BIGINT)"
    if isinstance(value, numbers.Real):
        return f"CAST({float(value)!r} AS DOUBLE)"
    return "'" + str(value).replace("'", "''") + "'"


#: DuckDB's own memory (its default is 80% of the machine): a 100M-row log's aggregation and sort spill beyond it,
#: so DuckDB and the Python side together stay near 2 GiB (at "2GB" the process peaked at 2.7-3.75 GiB on 100M rows;
#: 10M rows run as fast at either limit: docs/performance.md, "Lead's check").
MEMORY_LIMIT = "1GB"
#: The environment variable that sets DuckDB's memory limit instead (a DuckDB size such as ``"4GB"``); named by
#: the message when the limit is reached.
MEMORY_ENV = "TOOLBIAS_DUCKDB_MEMORY_LIMIT"
#: The message when DuckDB's memory limit is reached although it spills to its temporary folder.
OUT_OF_MEMORY = ("DuckDB ran out of memory counting the logs (memory limit {limit}; what does not fit is spilled "
                 "to {spill}): set the environment variable {env} to a larger limit (e.g. {env}=4GB), free space "
                 "in that folder (or point TMPDIR elsewhere), or use --engine pandas. DuckDB said: {detail}")


def spill_folder() -> Path:
    """DuckDB's temporary folder: what does not fit in memory (a parsed CSV, a large aggregation) spills here."""
    return Path(tempfile.gettempdir()) / "toolbias_stats_duckdb"


def memory_limit_setting() -> str:
    """DuckDB's memory limit: ``$TOOLBIAS_DUCKDB_MEMORY_LIMIT`` when set, else :data:`MEMORY_LIMIT`."""
    return os.environ.get(MEMORY_ENV, "").strip() or MEMORY_LIMIT


def connect(threads: int | None = None, memory_limit: str | None = "", progress: bool = False):
    """A fresh in-memory DuckDB connection (insertion order preserved: row numbers follow the file).

    ``memory_limit``: a DuckDB size; ``""`` (default) :func:`memory_limit_setting`; None leaves DuckDB's own."""
    import duckdb

    if memory_limit == "":
        memory_limit = memory_limit_setting()
    con = duckdb.connect(":memory:")
    con.execute("SET preserve_insertion_order = true")
    # what does not fit in memory (a parsed CSV, a large aggregation) spills here, not into the working directory
    spill = spill_folder()
    con.execute(f"SET temp_directory = '{str(spill).replace(chr(39), chr(39) * 2)}'")
    # DuckDB's own bar (long queries, on a terminal only); quiet otherwise.
    con.execute(f"SET enable_progress_bar = {'true' if progress else 'false'}")
    if threads:
        con.execute(f"SET threads = {int(threads)}")
    if memory_limit:
        try:
            con.execute(f"SET memory_limit = '{memory_limit}'")
        except duckdb.Error as exc:   # a malformed size in the environment variable
            con.close()
            raise ValueError(f"{MEMORY_ENV}={memory_limit!r} is not a DuckDB memory size (e.g. 4GB): {exc}") from None
    return con


class _File:
    """One table file registered as a DuckDB view ``v{i}`` with schema columns, ``__row`` and ``__file``."""

    # set by register() / _prepare() / _validate_file() (declared here for the type checker only)
    line_of: list[int] | None
    n_rows: int
    file_columns: list[str]
    ignored_columns: list[str]
    types: dict[str, str]
    status_counts: dict[str, int]
    notes: dict
    extras: list[str]
    weighted: bool
    stage1: list[_Check]
    stage2: list[_Check]
    #: internal columns of the raw view that are not the file's (a batch of files: ``_Batch``), and
    #: those of them carried into the cleaned rows
    carry: tuple[str, ...] = ()
    carry_named: tuple[str, ...] = ()

    def __init__(self, con, index: int | str, path, catalog: ToolCatalog, meta, columns, frame=None, row_offset=0,
                 options=None):
        self.con, self.path, self.catalog = con, path if frame is not None else Path(path), catalog
        self.name = f"v{index}"
        # ``frame``: one partition of a dataset (dask engine), already in memory; rows count from row_offset.
        self.frame, self.row_offset = frame, int(row_offset)
        self.kind = "frame" if frame is not None else _check_path(self.path, TABLE_SUFFIXES)
        self.meta = dict(meta or {})
        self.columns = columns
        self.options = dict(options or {})
        self.line_of = None

    # -- reading -----------------------------------------------------------------------------
    def _source_sql(self) -> str:
        p = "'" + str(self.path).replace("'", "''") + "'"
        if self.kind == "csv":
            # The header is read here so that DuckDB parses strictly (no dialect sniffing): a row with the
            # wrong number of fields is an error, as for pandas.
            header = _csv_header(self.path)
            if not header:
                raise SelectionLogError(problem(self.path, None, None, "the selection log is empty (no data rows)"))
            # a column without a name is called as pandas calls it ("Unnamed: 3")
            cols = ", ".join(f"{_lit(c if c else f'Unnamed: {i}')}: 'VARCHAR'" for i, c in enumerate(header))
            return (f"read_csv({p}, header = true, auto_detect = false, columns = {{{cols}}}, delim = ',', "
                    f"quote = '\"', escape = '\"', strict_mode = true)")
        if self.kind == "jsonl":
            return f"read_json({p}, format = 'newline_delimited', records = true)"
        return f"read_parquet({p})"

    def _row_sql(self) -> str:
        """SQL of a row's number in its file (``__row``)."""
        return f"row_number() OVER () + {self.row_offset}"

    def _file_sql(self) -> str:
        """SQL of the file's name (``__file``)."""
        return _lit(str(self.path))

    def _pandas_error(self, exc):
        """Let the pandas reader name the malformed line; fall back to DuckDB's own message."""
        if self.kind != "frame":
            _read_frame(self.path, self.kind)   # raises SelectionLogError for every case it knows
        raise SelectionLogError(problem(self.path, None, None, f"cannot read the file: {exc}")) from None

    def register(self):
        import duckdb

        raw = f"{self.name}_raw"
        try:
            if self.kind == "frame":
                self.con.register(raw, self.frame)
            elif self.kind == "parquet":
                self.con.execute(f"CREATE TEMP VIEW {raw} AS SELECT * FROM {self._source_sql()}")
            else:  # text formats are parsed once, into a temporary table; Parquet is scanned in place
                self.con.execute(f"CREATE TEMP TABLE {raw} AS SELECT * FROM {self._source_sql()}")
            described = self.con.execute(f"DESCRIBE {raw}").fetchall()
            n = self.con.execute(f"SELECT count(*) FROM {raw}").fetchone()[0]
        except duckdb.Error as exc:
            self._pandas_error(exc)
        names = [d[0] for d in described if d[0] not in self.carry]
        types = {d[0]: d[1] for d in described}
        if n == 0:
            raise SelectionLogError(problem(self.path, None, None, "the selection log is empty (no data rows)"))
        # Column names: the manifest mapping, then the design metadata (structural checks of the pandas path).
        skeleton = _rename(pd.DataFrame(columns=names), self.columns, self.path)
        renamed = list(skeleton.columns)
        _merge_design(skeleton, self.meta, self.path, np.empty(0, dtype=np.int64))
        # ignored columns never enter the views (a column called `__row` or `k` must not meet the engine's own)
        check_options(self.path, **self.options)
        own = "source_file" in renamed and "source_row" in renamed
        _, ignored, problems = select_columns(renamed, design=self.options.get("design"), meta_keys=tuple(self.meta),
                                              own_format=own, source=self.path)
        if problems:
            raise SelectionLogError(problems)
        pairs = [(old, new) for old, new in zip(names, renamed) if new not in ignored]
        self.ignored_columns = [c for c in renamed if c in ignored]
        self.types = {new: types[old] for old, new in pairs}
        select = [f"{_q(old)} AS {_q(new)}" for old, new in pairs]
        select = [f"{self._row_sql()} AS __row"] + list(self.carry_named) + select
        self.con.execute(f"CREATE TEMP VIEW {self.name}_named0 AS SELECT {', '.join(select)} FROM {raw}")
        self.n_rows = int(n)
        self.file_columns = [new for _, new in pairs]
        _prepare(self.con, self, self.catalog)
        return self

    def _nested_error(self, cols):
        """A nested value (JSON object / list, Parquet struct): the pandas reader names the rows."""
        if self.kind != "frame":
            from ..readers.table import read_table

            read_table(self.path, catalog=self.catalog, meta=self.meta, columns=self.columns, **self.options)
        else:   # a partition (dask): the rows are in memory; the same message as the pandas reader
            frame = self.frame.rename(columns=self.columns or {})
            found = []
            for c in cols:
                for i, v in enumerate(frame[c]):
                    if isinstance(v, (list, tuple, dict, np.ndarray)):
                        found.append(problem(self.path, self.row_offset + i + 1, c,
                                             f"expected a scalar value, got {_plain_value(v)!r}"))
            if found:
                raise SelectionLogError(found)
        raise SelectionLogError(problem(self.path, None, cols[0], "expected a scalar value, got a nested value "
                                                                  "(a list, object or struct)"))

    def row_number(self, rows):
        """File row of each DuckDB record number: JSONL rows are line numbers (blank lines count)."""
        rows = [int(r) for r in rows]
        if self.kind != "jsonl":
            return rows
        if self.line_of is None:
            lines = []
            with self.path.open(encoding="utf-8-sig") as fh:
                for lineno, line in enumerate(fh, start=1):
                    if line.strip():
                        lines.append(lineno)
            self.line_of = lines
        return [self.line_of[r - 1] for r in rows]


def _plain_value(v):
    from ..readers.table import _plain_list

    return {k: _plain_value(x) for k, x in v.items()} if isinstance(v, dict) else _plain_list(v)


def _num_repr(v):
    """A cell as pandas shows it in messages (DuckDB's doubles: ints stay ints)."""
    return v


def _nested(sql_type: str) -> bool:
    return sql_type.startswith(("STRUCT", "MAP", "UNION")) or sql_type.endswith("]") or sql_type == "JSON"


def _prepare(con, f: _File, catalog: ToolCatalog):
    """Build ``{f.name}_named`` from ``{f.name}_named0``: the spreadsheet clean-up of the pandas reader
    (readers/_spreadsheet.py), run on the file's distinct cell combinations and joined back."""
    opts = f.options
    cols = list(f.file_columns)
    own = "source_file" in cols and "source_row" in cols
    kept, _, _ = select_columns(cols, design=opts.get("design"), meta_keys=tuple(f.meta), own_format=own,
                                source=f.path)
    ignored = f.ignored_columns
    t0 = f"{f.name}_named0"
    _check_nested(f, ignored)
    keys = [c for c in COMBO_KEYS if c in cols]
    combos, res = _combos_map(con, f, catalog, keys, own, t0)
    joined = f"{t0} t LEFT JOIN {f.name}_map m ON {_join_on(con, f, keys)}"
    if res["problem"].notna().any():
        _raise_combo_problems(con, f, joined)
    types = _named_view(con, f, cols, ignored, joined)
    # attempt ids name attempts: two rows with one id are an error; otherwise repeats of a list are counted
    design_cols = [c for c in ("model", "run", "condition") if c in cols or c in f.meta] + kept
    repeats = 0
    if ATTEMPT_ID in cols:
        _check_attempt_ids(con, f, design_cols, cols, types, t0)
    elif COUNT_COLUMN not in cols and opts.get("duplicates", "count") == "count":
        ident = design_cols + ["cluster_id"] + [c for c in ("query_id", "rotation", "ordering") if c in cols]
        # the identity columns pass the clean-up unchanged unless the cluster is derived or an ordering given:
        # then the file's own rows are counted (no join with the clean-up map)
        src = t0 if "cluster_id" in cols and "ordering" not in cols else f"{f.name}_named"
        repeats = _repeats(con, src, [c for c in ident if c in types] + list(f.carry_named), types,
                           coarse_drop=[c for c in kept if c not in _DESIGN])
    # rows by status, from the distinct combinations (the status passes the clean-up unchanged when given)
    status_of = combos["status"] if "status" in keys else res["status_new"]
    f.status_counts = {}
    for st, n in zip(status_of.astype(object), combos["n"].to_numpy()):
        key = str(st) if st is not None and not (isinstance(st, float) and np.isnan(st)) else "None"
        f.status_counts[key] = f.status_counts.get(key, 0) + int(n)
    f.notes = notes_of(combos, res, status_derived="status" not in keys, cluster_inferred="cluster_id" not in keys,
                       catalog=catalog, ignored=ignored, repeats=int(repeats))
    f.file_columns = list(types)
    f.types = types


def _check_nested(f: _File, ignored) -> None:
    """Nested values (JSON objects / lists, Parquet structs) in a column that is read: named as the pandas reader
    names them."""
    nested = [c for c, t in f.types.items() if c not in ignored and c != "ordering" and _nested(t)]
    if nested or ("ordering" in f.types and _nested(f.types["ordering"])
                  and not f.types["ordering"].startswith("VARCHAR[")):
        f._nested_error(nested or ["ordering"])


def _key_sql(f: _File, c, p=""):
    """A combination key's SQL (a list of tools shown as its JSON text)."""
    if c == "ordering" and f.types[c].startswith("VARCHAR["):
        return f"CAST(to_json({p}{_q(c)}) AS VARCHAR)"
    return p + _q(c)


def _combos_map(con, f: _File, catalog, keys, own, t0):
    """The file's distinct combinations (``{f.name}_combos``), cleaned up as the pandas reader does, and the map
    of each to what its rows share (``{f.name}_map``): ``(combos, clean-up result)``."""
    opts = f.options
    # the distinct combinations, kept typed in DuckDB (the rows are joined to them on their own values)
    sel = "".join(f"{_key_sql(f, c)} AS {_q(c)}, " for c in keys)
    ksel = "".join(f"CAST({_key_sql(f, c)} AS VARCHAR) AS __k{i}, " for i, c in enumerate(keys))
    hashed = f"hash({', '.join(_q(c) for c in keys)}) AS __h, " if keys else ""
    con.execute(f"CREATE OR REPLACE TEMP TABLE {f.name}_combos AS SELECT *, {hashed}row_number() OVER () AS __ci "
                f"FROM (SELECT {sel}{ksel}count(*) AS n FROM {t0}{' GROUP BY ALL' if keys else ''})")
    combos = con.execute(f"SELECT * FROM {f.name}_combos ORDER BY __ci").df()
    for c in keys:
        combos[c] = combos[c].astype(object).where(combos[c].notna(), None)
    res = prepare_combos(combos[keys + ["n"]], catalog, positions=opts.get("positions", "error"), own_format=own)
    mapped = pd.concat([combos[["__ci"]], res], axis=1)
    for c in ("cluster_new", "ordering_new", "tool_new", "status_new", "raw_new", "problem_column", "problem"):
        mapped[c] = mapped[c].astype(object).where(mapped[c].notna(), None)
    # per combination, what every row of it shares: the cluster's size (null: not a cluster of the catalog), the
    # chosen tool's catalog index and whether the status is one of ours (no per-row join with the catalog)
    cl = _id_sql("cluster_id", f.types["cluster_id"], "c.") if "cluster_id" in keys else "r.cluster_new"
    tl = (f"COALESCE(r.tool_new, {_id_sql('chosen_tool', f.types['chosen_tool'], 'c.')})" if "chosen_tool" in keys
          else "CAST(NULL AS VARCHAR)")
    stx = "c.status" if "status" in keys else "r.status_new"
    statuses = ", ".join(_lit(s) for s in STATUSES)
    con.register(f"{f.name}_map_df", mapped)
    con.execute(f"""CREATE OR REPLACE TEMP TABLE {f.name}_map AS
        SELECT c.*, r.* EXCLUDE (__ci), k.k AS __ksize, a.api_index AS __api,
               COALESCE({stx} IS NOT NULL AND CAST({stx} AS VARCHAR) NOT IN ({statuses}), FALSE) AS __stbad,
               {_status_code_sql(f"CAST({stx} AS VARCHAR)")} AS __scode
        FROM {f.name}_combos c JOIN {f.name}_map_df r USING (__ci)
        LEFT JOIN __clusters k ON k.cluster_id = {cl}
        LEFT JOIN __cat a ON a.cluster_id = {cl} AND a.tool_id = {tl}""")
    con.unregister(f"{f.name}_map_df")
    return combos, res


def _join_on(con, f: _File, keys) -> str:
    """The condition joining a row (``t``) to its combination (``m``)."""
    def join_on(i, c):
        # typed values are compared as they are (no text per row); floats and lists as text, as they were keyed
        if f.types[c] in _INTEGER_TYPES or f.types[c] in ("VARCHAR", "BOOLEAN"):
            return f"t.{_q(c)} IS NOT DISTINCT FROM m.{_q(c)}"
        return f"CAST({_key_sql(f, c, 't.')} AS VARCHAR) IS NOT DISTINCT FROM m.__k{i}"

    on = " AND ".join(join_on(i, c) for i, c in enumerate(keys)) or "TRUE"
    if keys and con.execute(f"SELECT count(DISTINCT __h) = count(*) FROM {f.name}_map").fetchone()[0]:
        # one 64-bit hash of the row's key values instead of comparing them one by one: every row's combination
        # is in the map, so a row meets exactly its own combination as long as no two combinations share a hash
        on = f"hash({', '.join(_key_sql(f, c, 't.') for c in keys)}) = m.__h"
    return on


def _raise_combo_problems(con, f: _File, joined) -> None:
    """The clean-up's problems, at the rows that have them (the first ones, and how many in all)."""
    total = con.execute(f"SELECT count(*) FROM {joined} WHERE m.problem IS NOT NULL").fetchone()[0]
    hits = con.execute(f"SELECT t.__row, m.problem_column, m.problem FROM {joined} WHERE m.problem IS NOT NULL "
                       f"ORDER BY t.__row LIMIT {_MAX_PER_CHECK}").fetchall()
    rows = f.row_number([h[0] for h in hits])
    found = _Problems(problem(f.path, r, h[1], h[2]) for r, h in zip(rows, hits))
    found.total = int(total)
    _raise([found])


def _named_view(con, f: _File, cols, ignored, joined) -> dict:
    """Create the view ``{f.name}_named`` (the rows with the clean-up applied); returns its columns' types."""
    select = ["t.__row AS __row"] + [f"t.{c} AS {c}" for c in f.carry_named]
    types = {}
    for c in cols:
        if c in ignored or c == ATTEMPT_ID:
            continue
        q = f"t.{_q(c)}"
        if c == "ordering":
            expr, types[c] = f"COALESCE(m.ordering_new, TRY_CAST({q} AS VARCHAR))", "VARCHAR"
        elif c == "chosen_tool":
            expr, types[c] = f"COALESCE(m.tool_new, {_id_sql(c, f.types[c], 't.')})", "VARCHAR"
        elif c == "chosen_position":
            expr, types[c] = f"COALESCE(CAST(m.position_new AS {f.types[c]}), {q})", f.types[c]
        elif c == "raw_choice":
            expr, types[c] = f"COALESCE(CAST({q} AS VARCHAR), m.raw_new)", "VARCHAR"
        else:
            expr, types[c] = q, f.types[c]
        select.append(f"{expr} AS {_q(c)}")
    for c, new in (("cluster_id", "cluster_new"), ("status", "status_new"), ("raw_choice", "raw_new")):
        if c not in cols:
            select.append(f"m.{new} AS {_q(c)}")
            types[c] = "VARCHAR"
    select += ["m.__ksize AS __ksize", "m.__api AS __api", "m.__stbad AS __stbad", "m.__scode AS __scode"]
    # no ORDER BY (a sort of every row at every scan): each query that lists rows orders by __row itself
    con.execute(f"CREATE TEMP VIEW {f.name}_named AS SELECT {', '.join(select)} FROM {joined}")
    return types


def _check_attempt_ids(con, f: _File, design_cols, cols, types, t0) -> None:
    """Two rows with one attempt id (in the same design cell, cluster and query) are an error."""
    named = f"{f.name}_named"

    def col_sql(c):
        return f"CAST({_q(c)} AS VARCHAR)" if c in types or c == ATTEMPT_ID else f"{_lit(str(f.meta[c]))}"

    key = design_cols + ["cluster_id"] + (["query_id"] if "query_id" in cols else []) + [ATTEMPT_ID]
    src = (f"(SELECT n.*, CAST(t.{_q(ATTEMPT_ID)} AS VARCHAR) AS {_q(ATTEMPT_ID)} FROM {named} n "
           f"JOIN {t0} t USING (__row))")
    part = f"PARTITION BY {', '.join(col_sql(c) for c in key)} ORDER BY __row"
    hits = con.execute(f"""SELECT __row, first, {', '.join(f'k{i}' for i in range(len(key)))} FROM (
        SELECT __row, row_number() OVER ({part}) AS r, first_value(__row) OVER ({part}) AS first,
               {', '.join(f'{col_sql(c)} AS k{i}' for i, c in enumerate(key))} FROM {src})
        WHERE r > 1 AND {_q('k' + str(len(key) - 1))} IS NOT NULL
        ORDER BY __row LIMIT {_MAX_PER_CHECK}""").fetchall()
    if hits:
        rows = f.row_number([h[0] for h in hits])
        firsts = f.row_number([h[1] for h in hits])
        raise SelectionLogError([problem(f.path, r, ATTEMPT_ID, attempt_id_message(dict(zip(key, h[2:])), fr))
                                 for r, fr, h in zip(rows, firsts, hits)])


def _repeats(con, src: str, ident, types, coarse_drop=()) -> int:
    """Rows of ``src`` whose identity (the columns ``ident``) an earlier row has: rows - distinct identities.

    Columns not in the file (manifest values) are constant within it and left out. Integer and text columns are
    compared as they are, others as text (as the pandas path's ``astype("string")``). With an integer rotation the
    count runs per query (rotations 0..63 as a bit set: far fewer groups than rows); a rotation outside 0..63 or
    missing falls back to the exact distinct count. ``coarse_drop``: identity columns (the extra design columns)
    left out of a first, cheaper proof that there is no repeat (see below)."""
    def col(c):
        t = types.get(c, "VARCHAR")
        return _q(c) if t in _INTEGER_TYPES or t == "VARCHAR" else f"CAST({_q(c)} AS VARCHAR)"

    if not ident:
        return 0
    if "rotation" in ident and types.get("rotation") in _INTEGER_TYPES:
        rest = [col(c) for c in ident if c != "rotation"]

        def per_query(group, source=src):
            return con.execute(
                f"SELECT sum(__n - __d), sum(__o) FROM (SELECT count_if(rotation BETWEEN 0 AND 63) AS __n, "
                "bit_count(bit_or(CASE WHEN rotation BETWEEN 0 AND 63 THEN CAST(1 AS UBIGINT) << CAST(rotation AS "
                "UBIGINT) END)) AS __d, count_if(rotation IS NULL OR rotation < 0 OR rotation > 63) AS __o "
                f"FROM {source}{' GROUP BY ' + group if group else ''})").fetchone()

        # first grouped by one 64-bit hash of the other columns (one integer key: issue 37, 3 design columns made
        # this count cost more than the aggregation). Queries sharing a hash can only add repeats (n1 + n2 -
        # |B1 | B2| >= (n1 - |B1|) + (n2 - |B2|)), so none found there means none; any found are counted exactly
        coarse = [col(c) for c in ident if c != "rotation" and c not in coarse_drop]
        if coarse and len(coarse) < len(rest) and _no_repeat_without_design(per_query, src, coarse):
            return 0
        n_rep, other = per_query(f"hash({', '.join(rest)})" if rest else "")
        if n_rep and rest and not other:
            n_rep, other = per_query(", ".join(rest))
        if not other:
            return int(n_rep or 0)
    idsql = ", ".join(col(c) for c in ident)
    return int(con.execute(f"SELECT count(*) - (SELECT count(*) FROM (SELECT DISTINCT {idsql} FROM {src})) "
                           f"FROM {src}").fetchone()[0])


#: Rows of the sample that decides whether the proof without the design columns is tried (see below).
_COARSE_SAMPLE_ROWS = 1 << 20


def _no_repeat_without_design(per_query, src: str, coarse) -> bool:
    """Whether grouping by the identity without the extra design columns (``coarse``) already proves there is no
    repeat (issue 37: 10M rows with 3 design columns random per row have 9.3M query x design cells, but only 2M
    queries). Merging identities can only add repeats (as for the hash), so no repeat per coarse group means
    none per identity. Where design cells repeat a query's rotations (a sweep: every query at every level) the
    proof fails; a sample of the first rows that already shows a coarse repeat skips it."""
    group = f"hash({', '.join(coarse)})"
    n_rep, other = per_query(group, f"(SELECT * FROM {src} LIMIT {_COARSE_SAMPLE_ROWS})")
    if n_rep or other:
        return False
    n_rep, other = per_query(group)
    return not n_rep and not other


def _csv_header(path: Path) -> list[str]:
    """Column names of a CSV file (first record), or [] for an empty file."""
    import csv

    try:
        with path.open(encoding="utf-8-sig", newline="") as fh:
            header = next(csv.reader(fh), [])
    except UnicodeDecodeError:
        raise SelectionLogError(utf8_problem(path, data_rows=True)) from None
    dup = sorted({c for c in header if header.count(c) > 1})
    if dup:
        raise SelectionLogError([problem(path, None, c, "the header names this column twice") for c in dup])
    return header


def count_tables_duckdb(entries, catalog: ToolCatalog, *, level: str = "query", con=None,
                        progress: bool = False, check_duplicates: bool = True, cells: bool = True,
                        count_by=None) -> SelectionCounts:
    """Validate and count table files with DuckDB.

    Parameters
    ----------
    entries : list of dict
        One per file: ``path``, optional ``meta`` (design metadata of the manifest entry) and ``columns``.
    catalog : ToolCatalog
    level : {"query", "cluster"}
    con : duckdb connection, optional
    progress : bool
        Show a progress bar over the files.
    check_duplicates : bool
        Look for two attempts with the same identity (the dask engine does this across partitions itself).
    cells : bool
        Also count the ``cells`` (per ordering; the Bayesian model needs them; one more scan).
    count_by : sequence of str, optional
        Count by ``model``, ``run``, ``condition`` and only these extra design columns (see
        :func:`~toolbias_stats.io.engines._narrow.counted_design`; default: every design column). The rows are
        validated, and duplicates and repeats found, on every design column all the same.

    Returns
    -------
    SelectionCounts
    """
    from .._catalog import check_cluster_sizes

    check_cluster_sizes(catalog)
    import duckdb

    own = con is None
    con = con or connect(progress=progress)
    try:
        return _count_files(con, entries, catalog, level, progress, check_duplicates, cells, count_by)
    except duckdb.OutOfMemoryException as exc:
        # one message naming the setting to change (exit 2 in the CLI), not DuckDB's traceback
        detail = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        try:
            limit = con.execute("SELECT current_setting('memory_limit')").fetchone()[0]
        except duckdb.Error:
            limit = memory_limit_setting()
        raise MemoryLimitError(OUT_OF_MEMORY.format(limit=limit, spill=spill_folder(), env=MEMORY_ENV,
                                                    detail=detail)) from None
    finally:
        if own:   # DuckDB's memory goes back before the statistics start
            con.close()


class MemoryLimitError(ValueError):
    """DuckDB's memory limit was reached (the message names :data:`MEMORY_ENV`, the setting to change)."""


def _count_files(con, entries, catalog, level, progress, check_duplicates, cells, count_by=None) -> SelectionCounts:
    """:func:`count_tables_duckdb` on an open connection."""
    _register_catalog(con, catalog)
    files = [_File(con, i, e["path"], catalog, e.get("meta"), e.get("columns"), e.get("frame"), e.get("row_offset", 0),
                   {k: e[k] for k in ("design", "positions", "duplicates") if k in e})
             for i, e in enumerate(entries)]
    # many Parquet files of one schema: one scan of them all (issue 37); any problem, and any case the batch does
    # not reproduce exactly, falls back to the file-by-file path below, which names it
    batch = _batch_of(con, files, catalog)
    if batch is not None:
        try:
            design = batch.validate(files)
            _study_rows(con, [batch])
            return _summarise(con, files, catalog, design, level, check_duplicates, cells, batched=True,
                              count_by=count_by)
        except Exception:   # the file-by-file path raises the exact message (or succeeds)
            _drop_batch(con)
    it = files
    if progress:
        from tqdm.auto import tqdm

        it = tqdm(files, desc="validate (duckdb)", unit="file", leave=False)
    extras_all: list[str] = []
    for f in it:
        f.register()
        _validate_file(con, f, catalog)
        for c in f.extras:
            if c not in extras_all:
                extras_all.append(c)
    design = list(_DESIGN) + extras_all
    _study_rows(con, files)
    return _summarise(con, files, catalog, design, level, check_duplicates, cells, count_by=count_by)


def _summarise(con, files, catalog, design, level, check_duplicates, cells, batched=False,
               count_by=None) -> SelectionCounts:
    """Aggregate ``study`` (every file's validated rows), name the bad rows if any, and build the counts.

    ``batched``: the files were read as one batch; a bad row ends the batch (the caller reads file by file).
    ``count_by``: the counts are grouped by the design columns :func:`counted_design` keeps; duplicates are
    looked for on the whole ``design`` (an attempt's identity) all the same."""
    weighted = any(f.weighted for f in files)
    strict = any(f.weighted or f.options.get("duplicates") == "error" for f in files)
    counted = counted_design(design, count_by)
    table, cell_table, flags = _aggregate(con, catalog, counted, level, with_cells=cells, weighted=weighted,
                                          duplicates=check_duplicates and strict)
    # the checks ran inside the scan; name the rows, stage by stage as SelectionLog.from_frame does
    if flags["bad1"] or flags["bad"]:
        if batched:
            raise _Fallback("a bad row")
        for f in files:      # file by file, stage by stage: the first problems the pandas path would raise
            for checks, view in ((f.stage1, "named"), (f.stage2, "ord")):
                found = _run_checks(con, f, f"{f.name}_{view}", checks)
                if found:
                    _raise([found])
    if check_duplicates and strict and not weighted and counted != list(design) and flags["maybe_duplicates"]:
        # the pre-check grouped by the counted columns only (attempts of other design cells look alike there):
        # decide it again on the whole identity, so the exact search runs only where it may find something
        flags["maybe_duplicates"] = _maybe_duplicates(con, [_q(c) for c in design] + ["cluster_id"])
    if check_duplicates and strict and flags["maybe_duplicates"]:
        _check_duplicates(con, files, design, weighted)
    diagnostics = {}
    for f in files:
        st = f.status_counts
        diagnostics[str(f.path)] = {"rows": f.n_rows, "status": {str(k): int(v) for k, v in st.items()},
                                    "provenance": "this file", "engine": "duckdb",
                                    "duplicates": "error" if f.weighted else f.options.get("duplicates", "count")}
        if f.notes:
            diagnostics[str(f.path)]["notes"] = f.notes
        if f.weighted:
            aw = dict(con.execute(f"SELECT status, CAST(sum(__w) AS BIGINT) FROM {f.name}_valid "
                                  "GROUP BY ALL").fetchall())
            diagnostics[str(f.path)].update(attempts=int(sum(aw.values())),
                                            attempt_status={str(k): int(v) for k, v in aw.items()})
    qo = _query_orderings(con, catalog, counted, weighted) if level == "query" and cells and _ok_rows(table) <= \
        QUERY_ORDERINGS_MAX_OK else None
    if isinstance(table, QueryArrays):
        # the int64 table is built on first use (SelectionCounts.table's descriptor calls the function)
        return SelectionCounts(cast(Any, table.to_table), cell_table, catalog, tuple(counted), level, diagnostics,
                               "duckdb", query_arrays=table, query_orderings=qo)
    return SelectionCounts(table, cell_table, catalog, tuple(counted), level, diagnostics, "duckdb",
                           query_orderings=qo)


# ------------------------------------------------------------------------------------------------
#: Files read by one query. A study of more files is copied into a table a batch at a time: a view over the union
#: of hundreds of files makes DuckDB plan them all in one query, whose buffers exceeded the memory limit with
#: 240 files of 2 MB (issue 37).
_FILES_PER_QUERY = 32


def _study_rows(con, files) -> None:
    """``study``: the validated rows of every file (a view, or a table filled ``_FILES_PER_QUERY`` files at a
    time; the same columns and rows in the same order)."""
    selects = [f"SELECT * FROM {f.name}_valid" for f in files]
    union = " UNION ALL BY NAME ".join(selects)
    if len(files) <= _FILES_PER_QUERY:
        con.execute(f"CREATE TEMP VIEW study AS {union}")
        return
    # the union's columns and types (binding only), then the rows batch by batch
    con.execute(f"CREATE TEMP TABLE study AS SELECT * FROM ({union}) LIMIT 0")
    for i in range(0, len(selects), _FILES_PER_QUERY):
        con.execute(f"INSERT INTO study BY NAME {' UNION ALL BY NAME '.join(selects[i:i + _FILES_PER_QUERY])}")


def _register_catalog(con, catalog: ToolCatalog):
    tools = []
    for c in catalog.clusters:
        tl = catalog.tools(c)
        for i, t in enumerate(tl, start=1):
            tools.append((c, t, i, len(tl)))
    con.register("__cat_df", pd.DataFrame(tools, columns=["cluster_id", "tool_id", "api_index", "k"]))
    con.execute("CREATE OR REPLACE TEMP TABLE __cat AS SELECT * FROM __cat_df")
    con.execute("CREATE OR REPLACE TEMP TABLE __clusters AS SELECT DISTINCT cluster_id, k FROM __cat")


class _Problems(list):
    """Problems found by SQL checks, with the total number (the list keeps at most ``_MAX_PER_CHECK`` a check)."""

    total = 0


def _run_checks(con, f: _File, source: str, checks: list[_Check]) -> _Problems:
    """Evaluate row checks; format the hits check by check, rows ascending (as the pandas path lists them).

    ``checks``: ``(column, predicate_sql, value_sql, message(value) -> str)``. One scan counts the rows each
    check flags; only checks that flag a row are listed (at most ``_MAX_PER_CHECK`` rows each).
    """
    out = _Problems()
    if not checks:
        return out
    preds = [f"COALESCE(({pred}), FALSE)" for _, pred, _, _ in checks]
    totals = con.execute(f"SELECT {', '.join(f'count_if({p})' for p in preds)} FROM {source}").fetchone()
    for (column, _, value, message), pred, n in zip(checks, preds, totals):
        if not n:
            continue
        out.total += int(n)
        hits = con.execute(f"SELECT __row, {value} FROM {source} WHERE {pred} ORDER BY __row "
                           f"LIMIT {_MAX_PER_CHECK}").fetchall()
        rows = f.row_number([h[0] for h in hits])
        out += [problem(f.path, r, column, message(h[1])) for r, h in zip(rows, hits)]
    return out


def _raise(problems):
    """Raise one SelectionLogError for problems of one or more files (totals kept)."""
    total = sum(getattr(p, "total", len(p)) for p in problems)
    listed = [x for p in problems for x in p]
    raise SelectionLogError(listed, total=total)


def _id_sql(col: str, sql_type: str, prefix: str = "") -> str:
    """Ids as strings; integral numbers lose any '.0' (as ``_id_strings`` of the pandas path)."""
    c = prefix + _q(col)
    if sql_type in ("DOUBLE", "FLOAT") or sql_type.startswith("DECIMAL"):
        return (f"CASE WHEN {c} = round({c}) THEN CAST(TRY_CAST({c} AS BIGINT) AS VARCHAR) "
                f"ELSE CAST({c} AS VARCHAR) END")
    return f"CAST({c} AS VARCHAR)"


def _csv_types(con, f: _File, columns) -> dict:
    """Types of extra CSV columns, inferred as the pandas path does (bool, int64, float64, string), in one scan."""
    if not columns:
        return {}
    parts = []
    for c in columns:
        q = _q(c)
        parts += [f"bool_and(lower({q}) IN ('true', 'false'))",
                  f"bool_and(regexp_full_match(trim({q}), '[+-]?[0-9]+'))",
                  f"bool_and(TRY_CAST({q} AS DOUBLE) IS NOT NULL)", f"count({q})"]
    res = con.execute(f"SELECT {', '.join(parts)} FROM {f.name}_named").fetchone()
    out = {}
    for i, c in enumerate(columns):
        b, integer, num, n = res[4 * i: 4 * i + 4]
        out[c] = "VARCHAR" if not n else "BOOLEAN" if b else "BIGINT" if integer else "DOUBLE" if num else "VARCHAR"
    return out


def _meta_message(value: Any) -> Callable[[Any], str]:
    """The message for a file value ``v`` that disagrees with the manifest's ``value``."""
    return lambda v: f"the file has {v!r} but the manifest entry (meta) says {value!r}"


def _validate_file(con, f: _File, catalog: ToolCatalog):
    """Build ``{f.name}_valid``: typed, checked rows (raise SelectionLogError listing the problems)."""
    cols = set(f.file_columns)
    f.weighted = COUNT_COLUMN in cols
    problems = [problem(f.path, None, c, REQUIRED_COLUMN)
                for c in ("cluster_id", "query_id", "status") if c not in cols
                and not (c == "query_id" and f.weighted)]   # aggregated files may have no query ids
    if problems:
        raise SelectionLogError(problems)
    named = f"{f.name}_named"
    _check_meta(con, f, named, cols)
    expr = _design_exprs(con, f, cols)
    cid = _id_sql("cluster_id", f.types["cluster_id"])
    # Stage 1 runs inside the aggregation too (as a flag per row); its rows are listed only when one is bad.
    f.stage1 = checks = _stage1_checks(f, cols, catalog, cid)
    bad1 = " OR ".join(f"COALESCE(({pred}), FALSE)" for _, pred, _, _ in checks) or "FALSE"
    select, weight = _typed_select(f, cols, expr, cid, bad1)
    with_provenance = "source_row" in cols and "source_file" in cols
    o = f"{f.name}_ord"
    # ``rot``: the rotation that defines the list when no ordering is given (positions then follow from the
    # catalog index by arithmetic: tool j is shown at ((j - r) mod K) + 1 under rotation r; no strings).
    con.execute(f"""CREATE TEMP VIEW {o}_base AS
        SELECT t.* EXCLUDE (__ksize, __api), t.__ksize AS k, t.__api AS api_index,
               CASE WHEN t.ordering_in IS NULL AND t.rotation BETWEEN 1 AND t.__ksize THEN t.rotation END AS rot
        FROM (SELECT {', '.join(select)}, __ksize, __api, __scode FROM {named}) t""")
    # stage 2: rotations, orderings, tools, positions, provenance
    bad = _ordering_info(con, o, catalog)
    # a row without a cluster: the cluster's tools shown are unknown (0) unless given; its list is only counted
    ncand = ("CASE WHEN cluster_id IS NULL THEN COALESCE(n_candidates_in, 0) "
             "WHEN ordering_in IS NOT NULL THEN __n_in WHEN rot IS NOT NULL THEN k "
             "ELSE COALESCE(n_candidates_in, k) END")
    nlist = ("CASE WHEN cluster_id IS NULL AND ordering_in IS NOT NULL THEN len(string_split(ordering_in, '|')) "
             f"WHEN ordering_in IS NOT NULL THEN __n_list ELSE {ncand} END")
    # Stage 2 runs inside the aggregation (a flag per row, counted); the rows are listed only when one is bad.
    f.stage2 = checks = _stage2_checks(bad, nlist, with_provenance)
    bad_row = " OR ".join(f"COALESCE(({pred}), FALSE)" for _, pred, _, _ in checks)
    derived_pos = ("CASE WHEN status <> 'ok' THEN NULL WHEN chosen_position_in IS NOT NULL THEN chosen_position_in "
                   "WHEN ordering_in IS NOT NULL THEN NULLIF(list_position(string_split(ordering_in, '|'), "
                   "chosen_tool_in), 0) WHEN rot IS NOT NULL THEN ((api_index - rot + k) % k) + 1 END")
    keep = ["__row", "__file", "model", "run", "condition"] + [_q(c) for c in f.extras]
    con.execute(f"""CREATE TEMP VIEW {f.name}_valid AS
        SELECT {', '.join(keep)}, cluster_id, query_id, rotation, ordering_in, rot, __bad1,
               (NOT __bad1 AND ({bad_row})) AS __bad,
               CAST({ncand} AS BIGINT) AS n_candidates,
               CASE WHEN status = 'ok' THEN chosen_tool_in END AS chosen_tool,
               CASE WHEN status = 'ok' THEN api_index END AS api_index,
               CAST({derived_pos} AS BIGINT) AS chosen_position,
               CAST(CASE WHEN ordering_in IS NULL THEN {derived_pos}
                         ELSE NULLIF(__rank_at[{derived_pos}], 0) END AS BIGINT) AS chosen_rank,
               status, __scode, raw_choice_in,
               CASE WHEN __bad1 THEN 0 ELSE {weight} END AS __w
        FROM {o}""")


def _check_meta(con, f: _File, named, cols) -> None:
    """Stage 0: design values that disagree with the manifest entry."""
    checks: list[_Check] = []
    for key, value in f.meta.items():
        if key in cols:
            as_text = f"CAST({_q(key)} AS VARCHAR) <> {_lit(str(value))}"
            differs = (as_text if f.types[key] == "VARCHAR" or isinstance(value, str)
                       else f"{_q(key)} <> {_lit(value)} AND {as_text}")
            checks.append((key, f"{_q(key)} IS NOT NULL AND {differs}", _q(key),
                           _meta_message(value)))
    problems = _run_checks(con, f, named, checks)
    if problems:
        _raise([problems])


def _design_exprs(con, f: _File, cols) -> dict:
    """SQL of every design column (the file's, else the manifest's value, else the default) and of the columns
    that may be absent; sets ``f.extras`` (the extra design columns)."""
    meta = f.meta
    extras = [c for c in f.file_columns if c not in LOG_COLUMNS and c not in _DESIGN and c != COUNT_COLUMN]
    extras += [k for k in meta if k not in LOG_COLUMNS and k not in _DESIGN and k not in extras]
    f.extras = extras
    csv_types = _csv_types(con, f, [c for c in extras if c in cols]) if f.kind == "csv" else {}
    defaults = {"model": "unknown", "run": 1, "condition": "base"}
    expr = {}
    for c in list(_DESIGN) + extras:
        if c in cols:
            base = _q(c)
            if c in csv_types and csv_types[c] == "BOOLEAN":
                base = f"CASE WHEN {_q(c)} IS NULL THEN NULL ELSE lower({_q(c)}) = 'true' END"
            elif c in csv_types:
                base = f"TRY_CAST({_q(c)} AS {csv_types[c]})"
            expr[c] = f"COALESCE({base}, {_lit(meta[c])})" if c in meta else base
        else:
            expr[c] = _lit(meta[c]) if c in meta else _lit(defaults[c])
    for c in ("rotation", "ordering", "n_candidates", "chosen_tool", "chosen_position"):
        expr[c] = _q(c) if c in cols else "NULL"
    return expr


def _stage1_checks(f: _File, cols, catalog, cid) -> list[_Check]:
    """Stage 1: missing values, integers, status, clusters (the checks of SelectionLog.from_frame, in its order)."""
    missing = lambda v: MISSING  # noqa: E731
    # a row without a valid choice may have no cluster (issue 36; SelectionLog's UNASSIGNABLE statuses)
    unassignable = ", ".join(_lit(s) for s in UNASSIGNABLE)
    checks = [(c, f"{_q(c)} IS NULL" + (f" AND (status IS NULL OR CAST(status AS VARCHAR) NOT IN ({unassignable}))"
                                        if c == "cluster_id" else ""), "NULL", missing)
              for c in ("cluster_id", "query_id", "status", "model", "condition") if c in cols]
    for c, nullable in _INT_COLS:
        if c in cols:
            num = f"TRY_CAST({_q(c)} AS DOUBLE)"
            # a float NaN is a missing value (as in pandas); text 'nan', infinities and integers beyond 2^53 are
            # not integers (issue 21: JSON Infinity / 1e400 rows silently left the position analysis)
            is_nan = f" OR isnan({_q(c)})" if f.types[c] in ("DOUBLE", "FLOAT") else ""
            if f.types[c] not in _INTEGER_TYPES:   # an integer column cannot hold a non-integer
                checks.append((c, (f"{_q(c)} IS NOT NULL AND NOT (FALSE{is_nan}) AND ({num} IS NULL OR isnan({num}) "
                                   f"OR isinf({num}) OR abs({num}) > {MAX_INT} OR {num} <> round({num}))"), _q(c),
                               lambda v: NOT_INTEGER.format(value=_num_repr(v))))
            elif f.types[c] in ("HUGEINT", "UBIGINT"):
                checks.append((c, f"abs({num}) > {MAX_INT}", _q(c), lambda v: NOT_INTEGER.format(value=v)))
            if not nullable:
                checks.append((c, f"{_q(c)} IS NULL{is_nan}", "NULL", missing))
    if "run" in cols:
        num = f"TRY_CAST({_q('run')} AS DOUBLE)"
        checks.append(("run", f"{num} < 1 AND {num} = round({num})", f"CAST({num} AS BIGINT)",
                       lambda v: RUN_BELOW_ONE.format(value=v)))
    if f.weighted:
        checks += _count_checks(f.types[COUNT_COLUMN])
    # the status and the cluster are checked once per distinct combination (``__stbad``, ``__ksize``: _prepare)
    checks.append(("status", "__stbad", "status", lambda v: one_of_message(STATUSES).format(value=v)))
    known = sorted(catalog.clusters)
    checks.append(("cluster_id", "cluster_id IS NOT NULL AND __ksize IS NULL", cid,
                   lambda v: unknown_cluster_message(catalog.source, known).format(value=v)))
    return checks


def _typed_select(f: _File, cols, expr, cid, bad1):
    """The typed rows' columns (SQL) and the SQL of a row's weight: ``(select, weight)``."""
    int_of = {}
    for c, _ in _INT_COLS:
        if expr[c] == "NULL":
            int_of[c] = "CAST(NULL AS BIGINT)"
        elif c in cols and f.types[c] in _INTEGER_TYPES:
            int_of[c] = f"CAST({expr[c]} AS BIGINT)"
        else:
            int_of[c] = f"TRY_CAST(TRY_CAST({expr[c]} AS DOUBLE) AS BIGINT)"
    select = ["__row", f"{f._file_sql()} AS __file", f"CAST({expr['model']} AS VARCHAR) AS model",
              f"{int_of['run']} AS run", f"CAST({expr['condition']} AS VARCHAR) AS condition"]
    select += [f"{expr[c]} AS {_q(c)}" for c in f.extras]
    if "query_id" in cols:
        qtype = f.types["query_id"]
        # integer and text ids are grouped as they are (faster) and become strings after counting
        qid = _q("query_id") if qtype in _INTEGER_TYPES or qtype == "VARCHAR" else _id_sql("query_id", qtype)
    else:   # an aggregated file without query ids: one pseudo-query
        qid = _lit(AGGREGATED_QUERY_ID)
    weight = "CAST(1 AS BIGINT)"
    if f.weighted:
        weight = ("CAST(count_in AS BIGINT)" if f.types[COUNT_COLUMN] in _INTEGER_TYPES
                  else "CAST(TRY_CAST(TRY_CAST(count_in AS DOUBLE) AS HUGEINT) AS BIGINT)")
        select.append(f"{_q(COUNT_COLUMN)} AS count_in")
    raw_choice = f"CAST({_q('raw_choice')} AS VARCHAR)" if "raw_choice" in cols else "CAST(NULL AS VARCHAR)"
    select.append(f"{raw_choice} AS raw_choice_in")
    select += [f"{cid} AS cluster_id", f"{qid} AS query_id",
               f"{int_of['rotation']} AS rotation", f"CAST({expr['ordering']} AS VARCHAR) AS ordering_in",
               f"{int_of['n_candidates']} AS n_candidates_in",
               f"CAST({expr['chosen_tool']} AS VARCHAR) AS chosen_tool_in",
               f"{int_of['chosen_position']} AS chosen_position_in", "CAST(status AS VARCHAR) AS status",
               f"({bad1}) AS __bad1"]
    if "source_row" in cols and "source_file" in cols:
        select.append(f"{_q('source_row')} AS source_row_in")
    return select, weight


def _ordering_info(con, o, catalog) -> list:
    """Create the view ``{o}`` (the rows with their list's information); returns the bad (cluster, ordering)s.

    An ordering is the whole list shown (issue 20: it may offer tools of other clusters or none): per distinct
    (cluster, ordering), the cluster's tools shown (n_in), the list length and the rank of each list position
    among the cluster's tools (0: not a tool of the cluster); built here, joined in."""
    combos = con.execute(f"SELECT DISTINCT cluster_id, ordering_in FROM {o}_base "
                         "WHERE ordering_in IS NOT NULL").fetchall()
    info, bad = [], []
    for c, od in combos:
        shown = od.split("|")
        members = set(catalog.tools(c)) if c in catalog.clusters else set()
        ranks, r = [], 0
        for t in shown:
            r += t in members
            ranks.append(r if t in members else 0)
        info.append((c, od, r, len(shown), ranks))
        if c in catalog.clusters and (len(set(shown)) != len(shown) or r == 0):
            bad.append((c, od))
    con.execute(f"CREATE OR REPLACE TEMP TABLE {o}_info (cluster_id VARCHAR, ordering_in VARCHAR, n_in BIGINT, "
                "n_list BIGINT, rank_at BIGINT[])")
    if info:
        con.executemany(f"INSERT INTO {o}_info VALUES (?, ?, ?, ?, ?)", info)
    if info:
        con.execute(f"""CREATE TEMP VIEW {o} AS
            SELECT b.*, i.n_in AS __n_in, i.n_list AS __n_list, i.rank_at AS __rank_at
            FROM {o}_base b LEFT JOIN {o}_info i ON i.cluster_id = CAST(b.cluster_id AS VARCHAR)
            AND i.ordering_in = b.ordering_in""")
    else:   # no row gives an ordering: nothing to join
        con.execute(f"""CREATE TEMP VIEW {o} AS SELECT b.*, CAST(NULL AS BIGINT) AS __n_in,
            CAST(NULL AS BIGINT) AS __n_list, CAST(NULL AS BIGINT[]) AS __rank_at FROM {o}_base b""")
    return bad


def _stage2_checks(bad, nlist, with_provenance) -> list[_Check]:
    """Stage 2: rotations, orderings, tools, positions, provenance."""
    bad_sql = " OR ".join(f"(cluster_id = {_lit(c)} AND ordering_in = {_lit(od)})" for c, od in bad) or "FALSE"
    checks: list[_Check] = [
        ("rotation", "ordering_in IS NULL AND rotation IS NOT NULL AND (rotation < 1 OR rotation > k)", "rotation",
         lambda v: ROTATION_RANGE.format(value=v)),
        ("ordering", bad_sql, "[cluster_id, ordering_in]",
         # listed as bad in SQL: it repeats a tool or names none of the cluster's (no tools shown: never None)
         lambda v: cast(str, ordering_message(v[0], v[1], []))),
        ("chosen_tool", "status = 'ok' AND chosen_tool_in IS NULL", "NULL",
         lambda v: OK_WITHOUT_TOOL),
        ("chosen_tool", "status = 'ok' AND chosen_tool_in IS NOT NULL AND api_index IS NULL",
         "[chosen_tool_in, cluster_id]", lambda v: not_in_cluster_message(v[0], v[1])),
        ("chosen_position", (f"chosen_position_in IS NOT NULL AND (chosen_position_in < 1 OR chosen_position_in > "
                             f"{nlist})"), "chosen_position_in",
         lambda v: POSITION_RANGE.format(value=v)),
    ]
    if with_provenance:
        sr = "TRY_CAST(source_row_in AS DOUBLE)"
        checks.append(("source_row", f"source_row_in IS NOT NULL AND ({sr} IS NULL OR {sr} <> round({sr}) OR {sr} < 0)",
                       "source_row_in", lambda v: f"expected an integer >= 0, got {v!r}"))
    return checks


def _count_checks(sql_type: str) -> list[_Check]:
    """Stage-1 checks of an aggregated file's ``count`` column (the pandas path's ``count_problems``)."""
    col = _q(COUNT_COLUMN)
    if sql_type == "BOOLEAN":
        return [(COUNT_COLUMN, f"{col} IS NULL", "NULL", lambda v: MISSING),
                (COUNT_COLUMN, f"{col} IS NOT NULL", col, lambda v: COUNT_MESSAGE.format(value=v))]
    num = f"TRY_CAST({col} AS DOUBLE)"
    is_float = sql_type in ("DOUBLE", "FLOAT") or sql_type.startswith("DECIMAL")
    missing = f"{col} IS NULL" + (f" OR isnan({col})" if sql_type in ("DOUBLE", "FLOAT") else "")
    bad = (f"{col} IS NOT NULL AND NOT ({missing}) AND ({num} IS NULL OR isnan({num}) OR isinf({num}) OR "
           f"{num} <> round({num}) OR {num} < 0 OR {num} > {MAX_COUNT})")
    value = col if (is_float or sql_type in _INTEGER_TYPES or sql_type == "VARCHAR") else f"CAST({col} AS VARCHAR)"
    return [(COUNT_COLUMN, missing, "NULL", lambda v: MISSING),
            (COUNT_COLUMN, bad, value, lambda v: COUNT_MESSAGE.format(value=v))]


def _check_duplicates(con, files, design, weighted=False):
    """Attempts with the same identity (design, query, rotation and the ordering as given), both rows named.

    ``weighted`` (an aggregated study): rows are cells, identified by the attempt identity and the outcome."""
    key = [_q(c) for c in design] + ["cluster_id", "query_id", "rotation", "ordering_in"]
    if weighted:
        key += ["status", "chosen_tool", "chosen_position", "raw_choice_in"]
    if con.execute(f"SELECT 1 FROM study GROUP BY {', '.join(key)} HAVING count(*) > 1 LIMIT 1").fetchone() is None:
        return
    by_file = {str(f.path): f for f in files}
    part = f"PARTITION BY {', '.join(key)} ORDER BY __fileno, __row"
    hits = con.execute(f"""
        WITH d AS (SELECT __file, __row, {', '.join(key)}, row_number() OVER ({part}) AS k,
                          first_value(__row) OVER ({part}) AS first, first_value(__file) OVER ({part}) AS ffile
                   FROM (SELECT *, {_file_order(files)} AS __fileno FROM study))
        SELECT __file, __row, first, ffile, {', '.join(key)} FROM d WHERE k > 1
        ORDER BY {_file_order(files)}, __row LIMIT {_MAX_PER_CHECK}""").fetchall()
    problems = []
    names = list(design) + ["cluster_id", "query_id", "rotation", "ordering"] + (list(CELL_OUTCOME) if weighted else [])
    message = duplicate_cell_message if weighted else duplicate_message
    for h in hits:
        f = by_file[h[0]]
        row = f.row_number([h[1]])[0]
        first = by_file[h[3]].row_number([h[2]])[0]
        values = dict(zip(names, h[4:]))
        values["query_id"] = None if values["query_id"] is None else str(values["query_id"])
        if values["rotation"] is not None:
            values.pop("ordering")
        problems.append(problem(f.path, row, "query_id",
                                message(values, first, None if h[3] == h[0] else h[3])))
    if problems:
        raise SelectionLogError(problems)


def _file_order(files) -> str:
    cases = " ".join(f"WHEN {_lit(str(f.path))} THEN {i}" for i, f in enumerate(files))
    return f"CASE __file {cases} END"


#: Per (design, cluster, query): rotations 0..63 seen (count and distinct, as a bit set), missing and other
#: rotations. Two attempts of a query can share an identity only if count > distinct, or rotations are missing
#: or outside 0..63; only then is the exact (expensive) duplicate search run.
_DUP_COUNTERS = ("count_if(rotation BETWEEN 0 AND 63) AS __nin, "
                 "bit_count(bit_or(CASE WHEN rotation BETWEEN 0 AND 63 THEN CAST(1 AS UBIGINT) << "
                 "CAST(rotation AS UBIGINT) END)) AS __din, "
                 "count_if(rotation IS NULL OR rotation < 0 OR rotation > 63) AS __nother, "
                 "count_if(__bad) AS __bad, count_if(__bad1) AS __bad1")


def _status_code_sql(status: str = "status") -> str:
    return f"CASE {status} " + " ".join(f"WHEN {_lit(st)} THEN {i}" for i, st in enumerate(STATUSES)) + " END"


def _weighted_sums(k_max) -> list[str]:
    """Per-group sums of ``__w`` (attempts of an aggregated study) by status, tool and position, plus rows."""
    def wsum(pred, name):
        return f"CAST(sum(CASE WHEN {pred} THEN __w ELSE 0 END) AS BIGINT) AS {name}"
    return ([wsum(f"status = {_lit(st)}", f"n_{st}") for st in STATUSES]
            + [wsum(f"api_index = {i}", f"tool_{i}") for i in range(1, k_max + 1)]
            + [wsum(f"chosen_rank = {i}", f"pos_{i}") for i in range(1, k_max + 1)]
            + [f"CAST(count_if(status = {_lit(st)}) AS BIGINT) AS rows_{st}" for st in STATUSES])


def _aggregate(con, catalog: ToolCatalog, design, level, with_cells=True, weighted=False, duplicates=True):
    """Count the validated rows: the table, the cells and the flags of the checks run inside the scan.

    ``duplicates``: whether the duplicate check will run (at level "cluster" its pre-check is a scan of its own,
    skipped when repeats are counted rather than refused).

    ``weighted``: an aggregated study (a ``count`` column): every count is a sum of ``__w`` and the table gets
    the ``rows_*`` columns (rows by status)."""
    k_max = max(catalog.n_tools(c) for c in catalog.clusters)
    dkeys = [_q(c) for c in design] + ["cluster_id"]
    value_names = [f"n_{s}" for s in STATUSES] + tool_columns(k_max) + position_columns(k_max)
    if weighted:
        value_names += list(ROW_COLUMNS)
    if level == "query" and weighted:
        table, flags = _aggregate_query_weighted(con, design, dkeys, k_max, value_names)
    elif level == "query":
        table, flags = _aggregate_query(con, design, dkeys, k_max, value_names, duplicates)
    else:
        table, flags = _aggregate_cluster(con, design, dkeys, k_max, weighted, duplicates)
    if table is None:
        return None, None, flags
    if isinstance(table, QueryArrays):   # compact: the table is built only if someone asks for it
        if not with_cells:
            return table, None, flags
        cells = _cells(con, catalog, design, weighted)
        cells = cells.sort_values(list(design) + list(CELL_KEYS), kind="stable", na_position="last")
        return table, cells.reset_index(drop=True), flags
    if not with_cells:
        table = finalize_table(_with_query_column(table, design, level), design, k_max)
        return table, None, flags
    cells = _cells(con, catalog, design, weighted)
    table = finalize_table(_with_query_column(table, design, level), design, k_max)
    cells = cells.sort_values(list(design) + list(CELL_KEYS), kind="stable", na_position="last")
    return table, cells.reset_index(drop=True), flags


def _aggregate_query_weighted(con, design, dkeys, k_max, value_names):
    """Query-level counts of an aggregated study: ``(table or None when a check failed, flags)``."""
    # one scan, plain sums (no packing: a single row may stand for many attempts); duplicate cells are
    # always looked for exactly (aggregated files are small)
    con.execute(f"CREATE OR REPLACE TEMP TABLE __agg AS SELECT {', '.join(dkeys)}, query_id, n_candidates, "
                f"{', '.join(_weighted_sums(k_max))}, count_if(__bad) AS __bad, count_if(__bad1) AS __bad1 "
                f"FROM study GROUP BY ALL")
    bad1, bad = con.execute("SELECT count_if(__bad1 > 0), count_if(__bad > 0) FROM __agg").fetchone()
    flags = {"bad1": bool(bad1), "bad": bool(bad), "maybe_duplicates": True}
    if bad1 or bad:
        return None, flags
    return _enum_keys_table(con, design, value_names), flags


def _aggregate_query(con, design, dkeys, k_max, value_names, duplicates=True):
    """Query-level counts, one row per attempt: ``(table or None when a check failed, flags)``.

    ``duplicates``: whether the duplicate check will run (otherwise the packed-key path skips its counters)."""
    # One scan: per query the counts, the duplicate counters and the stage-2 flags. The counts of a query are
    # packed into three integers (``bits`` per tool / position / status; exact while no query has
    # 2^bits attempts, which is checked, with a plain count per column as the fallback).
    slots = max(k_max, len(STATUSES))
    bits = 63 // slots
    packed = (f"CAST(sum(CASE WHEN api_index IS NOT NULL THEN CAST(1 AS BIGINT) << ({bits} * (api_index - 1)) "
              f"ELSE 0 END) AS BIGINT) AS __tools, CAST(sum(CASE WHEN chosen_rank BETWEEN 1 AND {slots} THEN "
              f"CAST(1 AS BIGINT) << ({bits} * (chosen_rank - 1)) ELSE 0 END) AS BIGINT) AS __pos, "
              f"CAST(sum(CAST(1 AS BIGINT) << ({bits} * __scode)) AS BIGINT) AS __status")
    # every key as a code in the table's order, packed into one BIGINT (None: keys of other types): DuckDB groups
    # and sorts one integer instead of the design columns, cluster and query (issue 37: 10M rows with 3 design
    # columns have 9M queries x design cells, and grouping by ten columns cost most of the read)
    plan = _key_plan(con, design)
    if plan is not None:
        # the checks' counters as the bits of one bit_or (an aggregate costs about as much as the grouping)
        flag_sum, flag_of = _flag_bits(duplicates)
        con.execute(f"CREATE OR REPLACE TEMP TABLE __agg AS SELECT * EXCLUDE (__f), {flag_of} FROM ("
                    f"SELECT __key, count(*) AS __n, {packed}, {flag_sum} "
                    f"FROM (SELECT s.*, {plan.sql} AS __key FROM study s {plan.joins}) GROUP BY __key)")
    else:
        # the checks' counters reduced to flags per query (a slimmer table: it holds one row per query)
        con.execute(f"CREATE OR REPLACE TEMP TABLE __agg AS SELECT * EXCLUDE (__nin, __din, __nother, __bad, "
                    f"__bad1), __nin > __din OR __nother > 0 AS __dup, __bad > 0 AS __bad, __bad1 > 0 AS __bad1 "
                    f"FROM (SELECT {', '.join(dkeys)}, query_id, n_candidates, count(*) AS __n, {packed}, "
                    f"{_DUP_COUNTERS} FROM study GROUP BY ALL)")
    bad1, bad, maybe_dup, n_max = con.execute(
        "SELECT count_if(__bad1), count_if(__bad), count_if(__dup), max(__n) FROM __agg").fetchone()
    flags = {"bad1": bool(bad1), "bad": bool(bad), "maybe_duplicates": bool(maybe_dup)}
    if bad1 or bad:
        return None, flags
    if n_max >= 2 ** bits:   # a query with very many attempts: count each column on its own
        # count_if of a predicate that is NULL on every row of a group is NULL, not 0 (a query whose attempts
        # all lack a pick has no api_index / chosen_rank): count `pred IS TRUE` instead
        sums = ([f"CAST(count_if(status = {_lit(st)}) AS BIGINT) AS n_{st}" for st in STATUSES]
                + [f"CAST(count_if((api_index = {i}) IS TRUE) AS BIGINT) AS tool_{i}" for i in range(1, k_max + 1)]
                + [f"CAST(count_if((chosen_rank = {i}) IS TRUE) AS BIGINT) AS pos_{i}"
                   for i in range(1, k_max + 1)])
        con.execute(f"CREATE OR REPLACE TEMP TABLE __agg AS SELECT {', '.join(dkeys)}, query_id, n_candidates, "
                    f"{', '.join(sums)} FROM study GROUP BY ALL")
        return _enum_keys_table(con, design, value_names), flags
    compact = (_keyed_arrays(con, plan, k_max, bits, int(n_max or 0)) if plan is not None
               else _query_arrays(con, design, k_max, bits, int(n_max or 0)))
    if compact is not None:
        return compact, flags
    if plan is not None:   # pragma: no cover - a packed key is never missing
        raise RuntimeError("internal error: a missing value in the packed query keys")
    table = _enum_keys_table(con, design, ["__status", "__tools", "__pos"])
    mask = np.int64(2 ** bits - 1)
    for name, n, col in (("n", len(STATUSES), "__status"), ("tool", k_max, "__tools"), ("pos", k_max, "__pos")):
        packed_col = table.pop(col).to_numpy(dtype=np.int64)
        names = [f"n_{st}" for st in STATUSES] if name == "n" else [f"{name}_{i}" for i in range(1, n + 1)]
        for j, nm in enumerate(names):
            table[nm] = (packed_col >> np.int64(bits * j)) & mask
    return table, flags


def _flag_bits(duplicates) -> tuple[str, str]:
    """The checks' counters of a query as one ``bit_or`` (``__f``) and the flags made from it: ``__bad`` and
    ``__bad1`` (a row of the query failed a check) and ``__dup`` (a rotation seen twice, or outside 0..63 or
    missing: the exact duplicate check runs), as ``_DUP_COUNTERS`` gives them. Without the duplicate check
    (``duplicates`` false) ``__dup`` is false and no rotation is read."""
    if not duplicates:
        bits = "CASE WHEN __bad THEN 1 ELSE 0 END + CASE WHEN __bad1 THEN 2 ELSE 0 END"
        flags = f"bit_or(CAST({bits} AS UTINYINT)) AS __f"
        return flags, "FALSE AS __dup, __f & 1 = 1 AS __bad, __f & 2 = 2 AS __bad1"

    def bit(i):
        return f"(CAST(1 AS UHUGEINT) << CAST({i} AS UHUGEINT))"

    # rotations 0..63 as bits 0..63 (a query's rows with a rotation in range are then __n unless bit 66 is set)
    mask = (f"bit_or(CASE WHEN rotation BETWEEN 0 AND 63 THEN CAST(1 AS UHUGEINT) << CAST(rotation AS UHUGEINT) "
            f"ELSE {bit(66)} END | CASE WHEN __bad THEN {bit(64)} ELSE CAST(0 AS UHUGEINT) END | "
            f"CASE WHEN __bad1 THEN {bit(65)} ELSE CAST(0 AS UHUGEINT) END) AS __f")
    return mask, (f"__n > bit_count(CAST(__f & CAST({2 ** 64 - 1} AS UHUGEINT) AS UBIGINT)) OR "
                  f"(__f & {bit(66)}) > 0 AS __dup, (__f & {bit(64)}) > 0 AS __bad, "
                  f"(__f & {bit(65)}) > 0 AS __bad1")


#: Rows fetched from DuckDB at a time into the compact arrays.
_BATCH_ROWS = 1 << 20


def _compact_key(con, i, name, sql_type, design):
    """How a key of ``__agg`` is fetched: ``(select SQL, order SQL, categories or None)``, None if not compact.

    Text keys (and integer cluster / query ids, which the table holds as text) become the codes of an ENUM of
    their sorted values; integer design columns come as they are."""
    text = name in ("cluster_id", "query_id") or (name in design and sql_type == "VARCHAR")
    if text and (sql_type == "VARCHAR" or sql_type in _INTEGER_TYPES):
        value = _q(name) if sql_type == "VARCHAR" else f"CAST({_q(name)} AS VARCHAR)"
        con.execute(f"DROP TYPE IF EXISTS __c{i}")
        con.execute(f"CREATE TYPE __c{i} AS ENUM (SELECT DISTINCT {value} FROM __agg WHERE {_q(name)} IS NOT NULL "
                    f"ORDER BY 1)")
        cats = [r[0] for r in con.execute(f"SELECT unnest(enum_range(NULL::__c{i}))").fetchall()]
        if cats != sorted(cats):   # the table's categories are sorted by code point
            return None
        width = "TINYINT" if len(cats) < 127 else "SMALLINT" if len(cats) < 32767 else "INTEGER"
        code = f"enum_code(CAST({value} AS __c{i}))"
        return f"CAST(COALESCE({code}, -1) AS {width}) AS k{i}", f"{code} NULLS LAST", cats
    if (name in design or name == "n_candidates") and sql_type in _INTEGER_TYPES:
        return f"{_q(name)} AS k{i}", f"{_q(name)} NULLS LAST", None
    return None


def _query_arrays(con, design, k_max, bits, n_max) -> QueryArrays | None:
    """``__agg`` (packed counts per query) as compact arrays sorted as the table (None: keys of other types).

    DuckDB sorts, unpacks and narrows; the rows come in batches into arrays allocated once, so neither an int64
    table nor a second full copy of the rows exists."""
    types = dict(con.execute("SELECT column_name, column_type FROM (DESCRIBE __agg)").fetchall())
    names = list(design) + ["cluster_id", "query_id", "n_candidates"]
    specs = [_compact_key(con, i, c, types[c], design) for i, c in enumerate(names)]
    if any(sp is None for sp in specs):
        return None
    counts = _count_selects(k_max, bits, n_max)
    select = ", ".join([sp[0] for sp in specs] + [sql for _, sql in counts])
    out = _fetch_sorted(con, select, ", ".join(sp[1] for sp in specs))
    if out is None:
        return None
    return _arrays_of(out, names, [sp[2] for sp in specs], counts, k_max)


def _count_selects(k_max, bits, n_max) -> list[tuple[str, str]]:
    """``(column, SQL)`` of each count column unpacked from ``__agg``'s packed integers, in a small type."""
    width = "UTINYINT" if n_max < 256 else "USMALLINT"
    mask = 2 ** bits - 1
    counts = []
    for name, n, col in (("n", len(STATUSES), "__status"), ("tool", k_max, "__tools"), ("pos", k_max, "__pos")):
        labels = [f"n_{st}" for st in STATUSES] if name == "n" else [f"{name}_{i}" for i in range(1, n + 1)]
        counts += [(lab, f"CAST(({col} >> {bits * j}) & {mask} AS {width}) AS {_q(lab)}")
                   for j, lab in enumerate(labels)]
    return counts


def _fetch_sorted(con, select, order) -> dict[str, np.ndarray] | None:
    """``SELECT {select} FROM __agg ORDER BY {order}`` in Arrow batches into arrays allocated once (None: a
    missing value); drops ``__agg``."""
    n_rows = con.execute("SELECT count(*) FROM __agg").fetchall()[0][0]
    reader = con.sql(f"SELECT {select} FROM __agg ORDER BY {order}").to_arrow_reader(_BATCH_ROWS)
    out: dict[str, np.ndarray] = {}
    at = 0
    for batch in reader:
        for j, field in enumerate(batch.schema):
            col = batch.column(j)
            if col.null_count:
                return None   # a missing number in a key: the table path handles it
            arr = col.to_numpy(zero_copy_only=False)
            if field.name not in out:
                out[field.name] = np.empty(n_rows, dtype=arr.dtype)
            out[field.name][at:at + len(arr)] = arr
        at += batch.num_rows
    con.execute("DROP TABLE __agg")
    return out


def _arrays_of(out, names, categories, counts, k_max) -> QueryArrays:
    """The fetched columns (keys ``k0, k1, ...``; text keys as codes of their ``categories``) as QueryArrays."""
    keys: dict[str, Any] = {}
    key_dtypes: dict[str, np.dtype] = {}
    for i, (c, cats) in enumerate(zip(names, categories)):
        v = out.pop(f"k{i}")
        if cats is not None:
            keys[c] = pd.Categorical.from_codes(v, categories=pd.Index(np.asarray(cats, dtype=object),
                                                                       dtype="string"))
        else:
            key_dtypes[c] = v.dtype
            keys[c] = _narrow(v)
    return QueryArrays(keys, key_dtypes, {lab: out[lab] for lab, _ in counts}, k_max)


@dataclass
class _KeyPlan:
    """The query-level keys packed into one BIGINT ``__key`` (most significant first: the table's sort order).

    ``sql``: the key of a row of ``study s`` (with ``joins``, the code tables of text keys); per key, ``fetch``:
    the SQL decoding it from ``__key`` (a text key's code, an integer key's value in its own type) and
    ``categories`` (a text key's sorted values, None for numbers)."""

    names: list
    sql: str
    joins: str
    fetch: list
    categories: list


#: Largest span of one integer key coded as its offset from its minimum (wider keys take the previous path).
_KEY_RADIX_MAX = 1 << 24
#: Integer types an integer key may have in the packed key (their values fit BIGINT).
_KEY_INT_TYPES = ("BIGINT", "INTEGER", "SMALLINT", "TINYINT", "UINTEGER", "USMALLINT", "UTINYINT")


def _key_plan(con, design) -> _KeyPlan | None:
    """How to pack the keys of the query-level table into one BIGINT in the table's order, or None (a missing
    key, a key of another type, a span beyond 2^62: the grouping by the columns themselves).

    Text keys (and integer cluster / query ids, which the table holds as text) are coded by the rank of their
    text (code point order, as ``finalize_table`` sorts), through a small table joined to the rows; integer
    design keys and ``n_candidates`` by their offset from their minimum (numeric order)."""
    types = dict(con.execute("SELECT column_name, column_type FROM (DESCRIBE study)").fetchall())
    names = list(design) + ["cluster_id", "query_id", "n_candidates"]
    text = [c in ("cluster_id", "query_id") or (c in design and types[c] == "VARCHAR") for c in names]
    if any(types[c] not in _KEY_INT_TYPES and not (t and types[c] == "VARCHAR") for c, t in zip(names, text)):
        return None
    ints = [c for c, t in zip(names, text) if not t]
    found = con.execute("SELECT count(*)" + "".join(f", min({_q(c)}), max({_q(c)}), count_if({_q(c)} IS NULL)"
                                                    for c in ints) + " FROM study").fetchone()
    if not found[0]:
        return None
    span = {c: found[1 + 3 * j:4 + 3 * j] for j, c in enumerate(ints)}
    if any(missing or hi - lo >= _KEY_RADIX_MAX for lo, hi, missing in span.values()):
        return None
    distinct = _distinct_values(con, [c for c, t in zip(names, text) if t])
    if distinct is None:
        return None
    radix: list[int] = []
    codes: list[str] = []
    joins: list[str] = []
    categories: list[list | None] = []
    for i, (c, t) in enumerate(zip(names, text)):
        if not t:
            lo, hi, _ = span[c]
            radix.append(hi - lo + 1)
            codes.append(f"(CAST(s.{_q(c)} AS BIGINT) - {lo})")
            categories.append(None)
            continue
        values = sorted(distinct[c], key=lambda v: v[1])
        con.register("__km_df", pd.DataFrame({"v": pd.Series([v for v, _ in values], dtype=object),
                                              "code": np.arange(len(values), dtype=np.int64)}))
        con.execute(f"CREATE OR REPLACE TEMP TABLE __km{i} AS SELECT CAST(v AS {types[c]}) AS v, code "
                    "FROM __km_df")
        con.unregister("__km_df")
        radix.append(len(values))
        codes.append(f"__km{i}.code")
        joins.append(f"JOIN __km{i} ON s.{_q(c)} = __km{i}.v")
        categories.append([x for _, x in values])
    strides = [int(np.prod(radix[i + 1:], dtype=object)) for i in range(len(names))]
    if strides[0] * radix[0] > 2 ** 62:
        return None
    fetch = []
    for i, c in enumerate(names):
        code = f"(__key // {strides[i]}) % {radix[i]}"
        if categories[i] is None:
            fetch.append(f"CAST({span[c][0]} + {code} AS {types[c]}) AS k{i}")
        else:
            n = radix[i]   # the number of categories
            fetch.append(f"CAST({code} AS {'TINYINT' if n < 127 else 'SMALLINT' if n < 32767 else 'INTEGER'}) "
                         f"AS k{i}")
    return _KeyPlan(names, " + ".join(f"{code} * {st}" for code, st in zip(codes, strides)), " ".join(joins),
                    fetch, categories)


def _distinct_values(con, columns) -> dict[str, list] | None:
    """Each column's distinct values in ``study`` with their text (DuckDB's cast), from one scan (grouping
    sets); None when one is missing."""
    if not columns:
        return {}
    cols = [_q(c) for c in columns]
    rows = con.execute(f"SELECT grouping_id({', '.join(cols)}), "
                       + ", ".join(f"{c}, CAST({c} AS VARCHAR)" for c in cols)
                       + f" FROM study GROUP BY GROUPING SETS ({', '.join(f'({c})' for c in cols)})").fetchall()
    out: dict[str, list] = {c: [] for c in columns}
    n = len(columns)
    for r in rows:
        j = next(j for j in range(n) if not (r[0] >> (n - 1 - j)) & 1)   # the column this row groups by
        if r[1 + 2 * j] is None:
            return None
        out[columns[j]].append((r[1 + 2 * j], r[2 + 2 * j]))
    return out


def _keyed_arrays(con, plan: _KeyPlan, k_max, bits, n_max) -> QueryArrays | None:
    """:func:`_query_arrays` of an ``__agg`` grouped by the packed key: sorted by it, decoded by DuckDB."""
    counts = _count_selects(k_max, bits, n_max)
    out = _fetch_sorted(con, ", ".join(plan.fetch + [sql for _, sql in counts]), "__key")
    if out is None:
        return None
    return _arrays_of(out, plan.names, plan.categories, counts, k_max)


def _narrow(values: np.ndarray) -> np.ndarray:
    """Integers in the smallest integer type that holds them all (the same values)."""
    if not len(values) or values.dtype.kind not in "iu":
        return values
    lo, hi = int(values.min()), int(values.max())
    for t in (np.int8, np.int16, np.int32):
        if np.iinfo(t).min <= lo and hi <= np.iinfo(t).max:
            return values.astype(t)
    return values


def _aggregate_cluster(con, design, dkeys, k_max, weighted, duplicates):
    """Cluster-level counts: ``(table or None when a check failed, flags)``."""
    # per cluster: one row per (keys, tool), (keys, position) and (keys, status) from one scan (grouping sets:
    # the margins that are pivoted here, not the K x K joint of tool and position, whose hash table and rows
    # took 0.08 GiB at K = 40; issue 37), the columns outside a row's set NULL (skipped by the pivot below).
    # The cells stay in DuckDB; pandas gets each key combination once and the cells' numbers with the code of
    # their combination (the text keys of every cell cost 0.3 s at 2,000 clusters, the groupby more; issue 37).
    # The table's rows come in any order: finalize_table sorts them by every key.
    gkeys = ", ".join(dkeys + ["n_candidates"])
    con.execute(f"CREATE OR REPLACE TEMP TABLE __ccells AS SELECT {gkeys}, api_index, chosen_rank, "
                f"__scode AS __s, {'sum(__w)' if weighted else 'count(*)'} AS __n, "
                f"count(*) AS __r, count_if(__bad) AS __bad, count_if(__bad1) AS __bad1 FROM study "
                f"GROUP BY GROUPING SETS (({gkeys}, api_index), ({gkeys}, chosen_rank), ({gkeys}, __scode))")
    bad1, bad = con.execute("SELECT COALESCE(bool_or(__bad1 > 0), FALSE), COALESCE(bool_or(__bad > 0), FALSE) "
                            "FROM __ccells").fetchone()
    flags = {"bad1": bool(bad1), "bad": bool(bad)}
    if flags["bad1"] or flags["bad"]:
        con.execute("DROP TABLE __ccells")
        return None, flags
    con.execute(f"CREATE OR REPLACE TEMP TABLE __cgroups AS SELECT *, row_number() OVER () - 1 AS __g "
                f"FROM (SELECT DISTINCT {gkeys} FROM __ccells)")
    table = con.execute(f"SELECT {gkeys} FROM __cgroups ORDER BY __g").df()
    on = " AND ".join(f"c.{k} IS NOT DISTINCT FROM g.{k}" for k in dkeys + ["n_candidates"])
    cells = con.execute(f"SELECT g.__g, c.api_index, c.chosen_rank, c.__s, c.__n, c.__r FROM __ccells c "
                        f"JOIN __cgroups g ON {on}").df()
    con.execute("DROP TABLE __ccells; DROP TABLE __cgroups")
    codes = cells["__g"].to_numpy(np.int64)
    n = cells["__n"].to_numpy(np.int64)
    n_groups = len(table)
    for name, idx, width in (("n", cells["__s"], len(STATUSES)), ("tool", cells["api_index"], k_max),
                             ("pos", cells["chosen_rank"], k_max)):
        idx = idx.to_numpy(dtype=float, na_value=np.nan)
        ok = np.isfinite(idx)
        off = 0 if name == "n" else 1
        grid = np.zeros((n_groups, width), dtype=np.int64)
        np.add.at(grid, (codes[ok], idx[ok].astype(np.int64) - off), n[ok])
        names = [f"n_{st}" for st in STATUSES] if name == "n" else [f"{name}_{i}" for i in range(1, width + 1)]
        for j, nm in enumerate(names):
            table[nm] = grid[:, j]
    if weighted:   # rows by status
        grid = np.zeros((n_groups, len(STATUSES)), dtype=np.int64)
        s_idx = cells["__s"].to_numpy(dtype=float, na_value=np.nan)
        ok = np.isfinite(s_idx)
        np.add.at(grid, (codes[ok], s_idx[ok].astype(np.int64)), cells["__r"].to_numpy(np.int64)[ok])
        for j, nm in enumerate(ROW_COLUMNS):
            table[nm] = grid[:, j]
        flags["maybe_duplicates"] = True
    elif not duplicates:
        flags["maybe_duplicates"] = False
    else:
        flags["maybe_duplicates"] = _maybe_duplicates(con, dkeys)
    return table, flags


def _maybe_duplicates(con, dkeys) -> bool:
    """Whether a query (per ``dkeys`` and ``query_id``) has a rotation twice, or one missing or outside 0..63:
    only then can two attempts share an identity (the exact search runs)."""
    n_dup = con.execute(f"SELECT count_if(__nin > __din OR __nother > 0) FROM (SELECT {_DUP_COUNTERS} "
                        f"FROM study GROUP BY {', '.join(dkeys)}, query_id)").fetchone()[0]
    return bool(n_dup)


def _cells(con, catalog, design, weighted):
    """The cells (counts per list shown, status and choice), unsorted."""
    # cells: the list shown is the given ordering, or the rotation's (its string is built here, per cell)
    cell_keys = ([_q(c) for c in design] + ["cluster_id", "ordering_in", "rot", "status", "chosen_tool",
                                            "chosen_position"])
    counted = "CAST(sum(__w) AS BIGINT)" if weighted else "count(*)"
    having = " HAVING sum(__w) > 0" if weighted else ""   # a row with count 0 is no attempt
    cells = con.execute(f"SELECT {', '.join(cell_keys)}, {counted} AS count FROM study GROUP BY ALL{having}").df()
    ordering = cells["ordering_in"].astype(object).where(cells["ordering_in"].notna(),
                                                         pd.Series(_rotation_strings(catalog, cells), dtype=object))
    cells.insert(cells.columns.get_loc("ordering_in"), "ordering", ordering)
    cells = cells.drop(columns=["ordering_in", "rot"])
    cells = cells.groupby(list(design) + list(CELL_KEYS), sort=False, dropna=False)["count"].sum().reset_index()
    return _typed(cells, design)


def _rotation_strings(catalog, cells) -> np.ndarray:
    """The list shown under each cell's rotation (``rot``) as text, None where ``rot`` is null: one lookup in an
    array of every (cluster, rotation) string (a cell at a time cost 20 s at 2,000 clusters; issue 37)."""
    clusters = catalog.clusters
    strings = np.array([None] + ["|".join(catalog.rotation(c, r)) for c in clusters
                                 for r in range(1, catalog.n_tools(c) + 1)], dtype=object)
    sizes = np.array([catalog.n_tools(c) for c in clusters], dtype=np.int64)
    start = np.r_[0, np.cumsum(sizes)[:-1]] + 1                 # the first rotation's string of each cluster
    code = pd.Categorical(cells["cluster_id"].astype(object), categories=clusters).codes.astype(np.int64)
    rot = cells["rot"].to_numpy(dtype=float, na_value=np.nan)
    known = np.isfinite(rot)
    if np.any(known & ((code < 0) | (rot < 1) | (rot > np.where(code >= 0, sizes[code], 0)))):
        # a rotation outside its cluster: what the lookup of every cell says (it names the cluster)
        return np.array([None if not k else "|".join(catalog.rotation(c, int(r)))
                         for c, r, k in zip(cells["cluster_id"], rot, known)], dtype=object)
    at = np.where(known, start[np.maximum(code, 0)] + np.nan_to_num(rot).astype(np.int64) - 1, 0)
    return strings[at]


def _ok_rows(table) -> int:
    """Valid choices in a query-level count table (arrays or frame); 0 when there is none."""
    if table is None:
        return 0
    if isinstance(table, QueryArrays):
        return int(table.count("n_ok").sum(dtype=np.int64))
    return int(table["n_ok"].sum()) if "n_ok" in table.columns else 0


def _query_orderings(con, catalog, design, weighted):
    """Valid choices per query and list shown (``SelectionCounts.query_orderings``; the same frame as the pandas
    engine's): one GROUP BY over the valid rows, the list of each rotation by one lookup."""
    keys = [_q(c) for c in design] + ["cluster_id", "query_id", "ordering_in", "rot", "api_index", "chosen_rank"]
    counted = "CAST(sum(__w) AS BIGINT)" if weighted else "count(*)"
    f = con.execute(f"SELECT {', '.join(keys)}, {counted} AS count FROM study WHERE status = 'ok' "
                    "GROUP BY ALL").df()
    f["ordering"] = f["ordering_in"].astype(object).where(f["ordering_in"].notna(),
                                                          pd.Series(_rotation_strings(catalog, f), dtype=object))
    return finalize_query_orderings(_typed(f.drop(columns=["ordering_in", "rot"]), design), design)


def _enum_keys_table(con, design, columns):
    """``__agg`` as a DataFrame with text keys as ENUMs (pandas categoricals: codes, not millions of strings)."""
    types = dict(con.execute("SELECT column_name, column_type FROM (DESCRIBE __agg)").fetchall())
    select = []
    for i, c in enumerate(list(design) + ["cluster_id", "query_id"]):
        if types[c] == "VARCHAR":
            con.execute(f"CREATE TYPE __e{i} AS ENUM (SELECT DISTINCT {_q(c)} FROM __agg WHERE {_q(c)} IS NOT NULL "
                        f"ORDER BY 1)")
            select.append(f"CAST({_q(c)} AS __e{i}) AS {_q(c)}")
        else:
            select.append(_q(c))
    return con.execute(f"SELECT {', '.join(select)}, n_candidates, {', '.join(columns)} FROM __agg").df()


def _with_query_column(table, design, level):
    if level == "cluster":
        table.insert(len(design) + 1, "query_id", pd.array([pd.NA] * len(table), dtype="string"))
    return table


def _typed(frame: pd.DataFrame, design):
    """The pandas dtypes of the SelectionLog for key columns; counts as int64."""
    for c in frame.columns:
        if c in LOG_COLUMNS:
            frame[c] = frame[c].astype(LOG_COLUMNS[c])
        elif c in design:
            if pd.api.types.is_object_dtype(frame[c]) or pd.api.types.is_string_dtype(frame[c]):
                frame[c] = frame[c].astype("string")
        elif c.startswith(("n_", "tool_", "pos_")) or c == "count":
            frame[c] = frame[c].astype(np.int64)
    return frame


# ------------------------------------------------------------------------------------------------
# DuckDB engine: many Parquet files of one schema validated and counted as one scan (issue 37).
#
# A study of 240 files paid about a dozen DuckDB statements per file (its distinct cell combinations, their clean-up,
# the checks, the repeats, the union of 240 views): 15-40x the time of the same rows in one file. When every file of
# the study is a Parquet file of the same schema whose manifest entry gives only ``model`` / ``run`` / ``condition``
# (the shape of "one model per file"), the files are read as one ``read_parquet([...])`` with each row's file name
# and row number, the manifest values joined in as columns, and the file-by-file pipeline of ``_duckdb.py`` runs
# once over them. Per file, the rows and statuses are counted in one grouped query.
#
# The batch reproduces the file-by-file result exactly or gives up: any problem (a bad row, a clean-up problem, a
# row count that differs from the files' metadata) and any case whose per-file report it does not rebuild (notes
# that count rows, repeated attempts) raise ``_Fallback`` (or the error itself), and the caller reads the study
# file by file, which names the problem with its file and row as before.

#: Fewest files read as one batch (one file is read as it is).
_BATCH_MIN_FILES = 2
_BATCH_NAME = "b"   # the batch's views are v{_BATCH_NAME}_*; the files' are v0_*, v1_*, ...
#: Notes of a file that do not count its rows (the same for every file of one schema and catalog).
_BATCH_STATIC_NOTES = ("WARNING: catalog cluster ", "columns ignored (not mapped, not in `design`)")


class _Fallback(Exception):
    """The batch does not reproduce this study file by file: read it file by file."""


class _Batch(_File):
    """The files of a study as one DuckDB view ``vb_raw`` (their columns, the manifest's design values, and each
    row's file ``__bfile`` and row number ``__bfrow``)."""

    carry = ("__bfile", "__bfrow")
    carry_named = ("__bfile",)

    def __init__(self, con, files: list[_File], catalog, meta: pd.DataFrame):
        super().__init__(con, _BATCH_NAME, files[0].path, catalog, {}, None, options=files[0].options)
        self.files = files
        con.register(f"v{_BATCH_NAME}_meta_df", meta)
        con.execute(f"CREATE OR REPLACE TEMP TABLE v{_BATCH_NAME}_meta AS SELECT * FROM v{_BATCH_NAME}_meta_df")
        con.unregister(f"v{_BATCH_NAME}_meta_df")
        self.meta_columns = [c for c in meta.columns if c != "__bfile"]

    def _source_sql(self) -> str:
        paths = ", ".join(_lit(str(f.path)) for f in self.files)
        meta = "".join(f"m.{_q(c)}, " for c in self.meta_columns)
        return (f"(SELECT p.* EXCLUDE (filename, file_row_number), {meta}p.filename AS __bfile, "
                f"p.file_row_number AS __bfrow FROM read_parquet([{paths}], filename = true, file_row_number = true) p "
                f"JOIN v{_BATCH_NAME}_meta m ON m.__bfile = p.filename)")

    def _row_sql(self) -> str:
        return "__bfrow + 1"

    def _file_sql(self) -> str:
        return "__bfile"

    def validate(self, files: list[_File]) -> list[str]:
        """Register and validate the batch; give each file its rows, statuses and notes. Returns the design."""
        self.register()
        if self.types.get("status") != "VARCHAR" or any(not n.startswith(_BATCH_STATIC_NOTES) for n in self.notes):
            raise _Fallback("per-file notes")
        _validate_file(self.con, self, self.catalog)
        by_file: dict[str, dict] = {str(f.path): {} for f in files}
        # statuses in the order of their first row (the file-by-file path lists them in the order DuckDB's
        # hash table gives its combinations, which may change from run to run)
        for name, status, n, _ in self.con.execute(f"SELECT __bfile, status, count(*), min(__row) AS f "
                                                   f"FROM v{_BATCH_NAME}_named0 GROUP BY __bfile, status "
                                                   "ORDER BY __bfile, f").fetchall():
            by_file[name]["None" if status is None else str(status)] = int(n)
        for f in files:
            st = by_file[str(f.path)]
            if sum(st.values()) != f.n_rows or not f.n_rows:   # no row lost, none counted twice
                raise _Fallback("row count")
            f.status_counts, f.notes, f.weighted = st, dict(self.notes), False
        return list(_DESIGN) + self.extras


def _batch_of(con, files: list[_File], catalog) -> _Batch | None:
    """The batch of ``files`` when they can be read as one (see the module notes), else None."""
    if len(files) < _BATCH_MIN_FILES or any(f.kind != "parquet" or f.columns or f.row_offset for f in files):
        return None
    if any(ch in str(f.path) for f in files for ch in "*?[{"):   # read_parquet would expand it as a pattern
        return None
    options = files[0].options
    keys = set(files[0].meta)
    if any(f.options != options or set(f.meta) != keys for f in files) or not keys <= set(_DESIGN):
        return None
    if not all(_plain_meta(f.meta) for f in files):
        return None
    try:
        schema, n_rows = _parquet_schemas(con, files)
        for f in files:
            check_options(f.path, **f.options)
            _merge_design(pd.DataFrame(columns=schema), f.meta, f.path, np.empty(0, dtype=np.int64))
    except Exception:   # any file the batch cannot read: the file-by-file path names it
        return None
    reserved = {"filename", "file_row_number", COUNT_COLUMN, ATTEMPT_ID} | keys
    if (schema is None or set(n_rows) != {str(f.path) for f in files} or reserved & set(schema)
            or any(str(c).startswith("__") for c in schema) or not {"status", "cluster_id"} <= set(schema)):
        return None
    for f in files:
        f.n_rows = n_rows[str(f.path)]
    meta = pd.DataFrame({"__bfile": [str(f.path) for f in files],
                         **{k: [f.meta[k] for f in files] for k in sorted(keys)}})
    return _Batch(con, files, catalog, meta)


def _plain_meta(meta: dict) -> bool:
    """The manifest values of a batched file: text, and an integer ``run``."""
    return all(not isinstance(v, bool) and isinstance(v, numbers.Integral if k == "run" else str)
               for k, v in meta.items())


def _parquet_schemas(con, files: list[_File]) -> tuple[list[str] | None, dict[str, int]]:
    """The files' common column names (None: they differ) and each file's rows, from their Parquet metadata."""
    paths = ", ".join(_lit(str(f.path)) for f in files)
    rows = con.execute("SELECT file_name, name, type, type_length, repetition_type, num_children, converted_type, "
                       f"scale, precision, logical_type, duckdb_type FROM parquet_schema([{paths}])").fetchall()
    per_file: dict[str, list] = {}
    for r in rows:
        per_file.setdefault(r[0], []).append(tuple(str(x) for x in r[1:]))
    n_rows = dict(con.execute(f"SELECT file_name, num_rows FROM parquet_file_metadata([{paths}])").fetchall())
    shapes = {tuple(v) for v in per_file.values()}
    if len(shapes) != 1 or len(per_file) != len(files) or set(n_rows) != set(per_file):
        return None, {}
    top = next(iter(shapes))
    if int(top[0][4]) != len(top) - 1:   # nested columns (structs, lists): file by file
        return None, {}
    return [r[0] for r in top[1:]], {k: int(v) for k, v in n_rows.items()}


def _drop_batch(con) -> None:
    """Remove what a failed batch left (the file-by-file path builds ``study`` again)."""
    for kind in ("VIEW", "TABLE"):
        with contextlib.suppress(Exception):   # ``study`` is of the other kind
            con.execute(f"DROP {kind} IF EXISTS study")
