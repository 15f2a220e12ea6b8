"""Bisection steps decided by the bounds of the bracket's ends (issue 37: 240 groups, K = 40): the lockstep searches
still give the brackets of the searches run one after another and of the lockstep without the bounds (its former
route), bit for bit, while most early steps compute no ``T_r`` at all."""

import numpy as np
import pytest

from toolbias_stats import _resampling
from toolbias_stats.metrics._calibrated import calibrated_mean_tv


@pytest.fixture(params=["compiled", "numpy"])
def kernel(request, monkeypatch):
    """Both ways of computing ``T_r``: the compiled pass and the NumPy passes (numba missing)."""
    if request.param == "numpy":
        monkeypatch.setattr(_resampling, "_KERNEL", [None])
    elif _resampling._belt_kernel(load=True) is None:   # pragma: no cover - numba missing
        pytest.skip("numba is not installed")
    return request.param


class _Count:
    """Counts the full passes of the lockstep and the steps its bounds decide."""

    def __init__(self, monkeypatch, decide=True):
        self.full = self.decided = 0
        values, decided = _resampling._Lockstep._values, _resampling._Lockstep._decided

        def counted_values(belt, wanted, few):
            self.full += len(wanted)
            return values(belt, wanted, few)

        def counted_decided(belt, s):
            if not decide:      # the former route: every step computes its point
                return None
            out = decided(belt, s)
            self.decided += out is not None
            return out

        monkeypatch.setattr(_resampling._Lockstep, "_values", counted_values)
        monkeypatch.setattr(_resampling._Lockstep, "_decided", counted_decided)


def _problem(seed):
    rng = np.random.default_rng(seed)
    n_rep, m = ((2000, 50), (301, 7), (500, 400), (1000, 100))[seed % 4]
    e = rng.normal(size=(n_rep, m)) * 0.02
    if seed >= 4:
        e = np.round(e * 100) / 100                 # many tied statistics
    x = rng.normal(size=m) * (0.05 if seed % 3 else 0.005)    # strong deviations, or within the noise
    v = e.var(axis=0)
    v[0] = 0.0                                       # a component without bootstrap variation (moves linearly)
    lam = float(np.max(x[v > 0] ** 2 / v[v > 0]))
    paths = [lambda s: s * x, lambda s: _resampling.shrinkage_path(s, x, v, lam), lambda s: s * np.abs(x)]
    w = 0.5 / max(1, m // 5)
    null = w * np.abs(e).sum(axis=1)
    t_obs = w * float(np.abs(x).sum())
    targets = [t_obs, float(np.quantile(null, 0.5)), float(np.quantile(null, 0.01)), 5.0 * t_obs, 0.0]
    searches = [(p, target, q) for p in range(3) for target in targets for q in (0.0075, 0.0125, 0.5, 0.975, 0.0, 1.0)]
    known = {p: null for p in range(3) if not np.any(paths[p](0.0))}
    return paths, e, w, searches, known


@pytest.mark.parametrize("seed", range(8))
def test_decided_steps_give_the_former_brackets(monkeypatch, kernel, seed):
    """With the bounds, without them (the former lockstep) and one search after another: the same brackets."""
    paths, e, w, searches, known = _problem(seed)
    with monkeypatch.context() as m:
        former = _Count(m, decide=False)
        want = _resampling.smallest_ts(paths, e, w, searches, known=known)
    with monkeypatch.context() as m:
        new = _Count(m)
        got = _resampling.smallest_ts(paths, e, w, searches, known=known)
    assert got == want
    assert got == [_resampling.smallest_t(paths[p], e, w, target, q) for p, target, q in searches]
    # the bounds decide steps (with 90 searches sharing their points the full passes may not drop: that is
    # measured on the calibrated intervals' ten, below)
    assert new.decided > 0
    assert former.decided == 0


@pytest.mark.parametrize("seed", range(4))
def test_every_decision_is_the_exact_comparison(seed):
    """Whenever the bounds decide a step, it is the comparison of the quantile of all ``T_r`` at that point."""
    paths, e, w, searches, known = _problem(seed)
    decided = _resampling._Lockstep._decided
    checked = []

    def checking(belt, s):
        out = decided(belt, s)
        if out is not None:
            theta = belt.theta(s.path, s.t)
            exact = _resampling._interpolated(w * np.abs(theta + e).sum(axis=1), s.q) >= s.target
            checked.append(out == exact)
        return out

    with pytest.MonkeyPatch.context() as m:
        m.setattr(_resampling._Lockstep, "_decided", checking)
        _resampling.smallest_ts(paths, e, w, searches, known=known)
    assert checked and all(checked)


@pytest.mark.parametrize("seed", range(3))
def test_calibrated_interval_unchanged(monkeypatch, kernel, seed):
    """Whole intervals (10 searches with the largest-bound stop and the floor) equal the former lockstep's."""
    rng = np.random.default_rng(seed)
    cases = [([0.4, 0.25, 0.15, 0.12, 0.08], 10, 40), ([0.2] * 5, 6, 30), ([0.5, 0.2, 0.1, 0.1, 0.1], 3, 2),
             ([1 / 40] * 20 + [0.03] * 10 + [0.02] * 10, 4, 30)]
    inputs = []
    for p, n_clusters, n_queries in cases:
        p = np.asarray(p) / np.sum(p)
        counts, boots = [], []
        for _ in range(n_clusters):
            per_query = rng.multinomial(5, p, size=n_queries)
            counts.append(per_query.sum(0))
            boots.append(per_query[rng.integers(0, n_queries, size=(400, n_queries))].sum(1))
        inputs.append((counts, boots, [n_queries] * n_clusters))
    with monkeypatch.context() as m:
        former = _Count(m, decide=False)
        want = [calibrated_mean_tv(c, b, n_units=u, confidence_level=lv) for c, b, u in inputs for lv in (0.95, 0.9)]
    with monkeypatch.context() as m:
        new = _Count(m)
        got = [calibrated_mean_tv(c, b, n_units=u, confidence_level=lv) for c, b, u in inputs for lv in (0.95, 0.9)]
    assert got == want
    assert new.decided > 0
    assert new.full < former.full
