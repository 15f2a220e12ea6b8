"""The resampling kernels shared by the analysis subpackages (the package's internal API for intervals).

Vectorised stratified bootstrap helpers (query-level resampling weights, percentile and BCa intervals), the Wilson
score interval and the test-inversion kernels of the calibrated TV interval (:func:`invert_belt` along a
:func:`shrinkage_path`). A core module: it imports only NumPy, SciPy and (lazily) the numba weights kernel, so that
``metrics``, ``choice``, ``experiments``, ``shadow`` and ``toolsense`` import it without reaching into each other's
private modules (issue 40; the contracts are in ``pyproject.toml``, ``[tool.importlinter]``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from scipy import special

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

__all__ = ["ConfidenceInterval", "query_weights", "resampled_counts", "percentile_ci", "bca_ci", "bca_bias_z0",
           "BOOTSTRAP_CI_METHODS", "BOOTSTRAP_WEIGHTS", "wilson_interval", "shrinkage_path", "invert_belt",
           "BeltErrors", "pairwise_rows", "quantile_at", "smallest_t"]

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
    flat = draws + (np.arange(n_resamples) * n_units)[:, None]
    return np.bincount(flat.ravel(), minlength=n_resamples * n_units).reshape(n_resamples, n_units).astype(float)


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
                out[:] = w @ joined
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
