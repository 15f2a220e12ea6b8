"""Report assembly in the library (issue 24): `build_report` is what `toolbias-stats report` writes, section by
section, with the defaults of the commands that own the sections."""

from __future__ import annotations

import inspect
import warnings

import pytest

import toolbias_stats as tbs
from toolbias_stats.cli._commands import build_parser, main
from toolbias_stats.report import build_report, default_sections
from toolbias_stats.report._build import PLAN_DEFAULTS, SECTIONS, SHADOW_DEFAULTS, explain_study


@pytest.fixture(scope="module")
def manifest(tmp_path_factory):
    """The tiny table study (tests/tiny_study.py) with two conditions, so that the Experiments section is on by
    default: run 1 is the base, run 2 the treated condition."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from tiny_study import tiny_study

    folder = tmp_path_factory.mktemp("tiny")
    s = tiny_study()
    df = s.log.to_frame().drop(columns=["source_file", "source_row"], errors="ignore")
    df["condition"] = ["base" if r == 1 else "loud" for r in df["run"]]
    s.catalog.table.to_json(folder / "catalog.json", orient="records", date_format="iso")
    df.to_csv(folder / "log.csv", index=False)
    (folder / "study.toml").write_text('name = "tiny"\nformat = "table"\ncatalog = "catalog.json"\n'
                                       '[[logs]]\npath = "log.csv"\n')
    return folder / "study.toml"


@pytest.fixture(scope="module")
def study(manifest):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return tbs.read_study(manifest)


def test_unknown_section_is_refused_before_any_work(tmp_path):
    with pytest.raises(ValueError, match=r"unknown report section\(s\) 'nope'; choose from explain, choice-model"):
        build_report(tmp_path / "does-not-exist.toml", sections=["experiments", "nope"])


def test_the_command_writes_what_the_library_builds(manifest, study, tmp_path, capsys):
    out = tmp_path / "r.html"
    assert main(["report", str(manifest), "--out", str(out), "--bootstrap", "20", "--null", "20", "--seed", "7"]) == 0
    page = build_report(study, sections=["experiments"], n_resamples=20, n_null=20, rng=7)
    assert out.read_text(encoding="utf-8") == page                   # the default sections of this study, named
    assert '<section id="experiments">' in page
    assert default_sections(study) == ["experiments"]


def test_stages_are_reported_in_order_and_no_section_is_added(study):
    seen = []
    page = build_report(study, sections=[], n_resamples=0, n_null=0, rng=1, stage=seen.append)
    assert seen == ["delta estimates (0 bootstrap replicates)", "rendering the report"]
    assert 'id="experiments"' not in page and 'id="bias"' in page


def test_sections_use_the_defaults_of_their_commands():
    """The library's section settings are the parsers' defaults: a changed CLI default shows up here."""
    plan = build_parser("plan").parse_args(["plan", "s.toml"])
    from_parser = {"metrics": tuple(plan.metrics.split(",")), "by": tuple(plan.by.split(",")),
                   "alpha": plan.alpha, "power": plan.power, "correlation": plan.correlation,
                   "cost_per_call": plan.cost_per_call, "max_queries": plan.max_queries, "n_draws": plan.n_draws}
    assert from_parser == PLAN_DEFAULTS
    shadow = build_parser("shadow").parse_args(["shadow", "s.toml"])
    from_parser = {"scale": shadow.scale, "n_resamples": shadow.n_resamples,
                   "n_weight_draws": shadow.n_draws, "holdout": shadow.holdout}
    assert from_parser == SHADOW_DEFAULTS
    assert shadow.ci == [] and not shadow.no_similarity          # cis=None, encoder=None in the section
    ex = build_parser("explain").parse_args(["explain", "s.toml"])
    got = {k: v.default for k, v in inspect.signature(explain_study).parameters.items()
           if v.default is not inspect.Parameter.empty}
    assert got["n_estimators"] == ex.trees and got["n_repeats"] == ex.repeats
    assert got["n_permutations"] == ex.importance_shuffles and got["n_resamples"] == ex.n_resamples
    assert got["n_jobs"] == ex.jobs and got["rng"] == ex.seed and got["confidence_level"] == ex.confidence_level
    assert got["center"] is ex.center and got["ensembles"] is not ex.no_ensembles
    assert got["encoder"] == ex.encoder and got["cache_dir"] == ex.cache_dir and got["features"] == ex.feature_table
    report = build_parser("report").parse_args(["report", "s.toml", "--out", "x.html"])
    got = {k: v.default for k, v in inspect.signature(build_report).parameters.items()}
    assert (got["n_resamples"], got["n_null"], got["rng"], got["confidence_level"]) == \
        (report.n_resamples, report.null, report.seed, report.confidence_level)
    assert (got["ci_method"], got["position"], got["bootstrap"], got["by"]) == \
        (report.ci_method, report.position, report.bootstrap_weights, report.by)
    assert SECTIONS == ("explain", "choice-model", "bayes", "shadow", "plan", "experiments")
