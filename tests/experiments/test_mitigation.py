"""Subset-selection metrics (BiasBusters Table 2) and the 'uniform over the predicted subset' distribution."""

import json

import numpy as np
import pytest

import toolbias_stats as tbs
from toolbias_stats.experiments import mitigation_distribution, read_subset_table, subset_selection_metrics

# Hand-made 6-query example. Tools are given by name in the truth; their ids follow docs/schema.md:
# standardise(api_name) + "_for_" + standardise(tool).
TOOLS = {"a": ("Alpha API", "Get"), "b": ("Beta-Tools", "/v1/fetch"), "c": ("Gamma", "3 Day"),
         "d": ("Delta Co", "Run"), "x": ("Other X", "Find"), "y": ("Other Y", "Lookup")}
ID = {k: tbs.function_name(api, tool) for k, (tool, api) in TOOLS.items()}
CASES = [  # query, cluster, correct, distractors, predicted
    (1, 1, "ab", "x", "ab"),
    (2, 1, "ab", "x", "a"),
    (3, 2, "abc", "xy", "abcx"),
    (4, 2, "abc", "x", ""),          # an empty prediction: a query with zero predicted tools
    (5, 3, "abcd", "y", "abcd"),
    (6, 3, "abcd", "y", "by"),
]
# Expected values, by hand: true positives 2+1+3+0+4+1 = 11, predicted 2+1+4+0+4+2 = 13, correct 2+2+3+3+4+4 = 18,
# exact matches q1, q5 = 2 of 6.
EXPECTED = {"overall": (11 / 13, 11 / 18, 2 / 6, 6), 2: (3 / 3, 3 / 4, 1 / 2, 2), 3: (3 / 4, 3 / 6, 0.0, 2),
            4: (5 / 6, 5 / 8, 1 / 2, 2)}


def _truth_obj():
    return [{"query_id": q, "cluster_id": c, "query": f"query {q}",
             "correct_apis": [{"tool": TOOLS[t][0], "api_name": TOOLS[t][1]} for t in corr],
             "distractor_apis": [{"tool": TOOLS[t][0], "api_name": TOOLS[t][1]} for t in dis]}
            for q, c, corr, dis, _ in CASES]


@pytest.fixture()
def files(tmp_path):
    truth = tmp_path / "truth.json"
    truth.write_text(json.dumps(_truth_obj()))
    preds = tmp_path / "predictions.jsonl"
    preds.write_text("\n".join(json.dumps({"query_id": q, "selected_tools": [ID[t] for t in p]})
                               for q, _, _, _, p in CASES) + "\n")
    return preds, truth


def _check(res):
    for key, (p, r, e, n) in EXPECTED.items():
        d = res.overall if key == "overall" else next(g for g in res.by_group if g["k"] == key)
        assert d["micro_precision"][0] == pytest.approx(p, abs=1e-15)
        assert d["micro_recall"][0] == pytest.approx(r, abs=1e-15)
        assert d["exact_match"][0] == pytest.approx(e, abs=1e-15)
        assert d["n"] == n


