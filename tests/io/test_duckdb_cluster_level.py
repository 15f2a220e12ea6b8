"""DuckDB counts at ``level="cluster"`` (the point estimates' read, issue 37: the cells' key combinations are
coded inside DuckDB) equal the query-level counts summed over queries, with and without a ``count`` column."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

import toolbias_stats as tbs


def _study(tmp_path, weighted: bool):
    rng = np.random.default_rng(37)
    pd.DataFrame({"cluster_id": ["c1"] * 3 + ["c2"] * 2, "tool_id": list("abcde")}).to_csv(
        tmp_path / "catalog.csv", index=False)
    rows = []
    for model in ("m1", "m2"):
        for q in range(6):
            for run in (1, 2):
                for cluster, tools in (("c1", "abc"), ("c2", "de")):
                    ok = rng.random() < 0.8
                    rows.append({"model": model, "condition": "y" if q == 0 else "x", "query_id": f"{cluster}q{q}",
                                 "run": run, "cluster_id": cluster,
                                 "chosen_tool": tools[rng.integers(len(tools))] if ok else None,
                                 "status": "ok" if ok else "no_call", "count": int(rng.integers(0, 4))})
    log = pd.DataFrame(rows)
    if not weighted:
        log = log.drop(columns="count")
    log.to_csv(tmp_path / "log.csv", index=False)
    path = tmp_path / "study.toml"
    path.write_text('name = "t"\nformat = "table"\ncatalog = "catalog.csv"\n[[logs]]\npath = "log.csv"\n')
    return path


@pytest.mark.parametrize("weighted", [False, True])
def test_cluster_level_is_the_query_level_summed(tmp_path, weighted):
    path = _study(tmp_path, weighted)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        by_cluster = tbs.read_study(path, engine="duckdb", level="cluster", cells=False).counts.table
        by_query = tbs.read_study(path, engine="duckdb", level="query", cells=False).counts.table
    keys = ["model", "run", "condition", "cluster_id", "n_candidates"]
    values = [c for c in by_query.columns if c.startswith(("n_", "tool_", "pos_", "rows_")) and c != "n_candidates"]
    expected = (by_query.astype({k: object for k in keys if k not in ("run", "n_candidates")})
                .groupby(keys, dropna=False, sort=True)[values].sum().reset_index())
    got = by_cluster.astype({k: object for k in keys if k not in ("run", "n_candidates")})
    got = got.sort_values(keys, na_position="last").reset_index(drop=True)[keys + values]
    assert by_cluster["query_id"].isna().all()
    assert (got["condition"] == "y").sum() == 8
    assert int(got["n_ok"].sum()) == int(by_query["n_ok"].sum()) > 0
    pd.testing.assert_frame_equal(got, expected.sort_values(keys, na_position="last").reset_index(drop=True),
                                  check_dtype=False)
