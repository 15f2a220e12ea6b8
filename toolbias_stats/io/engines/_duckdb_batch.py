"""DuckDB engine: many Parquet files of one schema validated and counted as one scan (issue 37).

A study of 240 files paid about a dozen DuckDB statements per file (its distinct cell combinations, their clean-up,
the checks, the repeats, the union of 240 views): 15-40x the time of the same rows in one file. When every file of
the study is a Parquet file of the same schema whose manifest entry gives only ``model`` / ``run`` / ``condition``
(the shape of "one model per file"), the files are read as one ``read_parquet([...])`` with each row's file name
and row number, the manifest values joined in as columns, and the file-by-file pipeline of ``_duckdb.py`` runs
once over them. Per file, the rows and statuses are counted in one grouped query.

The batch reproduces the file-by-file result exactly or gives up: any problem (a bad row, a clean-up problem, a
row count that differs from the files' metadata) and any case whose per-file report it does not rebuild (notes
that count rows, repeated attempts) raise :class:`Fallback` (or the error itself), and the caller reads the study
file by file, which names the problem with its file and row as before.
"""

from __future__ import annotations

import numbers

import numpy as np
import pandas as pd

from ..._schema import COUNT_COLUMN
from ..._schema import DESIGN_COLUMNS as _DESIGN
from ..readers._spreadsheet import ATTEMPT_ID, check_options
from ..readers.table import _merge_design
from ._duckdb import _File, _lit, _q

#: Fewest files read as one batch (one file is read as it is).
MIN_FILES = 2
_NAME = "b"   # the batch's views are v{_NAME}_*; the files' are v0_*, v1_*, ...
#: Notes of a file that do not count its rows (the same for every file of one schema and catalog).
_STATIC_NOTES = ("WARNING: catalog cluster ", "columns ignored (not mapped, not in `design`)")


class Fallback(Exception):
    """The batch does not reproduce this study file by file: read it file by file."""


class Batch(_File):
    """The files of a study as one DuckDB view ``vb_raw`` (their columns, the manifest's design values, and each
    row's file ``__bfile`` and row number ``__bfrow``)."""

    carry = ("__bfile", "__bfrow")
    carry_named = ("__bfile",)

    def __init__(self, con, files: list[_File], catalog, meta: pd.DataFrame):
        super().__init__(con, _NAME, files[0].path, catalog, {}, None, options=files[0].options)
        self.files = files
        con.register(f"v{_NAME}_meta_df", meta)
        con.execute(f"CREATE OR REPLACE TEMP TABLE v{_NAME}_meta AS SELECT * FROM v{_NAME}_meta_df")
        con.unregister(f"v{_NAME}_meta_df")
        self.meta_columns = [c for c in meta.columns if c != "__bfile"]

    def _source_sql(self) -> str:
        paths = ", ".join(_lit(str(f.path)) for f in self.files)
        meta = "".join(f"m.{_q(c)}, " for c in self.meta_columns)
        return (f"(SELECT p.* EXCLUDE (filename, file_row_number), {meta}p.filename AS __bfile, "
                f"p.file_row_number AS __bfrow FROM read_parquet([{paths}], filename = true, file_row_number = true) p "
                f"JOIN v{_NAME}_meta m ON m.__bfile = p.filename)")

    def _row_sql(self) -> str:
        return "__bfrow + 1"

    def _file_sql(self) -> str:
        return "__bfile"

    def validate(self, files: list[_File]) -> list[str]:
        """Register and validate the batch; give each file its rows, statuses and notes. Returns the design."""
        from ._duckdb import _validate_file

        self.register()
        if self.types.get("status") != "VARCHAR" or any(not n.startswith(_STATIC_NOTES) for n in self.notes):
            raise Fallback("per-file notes")
        _validate_file(self.con, self, self.catalog)
        by_file: dict[str, dict] = {str(f.path): {} for f in files}
        # statuses in the order of their first row, as the file-by-file path lists them
        for name, status, n, _ in self.con.execute(f"SELECT __bfile, status, count(*), min(__row) AS f "
                                                   f"FROM v{_NAME}_named0 GROUP BY __bfile, status "
                                                   "ORDER BY __bfile, f").fetchall():
            by_file[name]["None" if status is None else str(status)] = int(n)
        for f in files:
            st = by_file[str(f.path)]
            if sum(st.values()) != f.n_rows or not f.n_rows:   # no row lost, none counted twice
                raise Fallback("row count")
            f.status_counts, f.notes, f.weighted = st, dict(self.notes), False
        return list(_DESIGN) + self.extras


def batch_of(con, files: list[_File], catalog) -> Batch | None:
    """The batch of ``files`` when they can be read as one (see the module notes), else None."""
    if len(files) < MIN_FILES or any(f.kind != "parquet" or f.columns or f.row_offset for f in files):
        return None
    if any(ch in str(f.path) for f in files for ch in "*?[{"):   # read_parquet would expand it as a pattern
        return None
    options = files[0].options
    keys = set(files[0].meta)
    if any(f.options != options or set(f.meta) != keys for f in files) or not keys <= set(_DESIGN):
        return None
    for f in files:
        for k, v in f.meta.items():
            if isinstance(v, bool) or not isinstance(v, numbers.Integral if k == "run" else str):
                return None
    try:
        schema, n_rows = _schemas(con, files)
        for f in files:
            check_options(f.path, **f.options)
            _merge_design(pd.DataFrame(columns=schema), f.meta, f.path, np.empty(0, dtype=np.int64))
    except Exception:   # noqa: BLE001 - any file the batch cannot read: the file-by-file path names it
        return None
    reserved = {"filename", "file_row_number", COUNT_COLUMN, ATTEMPT_ID} | keys
    if (schema is None or set(n_rows) != {str(f.path) for f in files} or reserved & set(schema) or any(str(c).startswith("__") for c in schema)
            or not {"status", "cluster_id"} <= set(schema)):
        return None
    for f in files:
        f.n_rows = n_rows[str(f.path)]
    meta = pd.DataFrame({"__bfile": [str(f.path) for f in files],
                         **{k: [f.meta[k] for f in files] for k in sorted(keys)}})
    return Batch(con, files, catalog, meta)


def _schemas(con, files: list[_File]) -> tuple[list[str] | None, dict[str, int]]:
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


def drop(con) -> None:
    """Remove what a failed batch left (the file-by-file path builds ``study`` again)."""
    for kind in ("VIEW", "TABLE"):
        try:
            con.execute(f"DROP {kind} IF EXISTS study")
        except Exception:   # noqa: BLE001, S110 - ``study`` is of the other kind
            pass
