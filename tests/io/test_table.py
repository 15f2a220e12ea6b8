"""Tests for toolbias_stats.io.readers.table (read_table, read_catalog_table)."""

from __future__ import annotations

import functools
import json
import re
from pathlib import Path

import pandas as pd
import pytest

from toolbias_stats.exceptions import SelectionLogError
from toolbias_stats.io import count_table
from toolbias_stats.io._catalog import ToolCatalog
from toolbias_stats.io._selection_log import SelectionLog
from toolbias_stats.io.readers.biasbusters import read_biasbusters
from toolbias_stats.io.readers.table import read_catalog_table, read_table

DATA = Path(__file__).resolve().parents[2] / "data" / "biasbusters"
CLAUDE = DATA / "selection_logs" / "api_selection_stats_claude.json"
META = {"model": "Claude 3.5 Sonnet", "run": 2, "condition": "base", "temperature": 0.5, "top_p": 1.0,
        "checkpoint": "base", "chat_template": True, "size_b": 175}


@pytest.fixture(scope="module")
def catalog(bb_catalog):
    return bb_catalog


@pytest.fixture(scope="module")
def bb_log(catalog):
    return read_biasbusters(CLAUDE, catalog=catalog, meta=META)


@pytest.fixture(scope="module")
def mixed_log(catalog):
    """A small log with nulls: unknown rotation/ordering, non-ok rows, numeric-looking string ids."""
    t8 = catalog.tools("8")
    frame = pd.DataFrame({
        "model": "m", "run": 1, "condition": "base", "checkpoint": "8", "temperature": 1.0,
        "cluster_id": ["8", "8", "8", "1"],
        "query_id": ["7", "007", "x", "7"],
        "rotation": [None, 2, None, None],
        "ordering": [None, None, "|".join(reversed(t8)), None],
        "chosen_tool": [t8[0], t8[1], t8[0], None],
        "status": ["ok", "ok", "ok", "unknown_tool"],
        "raw_choice": ["Action: x", None, "a,b \"quoted\"\nnewline", "weird_tool"],
        "source_file": "somewhere/else.txt",
        "source_row": [3, 0, 5, 6],
    })
    return SelectionLog.from_frame(frame, catalog)


@pytest.fixture(params=["pandas", "duckdb"])
def read(request):
    """Read one table file with either engine: bad input must give the same messages through both."""
    if request.param == "pandas":
        return read_table
    return functools.partial(count_table, engine="duckdb")


