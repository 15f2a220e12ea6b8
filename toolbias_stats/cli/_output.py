"""Writing command output safely: never over an input, atomically, and printing untrusted text escaped.

The rules live in :mod:`toolbias_stats._output` (shared with the API writers); this module adds what only the
command line needs: the ``--seed`` argument type and the wording of what was written.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .._output import OutputError, atomic_path, check_output, study_inputs, term_safe, write_text

__all__ = ["write_report", "check_output", "study_inputs", "emit", "seed", "OutputError", "named_inputs",
           "atomic_path", "write_text", "term_safe"]


def write_report(out, text: str, *, inputs=(), option: str = "--out") -> Path:
    """Write ``text`` to ``out`` atomically (refusing an input of the command); print what was written."""
    out = write_text(out, text, option=option, inputs=inputs)
    print(f"wrote {term_safe(out)} ({len(text.encode('utf-8')) // 1024} KiB)")
    return out


def emit(text, *, file=None) -> None:
    """Print text to the terminal with control characters from the data escaped (see :func:`term_safe`)."""
    print(term_safe(text), file=file if file is not None else sys.stdout)


def seed(text: str) -> int:
    """``--seed`` type: a non-negative integer (what numpy's generators accept); argparse names the option."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a non-negative integer, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a non-negative integer, got {text!r}")
    return value


def named_inputs(*groups) -> list:
    """``(path, label)`` pairs of the files a command reads directly (``None`` entries skipped)."""
    out = []
    for label, paths in groups:
        for p in ([paths] if isinstance(paths, (str, Path)) else list(paths or [])):
            if p:
                out.append((Path(p), label))
    return out
