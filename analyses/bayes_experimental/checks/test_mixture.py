"""Tests of the query-mixture variant ``model="query-mixture"`` (v2 + a finite mixture of query classes summed
out analytically): its likelihood against scipy's Dirichlet-multinomial, the per-query log-likelihood (the LOO
unit), the population-mean probabilities of the replications, and a recovery check on simulated data."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from scipy.special import gammaln, logsumexp
from scipy.stats import dirichlet_multinomial

from bayes_experimental import ALL_PRIORS, MODEL_VARIANTS
from bayes_experimental import fit_experimental as fit_bayes
from bayes_experimental._model import ExperimentalSpec as _ModelSpec
from bayes_experimental._summaries import _mixture_probs, _mixture_weights
from toolbias_stats.models import simulate_bayes_log
from toolbias_stats.models.bayes._design import _attach_prompts, _design
from toolbias_stats.models.bayes._loglik import pointwise_query_loglik

from .test_shared import _point_and_loglik

ALPHA = np.array([[[1.0, 0.0, -1.0], [0.0, 0.6, -0.6]],
                  [[0.8, 0.2, -1.0], [-0.5, 0.9, -0.4]]])
BETA_CELL = np.array([[[1.0, 0.0, -1.0], [0.4, 0.1, -0.5]],
                      [[0.7, 0.1, -0.8], [0.2, 0.2, -0.4]]])
KAPPA = np.array([1.5, 6.0])
LAMBDA = np.array([3.0, 1.5])
EPSILON = np.array([[0.6, 0.4], [0.5, 0.7]])
QUERIES = 40
VARIANT = MODEL_VARIANTS["query-mixture"]


def _class_share(a):
    """Share of the 'needs a tool' classes by tool: softmax(alpha) (tied weights) or uniform."""
    from bayes_experimental._variants import _MIXTURE_TIED

    if _MIXTURE_TIED:
        return np.exp(a - a.max()) / np.exp(a - a.max()).sum()
    return np.full(len(a), 1.0 / len(a))


def _class_eta(queries=QUERIES, rng=7):
    """Query effects of the mixture: a query needs tool j (lambda[m] on its logit) with probability
    epsilon[m, c] * softmax(alpha[m, c])[j], else none."""
    gen = np.random.default_rng(rng)
    M, C, K = ALPHA.shape
    out = []
    for c in range(C):
        eta = np.zeros((M, queries, K))
        for m in range(M):
            pi = _class_share(ALPHA[m, c])
            w = np.r_[1 - EPSILON[m, c], EPSILON[m, c] * pi]
            cls = gen.choice(K + 1, size=queries, p=w)
            for q, k in enumerate(cls):
                if k > 0:
                    eta[m, q, k - 1] = LAMBDA[m]
        out.append(eta)
    return out


@pytest.fixture(scope="module")
def mix_log():
    return simulate_bayes_log(ALPHA, BETA_CELL, queries=QUERIES, runs=3, kappa=KAPPA, eta=_class_eta(), rng=3)


def _design_of(log):
    return _attach_prompts(_design(log.counts(), ["model"], "exclude"), log, ["model"], "exclude")


def _priors():
    return {k: ALL_PRIORS[k] for k in VARIANT.priors()}


def _reference_query_loglik(D, d):
    """Per query: log sum_k w_k prod over its prompts of scipy's DM(y | n, kappa p_k) (with coefficients)."""
    pr = D.prompts
    out = np.zeros(pr.Q)
    K = D.Kmax
    for q in range(pr.Q):
        m, c = pr.query_llm[q], pr.query_cluster[q]
        a = d["alpha"][0, m, c]
        pi = _class_share(a)
        w = np.r_[1 - d["epsilon"][0, m, c], d["epsilon"][0, m, c] * pi]
        if "class_weights" in d:                                 # free weights per cell (experimental)
            w = d["class_weights"][0, m, c]
        per_class = np.log(w)
        for u in np.flatnonzero(pr.query == q):
            r = pr.row[u]
            shown = D.row_tools[r] >= 0
            t = D.row_tools[r][shown]
            y = pr.y[u][shown].astype(int)
            for k in range(K + 1):
                logits = a[t] + d["beta_cell"][0, m, c][shown] + d["lambda"][0, m] * (t == k - 1)
                p = np.exp(logits - logits.max())
                p /= p.sum()
                per_class[k] += dirichlet_multinomial.logpmf(y, d["kappa"][0, m, c] * p, y.sum())
        out[q] = logsumexp(per_class)
    return out


