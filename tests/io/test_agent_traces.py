"""Issue 36: agent traces as teams export them -- MCP client sessions, LangChain / LangSmith runs, OpenTelemetry
spans with a call outside every cluster, logs that mix models.

Every fixture is made by its producer's own package (tests/io/fixtures/agent_traces/make_fixtures.py: the ``mcp``
types and a ``langchain-core`` tracer; tests/io/fixtures/api_logs/make_multi_cluster.py: the official OpenAI
OpenTelemetry instrumentation). Each test rebuilds the expected rows straight from the JSON with plain Python and
pandas, then checks rows in = rows used + rows excluded by reason and delta_API, delta_pos and the counts through
both engines (pandas in memory, DuckDB on the log written as a table).
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import toolbias_stats as tbs
from toolbias_stats.exceptions import ExcludedRowsWarning, ManifestError, SelectionLogError
from toolbias_stats.io.readers import READERS, read_langchain, read_mcp, read_openai, read_otel

FIX = Path(__file__).resolve().parent / "fixtures"
MCP = FIX / "agent_traces" / "mcp" / "sessions"
RUNS = FIX / "agent_traces" / "langchain" / "runs.jsonl"
OTEL = FIX / "api_logs" / "multi" / "otel_no_definitions.json"
CLUSTERS = {"geocoding": ["geo_a", "geo_b", "geo_c"], "weather": ["weather_a", "weather_b"]}
OWNER = {t: c for c, ts in CLUSTERS.items() for t in ts}
RANKS = {c: list(range(1, len(ts) + 1)) for c, ts in CLUSTERS.items()}
#: the clusters of the OTel fixture (made by make_multi_cluster.py)
CLUSTERS_OTEL = {"weather": ["weather_a", "weather_b", "weather_c", "weather_d", "weather_e"],
                 "geocoding": ["geo_a", "geo_b", "geo_c"]}
OWNER_OTEL = {t: c for c, ts in CLUSTERS_OTEL.items() for t in ts}


# ---------------------------------------------------------------------------------------------
# the reference: delta as a TV distance to the uniform, computed with pandas from the expected rows
def _tv(rates, k):
    return 0.5 * float(np.abs(np.asarray(rates) - 1.0 / k).sum())


def _pandas_delta(exp, column, support):
    ok = exp[exp["status"] == "ok"]
    tvs = []
    for c, part in ok.groupby("cluster"):
        rates = part[column].value_counts(normalize=True).reindex(support[c], fill_value=0.0)
        assert rates.sum() == pytest.approx(1.0)
        tvs.append(_tv(rates.to_numpy(), len(support[c])))
    return float(np.mean(tvs))


def _bias(obj, by=()):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return tbs.selection_bias(obj, by=list(by), n_resamples=0, n_null=0, position="cluster_rank")


def _engines(log, tmp_path):
    path = log.write(tmp_path / "log.csv")
    duck = tbs.count_table(path, catalog=log.catalog, engine="duckdb")
    assert duck.engine == "duckdb"
    return {"pandas": log.counts(), "duckdb": duck}


def _check_against(log, exp, tmp_path, *, group_by=None):
    """Counts, rows used / excluded, delta_API and delta_pos (cluster ranks) through both engines equal the direct
    computation on ``exp`` (columns cluster, status, tool, rank[, model])."""
    parts = [(None, exp)] if group_by is None else list(exp.groupby(group_by))
    for engine, counts in _engines(log, tmp_path).items():
        res = _bias(counts, by=[] if group_by is None else [group_by])
        assert len(res.groups) == len(parts), engine
        for g, (_key, part) in zip(res.groups, parts):
            excluded = {s: int(n) for s, n in part["status"].value_counts().items() if s != "ok"}
            assert g.rows == {"total": len(part), "used": int((part["status"] == "ok").sum()),
                              "excluded": dict(sorted(excluded.items(), key=lambda kv: -kv[1]))}, engine
            assert g.delta_api.mean_over_runs == pytest.approx(_pandas_delta(part, "tool", CLUSTERS), abs=1e-12)
            assert g.delta_pos.mean_over_runs == pytest.approx(_pandas_delta(part, "rank", RANKS), abs=1e-12)
            ok = part[part["status"] == "ok"]
            for cb in g.clusters:
                sel = ok[ok["cluster"] == cb.cluster]
                assert list(cb.counts) == [int((sel["tool"] == t).sum()) for t in cb.tools]
                assert list(cb.position_counts) == [int((sel["rank"] == r).sum()) for r in cb.positions]


# ---------------------------------------------------------------------------------------------
def _mcp_expected():
    """(session, line, cluster, status, tool, rank) of every tools/call, from the JSON-RPC messages; the cluster
    of a call outside the clusters is that of the session's other calls (None: undecidable)."""
    rows = []
    for f in sorted(MCP.glob("*.jsonl")):
        listed, pages, pending, calls = None, [], {}, []
        for n, text in enumerate(f.read_text(encoding="utf-8").splitlines(), start=1):
            m = json.loads(text)
            m = m.get("message", m)
            if m.get("method") == "tools/list":
                pending[m["id"]] = (m.get("params") or {}).get("cursor") is None
            elif m.get("method") == "tools/call":
                calls.append((n, m["params"]["name"], list(listed)))
            elif "result" in m and m["id"] in pending and "tools" in m["result"]:
                if pending.pop(m["id"]):
                    pages = []
                pages += [t["name"] for t in m["result"]["tools"]]
                if "nextCursor" not in m["result"]:
                    listed = pages
        own = {OWNER[name] for _, name, _ in calls if name in OWNER}
        for n, name, shown in calls:
            cluster = OWNER.get(name) or (own.pop() if len(own) == 1 else None)
            members = [t for t in shown if OWNER.get(t) == cluster]
            status = ("ok" if cluster is not None and OWNER.get(name) == cluster else
                      ("off_cluster" if name in shown else "unknown_tool"))
            rank = members.index(name) + 1 if status == "ok" else None
            rows.append((f.stem, n, cluster, status, name if status == "ok" else None, rank))
    return pd.DataFrame(rows, columns=["session", "line", "cluster", "status", "tool", "rank"])


