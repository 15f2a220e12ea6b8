"""Issue 20: agent requests that offer more than one cluster's tools (OpenAI, Anthropic, OpenTelemetry).

The fixtures under fixtures/api_logs/multi/ were written by make_multi_cluster.py with the producers' own types: the
OpenAI and Anthropic SDK models (requests offering the whole toolset: five weather tools, three geocoders,
``search`` and ``send_email``) and the spans the official OpenAI instrumentation (opentelemetry-instrumentation-
openai-v2 2.4b0) records, which carry no tool definitions.

Every expected number below is recomputed here from the raw JSON with plain json + pandas (not through the reader):
the cluster of each request, the status, the chosen tool, its rank among the cluster's tools as shown and its list
position, then delta_API and delta_pos (both position definitions) as TV distances to the uniform.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import toolbias_stats as tbs
from toolbias_stats.exceptions import ExcludedRowsWarning, SelectionLogError
from toolbias_stats.io.readers import read_anthropic, read_openai, read_otel

HERE = Path(__file__).resolve().parent / "fixtures" / "api_logs" / "multi"
OPENAI = HERE / "openai_pairs.jsonl"
ANTHROPIC = HERE / "anthropic_pairs.jsonl"
OTEL = HERE / "otel_no_definitions.json"
CLUSTERS = {"weather": ["weather_a", "weather_b", "weather_c", "weather_d", "weather_e"],
            "geocoding": ["geo_a", "geo_b", "geo_c"]}
OWNER = {t: c for c, ts in CLUSTERS.items() for t in ts}
META = {"model": "agent"}


# ---------------------------------------------------------------------------------------------
# The reference: straight from the JSON
def _expected_rows(records):
    """(cluster, status, tool, list position, rank) per record: records are (tools offered, cluster_id or None,
    called name or None)."""
    out = []
    for tools, cid, name in records:
        offered = {OWNER[t] for t in tools if t in OWNER}
        cluster = cid if cid is not None else (OWNER.get(name) if len(offered) > 1 else offered.pop())
        members = [t for t in tools if OWNER.get(t) == cluster]
        if name is None:
            out.append((cluster, "no_call", None, None, None))
        elif name not in tools:
            out.append((cluster, "unknown_tool", None, None, None))
        elif OWNER.get(name) != cluster:
            out.append((cluster, "off_cluster", None, None, None))
        else:
            out.append((cluster, "ok", name, tools.index(name) + 1, members.index(name) + 1))
    return pd.DataFrame(out, columns=["cluster", "status", "tool", "position", "rank"])


def _openai_records():
    recs = []
    for line in OPENAI.read_text(encoding="utf-8").splitlines():
        r = json.loads(line)
        tools = [t["function"]["name"] for t in r["request"]["tools"]]
        calls = r["response"]["choices"][0]["message"].get("tool_calls") or []
        chosen = calls[0]["function"]["name"] if calls else None
        recs.append((tools, r["request"]["metadata"].get("cluster_id"), chosen))
    return recs


def _anthropic_records():
    recs = []
    for line in ANTHROPIC.read_text(encoding="utf-8").splitlines():
        r = json.loads(line)
        tools = [t["name"] for t in r["request"]["tools"]]
        calls = [b for b in r["response"]["content"] if b["type"] == "tool_use"]
        recs.append((tools, r.get("cluster_id"), calls[0]["name"] if calls else None))
    return recs


def _otel_calls():
    """The tool called by each inference span (None: a text answer)."""
    doc = json.loads(OTEL.read_text(encoding="utf-8"))
    names = []
    for sp in doc["resourceSpans"][0]["scopeSpans"][0]["spans"]:
        attrs = {a["key"]: a["value"] for a in sp["attributes"]}
        assert "gen_ai.tool.definitions" not in attrs          # the instrumentation does not record them
        out = json.loads(attrs["gen_ai.output.messages"]["stringValue"])
        calls = [p for p in out[0]["parts"] if p["type"] == "tool_call"]
        names.append(calls[0]["name"] if calls else None)
    return names


def _tv(rates, k):
    return 0.5 * float(np.abs(np.asarray(rates) - 1.0 / k).sum())


def _pandas_delta(exp, column, support):
    """Mean over clusters of TV(observed distribution of ``column`` over ``support[cluster]``, uniform)."""
    ok = exp[exp["status"] == "ok"]
    tvs = []
    for c, part in ok.groupby("cluster"):
        sup = support[c]
        rates = part[column].value_counts(normalize=True).reindex(sup, fill_value=0.0)
        assert rates.sum() == pytest.approx(1.0)     # every choice falls on the support
        tvs.append(_tv(rates.to_numpy(), len(sup)))
    return float(np.mean(tvs))


def _bias(obj, position):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return tbs.selection_bias(obj, by=[], n_resamples=0, n_null=0, position=position)


def _engines(log, tmp_path):
    """The log counted by pandas (in memory) and by DuckDB (the log written as a table file)."""
    path = log.write(tmp_path / "log.csv")
    duck = tbs.count_table(path, catalog=log.catalog, engine="duckdb")
    assert duck.engine == "duckdb"
    return {"pandas": log.counts(), "duckdb": duck}


@pytest.fixture(scope="module")
def openai_log():
    return read_openai(OPENAI, meta=META, model_override=True, clusters=CLUSTERS)


@pytest.fixture(scope="module")
def anthropic_log():
    return read_anthropic(ANTHROPIC, meta=META, model_override=True, clusters=CLUSTERS)


# ---------------------------------------------------------------------------------------------
class TestRequestLogs:
    @pytest.mark.parametrize("which", ["openai", "anthropic"])
    def test_rows_match_the_json(self, which, openai_log, anthropic_log):
        log = openai_log if which == "openai" else anthropic_log
        recs = _openai_records() if which == "openai" else _anthropic_records()
        exp = _expected_rows(recs)
        d = log.data.sort_values("source_row").reset_index(drop=True)
        # rows in = used + excluded by reason
        assert len(d) == len(recs) == 50
        by_status = d["status"].value_counts().to_dict()
        assert sum(by_status.values()) == len(recs)
        assert by_status == exp["status"].value_counts().to_dict()
        assert by_status["off_cluster"] > 0 and by_status["ok"] > 0 and by_status["unknown_tool"] > 0
        assert list(d["cluster_id"]) == list(exp["cluster"])
        assert list(d["status"]) == list(exp["status"])
        ok = d["status"] == "ok"
        assert list(d.loc[ok, "chosen_tool"]) == list(exp.loc[ok, "tool"])
        assert list(d.loc[ok, "chosen_position"]) == list(exp.loc[ok, "position"])
        assert list(d.loc[ok, "chosen_rank"]) == list(exp.loc[ok, "rank"])
        # the whole list is kept, in order; n_candidates = the cluster's tools shown
        assert list(d["ordering"].str.split("|")) == [r[0] for r in recs]
        assert set(d["ordering"].str.count(r"\|") + 1) == {10}
        assert list(d["n_candidates"]) == [len(CLUSTERS[c]) for c in exp["cluster"]]
        # off_cluster keeps the raw name
        off = d["status"] == "off_cluster"
        assert set(d.loc[off, "raw_choice"]) <= {"send_email", "search"} | set(OWNER)
        assert d.loc[off, "chosen_tool"].isna().all()
        diag = log.diagnostics[str(OPENAI if which == "openai" else ANTHROPIC)]
        assert sum(diag["off_cluster"].values()) == by_status["off_cluster"]
        how = diag["cluster_of_multi_cluster_requests"]
        n_cid = sum(r[1] is not None for r in recs)
        assert (how["from_cluster_id"], how["from_chosen_tool"]) == (n_cid, len(recs) - n_cid)
        assert "cluster of the tool chosen" in how["note"]

    @pytest.mark.parametrize("engine", ["pandas", "duckdb"])
    def test_openai_fixed_layout_both_position_definitions(self, engine, openai_log, tmp_path):
        exp = _expected_rows(_openai_records())
        counts = _engines(openai_log, tmp_path)[engine]
        assert counts.status_totals() == {s: int((exp["status"] == s).sum()) for s in tbs.STATUSES}
        tools = {c: CLUSTERS[c] for c in CLUSTERS}
        ranks = {c: list(range(1, len(CLUSTERS[c]) + 1)) for c in CLUSTERS}
        slots = {"weather": [2, 3, 4, 5, 6], "geocoding": [8, 9, 10]}    # the agent's fixed layout
        d_api = _pandas_delta(exp, "tool", tools)
        d_rank = _pandas_delta(exp, "rank", ranks)
        d_list = _pandas_delta(exp, "position", slots)
        rank_res, list_res = _bias(counts, "cluster_rank"), _bias(counts, "list")
        for res in (rank_res, list_res):
            g = res.groups[0]
            assert g.delta_api.mean_over_runs == pytest.approx(d_api, abs=1e-12)
            assert g.rows["used"] + sum(g.rows["excluded"].values()) == g.rows["total"] == 50
            assert g.rows["excluded"] == {s: n for s, n in exp["status"].value_counts().items() if s != "ok"}
        assert rank_res.groups[0].delta_pos.mean_over_runs == pytest.approx(d_rank, abs=1e-12)
        assert list_res.groups[0].delta_pos.mean_over_runs == pytest.approx(d_list, abs=1e-12)
        # counts per tool and per position (rank, and list position) equal the direct counts
        ok = exp[exp["status"] == "ok"]
        for cb_rank, cb_list in zip(rank_res.groups[0].clusters, list_res.groups[0].clusters):
            part = ok[ok["cluster"] == cb_rank.cluster]
            assert list(cb_rank.counts) == [int((part["tool"] == t).sum()) for t in cb_rank.tools]
            assert cb_rank.positions == ranks[cb_rank.cluster]
            assert list(cb_rank.position_counts) == [int((part["rank"] == r).sum()) for r in cb_rank.positions]
            assert cb_list.positions == slots[cb_list.cluster]
            assert list(cb_list.position_counts) == [int((part["position"] == p).sum()) for p in cb_list.positions]
        # the choice is stated in every output
        for res, pos in ((rank_res, "cluster_rank"), (list_res, "list")):
            assert set(res.to_frame()["position"]) == {pos}
            assert res.to_dict()["position"] == pos
            assert set(res.clusters_frame()["position"]) == {pos}
            json.dumps(res.to_dict())

    @pytest.mark.parametrize("engine", ["pandas", "duckdb"])
    def test_anthropic_shuffled_lists(self, engine, anthropic_log, tmp_path):
        exp = _expected_rows(_anthropic_records())
        counts = _engines(anthropic_log, tmp_path)[engine]
        ranks = {c: list(range(1, len(CLUSTERS[c]) + 1)) for c in CLUSTERS}
        rank_res = _bias(counts, "cluster_rank")
        g = rank_res.groups[0]
        assert g.delta_api.mean_over_runs == pytest.approx(_pandas_delta(exp, "tool", CLUSTERS), abs=1e-12)
        assert g.delta_pos.mean_over_runs == pytest.approx(_pandas_delta(exp, "rank", ranks), abs=1e-12)
        ok = exp[exp["status"] == "ok"]
        for cb in g.clusters:
            part = ok[ok["cluster"] == cb.cluster]
            assert list(cb.position_counts) == [int((part["rank"] == r).sum()) for r in cb.positions]
        # the list is shuffled: the cluster's tools move between list positions, so no uniform reference exists
        # over list positions; delta_pos is null with the reason in every output
        list_res = _bias(counts, "list")
        g = list_res.groups[0]
        assert g.delta_pos is None and g.delta_model is None
        assert g.delta_api.mean_over_runs == pytest.approx(rank_res.groups[0].delta_api.mean_over_runs)
        assert all("different list positions" in c.position_note for c in g.clusters)
        frame = list_res.to_frame()
        assert list(frame["metric"]) == ["delta_api"] and "different list positions" in frame["position_note"][0]
        assert "different list positions" in list_res.to_dict()["groups"][0]["position_note"]
        from toolbias_stats._text import format_bias_table

        text = format_bias_table(list_res)
        assert "position in the whole list offered" in text and "different list positions" in text

    def test_undecidable_request_names_file_row_and_field(self, tmp_path):
        lines = OPENAI.read_text(encoding="utf-8").splitlines()
        rec = json.loads(lines[2])
        del rec["request"]["metadata"]["cluster_id"]
        rec["response"]["choices"][0]["message"]["tool_calls"] = None
        rec["response"]["choices"][0]["message"]["content"] = "No idea."
        lines[2] = json.dumps(rec)
        path = tmp_path / "p.jsonl"
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        # issue 36: kept out of the rows and counted, never a refusal of the study
        with pytest.warns(ExcludedRowsWarning):
            log = read_openai(path, meta=META, model_override=True, clusters=CLUSTERS)
        un = log.diagnostics[str(path)]["unassigned"]
        assert un["rows"] == 1 and un["by_status"] == {"no_call": 1}
        row = log.data.set_index("source_row").loc[3]          # kept, without a cluster (issue 36)
        assert pd.isna(row["cluster_id"]) and row["status"] == "no_call" and row["raw_choice"] == "No idea."
        assert len(log) == log.diagnostics[str(path)]["attempts_read"] == 50
        assert (f"{path}:3:tools: the tools offered span several clusters ['geocoding', 'weather'] and the query's "
                "cluster cannot be decided (line 3: no cluster_id in the record, and no tool was called)"
                ) in un["messages"][0]

    def test_cluster_id_must_be_offered(self, tmp_path):
        lines = ANTHROPIC.read_text(encoding="utf-8").splitlines()
        rec = json.loads(lines[0])
        rec["cluster_id"] = "maps"
        lines[0] = json.dumps(rec)
        path = tmp_path / "a.jsonl"
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        with pytest.raises(SelectionLogError, match=r"a.jsonl:1:cluster_id: the record's cluster_id 'maps' is not "
                                                    r"among the clusters whose tools it offers"):
            read_anthropic(path, meta=META, model_override=True, clusters=CLUSTERS)

    def test_inferred_clusters_are_the_whole_toolset(self, openai_log):
        # without a declaration every exact set of tools offered is one cluster: here the agent's 10 tools
        log = read_openai(OPENAI, meta=META, model_override=True)
        from toolbias_stats.io.readers._clusters import inferred_cluster_id

        assert list(log.catalog.clusters) == [inferred_cluster_id(list(OWNER) + ["search", "send_email"])]
        assert len(log.catalog) == 10 and len(log) == 50
        assert "off_cluster" not in set(log.data["status"])


# ---------------------------------------------------------------------------------------------
class TestOtelWithoutDefinitions:
    def test_rows_and_delta_api(self, tmp_path):
        names = _otel_calls()
        log = read_otel(OTEL, meta=META, model_override=True, clusters=CLUSTERS)
        d = log.data.sort_values("source_row")
        # 50 inference spans: 48 tool calls (rows) + 2 text answers that are not attempts (no cluster, no tools)
        assert len(names) == 50 and len(d) == sum(n is not None for n in names) == 48
        diag = log.diagnostics[str(OTEL)]
        assert diag["spans"] == 50 and diag["inference_spans_without_tools"] == 2
        assert diag["inference_spans_without_definitions_read"] == 48
        assert d["ordering"].isna().all() and d["chosen_position"].isna().all() and d["chosen_rank"].isna().all()
        called = [n for n in names if n is not None]
        assert list(d["chosen_tool"]) == called and list(d["cluster_id"]) == [OWNER[n] for n in called]
        assert "gen_ai.tool.definitions" in diag["order_unknown"]["reason"]
        exp = pd.DataFrame({"cluster": [OWNER[n] for n in called], "status": "ok", "tool": called})
        d_api = _pandas_delta(exp, "tool", CLUSTERS)
        for counts in _engines(log, tmp_path).values():
            for position in ("cluster_rank", "list"):
                res = _bias(counts, position)
                g = res.groups[0]
                assert g.rows == {"total": 48, "used": 48, "excluded": {}}
                assert g.delta_api.mean_over_runs == pytest.approx(d_api, abs=1e-12)
                assert g.delta_pos is None and g.delta_model is None
                assert all(c.position_note for c in g.clusters)
                assert res.to_frame()["position_note"].notna().all()
                assert res.to_dict()["groups"][0]["position_note"]
                ok = exp
                for cb in g.clusters:
                    part = ok[ok["cluster"] == cb.cluster]
                    assert list(cb.counts) == [int((part["tool"] == t).sum()) for t in cb.tools]
        # through the pandas engine the reader's reason is given
        res = _bias(log, "cluster_rank")
        assert "no gen_ai.tool.definitions" in res.groups[0].clusters[0].position_note

    def test_without_declaration_is_an_error(self):
        with pytest.raises(SelectionLogError) as err:
            read_otel(OTEL, meta=META, model_override=True)
        msg = str(err.value)
        assert f"{OTEL}:gen_ai.tool.definitions: none of the 50 inference span(s)" in msg
        assert "declare the clusters in the manifest" in msg

    def test_call_outside_the_clusters_is_kept_out_and_counted(self, tmp_path):
        doc = json.loads(OTEL.read_text(encoding="utf-8"))
        sp = doc["resourceSpans"][0]["scopeSpans"][0]["spans"][3]
        for a in sp["attributes"]:
            if a["key"] == "gen_ai.output.messages":
                out = json.loads(a["value"]["stringValue"])
                out[0]["parts"] = [{"type": "tool_call", "name": "send_email", "id": "c", "arguments": {}}]
                a["value"]["stringValue"] = json.dumps(out)
        path = tmp_path / "t.json"
        path.write_text(json.dumps(doc), encoding="utf-8")
        # issue 36: the span (its own trace: nothing decides its cluster) is kept as a row without a cluster and counted
        with pytest.warns(ExcludedRowsWarning):
            log = read_otel(path, meta=META, model_override=True, clusters=CLUSTERS)
        un = log.diagnostics[str(path)]["unassigned"]
        assert un["rows"] == 1 and un["by_status"] == {"unknown_tool": 1} and un["names"] == {"send_email": 1}
        assert (f"{path}:4:gen_ai.tool.definitions: no tool definitions recorded and the cluster cannot be decided "
                f"(span 4 ('chat gpt-4o-mini', spanId {sp['spanId']}): the call 'send_email' is not a declared tool"
                ) in un["messages"][0]
        # kept as a row without a cluster (issue 36): unknown_tool, the raw name kept, excluded by its status
        row = log.data.set_index("source_row").loc[4]
        assert len(log) == 48 and pd.isna(row["cluster_id"]) and row["status"] == "unknown_tool"
        assert row["raw_choice"] == "send_email" and pd.isna(row["chosen_tool"])

    def test_cluster_id_attribute_keeps_text_answers(self, tmp_path):
        doc = json.loads(OTEL.read_text(encoding="utf-8"))
        spans = doc["resourceSpans"][0]["scopeSpans"][0]["spans"]
        for sp in spans:
            sp["attributes"].append({"key": "cluster_id", "value": {"stringValue": "weather"}})
        path = tmp_path / "t.json"
        path.write_text(json.dumps(doc), encoding="utf-8")
        log = read_otel(path, meta=META, model_override=True, clusters=CLUSTERS)
        st = log.data["status"].value_counts().to_dict()
        # every span is now an attempt of cluster weather: text answers are no_call, geocoder calls off_cluster
        assert sum(st.values()) == 50 and st["no_call"] == 2
        assert st["off_cluster"] == sum(OWNER.get(n) == "geocoding" for n in _otel_calls())


# ---------------------------------------------------------------------------------------------
class TestStudyAndCli:
    MANIFEST = """name = "agent toolset"
