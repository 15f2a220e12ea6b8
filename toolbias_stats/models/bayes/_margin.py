"""The collapsed margin model (``fit_bayes(log, model="margin")``, issue 38): data, model, sampler, summaries.

What a user reads from the Bayesian model is the implied δ under the logged orderings: the total-variation
distance to uniform of two *margins* of an (LLM, cluster) cell, the probabilities of its tools and of its positions.
This model puts its parameters on those margins (``docs/dev/bayes_margin.md``, "The margin model"):

* tools: ``a[m, c] = mu[c] + sigma_alpha[c] z[m, c]`` (zero-sum, one scale per cluster), and the cell's counts
  pooled over its queries, orderings and runs enter as a multinomial on ``softmax(a[m, c])`` *tempered* by the
  cell's Pearson dispersion ``phi`` of its queries' tool counts (a quasi-likelihood: its maximum is the pooled
  frequencies, consistent under any query heterogeneity; its curvature is widened by the design effect);
* positions: ``b[m, c] = beta_bar + sigma_beta zb[m] + sigma_gamma zg[m, c]``, the same with the position counts.

"δ near zero": "equal worths" of a cell and "no position effect" of an LLM get prior mass :data:`SPIKE_MASS`,
resolved after sampling by the Savage-Dickey ratio (:func:`spike_probs`); the reported posterior of δ is the
mixture of the point mass at 0 and the slab.

The model is sampled by NumPyro (JAX on the CPU, float64) in the ``mnc`` parameterisation of
``analyses/bayes_margin_fast.py``: each cell's zero-sum coordinates of ``a`` rotated so that the directions of its
sparse tools (chosen fewer than :data:`RICH` times) are non-centred and the rest centred; the LLM position effects
non-centred, the cluster ones centred (31 gradients per draw on the bundled study, against 506 in the reference
form).
"""

from __future__ import annotations

import functools
import os
import sys

import numpy as np

from ._common import _basis

#: prior mass of "equal worths" per (LLM, cluster) and of "no position effect" per LLM
SPIKE_MASS = 0.2
#: a tool chosen fewer times than this in a cell is *sparse*: its direction is sampled non-centred
RICH = 10
#: posterior draws the predictive checks replicate
PPC_DRAWS = 500
#: Sobol nodes of the scales' priors in the prior density at 0 (Savage-Dickey)
_SOBOL_NODES = 4096
_SOBOL_SEED = 20261128

_NUMPYRO_HINT = ("model='margin' is sampled with NumPyro (JAX), which is not installed; install it with "
                 "pip install 'toolbias_stats[numpyro]'")


# ---------------------------------------------------------------------------------------------
# data
def margin_data(design) -> dict:
    """Per query: tool counts ``T`` (Q, K) and position counts ``Pc`` (Q, K) pooled over its orderings and runs,
    its cell ``llm * C + cluster``, LLM and cluster; and the logged design the predictive checks replicate
    under: per design row (LLM, cluster, ordering) its cell ``rcell``, the tool at each position ``rtools``
    (R, K) and its attempts ``rw``; per prompt (query, ordering) its query ``pq`` (index into ``T``), its row
    ``prow`` and its attempts ``pn``.

    Raises a ValueError when a list does not show every tool of its cluster (the position margin of a shorter
    list is not a margin over the same positions, and a tool margin needs every tool shown at every attempt).
    """
    D = design
    pr = D.prompts
    if pr is None:
        raise ValueError("model='margin' needs the log's rows (which attempts belong to one query): pass the "
                         "SelectionLog or a Study with its rows.")
    short = np.flatnonzero(D.row_len != D.K[D.row_cluster])
    if len(short):
        r = int(short[0])
        raise ValueError(
            f"model='margin' needs lists that show every tool of the cluster, and {len(short)} of {len(D.y)} "
            f"(LLM, cluster, ordering) cells do not: e.g. LLM {D.llms[D.row_llm[r]]!r}, cluster "
            f"{D.clusters[D.row_cluster[r]]!r}, ordering {D.orderings[r]!r} shows {int(D.row_len[r])} of the "
            f"cluster's {int(D.K[D.row_cluster[r]])} tools. Use model='v2', which models any list.")
    if len(set(D.K.tolist())) != 1:
        raise ValueError(f"model='margin' needs clusters of one size; this study's clusters have "
                         f"{sorted(set(D.K.tolist()))} tools. Use model='v2'.")
    k = int(D.K[0])
    T = np.zeros((pr.Q, k))
    for p in range(k):
        np.add.at(T, (pr.query, D.row_tools[pr.row, p]), pr.y[:, p])
    Pc = np.zeros((pr.Q, k))
    np.add.at(Pc, pr.query, pr.y[:, :k])
    cell = pr.query_llm * D.C + pr.query_cluster
    keep = T.sum(1) > 0
    pn = pr.y[:, :k].sum(1)
    used = pn > 0
    new_q = np.cumsum(keep) - 1
    return {"T": T[keep], "Pc": Pc[keep], "cell": cell[keep], "M": D.M, "C": D.C, "K": k,
            "qllm": pr.query_llm[keep], "qcluster": pr.query_cluster[keep],
            "rcell": D.row_llm * D.C + D.row_cluster, "rtools": D.row_tools[:, :k].copy(),
            "rw": D.y[:, :k].sum(1).astype(float), "pq": new_q[pr.query[used]], "prow": pr.row[used],
            "pn": pn[used].astype(np.int64)}


def pooled_stats(counts, cell, n_cells, floor=1.0):
    """Pooled counts ``Y`` (cells, K) and the Pearson dispersion ``phi`` (cells,) of the rows around their cell's
    pooled frequencies, ``sum_q sum_j (y_qj - n_q p_j)^2 / (n_q p_j) / ((Q - 1)(K' - 1))`` (K' = tools with a
    positive pooled count), floored at ``floor`` (1: no underdispersion is claimed)."""
    K = counts.shape[1]
    Y = np.zeros((n_cells, K))
    np.add.at(Y, cell, counts)
    tot = Y.sum(1, keepdims=True)
    p = np.divide(Y, tot, out=np.zeros_like(Y), where=tot > 0)
    E = counts.sum(1)[:, None] * p[cell]
    r = np.divide((counts - E) ** 2, E, out=np.zeros_like(E), where=E > 0)
    X2 = np.bincount(cell, weights=r.sum(1), minlength=n_cells)
    Qc = np.bincount(cell, minlength=n_cells)
    df = (Qc - 1) * np.maximum((p > 0).sum(1) - 1, 0)
    phi = np.divide(X2, df, out=np.ones(n_cells), where=df > 0)
    return Y, np.maximum(phi, floor)


def sparse_rotations(tot, H, rich=RICH):
    """Per cell an orthogonal (K-1, K-1) rotation of the zero-sum coordinates whose first rows span the directions
    of the cell's sparse tools (chosen fewer than ``rich`` times), and the mask of those rows. The prior is
    isotropic in these coordinates, so the rotation changes only the sampler's geometry."""
    n, K = tot.shape
    R = np.tile(np.eye(K - 1), (n, 1, 1))
    mask = np.zeros((n, K - 1), bool)
    for i in range(n):
        sparse = np.flatnonzero(tot[i] < rich)
        if len(sparse) == 0:
            continue
        Q, _ = np.linalg.qr(np.concatenate([H[:, sparse], np.eye(K - 1)], 1))
        R[i] = Q[:, : K - 1].T
        mask[i, : len(sparse)] = True
    return R, mask


