"""A small fake OpenAI-compatible server for the runner's tests (127.0.0.1 only, bounded, stops by itself).

It answers ``POST /v1/chat/completions`` (and ``/v1/responses``) like a model with a known **position bias**: the
tool at position ``j`` (0-based) of the request's tool list is called with probability ``weights[j]``, whatever
the tool. The draw is seeded by the request's ``X-Client-Request-Id`` header (the runner's ``custom_id``), so
the same request always gets the same answer. Special ``custom_id`` sets make it answer 429 (once), 500
(once), a body that is not JSON, a text answer without a tool call, or 400.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np


class FakeOpenAI:
    """Start with ``with FakeOpenAI(...) as srv:``; ``srv.base_url`` is ``http://127.0.0.1:PORT/v1``.

    Parameters
    ----------
    weights : sequence of float
        Position weights of the chooser (normalised over the tools offered).
    max_requests : int
        Requests served at most; later ones are refused with 503 and the server stops.
    lifetime : float
        Seconds after which the server shuts itself down.
    rate_limited, server_error, malformed, text_answer, bad_request : set of str
        custom_ids answered 429 (first time, with ``Retry-After: 0``), 500 (first time), ``200`` with a body that
        is not JSON, a text answer without a tool call, and 400.
    delay : float
        Seconds to wait before answering (to interrupt a runner mid-run).
    seed : int
        Mixed into every draw (another seed, another realisation of the same chooser).
    """

    def __init__(self, weights=(0.5, 0.2, 0.1, 0.1, 0.1), *, max_requests=5000, lifetime=120.0, rate_limited=(),
                 server_error=(), malformed=(), text_answer=(), bad_request=(), delay=0.0, seed=0):
        self.seed = int(seed)
        self.weights = np.asarray(weights, dtype=float)
        self.max_requests = int(max_requests)
        self.lifetime = float(lifetime)
        self.rate_limited, self.server_error = set(rate_limited), set(server_error)
        self.malformed, self.text_answer, self.bad_request = set(malformed), set(text_answer), set(bad_request)
        self.delay = float(delay)
        self.received: list = []          # custom_id of every request received (retries included)
        self.lock = threading.Lock()
        self._server = None

    # -- the chooser ----------------------------------------------------------------------
    def choose(self, cid: str, n: int) -> int:
        seed = int.from_bytes(hashlib.sha256(f"{self.seed}:{cid}".encode()).digest()[:8], "little")
        w = self.weights[:n] / self.weights[:n].sum()
        return int(np.random.default_rng(seed).choice(n, p=w))

    def answer(self, path: str, cid: str, body: dict) -> tuple[int, dict, bytes]:
        with self.lock:
            first = cid not in self.received
            self.received.append(cid)
            if len(self.received) > self.max_requests:
                return 503, {}, b'{"error": {"message": "fake server: request budget spent"}}'
        if self.delay:
            time.sleep(self.delay)
        if cid in self.rate_limited and first:
            return 429, {"Retry-After": "0"}, b'{"error": {"message": "rate limited", "type": "rate_limit"}}'
        if cid in self.server_error and first:
            return 500, {}, b'{"error": {"message": "internal error"}}'
        if cid in self.bad_request:
            return 400, {}, b'{"error": {"message": "bad request", "type": "invalid_request_error"}}'
        if cid in self.malformed:
            return 200, {}, b'{"id": "chatcmpl-broken", "choices": [ {"mess'
        tools = body.get("tools") or []
        names = [t["function"]["name"] if "function" in t else t["name"] for t in tools]
        rid = "chatcmpl-" + hashlib.sha256(cid.encode()).hexdigest()[:16]
        text = cid in self.text_answer or not names
        pick = None if text else names[self.choose(cid, len(names))]
        if path.endswith("/responses"):
            out = ([{"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
                     "content": [{"type": "output_text", "text": "No tool needed.", "annotations": []}]}] if text else
                   [{"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": pick, "arguments": "{}",
                     "status": "completed"}])
            resp = {"id": rid, "object": "response", "created_at": 0, "model": body.get("model"),
                    "status": "completed", "output": out, "parallel_tool_calls": True, "tool_choice": "auto",
                    "tools": [], "metadata": {}}
        else:
            msg = {"role": "assistant", "content": "No tool needed." if text else None, "refusal": None}
            if not text:
                msg["tool_calls"] = [{"id": "call_" + rid[-8:], "type": "function",
                                      "function": {"name": pick, "arguments": "{}"}}]
            resp = {"id": rid, "object": "chat.completion", "created": 0, "model": body.get("model") or "fake",
                    "choices": [{"index": 0, "message": msg, "finish_reason": "stop" if text else "tool_calls",
                                 "logprobs": None}],
                    "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}}
        return 200, {"x-request-id": "req_" + rid[-12:]}, json.dumps(resp).encode()

    # -- the server ----------------------------------------------------------------------------
    def __enter__(self):
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # http.server's name
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                try:
                    body = json.loads(raw)
                except json.JSONDecodeError:
                    body = {}
                cid = self.headers.get("X-Client-Request-Id") or ""
                if self.path.rstrip("/") not in ("/v1/chat/completions", "/v1/responses"):
                    code, headers, data = 404, {}, b'{"error": {"message": "not found"}}'
                else:
                    code, headers, data = fake.answer(self.path, cid, body)
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for k, v in headers.items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):   # quiet
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                                        daemon=True)
        self._thread.start()
        self._timer = threading.Timer(self.lifetime, self._server.shutdown)
        self._timer.daemon = True
        self._timer.start()
        return self

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def __exit__(self, *exc):
        self._timer.cancel()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)
        return False
