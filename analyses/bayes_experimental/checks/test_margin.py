"""Checks of the collapsed margin model (``analyses/bayes_margin.py``) against independent references: scipy's
Dirichlet-multinomial and multivariate normal, the simulator's counts, a Monte-Carlo prior density, and the
sufficient-statistic form of the likelihood, and one short fit."""

from __future__ import annotations

import warnings

import bayes_margin as bm
import bayes_margin_sim as sim
import bayes_query_sim as qs
import numpy as np
import pytest


@pytest.fixture(scope="module")
def small():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        D = bm.design_of(qs.simulate(1.0, 5))
    return D, bm.margin_data(D)


def test_margin_data_counts_every_choice_once(small):
    """Per query the tool counts and the position counts both add up to its 12 attempts; the cells' tool totals
    equal the design's tool counts (an independent tally)."""
    D, data = small
    assert data["T"].shape == (qs.M * qs.C * qs.Q, qs.K)
    assert (data["T"].sum(1) == 12).all() and (data["Pc"].sum(1) == 12).all()
    tc = D.tool_counts().reshape(D.M * D.C, -1)
    got = np.zeros_like(tc)
    np.add.at(got, data["cell"], data["T"])
    np.testing.assert_array_equal(got, tc)
    pc = D.cell_position_counts().reshape(D.M * D.C, -1)
    gotp = np.zeros_like(pc)
    np.add.at(gotp, data["cell"], data["Pc"])
    np.testing.assert_array_equal(gotp, pc)


def test_dm_loglik_matches_scipy():
    """The model's Dirichlet-multinomial (without the multinomial coefficient) = scipy's logpmf minus log coef."""
    import pytensor.tensor as pt
    from scipy.special import gammaln
    from scipy.stats import dirichlet_multinomial

    gen = np.random.default_rng(0)
    y = gen.integers(0, 6, (7, 4)).astype(float)
    conc = gen.uniform(0.5, 20, 7)
    p = gen.dirichlet(np.ones(4), 7)
    got = bm._dm_loglik(pt, pt.as_tensor(y), pt.as_tensor(conc), pt.as_tensor(p)).eval()
    n = y.sum(1)
    ref = sum(dirichlet_multinomial.logpmf(y[i], conc[i] * p[i], n[i]) for i in range(7))
    coef = (gammaln(n + 1) - gammaln(y + 1).sum(1)).sum()
    assert got == pytest.approx(ref - coef, rel=1e-10)


def test_gauss_density_at_zero_matches_scipy():
    from scipy.stats import multivariate_normal

    x = np.random.default_rng(1).normal([0.3, -0.2, 0.1], [0.2, 0.3, 0.25], (5000, 3))
    ref = multivariate_normal(x.mean(0), np.cov(x, rowvar=False)).logpdf(np.zeros(3))
    assert bm._gauss_logdens0(x) == pytest.approx(ref, rel=1e-9)


def test_prior_densities_at_zero_match_monte_carlo():
    """The closed forms of the prior densities at 0 against a kernel-free Monte-Carlo estimate: the density of
    the scale mixture at 0 is E[N(0 | 0, Sigma(scales))], Sigma built element by element from prior draws."""
    from scipy.stats import multivariate_normal

    pr = bm.PRIORS
    gen = np.random.default_rng(2)
    K, C = 4, 2
    H = bm._basis(K)
    sa = np.abs(gen.normal(0, pr["sigma_alpha_sd"], 3000))
    mc = np.mean([multivariate_normal(np.zeros(K - 1), (pr["mu_sd"] ** 2 + s ** 2) * np.eye(K - 1)).pdf(0)
                  for s in sa])
    assert bm.prior_logdens0_tools(pr, K) == pytest.approx(np.log(mc), abs=0.03)
    # positions: the mean over C clusters of b[c] = bb + sb zb + sg zg[c] (zero-sum over K), by simulation:
    # a histogram-free estimate E[N(0 | 0, var)] with var built from drawn scales
    dens = []
    for _ in range(3000):
        sb, sg = np.abs(gen.normal(0, [pr["sigma_beta_sd"], pr["sigma_gamma_sd"]]))
        var = pr["beta_bar_sd"] ** 2 + sb ** 2 + sg ** 2 / C
        dens.append(multivariate_normal(np.zeros(K - 1), var * np.eye(K - 1)).pdf(0))
    assert bm.prior_logdens0_positions(pr, C, K) == pytest.approx(np.log(np.mean(dens)), abs=0.03)
    assert H.shape == (K - 1, K)


