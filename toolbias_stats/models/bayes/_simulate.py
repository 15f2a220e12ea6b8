"""Simulated selection logs with known effects: tests, parameter recovery and calibration (SBC)."""

from __future__ import annotations

import numbers
from typing import TYPE_CHECKING, Literal

import numpy as np
import pandas as pd

from ..._validation import check_rng
from ._common import _zerosum_extend

if TYPE_CHECKING:
    from collections.abc import Sequence

    from numpy.typing import ArrayLike

    from ...io import SelectionLog

__all__ = ["simulate_bayes_log"]


def simulate_bayes_log(alpha: ArrayLike | Sequence[ArrayLike], beta: ArrayLike, *, n_per_ordering: int = 20,
                        orderings: Literal["rotations", "random", "fixed"] | int = "rotations",
                        rng: np.random.Generator | int | None = None, model_names: Sequence[str] | None = None,
                        queries: int | None = None, runs: int = 1, kappa: float | ArrayLike | None = None,
                        sigma_eta: float | ArrayLike | None = None, eta: Sequence[ArrayLike] | None = None,
                        kappa_level: Literal["prompt", "query"] = "prompt", gamma: float = 1.0) -> SelectionLog:
    """Simulate a SelectionLog from the model itself, with known API and position effects.

    Named ``simulate_choice_log`` until 0.1.0, as was the choice model's simulator (now
    :func:`toolbias_stats.choicemodel.simulate_logit_log`); ``toolbias_stats.models.simulate_choice_log`` still
    works for one release with a :class:`DeprecationWarning`.

    Parameters
    ----------
    alpha : array_like of shape (M, C, K) or list of (M, K_c) arrays
        API effects per LLM, cluster and tool (any shift within a cluster is irrelevant). A list
        gives clusters of different sizes.
    beta : array_like of shape (M, P) or (M, C, P)
        Position effects per LLM (``P >= max K``), or per LLM and cluster (the per-cluster
        position effects of ``model="v2"``).
    n_per_ordering : int, default 20
        Attempts per (LLM, cluster, ordering); each attempt is one query shown in that ordering.
        Ignored when ``queries`` is given.
    orderings : {"rotations", "random", "fixed"} or int, default "rotations"
        ``"rotations"``: the K cyclic rotations of the catalog order; ``"random"``: a fresh
        uniformly random permutation per attempt (with ``queries``: per prompt); ``"fixed"``: always
        the catalog order; an int ``r``: r random permutations, each shown ``n_per_ordering`` times
        (with ``queries``: every query is shown in each of them).
    rng : None, int or numpy.random.Generator
    model_names : list of str, optional
        LLM names (default ``"llm1"``, ``"llm2"``, ...).
    queries : int, optional
        Query-level design (as in BiasBusters): ``queries`` queries per (LLM, cluster), each shown in
        every ordering ``runs`` times (a prompt = a query in an ordering). Needed for ``kappa`` and
        query effects.
    runs : int, default 1
        Repeated attempts of every prompt (column ``run`` = 1..runs).
    kappa : float or array_like of shape (M,) or (M, C), optional
        Dirichlet-multinomial concentration: every prompt draws its choice probabilities from
        Dirichlet(kappa[m, c] * p) once, and its ``runs`` attempts choose from them (intra-prompt
        correlation ``1 / (1 + kappa)``). None: independent attempts (the multinomial).
    sigma_eta : float or array_like of shape (M,), optional
        Scale of query effects: every query gets zero-sum normal effects on its cluster's tools
        (``eta = sigma_eta[m] * ZeroSumNormal(1)``), shared by all its orderings and runs.
    eta : list of arrays (M, queries, K_c) per cluster, optional
        Query effects given explicitly (instead of ``sigma_eta``).
    kappa_level : {"prompt", "query"}, default "prompt"
        ``"query"``: ``kappa`` is the concentration of the query-level urn of ``model="query-urn"`` instead:
        a query's attempts (its orderings sorted as the log's strings, then runs) are taken in turn, and
        attempt ``i`` picks the tool of each earlier attempt with probability ``1 / (kappa + i)`` each,
        else (probability ``kappa / (kappa + i)``) draws from its own ordering's chooser.
    gamma : float, default 1.0
        With ``kappa_level="query"``: the weight of an earlier attempt of the query's *other* orderings
        relative to one of the same prompt (1 = the same, 0 = the prompt-level Dirichlet-multinomial).

    Returns
    -------
    SelectionLog
        Tools are named ``"c{c}_t{j}"`` (cluster ``"c"`` + 1-based index); positions 1-based.

    Examples
    --------
    >>> log = simulate_bayes_log(np.zeros((1, 2, 3)), np.zeros((1, 3)), n_per_ordering=2, rng=0)
    >>> len(log), sorted(log.data["cluster_id"].unique())
    (12, ['1', '2'])
    >>> log = simulate_bayes_log(np.zeros((1, 1, 3)), np.zeros((1, 3)), queries=4, runs=3, kappa=1.0, rng=0)
    >>> len(log), log.data["query_id"].nunique(), sorted(int(r) for r in log.data["run"].unique())
    (36, 4, [1, 2, 3])
    """
    beta = np.asarray(beta, dtype=float)
    if kappa_level not in ("prompt", "query"):
        raise ValueError(f"`kappa_level` must be 'prompt' or 'query'; got {kappa_level!r} instead.")
    if queries is None and kappa is None and sigma_eta is None and eta is None and runs == 1 and beta.ndim == 2:
        return _simulate_v1(alpha, beta, n_per_ordering=n_per_ordering, orderings=orderings, rng=rng,
                            model_names=model_names)
    return _simulate_queries(alpha, beta, orderings=orderings, rng=rng, model_names=model_names,
                             queries=queries, runs=runs, kappa=kappa, sigma_eta=sigma_eta, eta=eta,
                             kappa_level=kappa_level, gamma=gamma,
                             n_per_ordering=n_per_ordering)