class TestMixtureLikelihood:
    def test_variant_is_registered(self):
        assert VARIANT.query_mixture and VARIANT.dirichlet and VARIANT.cluster_position
        assert not VARIANT.query_effects
        assert "lambda_sd" in VARIANT.priors()

    @pytest.mark.parametrize(("param", "eps_max"), [("centered", 0.5), ("noncentered", 0.5), ("centered", 1.0),
                                                     ("noncentered", 0.8)])
    def test_loglik_is_the_mixture_of_dirichlet_multinomials(self, mix_log, param, eps_max):
        """The model's potential equals the per-query mixture of scipy Dirichlet-multinomials (without the
        multinomial coefficients) at the effects ``derived`` maps a random point to, with
        ``epsilon = eps_max * expit(t)``."""
        D = _design_of(mix_log)
        spec = _ModelSpec(D, {**_priors(), "eps_max": eps_max}, param, VARIANT)
        post, ll, _ = _point_and_loglik(spec, seed=1)
        d = spec.derived(post, np.random.default_rng(0))
        pr = D.prompts
        coef = (gammaln(pr.n + 1) - gammaln(pr.y + 1).sum(1)).sum()
        want = _reference_query_loglik(D, d).sum() - coef
        np.testing.assert_allclose(ll, want, rtol=1e-7)

    def test_free_class_weights_loglik_and_prior(self, mix_log, monkeypatch):
        """Free class weights per cell (``_MIXTURE_FREE``): the potential is the scipy mixture with those
        weights, and the prior potential is the Dirichlet(1) density in logistic coordinates
        (``sum_k log w_k``, checked against scipy's Dirichlet plus the Jacobian ``prod_k w_k``)."""
        from bayes_experimental import _variants as _common

        monkeypatch.setattr(_common, "_MIXTURE_FREE", True)
        D = _design_of(mix_log)
        spec = _ModelSpec(D, _priors(), "centered", VARIANT)
        post, ll, _ = _point_and_loglik(spec, seed=5)
        d = spec.derived(post, np.random.default_rng(0))
        assert d["class_weights"].shape == (1, 2, 2, 4)
        np.testing.assert_allclose(d["class_weights"].sum(-1), 1.0)
        np.testing.assert_allclose(d["epsilon"], 1.0 - d["class_weights"][..., 0])
        pr = D.prompts
        coef = (gammaln(pr.n + 1) - gammaln(pr.y + 1).sum(1)).sum()
        np.testing.assert_allclose(ll, _reference_query_loglik(D, d).sum() - coef, rtol=1e-7)
        check_class_prior_is_dirichlet_one(spec.build())

    def test_epsilon_is_bounded_by_eps_max(self, mix_log):
        D = _design_of(mix_log)
        spec = _ModelSpec(D, {**_priors(), "eps_max": 0.5}, "centered", VARIANT)
        post, _, _ = _point_and_loglik(spec, seed=4)
        post["logit_epsilon"] = post["logit_epsilon"] * 0 + 40.0          # expit = 1
        d = spec.derived(post, np.random.default_rng(0))
        np.testing.assert_allclose(d["epsilon"], 0.5)

    def test_eps_max_above_one_is_an_error(self, mix_log):
        with pytest.raises(ValueError, match="eps_max"):
            fit_bayes(mix_log, model="query-mixture", priors={"eps_max": 1.5})

    def test_pointwise_query_loglik_matches_scipy(self, mix_log):
        D = _design_of(mix_log)
        spec = _ModelSpec(D, _priors(), "centered", VARIANT)
        post, _, _ = _point_and_loglik(spec, seed=2)
        d = spec.derived(post, np.random.default_rng(0))
        got = pointwise_query_loglik(d, spec)[0]
        np.testing.assert_allclose(got, _reference_query_loglik(D, d), rtol=1e-9, atol=1e-9)

    def test_population_probabilities_are_the_class_average(self, mix_log):
        """The replications' expectation: sum_k w_k softmax(alpha + lambda e_k + beta), by hand for one row."""
        D = _design_of(mix_log)
        spec = _ModelSpec(D, _priors(), "centered", VARIANT)
        post, _, _ = _point_and_loglik(spec, seed=3)
        d = spec.derived(post, np.random.default_rng(0))
        pk, wk = _mixture_probs(d, D, 0, 1, np.arange(len(D.y)))
        r = 3
        m, c = D.row_llm[r], D.row_cluster[r]
        t = D.row_tools[r]
        want = np.zeros(D.P)
        a = d["alpha"][0, m, c]
        pi = _class_share(a)
        w = np.r_[1 - d["epsilon"][0, m, c], d["epsilon"][0, m, c] * pi]
        for k in range(D.Kmax + 1):
            lg = a[t] + d["beta_cell"][0, m, c] + d["lambda"][0, m] * (t == k - 1)
            want += w[k] * np.exp(lg) / np.exp(lg).sum()
        np.testing.assert_allclose((pk[0, r] * wk[0, r][None, :]).sum(-1), want, rtol=1e-12)
        np.testing.assert_allclose(_mixture_weights(d, D, 0, 1).sum(-1), 1.0)


