"""delta_pos over items with different numbers of options K (issue 35, item 4): coverage of the answer-weighted
interval, and what the unweighted mean over K reported before.

Simulator (written here): a study with K = 3, 4, 5 items holding 96% / 3% / 1% of the answers (320 three-option
items, 8 four-option items, 2 five-option items, each shown in all K rotations: 960 / 32 / 10 answers). Item i
answers position 1 with probability s_i (its position bias, s_i ~ Beta(a, b) with mean m) and otherwise picks an
option uniformly at random, so the K-group's position bias is delta_K = m (K - 1) / K and the answer-weighted
target is sum_K w_K delta_K with w_K = the design's answer shares (960, 32, 10) / 1002. Cells: m = 0.15
(delta_3 = 0.10, the size of the real study in the issue) and m = 0.30.

For each study: ``k_weighted_delta_pos`` (weights = answers; items resampled within K groups; the percentile
interval and the bias-corrected one, shifted by the bootstrap estimate of the plug-in's upward bias) and,
before the change, the headline of ``option_position_bias``: the unweighted mean over K with its BCa interval
and its bias-corrected calibrated interval, both read as estimates of the answer-weighted target.
Reported: 95% coverage with the Monte-Carlo standard error, misses on each side, mean width.

Usage::

    nice python analyses/choice_mixed_K_coverage.py [STUDIES] [BEFORE_STUDIES]
    # defaults 500 and 60; writes analyses/choice_mixed_K_coverage.json
"""

from __future__ import annotations

import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from toolbias_stats.choice import ChoiceLog, k_weighted_delta_pos, option_position_bias

DESIGN = ((3, 320), (4, 8), (5, 2))      # (K, items); every item shown in its K rotations
CONC = 6.0                               # Beta concentration of the per-item position bias


def answers_share() -> np.ndarray:
    n = np.array([k * items for k, items in DESIGN], dtype=float)
    return n / n.sum()


def truth(m: float) -> float:
    return float(sum(w * m * (k - 1) / k for w, (k, _) in zip(answers_share(), DESIGN)))


def simulate(rng, m: float, *, validate: bool = True) -> ChoiceLog:
    """One study's answers; ``validate=False`` builds the ChoiceLog without the row checks (the frame is
    well-formed by construction; the checks dominate the run time), for the statistic that reads only item,
    K, status and position."""
    rows = []
    for k, n_items in DESIGN:
        s = rng.beta(m * CONC, (1 - m) * CONC, n_items)
        for i in range(n_items):
            for r in range(k):
                pick = 1 if rng.random() < s[i] else int(rng.integers(1, k + 1))
                rows.append({"model": "sim", "item_id": f"K{k}-{i}", "n_options": k, "status": "ok",
                             "options": json.dumps([f"{i}-{(j + r) % k}" for j in range(k)]), "chosen_position": pick})
    frame = pd.DataFrame(rows)
    return ChoiceLog.from_frame(frame) if validate else ChoiceLog(frame)


def _side(lo, hi, t) -> int:
    return -1 if hi < t else 1 if lo > t else 0


def summarise(h, w) -> dict:
    h = np.asarray(h)
    cov = float(np.mean(h == 0))
    return {"coverage": cov, "mc_se": float(np.sqrt(cov * (1 - cov) / len(h))), "studies": int(len(h)),
            "miss_interval_below_truth": float(np.mean(h == -1)), "miss_interval_above_truth": float(np.mean(h == 1)),
            "mean_width": float(np.mean(w))}


def run_cell(m: float, studies: int, before: int, n_resamples: int, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    t = truth(m)
    hits, widths, est = [], [], []
    chits, cwidths, cest = [], [], []
    bh = {"unweighted mean over K, BCa": [], "unweighted mean over K, bias-corrected calibrated": []}
    bw = {k: [] for k in bh}
    for i in range(studies):
        log = simulate(rng, m, validate=i < before)
        w, _ = k_weighted_delta_pos(log, n_resamples=n_resamples, rng=rng)
        r = w.iloc[0]
        hits.append(_side(r["ci_low"], r["ci_high"], t))
        widths.append(r["ci_high"] - r["ci_low"])
        est.append(r["delta_pos"])
        chits.append(_side(r["corrected_ci_low"], r["corrected_ci_high"], t))
        cwidths.append(r["corrected_ci_high"] - r["corrected_ci_low"])
        cest.append(r["corrected"])
        if i < before:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                f = option_position_bias(log, n_resamples=n_resamples, n_null=100, rng=rng).to_frame().iloc[0]
            for name, (lo, hi) in (("unweighted mean over K, BCa", (f["ci_low"], f["ci_high"])),
                                   ("unweighted mean over K, bias-corrected calibrated",
                                    (f["corrected_ci_low"], f["corrected_ci_high"]))):
                bh[name].append(_side(lo, hi, t))
                bw[name].append(hi - lo)
    return {"mean_position_bias": m, "truth_answer_weighted": t,
            "truth_per_K": {f"K={k}": m * (k - 1) / k for k, _ in DESIGN},
            "answer_shares": dict(zip((f"K={k}" for k, _ in DESIGN), answers_share().tolist())),
            "mean_estimate": float(np.mean(est)), "mean_corrected": float(np.mean(cest)),
            "answer_weighted_percentile": summarise(hits, widths),
            "answer_weighted_bias_corrected": summarise(chits, cwidths),
            "before": {k: summarise(bh[k], bw[k]) for k in bh}}


def main(studies: int = 500, before: int = 60, n_resamples: int = 1000) -> dict:
    t0 = time.time()
    cells = [run_cell(m, studies, before, n_resamples, seed) for m, seed in ((0.15, 1), (0.30, 2))]
    out = {"script": "analyses/choice_mixed_K_coverage.py", "design": {f"K={k}": items for k, items in DESIGN},
           "n_resamples": n_resamples, "confidence_level": 0.95, "unit": "item (resampled within K groups)",
           "cells": cells, "seconds": round(time.time() - t0, 1)}
    Path(__file__).with_suffix(".json").write_text(json.dumps(out, indent=2))
    for c in cells:
        print(f"m = {c['mean_position_bias']}: truth {c['truth_answer_weighted']:.4f}, mean estimate "
              f"{c['mean_estimate']:.4f}, bias-corrected {c['mean_corrected']:.4f}")
        for name, s in [("answer-weighted percentile", c["answer_weighted_percentile"]),
                        ("answer-weighted bias-corrected", c["answer_weighted_bias_corrected"]),
                        *c["before"].items()]:
            print(f"  {name:52s} coverage {s['coverage']:.3f} ({s['mc_se']:.3f})  below "
                  f"{s['miss_interval_below_truth']:.3f} above {s['miss_interval_above_truth']:.3f}  width "
                  f"{s['mean_width']:.3f}  [{s['studies']} studies]")
    print(f"{out['seconds']} s")
    return out


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:3]))
