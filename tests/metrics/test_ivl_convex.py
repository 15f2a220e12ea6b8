"""Bisection steps along lines ``theta = t * d`` decided by convexity (issue 37, tenth pass: 2,000 clusters): the
compiled pass that also gives the slopes computes the same ``T_r``, every decision is the exact comparison, and the
brackets are those of the former lockstep (no slopes) and of the searches one after another."""

import numpy as np
import pytest

from toolbias_stats import _resampling
from toolbias_stats.metrics import _calibrated
from toolbias_stats.metrics._calibrated import calibrated_mean_tv

pytestmark = pytest.mark.skipif(_resampling._belt_kernel(load=True) is None, reason="numba is not installed")


class _Count:
    """Counts the full passes and the steps decided by the bounds; ``former``: without the slopes (the former
    lockstep's bounds)."""

    def __init__(self, monkeypatch, former=False):
        self.full = self.decided = 0
        values, decided = _resampling._Lockstep._values, _resampling._Lockstep._decided

        def counted_values(belt, wanted, few):
            self.full += len(wanted)
            return values(belt, wanted, few)

        def counted_decided(belt, s):
            out = decided(belt, s)
            self.decided += out is not None
            return out

        monkeypatch.setattr(_resampling._Lockstep, "_values", counted_values)
        monkeypatch.setattr(_resampling._Lockstep, "_decided", counted_decided)
        if former:
            monkeypatch.setattr(_resampling, "_slope_kernel", lambda: None)


@pytest.mark.parametrize("m", [1, 5, 8, 50, 129, 300, 1001])
def test_sloped_pass_equals_the_plain_one(m):
    rng = np.random.default_rng(m)
    e = rng.normal(size=(40, m)) * 0.02
    e[:, 0] = 0.0                                      # u = 0 components (sign taken as +1: still a subgradient)
    thetas, dirs = rng.normal(size=(3, m)) * 0.03, rng.normal(size=(3, m))
    thetas[0, 0] = 0.0
    rows = np.tile(np.arange(40), 3).astype(np.int64)
    which = np.repeat(np.arange(3), 40).astype(np.int64)
    plan = _resampling._pairwise_plan(m)
    want, got, slopes = np.empty(120), np.empty(120), np.empty(120)
    _resampling._belt_kernel()(e, rows, which, thetas, 0.1, *plan, want)
    _resampling._slope_kernel()(e, rows, which, thetas, 0.1, *plan, got, dirs, slopes)
    assert got.tobytes() == want.tobytes()
    u = thetas[which] + e[rows]
    np.testing.assert_allclose(slopes, 0.1 * (np.where(u >= 0, 1.0, -1.0) * dirs[which]).sum(axis=1),
                               rtol=1e-12, atol=1e-15)


