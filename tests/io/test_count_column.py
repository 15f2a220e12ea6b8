"""Aggregated logs (issue 13): a ``count`` column makes every row stand for ``count`` identical attempts.

Evidence: (1) an aggregated file gives exactly the counts, point estimates, null references and rows accounting of
the expanded file (one row per attempt) through every engine; (2) with per-query rows the query bootstrap is
unchanged (same replicates, bit for bit); (3) bad ``count`` values and duplicate cells give one clear
``file:row:column`` error, the same through pandas and DuckDB; (4) the issue's example ("edit A chosen 1,101
times, original 59 times" per model and pair of descriptions) runs end to end through ``toolbias-stats bias``.
"""

from __future__ import annotations

import json
import re
import warnings

import numpy as np
import pandas as pd
import pytest

import toolbias_stats as tbs
from toolbias_stats.cli._commands import main
from toolbias_stats.exceptions import SelectionLogError
from toolbias_stats.io import count_table
from toolbias_stats.io._counts import ROW_COLUMNS
from toolbias_stats.io.readers.table import read_catalog_table, read_table
from toolbias_stats.metrics._bias import INTERVAL_MULTINOMIAL, INTERVAL_QUERY
from toolbias_stats.metrics._tv import expected_tv_uniform
from toolbias_stats.simulate import simulate_selection_log

POINT = ("mean_over_runs", "sd_over_runs", "pooled", "null_expected", "null_expected_pooled", "normalised",
         "normalised_pooled", "n_runs")


@pytest.fixture(scope="module")
def sim():
    """2 runs, 3 clusters x 12 queries x 5 rotations, 10% no_call; two unknown_tool rows for the accounting."""
    log = simulate_selection_log(n_clusters=3, n_queries=12, n_runs=2, tool_probs=[5, 3, 1, 1, 1],
                                 position_probs=[3, 2, 1, 1, 1], p_no_call=0.1, rng=5).log
    data = log.data.copy()
    data.loc[[3, 40], ["status", "chosen_tool", "chosen_position"]] = ["unknown_tool", pd.NA, pd.NA]
    return tbs.SelectionLog.from_frame(data, log.catalog)


