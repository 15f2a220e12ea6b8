"""Helpers shared by the API-log readers (``openai``, ``anthropic``, ``otel``).

Each reader turns its records into :class:`Attempt` objects (the tools offered, in order, and what the model
did) and :func:`build_log` turns those into one SelectionLog: it resolves the offered tools to one cluster of
the catalog (a catalog file, clusters declared in the manifest, or clusters inferred as "the exact set of tools
offered"), resolves the first tool call against the offered tools and sets the status.

Statuses before resolution (``Attempt.status``): ``"call"`` (a tool was called; ``name`` is its name),
``"no_call"``, ``"parse_error"`` (no usable answer: malformed record, API error, cancelled or expired batch
request) and ``"forced"`` (``tool_choice`` named one function or forbade calls: no choice was left to the model).
"""

from __future__ import annotations

import gc
import hashlib
import json
import re
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass
from operator import attrgetter
from pathlib import Path
from typing import Any, cast

import numpy as np
import pandas as pd

from ..._schema import standardise_name
from ...exceptions import SelectionLogError, problem
from .._catalog import ToolCatalog
from .._selection_log import SelectionLog
from ._clusters import ClusterIndex
from ._common import TOO_DEEP, add_meta, check_meta, check_regular_file, utf8_bytes, utf8_message, utf8_position

try:          # optional: a faster JSON decoder giving the same values (the standard library words every error)
    import msgspec as _msgspec
except ImportError:   # pragma: no cover - exercised by the tests that hide msgspec
    _msgspec = None   # type: ignore[assignment]  # the module's absence, tested as `_msgspec is None`

__all__ = ["Attempt", "AttemptColumns", "BatchShape", "KEEP", "JsonLine", "read_json_lines", "read_batch_columns",
           "build_log", "query_key", "short", "tool_names", "CUSTOM_ID_RE"]

#: How many characters of free text (answers, refusals, error messages) ``raw_choice`` keeps.
RAW_CHARS = 200
#: ``"custom_id": "..."`` in a line that is not valid JSON (a truncated batch output line).
CUSTOM_ID_RE = re.compile(r'"custom_id"\s*:\s*"((?:[^"\\]|\\.)*)"')
_UNSEEN = object()
#: Lines with more brackets than this are parsed by the standard library alone (its depth limit is the rule).
_FAST_MAX_BRACKETS = 400
_GENERIC = _msgspec.json.Decoder() if _msgspec is not None else None
#: What msgspec raises on a text it does not decode (the standard library then decides).
FAST_ERRORS = ((_msgspec.DecodeError, UnicodeDecodeError, RecursionError, ValueError) if _msgspec is not None
               else ())
#: msgspec's decoding of one JSON text (bytes or str) into Python values, or None without msgspec. Callers fall
#: back to ``json.loads`` whenever it raises, so values and error messages are the standard library's.
fast_json = _GENERIC.decode if _GENERIC is not None else None


@dataclass
class JsonLine:
    """One non-blank line of a JSON Lines file: its value, or why it does not parse."""

    line: int
    value: object = None
    error: str | None = None
    text: str = ""


@dataclass
class Attempt:
    """One selection attempt as read from a log, before cluster and tool resolution."""

    source_file: str
    source_row: int
    #: names of the tools offered, in the order shown; None when the record has no tool list
    tools: list | None
    #: "call", "no_call", "parse_error" or "forced"
    status: str
    #: name of the first tool call ("call"; "forced" when a call was made)
    name: str | None = None
    #: audit text for the other statuses (answer text, refusal, error message)
    raw: str | None = None
    n_calls: int = 0
    query_id: str | None = None
    query_text: str | None = None
    #: how a reader names the record in messages (e.g. "custom_id 'q1'"): a str, or an object whose ``str()`` is
    #: the label (worded only when a message needs it)
    label: object = ""
    #: notes kept in the diagnostics: "refusal", "api_error", "extra_choices", "incomplete", ...
    flags: tuple = ()
    #: how ``tool_choice`` took the choice away (e.g. "tool_choice forces 'geo_a'"); None when it did not
    forced: str | None = None
    #: the query's cluster as the record states it (a ``cluster_id`` field or metadata); None when it does not
    cluster: str | None = None
    #: True when the record carries no tool definitions but the clusters are declared (OTel without the opt-in
    #: ``gen_ai.tool.definitions``): the attempt's cluster is that of the chosen tool and the order is unknown
    no_list: bool = False
    #: the model the record names (request ``model``, else response ``model``; issue 36); None when it names none
    model: str | None = None
    #: attempts of one run (an OTel trace, one conversation): an attempt whose cluster cannot be decided takes the
    #: one cluster the other attempts of its group were resolved to (issue 36); None when ungrouped
    group: str | None = None


def read_json_lines(path: Path, *, what: str = "file", typed=None, convert=None) -> list[JsonLine]:
    """Parse a JSON Lines file line by line; a malformed line is kept with its error (callers decide).

    Blank lines are skipped (but counted, so ``line`` is what an editor shows). A missing or empty file or a
    file that is not UTF-8 raises :class:`SelectionLogError`.

    With msgspec installed a line is decoded by it (several times faster); the standard library decides every
    line msgspec refuses (NaN, lone surrogates, syntax errors: the same values and the same messages as without
    it) and every line with more than ``_FAST_MAX_BRACKETS`` brackets (so "nested too deeply" is the same).
    ``typed``: ``(msgspec decoder of a schema, check)``, a decoder that keeps only the keys a reader reads
    (skipping tool schemas and descriptions); a line it refuses, or whose value ``check`` rejects, is decoded in
    full. ``convert(value, line)``: what to keep of each decoded value (a reader's parse of it, so the decoded
    line need not be held); the line's ``value`` is what it returns.
    """
    path = Path(path)
    if not path.exists():
        raise SelectionLogError(problem(path, None, None, f"{what} not found"))
    if path.is_dir():
        raise SelectionLogError(problem(path, None, None, f"expected a JSON Lines {what}, got a folder"))
    check_regular_file(path, what)   # a device (/dev/zero), a pipe, a file too large to hold in memory
    out = _read_lines_fast(path, typed, convert) if _msgspec is not None else _read_lines_text(path, convert)
    if not out:
        raise SelectionLogError(problem(path, None, None, f"the {what} is empty (no JSON lines)"))
    return out


@contextmanager
def paused_gc():
    """Pause Python's cyclic garbage collector while a log is read (restored after, also on error).

    Reading builds millions of small lists and dicts, none of them cyclic; the collector would otherwise walk
    them again and again while they are built (more than half of the reading time).
    """
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def typed_decoder(schema, check):
    """``(msgspec decoder of schema, check)`` for :func:`read_json_lines` (None without msgspec)."""
    return None if _msgspec is None else (_msgspec.json.Decoder(schema), check)


def _std_line(lineno: int, text: str, convert=None) -> JsonLine:
    """One line parsed by the standard library: its value, or its error (what every reader reports)."""
    try:
        value = json.loads(text)
        return JsonLine(lineno, value if convert is None else convert(value, lineno), None, text)
    except json.JSONDecodeError as exc:
        # the parser stopped at the very end (or inside a string that never closes): cut short
        cut = exc.pos >= len(text.rstrip()) - 1 or exc.msg.startswith("Unterminated string")
        kind = "truncated JSON" if cut else "malformed JSON"
        return JsonLine(lineno, None, f"{kind} (col {exc.colno}): {exc.msg}", text)
    except RecursionError:   # a line nested deeper than the parser goes: kept, as a malformed line
        return JsonLine(lineno, None, TOO_DEEP, text)


def _read_lines_text(path: Path, convert=None) -> list[JsonLine]:
    """The standard library's reading (no msgspec)."""
    out = []
    try:
        with path.open(encoding="utf-8-sig") as fh:
            for lineno, text in enumerate(fh, start=1):
                if text.strip():
                    out.append(_std_line(lineno, text, convert))
    except UnicodeDecodeError:
        raise SelectionLogError(problem(path, None, None, utf8_message(utf8_position(path)))) from None
    return out


def _file_lines(path: Path) -> tuple[list, bool]:
    """The lines of a file (bytes, UTF-8 checked, a byte-order mark dropped; split at ``\n``, ``\r\n`` and
    ``\r`` as text mode does) and whether its last line has no line end."""
    data = utf8_bytes(path)
    return data.splitlines(), not data.endswith((b"\n", b"\r"))


