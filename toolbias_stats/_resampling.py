"""The resampling kernels shared by the analysis subpackages (the package's internal API for intervals).

Vectorised stratified bootstrap helpers (query-level resampling weights, percentile and BCa intervals), the Wilson
score interval and the test-inversion kernels of the calibrated TV interval (:func:`invert_belt` along a
:func:`shrinkage_path`; :func:`smallest_ts`, the searches of an inversion in lockstep). A core module: it imports
only NumPy, SciPy and (lazily) the numba weights kernel (and the belt's compiled pass where numba is loaded), so that
``metrics``, ``choice``, ``experiments``, ``shadow`` and ``toolsense`` import it without reaching into each other's
private modules (issue 40; the contracts are in ``pyproject.toml``, ``[tool.importlinter]``).
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import numpy as np
from scipy import special

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

__all__ = ["ConfidenceInterval", "query_weights", "resampled_counts", "percentile_ci", "bca_ci", "bca_bias_z0",
           "BOOTSTRAP_CI_METHODS", "BOOTSTRAP_WEIGHTS", "wilson_interval", "shrinkage_path", "invert_belt",
           "BeltErrors", "pairwise_rows", "quantile_at", "smallest_t", "smallest_ts"]

#: Accepted ``ci_method`` values for the plug-in statistics.
BOOTSTRAP_CI_METHODS = ("bca", "percentile")
#: Accepted ``bootstrap`` values: how a replicate weights the queries.
BOOTSTRAP_WEIGHTS = ("multinomial", "poisson")
#: Memory for one chunk of query weights (replicates x queries, float64).
_CHUNK_BYTES = 64 * 2**20


class ConfidenceInterval(tuple):
    """``(low, high)`` with named fields, like scipy's ``ConfidenceInterval``.

    Examples
    --------
    >>> ci = ConfidenceInterval(0.1, 0.3)
    >>> ci.low, ci.high, tuple(ci)
    (0.1, 0.3, (0.1, 0.3))
    """

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
    draws += (np.arange(n_resamples) * n_units)[:, None]       # in place: a fresh array (no second temporary)
    return np.bincount(draws.ravel(), minlength=n_resamples * n_units).reshape(n_resamples, n_units).astype(float)


_BLAS: list = []


def _one_blas_thread():
    """A context running BLAS on one thread (a no-op without threadpoolctl).

    The replicate products are small (replicates x queries times queries x counts): several BLAS threads wait for
    each other longer than they compute, badly so on a busy machine (8 ms against 0.7 ms of CPU per product under
    load). The weights and counts are integers, so the products are exact whatever the number of threads. The
    threadpoolctl controller is made once (it inspects the loaded libraries); entering a limit is then ~10 us.
    """
    if not _BLAS:
        try:
            from threadpoolctl import ThreadpoolController

            _BLAS.append(ThreadpoolController())
        except Exception:   # pragma: no cover - threadpoolctl missing or unable to read the libraries
            _BLAS.append(None)
    if _BLAS[0] is None:   # pragma: no cover
        from contextlib import nullcontext

        return nullcontext()
    return _BLAS[0].limit(limits=1, user_api="blas")


def resampled_counts(targets, n_resamples: int, rng: np.random.Generator, *, method: str = "multinomial",
                     chunk_bytes: int = _CHUNK_BYTES) -> list[np.ndarray]:
    """Bootstrap replicates of summed per-query counts, all targets under the same query weights.

    Parameters
    ----------
    targets : list of numpy.ndarray, each of shape (Q, ...)
        Per-query counts (e.g. (Q, S, K) choices per query, run and tool) sharing the query axis.
    n_resamples : int
    rng : numpy.random.Generator
    method : {"multinomial", "poisson"}
        ``"multinomial"``: a replicate draws Q queries with replacement (:func:`query_weights`);
        ``"poisson"``: every query gets an independent Poisson(1) weight (Hanley & MacGibbon 2006;
        the bootstrap of streaming and distributed data: no unit needs to know Q).
    chunk_bytes : int
        When all weights (float64) fit in this size they are drawn with ``rng`` in one block (every study
        with up to ~4,000 queries per cluster at 2,000 replicates). Otherwise one seed is drawn from ``rng``
        and a compiled counter-based generator (:mod:`._weights_kernel`) draws the weights a few replicates at
        a time per thread (buffers of at most this size together) and multiplies them with the counts there,
        so memory stays bounded whatever Q is; same seed, same replicates.

    Returns
    -------
    list of numpy.ndarray, each of shape (n_resamples, ...)
        ``sum_q w[r, q] * target[q, ...]`` per replicate ``r``.
    """
    if method not in BOOTSTRAP_WEIGHTS:
        raise ValueError(f"`method` must be one of {list(BOOTSTRAP_WEIGHTS)}; got {method!r} instead.")
    q = targets[0].shape[0]
    flats = [np.asarray(t, dtype=float).reshape(q, -1) for t in targets]
    widths = np.cumsum([0] + [f.shape[1] for f in flats])
    joined = np.concatenate(flats, axis=1)
    out = np.empty((n_resamples, joined.shape[1]))
    if q * n_resamples * 8 <= chunk_bytes:
        # one block of NumPy draws from ``rng`` (the stream of every study of up to ~4,000 queries per cluster)
        if n_resamples:
            w = query_weights(q, n_resamples, rng) if method == "multinomial" else \
                rng.poisson(1.0, size=(n_resamples, q)).astype(float)
            with _one_blas_thread():
                np.matmul(w, joined, out=out)     # integer sums, exact in any order; no (R, width) temporary
    else:
        # many queries: compiled counter-based draws (memory bounded), exact products
        from ._weights_kernel import weighted_sums, weights_block_max

        seed = int(rng.integers(0, 2**63))
        if _exact_sums(joined, q, method):
            # integer counts: each thread draws a few replicates into a buffer in its cache and multiplies them
            # there (no (replicates x queries) block in memory, one parallel region, the same exact sums)
            with _one_blas_thread():
                out[:] = weighted_sums(joined, n_resamples, seed, method == "poisson", chunk_bytes)
            return [out[:, a:b].reshape((n_resamples,) + np.shape(t)[1:])
                    for a, b, t in zip(widths[:-1], widths[1:], targets)]
        step = max(1, int(chunk_bytes // (4 * q)))
        joined32 = joined.astype(np.float32)
        col_total = float(joined.sum(0).max()) if joined.size else 0.0
        for start in range(0, n_resamples, step):
            r = min(step, n_resamples - start)
            w, top = weights_block_max(r, q, seed, start, method == "poisson")   # drawn on all cores
            # one BLAS thread: the product reads the block once (memory bound); idle BLAS threads spinning
            # beside the weights' threads cost more than they give (exact sums, whatever the threads)
            with _one_blas_thread():
                if top * col_total < 2**24:
                    out[start:start + r] = w @ joined32
                else:
                    out[start:start + r] = w.astype(float) @ joined
    return [out[:, a:b].reshape((n_resamples,) + np.shape(t)[1:]) for a, b, t in zip(widths[:-1], widths[1:], targets)]


def _exact_sums(joined: np.ndarray, q: int, method: str) -> bool:
    """Whether every weighted sum of ``joined`` is an integer below 2^53 (exact in float64 in any order).

    A multinomial weight is at most Q, a Poisson one at most 60 (the kernel's inversion stops there).
    """
    if not np.array_equal(joined, np.rint(joined)):
        return False
    bound = (q if method == "multinomial" else 60) * (float(np.abs(joined).sum(0).max()) if joined.size else 0.0)
    return bound < 2**53


def percentile_ci(distribution: ArrayLike, confidence_level: float) -> ConfidenceInterval:
    """Percentile interval of a bootstrap distribution (NaN replicates ignored).

    Parameters
    ----------
    distribution : array_like
        Bootstrap replicates of the statistic.
    confidence_level : float
        In (0, 1): the interval runs from the ``(1 - level) / 2`` to the ``(1 + level) / 2`` quantile.

    Returns
    -------
    ConfidenceInterval
        NaN ends when no replicate is finite.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> x = rng.normal(size=50)
    >>> boot = np.array([rng.choice(x, 50).mean() for _ in range(2000)])   # bootstrap replicates of the mean
    >>> ci = percentile_ci(boot, 0.95)
    >>> round(ci.low, 3), round(ci.high, 3)
    (-0.132, 0.373)
    """
    d = np.asarray(distribution, dtype=float)
    d = d[np.isfinite(d)]
    if d.size == 0:
        return ConfidenceInterval(np.nan, np.nan)
    alpha = 1 - confidence_level
    lo, hi = np.quantile(d, [alpha / 2, 1 - alpha / 2])
    return ConfidenceInterval(lo, hi)


def bca_ci(distribution: ArrayLike, observed: float, jackknife: ArrayLike,
           confidence_level: float) -> ConfidenceInterval:
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

    Returns
    -------
    ConfidenceInterval
        NaN ends when no replicate is finite; the percentile interval when all replicates lie on one side.

    Notes
    -----
    ``z0 = Phi^-1(#{theta* < theta_hat} / B)`` (ties count half), acceleration
    ``a = sum(d^3) / (6 * (sum(d^2))^1.5)`` with ``d = mean(jack) - jack``; the interval is
    the ``Phi(z0 + (z0 + z)/(1 - a (z0 + z)))`` quantiles of the replicates. Falls back to the
    percentile interval when ``z0`` is infinite (all replicates on one side).

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> x = rng.normal(size=50)
    >>> boot = np.array([rng.choice(x, 50).mean() for _ in range(2000)])   # bootstrap replicates of the mean
    >>> jackknife = np.array([np.delete(x, i).mean() for i in range(50)])
    >>> ci = bca_ci(boot, x.mean(), jackknife, 0.95)
    >>> round(float(x.mean()), 3), round(ci.low, 3), round(ci.high, 3)
    (0.129, -0.13, 0.374)
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


def bca_bias_z0(distribution, observed: float, confidence_level: float):
    """BCa's bias-correction constant ``z0`` and whether it is degenerate: ``(z0, degenerate)``.

    The BCa interval takes the ``Phi(z0 + (z0 + z) / (1 - a (z0 + z)))`` quantiles of the replicates. When
    ``|z0| > z_{1 - alpha/2} / 2`` (the estimate lies below, or above, all but a few percent of its own bootstrap
    replicates), an end of the interval moves past the bootstrap median even without acceleration: the whole
    interval lies on one side of the bootstrap distribution's centre and, typically, beyond the estimate. This is
    what happens to TV near uniformity, where the replicates carry the plug-in's upward bias a second time
    (fair chooser, K = 5, 40 queries x 5 rotations: ``z0`` about -2, and the BCa interval excludes the estimate in
    half the studies). Infinite ``z0`` (all replicates on one side) counts as degenerate.

    Examples
    --------
    >>> import numpy as np
    >>> d = np.random.default_rng(0).normal(1.0, 0.1, 2000)
    >>> bool(bca_bias_z0(d, 1.0, 0.95)[1]), bool(bca_bias_z0(d, 0.75, 0.95)[1])
    (False, True)
    """
    d = np.asarray(distribution, dtype=float)
    d = d[np.isfinite(d)]
    if d.size == 0 or not np.isfinite(observed):
        return np.nan, False
    prop = (np.sum(d < observed) + 0.5 * np.sum(d == observed)) / d.size
    z0 = float(special.ndtri(prop)) if 0 < prop < 1 else (-np.inf if prop <= 0 else np.inf)
    limit = float(special.ndtri(1 - (1 - confidence_level) / 2)) / 2
    return z0, bool(abs(z0) > limit)


def wilson_interval(count, n, confidence_level):
    """Wilson score interval for a binomial proportion (Wilson 1927), vectorised over ``count``.

    The same interval as ``statsmodels.stats.proportion.proportion_confint(method="wilson")`` (a test
    checks this); written out so that computing selection rates does not import statsmodels (0.8 s).

    Examples
    --------
    6 of 20 at 95%:

    >>> lo, hi = wilson_interval([6], 20, 0.95)
    >>> round(float(lo[0]), 3), round(float(hi[0]), 3)
    (0.145, 0.519)
    """
    count = np.asarray(count, dtype=float)
    z = special.ndtri(1 - (1 - confidence_level) / 2)
    p = count / n
    denom = 1 + z**2 / n
    centre = (p + z**2 / (2 * n)) / denom
    half = z * np.sqrt(p * (1 - p) / n + z**2 / (4 * n**2)) / denom
    return centre - half, centre + half


# -- test inversion of the calibrated TV interval (metrics._calibrated, experiments._shift_stats) ------------
def shrinkage_path(t, x, v, lam_max):
    """Deviation vector theta(t) on the calibration path.

    t in [0, 1]: theta_i = sign(x_i) * sqrt(max(x_i^2 - lam * v_i, 0)) with
    lam = lam_max * (1 - t), i.e. t = 0 is the null (all zero) and t = 1 is the raw
    deviation x (components with v_i == 0 move linearly, t * x_i).  t > 1: theta = t * x (inflation, needed for
    upper bounds when the plug-in happens to be low).
    """
    if t >= 1.0:
        return t * x
    lam = lam_max * (1.0 - t)
    shrunk = np.sign(x) * np.sqrt(np.maximum(x * x - lam * v, 0.0))
    # components without bootstrap variation (e.g. a cluster that always picks
    # the same category) cannot be moment-corrected: shrink them linearly
    return np.where(v > 0, shrunk, t * x)


class BeltErrors:
    """The centred bootstrap errors ``e`` (R, M), laid out for the bisection's many evaluations of ``T(t)``.

    ``T_r(t) = w * sum_j |theta_j(t) + e_rj|`` is computed on the transposed errors (M, R): the addition then runs
    along replicates, and the row sums are NumPy's pairwise summation repeated with whole-replicate vectors
    (:func:`pairwise_rows`), so every ``T_r`` is bit for bit ``w * np.abs(theta + e).sum(axis=1)[r]`` (a test
    checks this) at about two thirds of the cost. The values of ``T(t)`` are kept per path and ``t``: the searches
    of one inversion (lower, upper and median bounds, the floor) start with the same points.
    """

    def __init__(self, e):
        e = np.asarray(e, dtype=float)
        self.shape = e.shape
        self.t = np.ascontiguousarray(e.T)              # (M, R)
        self._buf = np.empty_like(self.t)
        self._seen: dict = {}
        self._near: dict = {}

    def stat(self, path, t, w):
        key = (path, t, w)
        out = self._seen.get(key)
        if out is None:
            theta = np.asarray(path(t), dtype=float)
            buf = np.add(theta.reshape(-1, 1) if theta.ndim else theta, self.t, out=self._buf)
            out = w * pairwise_rows(np.abs(buf, out=buf))
            self._seen[key] = out
            self._near[(path, w)] = _Known(out, theta)
        return out

    def known(self, path, t, w, values):
        """Record ``values`` as ``T(t)`` along ``path`` (the caller's own ``w * |theta(t) + e|.sum(axis=1)``, the
        same numbers: e.g. the null statistics at ``t = 0`` where ``theta(0)`` is exactly zero)."""
        self._seen[(path, t, w)] = values

    def quantile(self, path, t, w, q):
        """``quantile_at(path, t, self, w, q)``: the same number, computing ``T_r(t)`` only where it can matter.

        ``|T_r(t) - T_r(s)| <= w * sum_j |theta_j(t) - theta_j(s)|`` (the triangle inequality), so the values last
        computed along the path bound every ``T_r(t)``. Replicates whose bounds lie wholly below the order
        statistics that the quantile interpolates (or wholly above) keep their rank side; ``T_r(t)`` is computed,
        with the additions of :meth:`stat`, only for the others, and the order statistics are those of that subset
        shifted by the count below. Near the end of a bisection that is a few replicates of ``R``.
        """
        near = self._near.get((path, w))
        if near is None or (path, t, w) in self._seen:
            return _interpolated(self.stat(path, t, w), q)
        theta = np.asarray(path(t), dtype=float)
        pos, i, j = _order_positions(q, self.shape[0])
        take, n_below = near.candidates(theta, w, i, j)
        if take is None:
            return _interpolated(self.stat(path, t, w), q)
        # rows of the (R, M) errors: NumPy's own row sums, bit for bit those of pairwise_rows (tested)
        buf = np.add(self.t.T[take], theta)
        sub = w * np.abs(buf, out=buf).sum(axis=1)
        near.update(take, sub, theta)
        part = np.partition(sub, (i - n_below, j - n_below))
        lo, hi = part[i - n_below], part[j - n_below]
        return float(lo + (pos - i) * (hi - lo))


#: Share of candidate replicates above which all of them are computed (as fast, and kept for the next steps).
_SHARE_ALL = 0.5


class _Known:
    """Per replicate, the last computed ``T_r`` along one path and the deviation vector it was computed at."""

    def __init__(self, values, theta):
        self.values = values.copy()
        self.top = float(values.max()) if values.size else 0.0
        self.thetas = [theta]
        self.at = np.zeros(values.size, dtype=np.intp)

    def candidates(self, theta, w, i, j):
        """Replicates that may hold order statistic ``i`` or ``j`` at ``theta``, and the count surely below them.

        None when more than half may (the caller then computes all of them).
        """
        if len(self.thetas) > 1:
            dist = w * np.abs(theta - np.asarray(self.thetas)).sum(axis=-1)
        else:
            dist = np.array([w * np.abs(theta - self.thetas[0]).sum()])
        latest = float(dist[-1])
        # rounding of the sums (relative ~1e-15) is covered many times over by this margin
        slack = dist[self.at] if dist.size > 1 else np.full(self.values.size, latest)
        slack += 1e-9 * (1.0 + 2.0 * self.top + float(dist.max()))
        low = self.values - slack
        high = np.add(self.values, slack, out=slack)
        floor_i = np.partition(low, i)[i]
        ceil_j = np.partition(high, j)[j]
        below = high < floor_i
        take = low <= ceil_j
        take &= ~below
        take = np.flatnonzero(take)
        if take.size > _SHARE_ALL * self.values.size:
            return None, 0
        return take, int(np.count_nonzero(below))

    def update(self, take, values, theta):
        self.thetas.append(theta)
        self.values[take] = values
        self.top = max(self.top, float(values.max()))
        self.at[take] = len(self.thetas) - 1
        if len(self.thetas) > 32:            # keep only the deviation vectors some replicate still refers to
            used, self.at = np.unique(self.at, return_inverse=True)
            self.thetas = [self.thetas[k] for k in used]


def _order_positions(q, n):
    """The position ``q (n - 1)`` of the ``q`` quantile of ``n`` values and the order statistics it lies between."""
    pos = q * (n - 1)
    i = int(np.floor(pos))
    return pos, i, min(i + 1, n - 1)


def _interpolated(stat, q):
    pos, i, j = _order_positions(q, stat.size)
    part = np.partition(stat, (i, j))
    return float(part[i] + (pos - i) * (part[j] - part[i]))


def pairwise_rows(a):
    """``a.sum(axis=0)`` for (n, R) ``a``, adding rows in the order of NumPy's pairwise summation of a row.

    ``np.sum`` of a contiguous row of ``n`` numbers: fewer than 8 summed in turn; up to 128 with eight accumulators
    (elements ``k, k + 8, k + 16, ...``) combined as ``((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))``, then the
    remainder added in turn; longer rows split in halves at a multiple of 8 (numpy/_core/src/umath/loops_utils.h.src).
    The same additions on whole rows give the column sums bit for bit.
    """
    n = a.shape[0]
    if n < 8:
        res = np.zeros(a.shape[1])
        for i in range(n):
            res += a[i]
        return res
    if n <= 128:
        m = n - n % 8
        r = a[:8].copy() if m == 8 else a[:m].reshape(m // 8, 8, -1).sum(axis=0)
        res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]))
        for i in range(m, n):
            res += a[i]
        return res
    n2 = n // 2
    n2 -= n2 % 8
    return pairwise_rows(a[:n2]) + pairwise_rows(a[n2:])


def quantile_at(path, t, e, w, q, buf=None):
    """Linear-interpolation quantile (numpy's default) of T(t) over the replicates, via partition.

    ``e``: the errors (R, M), or an :class:`BeltErrors` made of them (faster for repeated evaluations). ``buf`` is
    not used any more (kept for callers that pass it).
    """
    errors = e if isinstance(e, BeltErrors) else BeltErrors(e)
    return errors.quantile(path, t, w, q)


def smallest_t(path, e, w, t_obs, q, tol=1e-6):
    """Bracket (lo, hi) of the smallest t >= 0 with quantile_q(T(t)) >= t_obs.

    Returns None when already t = 0 qualifies.  Bisection; quantiles are
    (numerically) monotone in t because the same replicates are used for every t.
    """
    e = e if isinstance(e, BeltErrors) else BeltErrors(e)
    if quantile_at(path, 0.0, e, w, q) >= t_obs:
        return None
    lo, hi = 0.0, 1.0
    n_expand = 0
    while quantile_at(path, hi, e, w, q) < t_obs:
        lo, hi = hi, 2.0 * hi
        n_expand += 1
        if n_expand > 60:  # pragma: no cover - pathological input
            return hi, hi
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        if quantile_at(path, mid, e, w, q) >= t_obs:
            hi = mid
        else:
            lo = mid
        if hi - lo < tol * max(1.0, hi):
            break
    return lo, hi


def invert_belt(path, e, w, t_obs, qs, *, lower=True):
    """Belt inversion along ``path``: (lower D or None, upper D, median-matched D)."""

    def dval(t):
        return float(w * np.abs(path(t)).sum())

    q_hi, q_lo, q_mid = qs
    e = e if isinstance(e, BeltErrors) else BeltErrors(e)
    low = None
    if lower:
        r = smallest_t(path, e, w, t_obs, q_hi)
        low = 0.0 if r is None else dval(r[0])
    r = smallest_t(path, e, w, t_obs, q_lo)
    high = 0.0 if r is None else dval(r[1])
    r = smallest_t(path, e, w, t_obs, q_mid)
    mid = 0.0 if r is None else dval(0.5 * (r[0] + r[1]))
    return low, high, mid


# -- the searches of a belt inversion in lockstep (issue 37) -------------------------------------------------------
def smallest_ts(paths, e, w, searches, *, known=None, tol=1e-6, largest=(), lines=None):
    """:func:`smallest_t` of several searches at once: ``[(lo, hi) or None]``, the same numbers.

    ``searches``: ``(path index, target, q)`` triples, each the search ``smallest_t(paths[k], e, w, target, q)``;
    ``known``: ``{path index: T(0)}`` where the caller has the values at ``t = 0`` (``w * |theta(0) + e|`` summed
    over each replicate's row). Every search makes the steps of :func:`smallest_t` (the same comparisons of the same
    quantiles, hence the same bracket), but they advance together: each round evaluates the next point of every
    search still running in one vectorised pass (:class:`_Lockstep`), so that a round costs a few dozen NumPy calls
    whatever the number of searches, where each quantile of :func:`smallest_t` costs about fifty.

    ``largest``: indices of searches whose results count only through the largest ``D = w * sum |theta(hi)|`` among
    them (upper bounds, taken as a maximum). Such a search stops as soon as ``D`` at the upper end of its bracket is
    no larger than ``D`` at the lower end of another's (or at another's result): ``D`` grows with ``t`` along the
    paths, so its own result could not be the largest. It then returns its bracket at that point; the largest ``D``
    is the same number. The paths must move every component monotonically in ``t`` (the three of
    ``calibrated_mean_tv`` do).

    ``lines``: ``{path index: (d, t0)}`` for paths that are ``theta(t) = t * d`` from ``t0`` on (computed as ``t *
    d``). There ``T_r(t)`` is convex in ``t``: with the compiled pass, the bounds of a bisection step add the chord
    and the tangents at the bracket's computed ends (:meth:`_Lockstep._decided`), which decide more steps without
    computing anything; the comparisons, hence the brackets, are the same.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> e, x = rng.normal(size=(200, 6)) * 0.02, rng.normal(size=6) * 0.05
    >>> path = lambda t: t * x
    >>> t_obs = 0.1 * float(np.abs(x).sum())
    >>> got = smallest_ts([path], e, 0.1, [(0, t_obs, 0.5), (0, t_obs, 0.975)])
    >>> got == [smallest_t(path, e, 0.1, t_obs, 0.5), smallest_t(path, e, 0.1, t_obs, 0.975)]
    True
    """
    belt = _Lockstep(e, w, paths, known or {}, lines)
    n_rep = belt.e.shape[0]
    runs = [_Search(p, target, q, tol, n_rep) for p, target, q in searches]
    active = runs
    capped = [runs[k] for k in largest]
    while active:
        belt.evaluate(active)
        active = [s for s in active if s.step(belt)]
        if capped:
            active = _below_largest(belt, capped, active)
    return [s.result for s in runs]


def _below_largest(belt, capped, active):
    """``active`` without the searches of ``capped`` whose result cannot be the largest ``D`` (see ``largest`` of
    :func:`smallest_ts`); those stopped get their current bracket as result."""
    floor = 0.0
    for s in capped:
        if s not in active:
            floor = max(floor, 0.0 if s.result is None else belt.size(s.path, s.result[1]))
        elif s.phase == 2:
            floor = max(floor, belt.size(s.path, s.lo))
    out = []
    for s in active:
        if s.phase == 2 and s in capped and belt.size(s.path, s.hi) <= floor:
            s.result = (s.lo, s.hi)
            continue
        out.append(s)
    return out


class _Search:
    """One :func:`smallest_t` as a state machine: :attr:`t` is its next point; :meth:`step` takes the comparison at
    it (:attr:`reached`). In the bisection it keeps only the replicates that can still hold one of the two order
    statistics of its quantile at some point of its bracket (:meth:`_prune`) and the number surely below them."""

    __slots__ = ("act", "end_slopes", "ends", "hi", "lo", "n", "n_low", "order", "path", "phase", "pts", "q",
                 "reached", "result", "slopes", "t", "target", "tol", "values")

    def __init__(self, path, target, q, tol, n_rep):
        self.path, self.target, self.q, self.tol = path, target, q, tol
        self.t, self.lo, self.hi, self.phase, self.n, self.result = 0.0, 0.0, 1.0, 0, 0, None
        self.reached, self.values, self.ends, self.act, self.n_low = False, None, [], None, 0
        self.slopes, self.end_slopes = None, [None, None]     # dT_r/dt along a line (the compiled pass), or None
        self.pts = [0.0, 1.0]
        self.order = _order_positions(q, n_rep)

    def step(self, belt) -> bool:
        """Advance with :attr:`reached` (``quantile_q(T(t)) >= target``); False once the search has its result."""
        reached = self.reached
        if self.phase == 0:                          # t = 0 qualifies: no bracket
            if reached:
                return False
            self.phase, self.t = 1, self.hi
            return True
        if self.phase == 1:                          # doubling the upper end
            if not reached:
                self.lo, self.hi = self.hi, 2.0 * self.hi
                self.n += 1
                if self.n > 60:  # pragma: no cover - pathological input
                    self.result = (self.hi, self.hi)
                    return False
                self.t = self.hi
                return True
            self.phase, self.n = 2, 0
            # the values at both ends of the bracket (full passes, computed before)
            self.ends, self.pts = [belt.full[(self.path, self.lo)], self.values], [self.lo, self.hi]
            self.end_slopes = [belt.slopes.get((self.path, self.lo)), self.slopes]
            self._prune(belt, self.lo)
        else:                                        # bisection
            if reached:
                self.hi = self.t
            else:
                self.lo = self.t
            if self.values is not None:              # computed here (not decided by the bounds: _Lockstep._decided)
                self.ends[1 if reached else 0] = self.values
                self.end_slopes[1 if reached else 0] = self.slopes
                self.pts[1 if reached else 0] = self.t
            self.n += 1
            if self.hi - self.lo < self.tol * max(1.0, self.hi) or self.n >= 60:
                self.result = (self.lo, self.hi)
                return False
            if self.values is not None:
                self._prune(belt, self.pts[0 if reached else 1])
        self.t = 0.5 * (self.lo + self.hi)
        return True

    def _prune(self, belt, other):
        """Drop the replicates that lie below (above) both order statistics at every point of the bracket.

        ``T_r`` is known at both ends of the bracket: ``a_r`` at the point ``t`` just computed, ``b_r`` at the other
        end. Let ``u_r = theta(t) + e_r`` and, for a later point ``s`` in the bracket, ``Delta = theta(s) -
        theta(t)``. Each component of the paths is monotone in ``t``, so ``Delta_j`` has the sign of ``D_j =
        theta_j(other) - theta_j(t)`` (or is 0) and ``|Delta_j| <= |D_j|``. A component with ``u_rj`` of that sign
        adds exactly ``|Delta_j|`` to ``|u_rj|``; one of the other sign adds ``|Delta_j| - 2 min(|u_rj|,
        |Delta_j|)``. Hence ``T_r(s) = a_r + C(s) - 2 w * sum_opposite min(|u_rj|, |Delta_j|)`` with ``C(s) = w *
        sum_j |Delta_j|`` the same for every replicate, and the last sum lies between 0 and its value at the other
        end, ``a_r + C - b_r`` (``C = w * sum_j |D_j|``). So ``T_r(s) - C(s)`` lies in ``[b_r - C, a_r]`` (plus a
        margin for rounding) at every ``s`` of the bracket: a replicate whose upper end lies below the lower bound
        of order statistic ``i`` stays below it, and one whose lower end lies above order statistic ``j``'s upper
        bound stays above it. The order statistics are those of the rest, shifted by the count below. Where the
        signs agree (deviations well above the noise) the window is narrow whatever the bracket's width.
        """
        values, ends = self.values, self.ends
        self.values = self.slopes = None
        if values.size < 2:
            return
        near = ends[1] if values is ends[0] else ends[0]   # the values at the other end of the bracket
        reach = belt.w * float(np.abs(belt.theta(self.path, other) - belt.theta(self.path, self.t)).sum())
        # rounding of the sums (relative ~1e-15) is covered many times over by this margin
        margin = 1e-9 * (1.0 + 2.0 * float(values.max()) + reach)
        low = near - (reach + margin)
        high = values + margin
        _, i, j = self.order
        i, j = i - self.n_low, j - self.n_low
        below = high < np.partition(low, i)[i]
        keep = low <= np.partition(high, j)[j]
        keep &= ~below
        self.act = np.flatnonzero(keep) if self.act is None else self.act[keep]
        self.ends = [ends[0][keep], ends[1][keep]]
        self.end_slopes = [None if g is None else g[keep] for g in self.end_slopes]
        self.n_low += int(np.count_nonzero(below))


class _Lockstep:
    """``quantile_q(T(t)) >= target`` at the next point of many searches at once, each quantile bit for bit the one
    of :func:`quantile_at`.

    A search that still has most replicates in question takes the full pass, computed once per ``(path, t)`` and
    shared by the searches at that point (the first points of the searches along a path coincide); the others
    compute ``T_r`` only for the replicates they keep (:meth:`_Search._prune`). All of a round's values are computed
    together: by the compiled kernel (:func:`_belt_kernel`) in one call, else as NumPy passes (the full ones on the
    transposed errors, :func:`pairwise_rows`; the kept rows ``e_r + theta`` gathered into one array), the same
    numbers.
    """

    def __init__(self, e, w, paths, known, lines=None):
        self.e = np.ascontiguousarray(e, dtype=float)
        self.w, self.paths = w, paths
        self.full = {(p, 0.0): np.asarray(values, dtype=float) for p, values in known.items()}
        self.thetas = {}
        self.kernel = _belt_kernel()
        # the slopes along the lines come with the compiled pass only (in NumPy they would cost a pass of their own)
        self.lines = {p: (np.asarray(d, dtype=float), float(t0)) for p, (d, t0) in (lines or {}).items()}
        self.sloped = _slope_kernel() if self.kernel is not None and self.lines else None
        self.slopes: dict = {}
        self.plan = _pairwise_plan(self.e.shape[1])
        self._et = None

    def theta(self, p, t):
        key = (p, t)
        out = self.thetas.get(key)
        if out is None:
            out = self.thetas[key] = np.asarray(self.paths[p](t), dtype=float)
        return out

    def line(self, p, t):
        """The direction ``d`` where path ``p`` is ``theta = t * d`` at ``t`` and beyond, else None."""
        d = self.lines.get(p)
        return d[0] if d is not None and t >= d[1] else None

    def size(self, p, t):
        """``D(t) = w * sum_j |theta_j(t)|`` along path ``p`` (as the bounds are reported)."""
        return float(self.w * np.abs(self.theta(p, t)).sum())

    def evaluate(self, searches):
        """Set every search's :attr:`~_Search.reached` at its point :attr:`~_Search.t` (and the values it keeps)."""
        n_rep = self.e.shape[0]
        few = [s for s in searches if s.act is not None and s.act.size <= _SHARE_ALL * n_rep]
        # a search that would take a full pass first tries its bounds: decided there, it computes nothing
        undecided, decided = [], []
        for s in searches:
            if s not in few and s.phase == 2 and (s.path, s.t) not in self.full:
                reached = self._decided(s)
                if reached is not None:
                    s.reached, s.values, s.slopes = reached, None, None
                    decided.append(s)
                    continue
            undecided.append(s)
        searches = undecided
        wanted = list(dict.fromkeys((s.path, s.t) for s in searches if s not in few and (s.path, s.t) not in self.full))
        wanted, twins = self._twins(wanted)
        values, slopes = self._values(wanted, few)
        for key, part, g in zip(wanted, values, slopes):
            self.full[key] = part
            if g is not None:
                self.slopes[key] = g
        for key, twin in twins:
            self.full[key] = self.full[twin]
            d, d_twin = self.line(*key), self.line(*twin)
            if d is not None and d_twin is not None and twin in self.slopes and np.array_equal(d, d_twin):
                self.slopes[key] = self.slopes[twin]
        # with the slopes (the compiled pass along lines), a search decided at a point computed anyway for another
        # one takes its values too, so that their brackets' ends stay shared (2,000 clusters: 23 -> 17 full passes
        # in one interval); without them this costs more passes than it saves (240 groups: 12.5 -> 13.4)
        for s in decided if self.sloped is not None else ():
            full = self.full.get((s.path, s.t))
            if full is not None:
                g = self.slopes.get((s.path, s.t))
                s.values = full if s.act is None else full[s.act]
                s.slopes = g if g is None or s.act is None else g[s.act]
        for s in searches:
            if s in few:
                k = len(wanted) + few.index(s)
                sub = values[k]
                pos, i, j = s.order
                a, b = i - s.n_low, j - s.n_low
                part = np.partition(sub, (a, b))
                s.reached = float(part[a] + (pos - i) * (part[b] - part[a])) >= s.target
                s.values, s.slopes = sub, slopes[k]
            else:
                full = self.full[(s.path, s.t)]
                g = self.slopes.get((s.path, s.t))
                s.reached = _interpolated(full, s.q) >= s.target
                s.values = full if s.act is None else full[s.act]
                s.slopes = g if g is None or s.act is None else g[s.act]

    def _twins(self, wanted):
        """``wanted`` without the points whose deviation vector equals one already computed or wanted at the same
        ``t`` along another path, and those ``(point, twin)`` pairs.

        ``T_r`` depends on the path only through ``theta``, so a twin's values are the same numbers (issue 37, tenth
        pass: along :func:`calibrated_mean_tv`'s shrinkage and linear paths ``theta(t) = t * x`` alike for ``t >=
        1``, one full pass of three at ``t = 1`` and one per doubling step).
        """
        fresh, twins = [], []
        for key in wanted:
            p, t = key
            theta = self.theta(p, t)
            twin = next((k for k in [*self.full, *fresh] if k[1] == t and k[0] != p
                         and np.array_equal(self.theta(*k), theta)), None)
            if twin is None:
                fresh.append(key)
            else:
                twins.append((key, twin))
        return fresh, twins

    def _decided(self, s):
        """``quantile_q(T(t)) >= target`` at the search's point when the values at the ends of its bracket decide
        it, else None.

        The values ``a_r`` and ``b_r`` were computed at two points ``t_a <= t <= t_b`` (:attr:`_Search.pts`) for
        the replicates the search keeps. By the triangle inequality ``|T_r(t) - T_r(s)| <= w * sum_j |theta_j(t) -
        theta_j(s)|`` (``C_a``, ``C_b`` from either point), so ``T_r(t)`` lies in ``[max(a_r - C_a, b_r - C_b),
        min(a_r + C_a, b_r + C_b)]``, and each order statistic between those of the bounds. The interpolated
        quantile grows with both order statistics: when its value at the upper bounds lies below the target (or
        the one at the lower bounds at or above it), by more than a margin for rounding, the comparison is that
        of the exact quantile. Early in a bisection, with the point far from the crossing, this decides most
        steps without computing any ``T_r`` (issue 37: 240 groups)."""
        a, b = s.ends
        if a.size < 2:
            return None
        theta = self.theta(s.path, s.t)
        c_a = self.w * float(np.abs(theta - self.theta(s.path, s.pts[0])).sum())
        c_b = self.w * float(np.abs(self.theta(s.path, s.pts[1]) - theta).sum())
        high = np.minimum(a + c_a, b + c_b)
        # rounding of the sums and of the interpolation (relative ~1e-15) is covered many times over by this margin
        margin = 1e-9 * (1.0 + 2.0 * float(high.max()) + c_a + c_b)
        low = np.maximum(a - c_a, b - c_b)
        if self.sloped is not None and self.line(s.path, s.pts[0]) is not None:
            high, low = self._convex(s, high, low)
        pos, i, j = s.order
        f = pos - i
        i, j = i - s.n_low, j - s.n_low
        part = np.partition(high, (i, j))
        if float(part[i] + f * (part[j] - part[i])) + margin < s.target:
            return False
        part = np.partition(low, (i, j))
        if float(part[i] + f * (part[j] - part[i])) - margin >= s.target:
            return True
        return None

    def _convex(self, s, high, low):
        """The bounds of :meth:`_decided` tightened where the search's bracket lies on a line ``theta = t * d``.

        ``T_r(t) = w * sum_j |t d_j + e_rj|`` is then convex in ``t``: below the chord through the values ``a_r``,
        ``b_r`` at the computed ends ``t_a < t < t_b``, above the tangents ``a_r + (t - t_a) g_r`` (``g_r = w *
        sum_j sign(t_a d_j + e_rj) d_j``, a subgradient, computed with ``a_r`` by the compiled pass) and likewise at
        ``t_b``. The chord and the tangents are within ``O((t_b - t_a)^2)`` of ``T_r`` where the triangle inequality
        is within ``O(t_b - t_a)``, so more steps are decided (issue 37, tenth pass: 2,000 clusters). The rounding of
        ``theta = t * d`` and of the sums (relative ~1e-15) is covered by :meth:`_decided`'s margin.
        """
        a, b = s.ends
        (ta, tb), t = s.pts, s.t
        high = np.minimum(high, a + ((t - ta) / (tb - ta)) * (b - a))
        ga, gb = s.end_slopes
        if ga is not None:
            low = np.maximum(low, a + (t - ta) * ga)
        if gb is not None:
            low = np.maximum(low, b + (t - tb) * gb)
        return high, low

    def _values(self, wanted, few):
        """``T_r`` of every replicate at each ``(path, t)`` of ``wanted``, then of the kept ones of each of ``few``;
        and their slopes along the lines (:meth:`line`, the compiled pass only), else None."""
        if not wanted and not few:
            return [], []
        n_rep = self.e.shape[0]
        keys = wanted + [(s.path, s.t) for s in few]
        thetas = [self.theta(*key) for key in keys]
        sizes = [n_rep] * len(wanted) + [s.act.size for s in few]
        if self.kernel is not None:
            rows = np.concatenate([np.arange(n_rep)] * len(wanted) + [s.act for s in few]).astype(np.int64)
            which = np.repeat(np.arange(len(thetas), dtype=np.int64), sizes)
            out = np.empty(rows.size)
            dirs = [self.line(*key) for key in keys] if self.sloped is not None else [None] * len(keys)
            if all(d is None for d in dirs):
                self.kernel(self.e, rows, which, np.array(thetas), float(self.w), *self.plan, out)
                return np.split(out, np.cumsum(sizes)[:-1]), [None] * len(keys)
            g = np.empty(rows.size)
            d = np.array([np.zeros(self.e.shape[1]) if d is None else d for d in dirs])
            self.sloped(self.e, rows, which, np.array(thetas), float(self.w), *self.plan, out, d, g)
            cuts = np.cumsum(sizes)[:-1]
            return np.split(out, cuts), [None if d is None else part for d, part in zip(dirs, np.split(g, cuts))]
        if self._et is None:
            self._et = np.ascontiguousarray(self.e.T)
        out = []
        for theta in thetas[:len(wanted)]:
            buf = np.add(theta.reshape(-1, 1), self._et)
            out.append(self.w * pairwise_rows(np.abs(buf, out=buf)))
        if few:
            buf = self.e[np.concatenate([s.act for s in few])]
            buf += np.repeat(np.array(thetas[len(wanted):]), sizes[len(wanted):], axis=0)
            out += np.split(self.w * np.abs(buf, out=buf).sum(axis=1), np.cumsum(sizes[len(wanted):])[:-1])
        return out, [None] * len(out)


# -- the belt statistic in one compiled pass (numba, imported when first needed) ----------------------------------
_KERNEL: list = []


def _belt_kernel(load=False):
    """The compiled ``T_r`` of many rows at once, or None: without numba, and unless numba is already imported (or
    ``load``).

    ``kernel(e, rows, which, thetas, w, leaves, program, out)``: ``out[k] = w * sum_j |thetas[which[k], j] +
    e[rows[k], j]|``, the row sum with NumPy's pairwise additions (those of :func:`pairwise_rows`, the same order on
    one row: the leaves of :func:`_pairwise_plan` with eight accumulators, combined as its program says), so every
    value is bit for bit that of the NumPy pass; no temporary arrays, one call per round of the searches.

    Importing numba costs about 0.2 s of CPU and 0.1 GiB of resident memory, more than the compiled pass saves
    unless a study has hundreds of intervals (240 groups at 2,000 replicates: about 4 ms of 17 per interval), so it
    is used only where the process has loaded numba anyway (the compiled bootstrap weights of large studies).
    """
    if not _KERNEL:
        if not load and "numba" not in sys.modules:
            return None
        try:
            import numba
        except ImportError:   # pragma: no cover - numba is installed with the package's model stack
            _KERNEL.append(None)
            return None

        @numba.njit(cache=True, nogil=True)
        def kernel(e, rows, which, thetas, w, leaves, program, out):   # pragma: no cover - compiled
            stack = np.empty(program.size + 1)
            sums = np.empty(leaves.shape[0])
            for k in range(rows.size):
                row = e[rows[k]]
                th = thetas[which[k]]
                for leaf in range(leaves.shape[0]):
                    a, n = leaves[leaf, 0], leaves[leaf, 1]
                    if n < 8:
                        res = 0.0
                        for i in range(a, a + n):
                            res += abs(th[i] + row[i])
                    else:
                        r0 = abs(th[a] + row[a])
                        r1 = abs(th[a + 1] + row[a + 1])
                        r2 = abs(th[a + 2] + row[a + 2])
                        r3 = abs(th[a + 3] + row[a + 3])
                        r4 = abs(th[a + 4] + row[a + 4])
                        r5 = abs(th[a + 5] + row[a + 5])
                        r6 = abs(th[a + 6] + row[a + 6])
                        r7 = abs(th[a + 7] + row[a + 7])
                        m = a + n - n % 8
                        for i in range(a + 8, m, 8):
                            r0 += abs(th[i] + row[i])
                            r1 += abs(th[i + 1] + row[i + 1])
                            r2 += abs(th[i + 2] + row[i + 2])
                            r3 += abs(th[i + 3] + row[i + 3])
                            r4 += abs(th[i + 4] + row[i + 4])
                            r5 += abs(th[i + 5] + row[i + 5])
                            r6 += abs(th[i + 6] + row[i + 6])
                            r7 += abs(th[i + 7] + row[i + 7])
                        res = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
                        for i in range(m, a + n):
                            res += abs(th[i] + row[i])
                    sums[leaf] = res
                top = 0
                for op in program:
                    if op >= 0:
                        stack[top] = sums[op]
                        top += 1
                    else:
                        top -= 1
                        stack[top - 1] = stack[top - 1] + stack[top]
                out[k] = w * stack[0]

        _KERNEL.append(kernel)
    return _KERNEL[0]


_SLOPE: list = []


def _slope_kernel():
    """:func:`_belt_kernel`'s pass that also gives the slopes of ``T_r`` along lines (numba is then loaded).

    ``kernel(e, rows, which, thetas, w, leaves, program, out, dirs, slopes)``: ``out`` as :func:`_belt_kernel`'s,
    the same additions in the same order (bit for bit its numbers, tested), and ``slopes[k] = w * sum_j
    sign(thetas[which[k], j] + e[rows[k], j]) * dirs[which[k], j]`` (a subgradient of ``t -> T_r`` along ``theta =
    t * d``; summed in any order: it only bounds, see :meth:`_Lockstep._convex`).
    """
    if not _SLOPE:
        import math

        import numba

        @numba.njit(cache=True, nogil=True)
        def kernel(e, rows, which, thetas, w, leaves, program, out, dirs, slopes):   # pragma: no cover - compiled
            stack = np.empty(program.size + 1)
            sums = np.empty(leaves.shape[0])
            r = np.empty(8)
            for k in range(rows.size):
                row = e[rows[k]]
                th = thetas[which[k]]
                d = dirs[which[k]]
                g = 0.0
                for leaf in range(leaves.shape[0]):
                    a, n = leaves[leaf, 0], leaves[leaf, 1]
                    if n < 8:
                        res = 0.0
                        for i in range(a, a + n):
                            u = th[i] + row[i]
                            res += abs(u)
                            g += math.copysign(1.0, u) * d[i]
                    else:
                        for q in range(8):
                            u = th[a + q] + row[a + q]
                            r[q] = abs(u)
                            g += math.copysign(1.0, u) * d[a + q]
                        m = a + n - n % 8
                        for i in range(a + 8, m, 8):
                            for q in range(8):
                                u = th[i + q] + row[i + q]
                                r[q] += abs(u)
                                g += math.copysign(1.0, u) * d[i + q]
                        res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]))
                        for i in range(m, a + n):
                            u = th[i] + row[i]
                            res += abs(u)
                            g += math.copysign(1.0, u) * d[i]
                    sums[leaf] = res
                top = 0
                for op in program:
                    if op >= 0:
                        stack[top] = sums[op]
                        top += 1
                    else:
                        top -= 1
                        stack[top - 1] = stack[top - 1] + stack[top]
                out[k] = w * stack[0]
                slopes[k] = w * g

        _SLOPE.append(kernel)
    return _SLOPE[0]


def _pairwise_plan(n):
    """NumPy's pairwise summation of ``n`` numbers as leaves ``(start, length)`` (at most 128 each) and a postfix
    program over them (``k >= 0``: push leaf ``k``'s sum; ``-1``: add the top two), as :func:`pairwise_rows` splits.

    >>> _pairwise_plan(50)
    (array([[ 0, 50]]), array([0]))
    >>> _pairwise_plan(300)[0].tolist(), _pairwise_plan(300)[1].tolist()
    ([[0, 72], [72, 72], [144, 72], [216, 84]], [0, 1, -1, 2, 3, -1, -1])
    """
    leaves = []
    program = []

    def split(start, size):
        if size <= 128:
            program.append(len(leaves))
            leaves.append((start, size))
            return
        half = size // 2
        half -= half % 8
        split(start, half)
        split(start + half, size - half)
        program.append(-1)

    split(0, n)
    return np.array(leaves, dtype=np.int64).reshape(-1, 2), np.array(program, dtype=np.int64)
