"""Readers and validation of a TOOL-SHADOW harness audit: manifest JSON, call log, relevance labels, turns.

The paper's SKILL.md format (a manifest JSON array of ``{name, description}`` in presentation order, a call-log
CSV ``turn_id, tool_name, called`` and a relevance CSV ``turn_id, tool_name, relevant``) plus what real audits
need: the turn's text (a ``task`` column or a turns CSV) for domain S, and a per-turn order (a ``position``
column, or a ``manifest`` column naming one of several manifests) for audits whose order varies by turn.

Every row is checked and all problems are collected; one :class:`~toolbias_stats.SelectionLogError` lists
them as ``file:row:column: message``, with CSV rows counted as 1-based data records after the header (line
``row + 1`` of the file) and manifest entries as 1-based array items. Nothing is written anywhere.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..exceptions import SelectionLogError, problem

__all__ = ["ShadowAudit", "read_shadow_audit", "read_manifest", "ROW_COLUMNS"]

#: Columns of :attr:`ShadowAudit.rows` (plus any grouping columns).
ROW_COLUMNS = ("turn_id", "tool_name", "position", "n_tools", "called", "relevant", "desc_len", "unit")

def _py(v):
    """A numpy scalar as the Python value (readable messages)."""
    return v.item() if hasattr(v, "item") else v


_BINARY = {"0": 0, "1": 1, "0.0": 0, "1.0": 1, "true": 1, "false": 0}


@dataclass(frozen=True)
class ShadowAudit:
    """One harness audit in long form: one row per (turn, tool shown in that turn).

    Attributes
    ----------
    rows : pandas.DataFrame
        Columns ``turn_id`` (str), ``tool_name`` (str), ``position`` (int, 1-based place of the tool in the
        manifest shown at that turn), ``n_tools`` (int, length of that manifest), ``called`` and ``relevant``
        (int 0/1), ``desc_len`` (float, characters of the tool's description), ``unit`` (str: the resampling
        and clustering unit, by default the turn), plus the columns in :attr:`group_columns`.
    tasks : dict
        ``{turn_id: text}`` of the turns whose text is known (domain S and the similarity term of R need it).
    group_columns : tuple of str
        Columns that split the audit into separately scored harnesses (e.g. ``("model",)`` from the adapter).
    source : dict
        Provenance: the files read (or ``{"adapter": ...}``).
    n_excluded : dict
        Rows (attempts) left out, by reason (the adapter's attempts without a valid call, ...).

    Examples
    --------
    Two turns of a three-tool manifest shown in one order (:meth:`from_frame` checks every value):

    >>> import pandas as pd
    >>> rows = pd.DataFrame({"turn_id": ["t1"] * 3 + ["t2"] * 3, "tool_name": ["search", "fetch", "math"] * 2,
    ...                      "position": [1, 2, 3] * 2, "called": [1, 0, 0, 0, 1, 0], "relevant": [1, 1, 0, 1, 1, 0],
    ...                      "desc_len": [120.0, 80.0, 60.0] * 2})
    >>> audit = ShadowAudit.from_frame(rows, tasks={"t1": "find the paper", "t2": "download it"})
    >>> audit
    ShadowAudit(2 turns, 3 tools, 6 rows, groups=[])
    >>> audit.rows.columns.tolist()
    ['turn_id', 'tool_name', 'position', 'n_tools', 'called', 'relevant', 'desc_len', 'unit']
    """

    rows: pd.DataFrame
    tasks: dict = field(default_factory=dict)
    group_columns: tuple = ()
    source: dict = field(default_factory=dict)
    n_excluded: dict = field(default_factory=dict)

    @classmethod
    def from_frame(cls, rows: pd.DataFrame, *, tasks: Mapping[str, str] | pd.Series | None = None,
                   group_columns: Sequence[str] = (), source: Mapping[str, Any] | None = None,
                   n_excluded: Mapping[str, int] | None = None) -> ShadowAudit:
        """Build an audit from a long frame (simulations, adapters); checks the columns and their values.

        Parameters
        ----------
        rows : pandas.DataFrame
            Needs ``turn_id, tool_name, position, called, relevant, desc_len``; ``n_tools`` defaults to the
            number of rows of the turn and ``unit`` to ``turn_id``.
        tasks : dict or pandas.Series, optional
            ``{turn_id: text}``.
        group_columns : sequence of str, default ()
        source, n_excluded : dict, optional

        Returns
        -------
        ShadowAudit
            Columns in :data:`ROW_COLUMNS` order plus the group columns (and ``similarity`` when given).

        Raises
        ------
        SelectionLogError
            A missing column, a value that is not 0/1, a non-positive position, a duplicate (turn, tool) or a
            position repeated within a turn (``frame:row:column: ...``).
        """
        need = ("turn_id", "tool_name", "position", "called", "relevant", "desc_len")
        missing = [c for c in need + tuple(group_columns) if c not in rows.columns]
        if missing:
            raise SelectionLogError(problem("frame", None, ",".join(missing), "missing column(s)"))
        df = rows.copy()
        df["turn_id"] = df["turn_id"].astype(str)
        df["tool_name"] = df["tool_name"].astype(str)
        probs = []
        for col in ("called", "relevant"):
            v = pd.to_numeric(df[col], errors="coerce")
            bad = ~v.isin([0, 1])
            for i in np.flatnonzero(bad.to_numpy())[:50]:
                probs.append(problem("frame", i + 1, col, f"expected 0 or 1, got {_py(df[col].iloc[i])!r}"))
            df[col] = v.fillna(0).astype(np.int8)
        pos = pd.to_numeric(df["position"], errors="coerce")
        for i in np.flatnonzero(~(pos >= 1).to_numpy())[:50]:
            probs.append(problem("frame", i + 1, "position",
                                 f"expected an integer >= 1, got {_py(df['position'].iloc[i])!r}"))
        dup = df.duplicated(["turn_id", "tool_name"], keep="first").to_numpy()
        for i in np.flatnonzero(dup)[:50]:
            probs.append(problem("frame", i + 1, "turn_id,tool_name",
                                 f"duplicate (turn, tool) ({df['turn_id'].iloc[i]!r}, {df['tool_name'].iloc[i]!r})"))
        if probs:
            raise SelectionLogError(probs)
        df["position"] = pos.astype(np.int64)
        if df.duplicated(["turn_id", "position"]).any():
            i = int(np.flatnonzero(df.duplicated(["turn_id", "position"]).to_numpy())[0])
            raise SelectionLogError(problem("frame", i + 1, "position",
                                            f"position {int(df['position'].iloc[i])} repeated in turn "
                                            f"{df['turn_id'].iloc[i]!r}"))
        if "n_tools" not in df.columns:
            df["n_tools"] = df.groupby("turn_id")["tool_name"].transform("size")
        df["n_tools"] = df["n_tools"].astype(np.int64)
        if "unit" not in df.columns:
            df["unit"] = df["turn_id"]
        df["unit"] = df["unit"].astype(str)
        df["desc_len"] = pd.to_numeric(df["desc_len"], errors="coerce").astype(float)
        cols = list(ROW_COLUMNS) + [c for c in group_columns if c not in ROW_COLUMNS]
        extra = [c for c in ("similarity",) if c in df.columns]
        df = df[cols + extra].reset_index(drop=True)
        tasks = {} if tasks is None else {str(k): str(v) for k, v in dict(tasks).items() if isinstance(v, str)}
        return cls(rows=df, tasks=tasks, group_columns=tuple(group_columns), source=dict(source or {"frame": True}),
                   n_excluded=dict(n_excluded or {}))

    @property
    def n_turns(self) -> int:
        """Number of distinct turns."""
        return int(self.rows["turn_id"].nunique())

    def __repr__(self):
        return (f"ShadowAudit({self.n_turns} turns, {self.rows['tool_name'].nunique()} tools, "
                f"{len(self.rows)} rows, groups={list(self.group_columns)})")


# -- files ------------------------------------------------------------------------------------------------------
def read_manifest(path: str | os.PathLike[str]) -> pd.DataFrame:
    """Read a manifest JSON (array of ``{name, description}`` in presentation order).

    Parameters
    ----------
    path : path-like
        The manifest JSON file (UTF-8).

    Returns
    -------
    pandas.DataFrame
        Columns ``tool_name``, ``description``, ``position`` (1-based).

    Raises
    ------
    SelectionLogError
        File missing, not JSON, not an array, an entry without a non-empty string ``name`` or with a
        non-string ``description``, or a name listed twice (``file:item:field: ...``).

    Examples
    --------
    >>> from toolbias_stats.datasets import path
    >>> m = read_manifest(path("shadow/manifest.json"))
    >>> m.shape, m.columns.tolist()
    ((12, 3), ['tool_name', 'description', 'position'])
    """
    path = Path(path)
    if not path.is_file():
        raise SelectionLogError(problem(path, None, None, "file not found"))
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        raise SelectionLogError(problem(path, None, None, "not UTF-8 text; save the file as UTF-8")) from None
    except json.JSONDecodeError as exc:
        raise SelectionLogError(problem(path, exc.lineno, f"col {exc.colno}", f"malformed JSON: {exc.msg}")) from None
    if not isinstance(data, list) or not data:
        raise SelectionLogError(problem(path, None, None, "expected a non-empty JSON array of {name, description} "
                                                          f"objects, got {type(data).__name__}"))
    probs, rows = [], []
    seen: dict[str, int] = {}
    for i, obj in enumerate(data, start=1):
        if not isinstance(obj, dict):
            probs.append(problem(path, i, None, f"expected an object, got {type(obj).__name__}"))
            continue
        name, desc = obj.get("name"), obj.get("description", "")
        if not isinstance(name, str) or not name.strip():
            probs.append(problem(path, i, "name", f"expected a non-empty string, got {name!r}"))
            continue
        if not isinstance(desc, str):
            probs.append(problem(path, i, "description", f"expected a string, got {type(desc).__name__}"))
            continue
        if name in seen:
            probs.append(problem(path, i, "name", f"tool {name!r} already listed at item {seen[name]}"))
            continue
        seen[name] = i
        rows.append({"tool_name": name, "description": desc, "position": i})
    if probs:
        raise SelectionLogError(probs)
    return pd.DataFrame(rows)


def _read_csv(path, required, optional=()) -> pd.DataFrame:
    path = Path(path)
    if not path.is_file():
        raise SelectionLogError(problem(path, None, None, "file not found"))
    try:
        df = pd.read_csv(path, dtype=str, keep_default_na=False, encoding="utf-8")
    except UnicodeDecodeError:
        raise SelectionLogError(problem(path, None, None, "not UTF-8 text; save the file as UTF-8")) from None
    except pd.errors.EmptyDataError:
        raise SelectionLogError(problem(path, None, None, "empty file (expected a header row)")) from None
    except pd.errors.ParserError as exc:
        raise SelectionLogError(problem(path, None, None, f"malformed CSV: {exc}")) from None
    df.columns = [str(c).strip() for c in df.columns]
    missing = [c for c in required if c not in df.columns]
    if missing:
        raise SelectionLogError(problem(path, None, ",".join(missing),
                                        f"missing column(s); the file has {list(df.columns)}, "
                                        f"expected {list(required)} (optional {list(optional)})"))
    for c in df.columns:
        df[c] = df[c].str.strip()
    return df


def _binary(df, col, path, probs):
    vals = df[col].str.lower().map(_BINARY)
    for i in np.flatnonzero(vals.isna().to_numpy()):
        probs.append(problem(path, i + 1, col, f"expected 0 or 1, got {df[col].iloc[i]!r}"))
    return vals


def read_shadow_audit(manifest: str | Path | Sequence[str | os.PathLike[str]],
                      calls: str | os.PathLike[str], labels: str | os.PathLike[str], *,
                      turns: str | os.PathLike[str] | None = None) -> ShadowAudit:
    """Read a harness audit in the TOOL-SHADOW format and check every row.

    Parameters
    ----------
    manifest : path-like or sequence of path-like
        The manifest JSON (array of ``{name, description}`` in presentation order). Several files when a
        ``manifest`` column of the call log names, per turn, the one that was shown (matched by file name
        or stem).
    calls : path-like
        Call-log CSV with ``turn_id, tool_name, called`` (0/1); optional ``task`` (the turn's text),
        ``position`` (1-based place of the tool at that turn) and ``manifest``. Tools of the manifest without a
        row count as not called; a turn present only in ``labels`` called nothing.
    labels : path-like
        Relevance CSV with ``turn_id, tool_name, relevant`` (0/1); optional ``position``. A tool of a labelled
        turn without a row counts as not relevant; every turn must have at least one label row.
    turns : path-like, optional
        Turns CSV ``turn_id, task`` (the turn's text), overriding a ``task`` column of the call log.

    Returns
    -------
    ShadowAudit

    Raises
    ------
    SelectionLogError
        One error listing every problem as ``file:row:column: message``: a missing file or column, a tool name
        absent from the manifest, ``called``/``relevant`` not 0/1, a duplicate (turn, tool) row, a turn of the
        call log with no relevance labels, an unknown manifest name, a position that is not a positive integer
        or is repeated within a turn.

    Examples
    --------
    The bundled example audit (``data/shadow/``; 600 turns, 12 tools):

    >>> from toolbias_stats.datasets import path
    >>> a = read_shadow_audit(path("shadow/manifest.json"), path("shadow/calls.csv"),
    ...                       path("shadow/labels.csv"), turns=path("shadow/turns.csv"))
    >>> a.n_turns
    600
    """
    paths = [manifest] if isinstance(manifest, (str, Path)) else list(manifest)
    if not paths:
        raise SelectionLogError(problem("manifest", None, None, "no manifest file given"))
    manifests = {}
    for p in paths:
        manifests[str(p)] = read_manifest(p)
    calls_p, labels_p = Path(calls), Path(labels)
    c = _read_csv(calls_p, ("turn_id", "tool_name", "called"), ("task", "position", "manifest"))
    lab = _read_csv(labels_p, ("turn_id", "tool_name", "relevant"), ("position",))
    probs: list = []
    c["called_v"] = _binary(c, "called", calls_p, probs)
    lab["relevant_v"] = _binary(lab, "relevant", labels_p, probs)
    frames = ((c, calls_p), (lab, labels_p))
    _check_turn_rows(frames, probs)
    default = next(iter(manifests))
    turn_manifest = _turn_manifests(c, manifests, default, calls_p, probs)
    _check_tools(frames, manifests, turn_manifest, default, probs)
    _check_labelled(c, lab, calls_p, labels_p, probs)
    pos_map = _explicit_positions(frames, probs)
    tasks = _tasks(c, turns, probs)
    if probs:
        raise SelectionLogError(probs)
    rows = _long_frame(c, lab, manifests, turn_manifest, default, pos_map, calls_p)
    src = {"manifest": [str(p) for p in manifests], "calls": str(calls_p), "labels": str(labels_p),
           "turns": None if turns is None else str(turns)}
    return ShadowAudit.from_frame(rows, tasks=tasks, source=src)


# -- the stages of read_shadow_audit: check every row (problems collected), then build the long frame ----------
def _check_turn_rows(frames, probs) -> None:
    """Empty turn ids and duplicate (turn, tool) rows of the call log and the labels."""
    for df, p in frames:
        for r in np.flatnonzero((df["turn_id"] == "").to_numpy()):
            probs.append(problem(p, r + 1, "turn_id", "empty turn id"))
        dup = df.duplicated(["turn_id", "tool_name"], keep="first").to_numpy()
        first: dict = {}
        for i, key in enumerate(zip(df["turn_id"], df["tool_name"])):
            if dup[i]:
                probs.append(problem(p, i + 1, "turn_id,tool_name",
                                     f"duplicate row for turn {key[0]!r} and tool {key[1]!r} "
                                     f"(first at row {first[key]})"))
            else:
                first.setdefault(key, i + 1)


def _turn_manifests(c, manifests, default, calls_p, probs) -> dict:
    """Which manifest each turn saw (``{turn: manifest path}``; turns of the default manifest may be absent)."""
    names: dict = {}
    for p in manifests:
        names.setdefault(Path(p).name, p)
        names.setdefault(Path(p).stem, p)
        names.setdefault(str(p), p)
    turn_manifest: dict = {}
    if "manifest" in c.columns:
        for i, (t, m) in enumerate(zip(c["turn_id"], c["manifest"])):
            key = names.get(m) if m else default
            if key is None:
                probs.append(problem(calls_p, i + 1, "manifest",
                                     f"{m!r} is none of the manifests given "
                                     f"({sorted(Path(p).name for p in manifests)})"))
                continue
            if turn_manifest.setdefault(t, key) != key:
                probs.append(problem(calls_p, i + 1, "manifest",
                                     f"turn {t!r} names {m!r} but an earlier row named "
                                     f"{Path(turn_manifest[t]).name!r}"))
    elif len(manifests) > 1:
        raise SelectionLogError(problem(calls_p, None, "manifest", "several manifests were given: the call log needs a "
                                                                   "`manifest` column naming the one each turn saw"))
    return turn_manifest


def _check_tools(frames, manifests, turn_manifest, default, probs) -> None:
    """Every tool named in the call log and the labels is in the manifest its turn saw."""
    tool_sets = {p: set(m["tool_name"]) for p, m in manifests.items()}
    for df, p in frames:
        for i, (t, name) in enumerate(zip(df["turn_id"], df["tool_name"])):
            mp = turn_manifest.get(t, default)
            if name not in tool_sets[mp]:
                probs.append(problem(p, i + 1, "tool_name", f"tool {name!r} is not in the manifest {Path(mp).name}"))


def _check_labelled(c, lab, calls_p, labels_p, probs) -> None:
    """Every turn of the call log has relevance labels."""
    labelled = set(lab["turn_id"])
    seen_turn = set()
    for i, t in enumerate(c["turn_id"]):
        if t not in labelled and t not in seen_turn:
            probs.append(problem(calls_p, i + 1, "turn_id", f"turn {t!r} has no relevance labels in {labels_p.name}"))
        seen_turn.add(t)


def _explicit_positions(frames, probs) -> dict:
    """Explicit positions (orders that vary by turn): ``{(turn, tool): (position, file, row)}``."""
    pos_map: dict = {}
    for df, p in frames:
        if "position" not in df.columns:
            continue
        for i, (t, name, v) in enumerate(zip(df["turn_id"], df["tool_name"], df["position"])):
            if v == "":
                continue
            try:
                k = int(v)
                if k < 1 or str(k) != v.lstrip("+"):
                    raise ValueError
            except ValueError:
                probs.append(problem(p, i + 1, "position", f"expected an integer >= 1, got {v!r}"))
                continue
            old = pos_map.setdefault((t, name), (k, p, i + 1))
            if old[0] != k:
                probs.append(problem(p, i + 1, "position", f"position {k} disagrees with {old[0]} at "
                                                           f"{Path(old[1]).name}:{old[2]}"))
    return pos_map


def _tasks(c, turns, probs) -> dict:
    """The text of each turn: the call log's ``task`` column, overridden by the turns file."""
    tasks: dict = {}
    if "task" in c.columns:
        for t, txt in zip(c["turn_id"], c["task"]):
            if txt:
                tasks.setdefault(t, txt)
    if turns is not None:
        turns_p = Path(turns)
        tt = _read_csv(turns_p, ("turn_id", "task"))
        for i, t in enumerate(tt["turn_id"]):
            if t == "":
                probs.append(problem(turns_p, i + 1, "turn_id", "empty turn id"))
        dup = tt.duplicated("turn_id").to_numpy()
        for r in np.flatnonzero(dup):
            probs.append(problem(turns_p, r + 1, "turn_id", f"duplicate turn {tt['turn_id'].iloc[r]!r}"))
        tasks.update({t: x for t, x in zip(tt["turn_id"], tt["task"]) if x})
    return tasks


def _long_frame(c, lab, manifests, turn_manifest, default, pos_map, calls_p) -> pd.DataFrame:
    """Every turn x every tool of its manifest, with ``called``, ``relevant``, ``position`` and ``n_tools``."""
    called = {(t, n): int(v) for t, n, v in zip(c["turn_id"], c["tool_name"], c["called_v"])}
    relevant = {(t, n): int(v) for t, n, v in zip(lab["turn_id"], lab["tool_name"], lab["relevant_v"])}
    order = list(dict.fromkeys(list(c["turn_id"]) + list(lab["turn_id"])))
    pieces = []
    for mp in manifests:
        ts = [t for t in order if turn_manifest.get(t, default) == mp]
        if not ts:
            continue
        m = manifests[mp]
        k = len(m)
        piece = pd.DataFrame({"turn_id": np.repeat(ts, k), "tool_name": np.tile(m["tool_name"].to_numpy(), len(ts)),
                              "position": np.tile(m["position"].to_numpy(), len(ts)),
                              "desc_len": np.tile(m["description"].str.len().to_numpy(float), len(ts))})
        pieces.append(piece)
    rows = pd.concat(pieces, ignore_index=True)
    keys = list(zip(rows["turn_id"], rows["tool_name"]))
    rows["called"] = np.array([called.get(k, 0) for k in keys], dtype=np.int8)
    rows["relevant"] = np.array([relevant.get(k, 0) for k in keys], dtype=np.int8)
    if pos_map:
        override = np.array([pos_map.get(k, (np.nan,))[0] for k in keys], dtype=float)
        has = np.isfinite(override)
        rows.loc[has, "position"] = override[has].astype(np.int64)
        dup = rows.duplicated(["turn_id", "position"], keep=False).to_numpy()
        if dup.any():
            cand = np.flatnonzero(dup)
            explicit = [i for i in cand if (rows["turn_id"].iloc[i], rows["tool_name"].iloc[i]) in pos_map]
            i = int(explicit[0] if explicit else cand[0])
            t, name = rows["turn_id"].iloc[i], rows["tool_name"].iloc[i]
            where = pos_map.get((t, name))
            raise SelectionLogError(problem(where[1] if where else calls_p, where[2] if where else None, "position",
                                            f"position {int(rows['position'].iloc[i])} is used twice in turn {t!r}"))
    rows["n_tools"] = rows.groupby("turn_id")["tool_name"].transform("size")
    return rows
