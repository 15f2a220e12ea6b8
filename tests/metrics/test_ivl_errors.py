"""The calibrated interval's centred errors stacked as (R, C, K) (issue 37, tenth pass: the (R, M) errors are then a
view, without the transposed copy) are those of the former (C, R, K) stack, bit for bit (a copy of it below)."""

import numpy as np
import pytest

from toolbias_stats.metrics import _calibrated
from toolbias_stats.metrics._calibrated import calibrated_mean_tv


def _former(obs, boots, scale):
    """The former stacked branch of ``_calibrated._errors`` (clusters of one size, no empty replicate)."""
    k = obs[0].size
    b = np.stack(boots, dtype=float, casting="unsafe")             # (C, R, K)
    tot = b.sum(axis=2, keepdims=True)
    assert tot.all()
    x_counts = np.stack(obs)
    dev = x_counts / x_counts.sum(axis=1, keepdims=True) - 1.0 / k
    pstar = np.divide(b, tot, out=b)
    pstar -= pstar.mean(axis=1, keepdims=True)
    pstar *= scale[:, None, None]
    return list(dev), dev.ravel(), pstar.transpose(1, 0, 2).reshape(b.shape[1], -1)


def _inputs(rng, n_clusters, k, n_rep, attempts, integer):
    obs = [rng.multinomial(attempts, rng.dirichlet(np.ones(k))).astype(float) for _ in range(n_clusters)]
    for x in obs:
        x[0] += 1.0
    boots = [rng.multinomial(attempts, (x + 0.5) / (x + 0.5).sum(), size=n_rep) for x in obs]
    boots = [b if integer else b.astype(float) for b in boots]
    scale = np.sqrt(rng.integers(2, 50, n_clusters) / rng.integers(1, 2, n_clusters))
    return obs, boots, scale


@pytest.mark.parametrize("integer", [True, False])
@pytest.mark.parametrize(("n_clusters", "k", "n_rep"),
                         [(2, 2, 20), (3, 5, 2000), (10, 7, 301), (21, 9, 129), (300, 5, 500), (40, 40, 64),
                          (5, 130, 33)])
def test_errors_equal_the_former_stack(n_clusters, k, n_rep, integer):
    rng = np.random.default_rng([n_clusters, k, n_rep, integer])
    obs, boots, scale = _inputs(rng, n_clusters, k, n_rep, 7 if k > 40 else 37, integer)
    xs, x, e = _calibrated._errors(obs, boots, scale)
    want_xs, want_x, want_e = _former(obs, boots, scale)
    assert e.shape == want_e.shape == (n_rep, n_clusters * k) and e.flags.c_contiguous and e.dtype == np.float64
    assert e.tobytes() == want_e.tobytes() and x.tobytes() == want_x.tobytes()
    assert all(a.tobytes() == b.tobytes() for a, b in zip(xs, want_xs))
    assert np.var(e, axis=0).tobytes() == np.var(want_e, axis=0).tobytes()


def test_intervals_equal_the_former_stack(monkeypatch):
    """Whole intervals, with the former stack patched in: the same results."""
    rng = np.random.default_rng(5)
    cases = [_inputs(rng, c, k, 400, a, True) for c, k, a in ((8, 5, 60), (30, 4, 12), (3, 12, 200))]
    got = [calibrated_mean_tv(o, b, n_units=[9] * len(o)) for o, b, _ in cases]
    monkeypatch.setattr(_calibrated, "_errors", _former)
    assert [calibrated_mean_tv(o, b, n_units=[9] * len(o)) for o, b, _ in cases] == got


@pytest.mark.parametrize("n_rep", [20, 129, 2000])
@pytest.mark.parametrize("m", [1, 2, 3, 1023, 1024, 1025, 1026, 2049, 5000])
def test_column_variances_equal_numpys(n_rep, m):
    """``_column_var`` (blocks of columns, the last of two or more) is ``e.var(axis=0)`` bit for bit."""
    rng = np.random.default_rng([n_rep, m])
    e = rng.normal(size=(n_rep, m)) * 0.03
    e -= e.mean(axis=0)
    for cols in (1024, 2, 3, 7):
        assert _calibrated._column_var(e, cols).tobytes() == e.var(axis=0).tobytes()
