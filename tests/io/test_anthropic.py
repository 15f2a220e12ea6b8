"""Tests for toolbias_stats.io.readers.anthropic (read_anthropic): Message Batches requests + results.

The fixtures under fixtures/api_logs/anthropic were built with the Anthropic SDK's own models
(``MessageBatchIndividualResponse``; requests validated against ``batch_create_params.Request``) by
fixtures/api_logs/make_fixtures.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

import toolbias_stats as tbs
from toolbias_stats.exceptions import ExcludedRowsWarning, SelectionLogError
from toolbias_stats.io.readers import READERS, read_anthropic, read_table

FIX = Path(__file__).resolve().parent / "fixtures" / "api_logs" / "anthropic"
REQ, RES = FIX / "batch_requests.jsonl", FIX / "batch_results.jsonl"
META = {"model": "claude-sonnet-4-5"}

#: (status, chosen tool, position, raw_choice prefix) per request line
EXPECTED = [
    ("ok", "geo_b", 2, "geo_b"),
    ("ok", "geo_b", 1, "geo_b"),                       # two tool_use blocks: the first is the choice
    ("no_call", None, None, "10 Downing Street is in London."),
    ("no_call", None, None, "refusal"),                # stop_reason "refusal"
    ("unknown_tool", None, None, "geo_zzz"),
    ("forced", None, None, "tool_choice forces 'geo_a'; called 'geo_a'"),
    ("ok", "wx_a", 1, "wx_a"),
    ("parse_error", None, None, "api_error: overloaded_error: Overloaded"),   # result type "errored"
    ("parse_error", None, None, "batch request expired"),
    ("parse_error", None, None, "no response for custom_id 'r10'"),
    ("ok", "geo_c", 1, "geo_c"),
    ("parse_error", None, None, "batch request canceled"),
]


def _lines(path):
    return path.read_text(encoding="utf-8").splitlines()


def _write(path, lines):
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _check(log, expected):
    d = log.data
    assert len(d) == len(expected)
    for i, (es, et, ep, er) in enumerate(expected):
        row = d.iloc[i]
        assert row["status"] == es, (i, row["status"])
        assert (None if pd.isna(row["chosen_tool"]) else row["chosen_tool"]) == et
        assert (None if pd.isna(row["chosen_position"]) else int(row["chosen_position"])) == ep
        assert row["raw_choice"].startswith(er), (i, row["raw_choice"])


@pytest.fixture(scope="module")
def log():
    return READERS["anthropic"](REQ, catalog=None, meta=META, responses=RES)


class TestBatch:
    def test_rows_in_equal_rows_out(self, log):
        assert len(log) == len(_lines(REQ)) == 12
        assert log.data["source_row"].tolist() == list(range(1, 13))
        _check(log, EXPECTED)

    def test_every_status_is_reachable(self, log):
        # off_cluster: tests/io/test_multi_cluster.py
        assert set(log.data["status"]) == set(tbs.STATUSES) - {"off_cluster"}

    def test_repeated_request_gets_an_attempt_column(self, log):
        # r12 repeats r01 (same query, same tool order): a second attempt, not a duplicate
        assert "attempt" in log.design_columns
        assert log.data["attempt"].tolist() == [1] * 11 + [2]
        assert log.diagnostics[str(REQ)]["repeated_requests"] == 1

    def test_diagnostics(self, log):
        diag = log.diagnostics[str(REQ)]
        assert diag["n_tool_calls"] == {0: 6, 1: 5, 2: 1}
        assert diag["notes"] == {"api_error": 1, "canceled": 1, "expired": 1, "missing_response": 1, "refusal": 1}

    def test_round_trip_through_the_table_format(self, log, tmp_path):
        back = read_table(log.write(tmp_path / "log.csv"), catalog=log.catalog)
        pd.testing.assert_frame_equal(back.data, log.data)

    def test_declared_clusters(self):
        log = read_anthropic(REQ, responses=RES, meta=META,
                             clusters={"geocoding": ["geo_a", "geo_b", "geo_c"], "weather": ["wx_a", "wx_b"]})
        assert sorted(set(log.data["cluster_id"])) == ["geocoding", "weather"]
        assert log.diagnostics[str(REQ)]["cluster_source"].startswith("declared")

    def test_message_logs_as_pairs(self, tmp_path):
        req = {json.loads(x)["custom_id"]: json.loads(x)["params"] for x in _lines(REQ)}
        res = {json.loads(x)["custom_id"]: json.loads(x)["result"] for x in _lines(RES)}
        lines = []
        for k in ("r01", "r03", "r07"):
            lines.append(json.dumps({"request": req[k], "response": res[k]["message"]}))
        lines.append(json.dumps({"request": req["r08"], "response": {"type": "error", "error": {
            "type": "rate_limit_error", "message": "Number of requests has exceeded your rate limit"}}}))
        log = read_anthropic(_write(tmp_path / "messages.jsonl", lines), meta=META)
        assert log.data["status"].tolist() == ["ok", "no_call", "ok", "parse_error"]
        assert log.data["raw_choice"].iloc[3] == ("api_error: rate_limit_error: "
                                                  "Number of requests has exceeded your rate limit")


class TestBadInput:
    def test_truncated_result_line(self, tmp_path):
        res = _lines(RES)
        i = next(j for j, x in enumerate(res) if json.loads(x)["custom_id"] == "r07")
        res[i] = res[i][:60]
        log = read_anthropic(REQ, responses=_write(tmp_path / "res.jsonl", res), meta=META)
        assert log.data["status"].iloc[6] == "parse_error"
        assert log.data["raw_choice"].iloc[6].startswith(f"res.jsonl:{i + 1}: truncated JSON")

    def test_result_without_its_request(self, tmp_path):
        req = [x for x in _lines(REQ) if json.loads(x)["custom_id"] != "r05"]
        with pytest.raises(SelectionLogError, match=r"batch_results.jsonl:\d+:custom_id: response for custom_id 'r05' "
                                                    r"has no request"):
            read_anthropic(_write(tmp_path / "req.jsonl", req), responses=RES, meta=META)

    def test_line_that_is_not_an_object_or_has_no_custom_id(self, tmp_path):
        req = _lines(REQ) + ["42", json.dumps({"params": {}})]
        with pytest.raises(SelectionLogError) as err:
            read_anthropic(_write(tmp_path / "req.jsonl", req), responses=RES, meta=META)
        assert "req.jsonl:13: expected a JSON object per line, got int" in str(err.value)
        assert "req.jsonl:14:custom_id: missing or not a string" in str(err.value)

    def test_tool_list_changes_within_a_cluster(self, tmp_path):
        req = _lines(REQ)
        rec = json.loads(req[6])
        rec["params"]["tools"].append({"name": "geo_a", "input_schema": {"type": "object"}})
        req[6] = json.dumps(rec)
        with pytest.raises(SelectionLogError, match=r"req.jsonl:7:tools: the tool list changes within one cluster"):
            read_anthropic(_write(tmp_path / "req.jsonl", req), responses=RES, meta=META)
        # issue 20: with declared clusters a request offering two clusters' tools belongs to the chosen tool's
        # cluster (r07 calls wx_a) ...
        clusters = {"geo": ["geo_a", "geo_b", "geo_c"], "wx": ["wx_a", "wx_b"]}
        log = read_anthropic(tmp_path / "req.jsonl", responses=RES, meta=META, clusters=clusters)
        row = log.data.set_index("source_row").loc[7]
        assert (row["cluster_id"], row["ordering"], row["n_candidates"]) == ("wx", "wx_a|wx_b|geo_a", 2)
        diag = log.diagnostics[str(tmp_path / "req.jsonl")]["cluster_of_multi_cluster_requests"]
        assert diag["from_chosen_tool_rows"] == [7]
        # ... and, when nothing decides it (r08: an HTTP error, no call), issue 36: it is kept as a row without a
        # cluster and counted (one
        # unassignable request never refuses the study), the message naming the request
        rec = json.loads(req[7])
        rec["params"]["tools"].append({"name": "geo_a", "input_schema": {"type": "object"}})
        req[7] = json.dumps(rec)
        with pytest.warns(ExcludedRowsWarning, match="1 of 12 attempt"):
            log = read_anthropic(_write(tmp_path / "req.jsonl", req), responses=RES, meta=META, clusters=clusters)
        un = log.diagnostics[str(tmp_path / "req.jsonl")]["unassigned"]
        # kept as a row without a cluster (issue 36), excluded by its status (the HTTP error: parse_error)
        assert un["rows"] == 1 and un["source_rows"] == [8] and len(log) == 12
        row = log.data.set_index("source_row").loc[8]
        assert pd.isna(row["cluster_id"]) and row["status"] == "parse_error" and un["by_status"] == {"parse_error": 1}
        assert "geo_a" in row["ordering"].split("|") and "wx_a" in row["ordering"].split("|")   # the list shown
        assert ("req.jsonl:8:tools: the tools offered span several clusters ['geo', 'wx'] and the query's cluster "
                "cannot be decided") in un["messages"][0]

    def test_tool_offered_twice(self, tmp_path):
        req = _lines(REQ)
        rec = json.loads(req[0])
        rec["params"]["tools"].append(rec["params"]["tools"][0])
        req[0] = json.dumps(rec)
        with pytest.raises(SelectionLogError, match=r"req.jsonl:1:tools: tool name\(s\) offered twice: \['geo_a'\]"):
            read_anthropic(_write(tmp_path / "req.jsonl", req), responses=RES, meta=META,
                           clusters={"geo": ["geo_a", "geo_b", "geo_c"], "wx": ["wx_a", "wx_b"]})


def test_manifest_end_to_end(tmp_path):
    (tmp_path / "study.toml").write_text(
        'format = "anthropic"\nclusters = {geocoding = ["geo_a", "geo_b", "geo_c"], weather = ["wx_a", "wx_b"]}\n'
        f'[[logs]]\npath = "{REQ}"\nresponses = "{RES}"\nmodel = "claude-sonnet-4-5"\n', encoding="utf-8")
    study = tbs.read_study(tmp_path / "study.toml")
    assert study.settings["cluster_source"]["kind"] == "declared"
    with pytest.warns(Warning):
        res = tbs.selection_bias(study, n_resamples=50, n_null=50, rng=0)
    (g,) = res.groups
    assert g.rows["used"] == 4 and g.rows["total"] == 12
    assert g.rows["excluded"] == {"no_call": 2, "unknown_tool": 1, "parse_error": 4, "forced": 1}
