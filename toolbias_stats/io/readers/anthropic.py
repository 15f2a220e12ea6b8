"""Reader for Anthropic API logs: Message Batches requests + results JSONL, or one JSONL of {request, response}.

The candidate list and its order are the request's ``tools`` (``params.tools`` in a batch request line); the
choice is the first ``tool_use`` block of the answer's ``content``. See docs/formats.md for every rule.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypedDict

from .._catalog import ToolCatalog
from .._selection_log import SelectionLog
from ._toolcalls import (
    KEEP,
    Attempt,
    Conversation,
    _error_text,
    _msgspec,
    api_error,
    assistant_turns,
    batch_shape,
    message_text,
    read_offered,
    read_request_log,
    record_field,
    short,
    tool_names,
    typed_decoder,
)

if TYPE_CHECKING:
    from ._common import Clusters, Meta, PathLike

__all__ = ["read_anthropic", "offered_anthropic"]

#: Content blocks that are tool calls (client tools, server tools such as web search, MCP tools).
_CALL_BLOCKS = ("tool_use", "server_tool_use", "mcp_tool_use")


def read_anthropic(path: PathLike, *, catalog: ToolCatalog | None = None, meta: Meta = None,
                   responses: PathLike | None = None, clusters: Clusters = None,
                   subsets: bool = False, model_override: bool = False) -> SelectionLog:
    """Read Anthropic Messages logs into a SelectionLog, one row per request.

    Parameters
    ----------
    path : path-like
        With ``responses``: the Message Batches **requests** (JSONL; each line ``{"custom_id", "params":
        {"model", "messages", "tools", "tool_choice", ...}}``, what was sent to ``messages.batches.create``).
        Without: a JSONL of ``{"request": ..., "response": ...}`` objects, where ``request`` is the Messages
        API parameters (or a batch request line) and ``response`` a Message (or a batch result line).
    catalog : ToolCatalog, optional
        The clusters; without it, ``clusters`` decides.
    meta : dict
        Design metadata: ``model``, ``run``, ``condition``, extra scalar keys. ``model`` may be left out when
        every record names its model (the request's ``model``, else the response message's).
    responses : path-like, optional
        The batch **results** (JSONL; each line ``{"custom_id", "result": {"type": "succeeded" | "errored" |
        "canceled" | "expired", "message" | "error"}}``), joined to ``path`` by ``custom_id``.
    clusters : dict, "infer" or path-like, optional
        Without ``catalog``: declared clusters, a ``tool_id, cluster_id`` CSV, or ``"infer"`` (default).
    subsets : bool, default False
        Allow requests that offer a proper subset of their cluster's tools.
    model_override : bool, default False
        Label every record with ``meta["model"]`` whatever model the record names (by default a record's own
        ``model`` must agree with ``meta["model"]``, a dated snapshot of it agrees, and without ``meta["model"]``
        each record is labelled with its own model: a log that mixes models; issue 36).

    Returns
    -------
    SelectionLog
        As :func:`~toolbias_stats.io.readers.openai.read_openai`.

    Raises
    ------
    SelectionLogError
        As :func:`~toolbias_stats.io.readers.openai.read_openai`.

    Notes
    -----
    Statuses: first ``tool_use`` (or ``server_tool_use`` / ``mcp_tool_use``) block naming an offered tool ->
    ``ok``, another name -> ``unknown_tool``; no such block -> ``no_call`` (``raw_choice`` = the text;
    ``stop_reason == "refusal"`` -> ``refusal: ...``); ``tool_choice`` ``{"type": "tool", "name": ...}`` or
    ``{"type": "none"}`` -> ``forced``; ``errored`` (``raw_choice`` = ``api_error: type: message``),
    ``canceled`` and ``expired`` results, an error response and a request without its result ->
    ``parse_error``.

    Examples
    --------
    A Message Batch of two requests (request file and results file, joined by ``custom_id``); the second
    request failed:

    >>> import json, tempfile
    >>> from pathlib import Path
    >>> tmp = Path(tempfile.mkdtemp())
    >>> tools = [{"name": n, "input_schema": {"type": "object"}} for n in ("geo_a", "geo_b")]
    >>> requests = [{"custom_id": f"q{i}", "params": {"model": "claude", "max_tokens": 50, "tools": tools,
    ...              "messages": [{"role": "user", "content": q}]}} for i, q in enumerate(["Paris", "Rome"])]
    >>> results = [{"custom_id": "q0", "result": {"type": "succeeded", "message": {"content": [
    ...                {"type": "tool_use", "id": "t", "name": "geo_b", "input": {}}]}}},
    ...            {"custom_id": "q1", "result": {"type": "errored", "error": {"type": "api_error"}}}]
    >>> for name, recs in (("requests.jsonl", requests), ("results.jsonl", results)):
    ...     _ = (tmp / name).write_text("\\n".join(json.dumps(r) for r in recs))
    >>> log = read_anthropic(tmp / "requests.jsonl", responses=tmp / "results.jsonl", meta={"model": "claude"})
    >>> log
    SelectionLog(2 rows, status={'ok': 1, 'parse_error': 1}, clusters=1)
    >>> log.data[["chosen_tool", "chosen_position", "status", "raw_choice"]]
      chosen_tool  chosen_position       status            raw_choice
    0       geo_b                2           ok                 geo_b
    1        <NA>             <NA>  parse_error  api_error: api_error
    """
    return read_request_log(path, fmt="anthropic", parse_request=parse_request, parse_response=parse_response,
                            catalog=catalog, meta=meta, responses=responses, clusters=clusters, subsets=subsets,
                            request_schema=_REQUEST_LINE, batch=_BATCH, model_override=model_override,
                            turns=conversation)


def offered_anthropic(path, responses=None, **_) -> list[tuple]:
    """``(tool names offered, file, line)`` of the first request showing each distinct list (cluster inference)."""
    return read_offered(path, responses, parse_request, parse_response, "anthropic", request_schema=_REQUEST_LINE,
                        batch=_BATCH, turns=conversation)


# What parse_request reads of a batch request line (decoded with msgspec, the rest of the line is skipped: tool
# descriptions and input schemas are most of a request). A key read below must be listed here.
class _Named(TypedDict, total=False):
    name: Any


class _Params(TypedDict, total=False):
    tools: list[_Named]
    model: Any
    tool_choice: Any
    messages: Any
    query_id: Any
    metadata: Any
    cluster_id: Any


class _Line(_Params, total=False):
    custom_id: Any
    params: _Params


_REQUEST_LINE = typed_decoder(_Line, lambda line: True)


# Plain batch lines (BatchShape): the shape of nearly every line of a real batch, read from msgspec Structs of only
# these fields; any other shape does not decode, and the line is then decoded in full and read by parse_request /
# parse_response.
if _msgspec is not None:   # the Structs of plain batch lines (BatchShape)
    class _PTool(_msgspec.Struct, gc=False):
        name: str

    class _PMsg(_msgspec.Struct, gc=False):
        role: Any = None
        content: Any = None

    class _PParams(_msgspec.Struct, gc=False):
        tools: _msgspec.Raw          # decoded by _TOOLS once per distinct text (a batch repeats a few lists)
        messages: list[_PMsg] | None = None
        model: Any = None
        tool_choice: Any = None
        query_id: Any = _msgspec.UNSET
        metadata: Any = None
        cluster_id: Any = None

    class _PLine(_msgspec.Struct, gc=False):
        custom_id: str
        params: _PParams
        query_id: Any = _msgspec.UNSET
        metadata: Any = None
        cluster_id: Any = None

    class _PBlock(_msgspec.Struct, gc=False):
        type: Any = None
        name: Any = None
        text: Any = _msgspec.UNSET
        content: Any = None

    class _PMessage(_msgspec.Struct, gc=False):
        content: list[_PBlock]
        type: Any = None
        stop_reason: Any = None

    class _PResult(_msgspec.Struct, gc=False):
        type: Any = None
        message: _PMessage | None = None
        error: Any = None

    class _POutput(_msgspec.Struct, gc=False):
        custom_id: str
        result: _PResult


_TEXT_BLOCKS = ("text", "input_text", "output_text")


def _plain_request(ln, lists):
    """parse_request of a plain batch request line (see BatchShape); ``lists``: tool names by tools text."""
    cid = ln.custom_id
    if not cid:
        return None
    p = ln.params
    choice = p.tool_choice
    forced = None
    if isinstance(choice, dict):
        if choice.get("type") == "tool" and isinstance(choice.get("name"), str):
            forced = f"tool_choice forces {choice['name']!r}"
        elif choice.get("type") == "none":
            forced = "tool_choice 'none' forbids tool calls"
    text = None
    for m in reversed(p.messages or ()):
        if m.role == "user":
            text = message_text(m.content)
            if text:
                break
    qid = None
    for q, md in ((ln.query_id, ln.metadata), (p.query_id, p.metadata)):
        if q is _UNSET:
            q = md.get("query_id") if isinstance(md, dict) else None
        if q is not None:
            qid = str(q)
            break
    cluster = None
    if ln.cluster_id is not None or ln.metadata is not None or p.cluster_id is not None or p.metadata is not None:
        cluster = record_field("cluster_id", None, {"cluster_id": ln.cluster_id, "metadata": ln.metadata},
                               {"cluster_id": p.cluster_id, "metadata": p.metadata})
    model = p.model if type(p.model) is str and p.model else None
    return cid, tool_names(p.tools, lists, _TOOLS, _names), qid, text, cluster, forced, model


def _names(tools):
    return tuple([t.name for t in tools])


def _plain_response(ln):
    """parse_response of a plain batch result line (see BatchShape)."""
    res = ln.result
    kind = res.type
    if kind == "errored":
        return "parse_error", KEEP, short(f"api_error: {_error_text(res.error or 'errored')}"), KEEP, ("api_error",)
    if kind == "canceled" or kind == "expired":
        return "parse_error", KEEP, f"batch request {kind}", KEEP, (kind,)
    msg = res.message
    if kind != "succeeded" or msg is None or msg.type == "error":
        return None
    content = msg.content
    calls = [b for b in content if b.type in _CALL_BLOCKS]
    if calls:
        name = calls[0].name
        if not isinstance(name, str) or not name.strip():
            return None
        return "call", name, KEEP, len(calls), ()
    parts = []
    for b in content:
        if b.type in _TEXT_BLOCKS:
            t = b.content if b.text is _UNSET else b.text
            if isinstance(t, str):
                parts.append(t)
    text = "\n".join(parts) if parts else None
    flags = ()
    if msg.stop_reason == "refusal":
        raw = short(f"refusal: {text}" if text else "refusal")
        flags = ("refusal",)
    else:
        raw = short(text)
    if msg.stop_reason in ("max_tokens", "model_context_window_exceeded"):
        flags += (f"stop_{msg.stop_reason}",)
    return "no_call", KEEP, raw, 0, flags


_BATCH = batch_shape(_PLine, _POutput, _plain_request, _plain_response) if _msgspec is not None else None
_TOOLS = _msgspec.json.Decoder(list[_PTool]) if _msgspec is not None else None
_UNSET = _msgspec.UNSET if _msgspec is not None else None


def parse_request(obj, path, line, record=None) -> Attempt:
    """Tools offered, query and forcing of one request (Messages parameters or a batch request line)."""
    params = obj.get("params") if isinstance(obj.get("params"), dict) else obj
    att = Attempt(str(path), int(line), None, "no_call")
    tools = params.get("tools")
    if isinstance(tools, list):
        names = [t.get("name") if isinstance(t, dict) and isinstance(t.get("name"), str) else None for t in tools]
        if None in names:
            att.flags += ("unnamed_tools_not_candidates",)
            names = [n for n in names if n is not None]
        att.tools = names
    choice = params.get("tool_choice")
    if isinstance(choice, dict):
        if choice.get("type") == "tool" and isinstance(choice.get("name"), str):
            att.forced = f"tool_choice forces {choice['name']!r}"
        elif choice.get("type") == "none":
            att.forced = "tool_choice 'none' forbids tool calls"
    text = None
    for m in reversed(params.get("messages") or []):
        if isinstance(m, dict) and m.get("role") == "user":
            text = message_text(m.get("content"))
            if text:
                break
    att.query_text = text
    for o in (record, obj, params):
        if not isinstance(o, dict):
            continue
        md = o.get("metadata")
        if not isinstance(md, dict):
            md = {}
        qid = o.get("query_id", md.get("query_id"))
        if qid is not None:
            att.query_id = str(qid)
            break
    att.cluster = record_field("cluster_id", record, obj, params)
    att.model = _model(params)
    return att


def _model(obj):
    """The ``model`` a request or message names (a non-empty string), else None."""
    m = obj.get("model") if isinstance(obj, dict) else None
    return m if isinstance(m, str) and m else None


def conversation(rec: dict) -> Conversation:
    """A conversation record (``{"messages": [...], "tools": [...]}`` with Messages-API content blocks; issue
    36): its tools, each assistant turn's ``tool_use`` blocks and text, the first user message and the model. An
    assistant message with its own ``tools`` list was offered those tools at that turn."""
    def names(tools):
        if not isinstance(tools, list):
            return None
        return [t["name"] for t in tools if isinstance(t, dict) and isinstance(t.get("name"), str)]

    def calls_of(m):
        blocks = m.get("content")
        blocks = blocks if isinstance(blocks, list) else []
        return [b.get("name") for b in blocks if isinstance(b, dict) and b.get("type") in _CALL_BLOCKS]

    turns, first_user = assistant_turns(rec["messages"], names, calls_of)
    md = rec.get("metadata")
    md = md if isinstance(md, dict) else {}
    qid = rec.get("query_id", md.get("query_id"))
    return Conversation(names(rec.get("tools")), turns, first_user, None if qid is None else str(qid),
                        record_field("cluster_id", rec), _model(rec))


def parse_response(obj, att: Attempt) -> None:
    """Fill in what the model did from a Message, an error response, or a batch result line."""
    if not isinstance(obj, dict):
        att.status, att.raw = "parse_error", short(obj)
        return
    msg = obj
    if isinstance(obj.get("result"), dict):                 # a batch result line
        res = obj["result"]
        kind = res.get("type")
        if kind == "succeeded":
            msg = res.get("message")
        elif kind == "errored":
            return api_error(att, res.get("error") or "errored")
        elif kind in ("canceled", "expired"):
            att.status, att.raw = "parse_error", f"batch request {kind}"
            att.flags += (kind,)
            return
        else:
            att.status, att.raw = "parse_error", short(res)
            return
    if not isinstance(msg, dict):
        att.status, att.raw = "parse_error", short(msg)
        return
    if att.model is None:        # the request names no model: the message's
        att.model = _model(msg)
    if msg.get("type") == "error" or (msg.get("error") and "content" not in msg):
        return api_error(att, msg.get("error"))
    content = msg.get("content")
    if not isinstance(content, list):
        att.status, att.raw = "parse_error", short(msg)
        return
    calls = [b for b in content if isinstance(b, dict) and b.get("type") in _CALL_BLOCKS]
    att.n_calls = len(calls)
    if calls:
        name = calls[0].get("name")
        if not isinstance(name, str) or not name.strip():
            att.status, att.raw = "parse_error", short(calls[0])
        else:
            att.status, att.name = "call", name
        return
    att.status = "no_call"
    text = message_text(content)
    if msg.get("stop_reason") == "refusal":
        att.raw = short(f"refusal: {text}" if text else "refusal")
        att.flags += ("refusal",)
    else:
        att.raw = short(text)
    if msg.get("stop_reason") in ("max_tokens", "model_context_window_exceeded"):
        att.flags += (f"stop_{msg['stop_reason']}",)
