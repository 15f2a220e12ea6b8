"""TOOL-SHADOW domain weights: the paper's v1 table and its weight-derivation worksheet as code."""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

__all__ = ["DOMAINS", "V1_WEIGHTS", "V1_PRECISION", "W_FLOOR", "ShadowWeights", "worksheet_weights",
           "draw_weights", "BANNER"]

#: Domain order everywhere.
DOMAINS = ("L", "D", "S", "R")
#: The paper's v1 weights ("L ~0.30, R ~0.35, D and S at the floor"; floors split the rest equally).
V1_WEIGHTS = {"L": 0.30, "D": 0.175, "S": 0.175, "R": 0.35}
#: Precision flags of v1: medium where the paper cites a CI source, low at the floor.
V1_PRECISION = {"L": "medium", "D": "low", "S": "low", "R": "medium"}
#: The v1 floor: (1 - 0.30 - 0.35) / 2.
W_FLOOR = 0.175
#: The paper insists on this in every output.
BANNER = "pre-validation; not for deployment gating"
_Z975 = 1.96


@dataclass(frozen=True)
class ShadowWeights:
    """Domain weights with their derivation.

    Attributes
    ----------
    weights : dict
        ``{L, D, S, R: weight}``, summing to 1.
    precision : dict
        ``"medium"`` (a CI entered the weight) or ``"low"`` (the floor).
    floor : float
    table : pandas.DataFrame
        The derivation: ``domain, source, hr_lower, hr_upper, se, inverse_variance, weight_before_renormalisation,
        weight, precision``.
    rule : str

    Examples
    --------
    >>> w = worksheet_weights()
    >>> w.weights, w.floor
    ({'L': 0.3, 'D': 0.175, 'S': 0.175, 'R': 0.35}, 0.175)
    >>> w.table[["domain", "source", "weight"]]
      domain          source  weight
    0      L  paper v1 table   0.300
    1      D   floor (no CI)   0.175
    2      S   floor (no CI)   0.175
    3      R  paper v1 table   0.350
    """

    weights: dict
    precision: dict
    floor: float
    table: pd.DataFrame
    rule: str

    def to_dict(self) -> dict:
        """Plain dict (JSON-ready: missing values are None)."""
        tab = self.table.astype(object).where(self.table.notna(), None)
        return {"weights": dict(self.weights), "precision": dict(self.precision), "floor": self.floor,
                "rule": self.rule, "table": tab.to_dict(orient="records")}


