"""The statistical audit of `selection_bias` (issue 21), re-run on the fixed code: the tables of docs/guide/metrics.md.

Every study is simulated with `analyses/bias_audit_sim.py` (seeded NumPy, per-query choosers written out there) and
analysed with `toolbias_stats.selection_bias` exactly as the CLI does, apart from the replicate count. Per regime it
records, against the known truth:

  - coverage of the interval shown first for delta_API (`corrected_ci`, calibrated) and its misses below / above,
  - studies with an interval [0, 0],
  - rejection rate of the reported `p_value` at 5% and of the uniform multinomial test (`p_value_multinomial`),
  - how often `ci` is BCa and how often it excludes its own estimate.

Sections (``--section``):
  size      fair on average, with query heterogeneity (each query sends h of its attempts to a favourite drawn at
            random): the size of the reported test of "no bias"
  regimes   the audit's regimes for the interval shown first: fair chooser, tiny and large delta, K = 2 and 7,
            25 and 200 queries, one rotation
  zero      [0, 0] intervals at true delta 0.01
  small     coverage by cluster size (25, 100, 500 valid choices per cluster)
  mde       power of the reported test at plan_study's predicted MDE (5 clusters x K = 5, 40 queries x 5
            rotations; the direction of the strong chooser)

Usage:  nice python analyses/bias_audit.py [--section all] [--studies 400] [--resamples 1000] [--jobs 2]
        [--out reports/bias_audit.csv]
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bias_audit_sim import simulate_counts, true_delta

import toolbias_stats as tbs

STRONG5 = (0.40, 0.25, 0.15, 0.12, 0.08)
U5 = (0.2,) * 5

# name -> (section, chooser p, clusters, queries, runs, rotations, heterogeneity h)
REGIMES = {
    # size of the test of "no bias" (true delta_API = 0 exactly; the design)
    "fair, heterogeneous queries (h=0.3), 40 q x 5 rot": ("size", U5, 5, 40, 1, 5, 0.3),
    "fair, heterogeneous queries (h=0.3), 40 q x 5 rot, 3 runs": ("size", U5, 5, 40, 3, 5, 0.3),
    "fair, heterogeneous queries (h=0.5), 25 q x 1 rot": ("size", U5, 5, 25, 1, 1, 0.5),
    "fair, independent attempts, 40 q x 5 rot": ("size", U5, 5, 40, 1, 5, 0.0),
    # the interval shown first
    "fair K=5, 40 q x 5 rot": ("regimes", U5, 5, 40, 1, 5, 0.0),
    "fair K=7, 40 q x 5 rot": ("regimes", (1 / 7,) * 7, 5, 40, 1, 5, 0.0),
    "fair K=2, 40 q x 5 rot": ("regimes", (0.5, 0.5), 5, 40, 1, 5, 0.0),
    "tiny (0.03) K=5, 40 q x 5 rot": ("regimes", (0.22, 0.21, 0.20, 0.19, 0.18), 5, 40, 1, 5, 0.0),
    "large (0.25) K=5, 25 q x 1 rot": ("regimes", STRONG5, 5, 25, 1, 1, 0.0),
    "large (0.25) K=5, 200 q x 1 rot": ("regimes", STRONG5, 5, 200, 1, 1, 0.0),
    "large (0.25) K=5, 40 q x 5 rot, heterogeneous (h=0.3)": ("regimes", STRONG5, 5, 40, 1, 5, 0.3),
    "K=2 (0.60/0.40), 25 q x 1 rot": ("regimes", (0.6, 0.4), 5, 25, 1, 1, 0.0),
    "K=7 skewed, 200 q x 1 rot": ("regimes", (0.3, 0.2, 0.15, 0.12, 0.1, 0.08, 0.05), 5, 200, 1, 1, 0.0),
    "tiny (0.03) K=5, 25 q x 1 rot": ("regimes", (0.22, 0.21, 0.20, 0.19, 0.18), 5, 25, 1, 1, 0.0),
    # [0, 0] intervals
    "delta 0.01 K=5, 40 q x 5 rot": ("zero", (0.21, 0.20, 0.20, 0.20, 0.19), 5, 40, 1, 5, 0.0),
    "delta 0.01 K=5, 200 q x 5 rot": ("zero", (0.21, 0.20, 0.20, 0.20, 0.19), 5, 200, 1, 5, 0.0),
    # cluster size (valid choices per cluster = queries x rotations)
    "strong, 25 per cluster (5 q x 5 rot)": ("small", STRONG5, 5, 5, 1, 5, 0.0),
    "strong, 25 per cluster (25 q x 1 rot)": ("small", STRONG5, 5, 25, 1, 1, 0.0),
    "strong, 100 per cluster (20 q x 5 rot)": ("small", STRONG5, 5, 20, 1, 5, 0.0),
    "strong, 500 per cluster (100 q x 5 rot)": ("small", STRONG5, 5, 100, 1, 5, 0.0),
    "at 1/K, 25 per cluster (5 q x 5 rot)": ("small", (0.35, 0.20, 0.20, 0.15, 0.10), 5, 5, 1, 5, 0.0),
    "at 1/K, 100 per cluster (20 q x 5 rot)": ("small", (0.35, 0.20, 0.20, 0.15, 0.10), 5, 20, 1, 5, 0.0),
}


def one_study(task):
    name, n_resamples, seed = task[:3]
    _, p, c, q, s, r, h = task[3] if len(task) > 3 else REGIMES[name]
    rng = np.random.default_rng(seed)
    counts = simulate_counts(p, n_clusters=c, n_queries=q, n_runs=s, n_rotations=r, h=h, rng=rng)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = tbs.selection_bias(counts, by=[], n_resamples=n_resamples, n_null=n_resamples, rng=rng)
    d = res.groups[0].delta_api
    return {"truth": true_delta(p, h), "lo": d.corrected_ci.low, "hi": d.corrected_ci.high, "est": d.mean_over_runs,
            "ci_lo": d.ci.low, "ci_hi": d.ci.high, "bca": d.ci_method == "bca", "p": d.p_value,
            "p_multinomial": d.p_value_multinomial}


def mde_power(pool, args):
    """Power of the reported p-value (and of "calibrated lower bound > 0") at plan_study's predicted MDE."""
    from toolbias_stats.design import plan_study

    p0 = np.array(STRONG5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        plan = plan_study(np.tile(p0, (5, 1)), metrics=["delta_api"], queries=[40], runs=[1], mde_grid=True,
                          rng=args.seed)
    mde = float(plan.grid["mde"].iloc[0])
    p = tuple(0.2 + mde / true_delta(p0) * (p0 - 0.2))
    spec = ("mde", p, 5, 40, 1, 5, 0.0)
    name = f"at the predicted MDE ({mde:.4f})"
    tasks = [(name, args.resamples, s, spec) for s in np.random.SeedSequence(args.seed + 1).spawn(args.studies)]
    d = pd.DataFrame(list(pool.map(one_study, tasks, chunksize=10)))
    row = summarise(name, d, spec)
    row["power_calibrated_low_gt_0"] = float((d["lo"] > 0).mean())
    return row


def summarise(name, d, spec=None):
    section, p, c, q, s, r, h = spec or REGIMES[name]
    eps = 1e-9
    low = d["truth"] < d["lo"] - eps
    high = d["truth"] > d["hi"] + eps
    return {"section": section, "regime": name, "K": len(p), "clusters": c, "queries": q, "runs": s, "rotations": r,
            "h": h, "truth": d["truth"].iloc[0], "studies": len(d), "coverage": 1 - (low | high).mean(),
            "miss_low": low.mean(), "miss_high": high.mean(), "width": (d["hi"] - d["lo"]).mean(),
            "zero_zero": int(((d["hi"] <= 0) & (d["lo"] <= 0)).sum()),
            "reject_p": (d["p"] < 0.05).mean(), "reject_p_multinomial": (d["p_multinomial"] < 0.05).mean(),
            "ci_is_bca": d["bca"].mean(),
            "ci_excludes_estimate": ((d["est"] < d["ci_lo"] - eps) | (d["est"] > d["ci_hi"] + eps)).mean()}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--section", default="all", choices=("all", "size", "regimes", "zero", "small", "mde"))
    ap.add_argument("--studies", type=int, default=400)
    ap.add_argument("--resamples", type=int, default=1000)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--seed", type=int, default=20261124)
    ap.add_argument("--out", default="reports/bias_audit.csv")
    args = ap.parse_args(argv)
    names = [n for n, v in REGIMES.items() if args.section in ("all", v[0])]
    seeds = dict(zip(REGIMES, np.random.SeedSequence(args.seed).spawn(len(REGIMES))))
    rows = []
    t0 = time.time()
    with ProcessPoolExecutor(args.jobs) as pool:
        for name in names:
            tasks = [(name, args.resamples, s) for s in seeds[name].spawn(args.studies)]
            d = pd.DataFrame(list(pool.map(one_study, tasks, chunksize=10)))
            rows.append(summarise(name, d))
            print(pd.DataFrame([rows[-1]]).round(4).to_string(index=False, header=len(rows) == 1), flush=True)
        if args.section in ("all", "mde"):
            rows.append(mde_power(pool, args))
            print(pd.DataFrame([rows[-1]]).round(4).to_string(index=False), flush=True)
    out = pd.DataFrame(rows)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    out.to_csv(args.out, index=False)
    print(f"\n{len(names)} regimes x {args.studies} studies, {args.resamples} replicates: {time.time() - t0:.0f} s; "
          f"written to {args.out}")


if __name__ == "__main__":
    main()
