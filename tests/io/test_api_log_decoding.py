"""The API-log readers decode JSON with msgspec when it is installed (issue 23): the same lines, values, rows,
statuses and error messages as the standard library's ``json`` alone.

Each check reads the same input twice, once with msgspec and once with it hidden, and compares everything
(values by ``repr``, so NaN, -0.0 and big integers count).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from toolbias_stats.exceptions import SelectionLogError
from toolbias_stats.io.readers import (
    _toolcalls,
    anthropic,
    openai,
    otel,
    read_anthropic,
    read_openai,
    read_otel,
)
from toolbias_stats.io.readers._toolcalls import read_json_lines

pytest.importorskip("msgspec")

#: the manifest model labels every record (issue 36: without the override a disagreeing record model is an error)
LABEL = {"meta": {"model": "m"}, "model_override": True}
FIX = Path(__file__).resolve().parent / "fixtures" / "api_logs"


@pytest.fixture
def without_msgspec(monkeypatch):
    """A function that runs ``fn()`` with msgspec hidden from the readers."""
    def run(fn):
        with monkeypatch.context() as m:
            m.setattr(_toolcalls, "_msgspec", None)
            m.setattr(_toolcalls, "fast_json", None)
            m.setattr(otel, "fast_json", None)
            return fn()
    return run


def _outcome(fn):
    """``("ok", value)`` or ``("error", type, message)`` of ``fn()``."""
    try:
        return ("ok", fn())
    except SelectionLogError as exc:
        return ("error", type(exc).__name__, str(exc))


def _lines(path):
    return [(jl.line, repr(jl.value), jl.error) for jl in read_json_lines(path)]


#: Lines where msgspec and json differ or might (json decides them all), and ordinary ones around them.
EDGE_LINES = [
    '{"custom_id": "a", "x": NaN, "y": [Infinity, -Infinity]}',
    '{"custom_id": "b", "big": 123456789012345678901234567890, "neg": -9223372036854775809}',
    '{"custom_id": "c", "s": "\\ud800 lone surrogate", "t": "\\udc00\\ud800"}',
    '{"custom_id": "d", "k": 1, "k": 2}',
    '{"custom_id": "e", "f": 1e400, "g": -0.0, "h": 0.1, "i": 1.7976931348623157e308, "j": 5e-324}',
    '{"custom_id": "f", "deep": ' + "[" * 600 + "]" * 600 + "}",
    # deeper than any recursion limit the suite meets: PyMC raises Python's from 1,000 to 10,000 when imported,
    # so a worker that imported it first would decode 5,000 levels (the suite's order decided the outcome)
    '{"custom_id": "g", "deeper": ' + "[" * 50000 + "]" * 50000 + "}",
    '{"custom_id": "h", "truncated": [1, 2',
    '{"custom_id": "i", "bad": tru}',
    '{"custom_id": "j", "trailing": [1,]}',
    '   ',
    '\u00a0\u2028',
    '{"custom_id": "k", "tab": "a\tb"}',
    '["not", "an", "object"]',
    '{"custom_id": "l", "unicode": "caf\u00e9 \u2603 \U0001f600", "esc": "\\u00e9\\n\\"\\\\"}',
    '{"custom_id": "m", "unterminated": "abc',
    '\ufeff{"custom_id": "n"}',
    '{"custom_id": "o", "digits": "' + "1" * 30 + '", "n": ' + "9" * 25 + "}",
]


@pytest.mark.parametrize("newline", ["\n", "\r\n", "\r"])
@pytest.mark.parametrize("final_newline", [True, False])
@pytest.mark.parametrize("bom", [False, True])
def test_lines_decode_as_json_does(tmp_path, without_msgspec, newline, final_newline, bom):
    text = newline.join(EDGE_LINES) + (newline if final_newline else "")
    p = tmp_path / "edge.jsonl"
    p.write_bytes((b"\xef\xbb\xbf" if bom else b"") + text.encode("utf-8"))
    fast = _lines(p)
    assert fast == without_msgspec(lambda: _lines(p))
    # the lines json refuses are errors (not values msgspec would have made up)
    errors = {line for line, _, err in fast if err is not None}
    assert {8, 9, 10, 13, 16} <= errors
    assert any("nested too deeply" in (err or "") for _, _, err in fast)


@pytest.mark.parametrize("content", [b"", b"\n\n  \n", b"{\"a\": 1}\n\xff\xfe\n", b"\xef\xbb\xbf"])
def test_file_errors_are_the_same(tmp_path, without_msgspec, content):
    p = tmp_path / "x.jsonl"
    p.write_bytes(content)
    got = _outcome(lambda: _lines(p))
    assert got[0] == "error"
    assert got == without_msgspec(lambda: _outcome(lambda: _lines(p)))


@pytest.mark.parametrize("name", ["openai/chat_batch_input.jsonl", "openai/chat_batch_output.jsonl",
                                  "openai/responses_pairs.jsonl", "anthropic/batch_requests.jsonl",
                                  "anthropic/batch_results.jsonl", "multi/openai_pairs.jsonl",
                                  "multi/anthropic_pairs.jsonl"])
def test_fixture_lines(without_msgspec, name):
    assert _lines(FIX / name) == without_msgspec(lambda: _lines(FIX / name))


def _same_log(a, b):
    assert a[0] == b[0]
    if a[0] == "ok":
        pd.testing.assert_frame_equal(a[1].data, b[1].data, check_exact=True)
        assert repr(a[1].diagnostics) == repr(b[1].diagnostics)
    else:
        assert a == b


READS = {
    "openai batch": lambda: read_openai(FIX / "openai/chat_batch_input.jsonl",
                                        responses=FIX / "openai/chat_batch_output.jsonl", **LABEL),
    "openai pairs": lambda: read_openai(FIX / "openai/responses_pairs.jsonl", **LABEL),
    "anthropic batch": lambda: read_anthropic(FIX / "anthropic/batch_requests.jsonl",
                                              responses=FIX / "anthropic/batch_results.jsonl", **LABEL),
    "otel": lambda: read_otel(FIX / "otel/traces.json", **LABEL),
    "otel no definitions": lambda: read_otel(FIX / "multi/otel_no_definitions.json", **LABEL,
                                             clusters={"weather": [f"weather_{c}" for c in "abcde"],
                                                       "geocoding": ["geo_a", "geo_b", "geo_c"]}),
}


@pytest.mark.parametrize("name", sorted(READS))
def test_fixture_logs_are_the_same(without_msgspec, name):
    fast = _outcome(READS[name])
    assert fast[0] == "ok"
    _same_log(fast, without_msgspec(lambda: _outcome(READS[name])))


# ---------------------------------------------------------------------------------------
# typed request decoding: only the keys parse_request reads are kept; anything else goes to a full decode
OPENAI_REQUESTS = [
    {"custom_id": "1", "body": {"messages": [{"role": "user", "content": "q1"}],
                                "tools": [{"type": "function", "function": {"name": "a", "parameters": {}}},
                                          {"type": "function", "function": {"name": "b"}}]}},
    {"custom_id": "2", "body": {"messages": [{"role": "user", "content": [{"type": "text", "text": "q2"}]}],
                                "tools": [{"type": "custom", "custom": {"name": "a"}}, {"type": "web_search"},
                                          {"type": "mcp", "mcp": {"name": "zz"}, "name": "b"}],
                                "tool_choice": {"type": "function", "function": {"name": "a"}}}},
    {"custom_id": "3", "body": {"input": "q3", "tools": [{"type": "function", "name": "a"}, {"name": "b"}],
                                "metadata": {"query_id": 7, "cluster_id": "c"}}},
    {"custom_id": "4", "body": {"tools": "not a list", "messages": []}},
    {"custom_id": "5", "body": {"tools": [1, "x", None, {"function": "not an object"}]}},
    {"custom_id": "6", "body": "not an object", "tools": [{"type": "function", "function": {"name": "a"}}]},
    {"custom_id": "7", "query_id": "q", "tools": [{"type": "function", "function": {"name": "a"}}],
     "functions": [{"name": "f"}], "tool_choice": "none"},
    {"custom_id": "8", "body": {"functions": [{"name": "f"}, 3], "function_call": {"name": "f"},
                                "tools": None}},
    {"custom_id": "9", "body": {"tools": [{"type": "function", "function": {"name": "a"}}],
                                "tool_choice": {"type": "allowed_tools",
                                                "allowed_tools": {"tools": [{"type": "function", "name": "a"}]}}}},
]
ANTHROPIC_REQUESTS = [
    {"custom_id": "1", "params": {"messages": [{"role": "user", "content": "q1"}],
                                  "tools": [{"name": "a", "input_schema": {"type": "object"}}, {"name": "b"}]}},
    {"custom_id": "2", "params": {"tools": [{"name": "a"}, {"type": "web_search_20250305"}, "x", {"name": 3}],
                                  "tool_choice": {"type": "tool", "name": "a"}, "metadata": {"query_id": "m"}}},
    {"custom_id": "3", "params": {"tools": {"name": "a"}, "messages": "hi"}},
    {"custom_id": "4", "params": None, "tools": [{"name": "a"}], "query_id": 5, "cluster_id": "c",
     "messages": [{"role": "user", "content": [{"type": "text", "text": "q"}]}]},
]


def _attempt_fields(att):
    return {k: repr(v) for k, v in vars(att).items()}


@pytest.mark.parametrize("module, requests", [(openai, OPENAI_REQUESTS), (anthropic, ANTHROPIC_REQUESTS)])
def test_typed_request_lines_parse_as_full_lines(tmp_path, module, requests):
    p = tmp_path / "requests.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in requests), encoding="utf-8")
    typed = read_json_lines(p, typed=module._REQUEST_LINE)
    full = read_json_lines(p)
    assert [jl.line for jl in typed] == [jl.line for jl in full]
    for t, f in zip(typed, full):
        assert _attempt_fields(module.parse_request(t.value, p, t.line)) == \
            _attempt_fields(module.parse_request(f.value, p, f.line))


def test_bench_shaped_logs_are_the_same(tmp_path, without_msgspec):
    """A few hundred requests shaped as benchmarks/bench_api_logs.py writes them (all three formats)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "bench_api_logs", Path(__file__).resolve().parents[2] / "benchmarks" / "bench_api_logs.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    rng = np.random.default_rng(1)
    bench.write_openai(tmp_path, 300, rng)
    bench.write_anthropic(tmp_path, 300, rng)
    bench.write_otel(tmp_path, 300, rng)
    for fn in (lambda: read_openai(tmp_path / "in.jsonl", responses=tmp_path / "out.jsonl", **LABEL),
               lambda: read_anthropic(tmp_path / "areq.jsonl", responses=tmp_path / "ares.jsonl", **LABEL),
               lambda: read_otel(tmp_path / "traces.json", **LABEL)):
        fast = _outcome(fn)
        assert fast[0] == "ok" and len(fast[1].data) == 300
        _same_log(fast, without_msgspec(lambda fn=fn: _outcome(fn)))