def _per_cluster(alpha) -> list:
    """``alpha`` as one (M, K_c) array per cluster: from an (M, C, K) array or a list of (M, K_c) arrays."""
    if isinstance(alpha, (list, tuple)) and not np.isscalar(alpha[0]) and np.ndim(alpha[0]) == 2:
        return [np.asarray(a, dtype=float) for a in alpha]
    a = np.asarray(alpha, dtype=float)
    if a.ndim != 3:
        raise ValueError(f"`alpha` must have shape (M, C, K) or be a list of (M, K_c) arrays; "
                         f"got shape {a.shape} instead.")
    return [a[:, c, :] for c in range(a.shape[1])]


def _simulated_catalog(per_cluster):
    """A catalog with clusters "1", "2", ... and tools ``c{cluster}_t{j}``, one per column of each alpha."""
    from ...io import ToolCatalog

    records = [{"cluster_id": str(c + 1), "tool_name": f"c{c + 1}_t{j + 1}", "api_name": "endpoint",
                "num_parameters": 1} for c, a in enumerate(per_cluster) for j in range(a.shape[1])]
    return ToolCatalog.from_records(records, source="<simulated>")


def _simulate_v1(alpha, beta, *, n_per_ordering=20, orderings="rotations", rng=None, model_names=None):
    """The main-effects simulation of v1 (the same seed gives the same log as in the first version)."""
    from ...io import SelectionLog

    gen = check_rng(rng)
    per_cluster = _per_cluster(alpha)
    beta = np.asarray(beta, dtype=float)
    M = per_cluster[0].shape[0]
    if beta.ndim != 2 or beta.shape[0] != M or beta.shape[1] < max(p.shape[1] for p in per_cluster):
        raise ValueError(f"`beta` must have shape (M, P) with M = {M} and P >= the largest K; "
                         f"got shape {beta.shape} instead.")
    names = list(model_names) if model_names is not None else [f"llm{m + 1}" for m in range(M)]
    catalog = _simulated_catalog(per_cluster)
    frames = []
    for c, a in enumerate(per_cluster):
        k = a.shape[1]
        tools = np.array(catalog.tools(str(c + 1)), dtype=object)
        for m in range(M):
            if orderings == "rotations":
                perms = np.stack([np.roll(np.arange(k), -r) for r in range(k)])
                perms = np.repeat(perms, n_per_ordering, axis=0)
            elif orderings == "fixed":
                perms = np.repeat(np.arange(k)[None], n_per_ordering, axis=0)
            elif orderings == "random":
                perms = np.stack([gen.permutation(k) for _ in range(n_per_ordering * k)])
            elif isinstance(orderings, numbers.Integral) and not isinstance(orderings, bool) and orderings >= 1:
                base = np.stack([gen.permutation(k) for _ in range(int(orderings))])
                perms = np.repeat(base, n_per_ordering, axis=0)
            else:
                raise ValueError("`orderings` must be 'rotations', 'random', 'fixed' or a positive int; "
                                 f"got {orderings!r} instead.")
            logits = a[m][perms] + beta[m, :k][None, :]
            p = np.exp(logits - logits.max(1, keepdims=True))
            p /= p.sum(1, keepdims=True)
            u = gen.random(len(perms))
            pos = np.minimum((u[:, None] > np.cumsum(p, 1)).sum(1), k - 1)
            chosen = tools[perms[np.arange(len(perms)), pos]]
            frames.append(pd.DataFrame({
                "model": names[m], "cluster_id": str(c + 1), "query_id": [str(i + 1) for i in range(len(perms))],
                "ordering": ["|".join(tools[p_]) for p_ in perms], "chosen_tool": chosen,
                "chosen_position": pos + 1, "status": "ok"}))
    frame = pd.concat(frames, ignore_index=True)
    frame["source_file"] = "<simulated>"
    return SelectionLog.from_frame(frame, catalog, source="<simulated>")


