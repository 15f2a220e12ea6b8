"""Issue 37: the runner keeps the API key to its endpoint's origin, bounds each request in time, runs once per
folder, and ends every fault with one message (exit 2) and nothing half-written.

Every server here listens on 127.0.0.1 only and stops by itself.
"""

from __future__ import annotations

import errno
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from fake_openai_server import FakeOpenAI

from toolbias_stats.audit import design_study, write_requests
from toolbias_stats.audit._lock import LOCK_NAME, folder_lock
from toolbias_stats.audit._runner import _origin, done_custom_ids, run_study
from toolbias_stats.cli._commands import main

ROOT = Path(__file__).resolve().parents[2]
KEY = "sk-test-secret-0123456789"


@pytest.fixture(autouse=True)
def _no_proxy(monkeypatch):
    for var in ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")


@pytest.fixture
def study(tmp_path, bb_catalog, bb_data_dir):
    d = design_study(bb_catalog, bb_data_dir / "queries.json", n_queries=2, clusters=["1"])
    write_requests(d, tmp_path / "s", format="chat-jsonl")
    return tmp_path / "s"


def _snapshot(d: Path) -> dict:
    return {str(p.relative_to(d)): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()}


class _Server:
    """A loopback HTTP server around ``handle(handler)``, recording ``(method, path, headers)`` of each request."""

    def __init__(self, handle):
        self.handle, self.received = handle, []

    def __enter__(self):
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _any(self):
                server.received.append((self.command, self.path, dict(self.headers)))
                n = int(self.headers.get("Content-Length") or 0)
                if n:
                    self.rfile.read(n)
                server.handle(self)

            do_GET = do_POST = do_PUT = do_HEAD = _any   # http.server's names

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()
        return self

    @property
    def origin(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()
        return False


def _answer(handler, code=200, body=b"{}", headers=()):
    handler.send_response(code)
    for k, v in headers:
        handler.send_header(k, v)
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    handler.wfile.write(body)


class TestRedirects:
    """Acceptance: an endpoint answering 302 to a second loopback server; that server never receives a request
    with the key (none at all), and `run` stops with one message naming both origins."""

    @pytest.mark.parametrize("code", [301, 302, 303, 307, 308])
    def test_cross_origin_redirect_is_not_followed(self, study, monkeypatch, capsys, code):
        monkeypatch.setenv("OPENAI_API_KEY", KEY)
        with _Server(_answer) as other:
            target = other.origin + "/v1/chat/completions"
            with _Server(lambda h: _answer(h, code, b"", [("Location", target)])) as endpoint:
                before = _snapshot(study)
                rc = main(["run", str(study), "--base-url", endpoint.origin + "/v1", "--model", "m",
                           "--max-retries", "0"])
                err = capsys.readouterr().err
        assert other.received == []                        # the key (and the request) never went there
        assert all(h.get("Authorization") == f"Bearer {KEY}" for _, _, h in endpoint.received)
        assert rc == 2
        lines = err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("toolbias-stats run: error: "), err
        assert endpoint.origin in lines[0] and other.origin in lines[0] and f"HTTP {code}" in lines[0]
        assert KEY not in err
        assert _snapshot(study) == before                  # no line, no lock file, manifest unchanged

    def test_other_port_or_scheme_is_another_origin(self):
        assert _origin("http://127.0.0.1/v1") == _origin("HTTP://127.0.0.1:80/x") == "http://127.0.0.1:80"
        assert _origin("http://127.0.0.1:8000/v1") != _origin("http://127.0.0.1:8001/v1")
        assert _origin("https://api.example.com/v1") != _origin("http://api.example.com/v1")
        assert _origin("https://user:pw@api.example.com/v1") == "https://api.example.com:443"   # no password
        assert _origin("http://127.0.0.1:x/v1") != _origin("http://127.0.0.1/v1")

    def test_same_origin_redirect_is_followed(self, study, monkeypatch):
        monkeypatch.setenv("OPENAI_API_KEY", KEY)

        def handle(h):
            if h.path.startswith("/old/"):
                _answer(h, 303, b"", [("Location", "/v1/chat/completions")])
            else:
                _answer(h, 200, b"{}")

        with _Server(handle) as endpoint:
            res = run_study(study, base_url=endpoint.origin + "/old", model="m", max_retries=0, api_key=KEY)
        assert res.sent == 10 and res.by_outcome == {"ok": 10}
        assert sorted({(m, p) for m, p, _ in endpoint.received}) == [("GET", "/v1/chat/completions"),
                                                                      ("POST", "/old/chat/completions")]


class TestTimeout:
    """`run --timeout 1` bounds the whole request: a server that dribbles its answer a byte at a time."""

    @staticmethod
    def _dribble(where):
        def handle(h):
            head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n"
            data = (head if where == "headers" else b"") + b" " * 200
            if where == "body":
                h.wfile.write(head)
            try:
                for i in range(len(data)):
                    h.wfile.write(data[i:i + 1])
                    h.wfile.flush()
                    time.sleep(0.1)            # every read gets a byte well within the 1 s per-read timeout
            except OSError:
                pass
            h.close_connection = True
        return handle

    @pytest.mark.parametrize("where", ["body", "headers"])
    def test_whole_request_is_bounded(self, study, capsys, where):
        with _Server(self._dribble(where)) as slow:
            t0 = time.monotonic()
            rc = main(["run", str(study), "--base-url", slow.origin + "/v1", "--model", "m", "--timeout", "1",
                       "--max-retries", "0", "--concurrency", "1"])
            elapsed = time.monotonic() - t0
        captured = capsys.readouterr()
        assert elapsed < 6, elapsed                      # was ~20 s here (99.7 s in the issue)
        assert rc == 1 and "no complete answer within 1 s" in captured.err
        assert done_custom_ids(study / "responses-run1.jsonl")[0] == set()   # nothing recorded as answered

    def test_timeout_must_be_positive(self, study, capsys):
        assert main(["run", str(study), "--base-url", "http://127.0.0.1:9/v1", "--model", "m", "--timeout",
                     "0"]) == 2
        assert "`timeout` must be a positive number" in capsys.readouterr().err


def _cli(*args, **kw):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen([sys.executable, "-m", "toolbias_stats.cli", *args], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, **kw)


class TestLock:
    """Acceptance: two `run` processes on one folder; the second refuses, naming the holder."""

    def test_second_run_refuses_naming_the_holder(self, study):
        lock = study / LOCK_NAME
        with FakeOpenAI(delay=0.3, lifetime=60) as srv:
            first = _cli("run", str(study), "--base-url", srv.base_url, "--model", "m", "--concurrency", "1")
            deadline = time.monotonic() + 30
            while not (lock.exists() and lock.stat().st_size) and time.monotonic() < deadline:
                time.sleep(0.02)
            second = _cli("run", str(study), "--base-url", srv.base_url, "--model", "m")
            out2, err2 = second.communicate(timeout=60)
            _, err1 = first.communicate(timeout=60)
        assert first.returncode == 0, err1
        assert second.returncode == 2 and out2 == ""
        lines = err2.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("toolbias-stats run: error: "), err2
        assert f"process {first.pid} on host {socket.gethostname()}, started " in lines[0]
        assert str(lock) in lines[0]
        ids = [json.loads(x)["custom_id"] for x in (study / "responses-run1.jsonl").read_text().splitlines()]
        assert len(ids) == len(set(ids)) == 10              # each request once
        assert not lock.exists()

    def test_stale_lock_of_a_killed_run_is_taken_over_and_said(self, study):
        code = ("import sys, time; from toolbias_stats.audit._lock import folder_lock\n"
                "with folder_lock(sys.argv[1]):\n    print('locked', flush=True); time.sleep(60)\n")
        holder = subprocess.Popen([sys.executable, "-c", code, str(study)], stdout=subprocess.PIPE, text=True,
                                  env={**os.environ, "PYTHONPATH": str(ROOT)})
        assert holder.stdout.readline().strip() == "locked"
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=10)
        assert json.loads((study / LOCK_NAME).read_text())["pid"] == holder.pid   # left behind by the kill
        with FakeOpenAI() as srv:
            proc = _cli("run", str(study), "--base-url", srv.base_url, "--model", "m")
            out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
        assert f"note: removed a stale lock left by process {holder.pid} on host " in out
        assert "that process is gone" in out and not (study / LOCK_NAME).exists()

    def test_sigterm_ends_the_run_cleanly(self, study):
        responses = study / "responses-run1.jsonl"
        with FakeOpenAI(delay=0.2, lifetime=60) as srv:
            proc = _cli("run", str(study), "--base-url", srv.base_url, "--model", "m", "--concurrency", "1")
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and not (responses.exists() and responses.read_bytes().count(b"\n")):
                time.sleep(0.01)
            proc.send_signal(signal.SIGTERM)
            _, err = proc.communicate(timeout=30)
            assert proc.returncode == -signal.SIGTERM and "Traceback" not in err, err
            assert not (study / LOCK_NAME).exists()                 # the lock went with the run
            data = responses.read_bytes()
            assert data.endswith(b"\n") and 1 <= data.count(b"\n") < 10   # whole lines only
            res = run_study(study, base_url=srv.base_url, model="m")
        assert res.notes == [] and res.skipped + res.sent == 10

    def test_lock_in_process(self, tmp_path):
        with folder_lock(tmp_path) as note:
            assert note is None
            with (pytest.raises(ValueError, match=f"in use by another run \\(process {os.getpid()} on host"),
                  folder_lock(tmp_path)):
                pass
        assert not (tmp_path / LOCK_NAME).exists()