def _write_csv(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def _write_jsonl(path: Path, records) -> Path:
    path.write_text("\n".join(r if isinstance(r, str) else json.dumps(r) for r in records) + "\n", encoding="utf-8")
    return path


def _ok_rows(catalog, n=2):
    tools = catalog.tools("1")
    return [{"model": "m", "cluster_id": "1", "query_id": str(q), "rotation": 1, "chosen_tool": tools[q % 5],
             "status": "ok"} for q in range(1, n + 1)]


class TestReadTableRoundTrip:
    @pytest.mark.parametrize("suffix", [".csv", ".jsonl", ".ndjson", ".parquet"])
    def test_biasbusters_log_round_trips(self, bb_log, catalog, tmp_path, suffix):
        path = bb_log.write(tmp_path / f"log{suffix}")
        back = read_table(path, catalog=bb_log.catalog)
        pd.testing.assert_frame_equal(back.data, bb_log.data)
        assert back.diagnostics[str(path)]["provenance"].startswith("file columns")
        assert back.diagnostics[str(path)]["rows"] == 5000

    @pytest.mark.parametrize("suffix", [".jsonl", ".parquet"])
    def test_nulls_and_string_ids_round_trip(self, mixed_log, tmp_path, suffix):
        path = mixed_log.write(tmp_path / f"log{suffix}")
        back = read_table(path, catalog=mixed_log.catalog)
        pd.testing.assert_frame_equal(back.data, mixed_log.data)
        assert back.data["checkpoint"].tolist() == ["8"] * 4  # string extra that looks like a number
        assert back.data["query_id"].tolist() == ["7", "007", "x", "7"]

    def test_csv_nulls_round_trip_and_extras_inferred(self, mixed_log, tmp_path):
        path = mixed_log.write(tmp_path / "log.csv")
        back = read_table(path, catalog=mixed_log.catalog)
        # CSV has no types: the documented inference turns the extra "8" into an integer ...
        assert back.data["checkpoint"].dtype == "int64"
        # ... and everything else is identical, nulls, Int64 and string ids included.
        expected = mixed_log.data.drop(columns="checkpoint")
        pd.testing.assert_frame_equal(back.data.drop(columns="checkpoint"), expected)
        assert back.data["chosen_position"].isna().tolist() == [True, False, False, True]
        assert back.data["query_id"].tolist() == ["7", "007", "x", "7"]

    def test_files_without_provenance_point_to_themselves(self, catalog, tmp_path):
        path = _write_csv(tmp_path / "plain.csv", "model,cluster_id,query_id,rotation,chosen_tool,status\n"
                          f"m,1,1,1,{catalog.tools('1')[0]},ok\nm,1,1,2,,no_call\n")
        log = read_table(path, catalog=catalog)
        assert log.data["source_file"].tolist() == [str(path)] * 2
        assert log.data["source_row"].tolist() == [1, 2]
        assert log.data["chosen_position"].tolist()[0] == 1
        assert log.data["run"].tolist() == [1, 1] and log.data["condition"].tolist() == ["base"] * 2
        assert log.diagnostics[str(path)]["status"] == {"ok": 1, "no_call": 1}

    def test_ordering_instead_of_rotation(self, catalog, tmp_path):
        tools = catalog.tools("2")
        shown = tools[::-1]
        path = _write_jsonl(tmp_path / "o.jsonl", [{"model": "m", "cluster_id": 2, "query_id": 5,
                                                    "ordering": "|".join(shown), "chosen_tool": tools[0],
                                                    "status": "ok"}])
        log = read_table(path, catalog=catalog)
        row = log.data.iloc[0]
        assert row["chosen_position"] == 5 and row["cluster_id"] == "2" and row["query_id"] == "5"
        assert pd.isna(row["rotation"])


class TestReadTableColumnsAndMeta:
    def test_column_mapping(self, catalog, tmp_path):
        t = catalog.tools("3")
        path = _write_csv(tmp_path / "theirs.csv", "llm,qid,grp,perm,pick,outcome,seed\n"
                          f"gpt,01,3,2,{t[1]},ok,42\ngpt,02,3,3,,no_call,42\n")
        log = read_table(path, catalog=catalog, columns={"llm": "model", "qid": "query_id", "grp": "cluster_id",
                                                         "perm": "rotation", "pick": "chosen_tool",
                                                         "outcome": "status"}, design=["seed"])
        d = log.data
        assert d["model"].tolist() == ["gpt", "gpt"]
        assert d["query_id"].tolist() == ["01", "02"]  # leading zeros kept: ids stay strings
        assert d["chosen_position"].tolist()[0] == 1  # tool 2 under rotation 2 is shown first
        assert d["seed"].dtype == "int64" and log.design_columns == ["model", "run", "condition", "seed"]

    def test_mapping_names_missing_column(self, read, catalog, tmp_path):
        path = _write_csv(tmp_path / "theirs.csv", "cluster_id,query_id,status\n1,1,no_call\n")
        with pytest.raises(SelectionLogError) as err:
            read(path, catalog=catalog, meta={"model": "m"}, columns={"qid": "query_id"})
        msg = str(err.value)
        assert "theirs.csv:qid:" in msg and "not in the file" in msg

    def test_mapping_creates_duplicate_column(self, read, catalog, tmp_path):
        path = _write_csv(tmp_path / "dup.csv", "cluster_id,query_id,qid,status\n1,1,2,no_call\n")
        with pytest.raises(SelectionLogError, match=r"dup\.csv:query_id: two columns"):
            read(path, catalog=catalog, meta={"model": "m"}, columns={"qid": "query_id"})

    def test_meta_fills_design_columns(self, catalog, tmp_path):
        path = _write_csv(tmp_path / "a.csv", "cluster_id,query_id,rotation,status\n1,1,1,no_call\n1,2,1,no_call\n")
        log = read_table(path, catalog=catalog, meta={"model": "m", "run": 3, "temperature": 0.7, "tag": "x"})
        assert log.design_columns == ["model", "run", "condition", "temperature", "tag"]
        assert log.data["run"].tolist() == [3, 3] and log.data["temperature"].dtype == "float64"

    def test_meta_agreeing_with_file_is_fine(self, catalog, tmp_path):
        path = _write_csv(tmp_path / "a.csv", "model,run,cluster_id,query_id,status\nm,2,1,1,no_call\n")
        log = read_table(path, catalog=catalog, meta={"model": "m", "run": 2})
        assert log.data["run"].tolist() == [2]

    def test_meta_disagreeing_with_file(self, read, catalog, tmp_path):
        path = _write_csv(tmp_path / "a.csv",
                          "model,run,cluster_id,query_id,status\nm,1,1,1,no_call\nm,2,1,2,no_call\n")
        with pytest.raises(SelectionLogError) as err:
            read(path, catalog=catalog, meta={"model": "m", "run": 1})
        msg = str(err.value)
        assert "a.csv:2:run:" in msg and "the file has '2'" in msg and "says 1" in msg
        assert "a.csv:1:run" not in msg

    def test_meta_fills_missing_cells(self, catalog, tmp_path):
        rows = [{"model": m, "cluster_id": "1", "query_id": q, "status": "no_call"}
                for m, q in (("m", "1"), (None, "2"))]
        path = _write_jsonl(tmp_path / "a.jsonl", rows)
        log = read_table(path, catalog=catalog, meta={"model": "m"})
        assert log.data["model"].tolist() == ["m", "m"]

    def test_model_required(self, read, catalog, tmp_path):
        path = _write_csv(tmp_path / "a.csv", "cluster_id,query_id,status\n1,1,no_call\n")
        with pytest.raises(SelectionLogError, match=r"a\.csv:model: no `model` column"):
            read(path, catalog=catalog)

    def test_meta_with_attempt_key(self, read, catalog, tmp_path):
        path = _write_csv(tmp_path / "a.csv", "model,cluster_id,query_id,status\nm,1,1,no_call\n")
        with pytest.raises(SelectionLogError, match=r"a\.csv:status: is an attempt column"):
            read(path, catalog=catalog, meta={"status": "ok"})


class TestReadTableBadInput:
    def test_missing_file(self, read, catalog, tmp_path):
        with pytest.raises(SelectionLogError, match=r"nope\.csv: file not found"):
            read(tmp_path / "nope.csv", catalog=catalog)

    def test_unknown_extension(self, read, catalog, tmp_path):
        path = tmp_path / "log.xls"         # issue 36 reads .xlsx workbooks; the old binary .xls is refused
        path.write_text("x")
        with pytest.raises(SelectionLogError, match=r"log\.xls: expected a file ending in \.csv, \.jsonl, \.ndjson, "
                                                    r"\.parquet, \.xlsx; got 'log\.xls'"):
            read(path, catalog=catalog)
        bad = tmp_path / "log.xlsx"
        bad.write_text("x")
        with pytest.raises(SelectionLogError, match=r"log\.xlsx: not a readable \.xlsx workbook"):
            read(bad, catalog=catalog)

    @pytest.mark.parametrize("name,text", [("e.csv", ""), ("h.csv", "model,cluster_id,query_id,status\n"),
                                           ("e.jsonl", "\n\n")])
    def test_empty_file(self, read, catalog, tmp_path, name, text):
        path = _write_csv(tmp_path / name, text)
        with pytest.raises(SelectionLogError, match=re.escape(name) + r": the .*empty"):
            read(path, catalog=catalog, meta={"model": "m"})

    def test_empty_parquet(self, read, catalog, tmp_path):
        path = tmp_path / "e.parquet"
        pd.DataFrame({"cluster_id": pd.Series([], dtype=str)}).to_parquet(path)
        with pytest.raises(SelectionLogError, match=r"e\.parquet: the selection log is empty"):
            read(path, catalog=catalog, meta={"model": "m"})

    def test_not_parquet(self, read, catalog, tmp_path):
        path = tmp_path / "bad.parquet"
        path.write_text("not parquet")
        with pytest.raises(SelectionLogError, match=r"bad\.parquet: not a readable Parquet file"):
            read(path, catalog=catalog, meta={"model": "m"})

    def test_malformed_jsonl_line(self, read, catalog, tmp_path):
        rows = _ok_rows(catalog, 3)
        path = _write_jsonl(tmp_path / "bad.jsonl", [rows[0], "", '{"cluster_id": "1", oops}', rows[2], "[1, 2"])
        with pytest.raises(SelectionLogError) as err:
            read(path, catalog=catalog)
        msg = str(err.value)
        assert "2 problems" in msg  # all malformed lines, reported together
        assert "bad.jsonl:3: malformed JSON (line 3, column" in msg and "bad.jsonl:5: malformed JSON" in msg

    def test_jsonl_line_not_an_object(self, read, catalog, tmp_path):
        path = _write_jsonl(tmp_path / "bad.jsonl", [_ok_rows(catalog)[0], "[1, 2]"])
        with pytest.raises(SelectionLogError, match=r"bad\.jsonl:2: expected a JSON object per line, got list"):
            read(path, catalog=catalog)

    def test_jsonl_nested_value(self, read, catalog, tmp_path):
        rec = dict(_ok_rows(catalog)[0], query_id={"id": 1})
        path = _write_jsonl(tmp_path / "bad.jsonl", [rec])
        with pytest.raises(SelectionLogError, match=r"bad\.jsonl:1:query_id: expected a scalar value"):
            read(path, catalog=catalog)

    def test_malformed_csv_row(self, read, catalog, tmp_path):
        path = _write_csv(tmp_path / "bad.csv",
                          "model,cluster_id,query_id,status\nm,1,1,no_call\nm,1,2,no_call,extra\n")
        with pytest.raises(SelectionLogError, match=r"bad\.csv:2: malformed CSV: expected 4 fields, got 5 \(line 3\)"):
            read(path, catalog=catalog)

    def test_missing_required_column(self, read, catalog, tmp_path):
        # issue 20: `status` and `cluster_id` may be derived; `query_id` may not
        path = _write_csv(tmp_path / "bad.csv", "model,cluster_id,status\nm,1,no_call\n")
        with pytest.raises(SelectionLogError, match=r"bad\.csv:query_id: required column is missing"):
            read(path, catalog=catalog)

    def test_status_not_allowed(self, read, catalog, tmp_path):
        # CSV row numbers are data rows: row 2 is line 3 of the file.
        path = _write_csv(tmp_path / "bad.csv", "model,cluster_id,query_id,status\nm,1,1,no_call\nm,1,2,timeout\n")
        with pytest.raises(SelectionLogError) as err:
            read(path, catalog=catalog)
        assert ("bad.csv:2:status: expected one of ['ok', 'no_call', 'unknown_tool', 'parse_error', 'forced', "
                "'off_cluster'], got 'timeout'") in str(err.value)

    def test_unknown_cluster(self, read, catalog, tmp_path):
        rows = _ok_rows(catalog, 2)
        rows[1]["cluster_id"] = "99"
        path = _write_jsonl(tmp_path / "bad.jsonl", ["", rows[0], rows[1]])
        with pytest.raises(SelectionLogError, match=r"bad\.jsonl:3:cluster_id: unknown cluster id '99'"):
            read(path, catalog=catalog)

    def test_position_outside_range(self, read, catalog, tmp_path):
        t = catalog.tools("1")[0]
        path = _write_csv(tmp_path / "bad.csv", "model,cluster_id,query_id,chosen_tool,chosen_position,status\n"
                          f"m,1,1,{t},6,ok\nm,1,2,{t},0,ok\nm,1,3,{t},5,ok\n")
        with pytest.raises(SelectionLogError) as err:
            read(path, catalog=catalog)
        msg = str(err.value)
        # the value may print as np.int64(6) (repr inside SelectionLog.from_frame)
        assert re.search(r"bad\.csv:1:chosen_position: position (np\.int64\()?6\)? outside 1\.\.K", msg)
        assert re.search(r"bad\.csv:2:chosen_position: position (np\.int64\()?0\)? outside 1\.\.K", msg)
        assert "bad.csv:3:" not in msg

    def test_duplicate_attempt(self, read, catalog, tmp_path):
        rows = _ok_rows(catalog, 2)
        path = _write_jsonl(tmp_path / "dup.jsonl", [rows[0], rows[1], rows[0]])
        with pytest.raises(SelectionLogError) as err:   # issue 20: the strict mode is opt-in
            read(path, catalog=catalog, duplicates="error")
        msg = str(err.value)
        assert "dup.jsonl:3:query_id: duplicate attempt" in msg and "first seen at row 1" in msg

    def test_ok_row_without_tool(self, read, catalog, tmp_path):
        path = _write_csv(tmp_path / "bad.csv", "model,cluster_id,query_id,status\nm,1,1,ok\n")
        with pytest.raises(SelectionLogError, match=r"bad\.csv:1:chosen_tool: status is 'ok' but no tool"):
            read(path, catalog=catalog)

    def test_bad_source_row(self, read, catalog, tmp_path):
        path = _write_csv(tmp_path / "bad.csv", "model,cluster_id,query_id,status,source_file,source_row\n"
                          "m,1,1,no_call,x.json,1\nm,1,2,no_call,x.json,-3\n")
        with pytest.raises(SelectionLogError, match=r"bad\.csv:2:source_row: expected an integer >= 0"):
            read(path, catalog=catalog)

    def test_bad_columns_argument(self, read, catalog, tmp_path):
        path = _write_csv(tmp_path / "a.csv", "model,cluster_id,query_id,status\nm,1,1,no_call\n")
        with pytest.raises(SelectionLogError, match=r"a\.csv:columns: expected a mapping"):
            read(path, catalog=catalog, columns=["qid"])


class TestInvalidUtf8:
    """Issue 14: invalid UTF-8 errors name the line (through both engines)."""

    def test_csv_names_line(self, read, catalog, tmp_path):
        path = tmp_path / "bad.csv"
        path.write_bytes(b"model,cluster_id,query_id,status\nm,1,1,no_call\nm,1,2\xff\xfe,no_call\n")
        with pytest.raises(SelectionLogError, match=r"bad\.csv:2: not UTF-8 text \(line 3, byte 6\)"):
            read(path, catalog=catalog)

    def test_jsonl_names_line(self, read, catalog, tmp_path):
        path = tmp_path / "bad.jsonl"
        path.write_bytes(b'{"model": "m", "cluster_id": "1", "query_id": "1", "status": "no_call"}\n'
                         b'{"model": "m\xc3", "cluster_id": "1", "query_id": "2", "status": "no_call"}\n')
        with pytest.raises(SelectionLogError, match=r"bad\.jsonl:2: not UTF-8 text \(line 2, byte 13\)"):
            read(path, catalog=catalog)


class TestReadCatalogTable:
    @pytest.mark.parametrize("suffix", [".csv", ".jsonl", ".parquet", ".json"])
    def test_round_trip(self, catalog, tmp_path, suffix):
        table = catalog.to_frame()
        path = tmp_path / f"catalog{suffix}"
        if suffix == ".csv":
            table.to_csv(path, index=False)
        elif suffix == ".jsonl":
            table.to_json(path, orient="records", lines=True, date_format="iso")
        elif suffix == ".json":
            table.to_json(path, orient="records", date_format="iso")
        else:
            table.to_parquet(path, index=False)
        back = read_catalog_table(path)
        assert isinstance(back, ToolCatalog) and back.source == str(path)
        pd.testing.assert_frame_equal(back.table, catalog.table)

    def test_tool_id_and_api_index_derived(self, tmp_path):
        """Without a tool_id column every id is derived (ToolBench's spelling); with the column, an empty cell is
        an error naming the row (issue 37: an id filled from api_name would take the log's picks silently)."""
        path = _write_csv(tmp_path / "c.csv", "cluster_id,tool_name,api_name,num_parameters\n"
                          "1,Text Language by API-Ninjas,/v1/textlanguage,1\n1,Other,Detect,2\n")
        cat = read_catalog_table(path)
        assert cat.tools("1") == ["v1_textlanguage_for_text_language_by_api_ninjas", "detect_for_other"]
        path = _write_csv(tmp_path / "d.csv", "cluster_id,tool_name,api_name,num_parameters,tool_id\n"
                          "1,Text Language by API-Ninjas,/v1/textlanguage,1,\n1,Other,Detect,2,my_id\n")
        with pytest.raises(SelectionLogError, match=r"d\.csv:1:tool_id: missing value"):
            read_catalog_table(path)

    def test_numeric_cluster_ids(self, tmp_path):
        path = _write_jsonl(tmp_path / "c.jsonl", [{"cluster_id": 1.0, "tool_name": "A", "api_name": "x",
                                                    "num_parameters": 0},
                                                   {"cluster_id": 10, "tool_name": "B", "api_name": "x",
                                                    "num_parameters": 0}])
        assert read_catalog_table(path).clusters == ["1", "10"]

    def test_missing_required_column(self, tmp_path):
        path = _write_jsonl(tmp_path / "c.jsonl", [{"tool_id": "a", "tool_name": "A", "api_name": "x"}])
        with pytest.raises(SelectionLogError, match=r"c\.jsonl:cluster_id: required catalog column is missing"):
            read_catalog_table(path)

    def test_optional_columns_default(self, tmp_path):
        """Issue 14: `num_parameters` (and names, order) may be missing; they default and are recorded."""
        path = _write_jsonl(tmp_path / "c.jsonl", [{"cluster_id": "1", "tool_name": "A", "api_name": "x"},
                                                   {"cluster_id": "1", "tool_name": "B", "api_name": "y"}])
        cat = read_catalog_table(path)
        assert cat.tools("1") == ["x_for_a", "y_for_b"]
        assert cat.defaulted == ("api_index", "num_parameters")
        assert cat.table["num_parameters"].isna().all()
        path = _write_jsonl(tmp_path / "d.jsonl", [{"cluster_id": "1", "tool_id": "a"}, {"cluster_id": "1",
                                                                                        "tool_id": "b"}])
        assert read_catalog_table(path).table.set_index("tool_id").loc["b", "tool_name"] == "b"

    def test_json_not_records(self, tmp_path):
        path = tmp_path / "c.json"
        path.write_text('{"a": 1}')
        with pytest.raises(SelectionLogError, match=r"c\.json: expected a JSON list of tool records"):
            read_catalog_table(path)

    def test_missing_file_and_extension(self, tmp_path):
        with pytest.raises(SelectionLogError, match=r"c\.csv: file not found"):
            read_catalog_table(tmp_path / "c.csv")
        path = tmp_path / "c.txt"
        path.write_text("x")
        with pytest.raises(SelectionLogError, match=r"c\.txt: expected a file ending in"):
            read_catalog_table(path)