def test_execute_tool_lookup_by_index_is_the_scan():
    """The choice read from execute_tool spans: looked up by (trace, parent) the same as scanning every span."""
    rng = np.random.default_rng(3)
    for _ in range(20):
        raw = []
        for i in range(60):
            op = rng.choice(["chat", "execute_tool", "execute_tool", "invoke_agent"])
            raw.append({"traceId": f"t{rng.integers(2)}", "spanId": f"s{i}",
                        "parentSpanId": "" if rng.random() < 0.2 else f"s{rng.integers(max(i, 1))}",
                        "startTimeUnixNano": str(rng.integers(5)), "name": str(op),
                        "attributes": [{"key": "gen_ai.operation.name", "value": {"stringValue": str(op)}},
                                       {"key": "gen_ai.tool.name", "value": {"stringValue": f"tool{i}"}}]})
        spans = [otel._Span(i + 1, 1, sp) for i, sp in enumerate(raw)]
        index = []
        for s in spans:
            if s.op == "chat":
                assert [t.n for t in otel._executed(s, spans, index)] == [t.n for t in otel._executed(s, spans)]
        assert index and index[0] is not None


def test_a_parse_that_raises_waits_for_the_problems_of_both_files(tmp_path):
    """Requests and responses are parsed while the files are read; a line whose parse raises is parsed again
    at its old place, so the problems of both files (here a duplicate custom_id) are still reported first."""
    tools = [{"type": "function", "function": {"name": n}} for n in ("a", "b")]
    requests = [{"custom_id": "1", "body": {"tools": tools}},
                {"custom_id": "2", "body": {"tools": [{"type": ["not", "hashable"]}]}},
                {"custom_id": "3", "body": {"tools": tools}}]
    call = {"type": ["not", "hashable"]}
    responses = [{"custom_id": "1", "response": {"status_code": 200, "body": {"choices": [
                     {"message": {"tool_calls": [call]}}]}}},
                 {"custom_id": "3", "response": {"status_code": 200, "body": {"choices": [
                     {"message": {"tool_calls": [{"type": "function", "function": {"name": "a"}}]}}]}}},
                 {"custom_id": "3", "response": None}]
    req, res = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    req.write_text("".join(json.dumps(r) + "\n" for r in requests), encoding="utf-8")
    res.write_text("".join(json.dumps(r) + "\n" for r in responses), encoding="utf-8")
    with pytest.raises(SelectionLogError, match=r"out.jsonl:3:custom_id: duplicate custom_id '3'"):
        read_openai(req, responses=res, **LABEL)
    # without the duplicate the parse error surfaces as it always did (a TypeError of the request's tool type)
    res.write_text("".join(json.dumps(r) + "\n" for r in responses[:2]), encoding="utf-8")
    with pytest.raises(TypeError):
        read_openai(req, responses=res, **LABEL)


