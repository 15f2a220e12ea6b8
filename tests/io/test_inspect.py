"""Inspect AI importer: fixtures are real Inspect evals run here with the mock model (no network).

One eval per session (four small tasks, two epochs) produces the logs; every test reads them.
"""

from __future__ import annotations

import json
import re
import sys

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("inspect_ai")  # CI installs the `inspect` extra; this only guards bare installs

from toolbias_stats import read_study
from toolbias_stats.choice import (
    ChoiceLog,
    accuracy_by_gold_position,
    judge_consistency,
    option_position_bias,
    read_choice_study,
)
from toolbias_stats.exceptions import SelectionLogError
from toolbias_stats.io._catalog import ToolCatalog
from toolbias_stats.io.readers.inspect_ai_log import read_inspect, read_inspect_choices
from toolbias_stats.io.readers.table import read_table

TOOLS = ("geo_alpha", "geo_beta", "geo_gamma")
#: sample id -> (order of the tools offered, what the mock model does)
TOOL_SAMPLES = {
    "q_first": ((0, 1, 2), "first"), "q_last": ((2, 0, 1), "last"), "q_rot": ((1, 2, 0), "first"),
    "q_several": ((0, 1, 2), "several"), "q_text": ((0, 1, 2), "text"), "q_unknown": ((1, 0, 2), "unknown"),
    "q_badargs": ((0, 2, 1), "badargs"), "q_error": ((0, 1, 2), "error"), "q_forced": ((2, 1, 0), "forced"),
}
#: multiple-choice items: id -> (choices, target, answer the mock gives)
MC_ITEMS = {
    "m1": (["red", "green", "blue", "black"], "B", "ANSWER: A"),
    "m2": (["one", "two", "three", "four"], "C", "ANSWER: A"),
    "m3": (["cat", "dog", "cow", "hen"], "A", "ANSWER: A"),
    "m_empty": (["x", "y", "z", "w"], "A", ""),
    "m_bad": (["x1", "y1", "z1", "w1"], "A", "ANSWER: Q"),
    "m_multi": (["x2", "y2", "z2", "w2"], "A", "ANSWER: A, B"),
}


