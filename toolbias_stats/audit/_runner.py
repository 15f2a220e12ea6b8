"""A resumable runner: send a design folder's requests to an OpenAI-compatible endpoint. See :func:`run_study`.

Every answer (and every error) is appended to ``responses-run{r}.jsonl`` as it arrives, as an OpenAI Batch API
output line keyed by ``custom_id``, so the manifest written beside the requests reads it with the ``openai``
importer, and a run that stops (Ctrl-C, a crash, a kill) resumes where it stopped: requests whose
``custom_id`` already has a line are never sent again. Only the standard library talks to the network, and
only to ``base_url``.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import http.client
import json
import os
import random
import re
import socket
import threading
import urllib.error
import urllib.parse
import urllib.request
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._display import ReprHTMLMixin
from .._output import cleanup_on_signals, output_failure
from ._lock import folder_lock
from ._requests import DEFAULT_MODEL, atomic_write_text, read_design

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["run_study", "RunResult", "RETRY_STATUSES", "done_custom_ids"]

#: HTTP statuses that are retried (with exponential backoff, honouring ``Retry-After``).
RETRY_STATUSES = frozenset({408, 409, 429, 500, 502, 503, 504})
_CUSTOM_ID_RE = re.compile(r'"custom_id"\s*:\s*"((?:[^"\\]|\\.)*)"')
_PATHS = {"chat": "chat/completions", "responses": "responses"}

#: The stop on a redirect to another origin (``code``, ``source``, ``target``): the request (and the API key in
#: its headers) is not sent there.
REDIRECT_MESSAGE = ("the endpoint {source} answered HTTP {code} redirecting to another origin, {target}; the "
                    "runner does not follow redirects to another origin (the API key would be sent there) and "
                    "stopped. Check --base-url (give the address the endpoint redirects to if you trust it); "
                    "answers received before are saved.")
#: A request that took longer than ``--timeout`` in all (``timeout``).
TIMEOUT_MESSAGE = "no complete answer within {timeout:g} s (--timeout bounds the whole request)"


@dataclass(frozen=True)
class RunResult(ReprHTMLMixin):
    """What one :func:`run_study` call did.

    Attributes
    ----------
    sent : int
        Requests sent (and written) by this call.
    skipped : int
        Requests that already had a line (earlier calls): not sent.
    remaining : int
        Requests still without a line (``max_requests`` reached, or interrupted).
    by_outcome : dict
        Lines written by this call per outcome: ``ok`` (HTTP 200 with a JSON body), ``http_error`` (another
        status, after the retries for 429/5xx) and ``malformed_response`` (a body that is not a JSON object).
    retries : int
        Re-sends after a 429/5xx answer or a connection error.
    files : dict
        ``{run: responses file}``.
    repaired : list of str
        Responses files whose last line was cut short by an earlier interruption (that line was removed and
        its request sent again).
    stopped : str or None
        Why the run stopped early: the endpoint did not answer at all (connection refused, timeouts) after the
        retries. Such a request gets no line (it may never have arrived) and is sent by the next call.
    notes : list of str
        What the run handled on its way (a stale lock of a process that is gone, taken over).

    Examples
    --------
    >>> res = RunResult(sent=5, skipped=1, remaining=0, by_outcome={"ok": 4, "http_error": 1}, retries=2,
    ...                 files={1: "responses-run1.jsonl"})
    >>> res.to_frame().to_dict("records")  # doctest: +NORMALIZE_WHITESPACE
    [{'sent': 5, 'skipped': 1, 'remaining': 0, 'retries': 2, 'n_http_error': 1, 'n_ok': 4, 'stopped': None}]
    >>> print(res)
    sent 5 requests (http_error 1, ok 4; 2 retries), 1 already answered, 0 remaining
    """

    sent: int
    skipped: int
    remaining: int
    by_outcome: dict
    retries: int
    files: dict
    repaired: list = field(default_factory=list)
    stopped: str | None = None
    notes: list = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"sent": self.sent, "skipped": self.skipped, "remaining": self.remaining,
                "by_outcome": dict(self.by_outcome), "retries": self.retries,
                "files": {str(k): str(v) for k, v in self.files.items()}, "repaired": list(self.repaired),
                "stopped": self.stopped, "notes": list(self.notes)}

    def to_frame(self) -> pd.DataFrame:
        """One row: requests sent, skipped and remaining, retries, lines per outcome (``n_<outcome>``), stopped."""
        import pandas as pd

        return pd.DataFrame([{"sent": self.sent, "skipped": self.skipped, "remaining": self.remaining,
                              "retries": self.retries,
                              **{f"n_{k}": v for k, v in sorted(self.by_outcome.items())},
                              "stopped": self.stopped}])

    def _text(self) -> str:
        """The lines ``toolbias-stats run`` prints on stdout."""
        outcomes = ", ".join(f"{k} {v}" for k, v in sorted(self.by_outcome.items())) or "none"
        lines = [(f"sent {self.sent} requests ({outcomes}; {self.retries} retries), {self.skipped} already "
                  f"answered, {self.remaining} remaining")]
        lines += [f"note: removed a line cut short at the end of {f} (its request was sent again)"
                  for f in self.repaired]
        lines += [f"note: {n}" for n in self.notes]
        if self.remaining:
            lines.append("run the same command again to send the rest")
        return "\n".join(lines)


def done_custom_ids(path: Path) -> tuple[set, bool]:
    """``custom_id`` values that already have a line in a responses file, and whether its last line was cut
    short (it is then removed from the file: its request was not answered in full)."""
    path = Path(path)
    if not path.exists():
        return set(), False
    data = path.read_bytes()
    repaired = False
    if data and not data.endswith(b"\n"):
        # a line cut short by a kill: drop it (its request is sent again)
        cut = data.rfind(b"\n") + 1
        with path.open("r+b") as fh:
            fh.truncate(cut)
        data = data[:cut]
        repaired = True
    done = set()
    for lineno, raw in enumerate(data.decode("utf-8", errors="replace").splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            obj = json.loads(raw)
            cid = obj.get("custom_id") if isinstance(obj, dict) else None
        except json.JSONDecodeError:
            m = _CUSTOM_ID_RE.search(raw)
            cid = json.loads(f'"{m.group(1)}"') if m else None
        if not isinstance(cid, str):
            raise ValueError(f"{path}:{lineno}: a line without a custom_id; the responses file is not one the "
                             "runner wrote (move it away to start again).")
        done.add(cid)
    return done, repaired


def _load_requests(path: Path, fmt: str) -> list[tuple[str, str, dict]]:
    """``(custom_id, endpoint path, body)`` of every line of a requests file."""
    out, seen = [], set()
    with path.open(encoding="utf-8") as fh:
        for lineno, raw in enumerate(fh, start=1):
            if not raw.strip():
                continue
            try:
                obj = json.loads(raw)
            except json.JSONDecodeError as exc:
                raise ValueError(f"{path}:{lineno}: malformed JSON: {exc.msg}") from None
            cid = obj.get("custom_id") if isinstance(obj, dict) else None
            body = obj.get("body") if isinstance(obj, dict) else None
            if not isinstance(cid, str) or not isinstance(body, dict):
                raise ValueError(f"{path}:{lineno}: expected {{\"custom_id\", \"body\"}}, got {raw[:80]!r}")
            if cid in seen:
                raise ValueError(f"{path}:{lineno}: duplicate custom_id {cid!r}")
            seen.add(cid)
            url = str(obj.get("url", "/v1/chat/completions"))
            endpoint = "responses" if url.rstrip("/").endswith("/responses") else "chat"
            out.append((cid, endpoint, body))
    return out


class _Writer:
    """Appends one complete line per ``os.write`` (a kill leaves whole lines, or one cut-short last line).

    A write that fails (a full disk) is undone (the file is cut back to its last whole line) and raised as an
    :class:`~toolbias_stats._output.OutputError` naming the file."""

    def __init__(self, path: Path):
        self.path = path
        self.fd: int | None = None          # opened at the first line (a run that writes nothing creates nothing)
        self.size = 0
        self.lock = threading.Lock()

    def _open(self) -> int:
        try:
            self.fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            self.size = os.fstat(self.fd).st_size
        except OSError as exc:
            raise output_failure("the responses file", self.path, exc) from None
        return self.fd

    def write(self, obj: dict) -> None:
        data = (json.dumps(obj, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8")
        with self.lock:
            fd = self.fd if self.fd is not None else self._open()
            try:
                if os.write(fd, data) != len(data):
                    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))   # a short write: the disk is full
            except OSError as exc:
                with contextlib.suppress(OSError):   # back to the last whole line
                    os.ftruncate(fd, self.size)
                raise output_failure("the responses file", self.path, exc,
                                     outcome="the answers received before are saved; run the same command "
                                             "again to resume") from None
            self.size += len(data)

    def close(self):
        if self.fd is None:
            return
        fd, self.fd = self.fd, None
        try:
            os.fsync(fd)
        except OSError as exc:
            raise output_failure("the responses file", self.path, exc,
                                 outcome="run the same command again to check it and resume") from None
        finally:
            os.close(fd)


def _origin(url: str) -> str:
    """``scheme://host:port`` of a URL (default ports spelled out; no user name or password)."""
    parts = urllib.parse.urlsplit(url)
    try:
        port: Any = parts.port or {"http": 80, "https": 443}.get(parts.scheme.lower())
    except ValueError:   # a port that is not a number: an origin of its own (never the endpoint's)
        port = "?"
    host = (parts.hostname or "").lower()
    return f"{parts.scheme.lower()}://{'[' + host + ']' if ':' in host else host}:{port}"


