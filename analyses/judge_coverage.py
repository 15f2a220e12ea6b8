"""Coverage of the pairwise-judge intervals when every pair is judged several times (issue 35, item 2; issue 36).

Simulator (written here, independent of the package): a study of ``n_items`` pairs of answers, each shown in both
orders and judged ``R = 3`` times per order (epochs), with verdicts first / second / tie. Every pair has its own
latent content preference q ~ Beta(0.5, 0.5) (the chance that answer x is preferred on content), position push
b ~ Normal(0.5, 1.5) on the logit scale towards the first slot, and tie chance t ~ Beta(1, 9); the repetitions of a
pair are independent given these, so verdicts are correlated within the pair (the situation of a judge judging
the same pair three times). In the order (x, y) the judge ties with probability t and otherwise picks slot 1 with
probability logistic(logit(q) + b); in the order (y, x) with logistic(logit(1 - q) + b).

Truth: every metric is a ratio of expectations over pairs, computed exactly given the latents (pair outcomes, and
for repetition stability the expected modal share of 3 categorical draws) and averaged over 400,000 latent draws.

For each study the package's ``judge_consistency`` gives its item-bootstrap (expanded percentile) intervals; the
script also computes the intervals the package gave before the fix, which treat every (pair, epoch) as an
independent pair: a Wilson interval for the consistency, a bootstrap of (pair, epoch) units for the first-position
rate. Reported: 95% coverage, the share of studies whose interval lies entirely below / above the truth (misses on
each side), the Monte-Carlo standard error of the coverage, and the mean width.

Usage::

    nice python analyses/judge_coverage.py [STUDIES]     # default 500 per cell; writes analyses/judge_coverage.json
"""

from __future__ import annotations

import itertools
import json
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.special import expit, logit
from statsmodels.stats.proportion import proportion_confint

from toolbias_stats.choice import ChoiceLog, judge_consistency

R = 3
METRICS = ("consistency", "primacy_share", "preference_score", "first_position_rate", "tie_rate",
           "repetition_stability")
CI_COLS = {"first_position_rate": "first"}


def latents(rng, n):
    q = rng.beta(0.5, 0.5, n)
    b = rng.normal(0.5, 1.5, n)
    t = rng.beta(1, 9, n)
    return q, b, t


def order_probs(q, b, t):
    """(first, second, tie) probabilities of the orders (x, y) and (y, x)."""
    f1 = (1 - t) * expit(logit(q) + b)
    f2 = (1 - t) * expit(logit(1 - q) + b)
    return (f1, 1 - t - f1, t), (f2, 1 - t - f2, t)


def _expected_modal_share(p):
    """E[max count / R] of R draws from the categorical p = (p1, p2, p3) (arrays)."""
    from math import factorial

    out = 0.0
    for n in itertools.product(range(R + 1), repeat=3):
        if sum(n) != R:
            continue
        coef = factorial(R) / (factorial(n[0]) * factorial(n[1]) * factorial(n[2]))
        out = out + coef * p[0] ** n[0] * p[1] ** n[1] * p[2] ** n[2] * max(n) / R
    return out


def truth(n_draws: int = 400_000, seed: int = 12345) -> dict:
    (f1, s1, t1), (f2, s2, t2) = order_probs(*latents(np.random.default_rng(seed), n_draws))
    cons = (f1 * s2 + s1 * f2 + t1 * t2).mean()
    prim = (f1 * f2 + f1 * t2 + t1 * f2).mean()
    rec = (s1 * s2 + s1 * t2 + t1 * s2).mean()
    return {"consistency": cons, "primacy_share": prim / (prim + rec), "preference_score": (rec - prim) / (prim + rec),
            "first_position_rate": (f1 + f2).mean() / (f1 + s1 + f2 + s2).mean(), "tie_rate": t1.mean(),
            "repetition_stability": 0.5 * (_expected_modal_share((f1, s1, t1)) +
                                           _expected_modal_share((f2, s2, t2))).mean()}