def _make_logs(root):
    from random import Random

    from inspect_ai import Task, eval
    from inspect_ai.dataset import MemoryDataset, Sample
    from inspect_ai.model import ChatMessageAssistant, ModelOutput, ModelUsage, get_model
    from inspect_ai.model._model_output import ChatCompletionChoice
    from inspect_ai.scorer import choice, match
    from inspect_ai.solver import generate, multiple_choice, solver
    from inspect_ai.tool import ToolCall, ToolDef, ToolFunction

    def make_tool(name):
        async def execute(address: str) -> str:
            return "0,0"
        return ToolDef(execute, name=name, description=f"Geocode an address ({name}).",
                       parameters={"address": "the address"}).as_tool()

    @solver
    def offer_tools():
        async def solve(state, generate_):
            state.tools = [make_tool(TOOLS[i]) for i in state.metadata["order"]]
            if "|forced|" in state.input_text:  # tool_choice names one tool: the model has no choice
                state.tool_choice = ToolFunction(name=TOOLS[state.metadata["order"][1]])
            return state
        return solve

    usage = ModelUsage(input_tokens=10, output_tokens=2, total_tokens=12)

    def chooser(messages, tools, tool_choice, config):
        text = messages[-1].text
        names = [t.name for t in tools]
        if names:  # tool-calling samples: the behaviour is named in the prompt
            how = text.split("|")[1]
            if how == "error":
                raise RuntimeError("mock provider failure")
            calls = {"first": names[:1], "last": names[-1:], "several": names[1:2] + names[:1], "forced": names[:1],
                     "unknown": ["not_a_catalog_tool"], "badargs": names[:1], "text": []}[how]
            tc = [ToolCall(id=f"c{j}", function=n, arguments={"address": "x"},
                           parse_error="invalid JSON in arguments" if how == "badargs" else None)
                  for j, n in enumerate(calls)]
            msg = ChatMessageAssistant(content="" if tc else "I will not call a tool.", tool_calls=tc or None,
                                       model="mockllm/model")
            out = ModelOutput(model="mockllm/model", choices=[ChatCompletionChoice(message=msg)])
        elif "Judge" in text:  # pairwise judge: always prefers the first answer shown, or declares a tie
            out = ModelOutput.from_content("mockllm/model", "ANSWER: tie" if "tie me" in text else "ANSWER: A")
        else:
            item = text.split("[")[1].split("]")[0]
            out = ModelOutput.from_content("mockllm/model", MC_ITEMS[item][2])
        out.usage = usage
        return out

    tools_task = Task(name="tools", dataset=MemoryDataset([
        Sample(id=sid, input=f"Geocode this |{how}| address", metadata={"order": list(order)})
        for sid, (order, how) in TOOL_SAMPLES.items()]),
        solver=[offer_tools(), generate(tool_calls="none")], scorer=match())
    mc = MemoryDataset([Sample(id=i, input=f"Question [{i}]?", choices=c, target=t)
                        for i, (c, t, _) in MC_ITEMS.items()])
    mc.shuffle_choices(seed=3)
    mc_task = Task(name="mc", dataset=mc, solver=multiple_choice(), scorer=choice())
    solver_task = Task(name="mc_solver_shuffle", dataset=MemoryDataset([
        Sample(id=i, input=f"Question [{i}]?", choices=c, target=t)
        for i, (c, t, _) in list(MC_ITEMS.items())[:3]]), solver=multiple_choice(shuffle=Random(5)), scorer=choice())
    judge = [Sample(id=f"p{j}{o}", input="Judge: which answer is better?",
                    choices=list(pair) if o == "ab" else list(pair[::-1]), target="A")
             for j, pair in enumerate([("answer one", "answer two"), ("short", "long"), ("yes", "no"),
                                       ("tie me", "tie you")])
             for o in ("ab", "ba")]
    judge_task = Task(name="judge", dataset=MemoryDataset(judge), solver=multiple_choice(), scorer=choice())
    model = get_model("mockllm/model", custom_outputs=chooser)
    logs = eval([tools_task, mc_task, solver_task, judge_task], model=model, log_dir=str(root), display="none",
                epochs=2, fail_on_error=False, max_tasks=1, log_format="eval")
    return {lg.eval.task: lg.location for lg in logs}


@pytest.fixture(scope="session")
def inspect_logs(tmp_path_factory):
    import warnings

    root = tmp_path_factory.mktemp("inspect_logs")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the deprecated solver shuffle warns; it is exercised on purpose
        return _make_logs(root)


@pytest.fixture(scope="session")
def catalog():
    return ToolCatalog.from_records([{"tool_id": t, "cluster_id": "geocoding"} for t in TOOLS])


def _n_samples(location):
    from inspect_ai.log import read_eval_log

    return len(read_eval_log(location).samples)


