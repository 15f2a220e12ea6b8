"""Probe accuracy: Wilson interval and exact test against hand formulas; the knowledge-retrieval correlation."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from toolbias_stats.exceptions import SmallSampleWarning
from toolbias_stats.toolsense import probe_accuracy, probe_recall_correlation, read_probe, read_probe_predictions

from .conftest import write_jsonl


def wilson(x, n, z=1.959963984540054):
    p = x / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return centre - half, centre + half


class TestProbeAccuracy:
    def test_mcq_known_accuracy(self, mcq_file, tmp_path):
        bench = read_probe("mcq", mcq_file)
        # 5 of 8 right (one with different case and spaces), 2 wrong options, 1 answer not among the options
        answers = ["right 0", "  RIGHT 1 ", "right 2", "right 3", "right 4", "w5a", "w6b", "banana"]
        p = write_jsonl(tmp_path / "p.jsonl", [{"id": f"q{i}", "answer": a} for i, a in enumerate(answers)])
        res = probe_accuracy(bench, read_probe_predictions(p, bench))
        assert (res.n, res.n_correct, res.accuracy, res.n_invalid) == (8, 5, 5 / 8, 1)
        assert res.ci == pytest.approx(wilson(5, 8))
        # exact two-sided binomial p against chance 1/4, by summing the pmf (Clopper / "minlike" rule)
        pmf = stats.binom.pmf(np.arange(9), 8, 0.25)
        p_exact = pmf[pmf <= pmf[5] * (1 + 1e-7)].sum()
        assert res.p_value == pytest.approx(p_exact)
        assert res.chance == 0.25

    def test_qa_at_chance(self, qa_file):
        bench = read_probe("qa", qa_file)
        res = probe_accuracy(bench, pd.DataFrame({"id": bench.items["id"], "answer": "yes"}))
        assert res.accuracy == 0.5 and res.p_value == pytest.approx(1.0) and res.chance == 0.5
        d = res.to_dict()
        assert d["accuracy"]["estimate"] == 0.5 and len(d["accuracy"]["ci"]) == 2

    def test_bundled_probes(self):
        assert read_probe("mcq").n == 496 and read_probe("qa").n == 500
        assert read_probe("qa").items["answer"].value_counts().to_dict() == {"Yes": 250, "No": 250}


class TestCorrelation:
    def test_against_fisher_by_hand(self):
        x = [0.55, 0.33, 0.23, 0.41, 0.29, 0.73, 0.75, 0.62, 0.40, 0.31, 0.45, 0.50]
        y = [0.44, 0.43, 0.27, 0.43, 0.31, 0.55, 0.48, 0.52, 0.37, 0.30, 0.40, 0.47]
        res = probe_recall_correlation(x, y)
        r = np.corrcoef(x, y)[0, 1]
        zr, se = np.arctanh(r), 1 / math.sqrt(len(x) - 3)
        assert res.r == pytest.approx(r)
        assert res.ci == pytest.approx((math.tanh(zr - 1.959964 * se), math.tanh(zr + 1.959964 * se)), abs=1e-6)
        t = r * math.sqrt((len(x) - 2) / (1 - r * r))
        assert res.p_value == pytest.approx(2 * stats.t.sf(abs(t), len(x) - 2))

    def test_small_n_is_said(self):
        with pytest.warns(SmallSampleWarning):
            res = probe_recall_correlation([0.1, 0.2, 0.4, 0.3, 0.5], [0.2, 0.1, 0.5, 0.4, 0.6])
        assert any("small" in n for n in res.notes)
