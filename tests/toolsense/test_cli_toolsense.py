"""`toolbias-stats toolsense ...`: strict JSON, documented keys, errors exit 2 and write nothing."""

from __future__ import annotations

import json

import pytest

from toolbias_stats.cli._commands import main

from .conftest import write_jsonl


def strict(text):
    def bad(name):
        raise ValueError(f"non-standard JSON constant {name}")

    return json.loads(text, parse_constant=bad)


def test_score_rrb_json(rrb_file, pred_file, capsys):
    assert main(["toolsense", "score", "--benchmark", "rrb", "--benchmark-file", str(rrb_file), "--predictions",
                 str(pred_file), "--k", "1,3", "--bootstrap", "200", "--json"]) == 0
    out = strict(capsys.readouterr().out)
    assert {r["tier"] for r in out["rows"]} == {"easy", "medium", "hard", "all"}
    row = next(r for r in out["rows"] if r["tier"] == "all" and r["k"] == 3)
    assert row["n"] == 6 and row["rc"]["estimate"] == pytest.approx(5 / 6) and row["is"]["estimate"] == 0.6
    assert set(row["rc"]) >= {"estimate", "ci"} and len(row["is"]["ci"]) == 2
    med = next(r for r in out["rows"] if r["tier"] == "medium" and r["k"] == 1)
    assert med["is"]["ci"] == [0.0, None]  # [0, inf): infinity is null in strict JSON
    assert out["invalid"]["free"]["invalid"] == 1


def test_score_two_configs_and_absent_decoding(rrb_file, pred_file, tmp_path, capsys):
    recs = [json.loads(line) for line in pred_file.read_text().splitlines()]
    only_c = write_jsonl(tmp_path / "c.jsonl", [{"sample_id": r["sample_id"], "constrained": r["constrained"]}
                                                for r in recs])
    assert main(["toolsense", "score", "--benchmark", "rrb", "--benchmark-file", str(rrb_file), "--predictions",
                 f"full={pred_file}", "--predictions", f"conly={only_c}", "--k", "1", "--bootstrap", "50",
                 "--json"]) == 0
    out = strict(capsys.readouterr().out)
    conly = next(c for c in out["configurations"] if c["name"] == "conly")
    assert all(r["rf"] is None and r["is"] is None for r in conly["rows"])
    assert out["comparisons"] and {"p_mcnemar", "p_holm", "ci_low"} <= set(out["comparisons"][0])


def test_score_mcq_json(mcq_file, tmp_path, capsys):
    p = write_jsonl(tmp_path / "p.jsonl", [{"id": f"q{i}", "answer": "right 0" if i == 0 else f"w{i}a"}
                                           for i in range(8)])
    assert main(["toolsense", "score", "--benchmark", "mcq", "--benchmark-file", str(mcq_file), "--predictions",
                 str(p), "--json"]) == 0
    out = strict(capsys.readouterr().out)
    assert out["n"] == 8 and out["accuracy"]["estimate"] == 1 / 8 and out["chance"] == 0.25
    assert 0 <= out["p_value"] <= 1 and len(out["accuracy"]["ci"]) == 2


def test_agreement_json(tmp_path, capsys):
    p = tmp_path / "ann.csv"
    rows = ["item_id,rater,label,benchmark"]
    for i in range(12):
        for r in range(3):
            rows.append(f"i{i},r{r},{'yes' if (i + (r == 2 and i % 4 == 0)) % 3 else 'no'},{'qa' if i < 6 else 'mcq'}")
    p.write_text("\n".join(rows) + "\n")
    assert main(["toolsense", "agreement", str(p), "--bootstrap", "100", "--json"]) == 0
    out = strict(capsys.readouterr().out)
    assert [g["group"] for g in out["groups"]] == ["all", "benchmark=mcq", "benchmark=qa"]
    assert {"fleiss_kappa", "gwet_ac1", "krippendorff_alpha"} <= set(out["groups"][0])


def test_errors_exit_2_and_write_nothing(rrb_file, tmp_path, capsys):
    p = write_jsonl(tmp_path / "p.jsonl", [{"sample_id": "ghost", "constrained": ["x&&go"]}])
    out = tmp_path / "r.html"
    assert main(["toolsense", "report", "--out", str(out), "--predictions", str(p), "--k", "1"]) == 2
    err = capsys.readouterr().err
    assert "p.jsonl:1:sample_id: id 'ghost' is not in the benchmark RRB" in err
    assert not out.exists()
    assert main(["toolsense", "score", "--benchmark", "rrb", "--benchmark-file", str(rrb_file), "--predictions",
                 str(p), "--json"]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and "ghost" in captured.err
    ann = tmp_path / "a.csv"
    ann.write_text("item_id,rater,label\nq,a,1\nq,a,0\n")
    assert main(["toolsense", "agreement", str(ann)]) == 2
    assert "a.csv:3:label: rater 'a' gives item 'q' a second label" in capsys.readouterr().err


def test_report_html(rrb_file, pred_file, qa_file, tmp_path, capsys):
    out = tmp_path / "ts.html"
    ann = tmp_path / "ann.csv"
    ann.write_text("item_id,rater,label\n" + "".join(f"i{i},r{r},{(i * r) % 2}\n" for i in range(6) for r in range(3)))
    # the report reads the vendored benchmarks; score the fixture through the Python API instead
    import toolbias_stats.toolsense as ts
    from toolbias_stats.report._toolsense_html import render_toolsense_report

    bench = ts.read_rrb(rrb_file)
    res = ts.retrieval_recall(bench, {"a<b>": ts.read_rrb_predictions(pred_file, bench)}, k=[1, 3],
                              n_resamples=100, rng=0)
    qa = ts.read_probe("qa", qa_file)
    import pandas as pd

    probe = ts.probe_accuracy(qa, pd.DataFrame({"id": qa.items["id"], "answer": "Yes"}))
    html = render_toolsense_report(retrieval=res, probes={("qa", "m"): probe},
                                   agreement=ts.agreement(ts.read_annotations(ann), n_resamples=50, rng=0))
    assert "<svg" in html and "a&lt;b&gt;" in html and "a<b>" not in html and "<script" not in html
    assert "Krippendorff" in html and "Fieller" in html
    assert main(["toolsense", "report", "--out", str(out), "--annotations", str(ann), "--bootstrap", "50"]) == 0
    assert out.exists() and "Annotator agreement" in out.read_text()
