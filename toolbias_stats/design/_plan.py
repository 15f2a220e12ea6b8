"""Study planner: expected CI half-widths, minimum detectable effects and the cheapest design.

See :func:`plan_study`.
"""

from __future__ import annotations

import numbers
from collections import namedtuple
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, NamedTuple, cast

import numpy as np
import pandas as pd
from scipy import special

from .._display import ReprHTMLMixin
from .._json import records as _records
from .._validation import check_choice, check_confidence_level, check_rng
from ._components import _MATRIX, COMPONENTS, DESIGN_METRICS, VarianceComponents, variance_components

if TYPE_CHECKING:
    import os

    from numpy.typing import ArrayLike

    from ..io import SelectionCounts, SelectionLog, Study

    Pilot = SelectionLog | SelectionCounts | Study | str | os.PathLike[str]

__all__ = ["plan_study", "StudyPlan", "TARGET_KINDS", "DEFAULT_QUERIES", "DEFAULT_RUNS"]

#: What a target constrains: ``width`` the CI half-width of delta, ``mde`` the minimum detectable delta against a
#: fair chooser, ``shift`` the minimum detectable change of delta between two conditions.
TARGET_KINDS = ("width", "mde", "shift")
DEFAULT_QUERIES = (10, 20, 30, 50, 75, 100, 150, 200, 300, 500, 1000, 2000)
DEFAULT_RUNS = (1, 2, 3, 5)
_BISECT = 16


def _is_real(value) -> bool:
    """``isinstance(value, numbers.Real)`` without narrowing the type (mypy has no arithmetic on ``numbers.Real``)."""
    return isinstance(value, numbers.Real)


def _positive(name, value, *, integer=False, allow_none=True):
    if value is None and allow_none:
        return None
    ok = isinstance(value, numbers.Real) and not isinstance(value, bool) and np.isfinite(value) and value > 0
    if integer:
        ok = ok and float(value).is_integer()
    if not ok:
        kind = "a positive integer" if integer else "a positive number"
        raise ValueError(f"`{name}` must be {kind}; got {value!r} instead.")
    return int(value) if integer else float(value)


def _sizes(name, values):
    vals = [values] if isinstance(values, numbers.Number) else list(values)
    if not vals:
        raise ValueError(f"`{name}` must list at least one design size; got an empty sequence instead.")
    return sorted({_positive(name, v, integer=True, allow_none=False) for v in vals})


# -- Monte-Carlo engine ------------------------------------------------------------------------
_Errors = namedtuple("_Errors", ["shared", "run", "runs"])
_Errors.__doc__ = """Rate errors of a design: square roots (C, D, D) of the covariance of the part shared by the runs
and of the per-run part, and the number of runs."""


def _multinomial_cov(rates):
    """``diag(v) - v v'`` for each row ``v`` of ``rates`` (C, D)."""
    out = -rates[:, :, None] * rates[:, None, :]
    idx = np.arange(rates.shape[1])
    out[:, idx, idx] += rates
    return out