def _dirichlet(gen, a):
    """Dirichlet draws (one per row of ``a``), stable for tiny concentrations.

    Gamma(a) = Gamma(a + 1) * U^(1/a), so log Gamma(a) = log Gamma(a + 1) + log(U) / a, normalised
    in log space: no underflow to an all-zero vector when a is small.
    """
    logg = np.log(gen.standard_gamma(a + 1.0)) + np.log(gen.random(a.shape)) / a
    logg -= logg.max(-1, keepdims=True)
    g = np.exp(logg)
    return g / g.sum(-1, keepdims=True)


def _urn_choices(gen, p, perms, q, n_q, kappa, gamma, runs, names):
    """Positions (prompts, runs) chosen under the query-level urn; prompts of a query taken in the order
    of their ordering strings ``names`` (as the fitted model's design rows are)."""
    U, k = p.shape
    pos = np.zeros((U, runs), dtype=np.int64)
    c = np.zeros((n_q, k))
    rank = np.empty(U, dtype=np.int64)
    rank[sorted(range(U), key=lambda i: names[i])] = np.arange(U)
    order = np.lexsort((rank, q))
    for u in order:
        same = np.zeros(k)
        for r in range(runs):
            w = kappa * p[u] + same + gamma * (c[q[u], perms[u]] - same)
            j = min(int((gen.random() * w.sum() > np.cumsum(w)).sum()), k - 1)
            pos[u, r] = j
            c[q[u], perms[u, j]] += 1
            same[j] += 1
    return pos


def _check_query_args(per_cluster, beta, queries, runs, kappa, sigma_eta, gamma, n_per_ordering):
    """Validate the query simulator's arguments; returns ``(beta (M, C, P), queries, kappa (M, C) or None,
    sigma_eta (M,) or None, gamma)``."""
    M, C = per_cluster[0].shape[0], len(per_cluster)
    kmax = max(p.shape[1] for p in per_cluster)
    if beta.ndim == 2:
        beta = np.repeat(beta[:, None, :], C, axis=1)
    if beta.ndim != 3 or beta.shape[:2] != (M, C) or beta.shape[2] < kmax:
        raise ValueError(f"`beta` must have shape (M, P) or (M, C, P) with M = {M}, C = {C} and P >= the largest "
                         f"K; got shape {beta.shape} instead.")
    if queries is None:
        queries = n_per_ordering
    for name, v, low in (("queries", queries, 1), ("runs", runs, 1)):
        if isinstance(v, bool) or not isinstance(v, numbers.Integral) or v < low:
            raise ValueError(f"`{name}` must be an integer >= {low}; got {v!r} instead.")

    def per_llm(name, v):
        if v is None:
            return None
        arr = np.broadcast_to(np.asarray(v, dtype=float), (M,))
        if not np.all(np.isfinite(arr)) or np.any(arr <= 0 if name == "kappa" else arr < 0):
            raise ValueError(f"`{name}` must be {'positive' if name == 'kappa' else 'non-negative'}; got {v!r}.")
        return arr

    if not (np.isscalar(gamma) and 0 <= float(gamma) <= 1):
        raise ValueError(f"`gamma` must be a number in [0, 1]; got {gamma!r} instead.")
    if kappa is not None and np.ndim(kappa) == 2:
        kap2 = np.asarray(kappa, dtype=float)
        if kap2.shape != (M, C) or not np.all(np.isfinite(kap2)) or np.any(kap2 <= 0):
            raise ValueError(f"`kappa` must be positive with shape (M,) or (M, C) = ({M}, {C}); got {kappa!r}.")
    else:
        k1 = per_llm("kappa", kappa)
        kap2 = None if k1 is None else np.repeat(k1[:, None], C, axis=1)
    return beta, queries, kap2, per_llm("sigma_eta", sigma_eta), float(gamma)


