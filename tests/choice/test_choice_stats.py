"""Multiple-choice and judge position bias: checked against theory, statsmodels and direct computations."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pandas as pd
import pytest
from statsmodels.stats.proportion import proportion_confint

from toolbias_stats import selection_bias
from toolbias_stats.choice import (
    ChoiceLog,
    accuracy_by_gold_position,
    judge_consistency,
    option_position_bias,
    read_choice_study,
)
from toolbias_stats.exceptions import DegenerateDataWarning, ManifestError, SelectionLogError


def mc_log(gold, chosen, *, k=4, items=None, status=None, model="m"):
    """A ChoiceLog with one row per (gold, chosen) pair; options named by the item and the original index."""
    n = len(gold)
    items = items if items is not None else [f"i{j}" for j in range(n)]
    rows = []
    for j in range(n):
        st = "ok" if status is None else status[j]
        rows.append({"model": model, "item_id": items[j], "epoch": 1 + j, "n_options": k,
                     "options": json.dumps([f"{items[j]}-o{p}" for p in range(k)]),
                     "chosen_position": chosen[j] if st == "ok" else None, "gold_position": gold[j],
                     "gold_positions": None if gold[j] is None else str(gold[j]), "status": st})
    return ChoiceLog.from_frame(pd.DataFrame(rows))


def test_degenerate_and_uniform_choosers_delta_pos():
    log = mc_log([1, 2, 3, 4] * 10, [1] * 40)
    res = option_position_bias(log, n_resamples=200, n_null=200, rng=0).to_frame().iloc[0]
    assert res["mean_over_runs"] == pytest.approx(0.75) and res["p_value"] < 0.01
    # a balanced chooser: TV 0, p-value 1
    bal = mc_log([1, 2, 3, 4] * 10, [1, 2, 3, 4] * 10)
    r = option_position_bias(bal, n_resamples=100, n_null=200, rng=0).to_frame().iloc[0]
    assert r["mean_over_runs"] == 0 and r["p_value"] == pytest.approx(1.0)
    # identical to the tool machinery on the slot log
    direct = selection_bias(log.to_selection_log(), n_resamples=200, n_null=200, rng=0).to_frame()
    assert direct[direct["metric"] == "delta_pos"]["ci_low"].iloc[0] == res["ci_low"]


def test_accuracy_by_gold_position_theory_first_picker():
    # gold at position 1 in 70 of 100 rows; the chooser always answers position 1
    gold = [1] * 70 + [2] * 10 + [3] * 10 + [4] * 10
    acc = accuracy_by_gold_position(mc_log(gold, [1] * 100), n_resamples=300, rng=2)
    s = acc.overview.iloc[0]
    assert s["accuracy"] == pytest.approx(0.7)
    assert s["corrected_accuracy"] == pytest.approx(0.25)          # (1 + 0 + 0 + 0) / 4
    assert s["gap"] == pytest.approx(0.45) and s["spread"] == pytest.approx(1.0)
    np.testing.assert_allclose(acc.positions["accuracy"], [1, 0, 0, 0])
    assert s["corrected_ci_low"] <= 0.25 <= s["corrected_ci_high"]


def test_accuracy_by_gold_position_position_blind_chooser_and_wilson():
    rng = np.random.default_rng(3)
    gold = rng.integers(1, 5, size=400)
    right = rng.random(400) < 0.6
    chosen = np.where(right, gold, (gold % 4) + 1)
    acc = accuracy_by_gold_position(mc_log(list(gold), list(chosen)), n_resamples=300, rng=1)
    pos = acc.positions
    c, n = pos["correct"].to_numpy(), pos["n"].to_numpy()
    lo, hi = proportion_confint(c, n, alpha=0.05, method="wilson")
    np.testing.assert_allclose(pos["wilson_low"], lo, rtol=1e-10)
    np.testing.assert_allclose(pos["wilson_high"], hi, rtol=1e-10)
    s = acc.overview.iloc[0]
    assert s["corrected_accuracy"] == pytest.approx(np.mean(c / n))
    assert s["corrected_ci_low"] < 0.6 < s["corrected_ci_high"]
    # same seed, same numbers
    again = accuracy_by_gold_position(mc_log(list(gold), list(chosen)), n_resamples=300, rng=1)
    pd.testing.assert_frame_equal(again.overview, acc.overview)


def test_items_are_the_bootstrap_unit():
    # each item shown at every position (rotations): item-level resampling keeps them together
    items = [f"it{j}" for j in range(30) for _ in range(4)]
    gold = [p for _ in range(30) for p in (1, 2, 3, 4)]
    easy = {f"it{j}": j < 15 for j in range(30)}                   # half the items always right, half never
    chosen = [g if easy[i] else (g % 4) + 1 for i, g in zip(items, gold)]
    log = mc_log(gold, chosen, items=items)
    s = accuracy_by_gold_position(log, n_resamples=400, rng=0).overview.iloc[0]
    # per-position accuracies are identical in every replicate (each item contributes once per position)
    assert s["spread"] == 0 and s["spread_ci_high"] == 0
    assert s["corrected_ci_low"] < 0.5 < s["corrected_ci_high"]


def test_invalid_rows_and_missing_positions():
    log = mc_log([1, 2, 3, 4, 1, 2], [1, 2, 3, 4, None, None],
                 status=["ok", "ok", "ok", "ok", "no_answer", "invalid_answer"])
    inc = accuracy_by_gold_position(log, n_resamples=0).overview.iloc[0]
    exc = accuracy_by_gold_position(log, n_resamples=0, invalid="exclude").overview.iloc[0]
    assert inc["accuracy"] == pytest.approx(4 / 6) and exc["accuracy"] == 1.0
    assert json.loads(exc["excluded"]) == {"invalid_answer": 1, "no_answer": 1}
    with pytest.warns(DegenerateDataWarning, match=r"never at position\(s\) \[4\]"):
        r = accuracy_by_gold_position(mc_log([1, 2, 3], [1, 2, 3]), n_resamples=0).overview.iloc[0]
    assert np.isnan(r["corrected_accuracy"]) and r["missing_positions"] == "4"


def judge_log(decisions, *, unpaired=0):
    """Pairs shown as (x, y) then (y, x); decisions = [(position chosen in AB, position chosen in BA), ...]."""
    rows = []
    for j, (a, b) in enumerate(decisions):
        x, y = f"resp {j} x", f"resp {j} y"
        for order, pos in (((x, y), a), ((y, x), b)):
            rows.append({"model": "judge", "item_id": f"p{j}-{order[0][-1]}", "n_options": 2, "options":
                         json.dumps(list(order)), "chosen_position": pos, "status": "ok", "question": f"pair {j}"})
    for j in range(unpaired):
        rows.append({"model": "judge", "item_id": f"u{j}", "n_options": 2, "options": json.dumps(["a", "b"]),
                     "chosen_position": 1, "status": "ok", "question": f"lonely {j}"})
    return ChoiceLog.from_frame(pd.DataFrame(rows))


def test_judge_consistency_counts_and_intervals():
    decisions = [(1, 2)] * 12 + [(2, 1)] * 8 + [(1, 1)] * 15 + [(2, 2)] * 5
    res = judge_consistency(judge_log(decisions, unpaired=3), n_resamples=500, rng=0).to_frame().iloc[0]
    assert res["n_pairs"] == 40 and res["consistent"] == 20 and res["consistency"] == 0.5
    assert res["both_first"] == 15 and res["both_second"] == 5
    # one pair per item, no repetition: the item bootstrap is close to the binomial (Wilson) interval
    lo, hi = proportion_confint(20, 40, alpha=0.05, method="wilson")
    assert res["consistency_ci_low"] == pytest.approx(lo, abs=0.04) and res["consistency_ci_high"] == pytest.approx(
        hi, abs=0.04)
    # first picks: 12 + 8 (one each) + 2 * 15 = 50 of 80 judgements
    assert res["first_position_rate"] == pytest.approx(50 / 80)
    assert res["first_ci_low"] < 50 / 80 < res["first_ci_high"]
    assert json.loads(res["excluded"]) == {"unpaired": 3}


def test_always_first_judge():
    res = judge_consistency(judge_log([(1, 1)] * 10), n_resamples=100, rng=0).to_frame().iloc[0]
    assert res["consistency"] == 0 and res["first_position_rate"] == 1 and res["both_first_rate"] == 1


def test_choice_log_validation_names_rows():
    ok = {"item_id": "a", "n_options": 2, "options": json.dumps(["x", "y"]), "status": "ok", "chosen_position": 1}
    with pytest.raises(SelectionLogError, match=r"<frame>:2:chosen_position: expected a position in 1\.\.2"):
        ChoiceLog.from_frame(pd.DataFrame([ok, {**ok, "item_id": "b", "chosen_position": 3}]))
    with pytest.raises(SelectionLogError, match="missing for an 'ok' row"):
        ChoiceLog.from_frame(pd.DataFrame([{**ok, "chosen_position": None}]))
    with pytest.raises(SelectionLogError, match=r"<frame>:2:item_id: duplicate presentation of item 'a'"):
        ChoiceLog.from_frame(pd.DataFrame([ok, ok]))
    with pytest.raises(SelectionLogError, match="expected one of"):
        ChoiceLog.from_frame(pd.DataFrame([{**ok, "status": "weird"}]))
    with pytest.raises(SelectionLogError, match="does not match the 3 options"):
        ChoiceLog.from_frame(pd.DataFrame([{**ok, "options": json.dumps(["x", "y", "z"])}]))


def test_choice_study_manifest_errors(tmp_path):
    m = tmp_path / "s.toml"
    m.write_text('format = "csv"\n[[logs]]\npath = "nope.jsonl"\nscore = "acc"\n', encoding="utf-8")
    with pytest.raises(ManifestError, match=r"logs\[1\]:format: expected one of"):
        read_choice_study(m)
    m.write_text('format = "inspect"\n[[logs]]\npath = "nope.eval"\nscore = "acc"\n', encoding="utf-8")
    with pytest.raises(ManifestError) as exc:
        read_choice_study(m)
    assert "takes no 'score' option" in str(exc.value) and "file not found" in str(exc.value)


def test_choice_table_study(tmp_path):
    log = mc_log([1, 2, 3, 4], [1, 1, 1, 1])
    log.write(tmp_path / "t.parquet")
    (tmp_path / "s.toml").write_text('format = "choice_table"\n[[logs]]\npath = "t.parquet"\n', encoding="utf-8")
    back = read_choice_study(tmp_path / "s.toml")
    assert len(back) == 4
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert option_position_bias(tmp_path / "s.toml", n_resamples=0, n_null=0).to_frame()["mean_over_runs"].iloc[0] \
            == pytest.approx(0.75)
