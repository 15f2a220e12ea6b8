"""Every input file of a study, for the report's provenance table (manifest, logs and every side file)."""

from __future__ import annotations

from pathlib import Path

__all__ = ["input_files", "SIDE_FILE_KEYS"]

#: Manifest keys naming a side file (study-level or per ``[[logs]]`` entry) and the kind shown in the report.
#: ``responses`` holds the choices of OpenAI / Anthropic batch logs; ``features`` and ``tool_dates`` are study-level.
SIDE_FILE_KEYS = {"catalog": "catalog", "api_meta": "api meta", "cluster_names": "cluster names",
                  "queries": "queries", "responses": "responses", "clusters_file": "clusters file",
                  "tool_dates": "tool dates", "features": "features"}


def input_files(study) -> list[tuple[str, Path, int | None]]:
    """``(kind, path, rows)`` for every input file of ``study``, the manifest first, each path once.

    Parameters
    ----------
    study : Study
        A study read from a manifest (:func:`~toolbias_stats.read_study`) or built in memory (then only the
        catalog's source and the logs' ``source_file`` are known).

    Returns
    -------
    list of tuple
        ``kind`` is ``"manifest"``, ``"log"`` (with its number of rows) or a side-file kind of
        :data:`SIDE_FILE_KEYS`. Side files are taken from the manifest itself (study level and every entry,
        relative paths resolved against the manifest's folder), so that an entry's own ``responses``,
        ``catalog`` or ``clusters_file`` is hashed too; a path that does not exist is left to the table
        (which says "not a file on disk").

    Examples
    --------
    >>> import toolbias_stats as tbs
    >>> from toolbias_stats.report._provenance import input_files
    >>> kinds = [k for k, _, _ in input_files(tbs.read_study(tbs.datasets.path("biasbusters/study.toml")))]
    >>> kinds[:2], "tool dates" in kinds
    (['manifest', 'catalog'], True)
    """
    entries: list[tuple[str, Path, int | None]] = []
    path = getattr(study, "path", None)
    if path is not None:
        entries.append(("manifest", Path(path), None))
    cat_src = getattr(getattr(study, "catalog", None), "source", None)
    if cat_src and Path(str(cat_src)).exists():
        entries.append(("catalog", Path(str(cat_src)), None))
    settings = getattr(study, "settings", None) or {}
    for key, kind in SIDE_FILE_KEYS.items():
        val = settings.get(key)
        if isinstance(val, (str, Path)) and Path(val).exists():
            entries.append((kind, Path(val), None))
    entries.extend(_manifest_side_files(path))
    try:
        log = study.log
    except ValueError:   # a study of counts only: its files are the manifest's
        log = None
    if log is not None:
        for src, n in log.data.groupby("source_file", sort=False).size().items():
            entries.append(("log", Path(str(src)) if Path(str(src)).exists() else src, int(n)))
    out, seen = [], set()
    for kind, p, n in entries:
        key = str(Path(p).resolve()) if isinstance(p, Path) and p.exists() else str(p)
        if key in seen:
            continue
        seen.add(key)
        out.append((kind, p, n))
    return out


def _manifest_side_files(path) -> list[tuple[str, Path, None]]:
    """Side files named in the manifest at study level or in any ``[[logs]]`` entry."""
    if path is None or not Path(path).is_file():
        return []
    from ..io._manifest import load_toml

    try:
        doc = load_toml(Path(path))
    except Exception:
        return []
    base = Path(path).parent
    tables = [doc] + [e for e in doc.get("logs", []) if isinstance(e, dict)] if isinstance(doc.get("logs"), list) \
        else [doc]
    out = []
    for t in tables:
        for key, kind in SIDE_FILE_KEYS.items():
            val = t.get(key)
            if isinstance(val, str) and val:
                p = Path(val) if Path(val).is_absolute() else (base / val).resolve()
                out.append((kind, p, None))
    return out
