"""What every sub-command module shares: the version string, whether to draw progress bars, stage lines, errors.

Imports nothing of the other ``cli`` modules, so that they import it and never ``_commands`` (no import cycle).
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import sys

__all__ = ["version", "progress_wanted", "Stages", "fail", "stdout_size", "stdout_failed"]


def version() -> str:
    """``"toolbias_stats <version>"``, the ``version`` field of every JSON output and of ``--version``."""
    from .. import __version__

    return f"toolbias_stats {__version__}"


def progress_wanted(args) -> bool:
    """Progress bars only on an interactive terminal, never with --json or in CI."""
    return sys.stderr.isatty() and not getattr(args, "json", False) and not os.environ.get("CI")


def fail(command: str, exc) -> int:
    """Print ``toolbias-stats COMMAND: error: ...`` (control characters escaped) on stderr; returns exit code 2."""
    from .._output import term_safe

    print(term_safe(f"toolbias-stats {command}: error: {exc}"), file=sys.stderr)
    return 2


class Stages:
    """One plain line per stage on stderr when it is not a terminal (a redirected or piped job shows it is alive;
    a terminal has the progress bars instead); silent with --json."""

    def __init__(self, args):
        import time

        self._clock = time.perf_counter
        self._t0 = self._clock()
        self._on = not sys.stderr.isatty() and not getattr(args, "json", False)
        self._prefix = f"toolbias-stats {args.command}"

    def __call__(self, text: str) -> None:
        if self._on:
            from .._output import term_safe

            line = f"{self._prefix}: [{self._clock() - self._t0:6.1f} s] {text}"
            print(term_safe(line), file=sys.stderr, flush=True)


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
    from .._output import output_failure, term_safe

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
