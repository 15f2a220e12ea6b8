"""Studies with many clusters take the compiled passes (issue 37, 2,000 clusters): the calibrated intervals' belt
and the replicates' TVs, loaded only above :data:`COMPILED_BELT_SIZE`; the whole result is the one of the NumPy
passes, bit for bit, and each replicate TV that of ``stacked(tv_runs, ...)``."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest

from toolbias_stats import _resampling
from toolbias_stats._json import dumps_indented
from toolbias_stats.metrics import _bias_engine, _vectorised
from toolbias_stats.metrics._vectorised import replicate_tv, stacked, tv_runs


def test_loaded_only_for_large_belts(monkeypatch):
    calls = []
    monkeypatch.setattr(_bias_engine, "_belt_kernel", lambda load=False: calls.append(load))
    _bias_engine._compiled_belt(2000, 50)                # 10 clusters of 5 tools
    _bias_engine._compiled_belt(200, 400)
    assert calls == []
    _bias_engine._compiled_belt(2000, 10_000)            # 2,000 clusters of 5 tools
    _bias_engine._compiled_belt(1, _bias_engine.COMPILED_BELT_SIZE)
    assert calls == [True, True]


def _study_json(monkeypatch, compiled: bool) -> str:
    from toolbias_stats import selection_bias
    from toolbias_stats.simulate import simulate_selection_log

    if compiled:
        if _resampling._belt_kernel(load=True) is None:   # pragma: no cover - numba missing
            pytest.skip("numba is not installed")
        monkeypatch.setattr(_bias_engine, "COMPILED_BELT_SIZE", 1)
    else:
        monkeypatch.setattr(_resampling, "_KERNEL", [None])
        monkeypatch.setattr(_vectorised, "_TV_KERNEL", [None])
    sim = simulate_selection_log(n_clusters=40, n_queries=6, n_runs=2, position_probs=[0.4, 0.2, 0.2, 0.1, 0.1],
                                 rng=5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = selection_bias(sim.log, n_resamples=120, n_null=200, rng=11)
    monkeypatch.undo()
    return dumps_indented(res.to_dict())


def test_whole_result_equals_the_numpy_passes(monkeypatch):
    compiled, plain = _study_json(monkeypatch, True), _study_json(monkeypatch, False)
    assert compiled == plain
    obj = json.loads(plain)
    assert obj["groups"][0]["delta_api"]["corrected_ci"][1] is not None    # intervals were computed


@pytest.fixture
def tv_kernel():
    import numba  # noqa: F401 - the compiled pass is used only where the process has loaded numba

    if _vectorised._replicate_tv_kernel() is None:   # pragma: no cover - numba missing
        pytest.skip("numba is not installed")


def _bits(a):
    return np.ascontiguousarray(a).view(np.int64)


@pytest.mark.parametrize("shape", [(2000, 3, 5), (300, 5), (40, 2, 3), (9, 3, 7), (5, 1, 1), (0, 3, 5)])
@pytest.mark.parametrize("seed", range(3))
def test_replicate_tv_is_the_stacked_tv_runs(tv_kernel, shape, seed):
    rng = np.random.default_rng(seed)
    arrays = [rng.integers(0, 30, size=shape) * rng.choice([1.0, 0.37, 1e-3]) for _ in range(45)]
    if len(shape) == 3 and shape[0] > 3 and seed == 1:
        arrays[7][3, 0, :] = 0.0          # a replicate without any valid choice: its run of clusters takes tv_runs
    want = stacked(tv_runs, arrays, axis=1)
    got = replicate_tv(arrays)
    assert got.shape == want.shape and got.flags["C_CONTIGUOUS"]
    assert np.array_equal(_bits(got), _bits(want))


@pytest.mark.parametrize("case", ["mixed K", "K = 8", "int counts"])
def test_replicate_tv_falls_back_where_not_compiled(tv_kernel, case):
    rng = np.random.default_rng(0)
    k = 8 if case == "K = 8" else 5
    arrays = [rng.integers(1, 9, size=(50, 2, k)).astype(float) for _ in range(6)]
    if case == "mixed K":
        arrays[2] = rng.integers(1, 9, size=(50, 2, 4)).astype(float)
    if case == "int counts":
        arrays = [a.astype(np.int64) for a in arrays]
    assert np.array_equal(_bits(replicate_tv(arrays)), _bits(stacked(tv_runs, arrays, axis=1)))