def parameterization(data) -> str:
    """``"mnc"`` (mixed tool effects, non-centred LLM and centred cluster position effects) when the data dominate
    the hierarchy, at least :data:`CENTRED_MIN_LLMS` LLMs and :data:`CENTRED_MIN_QUERIES` queries in every cell
    (the bundled study: 7 LLMs, about 100 queries per cell); else ``"nnn"`` (every effect non-centred), which
    avoids the funnel of a scale the data leave near 0 (a cluster of equal worths, an LLM without cluster
    deviations) in a small study."""
    q = np.bincount(data["cell"], minlength=data["M"] * data["C"])
    rich = data["M"] >= CENTRED_MIN_LLMS and q.min() >= CENTRED_MIN_QUERIES
    return "mnc" if rich else "nnn"


#: ``parameterization``'s thresholds
CENTRED_MIN_LLMS = 5
CENTRED_MIN_QUERIES = 50


def prepared(data, priors) -> dict:
    """The arrays the model needs (the quasi-likelihood's pooled counts and dispersions, the basis, the rotations
    and the parameterisation)."""
    M, C, K = data["M"], data["C"], data["K"]
    n_cells = M * C
    Yt, phit = pooled_stats(data["T"], data["cell"], n_cells)
    Yp, phip = pooled_stats(data["Pc"], data["cell"], n_cells)
    H = _basis(K)
    param = parameterization(data)
    R, sparse = sparse_rotations(Yt, H)
    if param == "nnn":
        sparse = np.ones_like(sparse)
    return {"Yt": Yt, "phit": phit, "Yp": Yp, "phip": phip, "H": H, "R": R, "sparse": sparse, "M": M, "C": C,
            "K": K, "priors": dict(priors), "param": param}


# ---------------------------------------------------------------------------------------------
# the NumPyro model
def _mixed_effect(name, loc, scale, R, mask):
    """Effects ``u`` (rows, d) ~ N(loc, scale^2 I) sampled in rotated coordinates ``w = R u``: non-centred where
    ``mask``, centred elsewhere (the log density of the sampled ``v`` added by hand)."""
    import jax.numpy as jnp
    import numpyro
    import numpyro.distributions as dist
    from jax.scipy.stats import norm

    Rj, mj = jnp.asarray(R), jnp.asarray(mask)
    rl = jnp.einsum("rij,rj->ri", Rj, loc)
    v = numpyro.sample(name + "_v", dist.ImproperUniform(dist.constraints.real_vector, (), event_shape=loc.shape))
    numpyro.factor(name + "_prior", jnp.where(mj, norm.logpdf(v), norm.logpdf(v, rl, scale)).sum())
    w = jnp.where(mj, rl + scale * v, v)
    return jnp.einsum("rji,rj->ri", Rj, w)


def numpyro_model(P):
    """The margin model in NumPyro (``P`` from :func:`prepared`): quasi-likelihood, one tool scale per cluster,
    the parameterisation ``P["param"]`` (:func:`parameterization`)."""
    import jax.numpy as jnp
    import numpyro
    import numpyro.distributions as dist
    from jax.nn import log_softmax

    M, C, K, pr = P["M"], P["C"], P["K"], P["priors"]
    H = jnp.asarray(P["H"])
    d = K - 1
    mu = numpyro.sample("mu", dist.Normal(jnp.zeros((C, d)), pr["mu_sd"]).to_event(2))
    sac = numpyro.sample("sigma_alpha", dist.HalfNormal(pr["sigma_alpha_sd"] * jnp.ones(C)).to_event(1))
    loc = jnp.broadcast_to(mu[None], (M, C, d)).reshape(M * C, d)
    scale = jnp.broadcast_to(sac[None, :, None], (M, C, 1)).reshape(M * C, 1)
    ua = _mixed_effect("ua", loc, scale, P["R"], P["sparse"]).reshape(M, C, d)
    bb = numpyro.sample("beta_bar", dist.Normal(jnp.zeros(d), pr["beta_bar_sd"]).to_event(1))
    sb = numpyro.sample("sigma_beta", dist.HalfNormal(pr["sigma_beta_sd"]))
    sg = numpyro.sample("sigma_gamma", dist.HalfNormal(pr["sigma_delta_sd"]))
    zb = numpyro.sample("z_beta", dist.Normal(jnp.zeros((M, d)), 1.0).to_event(2))
    um = numpyro.deterministic("ubm", bb[None] + sb * zb)
    if P["param"] == "mnc":
        ub = numpyro.sample("ub", dist.Normal(um[:, None] * jnp.ones((M, C, d)), sg).to_event(3))
    else:
        zg = numpyro.sample("z_gamma", dist.Normal(jnp.zeros((M, C, d)), 1.0).to_event(3))
        ub = numpyro.deterministic("ub", um[:, None] + sg * zg)
    numpyro.deterministic("ua", ua)
    la = log_softmax((ua @ H).reshape(M * C, K), -1)
    lb = log_softmax((ub @ H).reshape(M * C, K), -1)
    numpyro.factor("loglik_tools", ((P["Yt"] * la).sum(-1) / P["phit"]).sum())
    numpyro.factor("loglik_positions", ((P["Yp"] * lb).sum(-1) / P["phip"]).sum())


def log_density(P, params) -> float:
    """The model's log density (unnormalised, with the quasi-likelihood) at ``params`` (the sampled sites, in
    the sampler's unconstrained space except the scales, which are given on their own scale)."""
    _jax()
    from numpyro.infer.util import log_density as ld

    return float(ld(numpyro_model, (P,), {}, params)[0])