class TestMixtureRecovery:
    def test_recovers_lambda_and_passes_its_checks(self, mix_log):
        """Fitted to data simulated from the variant, the boosts and class probabilities are recovered and the
        per-query dispersion and cluster x position checks pass (they are not biased against the model)."""
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res = fit_bayes(mix_log, model="query-mixture", draws=300, tune=300, chains=2, sampler="pymc", rng=11)
        lam = res.idata.posterior["lambda"].values.reshape(-1, 2)
        lo, hi = np.quantile(lam, [0.01, 0.99], axis=0)
        assert np.all((lo < LAMBDA) & (hi > LAMBDA)), (lo, hi)
        eps = res.idata.posterior["epsilon"].values.reshape(-1, 2, 2)
        lo, hi = np.quantile(eps, [0.01, 0.99], axis=0)
        assert np.all((lo < EPSILON) & (hi > EPSILON)), (lo, hi)
        assert 0.05 <= res.ppc.p_value_dispersion <= 0.95
        assert 0.05 <= res.ppc.p_value <= 0.95


def check_class_prior_is_dirichlet_one(model, n_cells=4, n_classes=4):
    """The free class weights' prior potential is Dirichlet(1, ..., 1) in the logistic coordinates (with their
    Jacobian ``prod_k w_k``), at a random point, against scipy's Dirichlet."""
    from scipy.stats import dirichlet

    point = {k: v + 0.4 * np.random.default_rng(5).standard_normal(np.shape(v))
             for k, v in model.initial_point().items()}
    (prior,) = model.replace_rvs_by_values([model["class_prior"]])
    got = model.compile_fn(prior, inputs=model.value_vars, point_fn=True, on_unused_input="ignore")(point)
    z = np.concatenate([np.zeros((n_cells, 1)), point["class_logits"]], 1)
    w = np.exp(z) / np.exp(z).sum(1, keepdims=True)
    ones = np.ones(n_classes)
    want = sum(dirichlet.logpdf(wi, ones) + np.log(wi).sum() for wi in w) - n_cells * dirichlet.logpdf(
        np.full(n_classes, 1 / n_classes), ones)            # the constant log Gamma(K + 1) per cell
    np.testing.assert_allclose(got, want, rtol=1e-9)
