"""Reader for Anthropic API logs: Message Batches requests + results JSONL, or one JSONL of {request, response}.

The candidate list and its order are the request's ``tools`` (``params.tools`` in a batch request line); the
choice is the first ``tool_use`` block of the answer's ``content``. See docs/formats.md for every rule.
"""

from __future__ import annotations

from typing import Any, TypedDict

from .._catalog import ToolCatalog
from .._selection_log import SelectionLog
from ._toolcalls import (Attempt, api_error, message_text, offered_lists, read_attempts, read_request_log,
                         paused_gc, record_field, short, typed_decoder)

__all__ = ["read_anthropic", "offered_anthropic"]

#: Content blocks that are tool calls (client tools, server tools such as web search, MCP tools).
_CALL_BLOCKS = ("tool_use", "server_tool_use", "mcp_tool_use")


def read_anthropic(path, *, catalog: ToolCatalog | None = None, meta=None, responses=None, clusters=None,
                   subsets: bool = False) -> SelectionLog:
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
        Design metadata: ``model`` (required), ``run``, ``condition``, extra scalar keys.
    responses : path-like, optional
        The batch **results** (JSONL; each line ``{"custom_id", "result": {"type": "succeeded" | "errored" |
        "canceled" | "expired", "message" | "error"}}``), joined to ``path`` by ``custom_id``.
    clusters : dict, "infer" or path-like, optional
        Without ``catalog``: declared clusters, a ``tool_id, cluster_id`` CSV, or ``"infer"`` (default).
    subsets : bool, default False
        Allow requests that offer a proper subset of their cluster's tools.

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
    """
    return read_request_log(path, fmt="anthropic", parse_request=parse_request, parse_response=parse_response,
                            catalog=catalog, meta=meta, responses=responses, clusters=clusters, subsets=subsets,
                            request_schema=_REQUEST_LINE)


def offered_anthropic(path, responses=None, **_) -> list[tuple]:
    """``(tool names offered, file, line)`` of every request (for inferring clusters)."""
    with paused_gc():
        return offered_lists(read_attempts(path, responses, parse_request, parse_response, "anthropic",
                                           request_schema=_REQUEST_LINE))


# What parse_request reads of a batch request line (decoded with msgspec, the rest of the line is skipped: tool
# descriptions and input schemas are most of a request). A key read below must be listed here.
class _Named(TypedDict, total=False):
    name: Any


class _Params(TypedDict, total=False):
    tools: list[_Named]
    tool_choice: Any
    messages: Any
    query_id: Any
    metadata: Any
    cluster_id: Any


class _Line(_Params, total=False):
    custom_id: Any
    params: _Params


_REQUEST_LINE = typed_decoder(_Line, lambda line: True)


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
        md = o.get("metadata") if isinstance(o.get("metadata"), dict) else {}
        qid = o.get("query_id", md.get("query_id"))
        if qid is not None:
            att.query_id = str(qid)
            break
    att.cluster = record_field("cluster_id", record, obj, params)
    return att


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
