"""Study manifests (TOML): tie log files to their study metadata and read them into one SelectionLog."""

from __future__ import annotations

import datetime as _dt
import numbers
import re
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import cast

from ..exceptions import ManifestError, SelectionLogError, problem
from ._catalog import ToolCatalog
from ._clusters import declares_clusters, study_clusters
from ._dataset import expand_dataset, hive_values, is_dataset
from ._selection_log import SelectionLog
from .readers._common import READER_KEYS as _READER_KEYS

__all__ = ["Study", "read_study", "FORMATS", "ENGINES"]

#: Accepted values of the manifest key ``format``.
FORMATS = ("biasbusters", "table", "transcripts", "openai", "anthropic", "otel", "inspect")

_STUDY_KEYS = {"name", "description", "catalog", "format", "queries", "api_meta", "cluster_names", "reference_date",
               "columns", "cluster", "n_queries", "position", "logs", "features", "tool_dates",
               "clusters", "clusters_file", "responses", "subsets",
               "design", "positions", "duplicates", "hive", "attempt_id"}
#: Reader options each format takes (other option keys in an entry are an error).
_OPTIONS = {"biasbusters": ("n_queries", "position", "clusters"), "transcripts": ("cluster",),
            "table": ("columns", "design", "positions", "duplicates", "hive", "attempt_id"),
            "openai": ("responses", "subsets"), "anthropic": ("responses", "subsets"), "otel": ("subsets",),
            "inspect": ("cluster",)}
#: Entry keys that configure reading: the readers' keys plus ``clusters`` (the clusters a condition was run on;
#: attempts are expected only for those, issue 8).
READER_KEYS = _READER_KEYS | {"clusters"} | {"clusters_file", "responses", "subsets"}   # issue 13: API logs
READER_KEYS = READER_KEYS | {"design", "positions", "duplicates"}   # issue 20: table options
READER_KEYS = READER_KEYS | {"hive", "attempt_id", "__files", "__root"}   # issue 27: datasets, attempt ids
_PATH_KEYS = ("path", "catalog", "queries", "api_meta", "cluster_names", "responses")
_CATALOG_KEYS = ("catalog", "api_meta", "cluster_names")
#: Study-level (never per-entry) path keys: a feature table and a file of tool creation dates.
_STUDY_PATH_KEYS = ("features", "tool_dates")


class Study:
    """A study manifest read into memory: the attempts (or their counts) and the study's metadata.

    Attributes
    ----------
    log : SelectionLog
        Every attempt of every ``[[logs]]`` entry, with its metadata columns. For a study counted by the
        ``duckdb`` or ``dask`` engine the rows are read (with the pandas readers) only when this attribute
        is first used; statistics use :attr:`counts` and never need them.
    counts : SelectionCounts
        The sufficient statistics of the log (computed from :attr:`log` on first use when the study was
        read with the pandas engine).
    catalog : ToolCatalog
    queries : dict
        ``{cluster_id: [query text, ...]}`` when the manifest names a queries file, else ``{}``.
    name : str
    path : pathlib.Path
        The manifest file.
    reference_date : datetime.date or None
    settings : dict
        The study-level keys of the manifest (paths resolved).
    engine : str
        The engine that read the study (``"pandas"``, ``"duckdb"`` or ``"dask"``).
    """

    def __init__(self, log=None, catalog=None, queries=None, name="", path=None, reference_date=None, settings=None,
                 *, counts=None, engine="pandas", loader=None, counter=None):
        if log is None and counts is None and loader is None:
            raise ValueError("a Study needs a `log`, `counts` or a loader; got none.")
        # loader() reads the rows, counter() counts them with the study's engine (both on first use)
        self._log, self._counts, self._loader, self._counter = log, counts, loader, counter
        self.catalog = catalog if catalog is not None else (log.catalog if log is not None else counts.catalog)
        self.queries = dict(queries or {})
        self.name = name
        self.path = path
        self.reference_date = reference_date
        self.settings = dict(settings or {})
        self.engine = engine

    @property
    def log(self) -> SelectionLog:
        if self._log is None:
            if self._loader is None:
                raise ValueError("this study holds counts only; it has no row-level log to read.")
            self._log = self._loader()
        return self._log

    @property
    def counts(self):
        if self._counts is None:
            self._counts = self._counter() if self._counter is not None and self._log is None else self.log.counts()
        return self._counts

    @property
    def has_rows(self) -> bool:
        """Whether the row-level log is in memory (reading it may be expensive for an engine-counted study)."""
        return self._log is not None

    def replace(self, **changes) -> Study:
        """A copy with some attributes replaced (``log``, ``catalog``, ``name``, ``path``, ...)."""
        kw = {"log": self._log, "catalog": self.catalog, "queries": self.queries, "name": self.name,
              "path": self.path, "reference_date": self.reference_date, "settings": self.settings,
              "counts": self._counts, "engine": self.engine, "loader": self._loader, "counter": self._counter}
        if "log" in changes and "counts" not in changes:
            kw["counts"] = None          # counts follow the new log
        kw.update(changes)
        return Study(**kw)

    def __repr__(self):
        return f"Study(name={self.name!r}, engine={self.engine!r}, path={str(self.path)!r})"


