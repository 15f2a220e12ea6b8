"""Simulated selection logs with known truth, for calibration studies, tests and teaching."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pandas as pd

from ._validation import check_rng
from .io import SelectionLog, ToolCatalog
from .metrics import tv_to_uniform

__all__ = ["simulate_selection_log", "SimulatedStudy"]


@dataclass(frozen=True)
class SimulatedStudy:
    """A simulated log and the exact quantities it was drawn from.

    Attributes
    ----------
    log : SelectionLog
    p_api : numpy.ndarray, shape (C, K)
        True expected selection rate of each tool (catalog order), averaged over the orderings shown.
    p_pos : numpy.ndarray, shape (C, K)
        True expected selection rate of each position.
    delta_api, delta_pos : float
        True cluster-averaged TV to uniform of ``p_api`` / ``p_pos``.

    Examples
    --------
    A chooser that always takes the first position of the list: no API bias, all position bias.

    >>> sim = simulate_selection_log(n_clusters=2, n_tools=4, n_queries=5, position_probs=[1, 0, 0, 0], rng=1)
    >>> sim.p_pos[0].round(2).tolist(), round(sim.delta_pos, 2), round(sim.delta_api, 2)
    ([1.0, 0.0, 0.0, 0.0], 0.75, 0.0)
    >>> len(sim.log.data)  # 2 clusters x 5 queries x 4 rotations
    40
    """

    log: SelectionLog
    p_api: np.ndarray
    p_pos: np.ndarray
    delta_api: float
    delta_pos: float


def simulate_selection_log(*, n_clusters: int = 10, n_tools: int = 5, n_queries: int = 100, n_runs: int = 1,
                           tool_probs: npt.ArrayLike | None = None, position_probs: npt.ArrayLike | None = None,
                           permute_tools: bool = True, p_no_call: float = 0.0, model: str = "simulated",
                           rng: np.random.Generator | int | None = None) -> SimulatedStudy:
    """Simulate a BiasBusters-style study: every query shown in all K cyclic rotations, in every run.

    Each attempt chooses the tool at position ``j`` of the list with probability proportional to
    ``tool_probs[tool] * position_probs[j]`` (a multinomial-logit chooser with API and position
    effects); with only one of the two given, the other effect is absent.

    Parameters
    ----------
    n_clusters, n_tools, n_queries, n_runs : int
    tool_probs : array_like of shape (K,), optional
        Tool preference (uniform if omitted). With ``permute_tools`` each cluster gets its own
        random assignment of these probabilities to its tools.
    position_probs : array_like of shape (K,), optional
        Position preference (uniform if omitted).
    permute_tools : bool, default True
    p_no_call : float, default 0
        Probability that an attempt makes no call (a ``no_call`` row).
    model : str
    rng : None, int or numpy.random.Generator

    Returns
    -------
    SimulatedStudy

    Examples
    --------
    >>> sim = simulate_selection_log(n_clusters=2, n_queries=10, tool_probs=[1, 0, 0, 0, 0], rng=0)
    >>> round(sim.delta_api, 3), round(sim.delta_pos, 3)
    (0.8, 0.0)
    """
    gen = check_rng(rng)
    k = n_tools
    tp = np.full(k, 1.0 / k) if tool_probs is None else np.asarray(tool_probs, float) / np.sum(tool_probs)
    pp = np.full(k, 1.0 / k) if position_probs is None else np.asarray(position_probs, float) / np.sum(position_probs)
    catalog = ToolCatalog.from_records(
        [{"cluster_id": str(c + 1), "tool_name": f"tool {c + 1}.{j + 1}", "api_name": "endpoint",
          "num_parameters": 1} for c in range(n_clusters) for j in range(k)], source="<simulated>")
    prefs = np.stack([gen.permutation(tp) if permute_tools else tp for _ in range(n_clusters)])  # (C, K)
    # Under rotation r (1-based) position j (0-based) shows tool (j + r - 1) mod K.
    shown = (np.arange(k)[None, :] + np.arange(k)[:, None]) % k                                    # (R, J) -> tool
    w = prefs[:, shown] * pp[None, None, :]                                                        # (C, R, J)
    choice_p = w / w.sum(-1, keepdims=True)
    p_pos = choice_p.mean(1)                                                                       # (C, J)
    p_api = np.zeros((n_clusters, k))
    for rot in range(k):
        np.add.at(p_api, (slice(None), shown[rot]), choice_p[:, rot] / k)  # type: ignore[arg-type]
    # draw every attempt: (runs, C, Q, R)
    u = gen.random((n_runs, n_clusters, n_queries, k))
    cdf = np.cumsum(choice_p, -1)                                                                  # (C, R, J)
    pos = (u[..., None] > cdf[None, :, None, :, :]).sum(-1)                                        # 0-based
    pos = np.minimum(pos, k - 1)
    no_call = gen.random(pos.shape) < p_no_call
    s, c, q, r = np.meshgrid(np.arange(n_runs), np.arange(n_clusters), np.arange(n_queries), np.arange(k),
                             indexing="ij")  # type: ignore[misc]
    tool = shown[r, pos]
    tools = np.array([catalog.tools(str(ci + 1)) for ci in range(n_clusters)], dtype=object)
    frame = pd.DataFrame({
        "model": model,
        "run": (s + 1).ravel(),
        "condition": "base",
        "cluster_id": (c + 1).ravel().astype(str),
        "query_id": (q + 1).ravel().astype(str),
        "rotation": (r + 1).ravel(),
        "chosen_tool": np.asarray(np.where(no_call, None, tools[c, tool])).ravel(),
        "status": np.where(no_call, "no_call", "ok").ravel(),
        "source_file": "<simulated>",
    })
    frame["source_row"] = np.arange(1, len(frame) + 1)
    log = SelectionLog.from_frame(frame, catalog, source="<simulated>")
    return SimulatedStudy(log=log, p_api=p_api, p_pos=p_pos, delta_api=float(tv_to_uniform(p_api).mean()),
                          delta_pos=float(tv_to_uniform(p_pos).mean()))
