"""The choice model wired into `validate` (comparison graph) and `report --choice-model`."""

import json

import pytest

from toolbias_stats._text import format_components_text
from toolbias_stats.choicemodel import comparison_components, simulate_logit_log
from toolbias_stats.cli._commands import main
from toolbias_stats.report._choicemodel import components_summary

STUDY = "data/biasbusters/study.toml"


def _run(capsys, *argv):
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_components_summary_matches_comparison_components():
    log = simulate_logit_log(n_tools=6, set_size=3, n_queries=30, rng=2)
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


def test_implied_delta_pos_under_logged_lists_ranks_llms_as_delta_pos(bb_study):
    """Issue 22: with the lists actually shown, the fit's delta_pos ranks the 7 LLMs exactly as the data do."""
    import warnings

    import pandas as pd
    from scipy import stats

    import toolbias_stats as tbs

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = tbs.choice_model(bb_study.log, by="model")
        bias = tbs.selection_bias(bb_study.log, by="model", n_resamples=200, n_null=0, rng=1).to_frame()
    d = bias[bias["metric"] == "delta_pos"].set_index("model")
    ib = res.implied_bias
    tab = pd.DataFrame({o: ib[ib["orderings"] == o].groupby("model")["delta_pos"].mean()
                        for o in ("observed", "logged", "shuffled")}).join(d).dropna(subset=["logged"])
    assert len(tab) == 7
    assert stats.spearmanr(tab["logged"], tab["mean_over_runs"]).statistic == pytest.approx(1.0)
    assert stats.spearmanr(tab["shuffled"], tab["mean_over_runs"]).statistic > 0.95   # 0.964: one swap
    c, g = tab.loc["Claude 3.5 Sonnet"], tab.loc["GPT-3.5-turbo"]
    assert c["mean_over_runs"] < g["mean_over_runs"] and c["logged"] < g["logged"]     # same order
    assert abs(c["shuffled"] - g["shuffled"]) < 0.005                                 # the swap: ~0.001 apart
    assert c["ci_high"] > g["ci_low"]                     # the descriptive intervals of the two overlap
    # one set of position effects per LLM understates the mean over clusters of per-cluster TV distances
    assert (tab["logged"] < tab["observed"]).all()