def _line(pieces, i, open_end, fast=None, check=None, convert=None):
    """Line ``i`` of ``pieces`` as :func:`read_json_lines` reads it (a JsonLine), or None for a blank line."""
    raw = pieces[i]
    if _shallow(raw):
        value = _UNSEEN
        if fast is not None:
            try:
                value = fast(raw)
                if not check(value):
                    value = _UNSEEN
            except FAST_ERRORS:   # not this schema's shape (or not JSON): decoded in full below
                value = _UNSEEN
        if value is _UNSEEN:
            try:
                value = _GENERIC.decode(raw)
            except FAST_ERRORS:   # the standard library decides (and words the error)
                value = _UNSEEN
        if value is not _UNSEEN:
            return JsonLine(i + 1, value if convert is None else convert(value, i + 1))
    text = raw.decode("utf-8")
    if i < len(pieces) - 1 or not open_end:
        text += "\n"
    return _std_line(i + 1, text, convert) if text.strip() else None


def _read_lines_fast(path: Path, typed=None, convert=None) -> list[JsonLine]:
    """As :func:`_read_lines_text` (the same lines, line numbers, values and errors), decoding with msgspec."""
    pieces, open_end = _file_lines(path)
    fast, check = typed if typed is not None else (None, None)
    fast = fast.decode if fast is not None else None
    out = []
    for i in range(len(pieces)):
        jl = _line(pieces, i, open_end, fast, check, convert)
        if jl is not None:
            out.append(jl)
    return out


def short(text, n: int = RAW_CHARS) -> str | None:
    """``text`` cut to ``n`` characters (None stays None; other values are JSON-dumped first)."""
    if text is None:
        return None
    if not isinstance(text, str):
        text = json.dumps(text, ensure_ascii=False)
    text = text.strip()
    return text if len(text) <= n else text[: n - 1] + "\u2026"


def query_key(text: str) -> str:
    """Stable query id of a query text: ``q`` + the first 12 hex digits of its SHA-256 (UTF-8, stripped)."""
    return "q" + hashlib.sha256(text.strip().encode("utf-8")).hexdigest()[:12]


# ---------------------------------------------------------------------------------------
# From attempts to a SelectionLog
_COLUMNS = ["cluster_id", "query_id", "rotation", "ordering", "chosen_tool", "status", "raw_choice",
            "source_file", "source_row"]


#: The fields of an attempt, in the order :class:`AttemptColumns` holds them.
_FIELDS = ("source_file", "source_row", "tools", "status", "name", "raw", "n_calls", "query_id", "query_text",
           "label", "flags", "forced", "cluster", "no_list", "model", "group")


_ATTEMPT_FIELDS = attrgetter(*_FIELDS)


class AttemptColumns:
    """Attempts as parallel lists (one entry per attempt, the fields of :class:`Attempt`): what
    :func:`build_log` reads. ``label`` may be any indexable (the batch readers name a row by its custom_id only
    when a message needs it)."""

    __slots__ = _FIELDS

    # one entry per attempt (``label``: any indexable), the fields of :class:`Attempt`
    source_file: list[str]
    source_row: list[int]
    tools: list[list | None]
    status: list[str]
    name: list[str | None]
    raw: list[Any]
    n_calls: list[int]
    query_id: list[str | None]
    query_text: list[str | None]
    label: Any
    flags: list[tuple]
    forced: list[str | None]
    cluster: list[str | None]
    no_list: list[bool]
    model: list[str | None]
    group: list[str | None]

    def __init__(self, **cols):
        for k in _FIELDS:
            setattr(self, k, cols[k])

    @classmethod
    def from_attempts(cls, attempts) -> AttemptColumns:
        cols = list(zip(*map(_ATTEMPT_FIELDS, attempts)))
        return cls(**{k: list(c) for k, c in zip(_FIELDS, cols)}) if cols else cls(**{k: [] for k in _FIELDS})

    def __len__(self):
        return len(self.source_row)

    def take(self, keep: list[int]) -> AttemptColumns:
        """The attempts at positions ``keep`` (in that order)."""
        return AttemptColumns(**{k: [getattr(self, k)[i] for i in keep] for k in _FIELDS})

    def attempt(self, i: int) -> Attempt:
        """Attempt ``i`` as an :class:`Attempt`."""
        att = Attempt(self.source_file[i], self.source_row[i], self.tools[i], self.status[i])
        for k in _FIELDS[4:]:
            setattr(att, k, getattr(self, k)[i])
        return att

    def offered(self) -> list[tuple]:
        """``(tool names offered, file, line)`` of the first attempt showing each distinct list (None for attempts
        without a list are left out): what cluster inference reads (it only looks at each set's first request)."""
        tools = self.tools
        try:    # the first position of each distinct list, at C speed (a batch's lists are tuples)
            n = len(tools)
            first = sorted(dict(zip(tools[::-1], range(n - 1, -1, -1))).values())
        except TypeError:   # lists (attempts read one by one): hashed as tuples
            seen: dict = {}
            for i, names in enumerate(tools):
                if names:
                    seen.setdefault(tuple(names), i)
            first = list(seen.values())
        return [(list(names), self.source_file[i], self.source_row[i]) for i in first if (names := tools[i])]


def build_log(attempts, *, catalog: ToolCatalog, meta, source: Path, fmt: str,
              subsets: bool = False, extra_diagnostics=None, model_override: bool = False) -> SelectionLog:
    """Resolve every attempt to a cluster and a chosen tool; one SelectionLog row per attempt.

    Parameters
    ----------
    attempts : list of Attempt, or AttemptColumns
    catalog : ToolCatalog
        Every offered tool must resolve to a catalog tool (by tool_id, ToolBench function name or standardised
        name) and all tools of one attempt to the same cluster.
    meta : dict
        Design metadata (``model``, ``run``, ``condition``, extra scalars).
    source : Path
        The file named in diagnostics.
    fmt : str
        Reader name, recorded in the diagnostics.
    subsets : bool, default False
        Whether an attempt may offer a proper subset of its cluster's tools. By default the tools offered must
        be exactly the cluster's tools (the list may be in any order): a list that changes within one cluster
        is an error.
    model_override : bool, default False
        Label every attempt with ``meta["model"]`` whatever model its record names. By default each record's own
        model (:attr:`Attempt.model`) labels its row, ``meta["model"]`` fills records that name none, and a
        record naming another model than ``meta["model"]`` is an error naming its line (issue 36).

    Raises
    ------
    SelectionLogError
        Listing every attempt whose tool list is missing, empty, repeats a name, names a tool that is not in the
        catalog, or (without ``subsets``) is not the whole cluster; every record whose model disagrees with
        the manifest's (or that has no model while the manifest gives none). An attempt whose cluster cannot be
        decided (a call to a tool outside every declared cluster without a tool list, a list spanning several
        clusters without a cluster_id nor a call deciding it) is not an error: it takes the one cluster its
        group's other attempts have (:attr:`Attempt.group`: an OTel trace, one conversation), else it is left
        out of the rows and counted in ``diagnostics["unassigned"]`` (an ``ExcludedRowsWarning``); only a log
        where no attempt is left is refused.
    """
    meta = check_meta(meta, source, model_required=False)
    cols = attempts if isinstance(attempts, AttemptColumns) else AttemptColumns.from_attempts(attempts)
    n_read = len(cols)
    hits, qids, unassigned = _resolve_attempts(cols, _Resolver(catalog, subsets))
    if not hits or len(unassigned) == n_read:
        why = "" if not unassigned else (f": none of the {n_read} attempt(s) could be assigned to a cluster; "
                                         f"{unassigned[0][1]}")
        raise SelectionLogError(problem(source, None, None, f"no selection attempts in this log{why}"))
    models = _row_models(cols, meta, model_override)
    # every attempt is a row (a problem would have been raised): the columns follow the attempts
    o_cid, o_ord, o_tool, o_status, o_raw, hows, o_pos = (list(c) for c in zip(*hits))
    o_raw = [r if m is _UNSEEN else m for m, r in zip(o_raw, cols.raw)]
    frame = pd.DataFrame({"cluster_id": o_cid, "query_id": qids, "rotation": [None] * len(qids), "ordering": o_ord,
                          "chosen_tool": o_tool, "status": o_status, "raw_choice": o_raw,
                          "source_file": list(cols.source_file), "source_row": list(cols.source_row),
                          "chosen_position": o_pos})
    frame["source_row"] = frame["source_row"].astype(np.int64)
    if models is not None:
        frame["model"] = models
    frame = add_meta(frame, meta)
    repeats = _repeats(list(zip(o_cid, qids, o_ord)) if models is None else list(zip(models, o_cid, qids, o_ord)))
    if repeats.max() > 1 and "attempt" not in frame.columns:
        # the same request (query and tool order) sent again: distinct attempts, told apart by a design column
        frame.insert(len(meta), "attempt", repeats)
    diag = _log_diagnostics(cols, o_status, o_raw, hows, repeats, fmt=fmt, catalog=catalog)
    if unassigned:
        diag["unassigned"] = _unassigned_diagnostics(cols, unassigned, o_status)
        diag["attempts_read"] = n_read
        import warnings

        from ...exceptions import ExcludedRowsWarning

        warnings.warn(f"{source}: {len(unassigned)} of {n_read} attempt(s) could not be assigned to a cluster: "
                      "kept as rows without a cluster_id and excluded by their status (counted in "
                      "diagnostics['unassigned']); first: " + unassigned[0][1], ExcludedRowsWarning, stacklevel=3)
    if models is not None:
        diag["models"] = dict(Counter(models))
    diag.update(extra_diagnostics or {})
    return SelectionLog.from_frame(frame, catalog, diagnostics={str(source): diag}, source=str(source))


