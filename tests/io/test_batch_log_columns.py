"""Issue 37 (`validate` throughput): the batch reading's tight first pass and the diagnostics that pass over the rows
only when a set says they find something give exactly what the line-by-line code gave."""

from __future__ import annotations

import json
from collections import Counter

import numpy as np
import pytest

from toolbias_stats.io.readers import _toolcalls, openai

pytest.importorskip("msgspec")


def test_shallow_is_the_bracket_rule():
    rng = np.random.default_rng(3)
    alphabet = np.array(list(b'[{]}"a: ,'), dtype=np.uint8)
    for n in (0, 1, 399, 400, 401, 500, 900, 2000):
        for _ in range(20):
            raw = alphabet[rng.integers(0, len(alphabet), n)].tobytes()
            assert _toolcalls._shallow(raw) == (raw.count(b"[") + raw.count(b"{") <= _toolcalls._FAST_MAX_BRACKETS)
    assert not _toolcalls._shallow(b"[" * 401)
    assert _toolcalls._shallow(b"[" * 400)


def _request(cid, tools=("geo_a", "geo_b"), **body):
    return json.dumps({"custom_id": cid, "method": "POST", "url": "/v1/chat/completions",
                       "body": {"model": "m", "messages": [{"role": "user", "content": f"q {cid}"}],
                                "tools": [{"type": "function", "function": {"name": t}} for t in tools], **body}})


def _old_batch_requests(pieces, open_end, shape, parse_request, requests):
    """The line-by-line loop this round replaced (kept here as the reference)."""
    decode, plain = shape.request.decode, shape.read_request
    lists: dict = {}
    index, reqs, rows, unusual = {}, [], [], {}
    for i, raw in enumerate(pieces):
        rec = None
        if raw.count(b"[") + raw.count(b"{") <= _toolcalls._FAST_MAX_BRACKETS:
            try:
                rec = plain(decode(raw), lists)
            except _toolcalls.FAST_ERRORS:
                rec = None
        if rec is None:
            jl = _toolcalls._line(pieces, i, open_end)
            if jl is None:
                continue
            att = _toolcalls._unusual_request(jl, parse_request, requests)
            if att is None:
                return None
            unusual[len(reqs)] = att
            rec = (jl.value["custom_id"], att.tools, att.query_id, att.query_text, att.cluster, att.forced,
                   att.model)
        if rec[0] in index:
            return None
        index[rec[0]] = len(reqs)
        reqs.append(rec)
        rows.append(i + 1)
    return (index, [list(c) for c in zip(*reqs)], rows, unusual) if reqs else None


@pytest.mark.parametrize("lines", [
    [_request("a"), _request("b"), _request("c")],
    [_request("a"), "", "   ", _request("b"), ""],                                  # blank lines keep numbering
    [_request("a"), _request("b", tool_choice={"type": "function", "function": {"name": "geo_a"}}), _request("c")],
    [_request("a"), _request("b", metadata={"deep": json.loads("[" * 450 + "]" * 450)}), _request("c")],  # deep
    [_request("a"), _request("a")],                                                  # a custom_id twice
    [_request("a"), '{"custom_id": "b", "body": ', _request("c")],                    # a truncated line
    [_request("a"), "[1, 2]"],                                                        # not an object
    ["", "  "],                                                                       # no request at all
    [_request("a", tools=("x",) * 3), _request("b", tools=())],                       # odd tool lists
])
def test_batch_requests_are_the_line_by_line_loop(tmp_path, lines):
    path = tmp_path / "in.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    pieces, open_end = _toolcalls._file_lines(path)
    args = (pieces, open_end, openai._BATCH, openai.parse_request, path)
    new, old = _toolcalls._batch_requests(*args), _old_batch_requests(*args)
    if old is None:
        assert new is None
        return
    assert new[:3] == old[:3]
    assert {k: vars(v) for k, v in new[3].items()} == {k: vars(v) for k, v in old[3].items()}


def _old_diagnostics(cols, o_status, o_raw, hows, repeats):
    """The passes of `_log_diagnostics` before this round (the fields they fill)."""
    flags = Counter(f for fl in cols.flags for f in fl)
    return {"status": Counter(o_status),
            "unresolved": Counter(r for s, r in zip(o_status, o_raw) if s == "unknown_tool"),
            "n_tool_calls": dict(sorted(Counter(cols.n_calls).items())),
            "multiple_calls_rows": [int(r) for r, n in zip(cols.source_row, cols.n_calls) if n > 1],
            "notes": dict(sorted(flags.items())), "repeated_requests": int((repeats > 1).sum()),
            "off_cluster": Counter(r for s, r in zip(o_status, o_raw) if s == "off_cluster"),
            "by_hint": [r for r, h in zip(cols.source_row, hows) if h == "hint"],
            "by_choice": [r for r, h in zip(cols.source_row, hows) if h == "choice"],
            "by_group": [int(r) for r, h in zip(cols.source_row, hows) if h == "group"],
            "no_list": [int(r) for r, nl in zip(cols.source_row, cols.no_list) if nl]}


@pytest.mark.parametrize("seed", range(6))
def test_log_diagnostics_are_the_passes_over_every_row(seed):
    rng = np.random.default_rng(seed)
    n = 60

    def pick(values):
        return [values[i] for i in rng.choice(len(values), n)]

    rare = seed % 2 == 0          # even seeds: the rare kinds are absent (the skipped passes), odd: present
    statuses = ["ok", "no_call", "parse_error"] + ([] if rare else ["unknown_tool", "off_cluster", "forced"])
    hows_of = [None] + ([] if rare else ["hint", "choice", "group", "unassigned"])
    flags_of = [()] + ([] if rare else [("refusal",), ("api_error", "extra_choices")])
    cols = _toolcalls.AttemptColumns(
        source_file=["f"] * n, source_row=list(range(1, n + 1)), tools=[("a", "b")] * n,
        status=pick(statuses), name=[None] * n, raw=pick(["x", "y", None]),
        n_calls=pick([0, 1] if rare else [0, 1, 2, 3]), query_id=["q"] * n, query_text=[None] * n,
        label=[""] * n, flags=pick(flags_of), forced=[None] * n, cluster=[None] * n,
        no_list=pick([False] if rare else [False, True]), model=[None] * n, group=[None] * n)
    o_status, o_raw, hows = cols.status, pick(["geo_z", "geo_y", None]), pick(hows_of)
    repeats = rng.integers(1, 3, n)
    diag = _toolcalls._log_diagnostics(cols, o_status, o_raw, hows, repeats, fmt="openai", catalog=None)
    ref = _old_diagnostics(cols, o_status, o_raw, hows, repeats)
    for key in ("status", "unresolved", "n_tool_calls", "multiple_calls_rows", "notes", "repeated_requests",
                "off_cluster"):
        assert json.dumps(diag[key]) == json.dumps(ref[key]), key     # the same values in the same key order
    multi = diag.get("cluster_of_multi_cluster_requests", {})
    assert multi.get("from_cluster_id", 0) == len(ref["by_hint"])
    assert multi.get("from_chosen_tool_rows", []) == ref["by_choice"][:50]
    assert diag.get("cluster_from_group", {}).get("source_rows", []) == ref["by_group"][:50]
    assert diag.get("order_unknown", {}).get("rows", 0) == len(ref["no_list"])
