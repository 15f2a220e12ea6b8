"""The PyMC model of a design for every variant, and the map from its free parameters to the effects.

Terms (see ``docs/bayes.md``): API effects ``alpha[m, c, :] = mu[c, :] + LLM deviations``; position
effects ``beta[m, :] = beta_bar + LLM deviations`` (v1) or, with per-cluster deviations,
``beta[m, c, :] = beta[m, :] + delta[m, c, :]``; query effects ``eta[m, c, q, :]`` shared by every
ordering and run of a query; and a multinomial per (LLM, cluster, ordering) or a Dirichlet-multinomial
per prompt (LLM, cluster, query, ordering) over its repeated attempts.
"""

from __future__ import annotations

from typing import cast

import numpy as np

from ._common import _NEG, _basis, _zerosum_extend
from ._design import _Design


def _embedding(refs, k):
    """0/1 tensor E[..., f, j] sending free coordinate f to tool j, skipping the reference tool ``refs``."""
    refs = np.asarray(refs)
    e = np.zeros(refs.shape + (k - 1, k))
    for idx in np.ndindex(refs.shape):
        others = [j for j in range(k) if j != refs[idx]]
        e[idx + (np.arange(k - 1), others)] = 1.0
    return e


def _pooled_normal_logp(u, sigma, s_mean, M, n_coord, pt):
    """log p(u) of effects u (M, G, F) in orthonormal zero-sum coordinates, with the shared mean integrated out.

    Per coordinate (g, f) the M values are ``u[m] = mean + sigma * e[m]`` with ``mean ~ N(0, s_mean^2)``:
    jointly ``N(0, sigma^2 I + s_mean^2 J)``. With one LLM (``sigma`` None) it is ``N(0, s_mean^2)``.
    """
    if sigma is None:
        return -(u ** 2).sum() / (2 * s_mean ** 2)
    q1 = (u ** 2).sum(0)
    q2 = u.sum(0) ** 2
    s2, v = s_mean ** 2, sigma ** 2
    quad = (q1 - s2 * q2 / (v + M * s2)).sum() / (2 * v)
    return -quad - n_coord * ((M - 1) * pt.log(sigma) + 0.5 * pt.log(v + M * s2))


def _draw_pooled_mean(effects, sigma, s_mean, gen):
    """One draw of the shared mean given the LLM effects (S, M, G, K) and the scale (S,): Normal-Normal."""
    M = effects.shape[1]
    k = effects.shape[-1]
    H = _basis(k)
    u = effects @ H.T                                                           # (S, M, G, k-1)
    prec = 1.0 / s_mean ** 2 + M / sigma ** 2                                   # (S,)
    mean = u.sum(1) / sigma[:, None, None] ** 2 / prec[:, None, None]
    draw = mean + gen.standard_normal(mean.shape) / np.sqrt(prec)[:, None, None]
    return draw @ H                                                             # (S, G, k)


def _rising_indicators(y, n_max):
    """``A[r, p, i] = 1(y[r, p] > i)`` and ``B[r, i] = 1(n[r] > i)`` for i < n_max (Dirichlet-multinomial)."""
    i = np.arange(n_max)
    A = (y[..., None] > i).astype(float)
    B = (y.sum(-1)[..., None] > i).astype(float)
    return A, B


