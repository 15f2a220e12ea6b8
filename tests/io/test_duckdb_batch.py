"""Issue 37: many Parquet files of one schema are validated and counted by DuckDB as one scan.

The batch (``_Batch`` in ``engines/_duckdb.py``) must give what the file-by-file path gives: the same counts, the same
per-file rows, statuses and notes, and for a bad row the same message naming the file and the row. Each test reads
one small study both ways (the file-by-file path forced with ``_BATCH_MIN_FILES``).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import toolbias_stats as tbs
from toolbias_stats.exceptions import SelectionLogError
from toolbias_stats.io.engines import _duckdb


def _study(folder: Path, n_files: int = 5, runs_in_manifest: bool = False, seed: int = 0) -> Path:
    """``n_files`` Parquet files of one model each (2 clusters of 3 tools, 3 queries x 3 rotations, 2 runs)."""
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    tools = {c: [f"{c}_t{j}" for j in range(3)] for c in ("a", "b")}
    pd.DataFrame([{"tool_id": t, "cluster_id": c} for c, ts in tools.items() for t in ts]).to_csv(
        folder / "catalog.csv", index=False)
    text = 'name = "batch"\nformat = "table"\ncatalog = "catalog.csv"\n'
    for m in range(n_files):
        rows = [{"run": run, "cluster_id": c, "query_id": q, "rotation": rot,
                 "chosen_tool": ts[int(rng.integers(3))] if st == "ok" else None, "status": st}
                for run in (1, 2) for c, ts in tools.items() for q in (1, 2, 3) for rot in (1, 2, 3)
                for st in [("ok", "no_call", "parse_error")[int(rng.choice(3, p=[0.8, 0.1, 0.1]))]]]
        frame = pd.DataFrame(rows)
        if runs_in_manifest:
            frame = frame[frame["run"] == 1].drop(columns="run")
        frame.to_parquet(folder / f"log_{m}.parquet")
        text += f'\n[[logs]]\npath = "log_{m}.parquet"\nmodel = "m{m % 3}"\n'
        text += "run = 1\n" if runs_in_manifest else ""
    (folder / "study.toml").write_text(text, encoding="utf-8")
    return folder / "study.toml"


def _read(study: Path, monkeypatch, batched: bool):
    """``(bias JSON, diagnostics, fallbacks)`` of the study read with or without the batch."""
    fallbacks = []
    drop = _duckdb._drop_batch
    with monkeypatch.context() as mp:
        mp.setattr(_duckdb, "_BATCH_MIN_FILES", 2 if batched else 10**9)
        mp.setattr(_duckdb, "_drop_batch", lambda con: (fallbacks.append(1), drop(con)))
        counts = tbs.read_study(study, engine="duckdb").counts
    res = tbs.selection_bias(counts, n_resamples=20, n_null=10, rng=3)
    return json.dumps(res.to_dict(), sort_keys=True), counts.diagnostics, fallbacks


@pytest.mark.parametrize("runs_in_manifest", [False, True])
def test_batch_gives_what_file_by_file_gives(tmp_path, monkeypatch, runs_in_manifest):
    study = _study(tmp_path, runs_in_manifest=runs_in_manifest)
    out, diag, fallbacks = _read(study, monkeypatch, batched=True)
    assert fallbacks == []   # the batch was used
    ref, ref_diag, _ = _read(study, monkeypatch, batched=False)
    assert out == ref
    assert diag == ref_diag   # rows, statuses (as dicts) and notes of each file
    assert list(diag) == list(ref_diag)
    assert sum(d["rows"] for d in diag.values()) == 5 * (18 if runs_in_manifest else 36)
    assert out == json.dumps(tbs.selection_bias(tbs.read_study(study, engine="pandas").counts, n_resamples=20,
                                                n_null=10, rng=3).to_dict(), sort_keys=True)


def test_bad_row_is_named_as_file_by_file(tmp_path, monkeypatch):
    study = _study(tmp_path)
    bad = pd.read_parquet(tmp_path / "log_3.parquet")
    bad.loc[7, "cluster_id"] = "zz"   # not a cluster of the catalog
    bad.to_parquet(tmp_path / "log_3.parquet")
    messages = []
    for batched in (True, False):
        with monkeypatch.context() as mp:
            mp.setattr(_duckdb, "_BATCH_MIN_FILES", 2 if batched else 10**9)
            with pytest.raises(SelectionLogError) as err:
                tbs.read_study(study, engine="duckdb").counts
        messages.append(str(err.value))
    assert messages[0] == messages[1]
    assert "log_3.parquet:8" in messages[0] and "cluster_id" in messages[0] and "'zz'" in messages[0]


def test_repeated_attempts_are_noted_per_file(tmp_path, monkeypatch):
    study = _study(tmp_path)
    frame = pd.read_parquet(tmp_path / "log_1.parquet")
    pd.concat([frame, frame.iloc[:2]], ignore_index=True).to_parquet(tmp_path / "log_1.parquet")
    out, diag, fallbacks = _read(study, monkeypatch, batched=True)
    assert fallbacks == [1]   # the batch does not count repeats per file: read file by file
    ref, ref_diag, _ = _read(study, monkeypatch, batched=False)
    assert (out, diag) == (ref, ref_diag)
    notes = diag[str(tmp_path / "log_1.parquet")]["notes"]
    assert any(k.startswith("repeated attempts") and v == 2 for k, v in notes.items())


def test_files_the_batch_cannot_read_as_one(tmp_path):
    study = _study(tmp_path)
    catalog = tbs.read_study(study, engine="duckdb", lazy=True).catalog
    con = _duckdb.connect()
    try:
        def files(paths, meta=None):
            return [_duckdb._File(con, i, p, catalog, meta or {"model": "m"}, None) for i, p in enumerate(paths)]

        paths = [tmp_path / f"log_{m}.parquet" for m in range(5)]
        assert _duckdb._batch_of(con, files(paths), catalog) is not None
        assert _duckdb._batch_of(con, files(paths + paths[:1]), catalog) is None   # one file twice
        assert _duckdb._batch_of(con, files(paths, {"model": "m", "prompt": "p"}), catalog) is None
        other = pd.read_parquet(paths[0]).assign(extra=1)
        other.to_parquet(tmp_path / "other.parquet")
        assert _duckdb._batch_of(con, files(paths + [tmp_path / "other.parquet"]), catalog) is None
    finally:
        con.close()