class TestRunOptions:
    def test_max_requests_zero_is_refused(self, study, capsys):
        before = _snapshot(study)
        rc = main(["run", str(study), "--base-url", "http://127.0.0.1:9/v1", "--model", "m", "--max-requests", "0"])
        captured = capsys.readouterr()
        assert rc == 2 and captured.out == ""
        lines = captured.err.strip().splitlines()
        assert len(lines) == 1 and "--max-requests must be at least 1 (got 0)" in lines[0]
        assert _snapshot(study) == before

    @pytest.mark.parametrize("json_mode", [False, True])
    def test_stopped_run_exits_1_in_both_modes(self, study, capsys, json_mode):
        with FakeOpenAI() as srv:
            url = srv.base_url                           # closed again: nothing listens there
        rc = main(["run", str(study), "--base-url", url, "--model", "m", "--max-retries", "0"]
                  + (["--json"] if json_mode else []))
        captured = capsys.readouterr()
        assert rc == 1 and "toolbias-stats run: stopped: endpoint unreachable" in captured.err
        if json_mode:
            assert json.loads(captured.out)["stopped"].startswith("endpoint unreachable")


class TestOutputFaults:
    """A full disk while answers are appended, and a folder that cannot be written: one message naming the
    path, exit 2, only whole lines left (the run resumes from them)."""

    def test_full_disk_while_appending(self, study, capsys, monkeypatch):
        responses = study / "responses-run1.jsonl"
        real_write = os.write
        state = {"lines": 0}

        def full_after_three_lines(fd, data):
            try:
                target = os.readlink(f"/proc/self/fd/{fd}")
            except OSError:
                target = ""
            if target == str(responses):
                state["lines"] += 1
                if state["lines"] == 4:                  # the disk fills in the middle of the 4th line
                    return real_write(fd, data[: len(data) // 2])
                if state["lines"] > 4:
                    raise OSError(errno.ENOSPC, "No space left on device")
            return real_write(fd, data)

        monkeypatch.setattr(os, "write", full_after_three_lines)
        with FakeOpenAI() as srv:
            rc = main(["run", str(study), "--base-url", srv.base_url, "--model", "m", "--concurrency", "1"])
            captured = capsys.readouterr()
            monkeypatch.setattr(os, "write", real_write)    # space freed: the same command resumes
            assert rc == 2
            lines = captured.err.strip().splitlines()
            assert len(lines) == 1, captured.err
            assert f"cannot write the responses file {responses}: no space left on the device" in lines[0]
            assert responses.read_bytes().count(b"\n") == 3 and responses.read_bytes().endswith(b"\n")
            assert not (study / LOCK_NAME).exists()
            res = run_study(study, base_url=srv.base_url, model="m")
        assert res.skipped == 3 and res.sent == 7 and not res.repaired
        ids = [json.loads(x)["custom_id"] for x in responses.read_text().splitlines()]
        assert len(ids) == len(set(ids)) == 10

    def test_read_only_folder(self, study, capsys, monkeypatch):
        real_open = os.open

        def read_only(path, flags, *a, **kw):
            if Path(path).parent == study and flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT):
                raise OSError(errno.EROFS, "Read-only file system", str(path))
            return real_open(path, flags, *a, **kw)

        before = _snapshot(study)
        monkeypatch.setattr(os, "open", read_only)
        rc = main(["run", str(study), "--base-url", "http://127.0.0.1:9/v1", "--model", "m"])
        monkeypatch.setattr(os, "open", real_open)
        captured = capsys.readouterr()
        assert rc == 2 and captured.out == ""
        lines = captured.err.strip().splitlines()
        assert len(lines) == 1 and f"{study / LOCK_NAME}: read-only file system" in lines[0], captured.err
        assert _snapshot(study) == before
