"""Reader for OpenAI API logs: Batch API request/response JSONL pairs, or one JSONL of {request, response}.

Both the Chat Completions shape (``tools: [{"type": "function", "function": {"name": ...}}]``, answer in
``choices[0].message.tool_calls``) and the Responses API shape (``tools: [{"type": "function", "name": ...}]``,
answer in the ``function_call`` items of ``output``) are read. The candidate list and its order are the
request's ``tools``; the choice is the first tool call. See docs/formats.md for every rule.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal, TypedDict

from .._catalog import ToolCatalog
from .._selection_log import SelectionLog
from ._toolcalls import (
    KEEP,
    Attempt,
    Conversation,
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

__all__ = ["read_openai", "offered_openai"]


def read_openai(path: PathLike, *, catalog: ToolCatalog | None = None, meta: Meta = None,
                responses: PathLike | None = None, clusters: Clusters = None, subsets: bool = False,
                model_override: bool = False) -> SelectionLog:
    """Read OpenAI request/response logs into a SelectionLog, one row per request.

    Parameters
    ----------
    path : path-like
        With ``responses``: the Batch API **input** file (JSONL; each line ``{"custom_id", "method", "url",
        "body"}``). Without: a JSONL of ``{"request": ..., "response": ...}`` objects, where ``request`` is a
        request body (or a batch input line) and ``response`` a Chat Completion / Response object (or a batch
        output line); ``response`` may be null with an ``error`` beside it.
    catalog : ToolCatalog, optional
        The clusters; the tool names offered must resolve to catalog tools. Without it, ``clusters`` decides.
    meta : dict
        Design metadata: ``model``, ``run``, ``condition``, extra scalar keys. ``model`` may be left out when
        every record names its model (the request's ``model``, else the response's).
    responses : path-like, optional
        The Batch API **output** file (JSONL; each line ``{"id", "custom_id", "response": {"status_code",
        "body"}, "error"}``), joined to ``path`` by ``custom_id``. The batch's error file has the same shape
        (concatenate it to the output file to keep failed requests' errors).
    clusters : dict, "infer" or path-like, optional
        Without ``catalog``: ``{cluster: [tool names]}``, a CSV of ``tool_id, cluster_id``, or ``"infer"``
        (default): each exact set of tools offered is a cluster.
    subsets : bool, default False
        Allow requests that offer a proper subset of their cluster's tools (otherwise an error: the tool list
        must not change within one cluster).
    model_override : bool, default False
        Label every record with ``meta["model"]`` whatever model the record names (by default a record's own
        ``model`` must agree with ``meta["model"]``, a dated snapshot of it agrees, and without ``meta["model"]``
        each record is labelled with its own model: a log that mixes models; issue 36).

    Returns
    -------
    SelectionLog
        ``source_file`` / ``source_row`` name the request's file and line. ``diagnostics[str(path)]`` holds
        the status counts, ``n_tool_calls`` (how many requests made 0, 1, 2, ... calls),
        ``multiple_calls_rows``, ``notes`` (refusals, API errors, extra choices, missing responses) and
        ``cluster_source``.

    Raises
    ------
    SelectionLogError
        A missing or empty file, a malformed request line, a result without its request, a malformed result
        line that names no ``custom_id``, duplicate ``custom_id`` values, a request without tools, tools not in
        the clusters, a tool list that changes within one cluster -- every problem as ``file:line:field``.

    Notes
    -----
    Statuses: first tool call of a tool offered -> ``ok``; of a name not offered -> ``unknown_tool`` (the
    name is kept in ``raw_choice``); no call (text answer, refusal, empty ``tool_calls``) -> ``no_call``
    (``raw_choice`` is the text, ``refusal: ...`` for a refusal); ``tool_choice`` naming one function, or
    ``"none"`` -> ``forced`` (excluded from rates); an HTTP status other than 200, an ``error`` object, a
    failed response, a request without its result or a result line that does not parse -> ``parse_error``
    (``raw_choice`` says which). Several calls: the first is the choice; the count is in the diagnostics.

    Examples
    --------
    Three requests offering the same three tools (clusters inferred: the set of tools offered), as a JSONL of
    ``{"request", "response"}`` records:

    >>> import json, tempfile
    >>> from pathlib import Path
    >>> tools = [{"type": "function", "function": {"name": n}} for n in ("geo_a", "geo_b", "geo_c")]
    >>> def record(query, pick):
    ...     call = {"type": "function", "function": {"name": pick, "arguments": "{}"}}
    ...     return {"request": {"model": "gpt-4o-mini", "tools": tools,
    ...                         "messages": [{"role": "user", "content": query}]},
    ...             "response": {"choices": [{"message": {"role": "assistant", "tool_calls": [call]}}]}}
    >>> path = Path(tempfile.mkdtemp()) / "log.jsonl"
    >>> lines = [record("Paris", "geo_b"), record("Rome", "geo_a"), record("Oslo", "geo_b")]
    >>> _ = path.write_text("\\n".join(json.dumps(r) for r in lines))
    >>> log = read_openai(path, meta={"model": "gpt-4o-mini"})
    >>> log
    SelectionLog(3 rows, status={'ok': 3}, clusters=1)
    >>> log.data[["cluster_id", "chosen_tool", "chosen_position", "status"]]
              cluster_id chosen_tool  chosen_position status
    0  geo_a+geo_b+geo_c       geo_b                2     ok
    1  geo_a+geo_b+geo_c       geo_a                1     ok
    2  geo_a+geo_b+geo_c       geo_b                2     ok
    """
    return read_request_log(path, fmt="openai", parse_request=parse_request, parse_response=parse_response,
                            catalog=catalog, meta=meta, responses=responses, clusters=clusters, subsets=subsets,
                            request_schema=_REQUEST_LINE, batch=_BATCH, model_override=model_override,
                            turns=conversation)


def offered_openai(path, responses=None, **_) -> list[tuple]:
    """``(tool names offered, file, line)`` of the first request showing each distinct list (cluster inference)."""
    return read_offered(path, responses, parse_request, parse_response, "openai", request_schema=_REQUEST_LINE,
                        batch=_BATCH, turns=conversation)


# ---------------------------------------------------------------------------------------
# requests
def _tool_name(tool):
    """Name of one entry of ``tools``: Chat (``function.name``, ``custom.name``), Responses (``name``), legacy
    ``functions`` entries (``name``); None for built-in tools without a name (web search, file search, ...)."""
    if not isinstance(tool, dict):
        return None
    kind = tool.get("type", "function")
    inner = tool.get(kind)
    if isinstance(inner, dict) and isinstance(inner.get("name"), str):
        return inner["name"]
    name = tool.get("name")
    return name if isinstance(name, str) else None


def _choice_name(choice):
    """Name of the function a ``tool_choice`` entry names (Chat nested or Responses flat)."""
    if not isinstance(choice, dict):
        return None
    return _tool_name(choice)


# What parse_request reads of a batch input line (decoded with msgspec, the rest of the line is skipped: tool
# descriptions and parameter schemas are most of a request). A key read below must be listed here; a tool whose
# ``type`` is not "function" / "custom" (whose name may sit under that type's key) sends the line to a full decode.
class _Named(TypedDict, total=False):
    name: Any


class _Tool(TypedDict, total=False):
    type: Any
    name: Any
    function: _Named
    custom: _Named


class _Body(TypedDict, total=False):
    tools: list[_Tool]
    model: Any
    functions: Any
    tool_choice: Any
    function_call: Any
    messages: Any
    input: Any
    query_id: Any
    metadata: Any
    cluster_id: Any


class _Line(_Body, total=False):
    custom_id: Any
    body: _Body


def _plain_tools(line) -> bool:
    """Whether every tool of a typed-decoded line is read the same as in the full line."""
    for obj in (line, line.get("body")):
        for t in (obj or {}).get("tools") or ():
            kind = t.get("type")
            if kind is not None and kind != "function" and kind != "custom" and isinstance(kind, str):
                return False
    return True


_REQUEST_LINE = typed_decoder(_Line, _plain_tools)


def parse_request(obj, path, line, record=None) -> Attempt:
    """Tools offered, query and forcing of one request (a body or a batch input line)."""
    body = obj.get("body") if isinstance(obj.get("body"), dict) else obj
    att = Attempt(str(path), int(line), None, "no_call")
    tools = body.get("tools")
    if tools is None and isinstance(body.get("functions"), list):      # legacy function calling
        tools = [{"type": "function", "function": f} for f in body["functions"]]
    if isinstance(tools, list):
        names = [_tool_name(t) for t in tools]
        if None in names:
            att.flags += ("builtin_tools_not_candidates",)
            names = [n for n in names if n is not None]
        att.tools = names
    # tool_choice: one named function, or "none", leaves no choice
    choice = body.get("tool_choice", body.get("function_call"))
    if choice == "none":
        att.forced = "tool_choice 'none' forbids tool calls"
    elif isinstance(choice, dict) and choice.get("type") == "allowed_tools":
        spec = choice.get("allowed_tools")
        if not isinstance(spec, dict):
            spec = choice
        allowed = [_tool_name(t) for t in spec.get("tools") or []]
        if len(allowed) == 1:
            att.forced = f"tool_choice allows only {allowed[0]!r}"
        elif att.tools is not None and allowed and all(a is not None for a in allowed):
            att.tools = [n for n in att.tools if n in set(allowed)]   # the candidates are the allowed tools
    elif isinstance(choice, dict) and _choice_name(choice) is not None:
        att.forced = f"tool_choice forces {_choice_name(choice)!r}"
    # query: last user message
    text = None
    if isinstance(body.get("messages"), list):
        text = _last_user(body["messages"])
    elif isinstance(body.get("input"), str):
        text = body["input"]
    elif isinstance(body.get("input"), list):
        text = _last_user(body["input"])
    att.query_text = text
    att.query_id = _query_id(record, obj, body)
    att.cluster = record_field("cluster_id", record, obj, body)
    att.model = _model(body)
    return att


def _model(obj):
    """The ``model`` a request or response body names (a non-empty string), else None."""
    m = obj.get("model") if isinstance(obj, dict) else None
    return m if isinstance(m, str) and m else None


def conversation(rec: dict) -> Conversation:
    """A conversation record (``{"messages": [...], "tools": [...]}``, the chat format of fine-tuning and eval
    files; issue 36): its tools, each assistant turn's calls (``tool_calls``, legacy ``function_call``) and
    text, the first user message (the task) and the record's model. An assistant message with its own
    ``tools`` list was offered those tools at that turn."""
    def names(tools):
        if not isinstance(tools, list):
            return None
        return [n for n in (_tool_name(t) for t in tools) if n is not None]

    tools = rec.get("tools")
    if tools is None and isinstance(rec.get("functions"), list):
        tools = [{"type": "function", "function": f} for f in rec["functions"]]
    def calls_of(m):
        calls = m.get("tool_calls")
        calls = calls if isinstance(calls, list) else []
        if not calls and isinstance(m.get("function_call"), dict):
            calls = [{"type": "function", "function": m["function_call"]}]
        return [_tool_name(c) for c in calls]

    turns, first_user = assistant_turns(rec["messages"], names, calls_of)
    return Conversation(names(tools), turns, first_user, _query_id(rec), record_field("cluster_id", rec),
                        _model(rec))


def _last_user(messages):
    for m in reversed(messages):
        if isinstance(m, dict) and m.get("role") == "user":
            t = message_text(m.get("content"))
            if t:
                return t
    return None


def _query_id(*objs):
    for o in objs:
        if not isinstance(o, dict):
            continue
        if o.get("query_id") is not None:
            return str(o["query_id"])
        md = o.get("metadata")
        if isinstance(md, dict) and md.get("query_id") is not None:
            return str(md["query_id"])
    return None


# ---------------------------------------------------------------------------------------
# plain batch lines (BatchShape): the shape of nearly every line of a real batch, read from msgspec Structs of
# only these fields; any other shape (a missing or mistyped field) does not decode, and the line is then decoded
# in full and read by parse_request / parse_response.
if _msgspec is not None:   # the Structs of plain batch lines (BatchShape)
    class _PNamed(_msgspec.Struct, gc=False):
        name: str

    class _PTool(_msgspec.Struct, gc=False):
        type: Literal["function"]
        function: _PNamed

    class _PMsg(_msgspec.Struct, gc=False):
        role: Any = None
        content: Any = None

    class _PBody(_msgspec.Struct, gc=False):
        tools: _msgspec.Raw          # decoded by _TOOLS once per distinct text (a batch repeats a few lists)
        messages: list[_PMsg]
        model: Any = None
        tool_choice: Any = _msgspec.UNSET
        function_call: Any = _msgspec.UNSET
        query_id: Any = None
        metadata: Any = None
        cluster_id: Any = None

    class _PLine(_msgspec.Struct, gc=False):
        custom_id: str
        body: _PBody
        query_id: Any = None
        metadata: Any = None
        cluster_id: Any = None

    class _PMessage(_msgspec.Struct, gc=False):
        tool_calls: list[_PTool] | None = None
        content: Any = None
        refusal: Any = None
        function_call: Any = None

    class _PChoice(_msgspec.Struct, gc=False):
        message: _PMessage
        finish_reason: Any = None

    class _PChatBody(_msgspec.Struct, gc=False):
        choices: list[_PChoice]

    class _PResponse(_msgspec.Struct, gc=False):
        body: _PChatBody
        status_code: Any = None

    class _POutput(_msgspec.Struct, gc=False):
        custom_id: str
        response: _PResponse
        error: Any = None


def _plain_request(ln, lists):
    """parse_request of a plain batch input line (see BatchShape); ``lists``: tool names by tools text."""
    cid = ln.custom_id
    if not cid:
        return None
    b = ln.body
    choice = b.tool_choice
    if choice is _UNSET:
        choice = None if b.function_call is _UNSET else b.function_call
    if type(choice) is dict:
        return None
    forced = "tool_choice 'none' forbids tool calls" if choice == "none" else None
    text = None
    for m in reversed(b.messages):
        if m.role == "user":
            t = m.content
            if type(t) is not str:
                t = message_text(t)
            if t:
                text = t
                break
    qid = cluster = None
    if (ln.query_id is not None or ln.metadata is not None or ln.cluster_id is not None or b.query_id is not None
            or b.metadata is not None or b.cluster_id is not None):
        top = {"query_id": ln.query_id, "metadata": ln.metadata, "cluster_id": ln.cluster_id}
        body = {"query_id": b.query_id, "metadata": b.metadata, "cluster_id": b.cluster_id}
        qid = _query_id(None, top, body)
        cluster = record_field("cluster_id", None, top, body)
    model = b.model if type(b.model) is str and b.model else None
    names = lists.get(bytes(b.tools))          # a list seen before (tool_names works out a new one)
    if names is None:
        names = tool_names(b.tools, lists, _TOOLS, _names)
    return cid, names, qid, text, cluster, forced, model


def _names(tools):
    return tuple([t.function.name for t in tools])


def _plain_response(ln):
    """parse_response of a plain batch output line: HTTP 200 with choices (see BatchShape)."""
    if ln.error or ln.response.status_code != 200:
        return None
    choices = ln.response.body.choices
    if not choices:
        return None
    flags = ("extra_choices",) if len(choices) > 1 else ()
    ch = choices[0]
    msg = ch.message
    calls = msg.tool_calls or ()
    if not calls and isinstance(msg.function_call, dict):
        return None
    if calls:
        name = calls[0].function.name
        if not name.strip():
            return None
        return "call", name, KEEP, len(calls), flags
    if msg.refusal:
        raw = short(f"refusal: {msg.refusal}")
        flags += ("refusal",)
    else:
        raw = short(msg.content)
    if ch.finish_reason in ("length", "content_filter"):
        flags += (f"finish_{ch.finish_reason}",)
    return "no_call", KEEP, raw, 0, flags


_BATCH = batch_shape(_PLine, _POutput, _plain_request, _plain_response) if _msgspec is not None else None
_TOOLS = _msgspec.json.Decoder(list[_PTool]) if _msgspec is not None else None
_UNSET = _msgspec.UNSET if _msgspec is not None else None


# ---------------------------------------------------------------------------------------
# responses
def parse_response(obj, att: Attempt) -> None:
    """Fill in what the model did from a Chat Completion, a Response, or a batch output line."""
    if not isinstance(obj, dict):
        att.status, att.raw = "parse_error", short(obj)
        return
    body: Any = obj
    if "custom_id" in obj and ("response" in obj or "error" in obj):      # a batch output line
        if obj.get("error"):
            return api_error(att, obj["error"])
        resp = obj.get("response")
        if not isinstance(resp, dict):
            att.status, att.raw = "parse_error", "batch output line without a response"
            return
        code = resp.get("status_code")
        body = resp.get("body")
        if code != 200:
            err = body.get("error") if isinstance(body, dict) and body.get("error") else body
            return api_error(att, f"HTTP {code}: {_err(err)}")
        if not isinstance(body, dict):
            att.status, att.raw = "parse_error", "response without a body"
            return
    if att.model is None:        # the request names no model: the response's
        att.model = _model(body)
    if isinstance(body.get("choices"), list):
        return _chat(body, att)
    if isinstance(body.get("output"), list) or body.get("object") == "response":
        return _responses(body, att)
    if body.get("error"):
        return api_error(att, body["error"])
    att.status, att.raw = "parse_error", short(body)


def _err(err):
    if isinstance(err, dict):
        return ": ".join(str(err[k]) for k in ("code", "type", "message") if err.get(k)) or short(err)
    return str(err)


def _chat(body, att: Attempt) -> None:
    choices = body["choices"]
    if not choices or not isinstance(choices[0], dict):
        att.status, att.raw = "parse_error", "response without choices"
        return
    if len(choices) > 1:
        att.flags += ("extra_choices",)      # n > 1: only choices[0] is read
    ch = choices[0]
    msg = ch.get("message")
    if not isinstance(msg, dict):
        att.status, att.raw = "parse_error", short(ch)
        return
    calls = msg.get("tool_calls") or []
    if not isinstance(calls, list):
        att.status, att.raw = "parse_error", short(calls)
        return
    if not calls and isinstance(msg.get("function_call"), dict):
        calls = [{"type": "function", "function": msg["function_call"]}]
    att.n_calls = len(calls)
    if calls:
        name = _tool_name(calls[0])
        if name is None or not name.strip():
            att.status, att.raw = "parse_error", short(calls[0])
        else:
            att.status, att.name = "call", name
        return
    att.status = "no_call"
    if msg.get("refusal"):
        att.raw = short(f"refusal: {msg['refusal']}")
        att.flags += ("refusal",)
    else:
        att.raw = short(msg.get("content"))
    if ch.get("finish_reason") in ("length", "content_filter"):
        att.flags += (f"finish_{ch['finish_reason']}",)


#: Responses API output items that are tool calls; built-in ones are named by their item type.
_NAMED_CALLS = ("function_call", "custom_tool_call")


def _responses(body, att: Attempt) -> None:
    if body.get("status") == "failed" or body.get("error"):
        return api_error(att, body.get("error") or "response status 'failed'")
    items = [it for it in body.get("output") or [] if isinstance(it, dict)]
    calls = [it for it in items if it.get("type") in _NAMED_CALLS
             or (str(it.get("type", "")).endswith("_call") and it.get("type") != "message")]
    att.n_calls = len(calls)
    if calls:
        first = calls[0]
        name = first.get("name") if first.get("type") in _NAMED_CALLS else first.get("type")
        if not isinstance(name, str) or not name.strip():
            att.status, att.raw = "parse_error", short(first)
        else:
            att.status, att.name = "call", name
        return
    att.status = "no_call"
    texts, refusals = [], []
    for it in items:
        if it.get("type") == "message":
            for part in it.get("content") or []:
                if isinstance(part, dict) and part.get("type") == "refusal":
                    refusals.append(str(part.get("refusal", "")))
                elif isinstance(part, dict) and isinstance(part.get("text"), str):
                    texts.append(part["text"])
    if refusals:
        att.raw = short("refusal: " + " ".join(refusals))
        att.flags += ("refusal",)
    else:
        att.raw = short("\n".join(texts)) if texts else None
    if body.get("status") == "incomplete":
        att.flags += ("incomplete",)