def _resolve_attempts(cols: AttemptColumns, res: _Resolver) -> tuple[list, list, list]:
    """``(hits, query ids, unassigned)``: each attempt resolved (``(cluster, ordering, tool, status, raw or
    _UNSEEN, how, position)``) and its query id; every attempt that does not resolve is a problem (all raised
    together), except those whose cluster cannot be decided: ``unassigned`` lists ``(position, message)`` of
    those no group decides either (they are left out of ``hits``)."""
    problems = []
    hits, qids = [], []
    unassigned: list = []
    qkeys: dict[str, str] = {}
    # Rows sharing the tool list, the record's cluster, the status, the name called and the forcing resolve the
    # same way (a study shows the same few lists again and again): each such combination is worked out once.
    done: dict = {}
    hints = [None] * len(cols) if res.inferred else cols.cluster
    label = cols.label
    for i, (sf, row, tools, status, name, raw, qid, text, forced, hint, no_list) in enumerate(zip(
            cols.source_file, cols.source_row, cols.tools, cols.status, cols.name, cols.raw, cols.query_id,
            cols.query_text, cols.forced, hints, cols.no_list)):
        hit = None
        if not no_list and tools and (name is None or type(name) is str):
            key = (tuple(tools), hint, status, name, forced)
            hit = done.get(key)
            if hit is None:
                hit = _resolve(res, key[0], hint, status, name, forced)
                if hit is not None:
                    done[key] = hit
        if hit is None:      # an error, a row without a list, an unusual name: resolved (and worded) one by one
            row_out, err, how = _resolve_row(res, sf, row, tools, status, name, raw, qid, text, label[i] or "",
                                             forced, hint, no_list)
            if isinstance(err, _Unassigned):
                unassigned.append((i, err))
                continue
            if err is not None:
                problems.append(err)
                continue
            hit = (*row_out, how, _position(row_out[1], row_out[2]))
        hits.append(hit)
        if qid is None:
            if text:
                qid = qkeys.get(text)
                if qid is None:
                    qid = qkeys[text] = query_key(text)
            else:
                qid = f"row{row}"
        qids.append(qid)
    if problems:
        raise SelectionLogError(problems)
    if unassigned:
        return _assign_by_group(cols, res, hits, qids, unassigned)
    return hits, qids, unassigned


class _Unassigned(str):
    """The message of an attempt whose cluster cannot be decided (kept, counted, never an error; issue 36)."""


def _assign_by_group(cols: AttemptColumns, res: _Resolver, hits: list, qids: list, unassigned: list):
    """Give each unassigned attempt the one cluster the other attempts of its group were resolved to; the hits and
    query ids of every attempt in attempt order (an attempt still unassigned is a row without a cluster:
    :func:`_unassigned_hit`), and the attempts still unassigned."""
    gone = {i for i, _ in unassigned}
    order = [i for i in range(len(cols)) if i not in gone]
    by_group: dict = {}
    for i, hit in zip(order, hits):
        g = cols.group[i]
        if g is not None:
            by_group.setdefault(g, set()).add(hit[0])
    placed: dict = dict(zip(order, zip(hits, qids)))
    left = []
    for i, msg in unassigned:
        found = by_group.get(cols.group[i], set()) if cols.group[i] is not None else set()
        row_out, err = None, None
        a = cols.attempt(i)
        if len(found) == 1:
            row_out, err, _how = _resolve_row(res, a.source_file, a.source_row, a.tools, a.status, a.name, a.raw,
                                              a.query_id, a.query_text, a.label or "", a.forced, next(iter(found)),
                                              a.no_list)
        qid = a.query_id or (query_key(a.query_text) if a.query_text else f"row{a.source_row}")
        if row_out is None or err is not None:
            left.append((i, msg))
            placed[i] = (_unassigned_hit(res, a), qid)
            continue
        placed[i] = ((*row_out, "group", _position(row_out[1], row_out[2])), qid)
    keep = sorted(placed)
    return [placed[i][0] for i in keep], [placed[i][1] for i in keep], left


def _unassigned_hit(res: _Resolver, a: Attempt) -> tuple:
    """The row of an attempt whose cluster cannot be decided (issue 36): no cluster, the list shown as given (tool
    ids where the catalog knows the name), no chosen tool, and a status that excludes it: a call to a tool that was
    offered is ``off_cluster`` (offered, but of no cluster the attempt can be given), to any other name (or without
    a list) ``unknown_tool``; the raw name is kept."""
    ordering, key, ids = None, (), []
    if a.tools and not a.no_list:
        key = tuple(a.tools)
        _dup, ids, _clusters, ordering = res.info(key)
    status, raw = a.status, a.raw
    if a.forced is not None and status in ("call", "no_call"):
        status, raw = "forced", short(f"{a.forced}; {'called ' + repr(a.name) if status == 'call' else 'no call'}")
    elif status == "call":
        offered = ordering is not None and res.match(key, ids, a.name) is not None
        status, raw = ("off_cluster" if offered else "unknown_tool"), a.name
    return None, ordering, None, status, raw, "unassigned", None


def _unassigned_diagnostics(cols: AttemptColumns, unassigned: list, o_status: list) -> dict:
    """What the attempts without a cluster were: counts by status, the names called, their rows and the first
    messages."""
    idx = [i for i, _ in unassigned]
    status = Counter(o_status[i] for i in idx)
    return {"rows": len(idx), "by_status": dict(sorted(status.items())),
            "names": dict(Counter(cols.name[i] for i in idx if cols.name[i] is not None)),
            "source_rows": [int(cols.source_row[i]) for i in idx[:50]],
            "messages": [str(m) for _, m in unassigned[:5]],
            "note": ("attempts whose cluster cannot be decided (no tool list and a call outside every declared "
                     "cluster, or tools of several clusters and nothing naming the query's): kept as rows with "
                     "cluster_id missing and excluded from every rate by their status; attempts_read = rows")}


#: Records whose model disagrees with the manifest's: ``<manifest model>-<date>`` (a dated snapshot) agrees.
def _same_model(record: str, manifest: str) -> bool:
    if record == manifest:
        return True
    return bool(re.fullmatch(re.escape(manifest) + r"-(\d{4}-\d{2}-\d{2}|\d{8})", record))


def _row_models(cols: AttemptColumns, meta: dict, override: bool):
    """Each row's model (a list), or None when ``meta["model"]`` labels every row: each record's own model, the
    manifest's for records naming none; a disagreement (unless ``override``) or no model at all is an error."""
    given = meta.get("model")
    if override:
        if given is None:
            raise SelectionLogError(problem(cols.source_file[0] if len(cols) else None, None, "model_override",
                                            "`model_override = true` needs the manifest's `model`"))
        return None
    own = cols.model
    if given is not None and all(m is None or m == given for m in own):
        return None
    problems = []
    for sf, row, m in zip(cols.source_file, cols.source_row, own):
        if m is None and given is None:
            problems.append(problem(sf, row, "model", "no model: the record names none (request or response "
                                                      "`model`) and the manifest gives none"))
        elif m is not None and given is not None and not _same_model(m, given):
            problems.append(problem(sf, row, "model", f"the record's model {m!r} is not the manifest's model "
                                                      f"{given!r}; drop `model` from the manifest to label each "
                                                      "record with its own, or set `model_override = true` to label "
                                                      "every record with the manifest's"))
    if problems:
        raise SelectionLogError(problems)
    return [given if given is not None else m for m in own]


