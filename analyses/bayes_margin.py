"""The collapsed margin model (issue 38): Dirichlet-multinomial tool and position margins per query.

What a user reads from the Bayesian model is the implied delta under the logged orderings, a total-variation
distance of two *margins* of a (LLM, cluster) cell: the probabilities of its tools and of its positions for a new
query. This model puts its parameters on those margins directly and carries the query heterogeneity in closed
form:

* tools: the counts ``T[q, :]`` of query ``q`` (pooled over its orderings and runs) are
  ``DirichletMultinomial(kappa[m, c] * softmax(a[m, c, :]))``, ``a[m, c] = mu[c] + sigma_alpha * z[m, c]``
  (zero-sum; a query's preference for a tool is shared by all its orderings and runs, so its tool counts are
  overdispersed, by the Polya-urn factor ``(n + kappa) / (1 + kappa)``);
* positions: the counts ``Pc[q, :]`` by position are
  ``DirichletMultinomial(lambda[m, c] * softmax(b[m, c, :]))``,
  ``b[m, c] = beta_bar + sigma_beta * zb[m] + sigma_gamma * zg[m, c]``.

The two parts have no parameter in common, so each is a (marginal-data) likelihood of its own parameters;
the joint posterior ignores the correlation of the two margins' sampling errors, which the intervals of the
margins and of the delta do not need. Per query and gradient the cost is 2 K lgamma terms: the vendored
study (7000 queries) costs about a millisecond per gradient (``measure`` below).

delta near zero: "equal worths" of a cell (``a[m, c] = 0``) and "no position effect" of an LLM
(``b[m, :] = 0``) get prior mass ``w0`` (``SPIKE_MASS``), handled after sampling by the Savage-Dickey ratio
(the posterior density of the zero-sum coordinates at 0, from a Gaussian fitted to the draws, over their prior
density at 0, integrated over the scales' priors): ``P0 = w0 BF / (w0 BF + 1 - w0)``. The reported posterior is the
mixture ``P0 * point mass at 0 + (1 - P0) * slab`` (no discrete sampling in NUTS), and
``P(delta < margin) = P0 + (1 - P0) P_slab(delta < margin)``.

The effects reported are the margins' centred log-probabilities (``a``, ``b``): not the logit effects of a
multinomial-logit chooser (a tool's margin also carries the positions it was shown at and the query population),
but the effects of what the delta summarises.

Options (the coverage study, ``analyses/bayes_margin_sim.py``, chose ``likelihood="quasi"`` with
``pooling="cluster"``; the defaults keep the model as first written):

* ``likelihood="quasi"``: the Dirichlet's mean is not the population mean of the tool margin when the query
  effects are logistic-normal (on 20,000 simulated queries its delta is 0.01-0.02 below the truth); the quasi-
  likelihood replaces both Dirichlet-multinomials by the cells' pooled multinomials tempered by their Pearson
  dispersion ``phi`` (a plug-in moment estimate, :func:`pooled_stats`), whose maximum is the pooled frequencies
  (consistent under any query heterogeneity) and whose curvature is the sandwich's when the design effect is
  common to the tools. A generalised (tempered) posterior, not a generative model.
* ``pooling="cluster"``: one scale of the LLMs' deviations per cluster (an equal-worth cluster's zero deviations
  otherwise shrink the LLMs of every other cluster); ``"none"``: cells a priori independent. NumPyro twin only.
* the NumPyro twin (:func:`sample_numpyro_raw`) and its batched form (:func:`sample_numpyro_batch`, many data sets
  of one shape in one ``jax.vmap``: the simulation studies and SBC).

Run ``python analyses/bayes_margin.py --measure`` (cost per gradient and the fit on the vendored study, into
``analyses/bayes_margin_vendored.json``).
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np

# issue 38: the model is in the package now (``fit_bayes(log, model="margin")``); these pieces are the package's
from toolbias_stats.models.bayes._margin import _kappa_of_phi, _polya, pooled_stats

HERE = Path(__file__).resolve().parent

PRIORS = {"mu_sd": 1.5, "sigma_alpha_sd": 1.0, "beta_bar_sd": 1.0, "sigma_beta_sd": 1.0, "sigma_gamma_sd": 1.0}
#: prior mass of "equal worths" per (LLM, cluster) and of "no position effect" per LLM (0.5 in the last
#: attempt pulled moderate effects to zero)
SPIKE_MASS = 0.2


# ---------------------------------------------------------------------------------------------
# data
def margin_data(design):
    """Per query: tool counts ``T`` (Q, K), position counts ``Pc`` (Q, K), and its cell ``llm * C + cluster``.

    Needs a design with per-prompt counts whose clusters all have K tools and whose lists show every tool of the
    cluster (full lists; the position margin of shorter lists is not a margin over the same positions).
    """
    D = design
    pr = D.prompts
    if pr is None:
        raise ValueError("the margin model needs per-prompt counts (the log's rows)")
    if len(set(D.K.tolist())) != 1:
        raise ValueError(f"the margin model needs one list length; clusters have {sorted(set(D.K.tolist()))} tools")
    k = int(D.K[0])
    if (D.row_len != k).any():
        raise ValueError("the margin model needs full lists (every tool of the cluster shown once)")
    Q = pr.Q
    T = np.zeros((Q, k))
    for p in range(D.P):
        np.add.at(T, (pr.query, D.row_tools[pr.row, p]), pr.y[:, p])
    Pc = np.zeros((Q, k))
    np.add.at(Pc, pr.query, pr.y[:, :k])
    cell = pr.query_llm * D.C + pr.query_cluster
    keep = T.sum(1) > 0
    return {"T": T[keep], "Pc": Pc[keep], "cell": cell[keep], "M": D.M, "C": D.C, "K": k,
            "qllm": pr.query_llm[keep], "qcluster": pr.query_cluster[keep]}


# ---------------------------------------------------------------------------------------------
# model
def _dm_loglik(pt, counts, conc, probs):
    """Dirichlet-multinomial log-likelihood (without the multinomial coefficient) summed over rows."""
    alpha = conc[:, None] * probs
    n = counts.sum(1)
    return (pt.gammaln(conc) - pt.gammaln(n + conc)
            + (pt.gammaln(counts + alpha) - pt.gammaln(alpha)).sum(1)).sum()


def rising_stats(counts, cell, n_cells):
    """Sufficient statistics of the Dirichlet-multinomials of a cell's rows: with integer counts,
    ``lgamma(y + x) - lgamma(x) = sum_{i < y} log(x + i)``, so the rows enter only through
    ``A[cell, j, i] = #rows with y_j > i`` and ``B[cell, i] = #rows with n > i`` (the cost per gradient is then
    cells x K x max(n), whatever the number of queries)."""
    n_max = int(counts.sum(1).max())
    i = np.arange(n_max)
    A = np.zeros((n_cells, counts.shape[1], n_max))
    B = np.zeros((n_cells, n_max))
    np.add.at(A, cell, (counts[..., None] > i).astype(float))
    np.add.at(B, cell, (counts.sum(1)[:, None] > i).astype(float))
    return A, B


def _dm_loglik_stats(pt, A, B, conc, probs):
    """The Dirichlet-multinomial log-likelihood of :func:`_dm_loglik` from :func:`rising_stats` (``conc`` (cells,),
    ``probs`` (cells, K))."""
    i = pt.arange(pt.as_tensor(A).shape[-1]).astype("float64")
    x = (conc[:, None] * probs)[:, :, None] + i
    return (A * pt.log(x)).sum() - (B * pt.log(conc[:, None] + i)).sum()


def _logistic_logprior(pt, t):
    """log density of t = log kappa when rho = 1 / (1 + kappa) ~ Beta(1, 1) (uniform): sigma(t) sigma(-t)."""
    return (pt.log(pt.sigmoid(t)) + pt.log(pt.sigmoid(-t))).sum()


def build_model(data, priors=None, likelihood="dm"):
    """The PyMC model (data as ``pm.Data``: a second data set of the same shapes reuses it, ``set_data``).

    ``likelihood="dm"``: the Dirichlet-multinomials per query (the model as first written); ``"quasi"``: the
    pooled multinomials of the cells tempered by their Pearson dispersion (:func:`pooled_stats`), no
    concentrations."""
    import pymc as pm
    import pytensor.tensor as pt

    _check_likelihood(likelihood)
    pr = {**PRIORS, **(priors or {})}
    M, C, K = data["M"], data["C"], data["K"]
    st = _stats(data, likelihood)
    names = _DATA_NAMES[likelihood]
    with pm.Model() as model:
        At, Bt, Ap, Bp = (pm.Data(n, x) for n, x in zip(names, st))
        mu = pm.ZeroSumNormal("mu", sigma=pr["mu_sd"], shape=(C, K))
        sa = pm.HalfNormal("sigma_alpha", pr["sigma_alpha_sd"])
        za = pm.ZeroSumNormal("z_alpha", sigma=1.0, shape=(M, C, K))
        a = pm.Deterministic("a", mu[None] + sa * za)
        bb = pm.ZeroSumNormal("beta_bar", sigma=pr["beta_bar_sd"], shape=(K,))
        sb = pm.HalfNormal("sigma_beta", pr["sigma_beta_sd"])
        zb = pm.ZeroSumNormal("z_beta", sigma=1.0, shape=(M, K))
        sg = pm.HalfNormal("sigma_gamma", pr["sigma_gamma_sd"])
        zg = pm.ZeroSumNormal("z_gamma", sigma=1.0, shape=(M, C, K))
        b = pm.Deterministic("b", bb[None, None] + sb * zb[:, None] + sg * zg)
        pa = pt.special.softmax(a.reshape((M * C, K)), axis=-1)
        pb = pt.special.softmax(b.reshape((M * C, K)), axis=-1)
        if likelihood == "quasi":
            pm.Potential("loglik_tools", ((At * pt.log(pa)).sum(-1) / Bt).sum())
            pm.Potential("loglik_positions", ((Ap * pt.log(pb)).sum(-1) / Bp).sum())
            return model
        lk = pm.Flat("log_kappa", shape=(M * C,))
        ll_ = pm.Flat("log_lambda", shape=(M * C,))
        pm.Potential("conc_prior", _logistic_logprior(pt, lk) + _logistic_logprior(pt, ll_))
        pm.Potential("loglik_tools", _dm_loglik_stats(pt, At, Bt, pt.exp(lk), pa))
        pm.Potential("loglik_positions", _dm_loglik_stats(pt, Ap, Bp, pt.exp(ll_), pb))
    return model


#: the ``pm.Data`` names of each likelihood's arrays (tools, then positions)
_DATA_NAMES = {"dm": ("A_tools", "B_tools", "A_positions", "B_positions"),
               "quasi": ("Y_tools", "phi_tools", "Y_positions", "phi_positions")}


def sample(model, *, draws=1000, tune=1000, chains=4, cores=None, seed=0, target_accept=0.9):
    import pymc as pm

    with model:
        return pm.sample(draws=draws, tune=tune, chains=chains, cores=cores or min(chains, os.cpu_count() or 1),
                         random_seed=seed, target_accept=target_accept, progressbar=False,
                         compute_convergence_checks=False)


# ---------------------------------------------------------------------------------------------
# the quasi-likelihood option (issue 38, the coverage study): a tempered multinomial of the pooled counts


LIKELIHOODS = ("dm", "quasi")


def _check_likelihood(likelihood):
    if likelihood not in LIKELIHOODS:
        raise ValueError(f"likelihood must be one of {LIKELIHOODS}, got {likelihood!r}")


def _stats(data, likelihood):
    """The likelihood's data arrays (tools, then positions)."""
    n_cells = data["M"] * data["C"]
    if likelihood == "dm":
        return (*rising_stats(data["T"], data["cell"], n_cells), *rising_stats(data["Pc"], data["cell"], n_cells))
    return (*pooled_stats(data["T"], data["cell"], n_cells), *pooled_stats(data["Pc"], data["cell"], n_cells))


