"""Hand-made tables and spreadsheets: the clean-up shared by every engine (issue 20).

Teams that keep their selection logs in a spreadsheet write tool names as they see them (``" Weather_API "``,
``"weather_api"``, a decomposed accent), lists as ``a | b`` or ``["a", "b"]``, leave out ``status`` or
``cluster_id``, and add notes columns. :func:`prepare_combos` turns such cells into the schema's values. It works
on the *distinct combinations* of the cells that matter (cluster, list shown, rotation, pick, status, position),
so that the pandas reader and the DuckDB engine run the very same code (the engine sends its distinct
combinations, which are few, to Python) and give the same answers and the same messages.

Rules
-----
- Names (the pick and the entries of ``ordering``) match a tool of the cluster after Unicode NFC normalisation,
  trimming and case folding (also the catalog's aliases, as the API readers accept); the raw text is kept in
  ``raw_choice``. Names matched only after normalisation are counted.
- ``ordering``: ``a|b|c`` (spaces around ``|`` trimmed), ``a; b; c`` or ``a, b, c`` (issue 36: lists typed in a
  spreadsheet; ``|`` wins, then ``;``), or a JSON / Python list of names.
- No ``status`` column: a pick naming a tool of the cluster that was shown -> ``ok``; an empty pick ->
  ``no_call``; any other name -> ``unknown_tool``.
- No ``cluster_id`` column: the one cluster that holds every tool shown (or the pick, when no list is given).
- A ``chosen_position`` that contradicts the list shown and the pick: an error naming the row, or (``positions =
  "recompute"``) the position of the pick in the list, counted.
"""

from __future__ import annotations

import ast
import contextlib
import json
import numbers
import unicodedata
import weakref
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import pandas as pd

from ..._schema import COUNT_COLUMN, LOG_COLUMNS

if TYPE_CHECKING:
    from .._catalog import ToolCatalog

__all__ = ["normalise_name", "prepare_combos", "select_columns", "POSITIONS", "DUPLICATES", "ATTEMPT_ID",
           "COMBO_KEYS", "attempt_id_message"]

#: Accepted values of the manifest key ``positions`` (a recorded position that contradicts the list shown).
POSITIONS = ("error", "recompute")
#: Accepted values of the manifest key ``duplicates`` (the same query shown the same list again).
DUPLICATES = ("count", "error")
#: Optional column naming each attempt (e.g. an API call id): two rows with the same id are an error.
ATTEMPT_ID = "attempt_id"
#: Columns whose distinct combinations the clean-up works on (those present in the file).
COMBO_KEYS = ("cluster_id", "ordering", "rotation", "chosen_tool", "status", "chosen_position")
#: Names the engines use for their own columns: a design column may not have one.
RESERVED = frozenset({"k", "n", "rot", "api_index", "raw_choice_in", "ordering_in", "n_candidates_in",
                      "chosen_tool_in", "chosen_position_in", "source_row_in", "count_in", "first", "r"})
_ZERO_WIDTH = dict.fromkeys(map(ord, "\u200b\u200c\u200d\u2060\ufeff"), None)


def normalise_name(text) -> str:
    """The key two names are compared on: NFC, zero-width characters removed, trimmed, case-folded.

    Examples
    --------
    >>> normalise_name("  Caf\\u0065\\u0301_API ") == normalise_name("café_api")
    True
    """
    return unicodedata.normalize("NFC", str(text)).translate(_ZERO_WIDTH).strip().casefold()


def attempt_id_message(values: dict, first_row) -> str:
    """Message for a second row with the same attempt id (every engine)."""
    return f"duplicate attempt id {values} (first seen at row {first_row}); each attempt id names one attempt"


