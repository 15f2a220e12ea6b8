"""Make the example study of data/choice/: real Inspect AI evals run here with its mock model and documented choosers.

No network and no model weights: ``mockllm/model`` is Inspect's own mock provider; its ``custom_outputs`` is a
Python function (the *chooser*) that sees exactly what a real model would see (the messages and the tools offered)
and answers by a documented rule, with randomness drawn from a hash of the prompt (so a run is reproducible
whatever order Inspect schedules the samples in). The logs are Inspect's real log files (``.eval``), written by
``inspect_ai.eval``; the analysis (analyses/inspect_reanalysis.py) reads them through manifests with no conversion.

Choosers (the truth the re-analysis must recover; derivations in data/choice/PROVENANCE.md):

- tools (cluster of K = 5 geocoding tools, every query under all 5 cyclic rotations): with probability 0.05 no tool
  call (a text answer); otherwise with probability 0.45 the tool listed first, 0.25 the favourite ``geo_charlie``
  wherever it is listed, else a uniformly random tool. Truth: delta_pos = 0.45 * (1 - 1/5) = 0.36,
  delta_API = 0.25 * (1 - 1/5) = 0.20.
- multiple choice (K = 4): the model "knows" item i with probability q_i (given below); then it answers the gold
  option; otherwise it answers position p with probabilities w = (0.55, 0.20, 0.15, 0.10). Condition
  ``rotated``: every item under all 4 rotations (the gold answer at each position once); condition ``fixed_key``:
  every item once, the gold answer at position 1 for half the items (an unbalanced answer key, as in many data sets).
  Truth: accuracy when the gold is at p = qbar + (1 - qbar) * w_p; accuracy under random orderings =
  qbar + (1 - qbar) / 4; delta_pos of the rotated condition = (1 - qbar) * TV(w, U) = (1 - qbar) * 0.30.
- pairwise judge (K = 2, each pair in both orders): picks the better response with probability 0.6, otherwise the
  response shown first. Truth: consistency = 0.6, first-position rate = 1 - 0.6 / 2 = 0.7.

Usage::

    python analyses/inspect_make_example.py [OUT_DIR]      # default data/choice/logs (about 20 s on 2 cores)
"""

from __future__ import annotations

import hashlib
import sys
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
TOOLS = ("geo_alpha", "geo_bravo", "geo_charlie", "geo_delta", "geo_echo")
P_NO_CALL, P_FIRST, P_FAVOURITE, FAVOURITE = 0.05, 0.45, 0.25, "geo_charlie"
W_POS = np.array([0.55, 0.20, 0.15, 0.10])
P_JUDGE = 0.6
N_QUERIES, N_ITEMS, N_PAIRS = 40, 80, 60


def _rng(*parts) -> np.random.Generator:
    """A generator seeded by a hash of the prompt: the same prompt always gets the same answer."""
    h = hashlib.sha256("\x1f".join(map(str, parts)).encode()).digest()
    return np.random.default_rng(int.from_bytes(h[:8], "little"))


def item_difficulty(i: int) -> float:
    """q_i, the probability that the mock model knows item i: 0.2, 0.4, 0.6, 0.8 in turn."""
    return (0.2, 0.4, 0.6, 0.8)[i % 4]