# ---------------------------------------------------------------------------------------------
# the NumPyro twin (same parameters, priors and likelihoods; compiles once per design shape)
def _numpyro_model(M, C, K, pr, likelihood, pooling="hier"):
    import jax
    import jax.numpy as jnp
    import numpyro
    import numpyro.distributions as dist

    H = jnp.asarray(_basis(K))

    def zerosum(name, sd, shape):
        z = numpyro.sample(name + "_raw", dist.Normal(0.0, sd).expand(shape + (K - 1,)).to_event(len(shape) + 1))
        return z @ H

    def dm(A, B, conc, probs):
        i = jnp.arange(A.shape[-1], dtype=probs.dtype)
        return (A * jnp.log((conc[:, None] * probs)[:, :, None] + i)).sum() - (B * jnp.log(conc[:, None] + i)).sum()

    def model(s_tools_1, s_tools_2, s_pos_1, s_pos_2):
        mu = numpyro.deterministic("mu", zerosum("mu", pr["mu_sd"], (C,)))
        sa = numpyro.sample("sigma_alpha", dist.HalfNormal(pr["sigma_alpha_sd"]))
        if pooling == "hier":
            a = numpyro.deterministic("a", mu[None] + sa * zerosum("z_alpha", 1.0, (M, C)))
        elif pooling == "cluster":          # one scale of the LLMs' deviations per cluster
            sac = numpyro.sample("sigma_alpha_c", dist.HalfNormal(pr["sigma_alpha_sd"]).expand((C,)).to_event(1))
            a = numpyro.deterministic("a", mu[None] + sac[None, :, None] * zerosum("z_alpha", 1.0, (M, C))
                                      + 0.0 * sa)
        else:                               # no pooling across LLMs: each cell's effects a priori independent
            a = numpyro.deterministic("a", zerosum("z_alpha", pr["mu_sd"], (M, C)) + 0.0 * sa)
        bb = numpyro.deterministic("beta_bar", zerosum("beta_bar", pr["beta_bar_sd"], ()))
        sb = numpyro.sample("sigma_beta", dist.HalfNormal(pr["sigma_beta_sd"]))
        sg = numpyro.sample("sigma_gamma", dist.HalfNormal(pr["sigma_gamma_sd"]))
        b = numpyro.deterministic("b", bb + sb * zerosum("z_beta", 1.0, (M,))[:, None]
                                  + sg * zerosum("z_gamma", 1.0, (M, C)))
        pa = jax.nn.softmax(a.reshape(M * C, K), -1)
        pb = jax.nn.softmax(b.reshape(M * C, K), -1)
        if likelihood == "dm":
            lk = numpyro.sample("log_kappa", dist.Logistic(0.0, 1.0).expand((M * C,)).to_event(1))
            ll_ = numpyro.sample("log_lambda", dist.Logistic(0.0, 1.0).expand((M * C,)).to_event(1))
            numpyro.factor("loglik_tools", dm(s_tools_1, s_tools_2, jnp.exp(lk), pa))
            numpyro.factor("loglik_positions", dm(s_pos_1, s_pos_2, jnp.exp(ll_), pb))
        else:
            numpyro.factor("loglik_tools", ((s_tools_1 * jnp.log(pa)).sum(-1) / s_tools_2).sum())
            numpyro.factor("loglik_positions", ((s_pos_1 * jnp.log(pb)).sum(-1) / s_pos_2).sum())

    return model


