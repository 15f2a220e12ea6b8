"""Reader for OpenTelemetry GenAI traces exported as OTLP JSON.

Follows the GenAI semantic conventions as shipped in ``opentelemetry-semantic-conventions`` 0.66b2 (schema
1.44.0; the ``gen_ai.*`` attributes introduced in semantic conventions 1.37, since moved to the
semantic-conventions-genai repository): one **inference span** (``gen_ai.operation.name`` = ``chat``,
``generate_content`` or ``text_completion``) carrying ``gen_ai.tool.definitions`` is one selection attempt; its
candidates are the definitions in order; the choice is the first ``tool_call`` part of
``gen_ai.output.messages``, else the first ``tool_calls`` entry of a ``gen_ai.choice`` span event (the event
conventions before 1.37), else the first ``execute_tool`` span (``gen_ai.tool.name``) that the inference led to.
See docs/formats.md for every rule.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from ...exceptions import SelectionLogError, problem
from .._catalog import ToolCatalog
from .._selection_log import SelectionLog
from ._clusters import catalog_for
from ._common import check_meta, check_regular_file, utf8_bytes, utf8_message, utf8_position
from ._toolcalls import (
    FAST_ERRORS,
    Attempt,
    api_error,
    build_log,
    fast_json,
    message_text,
    paused_gc,
    read_json_lines,
    short,
)
from .openai import _tool_name

if TYPE_CHECKING:
    from ._common import Clusters, Meta, PathLike

__all__ = ["read_otel", "offered_otel", "INFERENCE_OPERATIONS", "SEMCONV_VERSION"]

#: The semantic-conventions release whose gen_ai attribute names this reader follows.
SEMCONV_VERSION = "opentelemetry-semantic-conventions 0.66b2 (schema 1.44.0; gen_ai.* as of 1.37)"
#: ``gen_ai.operation.name`` values of a model call (an attempt when it carries tool definitions).
INFERENCE_OPERATIONS = ("chat", "generate_content", "text_completion")
_ERROR_CODES = (2, "2", "STATUS_CODE_ERROR")


def read_otel(path: PathLike, *, catalog: ToolCatalog | None = None, meta: Meta = None, clusters: Clusters = None,
              subsets: bool = False, model_override: bool = False) -> SelectionLog:
    """Read OTLP JSON traces of GenAI spans into a SelectionLog, one row per inference span with tools.

    Parameters
    ----------
    path : path-like
        An OTLP JSON file: one ``ExportTraceServiceRequest`` object (``{"resourceSpans": [...]}``), or JSON
        Lines of them (the OpenTelemetry Collector's file exporter).
    catalog : ToolCatalog, optional
        The clusters; without it, ``clusters`` decides.
    meta : dict
        Design metadata: ``model``, ``run``, ``condition``, extra scalar keys. Without ``model`` each span is
        labelled with its own ``gen_ai.request.model`` (else ``gen_ai.response.model``): traces that mix models.
    clusters : dict, "infer" or path-like, optional
        Without ``catalog``: declared clusters, a ``tool_id, cluster_id`` CSV, or ``"infer"`` (default).
    subsets : bool, default False
        Allow spans that offer a proper subset of their cluster's tools.
    model_override : bool, default False
        Label every span with ``meta["model"]`` whatever model it names (by default a span's own model must
        agree with ``meta["model"]``; a dated snapshot of it agrees).

    Returns
    -------
    SelectionLog
        ``source_row`` is the 1-based index of the span in the file (resourceSpans, scopeSpans, spans in
        order). ``diagnostics[str(path)]`` adds ``spans`` (total), ``inference_spans_without_tools`` and
        ``semconv``.

    Raises
    ------
    SelectionLogError
        A missing, empty or malformed file (the line is named), no inference span with
        ``gen_ai.tool.definitions``, a tool definition or message attribute that is not valid JSON (named by
        span), tools not in the clusters, a tool list that changes within one cluster.

    Notes
    -----
    ``query_id`` is the span attribute ``query_id`` when present, else a hash of the last user message of
    ``gen_ai.input.messages``. A span with status ``ERROR`` is a ``parse_error`` (``raw_choice`` =
    ``api_error: error.type: message``). The conventions have no attribute for ``tool_choice``; the
    non-standard ``gen_ai.request.tool_choice`` is honoured when present (a tool name or ``"none"`` ->
    ``forced``).

    Examples
    --------
    Two chat spans of one trace file, each offering two tools and calling the second:

    >>> import json, tempfile
    >>> from pathlib import Path
    >>> def span(i, pick):
    ...     tools = [{"type": "function", "name": n} for n in ("geo_a", "geo_b")]
    ...     attrs = {"gen_ai.operation.name": "chat", "gen_ai.tool.definitions": json.dumps(tools),
    ...              "gen_ai.output.messages": json.dumps([{"role": "assistant",
    ...                                                     "parts": [{"type": "tool_call", "name": pick}]}])}
    ...     return {"traceId": f"{i:032x}", "spanId": f"{i:016x}", "name": "chat",
    ...             "attributes": [{"key": k, "value": {"stringValue": v}} for k, v in attrs.items()]}
    >>> doc = {"resourceSpans": [{"scopeSpans": [{"spans": [span(1, "geo_b"), span(2, "geo_b")]}]}]}
    >>> path = Path(tempfile.mkdtemp()) / "traces.json"
    >>> _ = path.write_text(json.dumps(doc))
    >>> log = read_otel(path, meta={"model": "gpt-4o"})
    >>> log
    SelectionLog(2 rows, status={'ok': 2}, clusters=1)
    >>> log.data[["cluster_id", "chosen_tool", "chosen_position"]]
        cluster_id chosen_tool  chosen_position
    0  geo_a+geo_b       geo_b                2
    1  geo_a+geo_b       geo_b                2
    """
    path = Path(path)
    check_meta(meta, path, model_required=False)
    declared = ((catalog is not None and not str(catalog.source).startswith("<clusters inferred"))
                or (clusters is not None and not (isinstance(clusters, str) and clusters == "infer")))
    with paused_gc():
        attempts, extra = read_otel_attempts(path, declared=declared)
        cs = catalog_for(_lists(attempts), catalog=catalog, clusters=clusters)
        extra.update(cluster_source=str(cs), semconv=SEMCONV_VERSION)
        return build_log(attempts, catalog=cs.catalog, meta=meta, source=path, fmt="otel", subsets=subsets,
                         extra_diagnostics=extra, model_override=model_override)


def offered_otel(path, **_) -> list[tuple]:
    """``(tool names offered, file, span)`` of every inference span with tools (for inferring clusters)."""
    with paused_gc():
        return _lists(read_otel_attempts(Path(path))[0])


def _lists(attempts):
    return [(a.tools, a.source_file, a.source_row) for a in attempts]


# ---------------------------------------------------------------------------------------
def _load(path: Path) -> list[tuple[int, dict]]:
    """``[(line, ExportTraceServiceRequest), ...]``: one JSON document, or JSON Lines of them."""
    if not path.exists():
        raise SelectionLogError(problem(path, None, None, "file not found"))
    if path.is_dir():
        raise SelectionLogError(problem(path, None, None, "expected an OTLP JSON trace file, got a folder (read_otel "
                                                          "reads one file: give the path of each trace file)"))
    check_regular_file(path, "trace file")    # a device (/dev/zero), a pipe, a file too large to hold in memory
    doc = _fast_document(path)
    if doc is not None:
        docs = [(1, doc)]
    else:
        docs = _load_text(path)
    problems = [problem(path, ln, "resourceSpans", "expected an OTLP JSON object with `resourceSpans`")
                for ln, d in docs if not isinstance(d, dict) or not isinstance(d.get("resourceSpans"), list)]
    if problems:
        raise SelectionLogError(problems)
    return docs


def _fast_document(path: Path):
    """The file as one JSON document decoded by msgspec, or None (no msgspec, not one document, or a document
    msgspec refuses: the standard library then reads the file and words its errors)."""
    if fast_json is None:
        return None
    data = utf8_bytes(path)
    try:
        return fast_json(data)
    except FAST_ERRORS:
        return None


def _load_text(path: Path) -> list:
    """:func:`_load` with the standard library's parser."""
    try:
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError:
        raise SelectionLogError(problem(path, None, None, utf8_message(utf8_position(path)))) from None
    if not text.strip():
        raise SelectionLogError(problem(path, None, None, "the file is empty"))
    try:
        doc = json.loads(text)
        docs = [(1, doc)]
    except json.JSONDecodeError:
        docs, problems = [], []
        for jl in read_json_lines(path, what="trace file"):
            if jl.error is not None:
                problems.append(problem(path, jl.line, None, f"{jl.error}; the spans of this line cannot be read"))
            else:
                docs.append((jl.line, jl.value))
        if problems:
            raise SelectionLogError(problems) from None
    return docs


def _any(v):
    """An OTLP JSON ``AnyValue`` as a Python value."""
    if not isinstance(v, dict):
        return v
    for k in ("stringValue", "boolValue", "doubleValue", "bytesValue"):
        if k in v:
            return v[k]
    if "intValue" in v:
        return int(v["intValue"])
    if "arrayValue" in v:
        return [_any(x) for x in (v["arrayValue"] or {}).get("values", [])]
    if "kvlistValue" in v:
        return {kv.get("key"): _any(kv.get("value")) for kv in (v["kvlistValue"] or {}).get("values", [])}
    return None


def _attrs(obj) -> dict:
    out = {}
    for a in obj.get("attributes") or []:
        if isinstance(a, dict):
            v = a.get("value")
            # a string value (nearly every gen_ai attribute) read at once, anything else by _any
            out[a.get("key")] = v["stringValue"] if type(v) is dict and "stringValue" in v else _any(v)
    return out


class _Span:
    __slots__ = ("attrs", "id", "line", "n", "op", "parent", "span", "start", "trace")

    def __init__(self, n, line, span):
        self.n, self.line, self.span = n, line, span
        self.attrs = _attrs(span)
        self.op = self.attrs.get("gen_ai.operation.name")
        self.trace, self.id = span.get("traceId"), span.get("spanId")
        self.parent = span.get("parentSpanId") or None
        try:
            self.start = int(span.get("startTimeUnixNano") or 0)
        except (TypeError, ValueError):
            self.start = 0

    def label(self):
        return f"span {self.n} ({self.span.get('name')!r}, spanId {self.id})"


class _Label:
    """The label of a span's attempt (``span 3 ('chat', spanId ab12)``), worded only when a message needs it."""

    __slots__ = ("span",)

    def __init__(self, span: _Span):
        self.span = span

    def __str__(self):
        return self.span.label()

    def __repr__(self):
        return repr(str(self))


def read_otel_attempts(path: Path, *, declared: bool = False) -> tuple[list[Attempt], dict]:
    """The attempts of an OTLP JSON trace file (before cluster resolution) and reader diagnostics.

    ``declared``: the clusters are declared (or a catalog is given), so an inference span without
    ``gen_ai.tool.definitions`` that records a tool call (or carries a ``cluster_id`` attribute) is an attempt
    whose cluster is the chosen tool's (or that attribute) and whose list shown is unknown (no delta_pos)."""
    spans = _spans(path)
    inference = [s for s in spans if s.op in INFERENCE_OPERATIONS]
    with_tools = [s for s in inference if s.attrs.get("gen_ai.tool.definitions") is not None]
    without = [s for s in inference if s.attrs.get("gen_ai.tool.definitions") is None]
    # Without definitions (the official OpenAI instrumentation does not record them): with declared clusters a
    # span that records a tool call, or names its cluster, is still an attempt (the order shown is unknown).
    no_list = []
    index: list = []    # spans by (trace, parent), built when an inference's choice is read from execute_tool spans
    if declared:
        for s in without:
            a = _attempt(str(path), s, [], spans, index=index)
            if a.status == "call" or a.cluster is not None:
                a.tools, a.no_list = None, True
                no_list.append(a)
    if not with_tools and not no_list:
        hint = ("and none records a tool call or a cluster_id attribute" if declared else
                "so the tools offered are unknown (the attribute is opt-in: enable it in the instrumentation, or "
                "declare the clusters in the manifest (`clusters = {name = [...]}`): the chosen tool then gives "
                "the cluster and delta_API is computed, delta_pos is not)")
        raise SelectionLogError(problem(path, None, "gen_ai.tool.definitions",
                                        f"none of the {len(inference)} inference span(s) (gen_ai.operation.name in "
                                        f"{list(INFERENCE_OPERATIONS)}) carries gen_ai.tool.definitions, {hint}"))
    cache: dict = {}
    tools_of = _tool_lists(path, with_tools, cache)
    src = str(path)
    attempts = [_attempt(src, s, tools_of[s.n], spans, cache, index) for s in with_tools] + no_list
    attempts.sort(key=lambda a: a.source_row)
    extra = {"spans": len(spans), "inference_spans_without_tools": len(without) - len(no_list)}
    if no_list:
        extra["inference_spans_without_definitions_read"] = len(no_list)
    return attempts, extra


def _spans(path: Path) -> list[_Span]:
    """Every span of the file, numbered in file order; a file without spans is an error."""
    spans: list = []
    for line, doc in _load(path):
        for rs in doc["resourceSpans"]:
            for ss in (rs or {}).get("scopeSpans") or (rs or {}).get("instrumentationLibrarySpans") or []:
                for sp in (ss or {}).get("spans") or []:
                    if isinstance(sp, dict):
                        spans.append(_Span(len(spans) + 1, line, sp))
    if not spans:
        raise SelectionLogError(problem(path, None, "spans", "no spans in this trace file"))
    return spans


def _tool_lists(path: Path, with_tools: list[_Span], cache: dict) -> dict:
    """``{span number: tool names offered}`` from each span's ``gen_ai.tool.definitions``; a definition list that
    does not decode or is not a list is an error naming the span (all raised together)."""
    tools_of = {}
    problems = []
    names_of: dict = {}
    for s in with_tools:
        raw = s.attrs["gen_ai.tool.definitions"]
        if isinstance(raw, str) and raw in names_of:     # the same definitions again: the same names
            tools_of[s.n] = names_of[raw]
            continue
        defs, err = _structured(raw, cache)
        if err is None and not isinstance(defs, list):
            err = f"expected a list of tool definitions, got {type(defs).__name__}"
        if err is not None:
            problems.append(problem(path, s.n, "gen_ai.tool.definitions", f"{err} ({s.label()})"))
            continue
        tools_of[s.n] = [_tool_name(d) for d in defs]
        if isinstance(raw, str):
            names_of[raw] = tools_of[s.n]
    if problems:
        raise SelectionLogError(problems)
    return tools_of


def _structured(value, cache=None):
    """A structured attribute recorded as a JSON string or as OTLP arrays / kvlists -> (value, error).

    ``cache``: a dict of the strings already decoded (spans repeat the same definitions and messages; the
    values are only read, never changed)."""
    if isinstance(value, str):
        if cache is not None:
            hit = cache.get(value)
            if hit is None:
                hit = cache[value] = _decode_attribute(value)
            return hit
        return _decode_attribute(value)
    return value, None


def _decode_attribute(value: str):
    if fast_json is not None and value.count("[") + value.count("{") <= 400:
        try:
            return fast_json(value), None
        except FAST_ERRORS:      # the standard library decides (and words the error)
            pass
    try:
        return json.loads(value), None
    except json.JSONDecodeError as exc:
        return None, f"not valid JSON (col {exc.colno}): {exc.msg}"


def _attempt(path: str, s: _Span, names, spans, cache=None, index=None) -> Attempt:
    """The attempt of inference span ``s`` offering ``names``: its query, cluster and forcing, then the choice from
    the span's status, ``gen_ai.output.messages``, ``gen_ai.choice`` events or the execute_tool spans it led to."""
    att = _new_attempt(path, s, names, cache)
    status = s.span.get("status") or {}
    if status.get("code") in _ERROR_CODES:
        api_error(att, ": ".join(str(x) for x in (s.attrs.get("error.type"), status.get("message")) if x)
                  or "span status ERROR")
        return att
    raw_out = s.attrs.get("gen_ai.output.messages")
    if cache is not None and isinstance(raw_out, str):
        # what the same output messages say is the same for every span: read once per distinct text
        key = ("output", raw_out)
        hit = cache.get(key)
        if hit is None:
            scratch = Attempt(path, s.n, [], "no_call")
            hit = cache[key] = (_output(scratch, raw_out, cache), scratch.flags, scratch.n_calls, scratch.status,
                                scratch.name, scratch.raw)
        if hit[0]:
            att.flags += hit[1]
            att.n_calls, att.status, att.name, att.raw = hit[2:]
            return att
    elif _output(att, raw_out, cache):
        return att
    for ev in s.span.get("events") or []:          # semantic conventions before 1.37: gen_ai.choice events
        if isinstance(ev, dict) and ev.get("name") == "gen_ai.choice":
            return _choice_event(att, ev)
    # no recorded output: the execute_tool span(s) the inference led to
    att.flags += ("choice_from_execute_tool_spans",)
    calls = _executed(s, spans, index)
    return _set_call(att, calls, lambda t: t.attrs.get("gen_ai.tool.name"), None)


def _new_attempt(path: str, s: _Span, names, cache=None) -> Attempt:
    """The attempt of span ``s`` before its choice is read: tools offered (unnamed ones left out, flagged),
    query id and text, cluster and forcing ``tool_choice``."""
    unnamed = None in names
    offered = [n for n in names if n is not None] if unnamed else list(names)
    att = Attempt(path, s.n, offered, "no_call", label=_Label(s))
    # issue 36: the span's own model; its trace groups the attempts of one run (a call outside every cluster takes
    # the cluster of the run's other attempts)
    model = s.attrs.get("gen_ai.request.model") or s.attrs.get("gen_ai.response.model")
    att.model = model if isinstance(model, str) and model else None
    att.group = s.trace if isinstance(s.trace, str) and s.trace else None
    if unnamed:
        att.flags += ("unnamed_tools_not_candidates",)
    attrs = s.attrs
    qid = attrs.get("query_id")
    att.query_id = None if qid is None else str(qid)
    cl = attrs.get("cluster_id")
    att.cluster = None if cl is None else str(cl)
    raw_in = attrs.get("gen_ai.input.messages")
    if cache is not None and isinstance(raw_in, str):      # the same messages again: the same query text
        key = ("query", raw_in)
        if key not in cache:
            cache[key] = _query_text(raw_in, cache)
        att.query_text = cache[key]
    else:
        att.query_text = _query_text(raw_in, cache)
    choice = attrs.get("gen_ai.request.tool_choice")
    if choice == "none":
        att.forced = "tool_choice 'none' forbids tool calls"
    elif isinstance(choice, str) and choice not in ("auto", "required", "any") and choice in offered:
        att.forced = f"tool_choice forces {choice!r}"
    return att


def _choice_event(att: Attempt, ev: dict) -> Attempt:
    """The choice recorded in a ``gen_ai.choice`` event (semantic conventions before 1.37)."""
    msg, err = _structured(_attrs(ev).get("message"))
    if err is not None or not isinstance(msg, dict):
        att.status, att.raw = "parse_error", short(f"gen_ai.choice event: {err or msg!r}")
        return att
    calls = msg.get("tool_calls") or []
    return _set_call(att, calls if isinstance(calls, list) else [], _tool_name, message_text(msg.get("content")))


def _output(att: Attempt, raw, cache=None) -> bool:
    """Read the choice from ``gen_ai.output.messages`` into ``att``; False when they do not decide it (absent,
    empty or not a list: the events and execute_tool spans are read next)."""
    out, err = _structured(raw, cache)
    if err is not None:
        att.status, att.raw = "parse_error", f"gen_ai.output.messages: {err}"
        return True
    if isinstance(out, list) and out:
        if len(out) > 1:
            att.flags += ("extra_choices",)
        parts = out[0].get("parts", out[0].get("content")) if isinstance(out[0], dict) else None
        parts = parts if isinstance(parts, list) else []
        calls = [p for p in parts if isinstance(p, dict) and p.get("type") == "tool_call"]
        _set_call(att, calls, lambda p: p.get("name"), None if calls else message_text(parts))
        return True
    return False


def _by_parent(spans) -> dict | None:
    """``{(traceId, parentSpanId): [spans in file order]}``; None when an id is not hashable (a malformed
    file: every lookup then scans all spans, as the definition reads)."""
    out: dict = {}
    try:
        for t in spans:
            out.setdefault((t.trace, t.parent), []).append(t)
    except TypeError:
        return None
    return out


def _query_text(raw, cache=None):
    """Text of the last user message of ``gen_ai.input.messages`` (None without one)."""
    msgs, _ = _structured(raw, cache)
    if isinstance(msgs, list):
        for m in reversed(msgs):
            if isinstance(m, dict) and m.get("role") == "user":
                t = message_text(m.get("parts", m.get("content")))
                if t:
                    return t
    return None


def _set_call(att: Attempt, calls, name_of, text) -> Attempt:
    att.n_calls = len(calls)
    if calls:
        name = name_of(calls[0])
        if not isinstance(name, str) or not name.strip():
            att.status, att.raw = "parse_error", short(getattr(calls[0], "span", calls[0]))
        else:
            att.status, att.name = "call", name
    else:
        att.status, att.raw = "no_call", short(text)
    return att


def _executed(s: _Span, spans, index=None) -> list:
    """execute_tool spans of this inference: its children, or (agents record them as siblings) the spans under
    the same parent that start after it and before the next inference span there; in start order.

    ``index``: an empty list the spans' index by (trace, parent) is built into on first use (shared by the spans
    of one file: each lookup is then one group, not every span of the file)."""
    by_parent = None
    if index is not None:
        if not index:
            index.append(_by_parent(spans))
        by_parent = index[0]

    def group(parent):
        return spans if by_parent is None else by_parent.get((s.trace, parent), ())

    kids = [t for t in group(s.id) if t.op == "execute_tool" and t.trace == s.trace and t.parent == s.id]
    if kids:
        return sorted(kids, key=lambda t: (t.start, t.n))
    if s.parent is None:
        return []
    later = [t for t in group(s.parent) if t.trace == s.trace and t.parent == s.parent and t is not s
             and (t.start, t.n) > (s.start, s.n)]
    later.sort(key=lambda t: (t.start, t.n))
    out = []
    for t in later:
        if t.op in INFERENCE_OPERATIONS:
            break
        if t.op == "execute_tool":
            out.append(t)
    return out
