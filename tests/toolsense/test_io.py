"""Readers: the vendored files, and bad input -> one error naming file, line and field."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import pytest

from toolbias_stats.toolsense import (
    ToolSenseError,
    bundled_path,
    read_annotations,
    read_probe,
    read_rrb,
    read_rrb_predictions,
)

from .conftest import write_jsonl

DATA = Path(__file__).resolve().parents[2] / "data" / "toolsense"


def test_vendored_checksums():
    for line in (DATA / "SHA256SUMS").read_text().splitlines():
        digest, name = line.split()
        assert hashlib.sha256((DATA / name).read_bytes()).hexdigest() == digest, name
    assert (DATA / "LICENSE").read_text().lstrip().startswith("Apache License")


class TestReadRRB:
    def test_bundled(self):
        rrb = read_rrb()
        q = rrb.queries
        assert len(q) == 500 and len(rrb.tools) == 4901
        assert q["tier"].value_counts().to_dict() == {"easy": 167, "medium": 167, "hard": 166}
        assert q.loc[q.tier == "easy", "tool"].map(type).eq(str).all()
        assert q.loc[q.tier != "easy", "tool"].map(type).eq(list).all()
        assert q.groupby("tier", observed=True)["n_answers"].agg(["min", "max"]).to_dict() == \
            {"min": {"easy": 1, "medium": 2, "hard": 4}, "max": {"easy": 1, "medium": 3, "hard": 8}}
        assert all(set(a) <= set(p) for a, p in zip(q["answers"], q["pool"]))
        # the file's pool order puts the first answer (the anchor) first for 389 queries
        assert sum(p[0] == a[0] for a, p in zip(q["answers"], q["pool"])) == 389
        assert bundled_path("rrb").name == "toolsense-realistic-retrieval.jsonl"

    def test_answer_outside_pool(self, tmp_path, rrb_file):
        lines = rrb_file.read_text().splitlines()
        lines[2] = lines[2].replace('"c1&&go", "tool_title"', '"zz&&go", "tool_title"', 1)
        bad = tmp_path / "bad.jsonl"
        bad.write_text("\n".join(lines) + "\n")
        with pytest.raises(ToolSenseError, match=r"bad.jsonl:3:tool: answer\(s\) \['zz&&go'\]"):
            read_rrb(bad)


class TestPredictionErrors:
    def _err(self, bench, path, **kw):
        with pytest.raises(ToolSenseError) as exc:
            read_rrb_predictions(path, bench, **kw)
        return str(exc.value)

    def test_unknown_id(self, tmp_path, rrb_file):
        bench = read_rrb(rrb_file)
        p = write_jsonl(tmp_path / "p.jsonl", [{"sample_id": "nope", "constrained": ["x&&go"]}])
        msg = self._err(bench, p)
        assert f"{p}:1:sample_id: id 'nope' is not in the benchmark RRB" in msg

    def test_duplicate_id(self, tmp_path, rrb_file):
        bench = read_rrb(rrb_file)
        recs = [{"sample_id": s, "constrained": ["x&&go"]} for s in ("e1", "e2", "m1", "m2", "h1", "h2", "e2")]
        msg = self._err(bench, write_jsonl(tmp_path / "p.jsonl", recs))
        assert "p.jsonl:7:sample_id: duplicate id 'e2' (first on line 2)" in msg

    def test_k_larger_than_list(self, tmp_path, rrb_file, pred_file):
        bench = read_rrb(rrb_file)
        msg = self._err(bench, pred_file, k=[1, 5])
        assert "pred.jsonl:1:constrained: list has 3 entries but k=5 was requested" in msg

    def test_malformed_line(self, tmp_path, rrb_file, pred_file):
        bench = read_rrb(rrb_file)
        lines = pred_file.read_text().splitlines()
        lines[3] = lines[3][:-5]
        bad = tmp_path / "bad.jsonl"
        bad.write_text("\n".join(lines) + "\n")
        assert "bad.jsonl:4: malformed JSON" in self._err(bench, bad)

    def test_nan_is_rejected(self, tmp_path, rrb_file):
        bench = read_rrb(rrb_file)
        bad = tmp_path / "nan.jsonl"
        bad.write_text('{"sample_id": "e1", "constrained": NaN}\n')
        assert "nan.jsonl:1: malformed JSON" in self._err(bench, bad)

    def test_not_a_list_and_columns_mapping(self, tmp_path, rrb_file):
        bench = read_rrb(rrb_file)
        recs = [{"qid": s, "ranked": "x&&go"} for s in ("e1", "e2", "m1", "m2", "h1", "h2")]
        msg = self._err(bench, write_jsonl(tmp_path / "p.jsonl", recs),
                        columns={"sample_id": "qid", "constrained": "ranked"})
        assert "p.jsonl:1:ranked: expected a list of tool names" in msg

    def test_missing_queries(self, tmp_path, rrb_file):
        bench = read_rrb(rrb_file)
        msg = self._err(bench, write_jsonl(tmp_path / "p.jsonl", [{"sample_id": "e1", "constrained": ["x&&go"]}]))
        assert "5 benchmark queries have no prediction" in msg


class TestAnnotations:
    def test_two_labels(self, tmp_path):
        p = tmp_path / "ann.csv"
        p.write_text("item_id,rater,label\nq1,ann1,yes\nq1,ann2,yes\nq1,ann1,no\n")
        with pytest.raises(ToolSenseError, match=r"ann.csv:4:label: rater 'ann1' gives item 'q1' a second label "
                                                 r"'no' \(first 'yes' on line 2\)"):
            read_annotations(p)

    def test_missing_column_and_groups(self, tmp_path):
        p = tmp_path / "ann.csv"
        p.write_text("item_id,annotator,label\nq1,a,1\n")
        with pytest.raises(ToolSenseError, match=re.escape("ann.csv:1:rater: required column is missing")):
            read_annotations(p)
        df = read_annotations(p, columns={"rater": "annotator"})
        assert df[["item_id", "rater", "label", "source_line"]].values.tolist() == [["q1", "a", "1", 2]]

    def test_probe_duplicate(self, tmp_path, qa_file):
        text = qa_file.read_text().splitlines()
        bad = tmp_path / "qa.jsonl"
        bad.write_text("\n".join(text + [text[0]]) + "\n")
        with pytest.raises(ToolSenseError, match=re.escape("qa.jsonl:11:id: duplicate id 'a0'")):
            read_probe("qa", bad)