def select_columns(columns, *, design=None, meta_keys=(), own_format=False, source=None):
    """Which extra columns are design columns: ``(kept, ignored, problems)``.

    ``design`` (the manifest key) lists them; without it a file written by :meth:`SelectionLog.write`
    (``own_format``: it has ``source_file`` and ``source_row``) keeps all of its extra columns and any other
    file none. Keys of the manifest entry (``meta``) are design columns in every case.
    """
    from ...exceptions import problem

    known = set(LOG_COLUMNS) | {COUNT_COLUMN, ATTEMPT_ID}
    extras = [c for c in columns if c not in known]
    problems = []
    if design is not None:
        if isinstance(design, str) or not isinstance(design, (list, tuple)) or not all(isinstance(d, str)
                                                                                       for d in design):
            return [], [], [problem(source, None, "design", f"expected a list of column names, got {design!r}")]
        problems = [problem(source, None, "design", f"design column {d!r} is not a column of the file; "
                                                   f"the file has {[c for c in columns if c not in meta_keys]}")
                    for d in design if d not in columns and d not in meta_keys]
        keep = set(design) | set(meta_keys)
    else:
        keep = set(extras) if own_format else set(meta_keys)
    kept = [c for c in extras if c in keep]
    problems += [problem(source, None, c, f"the column name {c!r} is reserved (used inside the engines); map it to "
                                          "another name with `columns`")
                 for c in kept if c in RESERVED or str(c).startswith("__")]
    ignored = [c for c in extras if c not in keep]
    return kept, ignored, problems


# ------------------------------------------------------------------------------------------------------------
class _Names:
    """Name lookups of a catalog: per cluster ``{normalised name: tool_id}`` and, across clusters, the clusters
    of each normalised name."""

    def __init__(self, catalog):
        self.by_cluster, self.clusters_of = {}, {}
        for c in catalog.clusters:
            tools = catalog.tools(c)
            names = {normalise_name(t): t for t in tools}
            for alias, tool in catalog.aliases(c).items():
                names.setdefault(normalise_name(alias), tool)
            self.by_cluster[c] = (set(tools), names)
            for key in names:
                self.clusters_of.setdefault(key, set()).add(c)

    def match(self, cluster, raw):
        """``(tool_id or None, exact)`` for a name in ``cluster``."""
        tools, names = self.by_cluster[cluster]
        if raw in tools:
            return raw, True
        tool = names.get(normalise_name(raw))
        return tool, False


#: The name lookups of each catalog (a catalog is immutable): a study of many files builds them once, not per file.
_NAMES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _names_of(catalog) -> _Names:
    """The (cached) :class:`_Names` of ``catalog``."""
    try:
        return _NAMES[catalog]
    except (KeyError, TypeError):   # TypeError: an object that cannot be a weak key (built each time)
        names = _Names(catalog)
    with contextlib.suppress(TypeError):
        _NAMES[catalog] = names
    return names


def _missing(v) -> bool:
    return v is None or v is pd.NA or (isinstance(v, float) and np.isnan(v)) or (
        isinstance(v, str) and not v.strip())


def _id_str(v) -> str:
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    if isinstance(v, np.generic):
        v = v.item()
    return str(v)


def parse_ordering(cell):
    """``(list of names, None)`` or ``(None, message)`` for an ``ordering`` cell."""
    if isinstance(cell, (list, tuple, np.ndarray)):
        items = list(cell)
    else:
        text = str(cell).strip()
        if text.startswith(("[", "{", "(")):
            items = None
            try:
                items = json.loads(text)
            except ValueError:
                try:
                    items = ast.literal_eval(text)   # a Python list literal: literals only, never code
                except (ValueError, SyntaxError, MemoryError, RecursionError, TypeError):
                    return None, ("expected tool names separated by '|' or a list of names (JSON or Python), "
                                  f"got {_short(text)!r}")
            if not isinstance(items, (list, tuple)):
                return None, f"expected a list of tool names, got {_short(text)!r}"
        elif "|" not in text and (";" in text or "," in text):
            # issue 36: a list typed in a spreadsheet as "a, b, c" or "a; b; c" (semicolons first: a name
            # holding a comma is kept whole when the list is written with semicolons)
            items = text.split(";" if ";" in text else ",")
        else:
            items = text.split("|")
    if not all(isinstance(x, str) for x in items):
        return None, f"expected a list of tool names (strings), got {_short(str(cell))!r}"
    items = [x.strip() for x in items]
    if not items or any(not x for x in items):
        return None, f"an empty tool name in the list shown: {_short(str(cell))!r}"
    return items, None


def _short(text: str, n: int = 120) -> str:
    return text if len(text) <= n else text[:n] + "..."


def _position(v):
    """An integral position as int, else None (other values are checked by the validator)."""
    if v is None or v is pd.NA or isinstance(v, bool):
        return None
    if isinstance(v, str):
        try:
            v = float(v.strip())
        except ValueError:
            return None
    if isinstance(v, numbers.Real) and np.isfinite(v) and float(v).is_integer():
        return int(v)
    return None


