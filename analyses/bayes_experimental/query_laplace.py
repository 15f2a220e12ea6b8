"""Query effects integrated out by a Laplace approximation per query (an experimental prototype, not
registered in ``fit_bayes``).

A query ``q`` of LLM ``m`` in cluster ``c`` has effects ``u[q, :] ~ N(0, sigma_eta[m]^2 I)`` on its cluster's
``K`` tools, shared by every ordering and run of the query. Given the main effects, the queries are independent
and each one's integral over its ``K`` effects,

    p(y_q | theta) = int prod_o Multinomial(y_qo | softmax(l_o + u)) N(u | 0, sigma^2 I) du,

is replaced by its Laplace approximation: ``u*`` maximises the (strictly concave) integrand, found by a fixed
number of Newton steps from ``u = 0`` on the (queries x K) array at once, and

    log p(y_q | theta) ~ log p(y_q | u*) + log N(u* | 0, sigma^2 I) + (K / 2) log(2 pi) - 1/2 log det H,

``H = sum_o n_o (diag p_o - p_o p_o') + I / sigma^2`` the negative Hessian at ``u*``. The K x K Cholesky
factorisation is written out element by element, so the same code runs in NumPy (checks, post-processing) and in
PyTensor (inside the sampled log-density, differentiated through the Newton steps).

The module also holds the spike-and-slab part of the prior (an LLM without position effects, a cluster whose
tools have equal worth), marginalised in the likelihood as a two-component mixture per LLM (position) and per
(LLM, cluster) (tools).
"""

from __future__ import annotations

import numpy as np

#: Newton steps from u = 0 (the integrand is strictly log-concave; checked against the exact optimum in the tests).
NEWTON_STEPS = 8
#: largest change of a query effect in one Newton step (logit scale)
MAX_STEP = 2.0


def _cholesky(H, k, xp):
    """Element-wise Cholesky of a batch of k x k matrices given as nested lists ``H[i][j]`` of arrays."""
    L = [[None] * k for _ in range(k)]
    for j in range(k):
        s = H[j][j]
        for t in range(j):
            s = s - L[j][t] * L[j][t]
        L[j][j] = xp.sqrt(s)
        for i in range(j + 1, k):
            s = H[i][j]
            for t in range(j):
                s = s - L[i][t] * L[j][t]
            L[i][j] = s / L[j][j]
    return L


def _chol_solve(L, g, k):
    """Solve ``L L' x = g`` for a batch (``g`` a list of k arrays)."""
    z = [None] * k
    for i in range(k):
        s = g[i]
        for t in range(i):
            s = s - L[i][t] * z[t]
        z[i] = s / L[i][i]
    x = [None] * k
    for i in reversed(range(k)):
        s = z[i]
        for t in range(i + 1, k):
            s = s - L[t][i] * x[t]
        x[i] = s / L[i][i]
    return x


def _neg_hessian(p, n, s2inv, k):
    """``H[i][j] = sum_o n_o (1(i = j) p_oi - p_oi p_oj) + 1(i = j) / sigma^2`` as nested lists."""
    npv = n[..., None] * p
    H = [[None] * k for _ in range(k)]
    for i in range(k):
        for j in range(i + 1):
            h = -(npv[..., i] * p[..., j]).sum(axis=-1)
            if i == j:
                h = h + npv[..., i].sum(axis=-1) + s2inv
            H[i][j] = H[j][i] = h
    return H


def _softmax(z, xp):
    z = z - z.max(axis=-1, keepdims=True)
    e = xp.exp(z)
    s = e.sum(axis=-1, keepdims=True)
    return e / s, z - xp.log(s)