def fixed_key_shift(i: int) -> int:
    """Condition fixed_key: the gold answer of item i is at position shift + 1.

    Items come in blocks of four (one of each difficulty), and a whole block shares the gold position, so the
    position is independent of difficulty: gold first in the even blocks (half the items), else at 2, 3, 4 in turn.
    """
    block = i // 4
    return 0 if block % 2 == 0 else 1 + (block // 2) % 3


def mc_items():
    """Arithmetic items with three distractors: (question, options in source order, gold index 0)."""
    out = []
    for i in range(N_ITEMS):
        a, b = 7 + 3 * i, 11 + 5 * (i % 9)
        s = a + b
        out.append((f"What is {a} + {b}?", [str(s), str(s + 1), str(s - 10), str(s + 9)], i))
    return out


def make_logs(out_dir) -> dict:
    from inspect_ai import Task, eval
    from inspect_ai.dataset import MemoryDataset, Sample
    from inspect_ai.model import ChatMessageAssistant, ModelOutput, ModelUsage, get_model
    from inspect_ai.model._model_output import ChatCompletionChoice
    from inspect_ai.scorer import choice, match
    from inspect_ai.solver import generate, multiple_choice, solver
    from inspect_ai.tool import ToolCall, ToolDef

    def make_tool(name):
        async def execute(address: str) -> str:
            return "0,0"
        return ToolDef(execute, name=name, description=f"Convert an address to coordinates ({name}).",
                       parameters={"address": "the postal address"}).as_tool()

    @solver
    def offer_tools():
        async def solve(state, generate_):
            r = state.metadata["rotation"]
            state.tools = [make_tool(TOOLS[(r - 1 + j) % len(TOOLS)]) for j in range(len(TOOLS))]
            return state
        return solve

    items = mc_items()
    know = {q: item_difficulty(i) for q, _, i in items}
    gold_text = {q: opts[0] for q, opts, _ in items}
    usage = ModelUsage(input_tokens=50, output_tokens=5, total_tokens=55)

    def chooser(messages, tools, tool_choice, config):
        prompt = messages[-1].text
        names = [t.name for t in tools]
        if names:
            g = _rng("tools", prompt, "|".join(names))
            u = g.random()
            if u < P_NO_CALL:
                msg = ChatMessageAssistant(content="I can answer without a tool.", model="mockllm/model")
            else:
                v = g.random()
                name = names[0] if v < P_FIRST else FAVOURITE if v < P_FIRST + P_FAVOURITE else names[g.integers(5)]
                msg = ChatMessageAssistant(content="", model="mockllm/model", tool_calls=[
                    ToolCall(id="call_1", function=name, arguments={"address": "10 Downing St"})])
            out = ModelOutput(model="mockllm/model", choices=[ChatCompletionChoice(message=msg)])
        else:
            lines = prompt.splitlines()
            shown = [ln[3:] for ln in lines if len(ln) > 3 and ln[1:3] == ") " and ln[0].isalpha()]
            if "Which response is better" in prompt:
                g = _rng("judge", prompt)
                better = 0 if "[better]" in shown[0] else 1
                pick = better if g.random() < P_JUDGE else 0
            else:
                question = next(ln for ln in lines if ln.startswith("What is"))
                g = _rng("mc", prompt)
                pick = shown.index(gold_text[question]) if g.random() < know[question] else int(g.choice(4, p=W_POS))
            out = ModelOutput.from_content("mockllm/model", f"ANSWER: {'ABCD'[pick]}")
        out.usage = usage
        return out

    tool_samples = [Sample(id=f"q{q:02d}-r{r}", input=f"Where is house number {q + 1} on Main Street, Springfield?",
                           metadata={"rotation": r}) for q in range(N_QUERIES) for r in range(1, 6)]
    tools_task = Task(name="geocoding_tools", dataset=MemoryDataset(tool_samples),
                      solver=[offer_tools(), generate(tool_calls="none")], scorer=match())
    rotated, fixed = [], []
    for q, opts, i in items:
        for r in range(4):
            rot = opts[r:] + opts[:r]              # the gold option (index 0) lands at position (4 - r) % 4 + 1
            rotated.append(Sample(id=f"i{i:02d}-r{r + 1}", input=q, choices=rot, target="ABCD"[rot.index(opts[0])],
                                  metadata={"item_id": f"i{i:02d}"}))
        r = fixed_key_shift(i)                       # the gold option lands at position r + 1
        rot = opts[-r:] + opts[:-r] if r else list(opts)
        fixed.append(Sample(id=f"i{i:02d}", input=q, choices=rot, target="ABCD"[rot.index(opts[0])]))
    pairs = []
    for j in range(N_PAIRS):
        good, bad = f"Response {j}a [better]: a correct, complete answer.", f"Response {j}b: a vague answer."
        for order, resp in (("ab", [good, bad]), ("ba", [bad, good])):
            pairs.append(Sample(id=f"p{j:02d}-{order}", input="Which response is better for the user's request?",
                                choices=resp, target="AB"[resp.index(good)], metadata={"item_id": f"p{j:02d}"}))
    tasks = [tools_task,
             Task(name="mc_rotated", dataset=MemoryDataset(rotated), solver=multiple_choice(), scorer=choice()),
             Task(name="mc_fixed_key", dataset=MemoryDataset(fixed), solver=multiple_choice(), scorer=choice()),
             Task(name="judge_pairs", dataset=MemoryDataset(pairs), solver=multiple_choice(), scorer=choice())]
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    model = get_model("mockllm/model", custom_outputs=chooser)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        logs = eval(tasks, model=model, log_dir=str(out_dir), display="none", log_format="eval", max_tasks=1)
    paths = {}
    for lg in logs:  # stable names for the manifests (the run id stays inside the log)
        target = out_dir / f"{lg.eval.task}.eval"
        Path(lg.location).replace(target)
        paths[lg.eval.task] = target
    return paths


def truth() -> dict:
    """The quantities the choosers imply (see the module docstring)."""
    qbar = float(np.mean([item_difficulty(i) for i in range(N_ITEMS)]))
    tv_w = 0.5 * float(np.abs(W_POS - 0.25).sum())
    f_key = np.bincount([fixed_key_shift(i) for i in range(N_ITEMS)], minlength=4) / N_ITEMS
    return {"tools_delta_pos": P_FIRST * (1 - 1 / 5), "tools_delta_api": P_FAVOURITE * (1 - 1 / 5),
            "tools_no_call_rate": P_NO_CALL, "mc_rotated_delta_pos": (1 - qbar) * tv_w,
            "mc_accuracy_by_gold_position": [qbar + (1 - qbar) * w for w in W_POS],
            "mc_corrected_accuracy": qbar + (1 - qbar) / 4,
            "mc_fixed_key_gold_share": list(f_key),
            "mc_fixed_key_expected_accuracy": float(f_key @ (qbar + (1 - qbar) * W_POS)),
            "mc_fixed_key_delta_pos": 0.5 * float(np.abs(qbar * f_key + (1 - qbar) * W_POS - 0.25).sum()),
            "judge_consistency": P_JUDGE, "judge_first_position_rate": 1 - P_JUDGE / 2}


if __name__ == "__main__":
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "data" / "choice" / "logs"
    for task, p in make_logs(out).items():
        print(f"{task}: {p} ({p.stat().st_size // 1024} KiB)")
