"""Tests of toolbias_stats.plots: figures are built from result objects only and show what they claim."""

from __future__ import annotations

import numpy as np
import pytest
from tiny_study import MODEL_A, MODEL_B
from tiny_study import tiny_catalog as _tiny_catalog
from tiny_study import tiny_log as _tiny_log

import toolbias_stats as tbs
from toolbias_stats.plots import plot_api_vs_position, plot_selection_rates
from toolbias_stats.plots._bias import group_label, tool_labels

matplotlib = pytest.importorskip("matplotlib")
from matplotlib.container import BarContainer, ErrorbarContainer  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402


@pytest.fixture(scope="module")
def catalog():
    return _tiny_catalog()


@pytest.fixture(scope="module")
def result(catalog):
    return tbs.selection_bias(_tiny_log(catalog), by="model", n_resamples=50, n_null=200, rng=0)


@pytest.fixture(scope="module")
def result_mixed(catalog):
    return tbs.selection_bias(_tiny_log(catalog, with_unpositioned=True), by="model", n_resamples=50, n_null=200,
                              rng=0)


def _bars(ax):
    return [p for c in ax.containers if isinstance(c, BarContainer) for p in c.patches]


class TestPlotSelectionRates:
    def test_returns_figure_with_one_bar_per_group_and_tool(self, result, catalog):
        fig = plot_selection_rates(result, cluster="1", catalog=catalog)
        assert isinstance(fig, Figure)
        ax = fig.axes[0]
        assert len(_bars(ax)) == 2 * 3
        assert sum(isinstance(c, ErrorbarContainer) for c in ax.containers) == 2

    def test_bar_heights_are_the_result_rates(self, result):
        fig = plot_selection_rates(result, cluster="2")
        heights = [p.get_height() for p in _bars(fig.axes[0])]
        expected = [r for g in result.groups for c in g.clusters if c.cluster == "2"
                    for r in c.rate_table["rate"]]
        np.testing.assert_allclose(heights, expected)

    def test_uniform_line_at_one_over_k(self, result):
        ax = plot_selection_rates(result, cluster="1").axes[0]
        lines = [ln for ln in ax.lines if ln.get_label() == "uniform 1/K"]
        assert len(lines) == 1
        np.testing.assert_allclose(lines[0].get_ydata(), [1 / 3, 1 / 3])

    def test_error_bars_are_bootstrap_intervals(self, result):
        ax = plot_selection_rates(result, cluster="1").axes[0]
        eb = next(c for c in ax.containers if isinstance(c, ErrorbarContainer))
        segs = eb.lines[2][0].get_segments()
        table = result.groups[0].clusters[0].rate_table
        np.testing.assert_allclose([s[0][1] for s in segs], table["bootstrap_low"])
        np.testing.assert_allclose([s[1][1] for s in segs], table["bootstrap_high"])

    def test_wilson_fallback_without_bootstrap(self, catalog):
        res = tbs.selection_bias(_tiny_log(catalog), by="model", n_resamples=0, n_null=0, rng=0)
        ax = plot_selection_rates(res, cluster="1").axes[0]
        eb = next(c for c in ax.containers if isinstance(c, ErrorbarContainer))
        segs = eb.lines[2][0].get_segments()
        np.testing.assert_allclose([s[0][1] for s in segs], res.groups[0].clusters[0].rate_table["wilson_low"])
        assert "Wilson" in ax.get_legend().get_title().get_text()

    def test_tool_labels_from_catalog_or_ids(self, result, catalog):
        with_cat = [t.get_text() for t in plot_selection_rates(result, cluster="2", catalog=catalog)
                    .axes[0].get_xticklabels()]
        assert with_cat == ["1. Sunny", "2. Rainy", "3. Windy"]
        without = [t.get_text() for t in plot_selection_rates(result, cluster="2").axes[0].get_xticklabels()]
        assert without[0].replace("\n", "").startswith("1.")
        assert tool_labels(catalog.tools("2")) == catalog.tools("2")

    def test_long_names_are_wrapped_and_cut(self, result, catalog):
        labels = [t.get_text() for t in plot_selection_rates(result, cluster="1", catalog=catalog, label_width=8,
                                                             max_label_lines=2).axes[0].get_xticklabels()]
        assert all(len(s.split("\n")) <= 2 for s in labels)
        assert any(s.endswith("\u2026") for s in labels)

    def test_dollar_signs_are_not_mathtext(self, result, catalog):
        fig = plot_selection_rates(result, cluster="1", catalog=catalog, label_width=40)
        fig.canvas.draw()  # would raise on unbalanced mathtext
        assert "2. Cost $5 or $10 API" in [t.get_text().replace("\\$", "$") for t in fig.axes[0].get_xticklabels()]

    def test_draws_into_given_axes(self, result):
        from matplotlib.backends.backend_agg import FigureCanvasAgg

        fig = Figure()
        FigureCanvasAgg(fig)
        ax = fig.add_subplot()
        assert plot_selection_rates(result, cluster="1", ax=ax) is fig
        assert len(_bars(ax)) == 6

    def test_unknown_cluster_message(self, result):
        with pytest.raises(ValueError, match=r"`cluster` must be one of the clusters in the result \['1', '2'\]; "
                                             r"got '9' instead\."):
            plot_selection_rates(result, cluster="9")

    def test_legend_names_groups(self, result):
        texts = [t.get_text() for t in plot_selection_rates(result, cluster="1").axes[0].get_legend().get_texts()]
        assert texts == ["uniform 1/K", MODEL_A, MODEL_B]


