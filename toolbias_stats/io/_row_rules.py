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

import unicodedata
from collections.abc import Iterable
from typing import Any

import numpy as np
import pandas as pd

__all__ = ["MAX_COUNT", "MAX_INT", "CELL_OUTCOME", "MISSING", "REQUIRED_COLUMN", "NOT_INTEGER", "RUN_BELOW_ONE",
           "ROTATION_RANGE", "OK_WITHOUT_TOOL", "POSITION_RANGE", "RANK_RANGE", "COUNT_MESSAGE", "one_of_message",
           "unknown_cluster_message", "ordering_message", "not_in_cluster_message", "duplicate_message",
           "duplicate_cell_message", "count_problems", "plain", "name_key", "lookalike_pairs", "lookalike_message",
           "NUL_IN_CELL", "MAX_CELL_BYTES", "BIG_CELL"]

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
    if isinstance(tool, str) and not (tool.isascii() and tool.isprintable()):   # issue 37: show what it is
        return (f"tool {_spelling(tool)} is not in cluster {cluster!r} (status 'ok' needs a tool of the row's "
                "cluster)")
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


# -- names that print alike (issue 37) ------------------------------------------------------------------------
#: Letters of other scripts that print like a Latin letter (Cyrillic, Greek): the common homoglyphs of
#: identifiers. NFKC already folds full-width and compatibility forms; this table adds what it leaves.
_HOMOGLYPHS = str.maketrans({
    "\u0430": "a", "\u0435": "e", "\u043e": "o", "\u0440": "p", "\u0441": "c", "\u0443": "y", "\u0445": "x",
    "\u0455": "s", "\u0456": "i", "\u0458": "j", "\u0501": "d", "\u04bb": "h", "\u04cf": "l", "\u051b": "q",
    "\u051d": "w", "\u0410": "A", "\u0412": "B", "\u0415": "E", "\u041a": "K", "\u041c": "M", "\u041d": "H",
    "\u041e": "O", "\u0420": "P", "\u0421": "C", "\u0422": "T", "\u0425": "X", "\u0405": "S", "\u0406": "I",
    "\u0408": "J", "\u03bf": "o", "\u03bd": "v", "\u03c1": "p", "\u0391": "A", "\u0392": "B", "\u0395": "E",
    "\u0396": "Z", "\u0397": "H", "\u0399": "I", "\u039a": "K", "\u039c": "M", "\u039d": "N", "\u039f": "O",
    "\u03a1": "P", "\u03a4": "T", "\u03a5": "Y", "\u03a7": "X"})

#: A NUL character inside a cell (every reader, every engine).
NUL_IN_CELL = "contains a NUL character (\\x00); remove it (a NUL ends text in C libraries and terminals)"
#: Largest cell any command reads (one limit for every command and engine; the CSV parser's own limit).
MAX_CELL_BYTES = 131072
#: A cell over :data:`MAX_CELL_BYTES`.
BIG_CELL = "cell of {value} bytes is larger than the limit of 131072 bytes (128 KiB) for one cell"


def name_key(text: Any) -> str:
    """The key two names are compared on for looking the same: NFKC, invisible (format) characters removed,
    Cyrillic and Greek homoglyphs of Latin letters replaced (case is kept: a case difference is visible).

    Examples
    --------
    >>> name_key("ge\u043e_a") == name_key("geo_a"), name_key("wx_\uff41") == name_key("wx_a")
    (True, True)
    >>> name_key("m1\u200b") == name_key("m1"), name_key("Geo_a") == name_key("geo_a")
    (True, False)
    """
    s = unicodedata.normalize("NFKC", str(text))
    s = "".join(c for c in s if unicodedata.category(c) != "Cf")
    return s.translate(_HOMOGLYPHS)


def lookalike_pairs(values: Iterable[Any]) -> list[tuple[str, str]]:
    """``[(first, other)]``: distinct names (in order of appearance) that share a :func:`name_key`.

    Examples
    --------
    >>> lookalike_pairs(["geo_a", "t1", "ge\u043e_a", "geo_a"])
    [('geo_a', 'geо_a')]
    """
    seen: dict[str, str] = {}
    out = []
    for v in dict.fromkeys(str(x) for x in values if x is not None and x is not pd.NA):
        first = seen.setdefault(name_key(v), v)
        if first != v:
            out.append((first, v))
    return out


def _spelling(text: str) -> str:
    odd = [c for c in text if not (c.isascii() and c.isprintable())]
    points = ", ".join(f"U+{ord(c):04X} {unicodedata.name(c, 'unnamed')}" for c in dict.fromkeys(odd))
    return f"{text!a} ({points or 'ASCII only'})"


def lookalike_message(what: str, first: str, other: str, where: str) -> str:
    """Message for a name that prints like another one (both spellings with their code points).

    Examples
    --------
    >>> print(lookalike_message("tool id", "geo_a", "ge\u043e_a", "row 1"))
    tool id 'ge\\u043e_a' (U+043E CYRILLIC SMALL LETTER O) looks the same as 'geo_a' (ASCII only) at row 1 but is \
another name: names that print alike are refused (rename one, or write both the same way)
    """
    return (f"{what} {_spelling(other)} looks the same as {_spelling(first)} at {where} but is another name: "
            "names that print alike are refused (rename one, or write both the same way)")
