"""Issue 37: ``read_study(..., count_by=[...])`` / the engines' ``count_by`` count by the named design columns only.

The narrowed counts must equal the full counts summed over the dropped design columns (an independent pandas
groupby here), on every engine, and everything decided on an attempt's identity (repeats and their note,
duplicates and their message, bad rows, statuses) must be decided on every design column, as without
``count_by``.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

import toolbias_stats as tbs
from toolbias_stats.exceptions import SelectionLogError
from toolbias_stats.io import count_table
from toolbias_stats.io.engines._narrow import COUNT_KEYS, counted_design, narrow_counts
from toolbias_stats.simulate import simulate_selection_log

DESIGN = ["design0", "design1", "prompt"]
ENGINES = ("duckdb", "pandas")


@pytest.fixture(scope="module")
def sim():
    """2 runs, 3 clusters, 12 queries, 8% no_call."""
    return simulate_selection_log(n_clusters=3, n_queries=12, n_runs=2, tool_probs=[5, 3, 1, 1, 1],
                                  position_probs=[3, 2, 1, 1, 1], p_no_call=0.08, rng=5)


def _frame(sim, n_twins=0):
    """The simulated log with two integer design columns and a text one, random per row (a query's rows fall in
    many design cells, as in ``bench_scale.py --design 3``); plus ``n_twins`` rows that repeat a row in everything
    but ``design0`` (another attempt, not a repeat: the identity has every design column)."""
    frame = sim.log.data.drop(columns=["source_file", "source_row"]).copy()
    rng = np.random.default_rng(11)
    frame["design0"] = rng.integers(0, 3, len(frame))
    frame["design1"] = rng.integers(0, 3, len(frame))
    frame["prompt"] = rng.choice(["long", "short", "Émoji"], len(frame))
    if n_twins:
        twins = frame.iloc[np.arange(n_twins) * 17].copy()
        twins["design0"] = twins["design0"] + 5
        frame = pd.concat([frame, twins], ignore_index=True)
    return frame


def _write(frame, tmp_path, name="log.parquet"):
    path = tmp_path / name
    frame.to_parquet(path)
    return path


def _summed(counts, keep):
    """``counts``' table summed over the design columns not in ``keep`` (the reference, by hand)."""
    table = counts.table
    keys = keep + list(COUNT_KEYS)
    values = [c for c in table.columns if c not in counts.design_columns and c not in keys]
    out = table.astype({k: "string" for k in keys if isinstance(table[k].dtype, pd.CategoricalDtype)})
    out = out.groupby(keys, dropna=False)[values].sum().reset_index()
    return out.sort_values(keys, na_position="last").reset_index(drop=True)


def _as_plain(table, keys):
    out = table.astype({k: "string" for k in keys if isinstance(table[k].dtype, pd.CategoricalDtype)})
    return out.sort_values(keys, na_position="last").reset_index(drop=True)


def _bias_json(counts, by):
    res = tbs.selection_bias(counts, by=by, n_resamples=60, n_null=50, rng=3)
    return json.dumps(res.to_dict(), sort_keys=True)


def test_counted_design():
    design = ["model", "run", "condition", "design0", "design1"]
    assert counted_design(design, None) == design
    assert counted_design(design, []) == design[:3]
    assert counted_design(design, ["model"]) == design[:3]
    assert counted_design(design, ("design1", "query_id")) == design[:3] + ["design1"]
    assert counted_design(design, ["design9"]) == design    # not a design column: every column, as before


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("keep", [[], ["design1"], ["design0", "prompt"]])
def test_narrowed_counts_are_the_full_counts_summed(sim, tmp_path, engine, keep):
    """The counts by ``model`` (and ``keep``) equal the counts by every design column summed over the others,
    with rows that differ from another only in ``design0``; views, totals and the bias are those of the full
    counts."""
    path = _write(_frame(sim, n_twins=6), tmp_path)
    full = count_table(path, catalog=sim.log.catalog, engine=engine, cells=False, design=DESIGN)
    narrow = count_table(path, catalog=sim.log.catalog, engine=engine, cells=False, design=DESIGN,
                         count_by=["model", *keep])
    kept = ["model", "run", "condition", *[c for c in DESIGN if c in keep]]
    assert full.design_columns == ("model", "run", "condition", *DESIGN)
    assert narrow.design_columns == tuple(kept)
    assert len(narrow.table) < len(full.table)
    keys = kept + list(COUNT_KEYS)
    pd.testing.assert_frame_equal(_as_plain(narrow.table, keys), _summed(full, kept), check_dtype=False)
    assert narrow.status_totals() == full.status_totals() and narrow.n_units == full.n_units
    assert narrow.diagnostics == full.diagnostics
    for by in (["model"], ["model", *keep]):
        assert _bias_json(narrow, by) == _bias_json(full, by)


