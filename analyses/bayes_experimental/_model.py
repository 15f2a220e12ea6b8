"""The experimental variants' model terms: an extension of the package's ``_ModelSpec`` (moved out of the
package in issue 38; ``docs/bayes.md`` has the record of each attempt).

Terms: query effects ``eta[m, c, q, :]`` shared by every ordering and run of a query (``overdispersed``,
``thorough``; dense and gather layouts), query effects shared by the LLMs (``query-shared``), the query-level urn
(``query-urn``) and the query mixture summed out per query (``query-mixture``, ``query-mixture-id``).
"""

from __future__ import annotations

from typing import cast

import numpy as np

from toolbias_stats.models.bayes._common import _NEG, _zerosum_extend
from toolbias_stats.models.bayes._design import _Prompts
from toolbias_stats.models.bayes._model import _ModelSpec, _rising_indicators

from . import _mixture_kernel as _mk
from . import _variants as V


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




class ExperimentalSpec(_ModelSpec):
    """The package's model with the experimental terms of an :class:`~._variants.ExperimentalVariant`."""

    def _set_flags(self):
        super()._set_flags()
        v = self.variant
        self.urn = getattr(v, "query_urn", False)
        self.shared = getattr(v, "shared_queries", False)
        self.mix = getattr(v, "query_mixture", False)
        self.tools_eff = getattr(v, "tool_effects", True)
        self.free_w = getattr(v, "free_class_weights", False)
        self.query_classes = self.mix

    _jax_kernel: bool | None = None

    @property
    def jax_kernel(self):
        """The query mixture's class sums as one JAX Op: under NumPyro (``spec.sampler``, set by ``_sample``) unless
        the switch ``JAX_KERNEL`` is off; PyMC's samplers and nutpie keep the PyTensor graph. A value set by hand
        (the checks) wins."""
        if self._jax_kernel is not None:
            return self._jax_kernel
        return V.JAX_KERNEL and getattr(self, "sampler", "numpyro") not in ("pymc", "pymc-numba", "nutpie")

    @jax_kernel.setter
    def jax_kernel(self, value):
        self._jax_kernel = bool(value)


    def _prompt_setup(self):
        if not (self.urn or self.mix or self.qe):
            super()._prompt_setup()
            return
        D = self.design
        pr = D.prompts
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
    # -- building --------------------------------------------------------------------------------
    def _build_alpha(self, pm, pt, centred):
        if not self.tools_eff:
            # no tool effects (the identified query mixture): the logits gather zeros
            return pt.zeros((self.n_alpha,))
        return super()._build_alpha(pm, pt, centred)

    def _build_loglik(self, pm, pt, alpha_flat, beta_flat):
        if self.urn:
            self._build_urn_loglik(pm, pt, alpha_flat, beta_flat)
            return
        if self.mix:
            self._build_mixture_loglik(pm, pt, alpha_flat, beta_flat)
            return
        if not self.qe:
            super()._build_loglik(pm, pt, alpha_flat, beta_flat)
            return
        if self.shared and self.dense:
            self._build_shared_dense_loglik(pm, pt, alpha_flat, beta_flat)
            return
        if self.dense:
            self._build_dense_loglik(pm, pt, alpha_flat, beta_flat)
            return
        eta_flat = self._build_eta(pm, pt)
        logits = (alpha_flat[pm.Data("gather_alpha", self.Gq)] + beta_flat[pm.Data("gather_beta", self.Bq)]
                  + eta_flat[pm.Data("gather_eta", self.Eq)] + pm.Data("pad", self.negq))
        logp = logits - pt.logsumexp(logits, axis=1, keepdims=True)
        if not self.dm:
            pm.Potential("loglik", (pm.Data("prompt_counts", self.yq) * logp).sum())
            return
        self._dm_potential(pm, pt, logp)

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
        if V._MIXTURE_FREE or self.free_w:
            return self._free_class_logits(pm, pt)
        t = pm.Flat("logit_epsilon", shape=(self.design.M * self.design.C,))
        if not V._MIXTURE_POOLED:
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
        if V._MIXTURE_FREE_PRIOR is not None:                       # experimental: docs/bayes.md, sixth attempt
            prior = prior + self._split_class_prior(pt, lw, valid, V._MIXTURE_FREE_PRIOR)
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
        if V._MIXTURE_FREE or self.free_w:
            return self._free_log_weights(pt, t_eps)
        parts = []
        for g in self.groups:
            k, cg = g["k"], g["clusters"]
            a = alpha_flat[g["offset"]:g["offset"] + D.M * len(cg) * k].reshape((D.M * len(cg), k))
            la = a - pt.logsumexp(a, axis=1, keepdims=True) if V._MIXTURE_TIED else pt.zeros_like(a) - np.log(k)
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
        if not self.tools_eff:                                                  # no tool effects: zero
            D = self.design
            valid = np.arange(D.Kmax)[None, :] < D.K[:, None]
            alpha = np.full((S, D.M, D.C, D.Kmax), np.nan)
            mu = np.full((S, D.C, D.Kmax), np.nan)
            return np.where(valid[None, None], 0.0, alpha), np.where(valid[None], 0.0, mu)
        return super()._alpha_draws(get, S, sa, gen)

    def derived(self, posterior, gen) -> dict:
        """The package's draws, plus ``gamma`` (S, M, C) of the urn, the mixture's ``lambda``/``epsilon``/
        ``class_weights`` and the query effects ``eta`` (S, Q, Kmax, float32) and ``sigma_eta`` (S, M)."""
        out = super().derived(posterior, gen)
        D = self.design
        nch, ndr = posterior.sizes["chain"], posterior.sizes["draw"]
        S = nch * ndr

        def get(name):
            return np.asarray(posterior[name].values, dtype=float).reshape((S,) + posterior[name].shape[2:])

        M, C, Kmax = D.M, D.C, D.Kmax
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

    # -- the package's summary hooks -----------------------------------------------------------------
    def class_probs(self, post, a, b, rows):
        from ._summaries import _mixture_probs

        return _mixture_probs(post, self.design, a, b, rows)

    def randomised_classes(self, post, a, b, al, um, uc, cell, k):
        """The query mixture: class 0 as it is, class j + 1 with lambda added to tool j."""
        from ._summaries import _boost, _mixture_weights

        wk = _mixture_weights(post, self.design, a, b)[:, cell]                 # (s, U, Kmax + 1)
        lam = _boost(post, a, b, um, uc)                                        # (s, U)
        return [(al, wk[..., 0])] + [(al + lam[..., None] * (np.arange(k) == j), wk[..., j + 1]) for j in range(k)]

    def prompt_probs(self, sub, b, gen):
        """The query mixture: every query draws its class (a new query), its prompts the class's chooser;
        E is the population mean (the mixture over the classes), exact."""
        from ._summaries import _mixture_probs, _mixture_weights

        D = self.design
        pr = D.prompts
        n = pr.n.astype(np.int64)
        pk, wk = _mixture_probs(sub, D, 0, b, np.arange(len(D.y)))              # (b, R, P, K+1), (b, R, K+1)
        qcell = pr.query_llm * D.C + pr.query_cluster
        wq = _mixture_weights(sub, D, 0, b)[:, qcell]                           # (b, Q, K+1)
        cls = (gen.random((b, pr.Q, 1)) > np.cumsum(wq, -1)).sum(-1)
        cls = np.minimum(cls, D.Kmax)[:, pr.query]                              # (b, Rq)
        p = np.take_along_axis(pk[:, pr.row], cls[:, :, None, None], 3)[..., 0]
        E = n[None, :, None] * (pk * wk[:, :, None, :]).sum(-1)[:, pr.row]
        return p, E

    def replicate_prompts(self, post, draws, p, kappa, gen):
        """The query urn's replications (every attempt of a query in the urn's order); None otherwise."""
        if not self.urn:
            return None
        from ._summaries import _query_urn, _urn_slots

        D = self.design
        pr = D.prompts
        if getattr(self, "_slots", None) is None:
            self._slots = _urn_slots(pr)
        gam = post["gamma"][draws][:, D.row_llm[pr.row], D.row_cluster[pr.row]]
        return _query_urn(p, kappa, gam, self._slots, D.row_tools[pr.row], pr.Q, gen)

    def fresh_eta(self, post, draws, gen):
        from ._summaries import _fresh_eta

        return _fresh_eta(post, self, draws, gen)

    def query_loglik(self, post, coef, chunk):
        from toolbias_stats.models.bayes._loglik import _dm_query_terms

        from ._summaries import _mixture_query_loglik, _urn_query_loglik

        if self.urn:
            return _urn_query_loglik(post, self, coef, chunk)
        if self.mix:
            F, Bq, n_runs = _dm_query_terms(self.design)
            return _mixture_query_loglik(post, self, F, Bq, coef, n_runs, chunk)
        return None