# ---------------------------------------------------------------------------------------------
# tool calls
def test_tool_rows_statuses_and_orderings(inspect_logs, catalog):
    path = inspect_logs["tools"]
    log = read_inspect(path, catalog=catalog, meta={"model": "mock"})
    d = log.data
    assert len(d) == _n_samples(path) == 2 * len(TOOL_SAMPLES)  # rows in = rows out
    assert list(d.columns[:5]) == ["model", "run", "condition", "task", "epoch"]
    assert sorted(d["epoch"].unique()) == [1, 2]
    by_id = d[d["epoch"] == 1].set_index("query_id")
    for sid, (order, how) in TOOL_SAMPLES.items():
        if how not in ("error", "forced"):
            assert by_id.at[sid, "ordering"] == "|".join(TOOLS[i] for i in order)
    expect = {"first": ("ok", 1), "last": ("ok", 3), "several": ("ok", 2), "text": ("no_call", None),
              "unknown": ("unknown_tool", None), "badargs": ("parse_error", None), "error": ("parse_error", None),
              "forced": ("forced", None)}
    for sid, (_, how) in TOOL_SAMPLES.items():
        status, pos = expect[how]
        assert by_id.at[sid, "status"] == status, sid
        if pos is not None:
            assert by_id.at[sid, "chosen_position"] == pos
            assert by_id.at[sid, "chosen_tool"] == by_id.at[sid, "ordering"].split("|")[pos - 1]
    assert by_id.at["q_unknown", "raw_choice"] == "not_a_catalog_tool"
    assert "mock provider failure" in by_id.at["q_error", "raw_choice"]
    assert "invalid JSON" in by_id.at["q_badargs", "raw_choice"]
    assert by_id.at["q_forced", "raw_choice"] == "tool_choice forced geo_beta; the model called geo_beta"
    assert pd.isna(by_id.at["q_forced", "ordering"])  # Inspect shows the model only the forced tool
    assert by_id.at["q_text", "raw_choice"] == "I will not call a tool."
    diag = log.diagnostics[str(path)]
    assert diag["several_calls"] == 2 and diag["status"]["ok"] == 8
    from toolbias_stats._schema import STATUSES

    assert set(d["status"]) == set(STATUSES) - {"off_cluster"}  # every status reachable (off_cluster: API readers)


def test_tool_log_round_trips_through_the_table_format(inspect_logs, catalog, tmp_path):
    log = read_inspect(inspect_logs["tools"], catalog=catalog, meta={"model": "mock", "temperature": 0.5})
    out = log.write(tmp_path / "inspect.csv")
    back = read_table(out, catalog=catalog)
    pd.testing.assert_frame_equal(back.data.drop(columns=["source_file", "source_row"]),
                                  log.data.drop(columns=["source_file", "source_row"]), check_dtype=False)


def test_default_model_and_task_come_from_the_log(inspect_logs, catalog):
    log = read_inspect(inspect_logs["tools"], catalog=catalog)
    assert set(log.data["model"]) == {"mockllm/model"} and set(log.data["task"]) == {"tools"}


def test_manifest_format_inspect_end_to_end(inspect_logs, catalog, tmp_path):
    import toolbias_stats as tbs

    catalog.table.to_csv(tmp_path / "catalog.csv", index=False)
    (tmp_path / "study.toml").write_text(
        f'name = "inspect"\ncatalog = "catalog.csv"\nformat = "inspect"\n\n[[logs]]\npath = "{inspect_logs["tools"]}"\n'
        'model = "mock"\ncluster = "geocoding"\n', encoding="utf-8")
    study = read_study(tmp_path / "study.toml")
    assert len(study.log) == 2 * len(TOOL_SAMPLES)
    res = tbs.selection_bias(study.log, n_resamples=50, n_null=50, rng=1)
    # 8 ok rows: position 1 (first, rot x2 epochs = 4), position 3 (last: 2), position 2 (several: 2)
    pos = res.groups[0].clusters[0].position_counts
    np.testing.assert_array_equal(pos, [4, 2, 2])


def test_tools_not_in_the_catalog_are_an_error_naming_file_and_sample(inspect_logs):
    small = ToolCatalog.from_records([{"tool_id": "geo_alpha", "cluster_id": "g"}, {"tool_id": "geo_beta",
                                                                                     "cluster_id": "g"}])
    with pytest.raises(SelectionLogError, match=r"sample 'q_first' epoch 1.*geo_gamma"):
        read_inspect(inspect_logs["tools"], catalog=small, meta={"model": "m"})


