"""BiasBusters native reader: one row per attempt, and a clear error per kind of bad input."""

import json
import re

import pytest

import toolbias_stats as tbs
from toolbias_stats.io.readers.biasbusters import read_biasbusters, read_biasbusters_catalog

META = {"model": "m", "run": 1}


def _write(tmp_path, records, name="log.json"):
    p = tmp_path / name
    p.write_text(json.dumps(records) if not isinstance(records, str) else records)
    return p


class TestReadBiasbusters:
    def test_every_attempt_is_a_row(self, bb_catalog, bb_data_dir):
        log = read_biasbusters(bb_data_dir / "selection_logs/api_selection_stats_chatgpt_no_func.json",
                               catalog=bb_catalog, meta=META)
        assert len(log) == 5000
        st = log.data["status"].value_counts().to_dict()
        assert st == {"ok": 3356, "no_call": 1644}
        # no_call rows carry no choice
        nc = log.data[log.data["status"] == "no_call"]
        assert nc["chosen_tool"].isna().all() and nc["chosen_position"].isna().all()
        assert log.diagnostics[str(bb_data_dir / "selection_logs/api_selection_stats_chatgpt_no_func.json")][
            "position_mismatch"] == 115

    def test_qid_decoding_and_rotation(self, bb_catalog, tmp_path):
        # qid 507 = cluster 2, query 2, rotation 2; api 3 under rotation 2 sits at position 2
        log = read_biasbusters(_write(tmp_path, [[507, 2, 3, 2]]), catalog=bb_catalog, meta=META)
        row = log.data[log.data["status"] == "ok"].iloc[0]
        assert (row["cluster_id"], row["query_id"], row["rotation"]) == ("2", "2", 2)
        assert row["chosen_tool"] == bb_catalog.tools("2")[2]
        assert row["ordering"].split("|")[row["chosen_position"] - 1] == row["chosen_tool"]

    def test_rotation_position_option(self, bb_catalog, tmp_path):
        # recorded position 1 disagrees with the rotation formula (2): kept by default, replaced on request
        p = _write(tmp_path, [[507, 2, 3, 1]])
        rec = read_biasbusters(p, catalog=bb_catalog, meta=META)
        rot = read_biasbusters(p, catalog=bb_catalog, meta=META, position="rotation")
        ok = rec.data["status"] == "ok"
        assert rec.data.loc[ok, "chosen_position"].item() == 1 and rot.data.loc[ok, "chosen_position"].item() == 2
        assert rec.diagnostics[str(p)]["position_mismatch"] == 1


class TestBadInput:
    """Each bad input gives one SelectionLogError naming file, record and field."""

    @pytest.mark.parametrize("records,field,text", [
        ([[1, 11, 1, 1]], "cluster_id", "unknown cluster id 11"),
        ([[1, 1, 6, 1]], "api_index", "api index 6 outside 1..5"),
        ([[1, 1, 0, 1]], "api_index", "api index 0 outside 1..5"),
        ([[1, 1, 1, 9]], "position", "position 9 outside 1..5"),
        ([[1, 1, 1, 1], [1, 1, 2, 1]], "qid", "duplicate qid 1"),
        ([[501, 1, 1, 1]], "cluster_id", "disagrees with its qid"),
        ([[1, 1, "a", 1]], "api_index", "expected an integer"),
        ([[1, 1, 1]], "record", "expected [qid, cluster_id, api_index, position]"),
        ([[10**30, 1, 1, 1]], "qid", "expected an integer of at most 18 digits"),   # issue 21: OverflowError before
    ])
    def test_bad_records(self, bb_catalog, tmp_path, records, field, text):
        p = _write(tmp_path, records)
        with pytest.raises(tbs.SelectionLogError) as err:
            read_biasbusters(p, catalog=bb_catalog, meta=META)
        msg = str(err.value)
        row = len(records)  # the offending record is the last one
        assert f"{p}:{row}:{field}: " in msg and text in msg

    def test_malformed_json(self, bb_catalog, tmp_path):
        p = _write(tmp_path, '[[1, 1, 1, 1],\n [2, 1, 2')
        with pytest.raises(tbs.SelectionLogError, match=rf"{p}:2:col \d+: malformed JSON"):
            read_biasbusters(p, catalog=bb_catalog, meta=META)

    def test_empty_log(self, bb_catalog, tmp_path):
        p = _write(tmp_path, [])
        with pytest.raises(tbs.SelectionLogError, match=rf"{p}: the selection log is empty"):
            read_biasbusters(p, catalog=bb_catalog, meta=META)

    def test_missing_file(self, bb_catalog, tmp_path):
        with pytest.raises(tbs.SelectionLogError, match=re.escape("nope.json: file not found")):
            read_biasbusters(tmp_path / "nope.json", catalog=bb_catalog, meta=META)

    def test_meta_of_wrong_type(self, bb_catalog, tmp_path):
        p = _write(tmp_path, [[1, 1, 1, 1]])
        with pytest.raises(tbs.SelectionLogError, match=rf"{p}:run: expected an integer >= 1, got 'one'"):
            read_biasbusters(p, catalog=bb_catalog, meta={"model": "m", "run": "one"})

    def test_all_problems_reported_at_once(self, bb_catalog, tmp_path):
        p = _write(tmp_path, [[1, 1, 7, 1], [2, 1, 1, 8]])
        with pytest.raises(tbs.SelectionLogError) as err:
            read_biasbusters(p, catalog=bb_catalog, meta=META)
        assert len(err.value.problems) == 2 and "2 problems" in str(err.value)


