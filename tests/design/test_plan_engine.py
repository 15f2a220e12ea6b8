"""The fast plan engine against the former one, kept here verbatim as the reference (per-draw BLAS products).

The engine of :func:`plan_study` was rewritten for speed (issue 23): the same standard normal draws, stacked
rate-major with a row of ones so that the rates of every draw at a centre are one product per cluster. Its numbers
must be the former engine's up to floating-point rounding, and every decision (the cheapest design, the MDE's
bisection) the same. ``_ReferenceEngine``, ``_reference_meets`` and ``_reference_cheapest`` are the code as it was
before that change (benchmarks/bench_design.py times it as the baseline).
"""

import warnings

import numpy as np
import pandas as pd
import pytest

import toolbias_stats as tbs
from toolbias_stats.design import _plan, plan_study, variance_components
from toolbias_stats.design._components import _MATRIX
from toolbias_stats.design._plan import _BISECT

RTOL = 1e-11


def _quiet(fn, *a, **k):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(*a, **k)


# -- the former engine and search (reference) --------------------------------------------------------------
class _ReferenceEngine:
    """Distribution of the mean-over-runs plug-in delta for a design, by Gaussian draws of the rates.

    Per cluster, the rates of a design are ``p + e_shared + e_run`` with ``e_shared ~ N(0, A)`` common to every
    run (queries and their rotations) and ``e_run ~ N(0, B)`` per run (run effect, query x run, attempt noise);
    A and B are the variance components divided by the design's sizes. The TV of each draw keeps the fold at
    ``p_j = 1/K`` that the linearisation misses, and the plug-in bias of the per-run TVs.
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
        sig_p = np.stack([np.diag(v) - np.outer(v, v) for v in self.p])
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
        with np.errstate(divide="ignore"):
            lim = np.where(self.dir < 0, self.u / -self.dir, np.inf)
        self.t_max = float(lim.min())
        # cluster-major draws (C, N, D) and (C, N, S, D): one contiguous BLAS product per cluster
        self.xi = np.ascontiguousarray(np.moveaxis(gen.standard_normal((n_draws, self.c, d)), 1, 0))
        self.eta = np.ascontiguousarray(np.moveaxis(gen.standard_normal((n_draws, s_max, self.c, d)), 2, 0))

    @staticmethod
    def _root(cov):
        # the components are unbiased method-of-moments matrices (not each clipped, which would bias them
        # upward); only their design-specific sum is projected onto the positive semi-definite cone
        vals, vecs = np.linalg.eigh((cov + np.swapaxes(cov, -1, -2)) / 2)
        return vecs * np.sqrt(np.clip(vals, 0, None))[:, None, :]

    def _apply(self, roots, z):
        """``roots[c] @ z[c, ..., :]`` for every cluster (one BLAS product per cluster)."""
        return np.stack([z[c] @ roots[c].T for c in range(self.c)])

    def attempt_at(self, centre):
        """The attempt component at rates ``centre`` (C, D) instead of the pilot's."""
        sig = np.stack([np.diag(v) - np.outer(v, v) for v in centre])
        return self.M["attempt"] + self.kappa[:, None, None] * (sig - self._sig_p)

    def errors(self, q, s, r, run=True, centre=None):
        """Rate errors (C, N, S, D) of a design; ``run=None`` returns both (without, with the run effect).
        ``centre``: the attempt noise at these rates (default: the pilot's)."""
        att = self.M["attempt"] if centre is None else self.attempt_at(centre)
        shared = self.M["query"] / q + ((1.0 / r - 1.0 / self.k_rot) / q)[:, None, None] * self.M["rotation"]
        per_run = self.M["query_x_run"] / q + att / (q * r)
        e_sh = self._apply(self._root(shared), self.xi)[:, :, None]
        eta = self.eta[:, :, :s]
        if run is None:
            no_run = e_sh + self._apply(self._root(per_run), eta)
            if not self.run_effect:
                return no_run, no_run
            return no_run, e_sh + self._apply(self._root(per_run + self.M["run"]), eta)
        return e_sh + self._apply(self._root(per_run + (self.M["run"] if run else 0.0)), eta)

    def estimates(self, err, t=1.0, centre=None):
        centre = self.u + t * self.dir if centre is None else centre
        shift = (centre - self.u)[:, None, None, :]
        tv = np.matmul(np.abs(err + shift), self.a[:, None, :, None])[..., 0]    # (C, N, S)
        return tv.mean((0, 2))

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
        ci_sd = float(np.std(self.estimates(no_run, centre=self.p), ddof=1))
        est = self.estimates(err, centre=self.p) if err is not no_run else None
        est = self.estimates(no_run, centre=self.p) if est is None else est
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