# ---------------------------------------------------------------------------------------
# batches read column by column (read_batch_columns): plain lines from msgspec Structs, every other line decoded in
# full; the same rows, values, diagnostics and messages as join_batch with the standard library
def _tool(n):
    return {"type": "function", "function": {"name": n, "description": "d", "parameters": {"type": "object"}}}


def _chat(msg, finish="stop", n=1, code=200):
    return {"status_code": code, "body": {"choices": [{"index": i, "message": msg, "finish_reason": finish}
                                                      for i in range(n)]}}


def _call(name):
    return {"id": "c", "type": "function", "function": {"name": name, "arguments": "{}"}}


OPENAI_BATCH = [   # (request body and line extras, result line extras)
    ({}, {"response": _chat({"role": "assistant", "content": None, "tool_calls": [_call("b")]})}),
    ({}, {"response": _chat({"role": "assistant", "content": None, "tool_calls": [_call("a"), _call("c")]})}),
    ({}, {"response": _chat({"role": "assistant", "content": "just text  "})}),
    ({}, {"response": _chat({"role": "assistant", "content": "x" * 300}, finish="length")}),
    ({}, {"response": _chat({"role": "assistant", "content": None, "refusal": "no"}, finish="content_filter")}),
    ({}, {"response": _chat({"role": "assistant", "content": [{"type": "text", "text": "t"}]}, n=2)}),
    ({}, {"response": _chat({"role": "assistant", "tool_calls": []})}),
    ({}, {"response": _chat({"role": "assistant", "tool_calls": None, "function_call": {"name": "a"}})}),
    ({}, {"response": _chat({"role": "assistant", "tool_calls": [_call("  ")]})}),
    ({}, {"response": _chat({"role": "assistant", "tool_calls": [{"type": "custom", "custom": {"name": "c"}}]})}),
    ({}, {"response": _chat({"role": "assistant", "tool_calls": [_call("d")]})}),
    ({}, {"response": _chat({"role": "assistant", "tool_calls": [_call("A ")]})}),
    ({}, {"response": {"status_code": 500, "body": {"error": {"message": "server", "type": "server_error"}}}}),
    ({}, {"response": _chat({"role": "assistant", "content": "x"}), "error": {"code": "e", "message": "m"}}),
    ({}, {"response": None, "error": None}),
    ({}, {"response": {"status_code": 200, "body": {"choices": []}}}),
    ({}, {"response": {"status_code": 200, "body": {"object": "response", "output": [
        {"type": "function_call", "name": "a"}]}}}),
    ({}, {"response": {"status_code": 200.0, "body": {"choices": [{"message": {"tool_calls": [_call("c")]}}]}}}),
    ({"tool_choice": "none"}, {"response": _chat({"role": "assistant", "tool_calls": [_call("a")]})}),
    ({"tool_choice": "auto"}, {"response": _chat({"role": "assistant", "tool_calls": [_call("a")]})}),
    ({"tool_choice": None, "function_call": "none"}, {"response": _chat({"role": "assistant", "content": "t"})}),
    ({"function_call": "none"}, {"response": _chat({"role": "assistant", "content": "t"})}),
    ({"tool_choice": {"type": "function", "function": {"name": "a"}}},
     {"response": _chat({"role": "assistant", "tool_calls": [_call("a")]})}),
    ({"metadata": {"query_id": 12345678901234567890}}, {"response": _chat({"role": "assistant", "content": "t"})}),
    ({"query_id": None, "metadata": {"query_id": "m1", "cluster_id": None}},
     {"response": _chat({"role": "assistant", "content": "t"})}),
    ({"messages": [{"role": "user", "content": "first"}, {"role": "assistant", "content": "a"},
                   {"role": "user", "content": ""}]}, {"response": _chat({"role": "assistant", "content": "t"})}),
    ({"messages": [{"role": "user", "content": [{"type": "text", "text": "caf\u00e9"}, {"type": "image_url"}]}]},
     {"response": _chat({"role": "assistant", "content": "t"})}),
    ({"messages": []}, {"response": _chat({"role": "assistant", "content": "t"})}),
    ({"messages": None, "input": "from input"}, {"response": _chat({"role": "assistant", "content": "t"})}),
    ({"tools": [{"type": "function", "name": "a"}, {"type": "function", "name": "b"}, {"type": "function",
                                                                                      "name": "c"}]},
     {"response": _chat({"role": "assistant", "tool_calls": [_call("b")]})}),
    ({"tools": [_tool("a"), _tool("b"), _tool("c"), {"type": "web_search"}]},
     {"response": _chat({"role": "assistant", "tool_calls": [_call("b")]})}),
    ({}, None),     # no result line: a parse_error row
]