class TestMcp:
    def test_rows_and_statistics_equal_the_messages(self, tmp_path):
        exp = _mcp_expected()
        with pytest.warns(ExcludedRowsWarning, match="1 of 53 attempt"):
            log = read_mcp(MCP, meta={"model": "claude-sonnet-4-5"}, clusters=CLUSTERS)
        d = log.data
        # every call is a row, the one whose cluster cannot be decided too (cluster_id missing; issue 36)
        assert list(zip(Path(p).stem for p in d["source_file"])) == list(zip(exp["session"]))
        assert list(d["source_row"]) == list(exp["line"]) and list(d["status"]) == list(exp["status"])
        assert [None if pd.isna(c) else c for c in d["cluster_id"]] == [None if pd.isna(c) else c
                                                                        for c in exp["cluster"]]
        assert list(d["chosen_rank"].astype(object).where(d["chosen_rank"].notna(), None)) == [
            None if pd.isna(r) else int(r) for r in exp["rank"]]
        # a web_search in the middle of a run: off_cluster, its raw name kept, the cluster its session's
        off = (d["status"] == "off_cluster") & d["cluster_id"].notna()
        assert off.sum() == 6 and set(d.loc[off, "raw_choice"]) == {"web_search"}
        diag = log.diagnostics[str(MCP)]
        assert diag["cluster_from_group"]["rows"] == 6
        # the session that only searched: a row without a cluster (web_search was offered: off_cluster), its raw
        # name kept, counted and named
        lone = d[d["cluster_id"].isna()]
        assert list(lone["source_row"]) == [5] and list(lone["status"]) == ["off_cluster"]
        assert list(lone["raw_choice"]) == ["web_search"] and list(lone["query_id"]) == ["session23"]
        un = diag["unassigned"]
        assert un == {**un, "rows": 1, "by_status": {"off_cluster": 1}, "names": {"web_search": 1}}
        assert "session23.jsonl:5:tools:" in un["messages"][0]
        assert diag["attempts_read"] == len(exp) == len(log) == 53
        assert diag["sessions"] == 24 and diag["tools_list_results"] == 25
        # the calls of a session are repeated attempts at one task (the session is the query)
        assert set(d["query_id"]) == {f"session{s:02d}" for s in range(24)}
        assert d.groupby("query_id")["attempt"].max().max() == 3
        # rows in (53) = rows used + rows excluded by status, the unassigned row among the off_cluster ones
        _check_against(log, exp, tmp_path)

    def test_list_changed_then_listed_again_in_another_order(self):
        with pytest.warns(ExcludedRowsWarning):
            log = read_mcp(MCP, meta={"model": "m"}, clusters=CLUSTERS)
        d = log.data[[Path(p).stem == "session06" for p in log.data["source_file"]]]
        assert d["ordering"].iloc[0] != d["ordering"].iloc[-1]
        assert d["ordering"].iloc[-1].split("|") == list(reversed(d["ordering"].iloc[0].split("|")))

    def test_one_file_and_inferred_clusters(self):
        log = read_mcp(MCP / "session00.jsonl", meta={"model": "m"})
        assert len(log) == 2 and set(log.data["status"]) == {"ok"}
        assert log.catalog.n_tools(log.data["cluster_id"].iloc[0]) == 6

    def test_bad_input_names_file_line_and_field(self, tmp_path):
        bad = tmp_path / "s.jsonl"
        bad.write_text('{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "geo_a"}}\n'
                       '{"not": "rpc"}\n{"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params"\n')
        with pytest.raises(SelectionLogError) as err:
            read_mcp(bad, meta={"model": "m"})
        msg = str(err.value)
        assert f"{bad}:1:tools/list: a tools/call before any tools/list result" in msg
        assert f"{bad}:2:jsonrpc: expected a JSON-RPC 2.0 message" in msg
        assert f"{bad}:3: truncated JSON" in msg
        with pytest.raises(SelectionLogError, match="no MCP session logs"):
            read_mcp(tmp_path / "empty_dir" if (tmp_path / "empty_dir").mkdir() is None else tmp_path,
                     meta={"model": "m"})
        with pytest.raises(SelectionLogError, match="model: expected a non-empty string"):
            read_mcp(MCP, clusters=CLUSTERS)

    def test_manifest(self, tmp_path):
        (tmp_path / "study.toml").write_text(
            'format = "mcp"\nclusters = {geocoding = ["geo_a", "geo_b", "geo_c"], weather = ["weather_a", '
            f'"weather_b"]}}\n[[logs]]\npath = "{MCP}"\nmodel = "claude-sonnet-4-5"\n', encoding="utf-8")
        with pytest.warns(ExcludedRowsWarning):
            study = tbs.read_study(tmp_path / "study.toml")
        assert len(study.log) == 53 and study.log.data["cluster_id"].isna().sum() == 1   # the unassigned call kept
        (tmp_path / "bad.toml").write_text(f'format = "mcp"\n[[logs]]\npath = "{MCP}"\n', encoding="utf-8")
        with pytest.raises(ManifestError, match="model: missing required key"):
            tbs.read_study(tmp_path / "bad.toml")


