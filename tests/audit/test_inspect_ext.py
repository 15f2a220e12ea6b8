"""Inspect AI extension (issue 25): a real Inspect eval with the mock model, offline; the log is read back with
the package's `inspect` importer. Acceptance: the orders in the log match the design, and the metric's delta_pos
equals the importer's."""

from __future__ import annotations

import json
import tomllib
import warnings
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("inspect_ai")

import toolbias_stats as tbs
from toolbias_stats.audit._inspect_ext import design_order

ROOT = Path(__file__).resolve().parents[2]
TOOLS = ("geo_alpha", "geo_beta", "geo_gamma", "geo_delta")
SAMPLES = [f"s{i}" for i in range(8)]
OPTIONS = {"m1": ["red", "green", "blue"], "m2": ["one", "two", "three"]}
N_RESAMPLES, SEED = 300, 11


def _run_eval(root):
    from inspect_ai import Epochs, Task, eval
    from inspect_ai.dataset import MemoryDataset, Sample
    from inspect_ai.model import ChatMessageAssistant, ModelOutput, ModelUsage, get_model
    from inspect_ai.model._model_output import ChatCompletionChoice
    from inspect_ai.scorer import choice
    from inspect_ai.solver import generate, multiple_choice, solver
    from inspect_ai.tool import ToolCall, ToolDef

    from toolbias_stats.audit._inspect_ext import all_epochs, order_tools, position_bias, tool_position

    def make_tool(name):
        async def execute(address: str) -> str:
            return "0,0"
        return ToolDef(execute, name=name, description=f"Geocode an address ({name}).",
                       parameters={"address": "the address"}).as_tool()

    @solver
    def offer_tools():
        async def solve(state, generate_):
            state.tools = [make_tool(t) for t in TOOLS]      # catalog order; order_tools reorders
            return state
        return solve

    usage = ModelUsage(input_tokens=10, output_tokens=2, total_tokens=12)   # no token counting (offline)

    def chooser(messages, tools, tool_choice, config):
        out = _answer(messages, [t.name for t in tools])
        out.usage = usage
        return out

    def _answer(messages, names):
        if not names:                                        # multiple choice: always the first option
            return ModelOutput.from_content("mockllm/model", "ANSWER: A")
        sid = messages[-1].text.split("#")[1]
        # a position-biased chooser: the first tool shown, except for s7 (the second) and s6 (no call)
        if sid == "s6":
            return ModelOutput.from_content("mockllm/model", "No tool needed.")
        pick = names[1] if sid == "s7" else names[0]
        msg = ChatMessageAssistant(content="", tool_calls=[ToolCall(id="c1", function=pick,
                                                                    arguments={"address": "x"})],
                                   model="mockllm/model")
        return ModelOutput(model="mockllm/model", choices=[ChatCompletionChoice(message=msg)])

    tools_task = Task(name="tools", dataset=MemoryDataset([Sample(id=s, input=f"Geocode #{s}# please")
                                                           for s in SAMPLES]),
                      solver=[offer_tools(), order_tools("cyclic"), generate(tool_calls="none")],
                      scorer=tool_position(),
                      metrics=[position_bias(clusters={"geo": list(TOOLS)}, n_resamples=N_RESAMPLES, seed=SEED)],
                      epochs=Epochs(len(TOOLS), all_epochs()))
    mc_task = Task(name="mc", dataset=MemoryDataset([Sample(id=i, input=f"Question {i}?", choices=c, target="A")
                                                     for i, c in OPTIONS.items()]),
                   solver=[order_tools("cyclic"), multiple_choice()], scorer=choice(), epochs=3)
    model = get_model("mockllm/model", custom_outputs=chooser)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        logs = eval([tools_task, mc_task], model=model, log_dir=str(root), display="none", max_tasks=1,
                    log_format="eval")
    return {lg.eval.task: lg for lg in logs}


@pytest.fixture(scope="module")
def logs(tmp_path_factory):
    return _run_eval(tmp_path_factory.mktemp("inspect_ext"))


@pytest.fixture(scope="module")
def catalog():
    return tbs.ToolCatalog.from_records([{"tool_id": t, "cluster_id": "geo"} for t in TOOLS])