def laplace_query_marginal(lt, y, n, s2inv, xp=np, steps=NEWTON_STEPS, stop=None):
    """Laplace approximation of every query's log-likelihood with its effects integrated out.

    Parameters
    ----------
    lt : array (..., Q, O, K)
        Logits of the K tools for each of a query's O prompts (orderings), without the query effects;
        a tool not shown gets a large negative logit.
    y : array (Q, O, K)
        Choices of each tool per prompt (padding prompts: zeros).
    n : array (Q, O)
        Attempts per prompt.
    s2inv : array broadcastable to (..., Q)
        ``1 / sigma_eta^2`` of each query.
    xp : module
        ``numpy`` or ``pytensor.tensor``.
    steps : int
        Newton steps from ``u = 0`` (the last one undamped).
    stop : callable, optional
        A stop-gradient (PyTensor's ``disconnected_grad``): the gradient then flows only through the last step.

    Returns
    -------
    (log_marginal (..., Q), u_star (..., Q, K), cholesky factor of H (nested lists))
        ``log_marginal`` omits the multinomial coefficients (constant in the parameters).

    Examples
    --------
    One query shown twice (5 attempts), sigma = 1; a grid integral of the same integrand gives -5.178:

    >>> lt = np.zeros((1, 2, 3)); y = np.array([[[3.0, 0, 0], [2, 1, 0]]]); n = y.sum(-1)
    >>> lm, u, _ = laplace_query_marginal(lt, y, n, np.array([1.0]))
    >>> bool(u[0, 0] > 0 > u[0, 2]), round(float(lm[0]), 3)
    (True, -5.207)
    >>> float(laplace_query_marginal(lt, 0 * y, 0 * n, np.array([1.0]))[0][0])   # no data: the prior's integral
    0.0
    """
    k = y.shape[-1]
    u = xp.zeros_like(lt[..., 0, :])
    for i in range(steps):
        if i == steps - 1 and stop is not None:
            # the optimum's value without its derivatives, then one full Newton step from it: at the optimum
            # (g = 0) that step has the implicit-function derivative du*/dtheta = H^-1 dg/dtheta, so the
            # log-density and its gradient are those of the converged optimum, without differentiating
            # through the earlier steps
            u = stop(u)
        p, _lp = _softmax(lt + u[..., None, :], xp)
        g = (y - n[..., None] * p).sum(axis=-2) - u * s2inv[..., None]
        L = _cholesky(_neg_hessian(p, n, s2inv, k), k, xp)
        step = xp.stack(_chol_solve(L, [g[..., i] for i in range(k)], k), axis=-1)
        if i < steps - 1:
            # damped: no coordinate moves by more than MAX_STEP per step (pure Newton can overshoot when a
            # query always gets one tool and sigma is large)
            step = step / xp.maximum(xp.abs(step).max(axis=-1, keepdims=True) / MAX_STEP, 1.0)
        u = u + step
    p, lp = _softmax(lt + u[..., None, :], xp)
    L = _cholesky(_neg_hessian(p, n, s2inv, k), k, xp)
    logdet = 2.0 * sum(xp.log(L[i][i]) for i in range(k))
    ll = (y * lp).sum(axis=(-1, -2))
    lm = ll - 0.5 * s2inv * (u * u).sum(axis=-1) + 0.5 * k * xp.log(s2inv) - 0.5 * logdet
    return lm, u, L


# ---------------------------------------------------------------------------------------------
# the model
#: prior probability that an LLM has no position effects, and that a cluster's tools have equal worth for an LLM
SPIKE_PRIORS = {"p_no_position": 0.5, "p_equal_worth": 0.5}
#: Monte Carlo nodes (before the K cyclic shifts and the sign flip) for a new query's chooser
POPULATION_NODES = 16


def _dense_queries(design):
    """Per group of clusters with K tools: the queries' prompts laid out densely (queries x orderings x tools).

    Returns a list of dicts with ``k``, ``rowmap`` (Qg, O) design row of each prompt (padding: the pad row R),
    ``Y`` (Qg, O, k) choices of each tool, ``N`` (Qg, O), ``qllm`` (Qg,), ``qcell`` (Qg,) = llm * C + cluster,
    ``queries`` (global indices).
    """
    D = design
    pr = D.prompts
    R = len(D.y)
    groups = []
    tool_of = D.row_tools                                                          # (R, P), -1 = not shown
    for k in sorted(set(D.K.tolist())):
        qs = np.flatnonzero(D.K[pr.query_cluster] == k)
        local = np.full(pr.Q, -1, dtype=np.int64)
        local[qs] = np.arange(len(qs))
        sel = np.flatnonzero(local[pr.query] >= 0)
        qloc = local[pr.query[sel]]
        order = np.lexsort((pr.row[sel], qloc))
        sel, qloc = sel[order], qloc[order]
        counts = np.bincount(qloc, minlength=len(qs))
        start = np.r_[0, np.cumsum(counts)[:-1]]
        slot = np.arange(len(sel)) - start[qloc]
        O = max(int(counts.max()) if len(counts) else 1, 1)
        rowmap = np.full((len(qs), O), R, dtype=np.int64)
        rowmap[qloc, slot] = pr.row[sel]
        Y = np.zeros((len(qs), O, k))
        for p in range(D.P):
            t = tool_of[pr.row[sel], p]
            ok = t >= 0
            np.add.at(Y, (qloc[ok], slot[ok], t[ok]), pr.y[sel[ok], p])
        groups.append({"k": int(k), "queries": qs, "rowmap": rowmap, "Y": Y, "N": Y.sum(-1),
                       "qllm": pr.query_llm[qs], "qcell": pr.query_llm[qs] * D.C + pr.query_cluster[qs]})
    return groups