class _CrossOriginRedirect(Exception):
    """A redirect to another origin: not followed (never an OSError: it is not retried)."""


class _SameOriginRedirects(urllib.request.HTTPRedirectHandler):
    """Follows a redirect within the endpoint's origin only (as urllib does); any other stops the run."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        if _origin(newurl) != _origin(req.full_url):
            with contextlib.suppress(Exception):
                fp.close()
            raise _CrossOriginRedirect(REDIRECT_MESSAGE.format(code=code, source=_origin(req.full_url),
                                                               target=_origin(newurl)))
        return super().redirect_request(req, fp, code, msg, headers, newurl)


class _Deadline:
    """Bounds a whole request: when ``seconds`` have passed, the request's sockets are shut down (a server
    that sends its answer a byte at a time never resets a per-read timeout for long)."""

    local = threading.local()

    def __init__(self, seconds: float):
        self.expired = False
        self._socks: list = []
        self._lock = threading.Lock()
        self._timer = threading.Timer(seconds, self._expire)
        self._timer.daemon = True

    def __enter__(self):
        _Deadline.local.current = self
        self._timer.start()
        return self

    def __exit__(self, *exc):
        self._timer.cancel()
        _Deadline.local.current = None
        return False

    def _expire(self):
        with self._lock:
            self.expired = True
            for sock in self._socks:
                _shutdown(sock)

    def watch(self, sock):
        with self._lock:
            self._socks.append(sock)
            if self.expired:
                _shutdown(sock)


def _shutdown(sock) -> None:
    with contextlib.suppress(OSError):
        socket.socket.shutdown(sock, socket.SHUT_RDWR)   # the raw socket, also under TLS


class _Timed:
    """An ``http.client`` connection whose sockets the current :class:`_Deadline` watches."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        deadline = getattr(_Deadline.local, "current", None)
        create = self._create_connection

        def timed(*a, **kw):
            sock = create(*a, **kw)
            if deadline is not None:
                deadline.watch(sock)
            return sock

        self._create_connection = timed


