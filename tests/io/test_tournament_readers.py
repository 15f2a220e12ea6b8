"""Issue 36: a tournament read through the API, transcript and Inspect readers.

Ten description variants of one tool; every pair of variants is a cluster of its own (45 clusters), so every variant
id belongs to nine clusters. Each pair is shown in both orders to a few queries, and the logs are written the way
each producer writes them: OpenAI ``{request, response}`` records with the SDK's ``ChatCompletion``, Anthropic
Message Batches (requests checked against the SDK's ``batch_create_params.Request``, results its
``MessageBatchIndividualResponse``), tool-call transcripts (JSONL of completions beside the tools shown) and an
Inspect eval run with its mock model. The cluster of a request is decided by the pair of tools it lists; a plain
``tool -> cluster`` map put every request of a variant into the last of its nine clusters.

Every expected number is recomputed from the scenario with plain pandas: rows in = rows used + rows excluded by
status, per-cluster choice and position counts, delta_API and delta_pos (means over clusters), through both engines.
"""

from __future__ import annotations

import itertools
import json
import warnings

import numpy as np
import pandas as pd
import pytest

import toolbias_stats as tbs
from toolbias_stats.exceptions import SelectionLogError
from toolbias_stats.io._catalog import ToolCatalog
from toolbias_stats.io.readers import read_anthropic, read_openai, read_transcripts

VARIANTS = [f"variant_{i}" for i in range(1, 11)]
QUERIES = ("Find the weather in Oslo", "Geocode 10 Downing Street")
PARAMS = {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}


def _cluster(a, b):
    return f"{VARIANTS[a]}~{VARIANTS[b]}"


def _catalog() -> ToolCatalog:
    recs = []
    for a, b in itertools.combinations(range(10), 2):
        recs += [{"cluster_id": _cluster(a, b), "tool_id": VARIANTS[a], "api_index": 1},
                 {"cluster_id": _cluster(a, b), "tool_id": VARIANTS[b], "api_index": 2}]
    return ToolCatalog.from_records(recs, source="<tournament>")


def _scenario():
    """One attempt per (pair, order, query): what is shown and what the model does (deterministic: the higher
    variant wins unless the gap is small, then the first shown; every 7th attempt answers in text)."""
    rows = []
    for n, ((a, b), order, q) in enumerate(itertools.product(itertools.combinations(range(10), 2),
                                                            ("ab", "ba"), range(len(QUERIES)))):
        shown = [a, b] if order == "ab" else [b, a]
        pick = max(shown) if abs(a - b) > 3 else shown[0]
        text = n % 7 == 3
        rows.append(dict(n=n, cluster=_cluster(a, b), query=f"q{q}", shown=[VARIANTS[i] for i in shown],
                         status="no_call" if text else "ok", tool=None if text else VARIANTS[pick],
                         position=None if text else shown.index(pick) + 1))
    return pd.DataFrame(rows)


def _tv(counts):
    p = np.asarray(counts, dtype=float)
    return 0.5 * float(np.abs(p / p.sum() - 1 / len(p)).sum())


def _check(log, exp, tmp_path):
    """The rows, and the counts / deltas through both engines, equal the direct computation on the scenario."""
    d = log.data
    assert len(d) == len(exp)
    assert list(d["cluster_id"]) == list(exp["cluster"])          # never the last of a variant's nine clusters
    assert list(d["status"]) == list(exp["status"])
    assert [None if pd.isna(t) else t for t in d["chosen_tool"]] == [None if pd.isna(t) else t for t in exp["tool"]]
    assert [None if pd.isna(p) else int(p) for p in d["chosen_position"]] == [
        None if pd.isna(p) else int(p) for p in exp["position"]]
    ok = exp[exp["status"] == "ok"]
    tools = {c: [int((g["tool"] == t).sum()) for t in c.split("~")] for c, g in ok.groupby("cluster")}
    pos = {c: [int((g["position"] == p).sum()) for p in (1, 2)] for c, g in ok.groupby("cluster")}
    d_api = np.mean([_tv(v) for v in tools.values()])
    d_pos = np.mean([_tv(v) for v in pos.values()])
    path = log.write(tmp_path / "log.csv")
    engines = {"pandas": log.counts(), "duckdb": tbs.count_table(path, catalog=log.catalog, engine="duckdb")}
    for engine, counts in engines.items():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            g = tbs.selection_bias(counts, n_resamples=0, n_null=0).groups[0]
        excluded = {s: int(n) for s, n in exp["status"].value_counts().items() if s != "ok"}
        assert g.rows == {"total": len(exp), "used": len(ok), "excluded": excluded}, engine
        assert sorted(cb.cluster for cb in g.clusters if sum(cb.counts)) == sorted(tools)
        for cb in (cb for cb in g.clusters if cb.cluster in tools):
            assert list(cb.counts) == tools[cb.cluster], (engine, cb.cluster)
            assert list(cb.position_counts) == pos[cb.cluster], (engine, cb.cluster)
        assert g.delta_api.mean_over_runs == pytest.approx(d_api, abs=1e-12)
        assert g.delta_pos.mean_over_runs == pytest.approx(d_pos, abs=1e-12)