_NEW_COLUMNS = ("cluster_new", "ordering_new", "tool_new", "status_new", "raw_new", "position_new",
                "normalised", "list_normalised", "recomputed", "problem_column", "problem")


def prepare_combos(combos: pd.DataFrame, catalog: ToolCatalog, *, positions: str = "error",
                   own_format: bool = False) -> pd.DataFrame:
    """Clean the distinct cell combinations of a table file (see the module notes), each distinct case once.

    Parameters
    ----------
    combos : pandas.DataFrame
        One row per distinct combination of the columns of :data:`COMBO_KEYS` present in the file, plus ``n``
        (the number of rows with it).
    catalog : ToolCatalog
    positions : {"error", "recompute"}
    own_format : bool
        The file was written by :meth:`SelectionLog.write`: its positions were validated when it was
        read first (BiasBusters logs record positions that differ from the rotation formula, reported by
        their reader), so they are not checked against the list again.

    Returns
    -------
    pandas.DataFrame
        Aligned with ``combos``: ``cluster_new`` (the inferred cluster when the file has no ``cluster_id``),
        ``ordering_new`` (the list shown as tool ids joined by ``|``), ``tool_new`` (the tool id the pick names),
        ``status_new`` (when the file has no ``status``), ``raw_new`` (the raw pick when it was not a tool id
        as written), ``position_new`` (a recomputed position), ``normalised`` (the pick matched only after
        normalisation), ``list_normalised``, ``recomputed``, and ``problem_column`` / ``problem`` (the message).

    Examples
    --------
    >>> from toolbias_stats import ToolCatalog
    >>> catalog = ToolCatalog.from_records([{"cluster_id": "1", "tool_id": t} for t in ("a_api", "b_api")])
    >>> combos = pd.DataFrame({"ordering": ["A_API | b_api"], "chosen_tool": [" b_api"], "n": [3]})
    >>> prepare_combos(combos, catalog)[["cluster_new", "tool_new", "status_new", "normalised"]]
      cluster_new tool_new status_new  normalised
    0           1    b_api         ok        True
    """
    names = _names_of(catalog)
    cols = set(combos.columns)
    first, which = _distinct_cases(combos)
    results = [_prepare_one(rec, cols, names, catalog, positions=positions, own_format=own_format)
               for rec in combos.iloc[first].to_dict(orient="records")]
    frame = pd.DataFrame({k: [res[k] for res in results] for k in _NEW_COLUMNS})
    frame["position_new"] = pd.array(frame["position_new"], dtype="Int64")
    for c in ("cluster_new", "ordering_new", "tool_new", "status_new", "raw_new", "problem_column", "problem"):
        frame[c] = frame[c].astype("string")
    return frame.take(which).set_axis(combos.index)