def _log_diagnostics(cols: AttemptColumns, o_status: list, o_raw: list, hows: list, repeats: np.ndarray, *,
                     fmt: str, catalog) -> dict:
    """The diagnostics of an API log: statuses, calls per answer, notes, repeats and how clusters were decided."""
    # each pass over the rows only when a set of the values says it finds something (issue 37: ten passes over
    # 100,000 rows were a tenth of `validate`)
    how_kinds = set(hows)
    by_hint = [r for r, h in zip(cols.source_row, hows) if h == "hint"] if "hint" in how_kinds else []
    by_choice = [r for r, h in zip(cols.source_row, hows) if h == "choice"] if "choice" in how_kinds else []
    flags = Counter(f for fl in cols.flags for f in fl) if any(cols.flags) else Counter()
    n_calls: Counter = Counter(cols.n_calls)
    multiple = ([int(r) for r, n in zip(cols.source_row, cols.n_calls) if n > 1]
                if any(n > 1 for n in n_calls) else [])
    status = Counter(o_status)
    diag = {"format": fmt, "attempts": len(o_status), "status": status,
            "unresolved": _raw_of(o_status, o_raw, "unknown_tool", status),
            "n_tool_calls": dict(sorted(n_calls.items())), "multiple_calls_rows": multiple,
            "notes": dict(sorted(flags.items())), "cluster_source": getattr(catalog, "source", None),
            "repeated_requests": int((repeats > 1).sum()),
            "off_cluster": _raw_of(o_status, o_raw, "off_cluster", status)}
    if by_hint or by_choice:
        # requests offering tools of several clusters: how each one's cluster was decided
        diag["cluster_of_multi_cluster_requests"] = {
            "from_cluster_id": len(by_hint),
            "from_chosen_tool": len(by_choice), "from_chosen_tool_rows": by_choice[:50],
            "note": ("the cluster of a request offering several clusters' tools is its cluster_id; where the record "
                     "has none, the cluster of the tool chosen (those rows never count as off_cluster, and their "
                     "rates are conditional on a tool of one of the clusters being chosen)") if by_choice else
                    "the cluster of a request offering several clusters' tools is its cluster_id"}
    by_group = [int(r) for r, h in zip(cols.source_row, hows) if h == "group"] if "group" in how_kinds else []
    if by_group:
        diag["cluster_from_group"] = {"rows": len(by_group), "source_rows": by_group[:50],
                                      "note": "the cluster could not be decided from the attempt itself: it is the "
                                              "one cluster the other attempts of its trace / conversation have"}
    no_list = [int(r) for r, nl in zip(cols.source_row, cols.no_list) if nl] if any(cols.no_list) else []
    if no_list:
        diag["order_unknown"] = {"rows": len(no_list), "reason": NO_LIST_REASON}
    return diag


def _raw_of(o_status: list, o_raw: list, which: str, status: Counter) -> Counter:
    """How often each raw value occurs among the rows of status ``which`` (no pass when ``status`` has none)."""
    if which not in status:
        return Counter()
    return Counter(r for s, r in zip(o_status, o_raw) if s == which)


def _repeats(keys: list) -> np.ndarray:
    """1, 2, 3, ... for the first, second, third ... row with the same key (a cumulative count per key)."""
    index: dict = {}
    codes = [index.setdefault(k, len(index)) for k in keys]     # each key's first-seen number
    n = len(codes)
    if len(index) == n:
        return np.ones(n, dtype=np.int64)
    order = np.argsort(np.asarray(codes, dtype=np.int64), kind="stable")   # rows of a key together, in row order
    sorted_codes = np.asarray(codes, dtype=np.int64)[order]
    starts = np.flatnonzero(np.r_[True, sorted_codes[1:] != sorted_codes[:-1]])
    out = np.empty(n, dtype=np.int64)
    out[order] = np.arange(n, dtype=np.int64) - np.repeat(starts, np.diff(np.r_[starts, n])) + 1
    return out


class _Resolver:
    """The catalog and what is worked out once per distinct tool list (and per list and cluster, per list and
    name called) while resolving attempts."""

    def __init__(self, catalog, subsets):
        self.catalog = catalog
        self.subsets = subsets
        self.aliases = _Aliases(catalog)
        # a record's cluster_id names a declared (or catalog) cluster; inferred clusters are named by their tool sets
        self.inferred = str(catalog.source).startswith("<clusters inferred")
        self.lists, self.fits, self.matches = {}, {}, {}

    def info(self, key):
        info = self.lists.get(key)
        if info is None:
            info = self.lists[key] = _list_info(key, self.aliases)
        return info

    def fit(self, key, ids, cid):
        fit = self.fits.get((key, cid))
        if fit is None:
            fit = self.fits[(key, cid)] = _fit(key, ids, cid, self.catalog, self.aliases, self.subsets)
        return fit

    def match(self, key, ids, name):
        hit = self.matches.get((key, name), _UNSEEN)
        if hit is _UNSEEN:
            hit = self.matches[(key, name)] = _match_offered(name, key, ids, self.aliases, offered_only=True)
        return hit


def _resolve(res, key, hint, status, name, forced):
    """``(cluster, ordering, tool, status, raw or _UNSEEN (the row's own), how, position)`` of an attempt with tool list
    ``key`` (a tuple) that resolves without a problem, else None (:func:`_resolve_row` words the problem)."""
    dup, ids, offered_clusters, ordering = res.info(key)
    if dup or not offered_clusters:
        return None
    how = None
    if len(offered_clusters) == 1:
        cid = offered_clusters[0]
        if hint is not None and str(hint) != cid:
            return None
    elif hint is not None:
        cid = str(hint)
        if cid not in offered_clusters:
            return None
        how = "hint"
    else:
        chosen = _match_offered(name, key, ids, res.aliases) if status == "call" else None
        cid = None if chosen is None else res.aliases.index.of_tool(chosen, offered_clusters)
        if cid is None:
            return None
        how = "choice"
    in_cluster, err = res.fit(key, ids, cid)
    if err is not None:
        return None
    tool, status, raw = _classify(res, key, ids, in_cluster, status, name, forced, _UNSEEN)
    return cid, ordering, tool, status, raw, how, _position(ordering, tool)


def _classify(res, key, ids, in_cluster, status, name, forced, raw):
    """``(tool, status, raw)`` of an attempt whose cluster is decided: a forced request, a call matched to a tool of
    the cluster (``ok``), to an offered tool outside it (``off_cluster``) or to none (``unknown_tool``)."""
    tool = None
    if forced is not None and status in ("call", "no_call"):
        # the request left no choice: kept as a row, excluded from every rate
        did = f"called {name!r}" if status == "call" else "no call"
        status, raw = "forced", short(f"{forced}; {did}")
    elif status == "call":
        raw = name
        hit = res.match(key, ids, name) if isinstance(name, str) else None
        if hit is None:
            status = "unknown_tool"
        elif hit in in_cluster:
            tool, status = hit, "ok"
        else:
            status = "off_cluster"     # an offered tool outside the attempt's cluster
    return tool, status, raw


def _position(ordering, tool):
    """The chosen tool's position in the list shown, as SelectionLog derives it from ``ordering`` (worked out here
    once per combination instead of row by row there); None without a chosen tool or a list."""
    if tool is None or ordering is None:
        return None
    shown = str(ordering).split("|")
    return shown.index(tool) + 1 if tool in shown else None