# ---------------------------------------------------------------------------------------------
def _message(obj):
    return obj["kwargs"] if obj.get("lc") == 1 else obj


def _langchain_expected():
    """(line, model, cluster, status, tool, rank) of every tool-calling / first-turn chat run, straight from the
    runs; closing text turns left out."""
    runs = [json.loads(x) for x in RUNS.read_text(encoding="utf-8").splitlines()]
    trace_cluster: dict = {}
    rows = []
    for n, r in enumerate(runs, start=1):
        if r["run_type"] != "chat_model":
            continue
        tools = [t["function"]["name"] for t in r["extra"]["invocation_params"]["tools"]]
        out = _message(r["outputs"]["generations"][0][0]["message"])
        history = [_message(m) for m in r["inputs"]["messages"][0]]
        called = [c["name"] for c in out.get("tool_calls") or []]
        if not called and any(m.get("tool_calls") for m in history):
            continue                                           # the closing text turn of the loop
        offered = {OWNER[t] for t in tools if t in OWNER}
        assert len(offered) == 1
        cluster = offered.pop()
        trace_cluster[r["trace_id"]] = cluster
        members = [t for t in tools if OWNER.get(t) == cluster]
        name = called[0] if called else None
        status = ("no_call" if name is None else "ok" if OWNER.get(name) == cluster else
                  "off_cluster" if name in tools else "unknown_tool")
        rows.append((n, r["extra"]["metadata"]["ls_model_name"], cluster, status,
                     name if status == "ok" else None, members.index(name) + 1 if status == "ok" else None))
    return pd.DataFrame(rows, columns=["line", "model", "cluster", "status", "tool", "rank"])


