"""``fit_bayes(model="margin")``: the collapsed margin model (issue 38).

References: the log density against an independent per-query computation with scipy; the same seed; a small
version of the coverage study of ``analyses/bayes_margin_sim.py`` (the issue's design, truths from the simulating
parameters by Monte Carlo over the query effects); theory (an LLM without position effect, degenerate choosers);
the CLI; bad input.
"""

from __future__ import annotations

import importlib.util
import json
import warnings

import numpy as np
import pytest

# not imported here: the fit declares one JAX CPU device per chain before JAX is first imported
if importlib.util.find_spec("numpyro") is None:
    pytest.skip("model='margin' needs numpyro", allow_module_level=True)

from scipy import stats
from scipy.special import log_softmax

from toolbias_stats.exceptions import MisfitWarning
from toolbias_stats.models import fit_bayes, simulate_bayes_log
from toolbias_stats.models.bayes import _margin as mg
from toolbias_stats.models.bayes._common import ALL_PRIORS, MODEL_VARIANTS, _zerosum_extend
from toolbias_stats.models.bayes._design import _attach_prompts, _design

PRIORS = {k: ALL_PRIORS[k] for k in MODEL_VARIANTS["margin"].priors()}
# the design: 4 LLMs x 2 clusters x K = 4, 20 queries x 4 rotations x 3 runs, u ~ N(0, 1); LLM 1 without
# position effects, cluster 2 of equal worths
ALPHA = np.stack([np.array([[1.0, 0.4, -0.2, -1.2], [0.0, 0.0, 0.0, 0.0]]) * s for s in (1.0, 0.6, 1.4, 0.9)])
BETA = np.array([[0.0, 0.0, 0.0, 0.0], [1.0, 0.3, 0.0, -1.3], [0.5, 0.0, 0.0, -0.5], [1.5, 0.5, -0.5, -1.5]])
SD = 1.0
#: shorter than the defaults (4 x (500 + 1,000)), to keep the suite fast; converges on this design
FIT = {"chains": 2, "draws": 500, "tune": 500}


