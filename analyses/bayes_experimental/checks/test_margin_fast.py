"""Checks of the fast margin model (``analyses/bayes_margin_fast.py``, NumPyro) against the reference PyMC model
(``analyses/bayes_margin.py``): the same posterior, in other coordinates.

The log densities are compared at random points of the reference model's parameters. NumPyro's ``log_density``
is the density of the sampled sites' values without any change of variables; the reference's ``compile_logp``
(``jacobian=False``) likewise. The non-centred form (``nnn``) samples the same variables as the reference, so the
two must agree exactly. A centred effect ``u = loc + s z`` (``d`` coordinates per row) has density
``p(z) / s^d``; the check therefore adds ``d * rows * log s`` per centred block, and uses the rotated coordinates
of ``sparse_rotations`` for the mixed form (an orthogonal map: no Jacobian).
"""

from __future__ import annotations

import warnings

import bayes_margin as bm
import bayes_margin_fast as fast
import bayes_query_sim as qs
import numpy as np
import pytest


@pytest.fixture(scope="module")
def setup():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        D = bm.design_of(qs.simulate(1.0, 3))
    data = bm.margin_data(D)
    ref = bm.build_model(data)
    return data, (ref, ref.compile_logp(jacobian=False)), fast.prepared(data, rich=30)


def _ref_logp(ref, point):
    """The reference model's log density (no Jacobian) at constrained values ``point``."""
    import pytensor.tensor as pt

    ref, f = ref
    vals = {}
    for rv in ref.free_RVs:
        v = ref.rvs_to_values[rv]
        tr = ref.rvs_to_transforms.get(rv)
        x = point[rv.name]
        vals[v.name] = tr.forward(pt.as_tensor(np.asarray(x, float))).eval() if tr is not None else x
    return float(f(vals))


def _random_point(gen, data):
    M, C, K = data["M"], data["C"], data["K"]
    H = bm._basis(K)
    zs = {"mu": (C,), "z_alpha": (M, C), "beta_bar": (), "z_beta": (M,), "z_gamma": (M, C)}
    u = {k: gen.normal(0, 0.7, s + (K - 1,)) for k, s in zs.items()}
    pt = {k: x @ H for k, x in u.items()}                          # zero-sum values of the reference
    sc = {k: gen.uniform(0.3, 1.5) for k in ("sigma_alpha", "sigma_beta", "sigma_gamma")}
    conc = {k: gen.normal(1.5, 1.5, M * C) for k in ("log_kappa", "log_lambda")}
    return u, {**pt, **sc, **conc}


def _fast_logp(P, param, params):
    import numpyro
    from numpyro.infer.util import log_density

    fast._jax()
    with numpyro.handlers.seed(rng_seed=0):
        lp, _ = log_density(fast.model, (P,), {"param": param}, params)
    return float(lp)


@pytest.mark.parametrize("param", ["nnn", "ccc", "ccn", "mcc", "mnc"])
def test_log_density_equals_reference(setup, param):
    data, ref, P = setup
    M, C, K = data["M"], data["C"], data["K"]
    d = K - 1
    gen = np.random.default_rng(5)
    diffs = []
    for _ in range(4):
        u, point = _random_point(gen, data)
        sa, sb, sg = point["sigma_alpha"], point["sigma_beta"], point["sigma_gamma"]
        ua = u["mu"][None] + sa * u["z_alpha"]
        ubm = u["beta_bar"][None] + sb * u["z_beta"]
        ub = ubm[:, None] + sg * u["z_gamma"]
        params = {"mu": u["mu"], "sigma_alpha": sa, "beta_bar": u["beta_bar"], "sigma_beta": sb,
                  "sigma_gamma": sg, "log_kappa": point["log_kappa"], "log_lambda": point["log_lambda"]}
        jac = 0.0
        if param[0] == "n":
            params["z_ua"] = u["z_alpha"]
        elif param[0] == "c":
            params["ua"] = ua
            jac += M * C * d * np.log(sa)
        else:                                                      # rotated, sparse directions non-centred
            R, mask = P["R"], P["sparse"]
            w = np.einsum("rij,rj->ri", R, ua.reshape(M * C, d))
            rl = np.einsum("rij,rj->ri", R, np.broadcast_to(u["mu"][None], (M, C, d)).reshape(M * C, d))
            params["ua_v"] = np.where(mask, (w - rl) / sa, w)
            jac += (~mask).sum() * np.log(sa)
        if param[1] == "n":
            params["z_ubm"] = u["z_beta"]
        else:
            params["ubm"] = ubm
            jac += M * d * np.log(sb)
        if param[2] == "n":
            params["z_ub"] = u["z_gamma"]
        else:
            params["ub"] = ub
            jac += M * C * d * np.log(sg)
        diffs.append(_fast_logp(P, param, params) + jac - _ref_logp(ref, point))
    # equal up to rounding (the log densities are about -1e4; a constant of order 1e-7 is float64 rounding of the
    # normalising constants), and the differences do not vary with the point
    assert np.ptp(diffs) < 1e-7
    np.testing.assert_allclose(diffs, 0.0, atol=1e-6)