def _resolve_row(res, sf, row, tools, status, name, raw, qid, text, label, forced, hint, no_list):
    """One attempt resolved on its own: ``((cluster, ordering, tool, status, raw), problem, how)``; the problem
    (naming the file, row and field) is None when the attempt resolves, and the row is None when it does not."""
    aliases, catalog = res.aliases, res.catalog
    where = label or f"line {row}"
    if no_list:
        a = Attempt(sf, row, tools, status, name, raw, query_id=qid, query_text=text, label=label, forced=forced,
                    cluster=hint, no_list=True)
        out, err = _row_without_list(a, aliases, where)
        return (None if out is None else (out[0], out[3], out[4], out[5], out[6])), err, None
    if not tools:
        return None, problem(sf, row, "tools", f"no tools offered ({where}): an attempt needs the request's tool "
                                               "list"), None
    key = tuple(tools)
    dup, ids, offered_clusters, ordering = res.info(key)
    if dup:
        return None, problem(sf, row, "tools", f"tool name(s) offered twice: {dup}"), None
    if not offered_clusters and any(i is not None for i in ids):   # shared tools, no cluster holds them all
        return None, _Unassigned(problem(sf, row, "tools",
                                         f"the tools offered {list(tools)} match no cluster of the {aliases.what} "
                                         f"({catalog.source}): no cluster holds all of them ({where})")), None
    if not offered_clusters:     # issue 36: kept out and counted (a study is refused only when nothing is left)
        return None, _Unassigned(problem(sf, row, "tools",
                                         f"none of the tools offered {list(tools)} is in the {aliases.what} "
                                         f"({catalog.source}); declare them in the manifest (`clusters = {{name = "
                                         "[...]}`) or use `clusters = \"infer\"`")), None
    # the attempt's cluster: the only cluster offered; else the query's (the record's cluster_id); else the
    # cluster of the chosen tool; else undecidable
    cid, err, how = None, None, None
    if len(offered_clusters) == 1:
        cid = offered_clusters[0]
        if hint is not None and str(hint) != cid:
            err = (f"the record's cluster_id {hint!r} is not the cluster of the tools offered "
                   f"({cid!r}; {where})")
    elif hint is not None:
        cid = str(hint)
        if cid not in offered_clusters:
            err = (f"the record's cluster_id {cid!r} is not among the clusters whose tools it offers "
                   f"{offered_clusters} ({where})")
        else:
            how = "hint"
    else:
        chosen = _match_offered(name, key, ids, aliases) if status == "call" else None
        if chosen is not None and aliases.index.of_tool(chosen, offered_clusters) is not None:
            cid = aliases.index.of_tool(chosen, offered_clusters)
            how = "choice"
        else:
            did = ("no tool was called" if status != "call" else
                   f"the call {name!r} is a tool of several of them" if chosen is not None else
                   f"the call {name!r} is not a tool of any of them")
            err = (f"the tools offered span several clusters {offered_clusters} and the query's cluster cannot "
                   f"be decided ({where}: no cluster_id in the record, and {did}); give each request a "
                   "`cluster_id` (a field or metadata key of the request)")
    if err is not None and hint is None:
        return None, _Unassigned(problem(sf, row, "tools", err)), None
    if err is not None:
        return None, problem(sf, row, "cluster_id", err), None
    in_cluster, err = res.fit(key, ids, cid)
    if err is not None:
        return None, problem(sf, row, "tools", err), None
    tool, status, raw = _classify(res, key, ids, in_cluster, status, name, forced, raw)
    return (cid, ordering, tool, status, raw), None, how


def _list_info(names: tuple, aliases) -> tuple:
    """What a tool list alone decides: the names offered twice, the catalog tool_id of each name (None: not in
    the catalog), the clusters offered (empty when no name is in the catalog) and the ordering string."""
    dup = [] if len(set(names)) == len(names) else sorted(n for n, c in Counter(names).items() if c > 1)
    ids = [aliases.resolve(n) for n in names]
    offered_clusters = aliases.index.of_shown(ids)
    ordering = "|".join(i if i is not None else n for n, i in zip(names, ids))
    return dup, ids, offered_clusters, ordering


def _fit(names: tuple, ids, cid, catalog, aliases, subsets) -> tuple:
    """``(the offered tools of cluster cid, error)``: without ``subsets`` the list must hold the whole cluster."""
    members = catalog.tools(cid)
    in_cluster = {i for i in ids if i is not None and i in aliases.index.members[cid]}
    if subsets or in_cluster == set(members):
        return in_cluster, None
    missing = [t for t in members if t not in in_cluster]
    return in_cluster, (f"the tool list changes within cluster {cid!r}: this request offers "
                        f"{[n for n, i in zip(names, ids) if i in in_cluster]} of it, "
                        f"the cluster has {members} (missing {missing}); give each tool list its own "
                        "cluster, or set `subsets = true` if subsets of a cluster were shown on purpose")


def _match_offered(name, offered, ids, aliases, offered_only=False):
    """tool_id of the called ``name`` when it is one of the offered catalog tools (exact, case-insensitive or
    after standardisation), else None (a name that was not offered is an ``unknown_tool``).

    ``offered_only``: also match offered names outside the catalog (returned as the name itself)."""
    if not isinstance(name, str):
        return None
    ids = [i if i is not None else (n if offered_only else None) for n, i in zip(offered, ids)]
    for n, i in zip(offered, ids):
        if n == name and i is not None:
            return i
    key = name.strip().lower()
    for n, i in zip(offered, ids):
        if n.lower() == key and i is not None:
            return i
    hit = aliases.resolve(name)
    return hit if hit is not None and hit in ids else None


#: Why delta_pos is null for attempts read without the list of tools offered (OTel spans without definitions).
NO_LIST_REASON = ("the order in which the tools were shown is unknown: the spans carry no gen_ai.tool.definitions "
                  "(opt-in in the instrumentation), so delta_pos cannot be computed; delta_API uses the declared "
                  "clusters")


def _row_without_list(a: Attempt, aliases, where):
    """The row of an attempt whose tool list is unknown (clusters declared): its cluster is the chosen tool's
    (or the record's cluster_id); no ordering, no position. A call to a name outside the clusters, or no call
    without a cluster_id, leaves the cluster undecidable: an error naming the record."""
    qid = a.query_id
    if qid is None:
        qid = query_key(a.query_text) if a.query_text else f"row{a.source_row}"
    hit = aliases.resolve(a.name) if a.status == "call" else None
    cid = str(a.cluster) if a.cluster is not None else (aliases.index.of_tool(hit) if hit is not None else None)
    if cid is None or cid not in aliases.index.members:
        did = ("no tool was called" if a.status != "call" else f"the call {a.name!r} is not a declared tool")
        return None, _Unassigned(problem(a.source_file, a.source_row, "gen_ai.tool.definitions",
                                         f"no tool definitions recorded and the cluster cannot be decided ({where}: "
                                         f"{did}, no cluster_id attribute)"))
    tool, raw, status = None, a.raw, a.status
    if a.forced is not None and status in ("call", "no_call"):
        status, raw = "forced", short(f"{a.forced}; {'called ' + repr(a.name) if status == 'call' else 'no call'}")
    elif status == "call":
        raw = a.name
        if hit is None:
            status = "unknown_tool"
        elif cid in aliases.index.clusters_of[hit]:
            tool, status = hit, "ok"
        else:
            status = "off_cluster"
    return (cid, qid, None, None, tool, status, raw, a.source_file, a.source_row), None


class _Aliases:
    """Offered tool names -> catalog tool_ids (exact id, then lower-case alias, then standardised)."""

    def __init__(self, catalog: ToolCatalog):
        tab = catalog.table
        self.ids = set(tab["tool_id"])
        self.aliases = catalog.aliases()
        #: the clusters of each tool (a tool id may be in several: a tournament's variants; issue 36)
        self.index = ClusterIndex(catalog)
        self.what = "declared clusters" if str(catalog.source).startswith("<") else "catalog"

    def resolve(self, name):
        if not isinstance(name, str):
            return None
        if name in self.ids:
            return name
        key = name.strip().lower()
        return self.aliases.get(key) or self.aliases.get(standardise_name(key))


# ---------------------------------------------------------------------------------------
# Requests joined to responses by custom_id (OpenAI and Anthropic batches)
def index_by_custom_id(lines: list[JsonLine], path: Path, what: str) -> tuple[dict, list[str]]:
    """``{custom_id: JsonLine}`` and problems (a line that is not an object, no ``custom_id``, duplicates).

    A malformed line is attributed by the ``custom_id`` found in its text when there is one (kept with its
    error); otherwise it is a problem naming the line.
    """
    out: dict = {}
    problems = []
    for jl in lines:
        cid = None
        if jl.error is None:
            if not isinstance(jl.value, dict):
                problems.append(problem(path, jl.line, None, f"expected a JSON object per line, got "
                                                            f"{type(jl.value).__name__}"))
                continue
            cid = jl.value.get("custom_id")
            if not isinstance(cid, str) or not cid:
                problems.append(problem(path, jl.line, "custom_id", f"missing or not a string: {cid!r}"))
                continue
        else:
            m = CUSTOM_ID_RE.search(jl.text)
            if m is None:
                why = ("the request cannot be read (no custom_id in its text)" if what == "request" else
                       "the line cannot be attributed to a request (no custom_id in its text)")
                problems.append(problem(path, jl.line, None, f"{jl.error}; {why}"))
                continue
            cid = json.loads(f'"{m.group(1)}"')
        if cid in out:
            problems.append(problem(path, jl.line, "custom_id", f"duplicate custom_id {cid!r} (first at line "
                                                                f"{out[cid].line})"))
            continue
        out[cid] = jl
    return out, problems


