"""Entry point of the ``toolbias-stats`` console script (also ``python -m toolbias_stats.cli``)."""

from __future__ import annotations

import sys

from ._commands import main

if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
