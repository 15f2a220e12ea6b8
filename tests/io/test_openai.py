"""Tests for toolbias_stats.io.readers.openai (read_openai): Batch API pairs and {request, response} logs.

The fixtures under fixtures/api_logs/openai were built with the OpenAI SDK's own pydantic models
(fixtures/api_logs/make_fixtures.py); the expected rows below are the scenarios written there.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

import toolbias_stats as tbs
from toolbias_stats.exceptions import ExcludedRowsWarning, SelectionLogError
from toolbias_stats.io.readers import READERS, read_openai, read_table
from toolbias_stats.io.readers._toolcalls import query_key

FIX = Path(__file__).resolve().parent / "fixtures" / "api_logs" / "openai"
BATCH_IN, BATCH_OUT = FIX / "chat_batch_input.jsonl", FIX / "chat_batch_output.jsonl"
PAIRS = FIX / "responses_pairs.jsonl"
META = {"model": "gpt-4o-mini", "run": 1, "temperature": 0.0}
#: the Responses API records name gpt-4.1-mini
META41 = {**META, "model": "gpt-4.1-mini"}
GEO, WX = "geo_a+geo_b+geo_c", "wx_a+wx_b"

#: (status, chosen tool, chosen position, raw_choice starts with) per request line of the chat batch
CHAT_EXPECTED = [
    ("ok", "geo_b", 2, "geo_b"),
    ("ok", "geo_b", 1, "geo_b"),                       # two calls: the first is the choice
    ("no_call", None, None, "10 Downing Street"),
    ("no_call", None, None, "refusal: I can't help"),
    ("unknown_tool", None, None, "geo_zzz"),
    ("forced", None, None, "tool_choice forces 'geo_a'; called 'geo_a'"),
    ("ok", "wx_a", 1, "wx_a"),
    ("parse_error", None, None, "api_error: HTTP 500: server_error"),
    ("parse_error", None, None, "api_error: batch_expired"),
    ("parse_error", None, None, "no response for custom_id 'r10'"),
    ("ok", "geo_c", 1, "geo_c"),
]
RESPONSES_EXPECTED = [
    ("ok", "geo_c", 3, "geo_c"),
    ("no_call", None, None, "The Eiffel Tower is in Paris."),
    ("no_call", None, None, "refusal: I can't help with that."),
    ("parse_error", None, None, "api_error: server_error: The model failed."),
    ("forced", None, None, "tool_choice forces 'geo_b'"),
    ("ok", "geo_a", 3, "geo_a"),
    ("unknown_tool", None, None, "web_search_call"),   # a built-in tool is not a candidate
    ("unknown_tool", None, None, "get_weather"),
]


def _rows(log):
    d = log.data
    return [(s, None if pd.isna(t) else t, None if pd.isna(p) else int(p), r)
            for s, t, p, r in zip(d["status"], d["chosen_tool"], d["chosen_position"], d["raw_choice"])]


def _check(log, expected):
    got = _rows(log)
    assert len(got) == len(expected)
    for (s, t, p, r), (es, et, ep, er) in zip(got, expected):
        assert (s, t, p) == (es, et, ep)
        assert r.startswith(er), (r, er)


def _lines(path):
    return path.read_text(encoding="utf-8").splitlines()


def _write(path, lines):
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def chat_log():
    return READERS["openai"](BATCH_IN, catalog=None, meta=META, responses=BATCH_OUT)


class TestChatBatch:
    def test_every_request_is_one_row_in_file_order(self, chat_log):
        n_requests = len(_lines(BATCH_IN))
        assert len(chat_log) == n_requests == 11                    # rows in = rows out
        assert chat_log.data["source_row"].tolist() == list(range(1, 12))
        assert set(chat_log.data["source_file"]) == {str(BATCH_IN)}
        _check(chat_log, CHAT_EXPECTED)

    def test_every_status_is_reachable(self, chat_log):
        # off_cluster: tests/io/test_multi_cluster.py
        assert set(chat_log.data["status"]) == set(tbs.STATUSES) - {"off_cluster"}

    def test_ordering_and_clusters_come_from_the_request_tools(self, chat_log):
        d = chat_log.data
        assert d["ordering"].iloc[1] == "geo_b|geo_c|geo_a" and d["n_candidates"].iloc[1] == 3
        assert d["cluster_id"].tolist() == [GEO] * 6 + [WX] * 4 + [GEO]
        assert chat_log.catalog.tools(WX) == ["wx_a", "wx_b"]

    def test_query_ids(self, chat_log):
        d = chat_log.data
        assert d["query_id"].iloc[10] == "geo-07"                    # body.metadata.query_id
        assert d["query_id"].iloc[0] == query_key("Where is the Eiffel Tower?")   # hash of the last user message
        assert d["query_id"].iloc[0] == d["query_id"].iloc[1]

    def test_diagnostics(self, chat_log):
        diag = chat_log.diagnostics[str(BATCH_IN)]
        assert diag["n_tool_calls"] == {0: 5, 1: 5, 2: 1}
        assert diag["multiple_calls_rows"] == [2]
        assert diag["notes"] == {"api_error": 2, "missing_response": 1, "refusal": 1}
        assert diag["cluster_source"].startswith("inferred")
        assert diag["unresolved"] == {"geo_zzz": 1}

    def test_round_trip_through_the_table_format(self, chat_log, tmp_path):
        back = read_table(chat_log.write(tmp_path / "log.jsonl"), catalog=chat_log.catalog)
        pd.testing.assert_frame_equal(back.data, chat_log.data)

    def test_design_columns(self, chat_log):
        assert chat_log.design_columns == ["model", "run", "condition", "temperature"]


class TestResponsesApi:
    def test_rows_and_statuses(self):
        log = read_openai(PAIRS, meta=META41)
        assert len(log) == len(_lines(PAIRS)) == 8
        _check(log, RESPONSES_EXPECTED)
        diag = log.diagnostics[str(PAIRS)]
        assert diag["n_tool_calls"] == {0: 3, 1: 4, 2: 1}
        assert diag["notes"]["builtin_tools_not_candidates"] == 1
        assert log.data["ordering"].iloc[6] == "wx_a|wx_b"          # the web_search tool is not in the list

    def test_batch_lines_inside_pairs(self, tmp_path):
        # {request: batch input line, response: batch output line} is read like the two files
        req = {json.loads(x)["custom_id"]: json.loads(x) for x in _lines(BATCH_IN)}
        res = {json.loads(x)["custom_id"]: json.loads(x) for x in _lines(BATCH_OUT)}
        pairs = [json.dumps({"request": req[k], "response": res.get(k)}) for k in req]
        log = read_openai(_write(tmp_path / "pairs.jsonl", pairs), meta=META)
        expected = list(CHAT_EXPECTED)
        expected[9] = ("parse_error", None, None, "no response recorded")
        _check(log, expected)

    def test_responses_api_in_batch_files(self, tmp_path):
        recs = [json.loads(x) for x in _lines(PAIRS)]
        req = [json.dumps({"custom_id": f"p{i}", "method": "POST", "url": "/v1/responses", "body": r["request"]})
               for i, r in enumerate(recs)]
        out = [json.dumps({"id": f"b{i}", "custom_id": f"p{i}", "error": None,
                           "response": {"status_code": 200, "request_id": "x", "body": r["response"]}})
               for i, r in reversed(list(enumerate(recs)))]
        log = read_openai(_write(tmp_path / "in.jsonl", req), responses=_write(tmp_path / "out.jsonl", out),
                          meta=META41)
        _check(log, RESPONSES_EXPECTED)

    def test_catalog_names_resolve_case_and_punctuation_insensitively(self, tmp_path):
        (tmp_path / "cat.csv").write_text("tool_id,cluster_id\ngeo_a,geo\ngeo_b,geo\ngeo_c,geo\n")
        rec = json.loads(_lines(PAIRS)[0])
        for t in rec["request"]["tools"]:
            t["name"] = t["name"].upper().replace("_", "-")              # GEO-A, GEO-B, GEO-C
        rec["response"]["output"][1]["name"] = "GEO-C"
        (tmp_path / "p.jsonl").write_text(json.dumps(rec) + "\n")
        (tmp_path / "s.toml").write_text('catalog = "cat.csv"\n[[logs]]\nformat = "openai"\npath = "p.jsonl"\n'
                                         'model = "m"\nmodel_override = true\n')
        study = tbs.read_study(tmp_path / "s.toml")
        row = study.log.data.iloc[0]
        assert (row["ordering"], row["chosen_tool"], row["chosen_position"]) == ("geo_a|geo_b|geo_c", "geo_c", 3)
        assert "cluster_source" not in study.settings                  # a catalog file: nothing to declare

    def test_allowed_tools_restricts_the_candidates(self, tmp_path):
        rec = json.loads(_lines(PAIRS)[0])
        rec["request"]["tool_choice"] = {"type": "allowed_tools", "mode": "auto",
                                         "tools": [{"type": "function", "name": "geo_a"},
                                                   {"type": "function", "name": "geo_c"}]}
        log = read_openai(_write(tmp_path / "p.jsonl", [json.dumps(rec)]), meta=META41, subsets=True,
                          clusters={"geo": ["geo_a", "geo_b", "geo_c"]})
        assert log.data["ordering"].iloc[0] == "geo_a|geo_c" and log.data["chosen_position"].iloc[0] == 2


class TestBadInput:
    def test_truncated_response_line_is_a_parse_error_row(self, tmp_path):
        out = _lines(BATCH_OUT)
        cut = next(i for i, x in enumerate(out) if json.loads(x)["custom_id"] == "r01")
        out[cut] = out[cut][: len(out[cut]) // 2]
        log = read_openai(BATCH_IN, responses=_write(tmp_path / "out.jsonl", out), meta=META)
        row = log.data.iloc[0]
        assert row["status"] == "parse_error"
        assert row["raw_choice"].startswith(f"out.jsonl:{cut + 1}: truncated JSON")
        others = [r[:3] for r in _rows(log)[1:]]
        assert len(log) == 11 and others == [r[:3] for r in CHAT_EXPECTED[1:]]

    def test_truncated_line_without_custom_id_cannot_be_attributed(self, tmp_path):
        out = _lines(BATCH_OUT)
        out[-1] = out[-1][:10]
        with pytest.raises(SelectionLogError, match=rf"out.jsonl:{len(out)}: truncated JSON .* cannot be attributed"):
            read_openai(BATCH_IN, responses=_write(tmp_path / "out.jsonl", out), meta=META41)

    def test_truncated_request_file(self, tmp_path):
        req = _lines(BATCH_IN)
        req[-1] = req[-1][:300]
        with pytest.raises(SelectionLogError, match=r"in.jsonl:11: truncated JSON .*custom_id 'r11'.*tool list"):
            read_openai(_write(tmp_path / "in.jsonl", req), responses=BATCH_OUT, meta=META)

    def test_response_without_its_request(self, tmp_path):
        req = [x for x in _lines(BATCH_IN) if json.loads(x)["custom_id"] != "r03"]
        out = _lines(BATCH_OUT)
        line = next(i for i, x in enumerate(out, 1) if json.loads(x)["custom_id"] == "r03")
        with pytest.raises(SelectionLogError) as err:
            read_openai(_write(tmp_path / "in.jsonl", req), responses=BATCH_OUT, meta=META)
        want = f"chat_batch_output.jsonl:{line}:custom_id: response for custom_id 'r03' has no request"
        assert want in str(err.value)

    def test_duplicate_custom_id(self, tmp_path):
        req = _lines(BATCH_IN)
        msg = r"in.jsonl:12:custom_id: duplicate custom_id 'r01' \(first at line 1\)"
        with pytest.raises(SelectionLogError, match=msg):
            read_openai(_write(tmp_path / "in.jsonl", req + [req[0]]), responses=BATCH_OUT, meta=META)

    def test_tool_list_changes_within_a_declared_cluster(self, tmp_path):
        req = _lines(BATCH_IN)
        rec = json.loads(req[2])
        rec["body"]["tools"] = rec["body"]["tools"][:2]             # geo_c, geo_a: geo_b missing
        req[2] = json.dumps(rec)
        clusters = {"geocoding": ["geo_a", "geo_b", "geo_c"], "weather": ["wx_a", "wx_b"]}
        path = _write(tmp_path / "in.jsonl", req)
        with pytest.raises(SelectionLogError, match=r"in.jsonl:3:tools: the tool list changes within cluster "
                                                    r"'geocoding'.*missing \['geo_b'\]"):
            read_openai(path, responses=BATCH_OUT, meta=META, clusters=clusters)
        log = read_openai(path, responses=BATCH_OUT, meta=META, clusters=clusters, subsets=True)
        assert log.data["n_candidates"].tolist()[:4] == [3, 3, 2, 3]

    def test_tool_list_changes_within_an_inferred_cluster(self, tmp_path):
        req = _lines(BATCH_IN)
        rec = json.loads(req[4])
        rec["body"]["tools"] = rec["body"]["tools"][:2]
        req[4] = json.dumps(rec)
        with pytest.raises(SelectionLogError) as err:
            read_openai(_write(tmp_path / "in.jsonl", req), responses=BATCH_OUT, meta=META)
        msg = str(err.value)
        assert "in.jsonl:5:tools: the tool list changes within one cluster" in msg
        assert "in.jsonl:1 offers ['geo_a', 'geo_b', 'geo_c']" in msg

    def test_tools_outside_the_declared_clusters(self):
        # issue 20: tools outside the clusters may be offered beside a cluster's; issue 36: a request offering none
        # is kept as a row without a cluster and counted (named in the diagnostics), and only a log where nothing is
        # left is refused
        with pytest.warns(ExcludedRowsWarning):
            log = read_openai(BATCH_IN, responses=BATCH_OUT, meta=META, clusters={"geo": ["geo_a", "geo_b", "geo_c"]})
        un = log.diagnostics[str(BATCH_IN)]["unassigned"]
        assert un["source_rows"] == [7, 8, 9, 10] and len(log) == 11     # the wx requests: rows without a cluster
        wx = log.data[log.data["cluster_id"].isna()]
        assert list(wx["source_row"]) == [7, 8, 9, 10] and set(wx["status"]) <= {"off_cluster", "no_call",
                                                                                  "parse_error", "forced"}
        assert set(wx.loc[wx["status"] == "off_cluster", "raw_choice"]) <= {"wx_a", "wx_b"}
        assert un["by_status"] == dict(sorted(wx["status"].value_counts().items()))
        assert ("chat_batch_input.jsonl:7:tools: none of the tools offered ['wx_a', 'wx_b'] is in the declared "
                "clusters") in un["messages"][0]
        with pytest.raises(SelectionLogError, match=r"no selection attempts in this log: none of the 11 attempt"):
            read_openai(BATCH_IN, responses=BATCH_OUT, meta=META, clusters={"maps": ["map_a", "map_b"]})

    def test_request_without_tools(self, tmp_path):
        rec = json.loads(_lines(PAIRS)[0])
        del rec["request"]["tools"]
        with pytest.raises(SelectionLogError, match=r"p.jsonl:1:tools: no tools offered \(line 1\)"):
            read_openai(_write(tmp_path / "p.jsonl", [json.dumps(rec)]), meta=META,
                        clusters={"geo": ["geo_a", "geo_b", "geo_c"]})

    def test_pairs_line_that_is_not_a_record(self, tmp_path):
        lines = _lines(PAIRS)[:2] + ["[1, 2]", lines_cut := _lines(PAIRS)[3][:50]]
        with pytest.raises(SelectionLogError) as err:
            read_openai(_write(tmp_path / "p.jsonl", lines), meta=META)
        assert "p.jsonl:3:request: expected an object with a `request` object" in str(err.value)
        assert "p.jsonl:4: truncated JSON" in str(err.value) and lines_cut

    def test_missing_files_and_meta(self, tmp_path):
        with pytest.raises(SelectionLogError, match="request file not found"):
            read_openai(tmp_path / "nope.jsonl", responses=BATCH_OUT, meta=META)
        with pytest.raises(SelectionLogError, match="model: expected a non-empty string"):
            read_openai(BATCH_IN, responses=BATCH_OUT, meta={"model": ""})
        empty = _write(tmp_path / "empty.jsonl", [""])
        with pytest.raises(SelectionLogError, match="empty"):
            read_openai(empty, meta=META)
        latin = tmp_path / "latin.jsonl"
        latin.write_bytes(PAIRS.read_bytes().splitlines()[0] + b"\n" + '{"request": "caf\xe9"}'.encode("latin-1"))
        with pytest.raises(SelectionLogError, match=r"latin.jsonl: not UTF-8 text \(line 2, byte 17\)"):
            read_openai(latin, meta=META)


class TestManifestEndToEnd:
    def test_read_study_then_selection_bias(self, tmp_path):
        (tmp_path / "study.toml").write_text(
            'name = "openai batch"\nformat = "openai"\n'
            f'[[logs]]\npath = "{BATCH_IN}"\nresponses = "{BATCH_OUT}"\nmodel = "gpt-4o-mini"\n'
            f'[[logs]]\npath = "{BATCH_IN}"\nresponses = "{BATCH_OUT}"\nmodel = "gpt-4o-mini"\nrun = 2\n'
            f'[[logs]]\npath = "{PAIRS}"\nmodel = "gpt-4.1-mini"\n', encoding="utf-8")
        study = tbs.read_study(tmp_path / "study.toml")
        assert len(study.log) == 11 + 11 + 8
        assert study.settings["cluster_source"]["kind"] == "inferred"
        assert "responses" not in study.log.design_columns
        # (the Responses log has no valid choice in its weather cluster: the gpt-4.1-mini group is left out here)
        chat = tbs.SelectionLog.from_frame(study.log.data[study.log.data["model"] == "gpt-4o-mini"], study.catalog)
        with pytest.warns(Warning):
            res = tbs.selection_bias(chat, n_resamples=50, n_null=50, rng=0)
        (g,) = res.groups
        assert g.rows["used"] == 8
        assert g.rows["excluded"] == {"no_call": 4, "unknown_tool": 2, "parse_error": 6, "forced": 2}
        assert g.delta_pos.n_runs == 2 and 0 <= g.delta_pos.pooled <= 1
        # positions of the 4 valid choices per run: 2, 1, 1, 1 -> TV to uniform over K = 3 in the geo cluster
        geo = next(c for c in g.clusters if c.cluster == GEO)
        assert geo.position_counts.tolist() == [4.0, 2.0, 0.0]

    def test_cli_validate_names_the_cluster_source(self, tmp_path, capsys):
        from toolbias_stats.cli._commands import main

        (tmp_path / "study.toml").write_text(
            f'format = "openai"\n[[logs]]\npath = "{BATCH_IN}"\nresponses = "{BATCH_OUT}"\nmodel = "m"\n'
            'model_override = true\n',
            encoding="utf-8")
        assert main(["validate", str(tmp_path / "study.toml")]) == 0
        out = capsys.readouterr().out
        assert "clusters: inferred as the exact set of tools offered" in out and "forced" in out
        assert main(["validate", str(tmp_path / "study.toml"), "--json"]) == 0
        doc = json.loads(capsys.readouterr().out)
        assert doc["cluster_source"]["kind"] == "inferred" and doc["by_status"]["forced"] == 1
