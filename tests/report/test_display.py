"""Issue 14: every result object has a compact `_repr_html_` (headline table, escaped, bounded)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from tiny_study import tiny_study

import toolbias_stats as tbs
from toolbias_stats._display import MAX_ROWS, frame_html
from toolbias_stats.report._findings import key_findings
from toolbias_stats.simulate import simulate_selection_log


@pytest.fixture(scope="module")
def result():
    study = tiny_study()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return study, tbs.selection_bias(study.log, by="model", n_resamples=200, n_null=200, rng=1)


def test_bias_result_repr_html(result):
    _, res = result
    page = res._repr_html_()
    assert page.startswith('<div class="toolbias-result">') and "BiasResult: 2 group(s)" in page
    assert "&lt;" in page or "<script" not in page            # group labels are escaped
    g = res.groups[0]
    assert f"{g.delta_api.mean_over_runs:.3f}" in page


def test_frame_html_bounds_rows_and_escapes():
    import pandas as pd

    frame = pd.DataFrame({"tool": ["<script>alert(1)</script>"] * 30, "rate": np.linspace(0, 1, 30)})
    page = frame_html(frame, title="<b>t</b>")
    assert "<script>" not in page and "&lt;script&gt;" in page and "&lt;b&gt;t&lt;/b&gt;" in page
    assert page.count("<tr") == MAX_ROWS + 1 and "18 more row(s)" in page


def test_other_results_have_repr_html():
    for cls in (tbs.models.ExplainResult, tbs.models.BayesResult, tbs.ToolFeatures, tbs.toolsense.RetrievalResult):
        assert callable(getattr(cls, "_repr_html_", None)), cls


class TestKeyFindings:
    def _result(self, **kw):
        sim = simulate_selection_log(n_clusters=4, n_queries=60, rng=3, **kw)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return sim, tbs.selection_bias(sim.log, by=[], n_resamples=300, n_null=300, rng=2)

    def test_strong_chooser_is_distinguishable(self):
        sim, res = self._result(tool_probs=[8, 1, 1, 1, 1], position_probs=[4, 1, 1, 1, 1])
        (f,) = key_findings(res, sim.log.catalog)
        api, pos, fav, first = f.sentences
        g = res.groups[0]
        # the corrected estimate with its calibrated interval leads; the plug-in value follows without its interval
        d = g.delta_api
        assert f"{d.corrected:.3f} [{d.corrected_ci.low:.3f}, {d.corrected_ci.high:.3f}]" in api
        assert f"plug-in {d.mean_over_runs:.3f}" in api
        assert "so it is distinguishable from a fair chooser" in api and "distinguishable" in pos
        # the most favoured tool is the one with the largest rate above 1/K, computed here from the rates
        best = max(((r - 1 / c.K, t) for c in g.clusters for t, r in c.rates.items()))
        assert best[1] in fav or sim.log.catalog.table.set_index("tool_id").loc[best[1], "tool_name"] in fav
        share = np.mean([c.position_rates[0] for c in g.clusters])
        assert f"{100 * share:.1f}%" in first and "more than the 20.0%" in first

    def test_fair_chooser_is_not_distinguishable(self):
        sim, res = self._result()
        (f,) = key_findings(res, sim.log.catalog)
        assert "not" in f.sentences[0] and "distinguishable from a fair chooser" in f.sentences[0]