def _jax(devices=4):
    """JAX in float64 with the package's compilation cache; where JAX is not yet imported, its CPU split into
    ``devices`` devices (one per chain: the chains then run in parallel)."""
    from ._sampling import _jax_compilation_cache

    _jax_compilation_cache()
    if "jax" not in sys.modules and "XLA_FLAGS" not in os.environ:
        os.environ["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={max(int(devices), 1)}"
    import jax

    jax.config.update("jax_enable_x64", True)
    return jax


def _have_numpyro() -> bool:
    import importlib.util

    return all(importlib.util.find_spec(m) is not None for m in ("jax", "numpyro"))


def require_numpyro() -> None:
    """One clear ImportError when NumPyro (the margin model's sampler) is missing."""
    if not _have_numpyro():
        raise ImportError(_NUMPYRO_HINT)


def sample(P, *, draws, tune, chains, seed, target_accept, progress=False):
    """NUTS on the margin model; returns ``(draws by name (chains, draws, ...), sample stats)``.

    The chains run in parallel where JAX has a device for each (``XLA_FLAGS`` is set before JAX is first
    imported), else one after another; the same seed gives the same draws in either case."""
    require_numpyro()
    jax = _jax(chains)
    from numpyro.infer import MCMC, NUTS

    method = "parallel" if jax.local_device_count() >= chains else "sequential"
    kern = NUTS(numpyro_model, target_accept_prob=target_accept)
    mcmc = MCMC(kern, num_warmup=tune, num_samples=draws, num_chains=chains, chain_method=method,
                progress_bar=progress)
    mcmc.run(jax.random.PRNGKey(seed), P, extra_fields=("num_steps", "diverging"))
    post = {k: np.asarray(v) for k, v in mcmc.get_samples(group_by_chain=True).items()}
    ex = mcmc.get_extra_fields(group_by_chain=True)
    stats = {"diverging": np.asarray(ex["diverging"]), "n_steps": np.asarray(ex["num_steps"])}
    return post, stats


def package_draws(raw, P) -> dict:
    """The draws in the package's layout (S = chains x draws first): ``alpha`` (S, M, C, K) the tool margins'
    centred log-probabilities, ``mu`` (S, C, K), ``beta`` (S, M, K) an LLM's position effects (mean over its
    clusters' prior location), ``beta_bar`` (S, K), ``beta_cell`` (S, M, C, K), ``delta`` = ``beta_cell - beta``,
    the scales."""
    H = P["H"]
    nch, ndr = raw["mu"].shape[:2]
    S = nch * ndr

    def flat(x):
        return np.asarray(x).reshape((S,) + x.shape[2:])

    beta = flat(raw["ubm"]) @ H
    beta_cell = flat(raw["ub"]) @ H
    return {"shape": (nch, ndr), "alpha": flat(raw["ua"]) @ H, "mu": flat(raw["mu"]) @ H, "beta": beta,
            "beta_bar": flat(raw["beta_bar"]) @ H, "beta_cell": beta_cell, "delta": beta_cell - beta[:, :, None],
            "sigma_alpha_c": flat(raw["sigma_alpha"]), "sigma_beta": flat(raw["sigma_beta"]),
            "sigma_delta": flat(raw["sigma_gamma"])}


# ---------------------------------------------------------------------------------------------
# δ near zero: Savage-Dickey
def _gauss_logdens0(x) -> float:
    """log density at 0 of a Gaussian fitted to the draws ``x`` (S, d)."""
    m = x.mean(0)
    S = np.atleast_2d(np.cov(x, rowvar=False))
    L = np.linalg.cholesky(S + 1e-12 * np.eye(len(m)))
    z = np.linalg.solve(L, -m)
    return float(-0.5 * z @ z - np.log(np.diag(L)).sum() - 0.5 * len(m) * np.log(2 * np.pi))


def _halfnormal_nodes(*sds):
    """Fixed quasi-random draws (n, len(sds)) of independent HalfNormal(sd) scales (deterministic)."""
    from scipy.stats import norm, qmc

    u = qmc.Sobol(len(sds), scramble=True, seed=_SOBOL_SEED).random(_SOBOL_NODES)
    return np.asarray(sds)[None] * norm.ppf(0.5 + 0.5 * u)


def prior_logdens0_tools(priors, K) -> float:
    """log prior density of a cell's K-1 zero-sum coordinates of ``a`` at 0: N(0, mu_sd^2 + sigma_alpha^2)
    each, integrated over the HalfNormal prior of the cluster's scale."""
    from scipy.special import logsumexp

    s2 = priors["mu_sd"] ** 2 + _halfnormal_nodes(priors["sigma_alpha_sd"])[:, 0] ** 2
    ld = -0.5 * (K - 1) * np.log(2 * np.pi * s2)
    return float(logsumexp(ld) - np.log(len(ld)))


def prior_logdens0_positions(priors, C, K) -> float:
    """log prior density at 0 of an LLM's mean position effects over its C clusters (K-1 coordinates, each
    N(0, beta_bar_sd^2 + sigma_beta^2 + sigma_gamma^2 / C)); the full vector's density at 0 is infinite."""
    from scipy.special import logsumexp

    s = _halfnormal_nodes(priors["sigma_beta_sd"], priors["sigma_delta_sd"])
    v = priors["beta_bar_sd"] ** 2 + s[:, 0] ** 2 + s[:, 1] ** 2 / C
    ld = -0.5 * (K - 1) * np.log(2 * np.pi * v)
    return float(logsumexp(ld) - np.log(len(ld)))


def spike_probs(a, b, priors, w0=SPIKE_MASS):
    """Posterior probabilities of "equal worths" (M, C) and "no position effect" (M,), Savage-Dickey:
    ``P0 = w0 BF / (w0 BF + 1 - w0)`` with BF the posterior over the prior density of the coordinates at 0."""
    _, M, C, K = a.shape
    H = _basis(K)
    ua = a @ H.T
    ub = (b @ H.T).mean(2)
    la0 = prior_logdens0_tools(priors, K)
    lb0 = prior_logdens0_positions(priors, C, K)

    def post(log_bf):
        return 1.0 / (1.0 + (1 - w0) / w0 * np.exp(-np.clip(log_bf, -700, 700)))

    p_ew = np.array([[post(_gauss_logdens0(ua[:, m, c]) - la0) for c in range(C)] for m in range(M)])
    p_np = np.array([post(_gauss_logdens0(ub[:, m]) - lb0) for m in range(M)])
    return p_ew.reshape(M, C), p_np


def tv_to_uniform(logits):
    """Total-variation distance to uniform of ``softmax(logits)`` along the last axis."""
    z = logits - logits.max(-1, keepdims=True)
    p = np.exp(z)
    p /= p.sum(-1, keepdims=True)
    return 0.5 * np.abs(p - 1.0 / p.shape[-1]).sum(-1)


def mixture(post, priors, gen, margin, w0=SPIKE_MASS) -> dict:
    """The spike-and-slab posterior of the implied δ.

    Each slab draw of a cell's δ_API is replaced by 0 with probability P0 (equal worths), each of an LLM's δ_pos
    (all its clusters) with probability P0 (no position effect). ``P(δ < margin) = P0 + (1 - P0) P_slab(δ <
    margin)`` for a cell's δ_API and an LLM's δ_pos; for an LLM's δ_API (mean over clusters) it is the share of
    the mixture's draws below the margin."""
    a, b = post["alpha"], post["beta_cell"]
    p_ew, p_np = spike_probs(a, b, priors, w0)
    S = a.shape[0]
    ia = gen.random((S,) + p_ew.shape) < p_ew
    ib = gen.random((S,) + p_np.shape) < p_np
    slab_api, slab_pos = tv_to_uniform(a), tv_to_uniform(b)                   # (S, M, C)
    api = np.where(ia, 0.0, slab_api)
    pos = np.where(ib[:, :, None], 0.0, slab_pos)
    return {"api_cell": api, "pos_cell": pos, "api": api.mean(-1), "pos": pos.mean(-1), "p_equal_worth": p_ew,
            "p_no_position": p_np,
            "below_api_cell": p_ew + (1 - p_ew) * (slab_api < margin).mean(0),
            "below_pos_cell": p_np[:, None] + (1 - p_np[:, None]) * (slab_pos < margin).mean(0),
            "below_api": (api.mean(-1) < margin).mean(0),
            "below_pos": p_np + (1 - p_np) * (slab_pos.mean(-1) < margin).mean(0)}


# ---------------------------------------------------------------------------------------------
# posterior predictive checks
def _kappa_of_phi(phi, n, cell):
    """The Dirichlet concentration whose Polya-urn factor ``(n + kappa) / (1 + kappa)`` at a cell's mean number
    of attempts is ``phi`` (1e8, no heterogeneity, where ``phi <= 1``)."""
    nbar = np.bincount(cell, weights=n, minlength=len(phi)) / np.maximum(np.bincount(cell, minlength=len(phi)), 1)
    ok = (phi > 1 + 1e-9) & (phi < nbar)
    return np.where(ok, (nbar - phi) / np.where(ok, phi - 1, 1.0), np.where(phi >= nbar, 1e-3, 1e8))


def _polya(gen, p, conc, n):
    """Dirichlet-multinomial draws, one per row of ``p`` (Q, K), concentration ``conc`` (Q,), totals ``n``."""
    g = gen.gamma(np.maximum(conc[:, None] * p, 1e-300))
    q = g / np.maximum(g.sum(1, keepdims=True), 1e-300)
    q = np.where(np.isfinite(q).all(1, keepdims=True) & (g.sum(1, keepdims=True) > 0), q, p)
    q = q / q.sum(1, keepdims=True)
    return gen.multinomial(n.astype(np.int64), q).astype(float)


#: the fitted joint's margins match the draw's to this (max absolute difference of probabilities)
IPF_TOL = 1e-8
#: rounds of the proportional fitting at most, per (draw, cell)
IPF_ITERS = 500


def _softmax(x):
    z = np.exp(x - x.max(-1, keepdims=True))
    return z / z.sum(-1, keepdims=True)


def max_entropy_joint(la, lb, data, tol=IPF_TOL, iters=IPF_ITERS):
    """Per draw and (LLM, cluster) cell, the choice law of each logged ordering ``o``,
    ``p(t | o) = softmax_t(a'_t + b'_{pos_o(t)})``, whose margins over the cell's logged orderings (weighted by
    their attempts) are the draw's tool margin ``softmax(la)`` and position margin ``softmax(lb)`` (``la``,
    ``lb``: (S, cells, K)): the maximum-entropy joint with those margins, found by iterative proportional
    fitting (compiled, each (draw, cell) until its margins match to ``tol`` or ``iters`` rounds).

    Returns ``(a', b', residual, rounds)``, the last two per (draw, cell): ``residual`` the largest absolute
    difference between a margin of the joint and its target, above ``tol`` where no joint of this form has both
    margins (e.g. a cell shown in one ordering only, whose tool and position margins are one permutation of each
    other; or a first-slot share near 1 with tool margins away from the orderings' shares).

    Examples
    --------
    >>> import numpy as np
    >>> K = 3
    >>> data = {"rcell": np.zeros(K, int), "rw": np.ones(K),
    ...         "rtools": np.array([(np.arange(K) + s) % K for s in range(K)])}   # the 3 cyclic rotations
    >>> la, lb = np.log([[[0.5, 0.3, 0.2]]]), np.log([[[0.6, 0.3, 0.1]]])
    >>> a, b, resid, rounds = max_entropy_joint(la, lb, data)
    >>> bool(resid.max() < 1e-8)
    True
    """
    S, n_cells = la.shape[:2]
    order = np.argsort(data["rcell"], kind="stable")
    start = np.searchsorted(data["rcell"][order], np.arange(n_cells + 1))
    a, b = np.empty_like(la), np.empty_like(lb)
    resid, rounds = np.zeros((S, n_cells)), np.zeros((S, n_cells), np.int64)
    _ipf_kernel()(np.ascontiguousarray(la, dtype=float), np.ascontiguousarray(lb, dtype=float), start,
                  np.ascontiguousarray(data["rtools"][order], dtype=np.int64),
                  np.ascontiguousarray(data["rw"][order], dtype=float), float(tol), int(iters), a, b, resid, rounds)
    return a, b, resid, rounds


@functools.lru_cache(maxsize=1)
def _ipf_kernel():
    """The compiled proportional fitting of :func:`max_entropy_joint` (numba, compiled on first use)."""
    import numba

    @numba.njit(cache=False)
    def joint_margins(a, b, tools, w, lo, hi, mt, mp, e):
        K = a.shape[0]
        mt[:] = 0.0
        mp[:] = 0.0
        W = 0.0
        for r in range(lo, hi):
            W += w[r]
        for r in range(lo, hi):
            mx = -np.inf
            for p in range(K):
                mx = max(mx, a[tools[r, p]] + b[p])
            z = 0.0
            for p in range(K):
                e[p] = np.exp(a[tools[r, p]] + b[p] - mx)
                z += e[p]
            for p in range(K):
                q = w[r] / W * e[p] / z
                mt[tools[r, p]] += q
                mp[p] += q

    @numba.njit(cache=False)
    def step(x, lt, m):
        """``x += log(target) - log(margin)``, then centred (in place, no temporaries)."""
        K = x.shape[0]
        for k in range(K):
            x[k] += lt[k] - np.log(max(m[k], 1e-300))
        mean = 0.0
        for k in range(K):
            mean += x[k]
        mean /= K
        for k in range(K):
            x[k] -= mean

    @numba.njit(cache=False)
    def kernel(la, lb, start, tools, w, tol, iters, a, b, resid, rounds):
        S, C, K = la.shape
        mt, mp, e = np.zeros(K), np.zeros(K), np.zeros(K)
        pt, pp = np.zeros(K), np.zeros(K)
        lt, lp = np.zeros(K), np.zeros(K)
        for s in range(S):
            for c in range(C):
                lo, hi = start[c], start[c + 1]
                for v, x, out in ((pt, la[s, c], a[s, c]), (pp, lb[s, c], b[s, c])):
                    m = x.max()
                    v[:] = np.exp(x - m)
                    v /= v.sum()
                    out[:] = x - x.mean()
                if hi == lo:
                    continue
                for k in range(K):
                    lt[k] = np.log(pt[k])
                    lp[k] = np.log(pp[k])
                it = 0
                err = np.inf
                while True:
                    joint_margins(a[s, c], b[s, c], tools, w, lo, hi, mt, mp, e)
                    err = 0.0
                    for k in range(K):
                        err = max(err, abs(mt[k] - pt[k]), abs(mp[k] - pp[k]))
                    if err <= tol or it == iters:
                        break
                    it += 1
                    step(a[s, c], lt, mt)
                    joint_margins(a[s, c], b[s, c], tools, w, lo, hi, mt, mp, e)
                    step(b[s, c], lp, mp)
                resid[s, c] = err
                rounds[s, c] = it

    return kernel


# ---------------------------------------------------------------------------------------------
# the joint at its limit: Newton on the dual, certified "no joint", boundary faces
#: the limit solver's tolerance: the joint's margins match the draw's to this (max absolute difference)
LIMIT_TOL = 1e-10
#: Newton steps at most per (draw, cell) before a pair goes to the linear programme (a safety bound: a pair with
#: a joint in the interior converges in a few steps, one without a joint is certified in a few more)
NEWTON_ITERS = 100
#: :func:`limit_joint`'s verdict per (draw, cell): a joint with every choice possible, a joint on the boundary
#: (some choices have probability 0 in every joint), no joint (certified), undetermined (neither shown)
JOINT, BOUNDARY, NO_JOINT, UNDETERMINED = 0, 1, 2, 3
#: ``F < -_CERT (1 + |theta|)`` certifies that no joint exists (weak duality; margin for rounding)
_CERT = 1e-9


def limit_joint(la, lb, data, tol=LIMIT_TOL, iters=NEWTON_ITERS) -> dict:
    """The maximum-entropy joint of :func:`max_entropy_joint` at its limit; where no joint exists, a certificate
    of that and a defined replacement.

    Per (draw, cell), Newton's method (damped, backtracking line search; compiled) on the convex dual
    ``F(a, b) = sum_o w_o log sum_p exp(a[tool_o(p)] + b[p]) - a.pt - b.pp + (sum a)^2 / 2 + (sum b)^2 / 2``
    (``w`` the orderings' shares of the cell's attempts; the squares fix the two shifts that leave every law
    unchanged) until the margins match to ``tol``. ``F`` bounds from above the entropy of every joint with both
    margins (weak duality), so ``F < 0`` at any point proves that no joint has them: such pairs are *certified*
    on the way, without a linear programme. A pair that neither converges nor is so certified within ``iters``
    steps goes to :func:`certify_by_lp`, which either proves it infeasible (HiGHS, the Farkas vector checked) or
    finds the choices that have probability 0 in every joint (a *boundary* pair); the dual is then solved on the
    remaining choices (its *support*), where it has a finite minimiser.

    A pair with no joint is replicated from the *tool projection of the draw's position chooser*: the law
    ``p(t | o) = softmax_t(a'_t + b_{pos_o(t)})`` with ``b`` the draw's own centred position log-probabilities
    and ``a'`` such that the tool margin is the draw's exactly (the I-projection of the position-only chooser
    ``softmax(b)`` onto the joints with the draw's tool margin; unique, every choice possible), solved by Newton
    in ``a'`` until the tool margin matches to ``tol``. The dispersion statistic is centred at the draw's tool
    margin, so the replicate keeps it exactly; no joint has the position margin too, and the draw's position
    effects are kept as they are (``docs/dev/bayes_margin.md``, "The check at its limit").

    Returns a dict: ``a``, ``b`` (S, cells, K), centred; ``status`` (S, cells), :data:`JOINT`,
    :data:`BOUNDARY`, :data:`NO_JOINT` or :data:`UNDETERMINED` (then the proportional fitting's point at
    :data:`IPF_ITERS`); ``residual`` the largest margin error (for a pair with no joint: its position margin's
    distance from the draw's); ``iterations`` (Newton steps); ``support`` ``{(draw, cell): (design rows, mask)}``
    for the boundary pairs: the choices possible in their joint; ``lp`` the pairs the linear programme
    decided.

    Examples
    --------
    >>> import numpy as np
    >>> K = 3
    >>> data = {"rcell": np.zeros(K, int), "rw": np.ones(K),
    ...         "rtools": np.array([(np.arange(K) + s) % K for s in range(K)])}   # the 3 cyclic rotations
    >>> la, lb = np.log([[[0.5, 0.3, 0.2]]]), np.log([[[0.6, 0.3, 0.1]]])
    >>> out = limit_joint(la, lb, data)
    >>> bool(out["residual"].max() < 1e-10), int(out["status"][0, 0])
    (True, 0)
    >>> one = {"rcell": np.zeros(1, int), "rw": np.ones(1), "rtools": np.array([[0, 1, 2]])}   # one ordering
    >>> int(limit_joint(la, lb, one)["status"][0, 0]) == NO_JOINT
    True
    """
    S, n_cells, K = la.shape
    order = np.argsort(data["rcell"], kind="stable")
    start = np.searchsorted(data["rcell"][order], np.arange(n_cells + 1)).astype(np.int64)
    ctx = {"start": start, "order": order, "tools": np.ascontiguousarray(data["rtools"][order], dtype=np.int64),
           "w": np.ascontiguousarray(data["rw"][order], dtype=float), "cells": np.tile(np.arange(n_cells), S),
           "pt": _softmax(np.asarray(la, dtype=float).reshape(S * n_cells, K)),
           "pp": _softmax(np.asarray(lb, dtype=float).reshape(S * n_cells, K)), "tol": tol, "iters": iters,
           "n_cells": n_cells}
    pt, pp = ctx["pt"], ctx["pp"]
    a, b = _centred_log(pt), _centred_log(pp)
    st = _newton(ctx, np.arange(len(pt)), None, a, b)
    status = np.where(st["conv"], JOINT, np.where(st["cert"], NO_JOINT, UNDETERMINED)).astype(np.int8)
    support: dict = {}
    n_lp = int((status == UNDETERMINED).sum())
    for i in np.flatnonzero(status == UNDETERMINED):
        lo, hi = _rows(ctx, i)
        feasible, sup = certify_by_lp(pt[i], pp[i], ctx["tools"][lo:hi], ctx["w"][lo:hi])
        if not feasible:
            status[i] = NO_JOINT
        elif _on_support(ctx, i, sup, pt[i], pp[i], a, b, st, support):
            status[i] = BOUNDARY
    nj = np.flatnonzero(status == NO_JOINT)
    ai, bi = _centred_log(pt[nj]), _centred_log(pp[nj])
    r = _newton(ctx, nj, None, ai, bi, fix_b=True)
    a[nj], b[nj] = ai, bi
    st["err"][nj], st["iters"][nj] = r["err"], st["iters"][nj] + r["iters"]
    status[nj[~r["conv"]]] = UNDETERMINED
    und = np.flatnonzero(status == UNDETERMINED)
    if len(und):
        st["err"][und] = _ipf_fallback(ctx, und, a, b)
    return {"a": a.reshape(S, n_cells, K), "b": b.reshape(S, n_cells, K), "status": status.reshape(S, n_cells),
            "residual": st["err"].reshape(S, n_cells), "iterations": st["iters"].reshape(S, n_cells),
            "support": support, "lp": n_lp}


def _rows(ctx, i):
    c = ctx["cells"][i]
    return ctx["start"][c], ctx["start"][c + 1]


def _on_support(ctx, i, sup, mt, mp, a, b, st, support) -> bool:
    """Solve pair ``i``'s dual on the choices ``sup`` (its cell's rows) for the margins ``mt``, ``mp``, into
    ``a``, ``b``, ``st`` and ``support`` when it converges."""
    lo, hi = _rows(ctx, i)
    mask = np.ones(ctx["tools"].shape, np.bool_)
    mask[lo:hi] = sup
    one = {**ctx, "pt": mt[None], "pp": mp[None], "cells": ctx["cells"][i:i + 1]}
    ai, bi = _centred_log(ctx["pt"][i:i + 1]), _centred_log(ctx["pp"][i:i + 1])
    r = _newton(one, np.arange(1), mask, ai, bi, anchor=1e-12)
    if not r["conv"][0]:
        return False
    a[i], b[i] = ai[0], bi[0]
    st["iters"][i] += r["iters"][0]
    st["err"][i] = max(r["err"][0], np.abs(mt - ctx["pt"][i]).max(), np.abs(mp - ctx["pp"][i]).max())
    support[divmod(int(i), ctx["n_cells"])] = (ctx["order"][lo:hi], sup)
    return True


def _ipf_fallback(ctx, und, a, b):
    """The proportional fitting's point at :data:`IPF_ITERS` for the undetermined pairs (into ``a``, ``b``);
    returns their margin errors."""
    start, tools, w, cells = ctx["start"], ctx["tools"], ctx["w"], ctx["cells"][und]
    sub = {"rcell": np.repeat(np.arange(len(und)), start[cells + 1] - start[cells]),
           "rtools": np.concatenate([tools[start[c]:start[c + 1]] for c in cells]),
           "rw": np.concatenate([w[start[c]:start[c + 1]] for c in cells])}
    ia, ib, ir, _ = max_entropy_joint(np.log(ctx["pt"][und])[None], np.log(ctx["pp"][und])[None], sub)
    a[und], b[und] = ia[0], ib[0]
    return ir[0]


def _centred_log(p):
    x = np.log(p)
    return np.ascontiguousarray(x - x.mean(1, keepdims=True))


def _newton(ctx, idx, mask, a, b, anchor=0.0, fix_b=False) -> dict:
    """Newton on the dual of the pairs ``idx`` (rows of ``ctx["pt"]``, ``ctx["pp"]``), from and into ``a``,
    ``b`` (one row per pair, in place, centred); ``mask`` (design rows, K) the possible choices (None: all);
    ``anchor`` pulls the free directions to the start; ``fix_b``: ``b`` stays, ``a`` alone is solved for the tool
    margin. ``conv``: gradient below the tolerance; ``cert``: ``F`` went below 0 (no joint; not with ``fix_b``);
    ``err``: the margin error."""
    N = len(idx)
    conv, cert = np.zeros(N, np.bool_), np.zeros(N, np.bool_)
    err, its = np.zeros(N), np.zeros(N, np.int64)
    if mask is None:
        mask = np.ones(ctx["tools"].shape, np.bool_)
    cells = np.ascontiguousarray(ctx["cells"][idx], dtype=np.int64)
    _newton_kernel()(np.ascontiguousarray(ctx["pt"][idx]), np.ascontiguousarray(ctx["pp"][idx]), cells,
                     ctx["start"], ctx["tools"], ctx["w"], mask, bool(fix_b), float(anchor), float(ctx["tol"]),
                     int(ctx["iters"]), _CERT, a, b, conv, cert, err, its)
    return {"conv": conv, "cert": cert, "err": err, "iters": its}


@functools.lru_cache(maxsize=1)
def _dual_kernel():
    """The compiled dual of :func:`limit_joint` (value, gradient, Hessian; numba, compiled on first use)."""
    import numba

    @numba.njit(cache=False)
    def evaluate(th, pt, pp, tools, w, mask, lo, hi, fix_b, anchor, th0, g, H, want_h, mt, mp, e, mu):
        """The dual ``F`` at ``th = (a, b)``, its gradient into ``g``, its Hessian into ``H`` (``want_h``)."""
        K = pt.shape[0]
        W = 0.0
        for r in range(lo, hi):
            W += w[r]
        mt[:] = 0.0
        mp[:] = 0.0
        if want_h:
            H[:, :] = 0.0
        F = 0.0
        for r in range(lo, hi):
            mx = -np.inf
            for p in range(K):
                if mask[r, p]:
                    mx = max(mx, th[tools[r, p]] + th[K + p])
            z = 0.0
            for p in range(K):
                e[p] = np.exp(th[tools[r, p]] + th[K + p] - mx) if mask[r, p] else 0.0
                z += e[p]
            wr = w[r] / W
            F += wr * (mx + np.log(z))
            mu[:] = 0.0
            for p in range(K):
                q = e[p] / z
                i, j = tools[r, p], K + p
                mt[i] += wr * q
                mp[p] += wr * q
                if want_h:
                    H[i, i] += wr * q
                    H[j, j] += wr * q
                    H[i, j] += wr * q
                    H[j, i] += wr * q
                    mu[i] += q
                    mu[j] += q
            if want_h:
                for i in range(2 * K):
                    for j in range(2 * K):
                        H[i, j] -= wr * mu[i] * mu[j]
        sa, sb = 0.0, 0.0
        for k in range(K):
            sa += th[k]
            sb += th[K + k]
        for k in range(K):
            F += -th[k] * pt[k] - th[K + k] * pp[k]
            g[k] = mt[k] - pt[k] + sa
            g[K + k] = 0.0 if fix_b else mp[k] - pp[k] + sb
        F += 0.5 * sa * sa + 0.5 * sb * sb
        for k in range(2 * K):
            F += 0.5 * anchor * (th[k] - th0[k]) ** 2
            g[k] += anchor * (th[k] - th0[k])
        if want_h:
            for i in range(K):
                for j in range(K):
                    H[i, j] += 1.0
                    H[K + i, K + j] += 1.0
            for i in range(2 * K):
                H[i, i] += 1e-12 + anchor
            if fix_b:                                  # no step in b
                for i in range(K, 2 * K):
                    for j in range(2 * K):
                        H[i, j] = 0.0
                        H[j, i] = 0.0
                    H[i, i] = 1.0
        return F

    return evaluate


@functools.lru_cache(maxsize=1)
def _cholesky_kernel():
    """The compiled solve of Newton's step in :func:`limit_joint` (numba, compiled on first use)."""
    import numba

    @numba.njit(cache=False)
    def solve(H, g, s):
        """``s = -H^-1 g`` by Cholesky (``H`` symmetric positive definite; overwritten); False if it is not."""
        n = g.shape[0]
        for j in range(n):
            d = H[j, j]
            for k in range(j):
                d -= H[j, k] * H[j, k]
            if not d > 0.0:
                return False
            H[j, j] = np.sqrt(d)
            for i in range(j + 1, n):
                x = H[i, j]
                for k in range(j):
                    x -= H[i, k] * H[j, k]
                H[i, j] = x / H[j, j]
        for i in range(n):                                  # L y = -g
            x = -g[i]
            for k in range(i):
                x -= H[i, k] * s[k]
            s[i] = x / H[i, i]
        for i in range(n - 1, -1, -1):                      # L' s = y
            x = s[i]
            for k in range(i + 1, n):
                x -= H[k, i] * s[k]
            s[i] = x / H[i, i]
        return True

    return solve


@functools.lru_cache(maxsize=1)
def _newton_kernel():
    """The compiled Newton iteration of :func:`limit_joint` (numba, compiled on first use)."""
    import numba

    evaluate, solve = _dual_kernel(), _cholesky_kernel()

    @numba.njit(cache=False)
    def kernel(pt, pp, cells, start, tools, w, mask, fix_b, anchor, tol, iters, cert_tol, a, b, conv, cert, err,
               its):
        N, K = pt.shape
        n = 2 * K
        th, tn, g, gn, s, th0 = np.zeros(n), np.zeros(n), np.zeros(n), np.zeros(n), np.zeros(n), np.zeros(n)
        H = np.zeros((n, n))
        mt, mp, mtn, mpn, e, mu = np.zeros(K), np.zeros(K), np.zeros(K), np.zeros(K), np.zeros(K), np.zeros(n)
        for i in range(N):
            lo, hi = start[cells[i]], start[cells[i] + 1]
            if hi == lo:
                conv[i] = True
                continue
            th[:K] = a[i]
            th[K:] = b[i]
            th0[:] = th
            s[:] = 0.0
            F, gs, t, halvings, it = np.inf, 0.0, 0.0, 0, 0
            while True:                          # one evaluation per pass: a trial point of the line search
                tn[:] = th + t * s
                Fn = evaluate(tn, pt[i], pp[i], tools, w, mask, lo, hi, fix_b, anchor, th0, gn, H, True, mtn, mpn,
                              e, mu)
                if not Fn <= F + 1e-4 * t * gs + 1e-13 * (1.0 + abs(F)):
                    t *= 0.5                     # backtrack
                    halvings += 1
                    if halvings == 60:
                        break
                    continue
                th[:], g[:], mt[:], mp[:], F = tn, gn, mtn, mpn, Fn
                if np.abs(g).max() <= tol:
                    conv[i] = True
                    break
                if not fix_b and -cert_tol * (1.0 + np.abs(th).max()) > F:
                    cert[i] = True
                    break
                if it == iters:
                    break
                it += 1
                gs = (g * s).sum() if solve(H, g, s) else 0.0
                if not gs < 0.0:                 # not a descent direction: the gradient's
                    s[:] = -g
                    gs = -(g * g).sum()
                t, halvings = 1.0, 0
            em = 0.0
            for k in range(K):
                em = max(em, abs(mt[k] - pt[i, k]), abs(mp[k] - pp[i, k]))
            err[i] = em
            its[i] = it
            ma, mb = th[:K].mean(), th[K:].mean()
            a[i] = th[:K] - ma
            b[i] = th[K:] - mb

    return kernel


def certify_by_lp(pt, pp, tools, w):
    """Whether some joint of one cell's orderings (rows ``tools``, attempts ``w``) has the tool margin ``pt`` and
    position margin ``pp``, by linear programming (HiGHS); and if so, which choices (ordering, position) have a
    positive probability in some such joint (the maximum-entropy joint's support).

    Infeasibility is certified by the phase-one programme ``min |A x - m|_1`` over joints ``x >= 0``: a positive
    optimum is the L1 distance from the margins to the nearest margins any joint has, and its dual vector ``y``
    (``A' y <= 0``, ``m . y > 0``: Farkas) is checked here. Returns ``(feasible, support)`` with ``support``
    (rows, K) bool (None when infeasible). Raises a RuntimeError if HiGHS fails or its certificate does not check.
    """
    from scipy.optimize import linprog

    R, K = tools.shape
    n = R * K
    A = np.zeros((R + 2 * K, n))
    for r in range(R):
        for p in range(K):
            j = r * K + p
            A[r, j] = 1.0
            A[R + p, j] = 1.0
            A[R + K + tools[r, p], j] = 1.0
    m = np.concatenate([w / w.sum(), pp, pt])
    eye = np.eye(len(m))
    res = linprog(np.concatenate([np.zeros(n), np.ones(2 * len(m))]), A_eq=np.hstack([A, eye, -eye]), b_eq=m,
                  bounds=(0, None), method="highs")
    if res.status != 0:
        raise RuntimeError(f"certify_by_lp: HiGHS failed ({res.message})")
    if res.fun > 1e-9:
        y = res.eqlin.marginals
        if (A.T @ y).max() > 1e-9 or m @ y < 0.5 * res.fun:
            raise RuntimeError("certify_by_lp: the Farkas vector does not check")
        return False, None
    support = np.zeros(n, bool)
    for j in range(n):                                      # the choices some joint uses (one LP each, unless seen)
        if support[j]:
            continue
        c = np.zeros(n)
        c[j] = -1.0
        r = linprog(c, A_eq=A, b_eq=m, bounds=(0, None), method="highs")
        if r.status == 0:
            support |= r.x > 1e-12
    return True, support.reshape(R, K)


def replicate_plan(data) -> dict:
    """The per-prompt indices :func:`design_replicate` reuses for every draw."""
    pq, prow, pn = data["pq"], data["prow"], data["pn"]
    return {"pq": np.ascontiguousarray(pq, dtype=np.int64), "pn": np.ascontiguousarray(pn, dtype=np.int64),
            "tools": np.ascontiguousarray(data["rtools"][prow], dtype=np.int64),
            "bcell": np.ascontiguousarray(data["rcell"][prow], dtype=np.int64), "n_att": int(np.sum(pn)),
            "prow": np.ascontiguousarray(prow, dtype=np.int64)}


def design_replicate(gen, a, b, kappa, data, plan=None, row_offset=None):
    """One replicate of the study under its logged design: each query draws its tool weights ``w_q ~
    Dirichlet(kappa_q softmax(a'[cell]))``, and each attempt of each of its prompts chooses a position from
    ``softmax_p(log w_q[tool at p] + b'[cell, p])`` (its ordering's joint). Returns the per-query tool counts and
    position counts (Q, K), both from the same choices. ``plan``: :func:`replicate_plan` (computed when
    omitted). ``row_offset`` (design rows, K), when given, is added to each design row's logits (``-inf``: a
    choice impossible in that ordering, as in a joint on the boundary, :func:`limit_joint`). The choices are drawn
    by inversion of one uniform per attempt (compiled loop over the prompts)."""
    plan = replicate_plan(data) if plan is None else plan
    K, cell = data["K"], data["cell"]
    Q = len(cell)
    pa = _softmax(a)[cell]
    g = gen.gamma(np.maximum(kappa[:, None] * pa, 1e-300))
    lw = np.log(np.maximum(g, 1e-300)) - np.log(np.maximum(g.sum(1, keepdims=True), 1e-300))
    lw = np.where(np.isfinite(lw).all(1, keepdims=True) & (g.sum(1, keepdims=True) > 0), lw,
                  np.log(np.maximum(pa, 1e-300)))
    u = gen.random(plan["n_att"])
    Tr, Pr = np.zeros((Q, K)), np.zeros((Q, K))
    bb, idx = (b, plan["bcell"]) if row_offset is None else (b[data["rcell"]] + row_offset, plan["prow"])
    _replicate_kernel()(np.ascontiguousarray(lw, dtype=float), np.ascontiguousarray(bb, dtype=float),
                        plan["tools"], idx, plan["pq"], plan["pn"], u, Tr, Pr)
    return Tr, Pr


@functools.lru_cache(maxsize=1)
def _replicate_kernel():
    """The compiled choices of :func:`design_replicate` (numba, compiled on first use): per prompt the softmax of
    ``lw[q, tool at p] + b[cell, p]``, then per attempt the position whose cumulative probability first reaches
    its uniform."""
    import numba

    @numba.njit(cache=False)
    def kernel(lw, b, tools, bcell, pq, pn, u, Tr, Pr):
        K = lw.shape[1]
        x = np.empty(K)
        j = 0
        for r in range(pq.shape[0]):
            q, c = pq[r], bcell[r]
            mx = -np.inf
            for p in range(K):
                x[p] = lw[q, tools[r, p]] + b[c, p]
                mx = max(mx, x[p])
            z = 0.0
            for p in range(K):
                x[p] = np.exp(x[p] - mx)
                z += x[p]
            cum = 0.0
            for p in range(K - 1):
                cum += x[p] / z
                x[p] = cum                                     # the cumulative probabilities, in place
            for _ in range(pn[r]):
                pos = 0
                for p in range(K - 1):
                    if u[j] > x[p]:
                        pos += 1
                j += 1
                Tr[q, tools[r, pos]] += 1.0
                Pr[q, pos] += 1.0

    return kernel


#: the concentrations :func:`kappa_under_design` tries (the last: no heterogeneity)
KAPPA_GRID = np.concatenate([np.logspace(-2, 4, 13), [1e8]])
#: replicates per concentration in :func:`kappa_under_design`, and their seed (fixed: the fit's stream is kept)
KAPPA_REPS = 8
_KAPPA_SEED = 20261128


def kappa_under_design(data, reps=KAPPA_REPS):
    """Per cell, the Dirichlet concentration of the queries' tool weights whose design replicate
    (:func:`design_replicate` at the cell's pooled frequencies) has, on average, the cell's observed Pearson
    dispersion ``phi`` of the tool counts (not floored): the replicate's heterogeneity moment-matched under the
    logged design, where a Polya urn's factor (:func:`_kappa_of_phi`) would count the design's own balance
    (position effects spread a query's choices over the tools it is shown) as homogeneity. Cells whose design
    alone gives ``phi`` or more get no heterogeneity (1e8). Deterministic (own seed)."""
    M, C, K = data["M"], data["C"], data["K"]
    T, cell = data["T"], data["cell"]
    n_cells = M * C
    Y, phi = pooled_stats(T, cell, n_cells, floor=0.0)
    Yp = np.zeros((n_cells, K))
    np.add.at(Yp, cell, data["Pc"])
    la = np.log(np.maximum(Y, 0.5) / np.maximum(Y, 0.5).sum(1, keepdims=True))[None]
    lb = np.log(np.maximum(Yp, 0.5) / np.maximum(Yp, 0.5).sum(1, keepdims=True))[None]
    lim = limit_joint(la, lb, data)
    a, b = lim["a"], lim["b"]
    off = _row_offsets(lim["support"], len(data["rcell"]), K).get(0)
    plan = replicate_plan(data)
    disp = np.zeros((len(KAPPA_GRID), n_cells))
    for j, kap in enumerate(KAPPA_GRID):
        gen = np.random.default_rng(_KAPPA_SEED)
        for _ in range(reps):
            rep, _ = design_replicate(gen, a[0], b[0], np.full(len(cell), kap), data, plan, off)
            disp[j] += pooled_stats(rep, cell, n_cells, floor=0.0)[1] / reps
    disp = np.minimum.accumulate(disp, 0)                      # non-increasing in the concentration
    ok = disp <= phi[None]
    first = np.where(ok.any(0), ok.argmax(0), len(KAPPA_GRID) - 1)
    kappa = np.empty(n_cells)
    for c in range(n_cells):
        j = first[c]
        if j == 0 or (j == len(KAPPA_GRID) - 1 and not ok[j, c]):
            kappa[c] = KAPPA_GRID[j]
            continue
        lo, hi = disp[j, c], disp[j - 1, c]                      # interpolate log(kappa) between the two nodes
        w = (hi - phi[c]) / (hi - lo) if hi > lo else 1.0
        kappa[c] = np.exp((1 - w) * np.log(KAPPA_GRID[j - 1]) + w * np.log(KAPPA_GRID[j]))
    return kappa


def _row_offsets(support, n_rows, K) -> dict:
    """Per draw with a law that has zeros, the logit offsets (design rows, K) of its cells' rows: ``-inf`` off
    their support (:func:`limit_joint`), 0 elsewhere."""
    out: dict = {}
    for (d, _), (rows, sup) in support.items():
        off = out.setdefault(d, np.zeros((n_rows, K)))
        off[rows] = np.where(sup, 0.0, -np.inf)
    return out


def ppc(post, data, gen, n_draws=PPC_DRAWS, iters=IPF_ITERS, solver="limit") -> dict:
    """Both predictive checks of the margin model.

    * per-query dispersion, per LLM: Pearson chi-square of every query's tool counts around ``n_q pi``,
      replicated under the logged design (same orderings and attempts per query, new choices): per posterior
      draw the maximum-entropy choice law of each logged ordering with the draw's tool and position margins at
      its limit (:func:`limit_joint`; where no joint has both, which is certified, the law with the exact tool
      margin and the draw's own position effects), query heterogeneity a Dirichlet on each query's
      tool weights whose concentration makes the design replicates reproduce the cell's observed Pearson
      dispersion, not floored (:func:`kappa_under_design`, :func:`design_replicate`);
    * cluster x position (all LLMs, one table): chi-square of the (cluster, position) counts, replicated by a
      Polya urn per query on the cell's position margin (the design replicate's position counts are not used:
      its tool heterogeneity moves the expected position margin, ``docs/dev/bayes_margin.md``; their statistic is
      returned as ``cp_rep_design`` for the record).

    ``solver="ipf"`` replicates from the former proportional fitting stopped at ``iters`` rounds (for the record;
    the p-values then depend on ``iters``).

    Returns the observed and replicated statistics per draw: ``disp_obs``, ``disp_rep`` (draws, M),
    ``cp_obs``, ``cp_rep``, ``cp_rep_design`` (draws,), the replicated and observed (cluster, position) tables
    ``tab_rep``, ``tab_obs``; per (draw, cell) the joint's margin error ``ipf_residual``, the solver's steps
    ``ipf_rounds`` (Newton steps; IPF rounds with ``solver="ipf"``), ``joint_status`` (:func:`limit_joint`'s
    verdict) and ``no_joint`` (True where no joint has both margins, certified); ``no_joint_share`` (M,) the
    share of each LLM's checked (draw, cell) pairs with no joint.
    """
    S = post["alpha"].shape[0]
    sel = np.sort(gen.choice(S, size=min(n_draws, S), replace=False))
    M, C, K = data["M"], data["C"], data["K"]
    T, Pc, cell, qllm, qcl = data["T"], data["Pc"], data["cell"], data["qllm"], data["qcluster"]
    n = T.sum(1)
    kap = kappa_under_design(data)[cell]
    lam = _kappa_of_phi(pooled_stats(Pc, cell, M * C)[1], n, cell)[cell]
    la = post["alpha"][sel].reshape(len(sel), M * C, K)
    lb = post["beta_cell"][sel].reshape(len(sel), M * C, K)
    if solver not in ("limit", "ipf"):
        raise ValueError(f"solver must be 'limit' or 'ipf', not {solver!r}")
    lim = limit_joint(la, lb, data)
    if solver == "ipf":
        a, b, resid, rounds = max_entropy_joint(la, lb, data, iters=iters)
        support: dict = {}
    else:
        a, b, resid, rounds, support = lim["a"], lim["b"], lim["residual"], lim["iterations"], lim["support"]
    plan = replicate_plan(data)
    offsets = _row_offsets(support, len(data["rcell"]), K)
    pa_all, pb_all = _softmax(la), _softmax(lb)
    by_cl = (qcl[None, :] == np.arange(C)[:, None]).astype(float)     # (C, Q): sums the queries per cluster
    tab_o = by_cl @ Pc
    out = {k: np.zeros((len(sel), M)) for k in ("disp_obs", "disp_rep")}
    out.update({k: np.zeros(len(sel)) for k in ("cp_obs", "cp_rep", "cp_rep_design")})
    out["tab_rep"] = np.zeros((len(sel), C, K))
    out["tab_obs"] = tab_o
    out["ipf_residual"], out["ipf_rounds"] = resid, rounds
    out["joint_status"] = lim["status"]
    out["no_joint"] = lim["status"] == NO_JOINT
    out["no_joint_share"] = out["no_joint"].reshape(len(sel), M, C).mean((0, 2))
    for i in range(len(sel)):
        E = n[:, None] * pa_all[i][cell]
        rep, rep_pos = design_replicate(gen, a[i], b[i], kap, data, plan, offsets.get(i))
        out["disp_obs"][i] = np.bincount(qllm, weights=((T - E) ** 2 / E).sum(1), minlength=M)
        out["disp_rep"][i] = np.bincount(qllm, weights=((rep - E) ** 2 / E).sum(1), minlength=M)
        Eb = n[:, None] * pb_all[i][cell]
        repb = _polya(gen, pb_all[i][cell], lam, n)
        tab_E, tab_r, tab_d = by_cl @ Eb, by_cl @ repb, by_cl @ rep_pos
        out["cp_obs"][i] = ((tab_o - tab_E) ** 2 / tab_E).sum()
        out["cp_rep"][i] = ((tab_r - tab_E) ** 2 / tab_E).sum()
        out["cp_rep_design"][i] = ((tab_d - tab_E) ** 2 / tab_E).sum()
        out["tab_rep"][i] = tab_r
    return out