def _openai_batch(tmp_path, cases, *, top=None, order=None, crlf=False):
    req, res = [], []
    for i, (body, result) in enumerate(cases):
        b = {"model": "m", "messages": [{"role": "user", "content": f"query {i % 5}"}],
             "tools": [_tool(n) for n in (order or ("abc", "bca", "cab"))[i % 3]]}
        b.update(body)
        line = {"custom_id": f"r{i}", "method": "POST", "url": "/v1/chat/completions", "body": b}
        line.update(top or {})
        req.append(line)
        if result is not None:
            res.append({"id": f"b{i}", "custom_id": f"r{i}", "error": None, **result})
    nl = "\r\n" if crlf else "\n"
    p, q = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    p.write_text("".join(json.dumps(r) + nl for r in req), encoding="utf-8")
    q.write_text("".join(json.dumps(r) + nl for r in res[::-1]), encoding="utf-8")
    return p, q


def _same_both_ways(without_msgspec, fn):
    fast = _outcome(fn)
    _same_log(fast, without_msgspec(lambda: _outcome(fn)))
    return fast


def test_openai_batch_columns_are_join_batch(tmp_path, without_msgspec):
    p, q = _openai_batch(tmp_path, OPENAI_BATCH)
    assert _toolcalls.read_batch_columns(p, q, openai._BATCH, openai.parse_request, openai.parse_response)
    fast = _same_both_ways(without_msgspec, lambda: read_openai(p, responses=q, **LABEL))
    assert fast[0] == "ok" and len(fast[1].data) == len(OPENAI_BATCH)
    # declared clusters: the same with a catalog-style resolution (names matched case-insensitively)
    _same_both_ways(without_msgspec, lambda: read_openai(p, responses=q, **LABEL,
                                                         clusters={"k": ["a", "b", "c"], "o": ["d"]}))


