"""Validation-protocol functions against hand computations, scipy, statsmodels and scikit-learn."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from toolbias_stats.shadow import VALIDATION_STATUS, ab_primary_outcome, calibration_in_the_large, discrimination_auc


class TestABPrimaryOutcome:
    def test_paired_hand_computed(self):
        # 10 tasks: b = 6 correct under M only, c = 2 under M' only, 2 concordant
        m = [1] * 6 + [0] * 2 + [1, 0]
        mp = [0] * 6 + [1] * 2 + [1, 0]
        r = ab_primary_outcome(m, mp)
        assert r.table == {"b": 6, "c": 2, "concordant": 2}
        assert r.log_or == pytest.approx(math.log(3))
        assert r.se == pytest.approx(math.sqrt(1 / 6 + 1 / 2))
        assert r.ci.low == pytest.approx(math.log(3) - 1.959964 * math.sqrt(2 / 3), abs=1e-5)
        # exact McNemar = two-sided binomial test of 6 of 8
        assert r.p_value == pytest.approx(stats.binomtest(6, 8, 0.5).pvalue)
        assert VALIDATION_STATUS in r.status and "no harness has been validated" in r.status

    def test_unpaired_woolf(self):
        m = np.r_[np.ones(30), np.zeros(10)]
        mp = np.r_[np.ones(18), np.zeros(22)]
        r = ab_primary_outcome(m, mp, paired=False)
        lor = math.log(30 * 22 / (10 * 18))
        se = math.sqrt(1 / 30 + 1 / 10 + 1 / 18 + 1 / 22)
        assert r.log_or == pytest.approx(lor) and r.se == pytest.approx(se)
        assert r.ci.high == pytest.approx(lor + 1.959964 * se, abs=1e-5)

    def test_errors(self):
        with pytest.raises(ValueError, match="only 0 and 1"):
            ab_primary_outcome([0, 2], [1, 1])
        with pytest.raises(ValueError, match="equal lengths"):
            ab_primary_outcome([0, 1, 1], [1, 1])


class TestCalibration:
    def test_t_interval(self):
        obs = np.array([55.0, 61, 70, 48, 66])
        pred = np.array([50.0, 58, 72, 49, 60])
        d = obs - pred
        r = calibration_in_the_large(obs, pred)
        lo, hi = stats.t.interval(0.95, len(d) - 1, loc=d.mean(), scale=stats.sem(d))
        assert r.difference == pytest.approx(d.mean())
        assert r.ci.low == pytest.approx(lo) and r.ci.high == pytest.approx(hi)
        assert r.met == bool(abs(d.mean()) <= 7)
        assert r.demonstrated == bool(lo >= -7 and hi <= 7)

    def test_errors(self):
        with pytest.raises(ValueError, match="equal length >= 2"):
            calibration_in_the_large([1], [1])


class TestDiscrimination:
    def test_auc_matches_sklearn_and_delong_se_matches_bootstrap(self):
        from sklearn.metrics import roc_auc_score

        gen = np.random.default_rng(0)
        y = gen.integers(0, 2, 300)
        s = np.round(gen.normal(y * 0.8, 1.0), 1)  # ties on purpose
        r = discrimination_auc(s, y)
        assert r.auc == pytest.approx(roc_auc_score(y, s))
        boots = []
        for _ in range(1500):
            i = gen.integers(0, 300, 300)
            if y[i].min() != y[i].max():
                boots.append(roc_auc_score(y[i], s[i]))
        assert r.se == pytest.approx(np.std(boots), rel=0.12)
        assert r.met and r.target == 0.65

    def test_perfect_and_errors(self):
        r = discrimination_auc([0.1, 0.2, 0.8, 0.9], [0, 0, 1, 1])
        assert r.auc == 1.0 and r.ci.high == 1.0
        with pytest.raises(ValueError, match="at least 2 positive"):
            discrimination_auc([0.1, 0.2, 0.3], [0, 0, 1])
