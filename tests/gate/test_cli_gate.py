"""``toolbias-stats check`` / ``compare`` (issue 39): exit codes, JUnit XML read by a real JUnit parser and checked
against the schema's required elements, Markdown, JSON, and bad input (exit 2, one message, nothing written)."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import junitparser
import pytest

from toolbias_stats.cli._commands import main
from toolbias_stats.datasets import path as bundled

FAST = ["--n-resamples", "200", "--seed", "1"]


def _junit(path):
    """Parse with junitparser and check the elements and attributes the Ant/Jenkins JUnit schema requires."""
    xml = junitparser.JUnitXml.fromfile(str(path))
    root = ET.parse(path).getroot()
    assert root.tag == "testsuites"
    suites = list(root)
    assert suites and all(s.tag == "testsuite" for s in suites)
    for s in suites:
        for attr in ("name", "tests", "failures", "errors"):   # required by the schema
            assert attr in s.attrib, attr
        cases = s.findall("testcase")
        assert int(s.get("tests")) == len(cases)
        assert int(s.get("failures")) == sum(c.find("failure") is not None for c in cases)
        for c in cases:
            assert c.get("name") and c.get("classname")
            f = c.find("failure")
            if f is not None:
                assert f.get("message") and f.get("type")
    return xml


class TestCheckExitCodes:
    def test_biased_log_fails_with_junit_and_markdown(self, studies, tmp_path, capsys):
        junit, md = tmp_path / "gate.xml", tmp_path / "summary.md"
        code = main(["check", str(studies["biased"]), "--max-delta-pos", "0.1", "--max-delta-api", "0.1", *FAST,
                     "--junit", str(junit), "--markdown", str(md)])
        assert code == 1
        xml = _junit(junit)
        cases = [c for suite in xml for c in suite]
        assert [c.name for c in cases] == ["delta_api[model=simulated]", "delta_pos[model=simulated]"]
        failed = [c for c in cases if not c.is_passed]
        assert [c.name for c in failed] == ["delta_pos[model=simulated]"]
        msg = failed[0].result[0].message
        assert "delta_pos = " in msg and "wholly above the threshold 0.100" in msg and "95% CI [" in msg
        text = md.read_text()
        assert text.startswith("### Selection-bias gate (check): FAIL")
        assert "| simulated | delta_pos | 0.100 |" in text and "**FAIL**" in text
        assert "Rule exceeds:" in capsys.readouterr().out.replace("Rule `exceeds`", "")

    def test_fair_log_passes(self, studies, tmp_path, capsys):
        junit = tmp_path / "gate.xml"
        code = main(["check", str(studies["fair"]), "--max-delta-pos", "0.1", "--max-delta-api", "0.1", *FAST,
                     "--junit", str(junit), "--json"])
        assert code == 0
        out = json.loads(capsys.readouterr().out)
        assert out["passed"] is True and out["exit_code"] == 0 and out["rule"] == "exceeds"
        assert {d["outcome"] for d in out["decisions"]} == {"below"}
        xml = _junit(junit)
        assert all(c.is_passed for suite in xml for c in suite)

    def test_within_rule_cannot_tell_fails_and_names_attempts(self, studies, capsys):
        # the biased chooser's true delta_pos is 0.229 (simulate_selection_log): at 0.23 the interval cannot tell
        truth = studies["biased_truth"].delta_pos
        assert truth == pytest.approx(0.229, abs=0.001)
        code = main(["check", str(studies["biased"]), "--max-delta-pos", "0.23", "--rule", "within", *FAST,
                     "--json"])
        out = json.loads(capsys.readouterr().out)
        d = out["decisions"][0]
        assert d["outcome"] == "cannot tell" and d["status"] == "fail" and code == 1
        assert d["attempts_to_decide"] is None or d["attempts_to_decide"] > 1000
        assert d["design_to_decide"]

    def test_exceeds_cannot_tell_passes_with_warning(self, studies, tmp_path, capsys):
        junit = tmp_path / "j.xml"
        code = main(["check", str(studies["biased"]), "--max-delta-pos", "0.23", *FAST, "--junit", str(junit),
                     "--no-plan"])
        assert code == 0
        out = capsys.readouterr().out
        assert "cannot tell" in out and "(WARN)" in out
        root = ET.parse(junit).getroot()
        case = root.find("testsuite/testcase")
        assert case.find("failure") is None and "WARNING" in case.find("system-out").text

    def test_bundled_study(self, tmp_path, capsys):
        junit, md = tmp_path / "bb.xml", tmp_path / "bb.md"
        code = main(["check", str(bundled("biasbusters/study.toml")), "--max-delta-api", "0.3", "--max-delta-pos",
                     "0.35", *FAST, "--junit", str(junit), "--markdown", str(md), "--no-plan"])
        assert code == 1   # several BiasBusters models are beyond these thresholds (docs/guide/ci_gate.md)
        xml = _junit(junit)
        names = [c.name for suite in xml for c in suite]
        assert len(names) == 16 and "delta_pos[model=DeepSeek-V3.2-Exp]" in names
        failed = {c.name for suite in xml for c in suite if not c.is_passed}
        assert "delta_pos[model=DeepSeek-V3.2-Exp]" in failed and "delta_pos[model=Qwen3 235B]" not in failed
        assert md.read_text().count("\n| ") == 17   # header + 16 decisions

    def test_markdown_appends_to_a_job_summary(self, studies, tmp_path, capsys):
        md = tmp_path / "step_summary.md"
        md.write_text("# earlier step\n")
        main(["check", str(studies["fair"]), "--max-delta-pos", "0.1", *FAST, "--markdown", str(md)])
        text = md.read_text()
        assert text.startswith("# earlier step\n") and "### Selection-bias gate (check): PASS" in text


class TestBadInput:
    """Exit 2, one message naming the problem, and no output file written."""

    @pytest.mark.parametrize("args,expected", [
        (["check", "{missing}", "--max-delta-pos", "0.1"], "no-such-study.toml"),
        (["check", "{fair}", "--max-delta-pos", "1.5"], "`max_delta_pos` must be a number in [0, 1]; got 1.5"),
        (["check", "{fair}", "--max-delta-api", "-0.1"], "`max_delta_api` must be a number in [0, 1]; got -0.1"),
        (["check", "{fair}", "--max-delta-pos", "0.1", "--by", "nope"], "`by` names column(s) ['nope']"),
        (["check", "{fair}"], "give at least one threshold"),
        (["compare", "{fair}", "{biased}", "--max-shift", "2"], "`max_shift` must be a number in [0, 1]; got 2.0"),
        (["compare", "{fair}", "{missing}", "--max-shift", "0.1"], "no-such-study.toml"),
        (["compare", "{fair}", "{biased}", "--max-shift", "0.1", "--by", "nope"], "`by` names column(s) ['nope']"),
    ])
    def test_exit_2_one_message_nothing_written(self, args, expected, studies, tmp_path, capsys):
        paths = {"missing": str(tmp_path / "no-such-study.toml"), "fair": str(studies["fair"]),
                 "biased": str(studies["biased"])}
        out_dir = tmp_path / "out"
        out_dir.mkdir()
        argv = [a.format(**paths) for a in args] + FAST + ["--junit", str(out_dir / "j.xml"), "--markdown",
                                                           str(out_dir / "s.md")]
        assert main(argv) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith(f"toolbias-stats {args[0]}: error: ")
        assert expected in err[0]
        assert list(out_dir.iterdir()) == []

    def test_output_over_an_input_is_refused(self, studies, capsys):
        before = studies["fair"].read_bytes()
        assert main(["check", str(studies["fair"]), "--max-delta-pos", "0.1", *FAST, "--junit",
                     str(studies["fair"])]) == 2
        assert studies["fair"].read_bytes() == before


class TestCompare:
    def test_same_queries_paired_and_a_shift_fails(self, studies, tmp_path, capsys):
        junit, md = tmp_path / "cmp.xml", tmp_path / "cmp.md"
        code = main(["compare", str(studies["fair"]), str(studies["biased"]), "--max-shift", "0.1", *FAST,
                     "--n-permutations", "200", "--junit", str(junit), "--markdown", str(md), "--json"])
        out = json.loads(capsys.readouterr().out)
        assert code == 1 and out["command"] == "compare"
        assert out["settings"]["pairing_used"] == "paired"   # the simulated studies share query ids
        by_metric = {d["metric"]: d for d in out["decisions"]}
        assert set(by_metric) == {"shift_api", "shift_pos", "tools"}
        assert by_metric["shift_pos"]["status"] == "fail" and by_metric["shift_pos"]["outcome"] == "above"
        xml = _junit(junit)
        assert len([c for s in xml for c in s]) == 3
        assert "### Selection-bias gate (compare): FAIL" in md.read_text()

    def test_a_version_against_itself_passes(self, studies, capsys):
        code = main(["compare", str(studies["fair"]), str(studies["fair"]), "--max-shift", "0.1", *FAST,
                     "--n-permutations", "1000", "--json"])
        out = json.loads(capsys.readouterr().out)
        assert code == 0, out
        tools = next(d for d in out["decisions"] if d["metric"] == "tools")
        assert tools["outcome"] == "no change" and tools["moved"] == []


class TestToolsDecision:
    def test_too_few_permutations_cannot_tell(self, studies, capsys):
        # 25 tools, 20 permutations: the smallest Holm-adjusted p is 25/21 > 0.05, no tool could ever be flagged
        code = main(["compare", str(studies["fair"]), str(studies["fair"]), "--max-shift", "0.1", *FAST,
                     "--n-permutations", "20", "--json"])
        tools = next(d for d in json.loads(capsys.readouterr().out)["decisions"] if d["metric"] == "tools")
        assert code == 0 and tools["outcome"] == "cannot tell" and tools["status"] == "warn"
        assert "use at least 500" in tools["message"]

    def test_moved_tools_are_named(self):
        import numpy as np

        from toolbias_stats.gate import compare_selection
        from toolbias_stats.simulate import simulate_selection_log

        base = simulate_selection_log(n_clusters=2, n_queries=60, permute_tools=False, rng=5).log
        new = simulate_selection_log(n_clusters=2, n_queries=60, tool_probs=[4, 1, 1, 1, 1], permute_tools=False,
                                     rng=6).log
        res = compare_selection(base, new, max_shift=0.5, n_resamples=100, n_permutations=500, rng=1)
        tools = next(d for d in res.decisions if d.metric == "tools")
        assert tools.status == "fail" and tools.outcome == "changed"
        firsts = [m for m in tools.moved if m["tool"].endswith("_1")]
        assert {m["cluster"] for m in firsts} == {"1", "2"}
        assert all(m["difference"] > 0.2 and m["p_adjusted"] <= 0.05 for m in firsts)
        assert all(np.isclose(m["share"] - m["share_base"], m["difference"]) for m in tools.moved)
        assert "tool_1_1" in tools.message and "->" in tools.message