class TestTable2:
    def test_hand_made_example_exact(self, files):
        res = subset_selection_metrics(*files, n_resamples=0)
        _check(res)
        assert res.counts["empty_predictions"] == 1 and res.counts["queries"] == 6

    def test_generic_table_gives_the_same(self, tmp_path):
        rows = ["query_id,tool_id,selected,correct,cluster_id"]
        for q, c, corr, dis, pred in CASES:
            for t in corr + dis:
                rows.append(f"{q},{ID[t]},{int(t in pred)},{int(t in corr)},{c}")
        p = tmp_path / "subsets.csv"
        p.write_text("\n".join(rows) + "\n")
        _check(subset_selection_metrics(p, n_resamples=0))
        assert len(read_subset_table(p).table) == 6

    def test_bootstrap_intervals_contain_estimates_and_json_is_strict(self, files):
        res = subset_selection_metrics(*files, n_resamples=500, rng=1)
        out = json.loads(json.dumps(res.to_dict()), parse_constant=lambda x: (_ for _ in ()).throw(ValueError(x)))
        assert set(out["overall"]) == {"n", "micro_precision", "micro_recall", "exact_match"}
        assert [g["k"] for g in out["by_k"]] == [2, 3, 4]
        for m in ("micro_precision", "micro_recall", "exact_match"):
            lo, hi = out["overall"][m]["ci"]
            assert lo <= out["overall"][m]["estimate"] <= hi

    def test_percentile_interval_matches_scipy_bootstrap_of_a_mean(self, files):
        # exact-set match is a mean over queries: its query bootstrap is scipy's percentile bootstrap of a mean
        from scipy import stats

        res = subset_selection_metrics(*files, by=None, n_resamples=4000, rng=3)
        ref = stats.bootstrap((np.array([1, 0, 0, 0, 1, 0.0]),), np.mean, n_resamples=4000, method="percentile",
                              random_state=3).confidence_interval
        lo, hi = res.overall["exact_match"][1]
        assert lo == pytest.approx(ref.low, abs=1 / 6 + 1e-9) and hi == pytest.approx(ref.high, abs=1 / 6 + 1e-9)


class TestBadInput:
    def test_unknown_tool_is_a_false_positive_not_an_error(self, files):
        # issue 20: subset predictions are LLM output; a name that is not a candidate is a wrong prediction
        # (BiasBusters Table 2 counts it), listed with its line. Before: an error that stopped the run.
        preds, truth = files
        lines = preds.read_text().splitlines()
        lines[1] = json.dumps({"query_id": 2, "selected_tools": [ID["a"], "nope_for_nothing"]})
        preds.write_text("\n".join(lines) + "\n")
        res = subset_selection_metrics(preds, truth, n_resamples=0)
        # by hand: q2 now predicts 2 names, 1 correct -> TP 11, predicted 13 + 1 = 14; exact matches unchanged
        assert res.overall["micro_precision"][0] == pytest.approx(11 / 14, abs=1e-15)
        assert res.overall["micro_recall"][0] == pytest.approx(11 / 18, abs=1e-15)
        assert res.overall["exact_match"][0] == pytest.approx(2 / 6, abs=1e-15)
        k2 = next(g for g in res.by_group if g["k"] == 2)
        assert k2["micro_precision"][0] == pytest.approx(3 / 4, abs=1e-15)
        assert res.counts["not_candidates"] == 1 and res.counts["queries"] == 6
        assert res.diagnostics["not_candidates"] == [{"line": 2, "query_id": "2", "tool": "nope_for_nothing"}]
        assert res.to_dict()["diagnostics"]["not_candidates"][0]["line"] == 2

    def test_repeated_tool_counts_once_with_a_diagnostic(self, files):
        # issue 21: a tool named twice in one prediction does not pass silently; a subset is a set (counted once)
        preds, truth = files
        lines = preds.read_text().splitlines()
        lines[5] = json.dumps({"query_id": 6, "selected_tools": [ID["b"], ID["y"], ID["b"], ID["b"]]})
        preds.write_text("\n".join(lines) + "\n")
        res = subset_selection_metrics(preds, truth, n_resamples=0)
        _check(res)                                                  # the same numbers as {b, y}
        assert res.counts["repeated_tools"] == 1
        assert res.diagnostics["repeated"] == [{"line": 6, "query_id": "6", "tool": ID["b"], "times": 3}]

    def test_query_absent_from_truth(self, files):
        preds, truth = files
        preds.write_text(preds.read_text() + json.dumps({"query_id": 99, "selected_tools": []}) + "\n")
        with pytest.raises(tbs.SelectionLogError, match=r"predictions.jsonl:7:query_id: query 99 is not in the "
                                                        r"ground truth"):
            subset_selection_metrics(preds, truth, n_resamples=0)

    def test_duplicate_query_ids(self, files):
        preds, truth = files
        preds.write_text(preds.read_text() + json.dumps({"query_id": 2, "selected_tools": []}) + "\n")
        with pytest.raises(tbs.SelectionLogError, match=r"predictions.jsonl:7:query_id: duplicate query_id 2 "
                                                        r"\(first on line 2\)"):
            subset_selection_metrics(preds, truth, n_resamples=0)
        preds.write_text("\n".join(preds.read_text().splitlines()[:6]) + "\n")
        t = _truth_obj()
        truth.write_text(json.dumps(t + [t[0]]))
        with pytest.raises(tbs.SelectionLogError, match=r"truth.json:7:query_id: duplicate query_id 1"):
            subset_selection_metrics(preds, truth, n_resamples=0)

    def test_missing_prediction_is_not_dropped(self, files):
        preds, truth = files
        preds.write_text("\n".join(preds.read_text().splitlines()[:-1]) + "\n")
        with pytest.raises(tbs.SelectionLogError, match=r"truth.json:6:query_id: query 6 has no prediction"):
            subset_selection_metrics(preds, truth, n_resamples=0)
        res = subset_selection_metrics(preds, truth, missing="empty", n_resamples=0)
        assert res.overall["n"] == 6 and res.counts["empty_predictions"] == 2

    def test_malformed_lines_and_fields(self, files):
        preds, truth = files
        preds.write_text('{"query_id": 1, "selected_tools": []}\n{"query_id": "2", "selected_tools": []}\n'
                         '{"query_id": 3, "selected_tools": "a"}\n{oops\n')
        with pytest.raises(tbs.SelectionLogError) as e:
            subset_selection_metrics(preds, truth, n_resamples=0)
        text = str(e.value)
        assert "predictions.jsonl:2:query_id: expected an integer, got '2'" in text
        assert "predictions.jsonl:3:selected_tools: expected a list of tool ids" in text
        assert "predictions.jsonl:4:col 2: malformed JSON" in text

    def test_truth_api_without_names(self, files):
        preds, truth = files
        t = _truth_obj()
        t[2]["correct_apis"][0] = {"tool": "Alpha API"}
        truth.write_text(json.dumps(t))
        with pytest.raises(tbs.SelectionLogError, match=r"truth.json:3:correct_apis\[1\]: expected"):
            subset_selection_metrics(preds, truth, n_resamples=0)

    def test_table_values(self, tmp_path):
        p = tmp_path / "t.csv"
        p.write_text("query_id,tool_id,selected,correct\n1,a,1,1\n1,a,0,1\n2,b,2,1\n")
        with pytest.raises(tbs.SelectionLogError) as e:
            read_subset_table(p)
        assert "t.csv:3:selected: expected 0 or 1, got '2'" in str(e.value)
        assert "t.csv:2:tool_id: duplicate row for query '1', tool 'a'" in str(e.value)