def _row_tool_index(design):
    """(R, Kmax) position of each tool in each design row (-1: not shown)."""
    D = design
    pos = np.full((len(D.y), D.Kmax), -1, dtype=np.int64)
    r, p = np.nonzero(D.row_tools >= 0)
    pos[r, D.row_tools[r, p]] = p
    return pos


class _LaplaceSpec:
    """The query-Laplace model of a design: main effects, optional per-(LLM, cluster) position deviations,
    query effects integrated out per query, and the spike-and-slab mixture over "no position effect" (per LLM)
    and "equal worth" (per LLM and cluster)."""

    dm = False
    qe = True

    def __init__(self, design, priors, cluster_position=True, steps=NEWTON_STEPS):
        if design.prompts is None:
            raise ValueError("the query-Laplace model needs per-prompt counts (the log's rows)")
        self.design = design
        self.priors = priors
        self.cp = cluster_position
        self.steps = steps
        self.hier = design.M > 1
        self.dense = _dense_queries(design)
        self.qgroups = [{"k": g["k"], "queries": g["queries"], "llm": g["qllm"]} for g in self.dense]
        self.tool_pos = _row_tool_index(design)

    def fresh_eta(self, post, draws, gen):
        """Query effects of new queries from the fitted population (len(draws), Q, Kmax), zero-sum projected (the
        softmax ignores a common shift): ``sigma_eta[m] * (z - mean(z))``, z iid standard normal."""
        from toolbias_stats.models.bayes._common import _zerosum_extend

        D = self.design
        eta = np.zeros((len(draws), D.prompts.Q, D.Kmax))
        for g in self.qgroups:
            k = g["k"]
            z = gen.standard_normal((len(draws), len(g["queries"]), k - 1))
            eta[:, g["queries"], :k] = post["sigma_eta"][draws][:, g["llm"]][..., None] * _zerosum_extend(z, np)
        return eta

    def _effects(self, pm, pt):
        """alpha (M, C, Kmax) with zero padding, and the position effects of every (row, tool): (R, Kmax)."""
        D = self.design
        pr = self.priors
        M, C, P, Kmax = D.M, D.C, D.P, D.Kmax
        sa = pm.HalfNormal("sigma_alpha", pr["sigma_alpha_sd"]) if self.hier else None
        sb = pm.HalfNormal("sigma_beta", pr["sigma_beta_sd"]) if self.hier else None
        alpha = pt.zeros((M, C, Kmax))
        for k in sorted(set(D.K.tolist())):
            cg = np.flatnonzero(k == D.K)
            mu = pm.ZeroSumNormal(f"mu_k{k}", pr["mu_sd"], shape=(len(cg), k))
            a = mu[None] + sa * pm.ZeroSumNormal(f"z_alpha_k{k}", 1.0, shape=(M, len(cg), k)) if self.hier \
                else mu[None]
            alpha = pt.set_subtensor(alpha[:, cg, :k], a)
        bb = pm.ZeroSumNormal("beta_bar", pr["beta_bar_sd"], shape=(P,))
        beta = bb[None] + sb * pm.ZeroSumNormal("z_beta", 1.0, shape=(M, P)) if self.hier else bb[None]
        if self.cp:
            sd = pm.HalfNormal("sigma_delta", pr["sigma_delta_sd"])
            beta_c = beta[:, None, :] + sd * pm.ZeroSumNormal("z_delta", 1.0, shape=(M, C, P))
            bflat, bidx = beta_c.reshape((-1,)), (D.row_llm * C + D.row_cluster)[:, None] * P
        else:
            bflat, bidx = beta.reshape((-1,)), D.row_llm[:, None] * P
        shown = self.tool_pos >= 0
        b_rows = pt.where(shown, bflat[np.where(shown, bidx + self.tool_pos, 0)], 0.0)
        a_rows = alpha.reshape((-1,))[(D.row_llm * C + D.row_cluster)[:, None] * Kmax + np.arange(Kmax)[None, :]]
        return a_rows, b_rows, np.where(shown, 0.0, -1.0e4)

    def build(self):
        import pymc as pm
        import pytensor.tensor as pt
        from pytensor.gradient import disconnected_grad

        D = self.design
        M, C = D.M, D.C
        with pm.Model() as model:
            a_rows, b_rows, pad = self._effects(pm, pt)
            se = pm.HalfNormal("sigma_eta", self.priors["sigma_eta_sd"], shape=(M,))
            s2inv = 1.0 / se ** 2
            on = np.array([0.0, 1.0])
            # logits of every (config, row, tool): config (a, b) = (tool effects on?, position effects on?)
            lt = on[:, None, None, None] * a_rows[None, None] + on[None, :, None, None] * b_rows[None, None] + pad
            lt = pt.concatenate([lt, pt.zeros((2, 2, 1, D.Kmax))], axis=2)          # + the padding row
            cell_ll = pt.zeros((2, 2, M * C))
            for g in self.dense:
                k = g["k"]
                ltg = lt[:, :, g["rowmap"], :k]                                      # (2, 2, Qg, O, k)
                lm, _, _ = laplace_query_marginal(ltg, g["Y"], g["N"], s2inv[g["qllm"]], xp=pt, steps=self.steps,
                                                  stop=disconnected_grad)
                onehot = np.zeros((len(g["queries"]), M * C))
                onehot[np.arange(len(g["queries"])), g["qcell"]] = 1.0
                cell_ll = cell_ll + pt.tensordot(lm, onehot, axes=[[2], [0]])
            cell_ll = pm.Deterministic("cell_ll", cell_ll.reshape((2, 2, M, C)))
            pa, pb = self.priors["p_equal_worth"], self.priors["p_no_position"]
            lpa = np.log([pa, 1 - pa])[:, None, None, None]
            lpb = np.log([pb, 1 - pb])[:, None]
            per_b = pt.logsumexp(lpa + cell_ll, axis=0).sum(-1)                    # (2, M)
            pm.Potential("loglik", pt.logsumexp(lpb + per_b, axis=0).sum())
        return model


