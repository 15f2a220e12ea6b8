"""Issue 21 "Nothing lost" / "Output safety" and issue 20 "Results people read outside notebooks".

Every writer: an output that is an input is refused (exit 2, input untouched); a folder, a read-only file, a full
disk, Ctrl-C leave one clear message, no temporary file and nothing partial; concurrent writers never share a
temporary name. Text output escapes terminal control sequences from the data; CSV output neutralises formula cells;
``--seed -1`` names ``--seed``. ``str(result)`` is the command's compact text; p-values print as ``p < 0.001``;
``--bootstrap 0`` announces no interval; ``--json | head`` ends quietly.
"""

from __future__ import annotations

import errno
import os
import re
import subprocess
import sys
import threading
from pathlib import Path

import pandas as pd
import pytest

import toolbias_stats._output as out_mod
from toolbias_stats._output import (
    OutputError,
    atomic_path,
    check_output,
    safe_cell,
    spreadsheet_safe,
    study_inputs,
    term_safe,
    write_text,
)
from toolbias_stats.cli._commands import main
from toolbias_stats.simulate import simulate_selection_log

ROOT = Path(__file__).resolve().parents[2]
EVIL = "evil\x1b]0;pwn\x07\x1b[2J\u202emodel"   # OSC title, clear screen, bidi override
FORMULAS = ['=HYPERLINK("http://evil.example","x")', "@SUM(A1:A2)", "+1+1", "-2+3"]


def _run(capsys, *argv):
    code = main([str(a) for a in argv])
    res = capsys.readouterr()
    return code, res.out, res.err


def _snapshot(folder: Path) -> dict:
    return {p.relative_to(folder).as_posix(): (p.read_bytes() if p.is_file() else None)
            for p in sorted(folder.rglob("*"))}


def _annotations(folder: Path) -> Path:
    p = folder / "ann.csv"
    p.write_text("item_id,rater,label\n" + "".join(f"i{i},r{r},{(i * r) % 2}\n" for i in range(6) for r in range(3)))
    return p


def _no_temp(folder: Path):
    left = [p.name for p in folder.rglob("*") if ".tmp" in p.name or p.name.endswith(".old")]
    assert not left, left


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    """A small table study (CSV log + catalog) whose model name carries terminal escape sequences, with two
    conditions (for `shift`)."""
    d = tmp_path_factory.mktemp("study")
    for cond, probs, seed in (("base", [5, 2, 1, 1, 1], 1), ("alt", [1, 1, 1, 1, 1], 2)):
        sim = simulate_selection_log(n_clusters=2, n_queries=8, n_runs=2, tool_probs=probs, model=EVIL, rng=seed)
        frame = sim.log.data.assign(condition=cond)
        frame.to_csv(d / f"log_{cond}.csv", index=False)
    sim.log.catalog.to_frame()[["tool_id", "cluster_id", "tool_name"]].to_csv(d / "catalog.csv", index=False)
    (d / "study.toml").write_text('format = "table"\ncatalog = "catalog.csv"\n'
                                  '[[logs]]\npath = "log_base.csv"\n[[logs]]\npath = "log_alt.csv"\n')
    return d


@pytest.fixture()
def copy(study, tmp_path):
    """A private copy of the study (tests that try to destroy inputs)."""
    d = tmp_path / "s"
    d.mkdir()
    for p in study.iterdir():
        (d / p.name).write_bytes(p.read_bytes())
    return d


FAST = ("--bootstrap", "20", "--null", "20")


