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