#: Accepted ``engine`` values of :func:`read_study`.
ENGINES = ("auto", "pandas", "duckdb", "dask")


def read_study(path, *, engine: str = "auto", level: str = "query", cells: bool = True, scheduler=None,
               lazy: bool = False, progress: bool = False) -> Study:
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
    """
    from .readers import OFFERED, READERS
    from .readers.biasbusters import read_biasbusters_queries

    if engine not in ENGINES:
        raise ValueError(f"`engine` must be one of {list(ENGINES)}; got {engine!r} instead.")
    path = Path(path)
    doc = load_toml(path)
    base = path.parent
    problems = []
    unknown = [k for k in doc if k not in _STUDY_KEYS and not isinstance(doc[k], (dict, list))]
    settings = {k: v for k, v in doc.items() if k != "logs"}
    logs = doc.get("logs")
    if not isinstance(logs, list) or not logs or not all(isinstance(e, dict) for e in logs):
        raise ManifestError(problem(path, None, "logs", "expected at least one [[logs]] table"))
    from ..choice._study import choice_manifest_problem  # a multiple-choice manifest: say to use `choice`

    if (mc := choice_manifest_problem(path, doc)) is not None:
        raise ManifestError(mc)
    for k in unknown:
        problems.append(problem(path, None, k, "unknown study-level key (put design keys in each [[logs]] entry)"))
    entries = []
    for i, entry in enumerate(logs, start=1):
        merged = {k: v for k, v in settings.items() if k in READER_KEYS}
        merged.update(entry)
        where = f"logs[{i}]"
        for key in _PATH_KEYS:
            if key == "path" and merged.get("format") == "table" and "path" in merged and (
                    isinstance(merged["path"], list) or (isinstance(merged["path"], str) and is_dataset(
                        _resolve(base, merged["path"])))):
                # issue 27: a folder, a glob or a list of files of one format, read as one log (file by file)
                if isinstance(merged["path"], list) and not all(isinstance(x, str) for x in merged["path"]):
                    problems.append(problem(path, where, key, f"expected a path string or a list of path strings, "
                                                              f"got {merged[key]!r}"))
                    continue
                try:
                    merged["__files"] = expand_dataset(merged["path"], base, origin=f"{path}:{where}:path")
                except SelectionLogError as exc:
                    problems.extend(exc.problems if hasattr(exc, "problems") else [str(exc)])
                    continue
                merged["__root"] = (_resolve(base, merged["path"]) if isinstance(merged["path"], str)
                                    and _resolve(base, merged["path"]).is_dir() else None)
                merged["path"] = merged["__files"][0]
                continue
            if key in merged:
                if not isinstance(merged[key], str):
                    problems.append(problem(path, where, key, f"expected a path string, got {merged[key]!r}"))
                    continue
                p = (base / merged[key]).resolve() if not Path(merged[key]).is_absolute() else Path(merged[key])
                if not p.exists():
                    problems.append(problem(path, where, key, f"file not found: {p}"))
                merged[key] = p
        if "path" not in merged:
            problems.append(problem(path, where, "path", "missing required key"))
        if "model" not in merged and merged.get("format") != "table":  # a table may carry its own model column
            problems.append(problem(path, where, "model", "missing required key"))
        elif "model" in merged and not isinstance(merged["model"], str):
            problems.append(problem(path, where, "model", f"expected a string, got {merged['model']!r}"))
        if "run" in merged and (isinstance(merged["run"], bool) or not isinstance(merged["run"], numbers.Integral)
                                or merged["run"] < 1):
            problems.append(problem(path, where, "run", f"expected an integer >= 1, got {merged['run']!r}"))
        if "condition" in merged and not isinstance(merged["condition"], str):
            problems.append(problem(path, where, "condition", f"expected a string, got {merged['condition']!r}"))
        fmt = merged.get("format")
        if fmt not in FORMATS:
            problems.append(problem(path, where, "format", f"expected one of {list(FORMATS)}, got {fmt!r}"))
        if "catalog" not in merged and not declares_clusters(merged) and fmt not in OFFERED:
            problems.append(problem(path, where, "catalog", "no catalog given (study-level or per entry)"))
        if fmt in _OPTIONS:
            for opt in ("cluster", "columns", "n_queries", "position", "clusters", "responses", "subsets",
                        "design", "positions", "duplicates", "hive", "attempt_id"):
                if opt in entry and opt not in _OPTIONS[fmt] and not (opt == "clusters"
                                                                      and not isinstance(entry[opt], list)):
                    problems.append(problem(path, where, opt, f"format {fmt!r} takes no {opt!r} option"))
        if "clusters" in entry and not declares_clusters({"clusters": entry["clusters"]}):
            cl = entry["clusters"]
            if (not isinstance(cl, list) or not cl
                    or not all(isinstance(c, str) or (isinstance(c, int) and not isinstance(c, bool)) for c in cl)):
                problems.append(problem(path, where, "clusters",
                                        f"expected a non-empty list of cluster ids, got {cl!r} "
                                        "(or, to declare clusters, a table {cluster = [tools]} "
                                        "or \"infer\")"))
            else:
                merged["clusters"] = [str(c) for c in cl]
        if "columns" in merged and not isinstance(merged["columns"], dict):
            problems.append(problem(path, where, "columns",
                                    f"expected a table of column names, got {merged['columns']!r}"))
        for key, val in entry.items():
            if key in READER_KEYS:
                continue
            if not isinstance(val, (str, bool, numbers.Number)):
                problems.append(problem(path, where, key, f"expected a scalar (string, number, boolean), got {val!r}"))
        entries.append(merged)
    for key in _STUDY_PATH_KEYS:
        if key not in doc:
            continue
        if not isinstance(doc[key], str):
            problems.append(problem(path, None, key, f"expected a path string, got {doc[key]!r}"))
            continue
        p = (base / doc[key]).resolve() if not Path(doc[key]).is_absolute() else Path(doc[key])
        if not p.exists():
            problems.append(problem(path, None, key, f"file not found: {p}"))
    ref = doc.get("reference_date")
    if ref is not None and not isinstance(ref, _dt.date):
        problems.append(problem(path, None, "reference_date", f"expected a TOML date (2025-09-01), got {ref!r}"))
    if problems:
        raise ManifestError(problems)
    entries = _split_datasets(path, entries, problems)
    if problems:
        raise ManifestError(problems)

    # clusters declared in the manifest, read from a clusters_file or inferred from the tools offered (issue 13)
    cluster_source = study_clusters(path, doc, entries, offered=lambda m: OFFERED[m["format"]](
        m["path"], **{k: m[k] for k in _OPTIONS[m["format"]] if k in m}), inferable=set(OFFERED))
    catalogs: dict = {}
    for merged in entries:
        ckey = tuple(merged.get(k) for k in _CATALOG_KEYS)
        if ckey not in catalogs:
            catalogs[ckey] = cluster_source.catalog if cluster_source is not None else _read_catalog(merged)
            if "tool_dates" in doc:
                from .readers.biasbusters import read_tool_dates

                catalogs[ckey] = read_tool_dates(_resolve(base, doc["tool_dates"]), catalog=catalogs[ckey])
    if len(catalogs) > 1:
        raise ManifestError(problem(path, None, "catalog", "all logs of one study must share one catalog"))
    catalog = next(iter(catalogs.values()))
    all_tables = all(m["format"] == "table" for m in entries)
    if all_tables:   # issue 21: a 1-tool cluster or a cluster of 10,000 tools, named before anything is read
        from ._catalog import check_cluster_sizes

        check_cluster_sizes(catalog)
    if engine == "auto":
        engine = "duckdb" if all_tables else "pandas"
    if engine != "pandas" and not all_tables:
        bad = next(i for i, m in enumerate(entries, start=1) if m["format"] != "table")
        raise ManifestError(problem(path, f"logs[{bad}]", "format", f"engine {engine!r} reads format 'table' files; "
                                                                    f"this entry has {entries[bad - 1]['format']!r} "
                                                                    "(use engine='pandas')"))

    def read_rows() -> SelectionLog:
        parts = []
        for merged in entries:
            meta = {k: v for k, v in merged.items() if k not in READER_KEYS}
            options = {k: merged[k] for k in _OPTIONS[merged["format"]] if k in merged}
            reader = cast("Callable[..., SelectionLog]", READERS[merged["format"]])
            parts.append(reader(merged["path"], catalog=catalog, meta=meta, **options))
        return parts[0] if len(parts) == 1 else SelectionLog.concat(parts, catalog=catalog)

    def count():
        files = [{"path": m["path"], "meta": {k: v for k, v in m.items() if k not in READER_KEYS},
                  "columns": m.get("columns"), **{k: m[k] for k in ("design", "positions", "duplicates") if k in m}}
                 for m in entries]
        if engine == "duckdb":
            from .engines._duckdb import count_tables_duckdb

            return count_tables_duckdb(files, catalog, level=level, progress=progress, cells=cells)
        from .engines._dask import count_tables_dask

        return count_tables_dask(files, catalog, level=level, scheduler=scheduler, progress=progress, cells=cells)

    log = counts = None
    if not lazy:
        if engine == "pandas":
            log = read_rows()
        else:
            counts = count()
    queries = {}
    qpath = entries[0].get("queries")
    if qpath is not None:
        queries = read_biasbusters_queries(qpath)
    resolved = dict(settings)
    if cluster_source is not None:
        resolved["cluster_source"] = cluster_source.to_dict()
    for key in _PATH_KEYS + _STUDY_PATH_KEYS:
        if isinstance(resolved.get(key), str):
            resolved[key] = str(_resolve(base, resolved[key]))
    return Study(log=log, catalog=catalog, queries=queries, name=str(doc.get("name", path.stem)), path=path,
                 reference_date=ref, settings=resolved, counts=counts, engine=engine,
                 loader=None if log is not None else read_rows, counter=None if engine == "pandas" else count)


def _split_datasets(manifest: Path, entries, problems) -> list:
    """One entry per file of each dataset entry (issue 27): hive partition values (``hive = true``) become the
    file's design keys; ``attempt_id = "col"`` names the column that identifies attempts."""
    out = []
    for i, merged in enumerate(entries, start=1):
        where = f"logs[{i}]"
        hive = merged.pop("hive", False)
        if not isinstance(hive, bool):
            problems.append(problem(manifest, where, "hive", f"expected true or false, got {hive!r}"))
        att = merged.pop("attempt_id", None)
        if att is not None:
            if not isinstance(att, str) or not att:
                problems.append(problem(manifest, where, "attempt_id", f"expected a column name, got {att!r}"))
            else:
                merged["columns"] = {**(merged.get("columns") or {}), att: "attempt_id"}
        files = merged.pop("__files", None)
        root = merged.pop("__root", None)
        if files is None:
            out.append(merged)
            continue
        for f in files:
            part = dict(merged, path=f)
            if hive and root is not None:
                for k, v in hive_values(f, root).items():
                    if k in merged and merged[k] != v:
                        problems.append(problem(manifest, where, k, f"the entry says {merged[k]!r} but the folder "
                                                                    f"of {f} says {v!r}"))
                    part[k] = v
            out.append(part)
    return out


