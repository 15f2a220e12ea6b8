"""The belt searches of the calibrated interval run in lockstep give the bounds of the searches run one after
another, bit for bit (issue 37): the same brackets, hence the same numbers, with the compiled pass and without."""

import warnings

import numpy as np
import pytest

from toolbias_stats import _resampling
from toolbias_stats.metrics import _bias, _calibrated
from toolbias_stats.metrics._calibrated import calibrated_mean_tv


@pytest.fixture(params=["compiled", "numpy"])
def kernel(request, monkeypatch):
    """Both ways of computing ``T_r``: the compiled pass and the NumPy passes (numba missing)."""
    if request.param == "numpy":
        monkeypatch.setattr(_resampling, "_KERNEL", [None])
    elif _resampling._belt_kernel(load=True) is None:   # pragma: no cover - numba missing
        pytest.skip("numba is not installed")
    return request.param


def _in_turn(paths, e, w, t_obs, levels, null_stats, alpha, seen=None):
    """The former route of ``calibrated_mean_tv``: ``invert_belt`` along each path and the floor's ``smallest_t``,
    one search after another, every quantile from ``BeltErrors``."""
    q_hi, q_lo = levels
    errors = _resampling.BeltErrors(e)
    for path in paths:
        if not np.any(path(0.0)):
            errors.known(path, 0.0, w, null_stats)
    qs = (q_hi, q_lo, 0.5)
    lo_s, hi_s, est_s = _resampling.invert_belt(paths[0], errors, w, t_obs, qs)
    _, hi_l, est_l = _resampling.invert_belt(paths[1], errors, w, t_obs, qs, lower=False)
    _, hi_m, _ = _resampling.invert_belt(paths[2], errors, w, t_obs, qs, lower=False)
    floor = 0.0
    t_floor = float(np.quantile(null_stats, alpha / 2.0)) if null_stats.size else 0.0
    if t_floor > 0:
        for path in paths:
            r = _resampling.smallest_t(path, errors, w, t_floor, alpha / 4.0)
            if r is not None:
                floor = max(floor, float(w * np.abs(path(r[1])).sum()))
    high = max(hi_s, hi_l, hi_m)
    if seen is not None:
        seen.append({"low_at_0": lo_s == 0.0, "floor_lifts": floor > high, "ties": _has_ties(e, w)})
    return est_s, est_l, lo_s, max(high, floor)


def _has_ties(e, w):
    stat = w * np.abs(e).sum(axis=1)
    return np.unique(stat).size < stat.size


def _study(p, rng, n_clusters, n_queries, n_rot=5, n_resamples=300):
    """Per-query multinomial counts of ``n_rot`` attempts, summed; query-bootstrap replicates."""
    p = np.asarray(p, float)
    counts, boots = [], []
    for _ in range(n_clusters):
        per_query = rng.multinomial(n_rot, p, size=n_queries)
        counts.append(per_query.sum(0))
        idx = rng.integers(0, n_queries, size=(n_resamples, n_queries))
        boots.append(per_query[idx].sum(1))
    return counts, boots


CASES = {   # name: (tool probabilities, clusters, queries per cluster)
    "strong": ([0.4, 0.25, 0.15, 0.12, 0.08], 5, 40),
    "uniform": ([0.2] * 5, 6, 30),               # the lower bound at 0
    "near-uniform": ([0.21, 0.2, 0.2, 0.2, 0.19], 5, 8),
    "few-attempts": ([0.5, 0.2, 0.1, 0.1, 0.1], 3, 2),     # 10 attempts per cluster: heavily tied replicates
    "one-cluster": ([0.3, 0.3, 0.2, 0.2], 1, 25),
    "wide": ([0.3, 0.2, 0.2, 0.15, 0.15], 30, 12),          # 150 components: the split pairwise sums
}


@pytest.mark.parametrize("seed", range(4))
def test_calibrated_interval_equals_the_searches_in_turn(monkeypatch, kernel, seed):
    seen: list = []
    results = []
    for name, (p, n_clusters, n_queries) in CASES.items():
        rng = np.random.default_rng([seed, len(name)])
        counts, boots = _study(p, rng, n_clusters, n_queries)
        units = [n_queries] * n_clusters
        for level in (0.95, 0.9):
            results.append(calibrated_mean_tv(counts, boots, n_units=units, confidence_level=level))
    monkeypatch.setattr(_calibrated, "_bounds", lambda *a: _in_turn(*a, seen=seen))
    expected = []
    for name, (p, n_clusters, n_queries) in CASES.items():
        rng = np.random.default_rng([seed, len(name)])
        counts, boots = _study(p, rng, n_clusters, n_queries)
        units = [n_queries] * n_clusters
        for level in (0.95, 0.9):
            expected.append(calibrated_mean_tv(counts, boots, n_units=units, confidence_level=level))
    assert results == expected             # dataclass equality: every float the same number
    # the cases exercise what they are meant to: bounds at 0, the floor, tied statistics
    assert any(s["low_at_0"] for s in seen)
    assert any(s["ties"] for s in seen)
    if seed == 0:
        assert any(s["floor_lifts"] for s in seen)


