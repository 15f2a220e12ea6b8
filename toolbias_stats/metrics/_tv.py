"""Total-variation distances and their behaviour under a uniform chooser (small NumPy functions)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
from scipy import special

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

# The distances are a float for one distribution and an array for several: their return type is ``Any`` (a union
# would make every caller narrow it).
__all__ = ["tv_distance", "tv_to_uniform", "normalised_tv", "expected_tv_uniform", "rates_from_counts"]


def tv_distance(p: ArrayLike, q: ArrayLike, *, axis: int = -1) -> Any:
    """Total-variation distance between distributions ``p`` and ``q``.

    Parameters
    ----------
    p, q : array_like
        Probability vectors (broadcastable) along ``axis``.
    axis : int, default -1

    Returns
    -------
    numpy.ndarray or float
        ``TV(p, q) = 1/2 * sum_i |p_i - q_i|``, in [0, 1].

    Examples
    --------
    >>> tv_distance([1, 0, 0], [0, 1, 0])
    1.0
    >>> tv_distance([0.5, 0.5], [0.5, 0.5])
    0.0
    """
    p = np.asarray(p, dtype=float)
    q = np.asarray(q, dtype=float)
    out = 0.5 * np.abs(p - q).sum(axis=axis)
    return float(out) if np.ndim(out) == 0 else out


def tv_to_uniform(p: ArrayLike, *, axis: int = -1) -> Any:
    """TV distance from ``p`` to the uniform distribution over its K categories.

    This is BiasBusters' ``delta = 1/2 * sum_i |p_i - 1/K|`` (eq. in section 3.1). Its maximum,
    reached by a chooser that always picks one category, is ``1 - 1/K``.

    Parameters
    ----------
    p : array_like
        Probability vector(s), the K categories along ``axis``.
    axis : int, default -1

    Returns
    -------
    float or numpy.ndarray
        The distance (one per vector), in ``[0, 1 - 1/K]``.

    Examples
    --------
    >>> round(tv_to_uniform([1, 0, 0, 0, 0]), 12)
    0.8
    >>> round(tv_to_uniform([0.4, 0.25, 0.15, 0.12, 0.08]), 10)
    0.25
    """
    p = np.asarray(p, dtype=float)
    k = p.shape[axis]
    return tv_distance(p, np.full(k, 1.0 / k).reshape([-1 if i == (axis % p.ndim) else 1 for i in range(p.ndim)]),
                       axis=axis)


def normalised_tv(tv: ArrayLike, k: ArrayLike) -> Any:
    """TV to uniform divided by its maximum ``1 - 1/K``, so that 1 means a degenerate chooser.

    Parameters
    ----------
    tv : float or array_like
        TV distance(s) to uniform.
    k : int or array_like
        Number(s) of categories (broadcast with ``tv``).

    Returns
    -------
    float or numpy.ndarray
        ``tv / (1 - 1/k)``, in [0, 1].

    Examples
    --------
    >>> normalised_tv(0.4, 5)
    0.5
    """
    k = np.asarray(k, dtype=float)
    out = np.asarray(tv, dtype=float) / (1.0 - 1.0 / k)
    return float(out) if np.ndim(out) == 0 else out


def rates_from_counts(counts: ArrayLike, *, axis: int = -1) -> np.ndarray:
    """Selection rates ``counts / counts.sum()`` along ``axis``; NaN where the total is 0.

    Parameters
    ----------
    counts : array_like
        Counts per category along ``axis``.
    axis : int, default -1

    Returns
    -------
    numpy.ndarray (float, same shape)
        The rates; NaN in every category of a slice whose counts are all 0.

    Examples
    --------
    >>> import numpy as np
    >>> rates_from_counts(np.array([[3, 1, 0, 0], [0, 0, 0, 0]]))
    array([[0.75, 0.25, 0.  , 0.  ],
           [ nan,  nan,  nan,  nan]])
    """
    counts = np.asarray(counts, dtype=float)
    if axis in (-1, counts.ndim - 1) and counts.ndim:
        total = sum_last(counts)[..., None]     # the same sums as ``sum(-1)``, fewer passes for small K
    else:
        total = counts.sum(axis=axis, keepdims=True)
    positive = total > 0
    if positive.all():                 # one division, no mask pass over the full array (issue 37: K = 40)
        return counts / total
    with np.errstate(invalid="ignore", divide="ignore"):
        rates = counts / np.where(positive, total, 1)
    np.copyto(rates, np.nan, where=~positive)
    return rates


#: The most categories summed by :func:`sum_last` one slice at a time (below NumPy's pairwise blocks of 8).
SEQUENTIAL_MAX_K = 7


def sum_last(a: np.ndarray) -> np.ndarray:
    """``a.sum(-1)`` of a float64 array, bit for bit, one slice of the last axis at a time when it has at most
    :data:`SEQUENTIAL_MAX_K` elements.

    NumPy adds fewer than 8 elements of a reduction from the first one to the last (its pairwise summation starts
    at 8), the same additions as here; a reduction over a short last axis costs NumPy an inner loop per output
    (issue 37: 240 groups x 10 clusters of 5 tools, 2,000 replicates), K - 1 whole-array additions cost less.

    Examples
    --------
    >>> a = np.array([[0.1, 0.2, 0.3], [1.0, 2.0, np.nan]])
    >>> sum_last(a), a.sum(-1)
    (array([0.6, nan]), array([0.6, nan]))
    """
    k = a.shape[-1] if a.ndim else 0
    if a.dtype != np.float64 or not 1 <= k <= SEQUENTIAL_MAX_K:
        return a.sum(-1)
    out = a[..., 0] + 0.0                 # NumPy starts from its identity: -0.0 sums to 0.0
    for j in range(1, k):
        out += a[..., j]
    return out


def expected_tv_uniform(n: int | ArrayLike, k: int) -> Any:
    """Exact expected plug-in TV to uniform when ``n`` choices come from a uniform chooser over ``k``.

    The plug-in TV is biased upward: even a perfectly fair chooser shows a positive distance.
    With ``X ~ Binomial(n, 1/k)`` for each category and symmetry across categories,
    ``E[TV] = k/2 * E|X/n - 1/k|``, summed exactly over the binomial pmf.

    Parameters
    ----------
    n : int or array_like of int
        Number of valid choices (0 gives NaN).
    k : int
        Number of categories.

    Returns
    -------
    float or numpy.ndarray

    Examples
    --------
    >>> round(expected_tv_uniform(100, 5), 4)
    0.0794
    >>> round(expected_tv_uniform(500, 5), 4)
    0.0357
    """
    n_arr = np.atleast_1d(np.asarray(n, dtype=np.int64))
    out = np.full(n_arr.shape, np.nan)
    pos = n_arr > 0
    out[pos] = 0.5 * k * binomial_mean_absolute_deviation(n_arr[pos], 1.0 / k) / n_arr[pos]
    return float(out[0]) if np.ndim(n) == 0 else out.reshape(np.shape(n))


def binomial_mean_absolute_deviation(n, p):
    """``E|X - n p|`` for ``X ~ Binomial(n, p)``, in closed form (De Moivre).

    ``E|X - np| = 2 m C(n, m) p^m (1 - p)^(n - m + 1)`` with ``m = floor(n p) + 1``
    (Diaconis & Zabell 1991, "Closed form summation for classical distributions"); evaluated on the
    log scale, so it costs O(1) for any ``n`` (the direct sum over the pmf costs O(n)).

    Examples
    --------
    >>> from scipy import stats
    >>> x = np.arange(31)
    >>> direct = np.sum(stats.binom.pmf(x, 30, 0.2) * np.abs(x - 6))
    >>> bool(np.isclose(binomial_mean_absolute_deviation(30, 0.2), direct))
    True
    """
    n = np.asarray(n, dtype=float)
    m = np.floor(n * p) + 1
    with np.errstate(divide="ignore", invalid="ignore"):
        log_term = (np.log(2 * m) + special.gammaln(n + 1) - special.gammaln(m + 1) - special.gammaln(n - m + 1)
                    + m * np.log(p) + (n - m + 1) * np.log1p(-p))
    # m > n happens only for p = 1 (no deviation at all)
    return np.where(m <= n, np.exp(log_term), 0.0)
