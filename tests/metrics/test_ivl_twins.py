"""Points of the lockstep searches whose deviation vector equals one already computed along another path take its
values (issue 37, tenth pass: the calibrated interval's shrinkage and linear paths are both ``t * x`` from ``t = 1``
on): the same brackets as the former lockstep (every point computed) and as the searches one after another, with
fewer full passes."""

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
    """Counts the full passes; ``former``: without twins (every point computed, as before)."""

    def __init__(self, monkeypatch, former=False):
        self.full = 0
        values = _resampling._Lockstep._values

        def counted(belt, wanted, few):
            self.full += len(wanted)
            return values(belt, wanted, few)

        monkeypatch.setattr(_resampling._Lockstep, "_values", counted)
        if former:
            monkeypatch.setattr(_resampling._Lockstep, "_twins", lambda belt, wanted: (wanted, []))


def _problem(seed):
    rng = np.random.default_rng(seed)
    n_rep, m = ((2000, 50), (301, 7), (500, 120))[seed % 3]
    e = rng.normal(size=(n_rep, m)) * 0.02
    x = rng.normal(size=m) * (0.05 if seed % 2 else 0.01)
    v = e.var(axis=0)
    lam = float(np.max(x ** 2 / v))
    paths = [lambda s: _resampling.shrinkage_path(s, x, v, lam), lambda s: s * x, lambda s: s * np.abs(x),
             lambda s: s * x]                       # a fourth path equal to the linear one everywhere
    w = 0.5 / max(1, m // 5)
    null = w * np.abs(e).sum(axis=1)
    t_obs = w * float(np.abs(x).sum())
    targets = [t_obs, 3.0 * t_obs, float(np.quantile(null, 0.5))]
    searches = [(p, target, q) for p in range(4) for target in targets for q in (0.0125, 0.5, 0.975)]
    return paths, e, w, searches, {p: null for p in range(4) if not np.any(paths[p](0.0))}


@pytest.mark.parametrize("seed", range(6))
def test_twins_give_the_former_brackets(monkeypatch, kernel, seed):
    paths, e, w, searches, known = _problem(seed)
    with monkeypatch.context() as m:
        former = _Count(m, former=True)
        want = _resampling.smallest_ts(paths, e, w, searches, known=known)
    with monkeypatch.context() as m:
        new = _Count(m)
        got = _resampling.smallest_ts(paths, e, w, searches, known=known)
    assert got == want
    assert got == [_resampling.smallest_t(paths[p], e, w, target, q) for p, target, q in searches]
    assert new.full < former.full


def test_twins_only_where_the_deviations_are_equal():
    rng = np.random.default_rng(1)
    e, x = rng.normal(size=(50, 6)), rng.normal(size=6)
    v = e.var(axis=0)
    paths = [lambda s: _resampling.shrinkage_path(s, x, v, 3.0), lambda s: s * x, lambda s: s * np.abs(x)]
    belt = _resampling._Lockstep(e, 0.1, paths, {})
    fresh, twins = belt._twins([(0, 1.0), (1, 1.0), (2, 1.0), (0, 0.5), (1, 0.5), (0, 2.0), (1, 2.0)])
    assert fresh == [(0, 1.0), (2, 1.0), (0, 0.5), (1, 0.5), (0, 2.0)]
    assert twins == [((1, 1.0), (0, 1.0)), ((1, 2.0), (0, 2.0))]
    belt.full[(2, 4.0)] = np.zeros(50)                # computed before: a twin of a later point equal to it
    paths.append(lambda s: s * np.abs(x))
    assert belt._twins([(3, 4.0), (1, 4.0)]) == ([(1, 4.0)], [((3, 4.0), (2, 4.0))])


@pytest.mark.parametrize("seed", range(3))
def test_calibrated_interval_unchanged(monkeypatch, kernel, seed):
    """Whole intervals (the ten searches, the largest-bound stop and the floor) equal the former lockstep's."""
    rng = np.random.default_rng(seed)
    cases = [([0.4, 0.25, 0.15, 0.12, 0.08], 10, 40), ([0.2] * 5, 6, 30), ([0.5, 0.2, 0.1, 0.1, 0.1], 3, 2),
             ([0.3, 0.3, 0.2, 0.2], 40, 8)]
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
        former = _Count(m, former=True)
        want = [calibrated_mean_tv(c, b, n_units=u, confidence_level=lv) for c, b, u in inputs for lv in (0.95, 0.9)]
    with monkeypatch.context() as m:
        new = _Count(m)
        got = [calibrated_mean_tv(c, b, n_units=u, confidence_level=lv) for c, b, u in inputs for lv in (0.95, 0.9)]
    assert got == want
    assert new.full < former.full