def _reference_meets(e, q, s, r, target, kind, z, z_shift, rho, alpha, power):
    if kind == "mde":
        t = min(target / e.delta0, e.t_max)
        err_t, crit = e.at_alternative((q, s, r), t, alpha)  # noise and the reported test's critical value there
        return e.power_at(err_t, crit, target) >= power
    res, _ = e.evaluate(q, s, r, z, z_shift, rho, alpha, power, with_mde=False)
    if kind == "width":
        return max(res["half_width"], res["error_half_width"]) <= target
    if kind == "shift":
        return res["mds"] <= target


def _reference_cheapest(keys, engines, metrics, sg, rg, target, kind, max_q, z, z_shift, rho, alpha, power, cost, n_c):
    best = None
    for s in sg:
        for r in rg:
            def ok(q, s=s, r=r):
                return all(_reference_meets(engines[m], q, s, r, target, kind, z, z_shift, rho, alpha, power)
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


# -- tests -------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def comps():
    """Components of a pilot log with rotations and 2 runs (every component identified), unequal tool counts."""
    log = tbs.experiments.simulate_conditions({"base": (np.array([[6, 3, 1, 1, 1]] * 3), [3, 1, 1, 1, 1])},
                                              n_queries=30, n_runs=2, query_effect=0.5, rng=2)
    return _quiet(variance_components, log, by=[], metrics=["delta_api", "delta_pos", "delta_model"],
                  n_resamples=0, rng=0)


def _padded_fit():
    """A fit with clusters of 3 and 5 tools (padding) and a run component."""
    gen = np.random.default_rng(7)
    clusters = []
    for k in (3, 5, 4):
        p = gen.dirichlet(np.ones(k) * 3)
        mats = {}
        for c in _MATRIX:
            a = gen.normal(size=(k, k)) * 0.05
            a -= a.mean(0)                            # rates sum to one: rows of the covariance sum to zero
            mats[c] = a @ a.T
        clusters.append(dict(p=p, u=np.full(k, 1 / k), a=np.full(k, 0.5), M=mats, k_rot=k))
    return dict(metric="delta_api", clusters=clusters)


def _close(a, b):
    return np.allclose(a, b, rtol=RTOL, atol=1e-14, equal_nan=True)


@pytest.mark.filterwarnings("ignore:invalid value encountered in divide:RuntimeWarning")
@pytest.mark.parametrize("metric", ["delta_api", "delta_pos", "delta_model", "padded"])
@pytest.mark.parametrize("run_effect", [True, False])
def test_engine_matches_the_former_engine(comps, metric, run_effect):
    fit = _padded_fit() if metric == "padded" else next(f for f in comps.fits if f["metric"] == metric)
    new = _plan._Engine(fit, 500, 4, np.random.default_rng(11), run_effect=run_effect)
    old = _ReferenceEngine(fit, 500, 4, np.random.default_rng(11), run_effect=run_effect)
    for q, s, r in ((2, 1, 1), (30, 2, 3), (200, 4, 3), (7, 3, 1)):
        got, _ = new.evaluate(q, s, r, 1.96, 2.8, 0.3, 0.05, 0.8)
        want, _ = old.evaluate(q, s, r, 1.96, 2.8, 0.3, 0.05, 0.8)
        assert got.keys() == want.keys()
        for k in want:
            assert _close(got[k], want[k]), (k, got[k], want[k])
        # the statistic's draws themselves, at the pilot, the fair chooser and an alternative
        for centre in (new.p, new.u, new.u + 0.3 * new.dir):
            e_new = new.errors(q, s, r, run=True, centre=centre)
            e_old = old.errors(q, s, r, run=True, centre=centre)
            assert _close(new.estimates(e_new, centre=centre), old.estimates(e_old, centre=centre))


def _frames(plan):
    return plan.achieved, plan.grid, plan.cheapest


def _assert_same_plan(got, want):
    for g, w in zip(_frames(got), _frames(want)):
        assert list(g.columns) == list(w.columns) and g.shape == w.shape
        for c in w.columns:
            if pd.api.types.is_float_dtype(w[c]):
                assert _close(g[c].to_numpy(), w[c].to_numpy()), c
            else:
                assert g[c].equals(w[c]), c


@pytest.mark.parametrize("kw", [
    dict(target=0.03, metrics=["delta_api", "delta_pos"], queries=[10, 40], runs=[1, 2], rotations=[1, 5]),
    dict(target=0.04, target_kind="shift", metrics=["delta_api"], queries=[20], runs=[1, 3], correlation=0.4),
    dict(target=0.15, target_kind="mde", metrics=["delta_pos"], queries=[15, 60], runs=[1]),
    dict(target=0.02, metrics=["delta_model"], queries=[25], runs=[2], run_effect=False, mde_grid=True),
])
def test_plan_study_matches_the_former_engine_and_search(comps, kw, monkeypatch):
    new = plan_study(comps, n_draws=300, rng=4, **kw)
    monkeypatch.setattr(_plan, "_Engine", _ReferenceEngine)
    monkeypatch.setattr(_plan, "_cheapest", _reference_cheapest)
    old = plan_study(comps, n_draws=300, rng=4, **kw)
    assert len(new.cheapest) == 1
    _assert_same_plan(new, old)


def test_assumed_distributions_match_the_former_engine(monkeypatch):
    pilot = np.tile([0.4, 0.15, 0.15, 0.15, 0.15], (4, 1))
    new = plan_study(pilot, target=0.03, metrics=["delta_api"], queries=[25, 100], runs=[1], rng=1)
    monkeypatch.setattr(_plan, "_Engine", _ReferenceEngine)
    monkeypatch.setattr(_plan, "_cheapest", _reference_cheapest)
    old = plan_study(pilot, target=0.03, metrics=["delta_api"], queries=[25, 100], runs=[1], rng=1)
    _assert_same_plan(new, old)


# -- the components' query bootstrap ----------------------------------------------------------------------
def _reference_bootstrap_mean_squares(y, within, n, layout, idx):
    """The former path: the mean squares of explicit (B, Q, S, R) replicate copies."""
    from toolbias_stats.design._components import _mean_squares

    rep = y[idx][..., None]
    ms = _mean_squares(rep, None if within is None else within[idx][..., None, None], n, layout)
    return dict(ms), rep.mean((1, 2, 3, 4))


@pytest.mark.parametrize("layout, shape, n", [("log", (12, 3, 4), 1), ("log", (9, 1, 5), 1), ("counts", (10, 3, 1), 4),
                                              ("counts", (7, 1, 1), 3)])
def test_bootstrap_mean_squares_equal_those_of_the_replicates(layout, shape, n):
    from toolbias_stats.design._components import _bootstrap_mean_squares

    gen = np.random.default_rng(5)
    y = gen.normal(size=shape) + gen.normal(size=(shape[0], 1, 1))       # a query effect
    within = gen.gamma(2.0, size=shape) if n > 1 else None
    idx = gen.integers(0, shape[0], size=(50, shape[0]))
    got, grand = _bootstrap_mean_squares(y, within, n, layout, idx)
    want, want_grand = _reference_bootstrap_mean_squares(y, within, n, layout, idx)
    assert got.keys() == want.keys() and len(got) >= 2
    for k in want:
        assert _close(got[k], want[k]), k
    assert _close(grand, want_grand)