# ---------------------------------------------------------------------------------------------
# after sampling
def population_nodes(k, base=POPULATION_NODES, seed=20261128):
    """Standard-normal nodes (n, k) closed under the k cyclic shifts of the tools and under sign: an equal-worth
    cluster then has exactly uniform tool probabilities under balanced orderings.

    Examples
    --------
    >>> z = population_nodes(3, base=2)
    >>> z.shape, float(abs(z.sum(0)).max()) < 1e-12
    ((12, 3), True)
    """
    z = np.random.default_rng(seed).standard_normal((base, k))
    z = np.concatenate([np.roll(z, s, axis=1) for s in range(k)])
    return np.concatenate([z, -z])


def population_implied(alpha, beta_cell, sigma_eta, design, nodes=POPULATION_NODES, chunk=64):
    """Implied delta_API and delta_pos (S, M, C) of a new query's chooser under the logged orderings.

    The choice probabilities of every design row are averaged over the population of query effects
    (``u ~ N(0, sigma_eta[m]^2 I)``, Monte Carlo nodes closed under cyclic shifts and sign) and over the row's
    logged orderings (weighted by their valid choices); delta = TV to uniform of the tool / position
    probabilities. ``alpha`` (S, M, C, Kmax), ``beta_cell`` (S, M, C, P), ``sigma_eta`` (S, M). Without
    tool effects (alpha = 0) and balanced orderings delta_API is 0; without position effects delta_pos is 0
    (up to rounding), whatever the query effects.
    """
    D = design
    S = alpha.shape[0]
    M, C, P, Kmax = D.M, D.C, D.P, D.Kmax
    mask = D.row_tools >= 0
    tools = np.where(mask, D.row_tools, 0)
    cells = D.row_llm * C + D.row_cluster
    w = D.n / np.maximum(np.bincount(cells, weights=D.n, minlength=M * C)[cells], 1e-300)
    api = np.full((S, M * C), np.nan)
    pos = np.full((S, M * C), np.nan)
    zs = {k: population_nodes(k, nodes) for k in set(D.K.tolist())}
    for a in range(0, S, chunk):
        al = alpha[a:a + chunk].reshape(-1, M * C, Kmax)
        bc = beta_cell[a:a + chunk].reshape(-1, M * C, P)
        s = al.shape[0]
        for k, z in zs.items():
            rows = np.flatnonzero(D.K[D.row_cluster] == k)
            if not len(rows):
                continue
            tr = tools[rows]
            logit = al[:, cells[rows][:, None], tr] + bc[:, cells[rows]]                     # (s, r, P)
            logit = np.where(mask[rows][None], logit, -np.inf)
            u = sigma_eta[a:a + s][:, D.row_llm[rows], None, None] * z[None, None, :, :]    # (s, r, n, k)
            lg = logit[:, :, None, :] + np.take_along_axis(u, np.broadcast_to(tr[None, :, None, :], (s, len(rows),
                                                                              z.shape[0], P)) % k, 3)
            lg = lg - lg.max(-1, keepdims=True)
            e = np.exp(lg)
            p = (e / e.sum(-1, keepdims=True)).mean(2) * w[rows][None, :, None]                 # (s, r, P)
            pt_ = np.zeros((s, M * C, Kmax))
            pp_ = np.zeros((s, M * C, P))
            for j in range(P):
                np.add.at(pt_, (slice(None), cells[rows], tr[:, j]), np.where(mask[rows, j], p[:, :, j], 0.0))
                np.add.at(pp_, (slice(None), cells[rows], j), p[:, :, j])
            cg = np.unique(cells[rows])
            api[a:a + s, cg] = 0.5 * np.abs(pt_[:, cg, :k] - 1.0 / k).sum(-1)
            L = D.row_len[rows]
            if L.min() == L.max():
                pos[a:a + s, cg] = 0.5 * np.abs(pp_[:, cg, :L[0]] - 1.0 / L[0]).sum(-1)
    return api.reshape(S, M, C), pos.reshape(S, M, C)


