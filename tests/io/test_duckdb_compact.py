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


# ---- issue 37: the packed query key (design columns at 10M rows) ----

def _design_frame(sim, n_design=3, seed=11):
    """The simulated log with ``n_design`` integer design columns random per row (a query's rows fall in many
    design cells, as in ``bench_scale.py --design 3``) and one text design column."""
    frame = sim.log.data.drop(columns=["source_file", "source_row"]).copy()
    rng = np.random.default_rng(seed)
    for e in range(n_design):
        frame[f"design{e}"] = rng.integers(0, 3, len(frame))
    frame["prompt"] = rng.choice(["long", "short", "Émoji"], len(frame))
    return frame, [f"design{e}" for e in range(n_design)] + ["prompt"]


@pytest.mark.parametrize("span", ["narrow", "wide"])
def test_packed_key_equals_pandas(sim, tmp_path, monkeypatch, span):
    """Design columns random per row: DuckDB groups and sorts one packed BIGINT key (or, when a key's span is
    too wide to pack, the columns themselves); the table, the compact arrays and the bias equal pandas'."""
    from toolbias_stats.io.engines import _duckdb

    frame, design = _design_frame(sim)
    if span == "wide":   # an integer design key spanning more than the packed key takes for one column
        frame["design0"] = frame["design0"] * (_duckdb._KEY_RADIX_MAX // 2)
    path = tmp_path / "design.parquet"
    frame.to_parquet(path)
    plans = []
    real = _duckdb._key_plan
    monkeypatch.setattr(_duckdb, "_key_plan", lambda *a: plans.append(real(*a)) or plans[-1])
    a = count_table(path, catalog=sim.log.catalog, engine="duckdb", cells=False, design=design)
    b = count_table(path, catalog=sim.log.catalog, engine="pandas", cells=False, design=design)
    assert len(plans) == 1 and (plans[0] is None) == (span == "wide")
    assert a.query_arrays is not None and len(a) == len(b) > 3 * 12 * 2 * 3
    assert a.status_totals() == b.status_totals()
    for by in (["model"], ["model", "design1"], ["prompt"]):
        assert _bias_json(a, by) == _bias_json(b, by)
    pd.testing.assert_frame_equal(a.table, b.table, check_exact=True)


def test_packed_flags_equal_the_counters():
    """``_flag_bits`` (one bit_or per query) gives the flags of ``_DUP_COUNTERS`` (five counters per query) on
    rotations in and out of 0..63, missing ones, repeats and missing check results."""
    import duckdb

    from toolbias_stats.io.engines._duckdb import _DUP_COUNTERS, _flag_bits

    rng = np.random.default_rng(4)
    n = 4000
    rot = rng.choice([0, 1, 2, 3, 5, 63, 64, -1, 200], n, p=[.2, .2, .2, .15, .1, .05, .04, .03, .03]).astype(float)
    rot[rng.random(n) < 0.02] = np.nan
    frame = pd.DataFrame({"q": rng.integers(0, 900, n), "rotation": pd.array(rot, dtype="Int64"),
                          "__bad": pd.array(rng.choice([True, False, None], n, p=[.01, .98, .01]), dtype="boolean"),
                          "__bad1": pd.array(rng.choice([True, False, None], n, p=[.01, .98, .01]),
                                             dtype="boolean")})
    con = duckdb.connect()
    con.register("rows_df", frame)
    old = con.execute(f"SELECT q, __nin > __din OR __nother > 0, __bad > 0, __bad1 > 0 FROM (SELECT q, count(*) AS "
                      f"__n, {_DUP_COUNTERS} FROM rows_df GROUP BY q) ORDER BY q").fetchall()
    for duplicates in (True, False):
        agg, flags = _flag_bits(duplicates)
        new = con.execute(f"SELECT q, {flags} FROM (SELECT q, count(*) AS __n, {agg} FROM rows_df GROUP BY q) "
                          "ORDER BY q").fetchall()
        # a counter over rows whose check result is missing is NULL, and NULL > 0 is NULL: the flags are read with
        # count_if, which counts TRUE only, so NULL and FALSE are the same flag
        want = [(q, bool(d) if duplicates else False, bool(b), bool(b1)) for q, d, b, b1 in old]
        assert new == want
    assert sum(r[1] for r in old) > 50 and sum(not r[1] for r in old) > 50   # both kinds of query present


@pytest.mark.parametrize("repeats", [0, 1, 7])
def test_repeats_by_hash_are_exact(sim, tmp_path, repeats):
    """The repeat count is first made on a hash of the identity; with no repeat it must say 0, with some it must
    give the exact number (the pandas engine's note)."""
    frame, design = _design_frame(sim)
    frame = pd.concat([frame, frame.iloc[np.arange(repeats) * 13]], ignore_index=True)
    path = tmp_path / "repeats.parquet"
    frame.to_parquet(path)
    notes = []
    for engine in ("duckdb", "pandas"):
        counts = count_table(path, catalog=sim.log.catalog, engine=engine, cells=False, design=design)
        notes.append(json.dumps(counts.diagnostics[str(path)].get("notes"), sort_keys=True, default=str))
        assert counts.n_rows == len(frame)
    assert notes[0] == notes[1]
    assert (str(repeats) in notes[0]) if repeats else ("repeat" not in notes[0].lower())
