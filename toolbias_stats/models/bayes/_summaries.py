"""Posterior summaries: implied bias (logged and randomised orderings), posterior predictive checks
(cluster x position, finest table, per-query dispersion) and the choice probabilities behind them."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd

from ._common import _hdi, _softmax_masked

#: Orderings enumerated exactly for the randomised counterfactual up to this list length (5! = 120).
_EXACT_PERMUTATION_K = 5
#: Beyond it: this many random base permutations, each with all K cyclic shifts (balanced design).
_RANDOM_BASE_PERMUTATIONS = 24
#: Fresh query-effect draws per posterior draw for the population-mean probabilities of a model with
#: query effects (Monte Carlo; the same values enter the observed and the replicated discrepancy).
_QUERY_MC = 8


def _thin(post, max_draws):
    """``post`` restricted to at most ``max_draws`` draws, evenly spaced within every chain, and their indices."""
    nch, ndr = post["shape"]
    thin = max(1, math.ceil(nch * ndr / max_draws))
    sel = (np.arange(nch)[:, None] * ndr + np.arange(0, ndr, thin)[None, :]).ravel()
    out = {k: (v[sel] if isinstance(v, np.ndarray) and v.ndim >= 1 and v.shape[0] == nch * ndr else v)
           for k, v in post.items()}
    out["shape"] = (nch, len(sel) // nch)
    return out, sel


def _beta_index(design, post, rows):
    """Flat index of the position effect of every (row, position) into ``post['beta'|'beta_cell']``."""
    D = design
    P = D.P
    if "beta_cell" in post:
        return "beta_cell", (D.row_llm[rows] * D.C + D.row_cluster[rows])[:, None] * P + np.arange(P)[None, :]
    return "beta", D.row_llm[rows][:, None] * P + np.arange(P)[None, :]


def _unit_logits(post, design, a, b, units="rows", eta=None):
    """Logits (s, U, P) of draws a:b for the design rows or for the prompts (with query effects ``eta``)."""
    D = design
    C, Kmax = D.C, D.Kmax
    rows = np.arange(len(D.y)) if units == "rows" else D.prompts.row
    mask = D.row_tools[rows] >= 0
    tools = np.where(mask, D.row_tools[rows], 0)
    cells = D.row_llm[rows] * C + D.row_cluster[rows]
    al = post["alpha"][a:b]
    al = al.reshape(al.shape[0], -1)
    name, bidx = _beta_index(D, post, rows)
    be = post[name][a:b].reshape(al.shape[0], -1)
    logits = al[:, (cells * Kmax)[:, None] + tools] + be[:, bidx]
    if eta is not None:
        q = D.prompts.query
        logits = logits + eta[:, q[:, None], tools]
    return logits, mask


def _implied_logged(post, design, chunk=256, spec=None):
    """(S, M, C) TV of tools and of positions under the logged orderings (NaN where undefined).

    Without query effects the units are the design rows (LLM, cluster, ordering); with them, the
    prompts, each with its query's effects: the choice probabilities are then those of *these*
    queries, averaged over them with their valid choices as weights. A model extension whose chooser
    is a mixture over query classes (``spec.query_classes``) gives them by ``spec.class_probs``.
    """
    D = design
    S = post["alpha"].shape[0]
    M, C, Kmax, P = D.M, D.C, D.Kmax, D.P
    by_prompt = "eta" in post
    rows = D.prompts.row if by_prompt else np.arange(len(D.y))
    mask = D.row_tools[rows] >= 0
    tools = np.where(mask, D.row_tools[rows], 0)
    cells = D.row_llm[rows] * C + D.row_cluster[rows]
    n = D.prompts.n if by_prompt else D.n
    ncell = np.bincount(cells, weights=n, minlength=M * C)
    w = n / ncell[cells]
    # positions: a cell's delta_pos needs one list length
    row_len = D.row_len[rows]
    lens = pd.DataFrame({"cell": cells, "L": row_len}).groupby("cell")["L"].agg(["min", "max"])
    uniform_len = np.zeros(M * C, dtype=bool)
    L_cell = np.zeros(M * C, dtype=np.int64)
    uniform_len[lens.index] = (lens["min"] == lens["max"]).to_numpy()
    L_cell[lens.index] = lens["max"].to_numpy()
    starts = np.r_[0, np.flatnonzero(np.diff(cells)) + 1]
    cell_ids = cells[starts]
    tv_api = np.full((S, M * C), np.nan)
    tv_pos = np.full((S, M * C), np.nan)
    K_cell = np.repeat(D.K[None, :], M, 0).ravel()[cell_ids]
    tool_valid = np.arange(Kmax)[None, :] < K_cell[:, None]
    pos_valid = np.arange(P)[None, :] < L_cell[cell_ids][:, None]
    r_idx, p_idx = np.nonzero(mask)
    name, bidx = _beta_index(D, post, rows)
    if by_prompt:
        chunk = max(1, min(chunk, 2_000_000 // (len(rows) * P)))
    for a in range(0, S, chunk):
        al = post["alpha"][a:a + chunk].reshape(-1, M * C * Kmax)
        be = post[name][a:a + chunk].reshape(al.shape[0], -1)
        s = al.shape[0]
        logits = al[:, (cells * Kmax)[:, None] + tools] + be[:, bidx]
        if by_prompt:
            logits = logits + post["eta"][a:a + chunk][:, D.prompts.query[:, None], tools]
        classes = spec.class_probs(post, a, a + chunk, rows) if getattr(spec, "query_classes", False) else None
        if classes is not None:
            # a mixture over query classes: a new query's chooser is the mixture of the classes' choosers
            pk, wk = classes
            prob = (pk * wk[:, :, None, :]).sum(-1) * w[None, :, None]
        else:
            prob = _softmax_masked(logits, mask[None]) * w[None, :, None]       # (s, U, P)
        p_pos = np.add.reduceat(prob, starts, axis=1)                           # (s, cells, P)
        by_tool = np.zeros((s, len(rows), Kmax))
        by_tool[:, r_idx, tools[r_idx, p_idx]] = prob[:, r_idx, p_idx]
        p_tool = np.add.reduceat(by_tool, starts, axis=1)                       # (s, cells, Kmax)
        u_t = 1.0 / K_cell[None, :, None]
        tv_api[a:a + s, cell_ids] = 0.5 * np.where(tool_valid[None], np.abs(p_tool - u_t), 0).sum(-1)
        u_p = 1.0 / L_cell[cell_ids][None, :, None]
        tvp = 0.5 * np.where(pos_valid[None], np.abs(p_pos - u_p), 0).sum(-1)
        tv_pos[a:a + s, cell_ids] = np.where(uniform_len[cell_ids][None], tvp, np.nan)
    return tv_api.reshape(S, M, C), tv_pos.reshape(S, M, C)


def _permutations(k, gen):
    if k <= _EXACT_PERMUTATION_K:
        return np.array(list(itertools.permutations(range(k))), dtype=np.int64), "exact"
    base = np.stack([gen.permutation(k) for _ in range(_RANDOM_BASE_PERMUTATIONS)])
    shifts = np.stack([np.roll(b, s) for b in base for s in range(k)])
    return shifts, f"{_RANDOM_BASE_PERMUTATIONS} random permutations x {k} cyclic shifts"


def _permutation_tables(k, gen):
    """The orderings averaged over (``_permutations``), ``inv[s, j]`` = position of tool j under ordering s,
    ``onehot[s, p, j]`` = 1 if tool j is at position p, and how the orderings were chosen."""
    perms, how = _permutations(k, gen)
    n_perm = len(perms)
    inv = np.argsort(perms, axis=1)
    onehot = np.zeros((n_perm, k, k))
    onehot[np.repeat(np.arange(n_perm), k), np.tile(np.arange(k), n_perm), perms.ravel()] = 1.0
    return perms, inv, onehot, how


def _implied_randomised(post, design, gen, target=2_000_000, spec=None):
    """(S, M, C) TV of tools and positions if every list were a uniformly random ordering of the cluster.

    With ``ea = exp(alpha)``, ``eb = exp(beta)`` and ordering ``s`` putting tool ``j`` at position
    ``pos_s(j)``, the denominator is ``den_s = sum_j ea_j eb_pos_s(j)``; then
    ``P(tool j) = ea_j mean_s eb_pos_s(j) / den_s`` and ``P(position p) = eb_p mean_s ea_tool_s(p) / den_s``:
    three batched matrix products per chunk of draws instead of a softmax per ordering. With
    per-cluster position effects each (LLM, cluster) has its own ``eb``; with query effects each
    query its own ``ea``, and a cell's probabilities are the mean over its queries (weighted by their
    valid choices); a mixture over query classes (``spec.query_classes``) mixes the classes'
    probabilities with their weights (``spec.randomised_classes``).
    """
    if "beta_cell" in post or "eta" in post or getattr(spec, "query_classes", False):
        return _implied_randomised_units(post, design, gen, target, spec)
    D = design
    S = post["alpha"].shape[0]
    M, C = D.M, D.C
    tv_api = np.full((S, M, C), np.nan)
    tv_pos = np.full((S, M, C), np.nan)
    methods = {}
    for k in sorted(set(D.K.tolist())):
        cg = np.flatnonzero(k == D.K)
        if k > D.P:
            methods[k] = "not computed: lists this long were never shown"
            continue
        perms, inv, onehot, methods[k] = _permutation_tables(k, gen)
        n_perm = len(perms)
        onehot = onehot.reshape(n_perm, k * k)
        chunk = max(1, target // (M * len(cg) * n_perm * k))
        for a in range(0, S, chunk):
            al = post["alpha"][a:a + chunk][:, :, cg, :k]                       # (s, M, cg, k)
            be = post["beta"][a:a + chunk][:, :, :k]                            # (s, M, k)
            ea = np.exp(al - al.max(-1, keepdims=True))
            eb = np.exp(be - be.max(-1, keepdims=True))
            ebp = eb[:, :, inv]                                                 # (s, M, n_perm, k): eb at pos_s(j)
            den = ea @ ebp.swapaxes(-1, -2)                                     # (s, M, cg, n_perm)
            w = 1.0 / den
            p_tool = ea * (w @ ebp) / n_perm                                    # (s, M, cg, k)
            q = (w @ onehot).reshape(w.shape[:-1] + (k, k))                     # [.., p, j]
            p_pos = eb[:, :, None, :] * (q @ ea[..., None])[..., 0] / n_perm    # (s, M, cg, k)
            s = al.shape[0]
            tv_api[a:a + s][:, :, cg] = 0.5 * np.abs(p_tool - 1.0 / k).sum(-1)
            tv_pos[a:a + s][:, :, cg] = 0.5 * np.abs(p_pos - 1.0 / k).sum(-1)
    return tv_api, tv_pos, methods


def _implied_randomised_units(post, design, gen, target, spec=None):
    """The randomised counterfactual with a position effect per (LLM, cluster) and/or query effects."""
    D = design
    S = post["alpha"].shape[0]
    M, C = D.M, D.C
    tv_api = np.full((S, M, C), np.nan)
    tv_pos = np.full((S, M, C), np.nan)
    methods = {}
    by_query = "eta" in post
    cc = D.cell_counts()
    for k in sorted(set(D.K.tolist())):
        cg = np.flatnonzero(k == D.K)
        if k > D.P:
            methods[k] = "not computed: lists this long were never shown"
            continue
        perms, inv, onehot, methods[k] = _permutation_tables(k, gen)
        n_perm = len(perms)
        onehot = onehot.reshape(n_perm, k * k)
        if by_query:
            pr = D.prompts
            qs = np.flatnonzero(np.isin(pr.query_cluster, cg))
            um, uc = pr.query_llm[qs], pr.query_cluster[qs]
            nq = np.bincount(pr.query, weights=pr.n, minlength=pr.Q)[qs]
        else:
            um, uc = np.repeat(np.arange(M), len(cg)), np.tile(cg, M)
            nq = cc[um, uc]
        cell = um * C + uc
        ncell = np.bincount(cell, weights=nq, minlength=M * C)
        wq = np.where(ncell[cell] > 0, nq / np.where(ncell[cell] > 0, ncell[cell], 1), 0)
        U = len(um)
        chunk = max(1, target // (U * n_perm * k))
        for a in range(0, S, chunk):
            al = post["alpha"][a:a + chunk][:, um, uc, :k]                      # (s, U, k)
            if by_query:
                al = al + post["eta"][a:a + chunk][:, qs, :k]
            if "beta_cell" in post:
                be = post["beta_cell"][a:a + chunk][:, um, uc, :k]
            else:
                be = post["beta"][a:a + chunk][:, um, :k]
            eb = np.exp(be - be.max(-1, keepdims=True))
            ebp = eb[:, :, inv]                                                 # (s, U, n_perm, k)
            if getattr(spec, "query_classes", False):
                classes = spec.randomised_classes(post, a, a + chunk, al, um, uc, cell, k)
            else:
                classes = [(al, None)]
            p_tool = p_pos = 0.0
            for alc, wc in classes:
                ea = np.exp(alc - alc.max(-1, keepdims=True))
                den = np.einsum("suk,supk->sup", ea, ebp)
                w = 1.0 / den
                pt_c = ea * np.einsum("sup,supk->suk", w, ebp) / n_perm
                q = (w @ onehot).reshape(w.shape[:-1] + (k, k))
                pp_c = eb * (q @ ea[..., None])[..., 0] / n_perm
                if wc is None:
                    p_tool, p_pos = pt_c, pp_c
                else:
                    p_tool = p_tool + wc[..., None] * pt_c
                    p_pos = p_pos + wc[..., None] * pp_c
            s = al.shape[0]
            pt_cell = np.zeros((s, M * C, k))
            pp_cell = np.zeros((s, M * C, k))
            np.add.at(pt_cell, (slice(None), cell), p_tool * wq[None, :, None])
            np.add.at(pp_cell, (slice(None), cell), p_pos * wq[None, :, None])
            pt_cell = pt_cell.reshape(s, M, C, k)[:, :, cg]
            pp_cell = pp_cell.reshape(s, M, C, k)[:, :, cg]
            tv_api[a:a + s][:, :, cg] = 0.5 * np.abs(pt_cell - 1.0 / k).sum(-1)
            tv_pos[a:a + s][:, :, cg] = 0.5 * np.abs(pp_cell - 1.0 / k).sum(-1)
    return tv_api, tv_pos, methods


# ---------------------------------------------------------------------------------------------
# posterior predictive checks
def _chi2(obs, exp, axes=(-1, -2)):
    return np.where(exp > 0, (obs - exp) ** 2 / np.where(exp > 0, exp, 1), 0).sum(axes)


def _query_tool_matrix(query, tools, n_queries, n_tools):
    """Sparse (n_queries * n_tools, U * P) matrix summing unit-position counts into query-tool totals."""
    from scipy import sparse

    U, P = tools.shape
    u, p = np.nonzero(tools >= 0)
    return sparse.csr_matrix((np.ones(len(u)), (query[u] * n_tools + tools[u, p], u * P + p)),
                             shape=(n_queries * n_tools, U * P))


def query_dispersion(y: np.ndarray, expected: np.ndarray, query: np.ndarray, tools: np.ndarray, n_queries: int,
                     n_tools: int, groups: np.ndarray | None = None) -> np.ndarray:
    """Per-query dispersion: Pearson chi-square of every query's tool counts against their expectation.

    Parameters
    ----------
    y, expected : ndarray (..., U, P)
        Choices and expected choices per unit (prompt) and position.
    query : ndarray (U,)
        The query of each unit.
    tools : ndarray (U, P)
        The tool (index within the cluster) shown at each position; -1 = not shown.
    n_queries, n_tools : int
    groups : ndarray (n_queries,), optional
        Group of each query (e.g. its LLM): the statistic is then returned per group.

    Returns
    -------
    ndarray (...,) or (..., n_groups)
        ``T = sum over queries q and tools j of (t[q, j] - E[q, j])^2 / E[q, j]``, where ``t[q, j]``
        counts the choices of tool ``j`` over all of query ``q``'s orderings and runs and
        ``E[q, j]`` its expectation (cells with ``E = 0`` are skipped).

    Examples
    --------
    One query, three tools shown in two orderings, two attempts each:

    >>> y = np.array([[2, 0, 0], [0, 1, 1]])          # first slot twice; then the 2nd and 3rd slot
    >>> E = np.full((2, 3), 2 / 3)                     # a uniform chooser
    >>> tools = np.array([[0, 1, 2], [2, 0, 1]])       # tools shown at positions 1..3
    >>> round(float(query_dispersion(y, E, np.array([0, 0]), tools, 1, 3)), 6)   # t = (3, 1, 0), E = 4/3
    3.5
    """
    y = np.asarray(y, dtype=float)
    expected = np.broadcast_to(np.asarray(expected, dtype=float), y.shape)
    query = np.asarray(query)
    tools = np.asarray(tools)
    lead = y.shape[:-2]
    A = _query_tool_matrix(query, tools, n_queries, n_tools)
    t = np.asarray(A @ y.reshape(-1, A.shape[1]).T).T
    e = np.asarray(A @ expected.reshape(-1, A.shape[1]).T).T
    contrib = np.where(e > 0, (t - e) ** 2 / np.where(e > 0, e, 1), 0).reshape(-1, n_queries, n_tools).sum(-1)
    if groups is None:
        return contrib.sum(-1).reshape(lead)
    groups = np.asarray(groups)
    n_groups = int(np.max(groups)) + 1
    G = np.zeros((n_queries, n_groups))
    G[np.arange(n_queries), groups] = 1.0
    return (contrib @ G).reshape(lead + (n_groups,))


def _take(post, draws):
    return {k: (v[draws] if isinstance(v, np.ndarray) and v.ndim >= 1 else v) for k, v in post.items()
            if k != "eta"}


def _polya(p, n, kappa, gen):
    """Dirichlet-multinomial draws by the Polya urn: (s, U, P) counts of n[u] attempts with Dirichlet(kappa p).

    Attempt t of a unit picks category j with probability (kappa p_j + c_j) / (kappa + t), c = its
    earlier picks; ``kappa = None`` is the multinomial (independent attempts). The categories are
    walked one at a time on (s, U) planes: the same running sums, divisions and comparisons as a
    cumulative sum over the last axis (so the same picks for a seed), without its strided passes.
    """
    s, U, P = p.shape
    n_max = int(n.max()) if len(n) else 0
    p_t = np.moveaxis(p, -1, 0)                                                 # (P, s, U) views
    counts = np.zeros((P, s, U))
    base = np.cumsum(p_t, 0) if kappa is None else kappa[None] * p_t
    for t in range(n_max):
        live = n > t
        u = gen.random((s, U, 1))[..., 0]
        if kappa is None:
            pick = (u > base[0]).astype(np.intp)
            for j in range(1, P):
                pick += u > base[j]
        else:
            denom = kappa + t
            acc = base[0] + counts[0]
            pick = (u > acc / denom).astype(np.intp)
            for j in range(1, P):
                acc += base[j] + counts[j]
                pick += u > acc / denom
        np.minimum(pick, P - 1, out=pick)
        for j in range(P):
            counts[j] += (pick == j) & live
    return np.moveaxis(counts, 0, -1)


def _prompt_draws(post, spec, sel, gen, dirichlet=None, fresh_queries=None, batch=50):
    """Yield ``(y_rep, E)`` (b, Rq, P) for batches of the posterior draws in ``sel``: one replication of
    every prompt and its population-mean expectation.

    A Dirichlet-multinomial (``spec.dm``) replicates a prompt's runs by the Polya urn with
    concentration kappa p; with query effects (``spec.qe``) every query gets fresh effects from the
    fitted population (a new query, ``spec.fresh_eta``), and ``E`` averages the probabilities over
    further fresh draws. A model extension may give its own probabilities (``spec.prompt_probs``) and
    replications (``spec.replicate_prompts``).
    """
    D = spec.design
    pr = D.prompts
    n = pr.n.astype(np.int64)
    dirichlet = spec.dm if dirichlet is None else dirichlet
    fresh_queries = spec.qe if fresh_queries is None else fresh_queries
    mask = D.row_tools[pr.row] >= 0
    for a in range(0, len(sel), batch):
        draws = sel[a:a + batch]
        sub = _take(post, draws)
        b = len(draws)
        own = spec.prompt_probs(sub, b, gen) if dirichlet and getattr(spec, "query_classes", False) else None
        if own is not None:
            p, E = own
        elif fresh_queries:
            p = np.empty((b, len(n), D.P))
            E = np.empty((b, len(n), D.P))
            for i, s in enumerate(draws):
                one = _take(post, np.full(1 + _QUERY_MC, s))
                fresh = spec.fresh_eta(post, np.full(1 + _QUERY_MC, s), gen)
                logits, _ = _unit_logits(one, D, 0, 1 + _QUERY_MC, "prompts", eta=fresh)
                probs = _softmax_masked(logits, mask[None])
                p[i], E[i] = probs[0], n[:, None] * probs[1:].mean(0)
        else:
            logits, _ = _unit_logits(sub, D, 0, b, "rows")
            p_row = _softmax_masked(logits, (D.row_tools >= 0)[None])
            p = p_row[:, pr.row]
            E = n[None, :, None] * p
        kap = post["kappa"][draws][:, D.row_llm[pr.row], D.row_cluster[pr.row]] if dirichlet else None
        rep = spec.replicate_prompts(post, draws, p, kap, gen) if dirichlet else None
        yield (_polya(p, n, kap, gen) if rep is None else rep), E


def _cluster_position_check(D, yrep, E, prob_hdi):
    """The cluster x position table (all LLMs and orderings): observed and replicated counts and the
    chi-square posterior predictive p-value."""
    C, P = D.C, D.P
    onehot = np.zeros((C, len(D.y)))
    onehot[D.row_cluster, np.arange(len(D.y))] = 1
    obs_cp = onehot @ D.y                                                       # (C, P)
    rep_cp = np.einsum("cr,srp->scp", onehot, yrep)
    E_cp = np.einsum("cr,srp->scp", onehot, E)
    p_cp = float(np.mean(_chi2(rep_cp, E_cp) >= _chi2(obs_cp[None], E_cp)))
    lo, hi = _hdi(rep_cp, prob_hdi)
    shown = np.zeros((C, P), dtype=bool)
    for c in range(C):
        shown[c, : D.row_len[D.row_cluster == c].max()] = True
    cs, ps = np.nonzero(shown)
    table = pd.DataFrame({"cluster": [D.clusters[c] for c in cs], "position": ps + 1,
                          "observed": obs_cp[cs, ps], "replicated_mean": rep_cp.mean(0)[cs, ps],
                          "replicated_low": lo[cs, ps], "replicated_high": hi[cs, ps]})
    return table, p_cp


def _ppc(post, spec, gen, prob_hdi, max_draws=1000, max_prompt_draws=250):
    """Posterior predictive checks; returns (PosteriorPredictiveCheck, row-level y_rep, draw indices).

    Without per-prompt terms in the model (v1) the replications are one multinomial
    per design row, exactly as in v1; the per-query dispersion (when the log's rows are available)
    then uses separate per-prompt multinomial replications of at most ``max_prompt_draws`` draws,
    drawn after everything else. With a Dirichlet-multinomial and/or query effects every prompt is
    replicated (with fresh query effects: new queries from the fitted population) for at most
    ``max_prompt_draws`` draws, and the row tables are sums over the prompts.
    """
    from scipy import sparse

    from ._result import PosteriorPredictiveCheck

    D = spec.design
    nch, ndr = post["shape"]
    by_prompt = spec.dm or spec.qe
    thin = max(1, math.ceil(nch * ndr / (max_prompt_draws if by_prompt else max_draws)))
    sel = (np.arange(nch)[:, None] * ndr + np.arange(0, ndr, thin)[None, :]).ravel()
    C, Kmax, P = D.C, D.Kmax, D.P
    t_disp = None
    if D.prompts is not None:
        pr = D.prompts
        Aq = _query_tool_matrix(pr.query, D.row_tools[pr.row], pr.Q, Kmax)
        Gq = np.zeros((pr.Q, D.M))
        Gq[np.arange(pr.Q), pr.query_llm] = 1.0
        t_obs_q = np.asarray(Aq @ pr.y.ravel()).ravel()

        def disp(yq, Eq):
            """(b, 2, M): dispersion of the observed and the replicated prompts per LLM."""
            b = yq.shape[0]
            e = np.asarray(Aq @ Eq.reshape(b, -1).T).T
            t = np.asarray(Aq @ yq.reshape(b, -1).T).T
            out = []
            for tt in (np.broadcast_to(t_obs_q, t.shape), t):
                c = np.where(e > 0, (tt - e) ** 2 / np.where(e > 0, e, 1), 0).reshape(b, pr.Q, Kmax).sum(-1)
                out.append(c @ Gq)
            return np.stack(out, 1)
    if not by_prompt:
        mask = D.row_tools >= 0
        tools = np.where(mask, D.row_tools, 0)
        cells = D.row_llm * C + D.row_cluster
        al = post["alpha"][sel].reshape(len(sel), -1)
        name, bidx = _beta_index(D, post, np.arange(len(D.y)))
        be = post[name][sel].reshape(len(sel), -1)
        logits = al[:, (cells * Kmax)[:, None] + tools] + be[:, bidx]
        p = _softmax_masked(logits, mask[None])                                 # (s, R, P)
        n = D.n.astype(np.int64)
        yrep = gen.multinomial(n, p)                                            # (s, R, P)
        E = n[None, :, None] * p
    else:
        R = len(D.y)
        u, q = np.nonzero(np.ones((len(pr.row), P), dtype=bool))
        to_rows = sparse.csr_matrix((np.ones(len(u)), (pr.row[u] * P + q, u * P + q)),
                                    shape=(R * P, len(pr.row) * P))
        yrep = np.zeros((len(sel), R, P), dtype=np.int64)
        E = np.zeros((len(sel), R, P))
        t_disp = np.zeros((len(sel), 2, D.M))
        i = 0
        for yq, Eq in _prompt_draws(post, spec, sel, gen):
            b = yq.shape[0]
            yrep[i:i + b] = np.rint(np.asarray(to_rows @ yq.reshape(b, -1).T).T.reshape(b, R, P)).astype(np.int64)
            E[i:i + b] = np.asarray(to_rows @ Eq.reshape(b, -1).T).T.reshape(b, R, P)
            t_disp[i:i + b] = disp(yq, Eq)
            i += b

    t_obs = _chi2(D.y[None], E)
    t_rep = _chi2(yrep, E)
    p_rows = float(np.mean(t_rep >= t_obs))
    table, p_cp = _cluster_position_check(D, yrep, E, prob_hdi)
    disp_table, p_disp = None, np.nan
    if D.prompts is not None:
        if t_disp is None:
            thin_q = max(1, math.ceil(nch * ndr / max_prompt_draws))
            sel_q = (np.arange(nch)[:, None] * ndr + np.arange(0, ndr, thin_q)[None, :]).ravel()
            t_disp = np.concatenate([disp(yq, Eq) for yq, Eq in _prompt_draws(post, spec, sel_q, gen, dirichlet=False,
                                                                               fresh_queries=False)])
        disp_table, p_disp = _dispersion_table(D, t_disp, prob_hdi)
    check = PosteriorPredictiveCheck(table=table, p_value=p_cp, p_value_rows=p_rows, n_draws=len(sel),
                                     p_value_dispersion=p_disp, dispersion=disp_table)
    return check, yrep, sel


def _dispersion_table(D, t, prob_hdi):
    """Per-query dispersion, observed and replicated, per LLM and overall; the overall PPC p-value."""
    n_q = np.bincount(D.prompts.query_llm, minlength=D.M)
    rows = []
    t_obs, t_rep = t[:, 0], t[:, 1]                                             # (s, M)
    labels = list(D.llms) + ["(all)"]
    t_obs = np.concatenate([t_obs, t_obs.sum(-1, keepdims=True)], -1)
    t_rep = np.concatenate([t_rep, t_rep.sum(-1, keepdims=True)], -1)
    for m, lab in enumerate(labels):
        lo, hi = _hdi(t_rep[:, m], prob_hdi)
        rows.append({"llm": lab, "queries": int(n_q[m]) if m < D.M else int(n_q.sum()),
                     "observed": float(t_obs[:, m].mean()), "replicated_mean": float(t_rep[:, m].mean()),
                     "replicated_low": float(lo), "replicated_high": float(hi),
                     "ratio": float(t_obs[:, m].mean() / t_rep[:, m].mean()) if t_rep[:, m].mean() > 0 else np.nan,
                     "p_value": float(np.mean(t_rep[:, m] >= t_obs[:, m]))})
    return pd.DataFrame(rows), rows[-1]["p_value"]
