"""Issue 37: the cost of a study follows its rows, not its shape; both engines agree at every shape.

Small versions of ``benchmarks/bench_shapes.py``'s shapes: 2,000 clusters in one file, and 40 files of one model
each (many groups; DuckDB reads them as one batch of Parquet files, ``tests/io/test_duckdb_batch.py``; read file by
file they are more than DuckDB reads in one query, so the study is copied batch by batch). The pandas
and DuckDB engines give the same counts and the same bias, bit for bit. An exceeded DuckDB memory limit ends in
one message naming the setting to change (exit 2, no traceback).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import toolbias_stats as tbs
from toolbias_stats.io.engines import _duckdb

ROOT = Path(__file__).resolve().parents[2]


def _study(folder: Path, n_clusters: int, n_files: int, k: int = 2, queries: int = 2, seed: int = 0) -> Path:
    """A `table` study: ``n_clusters`` clusters of ``k`` tools, every query shown in ``k`` rotations, one model
    per file (the model named by the manifest when there are several files)."""
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    tools = [[f"t{c}_{j}" for j in range(k)] for c in range(n_clusters)]
    pd.DataFrame({"tool_id": [t for ts in tools for t in ts],
                  "cluster_id": np.repeat([f"c{c}" for c in range(n_clusters)], k)}).to_csv(folder / "catalog.csv",
                                                                                               index=False)
    text = 'name = "shape"\nformat = "table"\ncatalog = "catalog.csv"\n'
    for m in range(n_files):
        rows = []
        for c in range(n_clusters):
            for q in range(1, queries + 1):
                for rot in range(1, k + 1):
                    shown = [tools[c][(rot - 1 + i) % k] for i in range(k)]
                    ok = rng.random() > 0.05
                    pick = shown[0] if rng.random() < 0.4 else shown[int(rng.integers(k))]
                    rows.append({"run": 1, "cluster_id": f"c{c}", "query_id": q, "rotation": rot,
                                 "chosen_tool": pick if ok else None, "status": "ok" if ok else "no_call"})
        frame = pd.DataFrame(rows)
        if n_files == 1:
            frame.insert(0, "model", "m0")
        frame.to_parquet(folder / f"log_{m}.parquet")
        text += f'\n[[logs]]\npath = "log_{m}.parquet"\n' + (f'model = "m{m}"\n' if n_files > 1 else "")
    (folder / "study.toml").write_text(text, encoding="utf-8")
    return folder / "study.toml"


def _bias(study: Path, engine: str) -> str:
    counts = tbs.read_study(study, engine=engine).counts
    res = tbs.selection_bias(counts, n_resamples=20, n_null=10, rng=7)
    return json.dumps(res.to_dict(), sort_keys=True)


@pytest.mark.filterwarnings("ignore")
def test_engines_agree_on_2000_clusters(tmp_path):
    study = _study(tmp_path / "c2000", n_clusters=2000, n_files=1)
    out = _bias(study, "duckdb")
    assert out == _bias(study, "pandas")
    res = json.loads(out)
    assert len(res["groups"][0]["clusters"]) == 2000
    assert res["groups"][0]["rows"]["total"] == 2000 * 2 * 2


@pytest.mark.filterwarnings("ignore")
def test_engines_agree_on_many_files(tmp_path):
    # 40 files (not 240: each file costs ~50-80 ms of validation in either engine); more than DuckDB reads in one
    # query, so the batched copy is exercised
    n_files = 40
    assert n_files > _duckdb._FILES_PER_QUERY
    study = _study(tmp_path / "files", n_clusters=2, n_files=n_files)
    out = _bias(study, "duckdb")
    assert out == _bias(study, "pandas")
    res = json.loads(out)
    assert len(res["groups"]) == n_files
    assert sum(g["rows"]["total"] for g in res["groups"]) == n_files * 2 * 2 * 2


def test_memory_limit_reached_names_the_setting(tmp_path):
    study = _study(tmp_path / "small", n_clusters=3, n_files=1)
    env = {**os.environ, _duckdb.MEMORY_ENV: "100KB", "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-m", "toolbias_stats.cli", "bias", str(study), "--n-resamples", "0",
                           "--json"], capture_output=True, text=True, env=env, cwd=tmp_path, check=False)
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == ""
    assert "Traceback" not in proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stderr
    assert "ran out of memory" in lines[0] and _duckdb.MEMORY_ENV in lines[0]


def test_memory_limit_setting_is_read_and_checked(monkeypatch):
    monkeypatch.setenv(_duckdb.MEMORY_ENV, "300MB")
    con = _duckdb.connect()
    try:
        assert con.execute("SELECT current_setting('memory_limit')").fetchone()[0].startswith("286")  # MiB
    finally:
        con.close()
    monkeypatch.setenv(_duckdb.MEMORY_ENV, "lots")
    with pytest.raises(ValueError, match=_duckdb.MEMORY_ENV):
        _duckdb.connect()
