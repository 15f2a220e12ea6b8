"""OLS per LLM: the paper's R^2, statsmodels agreement, robust errors, small-sample warnings."""

import warnings

import numpy as np
import pandas as pd
import pytest
from reference.table4 import OLS_R2

from toolbias_stats.exceptions import SmallSampleWarning
from toolbias_stats.models import ols_fit


@pytest.fixture(scope="module")
def ols(authors):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return ols_fit(authors)


class TestPaperR2:
    @pytest.mark.parametrize("model", list(OLS_R2))
    def test_r2(self, ols, model):
        fit = ols.fit_for(model)
        assert fit.r2 == pytest.approx(OLS_R2[model], abs=1e-3)
        assert fit.n == 43 and fit.n_excluded == 7 and fit.n_predictors == 7


class TestOLSFit:
    def test_matches_statsmodels_directly(self, ols, authors):
        import statsmodels.api as sm

        c = authors.center().table
        rates = authors.selection_rates.query("model == 'Qwen'").set_index("tool_id")["rate"]
        y = rates.reindex(c["tool_id"]).to_numpy()
        x = c[list(authors.feature_names)]
        ok = x.notna().all(axis=1).to_numpy()
        ref = sm.OLS(y[ok], sm.add_constant(x[ok])).fit()
        got = ols.fit_for("Qwen").coefficients.set_index("term")
        np.testing.assert_allclose(got.loc[list(authors.feature_names), "coef"], ref.params[1:], rtol=1e-8)
        np.testing.assert_allclose(got.loc[list(authors.feature_names), "se"], ref.bse[1:], rtol=1e-8)
        hc3 = sm.OLS(y[ok], sm.add_constant(x[ok])).fit(cov_type="HC3")
        np.testing.assert_allclose(got.loc[list(authors.feature_names), "se_hc3"], hc3.bse[1:], rtol=1e-8)
        assert ols.fit_for("Qwen").r2 == pytest.approx(ref.rsquared)

    def test_standardised_coefficients(self, ols):
        t = ols.fit_for("Gemini").coefficients
        assert np.isnan(t.loc[t["term"] == "Intercept", "std_coef"]).all()
        assert t["std_coef"].notna().sum() == 7

    def test_frames(self, ols):
        assert len(ols.to_frame()) == 6 * 8
        s = ols.summary_frame()
        assert list(s.columns[:4]) == ["model", "n", "n_excluded", "n_predictors"]
        assert (s["rows_per_predictor"] < 10).all()
        assert set(ols.to_dict()["ToolLLaMA"]) >= {"r2", "adj_r2", "coefficients"}

    def test_intervals_contain_the_estimate(self, ols):
        t = ols.to_frame()
        for lo, hi in (("ci_low", "ci_high"), ("ci_hc3_low", "ci_hc3_high"), ("ci_cluster_low", "ci_cluster_high")):
            assert ((t[lo] <= t["coef"]) & (t["coef"] <= t[hi])).all()

    def test_few_rows_per_predictor_warns(self, authors):
        with pytest.warns(SmallSampleWarning) as rec:
            ols_fit(authors)
        msgs = [str(w.message) for w in rec]
        assert any("43 rows / 7 predictors = 6.1" in m for m in msgs)
        assert any("cluster-robust standard errors rest on fewer than 20 clusters" in m for m in msgs)

    def test_recovers_a_known_slope(self, toy):
        feats, _ = toy
        x = feats.table["signal"]
        y = 0.3 * (x - feats.table.groupby("cluster_id")["signal"].transform("mean"))
        r = pd.DataFrame({"model": "lin", "tool_id": feats.table["tool_id"], "rate": 0.25 + y})
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fit = ols_fit(feats, r).fit_for("lin")
        coef = fit.coefficients.set_index("term")["coef"]
        assert coef["signal"] == pytest.approx(0.3) and abs(coef["noise"]) < 1e-10 and fit.r2 == pytest.approx(1.0)

    def test_too_few_rows_gives_nan(self, toy):
        feats, rates = toy
        few = rates[rates["tool_id"].isin(["c1t0", "c1t1", "c2t0"])]
        with pytest.warns(SmallSampleWarning, match="cannot be fitted"):
            res = ols_fit(feats, few)
        assert all(np.isnan(f.r2) for f in res.fits)
