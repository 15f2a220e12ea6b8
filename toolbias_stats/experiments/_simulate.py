"""Simulated studies with several conditions and known selection distributions (tests, calibration, examples)."""

from __future__ import annotations

from collections.abc import Hashable, Mapping

import numpy as np
import numpy.typing as npt
import pandas as pd

from .._validation import check_rng
from ..io import SelectionLog, ToolCatalog

__all__ = ["simulate_conditions", "choice_probabilities"]


def choice_probabilities(tool_pref: npt.ArrayLike, position_pref: npt.ArrayLike | None = None
                         ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """True tool and position selection rates of a multinomial-logit chooser under the K cyclic rotations.

    Parameters
    ----------
    tool_pref : array_like, shape (C, K)
        Tool preference weights per cluster (catalog order).
    position_pref : array_like, shape (K,), optional
        Position weights (uniform when omitted).

    Returns
    -------
    (p_api, p_pos, choice_p) : arrays of shape (C, K), (C, K), (C, R, J)
        ``choice_p[c, r, j]``: probability of choosing position ``j`` under rotation ``r``.

    Examples
    --------
    Four equally preferred tools, the first listed position weighted 4:1:1:1: every tool is chosen a quarter
    of the time over the rotations, the first position 4/7 of the time.

    >>> import numpy as np
    >>> p_api, p_pos, choice_p = choice_probabilities(np.ones((1, 4)), [4, 1, 1, 1])
    >>> p_api.round(3), p_pos.round(3), choice_p.shape
    (array([[0.25, 0.25, 0.25, 0.25]]), array([[0.571, 0.143, 0.143, 0.143]]), (1, 4, 4))
    """
    tp = np.asarray(tool_pref, dtype=float)
    c, k = tp.shape
    pp = np.full(k, 1.0 / k) if position_pref is None else np.asarray(position_pref, float)
    shown = (np.arange(k)[None, :] + np.arange(k)[:, None]) % k            # rotation r, position j -> tool
    w = tp[:, shown] * pp[None, None, :]
    choice_p = w / w.sum(-1, keepdims=True)
    p_pos = choice_p.mean(1)
    p_api = np.zeros((c, k))
    for r in range(k):
        np.add.at(p_api, (slice(None), shown[r]), choice_p[:, r] / k)  # type: ignore[arg-type]
    return p_api, p_pos, choice_p


def simulate_conditions(conditions: Mapping[Hashable, tuple[npt.ArrayLike, npt.ArrayLike | None]], *,
                        n_queries: int = 100, n_runs: int = 1, column: str = "condition", query_effect: float = 0.0,
                        model: str = "SIMULATED", catalog: ToolCatalog | None = None,
                        rng: np.random.Generator | int | None = None) -> SelectionLog:
    """Simulate a study in which the same queries are run under several conditions (SIMULATED data).

    Parameters
    ----------
    conditions : dict
        ``{level: (tool_pref (C, K), position_pref (K,) or None)}``.
    n_queries, n_runs : int
        Queries per cluster (each shown in all K cyclic rotations) and runs per condition.
    column : str, default "condition"
        The design column that holds the level (``"condition"``, or e.g. ``"temperature"`` for a numeric sweep).
    query_effect : float, default 0
        Standard deviation of a per-query log-preference shift shared by every condition (query difficulty:
        the correlation that a paired analysis removes). The true rates then average over queries.
    model : str
    catalog : ToolCatalog, optional
    rng : None, int or numpy.random.Generator

    Returns
    -------
    SelectionLog
        One row per (condition, run, cluster, query, rotation).

    Examples
    --------
    >>> import numpy as np
    >>> pref = np.ones((3, 4))          # 3 clusters of 4 equally preferred tools
    >>> simulate_conditions({"base": (pref, None), "first_wins": (pref, [4, 1, 1, 1])}, n_queries=20, rng=0)
    SelectionLog(480 rows, status={'ok': 480}, clusters=3)
    """
    gen = check_rng(rng)
    first = np.asarray(next(iter(conditions.values()))[0], float)
    n_c, k = first.shape
    if catalog is None:
        catalog = ToolCatalog.from_records(
            [{"cluster_id": str(c + 1), "tool_name": f"tool {c + 1}.{j + 1}", "api_name": "endpoint",
              "num_parameters": 1} for c in range(n_c) for j in range(k)], source="<simulated>")
    tools = np.array([catalog.tools(c) for c in catalog.clusters], dtype=object)
    shown = (np.arange(k)[None, :] + np.arange(k)[:, None]) % k
    qeff = gen.normal(0.0, query_effect, size=(n_c, n_queries, k)) if query_effect else np.zeros((n_c, n_queries, k))
    frames = []
    for level, (tp, pp) in conditions.items():
        tp = np.asarray(tp, float)
        pp = np.full(k, 1.0 / k) if pp is None else np.asarray(pp, float)
        # per query weights (C, Q, K) -> per rotation and position (C, Q, R, J)
        w = (tp[:, None, :] * np.exp(qeff))[:, :, shown] * pp
        p = w / w.sum(-1, keepdims=True)
        cdf = np.cumsum(p, -1)
        u = gen.random((n_runs, n_c, n_queries, k))
        pos = np.minimum((u[..., None] > cdf[None]).sum(-1), k - 1)                # (S, C, Q, R)
        s, c, q, r = np.meshgrid(np.arange(n_runs), np.arange(n_c), np.arange(n_queries), np.arange(k),
                                 indexing="ij")
        frames.append(pd.DataFrame({
            "model": model, "run": (s + 1).ravel(), column: level,
            "cluster_id": np.asarray(catalog.clusters, dtype=object)[c.ravel()],
            "query_id": (q + 1).ravel().astype(str), "rotation": (r + 1).ravel(),
            "chosen_tool": tools[c, shown[r, pos]].ravel(), "status": "ok",
            "source_file": f"<simulated {column}={level}>"}))
    frame = pd.concat(frames, ignore_index=True)
    if column != "condition":
        frame.insert(2, "condition", "base")
    frame["source_row"] = np.arange(1, len(frame) + 1)
    return SelectionLog.from_frame(frame, catalog, source="<simulated>")
