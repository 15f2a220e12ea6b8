"""Reader for LangChain / LangSmith run exports (issue 36).

A LangChain tracer (LangSmith's ``LangChainTracer``, or any ``BaseTracer`` with the chat schema) records each call of
a chat model as a run: ``run_type`` ``"llm"`` (``"chat_model"`` in the chat schema), the tools bound to the model
(``bind_tools``) in ``extra.invocation_params.tools`` as ``convert_to_openai_tool`` writes them, the input
messages in ``inputs.messages`` and the answer, an ``AIMessage`` serialised by ``langchain_core.load.dumpd``, in
``outputs.generations[0][0].message`` with its ``tool_calls``. Each chat-model run with bound tools is one
selection attempt; its candidates are the bound tools in order. See docs/formats.md for every rule.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...exceptions import SelectionLogError, problem
from .._catalog import ToolCatalog
from .._selection_log import SelectionLog
from ._clusters import catalog_for
from ._common import check_meta, load_json
from ._toolcalls import Attempt, api_error, build_log, message_text, paused_gc, read_json_lines, short
from .openai import _tool_name

if TYPE_CHECKING:
    from ._common import Clusters, Meta, PathLike

__all__ = ["read_langchain", "offered_langchain", "CHAT_RUN_TYPES"]

#: ``run_type`` of a chat-model call (``"llm"``: LangSmith and the original tracer schema; ``"chat_model"``: the
#: chat schema of langchain-core's tracers).
CHAT_RUN_TYPES = ("llm", "chat_model")


def read_langchain(path: PathLike, *, catalog: ToolCatalog | None = None, meta: Meta = None,
                   clusters: Clusters = None, subsets: bool = False, model_override: bool = False) -> SelectionLog:
    """Read a LangChain / LangSmith run export into a SelectionLog, one row per tool-calling chat-model turn.

    Parameters
    ----------
    path : path-like
        Runs as JSON Lines (one run object per line, as ``Run.model_dump_json()`` or the LangSmith API give them)
        or one JSON document (a list of runs, or ``{"runs": [...]}``). Chain, tool and retriever runs are skipped.
    catalog : ToolCatalog, optional
        The clusters; without it, ``clusters`` decides.
    meta : dict
        Design metadata: ``model``, ``run``, ``condition``, extra scalar keys. Without ``model`` each run is
        labelled with its own model (``extra.metadata.ls_model_name``, else ``invocation_params.model`` /
        ``model_name``, else the answer's ``response_metadata.model_name``).
    clusters : dict, "infer" or path-like, optional
        Without ``catalog``: declared clusters, a ``tool_id, cluster_id`` CSV, or ``"infer"`` (default).
    subsets : bool, default False
        Allow runs whose bound tools are a proper subset of their cluster's tools.
    model_override : bool, default False
        Label every run with ``meta["model"]`` whatever model it names (by default a run naming another model
        than ``meta["model"]`` is an error naming its line).

    Returns
    -------
    SelectionLog
        ``source_row`` is the run's line (its index in a JSON list). ``diagnostics[path]`` adds ``runs``,
        ``chat_runs_without_tools`` and ``closing_text_turns``.

    Raises
    ------
    SelectionLogError
        A missing, empty or malformed file (the line named), no chat-model run with bound tools, and the
        tool-list problems of the other API readers.

    Notes
    -----
    The choice is the first entry of the answer's ``tool_calls`` (else of ``additional_kwargs.tool_calls``, the
    OpenAI wire form); ``invalid_tool_calls`` only is a ``parse_error``; a run with an ``error`` is a
    ``parse_error`` (``api_error: ...``). An answer in text is a ``no_call`` attempt, except the **closing turn**
    of an agent loop (its input already holds an ``AIMessage`` that called a tool): that run is not an attempt
    (counted in ``closing_text_turns``). ``query_id`` is ``extra.metadata.query_id`` when set, else a hash of the
    run's first human message (the task: every step of one agent loop shares it); the runs of one trace
    (``trace_id``) are one group (a call outside every cluster takes the cluster of its trace's other calls).

    Examples
    --------
    One chat-model run with two tools bound, calling the second (the shape a langchain-core tracer records):

    >>> import json, tempfile
    >>> from pathlib import Path
    >>> tools = [{"type": "function", "function": {"name": n, "parameters": {}}} for n in ("geo_a", "geo_b")]
    >>> ai = {"lc": 1, "type": "constructor", "id": ["langchain", "schema", "messages", "AIMessage"],
    ...       "kwargs": {"content": "", "tool_calls": [{"name": "geo_b", "args": {}, "id": "c1"}]}}
    >>> run = {"id": "r1", "trace_id": "r1", "run_type": "llm", "inputs": {"messages": [[]]},
    ...        "extra": {"invocation_params": {"tools": tools}, "metadata": {"ls_model_name": "gpt-4o-mini"}},
    ...        "outputs": {"generations": [[{"message": ai}]]}}
    >>> path = Path(tempfile.mkdtemp()) / "runs.jsonl"
    >>> _ = path.write_text(json.dumps(run) + "\\n")
    >>> log = read_langchain(path)
    >>> log.data[["model", "chosen_tool", "chosen_position"]]
             model chosen_tool  chosen_position
    0  gpt-4o-mini       geo_b                2
    """
    path = Path(path)
    check_meta(meta, path, model_required=False)
    with paused_gc():
        attempts, extra = read_langchain_attempts(path)
        cs = catalog_for([(a.tools, a.source_file, a.source_row) for a in attempts], catalog=catalog,
                         clusters=clusters)
        extra["cluster_source"] = str(cs)
        return build_log(attempts, catalog=cs.catalog, meta=meta, source=path, fmt="langchain", subsets=subsets,
                         extra_diagnostics=extra, model_override=model_override)


def offered_langchain(path, **_) -> list[tuple]:
    """``(tool names bound, file, line)`` of every attempt (for inferring clusters)."""
    with paused_gc():
        attempts, _extra = read_langchain_attempts(Path(path))
    return [(a.tools, a.source_file, a.source_row) for a in attempts]


# ---------------------------------------------------------------------------------------
def _runs(path: Path) -> list[tuple[int, Any]]:
    """``[(line, run), ...]``: JSON Lines of runs, or one JSON document holding a list of them."""
    head = path.read_bytes()[:4096].lstrip() if path.is_file() else b""
    if head.startswith(b"[") or (head.startswith(b"{") and b'"runs"' in head[:200]):
        try:
            doc = load_json(path)
        except SelectionLogError:
            doc = None
        if isinstance(doc, dict) and isinstance(doc.get("runs"), list):
            doc = doc["runs"]
        if isinstance(doc, list):
            if not doc:
                raise SelectionLogError(problem(path, None, None, "the run export is empty (no runs)"))
            return list(enumerate(doc, start=1))
    lines = read_json_lines(path, what="run export")
    problems = [problem(path, jl.line, None, f"{jl.error}; the run on this line cannot be read")
                for jl in lines if jl.error is not None]
    if problems:
        raise SelectionLogError(problems)
    return [(jl.line, jl.value) for jl in lines]


def read_langchain_attempts(path: Path) -> tuple[list[Attempt], dict]:
    """The attempts of a run export (before cluster resolution) and reader diagnostics."""
    runs = _runs(path)
    problems = [problem(path, line, None, f"expected a run object, got {type(run).__name__}")
                for line, run in runs if not isinstance(run, dict)]
    if problems:
        raise SelectionLogError(problems)
    attempts: list[Attempt] = []
    kinds: Counter = Counter()
    without = closing = 0
    for line, run in runs:
        kinds[str(run.get("run_type"))] += 1
        if run.get("run_type") not in CHAT_RUN_TYPES:
            continue
        att = _attempt(path, line, run)
        if att is None:
            without += 1
        elif att.status == "closing":
            closing += 1
        else:
            attempts.append(att)
    info = {"runs": len(runs), "chat_runs_without_tools": without, "closing_text_turns": closing,
            "run_types": dict(kinds)}
    if not attempts:
        raise SelectionLogError(problem(path, None, "extra.invocation_params.tools",
                                        f"none of the {len(runs)} run(s) is a chat-model run (run_type in "
                                        f"{list(CHAT_RUN_TYPES)}) with tools bound and a tool call or an answer"))
    return attempts, info


def _dig(obj, *keys):
    for k in keys:
        obj = obj.get(k) if isinstance(obj, dict) else None
    return obj


def _message(obj) -> dict | None:
    """The fields of a serialised message: ``dumpd`` (``{"lc", "type": "constructor", "kwargs"}``),
    ``messages_to_dict`` (``{"type", "data"}``) or the plain fields."""
    if not isinstance(obj, dict):
        return None
    if obj.get("lc") == 1 and isinstance(obj.get("kwargs"), dict):
        out = dict(obj["kwargs"])
        ids = obj.get("id")
        out.setdefault("type", str(ids[-1]) if isinstance(ids, list) and ids else None)
        return out
    if isinstance(obj.get("data"), dict) and "type" in obj:
        return {**obj["data"], "type": obj["type"]}
    return obj


def _is_ai(msg: dict) -> bool:
    return msg.get("type") in ("ai", "AIMessage", "AIMessageChunk") or msg.get("role") == "assistant"


def _calls(msg: dict) -> tuple[list, list]:
    """``(tool call names, invalid tool calls)`` of an AI message."""
    calls = msg.get("tool_calls")
    names = [c.get("name") for c in calls if isinstance(c, dict)] if isinstance(calls, list) else []
    if not names:
        raw = _dig(msg, "additional_kwargs", "tool_calls")
        if isinstance(raw, list):
            names = [_tool_name(c) for c in raw]
    bad = msg.get("invalid_tool_calls")
    return names, bad if isinstance(bad, list) else []


def _input_messages(run: dict) -> list[dict]:
    msgs = _dig(run, "inputs", "messages")
    if isinstance(msgs, list) and msgs and isinstance(msgs[0], list):
        msgs = msgs[0]                          # one prompt per batch entry: the first
    return [m for m in (_message(x) for x in msgs) if m is not None] if isinstance(msgs, list) else []


def _attempt(path: Path, line: int, run: dict) -> Attempt | None:
    """The attempt of one chat-model run; None without bound tools; status ``"closing"`` for the closing text turn
    of an agent loop (not an attempt)."""
    params = _dig(run, "extra", "invocation_params")
    params = params if isinstance(params, dict) else {}
    tools = params.get("tools", params.get("functions"))
    if not isinstance(tools, list) or not tools:
        return None
    names = [t if isinstance(t, str) else _tool_name(t) for t in tools]
    att = Attempt(str(path), line, [n for n in names if n is not None], "no_call",
                  label=f"line {line} (run {run.get('id')!r})")
    if None in names:
        att.flags += ("unnamed_tools_not_candidates",)
    inputs = _input_messages(run)
    gen = _dig(run, "outputs", "generations")
    first = gen[0][0] if isinstance(gen, list) and gen and isinstance(gen[0], list) and gen[0] else None
    msg = _message(first.get("message")) if isinstance(first, dict) else None
    _context(att, run, params, inputs, msg)
    if run.get("error"):
        api_error(att, run["error"])
    elif msg is None:
        att.status, att.raw = "parse_error", short(first if first is not None else "run without outputs")
    else:
        _choice(att, msg, inputs)
    return att


def _context(att: Attempt, run: dict, params: dict, inputs: list, msg) -> None:
    """Query, cluster, group (the trace) and model of a run's attempt."""
    md = _dig(run, "extra", "metadata")
    md = md if isinstance(md, dict) else {}
    human = next((m for m in inputs if m.get("type") in ("human", "HumanMessage") or m.get("role") == "user"), None)
    att.query_text = message_text(human.get("content")) if human is not None else None
    att.query_id = None if md.get("query_id") is None else str(md["query_id"])
    att.cluster = None if md.get("cluster_id") is None else str(md["cluster_id"])
    trace = run.get("trace_id")
    att.group = str(trace) if trace else None
    model = md.get("ls_model_name") or params.get("model") or params.get("model_name") or _dig(
        msg, "response_metadata", "model_name")
    att.model = model if isinstance(model, str) and model else None


def _choice(att: Attempt, msg: dict, inputs: list) -> None:
    """What the answer did: a call (its first), invalid calls only, the closing text turn, or a text answer."""
    calls, bad = _calls(msg)
    att.n_calls = len(calls)
    if calls:
        if not isinstance(calls[0], str) or not calls[0].strip():
            att.status, att.raw = "parse_error", short(json.dumps(calls[0]))
        else:
            att.status, att.name = "call", calls[0]
    elif bad:
        att.status, att.raw = "parse_error", short(f"invalid_tool_calls: {json.dumps(bad[0], default=str)}")
    elif any(_is_ai(m) and _calls(m)[0] for m in inputs):
        att.status = "closing"
    else:
        att.raw = short(message_text(msg.get("content")))
