"""The resumable runner against a fake OpenAI-compatible server on 127.0.0.1 (issue 25): the round trip recovers
a known position bias, every answer and error is a row, and an interrupted run resumes to the same log."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from fake_openai_server import FakeOpenAI

import toolbias_stats as tbs
from toolbias_stats.audit import design_study, write_requests
from toolbias_stats.audit._runner import done_custom_ids, run_study

ROOT = Path(__file__).resolve().parents[2]
WEIGHTS = (0.5, 0.2, 0.1, 0.1, 0.1)
#: delta_pos of the fake chooser: TV between its position distribution and uniform over 5 positions.
TRUE_DELTA_POS = 0.5 * float(np.abs(np.asarray(WEIGHTS) - 0.2).sum())


@pytest.fixture(autouse=True)
def _no_proxy(monkeypatch):
    for var in ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")


def _design_dir(tmp_path, name, bb_catalog, bb_data_dir, n_queries=20, runs=1, fmt="chat-jsonl", **kw):
    d = design_study(bb_catalog, bb_data_dir / "queries.json", n_queries=n_queries, runs=runs, **kw)
    write_requests(d, tmp_path / name, format=fmt, **({"model": "fake"} if fmt != "chat-jsonl" else {}))
    return d, tmp_path / name


def _sorted_lines(path):
    return sorted(path.read_text(encoding="utf-8").splitlines())


class TestRoundTrip:
    """Acceptance: design -> requests -> fake server (known position bias) -> `bias` on the written manifest
    recovers the bias within its interval, and rows in = requests sent."""

    def test_recovers_position_bias(self, tmp_path, bb_catalog, bb_data_dir):
        d, out = _design_dir(tmp_path, "s", bb_catalog, bb_data_dir, n_queries=20)
        with FakeOpenAI(WEIGHTS, seed=1) as srv:
            res = run_study(out, base_url=srv.base_url, model="fake-model", concurrency=4, backoff=0.01)
        assert res.sent == len(d.table) == 1000 and res.remaining == 0
        result = tbs.selection_bias(out / "study.toml", n_resamples=400, n_null=200, rng=7)
        frame = result.to_frame().set_index("metric")
        pos, api = frame.loc["delta_pos"], frame.loc["delta_api"]
        assert frame["n_used"].iloc[0] + frame["n_excluded"].iloc[0] == len(d.table)     # rows in = requests sent
        assert pos["model"] == "fake-model"           # the runner named the model in the manifest
        # the bias-corrected intervals cover the truth: delta_pos = 0.3, delta_api = 0 (balanced orderings)
        assert pos["corrected_ci_low"] <= TRUE_DELTA_POS <= pos["corrected_ci_high"]
        assert api["corrected_ci_low"] <= 0.0 <= api["corrected_ci_high"]
        # and the CLI reads the same manifest
        from toolbias_stats.cli._commands import main

        assert main(["bias", str(out / "study.toml"), "--bootstrap", "0", "--null", "0", "--json"]) == 0

    def test_responses_endpoint(self, tmp_path, bb_catalog, bb_data_dir):
        d = design_study(bb_catalog, bb_data_dir / "queries.json", n_queries=2, clusters=["1", "2"])
        write_requests(d, tmp_path / "s", format="openai-batch", endpoint="responses", model="m")
        with FakeOpenAI(WEIGHTS) as srv:
            run_study(tmp_path / "s", base_url=srv.base_url, model="m", backoff=0.01)
        log = tbs.read_study(tmp_path / "s" / "study.toml").log.data
        assert len(log) == len(d.table) and (log["status"] == "ok").all()


class TestStatuses:
    def test_every_answer_and_error_is_a_row(self, tmp_path, bb_catalog, bb_data_dir):
        d, out = _design_dir(tmp_path, "s", bb_catalog, bb_data_dir, n_queries=2, clusters=["1"])
        ids = d.table["custom_id"].tolist()
        with FakeOpenAI(WEIGHTS, rate_limited={ids[0], ids[1]}, server_error={ids[2]}, malformed={ids[3]},
                        text_answer={ids[4]}, bad_request={ids[5]}) as srv:
            res = run_study(out, base_url=srv.base_url, model="m", concurrency=2, backoff=0.01)
            received = Counter(srv.received)
        assert res.retries == 3 and res.by_outcome == {"ok": 8, "malformed_response": 1, "http_error": 1}
        assert received[ids[0]] == 2 and received[ids[2]] == 2 and received[ids[6]] == 1
        log = tbs.read_study(out / "study.toml").log.data
        assert len(log) == len(ids)                            # nothing lost
        row = log.set_index("source_row")
        status = {cid: row.loc[i + 1, "status"] for i, cid in enumerate(ids)}
        assert status[ids[0]] == status[ids[2]] == "ok"        # retried after 429 / 500
        assert status[ids[3]] == "parse_error" and "malformed_response" in row.loc[4, "raw_choice"]
        assert status[ids[4]] == "no_call"
        assert status[ids[5]] == "parse_error" and "HTTP 400" in row.loc[6, "raw_choice"]

    def test_rate_limit_exhausted_is_recorded(self, tmp_path, bb_catalog, bb_data_dir):
        d, out = _design_dir(tmp_path, "s", bb_catalog, bb_data_dir, n_queries=1, clusters=["1"])
        first = d.table["custom_id"].iloc[0]
        with FakeOpenAI(WEIGHTS, rate_limited={first}) as srv:
            res = run_study(out, base_url=srv.base_url, model="m", max_retries=0)
        assert res.by_outcome["http_error"] == 1
        log = tbs.read_study(out / "study.toml").log.data
        assert "HTTP 429" in log.loc[log["source_row"] == 1, "raw_choice"].iloc[0]

    def test_unreachable_endpoint_stops_without_marking_requests_done(self, tmp_path, bb_catalog, bb_data_dir):
        _, out = _design_dir(tmp_path, "s", bb_catalog, bb_data_dir, n_queries=1, clusters=["1"])
        with FakeOpenAI(WEIGHTS) as srv:
            url = srv.base_url
        res = run_study(out, base_url=url, model="m", max_retries=1, backoff=0.01, timeout=2)
        assert res.stopped and "unreachable" in res.stopped and res.sent == 0
        assert done_custom_ids(out / "responses-run1.jsonl")[0] == set()


class TestResume:
    """Acceptance: a run stopped mid-way and restarted gives the same final log as an uninterrupted run
    (same custom_ids, no repeats), and requests with a line are never sent again."""

    def test_max_requests_then_resume(self, tmp_path, bb_catalog, bb_data_dir):
        d, full = _design_dir(tmp_path, "full", bb_catalog, bb_data_dir, n_queries=4, runs=2)
        _, parts = _design_dir(tmp_path, "parts", bb_catalog, bb_data_dir, n_queries=4, runs=2)
        with FakeOpenAI(WEIGHTS) as srv:
            run_study(full, base_url=srv.base_url, model="m", backoff=0.01)
        with FakeOpenAI(WEIGHTS) as srv:
            first = run_study(parts, base_url=srv.base_url, model="m", max_requests=150, backoff=0.01)
            second = run_study(parts, base_url=srv.base_url, model="m", backoff=0.01)
            third = run_study(parts, base_url=srv.base_url, model="m", backoff=0.01)
            received = Counter(srv.received)
        assert (first.sent, first.remaining) == (150, len(d.table) - 150)
        assert (second.sent, second.skipped) == (len(d.table) - 150, 150)
        assert third.sent == 0 and third.skipped == len(d.table)
        assert max(received.values()) == 1 and len(received) == len(d.table)
        for r in (1, 2):
            assert _sorted_lines(parts / f"responses-run{r}.jsonl") == _sorted_lines(full / f"responses-run{r}.jsonl")

    def test_killed_and_restarted(self, tmp_path, bb_catalog, bb_data_dir):
        d, full = _design_dir(tmp_path, "full", bb_catalog, bb_data_dir, n_queries=4)
        _, killed = _design_dir(tmp_path, "killed", bb_catalog, bb_data_dir, n_queries=4)
        with FakeOpenAI(WEIGHTS) as srv:
            run_study(full, base_url=srv.base_url, model="m", backoff=0.01)
        responses = killed / "responses-run1.jsonl"
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        with FakeOpenAI(WEIGHTS, delay=0.02, lifetime=60) as srv:
            proc = subprocess.Popen([sys.executable, "-m", "toolbias_stats.cli", "run", str(killed), "--base-url",
                                     srv.base_url, "--model", "m", "--concurrency", "2"], env=env,
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                if responses.exists() and responses.read_bytes().count(b"\n") >= 40:
                    break
                time.sleep(0.01)
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=10)
            n_before = len(done_custom_ids(responses)[0])
            assert 40 <= n_before < len(d.table)             # killed mid-run
            before = set(srv.received)
            res = run_study(killed, base_url=srv.base_url, model="m", concurrency=2, backoff=0.01)
            received = Counter(srv.received)
        assert res.skipped == n_before and res.sent == len(d.table) - n_before
        # only requests in flight at the kill (at most the concurrency) were sent twice
        assert sum(c - 1 for c in received.values()) <= 2
        assert len(before) >= n_before
        lines = [json.loads(x) for x in responses.read_text().splitlines()]
        ids = [x["custom_id"] for x in lines]
        assert len(ids) == len(set(ids)) == len(d.table)      # no repeats, nothing missing
        assert _sorted_lines(responses) == _sorted_lines(full / "responses-run1.jsonl")

    def test_line_cut_short_is_removed_and_sent_again(self, tmp_path, bb_catalog, bb_data_dir):
        d, out = _design_dir(tmp_path, "s", bb_catalog, bb_data_dir, n_queries=1, clusters=["1"])
        with FakeOpenAI(WEIGHTS) as srv:
            run_study(out, base_url=srv.base_url, model="m", max_requests=2)
            responses = out / "responses-run1.jsonl"
            whole = responses.read_text()
            third = d.table["custom_id"].iloc[2]
            responses.write_text(whole + '{"id": "batch_req_x", "custom_id": "' + third + '", "respo')
            res = run_study(out, base_url=srv.base_url, model="m")
        assert res.repaired == [str(responses)] and res.sent == len(d.table) - 2
        assert len(tbs.read_study(out / "study.toml").log) == len(d.table)

    def test_another_model_is_refused(self, tmp_path, bb_catalog, bb_data_dir):
        _, out = _design_dir(tmp_path, "s", bb_catalog, bb_data_dir, n_queries=1, clusters=["1"],
                             fmt="openai-batch")
        with pytest.raises(ValueError, match="names model 'fake'; run it with --model 'fake'"):
            run_study(out, base_url="http://127.0.0.1:9/v1", model="other")
        assert not (out / "responses-run1.jsonl").exists()

    def test_anthropic_design_is_refused(self, tmp_path, bb_catalog, bb_data_dir):
        _, out = _design_dir(tmp_path, "s", bb_catalog, bb_data_dir, n_queries=1, clusters=["1"],
                             fmt="anthropic-batch")
        with pytest.raises(ValueError, match="Message Batches"):
            run_study(out, base_url="http://127.0.0.1:9/v1", model="m")


class TestFakeServer:
    def test_answers_are_valid_chat_completions(self, tmp_path):
        ChatCompletion = pytest.importorskip("openai.types.chat").ChatCompletion

        fake = FakeOpenAI(WEIGHTS)
        body = {"model": "m", "messages": [{"role": "user", "content": "q"}],
                "tools": [{"type": "function", "function": {"name": n, "parameters": {}}} for n in "abcde"]}
        code, _, raw = fake.answer("/v1/chat/completions", "x-1", body)
        assert code == 200
        msg = ChatCompletion.model_validate_json(raw).choices[0].message
        assert msg.tool_calls[0].function.name in "abcde"

    def test_chooser_has_the_stated_position_bias(self):
        fake = FakeOpenAI(WEIGHTS)
        picks = np.bincount([fake.choose(f"id{i}", 5) for i in range(20000)], minlength=5) / 20000
        assert np.allclose(picks, WEIGHTS, atol=0.015)


class TestPlanWritesDesign:
    """`toolbias-stats plan PILOT --target-width W --write-design DIR`: the cheapest design for the target, over
    the pilot's catalog and queries, as request files."""

    def test_pilot_to_planned_design(self, tmp_path, bb_catalog, bb_data_dir, capsys):
        from toolbias_stats.cli._commands import main

        _, pilot = _design_dir(tmp_path, "pilot", bb_catalog, bb_data_dir, n_queries=6, runs=2,
                               clusters=["1", "2", "3"])
        with FakeOpenAI(WEIGHTS, seed=2) as srv:
            run_study(pilot, base_url=srv.base_url, model="fake", backoff=0.01)
        out = tmp_path / "big"
        rc = main(["plan", str(pilot / "study.toml"), "--target-width", "0.08", "--bootstrap", "0", "--draws", "200",
                   "--queries", "10,20,40,80", "--runs", "1,2", "--json", "--write-design", str(out),
                   "--format", "openai-batch", "--model", "gpt-x"])
        captured = capsys.readouterr()
        assert rc == 0, captured.err
        plan = json.loads(captured.out)                  # --json stays one JSON document
        cheap = plan["groups"][0]["cheapest"]
        assert cheap["feasible"]
        design = __import__("pandas").read_csv(out / "design.csv", dtype={"cluster_id": str})
        assert design.groupby("cluster_id")["query_id"].nunique().tolist() == [cheap["queries"]] * 3
        assert sorted(design["run"].unique()) == list(range(1, cheap["runs"] + 1))
        assert len(design) == cheap["calls"]
        assert "requests (openai-batch)" in captured.err