_MCMC_CACHE: dict = {}


def sample_numpyro_raw(data, *, draws=500, tune=500, chains=2, seed=0, target_accept=0.9, likelihood="dm",
                       priors=None, pooling="hier"):
    """NUTS on the NumPyro twin; returns the draws (chains, draws, ...) by name and the divergence flags.

    ``likelihood``: ``"dm"`` (the Dirichlet-multinomials, as the PyMC model) or ``"quasi"`` (the pooled
    multinomials tempered by the cells' Pearson dispersion, :func:`pooled_stats`). ``pooling``: ``"hier"`` (the
    model's ``a[m, c] = mu[c] + sigma_alpha z[m, c]``), ``"cluster"`` (``sigma_alpha[c]`` per cluster: an
    equal-worth cluster's zero deviations do not shrink another cluster's LLMs) or ``"none"`` (each cell's ``a``
    a priori ZeroSumNormal(``mu_sd``); for the Savage-Dickey ratio pass ``priors={"sigma_alpha_sd": 0}``)."""
    import jax
    from numpyro.infer import MCMC, NUTS

    _check_likelihood(likelihood)
    jax.config.update("jax_enable_x64", True)
    pr = {**PRIORS, **(priors or {})}
    M, C, K = data["M"], data["C"], data["K"]
    args = tuple(np.asarray(x, dtype=float) for x in _stats(data, likelihood))
    key = (M, C, K, tuple(x.shape for x in args), likelihood, pooling, draws, tune, chains, target_accept,
           tuple(sorted(pr.items())))
    if key not in _MCMC_CACHE:
        kern = NUTS(_numpyro_model(M, C, K, pr, likelihood, pooling), target_accept_prob=target_accept)
        _MCMC_CACHE[key] = MCMC(kern, num_warmup=tune, num_samples=draws, num_chains=chains,
                                chain_method="sequential", progress_bar=False, jit_model_args=True)
    mcmc = _MCMC_CACHE[key]
    mcmc.run(jax.random.PRNGKey(seed), *args, extra_fields=("diverging",))
    post = {k: np.asarray(v) for k, v in mcmc.get_samples(group_by_chain=True).items()}
    div = np.asarray(mcmc.get_extra_fields(group_by_chain=True)["diverging"])
    return post, div