class TestLangChain:
    def test_runs_of_two_models_in_one_file(self, tmp_path):
        exp = _langchain_expected()
        log = read_langchain(RUNS, clusters=CLUSTERS)
        d = log.data
        assert list(d["source_row"]) == list(exp["line"])
        assert list(d["model"]) == list(exp["model"]) and set(d["model"]) == {"gpt-4o-mini", "claude-sonnet-4-5"}
        assert list(d["cluster_id"]) == list(exp["cluster"]) and list(d["status"]) == list(exp["status"])
        diag = log.diagnostics[str(RUNS)]
        # 90 runs: 30 chains, 60 chat runs = 42 attempts + 18 closing text turns
        assert diag["runs"] == 90 and diag["run_types"] == {"chain": 30, "chat_model": 60}
        assert diag["closing_text_turns"] == 60 - len(exp) == 18
        assert diag["models"] == exp["model"].value_counts().to_dict()
        assert set(d.loc[d["status"] == "off_cluster", "raw_choice"]) == {"web_search"}
        # every step of one agent loop is the same query (the loop's task)
        assert d.groupby("query_id")["cluster_id"].nunique().max() == 1
        _check_against(log, exp, tmp_path, group_by="model")

    def test_manifest_model_disagreeing_with_a_run_names_the_line(self, tmp_path):
        exp = _langchain_expected()
        with pytest.raises(SelectionLogError) as err:
            read_langchain(RUNS, clusters=CLUSTERS, meta={"model": "gpt-4o-mini"})
        first = int(exp.loc[exp["model"] != "gpt-4o-mini", "line"].iloc[0])
        assert (f"{RUNS}:{first}:model: the record's model 'claude-sonnet-4-5' is not the manifest's model "
                "'gpt-4o-mini'") in str(err.value)
        assert len(err.value.problems) == int((exp["model"] != "gpt-4o-mini").sum())
        log = read_langchain(RUNS, clusters=CLUSTERS, meta={"model": "agent"}, model_override=True)
        assert set(log.data["model"]) == {"agent"} and len(log) == len(exp)

    def test_json_list_and_dict_forms(self, tmp_path):
        runs = [json.loads(x) for x in RUNS.read_text(encoding="utf-8").splitlines()]
        (tmp_path / "runs.json").write_text(json.dumps({"runs": runs}))
        a = read_langchain(tmp_path / "runs.json", clusters=CLUSTERS)
        b = read_langchain(RUNS, clusters=CLUSTERS)
        assert list(a.data["status"]) == list(b.data["status"]) and list(a.data["source_row"]) == list(
            b.data["source_row"])

    def test_errors_and_invalid_calls(self, tmp_path):
        runs = [json.loads(x) for x in RUNS.read_text(encoding="utf-8").splitlines()]
        chat = [i for i, r in enumerate(runs) if r["run_type"] == "chat_model"]
        runs[chat[0]]["error"] = "RateLimitError('429')"
        msg = runs[chat[2]]["outputs"]["generations"][0][0]["message"]["kwargs"]
        msg["invalid_tool_calls"] = [{"name": None, "args": "{bad", "id": "x", "error": "bad json"}]
        msg["tool_calls"] = []
        (tmp_path / "r.jsonl").write_text("".join(json.dumps(r) + "\n" for r in runs))
        log = read_langchain(tmp_path / "r.jsonl", clusters=CLUSTERS)
        by_row = log.data.set_index("source_row")
        assert by_row.loc[chat[0] + 1, "status"] == "parse_error"
        assert by_row.loc[chat[0] + 1, "raw_choice"].startswith("api_error: RateLimitError")
        assert by_row.loc[chat[2] + 1, "status"] == "parse_error"
        assert "invalid_tool_calls" in by_row.loc[chat[2] + 1, "raw_choice"]
        (tmp_path / "none.jsonl").write_text(json.dumps({"run_type": "chain"}) + "\n")
        with pytest.raises(SelectionLogError, match="none of the 1 run"):
            read_langchain(tmp_path / "none.jsonl")

    def test_manifest_without_model(self, tmp_path):
        (tmp_path / "study.toml").write_text(
            'format = "langchain"\nclusters = {geocoding = ["geo_a", "geo_b", "geo_c"], weather = ["weather_a", '
            f'"weather_b"]}}\n[[logs]]\npath = "{RUNS}"\n', encoding="utf-8")
        study = tbs.read_study(tmp_path / "study.toml")
        assert set(study.log.data["model"]) == {"gpt-4o-mini", "claude-sonnet-4-5"}
        assert "langchain" in READERS and "mcp" in READERS


