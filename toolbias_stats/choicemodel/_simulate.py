"""Simulate selection logs from the choice model (recovery, coverage and tests)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from .._validation import check_rng

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

    from ..io import SelectionLog

__all__ = ["simulate_logit_log"]


def simulate_logit_log(*, n_tools: int = 8, set_size: int = 4, n_queries: int = 200, n_lists: int = 4,
                        n_runs: int = 1, worths: ArrayLike | None = None, positions: ArrayLike | None = None,
                        features: ArrayLike | None = None, beta: ArrayLike | None = None, query_sd: float = 0.0,
                        model: str = "sim", rng: np.random.Generator | int | None = None) -> SelectionLog:
    """A SelectionLog drawn from the conditional / mixed logit.

    Each query shows a random subset of ``set_size`` of the ``n_tools`` tools (so tools are shared across
    many different sets), in ``n_lists`` random orders, ``n_runs`` times each. Utility: ``worth[t] +
    position[p] + features[t] @ beta + u[q, t]`` with ``u ~ N(0, query_sd²)`` per query and tool.

    Named ``simulate_choice_log`` until 0.1.0, as was the Bayesian model's simulator (now
    :func:`toolbias_stats.models.simulate_bayes_log`); ``toolbias_stats.choicemodel.simulate_choice_log`` still
    works for one release with a :class:`DeprecationWarning`.

    Parameters
    ----------
    n_tools, set_size, n_queries, n_lists, n_runs : int
    worths : array (n_tools,), optional
        Default ``linspace(-1, 1)`` shifted so the first tool is 0 (the reference).
    positions : array (set_size,), optional
        Log-odds of positions 1..K (first 0); default ``[0, -0.4, -0.6, -0.3, ...]``.
    features : array (n_tools, m), optional
        Tool features; with ``beta`` (m,) they add ``features @ beta`` to the worths.
    query_sd : float, default 0
    model : str
    rng : None, int or Generator

    Returns
    -------
    SelectionLog
        One cluster ``"all"`` in a catalog of ``t1 .. tN`` (tools shared by every list); the true values are
        in ``log.diagnostics["truth"]``.

    Examples
    --------
    >>> log = simulate_logit_log(n_tools=4, set_size=3, n_queries=5, rng=0)
    >>> len(log.data), log.data["ordering"].iloc[0]          # 5 queries x 4 lists, 3 of the 4 tools each
    (20, 't3|t2|t4')
    >>> log.diagnostics["truth"]["positions"].tolist()        # the true position log-odds (position 1: 0)
    [0.0, -0.4, -0.6]
    """
    from ..io import SelectionLog, ToolCatalog

    rng = check_rng(rng)
    tools = [f"t{i + 1}" for i in range(n_tools)]
    if worths is None:
        worths = np.linspace(0, 1.2, n_tools) - np.linspace(0, 1.2, n_tools)[::-1] * 0.5
        worths = worths - worths[0]
    worths = np.asarray(worths, float)
    if positions is None:
        positions = np.array([0.0, -0.4, -0.6, -0.3, -0.5, -0.2, -0.4, -0.1][:set_size])
    positions = np.asarray(positions, float)
    total = worths.copy()
    if features is not None:
        total = total + np.asarray(features, float) @ np.asarray(beta, float)
    recs: list[dict[str, Any]] = []
    for q in range(n_queries):
        shown = rng.choice(n_tools, size=set_size, replace=False)
        u_q = rng.normal(0.0, query_sd, n_tools) if query_sd > 0 else np.zeros(n_tools)
        for li in range(n_lists):
            order = rng.permutation(shown)
            v = total[order] + positions + u_q[order]
            p = np.exp(v - v.max())
            p /= p.sum()
            for r in range(n_runs):
                j = int(rng.choice(set_size, p=p))
                recs.append(dict(model=model, run=r + 1, condition="base", list_id=li + 1, cluster_id="all",
                                 query_id=str(q + 1), ordering="|".join(tools[i] for i in order),
                                 n_candidates=set_size, chosen_tool=tools[order[j]], chosen_position=j + 1,
                                 status="ok", raw_choice=None, source_file="<simulated>", source_row=len(recs) + 1))
    catalog = ToolCatalog(pd.DataFrame({"tool_id": tools, "cluster_id": "all", "api_index": range(1, n_tools + 1)}))
    log = SelectionLog.from_frame(pd.DataFrame(recs), catalog, source="<simulated>")
    truth = dict(worths=worths, positions=positions, beta=None if beta is None else np.asarray(beta, float),
                 query_sd=query_sd)
    return SelectionLog(log.data, log.catalog, {"truth": truth})
