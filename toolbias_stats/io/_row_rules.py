"""Row rules of the logs and their messages, in one leaf module (issue 24).

Every engine checks the same rules and must word a failure the same way (``file:row:column: message``): the pandas
validation of :class:`~toolbias_stats.SelectionLog` and :class:`~toolbias_stats.choice.ChoiceLog`, the DuckDB
engine (which checks in SQL) and the Dask engine. The limits, the message templates and the few message builders
live here; this module imports nothing of the package but the schema, so any of them can use it.

A template holds ``{value}`` for the offending cell (``"expected an integer, got {value!r}"``); fill it with
``template.format(value=...)``.

Examples
--------
>>> NOT_INTEGER.format(value="2.5")
"expected an integer, got '2.5'"
>>> one_of_message(["ok", "no_call"]).format(value="maybe")
"expected one of ['ok', 'no_call'], got 'maybe'"
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
import pandas as pd

__all__ = ["MAX_COUNT", "MAX_INT", "CELL_OUTCOME", "MISSING", "REQUIRED_COLUMN", "NOT_INTEGER", "RUN_BELOW_ONE",
           "ROTATION_RANGE", "OK_WITHOUT_TOOL", "POSITION_RANGE", "RANK_RANGE", "COUNT_MESSAGE", "one_of_message",
           "unknown_cluster_message", "ordering_message", "not_in_cluster_message", "duplicate_message",
           "duplicate_cell_message", "count_problems", "plain"]

#: Largest accepted ``count`` of one row (exact in float64, far below int64 overflow when summed).
MAX_COUNT = 10**15
#: Largest integer accepted in an integer column (run, rotation, positions): exact in float64.
MAX_INT = 2**53
#: Columns that, with the attempt's identity, make one cell of an aggregated log (its outcome).
CELL_OUTCOME = ("status", "chosen_tool", "chosen_position", "raw_choice")

#: A required cell is empty.
MISSING = "missing value"
#: A required column is absent (reported once, for the file).
REQUIRED_COLUMN = "required column is missing"
#: A cell of an integer column (run, rotation, n_candidates, chosen_position, chosen_rank) that is no integer.
NOT_INTEGER = "expected an integer, got {value!r}"
#: ``run`` below 1.
RUN_BELOW_ONE = "expected an integer >= 1, got {value!r}"
#: A ``rotation`` outside 1..K of its cluster.
ROTATION_RANGE = "rotation {value!r} outside 1..K for this cluster"
#: An ``ok`` row without a chosen tool.
OK_WITHOUT_TOOL = "status is 'ok' but no tool is given"
#: A ``chosen_position`` outside the list shown.
POSITION_RANGE = "position {value!r} outside 1..K (K = number of tools shown)"
#: A ``chosen_rank`` outside the cluster's tools shown.
RANK_RANGE = "rank {value!r} outside 1..K (K = the cluster's tools shown)"
#: A bad ``count`` value (every engine).
COUNT_MESSAGE = ("expected a whole number of attempts between 0 and 10^15 (the row stands for `count` identical "
                 "attempts), got {value!r}")


def one_of_message(allowed: Iterable[str]) -> str:
    """Template for a value outside ``allowed`` (statuses of a SelectionLog or of a ChoiceLog)."""
    return f"expected one of {list(allowed)}, got {{value!r}}"


def unknown_cluster_message(source: str, known: Iterable[str]) -> str:
    """Template for a ``cluster_id`` the catalog (``source``, with clusters ``known``) does not have."""
    return f"unknown cluster id {{value!r}} (catalog {source} has {sorted(known)})"


def ordering_message(cluster: str, ordering: str, seq: list) -> str | None:
    """The problem of an ordering (the whole list shown, ``|``-joined) for a row of ``cluster``, else None: every
    name once, at least one tool of the cluster (``seq``: the cluster's tools as shown)."""
    shown = str(ordering).split("|")
    if len(set(shown)) != len(shown):
        return f"ordering repeats a tool: {ordering!r}"
    if not seq:
        return f"ordering names no tool of cluster {cluster!r}: {ordering!r}"
    return None


def not_in_cluster_message(tool: Any, cluster: Any) -> str:
    """Message for a valid-looking choice of a tool that the row's cluster does not have."""
    return f"tool {tool!r} is not in cluster {cluster!r} (status 'ok' needs a tool of the row's cluster)"


def duplicate_message(values: dict, first_row: Any, first_file: Any = None) -> str:
    """Message for a second attempt with the same identity (plain values, no numpy reprs; both rows named)."""
    where = f"row {first_row}" if first_file is None else f"{first_file}:{first_row}"
    return f"duplicate attempt {values} (first seen at {where})"


def duplicate_cell_message(values: dict, first_row: Any, first_file: Any = None) -> str:
    """Message for a second row of an aggregated log with the same cell (attempt identity and outcome)."""
    where = f"row {first_row}" if first_file is None else f"{first_file}:{first_row}"
    return (f"duplicate cell {values} (first seen at {where}); an aggregated log lists each (query, list, outcome) "
            "once: add the two counts")


def count_problems(col: pd.Series) -> tuple[np.ndarray, np.ndarray, pd.Series]:
    """Check a ``count`` column: ``(missing, bad, numbers)`` (masks and the values as float).

    Missing: null / NaN cells. Bad: present but not a whole number in ``0..MAX_COUNT`` (booleans,
    text that is not a number, fractions, negatives, infinities).

    Examples
    --------
    >>> missing, bad, _ = count_problems(pd.Series([3, None, -1, 2.5, True], dtype=object))
    >>> missing.tolist(), bad.tolist()
    ([False, True, False, False, False], [False, False, True, True, True])
    """
    missing = col.isna().to_numpy()
    is_bool = col.map(lambda v: isinstance(v, (bool, np.bool_))).to_numpy(dtype=bool)
    as_num = col.astype(object).where(~is_bool, np.nan) if is_bool.any() else col
    num = pd.to_numeric(as_num, errors="coerce").astype("float64")
    vals = num.to_numpy()
    with np.errstate(invalid="ignore"):
        ok = np.isfinite(vals) & (vals == np.round(vals)) & (vals >= 0) & (vals <= MAX_COUNT)
    bad = ~missing & ~ok
    return missing, bad, num


def plain(v: Any) -> Any:
    """A cell as a plain Python value for messages: numpy scalars unwrapped, missing values as None."""
    if v is None or v is pd.NA or (isinstance(v, float) and np.isnan(v)):
        return None
    return v.item() if isinstance(v, np.generic) else v
