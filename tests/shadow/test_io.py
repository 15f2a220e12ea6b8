"""Readers and validation of TOOL-SHADOW audits: every bad input names file, row and column."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from toolbias_stats import SelectionLogError
from toolbias_stats.shadow import ShadowAudit, read_manifest, read_shadow_audit


def _write(tmp_path, manifest=None, calls=None, labels=None, turns=None):
    manifest = manifest if manifest is not None else [{"name": "a", "description": "first tool"},
                                                      {"name": "b", "description": "second"},
                                                      {"name": "c", "description": "third tool here"}]
    (tmp_path / "m.json").write_text(json.dumps(manifest))
    (tmp_path / "calls.csv").write_text(calls if calls is not None else
                                        "turn_id,tool_name,called\n1,a,1\n1,b,0\n2,c,1\n")
    (tmp_path / "labels.csv").write_text(labels if labels is not None else
                                         "turn_id,tool_name,relevant\n1,a,1\n1,b,1\n2,c,1\n2,a,0\n")
    if turns is not None:
        (tmp_path / "turns.csv").write_text(turns)
    return (tmp_path / "m.json", tmp_path / "calls.csv", tmp_path / "labels.csv")


class TestReadShadowAudit:
    def test_example_shape(self, example_audit):
        rows = example_audit.rows
        assert example_audit.n_turns == 600
        assert len(rows) == 600 * 12
        assert set(rows["position"]) == set(range(1, 13))
        assert len(example_audit.tasks) == 600
        # the manifest's order is the position; lengths are the descriptions' characters
        with open(example_audit.source["manifest"][0]) as fh:
            man = json.load(fh)
        first = rows[rows["turn_id"] == "t0001"].sort_values("position")
        assert list(first["tool_name"]) == [m["name"] for m in man]
        assert list(first["desc_len"]) == [len(m["description"]) for m in man]

    def test_missing_rows_default_to_zero(self, tmp_path):
        a = read_shadow_audit(*_write(tmp_path))
        r = a.rows.set_index(["turn_id", "tool_name"])
        assert r.loc[("1", "c"), "called"] == 0 and r.loc[("1", "c"), "relevant"] == 0
        assert r.loc[("2", "c"), "called"] == 1 and r.loc[("2", "c"), "relevant"] == 1
        assert a.n_turns == 2 and len(a.rows) == 6

    def test_unknown_tool(self, tmp_path):
        files = _write(tmp_path, calls="turn_id,tool_name,called\n1,a,1\n1,zz,0\n")
        with pytest.raises(SelectionLogError, match=r"calls\.csv:2:tool_name: tool 'zz' is not in the manifest"):
            read_shadow_audit(*files)

    def test_unknown_tool_in_labels(self, tmp_path):
        files = _write(tmp_path, labels="turn_id,tool_name,relevant\n1,a,1\n2,nope,1\n")
        with pytest.raises(SelectionLogError, match=r"labels\.csv:2:tool_name: tool 'nope'"):
            read_shadow_audit(*files)

    @pytest.mark.parametrize("value", ["2", "yes", "", "-1"])
    def test_called_not_binary(self, tmp_path, value):
        files = _write(tmp_path, calls=f"turn_id,tool_name,called\n1,a,1\n1,b,{value}\n")
        with pytest.raises(SelectionLogError, match=r"calls\.csv:2:called: expected 0 or 1"):
            read_shadow_audit(*files)

    def test_relevant_not_binary(self, tmp_path):
        files = _write(tmp_path, labels="turn_id,tool_name,relevant\n1,a,1\n1,b,0.5\n2,c,1\n")
        with pytest.raises(SelectionLogError, match=r"labels\.csv:2:relevant: expected 0 or 1, got '0.5'"):
            read_shadow_audit(*files)

    def test_turn_without_labels(self, tmp_path):
        files = _write(tmp_path, calls="turn_id,tool_name,called\n1,a,1\n7,b,1\n")
        with pytest.raises(SelectionLogError, match=r"calls\.csv:2:turn_id: turn '7' has no relevance labels"):
            read_shadow_audit(*files)

    def test_duplicate_rows(self, tmp_path):
        files = _write(tmp_path, calls="turn_id,tool_name,called\n1,a,1\n2,c,1\n1,a,0\n")
        with pytest.raises(SelectionLogError,
                           match=r"calls\.csv:3:turn_id,tool_name: duplicate row for turn '1' and tool 'a' "
                                 r"\(first at row 1\)"):
            read_shadow_audit(*files)

    def test_all_problems_collected(self, tmp_path):
        files = _write(tmp_path, calls="turn_id,tool_name,called\n1,a,3\n1,zz,1\n")
        with pytest.raises(SelectionLogError) as exc:
            read_shadow_audit(*files)
        assert exc.value.n_problems == 2
        assert any(":1:called:" in p for p in exc.value.problems)
        assert any(":2:tool_name:" in p for p in exc.value.problems)

    def test_missing_column(self, tmp_path):
        files = _write(tmp_path, calls="turn,tool_name,called\n1,a,1\n")
        with pytest.raises(SelectionLogError, match=r"calls\.csv:turn_id: missing column"):
            read_shadow_audit(*files)

    def test_missing_file(self, tmp_path):
        with pytest.raises(SelectionLogError, match="file not found"):
            read_shadow_audit(tmp_path / "none.json", tmp_path / "c.csv", tmp_path / "l.csv")

    @pytest.mark.parametrize("manifest,match", [
        ([{"name": "a"}, {"name": "a"}], r"m\.json:2:name: tool 'a' already listed at item 1"),
        ([{"name": ""}], r"m\.json:1:name: expected a non-empty string"),
        ([{"name": "a", "description": 3}], r"m\.json:1:description: expected a string"),
        ({"name": "a"}, r"expected a non-empty JSON array"),
    ])
    def test_bad_manifest(self, tmp_path, manifest, match):
        (tmp_path / "m.json").write_text(json.dumps(manifest))
        with pytest.raises(SelectionLogError, match=match):
            read_manifest(tmp_path / "m.json")

    def test_malformed_json(self, tmp_path):
        (tmp_path / "m.json").write_text('[{"name": "a",]')
        with pytest.raises(SelectionLogError, match=r"m\.json:1:col \d+: malformed JSON"):
            read_manifest(tmp_path / "m.json")

    def test_turns_file_and_task_column(self, tmp_path):
        files = _write(tmp_path, calls="turn_id,tool_name,called,task\n1,a,1,read the file\n2,c,1,\n",
                       turns="turn_id,task\n2,third task\n")
        a = read_shadow_audit(*files, turns=tmp_path / "turns.csv")
        assert a.tasks == {"1": "read the file", "2": "third task"}

    def test_duplicate_turn_in_turns_file(self, tmp_path):
        files = _write(tmp_path, turns="turn_id,task\n1,x\n1,y\n")
        with pytest.raises(SelectionLogError, match=r"turns\.csv:2:turn_id: duplicate turn '1'"):
            read_shadow_audit(*files, turns=tmp_path / "turns.csv")

    def test_position_column(self, tmp_path):
        files = _write(tmp_path, calls="turn_id,tool_name,called,position\n1,a,1,3\n1,b,0,1\n1,c,0,2\n"
                                       "2,c,1,\n")
        a = read_shadow_audit(*files)
        r = a.rows.set_index(["turn_id", "tool_name"])["position"]
        assert (r.loc[("1", "a")], r.loc[("1", "b")], r.loc[("1", "c")]) == (3, 1, 2)
        assert (r.loc[("2", "a")], r.loc[("2", "c")]) == (1, 3)

    @pytest.mark.parametrize("pos,match", [("0", "expected an integer >= 1, got '0'"),
                                           ("x", "expected an integer >= 1, got 'x'")])
    def test_bad_position(self, tmp_path, pos, match):
        files = _write(tmp_path, calls=f"turn_id,tool_name,called,position\n1,a,1,{pos}\n2,c,1,1\n")
        with pytest.raises(SelectionLogError, match=r"calls\.csv:1:position: " + match):
            read_shadow_audit(*files)

    def test_repeated_position(self, tmp_path):
        files = _write(tmp_path, calls="turn_id,tool_name,called,position\n1,a,1,2\n2,c,1,1\n")
        with pytest.raises(SelectionLogError, match=r"calls\.csv:1:position: position 2 is used twice in turn '1'"):
            read_shadow_audit(*files)

    def test_several_manifests(self, shadow_data):
        a = read_shadow_audit([shadow_data / "manifest.json", shadow_data / "manifest_reversed.json"],
                              shadow_data / "calls_ab.csv", shadow_data / "labels_ab.csv")
        r = a.rows
        fwd = r[r.turn_id == "ab0001M"].set_index("tool_name")["position"]
        rev = r[r.turn_id == "ab0001R"].set_index("tool_name")["position"]
        assert fwd["read_file"] == 1 and rev["read_file"] == 12
        assert ((fwd + rev.loc[fwd.index]) == 13).all()

    def test_unknown_manifest_name(self, tmp_path):
        files = _write(tmp_path, calls="turn_id,tool_name,called,manifest\n1,a,1,other.json\n2,c,1,m.json\n")
        with pytest.raises(SelectionLogError, match=r"calls\.csv:1:manifest: 'other.json' is none of the manifests"):
            read_shadow_audit(*files)

    def test_several_manifests_need_column(self, tmp_path, shadow_data):
        files = _write(tmp_path)
        with pytest.raises(SelectionLogError, match="needs a `manifest` column"):
            read_shadow_audit([files[0], shadow_data / "manifest.json"], files[1], files[2])


class TestFromFrame:
    def test_checks(self):
        df = pd.DataFrame({"turn_id": [1, 1], "tool_name": ["a", "a"], "position": [1, 2], "called": [1, 2],
                           "relevant": [1, 1], "desc_len": [3, 3]})
        with pytest.raises(SelectionLogError) as exc:
            ShadowAudit.from_frame(df)
        assert "frame:2:called: expected 0 or 1, got 2" in str(exc.value)
        assert "frame:2:turn_id,tool_name: duplicate" in str(exc.value)

    def test_defaults(self):
        df = pd.DataFrame({"turn_id": [1, 1], "tool_name": ["a", "b"], "position": [1, 2], "called": [1, 0],
                           "relevant": [1, 1], "desc_len": [3, 4]})
        a = ShadowAudit.from_frame(df)
        assert list(a.rows["n_tools"]) == [2, 2] and list(a.rows["unit"]) == ["1", "1"]
        assert a.rows["called"].dtype == np.int8
