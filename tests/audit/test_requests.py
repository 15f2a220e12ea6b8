"""Request writers (issue 25): every line validated against the providers' SDK types, the tools in the designed
order, and the study.toml reading fabricated results back with the existing importers."""

from __future__ import annotations

import functools
import hashlib
import json
import re
import typing

import numpy as np
import pytest

import toolbias_stats as tbs
from toolbias_stats.audit import design_study, send_name, write_requests

pydantic = pytest.importorskip("pydantic")
openai_chat = pytest.importorskip("openai.types.chat.completion_create_params")
openai_resp = pytest.importorskip("openai.types.responses.response_create_params")
anthropic_batch = pytest.importorskip("anthropic.types.messages.batch_create_params")

NAME_RE = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


def _keys(td) -> set:
    return set(typing.get_type_hints(td, include_extras=False)) if hasattr(td, "__annotations__") else set()


@functools.cache
def _adapter(td):
    return pydantic.TypeAdapter(td)


def _validate(td, obj):
    """Validate ``obj`` against an SDK TypedDict: types, required keys and literals by pydantic (lazy iterables
    consumed), and no keys the SDK type does not know (pydantic ignores extra keys of a TypedDict)."""
    adapter = _adapter(td)        # kept alive while the lazy iterables are consumed
    out = adapter.validate_python(obj)
    for key in ("messages", "tools", "input"):
        if key in out and not isinstance(out[key], (str, dict)):
            list(out[key])
    unknown = set(obj) - _keys(td)
    assert not unknown, f"keys unknown to {td.__name__}: {unknown}"


def _tool_keys(td_module, name):
    return _keys(getattr(td_module, name))


@pytest.fixture(scope="module")
def design(bb_catalog, bb_data_dir):
    return design_study(bb_catalog, bb_data_dir / "queries.json", n_queries=3, runs=2, orderings="balanced",
                        n_orderings=3)


def _lines(path):
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]


class TestOpenAIBatch:
    def test_chat_lines_validate_against_sdk(self, design, tmp_path):
        from openai.types.chat import ChatCompletionFunctionToolParam

        info = write_requests(design, tmp_path / "s", format="openai-batch", model="gpt-4.1-mini")
        lines = _lines(tmp_path / "s" / "requests-run1.jsonl") + _lines(tmp_path / "s" / "requests-run2.jsonl")
        assert len(lines) == info["requests"] == len(design.table)
        for line in lines:
            assert set(line) == {"custom_id", "method", "url", "body"}
            assert line["method"] == "POST" and line["url"] == "/v1/chat/completions"
            _validate(openai_chat.CompletionCreateParamsNonStreaming, line["body"])
            for tool in line["body"]["tools"]:
                _validate(ChatCompletionFunctionToolParam, tool)
                assert NAME_RE.match(tool["function"]["name"])
                assert set(tool["function"]) <= _keys(__import__("openai").types.shared_params.FunctionDefinition)

    def test_responses_lines_validate_against_sdk(self, design, tmp_path):
        from openai.types.responses import FunctionToolParam

        write_requests(design, tmp_path / "s", format="openai-batch", endpoint="responses", model="gpt-4.1-mini",
                       system="You are an agent.")
        for line in _lines(tmp_path / "s" / "requests-run1.jsonl"):
            assert line["url"] == "/v1/responses"
            _validate(openai_resp.ResponseCreateParamsNonStreaming, line["body"])
            for tool in line["body"]["tools"]:
                _validate(FunctionToolParam, tool)
            assert line["body"]["instructions"] == "You are an agent."

    def test_tools_in_designed_order(self, design, tmp_path):
        write_requests(design, tmp_path / "s", format="openai-batch", model="m")
        by_id = design.table.set_index("custom_id")
        for line in _lines(tmp_path / "s" / "requests-run2.jsonl"):
            names = [t["function"]["name"] for t in line["body"]["tools"]]
            assert names == [send_name(t) for t in by_id.loc[line["custom_id"], "ordering"].split("|")]
            assert line["body"]["messages"][-1]["content"] == by_id.loc[line["custom_id"], "query"]
            assert line["body"]["metadata"]["query_id"] == by_id.loc[line["custom_id"], "query_id"]

    def test_model_required(self, design, tmp_path):
        with pytest.raises(ValueError, match="`model` is required for 'openai-batch'"):
            write_requests(design, tmp_path / "s", format="openai-batch")


