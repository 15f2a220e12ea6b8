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

from . import _mixture_kernel as _mk
from ._common import _NEG, _basis, _zerosum_extend
from ._design import _Design, _Prompts


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


def _urn_order(prompts):
    """The prompts in the query urn's order: by query, then design row (the log's orderings sorted)."""
    return np.lexsort((prompts.row, prompts.query))


def _urn_terms(prompts, row_tools):
    """The query-level urn's terms, in the urn's order (:func:`_urn_order`).

    Returns ``(u, p, c_same, c_other)`` per attempt (its prompt, chosen position, the earlier attempts of
    the same prompt and of the query's other prompts that chose the same tool) and ``(u_d, n_same,
    n_other)`` per attempt for the normaliser (earlier attempts of the same prompt and of the query's
    other prompts). Attempt contributes ``log(kappa p[pos] + c_same + gamma c_other) - log(kappa +
    n_same + gamma n_other)``. Within a prompt the runs share the chooser, so the order of its runs does
    not matter: each chosen position's runs take ``c_same = 0, 1, ...`` after the others.
    """
    y = prompts.y
    order = _urn_order(prompts)
    tools = row_tools[prompts.row]                                               # (U, P), -1 = not shown
    kmax = int(tools.max()) + 1
    T = np.zeros((len(y), kmax))                                                 # choices per prompt and tool
    u, p = np.nonzero(y > 0)
    np.add.at(T, (u, tools[u, p]), y[u, p])
    To = T[order]
    cum = np.cumsum(To, 0) - To                                                  # earlier prompts, all queries
    q_o = prompts.query[order]
    first = np.r_[True, q_o[1:] != q_o[:-1]]
    start = np.maximum.accumulate(np.where(first, np.arange(len(q_o)), 0))
    before = np.empty_like(T)
    before[order] = cum - cum[start]                                             # earlier prompts, same query
    n_before = before.sum(1)
    cat = (lambda x: np.concatenate(x).astype(np.int64)) if y.size else (lambda x: np.zeros(0, np.int64))
    out_u, out_p, out_s, out_o = [], [], [], []
    d_u, d_s, d_o = [], [], []
    for j in range(int(y.max()) if y.size else 0):
        uu, pp = np.nonzero(y > j)
        out_u.append(uu)
        out_p.append(pp)
        out_s.append(np.full(len(uu), j))
        out_o.append(before[uu, tools[uu, pp]])
    for j in range(int(prompts.n.max()) if y.size else 0):
        uu = np.flatnonzero(prompts.n > j)
        d_u.append(uu)
        d_s.append(np.full(len(uu), j))
        d_o.append(n_before[uu])
    return (cat(out_u), cat(out_p), cat(out_s), cat(out_o)), (cat(d_u), cat(d_s), cat(d_o))


def _unique_terms(*cols):
    """Unique rows of the integer columns and the multiplicity of each."""
    keys = np.stack(cols, 1)
    uniq, cnt = np.unique(keys, axis=0, return_counts=True)
    return uniq, cnt.astype(float)


