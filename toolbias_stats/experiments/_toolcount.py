"""Bias when only a subset of a cluster's tools is shown (BiasBusters App. J: tool count and tool-set composition).

The unit of a bias metric becomes (cluster, tool set shown), with K the size of the set; normalised delta
(TV / (1 - 1/K)) makes different K comparable.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from .._display import ReprHTMLMixin
from .._validation import check_by
from ..io._load import load_counts
from ..metrics import expected_tv_uniform
from ..metrics._bias import _json_num

if TYPE_CHECKING:
    from ..io import SelectionCounts, SelectionLog, Study

__all__ = ["tool_count_bias", "ToolCountResult"]


@dataclass(frozen=True)
class ToolCountResult(ReprHTMLMixin):
    """Result of :func:`tool_count_bias`.

    Attributes
    ----------
    units : pandas.DataFrame
        One row per ``by`` group, cluster and tool set shown: ``K``, ``tool_set`` (ids joined by ``|``, sorted),
        ``n_used``, ``delta_api``, ``delta_pos``, their normalised values and ``null_expected`` (exact expectation
        of a uniform chooser with the same counts).
    by : list

    Examples
    --------
    The bundled SIMULATED tool-count study (subsets of 2 to 5 tools of each cluster shown):

    >>> import toolbias_stats as tbs
    >>> res = tool_count_bias(tbs.datasets.path("experiments/toolcount.toml"))
    >>> res.to_frame()[["K", "delta_api", "null_expected", "n_units", "n_used"]].round(3)
       K  delta_api  null_expected  n_units  n_used
    0  2      0.267          0.072       10     300
    1  3      0.350          0.102       10     300
    2  4      0.358          0.127       10     300
    3  5      0.387          0.144       10     300
    >>> res.units.columns.tolist()[:5]
    ['model', 'cluster', 'tool_set', 'K', 'n_used']
    """

    units: pd.DataFrame
    by: list
    warnings: list = field(default_factory=list)

    def to_frame(self) -> pd.DataFrame:
        """Per ``by`` group and K: means over units (cluster x tool set) of each metric and ``n_units``."""
        u = self.units
        if u.empty:
            return u
        cols = ["delta_api", "delta_pos", "delta_api_normalised", "delta_pos_normalised", "null_expected",
                "null_normalised"]
        g = u.groupby(list(self.by) + ["K"], sort=True, dropna=False)
        out = g[cols].mean()
        out["n_units"] = g.size()
        out["n_used"] = g["n_used"].sum()
        return out.reset_index()

    def to_dict(self) -> dict:
        return {"by": list(self.by), "by_k": [{k: _json_num(v) for k, v in r.items()}
                                             for r in self.to_frame().to_dict("records")]}


def tool_count_bias(log: SelectionLog | SelectionCounts | Study | str | os.PathLike[str], *,
                    by: str | Sequence[str] = ("model",)) -> ToolCountResult:
    """delta_API and delta_pos per (cluster, tool set shown), for studies that show subsets of a cluster's tools.

    Parameters
    ----------
    log : SelectionLog, SelectionCounts, Study or path
        Attempts with their ``ordering`` (the list shown); the per-ordering ``cells`` of the counts are used.
    by : str or sequence of str, default ``("model",)``
        Any design columns (e.g. ``strategy``, ``k``).

    Returns
    -------
    ToolCountResult

    Notes
    -----
    For the set ``T`` shown in cluster ``c`` (``K = |T|``), ``P_API`` are the selection rates of the tools of ``T``
    and ``P_pos`` those of positions 1..K, over valid choices under every ordering of ``T``;
    ``delta = TV(P, U_K)`` and ``normalised = delta / (1 - 1/K)``. Point estimates and the uniform-chooser
    expectation only: the per-ordering cells carry no query ids, so no query bootstrap is possible here (use
    :func:`selection_shift` with a ``k`` design column for intervals).

    Examples
    --------
    Every attempt sees the full set of 4 tools here, so each cluster is one unit with K = 4:

    >>> import numpy as np
    >>> from toolbias_stats.experiments import simulate_conditions
    >>> log = simulate_conditions({"base": (np.ones((2, 4)), [4, 1, 1, 1])}, n_queries=25, rng=0)
    >>> res = tool_count_bias(log)
    >>> res.units[["cluster", "K", "n_used"]].values.tolist()
    [['1', 4, 100], ['2', 4, 100]]
    >>> bool((res.units["delta_pos"] > res.units["null_expected"]).all())   # the first position wins 4/7
    True
    """
    counts = load_counts(log)
    by = check_by(by, counts.design_columns)
    cells = counts.cells
    if cells is None or cells.empty:
        raise ValueError("tool_count_bias needs the per-ordering cells of the counts; got counts without them "
                         "(read the study with cells=True).")
    ok = cells[(cells["status"].astype(str) == "ok") & cells["ordering"].notna()].copy()
    ok["tool_set"] = ["|".join(sorted(str(o).split("|"))) for o in ok["ordering"]]
    rows = []
    for key, d in ok.groupby(list(by) + ["cluster_id", "tool_set"], sort=True, dropna=False, observed=True):
        key = key if isinstance(key, tuple) else (key,)
        tools = key[-1].split("|")
        k = len(tools)
        if k < 2:
            continue
        n = int(d["count"].sum())
        api = np.array([d.loc[d["chosen_tool"].astype(str) == t, "count"].sum() for t in tools], dtype=float)
        pos_known = d[d["chosen_position"].notna()]
        pos = np.array([pos_known.loc[pos_known["chosen_position"].astype(int) == j, "count"].sum()
                        for j in range(1, k + 1)], dtype=float)
        d_api = 0.5 * np.abs(api / api.sum() - 1 / k).sum() if api.sum() else np.nan
        d_pos = 0.5 * np.abs(pos / pos.sum() - 1 / k).sum() if pos.sum() else np.nan
        null = float(expected_tv_uniform(n, k))
        norm = 1 - 1 / k
        rows.append({**dict(zip(by, key[:-2])), "cluster": str(key[-2]), "tool_set": key[-1], "K": k, "n_used": n,
                     "delta_api": d_api, "delta_pos": d_pos, "delta_api_normalised": d_api / norm,
                     "delta_pos_normalised": d_pos / norm, "null_expected": null, "null_normalised": null / norm})
    return ToolCountResult(units=pd.DataFrame(rows), by=by)
