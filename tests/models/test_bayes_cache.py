"""JAX's on-disk compilation cache for NumPyro fits (``_jax_compilation_cache`` in models/bayes/_sampling.py).

A fit loads the XLA programs an earlier process compiled instead of compiling them again; the programs are
the same, so a seed must give the same draws whether they were compiled or loaded.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from toolbias_stats.models.bayes import _sampling as _fit

ROOT = Path(__file__).resolve().parents[2]
_JAX_THRESHOLDS = ("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES")

_FIT = """
import hashlib, json, sys, warnings
import numpy as np
from toolbias_stats.models import fit_bayes, simulate_bayes_log
alpha = np.array([[[1.0, 0.0, -1.0]]])
beta = np.array([[0.8, 0.0, -0.8]])
log = simulate_bayes_log(alpha, beta, n_per_ordering=30, rng=3)
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    res = fit_bayes(log, model="v1", draws=60, tune=60, chains=2, sampler="numpyro", rng=5)
post = res.idata.posterior
digest = hashlib.sha256(b"".join(np.ascontiguousarray(post[v].values).tobytes() for v in sorted(post.data_vars)))
print(json.dumps({"digest": digest.hexdigest(), "env": __import__("os").environ.get("JAX_COMPILATION_CACHE_DIR")}))
"""


def _run(env_cache):
    env = {k: v for k, v in os.environ.items() if k not in ("JAX_COMPILATION_CACHE_DIR", "XLA_FLAGS")}
    env.update({"TOOLBIAS_STATS_JAX_CACHE": env_cache, "PYTHONPATH": str(ROOT)})
    out = subprocess.run([sys.executable, "-c", _FIT], env=env, capture_output=True, text=True, timeout=600,
                         check=False, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_loaded_programs_give_the_same_draws(tmp_path):
    pytest.importorskip("numpyro")
    cache = tmp_path / "jax"
    first = _run(str(cache))                          # compiles and writes the cache
    written = sorted(p.name for p in cache.iterdir())
    assert first["env"] == str(cache) and written
    second = _run(str(cache))                         # loads the programs
    assert second["digest"] == first["digest"]
    assert sorted(p.name for p in cache.iterdir()) == written   # nothing new to compile


def test_off_and_user_choice_are_respected(tmp_path, monkeypatch):
    monkeypatch.delenv("JAX_COMPILATION_CACHE_DIR", raising=False)
    monkeypatch.setenv(_fit.JAX_CACHE_ENV, "0")
    _fit._jax_compilation_cache()
    assert "JAX_COMPILATION_CACHE_DIR" not in os.environ
    monkeypatch.setenv(_fit.JAX_CACHE_ENV, str(tmp_path / "ours"))
    monkeypatch.setenv("JAX_COMPILATION_CACHE_DIR", str(tmp_path / "theirs"))
    _fit._jax_compilation_cache()
    assert os.environ["JAX_COMPILATION_CACHE_DIR"] == str(tmp_path / "theirs")
    assert not (tmp_path / "ours").exists()


def test_before_and_after_jax_is_imported(tmp_path, monkeypatch):
    jax = pytest.importorskip("jax")
    monkeypatch.delenv("JAX_COMPILATION_CACHE_DIR", raising=False)
    monkeypatch.setenv(_fit.JAX_CACHE_ENV, str(tmp_path / "a"))
    monkeypatch.delitem(sys.modules, "jax")            # not imported yet: jax will read the variables
    for k in _JAX_THRESHOLDS:
        monkeypatch.delenv(k, raising=False)
    _fit._jax_compilation_cache()
    assert os.environ["JAX_COMPILATION_CACHE_DIR"] == str(tmp_path / "a") and (tmp_path / "a").is_dir()
    assert os.environ["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] == "0"
    monkeypatch.setitem(sys.modules, "jax", jax)       # already imported: the configuration is updated
    monkeypatch.delenv("JAX_COMPILATION_CACHE_DIR")
    calls = []
    monkeypatch.setattr(jax.config, "update", lambda k, v: calls.append((k, v)))
    monkeypatch.setenv(_fit.JAX_CACHE_ENV, str(tmp_path / "b"))
    _fit._jax_compilation_cache()
    if jax.config.jax_compilation_cache_dir is None:
        assert calls == [("jax_compilation_cache_dir", str(tmp_path / "b"))]
    else:                                              # someone chose a directory in this process: kept
        assert calls == []


def test_default_folder_is_beside_the_embedding_cache(tmp_path, monkeypatch):
    monkeypatch.delenv("JAX_COMPILATION_CACHE_DIR", raising=False)
    monkeypatch.delenv(_fit.JAX_CACHE_ENV, raising=False)
    monkeypatch.setenv("TOOLBIAS_CACHE_DIR", str(tmp_path / "tbs"))
    monkeypatch.delitem(sys.modules, "jax", raising=False)
    for k in _JAX_THRESHOLDS:
        monkeypatch.delenv(k, raising=False)
    _fit._jax_compilation_cache()
    assert os.environ["JAX_COMPILATION_CACHE_DIR"] == str(tmp_path / "tbs" / "jax")


def test_unwritable_directory_is_skipped(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    monkeypatch.delenv("JAX_COMPILATION_CACHE_DIR", raising=False)
    monkeypatch.setenv(_fit.JAX_CACHE_ENV, str(blocker / "jax"))
    _fit._jax_compilation_cache()
    assert "JAX_COMPILATION_CACHE_DIR" not in os.environ
