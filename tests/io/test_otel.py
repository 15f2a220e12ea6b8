"""Tests for toolbias_stats.io.readers.otel (read_otel): OTLP JSON traces of GenAI semantic-convention spans.

fixtures/api_logs/otel/traces.json was recorded by the OpenTelemetry SDK (TracerProvider, in-memory exporter)
and encoded by opentelemetry-exporter-otlp-proto-common (fixtures/api_logs/make_fixtures.py).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pandas as pd
import pytest

import toolbias_stats as tbs
from toolbias_stats.exceptions import SelectionLogError
from toolbias_stats.io.readers import READERS, read_otel, read_table
from toolbias_stats.io.readers._toolcalls import query_key
from toolbias_stats.io.readers.otel import INFERENCE_OPERATIONS

FIX = Path(__file__).resolve().parent / "fixtures" / "api_logs" / "otel" / "traces.json"
META = {"model": "gpt-4o-mini"}

#: (status, chosen tool, position, raw_choice prefix) per inference span with tools, in file order
EXPECTED = [
    ("ok", "geo_b", 2, "geo_b"),                       # gen_ai.output.messages tool_call
    ("no_call", None, None, "It is in Paris."),
    ("parse_error", None, None, "api_error: RateLimitError: Rate limit reached"),   # span status ERROR
    ("unknown_tool", None, None, "geocode"),
    ("ok", "geo_a", 1, "geo_a"),                       # two tool_call parts: the first
    ("ok", "geo_c", 1, "geo_c"),                       # no output recorded: the execute_tool span that follows
    ("ok", "geo_b", 1, "geo_b"),                       # gen_ai.choice event (conventions before 1.37)
    ("forced", None, None, "tool_choice forces 'geo_a'"),
    ("ok", "wx_b", 2, "wx_b"),
    ("no_call", None, None, None),                     # no output and no execute_tool span
]


def _doc():
    return json.loads(FIX.read_text(encoding="utf-8"))


def _spans(doc):
    return [sp for rs in doc["resourceSpans"] for ss in rs["scopeSpans"] for sp in ss["spans"]]


def _attr(span, key):
    return next(a for a in span["attributes"] if a["key"] == key)


def _write(tmp_path, doc, name="t.json"):
    p = tmp_path / name
    p.write_text(json.dumps(doc), encoding="utf-8")
    return p


@pytest.fixture(scope="module")
def log():
    return READERS["otel"](FIX, catalog=None, meta=META)


class TestTraces:
    def test_one_row_per_inference_span_with_tools(self, log):
        spans = _spans(_doc())
        inference = [s for s in spans if any(a["key"] == "gen_ai.operation.name"
                                             and a["value"]["stringValue"] in INFERENCE_OPERATIONS
                                             for a in s["attributes"])]
        with_tools = [s for s in inference if any(a["key"] == "gen_ai.tool.definitions" for a in s["attributes"])]
        assert len(log) == len(with_tools) == 10                       # rows in = rows out
        diag = log.diagnostics[str(FIX)]
        assert diag["spans"] == len(spans) and diag["inference_spans_without_tools"] == 1
        assert "0.66b2" in diag["semconv"]
        d = log.data
        for i, (es, et, ep, er) in enumerate(EXPECTED):
            row = d.iloc[i]
            assert row["status"] == es, i
            assert (None if pd.isna(row["chosen_tool"]) else row["chosen_tool"]) == et
            assert (None if pd.isna(row["chosen_position"]) else int(row["chosen_position"])) == ep
            assert (pd.isna(row["raw_choice"]) if er is None else row["raw_choice"].startswith(er)), i
        # source_row is the span's index in the file
        assert d["source_row"].tolist() == [1, 3, 4, 5, 6, 7, 9, 10, 13, 14]

    def test_every_status_is_reachable(self, log):
        # off_cluster: tests/io/test_multi_cluster.py
        assert set(log.data["status"]) == set(tbs.STATUSES) - {"off_cluster"}

    def test_query_ids_hash_the_last_user_message(self, log):
        assert log.data["query_id"].iloc[0] == query_key("Where is the Eiffel Tower?")

    def test_round_trip_through_the_table_format(self, log, tmp_path):
        back = read_table(log.write(tmp_path / "log.parquet"), catalog=log.catalog)
        pd.testing.assert_frame_equal(back.data, log.data)

    def test_json_lines_of_export_requests(self, tmp_path):
        doc = _doc()
        a, b = copy.deepcopy(doc), copy.deepcopy(doc)
        for d in (a, b):
            d["resourceSpans"] = d["resourceSpans"][:1]
        p = tmp_path / "t.jsonl"
        p.write_text(json.dumps(a) + "\n" + json.dumps(b) + "\n", encoding="utf-8")
        # the same spans twice are repeats of the same requests: told apart by the attempt column
        log = read_otel(p, meta=META)
        assert len(log) == 2 * len(read_otel(_write(tmp_path, a), meta=META))
        assert log.data["attempt"].max() == 2

    def test_structured_attribute_values(self, tmp_path):
        # gen_ai.tool.definitions as an OTLP array of kvlists instead of a JSON string
        doc = _doc()
        span = _spans(doc)[0]
        at = _attr(span, "gen_ai.tool.definitions")
        defs = json.loads(at["value"]["stringValue"])
        at["value"] = {"arrayValue": {"values": [{"kvlistValue": {"values": [
            {"key": "type", "value": {"stringValue": "function"}},
            {"key": "name", "value": {"stringValue": d["name"]}}]}} for d in defs]}}
        log = read_otel(_write(tmp_path, doc), meta=META)
        assert log.data["ordering"].iloc[0] == "geo_a|geo_b|geo_c"


class TestBadInput:
    def test_malformed_tool_definitions_name_the_span(self, tmp_path):
        doc = _doc()
        _attr(_spans(doc)[3], "gen_ai.tool.definitions")["value"] = {"stringValue": '[{"name": "geo_a"'}
        with pytest.raises(SelectionLogError, match=r"t.json:4:gen_ai.tool.definitions: not valid JSON .*\(span 4 "):
            read_otel(_write(tmp_path, doc), meta=META)

    def test_truncated_json_lines_file(self, tmp_path):
        text = json.dumps(_doc())
        p = tmp_path / "t.jsonl"
        p.write_text(text + "\n" + text[: len(text) // 3] + "\n", encoding="utf-8")
        msg = r"t.jsonl:2: truncated JSON .*the spans of this line cannot be read"
        with pytest.raises(SelectionLogError, match=msg):
            read_otel(p, meta=META)

    def test_no_tool_definitions_at_all(self, tmp_path):
        doc = _doc()
        for sp in _spans(doc):
            sp["attributes"] = [a for a in sp["attributes"] if a["key"] != "gen_ai.tool.definitions"]
        with pytest.raises(SelectionLogError, match=r"gen_ai.tool.definitions: none of the 11 inference span"):
            read_otel(_write(tmp_path, doc), meta=META)

    def test_not_otlp(self, tmp_path):
        with pytest.raises(SelectionLogError, match=r"t.json:1:resourceSpans: expected an OTLP JSON object"):
            read_otel(_write(tmp_path, {"data": []}), meta=META)

    def test_tool_list_changes_within_a_cluster(self, tmp_path):
        doc = _doc()
        at = _attr(_spans(doc)[4], "gen_ai.tool.definitions")
        defs = json.loads(at["value"]["stringValue"])
        at["value"] = {"stringValue": json.dumps(defs + [{"type": "function", "name": "wx_a"}])}
        with pytest.raises(SelectionLogError, match=r"t.json:5:tools: the tool list changes within one cluster"):
            read_otel(_write(tmp_path, doc), meta=META)


def test_manifest_end_to_end(tmp_path):
    (tmp_path / "c.csv").write_text("tool_id,cluster_id\ngeo_a,geo\ngeo_b,geo\ngeo_c,geo\nwx_a,wx\nwx_b,wx\n")
    (tmp_path / "study.toml").write_text(
        f'format = "otel"\nclusters_file = "c.csv"\n[[logs]]\npath = "{FIX}"\nmodel = "gpt-4o-mini"\n',
        encoding="utf-8")
    study = tbs.read_study(tmp_path / "study.toml")
    assert study.settings["cluster_source"]["kind"] == "file"
    with pytest.warns(Warning):
        res = tbs.selection_bias(study, n_resamples=50, n_null=50, rng=0)
    (g,) = res.groups
    assert g.rows["used"] == 5 and g.rows["total"] == 10