def _cell_query_effects(eta, se, c, m, M, queries, k, gen):
    """The query effects (queries, K) of LLM ``m`` in cluster ``c``: given, drawn with scale ``se[m]``, or zero."""
    if eta is not None:
        e = np.asarray(eta[c], dtype=float)[m]
        if e.shape != (queries, k):
            raise ValueError(f"`eta[{c}]` must have shape (M, queries, K) = ({M}, {queries}, {k}); "
                             f"got {np.asarray(eta[c]).shape} instead.")
        return e
    if se is not None:
        return se[m] * _zerosum_extend(gen.normal(0.0, 1.0, (queries, k - 1)), np)
    return np.zeros((queries, k))


def _prompt_orderings(orderings, k, queries, gen):
    """(queries per prompt, permutations per prompt): every query in every base ordering, or random lists."""
    if orderings == "rotations":
        base = np.stack([np.roll(np.arange(k), -r) for r in range(k)])
    elif orderings == "fixed":
        base = np.arange(k)[None]
    elif orderings == "random":
        base = None
    elif isinstance(orderings, numbers.Integral) and not isinstance(orderings, bool) and orderings >= 1:
        base = np.stack([gen.permutation(k) for _ in range(int(orderings))])
    else:
        raise ValueError("`orderings` must be 'rotations', 'random', 'fixed' or a positive int; "
                         f"got {orderings!r} instead.")
    n_ord = k if base is None else len(base)
    q = np.repeat(np.arange(queries), n_ord)                                       # one row per prompt
    perms = np.stack([gen.permutation(k) for _ in range(len(q))]) if base is None else np.tile(base, (queries, 1))
    return q, perms


def _prompt_choices(gen, p, perms, q, queries, kappa, kappa_level, gamma, runs, tools):
    """Chosen positions (prompts, runs): the query urn, a Dirichlet per prompt, or independent runs."""
    if kappa is not None and kappa_level == "query":
        names_u = np.array(["|".join(tools[p_]) for p_ in perms], dtype=object)
        return _urn_choices(gen, p, perms, q, queries, kappa, gamma, runs, names_u)
    if kappa is not None:
        p = _dirichlet(gen, kappa * p)
    cum = np.cumsum(p, 1)
    u = gen.random((len(q), runs))
    return np.minimum((u[:, :, None] > cum[:, None, :]).sum(-1), p.shape[1] - 1)


def _simulate_queries(alpha, beta, *, orderings, rng, model_names, queries, runs, kappa, sigma_eta, eta,
                      n_per_ordering, kappa_level="prompt", gamma=1.0):
    from ...io import SelectionLog

    gen = check_rng(rng)
    per_cluster = _per_cluster(alpha)
    M = per_cluster[0].shape[0]
    beta, queries, kap2, se, urn_gamma = _check_query_args(per_cluster, beta, queries, runs, kappa, sigma_eta,
                                                           gamma, n_per_ordering)
    names = list(model_names) if model_names is not None else [f"llm{m + 1}" for m in range(M)]
    catalog = _simulated_catalog(per_cluster)
    frames = []
    for c, a in enumerate(per_cluster):
        k = a.shape[1]
        tools = np.array(catalog.tools(str(c + 1)), dtype=object)
        for m in range(M):
            e = _cell_query_effects(eta, se, c, m, M, queries, k, gen)
            q, perms = _prompt_orderings(orderings, k, queries, gen)
            logits = a[m][perms] + e[q[:, None], perms] + beta[m, c, :k][None, :]
            p = np.exp(logits - logits.max(1, keepdims=True))
            p /= p.sum(1, keepdims=True)
            kap = None if kap2 is None else kap2[m, c]
            pos = _prompt_choices(gen, p, perms, q, queries, kap, kappa_level, urn_gamma, runs, tools)
            rows = np.repeat(np.arange(len(q)), runs)
            pos = pos.ravel()
            frames.append(pd.DataFrame({
                "model": names[m], "run": np.tile(np.arange(1, runs + 1), len(q)), "cluster_id": str(c + 1),
                "query_id": [str(i + 1) for i in q[rows]], "ordering": ["|".join(tools[p_]) for p_ in perms[rows]],
                "chosen_tool": tools[perms[rows, pos]], "chosen_position": pos + 1, "status": "ok"}))
    frame = pd.concat(frames, ignore_index=True)
    frame["source_file"] = "<simulated>"
    return SelectionLog.from_frame(frame, catalog, source="<simulated>")
