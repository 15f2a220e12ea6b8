"""SelectionCounts and the engines that produce them (issue 7: scale through a counts layer).

Three kinds of evidence: (1) the counts are sufficient, i.e. every statistic computed from them equals the
same statistic computed directly from the rows by an independent row-level implementation; (2) the engines
(pandas, DuckDB, Dask) give identical counts, cells and results on the vendored study and on simulated logs;
(3) bad input gives the same messages through every engine (tests/io/test_table.py runs the reader's
bad-input cases against pandas and DuckDB; the cases here are the ones the counts layer added).
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import toolbias_stats as tbs
from toolbias_stats._resampling import query_weights
from toolbias_stats.exceptions import ManifestError, SelectionLogError
from toolbias_stats.io import count_table
from toolbias_stats.io._counts import finalize_table
from toolbias_stats.simulate import simulate_selection_log

DATA = Path(__file__).resolve().parents[2] / "data" / "biasbusters"


def _strict(obj):
    """JSON round trip that refuses NaN / Infinity (RFC 8259)."""
    def refuse(c):
        raise ValueError(f"non-standard JSON constant {c}")
    return json.loads(json.dumps(obj, allow_nan=False), parse_constant=refuse)


def _assert_same_results(a, b, rtol=1e-12):
    """Two BiasResult dicts agree: equal structure, numbers within rtol (the engines must agree to 1e-12)."""
    def walk(x, y, path):
        if isinstance(x, dict):
            assert x.keys() == y.keys(), path
            for k in x:
                walk(x[k], y[k], f"{path}.{k}")
        elif isinstance(x, list):
            assert len(x) == len(y), path
            for i, (u, v) in enumerate(zip(x, y)):
                walk(u, v, f"{path}[{i}]")
        elif isinstance(x, float) and isinstance(y, float):
            assert np.isclose(x, y, rtol=rtol, atol=0, equal_nan=True), (path, x, y)
        else:
            assert x == y, (path, x, y)
    walk(a, b, "")


@pytest.fixture(scope="module")
def bb_tables(bb_study, tmp_path_factory):
    """The vendored study written as table files (Parquet, CSV, JSONL in turn) with a table manifest."""
    d = tmp_path_factory.mktemp("bb_tables")
    log = bb_study.log
    lines = [(f'name = "bb as tables"\nformat = "table"\ncatalog = "{DATA / "clusters.json"}"\n'
              f'api_meta = "{DATA / "api_meta.json"}"\n')]
    for i, (_, part) in enumerate(log.data.groupby("source_file", sort=False)):
        path = d / f"part{i}{('.csv', '.jsonl', '.parquet')[min(i, 2)]}"        # one CSV, one JSONL, Parquet
        tbs.SelectionLog(part.reset_index(drop=True), log.catalog).write(path)
        lines.append(f'[[logs]]\npath = "{path}"\n')
    (d / "study.toml").write_text("\n".join(lines), encoding="utf-8")
    return d / "study.toml"


@pytest.fixture(scope="module")
def sim():
    """Two runs, 3 clusters, 40 queries, 5 rotations, 10% no_call."""
    return simulate_selection_log(n_clusters=3, n_queries=40, n_runs=2, tool_probs=[5, 3, 1, 1, 1],
                                  position_probs=[3, 2, 1, 1, 1], p_no_call=0.1, rng=11)


# ------------------------------------------------------------------------------------------------
class TestSufficiency:
    """Metrics from counts equal an independent computation from the rows."""

    def test_point_estimates_from_rows(self, bb_study):
        log = bb_study.log
        res = tbs.selection_bias(log.counts(level="cluster"), by="model", n_resamples=0, n_null=0)
        ok = log.data[log.data["status"] == "ok"]
        for g in res.groups:
            rows = ok[ok["model"] == g.keys["model"]]
            per_run = []
            for _, rr in rows.groupby("run"):
                tvs = []
                for c, cc in rr.groupby("cluster_id"):
                    tools = log.catalog.tools(c)
                    p = cc["chosen_tool"].value_counts().reindex(tools, fill_value=0).to_numpy() / len(cc)
                    tvs.append(0.5 * np.abs(p - 1 / len(tools)).sum())
                per_run.append(np.mean(tvs))
            assert g.delta_api.mean_over_runs == pytest.approx(np.mean(per_run), abs=1e-12)
            assert g.delta_api.sd_over_runs == pytest.approx(np.std(per_run), abs=1e-12)
            assert g.rows["total"] == int((log.data["model"] == g.keys["model"]).sum())

    def test_bootstrap_replicates_from_rows(self, sim):
        """Each replicate equals the TV of the rows of the resampled queries (a row-level re-implementation)."""
        log = sim.log
        res = tbs.selection_bias(log, by=[], n_resamples=30, n_null=0, rng=5, ci_method="percentile")
        gen = np.random.default_rng(5)
        data = log.data
        ok = data[data["status"] == "ok"]
        per_cluster = []
        for c in log.catalog.clusters:
            queries = np.sort(data.loc[data["cluster_id"] == c, "query_id"].unique())
            w = query_weights(len(queries), 30, gen)                       # the same draws, same order
            weight_of = [dict(zip(queries, w[r])) for r in range(30)]
            rows = ok[ok["cluster_id"] == c]
            tools = log.catalog.tools(c)
            reps = np.empty((30, 2))
            for r in range(30):
                for s, run_rows in rows.groupby("run"):
                    wt = run_rows["query_id"].map(weight_of[r]).to_numpy()
                    cnt = pd.Series(wt).groupby(run_rows["chosen_tool"].to_numpy()).sum().reindex(tools, fill_value=0)
                    p = cnt.to_numpy() / cnt.sum()
                    reps[r, s - 1] = 0.5 * np.abs(p - 0.2).sum()
            per_cluster.append(reps)
        expected = np.mean(np.mean(np.stack(per_cluster, 1), 1), 1)          # (R,): mean over clusters, runs
        np.testing.assert_allclose(res.groups[0].delta_api.bootstrap_distribution, expected, rtol=1e-12)

    def test_counts_keep_every_row(self, bb_study):
        counts = bb_study.log.counts()
        assert counts.n_rows == len(bb_study.log)
        assert counts.status_totals() == {s: int((bb_study.log.data["status"] == s).sum()) for s in tbs.STATUSES}
        assert int(counts.cells["count"].sum()) == len(bb_study.log)
        summary = counts.summary(by=["model"]).set_index("model").sort_index()
        direct = bb_study.log.summary(by=["model"]).set_index("model").sort_index()
        cols = ["total", *tbs.STATUSES]
        np.testing.assert_array_equal(summary.index.astype(str), direct.index.astype(str))
        np.testing.assert_array_equal(summary[cols].to_numpy(np.int64), direct[cols].to_numpy(np.int64))

    def test_cluster_level_equals_query_level_point_estimates(self, sim):
        a = tbs.selection_bias(sim.log.counts(level="query"), by=[], n_resamples=0, n_null=200, rng=1)
        b = tbs.selection_bias(sim.log.counts(level="cluster"), by=[], n_resamples=0, n_null=200, rng=1)
        _assert_same_results(a.to_dict(), b.to_dict())
        c = sim.log.counts().collapse("cluster")
        pd.testing.assert_frame_equal(c.table.drop(columns="query_id"),
                                      sim.log.counts(level="cluster").table.drop(columns="query_id"))

    def test_cluster_level_refuses_bootstrap(self, sim):
        with pytest.raises(ValueError, match="needs query-level counts"):
            tbs.selection_bias(sim.log.counts(level="cluster"), n_resamples=10)

    def test_bad_level(self, sim):
        with pytest.raises(ValueError, match=r"`level` must be one of \['query', 'cluster'\]; got 'row'"):
            sim.log.counts(level="row")


class TestEngines:
    """pandas, DuckDB and Dask give identical counts and results."""

    def test_vendored_study_duckdb_equals_pandas(self, bb_tables):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            a = tbs.read_study(bb_tables, engine="duckdb")
            b = tbs.read_study(bb_tables, engine="pandas")
            assert a.engine == "duckdb" and not a.has_rows and b.has_rows
            pd.testing.assert_frame_equal(a.counts.table, b.counts.table)
            pd.testing.assert_frame_equal(a.counts.cells, b.counts.cells)
            pd.testing.assert_frame_equal(a.counts.query_orderings, b.counts.query_orderings)
            ra = tbs.selection_bias(a, by="model", n_resamples=200, n_null=200, rng=3).to_dict()
            rb = tbs.selection_bias(b, by="model", n_resamples=200, n_null=200, rng=3).to_dict()
        _assert_same_results(ra, rb)
        _strict(ra)

    def test_auto_engine_for_tables(self, bb_tables, bb_study):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            assert tbs.read_study(bb_tables, level="cluster", cells=False).engine == "duckdb"
        assert bb_study.engine == "pandas"

    def test_table1_unchanged_through_duckdb(self, bb_tables):
        from reference.table1 import TABLE1

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            study = tbs.read_study(bb_tables, engine="duckdb", level="cluster", cells=False)
            res = tbs.selection_bias(study, by="model", n_resamples=0, n_null=0)
        assert study.counts.cells is None
        frame = res.to_frame().set_index(["model", "metric"])
        checked = 0
        for model, values in TABLE1.items():
            for metric, (mean, sd) in zip(("delta_api", "delta_pos", "delta_model"), values):
                assert frame.loc[(model, metric), "mean_over_runs"] == pytest.approx(mean, abs=5e-4)
                assert frame.loc[(model, metric), "sd_over_runs"] == pytest.approx(sd, abs=5e-4)
                checked += 1
        assert checked == 21

    @pytest.mark.parametrize("variant", ["rotation", "ordering", "extras"])
    def test_simulated_logs(self, sim, tmp_path, variant):
        data = sim.log.data.copy()
        if variant == "ordering":      # the list shown instead of a rotation id, positions derived from it
            data["rotation"] = pd.NA
            data["chosen_position"] = pd.NA
        if variant == "extras":        # a numeric design column and numeric ids in the file
            data["temperature"] = np.where(data["run"] == 1, 0.0, 0.7)
        frame = data.drop(columns=["source_file", "source_row"])
        path = tmp_path / "log.parquet"
        if variant == "extras":
            frame = frame.assign(query_id=frame["query_id"].astype(int), cluster_id=frame["cluster_id"].astype(int))
        frame.to_parquet(path)
        a = count_table(path, catalog=sim.log.catalog, engine="duckdb")
        b = count_table(path, catalog=sim.log.catalog, engine="pandas")
        pd.testing.assert_frame_equal(a.table, b.table)
        pd.testing.assert_frame_equal(a.cells, b.cells)
        # issue 35: valid choices per query and list shown (the paired null of selection_shift) agree too
        pd.testing.assert_frame_equal(a.query_orderings, b.query_orderings)
        assert int(b.query_orderings["count"].sum()) == b.status_totals()["ok"]
        assert b.query_orderings["ordering"].notna().all()
        ra = tbs.selection_bias(a, by=[], n_resamples=100, n_null=100, rng=2).to_dict()
        rb = tbs.selection_bias(b, by=[], n_resamples=100, n_null=100, rng=2).to_dict()
        _assert_same_results(ra, rb)
        # and both equal the counts of the original log
        orig = tbs.selection_bias(sim.log, by=[], n_resamples=100, n_null=100, rng=2).to_dict()
        _assert_same_results(ra, orig)

    def test_dask_equals_duckdb(self, sim, tmp_path):
        """A partitioned Parquet dataset on a LocalCluster of 2 workers (queries split across partitions)."""
        data = sim.log.data.drop(columns=["source_file", "source_row"])
        out = tmp_path / "parts"
        out.mkdir()
        order = np.random.default_rng(0).permutation(len(data))      # every query spread over partitions
        for i, chunk in enumerate(np.array_split(order, 4)):
            data.iloc[np.sort(chunk)].to_parquet(out / f"part-{i}.parquet")
        a = count_table(out, catalog=sim.log.catalog, engine="dask")
        b = count_table(sim_log_file(data, tmp_path), catalog=sim.log.catalog, engine="duckdb")
        pd.testing.assert_frame_equal(a.table, b.table)
        pd.testing.assert_frame_equal(a.cells, b.cells)
        assert a.engine == "dask" and a.diagnostics[str(out)]["partitions"] == 4

    def test_dask_duplicate_across_partitions(self, sim, tmp_path):
        data = sim.log.data.drop(columns=["source_file", "source_row"])
        out = tmp_path / "dup"
        out.mkdir()
        data.iloc[:10].to_parquet(out / "part-0.parquet")
        data.iloc[5:12].to_parquet(out / "part-1.parquet")           # rows 6..10 again
        with pytest.raises(SelectionLogError) as err:
            count_table(out, catalog=sim.log.catalog, engine="dask", duplicates="error")
        msg = str(err.value)
        assert ":11:query_id: duplicate attempt" in msg and "(first seen at row 6)" in msg
        assert "np.int64" not in msg


def sim_log_file(data, tmp_path):
    path = tmp_path / "whole.parquet"
    data.to_parquet(path)
    return path


class TestStudyEngines:
    def test_engine_refuses_other_formats(self):
        with pytest.raises(ManifestError, match=r"logs\[1\]:format: engine 'duckdb' reads format 'table' files"):
            tbs.read_study(DATA / "study.toml", engine="duckdb")

    def test_bad_engine(self):
        with pytest.raises(ValueError, match=r"`engine` must be one of \['auto', 'pandas', 'duckdb', 'dask'\]"):
            tbs.read_study(DATA / "study.toml", engine="spark")

    def test_counts_only_study_reads_rows_on_demand(self, bb_tables):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            study = tbs.read_study(bb_tables, engine="duckdb", level="cluster", cells=False)
            assert not study.has_rows
            assert len(study.log) == study.counts.n_rows          # the pandas readers, on first use
        assert study.has_rows


class TestBadInputCountsLayer:
    """Defects found while building the counts layer; each a row-level error through both engines."""

    @pytest.mark.parametrize("engine", ["pandas", "duckdb"])
    def test_tool_of_another_cluster(self, bb_catalog, tmp_path, engine):
        other = bb_catalog.tools("2")[0]
        path = tmp_path / "bad.csv"
        path.write_text(f"model,cluster_id,query_id,rotation,chosen_tool,status\nm,1,1,1,{bb_catalog.tools('1')[0]},ok\n"
                        f"m,1,2,1,{other},ok\n", encoding="utf-8")
        with pytest.raises(SelectionLogError) as err:
            count_table(path, catalog=bb_catalog, engine=engine)
        assert f"bad.csv:2:chosen_tool: tool '{other}' is not in cluster '1'" in str(err.value)

    @pytest.mark.parametrize("engine", ["pandas", "duckdb"])
    def test_duplicate_message_has_plain_values(self, bb_catalog, tmp_path, engine):
        t = bb_catalog.tools("1")[0]
        path = tmp_path / "dup.parquet"
        pd.DataFrame({"model": "m", "run": [1, 1], "cluster_id": "1", "query_id": "7", "rotation": [2, 2],
                      "chosen_tool": t, "status": "ok"}).to_parquet(path)
        with pytest.raises(SelectionLogError) as err:
            count_table(path, catalog=bb_catalog, engine=engine, duplicates="error")
        msg = str(err.value)
        assert ("dup.parquet:2:query_id: duplicate attempt {'model': 'm', 'run': 1, 'condition': 'base', "
                "'cluster_id': '1', 'query_id': '7', 'rotation': 2} (first seen at row 1)") in msg

    def test_many_attempts_per_query_fall_back_to_plain_counts(self, bb_catalog, tmp_path):
        """More attempts of one query than the packed counters hold (2^12): still exact."""
        tools = bb_catalog.tools("1")
        n = 5000
        frame = pd.DataFrame({"model": "m", "run": np.arange(1, n + 1), "cluster_id": "1", "query_id": "q",
                              "rotation": 1, "chosen_tool": [tools[i % 2] for i in range(n)], "status": "ok"})
        path = tmp_path / "many.parquet"
        frame.to_parquet(path)
        a = count_table(path, catalog=bb_catalog, engine="duckdb", meta=None)
        b = count_table(path, catalog=bb_catalog, engine="pandas")
        pd.testing.assert_frame_equal(a.table, b.table)


class TestFinalizeTable:
    def test_numeric_ids_sort_as_text(self):
        tab = pd.DataFrame({"model": ["m"] * 3, "run": [1, 1, 1], "condition": ["base"] * 3,
                            "cluster_id": [1, 1, 1], "query_id": [10, 9, 2.0], "n_candidates": [5, 5, 5],
                            **{f"n_{s}": [0, 0, 0] for s in tbs.STATUSES},
                            **{f"tool_{i}": [0, 0, 0] for i in range(1, 3)},
                            **{f"pos_{i}": [0, 0, 0] for i in range(1, 3)}})
        out = finalize_table(tab, ("model", "run", "condition"), 2)
        assert list(out["query_id"].astype(str)) == ["10", "2", "9"]      # code-point order, '.0' dropped
        assert list(out["cluster_id"].astype(str)) == ["1", "1", "1"]


class TestErrorTotals:
    def test_many_bad_rows_same_count_and_first_lines(self, bb_catalog, tmp_path):
        """More bad rows than DuckDB lists per check: the count and the first lines equal the pandas path's."""
        n = 2500
        path = tmp_path / "bad.parquet"
        pd.DataFrame({"model": "m", "cluster_id": "1", "query_id": [str(i) for i in range(n)],
                      "status": "timeout"}).to_parquet(path)
        errors = {}
        for engine in ("pandas", "duckdb"):
            with pytest.raises(SelectionLogError) as err:
                count_table(path, catalog=bb_catalog, engine=engine)
            errors[engine] = err.value
        assert errors["duckdb"].n_problems == errors["pandas"].n_problems == n
        assert str(errors["duckdb"]) == str(errors["pandas"])