# -- the output is an input ----------------------------------------------------------------------------------------
class TestOutputIsInput:
    @pytest.mark.parametrize("target", ["log_base.csv", "study.toml", "catalog.csv"])
    def test_report_refuses_an_input(self, capsys, copy, target):
        before = _snapshot(copy)
        code, out, err = _run(capsys, "report", copy / "study.toml", "--out", copy / target, *FAST)
        assert code == 2 and out == ""
        assert f"--out {copy / target} is an input of this command" in err and "Traceback" not in err
        assert _snapshot(copy) == before

    def test_symlink_and_hard_link_to_an_input(self, capsys, copy):
        (copy / "link.html").symlink_to(copy / "log_base.csv")
        os.link(copy / "catalog.csv", copy / "hard.html")
        before = _snapshot(copy)
        for name in ("link.html", "hard.html"):
            code, _, err = _run(capsys, "report", copy / "study.toml", "--out", copy / name, *FAST)
            assert code == 2 and "is an input of this command" in err
        assert _snapshot(copy) == before

    def test_relative_and_dotted_spellings(self, capsys, copy, monkeypatch):
        monkeypatch.chdir(copy)
        before = _snapshot(copy)
        code, _, err = _run(capsys, "report", "study.toml", "--out", "./sub/../log_alt.csv", *FAST)
        assert code == 2 and "is an input" in err
        assert _snapshot(copy) == before

    def test_features_refuses_the_catalog(self, capsys, copy):
        before = _snapshot(copy)
        code, _, err = _run(capsys, "features", copy / "study.toml", "--no-similarity", "--out", copy / "catalog.csv")
        assert code == 2 and "is an input of this command (the manifest's catalog" in err
        assert _snapshot(copy) == before

    def test_toolsense_report_refuses_its_predictions(self, capsys, tmp_path):
        preds = tmp_path / "mcq.jsonl"
        preds.write_text('{"id": 1, "answer": "A"}\n')
        before = preds.read_bytes()
        code, _, err = _run(capsys, "toolsense", "report", "--mcq", preds, "--out", preds)
        assert code == 2 and "is an input of this command (--mcq input" in err
        assert preds.read_bytes() == before

    def test_shadow_report_refuses_a_link_to_its_calls(self, capsys, tmp_path):
        shadow = ROOT / "data" / "shadow"
        for name in ("manifest.json", "calls.csv", "labels.csv"):
            (tmp_path / name).write_bytes((shadow / name).read_bytes())
        (tmp_path / "calls.html").symlink_to(tmp_path / "calls.csv")
        before = _snapshot(tmp_path)
        code, _, err = _run(capsys, "shadow", "--manifest", tmp_path / "manifest.json", "--calls",
                            tmp_path / "calls.csv", "--labels", tmp_path / "labels.csv", "--report",
                            tmp_path / "calls.html", "--bootstrap", "10", "--weight-draws", "10", "--no-similarity")
        assert code == 2 and "--report" in err and "is an input of this command (--calls input" in err
        assert _snapshot(tmp_path) == before

    def test_bayes_idata_refuses_before_fitting(self, capsys, copy):
        (copy / "fit.nc").symlink_to(copy / "log_base.csv")
        before = _snapshot(copy)
        code, _, err = _run(capsys, "bayes", copy / "study.toml", "--idata", copy / "fit.nc", "--draws", "5")
        assert code == 2 and "--idata" in err and "is an input" in err
        assert _snapshot(copy) == before

    def test_qmd_folder_containing_an_input(self, capsys, copy):
        before = _snapshot(copy)
        code, _, err = _run(capsys, "report", copy / "study.toml", "--format", "qmd", "--out", copy)
        assert code == 2 and "contains an input of this command" in err
        assert _snapshot(copy) == before

    def test_study_inputs_expand_globs(self, tmp_path):
        (tmp_path / "parts").mkdir()
        for i in range(3):
            (tmp_path / "parts" / f"p{i}.parquet").write_bytes(b"x")
        (tmp_path / "s.toml").write_text('format = "table"\n[[logs]]\npath = "parts/*.parquet"\n')
        with pytest.raises(OutputError, match="is an input"):
            check_output(tmp_path / "parts" / "p1.parquet", study_inputs(tmp_path / "s.toml"))

    def test_study_inputs_lists_every_named_file(self):
        names = {p.name for p, _ in study_inputs(ROOT / "data" / "biasbusters" / "study.toml")}
        assert {"study.toml", "clusters.json", "api_meta.json", "cluster_names.json", "queries.json",
                "tool_dates.csv", "api_selection_stats_claude.json", "base_model"} <= names


