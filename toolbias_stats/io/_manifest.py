"""Study manifests (TOML): tie log files to their study metadata and read them into one SelectionLog."""

from __future__ import annotations

import datetime as _dt
import numbers
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from ..exceptions import ManifestError, problem
from ._catalog import ToolCatalog
from ._selection_log import SelectionLog
from .readers._common import READER_KEYS

__all__ = ["Study", "read_study", "FORMATS"]

#: Accepted values of the manifest key ``format``.
FORMATS = ("biasbusters", "table", "transcripts")

_STUDY_KEYS = {"name", "description", "catalog", "format", "queries", "api_meta", "cluster_names", "reference_date",
               "columns", "cluster", "n_queries", "position", "logs", "features", "tool_dates"}
#: Reader options each format takes (other option keys in an entry are an error).
_OPTIONS = {"biasbusters": ("n_queries", "position"), "table": ("columns",), "transcripts": ("cluster",)}
_PATH_KEYS = ("path", "catalog", "queries", "api_meta", "cluster_names")
_CATALOG_KEYS = ("catalog", "api_meta", "cluster_names")
#: Study-level (never per-entry) path keys: a feature table and a file of tool creation dates.
_STUDY_PATH_KEYS = ("features", "tool_dates")


@dataclass(frozen=True, eq=False)
class Study:
    """A study manifest read into memory.

    Attributes
    ----------
    log : SelectionLog
        Every attempt of every ``[[logs]]`` entry, with its metadata columns.
    catalog : ToolCatalog
    queries : dict
        ``{cluster_id: [query text, ...]}`` when the manifest names a queries file, else ``{}``.
    name : str
    path : pathlib.Path
        The manifest file.
    reference_date : datetime.date or None
    settings : dict
        The study-level keys of the manifest (paths resolved).
    """

    log: SelectionLog
    catalog: ToolCatalog
    queries: dict = field(default_factory=dict)
    name: str = ""
    path: Path | None = None
    reference_date: _dt.date | None = None
    settings: dict = field(default_factory=dict)


def read_study(path) -> Study:
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
        SelectionLog columns. An entry may override any study-level default. Relative paths are
        relative to the manifest.

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
    from .readers import READERS
    from .readers.biasbusters import read_biasbusters_queries

    path = Path(path)
    if not path.exists():
        raise ManifestError(problem(path, None, None, "manifest file not found"))
    try:
        with path.open("rb") as fh:
            doc = tomllib.load(fh)
    except tomllib.TOMLDecodeError as exc:
        raise ManifestError(problem(path, _toml_line(exc), None, f"malformed TOML: {exc}")) from None
    base = path.parent
    problems = []
    unknown = [k for k in doc if k not in _STUDY_KEYS and not isinstance(doc[k], (dict, list))]
    settings = {k: v for k, v in doc.items() if k != "logs"}
    logs = doc.get("logs")
    if not isinstance(logs, list) or not logs or not all(isinstance(e, dict) for e in logs):
        raise ManifestError(problem(path, None, "logs", "expected at least one [[logs]] table"))
    for k in unknown:
        problems.append(problem(path, None, k, "unknown study-level key (put design keys in each [[logs]] entry)"))
    entries = []
    for i, entry in enumerate(logs, start=1):
        merged = {k: v for k, v in settings.items() if k in READER_KEYS}
        merged.update(entry)
        where = f"logs[{i}]"
        for key in _PATH_KEYS:
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
        if "catalog" not in merged:
            problems.append(problem(path, where, "catalog", "no catalog given (study-level or per entry)"))
        if fmt in _OPTIONS:
            for opt in ("cluster", "columns", "n_queries", "position"):
                if opt in entry and opt not in _OPTIONS[fmt]:
                    problems.append(problem(path, where, opt, f"format {fmt!r} takes no {opt!r} option"))
        if "columns" in merged and not isinstance(merged["columns"], dict):
            problems.append(problem(path, where, "columns", f"expected a table of column names, got {merged['columns']!r}"))
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

    catalogs: dict = {}
    parts = []
    for merged in entries:
        ckey = tuple(merged.get(k) for k in _CATALOG_KEYS)
        if ckey not in catalogs:
            catalogs[ckey] = _read_catalog(merged)
            if "tool_dates" in doc:
                from .readers.biasbusters import read_tool_dates

                catalogs[ckey] = read_tool_dates(_resolve(base, doc["tool_dates"]), catalog=catalogs[ckey])
        catalog = catalogs[ckey]
        meta = {k: v for k, v in merged.items() if k not in READER_KEYS}
        options = {k: merged[k] for k in _OPTIONS[merged["format"]] if k in merged}
        parts.append(READERS[merged["format"]](merged["path"], catalog=catalog, meta=meta, **options))
    if len(catalogs) > 1:
        raise ManifestError(problem(path, None, "catalog", "all logs of one study must share one catalog"))
    catalog = next(iter(catalogs.values()))
    log = parts[0] if len(parts) == 1 else SelectionLog.concat(parts, catalog=catalog)
    queries = {}
    qpath = entries[0].get("queries")
    if qpath is not None:
        queries = read_biasbusters_queries(qpath)
    resolved = dict(settings)
    for key in _PATH_KEYS + _STUDY_PATH_KEYS:
        if isinstance(resolved.get(key), str):
            resolved[key] = str(_resolve(base, resolved[key]))
    return Study(log=log, catalog=catalog, queries=queries, name=str(doc.get("name", path.stem)), path=path,
                 reference_date=ref, settings=resolved)


def _resolve(base: Path, value: str) -> Path:
    return Path(value) if Path(value).is_absolute() else (base / value).resolve()


def _read_catalog(entry: dict) -> ToolCatalog:
    from .readers.biasbusters import read_biasbusters_catalog
    from .readers.table import read_catalog_table

    cat = entry["catalog"]
    if cat.suffix.lower() == ".json" and entry.get("format") == "biasbusters" or _is_cluster_list(cat):
        return read_biasbusters_catalog(cat, api_meta=entry.get("api_meta"), cluster_names=entry.get("cluster_names"))
    return read_catalog_table(cat)


def _is_cluster_list(path: Path) -> bool:
    """A BiasBusters clusters.json starts with '[' then '[' (a list of lists)."""
    if path.suffix.lower() != ".json":
        return False
    with path.open(encoding="utf-8") as fh:
        head = fh.read(200).lstrip()
    return head.startswith("[") and head[1:].lstrip().startswith("[")


def _toml_line(exc) -> int | None:
    """Line of a TOML syntax error (Python 3.11's tomllib only puts it in the message)."""
    line = getattr(exc, "lineno", None)
    if line is None:
        m = re.search(r"line (\d+)", str(exc))
        line = int(m.group(1)) if m else None
    return line