def test_floor_lifts_the_upper_bound_of_a_low_plugin(monkeypatch, kernel):
    """A plug-in below the null's alpha/2 quantile: the belt's upper bound is 0 or small and the floor decides it."""
    rng = np.random.default_rng(5)
    for _ in range(200):
        counts, boots = _study([0.2] * 5, rng, 4, 20)
        seen: list = []
        with monkeypatch.context() as m:
            m.setattr(_calibrated, "_bounds", lambda *a, seen=seen: _in_turn(*a, seen=seen))
            want = calibrated_mean_tv(counts, boots, n_units=[20] * 4)
        if seen[0]["floor_lifts"]:
            break
    else:   # pragma: no cover - the seed gives one within a few dozen studies
        pytest.fail("no study with the floor above the belt's upper bound")
    assert calibrated_mean_tv(counts, boots, n_units=[20] * 4) == want


@pytest.mark.parametrize("seed", range(6))
def test_lockstep_searches_equal_smallest_t(kernel, seed):
    """Every (path, target, q) of :func:`smallest_ts` gives :func:`smallest_t`'s bracket, also with tied statistics,
    targets reached at t = 0 (None), far targets (the doubling) and paths that move only some components."""
    rng = np.random.default_rng(seed)
    n_rep, m = (2000, 50) if seed % 2 else (301, 7)
    e = rng.normal(size=(n_rep, m)) * 0.02
    if seed >= 4:
        e = np.round(e * 100) / 100                 # many tied statistics
    x = rng.normal(size=m) * 0.05
    v = e.var(axis=0)
    v[0] = 0.0                                       # a component without bootstrap variation (moves linearly)
    lam = float(np.max(x[v > 0] ** 2 / v[v > 0]))
    paths = [lambda s: s * x, lambda s: _resampling.shrinkage_path(s, x, v, lam), lambda s: s * np.abs(x)]
    w = 0.1
    null = w * np.abs(e).sum(axis=1)
    t_obs = w * float(np.abs(x).sum())
    targets = [t_obs, float(np.quantile(null, 0.5)), float(np.quantile(null, 0.01)), 5.0 * t_obs, 0.0]
    searches = [(p, target, q) for p in range(3) for target in targets for q in (0.0075, 0.0125, 0.5, 0.975, 0.0, 1.0)]
    known = {p: null for p in range(3) if not np.any(paths[p](0.0))}
    got = _resampling.smallest_ts(paths, e, w, searches, known=known)
    want = [_resampling.smallest_t(paths[p], e, w, target, q) for p, target, q in searches]
    assert got == want
    assert None in got and any(r is not None and r[1] > 2.0 for r in got)


@pytest.mark.parametrize("m", [1, 2, 7, 8, 9, 15, 16, 17, 50, 100, 127, 128, 129, 130, 257, 1000])
def test_compiled_pass_is_numpys_row_sum(m):
    kernel = _resampling._belt_kernel(load=True)
    if kernel is None:   # pragma: no cover - numba missing
        pytest.skip("numba is not installed")
    rng = np.random.default_rng(m)
    # magnitudes spread over 10 decades, so that any other order of the additions rounds differently
    e = rng.normal(size=(200, m)) * 10.0 ** rng.integers(-5, 5, size=m)
    thetas = rng.normal(size=(3, m)) * 0.1
    rows = np.repeat(np.arange(200), 3)
    which = np.tile(np.arange(3), 200)
    out = np.empty(rows.size)
    kernel(e, rows, which, thetas, 0.37, *_resampling._pairwise_plan(m), out)
    np.testing.assert_array_equal(out, 0.37 * np.abs(thetas[which] + e[rows]).sum(axis=1))


def test_selection_bias_of_several_groups_unchanged(monkeypatch, kernel):
    """Whole results of a study of four models (groups), with per-cluster intervals, equal those of the searches
    run in turn."""
    from toolbias_stats import SelectionLog
    from toolbias_stats.simulate import simulate_selection_log

    sims = [simulate_selection_log(n_clusters=3, n_queries=10, n_runs=2, position_probs=probs, model=f"m{i}", rng=i)
            for i, probs in enumerate([[0.5, 0.2, 0.1, 0.1, 0.1], None, [0.3, 0.2, 0.2, 0.15, 0.15], None])]
    log = SelectionLog.concat([s.log for s in sims])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fast = _bias.selection_bias(log, n_resamples=120, rng=3, cluster_corrected=True).to_dict()
        monkeypatch.setattr(_calibrated, "_bounds", _in_turn)
        plain = _bias.selection_bias(log, n_resamples=120, rng=3, cluster_corrected=True).to_dict()
    assert fast == plain
    assert len(fast["groups"]) == 4
