"""The calibrated interval's deviations and centred errors computed on the clusters' stack (issue 37: 240 groups)
are those of the former loop over clusters, bit for bit (a copy of the loop below)."""

import numpy as np
import pytest

from toolbias_stats.metrics import _calibrated
from toolbias_stats.metrics._calibrated import calibrated_mean_tv


def _former(obs, boots, scale):
    """The former cluster-by-cluster loop of ``calibrated_mean_tv``."""
    xs, es = [], []
    for x_counts, b_counts in zip(obs, boots):
        k = x_counts.size
        phat = x_counts / x_counts.sum()
        tot = b_counts.sum(axis=1, keepdims=True)
        pstar = b_counts / tot if tot.all() else np.where(tot > 0, b_counts / np.where(tot > 0, tot, 1.0), phat)
        xs.append(phat - 1.0 / k)
        es.append((pstar - pstar.mean(axis=0)) * scale[len(es)])
    return xs, np.concatenate(xs), np.concatenate(es, axis=1)


def _inputs(rng, n_clusters, k, n_rep, attempts, mixed=False, empty=False):
    ks = [k + (c % 3 if mixed else 0) for c in range(n_clusters)]
    obs = [rng.multinomial(attempts, rng.dirichlet(np.ones(kc))).astype(float) for kc in ks]
    for x in obs:
        x[0] += 1.0                                            # n_c > 0
    boots = [rng.multinomial(attempts, (x + 0.5) / (x + 0.5).sum(), size=n_rep).astype(float) for x in obs]
    if empty:
        boots[0][3] = 0.0                                      # a replicate without a valid choice
    scale = np.sqrt(rng.integers(2, 50, n_clusters) / rng.integers(1, 2, n_clusters))
    return obs, boots, scale


@pytest.mark.parametrize("k", [2, 5, 7, 8, 9, 16, 40, 130])
@pytest.mark.parametrize("n_clusters", [2, 10, 21])
def test_stacked_errors_equal_the_loop(k, n_clusters):
    rng = np.random.default_rng([k, n_clusters])
    obs, boots, scale = _inputs(rng, n_clusters, k, 257 if k > 40 else 2000, 37)
    xs, x, e = _calibrated._errors(obs, boots, scale)
    want_xs, want_x, want_e = _former(obs, boots, scale)
    assert x.tobytes() == want_x.tobytes() and e.tobytes() == want_e.tobytes()
    assert e.shape == want_e.shape and e.flags.c_contiguous
    assert all(a.tobytes() == b.tobytes() for a, b in zip(xs, want_xs))
    assert np.var(e, axis=0).tobytes() == np.var(want_e, axis=0).tobytes()


@pytest.mark.parametrize("case", ["mixed", "empty", "one"])
def test_other_studies_take_the_loop(case):
    """Several numbers of tools, an empty replicate or one cluster: the loop, the same numbers."""
    rng = np.random.default_rng(len(case))
    obs, boots, scale = _inputs(rng, 1 if case == "one" else 6, 5, 300, 3 if case == "empty" else 20,
                                mixed=case == "mixed", empty=case == "empty")
    got, want = _calibrated._errors(obs, boots, scale), _former(obs, boots, scale)
    assert got[1].tobytes() == want[1].tobytes() and got[2].tobytes() == want[2].tobytes()


def test_inputs_are_not_modified_and_intervals_match_the_loop(monkeypatch):
    rng = np.random.default_rng(3)
    obs, boots, _ = _inputs(rng, 8, 5, 400, 60)
    ints = [b.astype(np.int64) for b in boots]
    copies = [b.copy() for b in ints]
    got = calibrated_mean_tv(obs, ints, n_units=[12] * 8)
    assert all(np.array_equal(a, b) for a, b in zip(ints, copies))
    monkeypatch.setattr(_calibrated, "_errors", _former)
    assert calibrated_mean_tv(obs, ints, n_units=[12] * 8) == got


@pytest.mark.parametrize("case", ["stack", "mixed", "empty"])
def test_integer_replicates_are_converted_once(case):
    """The engine's integer replicate counts are kept as integers by the validation and converted where the errors
    are computed: the same numbers as from float counts."""
    rng = np.random.default_rng([7, len(case)])
    obs, boots, scale = _inputs(rng, 5, 8, 500, 3 if case == "empty" else 30, mixed=case == "mixed",
                                empty=case == "empty")
    ints = [b.astype(np.int64) for b in boots]
    checked_obs, checked = _calibrated._validate(obs, ints)
    assert all(b.dtype == np.int64 for b in checked)
    got, want = _calibrated._errors(checked_obs, checked, scale), _former(obs, boots, scale)
    assert got[1].tobytes() == want[1].tobytes() and got[2].tobytes() == want[2].tobytes()


@pytest.mark.parametrize("shape", [(20, 5), (257, 50), (2000, 400), (513, 1000)])
def test_null_statistics_by_blocks(shape):
    """The null statistics summed a block of replicates at a time are ``w * |e|.sum(axis=1)``, bit for bit."""
    rng = np.random.default_rng(shape)
    e = rng.normal(size=shape) * 10.0 ** rng.integers(-4, 4, size=shape[1])
    w = 0.5 / 7
    assert _calibrated._null_stats(e, w).tobytes() == (w * np.abs(e).sum(axis=1)).tobytes()
    assert _calibrated._null_stats(e, w, rows=7).tobytes() == (w * np.abs(e).sum(axis=1)).tobytes()
