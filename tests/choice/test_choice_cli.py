"""`toolbias-stats choice`: wiring of the choice statistics, on the shipped example study (real Inspect logs)."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest

from toolbias_stats.cli._commands import main

ROOT = Path(__file__).resolve().parents[2]
STUDY = ROOT / "data" / "choice" / "choice_study.toml"


def assert_one_json_shape(node, where="$"):
    """Issue 36: every interval is `...ci: [low, high]` and no string holds JSON."""
    if isinstance(node, dict):
        bad = [k for k in node if k.endswith(("_low", "_high"))]
        assert not bad, f"{where}: interval bounds as separate keys {bad}"
        for k, v in node.items():
            if k == "ci" or k.endswith("_ci"):
                assert isinstance(v, list) and len(v) == 2, f"{where}.{k}: {v!r}"
            assert_one_json_shape(v, f"{where}.{k}")
    elif isinstance(node, list):
        for i, v in enumerate(node):
            assert_one_json_shape(v, f"{where}[{i}]")
    elif isinstance(node, str) and node[:1] in "{[":
        with pytest.raises(ValueError):
            json.loads(node)


def test_choice_json_matches_the_functions(capsys):
    pytest.importorskip("inspect_ai")
    from toolbias_stats.choice import judge_consistency, option_position_bias, read_choice_study

    assert main(["choice", str(STUDY), "--by", "model,condition", "--bootstrap", "100", "--null", "100",
                 "--seed", "3", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out) >= {"study", "rows", "position_bias", "accuracy", "judge", "warnings"}
    assert sum(r["total"] for r in out["rows"]) == 520
    log = read_choice_study(STUDY)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pb = option_position_bias(log, by=["model", "condition"], n_resamples=100, n_null=100, rng=3).to_frame()
        jc = judge_consistency(log, by=["model", "condition"], n_resamples=100, rng=3).to_frame()
    got = {r["condition"]: r["mean_over_runs"] for r in out["position_bias"]["delta_pos"]}
    assert got == pytest.approx(dict(zip(pb["condition"], pb["mean_over_runs"])))
    assert_one_json_shape(out)
    judge = {g["condition"]: g for g in out["judge"]["groups"]}
    assert judge["judge_pairs"]["consistency"] == pytest.approx(
        float(jc.set_index("condition").at["judge_pairs", "consistency"]))


def test_choice_text_output(capsys):
    pytest.importorskip("inspect_ai")
    assert main(["choice", str(STUDY), "--by", "condition", "--bootstrap", "50", "--null", "50"]) == 0
    text = capsys.readouterr().out
    assert "Answer-position bias" in text and "Accuracy by gold position" in text
    assert "Pairwise judge position bias" in text and "60 pairs" in text and "preference score" in text


def test_choice_bad_manifest_is_a_clean_error(tmp_path, capsys):
    m = tmp_path / "s.toml"
    m.write_text('format = "lm_eval"\n[[logs]]\npath = "missing.jsonl"\nmodel = "m"\n', encoding="utf-8")
    assert main(["choice", str(m)]) == 2
    assert "file not found" in capsys.readouterr().err


def _judge_table_study(tmp_path):
    """A choice_table judge study with two conditions, ties included (issue 36: validate and shift read it)."""
    import numpy as np
    import pandas as pd

    from toolbias_stats.choice import ChoiceLog

    rng = np.random.default_rng(3)
    rows = []
    for cond, p_first in (("a", 0.5), ("b", 0.8)):
        for i in range(30):
            for order in ((f"x{i}", f"y{i}"), (f"y{i}", f"x{i}")):
                u = rng.random()
                st, pos = ("tie", None) if u < 0.1 else ("ok", 1 if u < 0.1 + 0.9 * p_first else 2)
                rows.append({"model": "judge", "condition": cond, "item_id": f"p{i}", "n_options": 2,
                             "options": json.dumps(order), "question": f"q{i}", "status": st, "chosen_position": pos})
    ChoiceLog.from_frame(pd.DataFrame(rows)).write(tmp_path / "judge.csv")
    m = tmp_path / "study.toml"
    m.write_text('name = "judge study"\nformat = "choice_table"\n[[logs]]\npath = "judge.csv"\n', encoding="utf-8")
    return m, pd.DataFrame(rows)


def test_validate_and_shift_accept_a_choice_manifest(tmp_path, capsys):
    m, frame = _judge_table_study(tmp_path)
    assert main(["validate", str(m), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["kind"] == "choice" and out["rows"] == len(frame) and out["unit"] == "item" and out["n_units"] == 30
    assert out["by_status"] == frame["status"].value_counts().to_dict()
    assert main(["validate", str(m)]) == 0
    text = capsys.readouterr().out
    assert "unit = item (30 items)" in text and "tie" in text
    assert main(["shift", str(m), "--base", "a", "--bootstrap", "50", "--permutations", "50", "--json"]) == 0
    sh = json.loads(capsys.readouterr().out)
    assert sh["kind"] == "choice" and sh["unit"] == "item"
    ok = frame[frame["status"] == "ok"]
    share = ok.groupby("condition")["chosen_position"].apply(lambda s: (s == 1).mean())
    assert_one_json_shape(sh)
    assert abs(share["b"] - share["a"]) > 0.1      # the level judges more by position


def test_choice_json_judge_block_with_ties(tmp_path, capsys):
    m, _ = _judge_table_study(tmp_path)
    assert main(["choice", str(m), "--by", "condition", "--bootstrap", "50", "--null", "50", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert_one_json_shape(out)
    g = {r["condition"]: r for r in out["judge"]["groups"]}
    assert out["judge"]["unit"] == "item" and g["a"]["n_units"] == 30
    for r in g.values():
        assert {"consistency", "consistency_ci", "primacy_share", "recency_share", "preference_score",
                "preference_score_ci", "tie_rate", "repetition_stability", "excluded"} <= set(r)
        assert r["primacy_preferred"] + r["recency_preferred"] + r["consistent"] == r["n_pairs"]
        assert isinstance(r["excluded"], dict)
    assert g["b"]["preference_score"] < g["a"]["preference_score"]


def test_validate_notes_letter_continuations(tmp_path, capsys):
    lines = []
    for q in range(3):
        texts = [f"t{q}{j}" for j in range(3)]
        for r in range(3):
            shown = texts[r:] + texts[:r]
            ctx = f"Q{q}" + "".join(f"\n{L}. {t}" for L, t in zip("ABC", shown)) + "\nAnswer:"
            lines.append(json.dumps({"doc_id": 3 * q + r, "doc": {"item": f"q{q}", "choices": shown, "answer": 0},
                                     "target": 0, "arguments": {f"gen_args_{i}": {"arg_0": ctx, "arg_1": f" {L}"}
                                                                for i, L in enumerate("ABC")},
                                     "resps": [[["-1.0", "False"]], [["-2.0", "False"]], [["-3.0", "False"]]],
                                     "filtered_resps": [["-1.0", "False"], ["-2.0", "False"], ["-3.0", "False"]],
                                     "filter": "none", "metrics": ["acc"], "acc": 1.0}))
    (tmp_path / "samples_mc_2025-01-01T00-00-00.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    m = tmp_path / "s.toml"
    m.write_text('format = "lm_eval"\n[[logs]]\npath = "samples_mc_2025-01-01T00-00-00.jsonl"\nmodel = "m"\n',
                 encoding="utf-8")
    assert main(["validate", str(m)]) == 0
    assert 'add options = "doc.choices"' in capsys.readouterr().out