def sample_numpyro_batch(datas, *, draws=500, tune=500, chains=2, seed=0, target_accept=0.9, likelihood="dm",
                         priors=None, pooling="hier"):
    """NUTS on the NumPyro twin for many data sets of one shape at once: every (data set, chain) is one lane of
    a ``jax.vmap`` of NumPyro's NUTS kernel (its own step size and diagonal mass matrix, adapted in the same
    windows as :func:`sample_numpyro_raw`), so the fixed cost per leapfrog step is paid once for all lanes.

    Returns a list of ``(draws by name (chains, draws, ...), divergences (chains, draws))``, one per data set.
    Initial points: uniform on (-2, 2) in the unconstrained space (NumPyro's default), one key per lane.
    """
    import jax
    import jax.numpy as jnp
    from numpyro.infer.hmc import hmc
    from numpyro.infer.util import initialize_model

    _check_likelihood(likelihood)
    jax.config.update("jax_enable_x64", True)
    pr = {**PRIORS, **(priors or {})}
    M, C, K = datas[0]["M"], datas[0]["C"], datas[0]["K"]
    per = [tuple(np.asarray(x, dtype=float) for x in _stats(d, likelihood)) for d in datas]
    args = tuple(jnp.asarray(np.repeat(np.stack([p[i] for p in per]), chains, axis=0)) for i in range(4))
    lanes = len(datas) * chains
    ck = ("batch", M, C, K, tuple(a.shape for a in args), likelihood, pooling, draws, tune, target_accept,
          tuple(sorted(pr.items())))
    if ck not in _MCMC_CACHE:
        model = _numpyro_model(M, C, K, pr, likelihood, pooling)
        info, pot_gen, post_gen, _ = initialize_model(jax.random.PRNGKey(0), model, dynamic_args=True,
                                                      model_args=tuple(a[0] for a in args))
        _MCMC_CACHE[ck] = (info, *_batch_runner(pot_gen, post_gen, hmc, draws, tune, target_accept))
    info, run = _MCMC_CACHE[ck]
    keys = jax.random.split(jax.random.PRNGKey(seed), 2 * lanes).reshape(lanes, 2, -1)
    z0 = jax.vmap(lambda k: jax.tree_util.tree_map(
        lambda x: jax.random.uniform(k, jnp.shape(x), minval=-2.0, maxval=2.0), info.z))(keys[:, 0])
    out, div = run(keys[:, 1], z0, *args)
    out = {k: np.asarray(v).reshape((len(datas), chains) + v.shape[1:]) for k, v in out.items()}
    div = np.asarray(div).reshape(len(datas), chains, -1)
    return [({k: v[i] for k, v in out.items()}, div[i]) for i in range(len(datas))]