class _ModelSpec:
    """The PyMC model of a design, and the map from its free parameters to the identified effects."""

    def __init__(self, design: _Design, priors: dict, parameterization: str, variant=None):
        from ._common import MODEL_VARIANTS

        self.design = design
        self.priors = priors
        self.param = parameterization
        self.variant = variant if variant is not None else MODEL_VARIANTS["v1"]
        self.cp = self.variant.cluster_position
        self.dm = self.variant.dirichlet
        self.urn = self.variant.query_urn
        self.qe = self.variant.query_effects
        self.shared = self.variant.shared_queries
        self.mix = self.variant.query_mixture
        self.tools_eff = self.variant.tool_effects
        self.free_w = self.variant.free_class_weights
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

    def _prompt_setup(self):
        D = self.design
        pr = D.prompts
        P = D.P
        self.n_rep = max(pr.max_repeats, 1)
        if self.urn:
            # the query urn: numerator terms per unique (row, position, c_same, c_other), normaliser terms
            # per unique (cell, n_same, n_other), each with its multiplicity
            (u, p, cs, co), (ud, ns, no) = _urn_terms(pr, D.row_tools)
            self.urn_num, self.urn_num_w = _unique_terms(pr.row[u], p, cs, co)
            cell = D.row_llm * D.C + D.row_cluster
            self.urn_den, self.urn_den_w = _unique_terms(cell[pr.row[ud]], ns, no)
            return
        if self.mix:
            self._mixture_setup()
            return
        if self.dm and not self.qe:
            # the Dirichlet-multinomial depends on a prompt only through 1(y > i): add them up per row
            A, B = _rising_indicators(pr.y, self.n_rep)
            self.A = np.zeros((len(D.y), P, self.n_rep))
            self.Bn = np.zeros((len(D.y), self.n_rep))
            np.add.at(self.A, pr.row, A)
            np.add.at(self.Bn, pr.row, B)
            self.row_kappa = D.row_llm * D.C + D.row_cluster
            return
        # query effects: one row per prompt
        self.qgroups = []
        offset = 0
        q_local = np.zeros(pr.Q, dtype=np.int64)
        q_group = np.zeros(pr.Q, dtype=np.int64)
        for gi, k in enumerate(sorted(set(D.K.tolist()))):
            qs = np.flatnonzero(D.K[pr.query_cluster] == k)
            q_local[qs] = np.arange(len(qs))
            q_group[qs] = gi
            self.qgroups.append({"k": int(k), "queries": qs, "offset": offset, "llm": pr.query_llm[qs]})
            offset += len(qs) * k
        if self.shared:
            # one latent vector per (cluster, query_id), shared by the LLMs shown that query
            qid = np.asarray(pr.query_ids, dtype=object)
            for g in self.qgroups:
                qs = g["queries"]
                keys = [(int(c), q) for c, q in zip(pr.query_cluster[qs], qid[qs])]
                uniq = {kk: i for i, kk in enumerate(dict.fromkeys(keys))}
                g["shared"] = np.array([uniq[kk] for kk in keys], dtype=np.int64)
                g["n_shared"] = len(uniq)
        self.n_eta = offset
        self._dense_setup()
        rows = pr.row
        mask = D.row_tools[rows] >= 0
        tools = np.where(mask, D.row_tools[rows], 0)
        kq = D.K[pr.query_cluster[pr.query]]
        offsets = np.array([g["offset"] for g in self.qgroups])
        base = offsets[q_group[pr.query]] + q_local[pr.query] * kq
        self.Gq = self.G[rows]
        self.Bq = self.B[rows]
        self.Eq = np.where(mask, base[:, None] + tools, 0)
        self.negq = self.neg[rows]
        self.yq = pr.y
        self.nq = pr.n
        self.row_kappa = (D.row_llm * D.C + D.row_cluster)[rows]
        if self.dm:
            self.A, self.Bn = _rising_indicators(pr.y, self.n_rep)

    def _mixture_setup(self):
        """Index tables of the query mixture's likelihood (``model="query-mixture"``).

        A prompt's Dirichlet-multinomial log-likelihood given the class ``k`` of its query is
        ``sum_p sum_{i < y_p} log(kappa p_k[p] + i) - sum_{i < n} log(kappa + i)``, where ``p_k`` is
        its design row's chooser with the class's boost. The first part is a sum of
        ``H[row, p, y_p - 1, k] = sum_{i < y_p} log(kappa p_k[p] + i)`` (a grid of rows x positions x
        runs x classes, computed once per gradient); the second does not depend on the class and is
        summed per row as in v2. Prompts with the same row and counts (a *pattern*) have the same
        terms, so: ``entries`` (patterns x positions chosen) index the grid, ``qpat`` (queries x
        orderings) index the patterns, and queries with the same patterns are counted once, with a
        weight. The query's log-likelihood is ``logsumexp_k(log w[cell, k] + sum of its prompts' terms)``.
        """
        D = self.design
        pr = D.prompts
        P, n_runs = D.P, self.n_rep
        y = pr.y.astype(np.int64)
        key = np.concatenate([pr.row[:, None], y], 1)
        pats, pinv = np.unique(key, axis=0, return_inverse=True)
        pinv = pinv.ravel()
        U = len(pats)
        prow, py = pats[:, 0], pats[:, 1:]
        ne = max(int((py > 0).sum(1).max()), 1) if U else 1
        pad_h = len(D.y) * P * n_runs                                                 # index of the zero slot
        ent = np.full((U, ne), pad_h, dtype=np.int64)
        rank = np.cumsum(py > 0, 1) - 1
        uu, pp = np.nonzero(py > 0)
        ent[uu, rank[uu, pp]] = (prow[uu] * P + pp) * n_runs + (py[uu, pp] - 1)
        # queries: their patterns (sorted), unique query signatures with multiplicities
        order = np.lexsort((pinv, pr.query))
        nq = np.bincount(pr.query, minlength=pr.Q)
        start = np.r_[0, np.cumsum(nq)[:-1]]
        slot = np.arange(len(order)) - start[pr.query[order]]
        qpat = np.full((pr.Q, max(int(nq.max()), 1)), U, dtype=np.int64)      # U = the zero pattern
        qpat[pr.query[order], slot] = pinv[order]
        qcell = pr.query_llm * D.C + pr.query_cluster
        sig = np.concatenate([qcell[:, None], qpat], 1)
        usig, sinv, scount = np.unique(sig, axis=0, return_inverse=True, return_counts=True)
        self.mix_entries = ent
        self.mix_qpat = usig[:, 1:]
        self.mix_qcell = usig[:, 0]
        self.mix_qweight = scount.astype(float)
        self.mix_query_sig = sinv.ravel()
        self.mix_tables = _mk.mixture_tables(ent, pad_h, self.mix_qpat, U, self.mix_qcell, self.mix_qweight)
        # class k >= 1 boosts tool k - 1 where it is shown: (R, P, Kmax + 1), class 0 = indifferent
        Kmax = D.Kmax
        self.mix_onehot = np.concatenate(
            [np.zeros((len(D.y), P, 1)), (D.row_tools[:, :, None] == np.arange(Kmax)[None, None, :]).astype(float)], 2)
        # classes of tools a cluster does not have are impossible
        self.mix_valid = np.arange(Kmax)[None, :] < D.K[:, None]                 # (C, Kmax)
        self.row_cell = D.row_llm * D.C + D.row_cluster
        self.mix_nrow = np.zeros((len(D.y), n_runs))
        np.add.at(self.mix_nrow, pr.row, (pr.n[:, None] > np.arange(n_runs)).astype(float))

    def _dense_setup(self, max_ratio=3.0):
        """A dense (cell, query, ordering, position) layout of the prompts for the query-effects likelihood.

        Gathers of tens of thousands of prompt logits are slow to differentiate (a scatter-add per
        gather); when the design is (nearly) balanced, as when every query is shown in every rotation,
        the prompts fit a dense array with little padding and the likelihood is plain tensor algebra.
        Each K-group of clusters gets one: ``ncell`` (LLM, cluster) cells x ``maxQ`` queries x ``maxO``
        orderings (the cell's design rows) x P positions; absent prompts have zero counts. Designs that
        would need more than ``max_ratio`` times the prompts' size keep the gather form.
        """
        D = self.design
        pr = D.prompts
        P = D.P
        cell_row = D.row_llm * D.C + D.row_cluster
        cell_q = pr.query_llm * D.C + pr.query_cluster
        total = 0
        for g in self.qgroups:
            qs = g["queries"]
            ucells, ci = np.unique(cell_q[qs], return_inverse=True)
            qslot = np.zeros(len(qs), dtype=np.int64)
            for c in range(len(ucells)):
                idx = np.flatnonzero(ci == c)
                qslot[idx] = np.arange(len(idx))
            rows_of = [np.flatnonzero(cell_row == cc) for cc in ucells]
            maxQ = int(np.bincount(ci).max())
            maxO = max(len(r) for r in rows_of)
            rowmap = np.full((len(ucells), maxO), len(D.y), dtype=np.int64)    # len(D.y) = the padding row
            oslot = np.zeros(len(D.y), dtype=np.int64)
            for c, rr in enumerate(rows_of):
                rowmap[c, :len(rr)] = rr
                oslot[rr] = np.arange(len(rr))
            g.update(cells=ucells, qcell=ci, qslot=qslot, maxQ=maxQ, maxO=maxO, rowmap=rowmap, oslot=oslot,
                     cell_llm=ucells // D.C, cell_flat=ucells)
            total += len(ucells) * maxQ * maxO * P
        self.dense = total <= max_ratio * pr.y.size + 50_000
        if not self.dense:
            return
        I = self.n_rep
        k_of_group = {}
        for gi, g in enumerate(self.qgroups):
            k = g["k"]
            shape = (len(g["cells"]), g["maxQ"], g["maxO"], P)
            Y = np.zeros(shape)
            local = np.full(pr.Q, -1)
            local[g["queries"]] = np.arange(len(g["queries"]))
            u = np.flatnonzero(local[pr.query] >= 0)
            lq = local[pr.query[u]]
            Y[g["qcell"][lq], g["qslot"][lq], g["oslot"][pr.row[u]]] = pr.y[u]
            onehot = np.zeros((len(g["cells"]), g["maxO"], P, k))
            for c in range(len(g["cells"])):
                for o, r in enumerate(g["rowmap"][c]):
                    if r < len(D.y):
                        t = D.row_tools[r]
                        pp = np.flatnonzero(t >= 0)
                        onehot[c, o, pp, t[pp]] = 1.0
            g["Y"] = Y
            g["onehot"] = onehot
            if self.shared:
                sidx = np.zeros((len(g["cells"]), g["maxQ"]), dtype=np.int64)
                sidx[g["qcell"], g["qslot"]] = g["shared"]
                g["sidx"] = sidx
                # tool shown at each (cell, ordering slot, position) as a flat index cell * k + tool
                tidx = np.where(onehot.sum(-1) > 0, onehot.argmax(-1), 0)            # (cells, O, P)
                g["tool_flat"] = np.arange(len(g["cells"]))[:, None, None] * k + tidx
                # counts and rising-factorial indicators with the query axis last: (cells, O, P, Q)
                g["Yt"] = np.moveaxis(Y, 1, -1)
                if self.dm:
                    At, Bt = _rising_indicators(Y, I)
                    g["At"] = np.moveaxis(At, 1, 3)                                   # (cells, O, P, Q, I)
                    g["Bt"] = np.moveaxis(Bt, 1, 2)                                   # (cells, O, Q, I)
            if self.dm:
                g["A"], g["Bn"] = _rising_indicators(Y, I)
            k_of_group[gi] = k

    # -- building --------------------------------------------------------------------------------
    def build(self):
        import pymc as pm
        import pytensor.tensor as pt

        D, pr = self.design, self.priors
        M = D.M
        centred = self.param == "centered"
        with pm.Model() as model:
            alphas = []
            sa = pm.HalfNormal("sigma_alpha", pr["sigma_alpha_sd"]) if self.hier and self.tools_eff else None
            if not self.tools_eff:
                # no tool effects (the identified query mixture): the logits gather zeros
                alphas.append(pt.zeros((self.n_alpha,)))
            for g in self.groups if self.tools_eff else ():
                k, ng = g["k"], len(g["clusters"])
                sfx = f"_k{k}"
                if centred:
                    # each cell in its own reference coding (its most chosen tool = 0); the prior is put on
                    # the orthonormal zero-sum coordinates u, with mu integrated out analytically
                    a_f = pm.Flat("alpha_free" + sfx, shape=(M, ng, k - 1))
                    e_a = pm.Data("embed_alpha" + sfx, g["E_a"])
                    alpha = (a_f[..., None] * e_a).sum(-2)                            # (M, ng, k)
                    u = (alpha[..., None, :] * _basis(k)).sum(-1)                     # (M, ng, k-1)
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
            alpha_flat = alphas[0] if len(alphas) == 1 else pt.concatenate(alphas)
            beta_flat = self._build_beta(pm, pt, centred)
            if not (self.dm or self.qe):
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
                return model
            if self.urn:
                self._build_urn_loglik(pm, pt, alpha_flat, beta_flat)
                return model
            if self.mix:
                self._build_mixture_loglik(pm, pt, alpha_flat, beta_flat)
                return model
            if self.qe and self.shared and self.dense:
                self._build_shared_dense_loglik(pm, pt, alpha_flat, beta_flat)
                return model
            if self.qe and self.dense:
                self._build_dense_loglik(pm, pt, alpha_flat, beta_flat)
                return model
            if self.qe:
                eta_flat = self._build_eta(pm, pt)
                logits = (alpha_flat[pm.Data("gather_alpha", self.Gq)] + beta_flat[pm.Data("gather_beta", self.Bq)]
                          + eta_flat[pm.Data("gather_eta", self.Eq)] + pm.Data("pad", self.negq))
            else:
                logits = (alpha_flat[pm.Data("gather_alpha", self.G)] + beta_flat[pm.Data("gather_beta", self.B)]
                          + pm.Data("pad", self.neg))
            logp = logits - pt.logsumexp(logits, axis=1, keepdims=True)
            if not self.dm:
                pm.Potential("loglik", (pm.Data("prompt_counts", self.yq) * logp).sum())
                return model
            # Dirichlet-multinomial with concentration kappa[m, c] * p: the rising factorials
            # sum_p sum_{i < y_p} log(kappa p_p + i) - sum_{i < n} log(kappa + i)
            t = self._kappa(pm, pt)
            lk = t[pm.Data("row_kappa", self.row_kappa)][:, None]                # (rows, 1)
            x = lk + logp                                                         # log(kappa p)
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
        return model

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

    def _gamma(self, pm, pt):
        """logit gamma[m, c] (flat) with a Uniform(0, 1) prior on gamma (Jacobian included)."""
        t = pm.Flat("logit_gamma", shape=(self.design.M * self.design.C,))
        pm.Potential("gamma_prior", (pt.log(pt.sigmoid(t)) + pt.log(pt.sigmoid(-t))).sum())
        return t

    def _build_urn_loglik(self, pm, pt, alpha_flat, beta_flat):
        """The query urn: sum of log(kappa p + c_same + gamma c_other) - log(kappa + n_same + gamma n_other)."""
        D = self.design
        logits = alpha_flat[pm.Data("gather_alpha", self.G)] + beta_flat[pm.Data("gather_beta", self.B)] \
            + pm.Data("pad", self.neg)
        logp = (logits - pt.logsumexp(logits, axis=1, keepdims=True)).reshape((-1,))   # (R * P,)
        lk = self._kappa(pm, pt)
        gam = pt.sigmoid(self._gamma(pm, pt))
        num = self.urn_num
        row, pos = num[:, 0], num[:, 1]
        cell = D.row_llm[row] * D.C + D.row_cluster[row]
        x = lk[pm.Data("urn_cell", cell)] + logp[pm.Data("urn_rowpos", row * D.P + pos)]   # log(kappa p)
        extra = pm.Data("urn_same", num[:, 2].astype(float)) + gam[pm.Data("urn_cell2", cell)] * pm.Data(
            "urn_other", num[:, 3].astype(float))
        ll = (pm.Data("urn_num_w", self.urn_num_w) * pt.log(pt.exp(x) + extra)).sum()
        den = self.urn_den
        dc = pm.Data("urn_den_cell", den[:, 0])
        ll = ll - (pm.Data("urn_den_w", self.urn_den_w)
                   * pt.log(pt.exp(lk[dc]) + pm.Data("urn_den_same", den[:, 1].astype(float))
                            + gam[dc] * pm.Data("urn_den_other", den[:, 2].astype(float)))).sum()
        pm.Potential("loglik", ll)

    def _epsilon(self, pm, pt):
        """logit epsilon[m, c] (flat), partially pooled: ``logit epsilon ~ Normal(eps_mu, eps_tau)`` with
        ``eps_mu ~ Normal(0, 2)``, ``eps_tau ~ HalfNormal(1.5)`` (centred; every cell has many queries)."""
        from ._common import _MIXTURE_FREE, _MIXTURE_POOLED

        if _MIXTURE_FREE or self.free_w:
            return self._free_class_logits(pm, pt)
        t = pm.Flat("logit_epsilon", shape=(self.design.M * self.design.C,))
        if not _MIXTURE_POOLED:
            pm.Potential("epsilon_prior", (pt.log(pt.sigmoid(t)) + pt.log(pt.sigmoid(-t))).sum())
            return t
        mu = pm.Normal("eps_mu", 0.0, 2.0)
        tau = pm.HalfNormal("eps_tau", 1.5)
        pm.Potential("epsilon_prior", (-0.5 * ((t - mu) / tau) ** 2).sum() - t.shape[0] * pt.log(tau))
        return t

    def _free_class_mask(self):
        """(M * C, Kmax) True where the class 'needs tool j' exists (the cluster has tool j)."""
        D = self.design
        return np.tile(self.mix_valid, (D.M, 1))

    def _free_class_logits(self, pm, pt):
        """Free class weights per cell: ``w = softmax([0, t])`` with a Dirichlet(1, ..., 1) prior on the valid
        classes; in these coordinates its density is ``prod_k w_k`` (the Jacobian of the additive logistic map).
        Coordinates of classes a cluster does not have get a standard normal (they do not enter the model)."""
        D = self.design
        valid = self._free_class_mask()
        t = pm.Flat("class_logits", shape=(D.M * D.C, D.Kmax))
        lw = self._free_log_weights(pt, t)
        vmask = np.concatenate([np.ones((D.M * D.C, 1)), valid.astype(float)], 1)
        prior = (lw * vmask).sum()
        from ._common import _MIXTURE_FREE_PRIOR

        if _MIXTURE_FREE_PRIOR is not None:                       # experimental: docs/bayes.md, sixth attempt
            prior = prior + self._split_class_prior(pt, lw, valid, _MIXTURE_FREE_PRIOR)
        pm.Potential("class_prior", prior - 0.5 * ((t ** 2) * (1.0 - valid)).sum())
        return t

    @staticmethod
    def _split_class_prior(pt, lw, valid, prior):
        """log density (w.r.t. the weights, up to a constant) of ``epsilon = 1 - w_0 ~ Beta(b1, b0)`` and the
        needed tools' shares ``w_j / epsilon ~ Dirichlet(a, ..., a)`` (K of them), minus that of Dirichlet(1):
        ``(b1 - 1) log eps + (b0 - 1) log w_0 + (a - 1) sum_j log w_j - (K a - 1) log eps`` (the change of
        variables (eps, shares) -> weights has Jacobian eps^(K - 1); Dirichlet(1)'s density is constant, and the
        expression is 0 for ``(K, 1, 1)``)."""
        b1, b0, a = (float(v) for v in prior)
        k = valid.sum(1)                                                              # (cells,) K per cell
        lw_need = pt.where(valid, lw[:, 1:], 0.0)
        log_eps = pt.logsumexp(pt.where(valid, lw[:, 1:], -np.inf), axis=1)
        return ((b1 - 1.0) * log_eps + (b0 - 1.0) * lw[:, 0] + (a - 1.0) * lw_need.sum(1)
                - (k * a - 1.0) * log_eps).sum()

    def _free_log_weights(self, pt, t):
        z = t + np.where(self._free_class_mask(), 0.0, _NEG)
        z = pt.concatenate([pt.zeros((z.shape[0], 1)), z], axis=1)
        return z - pt.logsumexp(z, axis=1, keepdims=True)

    def _mixture_log_weights(self, pt, alpha_flat, t_eps):
        """log class weights (M * C, Kmax + 1): log(1 - epsilon), log(epsilon) + log softmax(alpha)."""
        D = self.design
        from ._common import _MIXTURE_FREE, _MIXTURE_TIED

        if _MIXTURE_FREE or self.free_w:
            return self._free_log_weights(pt, t_eps)
        parts = []
        for g in self.groups:
            k, cg = g["k"], g["clusters"]
            a = alpha_flat[g["offset"]:g["offset"] + D.M * len(cg) * k].reshape((D.M * len(cg), k))
            la = a - pt.logsumexp(a, axis=1, keepdims=True) if _MIXTURE_TIED else pt.zeros_like(a) - np.log(k)
            if k < D.Kmax:
                la = pt.concatenate([la, pt.full((D.M * len(cg), D.Kmax - k), _NEG)], axis=1)
            parts.append((cg, la))
        # back to the flat (m * C + c) order of the cells
        cells = np.concatenate([(np.arange(D.M)[:, None] * D.C + cg[None, :]).ravel() for cg, _ in parts])
        la = parts[0][1] if len(parts) == 1 else pt.concatenate([x for _, x in parts], axis=0)
        la = la[np.argsort(cells)]
        e_max = float(self.priors.get("eps_max", 1.0))
        if e_max >= 1.0:
            lw0, lw1 = pt.log(pt.sigmoid(-t_eps)), pt.log(pt.sigmoid(t_eps))
        else:   # epsilon = eps_max * expit(t): log(1 - epsilon) = log1p(-eps_max * expit(t))
            lw0, lw1 = pt.log1p(-e_max * pt.sigmoid(t_eps)), np.log(e_max) + pt.log(pt.sigmoid(t_eps))
        return pt.concatenate([lw0[:, None], lw1[:, None] + la], axis=1)

    def _build_mixture_loglik(self, pm, pt, alpha_flat, beta_flat):
        """The query mixture, summed out per query (see ``_mixture_setup``). Without tool effects
        (``model="query-mixture-id"``) ``alpha_flat`` is zeros and the class weights are free; the boost is
        ``lambda[m]`` per LLM or ``lambda[m, c]`` per (LLM, cluster) (``boost_per_cell``)."""
        D = self.design
        n_runs = self.n_rep
        per_cell = self.variant.boost_per_cell
        lam = pm.HalfNormal("lambda", self.priors["lambda_sd"], shape=(D.M * D.C if per_cell else D.M,))
        t = self._kappa(pm, pt)
        t_eps = self._epsilon(pm, pt)
        logits = alpha_flat[pm.Data("gather_alpha", self.G)] + beta_flat[pm.Data("gather_beta", self.B)] \
            + pm.Data("pad", self.neg)                                              # (R, P)
        row_cell = pm.Data("row_cell", self.row_cell)
        lk = t[row_cell]                                                             # (R,)
        lw = self._mixture_log_weights(pt, alpha_flat, t_eps)
        lam_row = lam[row_cell] if per_cell else lam[pm.Data("row_llm", D.row_llm)]
        if getattr(self, "jax_kernel", False):                                       # NumPyro: one Op
            op = _mk.mixture_query_op(self.mix_tables, self.mix_onehot, n_runs)
            qsum = op(logits, lam_row, lk, lw)
        else:
            qsum = self._mixture_query_sum(pm, pt, logits, lam_row, lk, lw)
        kap = pt.exp(lk)
        norm = lk * pm.Data("mix_nrow0", self.mix_nrow[:, 0])
        for i in range(1, n_runs):
            norm = norm + pt.log(kap + i) * pm.Data(f"mix_nrow{i}", self.mix_nrow[:, i])
        pm.Potential("loglik", qsum - norm.sum())

    def _mixture_query_sum(self, pm, pt, logits, lam_row, lk, lw):
        """sum_q w_q logsumexp_k(L[q, k] + lw[cell_q, k]) in PyTensor (``docs/bayes_speed.md``)."""
        D = self.design
        lg = logits[:, :, None] + lam_row[:, None, None] * pm.Data("mix_onehot", self.mix_onehot)
        logp = lg - pt.logsumexp(lg, axis=1, keepdims=True)                         # (R, P, K + 1)
        x = lk[:, None, None] + logp
        # exp(lk) * exp(logp), not exp(x): PyTensor rewrites log(exp(x) + 1) into a softplus that JAX
        # evaluates branch by branch (several exp and log1p per element, ~0.4 ms per gradient here)
        ex = pt.exp(x) if _mk.EX == "exp" else pt.exp(lk)[:, None, None] * pt.exp(logp)
        cum = [x]
        for i in range(1, self.n_rep):
            cum.append(cum[-1] + pt.log(ex + i))
        H = pt.stack(cum, axis=2).reshape((-1, D.Kmax + 1))                         # (R * P * I, K + 1)
        if _mk.LAYOUT == "slots":
            L = _mk.query_class_terms(pm, pt, H, self.mix_tables)                   # (queries, K + 1)
            qcell, qweight = self.mix_tables["qcell"], self.mix_tables["qweight"]
        else:                                                                       # the plain gathers
            H = pt.concatenate([H, pt.zeros((1, D.Kmax + 1))], axis=0)
            ll_pat = H[pm.Data("mix_entries", self.mix_entries)].sum(1)            # (U, K + 1)
            ll_pat = pt.concatenate([ll_pat, pt.zeros((1, D.Kmax + 1))], axis=0)
            L = ll_pat[pm.Data("mix_qpat", self.mix_qpat)].sum(1)                  # (queries, K + 1)
            qcell, qweight = self.mix_qcell, self.mix_qweight
        lq = pt.logsumexp(L + lw[pm.Data("mix_qcell", qcell)], axis=1)
        return (pm.Data("mix_qweight", qweight) * lq).sum()

    def _build_dense_loglik(self, pm, pt, alpha_flat, beta_flat):
        D = self.design
        se = pm.HalfNormal("sigma_eta", self.priors["sigma_eta_sd"], shape=(D.M,))
        row_logits = alpha_flat[pm.Data("gather_alpha", self.G)] + beta_flat[pm.Data("gather_beta", self.B)] \
            + pm.Data("pad", self.neg)
        row_logits = pt.concatenate([row_logits, pt.full((1, D.P), -1e4)], axis=0)   # the padding row
        t = self._kappa(pm, pt) if self.dm else None
        ll = 0.0
        for g in self.qgroups:
            k = g["k"]
            z = pm.Normal(f"z_eta_k{k}", 0.0, 1.0, shape=(len(g["cells"]), g["maxQ"], k - 1))
            eta = se[pm.Data(f"eta_llm_k{k}", g["cell_llm"])][:, None, None] * _zerosum_extend(z, pt)
            rl = row_logits[pm.Data(f"rowmap_k{k}", g["rowmap"])]                    # (cells, O, P)
            oh = pm.Data(f"onehot_k{k}", g["onehot"])                                 # (cells, O, P, k)
            le = (eta[:, :, None, None, :] * oh[:, None]).sum(-1)                    # (cells, Q, O, P)
            logits = rl[:, None] + le
            logp = logits - pt.logsumexp(logits, axis=-1, keepdims=True)
            if not self.dm:
                ll = ll + (pm.Data(f"counts_k{k}", g["Y"]) * logp).sum()
                continue
            lk = t[pm.Data(f"cell_k{k}", g["cell_flat"])][:, None, None, None]       # (cells, 1, 1, 1)
            x = lk + logp
            A = pm.Data(f"dm_first_k{k}", g["A"])
            Bn = pm.Data(f"dm_total_k{k}", g["Bn"])
            ll = ll + (A[..., 0] * x).sum()
            for i in range(1, self.n_rep):
                ll = ll + (A[..., i] * pt.logaddexp(np.log(i), x)).sum()
            lk3 = lk[..., 0]                                                          # (cells, 1, 1)
            ll = ll - (Bn[..., 0] * lk3).sum()
            for i in range(1, self.n_rep):
                ll = ll - (Bn[..., i] * pt.log(pt.exp(lk3) + i)).sum()
        pm.Potential("loglik", ll)

    def _build_shared_dense_loglik(self, pm, pt, alpha_flat, beta_flat):
        """Shared query effects on the dense layout, with the query axis last and a gather of the tool logits
        (no one-hot contraction): logits[cell, o, p, q] = row logit + sigma_eta[m] * z[shared(cell, q), tool]."""
        D = self.design
        se = pm.HalfNormal("sigma_eta", self.priors["sigma_eta_sd"], shape=(D.M,))
        row_logits = alpha_flat[pm.Data("gather_alpha", self.G)] + beta_flat[pm.Data("gather_beta", self.B)] \
            + pm.Data("pad", self.neg)
        row_logits = pt.concatenate([row_logits, pt.full((1, D.P), -1e4)], axis=0)   # the padding row
        t = self._kappa(pm, pt)
        ll = 0.0
        for g in self.qgroups:
            k = g["k"]
            ncell = len(g["cells"])
            z = pm.Normal(f"z_eta_k{k}", 0.0, 1.0, shape=(g["n_shared"], k - 1))
            zz = _zerosum_extend(z, pt)[pm.Data(f"shared_k{k}", g["sidx"])]          # (cells, Q, k)
            eta = se[pm.Data(f"eta_llm_k{k}", g["cell_llm"])][:, None, None] * zz
            eta_t = eta.dimshuffle(0, 2, 1).reshape((ncell * k, g["maxQ"]))          # (cells * k, Q)
            le = eta_t[pm.Data(f"tool_flat_k{k}", g["tool_flat"])]                   # (cells, O, P, Q)
            rl = row_logits[pm.Data(f"rowmap_k{k}", g["rowmap"])]                    # (cells, O, P)
            logits = rl[..., None] + le
            logp = logits - pt.logsumexp(logits, axis=2, keepdims=True)
            lk = t[pm.Data(f"cell_k{k}", g["cell_flat"])][:, None, None, None]       # (cells, 1, 1, 1)
            x = lk + logp
            A = pm.Data(f"dm_first_k{k}", g["At"])
            Bn = pm.Data(f"dm_total_k{k}", g["Bt"])
            ll = ll + (A[..., 0] * x).sum()
            ex = pt.exp(x)
            for i in range(1, self.n_rep):
                ll = ll + (A[..., i] * pt.log(ex + i)).sum()
            lk3 = lk[..., 0]                                                          # (cells, 1, 1)
            ll = ll - (Bn[..., 0] * lk3).sum()
            for i in range(1, self.n_rep):
                ll = ll - (Bn[..., i] * pt.log(pt.exp(lk3) + i)).sum()
        pm.Potential("loglik", ll)

    def _build_eta(self, pm, pt):
        D = self.design
        se = pm.HalfNormal("sigma_eta", self.priors["sigma_eta_sd"], shape=(D.M,))
        parts = []
        for g in self.qgroups:
            k = g["k"]
            if self.shared:
                z = pm.Normal(f"z_eta_k{k}", 0.0, 1.0, shape=(g["n_shared"], k - 1))
                zz = _zerosum_extend(z, pt)[pm.Data(f"shared_k{k}", g["shared"])]
                parts.append((se[pm.Data(f"eta_llm_k{k}", g["llm"])][:, None] * zz).reshape((-1,)))
                continue
            z = pm.Normal(f"z_eta_k{k}", 0.0, 1.0, shape=(len(g["queries"]), k - 1))
            eta = se[pm.Data(f"eta_llm_k{k}", g["llm"])][:, None] * _zerosum_extend(z, pt)
            parts.append(eta.reshape((-1,)))
        return parts[0] if len(parts) == 1 else pt.concatenate(parts)

    def _noncentred_beta_draws(self, get, sb):
        """Draws of (beta_bar, beta) from the non-centred coordinates (the numpy twin of ``_noncentred_beta``)."""
        bb = _zerosum_extend(get("beta_bar_free"), np)
        if not self.hier:
            return bb, bb[:, None]
        return bb, bb[:, None] + sb[:, None, None] * _zerosum_extend(get("z_beta"), np)

    # -- free parameters -> identified effects (numpy, per draw) -----------------------------------
    def _derived_mixture(self, get, S, free):
        """The query mixture's ``lambda`` (S, M), ``epsilon`` (S, M, C) and, with free class weights,
        ``class_weights`` (S, M, C, Kmax + 1)."""
        M, C, Kmax = self.design.M, self.design.C, self.design.Kmax
        out = {"lambda": get("lambda").reshape((S, M, C) if self.variant.boost_per_cell else (S, M))}
        if free:
            z = np.concatenate([np.zeros((S, M * C, 1)),
                                np.where(self._free_class_mask(), get("class_logits").reshape(S, M * C, Kmax),
                                         -np.inf)], -1)
            w = np.exp(z - z.max(-1, keepdims=True))
            out["class_weights"] = (w / w.sum(-1, keepdims=True)).reshape(S, M, C, Kmax + 1)
            out["epsilon"] = 1.0 - out["class_weights"][..., 0]
        else:
            e_max = min(float(self.priors.get("eps_max", 1.0)), 1.0)
            out["epsilon"] = e_max / (1.0 + np.exp(-get("logit_epsilon"))).reshape(S, M, C)
        return out

    def _alpha_draws(self, get, S, sa, gen):
        """Draws of the API effects ``alpha`` (S, M, C, Kmax) and ``mu`` (S, C, Kmax), sum-to-zero, NaN padding
        (zero without tool effects)."""
        D = self.design
        M, C, Kmax = D.M, D.C, D.Kmax
        alpha = np.full((S, M, C, Kmax), np.nan)
        mu = np.full((S, C, Kmax), np.nan)
        if not self.tools_eff:                                                  # no tool effects: zero
            valid = np.arange(Kmax)[None, :] < D.K[:, None]
            return np.where(valid[None, None], 0.0, alpha), np.where(valid[None], 0.0, mu)
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

        M, C, Kmax = D.M, D.C, D.Kmax
        centred = self.param == "centered"
        sa = get("sigma_alpha") if self.hier and self.tools_eff else None
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
            if self.tools_eff:
                out["sigma_alpha"] = sa
            out["sigma_beta"] = sb
        if self.dm:
            out["kappa"] = np.exp(get("log_kappa")).reshape(S, M, C)
        if self.urn:
            out["gamma"] = 1.0 / (1.0 + np.exp(-get("logit_gamma"))).reshape(S, M, C)
        if self.mix:
            out.update(self._derived_mixture(get, S, "class_logits" in posterior))
        if self.qe:
            se = get("sigma_eta")
            eta = np.full((S, cast(_Prompts, D.prompts).Q, Kmax), np.nan, dtype=np.float32)
            for g in self.qgroups:
                k = g["k"]
                z = np.asarray(posterior[f"z_eta_k{k}"].values)
                if self.shared:
                    z = z.reshape((S,) + z.shape[2:])[:, g["shared"]]
                elif self.dense:
                    z = z.reshape((S,) + z.shape[2:])[:, g["qcell"], g["qslot"]]
                z = z.reshape(S, len(g["queries"]), k - 1)
                eta[:, g["queries"], :k] = (se[:, g["llm"]][..., None] * _zerosum_extend(z, np)).astype(np.float32)
            out["eta"] = eta
            out["sigma_eta"] = se
        return out
