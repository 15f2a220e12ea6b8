"""Tests of the shared-query-effects variant ``model="query-shared"`` (v2 + query effects shared by the LLMs,
scaled per LLM): the shared index, its likelihood (dense and gather forms) against scipy's
Dirichlet-multinomial, fresh effects in the replications, and a short recovery check on simulated data."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import xarray as xr

from bayes_experimental import ALL_PRIORS, MODEL_VARIANTS
from bayes_experimental import fit_experimental as fit_bayes
from bayes_experimental._model import ExperimentalSpec as _ModelSpec
from bayes_experimental._summaries import _fresh_eta
from toolbias_stats.models import simulate_bayes_log
from toolbias_stats.models.bayes._common import _zerosum_extend
from toolbias_stats.models.bayes._design import _attach_prompts, _design

ALPHA = np.array([[[1.2, 0.0, -1.2], [0.0, 0.8, -0.8]],
                  [[1.0, 0.2, -1.2], [-0.6, 1.0, -0.4]]])
BETA_CELL = np.array([[[1.2, 0.0, -1.2], [0.4, 0.1, -0.5]],
                      [[0.8, 0.1, -0.9], [0.2, 0.2, -0.4]]])
KAPPA = np.array([1.5, 6.0])
SIGMA_ETA = np.array([1.2, 0.6])
QUERIES = 30
VARIANT = MODEL_VARIANTS["query-shared"]


def _shared_eta(rng=7):
    """Query effects shared by the two LLMs: eta[m, q, :] = SIGMA_ETA[m] * z[q, :] per cluster."""
    gen = np.random.default_rng(rng)
    out = []
    for _ in range(ALPHA.shape[1]):
        z = _zerosum_extend(gen.standard_normal((QUERIES, 2)), np)
        out.append(SIGMA_ETA[:, None, None] * z[None])
    return out


@pytest.fixture(scope="module")
def shared_log():
    return simulate_bayes_log(ALPHA, BETA_CELL, queries=QUERIES, runs=3, kappa=KAPPA, eta=_shared_eta(), rng=3)


def _design_of(log):
    return _attach_prompts(_design(log.counts(), ["model"], "exclude"), log, ["model"], "exclude")


def _priors():
    return {k: ALL_PRIORS[k] for k in VARIANT.priors()}


def _point_and_loglik(spec, seed):
    """A random point of the model, its free parameters as a one-draw posterior, and the 'loglik' potential."""
    model = spec.build()
    gen = np.random.default_rng(seed)
    point = {k: v + 0.4 * gen.standard_normal(np.shape(v)) for k, v in model.initial_point().items()}
    free = [rv.name for rv in model.free_RVs]
    untransformed = [v for v in model.unobserved_value_vars if v.name in free]
    (loglik,) = model.replace_rvs_by_values([model["loglik"]])
    values = model.compile_fn(untransformed + [loglik], inputs=model.value_vars, point_fn=True)(point)
    names = [v.name for v in untransformed]
    post = xr.Dataset({n: xr.DataArray(np.asarray(v)[None, None],
                                       dims=("chain", "draw", *(f"{n}_{i}" for i in range(np.ndim(v)))))
                       for n, v in zip(names, values[:-1])})
    return post, float(values[-1]), names


class TestSharedIndex:
    def test_variant_is_registered(self):
        assert VARIANT.shared_queries and VARIANT.query_effects and VARIANT.dirichlet and VARIANT.cluster_position
        assert "sigma_eta_sd" in VARIANT.priors()

    def test_one_latent_vector_per_cluster_and_query(self, shared_log):
        D = _design_of(shared_log)
        spec = _ModelSpec(D, _priors(), "centered", VARIANT)
        (g,) = spec.qgroups
        pr = D.prompts
        assert g["n_shared"] == ALPHA.shape[1] * QUERIES and 2 * g["n_shared"] == pr.Q
        keys = list(zip(pr.query_cluster[g["queries"]], np.asarray(pr.query_ids)[g["queries"]]))
        for i in range(len(keys)):
            for j in range(len(keys)):
                assert (g["shared"][i] == g["shared"][j]) == (keys[i] == keys[j])
        assert spec.dense
        # the dense layout's index agrees with the per-query one
        np.testing.assert_array_equal(g["sidx"][g["qcell"], g["qslot"]], g["shared"])


class TestSharedLikelihood:
    @pytest.mark.parametrize("dense", [True, False])
    def test_loglik_is_the_prompts_dirichlet_multinomial(self, shared_log, dense):
        """The model's likelihood equals scipy's Dirichlet-multinomial per prompt (without its multinomial
        coefficient) at the effects ``derived`` maps the point to: checks the dense and the gather forms and
        the shared index of the derived query effects at once."""
        from scipy.special import gammaln
        from scipy.stats import dirichlet_multinomial

        D = _design_of(shared_log)
        spec = _ModelSpec(D, _priors(), "centered", VARIANT)
        spec.dense = dense
        post, ll, _ = _point_and_loglik(spec, seed=1)
        d = spec.derived(post, np.random.default_rng(0))
        pr = D.prompts
        want = 0.0
        for u in range(len(pr.y)):
            r, q = pr.row[u], pr.query[u]
            m, c = D.row_llm[r], D.row_cluster[r]
            shown = D.row_tools[r] >= 0
            t = D.row_tools[r][shown]
            logits = d["alpha"][0, m, c, t] + d["beta_cell"][0, m, c][shown] + d["eta"][0, q, t]
            p = np.exp(logits - logits.max())
            p /= p.sum()
            y = pr.y[u][shown].astype(int)
            want += (dirichlet_multinomial.logpmf(y, d["kappa"][0, m, c] * p, y.sum())
                     - gammaln(y.sum() + 1) + gammaln(y + 1).sum())
        np.testing.assert_allclose(ll, want, rtol=1e-6)

    def test_derived_query_effects_are_shared_and_scaled(self, shared_log):
        D = _design_of(shared_log)
        spec = _ModelSpec(D, _priors(), "centered", VARIANT)
        post, _, _ = _point_and_loglik(spec, seed=2)
        d = spec.derived(post, np.random.default_rng(0))
        pr = D.prompts
        se = d["sigma_eta"][0]
        scaled = d["eta"][0, :, :3] / se[pr.query_llm][:, None]
        for q0 in np.flatnonzero(pr.query_llm == 0):
            q1 = np.flatnonzero((pr.query_llm == 1) & (pr.query_cluster == pr.query_cluster[q0])
                                & (np.asarray(pr.query_ids) == pr.query_ids[q0]))
            np.testing.assert_allclose(scaled[q1[0]], scaled[q0], rtol=1e-5)

    def test_fresh_effects_are_shared_by_the_llms(self, shared_log):
        D = _design_of(shared_log)
        spec = _ModelSpec(D, _priors(), "centered", VARIANT)
        pr = D.prompts
        post = {"sigma_eta": np.array([[2.0, 0.5]] * 4)}
        eta = _fresh_eta(post, spec, np.arange(4), np.random.default_rng(1))
        a = np.flatnonzero(pr.query_llm == 0)
        b = np.array([np.flatnonzero((pr.query_llm == 1) & (pr.query_cluster == pr.query_cluster[q])
                                     & (np.asarray(pr.query_ids) == pr.query_ids[q]))[0] for q in a])
        np.testing.assert_allclose(eta[:, b] * 4.0, eta[:, a], rtol=1e-12)
        # and different queries get different (independent) effects
        assert np.corrcoef(eta[:, a, 0].ravel(), eta[:, a[::-1], 0].ravel())[0, 1] < 0.5


class TestSharedFit:
    def test_recovers_query_scales_and_passes_its_own_checks(self, shared_log):
        """Simulated from the variant itself (2 LLMs sharing 60 queries): the per-LLM query-effect scales are
        recovered and neither the per-query dispersion nor the cluster x position check rejects the model.
        (Two LLMs make the between-LLM scales weakly identified: a few divergences are flagged, as they should be.)"""
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res = fit_bayes(shared_log, model="query-shared", draws=500, tune=500, chains=2, cores=1,
                            sampler="pymc", target_accept=0.9, rng=4)
        assert res.model == "query-shared" and res.diagnostics.max_rhat < 1.05
        assert (res.diagnostics.divergences == 0) == (not any("divergent" in f for f in res.diagnostics.flags))
        lo, hi = np.quantile(res._post["sigma_eta"], [0.005, 0.995], axis=0)
        assert np.all((lo < SIGMA_ETA) & (hi > SIGMA_ETA))
        assert 0.02 < res.ppc.p_value_dispersion < 0.98
        assert 0.02 < res.ppc.p_value < 0.98
