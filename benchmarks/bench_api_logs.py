"""Benchmark: reading API logs (OpenAI Batch pairs, Anthropic batches, OTLP traces) into a SelectionLog (not a test).

Usage:  python benchmarks/bench_api_logs.py [--requests 100000] [--repeat 3] [--formats openai,anthropic,otel]

Writes synthetic but schema-faithful logs (the fixture shapes of tests/io/fixtures/api_logs, one request per
line, 5 tools per request in a shuffled order, answers drawn from a fixed chooser with 5% text answers and 2%
API errors) to a temporary folder, then times ``read_openai`` (batch input + output, inferred clusters),
``read_anthropic`` and ``read_otel`` (best of ``--repeat`` runs; reading, joining, cluster inference and
SelectionLog validation included; writing the files excluded).

Each reader is put beside a bare baseline measured in the same run: decoding the same files into Python objects
and nothing else (every line of a JSON Lines file, or the one OTLP document; the garbage collector paused as the
readers pause it), with orjson and with msgspec when installed (the faster counts), and with the standard
library's ``json``. The ratio reader / baseline is what to compare across machines: this machine is shared, so
the load average is printed with the figures, and both wall-clock and CPU seconds are given. The last line of
each reader says whether it reads at least ``TARGET`` requests per second (issue 23), by the wall clock and per
CPU second (what the wall clock would show on an idle core).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import tempfile
import time
from pathlib import Path

import numpy as np

TOOLS = [f"geo_{c}" for c in "abcde"]
#: Requests per second the importers are to read at least (issue 23).
TARGET = 50_000


def _plan(n, rng):
    orders = [list(rng.permutation(TOOLS)) for _ in range(n)]
    kind = rng.choice(["call", "text", "error"], size=n, p=[0.93, 0.05, 0.02])
    pick = rng.choice(5, size=n, p=[0.4, 0.25, 0.15, 0.1, 0.1])        # by position: a position-biased chooser
    return orders, kind, pick


def write_openai(d: Path, n, rng):
    orders, kind, pick = _plan(n, rng)
    with (d / "in.jsonl").open("w") as fi, (d / "out.jsonl").open("w") as fo:
        for i in range(n):
            cid = f"r{i}"
            body = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": f"query {i % (n // 10 or 1)}"}],
                    "tools": [{"type": "function", "function": {"name": t, "description": "x",
                                                                "parameters": {"type": "object"}}} for t in orders[i]]}
            request = {"custom_id": cid, "method": "POST", "url": "/v1/chat/completions", "body": body}
            fi.write(json.dumps(request) + "\n")
            if kind[i] == "error":
                resp = {"status_code": 500, "body": {"error": {"message": "server error", "type": "server_error"}}}
            else:
                msg = {"role": "assistant", "content": "text" if kind[i] == "text" else None, "refusal": None}
                if kind[i] == "call":
                    msg["tool_calls"] = [{"id": "c", "type": "function",
                                          "function": {"name": orders[i][pick[i]], "arguments": "{}"}}]
                resp = {"status_code": 200, "body": {"id": "x", "object": "chat.completion", "choices": [
                    {"index": 0, "message": msg, "finish_reason": "stop"}]}}
            fo.write(json.dumps({"id": f"b{i}", "custom_id": cid, "response": resp, "error": None}) + "\n")


def write_anthropic(d: Path, n, rng):
    orders, kind, pick = _plan(n, rng)
    with (d / "areq.jsonl").open("w") as fi, (d / "ares.jsonl").open("w") as fo:
        for i in range(n):
            cid = f"r{i}"
            params = {"model": "claude", "max_tokens": 100,
                      "messages": [{"role": "user", "content": f"query {i % (n // 10 or 1)}"}],
                      "tools": [{"name": t, "input_schema": {"type": "object"}} for t in orders[i]]}
            fi.write(json.dumps({"custom_id": cid, "params": params}) + "\n")
            if kind[i] == "error":
                res = {"type": "errored", "error": {"type": "error", "error": {"type": "api_error", "message": "x"}}}
            else:
                content = [{"type": "text", "text": "ok"}]
                if kind[i] == "call":
                    content.append({"type": "tool_use", "id": "t", "name": orders[i][pick[i]], "input": {}})
                res = {"type": "succeeded", "message": {"type": "message", "role": "assistant", "content": content,
                                                        "stop_reason": "tool_use"}}
            fo.write(json.dumps({"custom_id": cid, "result": res}) + "\n")


def write_otel(d: Path, n, rng):
    orders, kind, pick = _plan(n, rng)
    spans = []
    for i in range(n):
        attrs = {"gen_ai.operation.name": "chat",
                 "gen_ai.tool.definitions": json.dumps([{"type": "function", "name": t} for t in orders[i]]),
                 "gen_ai.input.messages": json.dumps([{"role": "user", "parts": [
                     {"type": "text", "content": f"query {i % (n // 10 or 1)}"}]}])}
        if kind[i] == "call":
            attrs["gen_ai.output.messages"] = json.dumps([{"role": "assistant", "parts": [
                {"type": "tool_call", "name": orders[i][pick[i]]}]}])
        elif kind[i] == "text":
            attrs["gen_ai.output.messages"] = json.dumps([{"role": "assistant", "parts": [
                {"type": "text", "content": "t"}]}])
        span = {"traceId": f"{i:032x}", "spanId": f"{i:016x}", "name": "chat", "startTimeUnixNano": str(i),
                "attributes": [{"key": k, "value": {"stringValue": v}} for k, v in attrs.items()]}
        if kind[i] == "error":
            span["status"] = {"code": 2, "message": "boom"}
        spans.append(span)
    doc = {"resourceSpans": [{"resource": {}, "scopeSpans": [{"scope": {"name": "b"}, "spans": spans}]}]}
    (d / "traces.json").write_text(json.dumps(doc))


def best_of(fn, repeat):
    """(best wall seconds, best CPU seconds, result) of ``repeat`` runs."""
    wall, cpu = [], []
    for _ in range(repeat):
        t0, c0 = time.perf_counter(), time.process_time()
        out = fn()
        wall.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    return min(wall), min(cpu), out


def decoders():
    """``{name: loads}`` of the JSON decoders installed (json always; orjson, msgspec when present)."""
    out = {"json": json.loads}
    try:
        import orjson

        out["orjson"] = orjson.loads
    except ImportError:
        pass
    try:
        import msgspec

        out["msgspec"] = msgspec.json.Decoder().decode
    except ImportError:
        pass
    return out


def bare_decode(paths, loads, keep=False):
    """Decode every line of each JSON Lines file (or the whole of a .json file) into Python objects: nothing else.

    ``keep``: hold every decoded value in a list (``[loads(line) for line in file]``, what a reader that decodes
    first and works after does); otherwise each value is dropped at once (the parser's speed alone)."""
    was = gc.isenabled()
    gc.disable()
    try:
        out = []
        for p in paths:
            data = p.read_bytes()
            if p.suffix == ".jsonl":
                if keep:
                    out.append([loads(line) for line in data.splitlines()])
                else:
                    for line in data.splitlines():
                        loads(line)
            else:
                out.append(loads(data))
        return len(out)
    finally:
        if was:
            gc.enable()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--formats", default="openai,anthropic,otel", help="comma-separated subset to run")
    args = ap.parse_args()
    formats = set(args.formats.split(","))
    from toolbias_stats.io.readers import (
        _toolcalls,
        read_anthropic,
        read_openai,
        read_otel,
    )

    _msgspec = getattr(_toolcalls, "_msgspec", None)      # None: msgspec not installed (or a release before it)

    rng = np.random.default_rng(0)
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}; "
          f"readers decode with {'msgspec ' + _msgspec.__version__ if _msgspec else 'json (msgspec not installed)'}")
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        write_openai(d, args.requests, rng)
        write_anthropic(d, args.requests, rng)
        write_otel(d, args.requests, rng)
        # the manifest's model is the one the records name (issue 36: a disagreement is an error); the OTel spans
        # name none, so the manifest labels them
        runs = [("openai (batch input + output)", lambda: read_openai(d / "in.jsonl", responses=d / "out.jsonl",
                                                                      meta={"model": "gpt-4o-mini"}),
                 ["in.jsonl", "out.jsonl"]),
                ("anthropic (requests + results)", lambda: read_anthropic(d / "areq.jsonl", responses=d / "ares.jsonl",
                                                                         meta={"model": "claude"}),
                 ["areq.jsonl", "ares.jsonl"]),
                ("otel (one OTLP JSON document)", lambda: read_otel(d / "traces.json", meta={"model": "m"}),
                 ["traces.json"])]
        runs = [r for r in runs if r[0].split()[0] in formats]
        for name, fn, files in runs:
            mb = sum((d / f).stat().st_size for f in files) / 1e6
            paths = [d / f for f in files]
            load0 = os.getloadavg()[0]
            t, c, log = best_of(fn, args.repeat)
            base = {k: best_of(lambda loads=loads, paths=paths: bare_decode(paths, loads), args.repeat)[:2]
                    for k, loads in decoders().items()}
            fast = min((k for k in base if k != "json"), key=lambda k: base[k][0], default="json")
            kept = best_of(lambda paths=paths, fast=fast: bare_decode(paths, decoders()[fast], keep=True),
                           args.repeat)[:2]
            bt, bc = base[fast]
            st = log.data["status"].value_counts().to_dict()
            print(f"{name:32s} {args.requests:,} requests, {mb:6.1f} MB: {t:6.2f} s wall, {c:6.2f} s CPU "
                  f"({args.requests / t:,.0f} requests/s wall, {args.requests / c:,.0f} per CPU second); "
                  f"status {st}")
            print(f"{'':32s} bare decode, each value dropped: "
                  + ", ".join(f"{k} {w:.2f} s wall / {cc:.2f} s CPU" for k, (w, cc) in base.items())
                  + f"; {fast}, values kept: {kept[0]:.2f} s wall / {kept[1]:.2f} s CPU")
            print(f"{'':32s} reader / {fast} dropped = {t / bt:.2f} (wall), {c / bc:.2f} (CPU); "
                  f"reader / {fast} kept = {t / kept[0]:.2f} (wall), {c / kept[1]:.2f} (CPU); "
                  f"load average {load0:.1f} -> {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
            verdict = {k: "MET" if args.requests / v >= TARGET else "NOT MET" for k, v in (("wall", t), ("CPU", c))}
            print(f"{'':32s} target {TARGET:,} requests/s: {verdict['wall']} by the wall clock, {verdict['CPU']} per "
                  "CPU second")


if __name__ == "__main__":
    main()
