"""Tiny hand-made ToolSense fixtures (written to tmp files; expected values are worked out by hand in the tests)."""

from __future__ import annotations

import json

import pytest


def tool(name):
    return {"tool_name": name, "tool_title": name.split("&&")[0], "tool_description": f"does {name}",
            "api_title": name.split("&&")[-1], "api_description": "None"}


#: sample_id -> (tier, answers); every pool = answers + distractors x, y, z
QUERIES = {"e1": ("easy", ["a1&&go"]), "e2": ("easy", ["b1&&go"]),
           "m1": ("medium", ["c1&&go", "c2&&go"]), "m2": ("medium", ["d1&&go", "d2&&go"]),
           "h1": ("hard", ["e1&&go", "e2&&go", "e3&&go", "e4&&go"]),
           "h2": ("hard", ["f1&&go", "f2&&go", "f3&&go", "f4&&go"])}
DISTRACTORS = ["x&&go", "y&&go", "z&&go"]

#: ranked predictions (top 3): constrained and free
PREDICTIONS = {
    "e1": (["a1&&go", "x&&go", "y&&go"], ["x&&go", "a1&&go", "y&&go"]),
    "e2": (["x&&go", "y&&go", "b1&&go"], ["fake&&tool", "x&&go", "y&&go"]),
    "m1": (["x&&go", "c2&&go", "y&&go"], ["c1&&go", "x&&go", "y&&go"]),
    "m2": (["x&&go", "y&&go", "z&&go"], ["x&&go", "y&&go", "z&&go"]),
    "h1": (["e3&&go", "x&&go", "y&&go"], ["e3&&go", "x&&go", "y&&go"]),
    "h2": (["x&&go", "y&&go", "f2&&go"], ["x&&go", "y&&go", "z&&go"]),
}


def write_jsonl(path, records):
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


@pytest.fixture
def rrb_file(tmp_path):
    recs = []
    for sid, (tier, ans) in QUERIES.items():
        gt = tool(ans[0]) if tier == "easy" else [tool(a) for a in ans]
        recs.append({"sample_id": sid, "query": f"query {sid}", "tool": gt, "complexity": tier,
                     "analyzed_tools": [tool(a) for a in ans + DISTRACTORS]})
    return write_jsonl(tmp_path / "rrb.jsonl", recs)


@pytest.fixture
def pred_file(tmp_path):
    return write_jsonl(tmp_path / "pred.jsonl", [{"sample_id": s, "constrained": c, "free": f}
                                                 for s, (c, f) in PREDICTIONS.items()])


@pytest.fixture
def mcq_file(tmp_path):
    recs = [{"id": f"q{i}", "question": "what?", "correct_answer": f"right {i}",
             "wrong_answers": [f"w{i}a", f"w{i}b", f"w{i}c"], "tool": tool(f"t{i}&&go")} for i in range(8)]
    return write_jsonl(tmp_path / "mcq.jsonl", recs)


@pytest.fixture
def qa_file(tmp_path):
    recs = [{"id": f"a{i}", "question": "yes?", "answer": "Yes" if i % 2 else "No", "tool": tool(f"t{i}&&go")}
            for i in range(10)]
    return write_jsonl(tmp_path / "qa.jsonl", recs)