def test_truncated_and_foreign_files_are_clear_errors(inspect_logs, catalog, tmp_path):
    with open(inspect_logs["tools"], "rb") as fh:
        raw = fh.read()
    bad = tmp_path / "truncated.eval"
    bad.write_bytes(raw[:600])
    with pytest.raises(SelectionLogError, match=re.escape("truncated.eval")):
        read_inspect(bad, catalog=catalog, meta={"model": "m"})
    from inspect_ai.log import read_eval_log, write_eval_log

    js = tmp_path / "log.json"
    write_eval_log(read_eval_log(inspect_logs["tools"]), str(js))
    assert len(read_inspect(js, catalog=catalog, meta={"model": "m"})) == 2 * len(TOOL_SAMPLES)  # .json logs too
    text = js.read_text(encoding="utf-8")
    cut = tmp_path / "cut.json"
    cut.write_text(text[: len(text) // 2], encoding="utf-8")
    with pytest.raises(SelectionLogError, match=r"cut\.json:\d+"):  # names the file and the line
        read_inspect(cut, catalog=catalog, meta={"model": "m"})
    other = tmp_path / "notes.txt"
    other.write_text("hello")
    with pytest.raises(SelectionLogError, match="expected an Inspect log"):
        read_inspect(other, catalog=catalog, meta={"model": "m"})


def test_missing_inspect_names_the_extra(inspect_logs, catalog, monkeypatch):
    monkeypatch.setitem(sys.modules, "inspect_ai.log", None)
    with pytest.raises(ImportError, match=r"toolbias-stats\[inspect\]"):
        read_inspect(inspect_logs["tools"], catalog=catalog, meta={"model": "m"})


# ---------------------------------------------------------------------------------------------
# multiple choice
def test_dataset_shuffled_choices_positions_and_gold(inspect_logs):
    path = inspect_logs["mc"]
    log = read_inspect_choices(path, meta={"model": "mock"})
    assert isinstance(log, ChoiceLog) and len(log) == _n_samples(path) == 2 * len(MC_ITEMS)
    f = log.to_frame()
    e1 = f[f["epoch"] == 1].set_index("item_id")
    for item, (choices, target, _) in MC_ITEMS.items():
        shown = json.loads(e1.at[item, "options"])
        assert sorted(shown) == sorted(choices)                       # all options, in the shown order
        gold_text = choices["ABCD".index(target)]
        assert e1.at[item, "gold_option"] == gold_text and shown[e1.at[item, "gold_position"] - 1] == gold_text
    assert (e1.loc[["m1", "m2", "m3"], "chosen_position"] == 1).all()  # the mock always answers A
    assert e1.at["m_empty", "status"] == "no_answer"
    assert e1.at["m_bad", "status"] == "invalid_answer"
    assert e1.at["m_multi", "status"] == "multiple_answers"
    # correctness agrees with Inspect's own choice scorer
    from inspect_ai.log import read_eval_log

    for s in read_eval_log(path).samples:
        row = f[(f["item_id"] == s.id) & (f["epoch"] == s.epoch)].iloc[0]
        assert bool(row["correct"]) == (s.scores["choice"].value == "C")


def test_solver_shuffle_is_read_from_the_scorer_listing(inspect_logs):
    path = inspect_logs["mc_solver_shuffle"]
    log = read_inspect_choices(path, meta={"model": "mock"})
    f = log.to_frame()
    from inspect_ai.log import read_eval_log

    for s in read_eval_log(path).samples:
        row = f[(f["item_id"] == s.id) & (f["epoch"] == s.epoch)].iloc[0]
        listing = s.scores["choice"].explanation.split("model:\n\n")[1].split("\nShuffled answer")[0]
        shown = json.loads(row["options"])
        assert listing == "\n".join(f"{'ABCD'[i]}) {o}" for i, o in enumerate(shown))  # the order the model saw
        ids = row["option_ids"].split("|")
        assert [s.choices["ABCD".index(x)] for x in ids] == shown                    # original letters kept
        assert row["chosen_position"] == 1                                           # the model said "A"
        assert bool(row["correct"]) == (s.scores["choice"].value == "C")


def test_changed_choice_list_is_an_error(inspect_logs, tmp_path):
    from inspect_ai.log import read_eval_log, write_eval_log

    log = read_eval_log(inspect_logs["mc_solver_shuffle"])
    log.samples[1].choices = ["something", "else", "entirely", "new"]
    out = tmp_path / "changed.eval"
    write_eval_log(log, str(out))
    with pytest.raises(SelectionLogError, match=r"changed\.eval:2:choices: sample .*changed choice list"):
        read_inspect_choices(out, meta={"model": "m"})
    log = read_eval_log(inspect_logs["mc"])
    log.samples[0].target = "H"
    write_eval_log(log, str(out))
    with pytest.raises(SelectionLogError, match=r"changed\.eval:1:target: .*'H' is not a letter"):
        read_inspect_choices(out, meta={"model": "m"})
    with pytest.raises(SelectionLogError, match="has no choices"):
        read_inspect_choices(inspect_logs["tools"], meta={"model": "m"})


def test_choice_log_round_trip_and_selection_log(inspect_logs, tmp_path):
    from toolbias_stats.choice import read_choice_table

    log = read_inspect_choices(inspect_logs["mc"], meta={"model": "mock"})
    back = read_choice_table(log.write(tmp_path / "choices.csv"))
    pd.testing.assert_frame_equal(back.data.drop(columns=["source_file"]), log.data.drop(columns=["source_file"]),
                                  check_dtype=False)
    slog = log.to_selection_log()
    assert len(slog) == len(log)
    assert dict(slog.data["status"].value_counts()) == {"ok": 6, "no_call": 2, "unknown_tool": 2, "parse_error": 2}
    cat = slog.catalog.table
    back2 = read_table(slog.write(tmp_path / "sel.csv"), catalog=slog.catalog)
    assert len(back2) == len(slog) and set(cat["cluster_id"]) == {"K=4"}


def test_choice_study_manifest_and_statistics(inspect_logs, tmp_path):
    (tmp_path / "choice.toml").write_text(
        f'name = "mc"\nformat = "inspect"\n\n[[logs]]\npath = "{inspect_logs["mc"]}"\nmodel = "mock"\n\n'
        f'[[logs]]\npath = "{inspect_logs["judge"]}"\nmodel = "mock"\n', encoding="utf-8")
    log = read_choice_study(tmp_path / "choice.toml")
    assert set(log.data["task"]) == {"mc", "judge"}
    mc = ChoiceLog(log.data[log.data["task"] == "mc"])
    pb = option_position_bias(mc, n_resamples=100, n_null=100, rng=0)
    row = pb.to_frame().iloc[0]
    assert row["mean_over_runs"] == pytest.approx(0.75)   # every valid answer at position 1 of 4: TV = 3/4
    jc = judge_consistency(log, by=["model", "task"], n_resamples=100, rng=0).to_frame().set_index("task")
    assert jc.at["judge", "n_pairs"] == 8                  # 4 pairs x 2 epochs
    assert (log.data["status"] == "tie").sum() == 4        # issue 36: "ANSWER: tie" is a tie, not an invalid answer
    # the tie pair is consistent (tie both times); the others always prefer the first slot (primacy)
    assert jc.at["judge", "consistent"] == 2 and jc.at["judge", "primacy_preferred"] == 6
    assert jc.at["judge", "consistency"] == 0.25 and jc.at["judge", "first_position_rate"] == 1
    assert jc.at["judge", "preference_score"] == -1 and jc.at["judge", "repetition_stability"] == 1
    assert jc.at["mc", "n_pairs"] == 0
    from toolbias_stats.exceptions import DegenerateDataWarning

    with pytest.warns(DegenerateDataWarning, match="never at position"):  # 6 items: not every position holds gold
        acc = accuracy_by_gold_position(mc, n_resamples=50, rng=0)
    assert acc.overview.iloc[0]["n_rows"] == 12


def test_clusters_inferred_without_a_catalog(inspect_logs, tmp_path):
    (tmp_path / "study.toml").write_text(
        f'name = "inferred"\nformat = "inspect"\n\n[[logs]]\npath = "{inspect_logs["tools"]}"\nmodel = "mock"\n',
        encoding="utf-8")
    study = read_study(tmp_path / "study.toml")
    assert study.settings["cluster_source"]["kind"] == "inferred"
    assert set(study.log.data["cluster_id"]) == {"geo_alpha+geo_beta+geo_gamma"}
    assert len(study.log) == 2 * len(TOOL_SAMPLES)
