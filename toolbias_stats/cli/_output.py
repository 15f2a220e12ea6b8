"""Writing command output safely: never over an input, atomically, and printing untrusted text escaped.

The rules live in :mod:`toolbias_stats._output` (shared with the API writers); this module adds what only the
command line needs: the ``--seed`` argument type and the wording of what was written.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import os
import stat
import sys
from pathlib import Path

from .._output import OutputError, atomic_path, check_output, study_inputs, term_safe, write_text

__all__ = ["write_report", "check_output", "study_inputs", "emit", "seed", "OutputError", "named_inputs",
           "atomic_path", "write_text", "term_safe", "stdout_size", "stdout_failed"]


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


#: Errors of a write that has run out of room (what standard output meets on a full disk).
_WRITE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO})


def stdout_size() -> int | None:
    """The size of the file standard output writes to, when it is a regular file (``> out.json``), else None:
    what :func:`stdout_failed` cuts the file back to."""
    try:
        st = os.fstat(sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        return None
    return st.st_size if stat.S_ISREG(st.st_mode) else None


def stdout_failed(command: str, exc: OSError, size: int | None) -> int:
    """Standard output could not be written (``--json > file`` on a full disk): one message naming the file,
    the file cut back to its size before the command (no partial document left), exit code 2. Any other
    ``OSError`` that reached the top is said in one line too (exit code 2), never as a traceback.

    Examples
    --------
    >>> import errno, contextlib, io
    >>> err = io.StringIO()
    >>> with contextlib.redirect_stderr(err):
    ...     stdout_failed("bias", PermissionError(errno.EACCES, "Permission denied", "log.csv"), None)
    2
    >>> err.getvalue()
    "toolbias-stats bias: error: [Errno 13] Permission denied: 'log.csv'\\n"
    """
    from .._output import output_failure

    if exc.filename is not None or exc.errno not in _WRITE_ERRNOS:
        # not a write without a file name (every file writer reports its own): say it in one line
        print(term_safe(f"toolbias-stats {command}: error: {exc}"), file=sys.stderr)
        return 2
    name = None
    with contextlib.suppress(OSError, ValueError, AttributeError):
        fd = sys.stdout.fileno()
        if size is not None:
            os.ftruncate(fd, size)
            name = "(" + os.readlink(f"/proc/self/fd/{fd}") + ")"
    print(term_safe(f"toolbias-stats {command}: error: {output_failure('standard output', name, exc)}"),
          file=sys.stderr)
    return 2
