"""Tests for toolbias_stats.metrics._calibrated.calibrated_mean_tv."""

from __future__ import annotations

import numpy as np
import pytest

from toolbias_stats.metrics._calibrated import CalibratedTV, calibrated_mean_tv

N_CLUSTERS, N_QUERIES, N_ROT = 10, 100, 5


def _study(p, rng, n_resamples=200, n_clusters=N_CLUSTERS):
    """One simulated study (10 clusters x 100 queries x 5 rotations) + query bootstrap."""
    p = np.asarray(p, float)
    k = p.size
    counts, boots = [], []
    for _ in range(n_clusters):
        pc = p[rng.permutation(k)]
        per_query = rng.multinomial(N_ROT, pc, size=N_QUERIES)  # (Q, K)
        w = rng.multinomial(N_QUERIES, np.full(N_QUERIES, 1 / N_QUERIES), size=n_resamples)
        counts.append(per_query.sum(axis=0))
        boots.append(w @ per_query)
    truth = 0.5 * np.abs(p - 1 / k).sum()
    return counts, boots, truth


def test_returns_dataclass_and_reproducible():
    counts, boots, _ = _study([0.26, 0.22, 0.2, 0.18, 0.14], np.random.default_rng(0))
    r1 = calibrated_mean_tv(counts, boots)
    r2 = calibrated_mean_tv(counts, boots)
    assert isinstance(r1, CalibratedTV)
    assert r1 == r2
    assert r1.confidence_level == 0.95
    assert r1.method == "test-inversion"
    assert 0.0 <= r1.ci_low <= r1.estimate <= r1.ci_high


def test_estimate_nonnegative_and_below_plugin_near_uniform():
    rng = np.random.default_rng(1)
    for _ in range(5):
        counts, boots, _ = _study([0.2] * 5, rng)
        r = calibrated_mean_tv(counts, boots)
        assert r.estimate >= 0.0
        assert r.ci_low >= 0.0
        assert r.estimate < r.plugin  # bias correction goes downwards


def test_degenerate_chooser_all_mass_on_one_category():
    rng = np.random.default_rng(2)
    counts, boots, truth = _study([1.0, 0, 0, 0, 0], rng)
    assert truth == pytest.approx(0.8)
    r = calibrated_mean_tv(counts, boots)
    assert r.estimate == pytest.approx(0.8, abs=1e-6)
    assert r.ci_low - 1e-9 <= 0.8 <= r.ci_high + 1e-9


def test_unequal_k_and_n():
    rng = np.random.default_rng(3)
    counts = [np.array([30, 10, 10]), np.array([5, 5, 5, 5, 5, 5, 20])]
    boots = [rng.multinomial(c.sum(), c / c.sum(), size=300) for c in counts]
    r = calibrated_mean_tv(counts, boots, confidence_level=0.9)
    assert r.confidence_level == 0.9
    assert 0.0 <= r.ci_low <= r.estimate <= r.ci_high <= 1.0


def test_small_variance_bootstrap_tightens_interval():
    # positional data of a model with a fixed tool preference: bootstrap variance
    # far below multinomial -> the same counts must give a narrower interval.
    rng = np.random.default_rng(4)
    counts, boots, _ = _study([0.22, 0.21, 0.2, 0.19, 0.18], rng)
    wide = calibrated_mean_tv(counts, boots)
    shrunk = [np.rint(c + 0.3 * (b - b.mean(axis=0))).astype(int) for c, b in zip(counts, boots)]
    narrow = calibrated_mean_tv(counts, shrunk)
    assert narrow.ci_high - narrow.ci_low < wide.ci_high - wide.ci_low


@pytest.mark.parametrize(
    "p, band",
    [
        # exactly uniform: covered iff the bootstrap uniformity test does not reject
        # at level alpha/2 -> nominal 97.5%; with 60 studies the binomial 99.9%
        # range is about [0.88, 1.0].
        ([0.2] * 5, (0.85, 1.0)),
        # strong skew: nominal 95%; 200-study simulations give 94-95%; with 60
        # studies P(coverage < 0.83) < 0.001 under p = 0.95.
        ([0.40, 0.25, 0.15, 0.12, 0.08], (0.83, 1.0)),
    ],
)
def test_reduced_coverage(p, band):
    rng = np.random.default_rng(20240601)
    hits = []
    for _ in range(60):
        counts, boots, truth = _study(p, rng, n_resamples=200)
        r = calibrated_mean_tv(counts, boots)
        hits.append(r.ci_low - 1e-12 <= truth <= r.ci_high + 1e-12)
    cov = float(np.mean(hits))
    assert band[0] <= cov <= band[1], cov


def test_validation_errors():
    rng = np.random.default_rng(5)
    counts, boots, _ = _study([0.3, 0.2, 0.2, 0.2, 0.1], rng, n_clusters=3)
    with pytest.raises(ValueError, match="boot_counts"):
        calibrated_mean_tv(counts, boots[:2])
    with pytest.raises(ValueError, match=r"boot_counts\[1\]"):
        calibrated_mean_tv(counts, [boots[0], boots[1][:, :4], boots[2]])
    with pytest.raises(ValueError, match="boot_counts"):
        calibrated_mean_tv(counts, [boots[0], boots[1][:100], boots[2]])
    with pytest.raises(ValueError, match=r"counts\[0\]"):
        calibrated_mean_tv([np.zeros((2, 5))] + counts[1:], boots)
    with pytest.raises(ValueError, match=r"counts\[2\]"):
        calibrated_mean_tv(counts[:2] + [np.zeros(5, int)], boots)
    with pytest.raises(ValueError, match="counts"):
        calibrated_mean_tv([], [])
    with pytest.raises(ValueError, match="confidence_level"):
        calibrated_mean_tv(counts, boots, confidence_level=1.5)
