"""Pearson correlations per feature and LLM: BiasBusters Table 4, intervals, adjustments, degenerate input."""

import warnings

import numpy as np
import pandas as pd
import pytest
from reference.table4 import N_ROWS, TABLE4
from scipy import stats

from toolbias_stats.exceptions import DegenerateDataWarning, SmallSampleWarning
from toolbias_stats.models import feature_correlations


@pytest.fixture(scope="module")
def corr(authors):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return feature_correlations(authors)


class TestTable4:
    @pytest.mark.parametrize("feature", list(TABLE4))
    def test_reproduces_r_and_p(self, corr, feature):
        tab = corr.to_frame().set_index(["feature", "model"])
        for model, (r, p) in TABLE4[feature].items():
            row = tab.loc[(feature, model)]
            assert row["r"] == pytest.approx(r, abs=1e-3 + 1e-9), (feature, model)
            assert row["p_value"] == pytest.approx(p, abs=1e-3 + 1e-9), (feature, model)
            assert row["n"] == N_ROWS.get(feature, N_ROWS["other"])

    def test_without_centring_the_values_differ(self, authors):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            raw = feature_correlations(authors, center=False).matrix("r")
        assert abs(raw.at["avg_similarity_api_desc", "Qwen"] - 0.411) > 0.01


class TestFeatureCorrelations:
    def test_columns_and_shape(self, corr):
        t = corr.to_frame()
        assert list(t.columns) == ["model", "feature", "n", "r", "ci_low", "ci_high", "p_value", "p_holm", "p_bh",
                                   "spearman_rho", "spearman_p", "method", "confidence_level"]
        assert len(t) == 6 * 7 and corr.n_tests == 42
        assert (t["ci_low"] <= t["r"]).all() and (t["r"] <= t["ci_high"]).all()

    def test_fisher_z_interval(self, corr):
        row = corr.to_frame().query("model == 'Qwen' and feature == 'avg_similarity_api_desc'").iloc[0]
        z, se = np.arctanh(row["r"]), 1 / np.sqrt(row["n"] - 3)
        q = stats.norm.ppf(0.975)
        assert row["ci_low"] == pytest.approx(np.tanh(z - q * se))
        assert row["ci_high"] == pytest.approx(np.tanh(z + q * se))

    def test_holm_and_bh_across_all_tests(self, corr):
        from statsmodels.stats.multitest import multipletests

        t = corr.to_frame()
        np.testing.assert_allclose(t["p_holm"], multipletests(t["p_value"], method="holm")[1])
        np.testing.assert_allclose(t["p_bh"], multipletests(t["p_value"], method="fdr_bh")[1])
        assert (t["p_holm"] >= t["p_value"] - 1e-15).all() and (t["p_bh"] >= t["p_value"] - 1e-15).all()

    def test_spearman_alongside(self, corr, authors):
        t = corr.to_frame().query("model == 'Gemini' and feature == 'num_params'").iloc[0]
        c = authors.center().table
        rates = authors.selection_rates.query("model == 'Gemini'").set_index("tool_id")["rate"]
        want = stats.spearmanr(c["num_params"], rates.reindex(c["tool_id"]).to_numpy()).statistic
        assert t["spearman_rho"] == pytest.approx(want)

    def test_matrix_and_dict(self, corr):
        m = corr.matrix("r")
        assert m.shape == (7, 6) and list(m.index) == list(TABLE4)
        d = corr.to_dict()
        assert set(d["Qwen"]["age_days"]) == {"r", "p", "ci", "n", "p_holm", "p_bh", "spearman_rho", "spearman_p"}
        with pytest.raises(ValueError, match="`value` must be a column of the table"):
            corr.matrix("nope")

    def test_rates_from_a_dataframe(self, toy):
        feats, rates = toy
        res = feature_correlations(feats, rates, feature_names=["signal"])
        assert res.matrix("r").at["signal", "follows"] > 0.7

    def test_constant_feature_is_dropped_and_listed(self, toy):
        feats, rates = toy
        tab = feats.table.assign(const=1.0)
        from toolbias_stats.features import ToolFeatures

        f2 = ToolFeatures(table=tab, feature_names=("signal", "noise", "const"))
        with pytest.warns(DegenerateDataWarning, match="feature 'const' dropped: constant within every cluster"):
            res = feature_correlations(f2, rates)
        assert res.dropped_features == ["const"] and "const" not in res.feature_names

    def test_small_sample_warning(self, toy):
        feats, rates = toy
        few = rates[rates["tool_id"].str.startswith(("c1", "c2"))]
        with pytest.warns(SmallSampleWarning, match="rest on fewer than 10 tools"):
            feature_correlations(feats, few)

    def test_no_rates_is_an_error(self, toy):
        feats, _ = toy
        with pytest.raises(ValueError, match="no selection rates: pass `rates`"):
            feature_correlations(feats)

    def test_bad_rates_frame(self, toy):
        feats, _ = toy
        msg = r"`rates` must have the columns model, tool_id and rate; missing \['rate'\]"
        with pytest.raises(ValueError, match=msg):
            feature_correlations(feats, pd.DataFrame({"model": ["m"], "tool_id": ["c1t0"]}))

    def test_bad_feature_names(self, authors):
        with pytest.raises(ValueError, match="`feature_names` must be features of the table"):
            feature_correlations(authors, feature_names=["nope"])

    def test_bad_confidence_level(self, authors):
        with pytest.raises(ValueError, match=r"`confidence_level` must be in \(0, 1\); got 95 instead."):
            feature_correlations(authors, confidence_level=95)

    def test_rates_from_a_bias_result(self, bb_study):
        """BiasResult rates (the study's logs) join our computed features by tool_id."""
        import toolbias_stats as tbs
        from toolbias_stats.features import tool_features

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            feats = tool_features(bb_study, encoder=False)
            res = tbs.selection_bias(bb_study.log, by="model", n_resamples=0, n_null=0)
            corr = feature_correlations(feats, res)
        assert "GPT-4.1 mini" in corr.models
        n = corr.to_frame().query("model == 'GPT-4.1 mini'").set_index("feature")["n"]
        assert n["num_params"] == 50 and n["age_days"] == 43
