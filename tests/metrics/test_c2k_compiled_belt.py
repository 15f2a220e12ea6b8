"""The calibrated intervals of studies with many clusters take the belt's compiled pass (issue 37, 2,000 clusters):
loaded only above :data:`COMPILED_BELT_SIZE`, and the whole result is the one of the NumPy passes, bit for bit."""

from __future__ import annotations

import json
import warnings

import pytest

from toolbias_stats import _resampling
from toolbias_stats._json import dumps_indented
from toolbias_stats.metrics import _bias_engine


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