@pytest.fixture(scope="module")
def exp():
    return _scenario()


# ---------------------------------------------------------------------------------------------
def _openai_records(exp):
    from openai.types.chat import ChatCompletion

    out = []
    for r in exp.itertuples():
        msg = {"role": "assistant", "content": "It is sunny." if r.status != "ok" else None, "refusal": None}
        if r.status == "ok":
            msg["tool_calls"] = [{"id": f"call_{r.n}", "type": "function",
                                  "function": {"name": r.tool, "arguments": json.dumps({"q": "x"})}}]
        resp = ChatCompletion.model_validate({
            "id": f"chatcmpl-{r.n}", "object": "chat.completion", "created": 1735689600, "model": "gpt-4o-mini",
            "choices": [{"index": 0, "message": msg, "finish_reason": "tool_calls" if r.status == "ok" else "stop",
                         "logprobs": None}]})
        req = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": QUERIES[int(r.query[1])]}],
               "tools": [{"type": "function", "function": {"name": t, "description": f"variant text of {t}",
                                                           "parameters": PARAMS}} for t in r.shown]}
        out.append({"request": req, "response": resp.model_dump(mode="json")})
    return out


def _jsonl(path, records):
    path.write_text("\n".join(json.dumps(r) for r in records) + "\n", encoding="utf-8")
    return path


class TestOpenAI:
    def test_each_request_is_its_pair(self, exp, tmp_path):
        path = _jsonl(tmp_path / "log.jsonl", _openai_records(exp))
        log = read_openai(path, catalog=_catalog(), meta={"model": "gpt-4o-mini"})
        _check(log, exp, tmp_path)

    def test_clusters_declared_in_the_manifest(self, exp, tmp_path):
        # the 45 pairs declared in study.toml (each variant in nine of them), read through read_study
        _jsonl(tmp_path / "log.jsonl", _openai_records(exp))
        pairs = ", ".join(f'"{c}" = ["{c.split("~")[0]}", "{c.split("~")[1]}"]' for c in _catalog().clusters)
        (tmp_path / "study.toml").write_text(f'format = "openai"\nclusters = {{{pairs}}}\n[[logs]]\n'
                                             'path = "log.jsonl"\nmodel = "gpt-4o-mini"\n', encoding="utf-8")
        study = tbs.read_study(tmp_path / "study.toml")
        _check(study.log, exp, tmp_path)

    def test_a_list_of_three_variants_spans_several_pairs(self, exp, tmp_path):
        recs = _openai_records(exp)
        recs[0]["request"]["tools"].append({"type": "function", "function": {"name": "variant_9"}})
        path = _jsonl(tmp_path / "log.jsonl", recs)
        # issue 36: kept as a row without a cluster (the call decides none: variant_1 is in two of the three
        # pairs shown), named in the diagnostics and excluded by its status
        with pytest.warns(tbs.exceptions.ExcludedRowsWarning, match="1 of 180 attempt"):
            log = read_openai(path, catalog=_catalog(), meta={"model": "gpt-4o-mini"})
        row = log.data.iloc[0]
        assert pd.isna(row["cluster_id"]) and row["status"] == "off_cluster" and row["raw_choice"] == "variant_1"
        un = log.diagnostics[str(path)]["unassigned"]
        assert "span several clusters ['variant_1~variant_2', 'variant_1~variant_9', 'variant_2~variant_9']" in \
            un["messages"][0] and "is a tool of several of them" in un["messages"][0]
        # with the record's cluster_id it is decided again
        recs[0]["request"]["metadata"] = {"cluster_id": "variant_1~variant_2"}
        log = read_openai(_jsonl(tmp_path / "log.jsonl", recs), catalog=_catalog(), meta={"model": "gpt-4o-mini"},
                          subsets=True)
        assert log.data["cluster_id"].iloc[0] == "variant_1~variant_2" and log.data["status"].iloc[0] == "ok"