class _TimedHTTPConnection(_Timed, http.client.HTTPConnection):
    pass


class _TimedHTTPSConnection(_Timed, http.client.HTTPSConnection):
    pass


class _HTTPHandler(urllib.request.HTTPHandler):
    def do_open(self, http_class, req, **kw):
        return super().do_open(_TimedHTTPConnection, req, **kw)


class _HTTPSHandler(urllib.request.HTTPSHandler):
    def do_open(self, http_class, req, **kw):
        return super().do_open(_TimedHTTPSConnection, req, **kw)


def _opener() -> urllib.request.OpenerDirector:
    """urllib's opener (proxies from the environment as usual) with whole-request deadlines and redirects kept
    to the endpoint's origin."""
    return urllib.request.build_opener(_HTTPHandler, _HTTPSHandler, _SameOriginRedirects)


def _post(url, body, headers, timeout, opener=None):
    """(status, headers, raw body) of one POST; urllib raises HTTPError for non-2xx, which is an answer too.

    ``timeout`` bounds the whole request (connection, headers and body): past it, ``TimeoutError``."""
    req = urllib.request.Request(url, data=json.dumps(body).encode("utf-8"), headers=headers, method="POST")
    opener = opener or _opener()
    with _Deadline(timeout) as deadline:
        try:
            try:
                with opener.open(req, timeout=timeout) as resp:
                    out = resp.status, dict(resp.headers), resp.read()
            except urllib.error.HTTPError as exc:
                out = exc.code, dict(exc.headers or {}), exc.read() or b""
        except (OSError, http.client.HTTPException):
            if deadline.expired:
                raise TimeoutError(TIMEOUT_MESSAGE.format(timeout=timeout)) from None
            raise
    if deadline.expired:   # a body read to a close forced by the deadline: cut short, not an answer
        raise TimeoutError(TIMEOUT_MESSAGE.format(timeout=timeout))
    return out


