"""What every sub-command module shares: the version string, whether to draw progress bars, stage lines, errors.

Imports nothing of the other ``cli`` modules, so that they import it and never ``_commands`` (no import cycle).
"""

from __future__ import annotations

import os
import sys

__all__ = ["version", "progress_wanted", "Stages", "fail"]


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
