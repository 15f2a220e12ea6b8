"""Issue 35: the report's Experiments section compares factors only; shift intervals stay within their range."""

import warnings

import numpy as np
import pandas as pd
import pytest

from toolbias_stats.experiments import selection_shift, simulate_conditions
from toolbias_stats.experiments._shift_results import MIN_UNITS
from toolbias_stats.io import SelectionLog, Study
from toolbias_stats.report._build import _comparisons, experiments_for_study

PREFS = np.array([0.40, 0.25, 0.15, 0.12, 0.08])


def repeated_requests(gen, n_queries=12):
    """One condition; a random quarter of the requests sent a second time (the API readers' ``attempt`` = 2)."""
    log = simulate_conditions({"base": (np.tile(PREFS, (2, 1)), None)}, n_queries=n_queries, rng=gen)
    frame = log.to_frame().assign(attempt=1)
    again = frame.sample(frac=0.25, random_state=int(gen.integers(2**31))).assign(attempt=2)
    out = pd.concat([frame, again], ignore_index=True)
    out["source_row"] = np.arange(1, len(out) + 1)
    return SelectionLog.from_frame(out, log.catalog)


class TestExperimentsOnFactorsOnly:
    def test_attempt_is_never_an_experiment(self):
        log = repeated_requests(np.random.default_rng(0))
        assert log.design.replicates == ("run", "attempt")
        assert _comparisons(log.counts()) == []
        found = experiments_for_study(Study(log), n_resamples=50, n_permutations=50, rng=1)
        assert found["results"] == []                # no "attempt 2 vs 1" section

    def test_a_declared_factor_is_compared(self):
        log = repeated_requests(np.random.default_rng(1)).with_design(factors=["attempt"])
        assert _comparisons(log.counts()) == [("attempt", 1)]

    def test_a_numeric_factor_is_compared_and_a_replicate_is_not(self):
        pref = np.tile(PREFS, (2, 1))
        log = simulate_conditions({0.0: (pref, None), 1.0: (pref, None)}, n_queries=12, column="temperature", rng=2)
        assert _comparisons(log.counts()) == [("temperature", 0.0)]
        assert _comparisons(log.with_design(replicates=["temperature"]).counts()) == []


class TestShiftRanges:
    def test_intervals_stay_in_range_on_repeated_requests(self):
        """The compared level holds a few repeated requests: no interval (it says why), p-values in (0, 1]."""
        log = repeated_requests(np.random.default_rng(3))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res = selection_shift(log, between="attempt", base=1, by=[], n_resamples=100, n_permutations=100, rng=1)
        g = res.groups[0]
        for s in (g.shift_api, g.shift_pos):
            assert ("no interval" in s.note and f"at least {MIN_UNITS}" in s.note) or \
                (0 <= s.corrected_ci.low <= s.corrected_ci.high <= 1)
            assert 0 < s.p_value <= 1
        for c in g.change.values():
            lo, hi = c.corrected_ci
            assert np.isnan(lo) or -1 <= lo <= hi <= 1

    def test_shift_interval_is_a_tv_distance(self):
        from toolbias_stats.experiments import calibrated_mean_shift

        gen = np.random.default_rng(4)
        diffs = [np.array([0.9, -0.9, 0.0])]                       # nearly disjoint distributions, very noisy
        boot = [diffs[0] + gen.normal(0, 0.4, size=(400, 3))]
        res = calibrated_mean_shift(diffs, boot)
        assert 0 <= res.ci_low <= res.estimate <= res.ci_high <= 1


class TestCorrectedChange:
    """The change in delta from the two levels' calibrated deltas, with a MOVER interval (issue 35)."""

    def test_mover_combines_the_two_calibrated_intervals(self):
        from toolbias_stats.experiments._shift_group import _mover_change
        from toolbias_stats.metrics._calibrated import calibrated_mean_tv

        gen = np.random.default_rng(5)
        cb, cl = [np.array([30, 25, 20, 15, 10])], [np.array([20, 20, 20, 20, 20])]
        bb = [gen.multinomial(100, cb[0] / 100, size=200)]
        bl = [gen.multinomial(100, cl[0] / 100, size=200)]
        got = _mover_change([{"cb": cb, "cl": cl, "bcb": bb, "bcl": bl}], 0.95)
        b = calibrated_mean_tv(cb, bb, confidence_level=0.95)
        lv = calibrated_mean_tv(cl, bl, confidence_level=0.95)
        d = lv.estimate - b.estimate
        assert got["corrected"] == pytest.approx(d)
        assert got["corrected_ci"].low == pytest.approx(
            d - np.hypot(lv.estimate - lv.ci_low, b.ci_high - b.estimate))
        assert got["corrected_ci"].high == pytest.approx(
            d + np.hypot(lv.ci_high - lv.estimate, b.estimate - b.ci_low))

    def test_in_the_result_and_its_frame(self):
        pref = np.tile(PREFS, (2, 1))
        log = simulate_conditions({"base": (pref, None), "first": (pref, [1.5, 1, 1, 1, 1])}, n_queries=20, rng=6)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res = selection_shift(log, by=[], n_resamples=100, n_permutations=50, rng=1)
        c = res.groups[0].change["delta_pos"]
        assert -1 <= c.corrected_ci.low <= c.corrected <= c.corrected_ci.high <= 1 and c.note == ""
        row = res.to_frame().set_index("metric").loc["delta_pos"]
        assert row["corrected"] == c.corrected and row["corrected_ci_high"] == c.corrected_ci.high