def test_engines_agree_when_narrowed(sim, tmp_path):
    """DuckDB (grouping by the kept columns) and pandas (summing its full counts) give the same frames, cells
    and query orderings, at both levels."""
    path = _write(_frame(sim, n_twins=3), tmp_path)
    for level in ("query", "cluster"):
        a, b = (count_table(path, catalog=sim.log.catalog, engine=e, level=level, design=DESIGN,
                            count_by=["design1"]) for e in ENGINES)
        assert a.design_columns == b.design_columns == ("model", "run", "condition", "design1")
        pd.testing.assert_frame_equal(a.table, b.table, check_exact=True)
        pd.testing.assert_frame_equal(a.cells.reset_index(drop=True), b.cells.reset_index(drop=True),
                                      check_dtype=False)
        if level == "query":
            pd.testing.assert_frame_equal(a.query_orderings, b.query_orderings, check_dtype=False)
    full = count_table(path, catalog=sim.log.catalog, engine="duckdb", design=DESIGN)
    again = narrow_counts(full, ["design1"])   # the pandas engine's step applied to DuckDB's full counts
    direct = count_table(path, catalog=sim.log.catalog, engine="duckdb", design=DESIGN, count_by=["design1"])
    pd.testing.assert_frame_equal(again.table, direct.table, check_exact=True)
    pd.testing.assert_frame_equal(again.query_orderings, direct.query_orderings, check_dtype=False)


@pytest.mark.parametrize("engine", ENGINES)
def test_repeats_and_duplicates_use_the_whole_identity(sim, tmp_path, engine):
    """Rows that differ only in a design column are no repeat (note) and no duplicate (``duplicates = "error"``)
    with or without ``count_by``; a true repeat is counted and a true duplicate refused with the same message."""
    frame = _frame(sim, n_twins=5)
    path = _write(frame, tmp_path)
    notes = []
    for count_by in (None, ["model"]):
        counts = count_table(path, catalog=sim.log.catalog, engine=engine, design=DESIGN, count_by=count_by)
        notes.append(counts.diagnostics[str(path)].get("notes", {}))
        assert counts.n_rows == len(frame)
        ok = count_table(path, catalog=sim.log.catalog, engine=engine, design=DESIGN, count_by=count_by,
                         duplicates="error")
        assert ok.n_rows == len(frame)
    assert notes[0] == notes[1] and "repeat" not in json.dumps(notes[0]).lower()
    # three true repeats (every column equal)
    path = _write(pd.concat([frame, frame.iloc[[2, 40, 41]]], ignore_index=True), tmp_path, "repeats.parquet")
    notes = [json.dumps(count_table(path, catalog=sim.log.catalog, engine=engine, design=DESIGN,
                                    count_by=count_by).diagnostics[str(path)].get("notes"), sort_keys=True)
             for count_by in (None, ["model"])]
    assert notes[0] == notes[1] and "3" in notes[0]
    messages = []
    for count_by in (None, ["model"]):
        with pytest.raises(SelectionLogError) as caught:
            count_table(path, catalog=sim.log.catalog, engine=engine, design=DESIGN, count_by=count_by,
                        duplicates="error")
        messages.append(str(caught.value))
    assert messages[0] == messages[1] and "duplicate" in messages[0]


@pytest.mark.parametrize("engine", ENGINES)
def test_a_bad_row_gives_the_same_message(sim, tmp_path, engine):
    frame = _frame(sim)
    frame.loc[7, "run"] = 0
    path = _write(frame, tmp_path)
    messages = []
    for count_by in (None, ["model"], ["design0"]):
        with pytest.raises(SelectionLogError) as caught:
            count_table(path, catalog=sim.log.catalog, engine=engine, design=DESIGN, count_by=count_by)
        messages.append(str(caught.value))
    assert messages[0] == messages[1] == messages[2] and ":run:" in messages[0]