def _batch_runner(pot_gen, post_gen, hmc, draws, tune, target_accept):
    """The jitted, vmapped NUTS run of :func:`sample_numpyro_batch` (warm-up, then the kept draws)."""
    import jax

    init_kernel, sample_kernel = hmc(potential_fn_gen=pot_gen, algo="NUTS")

    def lane(key, z, *a):
        st = init_kernel(z, num_warmup=tune, target_accept_prob=target_accept, model_args=a, rng_key=key)

        def step(s, _):
            s = sample_kernel(s, model_args=a)
            return s, (s.z, s.diverging)

        _, (zs, dv) = jax.lax.scan(step, st, None, length=tune + draws)
        zs = jax.tree_util.tree_map(lambda x: x[tune:], zs)
        return jax.vmap(post_gen(*a))(zs), dv[tune:]

    return (jax.jit(jax.vmap(lane)),)


def sample_numpyro(data, **kw):
    """NUTS on the NumPyro twin (:func:`sample_numpyro_raw`'s arguments); returns an ArviZ ``InferenceData`` with
    the PyMC model's variable names (``a``, ``b``, ``mu``, ``beta_bar``, the scales, and ``log_kappa`` /
    ``log_lambda`` for the Dirichlet-multinomial)."""
    import arviz as az

    post, div = sample_numpyro_raw(data, **kw)
    return az.from_dict(posterior=post, sample_stats={"diverging": div})


def numpyro_diagnostics(post, div):
    """R-hat, bulk ESS and divergences from raw draws (chains, draws, ...) with NumPyro's estimators (no ArviZ)."""
    from numpyro.diagnostics import effective_sample_size, split_gelman_rubin

    x = np.concatenate([v.reshape(v.shape[:2] + (-1,)) for k, v in post.items() if not k.endswith("_raw")], -1)
    keep = x.std((0, 1)) > 0
    x = x[..., keep]
    return {"max_rhat": float(np.nanmax(split_gelman_rubin(x))), "min_ess_bulk": float(np.nanmin(
        effective_sample_size(x))), "divergences": int(np.asarray(div).sum())}


# ---------------------------------------------------------------------------------------------
# after sampling
def _basis(k):
    """(k-1, k) orthonormal rows spanning the zero-sum vectors (PyMC's ZeroSumNormal basis, the package's
    ``_basis``; built here where the package cannot be imported, e.g. a bare machine with JAX only)."""
    try:
        from toolbias_stats.models.bayes._common import _basis as b
    except ImportError:
        H = np.eye(k - 1) - 1.0 / (k + np.sqrt(k))
        return np.concatenate([H, np.full((k - 1, 1), -1.0 / np.sqrt(k))], axis=1)
    return b(k)


