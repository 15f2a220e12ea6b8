"""Simulated harness audits with a known truth (tests, the acceptance study, the bundled example)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from .._validation import check_rng
from ._io import ShadowAudit

__all__ = ["simulate_audit"]


def simulate_audit(n_turns: int = 600, n_tools: int = 12, *, position_effect: float = 0.0,
                   length_effect: float = 0.0, similarity_effect: float = 0.0, length_position_corr: float = 0.0,
                   permute: bool = False, relevant_per_turn: tuple[int, int] = (2, 4), relevant_logit: float = 0.0,
                   irrelevant_logit: float = -4.0, rng: np.random.Generator | int | None = None) -> ShadowAudit:
    """A harness audit drawn from a logistic call model with known effects.

    Parameters
    ----------
    n_turns, n_tools : int
    position_effect : float, default 0
        Log odds ratio of being called (when relevant) between the first and the last position; the effect is
        linear in the position index: ``position_effect x (1/2 - (pos - 1)/(n_tools - 1))``. Positive = primacy.
    length_effect : float, default 0
        Log odds ratio per SD of description length (when relevant).
    similarity_effect : float, default 0
        Log odds ratio per SD of the (task, tool-name) similarity (when relevant).
    length_position_corr : float, default 0
        Correlation between description length and earliness in the manifest (a hand-curated manifest lists its
        long-described tools first when positive). Lengths are fixed per tool.
    permute : bool, default False
        Present the tools in a fresh random order at every turn (the permuted design) instead of one order.
    relevant_per_turn : (int, int)
        Each turn has between these many relevant tools (uniform, inclusive), chosen at random.
    relevant_logit, irrelevant_logit : float
        Baseline log odds of a call for a relevant / an irrelevant tool.
    rng : None, int or numpy.random.Generator

    Returns
    -------
    ShadowAudit
        With a ``similarity`` column (standard normal draws rescaled to cosine-like values around 0.3), so that
        S and R need no encoder.

    Examples
    --------
    >>> a = simulate_audit(50, 8, rng=0)
    >>> a.n_turns, len(a.rows)
    (50, 400)
    """
    gen = check_rng(rng)
    J = int(n_tools)
    early = 0.5 - np.arange(J) / (J - 1)  # earliness of each manifest slot, +1/2 first, -1/2 last
    ez = (early - early.mean()) / early.std()
    rho = float(length_position_corr)
    lz = rho * ez + np.sqrt(max(0.0, 1 - rho ** 2)) * gen.standard_normal(J)
    lz = (lz - lz.mean()) / lz.std()
    desc_len = np.round(160 + 60 * lz).clip(20)
    names = [f"tool_{j + 1:02d}" for j in range(J)]
    T = int(n_turns)
    slot = np.tile(np.arange(J), (T, 1))  # slot[t, j]: position (0-based) of tool j at turn t
    if permute:
        slot = np.argsort(gen.random((T, J)), axis=1).argsort(axis=1)
    lo, hi = relevant_per_turn
    k = gen.integers(lo, hi + 1, size=T)
    rel = (np.argsort(gen.random((T, J)), axis=1) < k[:, None]).astype(np.int8)
    sim_z = gen.standard_normal((T, J))
    pos_term = position_effect * (0.5 - slot / (J - 1))
    eta = np.where(rel == 1, relevant_logit + pos_term + length_effect * lz[None, :] + similarity_effect * sim_z,
                   irrelevant_logit)
    called = (gen.random((T, J)) < 1 / (1 + np.exp(-eta))).astype(np.int8)
    rows = pd.DataFrame({
        "turn_id": np.repeat([f"t{t + 1:05d}" for t in range(T)], J),
        "tool_name": np.tile(names, T),
        "position": (slot + 1).ravel(),
        "called": called.ravel(), "relevant": rel.ravel(),
        "desc_len": np.tile(desc_len, T),
        "similarity": (0.3 + 0.1 * sim_z).ravel(),
    })
    return ShadowAudit.from_frame(rows, source={"simulated": {
        "position_effect": position_effect, "length_effect": length_effect, "similarity_effect": similarity_effect,
        "length_position_corr": rho, "permute": bool(permute)}})