def _study(sim, tmp_path, declared=""):
    path = _write(_frame(sim, n_twins=4), tmp_path)
    sim.log.catalog.table.to_csv(tmp_path / "catalog.csv", index=False)
    toml = tmp_path / "study.toml"
    toml.write_text(f'name = "s"\nformat = "table"\ncatalog = "catalog.csv"\n{declared}\n'
                    f'[[logs]]\npath = "{path.name}"\ndesign = {json.dumps(DESIGN)}\n', encoding="utf-8")
    return toml


@pytest.mark.parametrize("engine", ENGINES)
def test_read_study_count_by(sim, tmp_path, engine):
    """``read_study``: the counts narrowed, the log (pandas) whole; a declared design keeps its columns; a name
    that is no design column keeps every column (``by`` then fails with the full list, as before)."""
    toml = _study(sim, tmp_path)
    full = tbs.read_study(toml, engine=engine)
    study = tbs.read_study(toml, engine=engine, count_by=["model"])
    assert study.counts.design_columns == ("model", "run", "condition") and study.count_by == ("model",)
    assert _bias_json(study.counts, "model") == _bias_json(full.counts, "model")
    if engine == "pandas":
        assert study.log.design_columns == list(full.counts.design_columns)
    typo = tbs.read_study(toml, engine=engine, count_by=["model", "desing0"])
    assert typo.counts.design_columns == full.counts.design_columns
    with pytest.raises(ValueError, match="available") as caught:
        tbs.selection_bias(typo.counts, by="desing0", n_resamples=0, n_null=10)
    assert "design1" in str(caught.value)
    declared = _study(sim, tmp_path, declared='\n[design]\nfactors = ["design1"]\n')
    kept = tbs.read_study(declared, engine=engine, count_by=["model"])
    assert kept.counts.design_columns == ("model", "run", "condition", "design1")
    assert kept.counts.design.factors == ("model", "condition", "design1")


def test_dask_counts_by_the_kept_columns(sim, tmp_path):
    pytest.importorskip("distributed")
    from distributed import Client

    frame = _frame(sim, n_twins=4)
    parts = tmp_path / "parts"
    parts.mkdir()
    for i, idx in enumerate(np.array_split(np.arange(len(frame)), 3)):   # queries split across partitions
        frame.iloc[idx].to_parquet(parts / f"part{i}.parquet", index=False)
    want = count_table(_write(frame, tmp_path), catalog=sim.log.catalog, engine="duckdb", design=DESIGN,
                       count_by=["prompt"])
    with Client(processes=False, n_workers=1, threads_per_worker=2, dashboard_address=None) as client:
        got = count_table(parts, catalog=sim.log.catalog, engine="dask", scheduler=client, design=DESIGN,
                          count_by=["prompt"])
    assert got.design_columns == ("model", "run", "condition", "prompt")
    pd.testing.assert_frame_equal(got.table, want.table)


@pytest.mark.parametrize("sample", [8, 1 << 20])
@pytest.mark.parametrize("twins", [0, 5])
def test_repeat_proof_without_design_columns(sim, tmp_path, monkeypatch, sample, twins):
    """The DuckDB engine first tries to prove "no repeat" grouping without the extra design columns (the sample
    of the first rows decides whether to try; 8 rows never show a repeat, so the whole proof runs). Rows that
    differ only in a design column make it fail, and the exact count then says 0; true repeats are counted. The
    notes always equal the pandas engine's."""
    from toolbias_stats.io.engines import _duckdb

    monkeypatch.setattr(_duckdb, "_COARSE_SAMPLE_ROWS", sample)
    frame = _frame(sim, n_twins=twins)
    for extra in (0, 2):
        data = pd.concat([frame, frame.iloc[[5, 6][:extra]]], ignore_index=True)
        path = _write(data, tmp_path, f"proof{extra}.parquet")
        notes = [json.dumps(count_table(path, catalog=sim.log.catalog, engine=e, design=DESIGN, cells=False,
                                        count_by=["model"]).diagnostics[str(path)].get("notes"), sort_keys=True)
                 for e in ENGINES]
        assert notes[0] == notes[1]
        assert ("2" in notes[0]) if extra else ("repeat" not in notes[0].lower())