class TestAnthropic:
    def test_each_request_is_its_pair(self, exp, tmp_path):
        from anthropic.types.messages import MessageBatchIndividualResponse
        from anthropic.types.messages.batch_create_params import Request
        from pydantic import TypeAdapter

        check = TypeAdapter(Request)
        reqs, results = [], []
        for r in exp.itertuples():
            req = {"custom_id": f"r{r.n}", "params": {
                "model": "claude-sonnet-4-5", "max_tokens": 256,
                "messages": [{"role": "user", "content": QUERIES[int(r.query[1])]}],
                "tools": [{"name": t, "description": f"variant text of {t}", "input_schema": PARAMS}
                          for t in r.shown]}}
            check.validate_python(req)
            reqs.append(req)
            content = ([{"type": "tool_use", "id": f"toolu_{r.n}", "name": r.tool, "input": {"q": "x"}}]
                       if r.status == "ok" else [{"type": "text", "text": "It is sunny."}])
            results.append(MessageBatchIndividualResponse.model_validate({"custom_id": f"r{r.n}", "result": {
                "type": "succeeded", "message": {
                    "id": f"msg_{r.n}", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
                    "content": content, "stop_reason": "tool_use" if r.status == "ok" else "end_turn",
                    "stop_sequence": None, "usage": {"input_tokens": 100, "output_tokens": 20}}}}
            ).model_dump(mode="json", exclude_none=True))
        req_path = _jsonl(tmp_path / "req.jsonl", reqs)
        res_path = _jsonl(tmp_path / "res.jsonl", results[::-1])
        log = read_anthropic(req_path, responses=res_path, catalog=_catalog(), meta={"model": "claude-sonnet-4-5"})
        _check(log, exp, tmp_path)


class TestTranscripts:
    def test_each_record_is_its_pair(self, exp, tmp_path):
        recs = [dict(rec["response"], tools=[t["function"]["name"] for t in rec["request"]["tools"]],
                     query_id=r.query) for rec, r in zip(_openai_records(exp), exp.itertuples())]
        log = read_transcripts(_jsonl(tmp_path / "calls.jsonl", recs), catalog=_catalog(), meta={"model": "m"})
        _check(log, exp, tmp_path)

    def test_three_variants_match_several_pairs(self, exp, tmp_path):
        rec = dict(_openai_records(exp)[0]["response"], tools=["variant_1", "variant_2", "variant_3"])
        with pytest.raises(SelectionLogError, match=r"calls.jsonl:1:tools: the tools shown \['variant_1', "
                                                    r"'variant_2', 'variant_3'\] span several clusters: "
                                                    r"\['variant_1~variant_2', 'variant_1~variant_3', "
                                                    r"'variant_2~variant_3'\]"):
            read_transcripts(_jsonl(tmp_path / "calls.jsonl", [rec]), catalog=_catalog(), meta={"model": "m"})


# ---------------------------------------------------------------------------------------------
def _inspect_log(exp, root):
    pytest.importorskip("inspect_ai")
    from inspect_ai import Task, eval
    from inspect_ai.dataset import MemoryDataset, Sample
    from inspect_ai.model import ChatMessageAssistant, ModelOutput, ModelUsage, get_model
    from inspect_ai.model._model_output import ChatCompletionChoice
    from inspect_ai.scorer import match
    from inspect_ai.solver import generate, solver
    from inspect_ai.tool import ToolCall, ToolDef

    def make_tool(name):
        async def execute(q: str) -> str:
            return "ok"
        return ToolDef(execute, name=name, description=f"variant text of {name}", parameters={"q": "query"}).as_tool()

    @solver
    def offer():
        async def solve(state, generate_):
            state.tools = [make_tool(t) for t in state.metadata["shown"]]
            return state
        return solve

    def chooser(messages, tools, tool_choice, config):
        n = int(messages[-1].text.split("#")[1])
        r = exp.set_index("n").loc[n]
        tc = [ToolCall(id=f"c{n}", function=r["tool"], arguments={"q": "x"})] if r["status"] == "ok" else None
        msg = ChatMessageAssistant(content="" if tc else "It is sunny.", tool_calls=tc, model="mockllm/model")
        out = ModelOutput(model="mockllm/model", choices=[ChatCompletionChoice(message=msg)])
        out.usage = ModelUsage(input_tokens=10, output_tokens=2, total_tokens=12)   # no tokenizer download
        return out

    task = Task(name="tournament", dataset=MemoryDataset([
        Sample(id=f"{r.cluster}/{r.query}/{r.n}", input=f"{QUERIES[int(r.query[1])]} #{r.n}#",
               metadata={"shown": list(r.shown)}) for r in exp.itertuples()]),
        solver=[offer(), generate(tool_calls="none")], scorer=match())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        logs = eval(task, model=get_model("mockllm/model", custom_outputs=chooser), log_dir=str(root),
                    display="none", log_format="eval")
    return logs[0].location


class TestInspect:
    def test_each_sample_is_its_pair(self, exp, tmp_path):
        from toolbias_stats.io.readers.inspect_ai_log import read_inspect

        # one query and the nine pairs of variant_1, each in both orders (18 samples: an eval costs seconds)
        exp = exp[(exp["query"] == "q0") & exp["cluster"].str.startswith("variant_1~")]
        loc = _inspect_log(exp, tmp_path / "logs")
        log = read_inspect(loc, catalog=_catalog(), meta={"model": "mock"})
        # the sample id carries the scenario's row (the log's sample order is Inspect's)
        rows = [int(q.rsplit("/", 1)[1]) for q in log.data["query_id"]]
        assert sorted(rows) == sorted(exp["n"])
        _check(log, exp.set_index("n").loc[rows].reset_index(), tmp_path)