@pytest.mark.parametrize("top", [{"metadata": {"cluster_id": "k"}}, {"query_id": 3, "metadata": {"query_id": 4}},
                                 {"cluster_id": "nope"}])
def test_openai_batch_record_fields(tmp_path, without_msgspec, top):
    p, q = _openai_batch(tmp_path, OPENAI_BATCH[:4], top=top)
    _same_both_ways(without_msgspec, lambda: read_openai(p, responses=q, **LABEL,
                                                         clusters={"k": ["a", "b", "c"]}))


@pytest.mark.parametrize("change", ["duplicate request", "duplicate result", "result without request",
                                    "truncated result", "truncated request", "blank lines", "crlf", "empty tools",
                                    "not an object", "no custom_id", "deep", "mixed lists"])
def test_openai_batch_problems_are_join_batch(tmp_path, without_msgspec, change):
    cases = OPENAI_BATCH[:6]
    p, q = _openai_batch(tmp_path, cases, crlf=change == "crlf",
                         order=("abc", "ab", "ca") if change == "mixed lists" else None)
    req, res = p.read_text(encoding="utf-8"), q.read_text(encoding="utf-8")
    first_req, first_res = req.splitlines()[0], res.splitlines()[0]
    edits = {"duplicate request": lambda: p.write_text(req + first_req + "\n", encoding="utf-8"),
             "duplicate result": lambda: q.write_text(res + first_res + "\n", encoding="utf-8"),
             "result without request": lambda: q.write_text(res + first_res.replace('"r', '"zz') + "\n",
                                                            encoding="utf-8"),
             "truncated result": lambda: q.write_text(res + first_res[:40] + "\n", encoding="utf-8"),
             "truncated request": lambda: p.write_text(req + first_req[:60] + "\n", encoding="utf-8"),
             "blank lines": lambda: (p.write_text("\n  \n" + req + "\n\n", encoding="utf-8"),
                                     q.write_text(" \n" + res, encoding="utf-8")),
             "empty tools": lambda: p.write_text(req.replace('"tools": [', '"tools": [], "x": [', 1),
                                                 encoding="utf-8"),
             "not an object": lambda: q.write_text(res + "[1, 2]\n", encoding="utf-8"),
             "no custom_id": lambda: p.write_text(req + '{"body": {}}\n', encoding="utf-8"),
             "deep": lambda: p.write_text(req.replace('"model": "m"', '"model": ' + "[" * 450 + "]" * 450, 1),
                                          encoding="utf-8")}
    if change in edits:
        edits[change]()
    _same_both_ways(without_msgspec, lambda: read_openai(p, responses=q, **LABEL))