def _send(cid, endpoint, body, *, base_url, model, headers, timeout, max_retries, backoff, stop, counters,
          opener=None):
    url = base_url.rstrip("/") + "/" + _PATHS[endpoint]
    body = dict(body)
    body["model"] = model
    hdrs = {"Content-Type": "application/json", "X-Client-Request-Id": cid, **headers}
    attempt = 0
    while True:
        status, rheaders, raw, err = None, {}, b"", None
        try:
            status, rheaders, raw = _post(url, body, hdrs, timeout, opener)
        except _CrossOriginRedirect as exc:
            return {"message": str(exc)}, "redirect"     # never retried, never recorded: the run stops
        except (urllib.error.URLError, OSError, TimeoutError, http.client.HTTPException) as exc:
            err = f"{type(exc).__name__}: {getattr(exc, 'reason', exc)}"
        retry = err is not None or status in RETRY_STATUSES
        if retry and stop.is_set():
            return None, "interrupted"       # the run is stopping: no line, sent again next time
        if not retry or attempt >= max_retries:
            break
        attempt += 1
        with counters["lock"]:
            counters["retries"] += 1
        delay = backoff * (2 ** (attempt - 1)) * (1 + random.random() / 4)
        after = {k.lower(): v for k, v in rheaders.items()}.get("retry-after")
        if after is not None:
            with contextlib.suppress(ValueError):   # a date instead of seconds: keep the backoff
                delay = max(delay, min(float(after), 60.0))
        stop.wait(delay)
    line = {"id": f"batch_req_{cid}", "custom_id": cid}
    if err is not None:
        # no answer at all: nothing to record (the request may never have arrived); the run stops
        return {"message": err[:500]}, "connection_error"
    text = raw.decode("utf-8", errors="replace")
    try:
        parsed = json.loads(text)
    except json.JSONDecodeError:
        parsed = None
    rid = {k.lower(): v for k, v in rheaders.items()}.get("x-request-id")
    if status == 200 and not isinstance(parsed, dict):
        line.update(response=None, error={"code": "malformed_response",
                                          "message": f"HTTP 200 with a body that is not a JSON object: {text[:300]}"})
        return line, "malformed_response"
    line.update(response={"status_code": status, "request_id": rid,
                          "body": parsed if parsed is not None else {"error": {"message": text[:500]}}},
                error=None)
    return line, "ok" if status == 200 else "http_error"


