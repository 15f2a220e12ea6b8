"""Baselines with a fake encoder and tiny texts (the real MiniLM run is the `toolsense baselines` command)."""

from __future__ import annotations

import numpy as np
import pytest

from toolbias_stats.toolsense import (
    bm25_rankings,
    correct_set_bias,
    dense_rankings,
    read_rrb,
    read_rrb_predictions,
    retrieval_baselines,
    tool_text,
)


class LetterEncoder:
    """Bag-of-letters vectors: deterministic, instant, enough to rank tiny texts."""

    def encode(self, texts):
        out = np.zeros((len(texts), 26))
        for i, t in enumerate(texts):
            for ch in t.lower():
                if "a" <= ch <= "z":
                    out[i, ord(ch) - 97] += 1
        return out + 1e-9


class ConstantEncoder:
    def encode(self, texts):
        return np.ones((len(texts), 4))


def test_tool_text():
    rrb = read_rrb()
    text = tool_text(rrb.tools.head(1))[0]
    assert rrb.tools.iloc[0]["tool_title"] in text and rrb.tools.iloc[0]["tool_description"] in text


def test_bm25_finds_the_matching_tool(rrb_file):
    bench = read_rrb(rrb_file)
    # query "query h1" shares no word with tools; rewrite queries to name an answer's description
    bench.queries["query"] = ["does a1", "does b1", "does c2", "does d1", "does e4", "does f3"]
    r = bm25_rankings(bench, scope="pool", k=7, rng=0)
    assert [lst[0] for lst in r["constrained"]] == ["a1&&go", "b1&&go", "c2&&go", "d1&&go", "e4&&go", "f3&&go"]
    cat = bm25_rankings(bench, scope="catalog", k=3, rng=0)
    assert cat["constrained"].iloc[0][0] == "a1&&go" and len(cat["constrained"].iloc[0]) == 3


def test_ties_are_not_broken_by_pool_order(rrb_file):
    # every score equal: the answer is listed first in each pool, but must win only at the random rate
    bench = read_rrb(rrb_file)
    firsts = [dense_rankings(bench, encoder=ConstantEncoder(), scope="pool", k=1, rng=s)["constrained"]
              .map(lambda t: t[0]) for s in range(40)]
    share = np.mean([(f == bench.queries["pool"].map(lambda p: p[0])).mean() for f in firsts])
    assert share < 0.5  # pools of 4-7 tools: ~0.2 at random, 1.0 if pool order leaked


def test_retrieval_baselines_with_fake_encoder(rrb_file):
    bench = read_rrb(rrb_file)
    res = retrieval_baselines(bench, encoder=LetterEncoder(), k=(1, 3), n_resamples=100, rng=0)
    assert res.recall.configs == ["bm25/pool", "bm25/catalog", "dense/pool", "dense/catalog"]
    d = res.to_dict()
    assert "not the paper's" in d["whose"]
    import json

    json.loads(json.dumps(d, allow_nan=False))
    assert set(res.seconds) == {"bm25", "dense"}


class TestCorrectSetBias:
    def test_always_first_slot_is_maximal_bias(self, rrb_file, pred_file):
        bench = read_rrb(rrb_file)
        preds = read_rrb_predictions(pred_file, bench)
        preds["constrained"] = [tuple(a) for a in bench.queries["answers"]]  # slot 0 always first
        res = correct_set_bias(bench, preds, n_resamples=100, n_null=500, rng=0).to_frame().set_index("k_answers")
        # K=2: two queries both on slot 0 -> TV = 1 - 1/2; K=4: TV = 1 - 1/4
        assert res.loc[2, "delta"] == pytest.approx(0.5) and res.loc[4, "delta"] == pytest.approx(0.75)
        assert res.loc[2, "first_listed_share"] == 1.0
        # uniform-chooser reference is the package's exact expectation
        from toolbias_stats import expected_tv_uniform

        assert res.loc[4, "null_expected"] == pytest.approx(expected_tv_uniform(2, 4))

    def test_uniform_ranker_is_not_flagged(self):
        import pandas as pd

        from toolbias_stats.toolsense import RRBBenchmark

        rng = np.random.default_rng(4)
        n = 600
        answers = [tuple(f"q{i}t{j}" for j in range(3)) for i in range(n)]
        q = pd.DataFrame({"sample_id": [f"q{i}" for i in range(n)], "tier": "medium", "answers": answers})
        bench = RRBBenchmark(queries=q, tools=pd.DataFrame({"tool_name": []}), path="<mem>")
        preds = pd.DataFrame({"sample_id": q["sample_id"],
                              "constrained": [tuple(rng.permutation(a)) for a in answers]})
        row = correct_set_bias(bench, preds, n_resamples=200, n_null=1000, rng=1).to_frame().iloc[-1]
        assert row.p_value > 0.01
        assert abs(row.delta - row.null_expected) < 0.05