ANTHROPIC_BATCH = [   # (params and line extras, result)
    ({}, {"type": "succeeded", "message": {"content": [{"type": "text", "text": "let me"},
                                                       {"type": "tool_use", "name": "b", "input": {}}]}}),
    ({}, {"type": "succeeded", "message": {"content": [{"type": "server_tool_use", "name": "a"},
                                                       {"type": "tool_use", "name": "c"}]}}),
    ({}, {"type": "succeeded", "message": {"content": [{"type": "text", "text": " plain "}],
                                           "stop_reason": "max_tokens"}}),
    ({}, {"type": "succeeded", "message": {"content": [{"type": "text", "text": None, "content": "c"},
                                                       {"type": "text", "content": "only content"},
                                                       {"type": "output_text", "text": 3}], "stop_reason": "refusal"}}),
    ({}, {"type": "succeeded", "message": {"content": [], "stop_reason": "refusal"}}),
    ({}, {"type": "succeeded", "message": {"content": ["a string block"]}}),
    ({}, {"type": "succeeded", "message": {"content": [{"type": "tool_use", "name": " "}]}}),
    ({}, {"type": "succeeded", "message": {"content": [{"type": "tool_use", "name": 5}]}}),
    ({}, {"type": "succeeded", "message": {"type": "error", "error": {"type": "overloaded"}, "content": []}}),
    ({}, {"type": "succeeded", "message": {"error": {"type": "x"}, "content": [{"type": "text", "text": "t"}]}}),
    ({}, {"type": "succeeded", "message": None}),
    ({}, {"type": "succeeded"}),
    ({}, {"type": "errored", "error": {"type": "error", "error": {"type": "api_error", "message": "boom"}}}),
    ({}, {"type": "errored"}),
    ({}, {"type": "canceled"}),
    ({}, {"type": "expired"}),
    ({}, {"type": "weird", "x": 1}),
    ({"tool_choice": {"type": "tool", "name": "a"}}, {"type": "succeeded", "message": {"content": [
        {"type": "tool_use", "name": "a"}]}}),
    ({"tool_choice": {"type": "none"}}, {"type": "succeeded", "message": {"content": []}}),
    ({"tool_choice": {"type": "any"}}, {"type": "succeeded", "message": {"content": []}}),
    ({"query_id": None, "metadata": {"query_id": "m"}}, {"type": "canceled"}),
    ({"metadata": {"query_id": 7}}, {"type": "canceled"}),
    ({"messages": None}, {"type": "canceled"}),
    ({"messages": [{"role": "user", "content": ""}]}, {"type": "canceled"}),
    ({"messages": [{"role": "user", "content": "x"}, {"role": "user", "content": [{"type": "image"}]}]},
     {"type": "canceled"}),
    ({"tools": [{"name": "a"}, {"name": "b"}, {"name": "c"}, {"type": "web_search_20250305"}]}, {"type": "canceled"}),
    ({}, None),
]