def _gauss_logdens0(x):
    """log density at 0 of a Gaussian fitted to the draws ``x`` (S, d) (mean and covariance of the draws)."""
    m = x.mean(0)
    S = np.atleast_2d(np.cov(x, rowvar=False))
    L = np.linalg.cholesky(S + 1e-12 * np.eye(len(m)))
    z = np.linalg.solve(L, -m)
    return float(-0.5 * z @ z - np.log(np.diag(L)).sum() - 0.5 * len(m) * np.log(2 * np.pi))


def _halfnormal_nodes(*sds, n=4096, seed=20261128):
    """Joint quasi-random draws (n, len(sds)) of independent HalfNormal(sd) scales (one Sobol sequence of the
    joint dimension; fixed, so the Bayes factor is deterministic)."""
    from scipy.stats import norm, qmc

    u = qmc.Sobol(len(sds), scramble=True, seed=seed).random(n)
    return np.asarray(sds)[None] * norm.ppf(0.5 + 0.5 * u)


def prior_logdens0_tools(priors, K):
    """log prior density of a cell's K-1 zero-sum coordinates of ``a`` at 0: N(0, mu_sd^2 + sigma_alpha^2) each."""
    from scipy.special import logsumexp

    s2 = priors["mu_sd"] ** 2 + _halfnormal_nodes(priors["sigma_alpha_sd"])[:, 0] ** 2
    ld = -0.5 * (K - 1) * np.log(2 * np.pi * s2)
    return float(logsumexp(ld) - np.log(len(ld)))


def prior_logdens0_positions(priors, C, K):
    """log prior density at 0 of an LLM's mean position effects over its C clusters (K-1 zero-sum coordinates):
    ``mean_c b[m, c] = beta_bar + sigma_beta zb[m] + sigma_gamma mean_c zg[m, c]``, per coordinate
    N(0, beta_bar_sd^2 + sigma_beta^2 + sigma_gamma^2 / C).

    (The density at 0 of all C (K-1) coordinates of ``b[m, :]`` is infinite under a HalfNormal ``sigma_gamma``:
    it grows as ``sigma_gamma^-((C-1)(K-1))`` when the cluster deviations vanish. The spike is therefore tested on
    the LLM's mean position effects; see ``spike_probs``.)
    """
    from scipy.special import logsumexp

    s = _halfnormal_nodes(priors["sigma_beta_sd"], priors["sigma_gamma_sd"])
    v = priors["beta_bar_sd"] ** 2 + s[:, 0] ** 2 + s[:, 1] ** 2 / C
    ld = -0.5 * (K - 1) * np.log(2 * np.pi * v)
    return float(logsumexp(ld) - np.log(len(ld)))


def spike_probs(a, b, priors=None, w0=SPIKE_MASS):
    """Posterior probabilities of "equal worths" (M, C) and "no position effect" (M,) by Savage-Dickey.

    "Equal worths" of cell (m, c): ``a[m, c] = 0`` (its K-1 zero-sum coordinates). "No position effect" of LLM m
    is tested on its mean position effects over the clusters (``mean_c b[m, c] = 0``; the full vector has an
    infinite prior density at 0, see ``prior_logdens0_positions``); the mixture then sets all of the LLM's
    position effects to 0 (an approximation: the hypothesis's cluster deviations are taken as absent too).
    """
    pr = {**PRIORS, **(priors or {})}
    _, M, C, K = a.shape
    H = _basis(K)
    ua = a @ H.T                                                              # (S, M, C, K-1)
    ub = (b @ H.T).mean(2)                                                    # (S, M, K-1)
    la0 = prior_logdens0_tools(pr, K)
    lb0 = prior_logdens0_positions(pr, C, K)
    p_ew = np.zeros((M, C))
    p_np = np.zeros(M)

    def post(log_bf):
        return 1.0 / (1.0 + (1 - w0) / w0 * np.exp(-np.clip(log_bf, -700, 700)))

    for m in range(M):
        p_np[m] = post(_gauss_logdens0(ub[:, m]) - lb0)
        for c in range(C):
            p_ew[m, c] = post(_gauss_logdens0(ua[:, m, c]) - la0)
    return p_ew, p_np


def _tv(logits):
    z = logits - logits.max(-1, keepdims=True)
    p = np.exp(z)
    p /= p.sum(-1, keepdims=True)
    return 0.5 * np.abs(p - 1.0 / p.shape[-1]).sum(-1)