def join_batch(requests: Path, responses: Path, parse_request, parse_response, fmt: str,
               request_schema=None) -> list[Attempt]:
    """Join a batch's request file and its result file by ``custom_id``; one Attempt per request line.

    ``parse_request(obj, path, line) -> (Attempt, problem or None)`` gives the tools, query and forcing of a
    request line; ``parse_response(obj, attempt) -> None`` fills in what the model did. A request without a
    result line is a ``parse_error`` row (``raw_choice`` says so); a result without its request, a malformed
    request line, duplicate custom_ids and result lines that cannot be attributed are errors.
    """
    # Each request is parsed as soon as it is decoded, and each response as soon as its request is known, so
    # the decoded lines are not all held at once (most of the reading time went into allocating them); a line
    # keeps only its custom_id. What a line's parse raises is left to the join below, where it surfaced before
    # (after every problem of both files is known).
    parsed, done = {}, set()     # request line -> its Attempt; custom_ids whose response is already applied

    def early_request(value, line):
        if type(value) is dict:
            cid = value.get("custom_id")
            if type(cid) is str and cid:
                try:
                    parsed[line] = parse_request(value, requests, line)
                except Exception:
                    return value
                return {"custom_id": cid}
        return value

    req_lines = read_json_lines(requests, what="request file", typed=request_schema, convert=early_request)
    req_index, problems = index_by_custom_id(req_lines, requests, "request")

    def early_response(value, line):
        if type(value) is dict:
            cid = value.get("custom_id")
            if type(cid) is str and cid and cid not in done:
                req = req_index.get(cid)
                att = parsed.get(req.line) if req is not None and req.error is None else None
                if att is not None and att.status != "parse_error":
                    saved = att.__dict__.copy()
                    try:
                        parse_response(value, att)
                    except Exception:
                        att.__dict__.update(saved)
                        return value
                    done.add(cid)
                    return {"custom_id": cid}
        return value

    res_lines = read_json_lines(responses, what="response file", convert=early_response)
    for cid, jl in req_index.items():
        if jl.error is not None:
            problems.append(problem(requests, jl.line, None, f"{jl.error} (custom_id {cid!r}); the request's tool "
                                                            "list cannot be read"))
    res_index, res_problems = index_by_custom_id(res_lines, responses, "response")
    problems += res_problems
    for cid, jl in res_index.items():
        if cid not in req_index:
            problems.append(problem(responses, jl.line, "custom_id",
                                    f"response for custom_id {cid!r} has no request in {requests}"))
    if problems:
        raise SelectionLogError(problems)
    attempts = []
    for cid, jl in req_index.items():
        att = parsed.pop(jl.line, None)
        if att is None:
            att = parse_request(jl.value, requests, jl.line)
        att.label = f"custom_id {cid!r}"
        res = res_index.get(cid)
        if res is None:
            att.status, att.raw = "parse_error", f"no response for custom_id {cid!r} in {Path(responses).name}"
            att.flags += ("missing_response",)
        elif res.error is not None:
            att.status = "parse_error"
            att.raw = f"{Path(responses).name}:{res.line}: {res.error}"
            att.flags += ("malformed_response",)
        elif att.status != "parse_error" and cid not in done:
            parse_response(res.value, att)
        attempts.append(att)
    attempts.sort(key=lambda a: a.source_row)
    return attempts


@dataclass(frozen=True)
class BatchShape:
    """How a reader reads the *plain* lines of a batch: the shape nearly every line of a real batch has, decoded
    into msgspec Structs of only the fields read (tool descriptions and schemas are skipped).

    ``request`` / ``response``: msgspec decoders of a request / result line. ``read_request(line)`` gives
    ``(custom_id, tool names (tuple), query_id, query text, cluster_id, forcing, model)``
    (``read_request(line, lists)``, ``lists`` a dict the reader may keep what it works out per distinct tool list
    in) and ``read_response(line)`` gives ``(status, name, raw, n_calls, flags added)`` (``KEEP``: the request's
    value stays), exactly what the reader's ``parse_request`` / ``parse_response`` give for that line; either
    returns None for a line it does not read the same way (a forcing ``tool_choice`` object, an HTTP error, an
    empty name ...): that line is then decoded in full and parsed as before.
    """

    request: object
    read_request: object
    response: object
    read_response: object


def batch_shape(line, output, read_request, read_response) -> BatchShape:
    """The :class:`BatchShape` of a reader: msgspec Struct types of a plain request / result line and the reads."""
    return BatchShape(_msgspec.json.Decoder(line), read_request, _msgspec.json.Decoder(output), read_response)


#: Most distinct tool-list texts :func:`tool_names` keeps (beyond, each further one is decoded every time).
_MAX_LISTS = 65_536


def tool_names(raw, lists: dict, decoder, names):
    """``names(decoder.decode(raw))`` of a tool list's JSON text (a ``msgspec.Raw``), worked out once per distinct
    text (kept in ``lists``). A text the decoder refuses raises (the line is then not plain)."""
    key = bytes(raw)
    hit = lists.get(key)
    if hit is None:
        hit = names(decoder.decode(raw))
        if len(lists) < _MAX_LISTS:
            lists[key] = hit
    return hit


#: In :class:`BatchShape` results: the field is left as the request set it.
KEEP = object()


def _batch_lines(path: Path, what: str):
    check_regular_file(path, what)
    return _file_lines(path)


def read_batch_columns(requests: Path, responses: Path, shape, parse_request, parse_response):
    """The attempts of a batch (requests joined to results by ``custom_id``) as :class:`AttemptColumns`, or None.

    The fast way of :func:`join_batch` for a batch without problems: each line is decoded by ``shape``'s
    Structs (or in full, when it is not plain) and kept as a few values, results are matched to requests by
    position, and the attempts are built as columns. Whenever anything is not ordinary -- a line that does not
    decode, is not an object or has no custom_id, a duplicate custom_id, a result without its request, a parse
    that raises, an empty or unreadable file, no msgspec -- it returns None and :func:`join_batch` reads the
    batch (it words every problem). The attempts are exactly those :func:`join_batch` gives.
    """
    if _msgspec is None or shape is None:
        return None
    try:
        req_pieces, req_open = _batch_lines(requests, "request file")
        res_pieces, res_open = _batch_lines(responses, "response file")
    except SelectionLogError:
        return None
    src = str(requests)
    read = _batch_requests(req_pieces, req_open, shape, parse_request, requests)
    if read is None:
        return None
    index, reqs, rows, unusual = read
    cids, tools, qids, qtexts, clusters, forced, models = reqs
    if None in models:       # a request without `model`: the response names it (read line by line)
        return None
    n = len(cids)
    # what the model did, as parse_request leaves it, then as the results say
    outcome = _Outcome(n, unusual)
    got = _batch_results(res_pieces, res_open, shape, parse_response, index, reqs, rows, outcome, src)
    if got is None:
        return None
    status, texts, flags = outcome.status, outcome.texts, outcome.flags
    if got.count(1) < n:
        where = Path(responses).name
        for pos in range(n):
            if not got[pos]:
                status[pos] = "parse_error"
                texts[pos] = f"no response for custom_id {cids[pos]!r} in {where}"
                flags[pos] += ("missing_response",)
    return AttemptColumns(source_file=[src] * n, source_row=rows, tools=tools, status=status, name=outcome.names,
                          raw=texts, n_calls=outcome.n_calls, query_id=qids, query_text=qtexts,
                          label=_CustomIdLabels(cids), flags=flags, forced=forced, cluster=clusters,
                          no_list=[False] * n, model=models, group=[None] * n)


