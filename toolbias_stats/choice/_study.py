"""Choice-study manifests (TOML): multiple-choice / judge logs of several models read into one ChoiceLog."""

from __future__ import annotations

import glob as _glob
import numbers
from os import PathLike
from pathlib import Path

from ..exceptions import ManifestError, problem
from ..io import ChoiceLog
from ..io._manifest import CHOICE_ONLY_FORMATS, CHOICE_OPTION_KEYS, choice_manifest_problem, load_toml

__all__ = ["read_choice_study", "is_choice_manifest", "CHOICE_FORMATS", "CHOICE_ONLY_FORMATS"]

#: ``format`` values of a choice study and the reader options each takes.
CHOICE_FORMATS = {"inspect": ("scorer", "tie"), "lm_eval": ("score", "item", "options", "tie"), "choice_table": ()}
#: Reader options of the choice formats (``options``: lm_eval's field of option texts, e.g. ``"doc.choices"``).
_OPTION_KEYS = tuple(dict.fromkeys((*CHOICE_OPTION_KEYS, "options", "tie")))
_STUDY_KEYS = {"name", "description", "format", "logs", *_OPTION_KEYS}
_ENTRY_READER_KEYS = {"path", "format", *_OPTION_KEYS}


def read_choice_study(path: str | PathLike[str]) -> ChoiceLog:
    """Read a choice-study manifest: every ``[[logs]]`` entry's multiple-choice answers in one ChoiceLog.

    The manifest has the shape of a tool study without a catalog::

        name = "MC position bias"
        format = "inspect"              # or "lm_eval", "choice_table" (a ChoiceLog written with .write)

        [[logs]]
        path = "logs/mc_biased.eval"    # a file, or a folder of Inspect logs
        model = "mock-biased"           # default: the model named in the log
        condition = "shuffled"          # run, condition and any other scalar key become design columns

    Options: ``scorer`` (inspect: the score holding the ``choice`` verdict), ``score`` (lm_eval:
    ``"acc"`` or ``"acc_norm"``-style recomputation), ``item`` (lm_eval: the field naming the
    question across its rotations, e.g. ``"doc.item"``), ``options`` (lm_eval: the field holding the option
    texts shown, e.g. ``"doc.choices"`` for letter tasks whose rotations permute it), ``tie`` (lm_eval: the
    continuation of a judge's tie verdict, e.g. ``"C"``; inspect: the text of the choice that declares a tie, e.g.
    ``"Tie"``); see :func:`read_lm_eval` and :func:`read_inspect_choices`. An lm_eval
    ``path`` may be a samples file, lm-eval's ``--output_path`` folder (every
    ``samples_<task>_<date>.jsonl`` under it; the model of each comes from lm-eval's
    ``results_<date>.json`` unless the entry gives ``model``) or a glob. Relative paths are
    relative to the manifest. Problems are reported together, each named by manifest and entry.

    Parameters
    ----------
    path : path-like
        The TOML manifest.

    Returns
    -------
    ChoiceLog
        Every entry's answers; ``diagnostics["__study__"]`` names the study and its manifest.

    Raises
    ------
    ManifestError
        Malformed TOML, an unknown key or format, an option the format does not take, a missing file.
    SelectionLogError
        A problem in a log file (named by file, row and field).

    Examples
    --------
    A study of one ChoiceLog written as CSV (``format = "choice_table"``):

    >>> import json, tempfile
    >>> from pathlib import Path
    >>> import pandas as pd
    >>> from toolbias_stats.choice import ChoiceLog
    >>> folder = Path(tempfile.mkdtemp())
    >>> frame = pd.DataFrame({"item_id": ["q1", "q1"], "n_options": 2, "status": "ok", "chosen_position": [1, 1],
    ...                       "options": [json.dumps(["yes", "no"]), json.dumps(["no", "yes"])]})
    >>> _ = ChoiceLog.from_frame(frame).write(folder / "answers.csv")
    >>> toml = 'name = "demo"\\nformat = "choice_table"\\n[[logs]]\\npath = "answers.csv"\\n'
    >>> _ = (folder / "study.toml").write_text(toml)
    >>> log = read_choice_study(folder / "study.toml")
    >>> log, log.diagnostics["__study__"]["name"]
    (ChoiceLog(2 rows, status={'ok': 2}, items=1), 'demo')
    """
    path = Path(path)
    doc = load_toml(path)
    logs = doc.get("logs")
    if not isinstance(logs, list) or not logs or not all(isinstance(e, dict) for e in logs):
        raise ManifestError(problem(path, None, "logs", "expected at least one [[logs]] table"))
    problems = [problem(path, None, k, "unknown study-level key (put design keys in each [[logs]] entry)")
                for k in doc if k not in _STUDY_KEYS]
    defaults = {k: v for k, v in doc.items() if k in ("format", *_OPTION_KEYS)}
    entries = [_choice_entry(path, f"logs[{i}]", {**defaults, **entry}, entry, problems)
               for i, entry in enumerate(logs, start=1)]
    if problems:
        raise ManifestError(problems)
    log = _read_choice_entries([e for e in entries if e is not None])
    log.diagnostics["__study__"] = {"name": str(doc.get("name", path.stem)), "manifest": str(path)}
    return log


#: Keys that make a manifest a tool study (a catalog or the clusters of the tools).
_TOOL_KEYS = ("catalog", "clusters", "clusters_file", "cluster")


