"""The fast layouts of the query mixture's likelihood (``toolbias_stats/models/bayes/_mixture_kernel.py``) give the
log-density and gradient of the first layout (two padded gathers) and of scipy's Dirichlet-multinomial mixture."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from bayes_experimental import _mixture_kernel as mk
from bayes_experimental._model import ExperimentalSpec as _ModelSpec
from toolbias_stats.models import simulate_bayes_log

from .test_mixture import (
    ALPHA,
    BETA_CELL,
    KAPPA,
    QUERIES,
    VARIANT,
    _class_eta,
    _design_of,
    _priors,
    _reference_query_loglik,
)
from .test_shared import _point_and_loglik

#: (LAYOUT, EX, jax_kernel): the first version, the PyTensor slots layout, and the single JAX Op (NumPyro)
FORMS = {"gather": ("gather", "exp", False), "slots": ("slots", "prod", False), "op": ("slots", "prod", True)}


@pytest.fixture(scope="module")
def kern_log():
    # unequal runs per prompt (2 or 3) and an unbalanced design, so that the slots have different lengths
    log = simulate_bayes_log(ALPHA, BETA_CELL, queries=QUERIES, runs=3, kappa=KAPPA, eta=_class_eta(), rng=5)
    keep = np.random.default_rng(0).random(len(log.data)) > 0.15
    return type(log).from_frame(log.data[keep].reset_index(drop=True), log.catalog)


def _spec(log, form, monkeypatch, param="centered"):
    layout, ex, op = FORMS[form]
    monkeypatch.setattr(mk, "LAYOUT", layout)
    monkeypatch.setattr(mk, "EX", ex)
    spec = _ModelSpec(_design_of(log), _priors(), param, VARIANT)
    spec.jax_kernel = op
    return spec


class TestSlots:
    def test_slot_sums_equal_padded_sums(self):
        gen = np.random.default_rng(1)
        pad = 50
        table = gen.integers(0, pad, size=(40, 6))
        table[gen.random(table.shape) < 0.4] = pad
        table[:, 0] = gen.integers(0, pad, size=40)
        table[[3, 17]] = pad                                                      # rows without an entry
        x = np.r_[gen.standard_normal(pad), 0.0]
        want = x[table].sum(1)
        order, slots = mk._prefix_slots(table, pad)
        got = mk._slot_sum_np(x[:, None], slots, len(order))[:, 0]
        np.testing.assert_allclose(got, want[order], rtol=1e-14)
        assert set(order[-2:]) == {3, 17} and len(slots[0]) == 38
        assert [len(s) for s in slots] == sorted((len(s) for s in slots), reverse=True)
        assert all(pad not in s for s in slots)

    def test_tables_keep_every_query_and_weight(self, kern_log):
        spec = _ModelSpec(_design_of(kern_log), _priors(), "centered", VARIANT)
        t = spec.mix_tables
        assert t["qweight"].sum() == spec.design.prompts.Q
        assert sorted(t["qcell"].tolist()) == sorted(spec.mix_qcell.tolist())


class TestSameLogDensity:
    @pytest.mark.parametrize("param", ["centered", "noncentered"])
    def test_potential_equals_first_layout_and_scipy(self, kern_log, monkeypatch, param):
        """The 'loglik' potential of every form at the same random point, against the first layout (1e-12)
        and against the per-query mixture of scipy Dirichlet-multinomials (1e-10)."""
        from scipy.special import gammaln

        vals = {}
        for form in FORMS:
            spec = _spec(kern_log, form, monkeypatch, param)
            post, vals[form], _ = _point_and_loglik(spec, seed=4)
        for form in FORMS:
            np.testing.assert_allclose(vals[form], vals["gather"], rtol=1e-12)
        d = spec.derived(post, np.random.default_rng(0))
        pr = spec.design.prompts
        coef = (gammaln(pr.n + 1) - gammaln(pr.y + 1).sum(1)).sum()
        want = _reference_query_loglik(spec.design, d).sum() - coef
        np.testing.assert_allclose(vals["slots"], want, rtol=1e-10)

    def test_jax_value_and_gradient_equal_first_layout(self, kern_log, monkeypatch):
        """What NumPyro differentiates: the JAX log-density and its gradient, first layout against each form."""
        pytest.importorskip("jax")
        import jax
        from pymc.sampling.jax import get_jaxified_logp

        out = {}
        for form in FORMS:
            model = _spec(kern_log, form, monkeypatch).build()
            gen = np.random.default_rng(3)
            ip = model.initial_point()
            x = [ip[v.name] + 0.3 * gen.standard_normal(np.shape(ip[v.name])) for v in model.value_vars]
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                f = get_jaxified_logp(model, negative_logp=False)
                val, grad = jax.jit(jax.value_and_grad(f))(x)
            out[form] = (float(val), [np.asarray(g) for g in grad])
        v0, g0 = out["gather"]
        for form in ("slots", "op"):
            v, g = out[form]
            np.testing.assert_allclose(v, v0, rtol=1e-12)
            for a, b in zip(g, g0):
                np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-10 * np.abs(b).max())

    def test_op_is_used_only_with_numpyro(self, kern_log, monkeypatch):
        """The Op has no PyTensor gradient: PyMC's own samplers keep the PyTensor graph."""
        from toolbias_stats.models.bayes import _sampling

        captured = []

        def fake_build(self):
            captured.append(self.jax_kernel)
            raise RuntimeError("stop")

        monkeypatch.setattr(_ModelSpec, "build", fake_build)
        spec = _ModelSpec(_design_of(kern_log), _priors(), "centered", VARIANT)
        for sampler in ("pymc", "numpyro"):
            with pytest.raises(RuntimeError, match="stop"):
                _sampling._sample(spec, sampler=sampler, draws=1, tune=1, chains=1, cores=1, seed=0,
                                  target_accept=0.8, progress=False)
        assert captured == [False, True]


class TestOpGradient:
    def test_pytensor_gradient_of_the_op_equals_the_graph(self, kern_log, monkeypatch):
        """The Op's PyTensor gradient (what PyMC builds to accept the model for NUTS) equals the graph's."""
        pytest.importorskip("jax")
        out = {}
        for form in ("gather", "op"):
            model = _spec(kern_log, form, monkeypatch).build()
            gen = np.random.default_rng(3)
            ip = model.initial_point()
            point = {k: v + 0.3 * gen.standard_normal(np.shape(v)) for k, v in ip.items()}
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                out[form] = model.compile_dlogp()(point)
        np.testing.assert_allclose(out["op"], out["gather"], rtol=1e-10, atol=1e-10 * np.abs(out["gather"]).max())

    def test_numpyro_fit_runs_with_the_op(self, kern_log):
        pytest.importorskip("numpyro")
        from bayes_experimental import fit_experimental as fit_bayes

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res = fit_bayes(kern_log, model="query-mixture", sampler="numpyro", draws=20, tune=20, chains=1,
                            cores=1, rng=1)
        assert np.isfinite(res.idata.posterior["lambda"].values).all()