class TestPlotApiVsPosition:
    def test_one_point_per_group_with_whiskers(self, result):
        fig = plot_api_vs_position(result)
        assert isinstance(fig, Figure)
        ax = fig.axes[0]
        points = [c for c in ax.containers if isinstance(c, ErrorbarContainer)]
        assert [c.get_label() for c in points] == [MODEL_A, MODEL_B]
        for c, g in zip(points, result.groups):
            x, y = c.lines[0].get_data()
            assert x[0] == pytest.approx(g.delta_api.mean_over_runs)
            assert y[0] == pytest.approx(g.delta_pos.mean_over_runs)
            assert c.has_xerr and c.has_yerr

    def test_noise_bands_at_null_expected(self, result):
        ax = plot_api_vs_position(result).axes[0]
        bands = {p.get_gid(): p for p in ax.patches if (p.get_gid() or "").startswith("noise-band")}
        assert set(bands) == {"noise-band-api", "noise-band-pos"}
        api, pos = bands["noise-band-api"], bands["noise-band-pos"]
        assert api.get_x() == 0 and pos.get_y() == 0
        assert api.get_width() == pytest.approx(max(g.delta_api.null_expected for g in result.groups))
        assert pos.get_height() == pytest.approx(max(g.delta_pos.null_expected for g in result.groups))
        assert "uniform chooser" in api.get_label()

    def test_groups_are_labelled(self, result):
        ax = plot_api_vs_position(result).axes[0]
        assert {t.get_text() for t in ax.texts} >= {MODEL_A, MODEL_B}

    def test_cluster_panel(self, result):
        fig = plot_api_vs_position(result, clusters=True)
        assert len(fig.axes) == 2
        pts = [c for c in fig.axes[1].containers if isinstance(c, ErrorbarContainer)]
        assert len(pts) == 2 * 2

    def test_group_without_positions_is_named(self, result_mixed):
        ax = plot_api_vs_position(result_mixed).axes[0]
        pts = [c for c in ax.containers if isinstance(c, ErrorbarContainer)]
        assert len(pts) == 2
        assert any("no-positions" in t.get_text() and "not shown" in t.get_text() for t in ax.texts)

    def test_ax_count_checked(self, result):
        fig = Figure()
        ax = fig.add_subplot()
        with pytest.raises(ValueError, match=r"`ax` must be 2 Axes when clusters=True; got 1 instead\."):
            plot_api_vs_position(result, ax=ax, clusters=True)

    def test_group_label(self):
        assert group_label({"model": "m", "condition": "base"}) == "m, base"
        assert group_label({}) == "all"