def test_mixed_form_has_sparse_directions(setup):
    """With a threshold above some cells' smallest tool count the mixed form rotates those cells, and the
    rotations are orthogonal with their first rows in the span of the sparse tools' zero-sum directions."""
    data, _, P = setup
    R, mask = P["R"], P["sparse"]
    assert mask.any() and not mask.all()
    H = bm._basis(data["K"])
    tot = np.zeros((data["M"] * data["C"], data["K"]))
    np.add.at(tot, data["cell"], data["T"])
    for i in range(len(R)):
        np.testing.assert_allclose(R[i] @ R[i].T, np.eye(data["K"] - 1), atol=1e-12)
        sparse = np.flatnonzero(tot[i] < 30)
        assert mask[i].sum() == len(sparse)
        if len(sparse):
            V = H[:, sparse]
            proj = V @ np.linalg.lstsq(V, R[i][: len(sparse)].T, rcond=None)[0]
            np.testing.assert_allclose(proj, R[i][: len(sparse)].T, atol=1e-12)


@pytest.mark.parametrize("param", ["nnn", "mnc"])
def test_quasi_log_density_equals_reference(setup, param):
    """``likelihood="quasi"``: the fast form's log density equals the PyMC quasi model's (``bayes_margin.build_model``,
    one ``sigma_alpha``) and, with ``pooling="cluster"``, the NumPyro twin's (``sigma_alpha_c`` per cluster; the
    twin's unused ``sigma_alpha`` and its HalfNormal prior term are added to the fast form's) at random points."""
    import numpyro
    from numpyro.infer.util import log_density
    from scipy.stats import halfnorm

    data, _, _ = setup
    M, C, K = data["M"], data["C"], data["K"]
    d = K - 1
    ref_q = bm.build_model(data, likelihood="quasi")
    ref_q = (ref_q, ref_q.compile_logp(jacobian=False))
    fast._jax()
    twin = bm._numpyro_model(M, C, K, bm.PRIORS, "quasi", "cluster")
    twin_args = tuple(np.asarray(x, float) for x in bm._stats(data, "quasi"))
    gen = np.random.default_rng(7)
    diffs = {"hier": [], "cluster": []}
    for pooling in ("hier", "cluster"):
        P = fast.prepared(data, rich=30, likelihood="quasi", pooling=pooling)
        for _ in range(3):
            u, point = _random_point(gen, data)
            sb, sg = point["sigma_beta"], point["sigma_gamma"]
            sa = (np.full((M, C), point["sigma_alpha"]) if pooling == "hier"
                  else np.broadcast_to(gen.uniform(0.3, 1.5, C)[None], (M, C)))
            ua = u["mu"][None] + sa[..., None] * u["z_alpha"]
            ubm = u["beta_bar"][None] + sb * u["z_beta"]
            ub = ubm[:, None] + sg * u["z_gamma"]
            params = {"mu": u["mu"], "beta_bar": u["beta_bar"], "sigma_beta": sb, "sigma_gamma": sg}
            params.update({"sigma_alpha": sa[0, 0]} if pooling == "hier" else {"sigma_alpha_c": sa[0]})
            jac = 0.0
            if param[0] == "n":
                params["z_ua"] = u["z_alpha"]
            else:
                R, mask = P["R"], P["sparse"]
                sr = sa.reshape(M * C, 1)
                w = np.einsum("rij,rj->ri", R, ua.reshape(M * C, d))
                rl = np.einsum("rij,rj->ri", R, np.broadcast_to(u["mu"][None], (M, C, d)).reshape(M * C, d))
                params["ua_v"] = np.where(mask, (w - rl) / sr, w)
                jac += ((~mask) * np.log(sr)).sum()
            if param[1] == "n":
                params["z_ubm"] = u["z_beta"]
            else:
                params["ubm"] = ubm
                jac += M * d * np.log(sb)
            if param[2] == "n":
                params["z_ub"] = u["z_gamma"]
            else:
                params["ub"] = ub
                jac += M * C * d * np.log(sg)
            with numpyro.handlers.seed(rng_seed=0):
                lp_fast, _ = log_density(fast.model, (P,), {"param": param}, params)
            lp_fast = float(lp_fast) + jac
            if pooling == "hier":
                lp_ref = _ref_logp(ref_q, point)
            else:
                s_unused = point["sigma_alpha"]
                lp_fast += halfnorm.logpdf(s_unused, scale=bm.PRIORS["sigma_alpha_sd"])
                tp = {"mu_raw": u["mu"], "sigma_alpha": s_unused, "sigma_alpha_c": sa[0],
                      "z_alpha_raw": u["z_alpha"], "beta_bar_raw": u["beta_bar"], "sigma_beta": sb,
                      "z_beta_raw": u["z_beta"], "sigma_gamma": sg, "z_gamma_raw": u["z_gamma"]}
                with numpyro.handlers.seed(rng_seed=0):
                    lp_ref = float(log_density(twin, twin_args, {}, tp)[0])
            diffs[pooling].append(lp_fast - lp_ref)
    for pooling, x in diffs.items():
        assert np.ptp(x) < 1e-7, (pooling, x)
        np.testing.assert_allclose(x, 0.0, atol=1e-6, err_msg=pooling)
