"""Explanation figures: each takes a computed result and returns a Figure (nothing recomputed)."""

import re
import warnings

import pytest


@pytest.fixture(scope="module")
def result(bb_data_dir):
    from toolbias_stats.features import read_feature_table
    from toolbias_stats.models import explain_selection

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        feats = read_feature_table(bb_data_dir / "authors_features.json")
        return explain_selection(feats, n_estimators=5, n_repeats=1, n_permutations=2, n_resamples=20, rng=0)


def test_all_figures(result):
    from matplotlib.figure import Figure

    from toolbias_stats.plots import plot_alignment, plot_correlations, plot_importances, plot_ols_coefficients

    figs = [plot_correlations(result.correlations), plot_ols_coefficients(result.ols),
            plot_ols_coefficients(result.ols, kind="coef", interval="cluster"),
            plot_importances(result.random_forest), plot_alignment(result.alignment)]
    assert all(isinstance(f, Figure) for f in figs)
    assert figs[0].axes[0].get_title(loc="left").startswith("Feature-rate correlation")
    assert "R\u00b2 0.387" in " ".join(t.get_text() for t in figs[1].axes[0].get_legend().get_texts())


def test_into_given_axes(result):
    from matplotlib.figure import Figure

    from toolbias_stats.plots import plot_alignment

    fig = Figure()
    ax = fig.add_subplot()
    assert plot_alignment(result.alignment, ax=ax) is fig


def test_bad_options(result):
    from toolbias_stats.plots import plot_ols_coefficients

    with pytest.raises(ValueError, match=re.escape("`kind` must be one of 'std_coef', 'coef'; got 'x' instead.")):
        plot_ols_coefficients(result.ols, kind="x")
    with pytest.raises(ValueError, match="`interval` must be one of"):
        plot_ols_coefficients(result.ols, interval="x")
