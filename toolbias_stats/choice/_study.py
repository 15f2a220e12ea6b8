"""Choice-study manifests (TOML): multiple-choice / judge logs of several models read into one ChoiceLog."""

from __future__ import annotations

import numbers
from pathlib import Path

from ..exceptions import ManifestError, problem
from ._log import ChoiceLog

__all__ = ["read_choice_study", "CHOICE_FORMATS"]

#: ``format`` values of a choice study and the reader options each takes.
CHOICE_FORMATS = {"inspect": ("scorer",), "lm_eval": ("score",), "choice_table": ()}
_STUDY_KEYS = {"name", "description", "format", "logs", "scorer", "score"}
_ENTRY_READER_KEYS = {"path", "format", "scorer", "score"}


def read_choice_study(path) -> ChoiceLog:
    """Read a choice-study manifest: every ``[[logs]]`` entry's multiple-choice answers in one ChoiceLog.

    The manifest has the shape of a tool study without a catalog::

        name = "MC position bias"
        format = "inspect"              # or "lm_eval", "choice_table" (a ChoiceLog written with .write)

        [[logs]]
        path = "logs/mc_biased.eval"    # a file, or a folder of Inspect logs
        model = "mock-biased"           # default: the model named in the log
        condition = "shuffled"          # run, condition and any other scalar key become design columns

    Options: ``scorer`` (inspect: the score holding the ``choice`` verdict), ``score`` (lm_eval:
    ``"acc"`` or ``"acc_norm"``-style recomputation, see :func:`read_lm_eval`). Relative paths are
    relative to the manifest. Problems are reported together, each named by manifest and entry.
    """
    from ..io._manifest import load_toml
    from ..io.readers.inspect_ai_log import read_inspect_choices
    from ..io.readers.lm_eval import read_lm_eval
    from ._log import read_choice_table

    path = Path(path)
    doc = load_toml(path)
    logs = doc.get("logs")
    if not isinstance(logs, list) or not logs or not all(isinstance(e, dict) for e in logs):
        raise ManifestError(problem(path, None, "logs", "expected at least one [[logs]] table"))
    problems = [problem(path, None, k, "unknown study-level key (put design keys in each [[logs]] entry)")
                for k in doc if k not in _STUDY_KEYS]
    entries = []
    for i, entry in enumerate(logs, start=1):
        where = f"logs[{i}]"
        merged = {k: v for k, v in doc.items() if k in ("format", "scorer", "score")}
        merged.update(entry)
        fmt = merged.get("format")
        if fmt not in CHOICE_FORMATS:
            problems.append(problem(path, where, "format", f"expected one of {list(CHOICE_FORMATS)}, got {fmt!r}"))
            continue
        for opt in ("scorer", "score"):
            if opt in entry and opt not in CHOICE_FORMATS[fmt]:
                problems.append(problem(path, where, opt, f"format {fmt!r} takes no {opt!r} option"))
        p = merged.get("path")
        if not isinstance(p, str):
            problems.append(problem(path, where, "path", f"expected a path string, got {p!r}"))
            continue
        p = Path(p) if Path(p).is_absolute() else (path.parent / p).resolve()
        if not p.exists():
            problems.append(problem(path, where, "path", f"file not found: {p}"))
        meta = {k: v for k, v in entry.items() if k not in _ENTRY_READER_KEYS}
        for k, v in meta.items():
            if not isinstance(v, (str, numbers.Number)):
                problems.append(problem(path, where, k, f"expected a scalar (string, number, boolean), got {v!r}"))
        entries.append((fmt, p, meta, {k: merged[k] for k in CHOICE_FORMATS[fmt] if k in merged}))
    if problems:
        raise ManifestError(problems)
    parts = []
    for fmt, p, meta, options in entries:
        if fmt == "inspect":
            parts.append(read_inspect_choices(p, meta=meta, **options))
        elif fmt == "lm_eval":
            parts.append(read_lm_eval(p, meta=meta, **options))
        else:
            parts.append(read_choice_table(p))
    log = parts[0] if len(parts) == 1 else ChoiceLog.concat(parts)
    log.diagnostics["__study__"] = {"name": str(doc.get("name", path.stem)), "manifest": str(path)}
    return log