class TestToolEval:
    def test_orders_match_the_design(self, logs, catalog):
        log = tbs.read_inspect(logs["tools"].location, catalog=catalog).data
        assert len(log) == len(SAMPLES) * len(TOOLS)
        for rec in log.itertuples():
            _, perm = design_order(rec.query_id, rec.epoch, len(TOOLS), "cyclic")
            assert rec.ordering == "|".join(TOOLS[i] for i in perm)
        # every sample was shown every row of the Latin square once: exact balance
        counts = {}
        for o in log["ordering"]:
            for p, t in enumerate(o.split("|")):
                counts[(t, p)] = counts.get((t, p), 0) + 1
        assert set(counts.values()) == {len(SAMPLES)}

    def test_order_recorded_in_metadata(self, logs):
        for s in logs["tools"].samples:
            _, perm = design_order(s.id, s.epoch, len(TOOLS), "cyclic")
            assert s.metadata["toolbias_order"] == [TOOLS[i] for i in perm]
            assert s.metadata["toolbias_orderings"] == "cyclic"

    def test_metric_equals_the_importer(self, logs, catalog):
        metrics = logs["tools"].results.scores[0].metrics
        log = tbs.read_inspect(logs["tools"].location, catalog=catalog)
        ref = tbs.selection_bias(log, by=[], n_resamples=N_RESAMPLES, n_null=0, rng=SEED).to_frame()
        ref = ref.set_index("metric")
        got = {k: v.value for k, v in metrics.items()}
        pos = {k.split("/")[-1]: v for k, v in got.items()}
        assert pos["delta_pos"] == pytest.approx(ref.loc["delta_pos", "mean_over_runs"], abs=1e-12)
        assert pos["delta_api"] == pytest.approx(ref.loc["delta_api", "mean_over_runs"], abs=1e-12)
        assert pos["delta_pos_ci_low"] == pytest.approx(ref.loc["delta_pos", "ci_low"], abs=1e-12)
        assert pos["delta_pos_ci_high"] == pytest.approx(ref.loc["delta_pos", "ci_high"], abs=1e-12)
        assert pos["n_used"] + pos["n_excluded"] == len(SAMPLES) * len(TOOLS)
        # theory: 6 samples always take position 1, one position 2, one no call -> positions (6/7, 1/7, 0, 0)
        p = np.array([6, 1, 0, 0]) / 7
        assert pos["delta_pos"] == pytest.approx(0.5 * np.abs(p - 0.25).sum())


class TestChoiceEval:
    def test_options_follow_the_design(self, logs):
        choices = tbs.read_inspect_choices(logs["mc"].location).data
        assert len(choices) == len(OPTIONS) * 3
        for s in logs["mc"].samples:
            _, perm = design_order(s.id, s.epoch, 3, "cyclic")
            assert s.metadata["toolbias_order"] == [OPTIONS[s.id][i] for i in perm]
        for rec in choices.to_dict("records"):
            _, perm = design_order(rec["item_id"], rec["epoch"], 3, "cyclic")
            assert json.loads(rec["options"]) == [OPTIONS[rec["item_id"]][i] for i in perm]
            # the mock always answers A (the first option shown); the gold answer is the original first option
            assert rec["chosen_position"] == 1 and rec["gold_position"] == perm.index(0) + 1


class TestRegistration:
    def test_found_by_name(self):
        from inspect_ai._util.registry import registry_lookup

        import toolbias_stats.audit._inspect_ext  # noqa: F401  (what the entry point loads)

        assert registry_lookup("solver", "toolbias_stats/order_tools") is not None
        assert registry_lookup("scorer", "toolbias_stats/tool_position") is not None
        assert registry_lookup("metric", "toolbias_stats/position_bias") is not None
        assert registry_lookup("score_reducer", "toolbias_stats/all_epochs") is not None

    def test_entry_point_declared(self):
        doc = tomllib.loads((ROOT / "pyproject.toml").read_text())
        assert doc["project"]["entry-points"]["inspect_ai"]["toolbias_stats"] == "toolbias_stats.audit._inspect_ext"

    def test_pairs_refused(self):
        from toolbias_stats.audit._inspect_ext import order_tools

        with pytest.raises(ValueError, match="`orderings` must be one of"):
            order_tools("pairs")


def test_entry_point_loads_the_extension_in_a_fresh_process():
    """What `inspect eval` does for `--solver toolbias_stats/order_tools`: load the package's `inspect_ai` entry
    point (the one pyproject.toml declares) on the first namespaced lookup. The installed metadata is the
    lead's to refresh (`pip install -e .`), so the entry point is supplied as pyproject.toml declares it."""
    import subprocess
    import sys

    doc = tomllib.loads((ROOT / "pyproject.toml").read_text())
    value = doc["project"]["entry-points"]["inspect_ai"]["toolbias_stats"]
    code = f"""
import sys
from importlib.metadata import EntryPoint
import inspect_ai._util.entrypoints as E
E.entry_points = lambda group: [EntryPoint(name="toolbias_stats", value={value!r}, group="inspect_ai")]
assert "toolbias_stats.audit._inspect_ext" not in sys.modules
from inspect_ai._util.registry import registry_lookup
from inspect_ai.solver._solver import solver_create
assert registry_lookup("solver", "toolbias_stats/order_tools") is not None
assert registry_lookup("score_reducer", "toolbias_stats/all_epochs") is not None
solver_create("toolbias_stats/order_tools", orderings="balanced")
print("ok")
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False,
                         env={**__import__("os").environ, "PYTHONPATH": str(ROOT)})
    assert out.returncode == 0 and out.stdout.strip().endswith("ok"), out.stderr[-2000:]