[clusters]
weather = ["weather_a", "weather_b", "weather_c", "weather_d", "weather_e"]
geocoding = ["geo_a", "geo_b", "geo_c"]
[[logs]]
path = "{path}"
format = "openai"
model = "gpt-4o-mini"
"""

    def test_manifest_and_cli_state_the_position(self, tmp_path, capsys):
        from toolbias_stats.cli._commands import main

        manifest = tmp_path / "study.toml"
        manifest.write_text(self.MANIFEST.format(path=OPENAI.as_posix()), encoding="utf-8")
        study = tbs.read_study(manifest)
        assert study.log.data["status"].value_counts().to_dict() == \
            _expected_rows(_openai_records())["status"].value_counts().to_dict()
        for position in ("cluster_rank", "list"):
            assert main(["bias", str(manifest), "--bootstrap", "0", "--null", "0", "--json",
                         "--position", position]) == 0
            out = json.loads(capsys.readouterr().out)
            assert out["position"] == position
            assert out["groups"][0]["rows"]["excluded"]["off_cluster"] == 6
            assert main(["bias", str(manifest), "--bootstrap", "0", "--null", "0", "--position", position]) == 0
            assert f"(position='{position}')" in capsys.readouterr().out
        assert main(["validate", str(manifest)]) == 0
        text = capsys.readouterr().out
        assert "off_cluster" in text and "calls to offered tools outside the query's cluster" in text

    def test_bayes_design_sees_the_cluster_tools(self, openai_log):
        from toolbias_stats.models.bayes._design import _design

        D = _design(openai_log.counts(), ["model"], "exclude")
        exp = _expected_rows(_openai_records())
        assert D.rows["used"] == int((exp["status"] == "ok").sum())
        assert D.rows["used"] + sum(D.rows["excluded"].values()) == D.rows["total"] == 50
        # the orderings the model sees are the cluster's tools as shown (ranks), not the whole list
        assert all(set(o.split("|")) <= set(OWNER) and len({OWNER[t] for t in o.split("|")}) == 1
                   for o in D.orderings)


class TestTableFiles:
    """A SelectionLog written with whole lists reads back as a table; bad orderings give one message per engine."""

    @pytest.mark.parametrize("engine", ["pandas", "duckdb"])
    def test_bad_orderings_same_message(self, engine, openai_log, tmp_path):
        path = tmp_path / "bad.csv"
        path.write_text(
            "model,cluster_id,query_id,ordering,status,chosen_tool\n"
            "m,weather,q1,search|weather_a|weather_b|weather_c|weather_d|weather_e,ok,weather_b\n"
            "m,weather,q2,search|send_email|geo_a,no_call,\n"
            "m,weather,q3,weather_a|weather_a|weather_b,no_call,\n", encoding="utf-8")
        with pytest.raises(SelectionLogError) as err:
            tbs.count_table(path, catalog=openai_log.catalog, engine=engine)
        msg = str(err.value)
        assert f"{path}:2:ordering: ordering names no tool of cluster 'weather': 'search|send_email|geo_a'" in msg
        assert f"{path}:3:ordering: ordering repeats a tool: 'weather_a|weather_a|weather_b'" in msg

    def test_table_round_trip(self, openai_log, tmp_path):
        from toolbias_stats.io.readers import read_table

        path = openai_log.write(tmp_path / "log.csv")
        back = read_table(path, catalog=openai_log.catalog)
        cols = ["cluster_id", "ordering", "n_candidates", "chosen_tool", "chosen_position", "chosen_rank", "status"]
        pd.testing.assert_frame_equal(back.data[cols], openai_log.data[cols])
