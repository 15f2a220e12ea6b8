"""Coverage and size of the single-study delta_API intervals and test where issue 35 found them off (its own simulator).

Every study is drawn by `analyses/bias_audit_sim.py` (seeded NumPy; per-query choosers written out there, independent of
`toolbias_stats.simulate`) and analysed with `toolbias_stats.selection_bias` as the CLI does, apart from the replicate
count (`one_study` of `analyses/bias_audit.py`). Per cell, against the known truth: coverage of `corrected_ci` (the
interval shown first) with its misses below / above, the rejection rate of `p_value` at 5% (size where the truth is 0)
and of `p_value_multinomial`, and for the plug-in `ci` how often it excludes its own estimate and how often it covers
E[plug-in] (the mean plug-in over the cell's studies, what the docs said it covers) and the truth.

Cells (5 clusters each; `q x r` = queries x attempts per query):
  few       5 x 10 q x 1 attempt, fair and delta = 0.25 (issue 35, item 6)
  small     5 x 25 q x 1 attempt, strong chooser .40 .25 .15 .12 .08 (issue 35, item 5)
  k20       K = 20, 80 attempts per cluster (4 per tool) with query heterogeneity h = 0.3: 80 q x 1 attempt, and
            20 q x 4 attempts (where a query's attempts are correlated)
  plugin    fair chooser, K = 5 and 7, 40 q x 5 attempts: what the plug-in `ci` covers

Monte-Carlo standard error of a rate r over n studies: sqrt(r (1 - r) / n) (95%: 0.97 points at 500 studies; 5%: 0.97).

Usage:  nice python analyses/delta_interval_coverage.py [--section all] [--studies 500] [--resamples 1000]
        [--jobs 2] [--out analyses/delta_interval_coverage.json]
Before/after: run it once with the code before the change on the path (PYTHONPATH=<old checkout>) and `--out` elsewhere.
Stages kept: `delta_interval_coverage_before.json` (before issue 35), `delta_interval_coverage_round1.json` (its first
round), `delta_interval_coverage.json` (second round: sections few, k20 and small re-run, plugin carried over).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bias_audit import STRONG5, U5, one_study

# name -> (section, chooser p, clusters, queries, runs, attempts per query, heterogeneity h)
CELLS = {
    "fair, 10 q x 1": ("few", U5, 5, 10, 1, 1, 0.0),
    "delta 0.25, 10 q x 1": ("few", STRONG5, 5, 10, 1, 1, 0.0),
    "strong, 25 q x 1": ("small", STRONG5, 5, 25, 1, 1, 0.0),
    "K=20 fair, 80 q x 1, h=0.3": ("k20", (0.05,) * 20, 5, 80, 1, 1, 0.3),
    "K=20 fair, 20 q x 4, h=0.3": ("k20", (0.05,) * 20, 5, 20, 1, 4, 0.3),
    "fair K=5, 40 q x 5": ("plugin", U5, 5, 40, 1, 5, 0.0),
    "fair K=7, 40 q x 5": ("plugin", (1 / 7,) * 7, 5, 40, 1, 5, 0.0),
}


def _se(r, n):
    return float(np.sqrt(max(r * (1 - r), 1e-12) / n))


def summarise(name, d):
    section, p, c, q, _s, r, h = CELLS[name]
    eps, n = 1e-9, len(d)
    low, high = d["truth"] < d["lo"] - eps, d["truth"] > d["hi"] + eps
    mean_plugin = float(d["est"].mean())
    row = {"section": section, "cell": name, "K": len(p), "clusters": c, "queries": q, "attempts_per_query": r,
           "h": h, "truth": float(d["truth"].iloc[0]), "studies": n,
           "coverage": float(1 - (low | high).mean()), "miss_low": float(low.mean()), "miss_high": float(high.mean()),
           "width": float((d["hi"] - d["lo"]).mean()), "reject_p": float((d["p"] < 0.05).mean()),
           "reject_p_multinomial": float((d["p_multinomial"] < 0.05).mean()),
           "in_range": bool(((d["lo"] >= 0) & (d["hi"] <= 1)).all()),
           "ci_excludes_estimate": float(((d["est"] < d["ci_lo"] - eps) | (d["est"] > d["ci_hi"] + eps)).mean()),
           "ci_covers_mean_plugin": float(((d["ci_lo"] <= mean_plugin) & (mean_plugin <= d["ci_hi"])).mean()),
           "ci_covers_truth": float(((d["ci_lo"] <= d["truth"]) & (d["truth"] <= d["ci_hi"])).mean()),
           "mean_plugin": mean_plugin}
    row["mc_se_coverage"] = _se(row["coverage"], n)
    row["mc_se_reject_p"] = _se(row["reject_p"], n)
    return row


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--section", default="all", choices=("all", "few", "small", "k20", "plugin"))
    ap.add_argument("--studies", type=int, default=500)
    ap.add_argument("--resamples", type=int, default=1000)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--seed", type=int, default=35)
    ap.add_argument("--out", default=str(Path(__file__).with_suffix(".json")))
    args = ap.parse_args(argv)
    names = [k for k, v in CELLS.items() if args.section in ("all", v[0])]
    seeds = dict(zip(CELLS, np.random.SeedSequence(args.seed).spawn(len(CELLS))))
    rows, t0 = [], time.time()
    with ProcessPoolExecutor(args.jobs) as pool:
        for name in names:
            tasks = [(name, args.resamples, s, CELLS[name]) for s in seeds[name].spawn(args.studies)]
            d = pd.DataFrame(list(pool.map(one_study, tasks, chunksize=10)))
            rows.append(summarise(name, d))
            print(pd.DataFrame([rows[-1]]).drop(columns=["section", "K", "clusters", "h"]).round(4)
                  .to_string(index=False, header=len(rows) == 1), flush=True)
            out = {"settings": {"studies": args.studies, "resamples": args.resamples, "seed": args.seed,
                                "seconds": round(time.time() - t0, 1)}, "cells": rows}
            Path(args.out).write_text(json.dumps(out, indent=1))   # after every cell: a long run can be stopped
    print(f"{len(names)} cells x {args.studies} studies, {args.resamples} replicates: {time.time() - t0:.0f} s; "
          f"written to {args.out}")


if __name__ == "__main__":
    main()