def _shallow(raw: bytes) -> bool:
    """Whether a line has at most ``_FAST_MAX_BRACKETS`` brackets (a shorter line cannot have more)."""
    return len(raw) <= _FAST_MAX_BRACKETS or raw.count(b"[") + raw.count(b"{") <= _FAST_MAX_BRACKETS


def _plain_reads(pieces: list, decode, plain, *extra) -> list:
    """``plain(decode(line), *extra)`` of every line (None where the line is deep, does not decode into the
    plain shape or is declined): one tight pass, the lines that are not plain are read one by one after."""
    out: list = []
    append = out.append
    limit = _FAST_MAX_BRACKETS
    for raw in pieces:
        if len(raw) <= limit or raw.count(b"[") + raw.count(b"{") <= limit:
            try:
                append(plain(decode(raw), *extra))
                continue
            except FAST_ERRORS:
                pass
        append(None)
    return out


def _batch_requests(pieces: list, open_end: bool, shape, parse_request, requests: Path):
    """``(index, reqs, rows, unusual)`` of a batch's request lines, or None when one is not ordinary.

    ``index``: custom_id -> position; ``reqs``: the columns ``(custom_ids, tools, query_ids, query texts,
    clusters, forcings, models)`` (lists, one entry per request); ``rows``: each request's line; ``unusual``:
    position -> the Attempt of a request that is not plain."""
    lists: dict = {}                        # tool names by the text of a tool list
    recs = _plain_reads(pieces, shape.request.decode, shape.read_request, lists)
    unusual: dict[int, Attempt] = {}
    if None in recs:                        # lines that are not plain (or blank): read one by one, in place
        kept: list = []
        rows: list[int] = []
        for i, rec in enumerate(recs):
            if rec is None:
                jl = _line(pieces, i, open_end)
                if jl is None:              # a blank line: no request, its number is skipped
                    continue
                att = _unusual_request(jl, parse_request, requests)
                if att is None:
                    return None
                unusual[len(kept)] = att
                rec = (cast(dict, jl.value)["custom_id"], att.tools, att.query_id, att.query_text, att.cluster,
                       att.forced, att.model)
            kept.append(rec)
            rows.append(i + 1)
        recs = kept
    else:
        rows = list(range(1, len(recs) + 1))
    if not recs:
        return None
    reqs = [list(c) for c in zip(*recs)]
    index = dict(zip(reqs[0], range(len(recs))))
    if len(index) < len(recs):              # a custom_id twice (join_batch words it)
        return None
    return index, reqs, rows, unusual


def _unusual_request(jl: JsonLine, parse_request, requests: Path) -> Attempt | None:
    """The Attempt of a request line decoded in full, or None when it is not an object with a custom_id or its
    parse raises (:func:`join_batch` then words it)."""
    value = jl.value
    if jl.error is not None or type(value) is not dict:
        return None
    cid = value.get("custom_id")
    if type(cid) is not str or not cid:
        return None
    try:
        return parse_request(value, requests, jl.line)
    except Exception:
        return None


class _Outcome:
    """What the model did in each request of a batch, as parallel lists (as ``parse_request`` leaves it, then as
    the results say)."""

    __slots__ = ("flags", "n_calls", "names", "status", "texts")

    def __init__(self, n: int, unusual: dict):
        self.status: list[str] = ["no_call"] * n
        self.names: list[str | None] = [None] * n
        self.texts: list[str | None] = [None] * n
        self.n_calls: list[int] = [0] * n
        self.flags: list[tuple] = [()] * n
        for pos, att in unusual.items():
            self.set(pos, att)

    def set(self, pos: int, att: Attempt) -> None:
        self.status[pos], self.names[pos], self.texts[pos], self.n_calls[pos], self.flags[pos] = (
            att.status, att.name, att.raw, att.n_calls, att.flags)


def _plain_result_reads(pieces: list, decode, plain) -> list:
    """As :func:`_plain_reads` for result lines, each kept with its custom_id: ``(custom_id, plain(line))``, None
    where the line is deep, does not decode into the plain shape or ``plain`` declines it."""
    out: list = []
    append = out.append
    limit = _FAST_MAX_BRACKETS
    for raw in pieces:
        if len(raw) <= limit or raw.count(b"[") + raw.count(b"{") <= limit:
            try:
                line = decode(raw)
                read = plain(line)
                if read is not None:
                    append((line.custom_id, read))
                    continue
            except FAST_ERRORS:
                pass
        append(None)
    return out


def _batch_results(pieces: list, open_end: bool, shape, parse_response, index: dict, reqs: list, rows: list,
                   outcome: _Outcome, src: str):
    """Apply a batch's result lines to ``outcome``; the ``bytearray`` of requests that got a result, or None when a
    line is not ordinary (not an object with a custom_id, no request, twice, a parse that raises, no result).
    ``reqs``: the request columns of :func:`_batch_requests`."""
    status, names, texts, n_calls, flags = outcome.status, outcome.names, outcome.texts, outcome.n_calls, outcome.flags
    got = bytearray(len(rows))
    reads = _plain_result_reads(pieces, shape.response.decode, shape.read_response)
    n_res = 0
    for i, read in enumerate(reads):
        if read is not None:
            cid, out = read
        else:
            jl = _line(pieces, i, open_end)
            if jl is None:
                continue
            value = jl.value
            cid = value.get("custom_id") if jl.error is None and type(value) is dict else None
            if type(cid) is not str or not cid:
                return None
            out = None
        n_res += 1
        pos = index.get(cid)
        if pos is None or got[pos]:
            return None
        got[pos] = 1
        if status[pos] == "parse_error":        # the request's own error stands; its result is not read
            continue
        if out is None:
            att = Attempt(src, rows[pos], reqs[1][pos], status[pos], names[pos], texts[pos], n_calls[pos],
                          reqs[2][pos], reqs[3][pos], "", flags[pos], reqs[5][pos], reqs[4][pos],
                          model=reqs[6][pos])
            try:
                parse_response(value, att)
            except Exception:
                return None
            outcome.set(pos, att)
        else:
            st, name, text, k, added = out
            status[pos] = st
            if name is not KEEP:
                names[pos] = name
            if text is not KEEP:
                texts[pos] = text
            if k is not KEEP:
                n_calls[pos] = k
            if added:
                flags[pos] += added
    return got if n_res else None


class _CustomIdLabels:
    """``label[i]`` of a batch attempt: ``custom_id '...'`` (worded only when a message needs it)."""

    def __init__(self, cids):
        self.cids = cids

    def __getitem__(self, i):
        return f"custom_id {self.cids[i]!r}"

    def __len__(self):
        return len(self.cids)


def _is_conversation(value, turns) -> bool:
    """A conversation record (issue 36): ``{"messages": [...], "tools": [...]}`` without a ``request``."""
    return (turns is not None and isinstance(value, dict) and "request" not in value
            and isinstance(value.get("messages"), list))


def read_pairs(path: Path, parse_request, parse_response, fmt: str, turns=None) -> list[Attempt]:
    """One JSONL of ``{"request": ..., "response": ...}`` objects; a malformed line is an error (its tool list
    cannot be read); ``response`` null or absent is a ``parse_error`` row. ``turns(record)``: the reader's
    assistant turns of a conversation record (``{"messages", "tools"}``, see :func:`conversation_attempts`)."""
    lines = read_json_lines(path, what="log file")
    problems = []
    for jl in lines:
        if jl.error is not None:
            problems.append(problem(path, jl.line, None, f"{jl.error}; the record's tool list cannot be read"))
        elif _is_conversation(jl.value, turns):
            continue
        elif not isinstance(jl.value, dict) or not isinstance(jl.value.get("request"), dict):
            problems.append(problem(path, jl.line, "request", "expected an object with a `request` object (and "
                                                              "its `response`)" + (
                                                                  ", or a conversation with `messages` and `tools`"
                                                                  if turns is not None else "")))
    if problems:
        raise SelectionLogError(problems)
    attempts = []
    for jl in lines:
        rec = cast(dict, jl.value)    # every value is an object (checked above)
        if _is_conversation(rec, turns):
            attempts += conversation_attempts(path, jl.line, rec, turns(rec))
            continue
        att = parse_request(rec["request"], path, jl.line, record=rec)
        att.label = f"line {jl.line}"
        res = rec.get("response")
        if att.status == "parse_error":
            pass
        elif res is None:
            err = rec.get("error")
            att.status = "parse_error"
            att.raw = short(f"api_error: {_error_text(err)}") if err else "no response recorded"
            att.flags += ("api_error",) if err else ("missing_response",)
        else:
            parse_response(res, att)
        attempts.append(att)
    return attempts


