"""Reader for Model Context Protocol (MCP) client sessions logged as JSON Lines of JSON-RPC messages (issue 36).

An MCP client learns a server's tools from the result of a ``tools/list`` request (``result.tools``: ``{"name",
"description", "inputSchema", ...}``, in pages joined by ``nextCursor``) and runs the tool the model picked with a
``tools/call`` request (``params.name``, ``params.arguments``). A session log is the messages the client sent and
received, one per line, in order; each ``tools/call`` request is one selection attempt whose candidates are the
tools of the last complete ``tools/list`` result before it, in the order the server listed them. See
docs/formats.md for every rule.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...exceptions import SelectionLogError, problem
from .._catalog import ToolCatalog
from .._selection_log import SelectionLog
from ._clusters import catalog_for
from ._common import check_meta
from ._toolcalls import Attempt, build_log, paused_gc, read_json_lines

if TYPE_CHECKING:
    from ._common import Clusters, Meta, PathLike

__all__ = ["read_mcp", "offered_mcp", "MCP_METHODS"]

#: The JSON-RPC methods the reader follows: the tool list, a call, and the server's notice that its list changed.
MCP_METHODS = ("tools/list", "tools/call", "notifications/tools/list_changed")
#: Keys of ``params._meta`` (MCP's request metadata) read as the query id and cluster of a call.
_QUERY_KEYS = ("query_id", "toolbias/query_id")
_CLUSTER_KEYS = ("cluster_id", "toolbias/cluster_id")


def read_mcp(path: PathLike, *, catalog: ToolCatalog | None = None, meta: Meta = None, clusters: Clusters = None,
             subsets: bool = False) -> SelectionLog:
    """Read MCP client session logs into a SelectionLog, one row per ``tools/call`` request.

    Parameters
    ----------
    path : path-like
        A session log (JSON Lines: each line a JSON-RPC message, a JSON-RPC batch (a list of messages), or an
        object holding the message under ``message`` beside the logger's own keys such as ``direction`` or
        ``timestamp``), or a folder of them (``*.jsonl``, one session per file, read in name order).
    catalog : ToolCatalog, optional
        The clusters; the tool names listed must resolve to catalog tools. Without it, ``clusters`` decides.
    meta : dict
        Design metadata: ``model`` (required: MCP messages do not name the model that chose), ``run``,
        ``condition``, extra scalar keys.
    clusters : dict, "infer" or path-like, optional
        Without ``catalog``: declared clusters, a ``tool_id, cluster_id`` CSV, or ``"infer"`` (default: each
        distinct ``tools/list`` result is one cluster).
    subsets : bool, default False
        Allow lists that hold a proper subset of a cluster's tools.

    Returns
    -------
    SelectionLog
        ``source_row`` is the line of the ``tools/call`` request. ``query_id`` is ``params._meta.query_id`` when
        the client set it, else the session (the file's name without suffix): the calls of one session are
        repeated attempts at one task (an ``attempt`` column numbers them). ``diagnostics[path]`` adds
        ``sessions``, ``tools_list_results``, ``calls_failed`` (calls the server answered with an error or
        ``isError``: still the model's choice) and ``client`` (``clientInfo`` of ``initialize``).

    Raises
    ------
    SelectionLogError
        A missing or empty file or folder, a line that is not JSON or not a JSON-RPC message, a call without a
        tool name, a call before any ``tools/list`` result when the clusters are not declared, and the tool-list
        problems of the other API readers (tools not in the clusters, a list that changes within a cluster).

    Notes
    -----
    Only calls are visible in an MCP log (the model's text answers never reach the server), so there are no
    ``no_call`` rows and every rate is conditional on a tool being called. After a
    ``notifications/tools/list_changed`` the next ``tools/list`` result is the list offered; calls in between
    keep the previous list and are flagged ``list_changed_not_refetched``. A call whose tool is not in the list
    offered is ``unknown_tool`` (its name kept in ``raw_choice``). With declared clusters a call made before any
    ``tools/list`` result is read without a list (its cluster is the called tool's, or that of the session's
    other calls; no delta_pos), as for OpenTelemetry spans without tool definitions.

    Examples
    --------
    A session: ``initialize``, ``tools/list`` (two tools), two calls:

    >>> import json, tempfile
    >>> from pathlib import Path
    >>> tools = [{"name": "geo_a", "inputSchema": {"type": "object"}}, {"name": "geo_b", "inputSchema": {}}]
    >>> msgs = [{"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}},
    ...         {"jsonrpc": "2.0", "id": 1, "result": {"tools": tools}},
    ...         {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "geo_b", "arguments": {}}},
    ...         {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "geo_a", "arguments": {}}}]
    >>> path = Path(tempfile.mkdtemp()) / "session1.jsonl"
    >>> _ = path.write_text("".join(json.dumps(m) + "\\n" for m in msgs))
    >>> log = read_mcp(path, meta={"model": "claude-sonnet-4-5"})
    >>> log.data[["query_id", "chosen_tool", "chosen_position", "attempt"]]
       query_id chosen_tool  chosen_position  attempt
    0  session1       geo_b                2        1
    1  session1       geo_a                1        2
    """
    path = Path(path)
    check_meta(meta, path)
    declared = catalog is not None or (clusters is not None and not (isinstance(clusters, str)
                                                                     and clusters == "infer"))
    with paused_gc():
        attempts, extra = read_mcp_attempts(path, declared=declared)
        cs = catalog_for([(a.tools, a.source_file, a.source_row) for a in attempts if a.tools is not None],
                         catalog=catalog, clusters=clusters)
        extra["cluster_source"] = str(cs)
        return build_log(attempts, catalog=cs.catalog, meta=meta, source=path, fmt="mcp", subsets=subsets,
                         extra_diagnostics=extra)


def offered_mcp(path, **_) -> list[tuple]:
    """``(tool names listed, file, line)`` of every call (for inferring clusters)."""
    with paused_gc():
        attempts, _extra = read_mcp_attempts(Path(path), declared=False)
    return [(a.tools, a.source_file, a.source_row) for a in attempts]


# ---------------------------------------------------------------------------------------
def _session_files(path: Path) -> list[Path]:
    if path.is_dir():
        files = sorted(p for p in path.iterdir() if p.suffix.lower() == ".jsonl" and p.is_file())
        if not files:
            raise SelectionLogError(problem(path, None, None, "no MCP session logs (*.jsonl) in this folder"))
        return files
    return [path]


def read_mcp_attempts(path: Path, *, declared: bool) -> tuple[list[Attempt], dict]:
    """The attempts of a session log or a folder of them, and reader diagnostics."""
    attempts: list[Attempt] = []
    problems: list[str] = []
    info: dict[str, Any] = {"sessions": 0, "tools_list_results": 0, "calls_failed": 0, "client": Counter()}
    for f in _session_files(path):
        _Session(f, declared, attempts, problems, info).read()
        info["sessions"] += 1
    if problems:
        raise SelectionLogError(problems)
    if not attempts:
        raise SelectionLogError(problem(path, None, "tools/call", "no tools/call request in this MCP log"))
    info["client"] = dict(info["client"])
    return attempts, info


def _messages(value) -> list:
    """The JSON-RPC messages of one line: a message, a batch, or a logger's record holding one under
    ``message``; a value that holds none gives ``[]``."""
    if isinstance(value, dict) and "jsonrpc" not in value and isinstance(value.get("message"), (dict, list)):
        value = value["message"]
    items = value if isinstance(value, list) else [value]
    return [m for m in items if isinstance(m, dict) and m.get("jsonrpc") == "2.0"]


class _Session:
    """One session log read message by message (the tool list in force, the requests awaiting their answer)."""

    def __init__(self, path: Path, declared: bool, attempts: list, problems: list, info: dict):
        self.path, self.declared = path, declared
        self.attempts, self.problems, self.info = attempts, problems, info
        self.session = path.stem
        self.pending: dict = {}         # request id -> ("tools/list", starts a new list) / ("tools/call", attempt)
        self.listed: list | None = None    # the tools of the last complete tools/list result
        self.paging: list = []             # the pages of a tools/list result still being fetched
        self.stale = False

    def read(self) -> None:
        for jl in read_json_lines(self.path, what="MCP session log"):
            if jl.error is not None:
                self.problems.append(problem(self.path, jl.line, None, f"{jl.error}; the messages of this line "
                                                                       "cannot be read"))
                continue
            msgs = _messages(jl.value)
            if not msgs:
                self.problems.append(problem(self.path, jl.line, "jsonrpc",
                                             "expected a JSON-RPC 2.0 message (or a batch of them, or a record "
                                             "with one under `message`)"))
            for m in msgs:
                self.message(m, jl.line)

    def message(self, m: dict, line: int) -> None:
        method = m.get("method")
        if method == "tools/list" and "id" in m:
            params = m.get("params")
            params = params if isinstance(params, dict) else {}
            self.pending[_key(m["id"])] = ("tools/list", params.get("cursor") is None)
        elif method == "tools/call":
            self.call(m, line)
        elif method == "notifications/tools/list_changed":
            self.stale = True
        elif method is None and "id" in m:
            self.answer(m)
        elif method == "initialize" and isinstance(m.get("params"), dict):
            client = m["params"].get("clientInfo")
            if isinstance(client, dict):
                self.info["client"][f"{client.get('name')} {client.get('version')}"] += 1

    def call(self, m: dict, line: int) -> None:
        params = m.get("params")
        params = params if isinstance(params, dict) else {}
        md = params.get("_meta")
        md = md if isinstance(md, dict) else {}
        name = params.get("name")
        att = Attempt(str(self.path), line, None if self.listed is None else list(self.listed), "call",
                      label=f"line {line} (session {self.session!r})", group=f"{self.path}", n_calls=1)
        att.query_id = next((str(md[k]) for k in _QUERY_KEYS if md.get(k) is not None), self.session)
        att.cluster = next((str(md[k]) for k in _CLUSTER_KEYS if md.get(k) is not None), None)
        if not isinstance(name, str) or not name.strip():
            att.status, att.raw = "parse_error", f"tools/call without a tool name: {params.get('name')!r}"
        else:
            att.name = name
        if self.stale:
            att.flags += ("list_changed_not_refetched",)
        if self.listed is None:
            if not self.declared:
                self.problems.append(problem(self.path, line, "tools/list",
                                             "a tools/call before any tools/list result: the tools offered are "
                                             "unknown; declare the clusters in the manifest (`clusters = {name = "
                                             "[...]}`) to read such calls without their list (no delta_pos)"))
                return
            att.no_list = True
        if "id" in m:
            self.pending[_key(m["id"])] = ("tools/call", att)
        self.attempts.append(att)

    def answer(self, m: dict) -> None:
        kind = self.pending.pop(_key(m["id"]), None)
        if kind is None:
            return
        result = m.get("result")
        if kind[0] == "tools/call":
            if "error" in m or (isinstance(result, dict) and result.get("isError") is True):
                self.info["calls_failed"] += 1
                kind[1].flags += ("call_failed",)
            return
        if not isinstance(result, dict) or not isinstance(result.get("tools"), list):
            return                   # an error answer: the list in force stays
        if kind[1]:
            self.paging = []
        self.paging += [t.get("name") if isinstance(t, dict) else None for t in result["tools"]]
        if result.get("nextCursor") is None:
            self.listed = [n for n in self.paging if isinstance(n, str)]
            self.paging = []
            self.stale = False
            self.info["tools_list_results"] += 1


def _key(request_id) -> str:
    """A JSON-RPC id as a dict key (ids are strings or numbers; 1 and "1" are different ids)."""
    return f"{type(request_id).__name__}:{request_id}"