def _quiet(fn, *a, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(*a, **kw)


def _study(seed, alpha=ALPHA, beta=BETA, sd=SD):
    return simulate_bayes_log(alpha, beta, queries=20, runs=3, sigma_eta=sd, rng=seed)


def true_margins(alpha, beta, sd, n_mc=20_000, seed=0):
    """δ_API (M, C) and δ_pos (M,) of the simulating chooser under its K cyclic rotations, the query effects
    integrated out by Monte Carlo (``u = sd * zero-sum(N(0, 1))`` as the simulator draws them)."""
    M, C, K = alpha.shape
    u = sd * _zerosum_extend(np.random.default_rng(seed).normal(size=(n_mc, K - 1)), np)
    u = np.concatenate([np.roll(u, s, axis=1) for s in range(K)])      # exchangeable: equal worths give exactly 0
    d_api, d_pos = np.zeros((M, C)), np.zeros((M, C))
    for m in range(M):
        for c in range(C):
            pt, pp = np.zeros(K), np.zeros(K)
            for r in range(K):
                tools = (np.arange(K) + r) % K                       # tool shown at each position
                p = np.exp(log_softmax(alpha[m, c, tools] + beta[m] + u[:, tools], -1)).mean(0)
                pp += p / K
                np.add.at(pt, tools, p / K)
            d_api[m, c] = 0.5 * np.abs(pt - 1 / K).sum()
            d_pos[m, c] = 0.5 * np.abs(pp - 1 / K).sum()
    return d_api, d_pos.mean(1)


def _data(log):
    counts = log.counts()
    D = _attach_prompts(_design(counts, ["model"], "exclude"), log, ["model"], "exclude")
    return D, mg.margin_data(D)


@pytest.fixture(scope="module")
def sim_fit():
    log = _study(1000)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = fit_bayes(log, model="margin", rng=7, **FIT)
    return log, res, caught


DEGENERATE_FIT = {"model": "margin", "draws": 200, "tune": 300, "chains": 2, "rng": 3}


@pytest.fixture(scope="module")
def degenerate():
    """Four choosers in one cluster of 4 tools under the cyclic rotations: "first" always takes the first slot,
    "tool" always tool 1, "noisy" takes the first slot with probability 0.8 (logit 2.5), "swap" (see
    :func:`_swap`) takes tool 1 in two rotations and tool 3 in the other two. Returns the log, the result, the
    warnings and the posterior draws and data the predictive checks saw."""
    big = 30.0
    alpha = np.zeros((4, 1, 4))
    alpha[1, 0, 0] = big
    beta = np.zeros((4, 4))
    beta[0, 0], beta[2, 0] = big, 2.5
    log = _swap(simulate_bayes_log(alpha, beta, queries=20, runs=3, rng=2,
                                   model_names=["first", "tool", "noisy", "swap"]), "swap")
    seen = {}
    real = mg.ppc

    def spy(post, data, gen, n_draws=mg.PPC_DRAWS):
        seen.update(post=post, data=data)
        return real(post, data, gen, n_draws)

    mg.ppc = spy
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            res = fit_bayes(log, **DEGENERATE_FIT)
    finally:
        mg.ppc = real
    return log, res, caught, seen


# ---------------------------------------------------------------------------------------------
class TestLogDensity:
    """NumPyro's log density of the model equals a per-query computation with scipy at random points."""

    @staticmethod
    def reference(P, data, params):
        M, C, K = P["M"], P["C"], P["K"]
        H, pr = P["H"], P["priors"]
        d = K - 1
        lp = stats.norm.logpdf(params["mu"], 0, pr["mu_sd"]).sum()
        lp += stats.halfnorm.logpdf(params["sigma_alpha"], scale=pr["sigma_alpha_sd"]).sum()
        lp += stats.norm.logpdf(params["beta_bar"], 0, pr["beta_bar_sd"]).sum()
        lp += stats.halfnorm.logpdf(params["sigma_beta"], scale=pr["sigma_beta_sd"])
        lp += stats.halfnorm.logpdf(params["sigma_gamma"], scale=pr["sigma_delta_sd"])
        lp += stats.norm.logpdf(params["z_beta"]).sum()
        um = params["beta_bar"][None] + params["sigma_beta"] * params["z_beta"]
        ua = np.zeros((M, C, d))
        v = params["ua_v"]
        for m in range(M):
            for c in range(C):
                i = m * C + c
                R, mask = P["R"][i], P["sparse"][i]
                rl = R @ params["mu"][c]
                s = params["sigma_alpha"][c]
                w = np.where(mask, rl + s * v[i], v[i])
                lp += np.where(mask, stats.norm.logpdf(v[i]), stats.norm.logpdf(v[i], rl, s)).sum()
                ua[m, c] = R.T @ w
        if P["param"] == "mnc":
            ub = params["ub"]
            lp += stats.norm.logpdf(ub, um[:, None], params["sigma_gamma"]).sum()
        else:
            lp += stats.norm.logpdf(params["z_gamma"]).sum()
            ub = um[:, None] + params["sigma_gamma"] * params["z_gamma"]
        # the quasi-likelihood, query by query: each query's counts on its cell's log-probabilities over phi, phi
        # the Pearson dispersion of the cell's queries (computed here with explicit loops)
        for counts, eff in ((data["T"], ua), (data["Pc"], ub)):
            logp = log_softmax(eff @ H, -1).reshape(M * C, K)
            for i in range(M * C):
                q = counts[data["cell"] == i]
                p = q.sum(0) / q.sum()
                x2 = sum(((row - row.sum() * p) ** 2 / (row.sum() * p))[p > 0].sum() for row in q)
                phi = max(x2 / ((len(q) - 1) * ((p > 0).sum() - 1)), 1.0)
                lp += sum((row * logp[i]).sum() for row in q) / phi
        return lp

    @pytest.mark.parametrize("param", ["nnn", "mnc"])
    def test_equals_reference(self, param):
        _, data = _data(_study(3))
        P = mg.prepared(data, PRIORS)
        P["param"] = param
        if param == "mnc":       # mixed: some directions non-centred (the rotations of a sparse tool)
            P["sparse"] = np.zeros_like(P["sparse"])
            P["sparse"][::3, 0] = True
        gen = np.random.default_rng(1)
        M, C, K = P["M"], P["C"], P["K"]
        for _ in range(3):
            params = {"mu": gen.normal(size=(C, K - 1)), "sigma_alpha": gen.gamma(2.0, 0.5, C),
                      "ua_v": gen.normal(size=(M * C, K - 1)), "beta_bar": gen.normal(size=K - 1),
                      "sigma_beta": gen.gamma(2.0, 0.5), "sigma_gamma": gen.gamma(2.0, 0.5),
                      "z_beta": gen.normal(size=(M, K - 1))}
            params["ub" if param == "mnc" else "z_gamma"] = gen.normal(size=(M, C, K - 1))
            assert mg.log_density(P, params) == pytest.approx(self.reference(P, data, params), rel=1e-10)

    def test_phi_is_the_pearson_dispersion(self):
        """Without heterogeneity (multinomial queries) phi is near 1; with sd = 1 near the design effect > 1."""
        _, d0 = _data(_study(5, sd=0.0))
        _, d1 = _data(_study(5, sd=1.5))
        phi0 = mg.pooled_stats(d0["T"], d0["cell"], 8)[1]
        phi1 = mg.pooled_stats(d1["T"], d1["cell"], 8)[1]
        assert phi0.mean() < 1.3 < phi1.mean()


def _rotations(K):
    return np.array([(np.arange(K) + s) % K for s in range(K)])


def _ipf_reference(la, lb, tools, w, tol, iters):
    """Plain numpy proportional fitting of one cell (the algorithm of ``mg.max_entropy_joint``)."""
    pt, pp = np.exp(la) / np.exp(la).sum(), np.exp(lb) / np.exp(lb).sum()
    a, b = la - la.mean(), lb - lb.mean()

    def margins(a, b):
        J = np.exp(a[tools] + b[None])
        J = w[:, None] / w.sum() * J / J.sum(1, keepdims=True)
        mt = np.zeros(len(a))
        np.add.at(mt, tools, J)
        return mt, J.sum(0)

    it = 0
    while True:
        mt, mp = margins(a, b)
        err = max(np.abs(mt - pt).max(), np.abs(mp - pp).max())
        if err <= tol or it == iters:
            return a, b, err, it
        it += 1
        a = a + np.log(pt) - np.log(mt)
        a -= a.mean()
        mt, mp = margins(a, b)
        b = b + np.log(pp) - np.log(mp)
        b -= b.mean()


def _replicate_reference(gen, a, b, kappa, data):
    """The former vectorised form of ``mg.design_replicate``."""
    K, cell, pq, prow, pn = data["K"], data["cell"], data["pq"], data["prow"], data["pn"]
    Q = len(cell)
    tools = data["rtools"][prow]
    att = np.repeat(np.arange(len(pq)), pn)
    pa = mg._softmax(a)[cell]
    g = gen.gamma(np.maximum(kappa[:, None] * pa, 1e-300))
    lw = np.log(np.maximum(g, 1e-300)) - np.log(np.maximum(g.sum(1, keepdims=True), 1e-300))
    lw = np.where(np.isfinite(lw).all(1, keepdims=True) & (g.sum(1, keepdims=True) > 0), lw,
                  np.log(np.maximum(pa, 1e-300)))
    cum = np.cumsum(mg._softmax(lw.ravel()[pq[:, None] * K + tools] + b[data["rcell"][prow]]), 1)[:, : K - 1]
    pos = (gen.random(len(att))[:, None] > cum[att]).sum(1)
    Tr = np.bincount(pq[att] * K + tools[att, pos], minlength=Q * K)
    Pr = np.bincount(pq[att] * K + pos, minlength=Q * K)
    return Tr.reshape(Q, K).astype(float), Pr.reshape(Q, K).astype(float)


def _dual_reference(pt, pp, tools, w):
    """The maximum-entropy joint of one cell by minimising its convex dual with scipy (independent of the
    package's proportional fitting): ``sum_o w_o logsumexp_p(a[tool_o(p)] + b[p]) - W (a.pt + b.pp)``."""
    from scipy.optimize import minimize
    from scipy.special import logsumexp

    K = len(pt)

    def f(x):
        a, b = x[:K], x[K:]
        L = a[tools] + b[None]
        P = np.exp(L - logsumexp(L, 1, keepdims=True))
        gt = np.zeros(K)
        np.add.at(gt, tools, w[:, None] * P)
        gp = (w[:, None] * P).sum(0)
        W = w.sum()
        val = (w * logsumexp(L, 1)).sum() - W * (a @ pt + b @ pp)
        return val, np.concatenate([gt - W * pt, gp - W * pp])

    x = minimize(f, np.zeros(2 * K), jac=True, method="BFGS", options={"gtol": 1e-12, "maxiter": 5000}).x
    L = x[:K][tools] + x[K:][None]
    return np.exp(L - L.max(1, keepdims=True)) / np.exp(L - L.max(1, keepdims=True)).sum(1, keepdims=True)


def _swap(log, llm):
    """``log`` with the choices of ``llm`` replaced: in the rotation showing tool 1 at slot (K - s) mod K it takes
    slot s. Under the K = 4 cyclic rotations that is tool 1 in two rotations and tool 3 in the other two,
    positions uniform: a tool law that changes with the ordering in a way no ``softmax(a_tool + b_position)``
    with these margins gives (every query's counts are exactly (n/2, 0, n/2, 0); the maximum-entropy joint takes
    tools 1 and 3 half and half in every ordering)."""
    f = log.to_frame()
    shown = f["ordering"].str.split("|")
    cols = [f.columns.get_loc(c) for c in ("chosen_tool", "chosen_position", "chosen_rank")]
    for i in np.flatnonzero((f["model"] == llm).to_numpy()):
        tools = shown.iloc[i]
        at = next(j for j, t in enumerate(tools) if t.endswith("_t1"))
        slot = (len(tools) - at) % len(tools)
        f.iloc[i, cols] = [tools[slot], slot + 1, slot + 1]
    return type(log).from_frame(f, log.catalog, source="<swap>")


def _urn_dispersion_p(post, data, seed, n_draws=500):
    """The former replicate (before issue 38's design replicate): each query's pooled tool counts from a Polya
    urn on the tool margin, blind to the orderings; per LLM the dispersion check's p."""
    gen = np.random.default_rng(seed)
    S = post["alpha"].shape[0]
    sel = gen.choice(S, size=min(n_draws, S), replace=False)
    M, C, K = data["M"], data["C"], data["K"]
    T, cell, qllm = data["T"], data["cell"], data["qllm"]
    n = T.sum(1)
    kap = mg._kappa_of_phi(mg.pooled_stats(T, cell, M * C)[1], n, cell)[cell]
    hits = np.zeros(M)
    for s in sel:
        pa = np.exp(log_softmax(post["alpha"][s].reshape(M * C, K), -1))[cell]
        E = n[:, None] * pa
        rep = mg._polya(gen, pa, kap, n)
        obs = np.bincount(qllm, weights=((T - E) ** 2 / E).sum(1), minlength=M)
        hits += np.bincount(qllm, weights=((rep - E) ** 2 / E).sum(1), minlength=M) >= obs
    return hits / len(sel)


class TestDesignReplicate:
    """The dispersion check's replicate under the logged design (issue 38): the maximum-entropy joint per
    ordering, the queries' orderings and attempts as logged."""

    def test_joint_matches_the_margins_and_scipy(self):
        K = 4
        tools = _rotations(K)
        w = np.array([30.0, 28.0, 30.0, 25.0])
        gen = np.random.default_rng(3)
        la = np.log(gen.dirichlet(np.full(K, 4.0), size=(3, 2)))
        lb = np.log(gen.dirichlet(np.full(K, 4.0), size=(3, 2)))
        data = {"rcell": np.repeat([0, 1], K), "rtools": np.concatenate([tools, tools]), "rw": np.tile(w, 2)}
        a, b, resid, _ = mg.max_entropy_joint(la, lb, data, tol=1e-10, iters=5000)
        assert resid.max() < 1e-10
        for s in range(3):
            for c in range(2):
                J = np.exp(a[s, c][tools] + b[s, c][None])
                J /= J.sum(1, keepdims=True)
                ref = _dual_reference(np.exp(la[s, c]), np.exp(lb[s, c]), tools, w)
                np.testing.assert_allclose(J, ref, atol=1e-6)

    def test_margins_no_joint_has_are_reported(self):
        """One ordering: its tool and position margins are one permutation of each other; other margins have no
        joint, and the residual says so."""
        data = {"rcell": np.array([0]), "rtools": np.array([[0, 1, 2]]), "rw": np.array([10.0])}
        la, lb = np.log([[[0.6, 0.3, 0.1]]]), np.log([[[0.1, 0.3, 0.6]]])
        assert mg.max_entropy_joint(la, lb, data)[2].max() > 0.1
        assert mg.max_entropy_joint(la, la, data)[2].max() < 1e-6

    def test_compiled_ipf_equals_a_numpy_reference(self):
        """The compiled proportional fitting is the plain IPF: same fixed point, residual and rounds as a numpy
        transcription, where a joint exists and where none does (then both stop at ``iters`` rounds)."""
        K = 4
        tools = _rotations(K)[:3]
        w = np.array([5.0, 9.0, 2.0])
        gen = np.random.default_rng(11)
        la = np.log(gen.dirichlet(np.full(K, 2.0), size=(4, 1)))
        lb = np.log(gen.dirichlet(np.full(K, 2.0), size=(4, 1)))
        lb[3, 0] = np.log([0.97, 0.01, 0.01, 0.01])                  # first-slot share near 1: no joint
        data = {"rcell": np.zeros(3, int), "rtools": tools, "rw": w}
        a, b, resid, rounds = mg.max_entropy_joint(la, lb, data, iters=300)
        for s in range(4):
            ra, rb, rr, rn = _ipf_reference(la[s, 0], lb[s, 0], tools, w, mg.IPF_TOL, 300)
            np.testing.assert_allclose(a[s, 0], ra, atol=1e-9)
            np.testing.assert_allclose(b[s, 0], rb, atol=1e-9)
            assert rounds[s, 0] == rn and abs(resid[s, 0] - rr) < 1e-12
        assert resid[3, 0] > 0.1 and rounds[3, 0] == 300 and resid[0, 0] < mg.IPF_TOL and rounds[0, 0] < 300

    def test_compiled_replicate_equals_the_vectorised_form(self):
        """Same seed, same replicate as the former vectorised numpy form (heterogeneous queries, uneven
        attempts, two cells)."""
        K, Q = 4, 12
        gen = np.random.default_rng(5)
        cell = np.repeat([0, 1], Q // 2)
        pq = np.repeat(np.arange(Q), 3)
        data = {"K": K, "cell": cell, "rcell": np.repeat([0, 1], K), "rtools": np.concatenate([_rotations(K)] * 2),
                "pq": pq, "prow": cell[pq] * K + gen.integers(0, K, len(pq)), "pn": gen.integers(1, 4, len(pq))}
        a, b = gen.normal(size=(2, K)), gen.normal(size=(2, K))
        kappa = np.exp(gen.normal(1.0, 1.0, Q))
        T, P = mg.design_replicate(np.random.default_rng(9), a, b, kappa, data)
        rT, rP = _replicate_reference(np.random.default_rng(9), a, b, kappa, data)
        np.testing.assert_array_equal(T, rT)
        np.testing.assert_array_equal(P, rP)
        assert T.sum() == data["pn"].sum() and (T.sum(1) == P.sum(1)).all()

    def test_position_only_chooser_replicates_balanced_counts(self):
        """Without heterogeneity, a first-slot chooser under the K rotations, each shown 3 times: every
        replicated query takes every tool exactly 3 times (the urn would spread them multinomially)."""
        K, Q = 4, 5
        data = {"K": K, "cell": np.zeros(Q, int), "rcell": np.zeros(K, int), "rtools": _rotations(K),
                "rw": np.full(K, 3.0 * Q), "pq": np.repeat(np.arange(Q), K), "prow": np.tile(np.arange(K), Q),
                "pn": np.full(Q * K, 3)}
        a, b, _, _ = mg.max_entropy_joint(np.log(np.full((1, 1, K), 1 / K)),
                                          np.log([[[1 - 3e-12, 1e-12, 1e-12, 1e-12]]]), data)
        T, P = mg.design_replicate(np.random.default_rng(0), a[0], b[0], np.full(Q, 1e8), data)
        assert (T == 3).all() and (P[:, 0] == 12).all()

    def test_replicate_has_the_margins(self):
        """Monte Carlo: the replicate's pooled tool and position frequencies are the margins (no heterogeneity)."""
        K, Q = 4, 50
        data = {"K": K, "cell": np.zeros(Q, int), "rcell": np.zeros(K, int), "rtools": _rotations(K),
                "rw": np.full(K, 2.0 * Q), "pq": np.repeat(np.arange(Q), K), "prow": np.tile(np.arange(K), Q),
                "pn": np.full(Q * K, 2)}
        pt, pp = np.array([0.4, 0.3, 0.2, 0.1]), np.array([0.5, 0.2, 0.2, 0.1])
        a, b, resid, _ = mg.max_entropy_joint(np.log(pt)[None, None], np.log(pp)[None, None], data)
        assert resid.max() < 1e-8
        gen = np.random.default_rng(1)
        tot_t, tot_p = np.zeros(K), np.zeros(K)
        for _ in range(400):
            T, P = mg.design_replicate(gen, a[0], b[0], np.full(Q, 1e8), data)
            tot_t += T.sum(0)
            tot_p += P.sum(0)
        n = 400 * Q * K * 2
        se = np.sqrt(0.25 / n)
        assert np.abs(tot_t / n - pt).max() < 5 * se and np.abs(tot_p / n - pp).max() < 5 * se

    def test_noisy_position_only_chooser_fits(self, degenerate):
        """A noisy first-slot chooser: its tool counts are more balanced than any multinomial, which the former
        urn replicate flagged (p > 0.95); the design replicate does not (p in the band)."""
        _, res, _, seen = degenerate
        disp = res.ppc.dispersion.set_index("llm")
        assert 0.05 <= disp.loc["noisy", "p_value"] <= 0.95
        assert _urn_dispersion_p(seen["post"], seen["data"], 1)[res.llms.index("noisy")] > 0.95

    def test_the_check_keeps_its_power(self, degenerate):
        """The "swap" chooser's tool law changes with the ordering in a way no joint with its margins gives
        (its queries' counts are exactly balanced between tools 1 and 3): flagged, above the band."""
        _, res, _, _ = degenerate
        assert res.ppc.dispersion.set_index("llm").loc["swap", "p_value"] > 0.95

def _laws(a, b, tools):
    L = a[tools] + b[None]
    P = np.exp(L - L.max(1, keepdims=True))
    return P / P.sum(1, keepdims=True)


def _margins(P, tools, w):
    J = w[:, None] / w.sum() * P
    mt = np.zeros(P.shape[1])
    np.add.at(mt, tools, J)
    return mt, J.sum(0)


class TestLimitJoint:
    """The dispersion check's joint at its limit (issue 38): Newton on the dual where a joint exists, a
    certificate where none does, the boundary by linear programming."""

    def test_newton_is_the_ipf_fixed_point_and_the_scipy_dual(self):
        K = 4
        tools = _rotations(K)[:3]
        w = np.array([30.0, 11.0, 25.0])
        gen = np.random.default_rng(21)
        la = np.log(gen.dirichlet(np.full(K, 3.0), size=(4, 2)))
        lb = np.log(gen.dirichlet(np.full(K, 3.0), size=(4, 2)))
        data = {"rcell": np.repeat([0, 1], 3), "rtools": np.concatenate([tools, tools]), "rw": np.tile(w, 2)}
        out = mg.limit_joint(la, lb, data)
        ok = out["status"] == mg.JOINT
        assert ok.sum() >= 3 and out["residual"][ok].max() <= 1e-10
        a, b, resid, _ = mg.max_entropy_joint(la, lb, data, tol=1e-13, iters=100_000)
        # with 3 of the 4 rotations some margins have no joint: certified, and IPF does not reach them either
        assert (out["status"][~ok] == mg.NO_JOINT).all() and resid[~ok].min() > 1e-4
        for s, c in zip(*np.nonzero(ok)):
            P = _laws(out["a"][s, c], out["b"][s, c], tools)
            assert resid[s, c] < 1e-12
            np.testing.assert_allclose(P, _laws(a[s, c], b[s, c], tools), atol=1e-9)
            np.testing.assert_allclose(P, _dual_reference(np.exp(la[s, c]), np.exp(lb[s, c]), tools, w),
                                       atol=1e-6)

    def test_boundary_pair(self):
        """Two orderings of two tools, margins on the edge of the feasible set: the only joint takes tool 1 never
        in ordering 1 (closed form). Newton reaches it to 1e-10 with growing parameters; forced to the linear
        programme (3 steps), the zero is detected and the dual on the remaining choices converges exactly; the
        replicate then never makes the impossible choice."""
        tools, w = np.array([[0, 1], [1, 0]]), np.array([1.0, 1.0])
        data = {"rcell": np.zeros(2, int), "rtools": tools, "rw": w}
        la, lb = np.log([[[0.3, 0.7]]]), np.log([[[0.2, 0.8]]])
        exact = np.array([[0.0, 1.0], [0.4, 0.6]])                # ordering 2 shows tool 2 first
        out = mg.limit_joint(la, lb, data)
        assert out["status"][0, 0] == mg.JOINT and out["residual"][0, 0] <= 1e-10
        np.testing.assert_allclose(_laws(out["a"][0, 0], out["b"][0, 0], tools), exact, atol=1e-9)
        feasible, sup = mg.certify_by_lp(np.array([0.3, 0.7]), np.array([0.2, 0.8]), tools, w)
        assert feasible and sup.tolist() == [[False, True], [True, True]]
        lp = mg.limit_joint(la, lb, data, iters=3)
        assert lp["status"][0, 0] == mg.BOUNDARY and lp["lp"] == 1 and lp["residual"][0, 0] <= 1e-10
        _, mask = lp["support"][(0, 0)]
        L = lp["a"][0, 0][tools] + lp["b"][0, 0][None] + np.where(mask, 0.0, -np.inf)
        np.testing.assert_allclose(np.exp(L) / np.exp(L).sum(1, keepdims=True), exact, atol=1e-12)
        Q = 30
        rep_data = {**data, "K": 2, "cell": np.zeros(Q, int), "pq": np.repeat(np.arange(Q), 2),
                    "prow": np.tile([0, 1], Q), "pn": np.full(2 * Q, 5)}
        off = mg._row_offsets(lp["support"], 2, 2)[0]
        T, P = mg.design_replicate(np.random.default_rng(0), lp["a"][0, 0][None], lp["b"][0, 0][None],
                                   np.full(Q, 1e8), rep_data, row_offset=off)
        assert P[:, 0].sum() == T[:, 1].sum() - 5 * Q          # ordering 1 always takes its second slot

    @pytest.mark.parametrize("case", ["one ordering", "first slot near 1"])
    def test_no_joint_is_certified_and_replicated_from_the_tool_projection(self, case):
        """No joint has both margins: certified (weak duality on the way, and the linear programme's Farkas
        vector agrees); the replicate's law has the draw's exact tool margin and the draw's position logits."""
        if case == "one ordering":
            tools, w = np.array([[0, 1, 2]]), np.array([10.0])
            pt, pp = np.array([0.6, 0.3, 0.1]), np.array([0.1, 0.3, 0.6])
        else:
            tools, w = _rotations(4), np.full(4, 6.0)
            pt, pp = np.array([0.7, 0.1, 0.1, 0.1]), np.array([0.97, 0.01, 0.01, 0.01])
        data = {"rcell": np.zeros(len(tools), int), "rtools": tools, "rw": w}
        out = mg.limit_joint(np.log(pt)[None, None], np.log(pp)[None, None], data)
        assert out["status"][0, 0] == mg.NO_JOINT and out["lp"] == 0
        assert mg.certify_by_lp(pt, pp, tools, w) == (False, None)
        a, b = out["a"][0, 0], out["b"][0, 0]
        np.testing.assert_allclose(b, np.log(pp) - np.log(pp).mean(), atol=1e-12)
        mt, mp = _margins(_laws(a, b, tools), tools, w)
        assert np.abs(mt - pt).max() <= 1e-10 and out["residual"][0, 0] == pytest.approx(np.abs(mp - pp).max())
        ires = mg.max_entropy_joint(np.log(pt)[None, None], np.log(pp)[None, None], data)[2]
        assert ires[0, 0] > 0.01                                  # the former fitting: at its cap, still off

    def test_undetermined_pairs_fall_back_to_the_proportional_fitting(self):
        """Without Newton steps (``iters=0``) nothing converges: the pair with a joint goes to the linear programme
        (the one without is certified at the start point already), neither can then be solved, and both get the
        proportional fitting's point at its cap, flagged undetermined."""
        tools, w = _rotations(4), np.full(4, 6.0)
        data = {"rcell": np.zeros(4, int), "rtools": tools, "rw": w}
        la = np.log([[[0.4, 0.3, 0.2, 0.1]], [[0.7, 0.1, 0.1, 0.1]]])
        lb = np.log([[[0.4, 0.3, 0.2, 0.1]], [[0.97, 0.01, 0.01, 0.01]]])
        out = mg.limit_joint(la, lb, data, iters=0)
        assert out["lp"] == 1 and (out["status"] == mg.UNDETERMINED).all()
        a, b, resid, _ = mg.max_entropy_joint(la, lb, data)
        np.testing.assert_allclose(out["a"], a, atol=1e-12)
        np.testing.assert_allclose(out["b"], b, atol=1e-12)
        np.testing.assert_allclose(out["residual"], resid, atol=1e-12)

    def test_ppc_same_seed_same_output_and_no_joint_share(self):
        """``ppc`` on a hand-built design (2 LLMs, one cluster, K = 4 rotations, 8 queries each): the same seed
        gives the same output; the LLM whose draws take the first slot almost always while its tool margins
        stray from the orderings' shares has no joint in every draw, the other in none."""
        K, Q, S = 4, 16, 40
        gen = np.random.default_rng(4)
        cell = np.repeat([0, 1], Q // 2)
        pq = np.repeat(np.arange(Q), K)
        prow = cell[pq] * K + np.tile(np.arange(K), Q)
        pn = np.full(Q * K, 3)
        T = gen.multinomial(12, [0.4, 0.3, 0.2, 0.1], size=Q).astype(float)
        Pc = gen.multinomial(12, [0.4, 0.3, 0.2, 0.1], size=Q).astype(float)
        data = {"T": T, "Pc": Pc, "cell": cell, "M": 2, "C": 1, "K": K, "qllm": cell, "qcluster": np.zeros(Q, int),
                "rcell": np.repeat([0, 1], K), "rtools": np.concatenate([_rotations(K)] * 2),
                "rw": np.full(2 * K, 24.0), "pq": pq, "prow": prow, "pn": pn}
        alpha = np.log(gen.dirichlet(np.full(K, 30.0), size=(S, 2, 1)))
        beta = np.log(gen.dirichlet(np.full(K, 30.0), size=(S, 2, 1)))
        alpha[:, 1, 0] = np.log([0.7, 0.1, 0.1, 0.1])
        beta[:, 1, 0] = np.log([0.97, 0.01, 0.01, 0.01])
        post = {"alpha": alpha, "beta_cell": beta}
        one = mg.ppc(post, data, np.random.default_rng(8), n_draws=30)
        two = mg.ppc(post, data, np.random.default_rng(8), n_draws=30)
        for k in one:
            np.testing.assert_array_equal(one[k], two[k])
        assert one["no_joint_share"].tolist() == [0.0, 1.0]
        assert (one["joint_status"][:, 0] == mg.JOINT).all() and (one["joint_status"][:, 1] == mg.NO_JOINT).all()
        ipf = mg.ppc(post, data, np.random.default_rng(8), n_draws=30, solver="ipf")
        assert ipf["ipf_residual"][:, 1].min() > 0.01 and one["ipf_residual"][:, 0].max() <= 1e-10


class TestFit:
    def test_result_and_flags(self, sim_fit):
        _, res, _ = sim_fit
        d = res.diagnostics
        assert res.model == "margin" and d.sampler == "numpyro" and d.parameterization == "nnn"
        assert (d.chains, d.draws, d.tune) == (2, 500, 500)
        assert d.max_rhat < 1.02 and d.divergences == 0, d.flags
        out = res.to_dict()
        json.dumps(out)
        assert out["variant"] == "margin" and out["delta_margin"] == 0.02
        # both PPCs beside every interval
        for llm in res.llms:
            for metric in ("delta_api", "delta_pos"):
                assert set(out["implied"][llm][metric]["logged"]) >= {"mean", "hdi", "fits", "failed_checks"}
        checks = res.fit_checks()
        assert set(checks["check"]) == {"per-query dispersion", "cluster x position"}
        frame = res.to_frame()
        cells = frame[frame["quantity"].isin(["delta_api_cell", "delta_pos_cell"])]
        assert len(cells) == 2 * 4 * 2 and cells["fits"].notna().all()
        assert res.rows["total"] == res.rows["used"] + sum(res.rows["excluded"].values()) == 4 * 2 * 20 * 4 * 3

    def test_frequentist_comparison(self, sim_fit):
        """The calibrated interval beside the Bayesian one (``--frequentist``), with the fit status."""
        from toolbias_stats.metrics import selection_bias

        log, res, _ = sim_fit
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            bias = selection_bias(log.counts(), by=["model"], rng=1, n_resamples=200)
        cmp = res.compare_frequentist(bias)
        assert len(cmp) == 8 and set(cmp["metric"]) == {"delta_api", "delta_pos"}
        assert cmp[["bayes_low", "freq_low"]].notna().all().all() and cmp["fits"].notna().all()

    def test_no_position_effect_gets_p0_above_half(self, sim_fit):
        _, res, _ = sim_fit
        ic = res.implied_cells
        pos = ic[(ic["metric"] == "delta_pos") & (ic["cluster"] == "(shared)")].set_index("llm")
        assert pos.loc["llm1", "p0"] > 0.5 and pos.loc["llm1", "hdi_low"] == 0.0
        assert (pos.loc[["llm2", "llm3", "llm4"], "p0"] < 0.05).all()
        api = ic[(ic["metric"] == "delta_api") & (ic["cluster"] == "2")]
        assert (api["p0"] > 0.5).all() and (api["p_below_margin"] >= api["p0"]).all()

    def test_intervals_cover_the_truth(self, sim_fit):
        """One study of the issue's design: the 94% HDIs of δ_API (8 cells) and δ_pos (4 LLMs) cover the true
        margins (``true_margins``) in at least 10 of 12 (the 40-per-cell study: 92.5-100%, docs)."""
        _, res, _ = sim_fit
        d_api, d_pos = true_margins(ALPHA, BETA, SD)
        ic = res.implied_cells
        hits = []
        for m, llm in enumerate(res.llms):
            for c, cl in enumerate(res.clusters):
                r = ic[(ic["llm"] == llm) & (ic["cluster"] == cl) & (ic["metric"] == "delta_api")].iloc[0]
                hits.append(r.hdi_low - 1e-12 <= d_api[m, c] <= r.hdi_high + 1e-12)
            r = ic[(ic["llm"] == llm) & (ic["cluster"] == "(shared)") & (ic["metric"] == "delta_pos")].iloc[0]
            hits.append(r.hdi_low - 1e-12 <= d_pos[m] <= r.hdi_high + 1e-12)
        assert sum(hits) >= 10, hits

    def test_defaults(self, monkeypatch):
        """4 chains x (500 warm-up + 1,000 draws), target acceptance 0.9, NumPyro (without running them)."""
        seen = {}

        def fake(P, **kw):
            seen.update(kw)
            raise RuntimeError("stop")

        monkeypatch.setattr(mg, "sample", fake)
        with pytest.raises(RuntimeError, match="stop"):
            _quiet(fit_bayes, _study(4), model="margin", rng=1)
        assert {k: seen[k] for k in ("chains", "draws", "tune", "target_accept")} == {
            "chains": 4, "draws": 1000, "tune": 500, "target_accept": 0.9}

    def test_degenerate_choosers(self, degenerate):
        """A position-only chooser (always the first slot) and a tool-only chooser (always tool 1): δ_pos resp.
        δ_API near 1 - 1/K = 0.75, the other δ at 0 with P0 > 0.5; the position-only chooser's tool counts are
        exactly balanced under cyclic rotations. The design replicate reproduces that balance, yet the check still
        flags the pure chooser: its posterior tool margins spread about +-0.03 around 1/4 while a first-slot share
        near 1 pins them to 1/4 +- 0.003 (no joint has both margins), so the replicates' counts stray from
        ``n pi`` no more than the data do, and often exactly as much (ties). The model's tool margins are wider
        than the design allows: its δ_API intervals are wider than the data need (docs/dev/bayes_margin.md)."""
        _, res, caught, _ = degenerate
        ic = res.implied_cells.set_index(["llm", "cluster", "metric"])
        first_pos, tool_api = ic.loc[("first", "(shared)", "delta_pos")], ic.loc[("tool", "1", "delta_api")]
        assert 0.7 < first_pos["mean"] <= 0.75 and 0.7 < tool_api["mean"] <= 0.75
        assert ic.loc[("first", "1", "delta_api"), "p0"] > 0.5
        assert ic.loc[("tool", "(shared)", "delta_pos"), "p0"] > 0.5
        status = res.fit_checks().set_index(["llm", "check"])
        assert status.loc[("first", "per-query dispersion"), "p_value"] > 0.95
        assert not status.loc[("first", "per-query dispersion"), "fits"]
        assert any(issubclass(w.category, MisfitWarning) and "first" in str(w.message) for w in caught)


    def test_same_seed_same_output(self, sim_fit):
        log, res, _ = sim_fit
        again = _quiet(fit_bayes, log, model="margin", rng=7, **FIT)
        a, b = res.to_dict(), again.to_dict()
        a["diagnostics"].pop("seconds")
        b["diagnostics"].pop("seconds")
        assert a == b


@pytest.mark.slow
def test_coverage_small_simulation():
    """A small version of ``analyses/bayes_margin_sim.py``: 6 studies of the issue's design at sd = 1; the 94%
    HDIs of δ_API (48 cells) and δ_pos (24 LLM) cover the truth in at least 85% (40 studies per cell:
    92.5% [87.3, 95.7] for the unequal cells, 100% for the zero-truth cells, 96.2% for δ_pos; docs)."""
    d_api, d_pos = true_margins(ALPHA, BETA, SD)
    hits = []
    for seed in range(2000, 2006):
        res = _quiet(fit_bayes, _study(seed), model="margin", draws=500, tune=500, chains=2, rng=seed)
        ic = res.implied_cells.set_index(["llm", "cluster", "metric"])
        for m, llm in enumerate(res.llms):
            for c, cl in enumerate(res.clusters):
                r = ic.loc[(llm, cl, "delta_api")]
                hits.append(r["hdi_low"] - 1e-12 <= d_api[m, c] <= r["hdi_high"] + 1e-12)
            r = ic.loc[(llm, "(shared)", "delta_pos")]
            hits.append(r["hdi_low"] - 1e-12 <= d_pos[m] <= r["hdi_high"] + 1e-12)
    assert np.mean(hits) >= 0.85, np.mean(hits)


class TestInput:
    def test_short_lists_are_one_clear_error(self):
        log = _study(4)
        frame = log.to_frame()
        short = frame.index[frame["chosen_position"] <= 3][:5]
        frame.loc[short, "ordering"] = frame.loc[short, "ordering"].str.rsplit("|", n=1).str[0]
        frame.loc[short, "n_candidates"] = 3
        bad = type(log).from_frame(frame, log.catalog, source="<short>")
        with pytest.raises(ValueError, match=r"model='margin' needs lists that show every tool of the cluster.*"
                                             r"shows 3 of the cluster's 4 tools. Use model='v2'"):
            _quiet(fit_bayes, bad, model="margin")

    def test_counts_only_and_bad_arguments(self):
        log = _study(4)
        with pytest.raises(ValueError, match=r"model='margin' needs to know which attempts belong to one query"):
            fit_bayes(log.counts(), model="margin")
        with pytest.raises(ValueError, match=r"sampled with NumPyro only"):
            fit_bayes(log, model="margin", sampler="pymc")
        with pytest.raises(ValueError, match=r"`delta_margin` must be a number in \(0, 1\)"):
            fit_bayes(log, model="margin", delta_margin=1.5)
        with pytest.raises(ValueError, match=r"`delta_margin` is used by model='margin' only"):
            fit_bayes(log, model="v1", delta_margin=0.05)

    def test_missing_numpyro_names_the_extra(self, monkeypatch):
        monkeypatch.setattr(mg, "_have_numpyro", lambda: False)
        with pytest.raises(ImportError, match=r"pip install 'toolbias_stats\[numpyro\]'"):
            fit_bayes(_study(4), model="margin")


@pytest.mark.slow  # ~15 s idle, 46 s at load 6: the CLI path of the fit tested in TestFit (slow tier, run by CI)
def test_cli_variant_margin_json(tmp_path, capsys):
    import argparse

    from toolbias_stats.cli import _bayes as cli

    log = _study(1000)
    log.write(tmp_path / "log.csv")
    log.catalog.to_frame().to_csv(tmp_path / "catalog.csv", index=False)
    (tmp_path / "study.toml").write_text('name = "tiny"\nformat = "table"\ncatalog = "catalog.csv"\n\n'
                                         '[[logs]]\npath = "log.csv"\n', encoding="utf-8")
    parser = argparse.ArgumentParser()
    cli.add_parser(parser.add_subparsers(dest="command"))
    short = ["--n-draws", "300", "--tune", "300", "--chains", "2", "--seed", "7"]
    args = parser.parse_args(["bayes", str(tmp_path / "study.toml"), "--variant", "margin", *short,
                              "--delta-margin", "0.05", "--json"])
    assert cli.run(args) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["variant"] == "margin" and out["delta_margin"] == 0.05
    assert out["diagnostics"]["sampler"] == "numpyro" and out["diagnostics"]["chains"] == 2
    assert {r["metric"] for r in out["implied_cells"]} == {"delta_api", "delta_pos"}
    assert all(r["p0"] <= r["p_below_margin"] + 1e-12 for r in out["implied_cells"] if r["metric"] == "delta_pos")



def test_text_output(sim_fit):
    """The CLI's text summary of a margin fit (``toolbias-stats bayes --variant margin`` without ``--json``)."""
    from toolbias_stats._text import format_bayes_text

    text = format_bayes_text(sim_fit[1])
    assert "variant margin" in text and "sampler numpyro (nnn)" in text