class TestMitigationDistribution:
    def test_uniform_over_predicted_subset_by_hand(self, files):
        res = mitigation_distribution(*files, n_resamples=200, rng=2)
        c1 = res.shares[res.shares["cluster"] == "1"].set_index("tool_id")["share"]
        # q1 {a, b}: 1/2 each; q2 {a}: 1 -> a 0.75, b 0.25; delta_API = 0.25
        assert c1[ID["a"]] == pytest.approx(0.75) and c1[ID["b"]] == pytest.approx(0.25)
        cl = res.clusters.set_index("cluster")
        assert cl.loc["1", "delta_api"] == pytest.approx(0.25)
        # cluster 2: q3 {a, b, c, x}: x is outside the cluster's tools (1/4 removed), q4 empty (no selection)
        assert cl.loc["2", "n_selecting"] == 1 and cl.loc["2", "outside_share"] == pytest.approx(0.25)
        assert cl.loc["2", "delta_api"] == pytest.approx(0.0)
        # cluster 3: q5 {a,b,c,d} 1/4 each, q6 {b, y}: b 1/2 (y outside) -> a .125/.75 ...
        w = np.array([0.25, 0.75, 0.25, 0.25]) / 1.5
        assert cl.loc["3", "delta_api"] == pytest.approx(0.5 * np.abs(w - 0.25).sum())
        assert res.delta_api == pytest.approx(np.mean([0.25, 0.0, 0.5 * np.abs(w - 0.25).sum()]))
        json.dumps(res.to_dict(), allow_nan=False)
