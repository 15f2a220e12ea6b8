"""Checks of the experimental query-effects variants (``overdispersed``, ``thorough``; moved from
tests/models/test_bayes_variants.py in issue 38): recovery of the query scale and the dense layout's likelihood."""

from __future__ import annotations

import warnings

import numpy as np

from bayes_experimental import fit_experimental as fit_bayes
from toolbias_stats.models import simulate_bayes_log
from toolbias_stats.models.bayes._design import _attach_prompts, _design

ALPHA = np.array([[[1.2, 0.0, -1.2], [0.0, 0.8, -0.8]],
                  [[1.0, 0.2, -1.2], [-0.6, 1.0, -0.4]]])
BETA_CELL = np.array([[[1.2, 0.0, -1.2], [0.4, 0.1, -0.5]],
                      [[0.8, 0.1, -0.9], [0.2, 0.2, -0.4]]])
KAPPA = np.array([0.7, 3.0])


def _quiet(fn, *a, **k):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(*a, **k)


class TestQueryEffects:
    def test_thorough_recovers_the_query_scale(self):
        log = simulate_bayes_log(ALPHA, BETA_CELL, queries=30, runs=3, kappa=2.0, sigma_eta=np.array([1.2, 0.3]),
                                  rng=8)
        res = _quiet(fit_bayes, log, model="thorough", rng=3, draws=200, tune=250, chains=2, cores=1,
                     sampler="pymc")
        sc = res.scales.set_index(["quantity", "llm"])
        hi, lo = sc.loc[("sigma_eta", "llm1")], sc.loc[("sigma_eta", "llm2")]
        assert hi["mean"] > lo["mean"]
        assert hi["hdi_low"] <= 1.2 <= hi["hdi_high"]
        assert res.ppc.dispersion is not None and res.ppc.p_value_dispersion > 0.01
        assert "eta" not in res.idata.posterior and res.idata.posterior["sigma_eta"].shape[-1] == 2
        assert not hasattr(res.idata, "log_likelihood")       # the marginal one is computed by compare_bayes


class TestDenseLayout:
    def test_dense_and_gather_likelihoods_agree(self):
        """The query-effects likelihood in its dense (cell, query, ordering, position) layout equals the gather form."""
        from bayes_experimental import ALL_PRIORS, MODEL_VARIANTS
        from bayes_experimental._model import ExperimentalSpec as _ModelSpec

        log = simulate_bayes_log(ALPHA, BETA_CELL, queries=6, runs=3, kappa=KAPPA, rng=9)
        design = _attach_prompts(_design(log.counts(), ["model"], "exclude"), log, ["model"], "exclude")
        dense = _ModelSpec(design, ALL_PRIORS, "centered", MODEL_VARIANTS["thorough"])
        assert dense.dense
        gather = _ModelSpec(design, ALL_PRIORS, "centered", MODEL_VARIANTS["thorough"])
        gather.dense = False
        m_d, m_g = dense.build(), gather.build()
        g = np.random.default_rng(0)
        point_g = {k: g.normal(0, 0.5, np.shape(v)) for k, v in m_g.initial_point().items()}
        point_d = {}
        for k in m_d.initial_point():
            if k.startswith("z_eta_k"):
                grp = dense.qgroups[0]
                z = np.zeros((len(grp["cells"]), grp["maxQ"], grp["k"] - 1))
                z[grp["qcell"], grp["qslot"]] = point_g[k]
                point_d[k] = z
            else:
                point_d[k] = point_g[k]
        lp_g = m_g.compile_logp()(point_g)
        lp_d = m_d.compile_logp()(point_d)
        assert np.isfinite(lp_g) and np.isclose(lp_d, lp_g, rtol=1e-10, atol=1e-8)