def test_spike_probability_high_at_zero_low_far_from_it():
    """Savage-Dickey: draws concentrated at 0 give P(equal worths) > w0; draws far from 0 give ~0."""
    gen = np.random.default_rng(3)
    S, M, C, K = 2000, 1, 2, 4
    a = np.zeros((S, M, C, K))
    a[:, 0, 0] = gen.normal(0, 0.05, (S, K))
    a[:, 0, 1] = gen.normal(0, 0.05, (S, K)) + np.array([0.8, 0.2, -0.3, -0.7])
    a -= a.mean(-1, keepdims=True)
    p_ew, _ = bm.spike_probs(a, a.copy(), w0=0.2)
    assert p_ew[0, 0] > 0.9 and p_ew[0, 1] < 1e-6


def test_true_margins_zero_cases():
    """The simulation's truth: an LLM without position effects has uniform position margins and an equal-worth
    cluster uniform tool margins (the nodes are closed under shifts and sign), for sd = 0 and 1."""
    for sd in (0.0, 1.0):
        tools, pos = sim.true_margins(sd, nodes=256)
        np.testing.assert_allclose(pos[0], 0.25, atol=1e-12)
        np.testing.assert_allclose(tools[:, 1], 0.25, atol=1e-12)
        np.testing.assert_allclose(tools.sum(-1), 1.0)
        np.testing.assert_allclose(pos.sum(-1), 1.0)


def test_sufficient_statistics_give_the_dirichlet_multinomial():
    """The model's likelihood from the rising-factorial statistics (per cell) equals the per-row
    Dirichlet-multinomial (which equals scipy's, test above), and its gradient the per-row one's."""
    import pytensor
    import pytensor.tensor as pt

    gen = np.random.default_rng(5)
    cell = gen.integers(0, 3, 40)
    y = gen.multinomial(12, [0.4, 0.3, 0.2, 0.1], 40).astype(float)
    A, B = bm.rising_stats(y, cell, 3)
    lc = pt.vector("lc")
    z = pt.matrix("z")
    p = pt.special.softmax(z, axis=-1)
    f_stats = bm._dm_loglik_stats(pt, A, B, pt.exp(lc), p)
    f_rows = bm._dm_loglik(pt, pt.as_tensor(y), pt.exp(lc)[cell], p[cell])
    fn = pytensor.function([lc, z], [f_stats, f_rows, *pt.grad(f_stats, [lc, z]), *pt.grad(f_rows, [lc, z])])
    out = fn(gen.normal(1, 1, 3), gen.normal(0, 1, (3, 4)))
    assert out[0] == pytest.approx(out[1], rel=1e-10)
    np.testing.assert_allclose(out[2], out[4], rtol=1e-6)
    np.testing.assert_allclose(out[3], out[5], rtol=1e-6, atol=1e-9)


def test_fit_on_one_simulated_study_is_sane(small):
    """One short fit (sd = 1): at most 0.5 % divergent transitions, the equal-worth cluster gets
    P(equal worths) > 0.5 for every LLM, the clearly unequal cells' tool margins are found (P < 0.5), and both
    PPCs are not extreme."""
    D, _ = small
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = bm.fit(D, draws=300, tune=300, chains=2, cores=1, seed=3)
    post = res["post"]
    ci = list(D.clusters).index("k2")
    assert (post["p_equal_worth"][:, ci] > 0.5).all()
    assert (post["p_equal_worth"][:, 1 - ci] < 0.5).all()
    assert res["diagnostics"]["divergences"] <= 3          # short chains of a hierarchical model: rare
    assert 0.01 < res["ppc"]["cluster_position"] < 0.99
    assert all(0.01 < p < 0.99 for p in res["ppc"]["dispersion"])


def test_pooled_stats_dispersion_is_the_polya_factor():
    """The Pearson dispersion of Dirichlet-multinomial rows estimates the Polya-urn factor (n + kappa)/(1 + kappa),
    and the pooled counts are the rows' sums per cell (scipy draws the Dirichlet, numpy the multinomials)."""
    from scipy.stats import dirichlet

    gen = np.random.default_rng(11)
    pi, n, Q = np.array([0.45, 0.3, 0.15, 0.1]), 12, 4000
    rows, cell = [], []
    for c, kappa in enumerate((2.0, 10.0, 1e9)):
        p = dirichlet(kappa * pi).rvs(Q, random_state=gen)
        rows.append(np.array([gen.multinomial(n, pp) for pp in p], float))
        cell.append(np.full(Q, c))
    y, cell = np.concatenate(rows), np.concatenate(cell)
    Y, phi = bm.pooled_stats(y, cell, 3)
    np.testing.assert_array_equal(Y, np.stack([r.sum(0) for r in rows]))
    np.testing.assert_allclose(phi, [(n + 2) / 3, (n + 10) / 11, 1.0], rtol=0.06)