def worksheet_weights(cis: Mapping[str, Sequence[float]] | None = None, *,
                      floor: float | None = None) -> ShadowWeights:
    """The paper's weight-derivation worksheet: inverse-variance weights from published CIs, floors elsewhere.

    Parameters
    ----------
    cis : dict, optional
        ``{domain: (HR_lower, HR_upper)}`` -- a published 95% CI of a ratio (hazard or odds ratio) for some of
        the domains L, D, S, R. Without any CI the paper's v1 weights are returned.
    floor : float, optional
        Weight of each domain without a CI; default 0.175, the v1 floor.

    Returns
    -------
    ShadowWeights

    Raises
    ------
    ValueError
        An unknown domain, a CI that is not ``0 < lower < upper`` (finite), or floors that leave no weight for the
        domains with a CI.

    Notes
    -----
    For a domain with a CI, ``SE = (ln HR_upper - ln HR_lower) / (2 x 1.96)`` and its inverse variance is
    ``1 / SE^2``. Every domain without a CI keeps the floor; the domains with a CI share the rest,
    ``1 - floor x (number without CI)``, in proportion to their inverse variances; the weights are then
    renormalised to sum to 1 (they already do unless every domain sits at the floor).

    Examples
    --------
    >>> w = worksheet_weights({"L": (1.2, 1.8), "R": (1.1, 1.4)})
    >>> round(w.weights["L"] + w.weights["R"], 3), w.weights["D"]
    (0.65, 0.175)
    """
    floor = W_FLOOR if floor is None else floor
    if isinstance(floor, bool) or not isinstance(floor, (int, float)) or not 0 <= floor < 1:
        raise ValueError(f"`floor` must be a number in [0, 1); got {floor!r} instead.")
    floor = float(floor)
    cis = dict(cis or {})
    unknown = [d for d in cis if d not in DOMAINS]
    if unknown:
        raise ValueError(f"`cis` names unknown domain(s) {unknown}; valid: {list(DOMAINS)}.")
    if not cis:
        rows = [{"domain": d, "source": "paper v1 table" if V1_PRECISION[d] == "medium" else "floor (no CI)",
                 "hr_lower": np.nan, "hr_upper": np.nan, "se": np.nan, "inverse_variance": np.nan,
                 "weight_before_renormalisation": V1_WEIGHTS[d], "weight": V1_WEIGHTS[d],
                 "precision": V1_PRECISION[d]} for d in DOMAINS]
        return ShadowWeights(dict(V1_WEIGHTS), dict(V1_PRECISION), W_FLOOR, pd.DataFrame(rows),
                             "TOOL-SHADOW v1: L 0.30, R 0.35, D and S at the floor 0.175")
    se, iv = {}, {}
    for d, ci in cis.items():
        try:
            lo, hi = (float(v) for v in ci)
        except (TypeError, ValueError):
            raise ValueError(f"`cis[{d!r}]` must be (HR_lower, HR_upper); got {ci!r} instead.") from None
        if not (math.isfinite(lo) and math.isfinite(hi) and 0 < lo < hi):
            raise ValueError(f"`cis[{d!r}]` must satisfy 0 < HR_lower < HR_upper; got {ci!r} instead.")
        se[d] = (math.log(hi) - math.log(lo)) / (2 * _Z975)
        iv[d] = 1.0 / se[d] ** 2
    n_floor = len(DOMAINS) - len(cis)
    rest = 1.0 - floor * n_floor
    if rest <= 0:
        raise ValueError(f"{n_floor} floor(s) of {floor} leave no weight for the domains with a CI.")
    total_iv = sum(iv.values())
    raw = {d: (rest * iv[d] / total_iv if d in iv else floor) for d in DOMAINS}
    s = sum(raw.values())
    w = {d: raw[d] / s for d in DOMAINS}
    prec = {d: "medium" if d in iv else "low" for d in DOMAINS}
    rows = [{"domain": d, "source": "published CI" if d in iv else "floor (no CI)",
             "hr_lower": float(cis[d][0]) if d in cis else np.nan, "hr_upper": float(cis[d][1]) if d in cis else np.nan,
             "se": se.get(d, np.nan), "inverse_variance": iv.get(d, np.nan),
             "weight_before_renormalisation": raw[d], "weight": w[d], "precision": prec[d]} for d in DOMAINS]
    return ShadowWeights(w, prec, floor, pd.DataFrame(rows),
                         "SE = (ln HR_upper - ln HR_lower) / (2 x 1.96); domains with a CI share "
                         f"1 - {floor:g} x {n_floor} by inverse variance; others at the floor {floor:g}; renormalised")


def draw_weights(weights: ShadowWeights, n_draws: int, rng: np.random.Generator, *, concentration: float = 20.0,
                 available: Collection[str] | None = None) -> np.ndarray:
    """Weights drawn around ``weights`` for the sensitivity band, with the floors kept.

    A draw is ``Dirichlet(concentration x w)``; every low-precision domain then gets at least the floor and the
    medium-precision domains share the rest in the drawn proportions. Domains not ``available`` get 0 and the
    rest is renormalised. With the default concentration 20 a v1 weight of 0.30 varies with a coefficient of
    variation of about 33%.

    Parameters
    ----------
    weights : ShadowWeights
        The centre of the draws and the precision flags (which domains keep the floor).
    n_draws : int
    rng : numpy.random.Generator
    concentration : float, default 20
        Dirichlet concentration: larger values draw closer to ``weights``.
    available : collection of str, optional
        Domains that can be computed; the others get weight 0. Default: all four.

    Returns
    -------
    numpy.ndarray of shape (n_draws, 4)
        Columns in :data:`DOMAINS` order; every row sums to 1.

    Examples
    --------
    >>> import numpy as np
    >>> w = draw_weights(worksheet_weights(), 1000, np.random.default_rng(0), available={"L", "D", "R"})
    >>> w.shape, bool(np.allclose(w.sum(1), 1)), bool((w[:, 2] == 0).all())
    ((1000, 4), True, True)
    >>> bool((w[:, 1] >= 0.175).all())   # D keeps at least its floor before renormalisation
    True
    """
    base = np.array([weights.weights[d] for d in DOMAINS])
    low = np.array([weights.precision[d] == "low" for d in DOMAINS])
    avail = np.ones(4, bool) if available is None else np.array([d in available for d in DOMAINS])
    draws = rng.dirichlet(concentration * np.maximum(base, 1e-6), size=n_draws)
    if low.any() and (~low).any():
        lw = np.maximum(draws[:, low], weights.floor)
        hi = draws[:, ~low]
        hi = hi / hi.sum(1, keepdims=True) * np.clip(1 - lw.sum(1, keepdims=True), 0, None)
        draws[:, low], draws[:, ~low] = lw, hi
    draws = draws * avail
    return draws / draws.sum(1, keepdims=True)