class _Engine:
    """Distribution of the mean-over-runs plug-in delta for a design, by Gaussian draws of the rates.

    Per cluster, the rates of a design are ``p + e_shared + e_run`` with ``e_shared ~ N(0, A)`` common to every
    run (queries and their rotations) and ``e_run ~ N(0, B)`` per run (run effect, query x run, attempt noise);
    A and B are the variance components divided by the design's sizes. The TV of each draw keeps the fold at
    ``p_j = 1/K`` that the linearisation misses, and the plug-in bias of the per-run TVs.

    A design's errors are the square roots of its two covariances (:class:`_Errors`); the rates of all draws and
    runs at a centre are then one BLAS product per cluster with the stacked draws (``z``), followed by the
    absolute value and a second product for the weighted sum over rates: no per-draw loops or stored error arrays.
    The numbers are those of the former per-draw products up to floating-point rounding (tests/design/
    test_plan_engine.py keeps that engine as the reference).
    """

    def __init__(self, fit, n_draws, s_max, gen, run_effect=True):
        cl = fit["clusters"]
        self.c = len(cl)
        d = max(len(fc["p"]) for fc in cl)
        self.d = d

        def pad(vec):
            out = np.zeros((self.c, d))
            for i, fc in enumerate(cl):
                out[i, :len(fc[vec])] = fc[vec]
            return out

        def padm(getter):
            out = np.zeros((self.c, d, d))
            for i, fc in enumerate(cl):
                mat = getter(fc)
                out[i, :len(mat), :len(mat)] = mat
            return out

        self.p, self.u, self.a = pad("p"), pad("u"), pad("a")
        self.M = {c: padm(lambda fc, c=c: fc["M"][c]) for c in _MATRIX}
        self.run_effect = bool(run_effect)
        # attempt noise at other rates (the MDE's alternative): the pilot's attempt component plus the change of the
        # multinomial covariance diag(c) - cc', in the component's units (ratio of traces at the pilot's rates);
        # only for one categorical target per attempt (not delta_model's stacked tools and positions)
        sig_p = _multinomial_cov(self.p)
        tr = np.trace(sig_p, axis1=1, axis2=2)
        ratio = np.trace(self.M["attempt"], axis1=1, axis2=2) / np.where(tr > 1e-12, tr, 1.0)
        # an unidentified or negative (method-of-moments) attempt component: no adjustment
        self.kappa = (np.where(tr > 1e-12, np.clip(ratio, 0.0, None), 0.0) if fit["metric"] != "delta_model"
                      else np.zeros(self.c))
        self._sig_p = sig_p
        self.k_rot = np.array([fc["k_rot"] for fc in cl], dtype=float)
        self.delta0 = float(np.mean(np.sum(self.a * np.abs(self.p - self.u), -1)))
        self.dir = self.p - self.u
        if self.delta0 <= 1e-12:                       # a fair pilot: test against "one tool favoured"
            self.dir = np.zeros_like(self.p)
            self.dir[:, 0] = 1.0
            self.dir -= np.where(self.a > 0, self.u, 0.0) * (self.a > 0)
            self.delta0 = float(np.mean(np.sum(self.a * np.abs(self.dir), -1)))
        with np.errstate(divide="ignore", invalid="ignore"):          # padded rates: 0 / 0, not used
            lim = np.where(self.dir < 0, self.u / -self.dir, np.inf)
        self.t_max = float(lim.min())
        # the same standard normal draws, in the same order, as always: xi (N, C, D) for the part shared by the
        # runs and eta (N, S, C, D) per run. They are stored rate-major beside each other with a row of ones,
        # z = [eta_s; xi; 1] of shape (C, 2D + 1, S, N), so that the rates of every draw and run at a centre are
        # one BLAS product per cluster, [root_run, root_shared, centre - u] @ z (no stored error arrays)
        self.n = n_draws
        xi = gen.standard_normal((n_draws, self.c, d)).transpose(1, 2, 0)              # (C, D, N)
        eta = gen.standard_normal((n_draws, s_max, self.c, d)).transpose(2, 3, 1, 0)   # (C, D, S, N)
        self.z = np.empty((self.c, 2 * d + 1, s_max, n_draws))
        self.z[:, :d] = eta
        self.z[:, d:2 * d] = xi[:, :, None, :]
        self.z[:, 2 * d] = 1.0
        self._x = np.empty((self.c, d, s_max * n_draws))
        self._aw = self.a[:, None, :].copy()                                            # (C, 1, D)

    @staticmethod
    def _roots(covs):
        """Symmetric square roots (V sqrt(L), L clipped at 0) of a stack of matrices, one LAPACK call.

        The components are unbiased method-of-moments matrices (not each clipped, which would bias them
        upward); only their design-specific sum is projected onto the positive semi-definite cone."""
        cov = np.stack(covs)
        vals, vecs = np.linalg.eigh((cov + np.swapaxes(cov, -1, -2)) / 2)
        return vecs * np.sqrt(np.clip(vals, 0, None))[..., None, :]

    def attempt_at(self, centre):
        """The attempt component at rates ``centre`` (C, D) instead of the pilot's."""
        return self.M["attempt"] + self.kappa[:, None, None] * (_multinomial_cov(centre) - self._sig_p)

    def errors(self, q, s, r, run=True, centre=None):
        """Rate errors of a design with ``s`` runs (:class:`_Errors`: the roots of their covariances); ``run=None``
        returns both (without, with the run effect). ``centre``: the attempt noise at these rates (default: the
        pilot's)."""
        att = self.M["attempt"] if centre is None else self.attempt_at(centre)
        shared = self.M["query"] / q + ((1.0 / r - 1.0 / self.k_rot) / q)[:, None, None] * self.M["rotation"]
        per_run = self.M["query_x_run"] / q + att / (q * r)
        both = run is None and self.run_effect
        covs = [shared, per_run + (self.M["run"] if run else 0.0)]
        if both:
            covs.append(per_run + self.M["run"])
        roots = self._roots(covs)
        first = _Errors(roots[0], roots[1], s)
        if run is not None:
            return first
        if not both:
            return first, first
        return first, _Errors(roots[0], roots[2], s)

    def estimates(self, err, t=1.0, centre=None):
        """The plug-in delta (mean over clusters and runs of the TV) of each draw, at rates ``centre`` (default:
        the alternative ``u + t * dir``)."""
        centre = self.u + t * self.dir if centre is None else centre
        s, m = err.runs, err.runs * self.n
        w = np.concatenate([err.run, err.shared, (centre - self.u)[:, :, None]], axis=2)    # (C, D, 2D + 1)
        x = self._x[:, :, :m]
        np.matmul(w, self.z[:, :, :s].reshape(self.c, 2 * self.d + 1, m), out=x)         # rates - u, (C, D, S N)
        np.abs(x, out=x)
        tv = np.matmul(self._aw, x)                                                      # (C, 1, S N)
        return tv.reshape(self.c, s, self.n).mean((0, 1))

    def null_critical(self, err, alpha):
        """Critical value of the level-alpha test of "fair chooser" that :func:`~toolbias_stats.selection_bias`
        reports (``p_value``): the statistic's law at uniform rates with the query, rotation and attempt variation
        of the pilot, i.e. the law of its centred query-bootstrap replicates (a uniform multinomial reference
        would ignore the query heterogeneity and reject too often). ``err`` are the errors the query bootstrap
        sees: without the run main effect (runs stay together in every replicate)."""
        return float(np.quantile(self.estimates(err, centre=self.u), 1 - alpha))

    def evaluate(self, q, s, r, z, z_shift, rho, alpha, power, with_mde=True):
        # the query bootstrap's interval does not see a run-level shift: its width comes from the draws without it
        no_run, err = self.errors(q, s, r, run=None)
        est_no_run = self.estimates(no_run, centre=self.p)
        est = est_no_run if err is no_run else self.estimates(err, centre=self.p)
        ci_sd = float(np.std(est_no_run, ddof=1))
        sd = float(np.std(est, ddof=1))
        out = {"expected_estimate": float(est.mean()), "sd": sd, "half_width": z * ci_sd, "error_half_width": z * sd,
               "shift_half_width": z * sd * np.sqrt(2 * (1 - rho)),
               "mds": z_shift * sd * np.sqrt(2 * (1 - rho)), "mde": np.nan, "null_critical": np.nan}
        if with_mde:
            crit = self.null_critical(no_run, alpha)
            out["null_critical"] = crit
            out["mde"] = self._mde(err, crit, power, (q, s, r), alpha)
        self._no_run = no_run
        return out, err

    def at_alternative(self, design, t, alpha):
        """Errors (with the run effect) and the reported test's critical value in studies whose rates are the
        alternative ``u + t * dir``: the centred query-bootstrap replicates of such a study have its noise (closer
        to uniform rates are noisier than the pilot's), so both the statistic and the critical value use it."""
        no_run, err = self.errors(*design, run=None, centre=self.u + t * self.dir)
        return err, self.null_critical(no_run, alpha)

    def power_at(self, err, crit, delta):
        t = min(delta / self.delta0, self.t_max)
        return float(np.mean(self.estimates(err, t) > crit))

    def _bisect(self, err, crit, power, lo, hi, steps):
        for _ in range(steps):
            mid = (lo + hi) / 2
            if np.mean(self.estimates(err, mid) > crit) >= power:
                hi = mid
            else:
                lo = mid
        return hi

    def _mde(self, err, crit, power, design, alpha):
        """Smallest t with power at the noise of the pilot (a coarse bisection), then one fixed-point step: the
        bisection again with the noise (and the test's critical value) of that alternative. The noise is smooth
        in t, so a second step moves the MDE by far less than its Monte-Carlo error (and would cost speed)."""
        if np.mean(self.estimates(err, self.t_max) > crit) < power:
            return np.nan
        if not self.kappa.any():
            return self._bisect(err, crit, power, 0.0, self.t_max, _BISECT) * self.delta0
        t = self._bisect(err, crit, power, 0.0, self.t_max, _BISECT // 2 + 2)
        err_t, crit_t = self.at_alternative(design, t, alpha)
        lo, hi = 0.5 * t, min(2.0 * t, self.t_max)
        if np.mean(self.estimates(err_t, hi) > crit_t) < power:
            lo, hi = hi, self.t_max
            if np.mean(self.estimates(err_t, hi) > crit_t) < power:
                return np.nan
        return self._bisect(err_t, crit_t, power, lo, hi, _BISECT // 2 + 2) * self.delta0


# -- result ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class StudyPlan(ReprHTMLMixin):
    """Result of :func:`plan_study`.

    Attributes
    ----------
    achieved : pandas.DataFrame
        One row per group and metric at the pilot's own design: ``half_width`` (expected half-width of the
        package's query-bootstrap CI of delta, which does not see a run-level shift), ``error_half_width`` (z times
        the sd of the estimate's actual error, the run main effect included with ``run_effect=True``), ``mde``
        (minimum detectable delta against a fair chooser), ``shift_half_width`` and ``mds`` (CI half-width and
        minimum detectable change of delta between two conditions), ``expected_estimate``
        (mean of the plug-in estimate, bias included) and ``null_critical`` (the fair chooser's critical value).
    grid : pandas.DataFrame
        The same per design (``queries`` per cluster, ``runs``, ``rotations`` per query and run) with ``calls``
        (LLM calls per group) and ``cost``.
    cheapest : pandas.DataFrame
        One row per group: the design with the fewest calls that meets the target for every metric (``feasible``
        False when none up to ``max_queries`` does), with its half-widths, MDEs and MDSs per metric.
    target : dict
        ``{"kind", "value", "metrics"}`` (``value`` None: no target).
    settings : dict
    components : VarianceComponents or None
    warnings : list of str

    Examples
    --------
    An assumed chooser (5 clusters of 4 tools, the first chosen 40% of the time): the pilot's design (100
    queries in all 4 rotations) and the cheapest design whose CI half-width of δ_API is at most 0.05.

    >>> import numpy as np
    >>> import toolbias_stats as tbs
    >>> plan = tbs.plan_study(np.tile([0.4, 0.2, 0.2, 0.2], (5, 1)), target=0.05, metrics=["delta_api"],
    ...                       queries=[20, 80], runs=[1], rng=1)
    >>> plan.achieved[["metric", "queries", "half_width", "mde"]].round(3)
          metric  queries  half_width    mde
    0  delta_api      100       0.022  0.044
    >>> plan.cheapest[["queries", "runs", "rotations", "calls", "feasible"]]
       queries  runs  rotations  calls  feasible
    0       15     1          4    300      True
    >>> plan.to_dict()["groups"][0]["cheapest"]["calls"]
    300
    """

    achieved: pd.DataFrame
    grid: pd.DataFrame
    cheapest: pd.DataFrame
    target: dict
    settings: dict
    components: VarianceComponents | None = field(default=None, repr=False)
    warnings: list = field(default_factory=list)

    def _headline(self):
        if self.target["value"] is not None and len(self.cheapest):
            title = (f"StudyPlan: cheapest design with {self.target['kind']} <= {self.target['value']:g} for "
                     f"{', '.join(self.target['metrics'])}")
            return title, self.cheapest, "grid: .to_frame(); the pilot's own design: .achieved"
        return "StudyPlan: the pilot's design", self.achieved, "grid: .to_frame()"

    def to_frame(self) -> pd.DataFrame:
        """The design grid (one row per group, design and metric), unrounded."""
        return self.grid.copy()

    def to_dict(self) -> dict[str, Any]:
        """The documented JSON object of ``toolbias-stats plan --json`` (docs/cli.md)."""
        by = list(self.settings.get("by", []))
        groups = []
        keys_list = ([{}] if not by else
                     [dict(zip(by, k if isinstance(k, tuple) else (k,)))
                      for k in dict.fromkeys(map(tuple, self.achieved[by].itertuples(index=False, name=None)))])
        for keys in keys_list:
            sel = np.ones(len(self.achieved), bool)
            for k, v in keys.items():
                sel &= (self.achieved[k] == v).to_numpy()
            ach = self.achieved[sel]
            first = ach.iloc[0]
            g = {"keys": {k: _records(pd.DataFrame([{k: v}]))[0][k] for k, v in keys.items()},
                 "pilot": {"queries": int(first["queries"]), "runs": int(first["runs"]),
                           "rotations": int(first["rotations"]), "clusters": int(first["clusters"]),
                           "calls": int(first["calls"])},
                 "achieved": {r["metric"]: {c: r[c] for c in ("estimate", "expected_estimate", "half_width",
                                                             "error_half_width", "mde", "shift_half_width", "mds",
                                                             "null_critical")}
                              for r in _records(ach)},
                 "cheapest": None}
            if len(self.cheapest):
                sel = np.ones(len(self.cheapest), bool)
                for k, v in keys.items():
                    sel &= (self.cheapest[k] == v).to_numpy()
                rec = _records(self.cheapest[sel])
                if rec and not rec[0]["feasible"]:
                    g["cheapest"] = {"feasible": False, "reason": rec[0]["reason"]}
                if rec and rec[0]["feasible"]:
                    r = rec[0]
                    g["cheapest"] = {"feasible": True, "queries": r["queries"], "runs": r["runs"],
                                     "rotations": r["rotations"],
                                     "calls": r["calls"], "cost": r["cost"],
                                     "metrics": {m: {c: r.get(f"{m}_{c}") for c in ("half_width", "error_half_width",
                                                                                   "mde", "mds")}
                                                 for m in self.target["metrics"]}}
            groups.append(g)
        return {"target": dict(self.target), **{k: v for k, v in self.settings.items() if k != "by"}, "by": by,
                "groups": groups, "grid": _records(self.grid), "warnings": list(self.warnings)}


# -- main function -----------------------------------------------------------------------------
def plan_study(pilot: Pilot | VarianceComponents | ArrayLike | None = None, *, target: float | None = None,
               target_kind: Literal["width", "mde", "shift"] = "width",
               metrics: str | Sequence[str] = ("delta_api", "delta_pos"), by: str | Sequence[str] | None = ("model",),
               queries: int | Sequence[int] | None = None, runs: int | Sequence[int] | None = None,
               rotations: int | Sequence[int] | None = None, confidence_level: float = 0.95, alpha: float = 0.05,
               power: float = 0.8, correlation: float = 0.0, cost_per_call: float | None = None,
               max_queries: int = 100_000, n_draws: int = 2000, n_resamples: int = 0, mde_grid: bool | None = None,
               run_effect: bool = True, rng: np.random.Generator | int | None = None,
               progress: bool = False) -> StudyPlan:
    """Expected CI half-widths and minimum detectable effects per design, and the cheapest design for a target.

    Parameters
    ----------
    pilot : SelectionLog, SelectionCounts, Study, manifest path, VarianceComponents or array_like
        A pilot study (its variance components are estimated with :func:`variance_components`), components
        already estimated, or assumed selection distributions: an array of shape (C, K) (one distribution per
        cluster; with nothing else known, every attempt is an independent draw from it: no query, rotation or
        run heterogeneity, which makes the plan optimistic).
    target : float, optional
        The value the cheapest design must reach for every metric (a CI half-width, an MDE or an MDS,
        see ``target_kind``). Without it only the grid and the pilot's own design are evaluated.
    target_kind : {"width", "mde", "shift"}, default "width"
        ``width``: expected CI half-width of delta and half-width of its actual error (both must reach the
        target); ``mde``: the smallest true delta that the level-``alpha``
        test against a fair chooser that :func:`~toolbias_stats.selection_bias` reports (``p_value``: centred
        query-bootstrap replicates) detects with probability ``power``; ``shift``: the smallest change
        of delta between two conditions that a two-sided level-``alpha`` test detects with probability ``power``.
    metrics : sequence of {"delta_api", "delta_pos", "delta_model"}, default ("delta_api", "delta_pos")
    by : str or sequence of str, default ``("model",)``
        Groups of a pilot study (each is planned on its own; calls are per group).
    queries, runs, rotations : int or sequence of int, optional
        The design grid: queries per cluster (default :data:`DEFAULT_QUERIES` and the pilot's), runs (default
        :data:`DEFAULT_RUNS` and the pilot's), rotations per query and run (default: the pilot's; fewer need a log
        with a rotation per attempt and at least 2 runs, which identify the rotation component).
    confidence_level : float, default 0.95
    alpha : float, default 0.05
        Level of the tests behind ``mde`` (one-sided, against the fair chooser) and ``mds`` (two-sided).
    power : float, default 0.8
    correlation : float, default 0
        Correlation of the two conditions' estimation errors for ``shift``: 0 for independent query sets,
        positive when the same queries are run under both (a paired design; estimate it from a pilot with both
        conditions with :func:`~toolbias_stats.design.pairing_correlation`).
    cost_per_call : float, optional
        Price of one LLM call; adds ``cost`` columns.
    max_queries : int, default 100000
        Largest number of queries per cluster the search for the cheapest design considers.
    n_draws : int, default 2000
        Monte-Carlo draws of the rates per design (common random numbers across designs).
    n_resamples : int, default 0
        Query-bootstrap replicates for the intervals of the variance components estimated from a pilot (0: none;
        ignored when ``pilot`` is a :class:`~toolbias_stats.design.VarianceComponents`). The plan uses only the
        components' point estimates, so by default no time goes to intervals it does not use;
        :func:`~toolbias_stats.design.variance_components` (default 200) and ``toolbias-stats plan``
        (``--n-resamples 200``) compute them because they report them.
    run_effect : bool, default True
        Include the run main effect (a shift shared by all queries of a run) in ``error_half_width``, the MDE, the
        MDS and the width target. ``half_width`` never includes it: the query bootstrap of
        :func:`~toolbias_stats.selection_bias` keeps runs together and does not see it. With few pilot runs the
        run component is poorly known (3 runs: 2 degrees of freedom).
    mde_grid : bool, optional
        Also compute the MDE on every grid design (a bisection per design; default: only with
        ``target_kind="mde"``). The pilot's design and the cheapest design always have it.
    rng : None, int or numpy.random.Generator
    progress : bool, default False

    Returns
    -------
    StudyPlan

    Raises
    ------
    ValueError
        ``target <= 0``, bad sizes, levels or metrics; rotations the pilot cannot inform.
    SelectionLogError
        A pilot cluster with fewer than 2 queries.

    Notes
    -----
    The fast path is analytic in the variance components (docs/design.md): for a design with ``Q`` queries per
    cluster, ``S`` runs and ``R`` rotations, the rates of a cluster vary around the pilot's rates with covariance
    ``A = M_query / Q + (1/R - 1/K) M_rotation / Q`` shared by the runs plus ``B = M_run + M_query_x_run / Q +
    M_attempt / (Q R)`` per run, and the plan takes the distribution of the plug-in mean-over-runs delta under
    Gaussian rates (the TV's fold at 1/K and its upward bias included). :func:`check_plan` checks it against
    :func:`~toolbias_stats.selection_bias` on data simulated from the pilot.

    Examples
    --------
    An assumed chooser (10 clusters, the first tool chosen 40% of the time, every attempt independent): the
    expected half-width of the 95% interval of δ_API for 25-200 queries in all 5 rotations, and the fewest
    queries that reach a half-width of 0.03:

    >>> import numpy as np
    >>> import toolbias_stats as tbs
    >>> pilot = np.tile([0.4, 0.15, 0.15, 0.15, 0.15], (10, 1))
    >>> plan = tbs.plan_study(pilot, target=0.03, metrics=["delta_api"], queries=[25, 50, 100, 200], runs=[1],
    ...                       rotations=[5], rng=1)
    >>> plan.to_frame()[["queries", "calls", "expected_estimate", "half_width"]].round(3)
       queries  calls  expected_estimate  half_width
    0       25   1250              0.203       0.026
    1       50   2500              0.200       0.019
    2      100   5000              0.200       0.014
    3      200  10000              0.200       0.010
    >>> plan.cheapest[["queries", "runs", "rotations", "calls"]]
       queries  runs  rotations  calls
    0       18     1          5    900
    """
    check_choice("target_kind", target_kind, TARGET_KINDS)
    target = _positive("target", target)
    confidence_level = check_confidence_level(confidence_level)
    _check_levels(alpha, power, correlation)
    cost_per_call = None if cost_per_call is None else _positive("cost_per_call", cost_per_call)
    max_queries = _positive("max_queries", max_queries, integer=True, allow_none=False)
    n_draws = _positive("n_draws", n_draws, integer=True, allow_none=False)
    if n_draws < 100:
        raise ValueError(f"`n_draws` must be at least 100; got {n_draws!r} instead.")
    metrics = _check_metrics(metrics)
    seed = rng if isinstance(rng, (int, type(None))) else "generator"
    gen = check_rng(rng)
    comps = _pilot_components(pilot, metrics, by, n_resamples, gen)
    caught = list(comps.warnings)
    by_groups = _fits_by_group(comps, metrics)
    levels = _Levels(z=float(special.ndtri(0.5 + confidence_level / 2)),
                     z_shift=float(special.ndtri(1 - alpha / 2) + special.ndtri(power)), rho=correlation,
                     alpha=alpha, power=power)
    grid = _Grid(runs=_sizes("runs", runs) if runs is not None else None,
                 queries=_sizes("queries", queries) if queries is not None else None,
                 rotations=_sizes("rotations", rotations) if rotations is not None else None,
                 mde=(target_kind == "mde") if mde_grid is None else bool(mde_grid))
    search = _Search(target=target, kind=target_kind, max_queries=max_queries, cost=cost_per_call)
    ach_rows, grid_rows, cheap_rows = [], [], []
    items = list(by_groups.items())
    if progress:
        from tqdm.auto import tqdm

        items = tqdm(items, desc="plan", unit="group", leave=False)
    for gkey, gfits in items:
        ach, rows, cheap = _plan_group(dict(gkey), gfits, comps, metrics, grid, search, levels, n_draws,
                                       run_effect, gen, caught)
        ach_rows += ach
        grid_rows += rows
        cheap_rows += cheap
    if not ach_rows:
        raise ValueError("nothing to plan: no group of the pilot has valid choices for the requested metrics")
    settings = {"by": list(comps.by), "confidence_level": confidence_level, "alpha": alpha, "power": power,
                "correlation": correlation, "cost_per_call": cost_per_call, "max_queries": max_queries,
                "n_draws": n_draws, "run_effect": bool(run_effect), "layout": comps.layout,
                "seed": seed if isinstance(seed, (int, type(None))) else repr(seed)}
    return StudyPlan(achieved=pd.DataFrame(ach_rows), grid=pd.DataFrame(grid_rows),
                     cheapest=pd.DataFrame(cheap_rows),
                     target={"kind": target_kind, "value": target, "metrics": list(metrics)}, settings=settings,
                     components=comps, warnings=caught)


class _Levels(NamedTuple):
    """The normal quantiles and test settings every evaluation of a design uses."""

    z: float            # of the confidence level (two-sided)
    z_shift: float      # z_{1 - alpha/2} + z_{power}: the minimum detectable shift per sd of the difference
    rho: float          # correlation of the two conditions' errors
    alpha: float
    power: float


class _Grid(NamedTuple):
    """The design grid asked for (None: the defaults and the pilot's sizes) and whether it gets MDEs."""

    runs: list | None
    queries: list | None
    rotations: list | None
    mde: bool


class _Search(NamedTuple):
    """The target of the cheapest-design search (``target`` None: no search)."""

    target: float | None
    kind: str
    max_queries: int
    cost: float | None


def _check_levels(alpha, power, correlation):
    if not (_is_real(alpha) and 0 < alpha < 1):
        raise ValueError(f"`alpha` must be in (0, 1); got {alpha!r} instead.")
    if not (_is_real(power) and 0 < power < 1):
        raise ValueError(f"`power` must be in (0, 1); got {power!r} instead.")
    if not (_is_real(correlation) and -1 <= correlation < 1):
        raise ValueError(f"`correlation` must be in [-1, 1); got {correlation!r} instead.")


def _check_metrics(metrics):
    metrics = [metrics] if isinstance(metrics, str) else list(metrics)
    if not metrics:
        raise ValueError("`metrics` must name at least one of " + ", ".join(DESIGN_METRICS) + "; got none.")
    for m in metrics:
        check_choice("metrics", m, DESIGN_METRICS)
    return metrics


def _pilot_components(pilot, metrics, by, n_resamples, gen):
    """The variance components of the pilot (estimated, given, or those of assumed distributions)."""
    if isinstance(pilot, VarianceComponents):
        return pilot
    if pilot is None:
        raise ValueError("`pilot` is required: a pilot study, its VarianceComponents or assumed selection "
                         "distributions (an array of shape (clusters, tools)).")
    if isinstance(pilot, (np.ndarray, list, tuple)):
        return _assumed_components(pilot, metrics)
    return variance_components(pilot, by=by, metrics=metrics, n_resamples=n_resamples, rng=gen)


def _fits_by_group(comps, metrics):
    """The components' fits of the planned metrics, per group (in the components' order)."""
    fits = [f for f in comps.fits if f["metric"] in metrics]
    missing = sorted(set(metrics) - {f["metric"] for f in fits})
    if missing:
        raise ValueError(f"the pilot cannot inform {missing} (delta_model needs a log with a rotation per attempt; "
                         "delta_pos needs known positions)")
    by_groups: dict = {}
    for f in fits:
        by_groups.setdefault(tuple(f["keys"].items()), []).append(f)
    return by_groups


def _group_grid(keys, fit, grid, caught):
    """The pilot's design (queries, runs, rotations) of a group and the grid's runs, rotations and queries."""
    fc0 = fit["clusters"][0]
    q0, s0, r0 = fc0["Q"], fc0["S"], fc0["R"] * fc0["n"]
    allowed_r = list(range(1, fc0["k_rot"] + 1)) if fit["ident"]["rotation"] else [r0]
    rg = [r for r in (grid.rotations or [r0]) if r in allowed_r]
    if len(rg) < len(grid.rotations or [r0]):
        not_plannable = sorted(set(cast(list, grid.rotations)) - set(rg))
        msg = (f"group {keys}: rotations {not_plannable} cannot be planned from this pilot "
               f"(possible: {allowed_r}; other rotations than the pilot's need a log with a rotation per attempt "
               "and at least 2 runs)")
        if not rg:
            raise ValueError(msg)
        caught.append(msg)
    sg = grid.runs or sorted(set(DEFAULT_RUNS) | {s0})
    qg = grid.queries or sorted(set(DEFAULT_QUERIES) | {q0})
    return (q0, s0, r0), sg, rg, qg


_ACHIEVED = ("expected_estimate", "half_width", "error_half_width", "mde", "shift_half_width", "mds", "null_critical")


def _plan_group(keys, gfits, comps, metrics, grid, search, lv, n_draws, run_effect, gen, caught):
    """Rows of one group: the pilot's design per metric, the grid per metric, and the cheapest design."""
    (q0, s0, r0), sg, rg, qg = _group_grid(keys, gfits[0], grid, caught)
    engines = {f["metric"]: _Engine(f, n_draws, max(*sg, s0), np.random.default_rng(gen.integers(2**63)),
                                    run_effect=run_effect)
               for f in gfits}
    metrics_g = [m for m in metrics if m in engines]
    if len(metrics_g) < len(metrics):
        caught.append(f"group {keys}: {sorted(set(metrics) - set(metrics_g))} not planned (the pilot has no "
                      "data for them in this group)")
    n_c = engines[metrics_g[0]].c
    ach_rows, grid_rows = [], []
    for m in metrics_g:
        e = engines[m]
        res, _ = e.evaluate(q0, s0, r0, lv.z, lv.z_shift, lv.rho, lv.alpha, lv.power)
        ach_rows.append({**keys, "metric": m, "queries": q0, "runs": s0, "rotations": r0, "clusters": n_c,
                         "calls": n_c * q0 * s0 * r0, "estimate": _pilot_estimate(comps, keys, m),
                         **{k: res[k] for k in _ACHIEVED}})
        grid_rows += [_grid_row(keys, m, e, (q, s, r), n_c, grid.mde, search.cost, lv)
                      for s in sg for r in rg for q in qg]
    cheap = ([] if search.target is None else
             [_cheapest(keys, engines, metrics_g, sg, rg, search.target, search.kind, search.max_queries, lv.z,
                        lv.z_shift, lv.rho, lv.alpha, lv.power, search.cost, n_c)])
    return ach_rows, grid_rows, cheap


def _grid_row(keys, m, e, design, n_c, with_mde, cost_per_call, lv):
    q, s, r = design
    res, _ = e.evaluate(q, s, r, lv.z, lv.z_shift, lv.rho, lv.alpha, lv.power, with_mde=with_mde)
    calls = n_c * q * s * r
    return {**keys, "metric": m, "queries": q, "runs": s, "rotations": r, "calls": calls,
            "cost": np.nan if cost_per_call is None else calls * cost_per_call,
            **{k: res[k] for k in _ACHIEVED[:-1]}}


def _pilot_estimate(comps, keys, metric):
    s = comps.overview
    sel = (s["metric"] == metric).to_numpy().copy()
    for k, v in keys.items():
        sel &= (s[k] == v).to_numpy()
    return float(s.loc[sel, "pooled"].iloc[0]) if sel.any() else np.nan


def _meets(e, q, s, r, target, kind, z, z_shift, rho, alpha, power):
    """Whether design (q, s, r) reaches the target for one metric: the decision of :meth:`_Engine.evaluate`'s
    numbers (``max(half_width, error_half_width)`` or ``mds``), computing only the estimates it needs."""
    if kind == "mde":
        t = min(target / e.delta0, e.t_max)
        err_t, crit = e.at_alternative((q, s, r), t, alpha)  # noise and the reported test's critical value there
        return e.power_at(err_t, crit, target) >= power
    no_run, err = e.errors(q, s, r, run=None)
    sd = float(np.std(e.estimates(err, centre=e.p), ddof=1))
    if kind == "shift":
        return z_shift * sd * np.sqrt(2 * (1 - rho)) <= target
    if z * sd > target:                        # the error's half-width (run effect included) already misses it
        return False
    ci_sd = sd if err is no_run else float(np.std(e.estimates(no_run, centre=e.p), ddof=1))
    return max(z * ci_sd, z * sd) <= target


def _cheapest(keys, engines, metrics, sg, rg, target, kind, max_q, z, z_shift, rho, alpha, power, cost, n_c):
    best = None
    for s in sg:
        for r in rg:
            def ok(q, s=s, r=r):
                return all(_meets(engines[m], q, s, r, target, kind, z, z_shift, rho, alpha, power)
                           for m in metrics)
            if not ok(max_q):
                continue
            lo, hi = 1, max_q           # ok(hi) holds; find the smallest q with ok(q)
            if ok(2):
                hi = 2
            while hi - lo > 1:
                mid = (lo + hi) // 2
                if ok(mid):
                    hi = mid
                else:
                    lo = mid
            q = max(hi, 2)
            calls = n_c * q * s * r
            if best is None or calls < best[0] or (calls == best[0] and s < best[2]):
                best = (calls, q, s, r)
    row = {**keys, "feasible": best is not None, "target_kind": kind, "target": target, "reason": ""}
    if best is None:
        row.update(queries=np.nan, runs=np.nan, rotations=np.nan, calls=np.nan, cost=np.nan,
                   reason=f"no design with up to {max_q} queries per cluster, runs in {list(sg)} and rotations in "
                          f"{list(rg)} reaches it (a run-level component is only averaged by more runs)")
        return row
    calls, q, s, r = best
    row.update(queries=q, runs=s, rotations=r, calls=calls, cost=np.nan if cost is None else calls * cost)
    for m in metrics:
        res, _ = engines[m].evaluate(q, s, r, z, z_shift, rho, alpha, power)
        row.update({f"{m}_half_width": res["half_width"], f"{m}_error_half_width": res["error_half_width"],
                    f"{m}_mde": res["mde"], f"{m}_mds": res["mds"]})
    return row


def _assumed_components(dist, metrics):
    """Components of assumed selection distributions: independent attempts, nothing else varies."""
    p = np.asarray(dist, dtype=float)
    if p.ndim != 2 or p.shape[1] < 2 or not np.all(np.isfinite(p)) or np.any(p < 0) or np.any(p.sum(1) <= 0):
        raise ValueError("assumed selection distributions must be an array of shape (clusters, tools >= 2) of "
                         f"non-negative rates with positive row sums; got shape {p.shape}.")
    p = p / p.sum(1, keepdims=True)
    c, k = p.shape
    if any(m == "delta_model" for m in metrics):
        raise ValueError("assumed distributions describe one target (tools or positions); plan delta_api or "
                         "delta_pos with them, not delta_model")
    fits, rows, table = [], [], []
    zero = np.zeros((k, k))
    ident = {"query": True, "attempt": True, "rotation": False, "query_x_run": False, "run": True}
    for m in metrics:
        clusters = []
        for i in range(c):
            u = np.full(k, 1.0 / k)
            att = np.diag(p[i]) - np.outer(p[i], p[i])
            clusters.append(dict(cluster=str(i + 1), p=p[i], u=u, a=np.full(k, 0.5),
                                 M={"query": zero, "rotation": zero, "run": zero, "query_x_run": zero,
                                    "attempt": att}, scalar={}, ident=ident, Q=100, S=1, R=1, n=k, k_rot=1,
                                 delta=float(0.5 * np.abs(p[i] - u).sum())))
        fits.append(dict(keys={}, metric=m, layout="assumed", clusters=clusters, ident=ident, rows={}))
        # the linearised attempt variance w' (diag(p) - pp') w per cluster, w = a * sign(p - u); nothing else varies
        per_attempt = np.array([(cl["a"] * np.sign(np.round(cl["p"] - cl["u"], 12))) @ cl["M"]["attempt"]
                                @ (cl["a"] * np.sign(np.round(cl["p"] - cl["u"], 12))) for cl in clusters])
        total = float(per_attempt.sum() / (100 * k) / c**2)
        for comp in COMPONENTS:
            var = float(per_attempt.mean()) if comp == "attempt" else (np.nan if comp == "cluster" else 0.0)
            con = total if comp == "attempt" else (np.nan if comp == "cluster" else 0.0)
            table.append({"metric": m, "component": comp, "variance": var,
                          "divisor": 1 / (100 * k) if comp == "attempt" else np.nan, "contribution": con,
                          "share": np.nan if comp == "cluster" else (con / total if total > 0 else np.nan),
                          "ci_low": np.nan, "ci_high": np.nan, "identified": comp != "cluster" and ident[comp],
                          "note": "assumed distributions: every attempt independent"})
        rows.append({"metric": m, "pooled": float(np.mean([cl["delta"] for cl in clusters])), "queries": 100,
                     "runs": 1, "rotations": k, "clusters": c, "calls": 100 * k * c, "se": float(np.sqrt(total)),
                     "layout": "assumed"})
    return VarianceComponents(table=pd.DataFrame(table), overview=pd.DataFrame(rows), layout="assumed", by=[],
                              n_resamples=0, confidence_level=0.95, seed=None, fits=fits,
                              warnings=[("assumed distributions: every attempt independent (no query, rotation or "
                                         "run heterogeneity); the plan is optimistic if queries differ")])
