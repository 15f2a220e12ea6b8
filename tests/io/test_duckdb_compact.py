"""Issue 23: the DuckDB engine hands the query-level counts over as compact sorted arrays (``QueryArrays``).

The int64 count table is built only when someone reads ``SelectionCounts.table``; the views and the bias read
the arrays. Everything must be exactly what the table (and the pandas engine) gives: the same frame, the same
totals and the same bias results, bit for bit.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

import toolbias_stats as tbs
from toolbias_stats.io import count_table
from toolbias_stats.simulate import simulate_selection_log


@pytest.fixture(scope="module")
def sim():
    """Two runs, 3 clusters, 12 queries (ids 1..12: as text, '10' sorts before '2'), 8% no_call."""
    return simulate_selection_log(n_clusters=3, n_queries=12, n_runs=2, tool_probs=[5, 3, 1, 1, 1],
                                  position_probs=[3, 2, 1, 1, 1], p_no_call=0.08, rng=5)


def _write(sim, tmp_path, variant):
    frame = sim.log.data.drop(columns=["source_file", "source_row"]).copy()
    if variant == "integer ids":       # numeric ids in the file: the table holds them as text
        frame = frame.assign(query_id=frame["query_id"].astype(int), cluster_id=frame["cluster_id"].astype(int))
    options: dict = {}
    if variant == "integer design":    # an integer design column stays a number
        frame["seed"] = np.where(frame["run"] == 1, 7, 3)
        options = {"design": ["seed"]}
    if variant == "text design":       # a text design column: a categorical
        frame["prompt"] = np.where(frame["run"] == 1, "short", "long")
        options = {"design": ["prompt"]}
    if variant == "float design":      # a float design key: the table path (no compact arrays)
        options = {"meta": {"top_p": 0.5}}
    if variant == "two models":
        other = frame.copy()
        other["model"] = "another"
        frame = pd.concat([frame, other], ignore_index=True)
    path = tmp_path / "log.parquet"
    frame.to_parquet(path)
    return path, options


def _bias_json(counts, by):
    res = tbs.selection_bias(counts, by=by, n_resamples=60, n_null=50, rng=3)
    return json.dumps(res.to_dict(), sort_keys=True)


@pytest.mark.parametrize("variant", ["text ids", "integer ids", "integer design", "text design", "two models",
                                     "float design"])
def test_compact_counts_equal_the_table(sim, tmp_path, variant):
    path, options = _write(sim, tmp_path, variant)
    b = count_table(path, catalog=sim.log.catalog, engine="pandas", cells=False, **options)
    a = count_table(path, catalog=sim.log.catalog, engine="duckdb", cells=False, **options)
    assert a.design_columns == b.design_columns
    assert (a.compact is None) == (variant == "float design")
    # the views answer from the arrays without building the table
    assert a.status_totals() == b.status_totals()
    assert (a.n_rows, a.k_max, a.weighted, len(a)) == (b.n_rows, b.k_max, b.weighted, len(b))
    assert repr(a).replace("duckdb", "pandas") == repr(b)
    for by in (["model"], ["model", "run"], [], list(a.design_columns[3:])):
        assert _bias_json(a, by) == _bias_json(b, by)
    assert (a.compact is None) == (variant == "float design")   # still not built
    pd.testing.assert_frame_equal(a.table, b.table, check_exact=True)
    assert (a.compact is None and a.query_arrays is not None) or variant == "float design"
    assert _bias_json(a, ["model"]) == _bias_json(b, ["model"])     # the table path gives the same


def test_query_ids_rank_as_text(sim, tmp_path):
    """Integer query ids are ranked as the table's text ('1' < '10' < '11' < '12' < '2'), so the bootstrap
    resamples the queries in the same order on both paths."""
    a = count_table(_write(sim, tmp_path, "integer ids")[0], catalog=sim.log.catalog, engine="duckdb", cells=False)
    cats = list(a.query_arrays.keys["query_id"].categories)
    assert cats == sorted(str(i) for i in range(1, 13))
    codes = np.asarray(a.query_arrays.keys["query_id"].codes)
    assert (codes >= 0).all() and len(np.unique(codes)) == 12
