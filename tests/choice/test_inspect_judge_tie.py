"""Issue 36: an Inspect model-graded pairwise task whose tie verdict is a third choice.

The eval is run here with Inspect's mock model (no network): each pair of answers is judged in both orders with the
``multiple_choice`` solver and the choices ``[answer, answer, "Tie"]``, as a pairwise judge task lists them. With
the manifest's ``tie = "Tie"`` the third choice is the judge status ``tie``, never a third option; the position
bias metrics (Shi et al. 2024) equal the counts of the scripted verdicts.
"""

from __future__ import annotations

import json
import warnings

import pandas as pd
import pytest

pytest.importorskip("inspect_ai")

from toolbias_stats.choice import judge_consistency, read_choice_study
from toolbias_stats.exceptions import SelectionLogError
from toolbias_stats.io.readers.inspect_ai_log import read_inspect_choices

PAIRS = {"p0": ("answer one", "answer two"), "p1": ("short", "long"), "p2": ("yes", "no"), "p3": ("red", "blue"),
         "p4": ("cat", "dog")}
#: the letter the judge answers per (pair, order): C is "Tie"
VERDICTS = {("p0", "ab"): "A", ("p0", "ba"): "A",      # first, first: primacy
            ("p1", "ab"): "C", ("p1", "ba"): "C",      # tie, tie: consistent
            ("p2", "ab"): "A", ("p2", "ba"): "C",      # first, tie: primacy
            ("p3", "ab"): "B", ("p3", "ba"): "A",      # the same answer ("blue") both times: consistent
            ("p4", "ab"): "C", ("p4", "ba"): "B"}      # tie, second: recency


@pytest.fixture(scope="module")
def judge_log(tmp_path_factory):
    from inspect_ai import Task, eval
    from inspect_ai.dataset import MemoryDataset, Sample
    from inspect_ai.model import ModelOutput, ModelUsage, get_model
    from inspect_ai.scorer import choice
    from inspect_ai.solver import multiple_choice

    def judge(messages, tools, tool_choice, config):
        key = messages[-1].text.split("[")[1].split("]")[0]
        out = ModelOutput.from_content("mockllm/model", f"ANSWER: {VERDICTS[tuple(key.split('/'))]}")
        out.usage = ModelUsage(input_tokens=10, output_tokens=2, total_tokens=12)   # no tokenizer download
        return out

    # the two orders of a pair are one item (metadata item_id, as the reader documents): the prompts differ
    samples = [Sample(id=f"{p}{o}", input=f"Judge [{p}/{o}]: which answer is better?",
                      choices=[*(pair if o == "ab" else pair[::-1]), "Tie"], target="A", metadata={"item_id": p})
               for p, pair in PAIRS.items() for o in ("ab", "ba")]
    root = tmp_path_factory.mktemp("judge")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        logs = eval(Task(name="pairwise_judge", dataset=MemoryDataset(samples), solver=multiple_choice(),
                         scorer=choice()), model=get_model("mockllm/model", custom_outputs=judge), log_dir=str(root),
                    display="none", log_format="eval")
    return root, logs[0].location


def test_the_tie_choice_is_the_tie_status(judge_log):
    _root, loc = judge_log
    log = read_inspect_choices(loc, tie="Tie")
    d = log.data.assign(order=log.data["question"].str.extract(r"/(\w+)\]")[0]).set_index(["item_id", "order"])
    assert len(d) == 10 and set(d["n_options"]) == {2}                   # rows in = samples; two options shown
    for (p, o), letter in VERDICTS.items():
        row = d.loc[(p, o)]
        shown = list(PAIRS[p] if o == "ab" else PAIRS[p][::-1])
        assert json.loads(row["options"]) == shown                        # "Tie" is not an option
        assert row["status"] == ("tie" if letter == "C" else "ok")
        assert (None if pd.isna(row["chosen_position"]) else int(row["chosen_position"])) == (
            None if letter == "C" else "AB".index(letter) + 1)
    assert dict(log.data["status"].value_counts()) == {"ok": 6, "tie": 4}
    # without `tie` the third choice is read as a third option shown (what the option exists to avoid)
    plain = read_inspect_choices(loc)
    assert set(plain.data["n_options"]) == {3} and (plain.data["chosen_position"] == 3).sum() == 4


def test_position_bias_metrics_equal_the_scripted_verdicts(judge_log):
    _root, loc = judge_log
    res = judge_consistency(read_inspect_choices(loc, tie="Tie"), by=(), n_resamples=0)
    row = res.table.iloc[0]
    # 5 swapped pairs: consistent p1 (tie, tie) and p3; primacy p0, p2; recency p4
    assert (row["n_pairs"], row["consistent"], row["primacy_preferred"], row["recency_preferred"]) == (5, 2, 2, 1)
    assert row["consistency"] == pytest.approx(2 / 5)
    assert row["preference_score"] == pytest.approx((1 - 2) / 3)
    assert row["primacy_share"] == pytest.approx(2 / 3) and row["recency_share"] == pytest.approx(1 / 3)
    assert row["tie_rate"] == pytest.approx(4 / 10)


def test_manifest_key_tie(judge_log, tmp_path):
    _root, loc = judge_log
    (tmp_path / "study.toml").write_text(f'format = "inspect"\ntie = "Tie"\n[[logs]]\npath = "{loc}"\n',
                                         encoding="utf-8")
    log = read_choice_study(tmp_path / "study.toml")
    assert dict(log.data["status"].value_counts()) == {"ok": 6, "tie": 4} and set(log.data["n_options"]) == {2}
    # a tie text that is not one of a sample's choices is named
    with pytest.raises(SelectionLogError, match=r"sample 'p0ab' epoch 1: 0 choices read 'Draw'"):
        read_inspect_choices(loc, tie="Draw")