# ---------------------------------------------------------------------------------------------
def _otel_agent_runs(tmp_path):
    """The official instrumentation's spans (no tool definitions) grouped into agent runs of two spans per trace,
    with a web_search call in the middle of some runs and one run that only searched."""
    doc = json.loads(OTEL.read_text(encoding="utf-8"))
    spans = doc["resourceSpans"][0]["scopeSpans"][0]["spans"]
    for i in range(1, len(spans), 2):
        spans[i]["traceId"] = spans[i - 1]["traceId"]           # two inference spans per agent run
    searched = [1, 9, 21, 44, 45]                                # 44 and 45 are one run: nothing decides it
    for i in searched:
        for a in spans[i]["attributes"]:
            if a["key"] == "gen_ai.output.messages":
                out = json.loads(a["value"]["stringValue"])
                out[0]["parts"] = [{"type": "tool_call", "id": f"s{i}", "name": "web_search", "arguments": {}}]
                a["value"]["stringValue"] = json.dumps(out)
    path = tmp_path / "traces.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    rows = []
    calls = []
    for n, sp in enumerate(spans, start=1):
        attrs = {a["key"]: a["value"] for a in sp["attributes"]}
        out = json.loads(attrs["gen_ai.output.messages"]["stringValue"])
        parts = [p for p in out[0]["parts"] if p["type"] == "tool_call"]
        calls.append((n, sp["traceId"], parts[0]["name"] if parts else None, attrs["gen_ai.request.model"]))
    by_trace: dict = {}
    for _n, tr, name, _m in calls:
        if name in OWNER_OTEL:
            by_trace.setdefault(tr, set()).add(OWNER_OTEL[name])
    for n, tr, name, model in calls:
        if name is None:
            continue                                           # a text answer without a cluster: no attempt
        found = by_trace.get(tr, set())
        cluster = OWNER_OTEL.get(name) or (next(iter(found)) if len(found) == 1 else None)
        status = "ok" if name in OWNER_OTEL else "unknown_tool"
        rows.append((n, model, cluster, status, name if status == "ok" else None, None))
    return path, pd.DataFrame(rows, columns=["line", "model", "cluster", "status", "tool", "rank"])