def _slab_draws(spec, posterior):
    """The sampled (slab) effects per draw: alpha (S, M, C, Kmax), mu (S, C, Kmax), beta (S, M, P), beta_bar,
    beta_cell (S, M, C, P), the scales and the per-configuration cell log-likelihoods (S, 2, 2, M, C)."""
    from toolbias_stats.models.bayes._common import _zerosum_extend  # noqa: F401  (the posterior's ZeroSumNormals are already extended)

    D = spec.design
    nch, ndr = posterior.sizes["chain"], posterior.sizes["draw"]
    S = nch * ndr

    def get(name):
        return np.asarray(posterior[name].values, dtype=float).reshape((S,) + posterior[name].shape[2:])

    M, C, Kmax = D.M, D.C, D.Kmax
    alpha = np.full((S, M, C, Kmax), np.nan)
    mu = np.full((S, C, Kmax), np.nan)
    sa = get("sigma_alpha") if spec.hier else None
    for k in sorted(set(D.K.tolist())):
        cg = np.flatnonzero(k == D.K)
        m_ = get(f"mu_k{k}")
        mu[:, cg, :k] = m_
        alpha[:, :, cg, :k] = m_[:, None] + sa[:, None, None, None] * get(f"z_alpha_k{k}") if spec.hier \
            else m_[:, None]
    bb = get("beta_bar")
    beta = bb[:, None] + get("sigma_beta")[:, None, None] * get("z_beta") if spec.hier else bb[:, None]
    out = {"alpha": alpha, "mu": mu, "beta": beta, "beta_bar": bb, "shape": (nch, ndr),
           "sigma_eta": get("sigma_eta"), "cell_ll": get("cell_ll")}
    if spec.hier:
        out["sigma_alpha"], out["sigma_beta"] = sa, get("sigma_beta")
    if spec.cp:
        out["beta_cell"] = beta[:, :, None, :] + get("sigma_delta")[:, None, None, None] * get("z_delta")
        out["delta"] = out["beta_cell"] - beta[:, :, None, :]
        out["sigma_delta"] = get("sigma_delta")
    return out


