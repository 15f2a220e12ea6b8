"""Seeded NumPy simulator of tool-selection studies for the statistical audit of `selection_bias` (issue 21).

Used by `analyses/bias_audit.py` (the large runs behind docs/guide/metrics.md) and by the small simulation tests in
`tests/metrics/test_bias_audit.py` (which load this file by path). Independent of `toolbias_stats.simulate`: the
per-query choosers are written out here.

A study has C clusters of K tools, Q queries per cluster, S runs and R attempts per query and run (one per
rotation; positions are not simulated, so only delta_API is reported). Query ``q`` of a cluster chooses from

    p_q = (1 - h) * p_c + h * e_{f_q}

where ``p_c`` is a permutation of the chooser ``p`` (drawn per cluster), ``f_q`` the query's favourite tool, drawn
uniformly at random (so favourites are balanced only on average) and ``h`` the share of the query's attempts that go
to its favourite ("query heterogeneity"). The true delta_API of cluster c (the population of queries) is
``TV((1 - h) p_c + h / K, U) = (1 - h) TV(p, U)``; ``h = 0`` gives independent attempts.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from toolbias_stats import ToolCatalog
from toolbias_stats._schema import STATUSES
from toolbias_stats.io._counts import SelectionCounts, finalize_table, position_columns, tool_columns

__all__ = ["simulate_counts", "true_delta", "catalog_for"]

_CATALOGS: dict = {}


def catalog_for(n_clusters: int, k: int) -> ToolCatalog:
    """A catalog of ``n_clusters`` clusters of ``k`` tools (cached)."""
    key = (n_clusters, k)
    if key not in _CATALOGS:
        _CATALOGS[key] = ToolCatalog.from_records(
            [{"cluster_id": f"c{c + 1}", "tool_id": f"c{c + 1}_t{j + 1}", "api_index": j + 1}
             for c in range(n_clusters) for j in range(k)])
    return _CATALOGS[key]


def true_delta(p, h: float = 0.0) -> float:
    """True delta_API (mean over clusters of TV to uniform) of the simulator's population of queries."""
    p = np.asarray(p, dtype=float)
    return float((1 - h) * 0.5 * np.abs(p - 1 / p.size).sum())


def simulate_counts(p, *, n_clusters=5, n_queries=40, n_runs=1, n_rotations=5, h=0.0, rng) -> SelectionCounts:
    """Query-level counts of one simulated study (see the module docstring); ``rng`` a numpy Generator."""
    p = np.asarray(p, dtype=float)
    k = p.size
    cat = catalog_for(n_clusters, k)
    frames = []
    qid = np.repeat([f"q{i:05d}" for i in range(n_queries)], n_runs)
    run = np.tile(np.arange(1, n_runs + 1), n_queries)
    for c in range(n_clusters):
        pc = p[rng.permutation(k)]
        fav = rng.integers(0, k, size=n_queries)
        pq = (1 - h) * pc[None, :] + h * np.eye(k)[fav]                       # (Q, K)
        counts = np.stack([rng.multinomial(n_rotations, pq[i], size=n_runs) for i in range(n_queries)])  # (Q,S,K)
        f = pd.DataFrame({"model": "sim", "run": run, "condition": "base", "cluster_id": f"c{c + 1}",
                          "query_id": qid, "n_candidates": k})
        for st in STATUSES:
            f[f"n_{st}"] = n_rotations if st == "ok" else 0
        flat = counts.reshape(-1, k)
        for j, col in enumerate(tool_columns(k)):
            f[col] = flat[:, j]
        for col in position_columns(k):
            f[col] = 0
        frames.append(f)
    design = ("model", "run", "condition")
    table = finalize_table(pd.concat(frames, ignore_index=True), design, k)
    return SelectionCounts(table, None, cat, design, "query", {}, "simulated")
