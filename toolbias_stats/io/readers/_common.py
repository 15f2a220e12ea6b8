"""Helpers shared by the readers: JSON loading with located errors, design metadata columns."""

from __future__ import annotations

import json
import numbers
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from ...exceptions import SelectionLogError, problem

if TYPE_CHECKING:
    import os
    from collections.abc import Mapping, Sequence
    from typing import Any, TypeAlias

    #: A file or folder path the readers accept.
    PathLike: TypeAlias = "str | os.PathLike[str]"
    #: Design metadata of a manifest entry (``model``, ``run``, ``condition``, extra scalar keys).
    Meta: TypeAlias = "Mapping[str, Any] | None"
    #: Clusters of an API log without a catalog: ``{cluster: [tool names]}``, a CSV path or ``"infer"``.
    Clusters: TypeAlias = "Mapping[str, Sequence[str]] | str | os.PathLike[str] | None"

#: Keys of a manifest entry that configure reading rather than describe the study design.
READER_KEYS = frozenset({"path", "format", "catalog", "queries", "cluster", "columns", "cluster_names",
                         "api_meta", "n_queries", "position", "model_override"})


def utf8_position(path: Path):
    """``(line, byte, reason)`` of the first invalid UTF-8 sequence in ``path`` (1-based), or None."""
    with Path(path).open("rb") as fh:
        for lineno, raw in enumerate(fh, start=1):
            try:
                raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                return lineno, exc.start + 1, exc.reason
    return None


def utf8_message(position) -> str:
    if position is None:
        return "not UTF-8 text"
    line, byte, reason = position
    return f"not UTF-8 text (line {line}, byte {byte}): {reason}; save the file as UTF-8"


def utf8_problem(path: Path, *, data_rows: bool = False) -> str:
    """Name the first line of ``path`` that is not valid UTF-8 (``file:row: not UTF-8 text (line N, byte B): ...``).

    ``data_rows``: CSV files count data rows after the header, so the row is ``line - 1`` (the line is named too).
    """
    pos = utf8_position(path)
    row = None if pos is None else (pos[0] - 1 if data_rows else pos[0])
    return problem(path, row, None, utf8_message(pos))


def utf8_bytes(path: Path) -> bytes:
    """The bytes of ``path``, checked to be UTF-8 (the error names the first bad line and byte), with a leading
    byte-order mark dropped (``utf-8-sig``, as text mode reads it)."""
    data = Path(path).read_bytes()
    if not data.isascii():
        try:
            data.decode("utf-8")
        except UnicodeDecodeError:
            raise SelectionLogError(problem(path, None, None, utf8_message(utf8_position(path)))) from None
    return data[3:] if data.startswith(b"\xef\xbb\xbf") else data


#: Largest input file read into memory (a log, a manifest, a catalog): 16 GiB. Larger files (or endless ones such
#: as /dev/zero behind a symlink) are refused by name instead of being read until memory runs out.
MAX_FILE_BYTES = 16 * 2**30
#: Message of a JSON value nested deeper than Python's parser can follow (every reader).
TOO_DEEP = "JSON nested too deeply to read (more than about 1,000 levels of lists / objects)"


def check_regular_file(path: Path, what: str = "file", error=SelectionLogError) -> None:
    """Refuse what is not a regular file of a readable size (a directory, a device, a FIFO), naming it."""
    path = Path(path)
    if not path.exists():
        raise error(problem(path, None, None, f"{what} not found"))
    if path.is_dir():
        raise error(problem(path, None, None, f"expected a {what}, got a directory"))
    if not path.is_file():
        raise error(problem(path, None, None, f"expected a regular {what}, got a device, pipe or socket "
                                              f"({path.resolve()})"))
    size = path.stat().st_size
    if size > MAX_FILE_BYTES:
        raise error(problem(path, None, None, f"the {what} is {size / 2**30:.1f} GiB; files over "
                                              f"{MAX_FILE_BYTES // 2**30} GiB are not read into memory "
                                              "(use Parquet and --engine duckdb or dask)"))


def no_duplicate_keys(path: Path, line=None):
    """``object_pairs_hook`` for json.loads: a key twice in one object is an error naming file, line and key
    (json would keep the last value silently; DuckDB refuses the file)."""
    def hook(pairs):
        seen = set()
        for k, _ in pairs:
            if k in seen:
                raise SelectionLogError(problem(path, line, k, "the key appears twice in one JSON object"))
            seen.add(k)
        return dict(pairs)
    return hook