def _spike_draws(post, priors, seen, gen):
    """Draw the spike indicators given each draw (their exact conditional posterior) and apply them.

    ``b[s, m] = 1``: LLM m has position effects; ``a[s, m, c] = 1``: its tools differ in worth in cluster c.
    Returns the effective effects (alpha * a, beta * b, ...) and the Rao-Blackwellised posterior probabilities
    ``p_no_position`` (M,) and ``p_equal_worth`` (M, C) (cells without data: NaN).
    """
    from scipy.special import logsumexp

    ll = post["cell_ll"]                                                               # (S, a, b, M, C)
    pa, pb = priors["p_equal_worth"], priors["p_no_position"]
    lpa = np.log([pa, 1 - pa])[None, :, None, None, None]
    lpb = np.log([pb, 1 - pb])[None, :, None]
    per_b = logsumexp(lpa + ll, axis=1).sum(-1)                                        # (S, b, M)
    lb = lpb + per_b
    prob_b1 = np.exp(lb[:, 1] - logsumexp(lb, axis=1))                                 # (S, M)
    b = (gen.random(prob_b1.shape) < prob_b1).astype(float)
    la = lpa[:, :, 0] + np.take_along_axis(ll, b.astype(np.int64)[:, None, None, :, None], 2)[:, :, 0]
    prob_a1 = np.exp(la[:, 1] - logsumexp(la, axis=1))                                 # (S, M, C)
    a = (gen.random(prob_a1.shape) < prob_a1).astype(float)
    eff = dict(post)
    eff["alpha"] = post["alpha"] * a[..., None]
    eff["beta"] = post["beta"] * b[..., None]
    if "beta_cell" in post:
        eff["beta_cell"] = post["beta_cell"] * b[:, :, None, None]
        eff["delta"] = post["delta"] * b[:, :, None, None]
    p_ew = np.where(seen, (1 - prob_a1).mean(0), np.nan)
    return eff, (1 - prob_b1).mean(0), p_ew, a, b


def fit_query_laplace(log, *, by="model", draws=1000, tune=1000, chains=4, cores=None, sampler="pymc",
                      target_accept=0.8, priors=None, margin=0.02, cluster_position=True, mismatch="exclude",
                      rng=None, ppc=True, implied_draws=1000):
    """Fit the query-Laplace model and return its draws and checks (a dict; ``fit_bayes`` wraps it).

    ``margin``: the posterior probability that each implied delta is below it is reported.
    """
    import os

    from toolbias_stats._validation import check_rng
    from toolbias_stats.models.bayes._common import ALL_PRIORS, MODEL_VARIANTS
    from toolbias_stats.models.bayes._design import _attach_prompts, _design
    from toolbias_stats.models.bayes._fit import _counts_and_rows
    from toolbias_stats.models.bayes._sampling import _diagnostics, _sample
    from toolbias_stats.models.bayes._summaries import _ppc, _thin

    gen = check_rng(rng)
    counts, rows = _counts_and_rows(log, MODEL_VARIANTS["v2"])
    by = [by] if isinstance(by, str) else list(by)
    D = _attach_prompts(_design(counts, by, mismatch), rows, by, mismatch)
    pri = {**ALL_PRIORS, **SPIKE_PRIORS, **(priors or {})}
    spec = _LaplaceSpec(D, pri, cluster_position=cluster_position)
    seed = int(gen.integers(0, 2**31 - 1))
    cores = cores or min(chains, os.cpu_count() or 1)
    raw = _sample(spec, sampler=sampler, draws=draws, tune=tune, chains=chains, cores=cores, seed=seed,
                  target_accept=target_accept, progress=False)
    slab = _slab_draws(spec, raw.posterior)
    diag = _diagnostics(slab, raw.sample_stats, D)
    seen = D.cell_counts() > 0
    eff, p_np, p_ew, _a, _b = _spike_draws(slab, pri, seen, gen)
    sub, _sel = _thin(eff, implied_draws)
    bc = sub["beta_cell"] if "beta_cell" in sub else np.repeat(sub["beta"][:, :, None, :], D.C, 2)
    api, pos = population_implied(sub["alpha"], bc, sub["sigma_eta"], D)
    out = {"design": D, "spec": spec, "slab": slab, "raw": raw, "diagnostics": diag,
           "post": {"alpha": sub["alpha"], "beta": sub["beta"], "delta_api_cell": api, "delta_pos_cell": pos,
                    "delta_api": np.nanmean(api, -1), "delta_pos": np.nanmean(pos, -1),
                    "p_no_position": p_np, "p_equal_worth": p_ew, "sigma_eta": sub["sigma_eta"]},
           "margin": margin, "effective": eff}
    out["post"]["p_below_margin_api"] = (out["post"]["delta_api"] < margin).mean(0)
    out["post"]["p_below_margin_pos"] = (out["post"]["delta_pos"] < margin).mean(0)
    if ppc:
        check, _, _ = _ppc(eff, spec, gen, 0.94)
        out["ppc"] = check
        diag["ppc_cluster_position"] = check.p_value
        diag["ppc_dispersion"] = check.p_value_dispersion
    return out