class TestLazyStudy:
    def test_logs_read_on_first_use(self, bb_catalog, tmp_path):
        bad = tmp_path / "bad.csv"
        bad.write_text("model,cluster_id,query_id,status\nm,1,1,timeout\n", encoding="utf-8")
        (tmp_path / "study.toml").write_text(f'format = "table"\ncatalog = "{DATA / "clusters.json"}"\n'
                                             f'[[logs]]\npath = "bad.csv"\n', encoding="utf-8")
        for engine in ("pandas", "duckdb"):
            study = tbs.read_study(tmp_path / "study.toml", engine=engine, lazy=True)   # catalog only
            assert len(study.catalog) == 50 and not study.has_rows
            with pytest.raises(SelectionLogError, match=r"bad\.csv:1:status: expected one of"):
                study.counts


class TestShuffledOrderings:
    """Issue 14: a log of shuffled lists without rotation ids was rejected as 'duplicate attempts'."""

    def _frame(self, catalog):
        tools = catalog.tools("1")
        rng = np.random.default_rng(0)
        rows = []
        import itertools

        perms = list(itertools.permutations(tools))
        for q in range(3):
            for i in rng.choice(len(perms), size=4, replace=False):   # four repeats, four different shuffles
                order = list(perms[i])
                rows.append({"model": "m", "cluster_id": "1", "query_id": str(q), "ordering": "|".join(order),
                             "chosen_tool": order[0], "status": "ok"})
        return pd.DataFrame(rows)

    @pytest.mark.parametrize("engine", ["pandas", "duckdb", "dask"])
    def test_shuffled_orderings_are_distinct_attempts(self, bb_catalog, tmp_path, engine):
        frame = self._frame(bb_catalog)
        frame.to_parquet(tmp_path / "shuffled.parquet")
        counts = count_table(tmp_path / "shuffled.parquet", catalog=bb_catalog, engine=engine)
        assert counts.n_rows == 12 and int(counts.table["pos_1"].sum()) == 12   # always the first listed

    @pytest.mark.parametrize("engine", ["pandas", "duckdb"])
    def test_true_duplicates_still_error_and_name_both_rows(self, bb_catalog, tmp_path, engine):
        frame = self._frame(bb_catalog)
        frame = pd.concat([frame, frame.iloc[[5]]], ignore_index=True)            # row 13 repeats row 6
        frame.to_parquet(tmp_path / "dup.parquet")
        with pytest.raises(SelectionLogError) as err:
            count_table(tmp_path / "dup.parquet", catalog=bb_catalog, engine=engine, duplicates="error")
        msg = str(err.value)
        assert "dup.parquet:13:query_id: duplicate attempt" in msg and "(first seen at row 6)" in msg
        assert "'ordering': '" in msg and "'rotation': None" in msg

    @pytest.mark.parametrize("engine", ["pandas", "duckdb"])
    def test_epoch_column_separates_repeats(self, bb_catalog, tmp_path, engine):
        frame = self._frame(bb_catalog)
        frame = pd.concat([frame.assign(epoch=1), frame.assign(epoch=2)], ignore_index=True)
        frame.to_parquet(tmp_path / "epochs.parquet")
        counts = count_table(tmp_path / "epochs.parquet", catalog=bb_catalog, engine=engine, design=["epoch"])
        assert counts.n_rows == 24 and "epoch" in counts.design_columns

    def test_duplicate_across_files_names_the_other_file(self, bb_catalog, tmp_path):
        frame = self._frame(bb_catalog)
        frame.iloc[:2].to_parquet(tmp_path / "a.parquet")
        frame.iloc[1:3].to_parquet(tmp_path / "b.parquet")
        (tmp_path / "study.toml").write_text(f'format = "table"\ncatalog = "{DATA / "clusters.json"}"\n'
                                             'duplicates = "error"\n'
                                             '[[logs]]\npath = "a.parquet"\n[[logs]]\npath = "b.parquet"\n')
        for engine in ("pandas", "duckdb"):
            with pytest.raises(SelectionLogError) as err:
                tbs.read_study(tmp_path / "study.toml", engine=engine)
            msg = str(err.value)
            assert "b.parquet:1:query_id: duplicate attempt" in msg, engine
            assert f"(first seen at {tmp_path / 'a.parquet'}:2)" in msg, (engine, msg)