class TestAnthropicBatch:
    def test_lines_validate_against_sdk(self, design, tmp_path):
        from anthropic.types import ToolParam

        write_requests(design, tmp_path / "s", format="anthropic-batch", model="claude-sonnet-4-5", system="Be brief.")
        for line in _lines(tmp_path / "s" / "requests-run1.jsonl"):
            _validate(anthropic_batch.Request, line)
            _validate(anthropic_batch.MessageCreateParamsNonStreaming, line["params"])
            assert NAME_RE.match(line["custom_id"])
            for tool in line["params"]["tools"]:
                _validate(ToolParam, tool)
                assert NAME_RE.match(tool["name"])
            assert line["params"]["max_tokens"] == 1024 and line["params"]["system"] == "Be brief."


class TestChatJsonl:
    def test_bodies_validate_and_model_is_left_to_the_runner(self, design, tmp_path):
        write_requests(design, tmp_path / "s", format="chat-jsonl")
        for line in _lines(tmp_path / "s" / "requests-run1.jsonl"):
            assert "model" not in line["body"]
            _validate(openai_chat.CompletionCreateParamsNonStreaming, {"model": "x", **line["body"]})
            assert line["query_id"] == parse_query(line["custom_id"])
        assert 'model = "unnamed-model"' in (tmp_path / "s" / "study.toml").read_text()


def parse_query(cid):
    from toolbias_stats.audit import parse_custom_id

    return parse_custom_id(cid)["query"]


def _chooser(cid, n, weights=(0.5, 0.2, 0.1, 0.1, 0.1)):
    rng = np.random.default_rng(int.from_bytes(hashlib.sha256(cid.encode()).digest()[:8], "little"))
    w = np.asarray(weights[:n]) / np.sum(weights[:n])
    return int(rng.choice(n, p=w))