# -- writing ---------------------------------------------------------------------------------------------------
class TestWriting:
    def test_out_is_a_folder(self, capsys, copy, tmp_path):
        target = tmp_path / "dir"
        target.mkdir()
        code, _, err = _run(capsys, "report", copy / "study.toml", "--out", target, *FAST)
        assert code == 2 and f"--out {target} is a folder" in err and "Traceback" not in err
        _no_temp(tmp_path)
        assert list(target.iterdir()) == []

    def test_out_is_read_only(self, capsys, copy, tmp_path):
        target = tmp_path / "r.html"
        target.write_text("keep me")
        target.chmod(0o444)
        code, _, err = _run(capsys, "report", copy / "study.toml", "--out", target, *FAST)
        assert code == 2 and "is read-only" in err
        assert target.read_text() == "keep me"
        _no_temp(tmp_path)

    def test_unwritable_folder(self, capsys, copy, tmp_path, monkeypatch):
        def denied(*a, **k):
            raise PermissionError(errno.EACCES, "Permission denied")
        monkeypatch.setattr(out_mod.tempfile, "mkstemp", denied)
        code, _, err = _run(capsys, "report", copy / "study.toml", "--out", tmp_path / "r.html", *FAST)
        assert code == 2 and f"cannot write --out {tmp_path / 'r.html'}: permission denied" in err
        assert not (tmp_path / "r.html").exists()

    @pytest.mark.parametrize("command", ["report", "shadow", "toolsense", "features"])
    def test_full_disk_leaves_nothing(self, capsys, copy, tmp_path, monkeypatch, command):
        def full(*a, **k):
            raise OSError(errno.ENOSPC, "No space left on device")
        # the disk fills once the temporary file holds part of the output
        monkeypatch.setattr(out_mod.os, "fsync", full)
        monkeypatch.setattr(out_mod.os, "replace", full)
        target = tmp_path / ("r.csv" if command == "features" else "r.html")
        target.write_text("previous report")
        argv = {"report": ["report", copy / "study.toml", "--out", target, *FAST],
                "shadow": ["shadow", copy / "study.toml", "--report", target, "--bootstrap", "10", "--weight-draws",
                           "10", "--no-similarity"],
                "toolsense": ["toolsense", "report", "--annotations", _annotations(tmp_path), "--bootstrap", "20",
                              "--out", target],
                "features": ["features", copy / "study.toml", "--no-similarity", "--out", target]}[command]
        code, _, err = _run(capsys, *argv)
        assert code == 2, err
        assert "no space left on the device; nothing was written" in err and "Traceback" not in err
        assert target.read_text() == "previous report"
        _no_temp(tmp_path)

    def test_full_disk_qmd_leaves_no_folder(self, capsys, copy, tmp_path, monkeypatch):
        import shutil

        real = shutil.copyfile
        calls = []

        def filling(src, dst, *a, **k):   # the disk fills while the study's files are being copied
            calls.append(src)
            if len(calls) > 1:
                raise OSError(errno.ENOSPC, "No space left on device")
            return real(src, dst, *a, **k)
        monkeypatch.setattr(shutil, "copyfile", filling)
        target = tmp_path / "q"
        code, _, err = _run(capsys, "report", copy / "study.toml", "--format", "qmd", "--out", target)
        assert code == 2 and "no space left" in err and "Traceback" not in err
        assert not target.exists()
        _no_temp(tmp_path)

    def test_qmd_out_existing_file(self, capsys, copy, tmp_path):
        target = tmp_path / "existing.txt"
        target.write_text("mine")
        code, _, err = _run(capsys, "report", copy / "study.toml", "--format", "qmd", "--out", target)
        assert code == 2 and f"--out {target} exists and is not a folder" in err and "Traceback" not in err
        assert target.read_text() == "mine"

    def test_qmd_rewrites_a_folder_keeping_other_files(self, capsys, copy, tmp_path):
        target = tmp_path / "q"
        for _ in range(2):
            code, _, err = _run(capsys, "report", copy / "study.toml", "--format", "qmd", "--out", target)
            assert code == 0, err
            (target / "notes.txt").write_text("mine")
        assert (target / "report.qmd").is_file() and (target / "data" / "study.toml").is_file()
        assert (target / "notes.txt").read_text() == "mine"
        _no_temp(tmp_path)

    def test_ctrl_c_is_quiet_and_leaves_nothing(self, capsys, copy, tmp_path, monkeypatch):
        def interrupted(*a, **k):
            raise KeyboardInterrupt
        monkeypatch.setattr(out_mod.os, "fsync", interrupted)
        target = tmp_path / "r.html"
        code, out, err = _run(capsys, "report", copy / "study.toml", "--out", target, *FAST)
        assert code == 130 and out == ""
        assert "Traceback" not in err and "KeyboardInterrupt" not in err
        assert not target.exists()
        _no_temp(tmp_path)

    def test_concurrent_writers_use_distinct_temporary_names(self, tmp_path):
        target = tmp_path / "r.html"
        with atomic_path(target) as a, atomic_path(target) as b:
            assert a != b and a.parent == b.parent == tmp_path
            a.write_text("A" * 100_000)
            b.write_text("B" * 100_000)
        assert target.read_text() in ("A" * 100_000, "B" * 100_000)
        errors = []

        def writer(ch):
            try:
                for _ in range(20):
                    write_text(target, ch * 200_000)
            except Exception as exc:   # pragma: no cover - the failure this test guards against
                errors.append(exc)
        threads = [threading.Thread(target=writer, args=(c,)) for c in "XYZ"]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors
        text = target.read_text()
        assert len(text) == 200_000 and len(set(text)) == 1
        _no_temp(tmp_path)

    def test_new_file_gets_ordinary_permissions(self, tmp_path):
        write_text(tmp_path / "r.html", "x")
        mask = os.umask(0)
        os.umask(mask)
        assert (tmp_path / "r.html").stat().st_mode & 0o777 == 0o666 & ~mask

    def test_api_writers_are_atomic_and_check_folders(self, tmp_path, study):
        import toolbias_stats as tbs

        log = tbs.read_study(study / "study.toml", engine="pandas").log
        (tmp_path / "d.csv").mkdir()
        with pytest.raises(OutputError, match="is a folder"):
            log.write(tmp_path / "d.csv")
        log.write(tmp_path / "x.parquet")
        _no_temp(tmp_path)

    def test_check_output_messages(self, tmp_path):
        f = tmp_path / "in.csv"
        f.write_text("a\n")
        with pytest.raises(OutputError, match="is an input of this command"):
            check_output(tmp_path / "." / "in.csv", [(f, "the log")])
        with pytest.raises(OutputError, match="lies inside an input folder"):
            check_output(tmp_path / "x.html", [(tmp_path, "the logs folder")])