def _bias(obj, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return tbs.selection_bias(obj, **{"n_resamples": 0, "n_null": 0, **kw})


def _assert_same_point_estimates(a, b):
    """Point estimates and null references of two BiasResults agree to 1e-12; rows accounting exactly."""
    assert len(a.groups) == len(b.groups)
    for ga, gb in zip(a.groups, b.groups):
        assert ga.keys == gb.keys
        assert {k: ga.rows[k] for k in ("total", "used", "excluded")} == \
               {k: gb.rows[k] for k in ("total", "used", "excluded")}
        for m in ("delta_api", "delta_pos", "delta_model"):
            ra, rb = getattr(ga, m), getattr(gb, m)
            for f in POINT:
                np.testing.assert_allclose(getattr(ra, f), getattr(rb, f), rtol=1e-12, atol=0, err_msg=f"{m}.{f}")
        for ca, cb in zip(ga.clusters, gb.clusters):
            assert ca.cluster == cb.cluster and ca.n_used == cb.n_used
            np.testing.assert_array_equal(ca.counts, cb.counts)
            for f in POINT:
                np.testing.assert_allclose(getattr(ca.delta_api, f), getattr(cb.delta_api, f), rtol=1e-12, atol=0)
                np.testing.assert_allclose(getattr(ca.delta_pos, f), getattr(cb.delta_pos, f), rtol=1e-12, atol=0)


def _without_provenance(log, **kw):
    """The aggregated frame as a team would publish it: no provenance columns (and no query ids when pooled)."""
    frame = log.aggregate(**kw).data.drop(columns=["source_file", "source_row"])
    if kw.get("queries") is False:
        frame = frame.drop(columns=["query_id"])
    return frame


def _write(frame, path):
    suffix = path.suffix
    if suffix == ".csv":
        frame.to_csv(path, index=False)
    elif suffix == ".jsonl":
        frame.to_json(path, orient="records", lines=True)
    else:
        frame.to_parquet(path, index=False)
    return path


# ------------------------------------------------------------------------------------------------
class TestSameAsExpanded:
    @pytest.mark.parametrize("suffix", [".csv", ".jsonl", ".parquet"])
    @pytest.mark.parametrize("variant", [{}, {"lists": False}, {"queries": False}])
    def test_counts_and_estimates_through_pandas_and_duckdb(self, sim, tmp_path, suffix, variant):
        expanded = _write(sim.data.drop(columns=["source_file", "source_row"]), tmp_path / f"rows{suffix}")
        frame = _without_provenance(sim, **variant)
        agg = _write(frame, tmp_path / f"agg{suffix}")
        assert len(frame) < len(sim.data) or not variant
        for engine in ("pandas", "duckdb"):
            for level in ("query", "cluster"):
                ref = count_table(expanded, catalog=sim.catalog, engine=engine, level=level)
                got = count_table(agg, catalog=sim.catalog, engine=engine, level=level)
                assert got.weighted and not ref.weighted
                assert got.n_rows == ref.n_rows == len(sim.data)              # attempts
                assert got.status_totals() == ref.status_totals()
                assert sum(got.row_totals().values()) == len(frame)           # table rows
                if level == "cluster" or variant.get("queries") is not False:
                    cmp = got.table.drop(columns=list(ROW_COLUMNS))
                    if level == "cluster":
                        cmp, want = cmp.drop(columns="query_id"), ref.table.drop(columns="query_id")
                    else:
                        want = ref.table
                    pd.testing.assert_frame_equal(cmp, want)
                if not variant:                                               # lists kept: the model's cells
                    pd.testing.assert_frame_equal(got.cells, ref.cells)
                    if level == "query":                                      # and the lists per query (issue 35)
                        pd.testing.assert_frame_equal(got.query_orderings, ref.query_orderings)
                _assert_same_point_estimates(_bias(got, by=["model", "run"]), _bias(ref, by=["model", "run"]))
                _assert_same_point_estimates(_bias(got), _bias(ref))

    def test_rows_accounting_reports_attempts_and_rows(self, sim, tmp_path):
        frame = _without_provenance(sim, queries=False)
        path = _write(frame, tmp_path / "agg.csv")
        for engine in ("pandas", "duckdb"):
            res = _bias(count_table(path, catalog=sim.catalog, engine=engine))
            rows = res.groups[0].rows
            status = sim.data["status"].value_counts()
            assert rows["total"] == len(sim.data) and rows["used"] == status["ok"]
            assert rows["excluded"] == {"no_call": int(status["no_call"]), "unknown_tool": 2}
            by_rows = frame["status"].value_counts()
            assert rows["table_rows"] == {"total": len(frame), "used": int(by_rows["ok"]),
                                          "excluded": {s: int(by_rows[s]) for s in ("no_call", "unknown_tool")}}
            assert json.loads(json.dumps(res.to_dict()))["groups"][0]["rows"]["table_rows"]["total"] == len(frame)
            diag = count_table(path, catalog=sim.catalog, engine=engine).diagnostics[str(path)]
            assert diag["rows"] == len(frame) and diag["attempts"] == len(sim.data)
            assert diag["attempt_status"]["unknown_tool"] == 2

    def test_dask_equals_pandas(self, sim, tmp_path):
        pytest.importorskip("distributed")
        frame = _without_provenance(sim, queries=False)
        d = tmp_path / "parts"
        d.mkdir()
        for i, part in enumerate(np.array_split(np.arange(len(frame)), 3)):   # a cell per row, spread out
            frame.iloc[part].to_parquet(d / f"part{i}.parquet", index=False)
        from distributed import Client

        one = _write(frame, tmp_path / "all.parquet")
        want = count_table(one, catalog=sim.catalog, engine="duckdb")
        with Client(processes=False, n_workers=1, threads_per_worker=2, dashboard_address=None) as client:
            got = count_table(d, catalog=sim.catalog, engine="dask", scheduler=client)
            pd.testing.assert_frame_equal(got.table, want.table)
            pd.testing.assert_frame_equal(got.cells, want.cells)
            assert got.diagnostics[str(d)]["attempts"] == len(sim.data)
            assert got.diagnostics[str(d)]["rows"] == len(frame)
            # a cell listed in two partitions is a duplicate through dask too
            frame.iloc[[0]].to_parquet(d / "part3.parquet", index=False)
            dup = rf"parts:{len(frame) + 1}:query_id: duplicate cell .*\(first seen at row 1\).* add the two counts"
            with pytest.raises(SelectionLogError, match=dup):
                count_table(d, catalog=sim.catalog, engine="dask", scheduler=client)

    def test_read_study_pandas_and_duckdb_agree(self, sim, tmp_path):
        """Two aggregated files (one per run) in one manifest; pandas (concat) and DuckDB give the same counts."""
        frame = _without_provenance(sim, queries=False)
        sim.catalog.table.to_csv(tmp_path / "catalog.csv", index=False)
        lines = ['name = "agg"\nformat = "table"\ncatalog = "catalog.csv"\n']
        for run, part in frame.groupby("run"):
            part.drop(columns=["run"]).to_csv(tmp_path / f"run{run}.csv", index=False)
            lines.append(f'[[logs]]\npath = "run{run}.csv"\nrun = {run}\n')
        (tmp_path / "study.toml").write_text("\n".join(lines), encoding="utf-8")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            a = tbs.read_study(tmp_path / "study.toml", engine="pandas")
            b = tbs.read_study(tmp_path / "study.toml", engine="duckdb")
        assert a.log.weighted and a.log.n_attempts == len(sim.data)
        pd.testing.assert_frame_equal(a.counts.table, b.counts.table)
        pd.testing.assert_frame_equal(a.counts.cells, b.counts.cells)
        _assert_same_point_estimates(_bias(a.counts), _bias(sim))


class TestQueryBootstrapWithCounts:
    def test_per_query_counts_give_the_same_bootstrap(self, sim):
        """Several queries, each with counts: the query bootstrap works unchanged (identical replicates)."""
        agg = sim.aggregate(lists=False)
        assert len(agg.data) < len(sim.data)
        kw = dict(n_resamples=200, n_null=100, rng=7)
        a, b = _bias(agg, **kw), _bias(sim, **kw)
        assert a.groups[0].interval_method == INTERVAL_QUERY and a.resample == "query"
        da, db = a.to_dict(), b.to_dict()
        da["groups"][0]["rows"].pop("table_rows")
        assert "attempts (sums of `count`)" in da.pop("warnings")[0]
        db.pop("warnings")
        assert da == db

    def test_no_query_ids_give_multinomial_intervals(self, sim):
        agg = sim.aggregate(queries=False)
        with pytest.warns(tbs.exceptions.SmallSampleWarning, match="no query bootstrap is possible"):
            res = tbs.selection_bias(agg, n_resamples=200, n_null=100, rng=7)
        g = res.groups[0]
        assert g.interval_method == INTERVAL_MULTINOMIAL == res.interval_method
        assert res.resample == "multinomial"
        assert all(c.interval_method == INTERVAL_MULTINOMIAL for c in g.clusters)
        for m in ("delta_api", "delta_pos", "delta_model"):
            r = getattr(g, m)
            assert r.ci_method == "percentile"                    # no jackknife over queries: no BCa
            assert "multinomial replicates" in r.corrected_method
            assert r.corrected_ci.low < r.corrected < r.corrected_ci.high
        out = res.to_dict()
        assert out["interval_method"] == "multinomial (attempts assumed independent)"
        assert out["groups"][0]["clusters"][0]["interval_method"] == INTERVAL_MULTINOMIAL
        # the same seed, the same intervals
        again = _bias(agg, n_resamples=200, n_null=100, rng=7)
        assert again.to_dict() == out

    def test_mixed_clusters(self, sim):
        """One cluster with per-query rows, the others pooled: each gets its own kind of replicate."""
        data = sim.aggregate(lists=False).data
        pooled = data["cluster_id"] != "1"
        data.loc[pooled, "query_id"] = "(aggregated)"
        data = data.groupby([c for c in data.columns if c not in ("count", "source_row")], dropna=False,
                            observed=True)["count"].sum().reset_index()
        log = tbs.SelectionLog.from_frame(data, sim.catalog)
        res = _bias(log, n_resamples=100, rng=1)
        g = res.groups[0]
        assert g.interval_method.startswith("mixed: query bootstrap for 1 clusters")
        assert [c.interval_method for c in g.clusters] == [INTERVAL_QUERY, INTERVAL_MULTINOMIAL, INTERVAL_MULTINOMIAL]
        assert res.resample == "mixed"
        _assert_same_point_estimates(res, _bias(sim, n_resamples=100, rng=1))

    def test_poisson_weights_for_attempts(self, sim):
        res = _bias(sim.aggregate(queries=False), n_resamples=100, rng=3, bootstrap="poisson")
        r = res.groups[0].delta_api
        assert np.isfinite(r.ci).all() and r.ci.low < r.mean_over_runs < r.ci.high


# ------------------------------------------------------------------------------------------------
class TestSchema:
    def test_logs_without_counts_unchanged(self, sim):
        """No `count` column, no `rows_*` columns: what other modules read is as before."""
        assert not sim.weighted and "count" not in sim.data.columns
        counts = sim.counts()
        assert not counts.weighted and not any(c.startswith("rows_") for c in counts.table.columns)
        assert list(counts.cells.columns)[-1] == "count"
        assert "count" not in sim.design_columns

    def test_write_and_read_back(self, sim, tmp_path):
        agg = sim.aggregate(queries=False)
        for suffix in (".csv", ".jsonl", ".parquet"):
            back = read_table(agg.write(tmp_path / f"a{suffix}"), catalog=sim.catalog)
            pd.testing.assert_frame_equal(back.data, agg.data)
            assert back.data.columns[-1] == "count" and back.design_columns == ["model", "run", "condition"]

    def test_concat_with_an_unweighted_log(self, sim):
        part1 = sim.data[sim.data["run"] == 1].reset_index(drop=True)
        part2 = tbs.SelectionLog.from_frame(sim.data[sim.data["run"] == 2].reset_index(drop=True), sim.catalog)
        both = tbs.SelectionLog.concat([tbs.SelectionLog.from_frame(part1, sim.catalog).aggregate(), part2])
        assert both.weighted and both.n_attempts == len(sim.data)
        _assert_same_point_estimates(_bias(both), _bias(sim))

    def test_zero_counts_are_rows_but_no_attempts(self, sim, tmp_path):
        frame = _without_provenance(sim, queries=False)
        extra = frame.iloc[[0]].assign(status="parse_error", chosen_tool=pd.NA, chosen_position=pd.NA,
                                       raw_choice="garbled", count=0)
        path = _write(pd.concat([frame, extra], ignore_index=True), tmp_path / "zero.csv")
        for engine in ("pandas", "duckdb"):
            c = count_table(path, catalog=sim.catalog, engine=engine)
            assert c.status_totals()["parse_error"] == 0 and c.row_totals()["parse_error"] == 1
            assert (c.cells["count"] > 0).all()

    def test_summary_of_an_aggregated_log(self, sim):
        agg = sim.aggregate(queries=False)
        s = agg.summary(by=["model"])
        assert int(s["total"].iloc[0]) == len(sim.data) and int(s["table_rows"].iloc[0]) == len(agg.data)
        assert "attempts (count column)" in repr(agg)


# ------------------------------------------------------------------------------------------------
class TestBadCounts:
    @pytest.fixture()
    def base(self, sim):
        return _without_provenance(sim, queries=False).iloc[:6].reset_index(drop=True)

    @pytest.mark.parametrize("engine", ["pandas", "duckdb"])
    def test_csv_bad_values(self, base, sim, tmp_path, engine):
        frame = base.astype({"count": object})
        frame.loc[1, "count"] = "-3"
        frame.loc[2, "count"] = "1.5"
        frame.loc[3, "count"] = None
        frame.loc[4, "count"] = "many"
        frame.loc[5, "count"] = "inf"
        path = _write(frame, tmp_path / "bad.csv")
        with pytest.raises(SelectionLogError) as err:
            count_table(path, catalog=sim.catalog, engine=engine)
        msg = str(err.value)
        for row, value in ((2, "'-3'"), (3, "'1.5'"), (5, "'many'"), (6, "'inf'")):
            assert (f"bad.csv:{row}:count: expected a whole number of attempts between 0 and 10^15 (the row stands "
                    f"for `count` identical attempts), got {value}") in msg
        assert "bad.csv:4:count: missing value" in msg
        assert "bad.csv:1:" not in msg

    @pytest.mark.parametrize("engine", ["pandas", "duckdb"])
    def test_jsonl_bad_values(self, base, sim, tmp_path, engine):
        lines = [json.loads(r) for r in base.to_json(orient="records", lines=True).splitlines()]
        lines[0]["count"], lines[1]["count"], lines[2]["count"] = 2.5, -1, None
        path = tmp_path / "bad.jsonl"
        path.write_text("\n".join(json.dumps(r) for r in lines) + "\n", encoding="utf-8")
        with pytest.raises(SelectionLogError) as err:
            count_table(path, catalog=sim.catalog, engine=engine)
        msg = str(err.value)
        assert "bad.jsonl:1:count: expected a whole number of attempts" in msg and "got 2.5" in msg
        assert "bad.jsonl:2:count: expected a whole number of attempts" in msg and "got -1" in msg
        assert "bad.jsonl:3:count: missing value" in msg

    @pytest.mark.parametrize("engine", ["pandas", "duckdb"])
    def test_boolean_and_nan_counts(self, base, sim, tmp_path, engine):
        path = _write(base.assign(count=[True, False, True, True, False, True]), tmp_path / "bool.parquet")
        with pytest.raises(SelectionLogError, match=r"bool.parquet:1:count: expected a whole number .* got True"):
            count_table(path, catalog=sim.catalog, engine=engine)
        path = _write(base.assign(count=[1.0, np.nan, 2.0, 3.0, 4.0, 5.0]), tmp_path / "nan.parquet")
        with pytest.raises(SelectionLogError, match=r"nan.parquet:2:count: missing value"):
            count_table(path, catalog=sim.catalog, engine=engine)

    def test_same_messages_through_both_engines(self, base, sim, tmp_path):
        frame = base.astype({"count": object})
        frame.loc[[0, 3], "count"] = ["-1", "0.25"]
        path = _write(frame, tmp_path / "bad.csv")
        msgs = []
        for engine in ("pandas", "duckdb"):
            with pytest.raises(SelectionLogError) as err:
                count_table(path, catalog=sim.catalog, engine=engine)
            msgs.append(str(err.value))
        assert msgs[0] == msgs[1]

    @pytest.mark.parametrize("engine", ["pandas", "duckdb"])
    def test_duplicate_cell_names_both_rows(self, base, sim, tmp_path, engine):
        frame = pd.concat([base, base.iloc[[2]]], ignore_index=True)
        path = _write(frame, tmp_path / "dup.csv")
        with pytest.raises(SelectionLogError) as err:
            count_table(path, catalog=sim.catalog, engine=engine)
        msg = str(err.value)
        assert "dup.csv:7:query_id: duplicate cell {" in msg and "(first seen at row 3)" in msg
        assert "'query_id': '(aggregated)'" in msg and "add the two counts" in msg

    @pytest.mark.parametrize("engine", ["pandas", "duckdb"])
    def test_query_id_still_required_without_counts(self, base, sim, tmp_path, engine):
        path = _write(base.drop(columns=["count"]), tmp_path / "noq.csv")
        with pytest.raises(SelectionLogError, match=re.escape("noq.csv:query_id: required column is missing")):
            count_table(path, catalog=sim.catalog, engine=engine)

    def test_meta_cannot_set_count(self, base, sim, tmp_path):
        path = _write(base.drop(columns=["model"]), tmp_path / "m.csv")
        with pytest.raises(SelectionLogError, match="count: is an attempt column of the schema"):
            read_table(path, catalog=sim.catalog, meta={"model": "m", "count": 3})


# ------------------------------------------------------------------------------------------------
ISSUE_COUNTS = {   # (model, pair): (edit A chosen, original chosen) - the issue's example and three more cells
    ("model-x", "pair1"): (1101, 59), ("model-x", "pair2"): (610, 550),
    ("model-y", "pair1"): (700, 460), ("model-y", "pair2"): (590, 570),
}


def _issue_example(tmp_path):
    """A catalog of description pairs, a counts CSV without query ids, and a manifest (as a team would publish)."""
    rows = []
    for pair in ("pair1", "pair2"):
        rows += [{"tool_id": f"{pair}_original", "cluster_id": pair}, {"tool_id": f"{pair}_edit_a", "cluster_id": pair}]
    pd.DataFrame(rows).to_csv(tmp_path / "pairs.csv", index=False)
    cells = []
    for (model, pair), (edit, orig) in ISSUE_COUNTS.items():
        cells += [{"model": model, "cluster_id": pair, "status": "ok", "chosen_tool": f"{pair}_edit_a", "count": edit},
                  {"model": model, "cluster_id": pair, "status": "ok", "chosen_tool": f"{pair}_original",
                   "count": orig},
                  {"model": model, "cluster_id": pair, "status": "no_call", "chosen_tool": None, "count": 3}]
    pd.DataFrame(cells).to_csv(tmp_path / "counts.csv", index=False)
    (tmp_path / "study.toml").write_text('name = "description edits (aggregated)"\nformat = "table"\n'
                                         'catalog = "pairs.csv"\n\n[[logs]]\npath = "counts.csv"\n', encoding="utf-8")
    return tmp_path / "study.toml"


class TestIssueExample:
    @pytest.mark.parametrize("engine", ["pandas", "duckdb"])
    def test_cli_bias_on_a_manifest(self, tmp_path, capsys, engine):
        manifest = _issue_example(tmp_path)
        code = main(["bias", str(manifest), "--json", "--bootstrap", "300", "--null", "200", "--seed", "1",
                     "--engine", engine])
        out = json.loads(capsys.readouterr().out)
        assert code == 0
        assert out["interval_method"] == "multinomial (attempts assumed independent)"
        assert [g["keys"]["model"] for g in out["groups"]] == ["model-x", "model-y"]
        for g in out["groups"]:
            model = g["keys"]["model"]
            tvs, nulls = [], []
            for c in g["clusters"]:
                edit, orig = ISSUE_COUNTS[(model, c["cluster"])]
                n = edit + orig
                assert c["n_used"] == n
                assert c["rates"][f"{c['cluster']}_edit_a"] == pytest.approx(edit / n, abs=1e-15)
                assert c["delta_api"]["mean_over_runs"] == pytest.approx(abs(edit / n - 0.5), rel=1e-12)
                assert c["delta_api"]["null_expected"] == pytest.approx(expected_tv_uniform(n, 2), rel=1e-12)
                assert c["interval_method"] == INTERVAL_MULTINOMIAL
                tvs.append(abs(edit / n - 0.5))
                nulls.append(expected_tv_uniform(n, 2))
            assert g["delta_api"]["mean_over_runs"] == pytest.approx(np.mean(tvs), rel=1e-12)
            assert g["delta_api"]["null_expected"] == pytest.approx(np.mean(nulls), rel=1e-12)
            assert g["delta_pos"] is None                       # positions unknown in the published table
            assert g["rows"]["total"] == sum(sum(ISSUE_COUNTS[(model, p)]) + 3 for p in ("pair1", "pair2"))
            assert g["rows"]["excluded"] == {"no_call": 6} and g["rows"]["table_rows"]["total"] == 6
            lo, hi = g["delta_api"]["corrected_ci"]
            assert 0 <= lo <= g["delta_api"]["corrected"] <= hi
        # the text output says which intervals these are
        main(["bias", str(manifest), "--bootstrap", "100", "--null", "0", "--seed", "1", "--engine", engine])
        text = capsys.readouterr().out
        assert "Intervals: multinomial (attempts assumed independent)" in text and "no per-query rows" in text

    def test_issue_numbers_by_hand(self, tmp_path):
        """delta_API of 'edit A 1,101 vs original 59' is |1101/1160 - 1/2| = 0.44914 (K = 2)."""
        manifest = _issue_example(tmp_path)
        res = _bias(manifest, by=["model"])
        c = res.groups[0].clusters[0]
        assert (c.cluster, c.n_used) == ("pair1", 1160)
        assert c.delta_api.mean_over_runs == pytest.approx(0.449137931034, abs=1e-12)
        catalog = read_catalog_table(tmp_path / "pairs.csv")
        assert catalog.tools("pair1") == ["pair1_original", "pair1_edit_a"]
