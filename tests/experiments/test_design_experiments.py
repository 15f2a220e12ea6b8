"""Issue 35: the report's Experiments section compares factors only; shift intervals stay within their range."""

import warnings

import numpy as np
import pandas as pd

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
