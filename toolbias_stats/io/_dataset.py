"""Datasets of several table files: a folder, a glob or a list of files of one format, read as one log.

Every engine reads a dataset file by file (each row keeps its ``source_file`` and ``source_row``, so an
error names the file inside the dataset). A folder is searched recursively; hidden files and files whose
name starts with ``_`` (``_SUCCESS``, ``_metadata``) are skipped. Hive-style folder names
(``model=gpt-4o/part-0.parquet``) give each file's partition values, which become design columns when the
manifest asks for them (``hive = true``).
"""

from __future__ import annotations

import glob as _glob
from pathlib import Path

from ..exceptions import SelectionLogError, problem

__all__ = ["expand_dataset", "hive_values", "is_dataset", "check_part_schemas"]

_GLOB_CHARS = set("*?[")


#: The table formats a log file may have, by suffix (the readers and engines use this table too).
TABLE_SUFFIXES = {".csv": "csv", ".jsonl": "jsonl", ".ndjson": "jsonl", ".parquet": "parquet"}


def _suffixes():
    return TABLE_SUFFIXES


def is_dataset(path) -> bool:
    """Whether ``path`` names several files (a list, a folder or a glob) rather than one file."""
    if isinstance(path, (list, tuple)):
        return True
    p = Path(path)
    return p.is_dir() or bool(_GLOB_CHARS & set(str(path)))


def _visible(p: Path, root: Path) -> bool:
    parts = p.relative_to(root).parts
    return not any(s.startswith((".", "_")) for s in parts[:-1] + (p.name,)) and _part_kind(p) != "dir"


def _part_kind(p: Path) -> str:
    """``"file"``, ``"dir"``, or what else a name in a dataset is (a dangling link, a FIFO, a device...)."""
    import stat

    try:
        mode = p.stat().st_mode
    except FileNotFoundError:
        return "a symbolic link to a missing file" if p.is_symlink() else "missing"
    except OSError as exc:
        return f"unreadable ({exc.strerror})"
    if stat.S_ISREG(mode):
        return "file"
    if stat.S_ISDIR(mode):
        return "dir"
    return "a FIFO (named pipe)" if stat.S_ISFIFO(mode) else "not a regular file (a socket or a device)"


def _check_parts(files: list[Path]) -> None:
    """Issue 37: every part is a regular file (a dangling link or a FIFO named like a part is an error, not
    skipped), and no part is listed twice (its rows would be counted twice)."""
    import os

    seen: dict[str, Path] = {}
    for f in files:
        kind = _part_kind(f)
        if kind != "file":
            raise SelectionLogError(problem(f, None, None, f"this part of the dataset is {kind}; remove it or "
                                                           "replace it with the data file"))
        real = os.path.realpath(f)
        if real in seen:
            raise SelectionLogError(problem(f, None, None, f"the same file as {seen[real]} (listed twice in "
                                                           "the dataset): its rows would be counted twice"))
        seen[real] = f


def check_part_schemas(files: list[Path]) -> None:
    """Issue 37: the parts of one dataset have the same columns (a CSV header or a Parquet schema); a part with
    another schema (a column renamed) is an error naming the part and the columns that differ."""
    first = cols0 = None
    for f in files:
        cols = _columns_of(f)
        if cols is None:
            continue
        if cols0 is None:
            first, cols0 = f, cols
        elif cols != cols0:
            missing = [c for c in cols0 if c not in cols]
            extra = [c for c in cols if c not in cols0]
            raise SelectionLogError(problem(f, None, None, f"this part has other columns than {first}: missing "
                                                           f"{missing}, not in the first part {extra}; the parts "
                                                           "of one dataset share one schema"))


def _columns_of(f: Path) -> list | None:
    """The column names of a CSV (its header) or Parquet part, else None."""
    kind = TABLE_SUFFIXES.get(f.suffix.lower())
    try:
        if kind == "csv":
            import csv

            with f.open(encoding="utf-8-sig", newline="") as fh:
                return next(csv.reader(fh), None)
        if kind == "parquet":
            import pyarrow.parquet as pq

            return [n for n in pq.read_schema(f).names if n != "__index_level_0__"]
    except (OSError, ValueError, UnicodeDecodeError):
        return None      # the reader names an unreadable part
    return None


def expand_dataset(path, base: Path | None = None, origin="path") -> list[Path]:
    """The files of a dataset, in a fixed (sorted) order.

    Parameters
    ----------
    path : path-like or list of path-like
        One file, a folder (searched recursively), a glob (``parts/*.parquet``, ``**`` allowed) or a list
        of files. Relative paths are taken from ``base``.
    base : Path, optional
    origin : str
        Where a list of files came from (named by the errors about the list as a whole).

    Returns
    -------
    list of Path
        The files; all of one format (``.csv``, ``.jsonl``/``.ndjson`` or ``.parquet``).

    Raises
    ------
    SelectionLogError
        An empty folder, a glob matching nothing, a missing file, or files of more than one format.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> for name in ("b.csv", "a.csv", "_SUCCESS"):
    ...     _ = (d / name).write_text("x\\n1\\n")
    >>> [p.name for p in expand_dataset(d)]
    ['a.csv', 'b.csv']
    """
    def resolve(p) -> Path:
        p = Path(p)
        return p if p.is_absolute() or base is None else (base / p).resolve()

    suffixes = _suffixes()
    if isinstance(path, (list, tuple)):
        if not path:
            raise SelectionLogError(problem(origin, None, None, "the list of files is empty"))
        files = []
        for item in path:
            p = resolve(item)
            if not p.exists():
                raise SelectionLogError(problem(p, None, None, "file not found"))
            files.append(p)
        where = "the list of files"
    else:
        p = resolve(path)
        if p.is_dir():
            files = sorted(f for f in p.rglob("*") if _visible(f, p))
            if not files:
                raise SelectionLogError(problem(p, None, None, "the folder holds no data files (expected files "
                                                               f"ending in {', '.join(suffixes)})"))
            where = "the folder"
        elif _GLOB_CHARS & set(str(path)):
            files = sorted(Path(f) for f in _glob.glob(str(p), recursive=True) if _part_kind(Path(f)) != "dir")
            if not files:
                raise SelectionLogError(problem(p, None, None, "no file matches this glob"))
            where = "the glob"
        else:
            return [p]
    _check_parts(files)
    kinds: dict[str, list[Path]] = {}
    for f in files:
        kinds.setdefault(suffixes.get(f.suffix.lower(), f.suffix.lower() or f.name), []).append(f)
    if len(kinds) > 1:
        found = "; ".join(f"{len(v)} {k} file{'s' if len(v) > 1 else ''} (e.g. {v[0].name})"
                          for k, v in sorted(kinds.items()))
        raise SelectionLogError(problem(resolve(path) if not isinstance(path, (list, tuple)) else origin, None, None,
                                        f"{where} mixes file formats: {found}; a dataset holds files of one format "
                                        "(.csv, .jsonl or .parquet)"))
    check_part_schemas(files)
    return files


def hive_values(file: Path, root: Path) -> dict:
    """Partition values of a file from its hive-style folders below ``root`` (``model=gpt-4o/...``).

    Values that are whole numbers become integers (``run=2``)."""
    out: dict = {}
    try:
        parts = Path(file).relative_to(root).parts[:-1]
    except ValueError:
        return out
    for part in parts:
        if "=" in part:
            k, v = part.split("=", 1)
            out[k] = int(v) if v.isdigit() else v
    return out