def _problem(seed):
    """Noise-dominated deviations over many components (the 2,000-cluster shape, small)."""
    rng = np.random.default_rng(seed)
    n_rep, m = ((600, 1500), (301, 400), (1000, 2500))[seed % 3]
    e = rng.normal(size=(n_rep, m)) * 0.05
    x = rng.normal(size=m) * (0.06 if seed % 2 else 0.045)
    v = e.var(axis=0)
    xm = np.abs(x) * np.sign(x + 1e-3)
    paths = [_calibrated._Shrink(x, v, float(np.max(x ** 2 / v))), _calibrated._Line(x), _calibrated._Line(xm)]
    w = 0.5 / (m // 5)
    null = w * np.abs(e).sum(axis=1)
    t_obs = w * float(np.abs(x).sum())
    searches = [(p, target, q) for p in range(3) for target in (t_obs, 1.5 * t_obs) for q in (0.0125, 0.5, 0.975)]
    lines = {p: path.line for p, path in enumerate(paths)}
    return paths, e, w, searches, {p: null for p in range(3) if not np.any(paths[p](0.0))}, lines


@pytest.mark.parametrize("seed", range(4))
def test_convex_steps_give_the_former_brackets(monkeypatch, seed):
    paths, e, w, searches, known, lines = _problem(seed)
    with monkeypatch.context() as m:
        former = _Count(m, former=True)
        want = _resampling.smallest_ts(paths, e, w, searches, known=known, lines=lines)
    with monkeypatch.context() as m:
        new = _Count(m)
        got = _resampling.smallest_ts(paths, e, w, searches, known=known, lines=lines)
    assert got == want
    assert got == [_resampling.smallest_t(paths[p], e, w, target, q) for p, target, q in searches]
    assert new.decided > former.decided


def test_fewer_full_passes_on_the_many_cluster_shape(monkeypatch):
    former_full = new_full = 0
    for seed in range(3):
        paths, e, w, searches, known, lines = _problem(seed)
        with monkeypatch.context() as m:
            former = _Count(m, former=True)
            _resampling.smallest_ts(paths, e, w, searches, known=known, lines=lines)
        with monkeypatch.context() as m:
            new = _Count(m)
            _resampling.smallest_ts(paths, e, w, searches, known=known, lines=lines)
        former_full, new_full = former_full + former.full, new_full + new.full
    assert new_full < former_full


@pytest.mark.parametrize("seed", range(3))
def test_every_convex_decision_is_the_exact_comparison(seed):
    paths, e, w, searches, known, lines = _problem(seed)
    decided, checked = _resampling._Lockstep._decided, []

    def checking(belt, s):
        out = decided(belt, s)
        if out is not None:
            theta = belt.theta(s.path, s.t)
            checked.append(out == (_resampling._interpolated(w * np.abs(theta + e).sum(axis=1), s.q) >= s.target))
        return out

    with pytest.MonkeyPatch.context() as m:
        m.setattr(_resampling._Lockstep, "_decided", checking)
        _resampling.smallest_ts(paths, e, w, searches, known=known, lines=lines)
    assert len(checked) > 20 and all(checked)


def test_lines_of_the_calibrated_paths():
    """The paths say where they are lines, and are so there: ``t * d`` computed as such."""
    rng = np.random.default_rng(0)
    x, v = rng.normal(size=9) * 0.1, rng.random(9) * 0.01
    shrink, line = _calibrated._Shrink(x, v, float(np.max(x ** 2 / v))), _calibrated._Line(x)
    assert shrink.line[1] == 1.0 and line.line[1] == 0.0
    for t in (1.0, 1.5, 2.0, 37.25):
        assert shrink(t).tobytes() == (t * x).tobytes() == line(t).tobytes()
    assert shrink(0.5).tobytes() == _resampling.shrinkage_path(0.5, x, v, float(np.max(x ** 2 / v))).tobytes()


@pytest.mark.parametrize("seed", range(2))
def test_calibrated_interval_unchanged(monkeypatch, seed):
    """Whole intervals of many small clusters with and without the slopes, and with the NumPy passes: equal."""
    rng = np.random.default_rng(seed)
    inputs = []
    for p, n_clusters, n_queries in (([0.22, 0.2, 0.2, 0.19, 0.19], 300, 12), ([0.4, 0.2, 0.2, 0.1, 0.1], 150, 8)):
        counts, boots = [], []
        for _ in range(n_clusters):
            per_query = rng.multinomial(5, p, size=n_queries)
            counts.append(per_query.sum(0))
            boots.append(per_query[rng.integers(0, n_queries, size=(300, n_queries))].sum(1))
        inputs.append((counts, boots, [n_queries] * n_clusters))
    got = [calibrated_mean_tv(c, b, n_units=u) for c, b, u in inputs]
    with monkeypatch.context() as m:
        m.setattr(_resampling, "_slope_kernel", lambda: None)
        assert [calibrated_mean_tv(c, b, n_units=u) for c, b, u in inputs] == got
    with monkeypatch.context() as m:
        m.setattr(_resampling, "_KERNEL", [None])
        assert [calibrated_mean_tv(c, b, n_units=u) for c, b, u in inputs] == got