def simulate(rng, n_items: int) -> ChoiceLog:
    (f1, s1, _), (f2, s2, _) = order_probs(*latents(rng, n_items))
    rows = []
    for i in range(n_items):
        x, y = f"answer x{i}", f"answer y{i}"
        for order, (pf, ps) in (((x, y), (f1[i], s1[i])), ((y, x), (f2[i], s2[i]))):
            for e in range(1, R + 1):
                u = rng.random()
                v = 1 if u < pf else 2 if u < pf + ps else None
                rows.append({"model": "sim", "item_id": f"p{i}", "epoch": e, "n_options": 2,
                             "options": json.dumps(list(order)), "question": f"pair {i}",
                             "status": "ok" if v else "tie", "chosen_position": v})
    return ChoiceLog.from_frame(pd.DataFrame(rows))


def naive_intervals(res, rng, n_resamples) -> dict:
    """The pre-fix intervals: every (pair, epoch) an independent pair (Wilson; bootstrap of pairs)."""
    p = res.pairs
    n = len(p)
    lo, hi = proportion_confint(int(p["consistent"].sum()), n, alpha=0.05, method="wilson")
    idx = rng.integers(0, n, size=(n_resamples, n))
    first = p["first_picks"].to_numpy()[idx].sum(1)
    decided = (p["first_picks"] + p["second_picks"]).to_numpy()[idx].sum(1)
    flo, fhi = np.percentile(first / decided, [2.5, 97.5])
    return {"consistency": (lo, hi), "first_position_rate": (flo, fhi)}


def summarise(hits: list, width: list) -> dict:
    h = np.asarray(hits)   # -1: interval entirely below the truth, 0: covers it, 1: entirely above
    n = len(h)
    cov = float(np.mean(h == 0))
    return {"coverage": cov, "mc_se": float(np.sqrt(cov * (1 - cov) / n)), "miss_interval_below_truth":
            float(np.mean(h == -1)), "miss_interval_above_truth": float(np.mean(h == 1)), "studies": n,
            "mean_width": float(np.mean(width))}


def _side(lo, hi, t) -> int:
    return -1 if hi < t else 1 if lo > t else 0


def run_cell(n_items: int, studies: int, n_resamples: int, seed: int, tr: dict) -> dict:
    rng = np.random.default_rng(seed)
    hits = {m: [] for m in METRICS}
    widths = {m: [] for m in METRICS}
    naive_h = {m: [] for m in ("consistency", "first_position_rate")}
    naive_w = {m: [] for m in naive_h}
    for _ in range(studies):
        res = judge_consistency(simulate(rng, n_items), n_resamples=n_resamples, rng=rng)
        row = res.to_frame().iloc[0]
        for m in METRICS:
            c = CI_COLS.get(m, m)
            lo, hi = row[f"{c}_ci_low"], row[f"{c}_ci_high"]
            hits[m].append(_side(lo, hi, tr[m]))
            widths[m].append(hi - lo)
        for m, (lo, hi) in naive_intervals(res, rng, n_resamples).items():
            naive_h[m].append(_side(lo, hi, tr[m]))
            naive_w[m].append(hi - lo)
    return {"n_items": n_items, "judgements_per_pair_and_order": R,
            "item_bootstrap": {m: summarise(hits[m], widths[m]) for m in METRICS},
            "before_fix_pairs_independent": {m: summarise(naive_h[m], naive_w[m]) for m in naive_h}}


def main(studies: int = 500, n_resamples: int = 1000) -> dict:
    t0 = time.time()
    tr = truth()
    cells = [run_cell(n, studies, n_resamples, seed, tr) for n, seed in ((40, 1), (150, 2))]
    out = {"script": "analyses/judge_coverage.py", "studies_per_cell": studies, "n_resamples": n_resamples,
           "confidence_level": 0.95, "unit": "item (the two compared answers; every order, epoch and run together)",
           "truth": tr, "cells": cells, "seconds": round(time.time() - t0, 1)}
    Path(__file__).with_suffix(".json").write_text(json.dumps(out, indent=2))
    for c in cells:
        print(f"n_items = {c['n_items']} (x 2 orders x {R} epochs)")
        for name, block in (("item bootstrap", c["item_bootstrap"]),
                            ("before (pairs independent)", c["before_fix_pairs_independent"])):
            for m, s in block.items():
                print(f"  {name:28s} {m:22s} coverage {s['coverage']:.3f} ({s['mc_se']:.3f})  below "
                      f"{s['miss_interval_below_truth']:.3f} above {s['miss_interval_above_truth']:.3f}  "
                      f"width {s['mean_width']:.3f}")
    print(f"{out['seconds']} s")
    return out


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 500)