def run_study(study_dir: str | os.PathLike[str], *, base_url: str, model: str, concurrency: int = 4,
              max_requests: int | None = None, api_key: str | None = None, timeout: float = 120.0,
              max_retries: int = 5, backoff: float = 1.0, progress: bool = False) -> RunResult:
    """Send the requests of a design folder to an OpenAI-compatible endpoint; resumable.

    Parameters
    ----------
    study_dir : path-like
        A folder written by ``toolbias-stats design`` (formats ``chat-jsonl`` or ``openai-batch``).
    base_url : str
        The endpoint's base URL including its version prefix, as for the OpenAI SDK
        (``http://127.0.0.1:8000/v1``); requests go to ``{base_url}/chat/completions`` (or ``/responses``).
    model : str
        The model to ask (set in every request body).
    concurrency : int, default 4
        Requests in flight at once.
    max_requests : int, optional
        Send at most this many requests in this call (the rest stay for the next call).
    api_key : str, optional
        Sent as ``Authorization: Bearer ...``.
    timeout : float, default 120
        Seconds per HTTP request, in all: connecting, the headers and the whole body (a server that answers a
        byte at a time is cut off at ``timeout``; that counts as no answer, retried like a refused connection).
    max_retries : int, default 5
        Re-sends of a request answered with 408/409/429/5xx or not answered at all; the wait doubles from
        ``backoff`` seconds (at least ``Retry-After`` when the server sends it, at most 60 s). After the last
        one the answer (or the connection error) is written as the request's line.
    backoff : float, default 1.0
    progress : bool, default False
        A progress bar on stderr (the CLI turns it on for terminals only).

    Returns
    -------
    RunResult

    Raises
    ------
    ValueError
        A folder without a design, an Anthropic batch design (send it with the Message Batches API), a design
        written for another model, a malformed requests file, a responses file the runner did not write; the
        endpoint redirecting to another origin (:data:`REDIRECT_MESSAGE`: not followed, the run stops).
    toolbias_stats.audit._lock.RunLockError
        Another run holds the folder (the message names its process, host and start time).
    toolbias_stats._output.OutputError
        A responses file or the lock that cannot be written (read-only folder, full disk), naming the path.

    Notes
    -----
    Each line is an OpenAI Batch API output line ``{"id", "custom_id", "response": {"status_code",
    "request_id", "body"}, "error"}`` written with a single ``write`` on a file opened for appending, so a killed
    run leaves whole lines (and at most one line cut short, which the next call removes and sends again).
    Requests in flight when a run is killed have no line and are sent again; no request with a line is.
    A body that is not JSON becomes ``error = {"code": "malformed_response"}`` and an HTTP error its status and
    body: the importer reads both as ``parse_error`` rows (nothing is lost). A request that gets no answer at all
    after the retries stops the run without a line (the endpoint is down: recording it would mark it done).

    Only ``base_url``'s origin (scheme, host, port) is contacted: a redirect within it is followed as urllib
    does, a redirect to another origin is not (the request and its ``Authorization`` header never go there) and
    stops the run. One run at a time per folder: the folder is locked (``.toolbias-run.lock``) while it runs.

    Examples
    --------
    A design folder, and a call that sends none of its requests yet (``max_requests=0``; no network is used):

    >>> import tempfile
    >>> from pathlib import Path
    >>> import toolbias_stats as tbs
    >>> from toolbias_stats.audit import design_study, write_requests
    >>> cat = tbs.ToolCatalog.from_records([{"cluster_id": "1", "tool_id": t} for t in "abc"])
    >>> out = Path(tempfile.mkdtemp()) / "study"
    >>> _ = write_requests(design_study(cat, {"1": ["find x", "find y"]}), out)
    >>> res = run_study(out, base_url="http://127.0.0.1:8000/v1", model="my-model", max_requests=0)
    >>> res.sent, res.skipped, res.remaining
    (0, 0, 6)

    With a server listening at ``base_url`` the same call without ``max_requests`` sends the 6 requests and
    appends each answer to ``responses-run1.jsonl``; calling it again sends only what is still missing, and
    ``tbs.selection_bias(out / "study.toml")`` reads the answers.
    """
    _check_run_args(concurrency, max_requests, base_url, model, timeout)
    study_dir = Path(study_dir)
    info = _read_run_design(study_dir, model)
    # SIGTERM / SIGHUP unwind the run like Ctrl-C (whole lines kept, the lock removed), then end the process
    with cleanup_on_signals(), folder_lock(study_dir) as stale:
        outs = {int(r): study_dir / f for r, f in info["files"]["responses"].items()}
        todo, skipped, repaired = _pending(study_dir, info, outs)
        budget = len(todo) if max_requests is None else min(max_requests, len(todo))
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        counters: dict[str, Any] = {"lock": threading.Lock(), "retries": 0}
        outcomes: dict = {}
        halts: list = []
        send = functools.partial(_send, base_url=base_url, model=model, headers=headers, timeout=timeout,
                                 max_retries=max_retries, backoff=backoff, counters=counters, opener=_opener())
        try:
            sent = _send_all(todo[:budget], outs, send, concurrency, progress, outcomes, halts)
        finally:   # the manifest names the model once there are answers (also after Ctrl-C or an error)
            if any(p.exists() and p.stat().st_size for p in outs.values()):
                _name_model(study_dir, model)
    refused = [message for outcome, message in halts if outcome == "redirect"]
    if refused:
        raise ValueError(refused[0])
    return RunResult(sent=sent, skipped=skipped, remaining=len(todo) - sent, by_outcome=outcomes,
                     retries=counters["retries"], files=outs, repaired=repaired,
                     stopped=f"endpoint unreachable after {max_retries} retries: {halts[0][1]}" if halts
                     else None, notes=[stale] if stale else [])