class _ModelSpec:
    """The PyMC model of a design, and the map from its free parameters to the identified effects.

    The package's variants (v1, v2) use the hooks below as they are; a model extension
    (``analyses/bayes_experimental``: the experimental query models moved out of the package) subclasses
    this class and overrides ``_set_flags``, ``_prompt_setup``, ``_build_alpha``, ``_build_loglik``,
    ``derived`` and the hooks.
    """

    #: the population chooser is a mixture over query classes (``class_probs``, ``randomised_classes``,
    #: ``prompt_probs`` then give its probabilities); never in the package's variants
    query_classes = False

    def __init__(self, design: _Design, priors: dict, parameterization: str, variant=None):
        from ._common import MODEL_VARIANTS

        self.design = design
        self.priors = priors
        self.param = parameterization
        self.variant = variant if variant is not None else MODEL_VARIANTS["v1"]
        self._set_flags()
        self.hier = design.M > 1
        D = design
        tc = D.tool_counts()
        pc = D.position_counts()
        cc = D.cell_counts()
        # K groups: clusters with the same number of tools share tensors
        self.groups = []
        offset = 0
        for k in sorted(set(D.K.tolist())):
            cg = np.flatnonzero(k == D.K)
            pooled = tc[:, cg, :k].sum(0)
            ref_c = pooled.argmax(-1)
            cell = tc[:, cg, :k]
            ref_mc = np.where(cc[:, cg] > 0, cell.argmax(-1), ref_c[None, :])
            if not self.hier:
                ref_c = ref_mc[0]
            self.groups.append({"k": int(k), "clusters": cg, "ref_c": ref_c, "ref_mc": ref_mc, "offset": offset,
                                "E_a": _embedding(ref_mc, k)})
            offset += D.M * len(cg) * k
        self.n_alpha = offset
        P = D.P
        self.ref_b = int(pc.sum(0).argmax())
        self.ref_m = np.where(pc.sum(1) > 0, pc.argmax(1), self.ref_b)
        if not self.hier:
            self.ref_b = int(self.ref_m[0])
        self.E_b = _embedding(self.ref_m, P)
        if self.cp:
            cpc = D.cell_position_counts()
            self.ref_mc_b = np.where(cc > 0, cpc.argmax(-1), self.ref_m[:, None])
            self.E_bc = _embedding(self.ref_mc_b, P)                           # (M, C, P-1, P)
        # row-level gather indices into the flat alpha / beta vectors
        R = len(D.y)
        G = np.zeros((R, P), dtype=np.int64)
        grp_of = {int(c): g for g in self.groups for c in g["clusters"]}
        local = {int(c): i for g in self.groups for i, c in enumerate(g["clusters"])}
        for r in range(R):
            g = grp_of[int(D.row_cluster[r])]
            base = g["offset"] + (D.row_llm[r] * len(g["clusters"]) + local[int(D.row_cluster[r])]) * g["k"]
            L = D.row_len[r]
            G[r, :L] = base + D.row_tools[r, :L]
        mask = D.row_tools >= 0
        self.G = G
        if self.cp:
            beta_row = (D.row_llm * D.C + D.row_cluster)[:, None] * P
        else:
            beta_row = D.row_llm[:, None] * P
        self.B = np.where(mask, beta_row + np.arange(P)[None, :], 0)
        self.neg = np.where(mask, 0.0, _NEG)
        self.a_cnt = np.bincount(G[mask], weights=D.y[mask], minlength=self.n_alpha)
        self.b_cnt = np.bincount(self.B[mask], weights=D.y[mask], minlength=self.B.max() + 1)
        self.n = D.n
        if self.dm or self.qe:
            if D.prompts is None:
                raise ValueError("this model variant needs per-prompt counts (the log's rows)")
            self._prompt_setup()

    def _set_flags(self):
        """The terms of the variant (an extension adds its own flags here)."""
        self.cp = self.variant.cluster_position
        self.dm = self.variant.dirichlet
        self.qe = self.variant.query_effects

    def _prompt_setup(self):
        D = self.design
        pr = D.prompts
        P = D.P
        self.n_rep = max(pr.max_repeats, 1)
        # the Dirichlet-multinomial depends on a prompt only through 1(y > i): add them up per row
        A, B = _rising_indicators(pr.y, self.n_rep)
        self.A = np.zeros((len(D.y), P, self.n_rep))
        self.Bn = np.zeros((len(D.y), self.n_rep))
        np.add.at(self.A, pr.row, A)
        np.add.at(self.Bn, pr.row, B)
        self.row_kappa = D.row_llm * D.C + D.row_cluster

    # -- building --------------------------------------------------------------------------------
    def build(self):
        import pymc as pm
        import pytensor.tensor as pt

        centred = self.param == "centered"
        with pm.Model() as model:
            alpha_flat = self._build_alpha(pm, pt, centred)
            beta_flat = self._build_beta(pm, pt, centred)
            self._build_loglik(pm, pt, alpha_flat, beta_flat)
        return model

    def _build_alpha(self, pm, pt, centred):
        """The API effects (flat): per K-group of clusters, pooled across LLMs around ``mu``."""
        D, pr = self.design, self.priors
        M = D.M
        alphas = []
        sa = pm.HalfNormal("sigma_alpha", pr["sigma_alpha_sd"]) if self.hier else None
        for g in self.groups:
            k, ng = g["k"], len(g["clusters"])
            sfx = f"_k{k}"
            if centred:
                # each cell in its own reference coding (its most chosen tool = 0); the prior is put on
                # the orthonormal zero-sum coordinates u, with mu integrated out analytically
                a_f = pm.Flat("alpha_free" + sfx, shape=(M, ng, k - 1))
                e_a = pm.Data("embed_alpha" + sfx, g["E_a"])
                alpha = (a_f[..., None] * e_a).sum(-2)                                # (M, ng, k)
                u = (alpha[..., None, :] * _basis(k)).sum(-1)                         # (M, ng, k-1)
                pm.Potential("alpha_prior" + sfx, _pooled_normal_logp(u, sa, pr["mu_sd"], M, ng * (k - 1), pt))
            else:
                mu_f = pm.Normal("mu_free" + sfx, 0.0, pr["mu_sd"], shape=(ng, k - 1))
                mu = _zerosum_extend(mu_f, pt)
                if self.hier:
                    z = pm.Normal("z_alpha" + sfx, 0.0, 1.0, shape=(M, ng, k - 1))
                    alpha = mu[None] + sa * _zerosum_extend(z, pt)
                else:
                    alpha = mu[None]
            alphas.append(alpha.reshape((-1,)))
        return alphas[0] if len(alphas) == 1 else pt.concatenate(alphas)

    def _build_loglik(self, pm, pt, alpha_flat, beta_flat):
        """The likelihood: a multinomial per design row (v1) or a Dirichlet-multinomial per prompt (v2)."""
        if not self.dm:
            # multinomial log-likelihood (without the constant coefficient): the linear part from
            # sufficient statistics, the normaliser from one gather per (row, position)
            # (data as pm.Data: a second design of the same shapes reuses the compiled model)
            G = pm.Data("gather_alpha", self.G)
            B = pm.Data("gather_beta", self.B)
            logits = alpha_flat[G] + beta_flat[B] + pm.Data("pad", self.neg)
            lse = pt.logsumexp(logits, axis=1)
            pm.Potential("loglik", pt.dot(pm.Data("alpha_counts", self.a_cnt), alpha_flat)
                         + pt.dot(pm.Data("beta_counts", self.b_cnt), beta_flat)
                         - pt.dot(pm.Data("row_totals", self.n), lse))
            return
        logits = (alpha_flat[pm.Data("gather_alpha", self.G)] + beta_flat[pm.Data("gather_beta", self.B)]
                  + pm.Data("pad", self.neg))
        logp = logits - pt.logsumexp(logits, axis=1, keepdims=True)
        self._dm_potential(pm, pt, logp)

    def _dm_potential(self, pm, pt, logp):
        """Dirichlet-multinomial with concentration kappa[m, c] * p: the rising factorials
        sum_p sum_{i < y_p} log(kappa p_p + i) - sum_{i < n} log(kappa + i)."""
        t = self._kappa(pm, pt)
        lk = t[pm.Data("row_kappa", self.row_kappa)][:, None]                    # (rows, 1)
        x = lk + logp                                                             # log(kappa p)
        A = pm.Data("dm_first", self.A)
        Bn = pm.Data("dm_total", self.Bn)
        ll = (A[:, :, 0] * x).sum()
        for i in range(1, self.n_rep):
            ll = ll + (A[:, :, i] * pt.logaddexp(np.log(i), x)).sum()
        kap = pt.exp(lk[:, 0])
        ll = ll - (Bn[:, 0] * lk[:, 0]).sum()
        for i in range(1, self.n_rep):
            ll = ll - (Bn[:, i] * pt.log(kap + i)).sum()
        pm.Potential("loglik", ll)

    def _build_beta(self, pm, pt, centred):
        D, pr = self.design, self.priors
        M, C, P = D.M, D.C, D.P
        sb = pm.HalfNormal("sigma_beta", pr["sigma_beta_sd"]) if self.hier else None
        s_bb = pr["beta_bar_sd"]
        if not self.cp:
            if centred:
                b_f = pm.Flat("beta_free", shape=(M, P - 1))
                beta = (b_f[..., None] * pm.Data("embed_beta", self.E_b)).sum(-2)     # (M, P)
                u = (beta[..., None, :] * _basis(P)).sum(-1)
                pm.Potential("beta_prior", _pooled_normal_logp(u[:, None, :], sb, s_bb, M, P - 1, pt))
            else:
                beta = self._noncentred_beta(pm, pt, sb)
            return beta.reshape((-1,))
        sd = pm.HalfNormal("sigma_delta", pr["sigma_delta_sd"])
        if centred:
            # each (LLM, cluster) cell in its own reference coding; the LLM-level effects v (orthonormal
            # coordinates) are sampled, beta_bar is integrated out of them as in v1
            v = pm.Flat("beta_llm_free", shape=(M, P - 1))
            pm.Potential("beta_prior", _pooled_normal_logp(v[:, None, :], sb, s_bb, M, P - 1, pt))
            bc_f = pm.Flat("beta_cell_free", shape=(M, C, P - 1))
            bc = (bc_f[..., None] * pm.Data("embed_beta_cell", self.E_bc)).sum(-2)   # (M, C, P)
            u = (bc[..., None, :] * _basis(P)).sum(-1)                             # (M, C, P-1)
            dev = u - v[:, None, :]
            pm.Potential("delta_prior", -(dev ** 2).sum() / (2 * sd ** 2) - M * C * (P - 1) * pt.log(sd))
        else:
            beta = self._noncentred_beta(pm, pt, sb)
            z3 = pm.Normal("z_delta", 0.0, 1.0, shape=(M, C, P - 1))
            bc = beta[:, None, :] + sd * _zerosum_extend(z3, pt)
        return bc.reshape((-1,))

    def _noncentred_beta(self, pm, pt, sb):
        """LLM position effects (M, P) = beta_bar + sigma_beta * zero-sum z (beta_bar alone with one LLM)."""
        M, P = self.design.M, self.design.P
        bb = _zerosum_extend(pm.Normal("beta_bar_free", 0.0, self.priors["beta_bar_sd"], shape=(P - 1,)), pt)
        if not self.hier:
            return bb[None]
        z2 = pm.Normal("z_beta", 0.0, 1.0, shape=(M, P - 1))
        return bb[None] + sb * _zerosum_extend(z2, pt)

    def _kappa(self, pm, pt):
        """log kappa[m, c] (flat, m * C + c) with the Beta(rho_a, rho_b) prior on rho = 1 / (1 + kappa)
        (Jacobian included)."""
        t = pm.Flat("log_kappa", shape=(self.design.M * self.design.C,))
        a, b = self.priors["rho_a"], self.priors["rho_b"]
        pm.Potential("kappa_prior", (a * pt.log(pt.sigmoid(-t)) + b * pt.log(pt.sigmoid(t))).sum())
        return t

    def _noncentred_beta_draws(self, get, sb):
        """Draws of (beta_bar, beta) from the non-centred coordinates (the numpy twin of ``_noncentred_beta``)."""
        bb = _zerosum_extend(get("beta_bar_free"), np)
        if not self.hier:
            return bb, bb[:, None]
        return bb, bb[:, None] + sb[:, None, None] * _zerosum_extend(get("z_beta"), np)

    # -- hooks of model extensions (the package's variants: these defaults) -----------------------
    def class_probs(self, post, a, b, rows):
        """Per-class choice probabilities (s, U, P, classes) of the design ``rows`` for draws a:b and the class
        weights (s, U, classes) of their cells (``query_classes`` only)."""
        raise NotImplementedError

    def randomised_classes(self, post, a, b, al, um, uc, cell, k):
        """The query classes of the randomised counterfactual: a list of (API effects (s, U, k), weight (s, U)
        or None) for the units of (LLM ``um``, cluster ``uc``); one class, the API effects, without classes."""
        return [(al, None)]

    def prompt_probs(self, sub, b, gen):
        """Choice probabilities (b, U, P) of a replication of every prompt and their population means, for the
        draws ``sub`` (``query_classes`` only)."""
        raise NotImplementedError

    def replicate_prompts(self, post, draws, p, kappa, gen):
        """Replicated counts (b, U, P) of the prompts, or None: a Dirichlet-multinomial per prompt (Polya urn)."""
        return None

    def fresh_eta(self, post, draws, gen):
        """Query effects (len(draws), Q, Kmax) of new queries from the fitted population (query effects only)."""
        raise NotImplementedError

    def query_loglik(self, post, coef, chunk):
        """(S, Q) per-query log-likelihood of a Dirichlet-multinomial extension, or None (the package's own)."""
        return None

    # -- free parameters -> identified effects (numpy, per draw) -----------------------------------
    def _alpha_draws(self, get, S, sa, gen):
        """Draws of the API effects ``alpha`` (S, M, C, Kmax) and ``mu`` (S, C, Kmax), sum-to-zero, NaN padding."""
        D = self.design
        M, C, Kmax = D.M, D.C, D.Kmax
        alpha = np.full((S, M, C, Kmax), np.nan)
        mu = np.full((S, C, Kmax), np.nan)
        for g in self.groups:
            k, cg, sfx = g["k"], g["clusters"], f"_k{g['k']}"
            if self.param == "centered":
                a_ = np.einsum("smcf,mcfk->smck", get("alpha_free" + sfx), g["E_a"])
                a_ = a_ - a_.mean(-1, keepdims=True)
                m_ = _draw_pooled_mean(a_, sa, self.priors["mu_sd"], gen) if self.hier else a_[:, 0]
            else:
                m_ = _zerosum_extend(get("mu_free" + sfx), np)
                a_ = (m_[:, None]
                      + cast(np.ndarray, sa)[:, None, None, None] * _zerosum_extend(get("z_alpha" + sfx), np)
                      if self.hier else m_[:, None])
            mu[:, cg, :k] = m_ - m_.mean(-1, keepdims=True)
            alpha[:, :, cg, :k] = a_ - a_.mean(-1, keepdims=True)
        return alpha, mu

    def derived(self, posterior, gen) -> dict:
        """``{"alpha": (S, M, C, Kmax), "mu": (S, C, Kmax), "beta": (S, M, P), "beta_bar": (S, P),
        "sigma_alpha": (S,), "sigma_beta": (S,)}``, all sum-to-zero; S = chains x draws, NaN padding.

        With per-cluster position effects also ``beta_cell`` (S, M, C, P), ``delta`` = beta_cell - beta
        and ``sigma_delta``; with the Dirichlet-multinomial ``kappa`` (S, M, C); with query effects
        ``eta`` (S, Q, Kmax, float32) and ``sigma_eta`` (S, M).

        In the centred form ``mu`` and ``beta_bar`` were integrated out of the sampled density;
        each draw gets one exact draw from their conditional posterior given the LLM effects and
        the scale (which does not depend on the data), so the joint draws are posterior draws.
        """
        D = self.design
        nch, ndr = posterior.sizes["chain"], posterior.sizes["draw"]
        S = nch * ndr

        def get(name):
            return np.asarray(posterior[name].values, dtype=float).reshape((S,) + posterior[name].shape[2:])

        M, C = D.M, D.C
        centred = self.param == "centered"
        sa = get("sigma_alpha") if self.hier and "sigma_alpha" in posterior else None
        sb = get("sigma_beta") if self.hier else None
        alpha, mu = self._alpha_draws(get, S, sa, gen)
        out = {"alpha": alpha, "mu": mu, "shape": (nch, ndr)}
        if self.cp:
            sd = get("sigma_delta")
            P = D.P
            if centred:
                beta = get("beta_llm_free") @ _basis(P)                               # (S, M, P)
                bc = np.einsum("smcf,mcfp->smcp", get("beta_cell_free"), self.E_bc)
                bc = bc - bc.mean(-1, keepdims=True)
                bb = (_draw_pooled_mean(beta[:, :, None, :], sb, self.priors["beta_bar_sd"], gen)[:, 0]
                      if self.hier else beta[:, 0])
            else:
                bb, beta = self._noncentred_beta_draws(get, sb)
                bc = beta[:, :, None, :] + sd[:, None, None, None] * _zerosum_extend(get("z_delta"), np)
            beta = beta - beta.mean(-1, keepdims=True)
            bc = bc - bc.mean(-1, keepdims=True)
            out["beta_cell"] = bc
            out["delta"] = bc - beta[:, :, None, :]
            out["sigma_delta"] = sd
        elif centred:
            beta = np.einsum("smf,mfp->smp", get("beta_free"), self.E_b)
            beta = beta - beta.mean(-1, keepdims=True)
            bb = (_draw_pooled_mean(beta[:, :, None, :], sb, self.priors["beta_bar_sd"], gen)[:, 0]
                  if self.hier else beta[:, 0])
        else:
            bb, beta = self._noncentred_beta_draws(get, sb)
        bb = bb - bb.mean(-1, keepdims=True)
        beta = beta - beta.mean(-1, keepdims=True)
        out["beta"] = beta
        out["beta_bar"] = bb
        if self.hier:
            if sa is not None:
                out["sigma_alpha"] = sa
            out["sigma_beta"] = sb
        if self.dm:
            out["kappa"] = np.exp(get("log_kappa")).reshape(S, M, C)
        return out
