"""Loading and counting: from anything we accept (a manifest, a table file, a Study, a log) to a SelectionLog or
SelectionCounts, through the pandas readers or a count engine (DuckDB, Dask).

This module sits above the readers, the manifests (:mod:`._manifest`) and the engines (:mod:`.engines`): it is
the one place that dispatches to an engine, so that none of those imports it back.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from os import PathLike
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ._counts import COUNT_LEVELS, SelectionCounts
from ._selection_log import SelectionLog
from .engines._narrow import narrow_counts

if TYPE_CHECKING:
    from ._catalog import ToolCatalog
    from ._manifest import Study

__all__ = ["load_selection_log", "load_counts", "count_table", "read_study"]

_ACCEPTED = "a SelectionLog, a Study, or a path to a study manifest (.toml)"


def load_selection_log(obj: SelectionLog | Study | str | PathLike[str]) -> SelectionLog:
    """Return a SelectionLog for ``obj``.

    Parameters
    ----------
    obj : SelectionLog, Study or path-like
        A SelectionLog passes through unchanged; a :class:`Study` gives its ``log``; a path to a
        ``.toml`` manifest is read with :func:`read_study`. (Single table files need a catalog:
        use :func:`read_table`.)

    Returns
    -------
    SelectionLog

    Raises
    ------
    TypeError
        For any other input; the message lists the accepted inputs.

    Examples
    --------
    >>> from toolbias_stats.simulate import simulate_selection_log
    >>> log = simulate_selection_log(n_clusters=2, n_queries=5, rng=0).log
    >>> load_selection_log(log) is log
    True
    """
    from ._manifest import Study

    if isinstance(obj, SelectionLog):
        return obj
    if isinstance(obj, Study):
        return obj.log
    if isinstance(obj, (str, Path)) and Path(obj).suffix.lower() == ".toml":
        return read_study(obj).log
    raise TypeError(f"cannot load a selection log from {type(obj).__name__}; expected {_ACCEPTED}.")


def load_counts(obj: SelectionCounts | SelectionLog | Study | str | PathLike[str], *,
                level: str = "query") -> SelectionCounts:
    """SelectionCounts for a SelectionCounts (unchanged), a SelectionLog, a Study or a manifest path.

    Parameters
    ----------
    obj : SelectionCounts, SelectionLog, Study or path-like
        Counts pass through unchanged; anything else goes through :func:`load_selection_log` and is
        counted with the pandas engine.
    level : {"query", "cluster"}, default "query"

    Returns
    -------
    SelectionCounts

    Examples
    --------
    >>> from toolbias_stats.simulate import simulate_selection_log
    >>> log = simulate_selection_log(n_clusters=2, n_queries=5, rng=0).log
    >>> load_counts(log, level="cluster")  # doctest: +NORMALIZE_WHITESPACE
    SelectionCounts(level='cluster', engine='pandas', 50 attempts in 2 count rows, status={'ok': 50, 'no_call': 0,
    'unknown_tool': 0, 'parse_error': 0, 'forced': 0, 'off_cluster': 0})
    """
    from ._manifest import Study

    if isinstance(obj, SelectionCounts):
        return obj
    if isinstance(obj, Study) and obj.log is None:
        return obj.counts
    return load_selection_log(obj).counts(level=level)


def count_table(path: str | PathLike[str] | Sequence[str | PathLike[str]], *, catalog: ToolCatalog,
                meta: Mapping[str, Any] | None = None, columns: Mapping[str, str] | None = None,
                engine: str = "auto",
                level: str = "query", cells: bool = True, scheduler: Any = None,
                count_by: Sequence[str] | None = None, **options: Any) -> SelectionCounts:
    """Validate and count one table file (CSV, JSONL, Parquet) with an engine, without keeping its rows.

    Parameters
    ----------
    path : path-like
        A file in the generic tabular format (see :func:`toolbias_stats.read_table`); with
        ``engine="dask"`` also a directory or glob of partitioned Parquet on any fsspec path; every engine
        also a local folder, glob or list of files of one format (issue 27, read file by file).
    catalog : ToolCatalog
    meta : dict, optional
        Design metadata (``model``, ``run``, ``condition``, extra keys), as for :func:`read_table`.
    columns : dict, optional
        ``{their_name: our_name}`` column mapping.
    engine : {"auto", "duckdb", "pandas", "dask"}, default "auto"
        ``"auto"`` is DuckDB (a dependency of the package and the fastest engine on one machine).
    level : {"query", "cluster"}, default "query"
    cells : bool, default True
        Also count the per-ordering ``cells`` (needed by the Bayesian model only).
    scheduler : str or distributed.Client, optional
        For ``engine="dask"`` (default: a LocalCluster of 2 workers).
    count_by : sequence of str, optional
        Count by ``model``, ``run``, ``condition`` and only these extra design columns, as for
        :func:`read_study` (default: every design column).
    **options
        ``design``, ``positions``, ``duplicates``: the table options of :func:`read_table`.

    Returns
    -------
    SelectionCounts

    Raises
    ------
    SelectionLogError
        Bad input, with the same ``file:row:column: message`` lines through every engine.

    Examples
    --------
    A log written as CSV, counted without loading its rows (``engine="duckdb"`` gives the same counts):

    >>> import tempfile
    >>> from pathlib import Path
    >>> from toolbias_stats.simulate import simulate_selection_log
    >>> log = simulate_selection_log(n_clusters=2, n_queries=5, rng=0).log
    >>> path = log.write(Path(tempfile.mkdtemp()) / "log.csv")
    >>> count_table(path, catalog=log.catalog, engine="pandas")  # doctest: +NORMALIZE_WHITESPACE
    SelectionCounts(level='query', engine='pandas', 50 attempts in 10 count rows, status={'ok': 50, 'no_call': 0,
    'unknown_tool': 0, 'parse_error': 0, 'forced': 0, 'off_cluster': 0})
    """
    if level not in COUNT_LEVELS:
        raise ValueError(f"`level` must be one of {list(COUNT_LEVELS)}; got {level!r} instead.")
    if engine == "auto":
        engine = "duckdb"
    entry = {"path": path, "meta": meta, "columns": columns, **options}
    files: list = [path]
    if engine in ("pandas", "duckdb"):   # issue 27: a folder, glob or list of files, read file by file
        from ._dataset import expand_dataset, is_dataset

        if is_dataset(path):
            files = expand_dataset(path)
    if engine == "pandas":
        from .readers.table import read_table

        logs = [read_table(f, catalog=catalog, meta=meta, columns=columns, **options) for f in files]
        log = logs[0] if len(logs) == 1 else SelectionLog.concat(logs, catalog=catalog)
        return narrow_counts(log.counts(level=level), count_by)
    if engine == "duckdb":
        from .engines._duckdb import count_tables_duckdb
        from .readers.table import engine_entry

        return count_tables_duckdb([engine_entry({**entry, "path": f}) for f in files], catalog, level=level,
                                   cells=cells, count_by=count_by)
    if engine == "dask":
        from .engines._dask import count_tables_dask

        return count_tables_dask([entry], catalog, level=level, scheduler=scheduler, cells=cells,
                                 count_by=count_by)
    raise ValueError(f"`engine` must be one of ['auto', 'duckdb', 'pandas', 'dask']; got {engine!r} instead.")


def read_study(path: str | PathLike[str], *, engine: str = "auto", level: str = "query", cells: bool = True,
               scheduler: Any = None, lazy: bool = False, progress: bool = False,
               count_by: Sequence[str] | None = None) -> Study:
    """Read a study manifest and every log it names.

    Parameters
    ----------
    path : path-like
        The TOML manifest. Study-level keys are defaults (``catalog``, ``format``, ``queries``,
        ``api_meta``, ``cluster_names``, ``columns``, ``cluster``, ``reference_date``), plus the
        study-level ``features`` (a feature table for ``toolbias-stats explain``) and
        ``tool_dates`` (a CSV of ``tool_id, created`` that fills the catalog's ``created``
        column, see :func:`~toolbias_stats.io.readers.biasbusters.read_tool_dates`); each
        ``[[logs]]`` entry has ``path``, ``model``, optional ``run`` (default 1), ``condition``
        (default ``"base"``), optional ``cluster`` and any other scalar keys, which become
        SelectionLog columns. An entry may override any study-level default. A ``biasbusters``
        entry may list ``clusters = [...]``: the clusters its condition was run on (no ``no_call``
        rows are created for the others). Relative paths are
        relative to the manifest. API logs (``openai``, ``anthropic``, ``otel``; docs/formats.md)
        take ``responses`` (the results file, joined by ``custom_id``) and ``subsets``; without a
        catalog, clusters are declared with a **table** ``clusters = {name = [tools]}``, read from
        ``clusters_file`` (``tool_id, cluster_id``) or inferred (``clusters = "infer"``, the default
        for the API-log formats); ``Study.settings["cluster_source"]`` records which.
    engine : {"auto", "pandas", "duckdb", "dask"}, default "auto"
        Who reads and counts the logs. ``"pandas"`` reads every file into one in-memory
        :class:`SelectionLog` (any format). ``"duckdb"`` validates and counts ``format = "table"`` files
        (CSV, JSONL, Parquet) in place with DuckDB, out of core, with the same row-level error messages;
        only :class:`SelectionCounts` reach Python. ``"dask"`` counts Parquet files (or directories /
        globs of partitioned Parquet on any fsspec path) on a dask.distributed cluster. ``"auto"``:
        duckdb when every entry is a table file, else pandas.
    level : {"query", "cluster"}, default "query"
        Level of the counts an engine computes: per query (everything, bootstrap included) or per
        cluster (point estimates, null references and p-values only; less memory).
    cells : bool, default True
        Whether an engine also counts the per-ordering ``cells`` (needed by the Bayesian model only;
        ``toolbias-stats bias`` skips them).
    scheduler : str or distributed.Client, optional
        For ``engine="dask"``: a scheduler address (``"tcp://host:8786"``) or a Client; default a
        LocalCluster of 2 workers.
    lazy : bool, default False
        Check the manifest and read the catalog and queries now, but read (or count) the logs only when
        :attr:`Study.log` or :attr:`Study.counts` is first used (e.g. ``toolbias-stats features`` needs
        the catalog and queries only).
    progress : bool, default False
        Progress bars for reading and aggregation (the CLI turns them on for terminals only).
    count_by : sequence of str, optional
        The extra design columns to count by (issue 37). Default (None): every design column, one count row
        per design cell and query. Given, :attr:`Study.counts` is grouped by ``model``, ``run``,
        ``condition``, these columns and those the manifest's ``[design]`` table names, and summed over the
        other design columns: the same statistics for any ``by`` among them, from a smaller table
        (``toolbias-stats bias`` passes its ``--by``). The rows are validated, and duplicate and repeated
        attempts found, on every design column all the same; :attr:`Study.log` keeps every column. A name
        that is not a design column of the study keeps every column (so a ``by`` naming it fails as without
        ``count_by``). Every engine gives the same counts (pandas counts its log in full, then sums).

    Returns
    -------
    Study

    Raises
    ------
    ManifestError
        Malformed TOML, a key of the wrong type, a missing file, an unknown format.
    SelectionLogError
        Any problem in a log file (named by file, row and field).

    Examples
    --------
    >>> import toolbias_stats as tbs
    >>> study = tbs.read_study(tbs.datasets.path("biasbusters/study.toml"))
    >>> len(study.log)
    105500
    >>> tbs.read_study(tbs.datasets.path("biasbusters/study.toml"), count_by=["model"]).counts.design_columns
    ('model', 'run', 'condition')
    """
    from ._manifest import ENGINES, read_manifest

    if engine not in ENGINES:
        raise ValueError(f"`engine` must be one of {list(ENGINES)}; got {engine!r} instead.")
    manifest = read_manifest(path)
    engine = manifest.resolve_engine(engine)
    files = manifest.table_files()
    count_by = _with_declared(count_by, manifest.doc.get("design"))

    def count() -> SelectionCounts:
        if engine == "duckdb":
            from .engines._duckdb import count_tables_duckdb
            from .readers.table import engine_entry

            # issue 36: .xlsx workbooks and value-mapped columns reach DuckDB as the frame read_table reads
            return count_tables_duckdb([engine_entry(f) for f in files], manifest.catalog, level=level,
                                       progress=progress, cells=cells, count_by=count_by)
        from .engines._dask import count_tables_dask

        return count_tables_dask(files, manifest.catalog, level=level, scheduler=scheduler, progress=progress,
                                 cells=cells, count_by=count_by)

    log = counts = None
    if not lazy:
        if engine == "pandas":
            log = manifest.read_rows()   # Study.counts sums its counts over the columns not counted by
        else:
            counts = count()
        _check_lookalike_design(manifest, log, counts)
    return manifest.study(engine=engine, log=log, counts=counts,
                          loader=None if log is not None else manifest.read_rows,
                          counter=None if engine == "pandas" else count, count_by=count_by,
                          narrow=None if count_by is None else functools.partial(narrow_counts, count_by=count_by))


def _with_declared(count_by: Sequence[str] | None, declared: Any) -> list[str] | None:
    """``count_by`` and the columns a manifest's ``[design]`` table names (the declared design is checked against
    the counts' design columns); None stays None (every column is counted). A string is one column name."""
    if count_by is None:
        return None
    names = [count_by] if isinstance(count_by, str) else [str(c) for c in count_by]
    if isinstance(declared, Mapping):
        for key in ("replicates", "factors", "strata"):
            value = declared.get(key, ())
            names += [str(v) for v in ([value] if isinstance(value, str) else value if isinstance(value, list)
                                       else ())]
    return names