class TestOtelCallOutsideTheClusters:
    def test_web_search_in_the_middle_of_a_run(self, tmp_path):
        path, exp = _otel_agent_runs(tmp_path)
        with pytest.warns(ExcludedRowsWarning, match="2 of 48 attempt"):
            log = read_otel(path, clusters=CLUSTERS_OTEL)
        kept = exp
        d = log.data
        assert list(d["source_row"]) == list(kept["line"]) and list(d["status"]) == list(kept["status"])
        # the run that only searched: two rows without a cluster (issue 36), unknown_tool, the raw name kept
        assert [None if pd.isna(c) else c for c in d["cluster_id"]] == [None if pd.isna(c) else c
                                                                        for c in kept["cluster"]]
        assert list(d.loc[d["cluster_id"].isna(), "source_row"]) == [45, 46]
        assert set(d["model"]) == {"gpt-4o-mini"}             # each span's own gen_ai.request.model
        assert set(d.loc[d["status"] == "unknown_tool", "raw_choice"]) == {"web_search"}
        diag = log.diagnostics[str(path)]
        assert diag["unassigned"]["rows"] == 2 and diag["unassigned"]["source_rows"] == [45, 46]
        assert diag["unassigned"]["by_status"] == {"unknown_tool": 2}
        assert diag["attempts_read"] == len(exp) == len(d) == 48
        for engine, counts in _engines(log, tmp_path).items():
            g = _bias(counts).groups[0]
            excluded = {s: int(n) for s, n in kept["status"].value_counts().items() if s != "ok"}
            # rows in 48 = used 43 + excluded unknown_tool 5 (three searches placed by their run, two not)
            assert g.rows == {"total": 48, "used": int((kept["status"] == "ok").sum()),
                              "excluded": excluded} == {"total": 48, "used": 43, "excluded": {"unknown_tool": 5}}, \
                engine
            assert g.delta_api.mean_over_runs == pytest.approx(_pandas_delta(kept, "tool", CLUSTERS_OTEL),
                                                               abs=1e-12)
            assert g.delta_pos is None                          # the order shown is unknown without definitions

    def test_nothing_assignable_is_refused(self, tmp_path):
        doc = json.loads(OTEL.read_text(encoding="utf-8"))
        for sp in doc["resourceSpans"][0]["scopeSpans"][0]["spans"]:
            for a in sp["attributes"]:
                if a["key"] == "gen_ai.output.messages":
                    out = json.loads(a["value"]["stringValue"])
                    out[0]["parts"] = [{"type": "tool_call", "id": "x", "name": "web_search", "arguments": {}}]
                    a["value"]["stringValue"] = json.dumps(out)
        path = tmp_path / "t.json"
        path.write_text(json.dumps(doc))
        with pytest.raises(SelectionLogError, match=r"none of the 50 attempt.s. could be assigned to a cluster"):
            read_otel(path, clusters=CLUSTERS_OTEL)




# ---------------------------------------------------------------------------------------------
class TestMixedModels:
    def test_openai_pairs_without_manifest_model(self, tmp_path):
        src = FIX / "api_logs" / "multi" / "openai_pairs.jsonl"
        lines = src.read_text(encoding="utf-8").splitlines()
        recs = [json.loads(x) for x in lines]
        for i, r in enumerate(recs):
            if i % 3 == 0:
                r["request"]["model"] = "gpt-4.1"
            if i % 5 == 0:                                     # no request model: the response's
                del r["request"]["model"]
        path = tmp_path / "mixed.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for r in recs))
        log = read_openai(path, clusters=CLUSTERS_OTEL)
        want = [r["request"].get("model") or r["response"]["model"] for r in recs]
        assert list(log.data["model"]) == want
        assert log.diagnostics[str(path)]["models"] == pd.Series(want).value_counts().to_dict()
        with pytest.raises(SelectionLogError) as err:
            read_openai(path, clusters=CLUSTERS_OTEL, meta={"model": "gpt-4o-mini"})
        assert f"{path}:1:model: the record's model 'gpt-4o-mini-2024-07-18' is not" not in str(err.value)
        assert f"{path}:4:model: the record's model 'gpt-4.1' is not the manifest's model 'gpt-4o-mini'" in str(
            err.value)
        with pytest.raises(SelectionLogError, match=r"model_override = true. needs the manifest"):
            read_openai(path, clusters=CLUSTERS_OTEL, model_override=True)


# ---------------------------------------------------------------------------------------------
# multi-turn conversations (openai / anthropic): records built from the SDKs' own response types, appended to the
# conversation the way an agent loop does (``messages.append(message.model_dump(exclude_none=True))``)
def _conversations(provider: str, n: int = 30, seed: int = 36):
    import random

    rng = random.Random(seed)
    recs, truth = [], []
    for q in range(n):
        members = CLUSTERS["geocoding"] if q % 2 == 0 else CLUSTERS["weather"]
        k = q % len(members)
        shown = members[k:] + members[:k] + ["web_search"]
        cluster = "geocoding" if q % 2 == 0 else "weather"
        plan = [rng.choice(shown[:-1])] if q % 7 else [None]           # a text first turn: a no_call attempt
        if plan[0] is not None and q % 4 == 1:
            plan.append("web_search")                                  # a search in the middle of the loop
        if plan[0] is not None and q % 5 == 2:
            plan.append(rng.choice(shown[:-1]))
        messages: list = [{"role": "user", "content": f"task {q}"}]
        for i, name in enumerate(plan + ([] if plan[0] is None else [None])):
            messages.append(_assistant_turn(provider, name, f"c{q}_{i}"))
            if name is not None:
                messages.append(_tool_result(provider, f"c{q}_{i}"))
        if provider == "openai":
            tools = [{"type": "function", "function": {"name": t, "parameters": {"type": "object"}}} for t in shown]
        else:
            tools = [{"name": t, "input_schema": {"type": "object"}} for t in shown]
        recs.append({"model": "gpt-4o-mini" if provider == "openai" else "claude-sonnet-4-5", "tools": tools,
                     "messages": messages})
        for name in plan:
            status = "no_call" if name is None else "ok" if name in OWNER else "off_cluster"
            truth.append((q + 1, cluster, status, name if status == "ok" else None,
                          [t for t in shown if t in OWNER].index(name) + 1 if status == "ok" else None))
    return recs, pd.DataFrame(truth, columns=["line", "cluster", "status", "tool", "rank"])