# -- untrusted text --------------------------------------------------------------------------------------------
def _assert_escaped(text):
    assert "\x1b" not in text and "\x07" not in text and "\u202e" not in text
    assert "\\x1b" in text


class TestTerminalEscaping:
    @pytest.mark.parametrize("argv", [
        ["bias", "{s}", *FAST],
        ["plan", "{s}", "--draws", "100", "--bootstrap", "0", "--queries", "10", "--runs", "1"],
        ["shift", "{s}", "--base", "base", "--bootstrap", "20", "--permutations", "20"],
        ["shadow", "{s}", "--bootstrap", "10", "--weight-draws", "10", "--no-similarity"],
        ["validate", "{s}"],
    ], ids=lambda a: a[0])
    def test_names_with_escape_sequences(self, capsys, study, argv):
        code, out, err = _run(capsys, *[str(study / "study.toml") if a == "{s}" else a for a in argv])
        assert code == 0, err
        _assert_escaped(out)

    def test_choice(self, capsys, tmp_path):
        logs = ROOT / "data" / "choice" / "logs"
        (tmp_path / "c.toml").write_text('format = "inspect"\n[[logs]]\npath = "%s"\nmodel = "evil\\u001b[2J\\u0007"\n'
                                         % (logs / "mc_rotated.eval"))
        code, out, err = _run(capsys, "choice", tmp_path / "c.toml", "--bootstrap", "20", "--null", "20")
        assert code == 0, err
        _assert_escaped(out)

    def test_error_messages(self, capsys, tmp_path):
        code, _, err = _run(capsys, "bias", tmp_path / "no\x1b[2Jsuch.toml")
        assert code == 2 and "\x1b" not in err and "\\x1b" in err

    def test_term_safe(self):
        assert term_safe("a\x1b[31mb\r\x08\u200bc\nd") == "a\\x1b[31mb\\r\\x08\\u200bc\nd"
        assert term_safe("Café – ok") == "Café – ok"


