"""Tests of the identified query mixture ``model="query-mixture-id"`` (issue 22, fifth attempt): indifferent queries
choose by position alone, a query needs tool j (+lambda[m] on its logit) with a free class weight w[m, c, j], so a
tool's popularity has one description. Its log-density against scipy's Dirichlet-multinomial mixture written out
independently (no tool effects), its prior, and recovery of its parameters from data simulated from it."""

from __future__ import annotations

import dataclasses
import warnings

import numpy as np
import pytest
from scipy.special import gammaln, logsumexp
from scipy.stats import dirichlet_multinomial

from bayes_experimental import ALL_PRIORS, MODEL_VARIANTS
from bayes_experimental import fit_experimental as fit_bayes
from bayes_experimental._model import ExperimentalSpec as _ModelSpec
from toolbias_stats.models import simulate_bayes_log
from toolbias_stats.models.bayes._design import _attach_prompts, _design
from toolbias_stats.models.bayes._loglik import pointwise_query_loglik

from .test_mixture import check_class_prior_is_dirichlet_one
from .test_shared import _point_and_loglik

BETA_CELL = np.array([[[1.0, 0.0, -1.0], [0.4, 0.1, -0.5]],
                      [[0.7, 0.1, -0.8], [0.2, 0.2, -0.4]]])
KAPPA = np.array([1.5, 6.0])
LAMBDA = np.array([[3.0, 2.5], [2.0, 3.5]])            # per (LLM, cluster)
#: class weights per (LLM, cluster): indifferent, needs tool 1, 2, 3
WEIGHTS = np.array([[[0.5, 0.3, 0.15, 0.05], [0.4, 0.1, 0.4, 0.1]],
                    [[0.6, 0.1, 0.1, 0.2], [0.3, 0.5, 0.1, 0.1]]])
QUERIES = 60
VARIANT = MODEL_VARIANTS["query-mixture-id"]


def _class_eta(queries=QUERIES, rng=7):
    """Query effects of the variant: a query of cell (m, c) needs tool j with probability WEIGHTS[m, c, j + 1]
    (lambda[m, c] on that tool's logit), else none."""
    gen = np.random.default_rng(rng)
    M, C, K1 = WEIGHTS.shape
    out = []
    for c in range(C):
        eta = np.zeros((M, queries, K1 - 1))
        for m in range(M):
            cls = gen.choice(K1, size=queries, p=WEIGHTS[m, c])
            for q, k in enumerate(cls):
                if k > 0:
                    eta[m, q, k - 1] = LAMBDA[m, c]
        out.append(eta)
    return out


@pytest.fixture(scope="module")
def id_log():
    return simulate_bayes_log(np.zeros((2, 2, 3)), BETA_CELL, queries=QUERIES, runs=3, kappa=KAPPA,
                               eta=_class_eta(), rng=3)


def _design_of(log):
    return _attach_prompts(_design(log.counts(), ["model"], "exclude"), log, ["model"], "exclude")


def _priors():
    return {k: ALL_PRIORS[k] for k in VARIANT.priors()}


def _reference(D, beta_cell, kappa, lam, w):
    """Per query: log sum_k w[m, c, k] prod over its prompts of scipy's DM(y | n, kappa p_k), p_k the softmax of the
    position effects of the tools shown plus lambda (per cell, or per LLM) on tool k - 1 (no tool effects)."""
    pr = D.prompts
    out = np.zeros(pr.Q)
    for q in range(pr.Q):
        m, c = pr.query_llm[q], pr.query_cluster[q]
        per_class = np.log(w[m, c]).copy()
        for u in np.flatnonzero(pr.query == q):
            r = pr.row[u]
            shown = D.row_tools[r] >= 0
            t = D.row_tools[r][shown]
            y = pr.y[u][shown].astype(int)
            boost = lam[m, c] if lam.ndim == 2 else lam[m]
            for k in range(D.Kmax + 1):
                logits = beta_cell[m, c][shown] + boost * (t == k - 1)
                p = np.exp(logits - logits.max())
                per_class[k] += dirichlet_multinomial.logpmf(y, kappa[m, c] * p / p.sum(), y.sum())
        out[q] = logsumexp(per_class)
    return out


