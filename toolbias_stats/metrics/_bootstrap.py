"""Vectorised stratified bootstrap helpers: query-level resampling weights, percentile and BCa intervals."""

from __future__ import annotations

import numpy as np
from scipy import special

__all__ = ["ConfidenceInterval", "query_weights", "percentile_ci", "bca_ci", "BOOTSTRAP_CI_METHODS"]

#: Accepted ``ci_method`` values for the plug-in statistics.
BOOTSTRAP_CI_METHODS = ("bca", "percentile")


class ConfidenceInterval(tuple):
    """``(low, high)`` with named fields, like scipy's ``ConfidenceInterval``."""

    __slots__ = ()

    def __new__(cls, low, high):
        return super().__new__(cls, (float(low), float(high)))

    def __getnewargs__(self):  # pickling / deepcopy
        return (self[0], self[1])

    @property
    def low(self) -> float:
        return self[0]

    @property
    def high(self) -> float:
        return self[1]

    def __repr__(self):
        return f"ConfidenceInterval(low={self[0]!r}, high={self[1]!r})"


def query_weights(n_units: int, n_resamples: int, rng: np.random.Generator) -> np.ndarray:
    """Bootstrap weights: how often each of ``n_units`` queries is drawn in each replicate.

    Drawing ``n_units`` queries with replacement gives a ``Multinomial(n_units, 1/n_units)``
    count vector per replicate; multiplying it with the per-query count matrix gives the replicate's counts
    without a Python loop over replicates.

    Returns
    -------
    numpy.ndarray of shape (n_resamples, n_units), dtype float
    """
    draws = rng.integers(0, n_units, size=(n_resamples, n_units))
    flat = draws + (np.arange(n_resamples) * n_units)[:, None]
    return np.bincount(flat.ravel(), minlength=n_resamples * n_units).reshape(n_resamples, n_units).astype(float)


def percentile_ci(distribution, confidence_level: float) -> ConfidenceInterval:
    """Percentile interval of a bootstrap distribution (NaN replicates ignored)."""
    d = np.asarray(distribution, dtype=float)
    d = d[np.isfinite(d)]
    if d.size == 0:
        return ConfidenceInterval(np.nan, np.nan)
    alpha = 1 - confidence_level
    lo, hi = np.quantile(d, [alpha / 2, 1 - alpha / 2])
    return ConfidenceInterval(lo, hi)


def bca_ci(distribution, observed: float, jackknife, confidence_level: float) -> ConfidenceInterval:
    """Bias-corrected and accelerated (BCa) bootstrap interval (Efron 1987; Efron & Tibshirani 1993, ch. 14).

    Parameters
    ----------
    distribution : array_like
        Bootstrap replicates of the statistic.
    observed : float
        The statistic on the original data.
    jackknife : array_like
        Leave-one-unit-out values of the statistic (one per resampling unit, here per query).
    confidence_level : float

    Notes
    -----
    ``z0 = Phi^-1(#{theta* < theta_hat} / B)`` (ties count half), acceleration
    ``a = sum(d^3) / (6 * (sum(d^2))^1.5)`` with ``d = mean(jack) - jack``; the interval is
    the ``Phi(z0 + (z0 + z)/(1 - a (z0 + z)))`` quantiles of the replicates. Falls back to the
    percentile interval when ``z0`` is infinite (all replicates on one side).
    """
    d = np.asarray(distribution, dtype=float)
    d = d[np.isfinite(d)]
    if d.size == 0 or not np.isfinite(observed):
        return ConfidenceInterval(np.nan, np.nan)
    prop = (np.sum(d < observed) + 0.5 * np.sum(d == observed)) / d.size
    if prop <= 0 or prop >= 1:
        return percentile_ci(d, confidence_level)
    z0 = special.ndtri(prop)
    jack = np.asarray(jackknife, dtype=float)
    jack = jack[np.isfinite(jack)]
    dev = jack.mean() - jack
    denom = 6.0 * np.sum(dev**2) ** 1.5
    a = np.sum(dev**3) / denom if denom > 0 else 0.0
    alpha = 1 - confidence_level
    z = special.ndtri(np.array([alpha / 2, 1 - alpha / 2]))
    adj = special.ndtr(z0 + (z0 + z) / (1 - a * (z0 + z)))
    lo, hi = np.quantile(d, np.clip(adj, 0, 1))
    return ConfidenceInterval(lo, hi)
