"""The faster paths of the bias computation give the numbers of the plain ones, bit for bit (issue 23)."""

import warnings

import numpy as np
import pytest

from toolbias_stats import _resampling
from toolbias_stats.metrics import _bias, _calibrated
from toolbias_stats.metrics._calibrated import _Errors, _pairwise_rows, _quantile_at, calibrated_mean_tv


@pytest.mark.parametrize("m", [1, 2, 7, 8, 9, 15, 16, 17, 50, 100, 127, 128, 129, 130, 257, 1000])
def test_pairwise_rows_is_numpys_row_sum(m):
    rng = np.random.default_rng(m)
    # magnitudes spread over 10 decades, so that any other order of the additions rounds differently
    a = np.abs(rng.normal(size=(300, m)) * 10.0 ** rng.integers(-5, 5, size=m))
    np.testing.assert_array_equal(_pairwise_rows(np.ascontiguousarray(a.T)), a.sum(axis=1))


def test_quantile_of_the_transposed_errors_is_the_plain_one():
    rng = np.random.default_rng(3)
    e = rng.normal(size=(500, 37)) * 0.01
    x = rng.normal(size=37) * 0.05
    errors = _Errors(e)
    for t in (0.0, 0.25, 1.0, 1.7):
        for q in (0.025, 0.5, 0.975):
            stat = 0.1 * np.abs(t * x + e).sum(axis=1)
            assert _quantile_at(lambda s: s * x, t, errors, 0.1, q) == _old_quantile(stat, q)


def _old_quantile(stat, q):
    pos = q * (stat.size - 1)
    i = int(np.floor(pos))
    j = min(i + 1, stat.size - 1)
    part = np.partition(stat, (i, j))
    return float(part[i] + (pos - i) * (part[j] - part[i]))


def _study(rng):
    counts = [rng.multinomial(300, [0.3, 0.25, 0.2, 0.15, 0.1]) for _ in range(6)]
    return counts, [rng.multinomial(300, c / 300, size=400) for c in counts]


def test_calibrated_interval_unchanged_by_the_faster_statistic(monkeypatch):
    counts, boot = _study(np.random.default_rng(11))
    fast = calibrated_mean_tv(counts, boot, n_units=[60] * 6)

    calls = []

    def plain(path, t, e, w, q, buf=None):   # the former evaluation: (R, M) sums, no memory between calls
        calls.append(t)
        stat = w * np.abs(path(t) + (e.t.T if isinstance(e, _Errors) else e)).sum(axis=1)
        return _old_quantile(stat, q)

    def in_turn(paths, e, w, t_obs, levels, null_stats, alpha):
        # the searches one after another (issue 37: calibrated_mean_tv runs them in lockstep), every quantile plain
        qs = (levels[0], levels[1], 0.5)
        lo_s, hi_s, est_s = _resampling.invert_belt(paths[0], e, w, t_obs, qs)
        highs = [hi_s] + [_resampling.invert_belt(p, e, w, t_obs, qs, lower=False)[1] for p in paths[1:]]
        est_l = _resampling.invert_belt(paths[1], e, w, t_obs, qs, lower=False)[2]
        t_floor = float(np.quantile(null_stats, alpha / 2.0))
        for path in paths if t_floor > 0 else ():
            r = _resampling.smallest_t(path, e, w, t_floor, alpha / 4.0)
            highs.append(0.0 if r is None else float(w * np.abs(path(r[1])).sum()))
        return est_s, est_l, lo_s, max(highs)

    # the belt inversion's kernels live in the core module toolbias_stats._resampling (issue 40)
    monkeypatch.setattr(_resampling, "quantile_at", plain)
    monkeypatch.setattr(_calibrated, "_quantile_at", plain)
    monkeypatch.setattr(_calibrated, "_bounds", in_turn)
    assert calibrated_mean_tv(counts, boot, n_units=[60] * 6) == fast
    assert calls                             # the plain evaluation did run


def test_worker_threads_give_the_same_result(monkeypatch):
    from toolbias_stats.simulate import simulate_selection_log

    sim = simulate_selection_log(n_clusters=3, n_queries=15, position_probs=[0.5, 0.2, 0.1, 0.1, 0.1], rng=4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        threaded = _bias.selection_bias(sim.log, n_resamples=150, rng=9, cluster_corrected=True).to_dict()
        monkeypatch.setattr(_bias, "_calibration_pool", lambda n: None)
        inline = _bias.selection_bias(sim.log, n_resamples=150, rng=9, cluster_corrected=True).to_dict()
    assert threaded == inline


@pytest.mark.parametrize("seed", range(6))
def test_quantile_from_the_near_replicates_is_the_full_one(seed):
    """Issue 37: the bisection's quantiles computed on the replicates near the order statistics (bounded by the
    triangle inequality from the last values along the path) equal those of all replicates, bit for bit, also with
    ties (integer errors) and a path that moves only some components."""
    rng = np.random.default_rng(seed)
    n_rep, m = (2000, 50) if seed % 2 else (301, 7)
    e = rng.normal(size=(n_rep, m)) * 0.02
    if seed >= 4:
        e = np.round(e * 100) / 100        # many tied statistics
    x = rng.normal(size=m) * 0.05
    v = e.var(axis=0)
    lam = float(np.max(x**2 / v))
    paths = [lambda s: s * x, lambda s: _resampling.shrinkage_path(s, x, v, lam)]
    errors = _Errors(e)
    for path in paths:
        for q in (0.0075, 0.5, 0.975, 0.0, 1.0):
            lo, hi = 0.0, 2.0
            for _ in range(40):               # a bisection on an arbitrary target: t values close together
                mid = 0.5 * (lo + hi)
                got = _quantile_at(path, mid, errors, 0.1, q)
                want = _old_quantile(0.1 * np.abs(path(mid) + e).sum(axis=1), q)
                assert got == want
                lo, hi = (lo, mid) if rng.random() < 0.5 else (mid, hi)
