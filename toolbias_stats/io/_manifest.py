"""Study manifests (TOML): tie log files to their study metadata and read them into one SelectionLog."""

from __future__ import annotations

import datetime as _dt
import numbers
import re
import tomllib
from collections.abc import Callable, Mapping, Sequence
from os import PathLike
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from ..exceptions import ManifestError, SelectionLogError, problem
from ._catalog import ToolCatalog
from ._dataset import expand_dataset, hive_values, is_dataset
from ._selection_log import SelectionLog
from .readers._clusters import ClusterSource, declares_clusters, study_clusters
from .readers._common import READER_KEYS as _READER_KEYS

if TYPE_CHECKING:
    from ._counts import SelectionCounts

__all__ = ["Study", "StudyManifest", "read_manifest", "FORMATS", "ENGINES", "CHOICE_ONLY_FORMATS",
           "CHOICE_OPTION_KEYS", "choice_manifest_problem"]

#: Accepted values of the manifest key ``format``.
FORMATS = ("biasbusters", "table", "transcripts", "openai", "anthropic", "otel", "inspect", "mcp", "langchain")

_STUDY_KEYS = {"name", "description", "catalog", "format", "queries", "api_meta", "cluster_names", "reference_date",
               "columns", "cluster", "n_queries", "position", "logs", "features", "tool_dates",
               "clusters", "clusters_file", "responses", "subsets",
               "design", "positions", "duplicates", "hive", "attempt_id", "model_override"}
#: Reader options each format takes (other option keys in an entry are an error).
_OPTIONS = {"biasbusters": ("n_queries", "position", "clusters"), "transcripts": ("cluster",),
            "table": ("columns", "design", "positions", "duplicates", "hive", "attempt_id"),
            "openai": ("responses", "subsets", "model_override"),
            "anthropic": ("responses", "subsets", "model_override"),
            "otel": ("subsets", "model_override"), "inspect": ("cluster",),
            # issue 36: MCP client sessions and LangChain / LangSmith run exports
            "mcp": ("subsets",), "langchain": ("subsets", "model_override")}
#: Formats whose records may name their own model (issue 36): the entry's ``model`` is then optional.
_OWN_MODEL_FORMATS = ("table", "openai", "anthropic", "otel", "langchain")
#: Entry keys that configure reading: the readers' keys plus ``clusters`` (the clusters a condition was run on;
#: attempts are expected only for those, issue 8).
READER_KEYS = _READER_KEYS | {"clusters"} | {"clusters_file", "responses", "subsets"}   # issue 13: API logs
READER_KEYS = READER_KEYS | {"design", "positions", "duplicates"}   # issue 20: table options
READER_KEYS = READER_KEYS | {"hive", "attempt_id", "__files", "__root"}   # issue 27: datasets, attempt ids
#: Option keys checked against :data:`_OPTIONS` in every entry, in the order problems are reported.
_ENTRY_OPTIONS = ("cluster", "columns", "n_queries", "position", "clusters", "responses", "subsets",
                  "design", "positions", "duplicates", "hive", "attempt_id", "model_override")
