"""The "Explaining selection" HTML fragment: structure, escaping, the baseline verdict, determinism."""

import warnings

import pytest


def _result(rates, feats, **kw):
    from toolbias_stats.models import explain_selection

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return explain_selection(feats, rates, n_estimators=3, n_repeats=1, n_permutations=2, n_resamples=20,
                                 rng=0, **kw)


@pytest.fixture(scope="module")
def authors(bb_data_dir):
    from toolbias_stats.features import read_feature_table

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return read_feature_table(bb_data_dir / "authors_features.json")


@pytest.fixture(scope="module")
def result(authors):
    return _result(None, authors)


def test_section_structure(result):
    from toolbias_stats.report._explain_html import render_explain_section

    html = render_explain_section(result)
    assert html.startswith('<section id="explain">') and html.rstrip().endswith("</section>")
    for text in ("Correlations (BiasBusters Table 4)", "Linear regression", "worse than constant",
                 "Alignment between LLMs", "<svg", "+0.411 (p = 0.003)"):
        assert text in html
    assert "<script" not in html


def test_data_strings_are_escaped(authors):
    from toolbias_stats.report._explain_html import render_explain_section

    rates = authors.selection_rates.copy()
    rates["model"] = rates["model"].replace({"Qwen": "<b>Qwen & co</b>"})
    html = render_explain_section(_result(rates, authors, ensembles=False))
    assert "<b>Qwen" not in html and "&lt;b&gt;Qwen &amp; co&lt;/b&gt;" in html


def test_deterministic(result, authors):
    from toolbias_stats.report._explain_html import render_explain_section

    assert render_explain_section(result) == render_explain_section(_result(None, authors))


def test_without_ensembles(authors):
    from toolbias_stats.report._explain_html import render_explain_section

    html = render_explain_section(_result(None, authors, ensembles=False))
    assert "Not fitted (skipped)" in html
