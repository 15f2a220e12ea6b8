"""lm-eval letter tasks with rotated choices (issue 36): the manifest's ``options = "doc.choices"``.

The samples are written as lm-eval 0.4.13 writes a task built on MMLU's template (``doc_to_text`` lists
``A. {{choices[0]}}`` ..., ``doc_to_choice: ["A", "B", "C", "D"]``, ``doc_to_target: answer``): one loglikelihood
request per letter continuation (``" A"``, ...), ``arguments`` as ``{"gen_args_i": {"arg_0": context, "arg_1":
continuation}}`` (``EvaluationTracker.save_results_samples``), responses stringified (``sanitize_list``), ``target`` the
index, each metric's value at the top level; the rotations of a question share ``doc.item`` and permute
``doc.choices``.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from toolbias_stats.choice import option_position_bias, read_choice_study
from toolbias_stats.exceptions import SelectionLogError
from toolbias_stats.io.readers.lm_eval import read_lm_eval

LETTERS = "ABCD"


def letter_line(doc_id, item, question, choices, answer, lls):
    """One line as lm-eval writes an MMLU-template task (letters scored, texts in the prompt)."""
    context = question.strip() + "".join(f"\n{L}. {c}" for L, c in zip(LETTERS, choices)) + "\nAnswer:"
    pred = int(np.argmax(lls))
    args = [(context, f" {L}") for L in LETTERS[:len(choices)]]
    return json.dumps({
        "doc_id": doc_id, "doc": {"item": item, "question": question, "choices": list(choices), "answer": answer},
        "target": answer,
        "arguments": {f"gen_args_{i}": {f"arg_{j}": x for j, x in enumerate(a)} for i, a in enumerate(args)},
        "resps": [[[str(ll), "False"]] for ll in lls], "filtered_resps": [[str(ll), "False"] for ll in lls],
        "filter": "none", "metrics": ["acc"], "doc_hash": "0" * 64, "prompt_hash": "1" * 64,
        "target_hash": "2" * 64, "acc": float(pred == answer)})


@pytest.fixture
def rotated(tmp_path):
    """20 questions x 4 rotations; the model answers the correct text half the time, else letter A."""
    rng = np.random.default_rng(8)
    folder = tmp_path / "out" / "org__model"
    folder.mkdir(parents=True)
    lines, truth = [], []
    doc_id = 0
    for q in range(20):
        texts = [f"option {q}-{j}" for j in range(4)]            # texts[0] is correct
        for r in range(4):
            shown = texts[r:] + texts[:r]
            answer = shown.index(texts[0])
            pick = answer if rng.random() < 0.5 else 0
            lls = rng.normal(-8, 0.3, 4)
            lls[pick] = -1.0
            lines.append(letter_line(doc_id, f"q{q}", f"Question {q}?", shown, answer, lls))
            truth.append({"item": f"q{q}", "shown": shown, "chosen": pick + 1, "gold": answer + 1})
            doc_id += 1
    (folder / "samples_mmlu_rot_2025-03-01T09-00-00.000001.jsonl").write_text("\n".join(lines) + "\n",
                                                                            encoding="utf-8")
    (folder / "results_2025-03-01T09-00-00.000001.json").write_text(json.dumps({"model_name": "org/model"}),
                                                                    encoding="utf-8")
    return tmp_path / "out", pd.DataFrame(truth)


def test_without_options_every_rotation_after_the_first_is_refused_with_the_fix_named(rotated):
    folder, _ = rotated
    with pytest.raises(SelectionLogError, match=r'letters .*add options = "doc.choices"') as exc:
        read_lm_eval(folder, item="doc.item")
    assert "samples_mmlu_rot" in str(exc.value) and ":options:" in str(exc.value)


def test_options_doc_choices_reads_rotations_as_orders_of_the_same_options(rotated):
    folder, truth = rotated
    log = read_lm_eval(folder, item="doc.item", options="doc.choices")
    d = log.to_frame()
    assert len(d) == len(truth) == 80 and d["item_id"].nunique() == 20       # rows in = rows out
    assert [json.loads(o) for o in d["options"]] == truth["shown"].tolist()
    np.testing.assert_array_equal(d["chosen_position"].to_numpy(int), truth["chosen"])
    np.testing.assert_array_equal(d["gold_position"].to_numpy(int), truth["gold"])
    assert d["option_ids"].isna().all() and (d["status"] == "ok").all()
    # the chosen option text: the same option across rotations (identity from the text shown)
    assert (d["correct"] == (d["chosen_option"].str.endswith("-0"))).all()
    # delta_pos against a direct computation
    counts = truth["chosen"].value_counts().reindex([1, 2, 3, 4], fill_value=0).to_numpy()
    res = option_position_bias(log, n_resamples=50, n_null=50, rng=0).to_frame()
    assert res["mean_over_runs"].iloc[0] == pytest.approx(0.5 * np.abs(counts / 80 - 0.25).sum())


def test_plain_read_notes_the_letter_choices(rotated):
    folder, _ = rotated
    log = read_lm_eval(folder)                                  # each line its own item: no duplicates
    diag = next(iter(log.diagnostics.values()))
    assert diag["letter_choices"]["field"] == "doc.choices" and diag["letter_choices"]["rows"] == 80
    assert diag["options"] == "continuations"


def test_manifest_key_and_wrong_length(rotated, tmp_path):
    folder, _ = rotated
    m = tmp_path / "study.toml"
    m.write_text(f'format = "lm_eval"\n[[logs]]\npath = "{folder.as_posix()}"\nitem = "doc.item"\n'
                 'options = "doc.choices"\n', encoding="utf-8")
    log = read_choice_study(m)
    assert len(log) == 80 and log.data["model"].unique().tolist() == ["org/model"]
    f = next(folder.rglob("samples_*.jsonl"))
    lines = f.read_text().splitlines()
    rec = json.loads(lines[5])
    rec["doc"]["choices"] = rec["doc"]["choices"][:3]
    lines[5] = json.dumps(rec)
    f.write_text("\n".join(lines) + "\n")
    with pytest.raises(SelectionLogError, match=r":6:doc.choices: 3 option texts for 4 scored continuations"):
        read_choice_study(m)


def judge_line(doc_id, pair, order, verdict_ll, question="Which answer is better?"):
    """A pairwise judge as an lm-eval letter task: continuations " A", " B" and " C" (tie), texts in doc.choices."""
    shown = list(pair) if order == 0 else list(pair[::-1])
    context = f"{question}\nA. {shown[0]}\nB. {shown[1]}\nC. Tie\nAnswer:"
    args = [(context, f" {L}") for L in "ABC"]
    return json.dumps({
        "doc_id": doc_id, "doc": {"item": f"pair-{pair[0]}", "choices": shown, "answer": 0}, "target": 0,
        "arguments": {f"gen_args_{i}": {f"arg_{j}": x for j, x in enumerate(a)} for i, a in enumerate(args)},
        "resps": [[[str(ll), "False"]] for ll in verdict_ll],
        "filtered_resps": [[str(ll), "False"] for ll in verdict_ll],
        "filter": "none", "metrics": ["acc"], "doc_hash": "0" * 64, "prompt_hash": "1" * 64,
        "target_hash": "2" * 64, "acc": float(int(np.argmax(verdict_ll)) == 0)})


def test_judge_with_a_tie_continuation(tmp_path):
    from toolbias_stats.choice import judge_consistency

    A, B, C = [-0.1, -5, -5], [-5, -0.1, -5], [-5, -5, -0.1]
    verdicts = {"p0": (A, A), "p1": (A, B), "p2": (C, C), "p3": (C, A), "p4": (B, C)}
    lines = [judge_line(2 * i + o, (f"{k}x", f"{k}y"), o, v[o]) for i, (k, v) in enumerate(verdicts.items())
             for o in (0, 1)]
    f = tmp_path / "samples_judge_2025-03-01T09-00-00.000001.jsonl"
    f.write_text("\n".join(lines) + "\n", encoding="utf-8")
    log = read_lm_eval(f, meta={"model": "judge"}, item="doc.item", options="doc.choices", tie="C")
    d = log.data
    assert len(d) == 10 and (d["n_options"] == 2).all()                   # rows in = rows out
    assert d["status"].tolist() == ["ok", "ok", "ok", "ok", "tie", "tie", "tie", "ok", "ok", "tie"]
    assert d["chosen_position"].tolist()[:4] == [1, 1, 1, 2]
    r = judge_consistency(log, n_resamples=0).to_frame().iloc[0]
    # (first, first) primacy; (first, second) consistent; (tie, tie) consistent; (tie, first) primacy;
    # (second, tie) recency
    assert (r["consistent"], r["primacy_preferred"], r["recency_preferred"]) == (2, 2, 1)
    assert r["preference_score"] == pytest.approx(-1 / 3) and r["tie_rate"] == pytest.approx(0.4)
    with pytest.raises(SelectionLogError, match="3 option texts for 2 scored continuations"):
        bad = tmp_path / "bad"
        bad.mkdir()
        rec = json.loads(lines[0])
        rec["doc"]["choices"].append("Tie")
        (bad / f.name).write_text(json.dumps(rec) + "\n", encoding="utf-8")
        read_lm_eval(bad / f.name, meta={"model": "judge"}, options="doc.choices", tie="C")
