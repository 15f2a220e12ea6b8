"""Error rates of the gate by simulation, the small version of ``analyses/gate_error_rates.py`` (issue 39).

Small studies (5 clusters x 5 tools x 30 queries x 5 rotations, 1 run: 750 attempts; ``compare``: 60 queries and
1000 permutations) and 200 bootstrap replicates;
the full-size rates (the bundled study's 15,000 attempts per model, the defaults) are in
``analyses/gate_error_rates.json`` and docs/guide/ci_gate.md. Seeded, so every count below is deterministic; the
bounds leave room for Monte-Carlo error: e.g. 3 of 30 is 10%, and 4 or more failures of 30 would have probability
0.04 if the true rate were the nominal 2.5%.
"""

from __future__ import annotations

import warnings

import pytest

from toolbias_stats.gate import check_selection_bias, compare_selection
from toolbias_stats.io import SelectionLog
from toolbias_stats.simulate import simulate_selection_log

SMALL = dict(n_clusters=5, n_tools=5, n_queries=30, n_runs=1)
#: compare: twice the queries (at 750 attempts per version a 0.20 shift against 0.10 is found 7 times in 10)
PAIR = dict(SMALL, n_queries=60)
X, Z = 0.20, 0.10


def preference(tv, k=5):
    """One favourite: TV distance to uniform exactly ``tv``."""
    top = 1 / k + tv
    return [top] + [(1 - top) / (k - 1)] * (k - 1)


def _check_outcomes(true, reps, seed):
    out = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for r in range(reps):
            sim = simulate_selection_log(**SMALL, position_probs=preference(true), rng=seed + r)
            assert sim.delta_pos == pytest.approx(true)
            res = check_selection_bias(sim.log, max_delta_pos=X, n_resamples=200, plan=False, rng=seed + 500 + r)
            out.append(res.decisions[0].outcome)
    return out


def test_check_at_the_threshold():
    outcomes = _check_outcomes(X, 30, seed=100)
    exceeds_fail = outcomes.count("above")      # exceeds fails only when the interval is wholly above
    within_pass = outcomes.count("below")       # within passes only when it is wholly below
    assert exceeds_fail <= 3, outcomes
    assert within_pass <= 3, outcomes
    assert outcomes.count("cannot tell") >= 24


def test_check_0_10_above_the_threshold():
    outcomes = _check_outcomes(X + 0.10, 12, seed=200)
    assert outcomes.count("above") >= 10, outcomes


def _relabel(log):
    return SelectionLog.from_frame(log.data.assign(query_id="n-" + log.data["query_id"].astype(str)), log.catalog)


def _compare_fails(shift, pairing, reps, seed):
    fails = 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for r in range(reps):
            base = simulate_selection_log(**PAIR, rng=seed + r)
            new = simulate_selection_log(**PAIR, position_probs=preference(shift) if shift else None,
                                         rng=seed + 500 + r)
            new_log = new.log if pairing == "paired" else _relabel(new.log)
            # 1000 permutations: Holm over 25 tools can reject (smallest adjusted p 25 / 1001 < 0.05)
            res = compare_selection(base.log, new_log, max_shift=Z, n_resamples=200, n_permutations=1000,
                                    rng=seed + 900 + r)
            assert [d.outcome for d in res.decisions if d.metric == "tools"] != ["cannot tell"]
            assert res.settings["pairing_used"] == ("paired" if pairing == "paired" else "independent")
            fails += res.exit_code
    return fails


@pytest.mark.parametrize("pairing", ["paired", "unpaired"])
def test_compare_no_shift_rarely_fails(pairing):
    assert _compare_fails(0.0, pairing, 12, seed=300) <= 1


@pytest.mark.parametrize("pairing", ["paired", "unpaired"])
def test_compare_shift_0_10_above_the_threshold_fails(pairing):
    assert _compare_fails(Z + 0.10, pairing, 8, seed=400) >= 7
