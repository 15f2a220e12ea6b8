"""Rc@k / Rf@k / IS@k on a hand-made fixture, interval formulas against hand computations and theory."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from toolbias_stats.toolsense import (
    compare_configurations,
    delta_ratio_ci,
    fieller_ratio_ci,
    internalization_score,
    read_rrb,
    read_rrb_predictions,
    retrieval_recall,
)


@pytest.fixture
def scored(rrb_file, pred_file):
    bench = read_rrb(rrb_file)
    preds = read_rrb_predictions(pred_file, bench, k=[1, 3])
    return bench, preds, retrieval_recall(bench, preds, k=[1, 3], n_resamples=500, rng=3)


class TestRetrievalRecall:
    def test_known_values(self, scored):
        # worked out by hand from tests/toolsense/conftest.py::PREDICTIONS (first hit rank per query):
        # constrained e1 1, e2 3, m1 2, m2 -, h1 1, h2 3 ; free e1 2, e2 -, m1 1, m2 -, h1 1, h2 -
        _, _, res = scored
        e = res.estimates
        assert e[("model", "all", 1)]["rc"].estimate == pytest.approx(2 / 6)
        assert e[("model", "all", 1)]["rf"].estimate == pytest.approx(2 / 6)
        assert e[("model", "all", 1)]["is"].estimate == pytest.approx(1.0)
        assert e[("model", "all", 3)]["rc"].estimate == pytest.approx(5 / 6)
        assert e[("model", "all", 3)]["rf"].estimate == pytest.approx(3 / 6)
        assert e[("model", "all", 3)]["is"].estimate == pytest.approx(0.6)
        assert e[("model", "easy", 1)]["rc"].estimate == 0.5
        assert e[("model", "hard", 3)]["rf"].estimate == 0.5
        # medium at k=1: Rc = 0, so IS = 0 by the paper's Eq. 2 (and the Fieller set is [0, inf))
        med = e[("model", "medium", 1)]
        assert med["rc"].estimate == 0 and med["rf"].estimate == 0.5
        assert med["is"].estimate == 0.0
        assert med["is"].ci_fieller == (0.0, math.inf)

    def test_invalid_names_are_misses_and_reported(self, scored):
        _, _, res = scored
        assert res.invalid["model"]["free"] == {"names": 18, "invalid": 1, "rate": 1 / 18, "queries_with_invalid": 1}
        assert res.invalid["model"]["constrained"]["invalid"] == 0
        assert any("not tools" in w for w in res.warnings)

    def test_missing_decoding_gives_null(self, rrb_file, pred_file):
        bench = read_rrb(rrb_file)
        preds = read_rrb_predictions(pred_file, bench).drop(columns="free")
        res = retrieval_recall(bench, preds, k=[1], n_resamples=0)
        row = res.rows()[0]
        assert row["rf"] is None and row["is"] is None and row["rc"]["estimate"] == 0.5
        text = json.dumps(res.to_dict(), allow_nan=False)  # strict JSON
        assert "NaN" not in text

    def test_bootstrap_se_matches_binomial_theory(self):
        # one tier of 400 queries with hit probability 0.3: bootstrap SE ~ sqrt(p(1-p)/n)
        from toolbias_stats.toolsense import RRBBenchmark

        n = 400
        rng = np.random.default_rng(0)
        hits = rng.random(n) < 0.3
        q = pd.DataFrame({"sample_id": [f"q{i}" for i in range(n)], "query": "q", "tier": "easy",
                          "answers": [(f"t{i}",) for i in range(n)], "pool": [(f"t{i}", "w") for i in range(n)]})
        tools = pd.DataFrame({"tool_name": [f"t{i}" for i in range(n)] + ["w"]})
        bench = RRBBenchmark(queries=q, tools=tools, path="<mem>")
        preds = pd.DataFrame({"sample_id": q["sample_id"], "constrained": [(f"t{i}",) if h else ("w",)
                                                                           for i, h in enumerate(hits)]})
        res = retrieval_recall(bench, preds, k=[1], n_resamples=4000, rng=1)
        e = res.estimates[("model", "all", 1)]["rc"]
        p = hits.mean()
        assert e.standard_error == pytest.approx(math.sqrt(p * (1 - p) / n), rel=0.08)
        # the percentile interval is close to the Wald interval at this size
        assert e.ci_percentile.low == pytest.approx(p - 1.96 * math.sqrt(p * (1 - p) / n), abs=0.01)

    def test_same_seed_same_result(self, rrb_file, pred_file):
        bench = read_rrb(rrb_file)
        preds = read_rrb_predictions(pred_file, bench)
        a = retrieval_recall(bench, preds, k=[3], n_resamples=200, rng=7).to_frame()
        b = retrieval_recall(bench, preds, k=[3], n_resamples=200, rng=7).to_frame()
        pd.testing.assert_frame_equal(a, b)

    def test_bad_arguments(self, rrb_file, pred_file):
        bench = read_rrb(rrb_file)
        preds = read_rrb_predictions(pred_file, bench)
        with pytest.raises(ValueError, match="`k` must be positive integers"):
            retrieval_recall(bench, preds, k=[0])
        with pytest.raises(ValueError, match="`ci_method` must be one of"):
            retrieval_recall(bench, preds, ci_method="basic")


class TestIntervals:
    def test_internalization_score(self):
        assert internalization_score([0.2, 0.0], [0.4, 0.0]).tolist() == [0.5, 0.0]

    def test_fieller_solves_the_quadratic(self):
        # the bounds are where (f - t c)^2 = z^2 (vf - 2 t cov + t^2 vc), solved here with numpy.roots
        f, c, vf, vc, cov = 0.38, 0.45, 0.00047, 0.0005, 0.0004
        z2 = stats.norm.ppf(0.975) ** 2
        roots = np.sort(np.roots([c**2 - z2 * vc, -2 * (f * c - z2 * cov), f**2 - z2 * vf]).real)
        lo, hi = fieller_ratio_ci(f, c, vf, vc, cov)
        assert (lo, hi) == pytest.approx(tuple(roots))
        assert lo < f / c < hi

    def test_fieller_unbounded_when_denominator_not_significant(self):
        lo, hi = fieller_ratio_ci(0.01, 0.01, 0.0001, 0.0001, 0.0)
        assert lo == 0.0 and hi == math.inf

    def test_delta_is_the_papers_formula(self):
        # Appendix G: sigma_x = half-width / 1.96; sigma_IS = IS sqrt((sf/Rf)^2 + (sc/Rc)^2); clip to [0, 1]
        rf, rc = 0.3, 0.4
        is_ = rf / rc
        sf, sc = 0.04 / stats.norm.ppf(0.975), 0.05 / stats.norm.ppf(0.975)
        s = is_ * math.sqrt((sf / rf) ** 2 + (sc / rc) ** 2)
        z = stats.norm.ppf(0.975)
        lo, hi = delta_ratio_ci(is_, rf, rc, (0.26, 0.34), (0.35, 0.45))
        assert lo == pytest.approx(max(is_ - z * s, 0))
        assert hi == pytest.approx(min(is_ + z * s, 1))

    def test_delta_clips_at_one(self):
        _, hi = delta_ratio_ci(1.1, 0.44, 0.40, (0.40, 0.48), (0.36, 0.44))
        assert hi == 1.0  # a true IS of 1.1 can never be covered: docs/guide/toolsense_overview.md shows 0%


class TestCompareConfigurations:
    def test_mcnemar_holm_against_independent_references(self, rrb_file, pred_file):
        bench = read_rrb(rrb_file)
        a = read_rrb_predictions(pred_file, bench)
        b = a.copy()
        b["constrained"] = b["free"]  # config b's constrained list = a's free list
        res = retrieval_recall(bench, {"a": a, "b": b}, k=[1, 3], n_resamples=300, rng=2)
        cmp = compare_configurations(res, k=[1, 3]).to_frame()
        r3 = cmp[cmp["k"] == 3].iloc[0]
        # k=3: a hits e1 e2 m1 h1 h2, b hits e1 m1 h1 -> discordant only_a = 2 (e2, h2), only_b = 0
        assert (r3.only_a, r3.only_b) == (2, 0)
        assert r3.difference == pytest.approx(2 / 6)
        # exact McNemar = two-sided binomial test on the discordant pairs
        assert r3.p_mcnemar == pytest.approx(stats.binomtest(2, 2, 0.5).pvalue)
        # Holm by hand over the two rows
        p = np.sort(cmp["p_mcnemar"].to_numpy())
        holm = np.minimum(1, np.maximum.accumulate(p * np.array([2, 1])))
        assert np.sort(cmp["p_holm"].to_numpy()) == pytest.approx(holm)
        # paired bootstrap: identical replicates give a zero-width interval for a config against itself
        same = retrieval_recall(bench, {"a": a, "a2": a}, k=[3], n_resamples=100, rng=1)
        row = compare_configurations(same).to_frame().iloc[0]
        assert (row.ci_low, row.ci_high, row.p_mcnemar) == (0.0, 0.0, 1.0)
