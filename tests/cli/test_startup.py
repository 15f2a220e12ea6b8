"""Lazy loading (issue 23): the public API is unchanged, and importing the package or asking the CLI for
--help / --version imports neither pandas nor scipy (checked in a fresh interpreter; no timings here, those are in
benchmarks/bench_import.py)."""

import argparse
import importlib
import json
import subprocess
import sys

import pytest

# toolbias_stats.__all__ and the public names of dir(toolbias_stats) as they were with eager imports
ALL = [
    "__version__", "SCHEMA_VERSION", "STATUSES", "datasets", "standardise_name", "function_name",
    "SelectionLogError", "ManifestError", "DegenerateDataWarning", "ExcludedRowsWarning", "SmallSampleWarning",
    "SelectionLog", "SelectionCounts", "count_table", "ToolCatalog", "Study", "read_study", "load_selection_log",
    "read_biasbusters", "read_biasbusters_catalog", "read_table", "read_transcripts", "selection_bias",
    "BiasResult", "TVResult", "ConfidenceInterval", "CalibratedTV", "calibrated_mean_tv", "tv_distance",
    "tv_to_uniform", "normalised_tv", "expected_tv_uniform", "features", "models", "tool_features",
    "read_feature_table", "ToolFeatures", "explain_selection", "ExplainResult", "feature_correlations", "ols_fit",
    "model_alignment", "fit_bayes", "BayesResult", "ConvergenceWarning", "MisfitWarning", "toolsense",
    "ToolSenseError", "shadow", "ShadowAudit", "ShadowResult", "read_shadow_audit", "tool_shadow", "experiments",
    "selection_shift", "ShiftResult", "subset_selection_metrics", "SubsetMetricsResult", "design",
    "variance_components", "VarianceComponents", "plan_study", "StudyPlan", "read_openai", "read_anthropic",
    "read_otel", "read_mcp", "read_langchain", "choice", "ChoiceLog", "read_choice_study", "option_position_bias",
    "accuracy_by_gold_position",
    "judge_consistency", "read_inspect", "read_inspect_choices", "read_lm_eval", "audit", "design_study",
    "StudyDesign", "write_requests", "run_study", "choicemodel", "choice_model", "ChoiceModelResult",
    "gate", "check_selection_bias", "compare_selection", "assert_selection_fair", "GateResult",
]
PUBLIC_DIR = [
    "BayesResult", "BiasResult", "CalibratedTV", "ChoiceLog", "ChoiceModelResult", "ConfidenceInterval",
    "ConvergenceWarning", "DegenerateDataWarning", "ExcludedRowsWarning", "ExplainResult", "GateResult",
    "ManifestError", "MisfitWarning", "SCHEMA_VERSION", "STATUSES", "SelectionCounts", "SelectionLog",
    "SelectionLogError", "ShadowAudit", "ShadowResult", "ShiftResult", "SmallSampleWarning", "Study", "StudyDesign",
    "StudyPlan", "SubsetMetricsResult", "TVResult", "ToolCatalog", "ToolFeatures", "ToolSenseError",
    "VarianceComponents", "accuracy_by_gold_position", "assert_selection_fair", "audit", "calibrated_mean_tv",
    "check_selection_bias", "choice", "choice_model", "choicemodel", "compare_selection", "count_table", "datasets",
    "design", "design_study", "exceptions", "expected_tv_uniform", "experiments", "explain_selection",
    "feature_correlations", "features", "fit_bayes", "function_name", "gate", "io", "judge_consistency",
    "load_selection_log", "metrics", "model_alignment", "models", "normalised_tv", "ols_fit",
    "option_position_bias", "plan_study", "plots", "read_anthropic", "read_biasbusters", "read_biasbusters_catalog",
    "read_choice_study", "read_feature_table", "read_inspect", "read_inspect_choices", "read_langchain",
    "read_lm_eval", "read_mcp", "read_openai", "read_otel", "read_shadow_audit", "read_study", "read_table",
    "read_transcripts", "report", "run_study", "selection_bias", "selection_shift", "shadow", "standardise_name",
    "subset_selection_metrics", "tool_features", "tool_shadow", "toolsense", "tv_distance", "tv_to_uniform",
    "variance_components", "write_requests",
]
SUBPACKAGES = ["audit", "choice", "choicemodel", "design", "experiments", "features", "io", "metrics", "models",
               "plots", "report", "shadow", "toolsense", "gate"]