def _resolve(base: Path, value: str) -> Path:
    return Path(value) if Path(value).is_absolute() else (base / value).resolve()


def _read_catalog(entry: dict) -> ToolCatalog:
    from .readers.biasbusters import read_biasbusters_catalog
    from .readers.table import read_catalog_table

    cat = entry["catalog"]
    if (cat.suffix.lower() == ".json" and entry.get("format") == "biasbusters") or _is_cluster_list(cat):
        return read_biasbusters_catalog(cat, api_meta=entry.get("api_meta"), cluster_names=entry.get("cluster_names"))
    return read_catalog_table(cat)


def _is_cluster_list(path: Path) -> bool:
    """A BiasBusters clusters.json starts with '[' then '[' (a list of lists)."""
    if path.suffix.lower() != ".json":
        return False
    with path.open(encoding="utf-8") as fh:
        head = fh.read(200).lstrip()
    return head.startswith("[") and head[1:].lstrip().startswith("[")


def load_toml(path: Path) -> dict:
    """A manifest's TOML document; a missing file or a syntax error is a ManifestError naming file and line."""
    from .readers._common import check_regular_file, utf8_problem

    if not path.exists():
        raise ManifestError(problem(path, None, None, "manifest file not found"))
    check_regular_file(path, "manifest file", error=ManifestError)
    try:
        with path.open("rb") as fh:
            return tomllib.load(fh)
    except tomllib.TOMLDecodeError as exc:
        raise ManifestError(problem(path, _toml_line(exc), None, f"malformed TOML: {exc}")) from None
    except UnicodeDecodeError:
        raise ManifestError(utf8_problem(path)) from None
    except RecursionError:
        raise ManifestError(problem(path, None, None, "TOML nested too deeply to read")) from None


def _toml_line(exc) -> int | None:
    """Line of a TOML syntax error (Python 3.11's tomllib only puts it in the message)."""
    line = getattr(exc, "lineno", None)
    if line is None:
        m = re.search(r"line (\d+)", str(exc))
        line = int(m.group(1)) if m else None
    return line