def load_json(path: PathLike):
    """Parse a JSON file; a syntax error names file, line and column."""
    path = Path(path)
    check_regular_file(path)
    twice: list = []

    def hook(pairs):
        out = dict(pairs)
        if len(out) != len(pairs):
            seen: set = set()
            twice.extend(k for k, _ in pairs if k in seen or seen.add(k))
        return out

    try:
        with path.open(encoding="utf-8") as fh:
            text = fh.read()
        out = json.loads(text, object_pairs_hook=hook)
        if twice:   # issue 37: a key twice in one object (JSON keeps the last value silently), with its line
            at = [i for i, ln in enumerate(text.splitlines(), start=1) if json.dumps(twice[0]) in ln]
            raise SelectionLogError(problem(path, at[1] if len(at) > 1 else None, twice[0],
                                            "the key appears twice in one JSON object"))
        return out
    except UnicodeDecodeError:
        raise SelectionLogError(utf8_problem(path)) from None
    except json.JSONDecodeError as exc:
        raise SelectionLogError(problem(path, exc.lineno, f"col {exc.colno}", f"malformed JSON: {exc.msg}")) from None
    except RecursionError:
        raise SelectionLogError(problem(path, None, None, TOO_DEEP)) from None


def check_meta(meta: Meta, source, *, model_required: bool = True) -> dict:
    """Validate design metadata (model, run, condition, extra scalar keys) for one log file.

    ``model_required=False``: the records may name their own model (the API-log readers, issue 36); a ``model``
    given must still be a non-empty string."""
    meta = dict(meta or {})
    meta.setdefault("run", 1)
    meta.setdefault("condition", "base")
    problems = []
    if not model_required and "model" not in meta:
        pass
    elif "model" not in meta or not isinstance(meta["model"], str) or not meta["model"]:
        problems.append(problem(source, None, "model", f"expected a non-empty string, got {meta.get('model')!r}"))
    run = meta.get("run")
    if isinstance(run, bool) or not isinstance(run, numbers.Integral) or run < 1:
        problems.append(problem(source, None, "run", f"expected an integer >= 1, got {run!r}"))
    if not isinstance(meta.get("condition"), str):
        problems.append(problem(source, None, "condition", f"expected a string, got {meta.get('condition')!r}"))
    for key, val in meta.items():
        if not isinstance(val, (str, numbers.Number, bool)) or val is None:
            problems.append(problem(source, None, key, f"expected a scalar (string, number, boolean), got {val!r}"))
    if problems:
        raise SelectionLogError(problems)
    return meta


def add_meta(frame: pd.DataFrame, meta: dict) -> pd.DataFrame:
    """Put the design columns (model, run, condition, extras) in front of ``frame`` (a ``model`` column already in
    ``frame`` -- each record's own model -- is moved to the front)."""
    if "model" in frame.columns:
        frame.insert(0, "model", frame.pop("model"))
        meta = {k: v for k, v in meta.items() if k != "model"}
        front = {k: meta[k] for k in ("run", "condition")}
        front.update({k: v for k, v in meta.items() if k not in front})
        for i, (k, v) in enumerate(front.items(), start=1):
            frame.insert(i, k, v)
        return frame
    front = {k: meta[k] for k in ("model", "run", "condition")}
    front.update({k: v for k, v in meta.items() if k not in front})
    for i, (k, v) in enumerate(front.items()):
        frame.insert(i, k, v)
    return frame


def unassigned_rows(frame: pd.DataFrame, source, hint: str) -> dict | None:
    """Diagnostics of the rows of ``frame`` without a cluster (issue 36: kept, excluded by their status), with an
    ``ExcludedRowsWarning`` naming them; None when every row has a cluster. Raises when no row has one (nothing
    usable is left); ``hint`` says how to name the cluster."""
    import warnings

    from ...exceptions import ExcludedRowsWarning

    none = frame["cluster_id"].isna().to_numpy()
    if not none.any():
        return None
    rows = [int(r) for r in frame.loc[none, "source_row"]]
    if none.all():
        raise SelectionLogError(problem(source, rows[0], "cluster_id", f"no attempt can be assigned to a cluster "
                                                                       f"(no tools offered or resolved); {hint}"))
    by_status = {str(k): int(v) for k, v in sorted(frame.loc[none, "status"].value_counts().items())}
    warnings.warn(f"{source}: {len(rows)} of {len(frame)} attempt(s) could not be assigned to a cluster: kept as "
                  f"rows without a cluster_id and excluded by their status {by_status} (rows {rows[:10]}); {hint}",
                  ExcludedRowsWarning, stacklevel=3)
    return {"rows": len(rows), "by_status": by_status, "source_rows": rows[:50],
            "note": "attempts whose cluster cannot be decided: kept as rows with cluster_id missing, excluded from "
                    "every rate by their status"}