_PATH_KEYS = ("path", "catalog", "queries", "api_meta", "cluster_names", "responses")
_CATALOG_KEYS = ("catalog", "api_meta", "cluster_names")
#: Study-level (never per-entry) path keys: a feature table and a file of tool creation dates.
_STUDY_PATH_KEYS = ("features", "tool_dates")
#: ``format`` values only a choice study (:func:`toolbias_stats.choice.read_choice_study`) reads.
CHOICE_ONLY_FORMATS = ("lm_eval", "choice_table")
#: Reader options of the multiple-choice formats (``scorer``: inspect; ``score``, ``item``: lm_eval).
CHOICE_OPTION_KEYS = ("scorer", "score", "item")


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
    count_by : tuple of str or None
        The extra design columns :attr:`counts` is grouped by (``read_study(..., count_by=...)``); None: every
        design column. :attr:`log` keeps every column either way.

    Examples
    --------
    :func:`~toolbias_stats.read_study` builds it from a manifest; a log can also be wrapped directly:

    >>> from toolbias_stats.simulate import simulate_selection_log
    >>> log = simulate_selection_log(n_clusters=2, n_queries=5, rng=0).log
    >>> study = Study(log, name="demo")
    >>> study
    Study(name='demo', engine='pandas', path='None')
    >>> study.counts.status_totals()["ok"], study.has_rows
    (50, True)
    """

    def __init__(self, log: SelectionLog | None = None, catalog: ToolCatalog | None = None,
                 queries: Mapping[str, list[str]] | None = None, name: str = "", path: Path | None = None,
                 reference_date: _dt.date | None = None, settings: Mapping[str, Any] | None = None, *,
                 counts: SelectionCounts | None = None, engine: str = "pandas",
                 loader: Callable[[], SelectionLog] | None = None,
                 counter: Callable[[], SelectionCounts] | None = None,
                 count_by: Sequence[str] | None = None,
                 narrow: Callable[[SelectionCounts], SelectionCounts] | None = None) -> None:
        if log is None and counts is None and loader is None:
            raise ValueError("a Study needs a `log`, `counts` or a loader; got none.")
        # loader() reads the rows, counter() counts them with the study's engine (both on first use)
        self._log, self._counts, self._loader, self._counter = log, counts, loader, counter
        # count_by: the design columns counted by (issue 37); narrow(counts) sums a log's full counts over the
        # others (read_study passes it: the counting lives above this module)
        self.count_by = None if count_by is None else tuple(count_by)
        self._narrow = narrow
        self.settings = dict(settings or {})
        self.path = path
        self._log = self._declared(log)
        self._counts = self._declared(counts)
        if catalog is None:
            catalog = log.catalog if log is not None else cast("SelectionCounts", counts).catalog
        self.catalog = catalog
        self.queries = dict(queries or {})
        self.name = name
        self.path = path
        self.reference_date = reference_date
        self.settings = dict(settings or {})
        self.engine = engine

    @property
    def log(self) -> SelectionLog:
        """The row-level log (read on first use for a lazy or engine-counted study)."""
        if self._log is None:
            if self._loader is None:
                raise ValueError("this study holds counts only; it has no row-level log to read.")
            self._log = self._declared(self._loader())
        return self._log

    @property
    def counts(self) -> SelectionCounts:
        """The counts of the log (counted on first use: by the study's engine, or from :attr:`log`)."""
        if self._counts is None:
            if self._counter is not None and self._log is None:
                counts = self._counter()
            else:   # the log's counts (summed over the design columns not counted by, issue 37)
                counts = self.log.counts()
                if self._narrow is not None:
                    counts = self._narrow(counts)
            self._counts = self._declared(counts)
        return self._counts

    def _declared(self, obj):
        """``obj`` (a log or counts) with the manifest's ``[design]`` table applied (issue 35), else unchanged."""
        decl = self.settings.get("design")
        if obj is None or not isinstance(decl, dict) or obj.declared_design:
            return obj
        try:
            return obj.with_design(decl)
        except ValueError as exc:
            raise ManifestError(problem(self.path or "<study>", "design", None, str(exc))) from None

    @property
    def has_rows(self) -> bool:
        """Whether the row-level log is in memory (reading it may be expensive for an engine-counted study)."""
        return self._log is not None

    def replace(self, **changes: Any) -> Study:
        """A copy with some attributes replaced (``log``, ``catalog``, ``name``, ``path``, ...)."""
        kw: dict[str, Any] = {
            "log": self._log, "catalog": self.catalog, "queries": self.queries, "name": self.name, "path": self.path,
            "reference_date": self.reference_date, "settings": self.settings, "counts": self._counts,
            "engine": self.engine, "loader": self._loader, "counter": self._counter, "count_by": self.count_by,
            "narrow": self._narrow}
        if "log" in changes and "counts" not in changes:
            kw["counts"] = None          # counts follow the new log
        kw.update(changes)
        return Study(**kw)

    def __repr__(self):
        return f"Study(name={self.name!r}, engine={self.engine!r}, path={str(self.path)!r})"


#: Accepted ``engine`` values of :func:`read_study`.
ENGINES = ("auto", "pandas", "duckdb", "dask")


class StudyManifest:
    """A study manifest checked and resolved, before any log is read (the manifest stage of :func:`read_study`).

    Attributes
    ----------
    path : pathlib.Path
        The manifest file.
    doc : dict
        The TOML document.
    entries : list of dict
        One entry per log file (dataset entries split file by file): paths resolved, study defaults merged.
    catalog : ToolCatalog
    cluster_source : ClusterSource or None
        Where the clusters came from when the manifest declares, names or infers them.
    """

    def __init__(self, path: Path, doc: dict, entries: list, catalog: ToolCatalog,
                 cluster_source: ClusterSource | None) -> None:
        self.path, self.doc, self.entries = path, doc, entries
        self.catalog, self.cluster_source = catalog, cluster_source

    @property
    def all_tables(self) -> bool:
        """Whether every entry is a ``format = "table"`` file (what the DuckDB and Dask engines read)."""
        return all(m["format"] == "table" for m in self.entries)

    def resolve_engine(self, engine: str) -> str:
        """``"auto"`` -> the engine that reads this study; a ManifestError when ``engine`` cannot read it."""
        if engine == "auto":
            engine = "duckdb" if self.all_tables else "pandas"
        if engine != "pandas" and not self.all_tables:
            entries = self.entries
            bad = next(i for i, m in enumerate(entries, start=1) if m["format"] != "table")
            raise ManifestError(problem(self.path, f"logs[{bad}]", "format",
                                        f"engine {engine!r} reads format 'table' files; "
                                        f"this entry has {entries[bad - 1]['format']!r} (use engine='pandas')"))
        return engine

    def read_rows(self) -> SelectionLog:
        """Every entry read by its format's reader, as one SelectionLog (the pandas engine)."""
        from .readers import READERS

        parts = []
        for merged in self.entries:
            meta = {k: v for k, v in merged.items() if k not in READER_KEYS}
            options = {k: merged[k] for k in _OPTIONS[merged["format"]] if k in merged}
            reader = cast("Callable[..., SelectionLog]", READERS[merged["format"]])
            parts.append(reader(merged["path"], catalog=self.catalog, meta=meta, **options))
        return parts[0] if len(parts) == 1 else SelectionLog.concat(parts, catalog=self.catalog)

    def table_files(self) -> list:
        """The entries as the count engines take them: ``{"path", "meta", "columns", table options}`` (the DuckDB
        engine reads an ``.xlsx`` file or one with value-mapped ``columns`` through
        :func:`~toolbias_stats.io.readers.table.engine_entry`, issue 36)."""
        return [{"path": m["path"], "meta": {k: v for k, v in m.items() if k not in READER_KEYS},
                 "columns": m.get("columns"), **{k: m[k] for k in ("design", "positions", "duplicates") if k in m}}
                for m in self.entries]

    def queries(self) -> dict:
        """``{cluster_id: [query text, ...]}`` from the queries file of the first entry, else ``{}``."""
        from .readers.biasbusters import read_biasbusters_queries

        qpath = self.entries[0].get("queries")
        return read_biasbusters_queries(qpath) if qpath is not None else {}

    def settings(self) -> dict:
        """The study-level keys (paths resolved) plus ``cluster_source`` when clusters were declared or inferred."""
        base = self.path.parent
        resolved = {k: v for k, v in self.doc.items() if k != "logs"}
        if self.cluster_source is not None:
            resolved["cluster_source"] = self.cluster_source.to_dict()
        for key in _PATH_KEYS + _STUDY_PATH_KEYS:
            if isinstance(resolved.get(key), str):
                resolved[key] = str(_resolve(base, resolved[key]))
        return resolved

    def study(self, *, engine: str, log: SelectionLog | None = None, counts: SelectionCounts | None = None,
              loader: Callable[[], SelectionLog] | None = None,
              counter: Callable[[], SelectionCounts] | None = None,
              count_by: Sequence[str] | None = None,
              narrow: Callable[[SelectionCounts], SelectionCounts] | None = None) -> Study:
        """The :class:`Study` of this manifest with its rows or counts (or the callables that produce them)."""
        return Study(log=log, catalog=self.catalog, queries=self.queries(),
                     name=str(self.doc.get("name", self.path.stem)), path=self.path,
                     reference_date=self.doc.get("reference_date"), settings=self.settings(), counts=counts,
                     engine=engine, loader=loader, counter=counter, count_by=count_by, narrow=narrow)


def read_manifest(path: str | PathLike[str]) -> StudyManifest:
    """Read and check a study manifest and its catalog (no log is read): parse -> check -> split -> catalog.

    Every problem of the manifest is reported together in one :class:`~toolbias_stats.exceptions.ManifestError`,
    each named by manifest, entry and key. See :func:`~toolbias_stats.io.read_study` for the keys.
    """
    path = Path(path)
    doc = load_toml(path)
    logs = doc.get("logs")
    if not isinstance(logs, list) or not logs or not all(isinstance(e, dict) for e in logs):
        raise ManifestError(problem(path, None, "logs", "expected at least one [[logs]] table"))
    if (mc := choice_manifest_problem(path, doc)) is not None:   # a multiple-choice manifest: say to use `choice`
        raise ManifestError(mc)
    problems = [problem(path, None, k, "unknown study-level key (put design keys in each [[logs]] entry)")
                for k in doc if k not in _STUDY_KEYS and not isinstance(doc[k], (dict, list))]
    # a [design] table is the study design (issue 35); a `design` list stays the table reader's option
    defaults = {k: v for k, v in doc.items() if k != "logs" and k in READER_KEYS
                and not (k == "design" and isinstance(v, dict))}
    entries = [_check_entry(path, f"logs[{i}]", {**defaults, **entry}, entry, problems)
               for i, entry in enumerate(logs, start=1)]
    _check_study_keys(path, doc, problems)
    if problems:
        raise ManifestError(problems)
    entries = _split_datasets(path, entries, problems)
    if problems:
        raise ManifestError(problems)
    catalog, cluster_source = _study_catalog(path, doc, entries)
    return StudyManifest(path, doc, entries, catalog, cluster_source)


# -- checking one [[logs]] entry ------------------------------------------------------------------------------
def _check_entry(path: Path, where: str, merged: dict, entry: dict, problems: list) -> dict:
    """One ``[[logs]]`` entry merged with the study defaults: paths resolved, every problem appended."""
    for key in _PATH_KEYS:
        _resolve_path_key(path, where, key, merged, problems)
    _check_design_keys(path, where, merged, problems)
    _check_format_options(path, where, merged, entry, problems)
    for key, val in entry.items():
        if key not in READER_KEYS and not isinstance(val, (str, bool, numbers.Number)):
            problems.append(problem(path, where, key, f"expected a scalar (string, number, boolean), got {val!r}"))
    return merged


def _is_dataset_entry(base: Path, merged: dict) -> bool:
    """A table entry whose ``path`` is a folder, a glob or a list of files of one format (issue 27)."""
    value = merged.get("path")
    return merged.get("format") == "table" and "path" in merged and (
        isinstance(value, list) or (isinstance(value, str) and is_dataset(_resolve(base, value))))


def _resolve_path_key(path: Path, where: str, key: str, merged: dict, problems: list) -> None:
    """Resolve the path key ``key`` of an entry against the manifest's folder; a dataset ``path`` is expanded."""
    base = path.parent
    if key == "path" and _is_dataset_entry(base, merged):
        _expand_dataset_entry(path, where, merged, problems)
        return
    if key not in merged:
        return
    if not isinstance(merged[key], str):
        problems.append(problem(path, where, key, f"expected a path string, got {merged[key]!r}"))
        return
    p = (base / merged[key]).resolve() if not Path(merged[key]).is_absolute() else Path(merged[key])
    if not p.exists():
        problems.append(problem(path, where, key, f"file not found: {p}"))
    merged[key] = p


def _expand_dataset_entry(path: Path, where: str, merged: dict, problems: list) -> None:
    """Issue 27: a folder, a glob or a list of files of one format, read as one log (file by file)."""
    base, value = path.parent, merged["path"]
    if isinstance(value, list) and not all(isinstance(x, str) for x in value):
        problems.append(problem(path, where, "path", f"expected a path string or a list of path strings, "
                                                     f"got {value!r}"))
        return
    try:
        merged["__files"] = expand_dataset(value, base, origin=f"{path}:{where}:path")
    except SelectionLogError as exc:
        problems.extend(exc.problems if hasattr(exc, "problems") else [str(exc)])
        return
    merged["__root"] = (_resolve(base, value) if isinstance(value, str) and _resolve(base, value).is_dir() else None)
    merged["path"] = merged["__files"][0]


def _check_design_keys(path: Path, where: str, merged: dict, problems: list) -> None:
    """``path`` and ``model`` present, ``model`` / ``condition`` strings, ``run`` an integer >= 1."""
    if "path" not in merged:
        problems.append(problem(path, where, "path", "missing required key"))
    if "model" not in merged and merged.get("format") not in _OWN_MODEL_FORMATS:
        # a table may carry its own model column; API-log records name their own model (issue 36)
        problems.append(problem(path, where, "model", "missing required key"))
    elif "model" in merged and not isinstance(merged["model"], str):
        problems.append(problem(path, where, "model", f"expected a string, got {merged['model']!r}"))
    run = merged.get("run")
    if "run" in merged and (isinstance(run, bool) or not isinstance(run, numbers.Integral) or run < 1):
        problems.append(problem(path, where, "run", f"expected an integer >= 1, got {run!r}"))
    if "condition" in merged and not isinstance(merged["condition"], str):
        problems.append(problem(path, where, "condition", f"expected a string, got {merged['condition']!r}"))


def _check_format_options(path: Path, where: str, merged: dict, entry: dict, problems: list) -> None:
    """A known ``format``, a catalog (or declared / inferable clusters), only the options the format takes."""
    from .readers import OFFERED

    fmt = merged.get("format")
    if fmt not in FORMATS:
        problems.append(problem(path, where, "format", f"expected one of {list(FORMATS)}, got {fmt!r}"))
    if "catalog" not in merged and not declares_clusters(merged) and fmt not in OFFERED:
        problems.append(problem(path, where, "catalog", "no catalog given (study-level or per entry)"))
    if fmt in _OPTIONS:
        for opt in _ENTRY_OPTIONS:
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
    if "model_override" in merged and not isinstance(merged["model_override"], bool):
        problems.append(problem(path, where, "model_override", f"expected true or false, got "
                                                               f"{merged['model_override']!r}"))
    elif merged.get("model_override") and "model" not in merged:
        problems.append(problem(path, where, "model_override", "`model_override = true` needs the entry's `model` "
                                                               "(the label it puts on every record)"))
    if "columns" in merged and not isinstance(merged["columns"], dict):
        problems.append(problem(path, where, "columns",
                                f"expected a table of column names, got {merged['columns']!r}"))


def _check_study_keys(path: Path, doc: dict, problems: list) -> None:
    """The study-level path keys (``features``, ``tool_dates``) exist; ``reference_date`` is a TOML date."""
    base = path.parent
    for key in _STUDY_PATH_KEYS:
        if key not in doc:
            continue
        if not isinstance(doc[key], str):
            problems.append(problem(path, None, key, f"expected a path string, got {doc[key]!r}"))
            continue
        p = (base / doc[key]).resolve() if not Path(doc[key]).is_absolute() else Path(doc[key])
        if not p.exists():
            problems.append(problem(path, None, key, f"file not found: {p}"))
        elif (other := _names_an_input(base, doc, p)) is not None:
            problems.append(problem(path, None, key, f"names {p}, which is the study's {other}; `{key}` is a "
                                                     f"file of its own ({_STUDY_FILE_KIND[key]})"))
    if isinstance(doc.get("design"), dict):
        from ._study_design import DESIGN_KEYS

        for key, value in doc["design"].items():
            if key not in DESIGN_KEYS:
                problems.append(problem(path, "design", key,
                                        f"unknown design key (expected one of {list(DESIGN_KEYS)})"))
            elif key != "unit" and (isinstance(value, str) or not isinstance(value, list)):
                problems.append(problem(path, "design", key, f"expected a list of column names, got {value!r}"))
    ref = doc.get("reference_date")
    if ref is not None and not isinstance(ref, _dt.date):
        problems.append(problem(path, None, "reference_date", f"expected a TOML date (2025-09-01), got {ref!r}"))


#: What each study-level file is (named when one of them is given an input of the study instead, issue 37).
_STUDY_FILE_KIND = {"tool_dates": "a CSV of tool_id, created", "features": "a table of tool features"}


def _names_an_input(base: Path, doc: dict, p: Path) -> str | None:
    """Issue 37: which input (a log entry's file, the catalog, ...) the study-level file ``p`` also is, else None."""
    import os

    real = os.path.realpath(p)
    tables = [(None, doc)] + [(i, e) for i, e in enumerate(doc.get("logs") or [], start=1) if isinstance(e, dict)]
    for i, table in tables:
        for key in _PATH_KEYS:
            value = table.get(key)
            if isinstance(value, str) and os.path.realpath(_resolve(base, value)) == real:
                return f"{key} file" if i is None else f"log file (logs[{i}].{key})"
    return None


def _study_catalog(path: Path, doc: dict, entries: list) -> tuple:
    """The one catalog of the study and its :class:`ClusterSource` (None for a catalog file): clusters
    declared in the manifest, read from a clusters_file or inferred from the tools offered (issue 13)."""
    from .readers import OFFERED

    cluster_source = study_clusters(path, doc, entries, offered=lambda m: OFFERED[m["format"]](
        m["path"], **{k: m[k] for k in _OPTIONS[m["format"]] if k in m}), inferable=set(OFFERED))
    catalogs: dict = {}
    for merged in entries:
        ckey = tuple(merged.get(k) for k in _CATALOG_KEYS)
        if ckey not in catalogs:
            catalogs[ckey] = cluster_source.catalog if cluster_source is not None else _read_catalog(merged)
            if "tool_dates" in doc:
                from .readers.biasbusters import read_tool_dates

                catalogs[ckey] = read_tool_dates(_resolve(path.parent, doc["tool_dates"]), catalog=catalogs[ckey])
    if len(catalogs) > 1:
        raise ManifestError(problem(path, None, "catalog", "all logs of one study must share one catalog"))
    catalog = next(iter(catalogs.values()))
    if all(m["format"] == "table" for m in entries):   # issue 21: a 1-tool or a 10,000-tool cluster, named early
        from ._catalog import check_cluster_sizes

        check_cluster_sizes(catalog)
    return catalog, cluster_source


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
            merged["__where"] = where
            continue
        for f in files:
            part = dict(merged, path=f, __where=where, __part=True)
            if hive and root is not None:
                for k, v in hive_values(f, root).items():
                    if k in merged and merged[k] != v:
                        problems.append(problem(manifest, where, k, f"the entry says {merged[k]!r} but the folder "
                                                                    f"of {f} says {v!r}"))
                    part[k] = v
            out.append(part)
    _check_counted_once(manifest, out, problems)
    for m in out:
        m.pop("__where", None)
        m.pop("__part", None)
    return out


def _check_counted_once(manifest: Path, entries: list, problems: list) -> None:
    """Issue 37: a file reached by two ``[[logs]]`` entries (a folder and one of its parts, or one file twice
    with the same model, run and condition) would have its rows counted twice: an error naming the part."""
    import os

    seen: dict = {}
    for m in entries:
        if m.get("format") != "table" or not isinstance(m.get("path"), Path):
            continue
        real = os.path.realpath(m["path"])
        design = tuple(m.get(k) for k in ("model", "run", "condition"))
        if real in seen:
            where, part, design0 = seen[real]
            if part or m.get("__part") or design == design0:
                problems.append(problem(manifest, m["__where"], "path",
                                        f"{m['path']} is also read by {where}: its rows would be counted twice "
                                        "(list each file once)"))
                continue
        seen[real] = (m["__where"], bool(m.get("__part")), design)


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


def choice_manifest_problem(path, doc: dict) -> str | None:
    """The one problem to report when a tool-study reader is given a choice-study manifest, else None.

    A manifest whose ``format`` (study-level or of an entry) is a multiple-choice-only format
    (:data:`CHOICE_ONLY_FORMATS`), or that gives a choice reader's option (``score``, ``scorer``,
    ``item``) without a catalog, is a choice study: ``toolbias-stats choice`` reads it, and the tool
    commands (``bias``, ``report``, ...) say so instead of listing missing tool-study keys.

    Examples
    --------
    >>> doc = {"format": "lm_eval", "logs": [{"path": "samples.jsonl"}]}
    >>> print(choice_manifest_problem("study.toml", doc))  # doctest: +ELLIPSIS
    study.toml:format: format 'lm_eval' is a multiple-choice format: this is a choice-study manifest; ...
    >>> choice_manifest_problem("study.toml", {"catalog": "tools.csv", "logs": []}) is None
    True
    """
    logs = doc["logs"] if isinstance(doc.get("logs"), list) else []
    tables = [doc] + [e for e in logs if isinstance(e, dict)]
    for i, t in enumerate(tables):
        fmt = t.get("format")
        if isinstance(fmt, str) and fmt in CHOICE_ONLY_FORMATS:
            where = None if i == 0 else f"logs[{i}]"
            return problem(path, where, "format",
                           f"format {fmt!r} is a multiple-choice format: this is a choice-study manifest; read it "
                           f"with `toolbias-stats choice {path}` (toolbias_stats.choice.read_choice_study)")
    if not any("catalog" in t for t in tables):
        for i, t in enumerate(tables):
            opt = next((k for k in CHOICE_OPTION_KEYS if k in t), None)
            if opt is not None:
                where = None if i == 0 else f"logs[{i}]"
                return problem(path, where, opt,
                               f"{opt!r} is an option of multiple-choice logs and there is no catalog: this looks "
                               f"like a choice-study manifest; read it with `toolbias-stats choice {path}`")
    return None
