"""A resumable runner: send a design folder's requests to an OpenAI-compatible endpoint. See :func:`run_study`.

Every answer (and every error) is appended to ``responses-run{r}.jsonl`` as it arrives, as an OpenAI Batch API
output line keyed by ``custom_id``, so the manifest written beside the requests reads it with the ``openai``
importer, and a run that stops (Ctrl-C, a crash, a kill) resumes where it stopped: requests whose
``custom_id`` already has a line are never sent again. Only the standard library talks to the network, and
only to ``base_url``.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import random
import re
import threading
import urllib.error
import urllib.request
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._display import ReprHTMLMixin
from ._requests import DEFAULT_MODEL, atomic_write_text, read_design

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["run_study", "RunResult", "RETRY_STATUSES", "done_custom_ids"]

#: HTTP statuses that are retried (with exponential backoff, honouring ``Retry-After``).
RETRY_STATUSES = frozenset({408, 409, 429, 500, 502, 503, 504})
_CUSTOM_ID_RE = re.compile(r'"custom_id"\s*:\s*"((?:[^"\\]|\\.)*)"')
_PATHS = {"chat": "chat/completions", "responses": "responses"}


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

    def to_dict(self) -> dict:
        return {"sent": self.sent, "skipped": self.skipped, "remaining": self.remaining,
                "by_outcome": dict(self.by_outcome), "retries": self.retries,
                "files": {str(k): str(v) for k, v in self.files.items()}, "repaired": list(self.repaired),
                "stopped": self.stopped}

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
    """Appends one complete line per ``os.write`` (a kill leaves whole lines, or one cut-short last line)."""

    def __init__(self, path: Path):
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        self.lock = threading.Lock()

    def write(self, obj: dict) -> None:
        data = (json.dumps(obj, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8")
        with self.lock:
            os.write(self.fd, data)

    def close(self):
        os.fsync(self.fd)
        os.close(self.fd)


def _post(url, body, headers, timeout):
    """(status, headers, raw body) of one POST; urllib raises HTTPError for non-2xx, which is an answer too."""
    req = urllib.request.Request(url, data=json.dumps(body).encode("utf-8"), headers=headers, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, dict(resp.headers), resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers or {}), exc.read() or b""


def _send(cid, endpoint, body, *, base_url, model, headers, timeout, max_retries, backoff, stop, counters):
    url = base_url.rstrip("/") + "/" + _PATHS[endpoint]
    body = dict(body)
    body["model"] = model
    hdrs = {"Content-Type": "application/json", "X-Client-Request-Id": cid, **headers}
    attempt = 0
    while True:
        status, rheaders, raw, err = None, {}, b"", None
        try:
            status, rheaders, raw = _post(url, body, hdrs, timeout)
        except (urllib.error.URLError, OSError, TimeoutError) as exc:
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
        Seconds per HTTP request.
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
        written for another model, a malformed requests file, a responses file the runner did not write.

    Notes
    -----
    Each line is an OpenAI Batch API output line ``{"id", "custom_id", "response": {"status_code",
    "request_id", "body"}, "error"}`` written with a single ``write`` on a file opened for appending, so a killed
    run leaves whole lines (and at most one line cut short, which the next call removes and sends again).
    Requests in flight when a run is killed have no line and are sent again; no request with a line is.
    A body that is not JSON becomes ``error = {"code": "malformed_response"}`` and an HTTP error its status and
    body: the importer reads both as ``parse_error`` rows (nothing is lost). A request that gets no answer at all
    after the retries stops the run without a line (the endpoint is down: recording it would mark it done).

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
    _check_run_args(concurrency, max_requests, base_url, model)
    study_dir = Path(study_dir)
    info = _read_run_design(study_dir, model)
    outs = {int(r): study_dir / f for r, f in info["files"]["responses"].items()}
    todo, skipped, repaired = _pending(study_dir, info, outs)
    _name_model(study_dir, model)
    budget = len(todo) if max_requests is None else min(max_requests, len(todo))
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    counters: dict[str, Any] = {"lock": threading.Lock(), "retries": 0}
    outcomes: dict = {}
    unreachable: list = []
    send = functools.partial(_send, base_url=base_url, model=model, headers=headers, timeout=timeout,
                             max_retries=max_retries, backoff=backoff, counters=counters)
    sent = _send_all(todo[:budget], outs, send, concurrency, progress, outcomes, unreachable)
    return RunResult(sent=sent, skipped=skipped, remaining=len(todo) - sent, by_outcome=outcomes,
                     retries=counters["retries"], files=outs, repaired=repaired,
                     stopped=f"endpoint unreachable after {max_retries} retries: {unreachable[0]}" if unreachable
                     else None)


# -- run_study's stages: check the arguments -> read the design -> what is left -> send ----------
def _check_run_args(concurrency: Any, max_requests: Any, base_url: Any, model: Any) -> None:
    if not isinstance(concurrency, int) or isinstance(concurrency, bool) or concurrency < 1:
        raise ValueError(f"`concurrency` must be a positive integer; got {concurrency!r} instead.")
    if max_requests is not None and (not isinstance(max_requests, int) or max_requests < 0):
        raise ValueError(f"`max_requests` must be a non-negative integer; got {max_requests!r} instead.")
    if not base_url or not str(base_url).startswith(("http://", "https://")):
        raise ValueError(f"`base_url` must be an http(s) URL; got {base_url!r} instead.")
    if not model:
        raise ValueError("`model` is required.")


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
              unreachable: list) -> int:
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
                    sent += _record(fut, running.pop(fut), writers, outcomes, bar, stop, unreachable)
        while running:
            finished, _ = wait(running, return_when=FIRST_COMPLETED)
            for fut in finished:
                sent += _record(fut, running.pop(fut), writers, outcomes, bar, stop, unreachable)
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


def _record(fut, item, writers, outcomes, bar, stop, unreachable) -> int:
    line, outcome = fut.result()
    if outcome == "interrupted":
        return 0
    if outcome == "connection_error":
        unreachable.append(line["message"])
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
