"""Coverage of the multiple-choice and judge intervals, by simulating the example study's choosers many times.

Same design and choosers as analyses/inspect_make_example.py (80 items x 4 rotations; 60 judged pairs in both
orders), drawn with NumPy instead of through Inspect (Inspect only records what the chooser answers; the reader is
tested separately), R times. For each replicate the package's functions compute their intervals; the script
reports how often each 95% interval covers the value the chooser implies.

Usage::

    nice python analyses/inspect_choice_coverage.py [R]      # default R = 300 (about 2 minutes on 2 cores)
"""

from __future__ import annotations

import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))

from inspect_make_example import N_ITEMS, N_PAIRS, P_JUDGE, W_POS, item_difficulty, truth

from toolbias_stats.choice import ChoiceLog, accuracy_by_gold_position, judge_consistency, option_position_bias


def simulate_mc(rng) -> ChoiceLog:
    rows = []
    for i in range(N_ITEMS):
        q = item_difficulty(i)
        for r in range(4):
            gold = (4 - r) % 4 + 1
            pick = gold if rng.random() < q else int(rng.choice(4, p=W_POS)) + 1
            rows.append({"model": "sim", "item_id": f"i{i}", "epoch": r + 1, "n_options": 4,
                         "options": json.dumps([f"{i}-{(r + j) % 4}" for j in range(4)]), "chosen_position": pick,
                         "gold_position": gold, "gold_positions": str(gold), "status": "ok"})
    return ChoiceLog.from_frame(pd.DataFrame(rows))


def simulate_judge(rng) -> ChoiceLog:
    rows = []
    for j in range(N_PAIRS):
        good, bad = f"g{j}", f"b{j}"
        for order in ((good, bad), (bad, good)):
            better = order.index(good) + 1
            pick = better if rng.random() < P_JUDGE else 1
            rows.append({"model": "sim", "item_id": f"p{j}", "n_options": 2, "options": json.dumps(list(order)),
                         "chosen_position": pick, "gold_position": better, "status": "ok", "question": f"pair {j}"})
    return ChoiceLog.from_frame(pd.DataFrame(rows))


def main(reps: int = 300, n_resamples: int = 1000, seed: int = 7) -> dict:
    t = truth()
    rng = np.random.default_rng(seed)
    hits = {k: [] for k in ("accuracy_gold_at_p (x4)", "accuracy under random orderings",
                            "delta_pos plug-in BCa", "delta_pos bias-corrected calibrated",
                            "judge consistency (Wilson)", "judge first-position rate (pair bootstrap)")}
    start = time.time()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(reps):
            mc = simulate_mc(rng)
            acc = accuracy_by_gold_position(mc, n_resamples=n_resamples, rng=rng)
            pos = acc.positions
            for p in range(4):
                true = t["mc_accuracy_by_gold_position"][p]
                hits["accuracy_gold_at_p (x4)"].append(pos["ci_low"][p] <= true <= pos["ci_high"][p])
            s = acc.overview.iloc[0]
            hits["accuracy under random orderings"].append(
                s["corrected_ci_low"] <= t["mc_corrected_accuracy"] <= s["corrected_ci_high"])
            b = option_position_bias(mc, n_resamples=n_resamples, n_null=0, rng=rng).to_frame().iloc[0]
            hits["delta_pos plug-in BCa"].append(b["ci_low"] <= t["mc_rotated_delta_pos"] <= b["ci_high"])
            hits["delta_pos bias-corrected calibrated"].append(
                b["corrected_ci_low"] <= t["mc_rotated_delta_pos"] <= b["corrected_ci_high"])
            j = judge_consistency(simulate_judge(rng), n_resamples=n_resamples, rng=rng).to_frame().iloc[0]
            hits["judge consistency (Wilson)"].append(
                j["consistency_ci_low"] <= t["judge_consistency"] <= j["consistency_ci_high"])
            hits["judge first-position rate (pair bootstrap)"].append(
                j["first_ci_low"] <= t["judge_first_position_rate"] <= j["first_ci_high"])
    out = {k: float(np.mean(v)) for k, v in hits.items()}
    print(f"{reps} replicates x {n_resamples} bootstrap resamples, nominal 95% ({time.time() - start:.0f} s)")
    for k, v in out.items():
        n = len(hits[k])
        se = np.sqrt(v * (1 - v) / n)
        print(f"  {k:<45} coverage {v:.3f} (MC s.e. {se:.3f}, {n} intervals)")
    return out


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 300)