def _distinct_cases(combos: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """``(first, which)``: the combinations that differ in what :func:`_prepare_one` reads (``first``, positions in
    ``combos``) and, for every combination, the index in ``first`` of the one it equals.

    ``rotation`` is read only to check a recorded ``chosen_position``: without that column, combinations that
    differ only in their rotation are cleaned once (issue 37: 2,000 clusters x 5 rotations, 60,000 combinations).
    Values are compared with their types unless a column holds only text and missing values (``1``, ``1.0`` and
    ``True`` stay apart); an unhashable value (a list) gives every combination its own case.
    """
    read = [c for c in COMBO_KEYS if c in combos.columns and (c != "rotation" or "chosen_position" in combos.columns)]
    columns = []
    for c in read:
        values = combos[c].tolist()
        plain_text = set(map(type, values)) <= {str, type(None), type(pd.NA)}
        columns.append(values if plain_text else list(zip(map(type, values), values)))
    seen: dict = {}
    try:
        which = np.fromiter((seen.setdefault(key, len(seen)) for key in zip(*columns)), dtype=np.int64,
                            count=len(combos)) if columns else np.zeros(len(combos), dtype=np.int64)
    except TypeError:
        which = np.arange(len(combos))
    return np.unique(which, return_index=True)[1], which


def _prepare_one(rec: dict, cols: set, names: _Names, catalog, *, positions: str, own_format: bool) -> dict:
    """One combination: parse the list shown -> find the cluster -> match the names -> derive the status ->
    check the recorded position. Returns the values of :data:`_NEW_COLUMNS`."""
    res: dict[str, Any] = dict.fromkeys(_NEW_COLUMNS)
    res.update(normalised=False, list_normalised=False, recomputed=False)
    shown = None
    if "ordering" in cols and not _missing(rec.get("ordering")):
        shown, msg = parse_ordering(rec["ordering"])
        if msg:
            res.update(problem_column="ordering", problem=msg)
    cluster = _cluster_of(rec, cols, names, shown, res)
    _match_shown(shown, cluster, names, res)
    pick = rec.get("chosen_tool")
    tool = _match_pick(pick, cluster, names, res)
    offered = shown is None or (res["ordering_new"] is not None and tool in res["ordering_new"].split("|"))
    if "status" not in cols:
        res["status_new"] = _derived_status(pick, tool, offered, cluster)
    status = res["status_new"] if "status" not in cols else rec.get("status")
    if status == "no_call" and not _missing(pick) and res["problem"] is None:
        res.update(problem_column="chosen_tool",
                   problem=f"status is 'no_call' but a tool is given ({_id_str(pick)!r}); a row without a call "
                           "has an empty chosen_tool (use 'unknown_tool' for a name that is no tool)")
    pos = _position(rec.get("chosen_position")) if "chosen_position" in cols else None
    if status == "ok" and tool is not None and pos is not None and res["problem"] is None and not own_format:
        _check_position(rec, cols, catalog, cluster, tool, pos, res, positions=positions)
    return res


def _cluster_of(rec: dict, cols: set, names: _Names, shown, res: dict):
    """The cluster: the file's, or the one that holds every tool shown (the pick when no list is given)."""
    if "cluster_id" in cols:
        cluster = None if _missing(rec.get("cluster_id")) else _id_str(rec["cluster_id"])
        return cluster if cluster in names.by_cluster else None   # the validator names a missing or unknown one
    if res["problem"] is not None:
        return None
    pick = rec.get("chosen_tool")
    basis = shown if shown is not None else ([] if _missing(pick) else [str(pick)])
    cands = None
    for name in basis:
        cl = names.clusters_of.get(normalise_name(name), set())
        cands = set(cl) if cands is None else cands & cl
    cluster = next(iter(cands)) if cands is not None and len(cands) == 1 else None
    if cluster is None:
        what = ("no list shown and no tool chosen" if not basis else
                f"the tools shown ({_short('|'.join(basis))!r}) belong to no single cluster of the catalog"
                if cands is not None and not cands else
                f"the tools shown ({_short('|'.join(basis))!r}) are in several clusters "
                f"({sorted(cast(set, cands))})")      # basis is not empty: cands is a set
        res.update(problem_column="cluster_id",
                   problem=f"no cluster_id column and the cluster cannot be inferred: {what}")
    else:
        res["cluster_new"] = cluster
    return cluster


def _match_shown(shown, cluster, names: _Names, res: dict) -> None:
    """``ordering_new``: the list shown as tool ids of the cluster (names kept when no cluster is known)."""
    if shown is not None and cluster is not None:
        ids = []
        for name in shown:
            tool, exact = names.match(cluster, name)
            ids.append(tool if tool is not None else name)
            res["list_normalised"] |= tool is not None and not exact
        res["ordering_new"] = "|".join(ids)
    elif shown is not None:
        res["ordering_new"] = "|".join(shown)


def _match_pick(pick, cluster, names: _Names, res: dict):
    """The tool id the pick names (or None); sets ``tool_new``, ``normalised`` and ``raw_new``."""
    tool = None
    if not _missing(pick) and cluster is not None:
        tool, exact = names.match(cluster, _id_str(pick))
        if tool is not None:
            res["tool_new"] = tool
            res["normalised"] = not exact
    if not _missing(pick) and (tool is None or tool != _id_str(pick)):
        res["raw_new"] = _id_str(pick)
    return tool


def _derived_status(pick, tool, offered: bool, cluster):
    """The status of a file without a ``status`` column (None: no cluster, reported elsewhere)."""
    if _missing(pick):
        return "no_call"
    if tool is not None and offered:
        return "ok"
    if cluster is not None:
        return "unknown_tool"
    return None


def _check_position(rec: dict, cols: set, catalog, cluster, tool, pos: int, res: dict, *, positions: str) -> None:
    """A recorded position that contradicts the list shown and the pick: recomputed, or a problem."""
    listed = None
    if res["ordering_new"] is not None:
        listed = res["ordering_new"].split("|")
    elif "rotation" in cols and _position(rec.get("rotation")) is not None:
        r = cast(int, _position(rec["rotation"]))
        if 1 <= r <= catalog.n_tools(cluster):
            listed = catalog.rotation(cluster, r)
    if listed is not None and tool in listed and listed.index(tool) + 1 != pos:
        at = listed.index(tool) + 1
        if positions == "recompute":
            res.update(position_new=at, recomputed=True)
        else:
            res.update(problem_column="chosen_position",
                       problem=(f"position {pos} contradicts the list shown: {tool!r} is at position {at} "
                                "(fix the cell, or set positions = \"recompute\" in the manifest entry)"))


def confusable_tools(catalog) -> list:
    """``[(cluster, [tool ids])]``: tools of one cluster whose ids are equal after normalisation (NFC / NFD forms,
    case, spaces, zero-width characters): two visually identical tools (issue 21)."""
    out = []
    for c in catalog.clusters:
        groups: dict = {}
        for t in catalog.tools(c):
            groups.setdefault(normalise_name(t), []).append(t)
        out += [(c, ts) for ts in groups.values() if len(ts) > 1]
    return out


def notes_of(combos: pd.DataFrame, result: pd.DataFrame, *, status_derived: bool, cluster_inferred: bool,
             ignored=(), repeats: int = 0, catalog=None) -> dict:
    """The ``{note: count}`` shown by ``toolbias-stats validate`` for one file."""
    n = combos["n"].to_numpy(dtype=np.int64)
    notes = {}
    for c, tools in confusable_tools(catalog) if catalog is not None else []:
        notes[f"WARNING: catalog cluster {c!r} has tools that look identical ({', '.join(ascii(t) for t in tools)}: "
              "they differ only in Unicode form, case, spaces or invisible characters); picks typed by hand go to the "
              "first"] = len(tools)
    if status_derived:
        by = pd.Series(n).groupby(result["status_new"].fillna("(none)").to_numpy()).sum()
        detail = ", ".join(f"{k} {int(v)}" for k, v in by.items())
        notes[f"no status column: status derived from the pick ({detail})"] = int(n.sum())
    if cluster_inferred:
        notes["no cluster_id column: cluster inferred from the tools shown"] = int(n.sum())
    for flag, text in (("normalised", "picks matched only after normalising the name (NFC, trim, case)"),
                       ("list_normalised", "lists shown matched only after normalising the names"),
                       ("recomputed", "chosen_position contradicted the list shown; recomputed from the list")):
        k = int(n[result[flag].to_numpy(dtype=bool)].sum())
        if k:
            notes[text] = k
    if ignored:
        notes[f"columns ignored (not mapped, not in `design`): {', '.join(map(str, ignored))}"] = len(ignored)
    if repeats:
        notes["repeated attempts (the same query shown the same list again), counted as separate attempts"] = repeats
    return notes


def check_options(source, *, design=None, positions="error", duplicates="count"):
    """Problems with the table options of a manifest entry (every engine)."""
    from ...exceptions import SelectionLogError, problem

    problems = []
    if positions not in POSITIONS:
        problems.append(problem(source, None, "positions", f"expected one of {list(POSITIONS)}, got {positions!r}"))
    if duplicates not in DUPLICATES:
        problems.append(problem(source, None, "duplicates",
                                f"expected one of {list(DUPLICATES)}, got {duplicates!r}"))
    if design is not None and (isinstance(design, str) or not isinstance(design, (list, tuple))
                               or not all(isinstance(d, str) for d in design)):
        problems.append(problem(source, None, "design", f"expected a list of column names, got {design!r}"))
    if problems:
        raise SelectionLogError(problems)


def combo_problems(source, result: pd.DataFrame, rows_of) -> list:
    """``file:row:column: message`` for every row of every combination with a problem, rows ascending.

    ``rows_of(i)``: the file rows of combination ``i`` (an array)."""
    from ...exceptions import problem

    found = []
    for i in np.flatnonzero(result["problem"].notna().to_numpy()):
        col, msg = result["problem_column"].iat[i], result["problem"].iat[i]
        found += [(int(r), col, msg) for r in rows_of(i)]
    found.sort(key=lambda t: t[0])
    return [problem(source, r, c, m) for r, c, m in found]