def _assistant_turn(provider, name, call_id):
    if provider == "openai":
        from openai.types.chat import ChatCompletion

        msg = {"role": "assistant", "content": "Done." if name is None else None}
        if name is not None:
            msg["tool_calls"] = [{"id": call_id, "type": "function", "function": {"name": name, "arguments": "{}"}}]
        done = ChatCompletion.model_validate({"id": "x", "object": "chat.completion", "created": 0,
                                              "model": "gpt-4o-mini", "choices": [
                                                  {"index": 0, "finish_reason": "stop", "message": msg}]})
        return done.choices[0].message.model_dump(exclude_none=True)
    from anthropic.types import Message

    content = ([{"type": "text", "text": "Done."}] if name is None else
               [{"type": "tool_use", "id": call_id, "name": name, "input": {}}])
    done = Message.model_validate({"id": "m", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
                                   "content": content, "stop_reason": "end_turn", "stop_sequence": None,
                                   "usage": {"input_tokens": 1, "output_tokens": 1}})
    return {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in done.content]}


def _tool_result(provider, call_id):
    if provider == "openai":
        return {"role": "tool", "tool_call_id": call_id, "content": "ok"}
    return {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call_id, "content": "ok"}]}


class TestMultiTurn:
    @pytest.mark.parametrize("provider", ["openai", "anthropic"])
    def test_each_tool_calling_turn_is_an_attempt(self, provider, tmp_path):
        from toolbias_stats.io.readers import read_anthropic

        recs, exp = _conversations(provider)
        path = tmp_path / "conversations.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for r in recs), encoding="utf-8")
        reader = read_openai if provider == "openai" else read_anthropic
        log = reader(path, clusters=CLUSTERS)
        d = log.data
        assert list(d["source_row"]) == list(exp["line"]) and list(d["status"]) == list(exp["status"])
        assert list(d["cluster_id"]) == list(exp["cluster"])
        diag = log.diagnostics[str(path)]
        closing = sum(1 for r in recs if any(m.get("tool_calls") or any(
            isinstance(b, dict) and b.get("type") == "tool_use" for b in (m.get("content") or [])
            if isinstance(m.get("content"), list)) for m in r["messages"] if m["role"] == "assistant"))
        assert diag["notes"]["closing_text_turn"] == closing          # closing text turns: counted, no attempts
        assert diag["attempts"] == len(exp) == len(d)
        # the turns of one conversation are one query: repeated attempts numbered by `attempt`
        assert d.groupby("source_row")["query_id"].nunique().max() == 1
        assert d["attempt"].max() >= 2
        _check_against(log, exp, tmp_path)

    def test_a_turn_with_its_own_toolset(self, tmp_path):
        recs, _ = _conversations("openai", n=4)
        rec = recs[1]
        turn = next(m for m in rec["messages"] if m["role"] == "assistant" and m.get("tool_calls"))
        turn["tools"] = [t for t in rec["tools"] if t["function"]["name"] != "web_search"]
        path = tmp_path / "c.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for r in recs), encoding="utf-8")
        log = read_openai(path, clusters=CLUSTERS, subsets=True)
        row = log.data[log.data["source_row"] == 2].iloc[0]
        assert "web_search" not in row["ordering"].split("|")