class TestStudyTomlReadsResults:
    """The written manifest reads the providers' result files with the existing importers."""

    def test_openai_batch_output(self, design, tmp_path):
        out = tmp_path / "s"
        write_requests(design, out, format="openai-batch", model="gpt-x")
        picks = {}
        for r in (1, 2):
            res = []
            for line in _lines(out / f"requests-run{r}.jsonl"):
                names = [t["function"]["name"] for t in line["body"]["tools"]]
                j = _chooser(line["custom_id"], len(names))
                picks[line["custom_id"]] = j + 1
                msg = {"role": "assistant", "content": None, "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": names[j], "arguments": "{}"}}]}
                res.append({"id": "b", "custom_id": line["custom_id"], "error": None,
                            "response": {"status_code": 200, "body": {"choices": [{"message": msg}]}}})
            (out / f"responses-run{r}.jsonl").write_text("\n".join(json.dumps(x) for x in res) + "\n")
        study = tbs.read_study(out / "study.toml")
        log = study.log.data
        assert len(log) == len(design.table)                  # rows in = requests sent
        assert (log["status"] == "ok").all()
        assert sorted(log["run"].unique()) == [1, 2]
        # the designed orders, query ids and the chosen positions come back
        tab = design.table.assign(ordering=[ "|".join(send_name(t) for t in o.split("|"))
                                             for o in design.table["ordering"]])
        merged = log.merge(tab, on=["cluster_id", "query_id", "run", "ordering"], how="left", validate="1:1")
        assert merged["custom_id"].notna().all()
        assert (merged["chosen_position"].astype(int) == merged["custom_id"].map(picks)).all()

    def test_anthropic_results(self, design, tmp_path):
        out = tmp_path / "s"
        write_requests(design, out, format="anthropic-batch", model="claude-x")
        for r in (1, 2):
            res = []
            for i, line in enumerate(_lines(out / f"requests-run{r}.jsonl")):
                names = [t["name"] for t in line["params"]["tools"]]
                if i == 0:
                    res.append({"custom_id": line["custom_id"], "result": {"type": "errored", "error": {
                        "type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}}})
                    continue
                msg = {"id": "m", "type": "message", "role": "assistant", "model": "claude-x",
                       "content": [{"type": "tool_use", "id": "t", "name": names[1], "input": {}}],
                       "stop_reason": "tool_use", "stop_sequence": None,
                       "usage": {"input_tokens": 1, "output_tokens": 1}}
                from anthropic.types import Message

                Message.model_validate(msg)
                res.append({"custom_id": line["custom_id"], "result": {"type": "succeeded", "message": msg}})
            (out / f"responses-run{r}.jsonl").write_text("\n".join(json.dumps(x) for x in res) + "\n")
        log = tbs.read_study(out / "study.toml").log.data
        assert len(log) == len(design.table)
        assert (log["status"] == "parse_error").sum() == 2
        assert (log.loc[log["status"] == "ok", "chosen_position"] == 2).all()

    def test_missing_results_file_is_a_clear_error(self, design, tmp_path):
        write_requests(design, tmp_path / "s", format="chat-jsonl")
        with pytest.raises(tbs.ManifestError, match="responses: file not found"):
            tbs.read_study(tmp_path / "s" / "study.toml")


class TestNamesAndSafety:
    def test_long_names_are_shortened_and_mapped(self, tmp_path):
        long = "an_extremely_long_function_name_for_a_tool_that_goes_beyond_what_the_apis_accept"
        cat = tbs.ToolCatalog.from_records([{"cluster_id": "1", "tool_id": long}, {"cluster_id": "1",
                                                                                   "tool_id": "short"}])
        d = design_study(cat, {"1": ["q"]})
        write_requests(d, tmp_path / "s", format="chat-jsonl")
        names = [t["function"]["name"] for t in _lines(tmp_path / "s" / "requests-run1.jsonl")[0]["body"]["tools"]]
        assert all(NAME_RE.match(n) for n in names) and send_name(long) in names
        from toolbias_stats.io.readers.table import read_catalog_table

        cat2 = read_catalog_table(tmp_path / "s" / "catalog.csv")
        assert set(cat2.table["tool_id"]) == {send_name(long), "short"}
        assert set(cat2.table["source_tool_id"]) == {long, "short"}

    def test_refuses_a_folder_with_a_design(self, design, tmp_path):
        write_requests(design, tmp_path / "s", format="chat-jsonl")
        before = (tmp_path / "s" / "requests-run1.jsonl").read_bytes()
        with pytest.raises(ValueError, match="already holds a design"):
            write_requests(design, tmp_path / "s", format="chat-jsonl")
        assert (tmp_path / "s" / "requests-run1.jsonl").read_bytes() == before

    def test_never_overwrites_an_input(self, design, tmp_path):
        out = tmp_path / "s"
        out.mkdir()
        catalog = out / "catalog.csv"
        catalog.write_text("tool_id,cluster_id\na,1\n")
        with pytest.raises(ValueError, match="would overwrite an input"):
            write_requests(design, out, format="chat-jsonl", inputs=[catalog])
        assert catalog.read_text() == "tool_id,cluster_id\na,1\n"

    def test_choice_design_has_no_request_files(self, tmp_path):
        d = design_study({"i1": ["a", "b"]})
        with pytest.raises(ValueError, match="multiple-choice design"):
            write_requests(d, tmp_path / "s")


class TestCli:
    def test_design_command_on_bundled_files(self, bb_data_dir, tmp_path, capsys):
        from toolbias_stats.cli._commands import main

        rc = main(["design", str(bb_data_dir / "clusters.json"), str(bb_data_dir / "queries.json"), "--format",
                   "anthropic-batch", "--model", "claude-x", "--out", str(tmp_path / "d"), "--queries-per-cluster",
                   "2", "--seed", "3"])
        out = capsys.readouterr().out
        assert rc == 0 and "100 requests (anthropic-batch)" in out and "at most 0" in out
        assert (tmp_path / "d" / "study.toml").exists()

    def test_design_command_error_is_one_line(self, bb_data_dir, tmp_path, capsys):
        from toolbias_stats.cli._commands import main

        rc = main(["design", str(bb_data_dir / "clusters.json"), str(bb_data_dir / "queries.json"), "--format",
                   "openai-batch", "--out", str(tmp_path / "d")])
        err = capsys.readouterr().err
        assert rc == 2 and "`model` is required for 'openai-batch'" in err and "Traceback" not in err
        assert not (tmp_path / "d").exists() or not any((tmp_path / "d").iterdir())