class TestIdentifiedMixture:
    def test_variant_is_registered(self):
        assert VARIANT.query_mixture and VARIANT.dirichlet and VARIANT.cluster_position
        assert not VARIANT.tool_effects and VARIANT.free_class_weights
        assert VARIANT.priors() == ("beta_bar_sd", "sigma_beta_sd", "sigma_delta_sd", "rho_a", "rho_b", "lambda_sd")
        for name in ("v1", "v2", "query-mixture"):                 # the other variants keep their terms
            v = MODEL_VARIANTS[name]                               # the package's v1/v2 have no such flags
            assert getattr(v, "tool_effects", True) and not getattr(v, "free_class_weights", False)

    def test_tool_effect_priors_are_not_used(self, id_log):
        with pytest.raises(ValueError, match="not used by model='query-mixture-id'"):
            fit_bayes(id_log, model="query-mixture-id", priors={"mu_sd": 1.0})
        with pytest.raises(ValueError, match="not used by model='query-mixture-id'"):
            fit_bayes(id_log, model="query-mixture-id", priors={"eps_max": 0.5})

    @pytest.mark.parametrize(("param", "per_cell"), [("centered", True), ("noncentered", True),
                                                      ("centered", False)])
    def test_loglik_is_the_position_only_mixture(self, id_log, param, per_cell):
        """The potential at a random point equals the scipy reference built from the position effects, kappa,
        lambda and class weights alone; the model has no tool-effect parameter and reports alpha = mu = 0, with
        the boost per (LLM, cluster) or per LLM (``boost_per_cell=False``)."""
        D = _design_of(id_log)
        spec = _ModelSpec(D, _priors(), param, dataclasses.replace(VARIANT, boost_per_cell=per_cell))
        post, ll, names = _point_and_loglik(spec, seed=1)
        assert not any(n.startswith(("alpha", "mu", "z_alpha", "sigma_alpha")) for n in names), names
        d = spec.derived(post, np.random.default_rng(0))
        np.testing.assert_array_equal(d["alpha"], 0.0)
        np.testing.assert_array_equal(d["mu"], 0.0)
        assert "sigma_alpha" not in d
        assert d["lambda"].shape == ((1, 2, 2) if per_cell else (1, 2))
        w = d["class_weights"][0]
        np.testing.assert_allclose(w.sum(-1), 1.0)
        pr = D.prompts
        coef = (gammaln(pr.n + 1) - gammaln(pr.y + 1).sum(1)).sum()
        want = _reference(D, d["beta_cell"][0], d["kappa"][0], d["lambda"][0], w).sum() - coef
        np.testing.assert_allclose(ll, want, rtol=1e-7)
        got = pointwise_query_loglik(d, spec)[0]                  # the LOO unit, same reference
        np.testing.assert_allclose(got, _reference(D, d["beta_cell"][0], d["kappa"][0], d["lambda"][0], w),
                                   rtol=1e-9, atol=1e-9)

    def test_numpyro_kernel_equals_the_graph(self, id_log):
        """Under NumPyro the class sums are one JAX Op (``_mixture_kernel``); with the boost per (LLM, cluster)
        its log-density equals PyTensor's graph of the same model at a random point."""
        pytest.importorskip("jax")
        from pymc.sampling.jax import get_jaxified_logp

        values = []
        for kernel in (False, True):
            spec = _ModelSpec(_design_of(id_log), _priors(), "centered", VARIANT)
            spec.jax_kernel = kernel
            model = spec.build()
            point = {k: v + 0.3 * np.random.default_rng(1).standard_normal(np.shape(v))
                     for k, v in model.initial_point().items()}
            if kernel:
                values.append(float(get_jaxified_logp(model)([point[v.name] for v in model.value_vars])))
            else:
                values.append(float(model.compile_logp()(point)))
        np.testing.assert_allclose(values[1], values[0], rtol=1e-12)

    def test_class_prior_is_dirichlet_one(self, id_log):
        """The class weights' prior potential is Dirichlet(1, ..., 1) with the Jacobian of the logistic map."""
        D = _design_of(id_log)
        check_class_prior_is_dirichlet_one(_ModelSpec(D, _priors(), "centered", VARIANT).build())


class TestIdentifiedMixtureRecovery:
    def test_recovers_its_parameters_and_passes_its_checks(self, id_log):
        """Fitted to data simulated from the variant: at least 90% of lambda, the class weights, kappa and the
        position effects (28 values) lie inside their 98% intervals (one fit; a calibrated interval misses 2% of
        the time), the boosts' and weights' posterior means are within 3 posterior sd of the truth, the chains
        agree (R-hat), and both its own checks pass."""
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res = fit_bayes(id_log, model="query-mixture-id", draws=300, tune=300, chains=2, sampler="pymc", rng=11)
        post = res._post
        inside = []
        for name, truth in (("lambda", LAMBDA), ("class_weights", WEIGHTS), ("kappa", np.tile(KAPPA, (2, 1)).T),
                            ("beta_cell", BETA_CELL - BETA_CELL.mean(-1, keepdims=True))):
            lo, hi = np.quantile(post[name], [0.01, 0.99], axis=0)
            inside.append(((lo < truth) & (hi > truth)).ravel())
        assert np.concatenate(inside).mean() >= 0.9, inside
        for name, truth in (("lambda", LAMBDA), ("class_weights", WEIGHTS)):
            z = np.abs(post[name].mean(0) - truth) / post[name].std(0)
            assert z.max() < 3.0, (name, z)
        assert res.diagnostics.max_rhat < 1.05
        assert 0.05 <= res.ppc.p_value_dispersion <= 0.95
        assert 0.05 <= res.ppc.p_value <= 0.95