def test_dirichlet_fit_is_inconsistent_under_logistic_normal_queries():
    """The cause of the Dirichlet-multinomial's undercoverage at sd = 1, shown without sampling: on 20,000
    queries of one cell of the simulator (logistic-normal query effects) the Dirichlet-multinomial's maximum-
    likelihood tool margin is biased towards uniform (its delta 0.015-0.02 below the truth, a third of a 20-query
    study's standard error), while the pooled frequencies (the quasi-likelihood's estimate) are consistent."""
    from scipy.optimize import minimize
    from scipy.special import gammaln

    gen = np.random.default_rng(1)
    m, Q = 0, 20000
    T = np.zeros((Q, qs.K))
    u = gen.normal(0, 1.0, (Q, qs.K))
    for r in range(qs.K):
        order = np.roll(np.arange(qs.K), -r)
        z = qs.ALPHA[m, 0, order][None] + qs.BETA[m][None] + u[:, order]
        p = np.exp(z - z.max(1, keepdims=True))
        p /= p.sum(1, keepdims=True)
        T[:, order] += np.array([gen.multinomial(qs.RUNS, pp) for pp in p])

    def nll(th):
        z = np.r_[th[1:], 0.0]
        pi = np.exp(z - z.max())
        al = np.exp(th[0]) * pi / pi.sum()
        return -(gammaln(al.sum()) - gammaln(T.sum(1) + al.sum()) + (gammaln(T + al) - gammaln(al)).sum(1)).sum()

    th = minimize(nll, np.zeros(qs.K), method="BFGS").x
    pi_dm = np.exp(np.r_[th[1:], 0.0])
    pi_dm /= pi_dm.sum()
    truth = sim.true_margins(1.0, nodes=4096)[0][m, 0]
    tv = lambda p: 0.5 * np.abs(p - 0.25).sum()        # noqa: E731
    pooled = T.sum(0) / T.sum()
    assert abs(tv(pooled) - tv(truth)) < 0.004
    assert tv(truth) - tv(pi_dm) > 0.01


def test_wilson_interval_matches_statsmodels():
    from statsmodels.stats.proportion import proportion_confint

    for k, n in ((24, 32), (150, 160), (40, 40), (0, 40)):
        lo, hi = proportion_confint(k, n, alpha=0.05, method="wilson")
        assert sim.wilson(k, n) == pytest.approx((lo, hi), abs=1e-6)


def test_numpyro_batch_agrees_with_the_pooled_frequencies():
    """The batched NumPyro twin, quasi-likelihood, on two studies at once: at sd = 0 (no heterogeneity) the
    posterior mean tool margins sit within 3 posterior sd of the pooled frequencies (the quasi-likelihood's
    maximum) in every cell, the two studies' posteriors differ (the lanes carry their own data) and the zero-sum
    effects sum to zero."""
    datas = []
    for seed in (21, 22):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            datas.append(bm.margin_data(bm.design_of(qs.simulate(0.0, seed))))
    res = bm.sample_numpyro_batch(datas, draws=150, tune=150, chains=2, seed=1, likelihood="quasi")
    means = []
    for data, (post, _div) in zip(datas, res):
        a = post["a"].reshape((-1,) + post["a"].shape[2:])
        np.testing.assert_allclose(a.sum(-1), 0.0, atol=1e-9)
        p = np.exp(a) / np.exp(a).sum(-1, keepdims=True)
        Y, _ = bm.pooled_stats(data["T"], data["cell"], data["M"] * data["C"])
        freq = (Y / Y.sum(1, keepdims=True)).reshape(p.shape[1:])
        assert (np.abs(p.mean(0) - freq) < 3 * p.std(0) + 1e-3).all()
        means.append(p.mean(0))
    assert np.abs(means[0] - means[1]).max() > 0.01


def test_pymc_quasi_likelihood_is_the_tempered_pooled_multinomial(small):
    """The PyMC model's quasi-likelihood terms at a jittered point equal sum_j Y log(pi) / phi per cell computed
    here with numpy from the pooled counts (pi = softmax of the effects at that point)."""
    _, data = small
    model = bm.build_model(data, likelihood="quasi")
    ip = model.initial_point()
    ip = {k: v + 0.3 * np.random.default_rng(4).standard_normal(v.shape) for k, v in ip.items()}
    kw = {"inputs": model.value_vars, "on_unused_input": "ignore"}
    outs = model.replace_rvs_by_values([model["loglik_tools"], model["loglik_positions"], model["a"], model["b"]])
    *terms, ea, eb = model.compile_fn(outs, **kw)(ip)
    a = (ea, eb)
    n_cells = data["M"] * data["C"]
    assert np.abs(ea).max() > 0.05                         # a point away from the uniform margins
    for got, eff, counts in zip(terms, a, (data["T"], data["Pc"])):
        Y, phi = bm.pooled_stats(counts, data["cell"], n_cells)
        lg = eff.reshape(n_cells, -1)
        logp = lg - np.log(np.exp(lg).sum(-1, keepdims=True))
        assert float(got) == pytest.approx(((Y * logp).sum(-1) / phi).sum(), rel=1e-10)
    assert "log_kappa" not in model.named_vars