HEAVY = ["pandas", "scipy", "scipy.stats", "statsmodels", "duckdb", "sklearn", "matplotlib", "pymc"]


def _fresh(code):
    """sys.modules of a fresh interpreter after running ``code``."""
    script = code + "\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
    return set(json.loads(out.strip().splitlines()[-1]))


def test_public_names_unchanged():
    import toolbias_stats as tbs

    assert list(tbs.__all__) == ALL
    # dir() of a fresh import (in this process other tests have imported more submodules, e.g. cli)
    code = "import json, toolbias_stats\nprint(json.dumps(dir(toolbias_stats)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert sorted(n for n in json.loads(out) if not n.startswith("_")) == PUBLIC_DIR
    for name in ALL:
        assert getattr(tbs, name) is not None, name
    ns = {}
    exec("from toolbias_stats import *", ns)  # noqa: S102 - the star import is what is tested
    assert set(ALL) <= set(ns)
    assert tbs.selection_bias is tbs.metrics.selection_bias is importlib.import_module(
        "toolbias_stats.metrics._bias").selection_bias
    with pytest.raises(AttributeError, match="no attribute 'no_such_name'"):
        _ = tbs.no_such_name


@pytest.mark.parametrize("name", SUBPACKAGES)
def test_subpackage_names_resolve(name):
    mod = importlib.import_module(f"toolbias_stats.{name}")
    for n in mod.__all__:
        assert hasattr(mod, n), f"toolbias_stats.{name}.{n}"
        assert n in dir(mod)


@pytest.mark.parametrize("code", ["import toolbias_stats",
                                  "import toolbias_stats as t; t.__version__; t.__all__; dir(t)",
                                  "from toolbias_stats.cli._commands import build_parser; build_parser('')"])
def test_import_is_light(code):
    loaded = _fresh(code)
    assert not [m for m in HEAVY if m in loaded]


@pytest.mark.parametrize("argv", [["--version"], ["--help"]])
def test_cli_start_is_light(argv):
    code = ("import sys\nfrom toolbias_stats.cli._commands import main\n"
            f"try:\n    main({argv!r})\nexcept SystemExit:\n    pass")
    loaded = _fresh(code)
    assert "toolbias_stats.cli._commands" in loaded
    assert not [m for m in HEAVY if m in loaded]


def test_listed_help_matches_full_parsers():
    from toolbias_stats.cli._commands import _COMMANDS, build_parser

    def listed(parser):
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        return [(a.dest, a.help) for a in sub._choices_actions]

    full = listed(build_parser())
    assert full == list(_COMMANDS.items())
    assert listed(build_parser("")) == full
    assert listed(build_parser("plan")) == full
    assert build_parser("").format_help() == build_parser().format_help()


@pytest.mark.parametrize("tty, json_flag, expected", [(False, False, True), (True, False, False),
                                                      (False, True, False)])
def test_stage_lines_when_not_a_terminal(monkeypatch, capsys, tty, json_flag, expected):
    from toolbias_stats.cli._common import Stages as _Stages

    monkeypatch.setattr(sys.stderr, "isatty", lambda: tty, raising=False)
    stage = _Stages(argparse.Namespace(command="report", json=json_flag))
    stage("reading study.toml\x1b[31m")
    err = capsys.readouterr().err
    if expected:
        assert err.startswith("toolbias-stats report: [") and "s] reading study.toml" in err
        assert "\x1b" not in err   # untrusted text is escaped for the terminal
    else:
        assert err == ""