# -- run_study's stages: check the arguments -> read the design -> what is left -> send ----------
def _check_run_args(concurrency: Any, max_requests: Any, base_url: Any, model: Any, timeout: Any) -> None:
    if not isinstance(concurrency, int) or isinstance(concurrency, bool) or concurrency < 1:
        raise ValueError(f"`concurrency` must be a positive integer; got {concurrency!r} instead.")
    if max_requests is not None and (not isinstance(max_requests, int) or max_requests < 0):
        raise ValueError(f"`max_requests` must be a non-negative integer; got {max_requests!r} instead.")
    if not base_url or not str(base_url).startswith(("http://", "https://")):
        raise ValueError(f"`base_url` must be an http(s) URL; got {base_url!r} instead.")
    if not model:
        raise ValueError("`model` is required.")
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 < timeout < float("inf"):
        raise ValueError(f"`timeout` must be a positive number of seconds; got {timeout!r} instead.")


def _read_run_design(study_dir: Path, model: str) -> dict:
    """The folder's ``design.json``, refused when it is an Anthropic batch or names another model."""
    info = read_design(study_dir)
    if info.get("format") == "anthropic-batch":
        raise ValueError(f"{study_dir} holds Anthropic Message Batches requests; send them with the Message "
                         "Batches API and save the results as the manifest's responses files.")
    if info.get("model") and info["model"] != model:
        # the manifest labels every answer with the design's model: another model's answers would be mislabelled
        raise ValueError(f"the design in {study_dir} names model {info['model']!r}; run it with --model "
                         f"{info['model']!r} (or write a new design for {model!r}).")
    return info


def _pending(study_dir: Path, info: dict, outs: dict) -> tuple[list, int, list]:
    """``(todo, skipped, repaired)``: the requests without a line, how many have one, the files repaired."""
    files = {int(r): study_dir / f for r, f in info["files"]["requests"].items()}
    todo: list = []
    skipped, repaired = 0, []
    for r in sorted(files):
        reqs = _load_requests(files[r], info.get("format") or "")
        done, cut = done_custom_ids(outs[r])
        if cut:
            repaired.append(str(outs[r]))
        skipped += sum(1 for cid, _, _ in reqs if cid in done)
        todo += [(r, cid, ep, body) for cid, ep, body in reqs if cid not in done]
    return todo, skipped, repaired


def _send_all(items: list, outs: dict, send: Any, concurrency: int, progress: bool, outcomes: dict,
              halts: list) -> int:
    """Send ``items`` with ``concurrency`` threads, writing each answer as it arrives; the number written."""
    writers = {r: _Writer(outs[r]) for r in sorted({t[0] for t in items})}
    stop = threading.Event()
    bar = None
    if progress and items:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(items), desc="requests", unit="req", leave=True)
    sent = 0
    pool = ThreadPoolExecutor(max_workers=concurrency)
    running: dict = {}
    try:
        for item in iter(items):
            if stop.is_set():
                break
            running[pool.submit(send, item[1], item[2], item[3], stop=stop)] = item
            if len(running) >= concurrency:
                finished, _ = wait(running, return_when=FIRST_COMPLETED)
                for fut in finished:
                    sent += _record(fut, running.pop(fut), writers, outcomes, bar, stop, halts)
        while running:
            finished, _ = wait(running, return_when=FIRST_COMPLETED)
            for fut in finished:
                sent += _record(fut, running.pop(fut), writers, outcomes, bar, stop, halts)
    except BaseException:
        stop.set()                # in-flight requests stop retrying; their lines are not written (sent again)
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    else:
        pool.shutdown()
    finally:
        for w in writers.values():
            w.close()
        if bar is not None:
            bar.close()
    return sent


def _record(fut, item, writers, outcomes, bar, stop, halts) -> int:
    line, outcome = fut.result()
    if outcome == "interrupted":
        return 0
    if outcome in ("connection_error", "redirect"):   # no line: the run stops (and says why)
        halts.append((outcome, line["message"]))
        stop.set()
        return 0
    writers[item[0]].write(line)
    outcomes[outcome] = outcomes.get(outcome, 0) + 1
    if bar is not None:
        bar.update(1)
    return 1


def _name_model(study_dir: Path, model: str) -> None:
    """Put the model's name into a manifest written without one (``model = "unnamed-model"``)."""
    manifest = study_dir / "study.toml"
    if not manifest.exists():
        return
    text = manifest.read_text(encoding="utf-8")
    placeholder = f'model = "{DEFAULT_MODEL}"'
    if placeholder in text:
        atomic_write_text(manifest, text.replace(placeholder, "model = " + json.dumps(model, ensure_ascii=False)))