class TestFormulaCells:
    def test_cells(self):
        assert [safe_cell(v) for v in FORMULAS] == ["'" + v for v in FORMULAS]
        assert safe_cell("tool") == "tool" and safe_cell(-1) == -1 and safe_cell(None) is None
        frame = spreadsheet_safe(pd.DataFrame({"t": FORMULAS, "n": [-1, 2, 3, 4]}))
        assert frame["t"].str.startswith("'").all() and frame["n"].tolist() == [-1, 2, 3, 4]

    @pytest.fixture()
    def formula_study(self, tmp_path):
        sim = simulate_selection_log(n_clusters=1, n_queries=4, n_tools=4, rng=3)
        ids = dict(zip(sim.log.catalog.tools("1"), FORMULAS))   # tool ids that a spreadsheet would run
        cat = sim.log.catalog.to_frame()[["tool_id", "cluster_id"]]
        cat["tool_id"] = cat["tool_id"].map(ids)
        cat.to_csv(tmp_path / "catalog.csv", index=False)
        data = sim.log.data.copy()
        data["chosen_tool"] = data["chosen_tool"].map(ids)
        data["ordering"] = data["ordering"].map(lambda o: "|".join(ids[t] for t in o.split("|")))
        data.to_csv(tmp_path / "log.csv", index=False)
        (tmp_path / "study.toml").write_text('format = "table"\ncatalog = "catalog.csv"\n[[logs]]\npath = "log.csv"\n')
        return tmp_path

    def test_features_csv_file_and_stdout(self, capsys, formula_study):
        out_csv = formula_study / "f.csv"
        code, _, err = _run(capsys, "features", formula_study / "study.toml", "--no-similarity", "--out", out_csv)
        assert code == 0, err
        raw = out_csv.read_text()
        for v in FORMULAS:
            assert f"'{v}" in raw or f"\"'{v.replace(chr(34), chr(34) * 2)}\"" in raw
        names = set(pd.read_csv(out_csv)["tool_id"])
        assert names == {"'" + v for v in FORMULAS}
        code, out, _ = _run(capsys, "features", formula_study / "study.toml", "--no-similarity")
        assert code == 0 and set(pd.read_csv(__import__("io").StringIO(out))["tool_id"]) == names
        # Parquet stays raw
        code, _, err = _run(capsys, "features", formula_study / "study.toml", "--no-similarity", "--out",
                            formula_study / "f.parquet")
        assert code == 0, err
        assert set(pd.read_parquet(formula_study / "f.parquet")["tool_id"]) == set(FORMULAS)

    def test_selection_log_csv(self, tmp_path):
        import toolbias_stats as tbs

        sim = simulate_selection_log(n_clusters=1, n_queries=2, rng=0)
        data = sim.log.data.copy()
        data["raw_choice"] = pd.array(["=cmd|' /C calc'!A0"] * len(data), dtype="string")
        log = tbs.SelectionLog(data, sim.log.catalog)
        frame = pd.read_csv(log.write(tmp_path / "l.csv"))
        assert (frame["raw_choice"] == "'=cmd|' /C calc'!A0").all()
        assert (pd.read_json(log.write(tmp_path / "l.jsonl"), lines=True)["raw_choice"] == "=cmd|' /C calc'!A0").all()


# -- --seed --------------------------------------------------------------------------------------------------------
SEEDED = [["bias", "s.toml"], ["report", "s.toml", "--out", "r.html"], ["explain", "s.toml"], ["plan", "s.toml"],
          ["shift", "s.toml"], ["subsets", "p.jsonl"], ["choice", "s.toml"], ["bayes", "s.toml"],
          ["shadow", "s.toml"], ["toolsense", "score", "--benchmark", "mcq", "--predictions", "p.jsonl"],
          ["toolsense", "agreement", "a.csv"], ["toolsense", "baselines"], ["toolsense", "report", "--out", "r.html"]]


@pytest.mark.parametrize("argv", SEEDED, ids=lambda a: "-".join(a[:2]))
def test_negative_seed_names_the_option(capsys, argv):
    with pytest.raises(SystemExit) as exc:
        main(argv + ["--seed", "-1"])
    err = capsys.readouterr().err
    assert exc.value.code == 2
    assert "argument --seed: expected a non-negative integer, got '-1'" in err


def _seed_actions(parser, path=()):
    import argparse

    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _seed_actions(sub, path + (name,))
        elif action.dest == "seed":
            yield " ".join(path), action


def test_every_seed_option_is_validated_by_the_parser():
    """Every sub-command's --seed (also those added later) uses the shared type that names the option."""
    from toolbias_stats.cli._commands import build_parser
    from toolbias_stats.cli._output import seed

    found = dict(_seed_actions(build_parser()))
    assert len(found) >= 13
    assert {cmd for cmd, action in found.items() if action.type is not seed} == set()


# -- results people read outside notebooks ---------------------------------------------------------------------
@pytest.fixture(scope="module")
def results(study):
    import warnings

    import toolbias_stats as tbs
    from toolbias_stats.experiments import selection_shift

    s = tbs.read_study(study / "study.toml", engine="pandas")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        bias = tbs.selection_bias(s.log, n_resamples=20, n_null=20, rng=1)
        shift = selection_shift(s.counts, between="condition", base="base", n_resamples=20, n_permutations=20,
                                rng=1)
        comps = tbs.variance_components(s.log, n_resamples=0, rng=1)
        plan = tbs.plan_study(comps, n_draws=100, queries=[10], runs=[1], rng=1)
    return {"bias": bias, "shift": shift, "plan": plan, "components": comps}


