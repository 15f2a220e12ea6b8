"""lm-eval ``--output_path`` folders (issue 20), on a folder written by lm-evaluation-harness 0.4.13 itself.

tests/io/fixtures/lm_eval_output/out was produced by ``make_fixture.py`` there: lm-eval's ``simple_evaluate`` and
``EvaluationTracker`` (what ``lm_eval --log_samples --output_path out`` runs) on two local multiple-choice tasks that
show every question in every rotation of its options (``doc.item`` names the question), for two models. Expected
values are recomputed here from the raw JSON lines with pandas, never copied from the reader's output.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from toolbias_stats.choice import option_position_bias, read_choice_study
from toolbias_stats.cli._commands import main
from toolbias_stats.exceptions import ManifestError, SelectionLogError
from toolbias_stats.io import read_study
from toolbias_stats.io.readers.lm_eval import read_lm_eval

OUT = Path(__file__).resolve().parent / "fixtures" / "lm_eval_output" / "out"


def raw_rows(root=OUT) -> pd.DataFrame:
    """The answers straight from the files: model from results_*.json, task from the file name, argmax of lls."""
    rows = []
    for f in sorted(root.rglob("samples_*.jsonl")):
        date = f.stem.rsplit("_", 1)[1]
        model = json.loads((f.parent / f"results_{date}.json").read_text())["model_name"]
        task = f.stem[len("samples_"):].rsplit("_", 1)[0]
        for line in f.read_text(encoding="utf-8").splitlines():
            rec = json.loads(line)
            lls = [float(r[0]) for r in rec["filtered_resps"]]
            rows.append({"model": model, "task": task, "item": rec["doc"]["item"], "doc_id": rec["doc_id"],
                         "k": len(lls), "pos": int(np.argmax(lls)) + 1})
    return pd.DataFrame(rows)


def test_folder_reads_every_samples_file_with_models_from_results():
    raw = raw_rows()
    log = read_lm_eval(OUT, item="doc.item")
    d = log.data
    assert len(d) == len(raw) == 100 and set(d["status"]) == {"ok"}          # rows in = used + excluded (0)
    assert d.groupby("model").size().to_dict() == raw.groupby("model").size().to_dict() == \
        {"org/fair": 50, "org/first-biased": 50}
    assert set(d["task"]) == {"tool_mcq_weather", "tool_mcq_geocode"}
    key = ["model", "task", "item_id"]
    got = d.assign(pos=d["chosen_position"].astype(int)).sort_values(key + ["source_row"])
    exp = raw.rename(columns={"item": "item_id"}).sort_values(key + ["doc_id"])
    np.testing.assert_array_equal(got["pos"].to_numpy(), exp["pos"].to_numpy())
    assert {v["model_from"].endswith(".json") for v in log.diagnostics.values()} == {True}
    assert len(log.diagnostics) == 4


def test_item_key_makes_rotations_one_resampling_unit():
    raw = raw_rows()
    slog = read_lm_eval(OUT, item="doc.item").to_selection_log()
    q = slog.data.groupby(["model", "cluster_id"])["query_id"].nunique().to_dict()
    assert q == {(m, c): n for m in ("org/fair", "org/first-biased") for c, n in (("K=3", 6), ("K=4", 8))}
    assert q[("org/fair", "K=4")] == raw[(raw.model == "org/fair") & (raw.k == 4)]["item"].nunique()
    # without the key every line is its own unit, qualified by its task (doc ids restart in every task)
    plain = read_lm_eval(OUT).data
    assert plain.groupby("model")["item_id"].nunique().to_dict() == {"org/fair": 50, "org/first-biased": 50}
    assert plain["item_id"].str.match(r"^tool_mcq_(weather|geocode):\d+$").all()


def test_delta_pos_equals_a_direct_pandas_computation():
    raw = raw_rows()
    res = option_position_bias(read_lm_eval(OUT, item="doc.item"), n_resamples=50, n_null=50, rng=0)
    got = res.to_frame().set_index("model")["mean_over_runs"]
    for model, g in raw.groupby("model"):
        tvs = [0.5 * np.abs(gk["pos"].value_counts(normalize=True).reindex(range(1, k + 1), fill_value=0)
                            - 1 / k).sum() for k, gk in g.groupby("k")]
        assert got[model] == pytest.approx(np.mean(tvs))
    assert got["org/first-biased"] > 0.5 > got["org/fair"]


def test_glob_and_manifest_folder(tmp_path, capsys):
    d = read_lm_eval(str(OUT / "*" / "samples_tool_mcq_weather_*.jsonl"), item="doc.item").data
    assert len(d) == 64 and set(d["task"]) == {"tool_mcq_weather"}
    m = tmp_path / "mc.toml"
    m.write_text(f'format = "lm_eval"\nitem = "doc.item"\n[[logs]]\npath = "{OUT.as_posix()}"\n', encoding="utf-8")
    log = read_choice_study(m)
    assert len(log) == 100 and log.data["item_id"].nunique() == 14
    g = tmp_path / "glob.toml"
    g.write_text(f'format = "lm_eval"\n[[logs]]\npath = "{OUT.as_posix()}/org__fair/samples_*.jsonl"\n',
                 encoding="utf-8")
    assert len(read_choice_study(g)) == 50
    assert main(["choice", str(m), "--bootstrap", "50", "--null", "50", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert sum(r["total"] for r in out["rows"]) == 100


def test_bias_on_a_multiple_choice_manifest_says_use_choice(tmp_path, capsys):
    m = tmp_path / "mc.toml"
    m.write_text(f'format = "lm_eval"\n[[logs]]\npath = "{OUT.as_posix()}"\n', encoding="utf-8")
    with pytest.raises(ManifestError, match=r"mc\.toml:format: format 'lm_eval' is a multiple-choice format"):
        read_study(m)
    assert main(["bias", str(m)]) == 2
    err = capsys.readouterr().err
    assert "toolbias-stats choice" in err and "Traceback" not in err and err.count("\n") == 1
    s = tmp_path / "insp.toml"
    s.write_text('format = "inspect"\nscorer = "choice"\n[[logs]]\npath = "x.eval"\n', encoding="utf-8")
    assert main(["bias", str(s)]) == 2
    assert "insp.toml:scorer:" in capsys.readouterr().err


def copy_out(tmp_path) -> Path:
    dst = tmp_path / "out"
    shutil.copytree(OUT, dst)
    return dst


def test_missing_item_field_names_file_line_and_field(tmp_path):
    out = copy_out(tmp_path)
    f = sorted(out.glob("org__fair/samples_tool_mcq_geocode_*.jsonl"))[0]
    lines = f.read_text(encoding="utf-8").splitlines()
    rec = json.loads(lines[2])
    del rec["doc"]["item"]
    lines[2] = json.dumps(rec)
    f.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(SelectionLogError, match=rf"{f.name}:3:doc\.item: missing key 'doc\.item'"):
        read_lm_eval(out, item="doc.item")


def test_same_task_twice_no_model_and_empty_folder(tmp_path):
    out = copy_out(tmp_path)
    f = sorted(out.glob("org__fair/samples_tool_mcq_geocode_*.jsonl"))[0]
    shutil.copy(f, f.with_name("samples_tool_mcq_geocode_2027-01-01T00-00-00.000000.jsonl"))  # a second evaluation
    res = sorted(out.glob("org__fair/results_*.json"))[0]
    shutil.copy(res, res.with_name("results_2027-01-01T00-00-00.000000.json"))
    with pytest.raises(SelectionLogError, match=r"2027-01-01T00-00-00\.000000\.jsonl:task: model 'org/fair' and "
                                                r"task 'tool_mcq_geocode' are also in"):
        read_lm_eval(out)
    lone = tmp_path / "lone"
    lone.mkdir()
    shutil.copy(f, lone / f.name)
    with pytest.raises(SelectionLogError, match=rf"{f.name}:model: lm-eval sample files do not name the model"):
        read_lm_eval(lone)
    assert read_lm_eval(lone, meta={"model": "m"}).data["model"].unique().tolist() == ["m"]
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(SelectionLogError, match="folder holds no lm-eval samples"):
        read_lm_eval(empty)
    with pytest.raises(SelectionLogError, match="no file matches this pattern"):
        read_lm_eval(str(empty / "*.jsonl"))


def test_two_entries_with_different_tasks_do_not_share_doc_ids(tmp_path):
    # doc ids restart in every task: without `item`, entries of different tasks give task-qualified item ids
    m = tmp_path / "two.toml"
    m.write_text(f'format = "lm_eval"\n[[logs]]\npath = "{OUT.as_posix()}/org__fair/samples_tool_mcq_weather_*"\n'
                 f'[[logs]]\npath = "{OUT.as_posix()}/org__fair/samples_tool_mcq_geocode_*"\n', encoding="utf-8")
    d = read_choice_study(m).data
    assert len(d) == 50 and d["item_id"].nunique() == 50
    assert d["item_id"].str.match(r"^tool_mcq_(weather|geocode):\d+$").all()
    one = tmp_path / "one.toml"
    one.write_text(f'format = "lm_eval"\n[[logs]]\npath = "{OUT.as_posix()}/org__fair/samples_tool_mcq_weather_*"\n',
                   encoding="utf-8")
    assert read_choice_study(one).data["item_id"].iloc[0] == "0"           # one task: the doc_id as before
