"""Issue 27: a manifest `path` that is a folder, a glob or a list of files is read as one log by every engine;
attempt ids are not design columns; a bad dataset gives one clear error, the same on every engine."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import toolbias_stats as tbs
from toolbias_stats.exceptions import SelectionLogError

DATA = Path(__file__).resolve().parents[2] / "data" / "biasbusters"
ENGINES = ("pandas", "duckdb", "dask")


@pytest.fixture(scope="module")
def plain(bb_study):
    """The vendored log as a plain table (no source columns) with a unique attempt id per row."""
    data = bb_study.log.data
    models = sorted(data["model"].unique())[:2]
    data = data[data["model"].isin(models) & (data["run"] == 1) & data["cluster_id"].isin(["1", "2", "3"])]
    data = data[["model", "run", "cluster_id", "query_id", "rotation", "chosen_tool", "status"]]
    data = data.assign(model=data["model"].astype(str), cluster_id=data["cluster_id"].astype(str),
                       query_id=data["query_id"].astype(str), chosen_tool=data["chosen_tool"].astype(object),
                       status=data["status"].astype(str)).reset_index(drop=True)
    return data.assign(attempt=np.arange(1, len(data) + 1), request_id=[f"req-{i}" for i in range(len(data))])


def _manifest(d: Path, path_value: str, extra: str = "") -> Path:
    m = d / "study.toml"
    m.write_text(f'format = "table"\ncatalog = "{DATA / "clusters.json"}"\n{extra}[[logs]]\npath = {path_value}\n',
                 encoding="utf-8")
    return m


def _parts(frame: pd.DataFrame, d: Path, n: int = 4, suffix: str = ".parquet") -> Path:
    """``frame`` in ``n`` files, queries spread over files (every file holds some rows of many queries)."""
    d.mkdir(parents=True, exist_ok=True)
    order = np.random.default_rng(0).permutation(len(frame))
    for i, chunk in enumerate(np.array_split(order, n)):
        part = frame.iloc[np.sort(chunk)]
        if suffix == ".parquet":
            part.to_parquet(d / f"part-{i}{suffix}")
        elif suffix == ".csv":
            part.to_csv(d / f"part-{i}{suffix}", index=False)
        else:
            part.to_json(d / f"part-{i}{suffix}", orient="records", lines=True)
    return d


def _bias(study):
    return tbs.selection_bias(study, by="model", n_resamples=0, n_null=0).to_dict()


def _table(study):
    t = study.counts.table
    for c in t.columns:
        if isinstance(t[c].dtype, pd.CategoricalDtype):
            t[c] = t[c].astype("string")
    keys = [c for c in ("model", "run", "condition", "cluster_id", "query_id") if c in t.columns]
    return t.sort_values(keys).reset_index(drop=True)


@pytest.fixture(scope="module")
def one_file(plain, tmp_path_factory):
    d = tmp_path_factory.mktemp("one")
    plain.to_parquet(d / "all.parquet")
    return tbs.read_study(_manifest(d, '"all.parquet"'), engine="duckdb")


class TestDatasetEqualsOneFile:
    @pytest.mark.parametrize("form", ["folder", "glob", "list"])
    @pytest.mark.parametrize("engine", ENGINES)
    def test_parquet_dataset(self, plain, one_file, tmp_path, engine, form):
        _parts(plain, tmp_path / "parts")
        value = {"folder": '"parts"', "glob": '"parts/*.parquet"',
                 "list": "[" + ", ".join(f'"parts/part-{i}.parquet"' for i in range(4)) + "]"}[form]
        study = tbs.read_study(_manifest(tmp_path, value), engine=engine)
        assert _bias(study) == _bias(one_file)
        pd.testing.assert_frame_equal(_table(study), _table(one_file), check_dtype=False)
        assert "attempt" not in study.counts.design_columns

    @pytest.mark.parametrize("suffix", [".csv", ".jsonl"])
    @pytest.mark.parametrize("engine", ["pandas", "duckdb"])
    def test_text_datasets(self, plain, one_file, tmp_path, engine, suffix):
        _parts(plain, tmp_path / "parts", suffix=suffix)
        study = tbs.read_study(_manifest(tmp_path, '"parts"'), engine=engine)
        assert _bias(study) == _bias(one_file)

    def test_rows_keep_their_file_and_row(self, plain, tmp_path):
        _parts(plain, tmp_path / "parts")
        log = tbs.read_study(_manifest(tmp_path, '"parts"'), engine="pandas").log
        first = log.data[log.data["source_file"].str.endswith("part-1.parquet")]
        assert first["source_row"].tolist() == list(range(1, len(first) + 1))
        assert log.data["source_file"].nunique() == 4 and len(log.data) == len(plain)


@pytest.mark.parametrize("engine", ENGINES)
def test_count_table_reads_a_folder(plain, one_file, tmp_path, engine):
    from toolbias_stats.io import count_table

    _parts(plain, tmp_path / "parts")
    counts = count_table(tmp_path / "parts", catalog=one_file.catalog, engine=engine)
    assert counts.n_rows == len(plain)
    assert int(counts.table["n_ok"].sum()) == int(one_file.counts.table["n_ok"].sum())


class TestHive:
    @pytest.mark.parametrize("engine", ENGINES)
    def test_partition_folders_become_design_columns(self, plain, one_file, tmp_path, engine):
        for model, part in plain.groupby("model"):
            d = tmp_path / "parts" / f"model={model}"
            d.mkdir(parents=True)
            part.drop(columns="model").to_parquet(d / "part-0.parquet")
        study = tbs.read_study(_manifest(tmp_path, '"parts"', "hive = true\n"), engine=engine)
        assert _bias(study) == _bias(one_file)


class TestAttemptIds:
    @pytest.mark.parametrize("engine", ENGINES)
    def test_attempt_columns_are_not_design_columns(self, plain, tmp_path, engine):
        ids = {"attempt", "request_id", "epoch", "custom_id"}
        plain.assign(epoch=1 + np.arange(len(plain)) % 3,
                     custom_id=[f"c{i}" for i in range(len(plain))]).to_parquet(tmp_path / "a.parquet")
        counts = tbs.read_study(_manifest(tmp_path, '"a.parquet"'), engine=engine).counts
        assert not ids & set(counts.design_columns)
        assert len(counts.table) == plain.groupby(["model", "run", "cluster_id", "query_id"]).ngroups
        # the counts equal those of the same log without the id columns
        plain.drop(columns=["attempt", "request_id"]).to_parquet(tmp_path / "b.parquet")
        bare = tbs.read_study(_manifest(tmp_path, '"b.parquet"'), engine=engine).counts
        pd.testing.assert_frame_equal(counts.table, bare.table)

    @pytest.mark.parametrize("engine", ["pandas", "duckdb"])
    def test_by_may_still_name_epoch(self, plain, tmp_path, engine):
        plain.assign(epoch=1 + np.arange(len(plain)) % 2).to_parquet(tmp_path / "e.parquet")
        counts = tbs.read_study(_manifest(tmp_path, '"e.parquet"', 'design = ["epoch"]\n'), engine=engine).counts
        assert "epoch" in counts.design_columns

    @pytest.mark.parametrize("engine", ["pandas", "duckdb"])
    def test_manifest_attempt_id_names_a_column(self, plain, tmp_path, engine):
        frame = plain.copy()
        frame.loc[3, "request_id"] = frame.loc[1, "request_id"]
        frame.to_parquet(tmp_path / "r.parquet")
        with pytest.raises(SelectionLogError) as err:
            tbs.read_study(_manifest(tmp_path, '"r.parquet"', 'attempt_id = "request_id"\n'), engine=engine)
        assert "r.parquet:4:attempt_id: duplicate attempt id" in str(err.value)
        assert "(first seen at row 2)" in str(err.value)


class TestBadDatasets:
    def _same_error_everywhere(self, manifest) -> str:
        msgs = set()
        for engine in ENGINES:
            with pytest.raises(SelectionLogError) as err:
                tbs.read_study(manifest, engine=engine)
            msgs.add(str(err.value))
        assert len(msgs) == 1, msgs
        return msgs.pop()

    def test_mixed_formats(self, plain, tmp_path):
        d = _parts(plain, tmp_path / "parts", n=2)
        plain.iloc[:5].to_csv(d / "extra.csv", index=False)
        msg = self._same_error_everywhere(_manifest(tmp_path, '"parts"'))
        assert msg.count("\n") == 0 and msg.startswith(f"{tmp_path / 'parts'}: ")
        assert "the folder mixes file formats: 1 csv file (e.g. extra.csv); 2 parquet files" in msg

    def test_empty_folder(self, tmp_path):
        (tmp_path / "parts").mkdir()
        (tmp_path / "parts" / "_SUCCESS").write_text("")
        msg = self._same_error_everywhere(_manifest(tmp_path, '"parts"'))
        assert msg.count("\n") == 0 and "parts: the folder holds no data files" in msg

    def test_glob_matching_nothing(self, tmp_path):
        msg = self._same_error_everywhere(_manifest(tmp_path, '"parts/*.parquet"'))
        assert msg.count("\n") == 0 and "parts/*.parquet: no file matches this glob" in msg

    def test_error_names_the_file_inside_the_dataset(self, plain, tmp_path):
        d = _parts(plain, tmp_path / "parts", n=2)
        bad = pd.read_parquet(d / "part-1.parquet")
        bad.loc[bad.index[2], "rotation"] = 99
        bad.to_parquet(d / "part-1.parquet")
        msgs = set()
        for engine in ENGINES:
            with pytest.raises(SelectionLogError) as err:
                tbs.read_study(_manifest(tmp_path, '"parts"'), engine=engine)
            msgs.add(str(err.value))
        assert len(msgs) == 1, msgs
        assert f"{d / 'part-1.parquet'}:3:rotation:" in msgs.pop()