def summarise(idata, priors=None, w0=SPIKE_MASS, margin=0.02, gen=None, prob=0.94):
    """Mixture draws of the effects and the implied delta, their HDIs and P(delta < margin)."""
    from toolbias_stats.models.bayes._common import _hdi

    gen = np.random.default_rng(gen)
    post = idata.posterior
    S = post.sizes["chain"] * post.sizes["draw"]
    a = np.asarray(post["a"].values).reshape((S,) + post["a"].shape[2:])
    b = np.asarray(post["b"].values).reshape((S,) + post["b"].shape[2:])
    p_ew, p_np = spike_probs(a, b, priors, w0)
    ia = gen.random((S,) + p_ew.shape) < p_ew                                 # draw is "equal worths"
    ib = gen.random((S,) + p_np.shape) < p_np                                 # draw is "no position effect"
    slab_api, slab_pos = _tv(a), _tv(b)                                       # (S, M, C)
    api = np.where(ia, 0.0, slab_api)
    pos = np.where(ib[:, :, None], 0.0, slab_pos)
    a_mix = np.where(ia[..., None], 0.0, a)
    b_mix = np.where(ib[:, :, None, None], 0.0, b)
    out = {"a": a_mix, "b": b_mix, "delta_api_cell": api, "delta_pos_cell": pos,
           "delta_api": api.mean(-1), "delta_pos": pos.mean(-1), "p_equal_worth": p_ew, "p_no_position": p_np,
           "slab_delta_api_cell": slab_api, "slab_delta_pos_cell": slab_pos}
    out["p_below_margin_api_cell"] = p_ew + (1 - p_ew) * (slab_api < margin).mean(0)
    out["p_below_margin_pos"] = p_np + (1 - p_np) * (slab_pos.mean(-1) < margin).mean(0)
    out["hdi"] = {k: _hdi(out[k], prob) for k in ("delta_api_cell", "delta_pos_cell", "delta_api", "delta_pos")}
    return out


def diagnostics(idata):
    import arviz as az

    names = ["mu", "sigma_alpha", "z_alpha", "beta_bar", "sigma_beta", "z_beta", "sigma_gamma", "z_gamma",
             "log_kappa", "log_lambda", "a", "b"]
    names = [n for n in names if n in idata.posterior]
    summ = az.summary(idata, var_names=names, kind="diagnostics")
    return {"max_rhat": float(summ["r_hat"].max()), "min_ess_bulk": float(summ["ess_bulk"].min()),
            "min_ess_tail": float(summ["ess_tail"].min()),
            "divergences": int(idata.sample_stats["diverging"].values.sum())}


def ppc(idata, data, gen=None, n_draws=500):
    """Posterior predictive checks of the model's two parts.

    * per-query dispersion, per LLM: Pearson chi-square of every query's tool counts around ``n_q pi``,
      observed vs a Polya-urn replicate (``Dirichlet(kappa pi)`` then multinomial);
    * cluster x position (all LLMs, one table): chi-square of the (cluster, position) counts around their
      expectation, observed vs replicated position counts (Dirichlet-multinomial per query).

    Returns ``{"dispersion": (M,) p-values, "cluster_position": p}``.
    """
    gen = np.random.default_rng(gen)
    post = idata.posterior
    S = post.sizes["chain"] * post.sizes["draw"]
    sel = gen.choice(S, size=min(n_draws, S), replace=False)

    def get(name):
        x = np.asarray(post[name].values)
        return x.reshape((S,) + x.shape[2:])[sel]

    M, C, K = data["M"], data["C"], data["K"]
    T, Pc, cell = data["T"], data["Pc"], data["cell"]
    n = T.sum(1)
    pa = np.exp(get("a").reshape(len(sel), M * C, K))
    pa /= pa.sum(-1, keepdims=True)
    pb = np.exp(get("b").reshape(len(sel), M * C, K))
    pb /= pb.sum(-1, keepdims=True)
    if "log_kappa" in post:
        kap, lam = np.exp(get("log_kappa")), np.exp(get("log_lambda"))
    else:                              # quasi-likelihood: the Polya urn whose design effect is the cell's phi
        kap, lam = (np.broadcast_to(_kappa_of_phi(pooled_stats(x, cell, M * C)[1], n, cell), (len(sel), M * C))
                    for x in (T, Pc))
    disp_hits = np.zeros(M)
    cp_hits = 0.0
    for s in range(len(sel)):
        E = n[:, None] * pa[s, cell]
        rep = _polya(gen, pa[s, cell], kap[s, cell], n)
        obs_q = ((T - E) ** 2 / E).sum(1)
        rep_q = ((rep - E) ** 2 / E).sum(1)
        disp_hits += np.bincount(data["qllm"], weights=rep_q, minlength=M) >= np.bincount(
            data["qllm"], weights=obs_q, minlength=M)
        Eb = n[:, None] * pb[s, cell]
        repb = _polya(gen, pb[s, cell], lam[s, cell], n)
        tab_E = np.zeros((C, K))
        tab_o = np.zeros((C, K))
        tab_r = np.zeros((C, K))
        np.add.at(tab_E, data["qcluster"], Eb)
        np.add.at(tab_o, data["qcluster"], Pc)
        np.add.at(tab_r, data["qcluster"], repb)
        cp_hits += ((tab_r - tab_E) ** 2 / tab_E).sum() >= ((tab_o - tab_E) ** 2 / tab_E).sum()
    return {"dispersion": (disp_hits / len(sel)).tolist(), "cluster_position": float(cp_hits / len(sel))}


