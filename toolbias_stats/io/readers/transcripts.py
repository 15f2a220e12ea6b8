"""Reader for raw agent transcripts: ReAct text files, or JSONL of OpenAI / Anthropic responses.

The chosen tool of an attempt is its **first** tool call. The reader turns each transcript into
one SelectionLog row; calls that cannot be resolved stay in the log with a status saying why.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from ..._schema import standardise_name
from ...exceptions import SelectionLogError, problem
from .._catalog import ToolCatalog
from .._selection_log import SelectionLog
from ._clusters import ClusterIndex
from ._common import add_meta, check_meta, unassigned_rows, utf8_message, utf8_position
from .table import read_jsonl

if TYPE_CHECKING:
    from ._common import Meta, PathLike

__all__ = ["read_transcripts"]

#: Suffix of the transcript files read from a folder.
TRANSCRIPT_SUFFIX = ".txt"
#: Suffixes of JSON Lines transcript files.
JSONL_SUFFIXES = (".jsonl", ".ndjson")

# An "Action" marker: the word at the start of a line (after blanks or markdown decoration) or
# followed by a colon anywhere, but not "Action Input" / "Action Result" / "Action Output".
_MARKER = re.compile(
    r"(?:^[^\S\n]*[>*#_`-]*[^\S\n]*action\b|\baction[^\S\n]*(?=:))(?![^\S\n]*(?:input|result|output)\b)",
    re.IGNORECASE | re.MULTILINE,
)
_FINISH = re.compile(r"^[\W_]*finish\b", re.IGNORECASE)
_NAME_STRIP = " \t:*`'\"“”‘’"
#: Keys of a JSONL record that show it is a model response (or a message of one).
_RESPONSE_KEYS = ("choices", "message", "tool_calls", "function_call", "content", "output")


def read_transcripts(path: PathLike, *, catalog: ToolCatalog, meta: Meta = None,
                     cluster: str | None = None) -> SelectionLog:
    """Read raw transcripts into a SelectionLog, one row per attempt.

    Parameters
    ----------
    path : path-like
        Either a **folder** of ReAct text transcripts (``Thought / Action / Action Input``), one
        attempt per ``*.txt`` file, or a **JSON Lines file** (``.jsonl`` / ``.ndjson``), one
        attempt per non-blank line.
    catalog : ToolCatalog
        The tools whose names are recognised.
    meta : dict
        Design metadata for every row: ``model`` (required), ``run``, ``condition`` and extra
        scalar keys (the manifest entry).
    cluster : str, optional
        The cluster the transcripts belong to (manifest key ``cluster``). When given, only that
        cluster's tool names are matched and every row gets this ``cluster_id``. When omitted,
        names are matched against the whole catalog and ``cluster_id`` is the matched tool's
        cluster (JSONL: the record's ``cluster_id`` when present).

    Returns
    -------
    SelectionLog
        ``diagnostics[str(path)]`` holds ``{"format": "react" | "jsonl", "attempts": n,
        "status": Counter of statuses, "unresolved": Counter of the raw names of
        ``unknown_tool`` rows}``.

    Raises
    ------
    SelectionLogError
        A missing path, a path that is neither a folder nor a JSONL file, a folder without
        ``*.txt`` files, a file that is not UTF-8, a malformed JSONL line (named by file and
        line), a JSONL line that is not a JSON object, a record whose ``tools`` do not resolve
        or whose ``cluster_id`` disagrees with ``cluster``, an unknown ``cluster``, a row whose
        cluster cannot be told (see Notes), or an invalid ``meta``.

    Notes
    -----
    **ReAct folders.** Files ``*.txt`` are read in name order; ``query_id`` is the file stem,
    ``source_file`` the folder and ``source_row`` the 1-based index of the file in that order.
    The text does not show the candidate list, so ``rotation``, ``ordering`` and
    ``chosen_position`` are null. Per file:

    1. The *Action marker* is the first case-insensitive ``Action`` that starts a line or is
       followed by a colon, not counting ``Action Input`` / ``Action Result``. None ->
       ``parse_error`` (``raw_choice`` = the first non-blank line).
    2. The *action name* is the text after the marker on its line, or, if that is blank, the
       next non-blank line unless it is itself an ``Action ...`` line. If it starts with
       ``Finish`` -> ``no_call``.
    3. Otherwise the chosen tool is the first catalog name found anywhere after the marker
       (the BiasBusters rule): a ``tool_id``, a ToolBench function name or a bare standardised
       tool name (:meth:`ToolCatalog.aliases`), matched case-insensitively as a substring whose
       neighbours are not letters or digits (``_`` counts as a separator, so
       ``detect_language_for_translate_v3`` contains ``translate_v3``). The earliest match wins,
       the longest name on ties -> ``ok``, ``raw_choice`` = the matched text.
    4. No catalog name: an empty action name -> ``parse_error`` (``raw_choice`` = the first 200
       characters from the marker on); otherwise ``unknown_tool`` with ``raw_choice`` = the
       action name.

    **JSONL files.** ``source_file`` is the file and ``source_row`` the line number. A record
    may carry ``query_id`` (default: the line number), ``cluster_id``, ``rotation`` and
    ``tools``, the tool names shown, in order (strings, ``{"name": ...}`` or OpenAI tool specs
    ``{"function": {"name": ...}}``); with ``tools`` the names are resolved to tool_ids and
    become ``ordering``, so ``chosen_position`` is known. The response is looked up as
    ``choices[0].message``, ``message``, or the record itself, and its first tool call is:

    - OpenAI: ``tool_calls[0].function.name`` (or legacy ``function_call.name``);
    - Anthropic: the first ``content`` block with ``"type": "tool_use"`` (its ``name``);
    - OpenAI Responses: the first ``output`` item with ``"type": "function_call"``.

    A response without a tool call (empty ``tool_calls``, text-only ``content``) -> ``no_call``;
    a tool call without a usable name -> ``parse_error``; a name that is not a catalog alias
    (exact, case-insensitive, or after standardisation) -> ``unknown_tool`` with the raw name.
    *Decision:* a JSON **object** with none of the response keys (``choices``, ``message``,
    ``tool_calls``, ``function_call``, ``content``, ``output``), such as a logged API error
    ``{"error": ...}``, is still an attempt: it becomes a ``parse_error`` row with the line as
    ``raw_choice`` rather than aborting the study. A line that is not JSON, or JSON that is
    not an object, is malformed input and raises.

    **Cluster of a row.** ``cluster`` if given; else (JSONL) the record's ``cluster_id``; else
    the cluster of the resolved ``tools``; else the cluster of the chosen tool. A row with
    none of these (a ``no_call``, ``unknown_tool`` or ``parse_error`` row read without
    ``cluster``) cannot be placed and raises, asking for ``cluster`` in the manifest entry.

    Examples
    --------
    The 500 bundled ReAct transcripts of Qwen3-8B-Base (BiasBusters' base-model probe, cluster 8):

    >>> import toolbias_stats as tbs
    >>> cat = tbs.read_biasbusters_catalog(tbs.datasets.path("biasbusters/clusters.json"))
    >>> log = read_transcripts(tbs.datasets.path("biasbusters/transcripts/base_model"), catalog=cat,
    ...                        meta={"model": "Qwen3-8B-Base"}, cluster="8")
    >>> round((log.data["chosen_tool"] == "v1_textlanguage_for_text_language_by_api_ninjas").mean(), 3)
    0.006
    """
    path = Path(path)
    meta = check_meta(meta, path)
    if cluster is not None:
        cluster = _id_str(cluster)
        if cluster not in catalog.clusters:
            raise SelectionLogError(problem(path, None, "cluster", f"unknown cluster {cluster!r} (catalog "
                                                                   f"{catalog.source} has {catalog.clusters})"))
    if not path.exists():
        raise SelectionLogError(problem(path, None, None, "file or folder not found"))
    if path.is_dir():
        fmt, rows = "react", _read_react_folder(path, catalog, cluster)
    elif path.suffix.lower() in JSONL_SUFFIXES:
        fmt, rows = "jsonl", _read_jsonl(path, catalog, cluster)
    else:
        raise SelectionLogError(problem(path, None, None, "expected a folder of ReAct *.txt transcripts or a "
                                                          f".jsonl/.ndjson file; got {path.name!r} instead"))
    frame = pd.DataFrame(rows, columns=["cluster_id", "query_id", "rotation", "ordering", "chosen_tool",
                                        "status", "raw_choice", "source_file", "source_row"])
    frame["source_row"] = frame["source_row"].astype(np.int64)
    frame = add_meta(frame, meta)
    unresolved = Counter(frame.loc[frame["status"] == "unknown_tool", "raw_choice"])
    diagnostics = {str(path): {"format": fmt, "attempts": len(frame), "status": Counter(frame["status"]),
                               "unresolved": unresolved, "cluster": cluster}}
    un = unassigned_rows(frame, path, "set `cluster` in the manifest entry (or pass cluster=...)")
    if un is not None:
        diagnostics[str(path)]["unassigned"] = un
    return SelectionLog.from_frame(frame, catalog, diagnostics=diagnostics, source=str(path))


# ---------------------------------------------------------------------------------------
# matching
class _Matcher:
    """Catalog names of one scope (a cluster or the whole catalog), as one regex."""

    def __init__(self, catalog: ToolCatalog, cluster, index: ClusterIndex | None = None):
        self.aliases = catalog.aliases(cluster)
        names = sorted(self.aliases, key=lambda n: (-len(n), n))
        # Longest first, so that at the leftmost match position the longest name wins.
        self.pattern = re.compile(
            r"(?<![A-Za-z0-9])(?:" + "|".join(re.escape(n) for n in names) + r")(?![A-Za-z0-9])", re.IGNORECASE
        )
        #: the clusters of every tool (a tool may be in several clusters: a tournament; issue 36)
        self.index = index if index is not None else ClusterIndex(catalog)

    def cluster_of(self, tool) -> str | None:
        """The one cluster of ``tool``; None when it is in several (the tools shown decide then)."""
        return self.index.of_tool(tool)

    def cluster_of_shown(self, ids, names) -> tuple[str | None, str | None]:
        """``(cluster, problem)`` of a list of tools shown (catalog ids): the one cluster the set shown belongs to
        (:class:`~toolbias_stats.io._clusters.ClusterIndex`), else a message naming the set and the clusters."""
        found = self.index.of_shown(ids)
        if len(found) == 1:
            return found[0], None
        if not found:
            return None, f"the tools shown {list(names)} match no cluster of the catalog (no cluster holds them all)"
        return None, f"the tools shown {list(names)} span several clusters: {found}"

    def search(self, text: str):
        """First catalog name in ``text``: (tool_id, matched text) or None."""
        m = self.pattern.search(text)
        return None if m is None else (self.aliases[m.group(0).lower()], m.group(0))

    def resolve(self, name: str):
        """Exact (case-insensitive) alias lookup, then after standardisation; tool_id or None."""
        key = name.strip().lower()
        return self.aliases.get(key) or self.aliases.get(standardise_name(key))


def parse_react(text: str, matcher: _Matcher) -> tuple[str, str | None, str | None]:
    """Classify one ReAct transcript; returns ``(status, tool_id, raw_choice)`` (rules in read_transcripts)."""
    marker = _MARKER.search(text)
    if marker is None:
        first = next((ln.strip() for ln in text.splitlines() if ln.strip()), None)
        return "parse_error", None, first
    rest = text[marker.end():]
    name = _action_name(rest)
    if _FINISH.match(name):
        return "no_call", None, name
    hit = matcher.search(rest)
    if hit is not None:
        return "ok", hit[0], hit[1]
    if not name:
        # an Action with no name: keep the start of the action block for audit
        return "parse_error", None, text[marker.start():marker.start() + 200].strip()
    return "unknown_tool", None, name


def _action_name(rest: str) -> str:
    lines = rest.split("\n")
    name = lines[0].strip(_NAME_STRIP)
    if name:
        return name
    nxt = next((ln for ln in lines[1:] if ln.strip()), "")
    if re.match(r"^[\W_]*action\b", nxt, re.IGNORECASE):
        return ""
    return nxt.strip(_NAME_STRIP)


# ---------------------------------------------------------------------------------------
# ReAct folders
def _read_react_folder(path: Path, catalog: ToolCatalog, cluster) -> list[tuple]:
    files = sorted((p for p in path.iterdir() if p.is_file() and p.suffix.lower() == TRANSCRIPT_SUFFIX
                    and not p.name.startswith(".")), key=lambda p: p.name)
    if not files:
        raise SelectionLogError(problem(path, None, None, f"no *{TRANSCRIPT_SUFFIX} transcript files in this folder"))
    matcher = _Matcher(catalog, cluster)
    rows, problems = [], []
    for i, f in enumerate(files, start=1):
        try:
            text = f.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            problems.append(problem(path, i, f.name, utf8_message(utf8_position(f))))
            continue
        status, tool, raw = parse_react(text, matcher)
        cid = cluster if cluster is not None else (matcher.cluster_of(tool) if tool is not None else None)
        if cid is None and status == "ok":   # a tool of several clusters and nothing naming the cluster
            status, tool = "off_cluster", None
        # issue 36: an attempt whose cluster cannot be decided is a row without a cluster, excluded by its status
        rows.append((cid, f.stem, None, None, tool, status, raw, str(path), i))
    if problems:
        raise SelectionLogError(problems)
    return rows


# ---------------------------------------------------------------------------------------
# JSONL responses
def _read_jsonl(path: Path, catalog: ToolCatalog, cluster) -> list[tuple]:
    records: list[tuple[int, Any]] = read_jsonl(path)
    problems = [problem(path, ln, None, f"expected a JSON object per line, got {type(r).__name__}")
                for ln, r in records if not isinstance(r, dict)]
    if problems:
        raise SelectionLogError(problems)
    matchers: dict = {}
    index = ClusterIndex(catalog)   # one index of the catalog's clusters for every scope (there may be thousands)

    def matcher(cid):
        if cid not in matchers:
            matchers[cid] = _Matcher(catalog, cid, index)
        return matchers[cid]

    rows = []
    for line, rec in records:
        cid = cluster
        if "cluster_id" in rec and rec["cluster_id"] is not None:
            rec_cid = _id_str(rec["cluster_id"])
            if cluster is not None and rec_cid != cluster:
                problems.append(problem(path, line, "cluster_id", f"record says cluster {rec_cid!r} but the manifest "
                                                                  f"entry says cluster {cluster!r}"))
                continue
            if rec_cid not in catalog.clusters:
                problems.append(problem(path, line, "cluster_id", f"unknown cluster id {rec_cid!r} "
                                                                  f"(catalog {catalog.source} has {catalog.clusters})"))
                continue
            cid = rec_cid
        ordering = None
        if rec.get("tools") is not None:
            shown, bad = _resolve_tools(rec["tools"], matcher(cid))
            if bad:
                problems.append(problem(path, line, "tools", bad))
                continue
            if cid is None:
                cid, bad = matcher(cid).cluster_of_shown(shown, _tool_list_names(rec["tools"]))
                if bad:
                    problems.append(problem(path, line, "tools", bad))
                    continue
            ordering = "|".join(shown)
        status, name = _first_call(rec)
        tool, raw = None, name
        if status == "call":
            tool = matcher(cid).resolve(name)
            status = "ok" if tool is not None else "unknown_tool"
            if tool is not None and cid is None:
                cid = matcher(cid).cluster_of(tool)
                if cid is None:   # a tool of several clusters, no list nor cluster_id naming one
                    status, tool = "off_cluster", None
            elif tool is not None and ordering is not None and tool not in shown:
                status, tool = "off_cluster", None   # a tool of the catalog that was not shown
        # issue 36: an attempt whose cluster cannot be decided is a row without a cluster, excluded by its status
        qid = rec.get("query_id")
        rows.append((cid, line if qid is None else qid, rec.get("rotation"), ordering, tool, status, raw,
                     str(path), line))
    if problems:
        raise SelectionLogError(problems)
    return rows


def _tool_list_names(tools) -> list:
    """The names of a record's ``tools`` (strings, or objects with ``name`` / ``function.name``)."""
    out = []
    for t in tools:
        if isinstance(t, dict):
            t = (t.get("function") or {}).get("name") if isinstance(t.get("function"), dict) else t.get("name")
        out.append(t)
    return out


def _resolve_tools(tools, matcher: _Matcher):
    """Tool names shown -> (tool_ids, problem message or None)."""
    if not isinstance(tools, list) or not tools:
        return [], f"expected a non-empty list of tool names, got {tools!r}"
    names = []
    for t in tools:
        name = t
        if isinstance(t, dict):
            name = (t.get("function") or {}).get("name") if isinstance(t.get("function"), dict) else t.get("name")
        if not isinstance(name, str):
            return [], f"cannot read a tool name from {t!r}"
        names.append(name)
    ids = [matcher.resolve(n) for n in names]
    unknown = [n for n, i in zip(names, ids) if i is None]
    if unknown:
        return [], f"tool name(s) {unknown} are not catalog tools of this scope (cluster or whole catalog)"
    return ids, None


def _first_call(rec: dict) -> tuple[str, str | None]:
    """Return ``("call", name)``, ``("no_call", None)`` or ``("parse_error", raw)`` for one record."""
    msg = _response(rec)
    if msg is None:
        return "parse_error", _dump(rec)
    calls = msg.get("tool_calls")
    if calls is not None:
        if not isinstance(calls, list):
            return "parse_error", _dump(calls)
        if calls:
            return _named(calls[0], nested="function")
    if msg.get("function_call") is not None:
        return _named(msg["function_call"])
    for key, kind in (("content", "tool_use"), ("output", "function_call")):
        blocks = msg.get(key)
        if isinstance(blocks, list):
            for block in blocks:
                if isinstance(block, dict) and block.get("type") == kind:
                    return _named(block)
    return "no_call", None


def _response(rec: dict):
    """The message dict holding the model's reply, or None when the record has none."""
    if "choices" in rec:
        ch = rec["choices"]
        if isinstance(ch, list) and ch and isinstance(ch[0], dict):
            msg = ch[0].get("message", ch[0].get("delta"))
            return msg if isinstance(msg, dict) else None
        return None
    if "message" in rec:
        return rec["message"] if isinstance(rec["message"], dict) else None
    if any(k in rec for k in _RESPONSE_KEYS):
        return rec
    return None


def _dump(obj) -> str:
    return json.dumps(obj, ensure_ascii=False)[:500]


def _named(call, nested=None) -> tuple[str, str | None]:
    """Name of one tool call (``call[nested]["name"]`` or ``call["name"]``)."""
    if not isinstance(call, dict):
        return "parse_error", _dump(call)
    inner: dict = call[nested] if nested and isinstance(call.get(nested), dict) else call
    name = inner.get("name")
    if not isinstance(name, str) or not name.strip():
        return "parse_error", _dump(call)
    return "call", name


def _id_str(v) -> str:
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return str(v)