def _design_values(log: SelectionLog | None, counts: SelectionCounts | None, col: str) -> list:
    if log is not None:
        return list(log.data[col].unique()) if col in log.data.columns else []
    if counts is None:
        return []
    if counts.compact is not None:
        keys = counts.compact.keys
        return list(getattr(keys[col], "categories", keys.get(col, []))) if col in keys else []
    return list(counts.table[col].unique()) if col in counts.table.columns else []


def _check_lookalike_design(manifest: Any, log: SelectionLog | None, counts: SelectionCounts | None) -> None:
    """Issue 37: two models (or conditions) whose names print alike (``m1`` and ``m1`` + a zero-width space) are
    refused, named by the manifest entry or the file row that gives the second spelling (every engine)."""
    from ..exceptions import SelectionLogError, problem
    from ._row_rules import lookalike_message, lookalike_pairs

    for col in ("model", "condition"):
        pairs = lookalike_pairs(_design_values(log, counts, col))
        if not pairs:
            continue
        first, other = pairs[0]
        file, row = _where_value(manifest, log, col, other)
        first_file, first_row = _where_value(manifest, log, col, first)
        raise SelectionLogError(problem(file, row, col, lookalike_message(col, first, other,
                                                                          f"{first_file}:{first_row}")))


def _where_value(manifest: Any, log: SelectionLog | None, col: str, value: str) -> tuple:
    """``(file, row)`` that gives ``value`` in column ``col``: a manifest entry, else the first row of a file (the
    rows are read with pandas only here, when a fault was found)."""
    for i, entry in enumerate(manifest.doc.get("logs", []), start=1):
        if entry.get(col) == value:
            return manifest.path, f"logs[{i}]"
    rows = (log if log is not None else manifest.read_rows()).data
    hit = rows[rows[col].astype(str) == value].iloc[0]
    return hit["source_file"], int(hit["source_row"])