def is_choice_manifest(path: str | PathLike[str]) -> bool:
    """Whether a manifest describes a choice study (read by :func:`read_choice_study`) rather than a tool study.

    A choice study uses a multiple-choice-only format (``lm_eval``, ``choice_table``) or a choice reader's option
    (``score``, ``scorer``, ``item``, ...) without a catalog, or reads only Inspect logs without a catalog or
    clusters (an Inspect tool study needs one of them). ``toolbias-stats validate`` and ``shift`` use it to
    dispatch. A file that is not a readable manifest is not a choice study (the tool reader then reports why).

    Parameters
    ----------
    path : path-like
        The TOML manifest.

    Returns
    -------
    bool

    Examples
    --------
    >>> import tempfile
    >>> from pathlib import Path
    >>> m = Path(tempfile.mkdtemp()) / "study.toml"
    >>> _ = m.write_text('format = "lm_eval"\\n[[logs]]\\npath = "samples.jsonl"\\n')
    >>> is_choice_manifest(m)
    True
    >>> _ = m.write_text('format = "inspect"\\ncatalog = "tools.csv"\\n[[logs]]\\npath = "logs"\\n')
    >>> is_choice_manifest(m)
    False
    """
    from ..exceptions import ManifestError

    try:
        doc = load_toml(Path(path))
    except (ManifestError, OSError):
        return False
    logs = doc.get("logs")
    if not isinstance(logs, list) or not logs or not all(isinstance(e, dict) for e in logs):
        return False
    if choice_manifest_problem(path, doc) is not None:
        return True
    tables = [doc, *logs]
    if any(k in t for t in tables for k in _TOOL_KEYS):
        return False
    formats = {e.get("format", doc.get("format")) for e in logs}
    return formats == {"inspect"} or any(k in t for t in tables for k in _OPTION_KEYS)


def _choice_entry(path: Path, where: str, merged: dict, entry: dict, problems: list) -> tuple | None:
    """``(format, path, meta, options)`` of one ``[[logs]]`` entry (``merged``: with the study defaults); its
    problems are appended (None when the format or path is unusable)."""
    fmt = merged.get("format")
    if fmt not in CHOICE_FORMATS:
        problems.append(problem(path, where, "format", f"expected one of {list(CHOICE_FORMATS)}, got {fmt!r}"))
        return None
    for opt in _OPTION_KEYS:
        if opt in entry and opt not in CHOICE_FORMATS[fmt]:
            problems.append(problem(path, where, opt, f"format {fmt!r} takes no {opt!r} option"))
    p = merged.get("path")
    if not isinstance(p, str):
        problems.append(problem(path, where, "path", f"expected a path string, got {p!r}"))
        return None
    is_glob = fmt == "lm_eval" and any(c in p for c in "*?[")
    p = Path(p) if Path(p).is_absolute() else (path.parent / p) if is_glob else (path.parent / p).resolve()
    if is_glob:
        if not _glob.glob(str(p), recursive=True):
            problems.append(problem(path, where, "path", f"no file matches the pattern {p}"))
    elif not p.exists():
        problems.append(problem(path, where, "path", f"file not found: {p}"))
    for key in ("item", "options"):
        if key in merged and fmt == "lm_eval" and not (isinstance(merged[key], str) and merged[key]
                                                       and all(merged[key].split("."))):
            problems.append(problem(path, where, key, "expected a field name or dotted path such as "
                                                      f"'doc.{'choices' if key == 'options' else key}', got "
                                                      f"{merged[key]!r}"))
    problems += _tie_problems(merged, fmt, path, where)
    meta = {k: v for k, v in entry.items() if k not in _ENTRY_READER_KEYS}
    for k, v in meta.items():
        if not isinstance(v, (str, numbers.Number)):
            problems.append(problem(path, where, k, f"expected a scalar (string, number, boolean), got {v!r}"))
    return fmt, p, meta, {k: merged[k] for k in CHOICE_FORMATS[fmt] if k in merged}


def _tie_problems(merged: dict, fmt: str, path, where) -> list:
    """The manifest's ``tie`` (lm_eval: the tie continuation; inspect: the tie choice) must be a non-empty text."""
    if "tie" not in merged or fmt not in ("lm_eval", "inspect"):
        return []
    if isinstance(merged["tie"], str) and merged["tie"].strip():
        return []
    what = "continuation's text such as 'C'" if fmt == "lm_eval" else "choice's text such as 'Tie'"
    return [problem(path, where, "tie", f"expected the tie {what}, got {merged['tie']!r}")]


def _read_choice_entries(entries: list) -> ChoiceLog:
    """Every checked entry read by its format's reader, as one ChoiceLog."""
    from ..io.readers.inspect_ai_log import read_inspect_choices
    from ..io.readers.lm_eval import read_lm_eval, samples_files
    from . import read_choice_table

    # lm-eval doc ids restart in every task: without `item`, ids are task-qualified when the study has several tasks
    plain = [(p, meta) for fmt, p, meta, options in entries if fmt == "lm_eval" and "item" not in options]
    tasks = set()
    for p, meta in plain:
        tasks |= {meta["task"]} if "task" in meta else {_task_of(f) for f in samples_files(p)}
    parts = []
    for fmt, p, meta, options in entries:
        if fmt == "inspect":
            parts.append(read_inspect_choices(p, meta=meta, **options))
        elif fmt == "lm_eval":
            prefix = len(tasks) > 1 if "item" not in options else None
            parts.append(read_lm_eval(p, meta=meta, task_prefix=prefix, **options))
        else:
            table = read_choice_table(p)
            if meta:   # the entry's design keys (model, run, condition, extras) label every row of the table
                frame = table.data.copy()
                for k, v in meta.items():
                    frame[k] = v
                table = ChoiceLog.from_frame(frame, diagnostics=table.diagnostics, source=str(p))
            parts.append(table)
    return parts[0] if len(parts) == 1 else ChoiceLog.concat(parts)


def _task_of(f) -> str:
    from ..io.readers.lm_eval import _NAME

    m = _NAME.match(Path(f).name)
    return m.group("task") if m else Path(f).stem
