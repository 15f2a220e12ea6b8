"""The choice model wired into `validate` (comparison graph) and `report --choice-model`."""

import json

import pytest

from toolbias_stats.choicemodel import comparison_components, simulate_choice_log
from toolbias_stats.cli._commands import main
from toolbias_stats.report._choicemodel import components_summary, format_components_text

STUDY = "data/biasbusters/study.toml"


def _run(capsys, *argv):
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_components_summary_matches_comparison_components():
    log = simulate_choice_log(n_tools=6, set_size=3, n_queries=30, rng=2)
    s = components_summary(log)
    comp = comparison_components(log)
    assert [c["n_tools"] for c in s["components"]] == comp[comp["component"] > 0].groupby("component").size().tolist()
    text = format_components_text(s)
    assert text.count("\n  component ") == len(s["components"]) == 1


def test_validate_lists_the_components(capsys, request):
    study = str(request.config.rootpath / STUDY)
    code, out, err = _run(capsys, "validate", study)
    assert code == 0, err
    lines = [ln for ln in out.splitlines() if ln.startswith("  component ")]
    assert "10 connected component(s)" in out and len(lines) == 10   # one per BiasBusters cluster
    code, out, err = _run(capsys, "validate", study, "--json")
    graph = json.loads(out)["comparison_graph"]
    assert [c["n_tools"] for c in graph["components"]] == [5] * 10 and graph["not_compared"] == []
    # each component is exactly one catalog cluster
    from toolbias_stats.io import read_study

    cat = read_study(study, lazy=True).catalog.table
    cluster_of = dict(zip(cat["tool_id"].astype(str), cat["cluster_id"].astype(str)))
    for c in graph["components"]:
        assert len({cluster_of[t] for t in c["tools"]}) == 1


def test_report_choice_model_section(capsys, request, tmp_path):
    out = tmp_path / "r.html"
    code, _, err = _run(capsys, "report", str(request.config.rootpath / STUDY), "--out", str(out), "--bootstrap",
                        "20", "--null", "0", "--choice-model", "--no-experiments")
    assert code == 0, err
    page = out.read_text()
    assert "Conditional logit" in page or "conditional logit" in page
    assert "Implied delta_API / delta_pos" in page