def _anthropic_batch(tmp_path, cases, *, top=None):
    req, res = [], []
    for i, (params, result) in enumerate(cases):
        pr = {"model": "claude", "max_tokens": 10, "messages": [{"role": "user", "content": f"query {i % 4}"}],
              "tools": [{"name": n, "input_schema": {"type": "object"}} for n in ("abc", "cab", "bca")[i % 3]]}
        pr.update(params)
        line = {"custom_id": f"r{i}", "params": pr}
        line.update(top or {})
        req.append(line)
        if result is not None:
            res.append({"custom_id": f"r{i}", "result": result})
    p, q = tmp_path / "areq.jsonl", tmp_path / "ares.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in req), encoding="utf-8")
    q.write_text("".join(json.dumps(r) + "\n" for r in res), encoding="utf-8")
    return p, q


@pytest.mark.parametrize("top", [None, {"query_id": None, "metadata": {"query_id": "t", "cluster_id": "k"}},
                                 {"query_id": "top"}])
def test_anthropic_batch_columns_are_join_batch(tmp_path, without_msgspec, top):
    p, q = _anthropic_batch(tmp_path, ANTHROPIC_BATCH, top=top)
    assert _toolcalls.read_batch_columns(p, q, anthropic._BATCH, anthropic.parse_request, anthropic.parse_response)
    fast = _same_both_ways(without_msgspec, lambda: read_anthropic(p, responses=q, **LABEL,
                                                                   clusters={"k": ["a", "b", "c"]}))
    assert fast[0] == "ok" and len(fast[1].data) == len(ANTHROPIC_BATCH)


def test_batch_columns_hold_what_parse_gives(tmp_path):
    """Attempt by attempt, the columns are the Attempts join_batch builds (every field, by repr)."""
    for mod, (p, q) in ((openai, _openai_batch(tmp_path, OPENAI_BATCH)),
                        (anthropic, _anthropic_batch(tmp_path, ANTHROPIC_BATCH))):
        cols = _toolcalls.read_batch_columns(p, q, mod._BATCH, mod.parse_request, mod.parse_response)
        ref = _toolcalls.join_batch(p, q, mod.parse_request, mod.parse_response, "x")
        assert len(cols) == len(ref)
        for i, att in enumerate(ref):
            got = cols.attempt(i)
            got.label = cols.label[i]
            got.tools = None if got.tools is None else list(got.tools)
            assert _attempt_fields(got) == _attempt_fields(att)


def test_repeats_count_as_groupby_cumcount():
    """The attempt number of a repeated request (same cluster, query and list) is pandas' cumulative count."""
    rng = np.random.default_rng(5)
    for n in (1, 5, 200):
        keys = [(f"c{rng.integers(2)}", f"q{rng.integers(4)}", None if rng.random() < 0.3 else f"o{rng.integers(3)}")
                for _ in range(n)]
        frame = pd.DataFrame(keys, columns=["c", "q", "o"])
        ref = frame.groupby(["c", "q", "o"], sort=False, dropna=False).cumcount().to_numpy() + 1
        np.testing.assert_array_equal(_toolcalls._repeats(keys), ref)
    assert _toolcalls._repeats([("a", "b", "c"), ("a", "b", "d")]).tolist() == [1, 1]


def test_offered_lists_of_a_batch_read_by_columns(tmp_path):
    """Cluster inference of a study sees the same (names, file, line) whether a batch is read by columns or not."""
    for mod, offered, (p, q) in ((openai, openai.offered_openai, _openai_batch(tmp_path, OPENAI_BATCH)),
                                 (anthropic, anthropic.offered_anthropic, _anthropic_batch(tmp_path, ANTHROPIC_BATCH))):
        ref = _toolcalls.offered_lists(_toolcalls.read_attempts(p, q, mod.parse_request, mod.parse_response, "x"))
        assert offered(p, q) == ref