#: The batch last read by :func:`read_offered` (a study inferring its clusters reads the offered lists just before
#: the rows), handed to :func:`read_request_log` once if the files are unchanged: a batch is decoded once, not
#: twice (issue 37: ``validate`` of 100,000 requests). ``{key: AttemptColumns}``, at most one entry.
_HANDOFF: dict = {}


def _handoff_key(requests, responses, shape, parse_request, parse_response):
    """What identifies a batch read: both files (path, size, modification time) and the parsing functions."""
    try:
        files = tuple((str(Path(p).resolve()), st.st_size, st.st_mtime_ns, st.st_ino)
                      for p, st in ((p, Path(p).stat()) for p in (requests, responses)))
    except OSError:
        return None
    return files + (id(shape), parse_request, parse_response)


def read_request_log(path, *, fmt: str, parse_request, parse_response, catalog, meta, responses, clusters,
                     subsets, request_schema=None, batch=None, model_override: bool = False,
                     turns=None) -> SelectionLog:
    """The shared wiring of the request/response readers (``openai``, ``anthropic``): read the attempts
    (:func:`read_attempts`), resolve the clusters from the tool lists offered (a catalog, declared clusters or
    inferred ones) and build the log; the cluster source and the responses file go into the diagnostics.
    ``batch``: the reader's :class:`BatchShape` (a batch is then read column by column, see
    :func:`read_batch_columns`)."""
    from ._clusters import catalog_for

    path = Path(path)
    check_meta(meta, path, model_required=False)
    with paused_gc():
        cols = None
        if responses is not None:
            key = _handoff_key(path, responses, batch, parse_request, parse_response)
            cols = _HANDOFF.pop(key, None) if key is not None else None
            _HANDOFF.clear()
            if cols is None:
                cols = read_batch_columns(path, Path(responses), batch, parse_request, parse_response)
        if cols is None:
            cols = AttemptColumns.from_attempts(read_attempts(path, responses, parse_request, parse_response, fmt,
                                                              request_schema=request_schema, turns=turns))
        cs = catalog_for(cols.offered(), catalog=catalog, clusters=clusters)
        return build_log(cols, catalog=cs.catalog, meta=meta, source=path, fmt=fmt, subsets=subsets,
                         extra_diagnostics={"cluster_source": str(cs),
                                            "responses": None if responses is None else str(responses)},
                         model_override=model_override)


def read_attempts(path, responses, parse_request, parse_response, fmt: str, request_schema=None,
                  turns=None) -> list[Attempt]:
    """The attempts of a request/response log before cluster resolution: a batch (request file + ``responses``
    file joined by ``custom_id``) or one JSONL of ``{"request", "response"}`` records. ``request_schema``: the
    typed decoder of a batch's request lines (:func:`typed_decoder`)."""
    path = Path(path)
    if responses is not None:
        return join_batch(path, Path(responses), parse_request, parse_response, fmt, request_schema)
    return read_pairs(path, parse_request, parse_response, fmt, turns)


def read_offered(path, responses, parse_request, parse_response, fmt: str, request_schema=None,
                 batch=None, turns=None) -> list[tuple]:
    """``(tool names offered, file, line)`` of the first request showing each distinct tool list of a
    request/response log (for inferring clusters, which reads nothing else): a batch read column by column
    (:func:`read_batch_columns`) when it can be, else :func:`read_attempts`."""
    with paused_gc():
        cols = None
        _HANDOFF.clear()
        if responses is not None:
            cols = read_batch_columns(Path(path), Path(responses), batch, parse_request, parse_response)
            key = _handoff_key(path, responses, batch, parse_request, parse_response)
            if cols is not None and key is not None:
                _HANDOFF[key] = cols
        if cols is None:
            return offered_lists(read_attempts(path, responses, parse_request, parse_response, fmt,
                                               request_schema=request_schema, turns=turns))
        return cols.offered()


@dataclass
class Turn:
    """One assistant turn of a conversation record, as a reader reads it (issue 36)."""

    #: names of the tools offered at this turn (None: the record's ``tools``)
    tools: list | None
    #: names of the tools the turn calls, in order (empty: a text turn)
    calls: list
    #: the turn's text (audit text of a ``no_call``)
    text: str | None = None


@dataclass
class Conversation:
    """What a reader reads of a conversation record: the record's tools, its assistant turns, query and model."""

    tools: list | None
    turns: list
    query_text: str | None = None
    query_id: str | None = None
    cluster: str | None = None
    model: str | None = None


def conversation_attempts(path: Path, line: int, rec: dict, conv: Conversation) -> list[Attempt]:
    """The attempts of a conversation record (issue 36): each assistant turn that calls a tool is an attempt with
    the tools offered at that turn; a text turn before any call is a ``no_call`` attempt; a text turn after a call
    (the closing answer of an agent loop) is not an attempt (the previous attempt is flagged
    ``closing_text_turn``, so the notes count them). The turns of one record share its query and are one group."""
    out: list[Attempt] = []
    called = False
    for k, turn in enumerate(conv.turns, start=1):
        if not turn.calls and called:
            if out:
                out[-1].flags += ("closing_text_turn",)
            continue
        tools = turn.tools if turn.tools is not None else conv.tools
        att = Attempt(str(path), line, None if tools is None else list(tools), "no_call",
                      label=f"line {line}, assistant turn {k}", query_id=conv.query_id, query_text=conv.query_text,
                      cluster=conv.cluster, model=conv.model, group=f"{path}:{line}", n_calls=len(turn.calls))
        att.flags += ("conversation_turn",)
        if turn.calls:
            called = True
            name = turn.calls[0]
            if not isinstance(name, str) or not name.strip():
                att.status, att.raw = "parse_error", short(name)
            else:
                att.status, att.name = "call", name
        else:
            att.raw = short(turn.text)
        out.append(att)
    return out


def offered_lists(attempts: list[Attempt]) -> list[tuple]:
    """``(tool names offered, file, line)`` of the first attempt showing each distinct list (attempts without a
    list left out; see :meth:`AttemptColumns.offered`): all that cluster inference reads."""
    return AttemptColumns.from_attempts(attempts).offered()


def _error_text(err) -> str:
    if isinstance(err, dict):
        inner = err.get("error")
        if not isinstance(inner, dict):
            inner = err
        parts = [str(inner.get(k)) for k in ("code", "type", "message") if inner.get(k)]
        return ": ".join(parts) if parts else json.dumps(err, ensure_ascii=False)
    return str(err)


def api_error(att: Attempt, err) -> None:
    """Mark ``att`` as an API error (``parse_error``; ``raw_choice`` = ``api_error: code: message``)."""
    att.status = "parse_error"
    att.raw = short(f"api_error: {_error_text(err)}")
    att.flags += ("api_error",)


def record_field(key, *objs):
    """``key`` of the first of ``objs`` that has it, directly or in its ``metadata`` (as a string); else None."""
    for o in objs:
        if not isinstance(o, dict):
            continue
        if o.get(key) is not None:
            return str(o[key])
        md = o.get("metadata")
        if isinstance(md, dict) and md.get(key) is not None:
            return str(md[key])
    return None


def assistant_turns(messages, names, calls_of) -> tuple[list[Turn], str | None]:
    """Every assistant message of a conversation as a :class:`Turn`, and the text of the first user message.

    ``names(tools)`` gives the tool names of a ``tools`` list (None: the message has none of its own) and
    ``calls_of(message)`` the names an assistant message calls, in each provider's own shape (issue 36)."""
    turns, first_user = [], None
    for m in messages:
        if not isinstance(m, dict):
            continue
        if m.get("role") == "user" and first_user is None:
            first_user = message_text(m.get("content"))
        if m.get("role") == "assistant":
            turns.append(Turn(names(m.get("tools")), calls_of(m), message_text(m.get("content"))))
    return turns, first_user


def message_text(content) -> str | None:
    """Plain text of a message ``content``: a string, or the text of its text parts (OpenAI, Anthropic, OTel)."""
    if content is None:
        return None
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for p in content:
            if isinstance(p, str):
                parts.append(p)
            elif isinstance(p, dict) and p.get("type") in ("text", "input_text", "output_text"):
                t = p.get("text", p.get("content"))
                if isinstance(t, str):
                    parts.append(t)
        return "\n".join(parts) if parts else None
    return None
