"""The paper's pre-specified validation protocol as functions: A/B primary outcome, calibration, discrimination.

TOOL-SHADOW v1 is pre-validation: **no harness has been validated** with it (the paper audits none, and
neither does this package). These functions compute the protocol's quantities once someone has frozen
held-out audits: the primary outcome of the permutation-controlled A/B design, calibration-in-the-large
(target ``|observed - predicted| <= 7`` PBS points) and discrimination (target AUC >= 0.65), each with a CI.
A target is reported as *met* when the estimate satisfies it and as *demonstrated* only when the whole
interval does.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from .._display import ReprHTMLMixin
from .._json import plain as _strict
from .._resampling import ConfidenceInterval
from .._validation import check_confidence_level

__all__ = ["ab_primary_outcome", "calibration_in_the_large", "discrimination_auc", "ABOutcome",
           "CalibrationResult", "DiscriminationResult", "VALIDATION_STATUS", "CALIBRATION_TARGET", "AUC_TARGET"]

#: Said with every protocol result.
VALIDATION_STATUS = ("TOOL-SHADOW v1 is pre-validation: no harness has been validated with it; "
                     "not for deployment gating")
#: Calibration-in-the-large target of the paper (PBS points).
CALIBRATION_TARGET = 7.0
#: Discrimination target of the paper (AUC).
AUC_TARGET = 0.65


class _OneRow(ReprHTMLMixin):
    """``to_frame``: the result as one row (``ci`` as ``ci_low``/``ci_high``, ``table`` as ``table_*``)."""

    if TYPE_CHECKING:
        def to_dict(self) -> dict[str, Any]: ...

    def to_frame(self) -> pd.DataFrame:
        row = {}
        for k, v in self.to_dict().items():
            if k == "ci":
                row["ci_low"], row["ci_high"] = v
            elif isinstance(v, dict):
                row.update({f"{k}_{kk}": vv for kk, vv in v.items()})
            else:
                row[k] = v
        return pd.DataFrame([{k: (np.nan if v is None else v) for k, v in row.items()}])

    def _headline(self):
        frame = self.to_frame()
        return type(self).__name__, frame.drop(columns=["status"]), self.status


def _binary(x, name):
    a = np.asarray(x)
    if a.ndim != 1 or a.size == 0:
        raise ValueError(f"`{name}` must be a non-empty 1-d array of 0/1; got shape {a.shape} instead.")
    if not np.all(np.isin(a, (0, 1))):
        raise ValueError(f"`{name}` must hold only 0 and 1; got values {sorted(set(a.tolist()) - {0, 1})[:5]} "
                         "instead.")
    return a.astype(int)


@dataclass(frozen=True)
class ABOutcome(_OneRow):
    """Primary outcome of the permuted A/B design: log OR of a correct tool choice under M vs M'.

    Attributes
    ----------
    log_or, ci : float, ConfidenceInterval
        Positive = correct choices more likely under M (where the relevant tool sits in the favoured quartile).
    se : float
    p_value : float
        Exact McNemar (paired) or chi-square (unpaired) test of no difference.
    paired : bool
    n, table : int, dict
        Tasks and the counts used (``b``, ``c`` discordant pairs, or the 2x2 table).
    method : str
    status : str

    Examples
    --------
    >>> r = ab_primary_outcome([1, 1, 0, 1], [0, 1, 0, 0])
    >>> r.table, r.paired
    ({'b': 2, 'c': 0, 'concordant': 2}, True)
    >>> r.to_frame()[["log_or", "ci_low", "ci_high", "n"]].round(3)   # log(2.5 / 0.5) +- 1.96 sqrt(1/2.5 + 1/0.5)
       log_or  ci_low  ci_high  n
    0   1.609  -1.427    4.646  4
    """

    log_or: float
    ci: ConfidenceInterval
    se: float
    p_value: float
    paired: bool
    n: int
    table: dict
    method: str
    confidence_level: float
    status: str = VALIDATION_STATUS

    def to_dict(self) -> dict[str, Any]:
        """Plain dict (JSON-ready)."""
        f = lambda v: float(v) if math.isfinite(float(v)) else None  # noqa: E731
        return {"log_or": f(self.log_or), "ci": [f(self.ci.low), f(self.ci.high)], "se": f(self.se),
                "p_value": f(self.p_value), "paired": self.paired, "n": self.n, "table": self.table,
                "method": self.method, "confidence_level": self.confidence_level, "status": self.status}


def ab_primary_outcome(correct_m: npt.ArrayLike, correct_m_prime: npt.ArrayLike, *, paired: bool = True,
                       confidence_level: float = 0.95) -> ABOutcome:
    """Log odds ratio of a correct tool choice between manifest M and its permutation M', with a CI.

    Parameters
    ----------
    correct_m, correct_m_prime : array-like of 0/1
        Per task of the held-out split, whether the harness chose the correct tool under M and under M'
        (same tasks in the same order when ``paired``).
    paired : bool, default True
        The design runs every task twice: the conditional (matched-pairs) odds ratio ``b / c`` of the discordant
        pairs (``b``: correct under M only, ``c``: under M' only) with ``SE = sqrt(1/b + 1/c)`` and the exact
        McNemar p-value. ``False``: the Woolf log odds ratio of the 2x2 table (statsmodels ``Table2x2``).
    confidence_level : float, default 0.95

    Returns
    -------
    ABOutcome

    Notes
    -----
    When ``b`` or ``c`` is zero, 0.5 is added to both (the estimate is otherwise infinite); the method says so.

    Examples
    --------
    >>> r = ab_primary_outcome([1, 1, 1, 0, 1, 1], [1, 0, 0, 0, 1, 1])
    >>> round(r.log_or, 4)   # b = 2 discordant pairs for M, c = 0 -> (2.5 / 0.5)
    1.6094
    """
    from scipy import stats

    level = check_confidence_level(confidence_level)
    a = _binary(correct_m, "correct_m")
    b_ = _binary(correct_m_prime, "correct_m_prime")
    zq = stats.norm.ppf(0.5 + level / 2)
    if paired:
        if a.size != b_.size:
            raise ValueError(f"paired outcomes need equal lengths; got {a.size} and {b_.size} instead.")
        b = int(((a == 1) & (b_ == 0)).sum())
        c = int(((a == 0) & (b_ == 1)).sum())
        method = "conditional (matched-pairs) log OR b/c, Wald CI, exact McNemar p"
        bb, cc = float(b), float(c)
        if b == 0 or c == 0:
            bb, cc = b + 0.5, c + 0.5
            method += "; 0.5 added to b and c"
        lor = math.log(bb / cc)
        se = math.sqrt(1 / bb + 1 / cc)
        p = float(stats.binomtest(b, b + c, 0.5).pvalue) if b + c > 0 else 1.0
        return ABOutcome(lor, ConfidenceInterval(lor - zq * se, lor + zq * se), se, p, True, int(a.size),
                         {"b": b, "c": c, "concordant": int(a.size - b - c)}, method, level)
    from statsmodels.stats.contingency_tables import Table2x2

    tab = np.array([[a.sum(), a.size - a.sum()], [b_.sum(), b_.size - b_.sum()]], dtype=float)
    t = Table2x2(tab, shift_zeros=True)
    lo, hi = t.log_oddsratio_confint(alpha=1 - level)
    return ABOutcome(float(t.log_oddsratio), ConfidenceInterval(lo, hi), float(t.log_oddsratio_se),
                     float(t.test_nominal_association().pvalue), False, int(a.size + b_.size),
                     {"m": [int(v) for v in tab[0]], "m_prime": [int(v) for v in tab[1]]},
                     "Woolf log OR of the 2x2 table (statsmodels Table2x2; 0.5 added when a cell is zero)", level)


@dataclass(frozen=True)
class CalibrationResult(_OneRow):
    """Calibration-in-the-large: mean(observed - predicted) PBS with a t interval; target ``|.| <= 7``.

    Examples
    --------
    >>> r = calibration_in_the_large([50, 60, 70, 40], [48, 61, 65, 41])
    >>> round(r.difference, 2), r.met, r.demonstrated
    (1.25, True, True)
    >>> r.to_dict()["n"], r.to_dict()["target"]
    (4, 7.0)
    """

    difference: float
    ci: ConfidenceInterval
    n: int
    target: float
    met: bool
    demonstrated: bool
    confidence_level: float
    status: str = VALIDATION_STATUS

    def to_dict(self) -> dict[str, Any]:
        """Plain dict (JSON-ready)."""
        return _strict({"difference": self.difference, "ci": list(self.ci), "n": self.n, "target": self.target,
                        "met": self.met, "demonstrated": self.demonstrated,
                        "confidence_level": self.confidence_level, "status": self.status})


def calibration_in_the_large(observed: npt.ArrayLike, predicted: npt.ArrayLike, *, target: float = CALIBRATION_TARGET,
                             confidence_level: float = 0.95) -> CalibrationResult:
    """Calibration-in-the-large of PBS on held-out audits: mean(observed - predicted), target ``|.| <= 7``.

    Parameters
    ----------
    observed : array-like
        The held-out quantity on the PBS scale (0-100) for each audit (e.g. 100 x the observed share of
        permutation-sensitive tasks, as the pre-registered rubric defines it).
    predicted : array-like
        The PBS of the same audits.
    target : float, default 7
    confidence_level : float, default 0.95

    Returns
    -------
    CalibrationResult
        ``met``: ``|difference| <= target``; ``demonstrated``: the whole CI lies in ``[-target, target]``.

    Notes
    -----
    The interval is the one-sample t interval of the paired differences (``n - 1`` degrees of freedom).

    Examples
    --------
    >>> r = calibration_in_the_large([50, 60, 70], [48, 61, 65])
    >>> round(r.difference, 4), r.met
    (2.0, True)
    """
    from scipy import stats

    level = check_confidence_level(confidence_level)
    o = np.asarray(observed, dtype=float)
    p = np.asarray(predicted, dtype=float)
    if o.shape != p.shape or o.ndim != 1 or o.size < 2:
        raise ValueError(f"`observed` and `predicted` must be 1-d of equal length >= 2; got {o.shape} and {p.shape}.")
    if not (np.all(np.isfinite(o)) and np.all(np.isfinite(p))):
        raise ValueError("`observed` and `predicted` must be finite.")
    d = o - p
    m, s = float(d.mean()), float(d.std(ddof=1))
    h = stats.t.ppf(0.5 + level / 2, d.size - 1) * s / math.sqrt(d.size)
    ci = ConfidenceInterval(m - h, m + h)
    return CalibrationResult(m, ci, int(d.size), float(target), abs(m) <= target,
                             bool(ci.low >= -target and ci.high <= target), level)


@dataclass(frozen=True)
class DiscriminationResult(_OneRow):
    """AUC of PBS against a binary outcome with DeLong's CI; target >= 0.65.

    Examples
    --------
    >>> r = discrimination_auc([0.1, 0.4, 0.35, 0.8, 0.7], [0, 0, 1, 1, 1])
    >>> round(r.auc, 3), r.n_positive, r.n_negative, r.met
    (0.833, 3, 2, True)
    """

    auc: float
    ci: ConfidenceInterval
    se: float
    n_positive: int
    n_negative: int
    target: float
    met: bool
    demonstrated: bool
    confidence_level: float
    status: str = VALIDATION_STATUS

    def to_dict(self) -> dict[str, Any]:
        """Plain dict (JSON-ready)."""
        return _strict({"auc": self.auc, "ci": list(self.ci), "se": self.se, "n_positive": self.n_positive,
                        "n_negative": self.n_negative, "target": self.target, "met": self.met,
                        "demonstrated": self.demonstrated, "confidence_level": self.confidence_level,
                        "status": self.status})


def discrimination_auc(scores: npt.ArrayLike, outcome: npt.ArrayLike, *, target: float = AUC_TARGET,
                       confidence_level: float = 0.95) -> DiscriminationResult:
    """AUC of PBS against the binary outcome "permutation-sensitive task", with DeLong's CI.

    Parameters
    ----------
    scores : array-like
        PBS (or any score) per held-out unit.
    outcome : array-like of 0/1
        1 = permutation-sensitive.
    target : float, default 0.65
    confidence_level : float, default 0.95

    Returns
    -------
    DiscriminationResult
        ``met``: AUC >= target; ``demonstrated``: the CI's lower bound >= target. The CI is the Wald interval of
        DeLong's variance, clipped to [0, 1].

    References
    ----------
    DeLong, DeLong & Clarke-Pearson (1988), Biometrics 44:837.

    Examples
    --------
    >>> round(discrimination_auc([0.1, 0.4, 0.35, 0.8], [0, 0, 1, 1]).auc, 4)
    0.75
    """
    from scipy import stats

    level = check_confidence_level(confidence_level)
    s = np.asarray(scores, dtype=float)
    y = _binary(outcome, "outcome")
    if s.shape != y.shape:
        raise ValueError(f"`scores` and `outcome` must have the same length; got {s.size} and {y.size}.")
    pos, neg = s[y == 1], s[y == 0]
    if pos.size < 2 or neg.size < 2:
        raise ValueError(f"DeLong's CI needs at least 2 positive and 2 negative units; got {pos.size} and {neg.size}.")
    # structural components: psi(x, y) = 1 if x > y, 1/2 if tied
    cmp = (pos[:, None] > neg[None, :]) + 0.5 * (pos[:, None] == neg[None, :])
    auc = float(cmp.mean())
    v10 = cmp.mean(1)
    v01 = cmp.mean(0)
    se = math.sqrt(v10.var(ddof=1) / pos.size + v01.var(ddof=1) / neg.size)
    zq = stats.norm.ppf(0.5 + level / 2)
    ci = ConfidenceInterval(max(0.0, auc - zq * se), min(1.0, auc + zq * se))
    return DiscriminationResult(auc, ci, se, int(pos.size), int(neg.size), float(target), auc >= target,
                                bool(ci.low >= target), level)