# ---------------------------------------------------------------------------------------------
# measurement
def design_of(log):
    from toolbias_stats.models.bayes._common import MODEL_VARIANTS
    from toolbias_stats.models.bayes._design import _attach_prompts, _design
    from toolbias_stats.models.bayes._fit import _counts_and_rows

    counts, rows = _counts_and_rows(log, MODEL_VARIANTS["v2"])
    return _attach_prompts(_design(counts, ["model"], "exclude"), rows, ["model"], "exclude")


def grad_ms(model, reps=200):
    """Milliseconds per log-density-and-gradient evaluation at the initial point."""
    f = model.compile_logp(), model.compile_dlogp()
    ip = model.initial_point()
    f[1](ip)
    t0 = time.perf_counter()
    for _ in range(reps):
        f[0](ip)
        f[1](ip)
    return 1000 * (time.perf_counter() - t0) / reps


def fit(log_or_design, *, draws=1000, tune=1000, chains=4, cores=None, seed=0, margin=0.02, w0=SPIKE_MASS,
        with_ppc=True, likelihood="dm"):
    """Fit the margin model; returns a dict with the data, draws summary, diagnostics, PPCs and timings
    (``likelihood``: see :func:`build_model`)."""
    D = log_or_design if hasattr(log_or_design, "prompts") else design_of(log_or_design)
    data = margin_data(D)
    t0, c0 = time.perf_counter(), time.process_time()
    model = build_model(data, likelihood=likelihood)
    idata = sample(model, draws=draws, tune=tune, chains=chains, cores=cores, seed=seed)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    out = {"design": D, "data": data, "idata": idata, "wall_s": wall, "cpu_s_main": cpu,
           "diagnostics": diagnostics(idata), "post": summarise(idata, margin=margin, gen=seed, w0=w0)}
    if with_ppc:
        out["ppc"] = ppc(idata, data, gen=seed)
    return out


def measure_vendored(draws=1000, tune=1000, chains=4, seed=20251121):
    import resource

    from toolbias_stats.io._load import load_selection_log

    log = load_selection_log(str(HERE.parent / "data/biasbusters/study.toml"))
    D = design_of(log)
    data = margin_data(D)
    model = build_model(data)
    ms = grad_ms(model)
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    res = fit(D, draws=draws, tune=tune, chains=chains, seed=seed)
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    child_cpu = (r1.ru_utime + r1.ru_stime) - (r0.ru_utime + r0.ru_stime)
    post = res["post"]
    return {"queries": int(len(data["T"])), "ms_per_logp_and_grad": ms, "fit_wall_s": res["wall_s"],
            "fit_cpu_s": res["cpu_s_main"] + child_cpu, "draws": draws, "tune": tune, "chains": chains,
            "seed": seed, **res["diagnostics"], "ppc": res["ppc"], "llms": list(D.llms),
            "clusters": list(D.clusters),
            "delta_api": post["delta_api"].mean(0).tolist(), "delta_pos": post["delta_pos"].mean(0).tolist(),
            "delta_pos_hdi": [x.tolist() for x in post["hdi"]["delta_pos"]],
            "p_no_position": post["p_no_position"].tolist(),
            "p_equal_worth_max": float(post["p_equal_worth"].max())}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--measure", action="store_true")
    ap.add_argument("--draws", type=int, default=1000)
    ap.add_argument("--tune", type=int, default=1000)
    ap.add_argument("--chains", type=int, default=4)
    a = ap.parse_args()
    if a.measure:
        out = measure_vendored(a.draws, a.tune, a.chains)
        (HERE / "bayes_margin_vendored.json").write_text(json.dumps(out, indent=1))
        print(json.dumps({k: v for k, v in out.items() if k not in ("clusters",)}, indent=1))


def set_data(model, data, likelihood="dm"):
    """Swap a data set of the same shapes into a built model (no recompilation of the graph)."""
    import pymc as pm

    with model:
        pm.set_data(dict(zip(_DATA_NAMES[likelihood], _stats(data, likelihood))))


if __name__ == "__main__":
    main()
