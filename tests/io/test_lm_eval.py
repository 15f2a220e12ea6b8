"""lm-evaluation-harness samples_*.jsonl importer (schema of lm-eval 0.4.13; lm-eval itself is not installed).

The lines are written the way lm-eval's EvaluationTracker.save_results_samples writes them: ``arguments`` as
``{"gen_args_i": {"arg_0": context, "arg_1": continuation}}``, responses stringified by ``sanitize_list``,
``target`` as ``str(doc_to_target(doc))`` and each metric's value at the top level.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from toolbias_stats.choice import option_position_bias, read_choice_table
from toolbias_stats.exceptions import SelectionLogError
from toolbias_stats.io.readers.lm_eval import read_lm_eval


def lm_eval_line(doc_id, question, choices, gold, lls, *, metrics=("acc",), target=None, filt="none"):
    """One line as lm-eval 0.4.13 writes it (evaluator.py + evaluation_tracker.py)."""
    args = [(f"Question: {question}\nAnswer:", f" {c}") for c in choices]
    pred = int(np.argmax(lls))
    gold_list = gold if isinstance(gold, list) else [gold]
    sample = {
        "doc_id": doc_id,
        "doc": {"question": question, "choices": {"text": choices, "label": list("ABCDEFG"[:len(choices)])},
                "answerKey": "ABCDEFG"[gold_list[0]]},
        "target": str(gold if target is None else target),
        "arguments": {f"gen_args_{i}": {f"arg_{j}": x for j, x in enumerate(a)} for i, a in enumerate(args)},
        "resps": [[[str(ll), str(i == pred)]] for i, ll in enumerate(lls)],
        "filtered_resps": [[str(ll), str(i == pred)] for i, ll in enumerate(lls)],
        "filter": filt, "metrics": list(metrics), "doc_hash": "0" * 64, "prompt_hash": "1" * 64,
        "target_hash": "2" * 64,
    }
    if "acc" in metrics:
        sample["acc"] = float(pred in gold_list)
    return json.dumps(sample, ensure_ascii=False)


@pytest.fixture
def samples_file(tmp_path):
    rng = np.random.default_rng(4)
    lines = []
    for i in range(40):
        gold = i % 4
        lls = rng.normal(-10, 1, size=4)
        lls[gold] += 1.0                    # informative ...
        lls[0] += 1.5                       # ... and biased towards the first option
        lines.append(lm_eval_line(i, f"q{i}", ["alpha", "beta", "gamma", "delta"], gold, lls))
    path = tmp_path / "samples_arc_easy_2025-01-31T10-00-00.123456.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_rows_positions_gold_and_task(samples_file):
    log = read_lm_eval(samples_file, meta={"model": "pythia"})
    d = log.to_frame()
    assert len(d) == 40                                              # rows in = rows out
    assert set(d["task"]) == {"arc_easy"} and set(d["status"]) == {"ok"}
    recs = [json.loads(x) for x in samples_file.read_text().splitlines()]
    lls = np.array([[float(r[0]) for r in rec["filtered_resps"]] for rec in recs])
    np.testing.assert_array_equal(d["chosen_position"].to_numpy(int), lls.argmax(1) + 1)
    np.testing.assert_array_equal(d["gold_position"].to_numpy(int), np.arange(40) % 4 + 1)
    np.testing.assert_array_equal(d["correct"].to_numpy(bool), [r["acc"] == 1.0 for r in recs])
    assert json.loads(d["options"].iloc[0]) == ["alpha", "beta", "gamma", "delta"]
    assert d["question"].iloc[3] == "Question: q3\nAnswer:"


def test_position_bias_and_round_trip(samples_file, tmp_path):
    log = read_lm_eval(samples_file, meta={"model": "pythia"})
    res = option_position_bias(log, n_resamples=100, n_null=100, rng=1)
    rates = res.rates_frame()
    counts = log.data["chosen_position"].value_counts().reindex([1, 2, 3, 4], fill_value=0).to_numpy()
    np.testing.assert_array_equal(rates["count"].to_numpy(), counts)
    assert res.to_frame()["mean_over_runs"].iloc[0] == pytest.approx(0.5 * np.abs(counts / 40 - 0.25).sum())
    assert (rates["gold_rate"] == 0.25).all()
    back = read_choice_table(log.write(tmp_path / "lm.jsonl"))
    pd.testing.assert_frame_equal(back.data.drop(columns="source_file"), log.data.drop(columns="source_file"),
                                  check_dtype=False)


def test_target_forms_mutual_info_and_multiple_input(tmp_path):
    ch = ["yes", "no", "maybe"]
    lines = [
        lm_eval_line(0, "a", ch, 1, [-3, -1, -2]),                                   # "1"
        lm_eval_line(1, "b", ch, 2, [-3, -1, -2], target="maybe"),                  # the option text
        lm_eval_line(2, "c", ch, [0, 1], [-3, -1, -2], target="[0, 1]"),            # several gold options
    ]
    mi = json.loads(lm_eval_line(3, "d", ch, 0, [-1, -2, -3], metrics=("acc", "acc_mutual_info")))
    for i in range(3):  # the unconditional requests lm-eval appends for acc_mutual_info
        mi["arguments"][f"gen_args_{3 + i}"] = {"arg_0": "", "arg_1": f" {ch[i]}"}
        mi["filtered_resps"].append(["-0.5", "False"])
    lines.append(json.dumps(mi))
    wino = json.loads(lm_eval_line(4, "e", ch[:2], 0, [-1, -2]))
    wino["arguments"] = {"gen_args_0": {"arg_0": "The trophy did not fit: it", "arg_1": " was too big."},
                         "gen_args_1": {"arg_0": "The suitcase did not fit: it", "arg_1": " was too big."}}
    lines.append(json.dumps(wino))
    path = tmp_path / "samples_mix_2025-01-01T00-00-00.jsonl"
    path.write_text("\n".join(lines), encoding="utf-8")
    d = read_lm_eval(path, meta={"model": "m"}).data.set_index("item_id")
    assert d.at["0", "gold_position"] == 2 and d.at["1", "gold_position"] == 3
    assert pd.isna(d.at["2", "gold_position"]) and d.at["2", "gold_positions"] == "1|2"
    assert d.at["3", "n_options"] == 3 and d.at["3", "chosen_position"] == 1
    assert json.loads(d.at["4", "options"])[1] == "The suitcase did not fit: it"


def test_acc_norm_divides_by_the_option_length(tmp_path):
    line = json.loads(lm_eval_line(0, "a", ["a", "much longer option"], 1, [-2.0, -6.0], metrics=("acc_norm",)))
    line["acc_norm"] = 1.0  # -6/18 > -2/1: the long option wins per character
    path = tmp_path / "samples_t_2025-01-01T00-00-00.jsonl"
    path.write_text(json.dumps(line), encoding="utf-8")
    assert read_lm_eval(path, meta={"model": "m"}).data["chosen_position"].iloc[0] == 1
    assert read_lm_eval(path, meta={"model": "m"}, score="acc_norm").data["chosen_position"].iloc[0] == 2


@pytest.mark.parametrize("mutate, match", [
    (lambda t: t[: len(t) // 2], r"samples_x_2025-01-01T00-00-00\.jsonl:2:col \d+: malformed JSON"),
    (lambda t: t.replace('"target": "1"', '"target": "7"', 1), r":1:target: unknown option: index 7"),
    (lambda t: t.replace('"target": "1"', '"target": "purple"', 1), r":1:target: unknown option: 'purple'"),
    (lambda t: t.replace('"filtered_resps": [["-3", "False"], ', '"filtered_resps": [', 1),
     r":1:filtered_resps: 2 responses for 3 options \(changed choice list\?\)"),
    (lambda t: t.replace('"acc": 1.0', '"acc": 0.0', 1), r":1:acc: the line records acc = 0.0"),
    (lambda t: t.replace('"doc_id": 0, ', "", 1), r":1:doc_id: missing key"),
])
def test_bad_input_names_file_line_and_field(tmp_path, mutate, match):
    ch = ["yes", "no", "maybe"]
    first = lm_eval_line(0, "a", ch, 1, [-3, -1, -2])
    second = lm_eval_line(1, "b", ch, 0, [-1, -3, -2])
    path = tmp_path / "samples_x_2025-01-01T00-00-00.jsonl"
    if "malformed" in match:
        path.write_text(first + "\n" + mutate(second), encoding="utf-8")
    else:
        path.write_text(mutate(first) + "\n" + second, encoding="utf-8")
    with pytest.raises(SelectionLogError, match=match):
        read_lm_eval(path, meta={"model": "m"})


def test_model_is_required(samples_file):
    with pytest.raises(SelectionLogError, match="model"):
        read_lm_eval(samples_file)


def test_non_finite_loglikelihoods_and_selection_log_round_trip(tmp_path):
    from toolbias_stats.io.readers.table import read_table

    ch = ["yes", "no", "maybe"]
    bad = json.loads(lm_eval_line(1, "b", ch, 0, [-1, -3, -2]))
    bad["filtered_resps"][1] = ["nan", "False"]
    bad.pop("acc")
    path = tmp_path / "samples_t_2025-01-01T00-00-00.jsonl"
    path.write_text(lm_eval_line(0, "a", ch, 1, [-3, -1, -2]) + "\n" + json.dumps(bad) + "\n", encoding="utf-8")
    log = read_lm_eval(path, meta={"model": "m"})
    assert list(log.data["status"]) == ["ok", "invalid_answer"]
    slog = log.to_selection_log(identity="original")          # lm-eval never shuffles: letters = positions
    assert list(slog.data["status"]) == ["ok", "unknown_tool"] and slog.data["chosen_tool"].iloc[0] == "K=3:B"
    back = read_table(slog.write(tmp_path / "sel.jsonl"), catalog=slog.catalog)
    pd.testing.assert_frame_equal(back.data.drop(columns=["source_file"]), slog.data.drop(columns=["source_file"]),
                                  check_dtype=False)