class TestCatalog:
    def test_ids_match_the_authors_function_names(self, bb_catalog, bb_data_dir):
        meta = json.loads((bb_data_dir / "api_meta.json").read_text())
        assert [m["name"] for m in meta] == list(bb_catalog.table["tool_id"])
        assert bb_catalog.table["cluster_name"].iloc[0] == "Address->Coordinates"
        assert bb_catalog.n_tools("10") == 5

    def test_ids_derived_without_api_meta(self, bb_data_dir):
        cat = read_biasbusters_catalog(bb_data_dir / "clusters.json")
        assert "v1_textlanguage_for_text_language_by_api_ninjas" in cat.tools("8")

    def test_rotation(self, bb_catalog):
        tools = bb_catalog.tools("1")
        assert bb_catalog.rotation("1", 1) == tools
        assert bb_catalog.rotation("1", 3) == tools[2:] + tools[:2]


class TestClustersOption:
    """Issue 8: a condition run on only some clusters expects attempts only there."""

    def test_no_invented_no_call_rows_outside_the_clusters(self, bb_catalog, tmp_path):
        # two valid records in cluster 8 (qids 3501.. encode cluster 8), nothing else
        p = _write(tmp_path, [[3501, 8, 2, 2], [3502, 8, 2, 1]])
        log = read_biasbusters(p, catalog=bb_catalog, meta=META, clusters=["8"])
        assert set(log.data["cluster_id"]) == {"8"}
        assert len(log) == 500                                        # 100 queries x 5 rotations of cluster 8 only
        assert (log.data["status"] == "ok").sum() == 2
        full = read_biasbusters(p, catalog=bb_catalog, meta=META)
        assert len(full) == 5000 and (full.data["status"] == "no_call").sum() == 4998

    def test_record_outside_the_clusters_is_an_error(self, bb_catalog, tmp_path):
        p = _write(tmp_path, [[3501, 8, 2, 2], [1, 1, 1, 1]])
        msg = r"log.json:2:cluster_id: cluster id 1 is not one of the clusters"
        with pytest.raises(tbs.SelectionLogError, match=msg):
            read_biasbusters(p, catalog=bb_catalog, meta=META, clusters=["8", "9"])

    def test_unknown_cluster_in_option(self, bb_catalog, tmp_path):
        p = _write(tmp_path, [[3501, 8, 2, 2]])
        with pytest.raises(tbs.SelectionLogError, match=r"log.json:clusters: unknown cluster id\(s\) \['11'\]"):
            read_biasbusters(p, catalog=bb_catalog, meta=META, clusters=["8", "11"])
