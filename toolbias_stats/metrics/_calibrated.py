"""Bias-corrected estimate and confidence interval for the mean total-variation bias.

See :func:`calibrated_mean_tv`.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from .._display import ReprHTMLMixin
from .._resampling import BeltErrors as _Errors  # noqa: F401  (tests/metrics/test_speed_equivalence.py)
from .._resampling import pairwise_rows as _pairwise_rows  # noqa: F401  (tests/metrics/test_speed_equivalence.py)
from .._resampling import quantile_at as _quantile_at  # noqa: F401  (tests/metrics/test_speed_equivalence.py)
from .._resampling import shrinkage_path as _path
from .._resampling import smallest_ts as _smallest_ts

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["CalibratedTV", "calibrated_mean_tv"]

_METHOD = "test-inversion"
#: Valid attempts per cluster (mean over the clusters) from which the upper bound inverts at the nominal one-sided
#: level; with fewer it inverts at a smaller one (:func:`_upper_tail`; issue 35).
FULL_LEVEL_ATTEMPTS = 25
#: The share of the nominal one-sided level at which the upper bound inverts with 10 or fewer attempts per cluster.
FEW_ATTEMPTS_SHARE = 0.3


@dataclass(frozen=True)
class CalibratedTV(ReprHTMLMixin):
    """Result of :func:`calibrated_mean_tv`.

    Attributes
    ----------
    estimate : float
        Bias-corrected (median-matched along two calibration paths) estimate of
        ``D = mean_c TV_c``; always ``>= 0``.
    ci_low, ci_high : float
        Confidence interval for ``D``. ``ci_low == 0`` exactly when the
        goodness-of-fit test of "all clusters uniform" does not reject at level
        ``(1 - confidence_level) / 2``.
    confidence_level : float
        Nominal coverage of ``[ci_low, ci_high]``.
    method : str
        Short name of the method (``"test-inversion"``).
    p_value_uniform : float
        One-sided bootstrap p-value of the plug-in statistic under "all clusters
        uniform" (``P(T >= T_obs | D = 0)``).
    plugin : float
        The (upward biased) plug-in estimate ``mean_c 0.5 * sum_i |phat_ci - 1/K_c|``.

    Examples
    --------
    >>> res = CalibratedTV(estimate=0.18, ci_low=0.13, ci_high=0.23, confidence_level=0.95,
    ...                    method="test-inversion", plugin=0.19)
    >>> res.to_dict()["ci_high"], res.to_frame().shape
    (0.23, (1, 7))
    """

    estimate: float
    ci_low: float
    ci_high: float
    confidence_level: float
    method: str
    p_value_uniform: float = float("nan")
    plugin: float = float("nan")

    def to_dict(self) -> dict:
        """JSON-ready dict (non-finite numbers as ``None``)."""
        return {k: (None if isinstance(v, float) and not np.isfinite(v) else v)
                for k, v in ((f, getattr(self, f)) for f in self.__dataclass_fields__)}

    def to_frame(self) -> pd.DataFrame:
        """One row: the estimate, its interval, the method and the plug-in, unrounded."""
        import pandas as pd

        return pd.DataFrame([{f: getattr(self, f) for f in self.__dataclass_fields__}])


def _validate(counts, boot_counts):
    if isinstance(counts, np.ndarray) and counts.ndim == 2:
        counts = list(counts)
    if isinstance(boot_counts, np.ndarray) and boot_counts.ndim == 3:
        boot_counts = list(boot_counts)
    try:
        n_clusters = len(counts)
    except TypeError as exc:
        raise ValueError("counts must be a sequence of 1-D count arrays") from exc
    if n_clusters == 0:
        raise ValueError("counts must contain at least one cluster")
    try:
        n_boot_clusters = len(boot_counts)
    except TypeError as exc:
        raise ValueError("boot_counts must be a sequence of 2-D arrays") from exc
    if n_boot_clusters != n_clusters:
        raise ValueError(
            f"boot_counts has {n_boot_clusters} clusters but counts has {n_clusters}"
        )
    obs, boots = [], []
    n_rep = None
    for c in range(n_clusters):
        x = np.asarray(counts[c], dtype=float)
        if x.ndim != 1 or x.size < 2:
            raise ValueError(
                f"counts[{c}] must be a 1-D array with at least 2 categories, "
                f"got shape {x.shape}"
            )
        if not np.all(np.isfinite(x)) or np.any(x < 0):
            raise ValueError(f"counts[{c}] must be finite and non-negative")
        if x.sum() <= 0:
            raise ValueError(f"counts[{c}] has no observations (n_c == 0)")
        raw = np.asarray(boot_counts[c])
        # integer replicate counts (the engine's) stay integers: converted once, where the errors are computed
        b = raw if raw.dtype.kind in "iu" else np.asarray(raw, dtype=float)
        if b.ndim != 2 or b.shape[1] != x.size:
            raise ValueError(
                f"boot_counts[{c}] must have shape (R, {x.size}), got {b.shape}"
            )
        if n_rep is None:
            n_rep = b.shape[0]
        elif b.shape[0] != n_rep:
            raise ValueError(
                "boot_counts arrays must all have the same number of replicates R "
                f"(boot_counts[0] has {n_rep}, boot_counts[{c}] has {b.shape[0]})"
            )
        # integer replicate counts (the engine's) are finite: one pass on the integers instead of two on the floats
        if np.any(raw < 0) if raw.dtype.kind in "iu" else not np.all(np.isfinite(b)) or np.any(b < 0):
            raise ValueError(f"boot_counts[{c}] must be finite and non-negative")
        obs.append(x)
        boots.append(b)
    if n_rep is None or n_rep < 20:
        raise ValueError(f"boot_counts needs at least 20 replicates, got {n_rep}")
    return obs, boots


def _unit_scale(n_units, n_clusters):
    """Per-cluster factor ``sqrt(n / (n - 1))`` for the centred bootstrap errors (1 where unknown or n < 2)."""
    if n_units is None:
        return np.ones(n_clusters)
    n = np.asarray(n_units, dtype=float).ravel()
    if n.size != n_clusters or not np.all(np.isfinite(n)) or np.any(n < 1):
        raise ValueError(f"n_units must give a number >= 1 of resampled units for each of the {n_clusters} "
                         f"clusters; got {n_units!r}")
    return np.where(n > 1, np.sqrt(n / np.maximum(n - 1, 1)), 1.0)


def _spread_fraction(x, v):
    """How far the spread path moves towards equal magnitudes: ``clip(0.6 * rho, 0.25, 0.75)``.

    ``rho = sqrt(mean v) / mean |x|`` is the noise of a component relative to the mean observed deviation. Where
    the noise is small (``rho <= 0.42``: e.g. 100 choices per cluster and a strong chooser) the fraction is the
    quarter of issue 21 and nothing changes; where the noise is as large as the deviations (10-25 choices per
    cluster) the data's shape says little about the true one and the path spreads up to three quarters of the
    way (issue 35: 5 clusters x 25 attempts, strong chooser, misses above 6-7% with a quarter, 3% with this).
    """
    mag = float(np.abs(x).mean())
    if mag <= 0:
        return 0.75
    rho = float(np.sqrt(np.mean(v))) / mag
    return float(np.clip(0.6 * rho, 0.25, 0.75))


def _spread_shape(x, fraction=0.25):
    """A more evenly spread deviation shape than the data's: ``fraction`` of the way to equal magnitudes.

    Same total ``sum |x|``. Noise can push a real deviation towards 0 (more so in small clusters); a path that
    keeps that component small explains the plug-in with too small a truth, and the upper bound comes out low
    (5 clusters x 25 choices, strong chooser: 7-9% misses above the upper bound on the data's own shape, 4-5%
    with a quarter; :func:`_spread_fraction` chooses the fraction from the noise). Zero components get the mean
    magnitude with a positive sign (their sign is unknown).
    """
    mag = np.abs(x).mean()
    xm = (1.0 - fraction) * x + fraction * np.where(x == 0, mag, np.sign(x) * mag)
    total = np.abs(xm).sum()
    return xm * (np.abs(x).sum() / total) if total > 0 else xm


def _upper_tail(alpha, n_attempts):
    """One-sided level of the upper bound: ``alpha / 2`` from :data:`FULL_LEVEL_ATTEMPTS` attempts per cluster on,
    :data:`FEW_ATTEMPTS_SHARE` of it at 10 or fewer, linear in between.

    With about 10 attempts per cluster the noise of a component is as large as the deviations, the data's shape
    says little about the true one, and no path through the data is least favourable for every truth: at the
    nominal level the upper bound misses a bias of 0.25 in 6-8% of studies (5 clusters x 10 attempts; issue 35).
    Inverting at ``0.3 * alpha / 2`` brings that to 2-3% (``analyses/delta_interval_coverage.py``); from 25 attempts
    the nominal level holds (1-3% above), and nothing changes there.

    >>> _upper_tail(0.05, 10), _upper_tail(0.05, 25), round(_upper_tail(0.05, 17.5), 5)
    (0.0075, 0.025, 0.01625)
    """
    share = FEW_ATTEMPTS_SHARE + (1.0 - FEW_ATTEMPTS_SHARE) * (n_attempts - 10.0) / (FULL_LEVEL_ATTEMPTS - 10.0)
    return alpha / 2.0 * float(np.clip(share, FEW_ATTEMPTS_SHARE, 1.0))


def _errors(obs: list, boots: list, scale: np.ndarray) -> tuple[list, np.ndarray, np.ndarray]:
    """The clusters' deviations ``phat - 1/K`` (a list), joined ``x`` (M,) and the centred bootstrap errors ``e``
    (R, M), each cluster's scaled by ``scale[c]``.

    Clusters with one number of tools and no empty replicate are computed together on their (C, R, K) stack (issue
    37: 240 groups; the same operations on every element, and the means over replicates add them in the same
    order, so the same numbers: ``tests/metrics/test_ivals_errors.py``); otherwise cluster by cluster."""
    k = obs[0].size
    if len(obs) > 1 and all(b.shape[1] == k for b in boots):
        # (R, C, K), so that the (R, M) errors are a view of it (issue 37, tenth pass: the former (C, R, K) stack
        # needed a transposed copy, 0.2-0.5 s at 2,000 clusters); integer counts: exact
        b = np.stack(boots, axis=1, dtype=float, casting="unsafe")
        tot = b.sum(axis=2, keepdims=True)
        if tot.all():
            x_counts = np.stack(obs)
            dev = x_counts / x_counts.sum(axis=1, keepdims=True) - 1.0 / k
            pstar = np.divide(b, tot, out=b)
            pstar -= pstar.mean(axis=0)          # over replicates, added in their order as before: the same numbers
            pstar *= scale[:, None]
            return list(dev), dev.ravel(), pstar.reshape(b.shape[0], -1)
    xs: list[np.ndarray] = []
    es: list[np.ndarray] = []
    for x_counts, b_counts in zip(obs, boots):
        k = x_counts.size
        b_counts = np.asarray(b_counts, dtype=float)
        phat = x_counts / x_counts.sum()
        tot = b_counts.sum(axis=1, keepdims=True)
        # a replicate with no valid choices carries no information: use phat
        pstar = b_counts / tot if tot.all() else np.where(tot > 0, b_counts / np.where(tot > 0, tot, 1.0), phat)
        xs.append(phat - 1.0 / k)
        es.append((pstar - pstar.mean(axis=0)) * scale[len(es)])
    return xs, np.concatenate(xs), np.concatenate(es, axis=1)


def _column_var(e, cols=1024):
    """``e.var(axis=0)``, ``cols`` columns at a time: the same numbers without temporaries as large as ``e`` (issue
    37, tenth pass: 2,000 x 20,000 errors are 320 MB).

    A reduction over the rows of two or more columns adds the rows in their order, column by column, whatever the
    other columns; a block of one column would be summed pairwise, so the last block keeps at least two.

    >>> e = np.arange(12.0).reshape(3, 4) ** 2
    >>> _column_var(e, cols=2).tobytes() == e.var(axis=0).tobytes()
    True
    """
    m = e.shape[1]
    if m <= cols:
        return e.var(axis=0)
    bounds = [*range(0, m, cols), m]
    if bounds[-1] - bounds[-2] < 2:
        del bounds[-2]
    out = np.empty(m)
    for a, b in itertools.pairwise(bounds):
        out[a:b] = e[:, a:b].var(axis=0)
    return out


def _null_stats(e, w, rows=256):
    """``w * np.abs(e).sum(axis=1)``, a block of ``rows`` replicates at a time: every row is summed on its own, so
    the same numbers, without a temporary as large as ``e`` (issue 37: K = 40, 2,000 x 800 errors are 13 MB)."""
    out = np.empty(e.shape[0])
    for a in range(0, e.shape[0], rows):
        np.abs(e[a:a + rows]).sum(axis=1, out=out[a:a + rows])
    return np.multiply(w, out, out=out)


class _Line:
    """The path ``theta(t) = t * d``; :attr:`line` ``(d, 0.0)`` tells the searches that it is a line from ``t = 0``.

    >>> _Line(np.array([0.5, -1.0]))(2.0)
    array([ 1., -2.])
    """

    __slots__ = ("d", "line")

    def __init__(self, d):
        self.d, self.line = d, (d, 0.0)

    def __call__(self, t):
        return t * self.d


class _Shrink:
    """The shrinkage path :func:`~toolbias_stats._resampling.shrinkage_path` of ``x``; from ``t = 1`` on it is ``t *
    x`` (:attr:`line`).

    >>> x = np.array([0.3, -0.1])
    >>> _Shrink(x, np.array([0.01, 0.01]), 9.0)(0.0).tolist(), _Shrink(x, np.array([0.01, 0.01]), 9.0)(2.0).tolist()
    ([0.0, -0.0], [0.6, -0.2])
    """

    __slots__ = ("lam_max", "line", "v", "x")

    def __init__(self, x, v, lam_max):
        self.x, self.v, self.lam_max, self.line = x, v, lam_max, (x, 1.0)

    def __call__(self, t):
        return _path(t, self.x, self.v, self.lam_max)


def _bounds(paths, e, w, t_obs, levels, null_stats, alpha):
    """The belt inversions of :func:`calibrated_mean_tv`, run in lockstep (:func:`smallest_ts`): the two
    median-matched estimates and the interval ``(est_shrink, est_linear, ci_low, ci_high)`` before the range clip.

    The ten searches are those of ``invert_belt`` along the shrinkage path (lower, upper, median) and along the
    linear and spread paths (upper, median), and the floor's (one per path, below): the same brackets as the
    searches run one after another, hence the same numbers (``tests/metrics/test_lockstep_belt.py``); those of the
    upper bounds and the floor stop once they cannot give the largest upper bound.

    The floor is the smallest upper bound the interval may have, a power-constrained floor for near-uniform
    observations. When the plug-in lies at or below the ``alpha/2`` quantile of its law under "all clusters
    uniform", the belt inversion returns an upper bound at (or close to) 0, which asserts an exactly fair chooser
    although such data are as likely under a small bias. Following the idea of power-constrained limits (Cowan,
    Cranmer, Gross & Vitells 2011), the upper bound is not allowed below the one obtained for an observation at that
    quantile, inverted at half the level (``alpha/4``, so that the quantile at D = 0 lies strictly below it). The
    floor is a constant of the noise (it does not depend on the observation); it only widens intervals of studies
    whose plug-in falls in the lower tail of the null law, so coverage can only increase.
    """
    q_hi, q_lo = levels
    searches = [(0, t_obs, q_hi), (0, t_obs, q_lo), (0, t_obs, 0.5), (1, t_obs, q_lo), (1, t_obs, 0.5),
                (2, t_obs, q_lo), (2, t_obs, 0.5)]
    t_floor = float(np.quantile(null_stats, alpha / 2.0)) if null_stats.size else 0.0
    if t_floor > 0:
        searches += [(p, t_floor, alpha / 4.0) for p in range(len(paths))]
    # T(0) = the null statistics (row sums of |e|: the same additions, tested) where theta(0) is exactly zero
    known = {p: null_stats for p, path in enumerate(paths) if not np.any(path(0.0))}
    # the upper bounds and the floor count only through their maximum: a search that cannot give it stops early
    # the paths that are lines ``theta = t * d`` (from some t on) say so: the searches' bounds use it (convexity)
    lines = {p: path.line for p, path in enumerate(paths) if getattr(path, "line", None) is not None}
    found = _smallest_ts(paths, e, w, searches, known=known, largest=[1, 3, 5] + list(range(7, len(searches))),
                         lines=lines)

    def dval(p, t):
        return float(w * np.abs(paths[p](t)).sum())

    def bound(k, end):
        r = found[k]
        return 0.0 if r is None else dval(searches[k][0], r[end] if end is not None else 0.5 * (r[0] + r[1]))

    ci_low = bound(0, 0)
    ci_high = max(bound(1, 1), bound(3, 1), bound(5, 1))
    floor = 0.0
    for k in range(7, len(searches)):     # the sensitivity floor of the upper bound
        if found[k] is not None:
            floor = max(floor, dval(searches[k][0], found[k][1]))
    return bound(2, None), bound(4, None), ci_low, max(ci_high, floor)


def calibrated_mean_tv(
    counts: Sequence[np.ndarray],
    boot_counts: Sequence[np.ndarray],
    *,
    confidence_level: float = 0.95,
    n_units: Sequence[int] | None = None,
) -> CalibratedTV:
    r"""Bias-corrected estimate and CI for the mean total-variation distance to uniform.

    Target: :math:`D = \frac1C \sum_c TV_c`, with
    :math:`TV_c = \tfrac12 \sum_i |p_{ci} - 1/K_c|`.

    Parameters
    ----------
    counts : sequence of 1-D int arrays, length C
        ``counts[c]`` (shape ``(K_c,)``) are the observed choice counts of cluster
        ``c``; ``n_c = counts[c].sum() > 0``.
    boot_counts : sequence of 2-D int arrays, length C
        ``boot_counts[c]`` (shape ``(R, K_c)``) are the counts in R query-level
        bootstrap replicates (queries resampled with replacement within the
        cluster, all rotations/runs of a query kept together). Replicate ``r`` is
        one joint replicate across clusters, so all arrays share the same R.
    confidence_level : float, default 0.95
    n_units : sequence of int, optional
        Number of resampled units behind ``boot_counts[c]`` (queries of a query bootstrap; attempts when the
        replicates are multinomial draws of the observed counts). The centred errors of cluster ``c`` are
        scaled by ``sqrt(n / (n - 1))``: the bootstrap variance of a mean of ``n`` units is ``(n - 1) / n`` of
        the unbiased one, which matters for small clusters (5 queries: -20% variance). None: no scaling.

    Returns
    -------
    CalibratedTV

    Notes on randomness: the procedure draws nothing itself; all sampling variation comes from the
    supplied bootstrap replicates, so the output is a deterministic function of the inputs.

    Notes
    -----
    **Statistic.** Let :math:`x_c = \hat p_c - u_c` (``u_c = 1/K_c``) and
    :math:`T(\theta + e) = \frac{1}{2C}\sum_c \sum_i |\theta_{ci} + e_{ci}|`; the
    plug-in estimate is :math:`T_{obs} = T(x)`. Since
    :math:`E|\theta + e| > |\theta|` (most strongly at :math:`\theta = 0`, the kink),
    :math:`T_{obs}` is biased upward by up to :math:`\approx 0.4\,\sigma` per
    component.

    **Sampling noise from the query bootstrap.** The errors are taken from the
    supplied bootstrap replicates, centred on their mean:
    :math:`e^{*}_{r} = \hat p^{*}_r - \overline{\hat p^{*}}` (proportions per
    replicate). They carry the real dependence structure (rotations and runs of a
    query move together; positional counts of a model with a fixed tool
    preference vary far less than multinomial), the within-cluster negative
    correlation, and non-normal shape. No multinomial variance formula is used.
    With :math:`v_{ci} = \operatorname{Var}^*(e^*_{ci})`, the replicates are a
    plug-in approximation of the law of :math:`\hat p - p` (Efron & Tibshirani
    1993, ch. 6; the variance is assumed not to change much over the small
    neighbourhood of configurations considered).

    **Calibration path.** A one-parameter family of deviation vectors
    :math:`\theta(t)` connects the null to the data and beyond:

    * :math:`0 \le t \le 1`: :math:`\theta_{ci}(t) = \mathrm{sign}(x_{ci})
      \sqrt{\max(x_{ci}^2 - \lambda v_{ci}, 0)}` with
      :math:`\lambda = \lambda_{max}(1 - t)` and
      :math:`\lambda_{max} = \max_{ci} x_{ci}^2 / v_{ci}` (so :math:`\theta(0) = 0`,
      :math:`\theta(1) = x`). This is the folded-normal moment correction
      :math:`E x^2 = \theta^2 + v` applied with a varying strength; it shrinks
      components that are within noise of zero to exactly zero while leaving
      large components almost untouched, i.e. it follows the plausible *shape*
      of :math:`|\theta|` (a single scaling :math:`t\,x` does not: it keeps the
      pure-noise components and over-corrects the real ones).
    * :math:`t > 1`: :math:`\theta(t) = t\,x` (needed for upper bounds when the
      plug-in came out low).

    The truth along the path is :math:`D(t) = \frac{1}{2C}\sum |\theta_{ci}(t)|`,
    increasing in :math:`t`.

    **Test inversion.** For each :math:`t` the sampling law of the plug-in is
    :math:`T_r(t) = T(\theta(t) + e^*_r)`, :math:`r = 1..R`; the same replicates
    are used for every :math:`t` (common random numbers), which makes the
    quantiles :math:`q_\beta(t)` smooth and monotone in :math:`t` in practice. The
    confidence set is the Neyman belt inversion (Neyman 1937; Casella & Berger
    2002, sec. 9.2.3)

    .. math:: \{D(t) : q_{\alpha/2}(t) \le T_{obs} \le q_{1-\alpha/2}(t)\},

    found by bisection. At :math:`t = 0` the condition
    :math:`T_{obs} \le q_{1-\alpha/2}(0)` is exactly the bootstrap goodness-of-fit
    test of uniformity, so ``ci_low == 0`` iff that test does not reject, and the
    coverage at :math:`D = 0` is :math:`1 - \alpha/2` by construction (an
    interval centred on a shifted plug-in excludes 0 almost always).

    **Shape uncertainty (two paths).** The law of :math:`T` depends on the whole
    configuration, not only on :math:`D`: for fixed :math:`D`, mass concentrated
    in few components gives a *larger* :math:`E\,T` (the zero components keep
    their full bias :math:`\approx 0.8\sigma`) than mass spread thinly over all
    components. The shrinkage path above is the concentrated end; the linear
    path :math:`\theta(t) = t\,x` (shape of the raw data, i.e. spread as much as
    the data) is the spread end. A concentrated member needs a smaller
    :math:`D` to explain :math:`T_{obs}`, so it gives the safe *lower* bound;
    the spread member gives the safe *upper* bound. Hence

    * ``ci_low``  = lower belt bound along the shrinkage path,
    * ``ci_high`` = max(upper bound along the shrinkage path, upper bound along
      the linear path, upper bound along a more evenly spread path
      :math:`t\,x_m`, :math:`x_m` a fraction :math:`f` of the way from the
      data's shape to equal magnitudes, same total; issue 21: in small clusters
      noise pushes a real deviation towards 0 and the data's own shape
      under-spreads it; :math:`f = \mathrm{clip}(0.6\,\rho, 1/4, 3/4)` with
      :math:`\rho` the errors' sd over the mean :math:`|x|`, issue 35: a
      quarter where the noise is small, up to three quarters where it is as
      large as the deviations), and never below a power-constrained floor
      (below); every bound and the estimate are at most
      :math:`\frac1C\sum_c (1 - 1/K_c)`, the largest possible ``D``,
    * ``estimate`` = average of the two median-matched estimates
      :math:`D(\hat t)`, :math:`\operatorname{median} T(\hat t) = T_{obs}`
      (0 if :math:`T_{obs}` is below the null median), clipped into the CI.

    Using the spread (linear) path for the lower bound or the concentrated one
    for the upper bound alone fails (the partly-uniform chooser resp. the
    nearly-uniform chooser lose 10-50 points of coverage in our simulations).

    **Small clusters and near-uniform data (issue 21).** With ``n_units`` the
    centred errors of cluster ``c`` are scaled by :math:`\sqrt{n_c/(n_c-1)}`
    (the bootstrap variance of a mean of :math:`n_c` units is
    :math:`(n_c-1)/n_c` of the unbiased one: 5 queries lose 20% of the
    variance). When the plug-in falls below the :math:`\alpha/2` quantile of its
    law at :math:`D = 0` the belt is empty and the upper bound would be 0 (an
    interval [0, 0] asserts an exactly fair chooser); the upper bound is
    therefore never below the one obtained for an observation at that quantile
    inverted at level :math:`\alpha/4` (a power-constrained limit, Cowan et
    al. 2011), a constant of the noise that only widens such intervals. With
    5 clusters x 25 choices (strong chooser) the three changes take coverage
    from 89% (9% misses above) to 94%; ``analyses/bias_audit.py`` has the
    tables.

    **Why it is calibrated.** If the true :math:`\theta` were on a path, the
    inversion along it would be exact up to the bootstrap approximation of the
    error law; taking for each side the path that is least favourable among
    the two plausible shapes keeps each one-sided miss rate at or below about
    :math:`\alpha/2`. Far from uniformity both paths coincide with
    :math:`t\,x` near the data, and the interval reduces to a bootstrap
    interval of the (then nearly unbiased) plug-in, so it is not conservative
    there. Coverage was checked by simulation (``analyses/calibration_tv.py``:
    10 clusters x 100 queries x 5 rotations) for skewed, mildly skewed, partly
    uniform, nearly uniform and exactly uniform choosers, with multinomial and
    with much-smaller-than-multinomial (positional, fixed tool preference)
    noise (200 studies each, R = 500): coverage 91-99% in all of them; the
    weakest case is a strong position effect diluted by a fixed tool preference
    (91%, misses on the upper side), the most conservative a mild position
    effect with a very strong tool preference (99%).

    References
    ----------
    Neyman, J. (1937). Outline of a theory of statistical estimation based on the
    classical theory of probability. Phil. Trans. R. Soc. A 236, 333-380.
    Casella, G. & Berger, R. L. (2002). Statistical Inference, 2nd ed., sec. 9.2.
    Efron, B. & Tibshirani, R. (1993). An Introduction to the Bootstrap.
    Chapman & Hall.
    Cowan, G., Cranmer, K., Gross, E. & Vitells, O. (2011). Power-constrained
    limits. arXiv:1105.3166.

    Examples
    --------
    Three clusters of five tools, 200 choices each, from a chooser whose true TV to uniform is 0.2; the
    replicates here are multinomial draws of the observed counts (``selection_bias`` passes query-bootstrap ones):

    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> counts = [rng.multinomial(200, [0.4, 0.15, 0.15, 0.15, 0.15]) for _ in range(3)]
    >>> boot = [rng.multinomial(200, c / 200, size=500) for c in counts]
    >>> res = calibrated_mean_tv(counts, boot, n_units=[200, 200, 200])
    >>> round(res.plugin, 3), round(res.estimate, 3), round(res.ci_low, 3), round(res.ci_high, 3)
    (0.192, 0.181, 0.134, 0.227)
    """
    if not (0.0 < confidence_level < 1.0):
        raise ValueError(
            f"confidence_level must be in (0, 1), got {confidence_level!r}"
        )
    obs, boots = _validate(counts, boot_counts)
    n_clusters = len(obs)
    scale = _unit_scale(n_units, n_clusters)
    alpha = 1.0 - confidence_level

    xs, x, e = _errors(obs, boots, scale)   # (M,) deviations, (R, M) centred errors
    w = 0.5 / n_clusters
    v = _column_var(e)
    t_obs = w * np.abs(x).sum()

    pos_v = v > 0
    if np.any(pos_v):
        lam_max = float(np.max(x[pos_v] ** 2 / v[pos_v]))
    else:
        lam_max = 0.0

    path_shrink, path_linear = _Shrink(x, v, lam_max), _Line(x)

    # the upper bound's one-sided level: smaller with few attempts per cluster (issue 35)
    q_lo_p, q_hi_p = _upper_tail(alpha, float(np.mean([xc.sum() for xc in obs]))), 1.0 - alpha / 2.0
    null_stats = _null_stats(e, w)
    p_value = float((1 + np.sum(null_stats >= t_obs - 1e-15)) / (1 + null_stats.size))

    xm = _spread_shape(x, _spread_fraction(x, v))

    paths = (path_shrink, path_linear, _Line(xm))     # the spread path
    est_s, est_l, ci_low, ci_high = _bounds(paths, e, w, t_obs, (q_hi_p, q_lo_p), null_stats, alpha)
    # the estimand's range (issue 35): D <= mean_c (1 - 1/K_c), reached by a chooser that always picks one tool
    d_max = w * 2.0 * sum(1.0 - 1.0 / xc.size for xc in xs)
    ci_low, ci_high = min(ci_low, d_max), min(ci_high, d_max)
    estimate = 0.5 * (est_s + est_l)
    # keep the ordering exact (zero-noise / degenerate cases)
    estimate = min(max(estimate, ci_low), ci_high)
    return CalibratedTV(
        estimate=float(estimate),
        ci_low=float(ci_low),
        ci_high=float(ci_high),
        confidence_level=float(confidence_level),
        method=_METHOD,
        p_value_uniform=p_value,
        plugin=float(t_obs),
    )
