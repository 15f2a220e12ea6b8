"""delta_pos over items with different numbers of options K (issue 35, item 4): weighted by answers by default,
per-K values beside it, a note when the K groups are unbalanced. Large version: analyses/choice_mixed_K_coverage.py."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from toolbias_stats.choice import ChoiceLog, k_weighted_delta_pos, option_position_bias


def mixed_frame(seed=0, design=((3, 60), (4, 4), (5, 2)), bias=0.3, models=("a", "b")) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    rows = []
    for m in models:
        for k, n_items in design:
            for i in range(n_items):
                for r in range(k):
                    ok = rng.random() > 0.05
                    pick = (1 if rng.random() < bias else int(rng.integers(1, k + 1))) if ok else None
                    rows.append({"model": m, "item_id": f"K{k}-{i}", "n_options": k,
                                 "options": json.dumps([f"{i}-{(j + r) % k}" for j in range(k)]),
                                 "status": "ok" if ok else "no_answer", "chosen_position": pick})
    return pd.DataFrame(rows)


def direct(frame: pd.DataFrame, weights: str) -> pd.Series:
    ok = frame[frame["status"] == "ok"]
    out = {}
    for m, sub in ok.groupby("model"):
        tv, w = [], []
        for k, part in sub.groupby("n_options"):
            share = part["chosen_position"].value_counts(normalize=True).reindex(range(1, k + 1), fill_value=0)
            tv.append(0.5 * (share - 1 / k).abs().sum())
            w.append({"answers": len(part), "items": part["item_id"].nunique(), "k": 1}[weights])
        out[m] = np.dot(tv, w) / np.sum(w)
    return pd.Series(out)


class TestKWeightedDeltaPos:
    @pytest.mark.parametrize("weights", ["answers", "items", "k"])
    def test_equals_direct_pandas_computation(self, weights):
        frame = mixed_frame()
        w, by_k = k_weighted_delta_pos(ChoiceLog.from_frame(frame), weights=weights, n_resamples=0)
        np.testing.assert_allclose(w.set_index("model")["delta_pos"], direct(frame, weights), rtol=1e-12)
        np.testing.assert_allclose(w.set_index("model")["unweighted"], direct(frame, "k"), rtol=1e-12)
        assert by_k.groupby("model")["n_answers"].sum().to_dict() == \
            frame[frame["status"] == "ok"].groupby("model").size().to_dict()

    def test_unweighted_equals_the_tool_machinery_and_single_k_is_unchanged(self):
        frame = mixed_frame(models=("a",))
        res = option_position_bias(ChoiceLog.from_frame(frame), n_resamples=50, n_null=20, rng=0).to_frame().iloc[0]
        assert res["mean_over_runs"] == pytest.approx(direct(frame, "k")["a"])
        assert res["weighted"] == pytest.approx(direct(frame, "answers")["a"]) and res["weights"] == "answers"
        assert "unbalanced" in res["k_note"] and "K=5 5%" in res["k_note"]
        one = mixed_frame(design=((4, 30),), models=("a",))
        r1 = option_position_bias(ChoiceLog.from_frame(one), n_resamples=50, n_null=20, rng=0).to_frame().iloc[0]
        assert r1["weighted"] == pytest.approx(r1["pooled"]) and r1["n_k"] == 1 and r1["k_note"] is None

    def test_bad_weights(self):
        with pytest.raises(ValueError, match=r"`weights` must be one of \['answers', 'items', 'k'\]; got 'x'"):
            k_weighted_delta_pos(ChoiceLog.from_frame(mixed_frame(models=("a",))), weights="x")

    def test_json_and_text(self):
        from toolbias_stats._text import format_choice_position_text

        res = option_position_bias(ChoiceLog.from_frame(mixed_frame(models=("a",))), n_resamples=30, n_null=20,
                                   rng=0)
        d = res.to_dict()
        assert len(d["by_k"]) == 3 and len(d["by_k"][0]["ci"]) == 2 and len(d["delta_pos"][0]["weighted_ci"]) == 2
        text = format_choice_position_text(res)
        assert "delta_pos weighted by answers over 3 K groups" in text and "unweighted mean over K" in text


def test_coverage_unbalanced_k_small():
    """96% / 3% / 1% of the answers in K = 3, 4, 5 (small version of analyses/choice_mixed_K_coverage.py)."""
    design, m, conc = ((3, 96), (4, 2), (5, 1)), 0.3, 6.0
    n = np.array([k * i for k, i in design], float)
    truth = float(np.dot(n / n.sum(), [m * (k - 1) / k for k, _ in design]))
    rng = np.random.default_rng(5)
    hits, corrected = [], []
    for _ in range(60):
        rows = []
        for k, items in design:
            s = rng.beta(m * conc, (1 - m) * conc, items)
            for i in range(items):
                for r in range(k):
                    rows.append({"item_id": f"K{k}-{i}", "n_options": k, "status": "ok",
                                 "options": json.dumps([f"{i}-{(j + r) % k}" for j in range(k)]),
                                 "chosen_position": 1 if rng.random() < s[i] else int(rng.integers(1, k + 1))})
        w, _ = k_weighted_delta_pos(ChoiceLog.from_frame(pd.DataFrame(rows)), by=(), n_resamples=250, rng=rng)
        hits.append(w.iloc[0]["ci_low"] <= truth <= w.iloc[0]["ci_high"])
        corrected.append(w.iloc[0]["corrected_ci_low"] <= truth <= w.iloc[0]["corrected_ci_high"])
    assert np.mean(hits) >= 0.86          # nominal 0.95; 60 studies: MC s.e. ~0.028
    assert np.mean(corrected) >= 0.86
