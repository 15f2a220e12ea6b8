"""Issue 36: ToolBench keeps the last 64 characters of a function name ``<api>_for_<tool>``.

ToolBench (``toolbench/inference/Downstream_tasks/rapidapi.py``) standardises the API and tool names, joins them
with ``_for_`` and keeps the last 64 characters (the OpenAI limit on function names): a model shown those
functions names the truncated spelling, while a ground truth or catalog written from the names spells them in full.
Both must name the same tool. The hand-made subset example below is built that way: two long-named tools whose
truncations are what the selector writes.
"""

from __future__ import annotations

import json

import pytest

import toolbias_stats as tbs
from toolbias_stats.experiments import subset_selection_metrics

LONG = {"g": ("Address from to latitude longitude", "Coordinates (latitude, longitude) to address"),
        "i": ("IP Geolocation - find IP location and IP info", "Get IP Geolocation"),
        "s": ("Short", "Get")}
FULL = {k: tbs.function_name(api, tool, truncate=False) for k, (tool, api) in LONG.items()}
TRUNC = {k: tbs.function_name(api, tool) for k, (tool, api) in LONG.items()}


def _by_hand(api, tool):
    """The ToolBench rule written out: standardise both names, join with _for_, keep the last 64 characters."""
    return f"{tbs.standardise_name(api)}_for_{tbs.standardise_name(tool)}"[-64:]


class TestFunctionName:
    def test_last_64_characters(self):
        assert len(FULL["g"]) == 80 and len(FULL["i"]) > 64 and len(FULL["s"]) < 64
        for k, (tool, api) in LONG.items():
            assert TRUNC[k] == _by_hand(api, tool) == FULL[k][-64:]
            assert len(TRUNC[k]) == min(64, len(FULL[k]))
        assert TRUNC["g"] == "tude_longitude_to_address_for_address_from_to_latitude_longitude"

    def test_catalog_accepts_both_spellings(self):
        cat = tbs.ToolCatalog.from_records([{"cluster_id": "1", "tool_name": t, "api_name": a}
                                            for t, a in LONG.values()])
        assert sorted(cat.tools("1")) == sorted(TRUNC.values())       # ids as ToolBench builds them
        al = cat.aliases()
        for k in LONG:
            assert al[FULL[k]] == al[TRUNC[k]] == TRUNC[k]
        # a catalog whose ids are the untruncated names (the authors' api_meta.json) accepts the truncated spelling
        full = tbs.ToolCatalog(__import__("pandas").DataFrame({"tool_id": list(FULL.values()), "cluster_id": "1"}))
        assert full.aliases()[TRUNC["g"]] == FULL["g"]


@pytest.fixture()
def files(tmp_path):
    # query 1: both long tools correct, short a distractor; query 2: long g correct, i and s distractors
    truth = [{"query_id": 1, "cluster_id": 1, "query": "q1",
              "correct_apis": [{"tool": LONG[k][0], "api_name": LONG[k][1]} for k in "gi"],
              "distractor_apis": [{"tool": LONG["s"][0], "api_name": LONG["s"][1]}]},
             {"query_id": 2, "cluster_id": 1, "query": "q2",
              "correct_apis": [{"tool": LONG["g"][0], "api_name": LONG["g"][1]}],
              "distractor_apis": [{"tool": LONG[k][0], "api_name": LONG[k][1]} for k in "is"]}]
    (tmp_path / "truth.json").write_text(json.dumps(truth))
    return tmp_path


def _preds(path, spelling, q1=("g", "i"), q2=("g",)):
    path.write_text("\n".join(json.dumps({"query_id": q, "selected_tools": [spelling[k] for k in sel]})
                              for q, sel in ((1, q1), (2, q2))) + "\n")
    return path


class TestSubsets:
    @pytest.mark.parametrize("spelling", [TRUNC, FULL], ids=["truncated", "untruncated"])
    def test_both_spellings_are_the_same_tool(self, files, spelling):
        res = subset_selection_metrics(_preds(files / "p.jsonl", spelling), files / "truth.json", n_resamples=0)
        assert res.overall["micro_precision"][0] == 1.0
        assert res.overall["micro_recall"][0] == 1.0
        assert res.overall["exact_match"][0] == 1.0
        assert res.counts["not_candidates"] == 0

    def test_mixed_spellings_of_one_tool_count_once(self, files):
        p = files / "p.jsonl"
        p.write_text(json.dumps({"query_id": 1, "selected_tools": [TRUNC["g"], FULL["g"], TRUNC["i"]]}) + "\n"
                     + json.dumps({"query_id": 2, "selected_tools": [FULL["g"]]}) + "\n")
        res = subset_selection_metrics(p, files / "truth.json", n_resamples=0)
        assert res.overall["micro_precision"][0] == 1.0 and res.overall["exact_match"][0] == 1.0
        assert res.counts["repeated_tools"] == 1

    def test_a_wrong_name_stays_a_false_positive(self, files):
        p = files / "p.jsonl"
        p.write_text(json.dumps({"query_id": 1, "selected_tools": [TRUNC["g"], TRUNC["i"], "x" * 70]}) + "\n"
                     + json.dumps({"query_id": 2, "selected_tools": [TRUNC["g"]]}) + "\n")
        res = subset_selection_metrics(p, files / "truth.json", n_resamples=0)
        assert res.overall["micro_precision"][0] == pytest.approx(3 / 4)
        assert res.counts["not_candidates"] == 1

    def test_bundled_simulated_predictions_unchanged(self):
        """The bundled (SIMULATED) predictions spell the two long BiasBusters names in full; the truth now builds
        them truncated: the numbers are those computed with the full names everywhere (precision 0.99359,
        exact match 0.65)."""
        p = tbs.datasets.path
        res = subset_selection_metrics(p("experiments/mitigation/predictions.jsonl"),
                                       p("experiments/mitigation/truth.json"), n_resamples=0)
        assert res.overall["micro_precision"][0] == pytest.approx(0.9935897, abs=1e-6)
        assert res.overall["exact_match"][0] == pytest.approx(0.65)
        assert res.counts["not_candidates"] == 0
