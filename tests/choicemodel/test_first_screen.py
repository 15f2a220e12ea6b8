"""Issue 26: the choice-model section's first screen (overview figure + at most three sentences)."""

import re

import numpy as np
import pytest

from toolbias_stats.choicemodel import choice_model, simulate_logit_log
from toolbias_stats.plots._choicemodel_overview import choice_model_overview_rows, plot_choice_model_overview
from toolbias_stats.report._choicemodel import render_choice_model_section
from toolbias_stats.report._summary import choice_model_summary


@pytest.fixture(scope="module")
def no_position():
    log = simulate_logit_log(n_tools=6, n_queries=150, positions=[0, 0, 0, 0], rng=6)
    return choice_model(log, rng=1)


@pytest.fixture(scope="module")
def strong_position():
    log = simulate_logit_log(n_tools=6, n_queries=150, positions=[0, -1.5, -2.0, -2.5], rng=4)
    return choice_model(log, rng=1)


def _sentences(s):
    return [x for x in s if x.strip()]


def test_wording_no_position_effect(no_position):
    s = choice_model_summary(no_position)
    assert 1 <= len(s) <= 3
    assert s[0].startswith("No group shows a position effect distinguishable from none")
    assert "largest position effect" in s[1]


def test_wording_strong_position_effect(strong_position):
    s = choice_model_summary(strong_position)
    assert 1 <= len(s) <= 3
    assert s[0].startswith("Every group (sim) shows a position effect distinguishable from none")
    # the truth puts position 4 furthest from position 1: it is the largest effect, its interval excludes 0
    assert "position 4 for sim" in s[1]
    row = choice_model_overview_rows(strong_position)[0]
    assert row["position"] == 4 and row["ci_high"] < 0
    # most favoured tool: the simulated worths rise with the tool index (t6 largest)
    assert s[2].startswith("The most favoured tool is t6")


def test_rows_equal_to_dict(strong_position):
    d = strong_position.to_dict()
    rows = choice_model_overview_rows(strong_position)
    pe = d["groups"][0]["position_effects"]
    assert len(rows) == len(pe) == 3
    for p in pe:
        r = next(r for r in rows if r["position"] == p["position"])
        assert r["estimate"] == p["estimate"] and [r["ci_low"], r["ci_high"]] == p["ci"]
        assert r["wald_p"] == d["groups"][0]["no_position_effect"]["wald_p"]
    est = [abs(r["estimate"]) for r in rows]
    assert est == sorted(est, reverse=True)
    # the numbers are the result's position_effects table
    tab = strong_position.position_effects.set_index("position")
    for r in rows:
        assert np.isclose(r["estimate"], tab.loc[r["position"], "estimate"])


def test_plot_returns_figure(strong_position):
    import matplotlib.pyplot as plt

    fig = plot_choice_model_overview(strong_position)
    ax = fig.axes[0]
    assert len(ax.get_yticklabels()) == 3
    plt.close(fig)


def test_section_figure_before_first_table(strong_position):
    html = render_choice_model_section(strong_position)
    fig = html.index("<figure>")
    assert fig < html.index("<table")
    assert "<svg" in html[fig:html.index("</figure>")] and "<figcaption>" in html
    assert html.index('<p class="summary">') < html.index("<details>") < html.index("<table")
    summary = re.search(r'<p class="summary">(.*?)</p>', html, flags=re.S).group(1)
    assert summary.count(". ") + 1 <= 3
