"""The experiments report's first screen (issue 26): the shift overview figure and the generated sentences."""

import re
import warnings

import numpy as np
import pytest

from toolbias_stats._format import fmt_estimate_ci
from toolbias_stats.experiments import selection_shift, simulate_conditions
from toolbias_stats.plots._experiments_overview import plot_shift_overview, shift_overview_rows
from toolbias_stats.report._experiments_html import experiments_summary, render_experiments_section

C, K = 3, 5
PREFS = np.array([[0.5, 0.2, 0.15, 0.1, 0.05], [0.4, 0.25, 0.15, 0.12, 0.08], [0.3, 0.3, 0.2, 0.1, 0.1]])


def study(changed, seed):
    """Three levels against a base; the ``changed`` ones reverse every cluster's tool preferences."""
    conds = {"base": (PREFS, None)}
    for lv in ("a", "b", "c"):
        conds[lv] = (PREFS[:, ::-1] if lv in changed else PREFS, None)
    log = simulate_conditions(conds, n_queries=30, rng=seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return selection_shift(log.counts(), by=[], n_resamples=100, n_permutations=400, rng=seed)


@pytest.fixture(scope="module")
def studies():
    return {"none": study((), 1), "one": study(("b",), 2), "all": study(("a", "b", "c"), 3)}


def test_sentences_all_fair(studies):
    s = experiments_summary([studies["none"]])
    assert s[0] == ("None of the 3 compared levels shifts the selections distinguishably from noise "
                    "(Holm-adjusted p ≤ 0.05).")
    assert not any("per-tool rise" in x for x in s)


def test_sentences_one_changed(studies):
    s = experiments_summary([studies["one"]])
    assert s[0].startswith("1 of the 3 compared levels shifts the tool distribution (condition = b vs base)")
    assert s[1].startswith("The largest tool shift is condition = b vs base: ")


def test_sentences_all_changed(studies):
    s = experiments_summary([studies["all"]])
    assert s[0].startswith("All 3 compared levels shift the tool distribution")


@pytest.mark.parametrize("name", ["none", "one", "all"])
def test_few_sentences_no_per_level_repetition(studies, name):
    s = experiments_summary([studies[name]])
    assert 1 <= len(s) <= 4
    assert len({re.sub(r"[\d.\-\[\], ]+", " ", x)[:30] for x in s}) == len(s)     # each a different construction


def test_numbers_equal_the_result_and_json(studies):
    res = studies["one"]
    g = next(g for g in res.groups if g.keys["condition"] == "b")
    s = experiments_summary([res])
    assert fmt_estimate_ci(g.shift_api.corrected, g.shift_api.corrected_ci) in s[1]
    d = next(x for x in res.to_dict()["groups"] if x["keys"]["condition"] == "b")["shift_api"]
    assert fmt_estimate_ci(d["corrected"], d["corrected_ci"]) in s[1]
    rows = shift_overview_rows([res])
    assert rows[0]["keys"]["condition"] == "b" and rows[0]["shift_api"] is g.shift_api     # ordered by shift


def test_figure_draws_every_level_with_its_interval(studies):
    res = studies["one"]
    fig = plot_shift_overview(res)
    ax = fig.axes[0]
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert sorted(labels) == ["condition = a vs base", "condition = b vs base", "condition = c vs base"]
    rows = shift_overview_rows([res])
    # the top line is the largest shift; its interval is drawn from corrected_ci exactly
    top = rows[0]["shift_api"]
    xs = [tuple(line.get_xdata()) for line in ax.lines if len(line.get_xdata()) == 2]
    assert (top.corrected_ci.low, top.corrected_ci.high) in xs


def test_overview_is_first_in_the_section(studies):
    html = render_experiments_section([studies["one"]])
    i = html.index('id="experiments-overview"')
    assert i < html.index("<h3>") and i < html.index("Each level of a design column")
    assert html.count('class="summary"') == 1 and "<figcaption>Shift of the tool" in html
    assert 'role="img"' in html[i:html.index("</figure>", i)]
