"""Domain computations against independent references (statsmodels, scipy, refitting)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats
from statsmodels.stats.contingency_tables import StratifiedTable

from toolbias_stats.shadow import _domains as dm


class TestQuartiles:
    def test_sizes(self):
        # round(n/4) half up, at least one position
        assert list(dm.quartile_size(np.array([2, 3, 4, 5, 6, 7, 8, 12, 20]))) == [1, 1, 1, 1, 2, 2, 2, 3, 5]

    def test_length_strata_tertiles(self):
        lens = {i: float(v) for i, v in enumerate([10, 20, 30, 40, 50, 60])}
        s = dm.length_strata(lens)
        assert [s[i] for i in range(6)] == [0, 0, 1, 1, 2, 2]
        assert set(dm.length_strata({0: 5.0, 1: 5.0}).values()) == {0}


class TestMantelHaenszel:
    def test_matches_statsmodels(self):
        gen = np.random.default_rng(3)
        for _ in range(20):
            k = gen.integers(1, 5)
            tabs = gen.integers(1, 40, size=(k, 4)).astype(float)
            lor, se = dm.mh_logor(tabs)
            st = StratifiedTable([t.reshape(2, 2) for t in tabs])
            assert lor == pytest.approx(st.logodds_pooled, rel=1e-10)
            assert se == pytest.approx(st.logodds_pooled_se, rel=1e-10)

    def test_vectorised_and_empty_strata(self):
        tabs = np.array([[[5, 3, 2, 6], [0, 0, 4, 4]], [[4, 4, 4, 4], [3, 1, 1, 3]]], dtype=float)
        lor, se = dm.mh_logor(tabs)
        st = StratifiedTable([tabs[0, 0].reshape(2, 2)])  # a stratum without top rows carries nothing
        assert lor[0] == pytest.approx(st.logodds_pooled)
        st2 = StratifiedTable([t.reshape(2, 2) for t in tabs[1]])
        assert lor[1] == pytest.approx(st2.logodds_pooled) and se[1] == pytest.approx(st2.logodds_pooled_se)

    def test_zero_pooled_sum_gets_haldane(self):
        tabs = np.array([[5, 0, 2, 6]], dtype=float)  # b = 0: infinite OR
        lor, _ = dm.mh_logor(tabs)
        assert lor == pytest.approx(np.log((5.5 * 6.5) / (0.5 * 2.5)))

    def test_domain_L_uses_quartiles_among_relevant(self):
        # 4 tools, 1 per quartile: top = position 1, bottom = position 4
        unit = np.repeat(np.arange(3), 4)
        pos = np.tile([1, 2, 3, 4], 3)
        called = np.array([1, 0, 0, 0, 1, 0, 0, 1, 0, 1, 0, 0])
        rel = np.array([1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 1, 1])
        out = dm.domain_L(unit, pos, np.full(12, 4), called, rel, np.zeros(12, int), 3, 1)
        # top: called 2 of 3; bottom: called 1 of 3 -> OR = (2*2)/(1*1)
        assert out["n"] == 6
        assert out["log_or"] == pytest.approx(np.log(4.0))


def _logit_data(gen, n_units=150, k=6):
    unit = np.repeat(np.arange(n_units), k)
    x1 = gen.standard_normal(n_units * k)
    x2 = np.tile(np.arange(k), n_units).astype(float)
    u = np.repeat(gen.standard_normal(n_units) * 0.7, k)
    y = (gen.random(n_units * k) < 1 / (1 + np.exp(-(0.3 * x1 - 0.2 * x2 + u)))).astype(int)
    return y, x1, x2, unit


class TestLogit:
    def test_point_matches_statsmodels_cluster(self):
        import statsmodels.api as sm

        gen = np.random.default_rng(5)
        y, x1, x2, unit = _logit_data(gen)
        fit = dm.domain_logit(y, {"a": x1, "b": x2}, unit, 150, target="b")
        X = sm.add_constant(np.column_stack([(x1 - x1.mean()) / (2 * x1.std()), (x2 - x2.mean()) / (2 * x2.std())]))
        ref = sm.Logit(y, X).fit(disp=0, cov_type="cluster", cov_kwds={"groups": unit})
        assert fit["beta"] == pytest.approx(ref.params[2], rel=1e-6)
        assert fit["se"] == pytest.approx(ref.bse[2], rel=1e-4)

    def test_sandwich_of_unit_sums_reproduces_cluster_se(self):
        gen = np.random.default_rng(6)
        y, x1, x2, unit = _logit_data(gen)
        fit = dm.domain_logit(y, {"a": x1, "b": x2}, unit, 150, target="b")
        ones = np.ones((1, 150))
        beta_b, z_b = dm.logit_replicates(fit, ones @ fit["score"], ones @ fit["hess"], ones @ fit["outer"],
                                          np.array([150.0]))
        assert beta_b[0] == pytest.approx(fit["beta"], abs=1e-6)
        assert z_b[0] == pytest.approx(fit["z"], rel=1e-4)

    def test_one_step_bootstrap_matches_refitting(self):
        import statsmodels.api as sm

        gen = np.random.default_rng(7)
        y, x1, x2, unit = _logit_data(gen, n_units=120)
        fit = dm.domain_logit(y, {"a": x1, "b": x2}, unit, 120, target="b")
        X = np.column_stack([np.ones_like(x1), (x1 - x1.mean()) / (2 * x1.std()), (x2 - x2.mean()) / (2 * x2.std())])
        B = 150
        W = np.stack([np.bincount(gen.integers(0, 120, 120), minlength=120) for _ in range(B)]).astype(float)
        beta_b, z_b = dm.logit_replicates(fit, W @ fit["score"], W @ fit["hess"], W @ fit["outer"], W.sum(1))
        refit = np.array([sm.GLM(y, X, family=sm.families.Binomial(), freq_weights=W[b][unit]).fit().params[2]
                          for b in range(B)])
        assert np.corrcoef(beta_b, refit)[0, 1] > 0.98
        assert np.std(beta_b) == pytest.approx(np.std(refit), rel=0.1)
        assert np.std(z_b) == pytest.approx(1.0, abs=0.25)  # a z-statistic's bootstrap spread

    def test_constant_target(self):
        out = dm.domain_logit(np.array([0, 1, 0, 1]), {"b": np.ones(4)}, np.arange(4), 4, target="b")
        assert np.isnan(out["z"]) and "constant" in out["note"]


class TestS:
    def test_correlation_matches_scipy(self):
        gen = np.random.default_rng(8)
        J = 9
        rel = gen.integers(0, 2, size=(40, J)).astype(float)
        called = rel * gen.integers(0, 2, size=(40, J))
        sim = gen.random((40, J)) * rel
        r, k = dm.tool_correlation(called.sum(0), rel.sum(0), sim.sum(0))
        ref = stats.pearsonr(sim.sum(0) / rel.sum(0), called.sum(0) / rel.sum(0)).statistic
        assert r == pytest.approx(ref) and k == J

    def test_domain_S_fisher_z(self):
        gen = np.random.default_rng(9)
        T, J = 60, 8
        unit = np.repeat(np.arange(T), J)
        tool = np.tile(np.arange(J), T)
        rel = np.ones(T * J, int)
        sim = np.tile(np.linspace(0.1, 0.8, J), T) + 0.01 * gen.standard_normal(T * J)
        called = (gen.random(T * J) < np.tile(np.linspace(0.2, 0.6, J), T)).astype(int)
        out = dm.domain_S(unit, tool, called, rel, sim, np.ones(T, bool), T, J)
        rate = np.bincount(tool, weights=called) / T
        msim = np.bincount(tool, weights=sim) / T
        r = stats.pearsonr(msim, rate).statistic
        assert out["r"] == pytest.approx(r)
        assert out["z"] == pytest.approx(np.arctanh(r) * np.sqrt(J - 3))