class TestPrintResult:
    def test_bias_prints_the_cli_table(self, results):
        from toolbias_stats._text import format_bias_table

        r = results["bias"]
        assert str(r) == term_safe(format_bias_table(r))
        assert str(r).startswith("Tool-selection bias") and len(str(r)) < 10_000
        assert repr(r).startswith("<BiasResult>\nTool-selection bias") and len(repr(r)) <= 2_000   # bounded repr
        _assert_escaped(str(r))

    def test_bundled_study_is_compact(self, bb_study):
        import warnings

        import toolbias_stats as tbs

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            r = tbs.selection_bias(bb_study.counts, n_resamples=0, n_null=0)
        assert len(str(r)) < 8_000 and "BiasResult(" not in str(r)
        assert len(repr(r)) <= 2_000 and "more lines; str(result) has all" in repr(r)   # bounded repr

    def test_same_text_as_the_cli(self, capsys, study, results):
        from toolbias_stats._text import format_plan_text, format_shift_text

        assert str(results["shift"]) == term_safe(format_shift_text(results["shift"]))
        assert str(results["plan"]) == term_safe(format_plan_text(results["plan"].components, results["plan"]))
        code, out, _ = _run(capsys, "shift", study / "study.toml", "--base", "base", "--bootstrap", "20",
                            "--permutations", "20", "--seed", "1")
        assert code == 0 and out.rstrip("\n") == str(results["shift"])

    def test_every_exported_result_prints_compactly(self, results):
        r = results["components"]
        text = str(r)
        assert text.startswith("VarianceComponents (") and "VarianceComponents(" not in text and len(text) < 10_000

    def test_shadow_and_choice(self, study):
        import warnings

        import toolbias_stats as tbs
        from toolbias_stats._text import format_choice_position_text
        from toolbias_stats.shadow import audit_from_study

        s = tbs.read_study(study / "study.toml", engine="pandas")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            sh = tbs.tool_shadow(audit_from_study(s), n_resamples=10, n_weight_draws=10, encoder=False, rng=1)
            log = tbs.read_choice_study(ROOT / "data" / "choice" / "choice_study.toml")
            pos = tbs.option_position_bias(log, n_resamples=0, n_null=50, rng=1)
        assert str(sh).startswith("TOOL-SHADOW v1") and len(str(sh)) < 20_000
        assert str(pos) == format_choice_position_text(pos)


class TestPValues:
    def test_choice_p_value_format(self, capsys):
        code, out, _ = _run(capsys, "choice", ROOT / "data" / "choice" / "choice_study.toml", "--bootstrap", "0",
                            "--null", "2000")
        assert code == 0
        assert not re.search(r"p = \d\.\d{4}", out)          # was "p = 0.0005"
        assert "p < 0.001" in out

    def test_generic_tables(self):
        from toolbias_stats._display import frame_html, frame_text

        frame = pd.DataFrame({"feature": ["a"], "r": [0.5], "p_value": [1e-12], "p_bh": [0.0004], "spearman_p": [0.2]})
        text = frame_text(frame, title="t")
        assert "0.000" not in text and text.count("< 0.001") == 2 and "0.200" in text
        assert "&lt; 0.001" in frame_html(frame, title="t")


class TestBootstrapZero:
    def test_bias_text(self, capsys, study):
        code, out, _ = _run(capsys, "bias", study / "study.toml", "--bootstrap", "0", "--null", "20")
        assert code == 0
        assert "0 query-bootstrap replicates" not in out and "none CI" not in out and "95% CIs" not in out
        assert "no query-bootstrap (--n-resamples 0): point estimates only, no CIs" in out

    def test_choice_text(self, capsys):
        code, out, _ = _run(capsys, "choice", ROOT / "data" / "choice" / "choice_study.toml", "--bootstrap", "0",
                            "--null", "20")
        assert code == 0 and "(0 replicates" not in out and "95% CIs" not in out and "[nan" not in out


def test_json_into_a_closed_pipe_ends_quietly(study):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen([sys.executable, "-m", "toolbias_stats.cli", "bias", str(study / "study.toml"),
                             "--json", *FAST], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    proc.stdout.close()   # `| head` that has already exited
    err = proc.stderr.read().decode()
    code = proc.wait(timeout=300)
    assert "Traceback" not in err and "BrokenPipeError" not in err and "Exception ignored" not in err, err
    assert code == 141
