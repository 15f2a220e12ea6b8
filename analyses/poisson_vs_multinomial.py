"""Poisson vs multinomial bootstrap weights on the calibration scenarios (the table for issue 7 in docs/guide/scale.md).

The Poisson bootstrap gives every query an independent Poisson(1) weight instead of drawing Q queries with
replacement; it needs no knowledge of Q, so it is the bootstrap of streaming and distributed data. This script
checks that it gives the same intervals as the classical (multinomial) bootstrap where both apply: for each of
the five choosers of `analyses/calibration_end_to_end.py` (10 clusters x 100 queries x 5 rotations, one run),
every simulated study is analysed twice with `selection_bias` (same data, same settings, `bootstrap=` the two
methods) and we report, against the known truth, the coverage of the calibrated 95% CI and of the BCa CI under
each method, their mean widths, and the mean absolute difference between the two methods' interval endpoints.

Usage:  python analyses/poisson_vs_multinomial.py [--n-studies 200] [--n-resamples 2000] [--seed 7] [--jobs 2]
"""

from __future__ import annotations

import argparse
import time
import warnings
from concurrent.futures import ProcessPoolExecutor

import numpy as np
import pandas as pd
from calibration_end_to_end import CHOOSERS  # the five calibration choosers (same folder)

import toolbias_stats as tbs
from toolbias_stats.simulate import simulate_selection_log


def one_study(args):
    chooser, n_resamples, seed = args
    rng = np.random.default_rng(seed)
    sim = simulate_selection_log(n_clusters=10, n_tools=5, n_queries=100, tool_probs=chooser, rng=rng)
    counts = sim.log.counts()
    out = {"truth": sim.delta_api}
    for method in ("multinomial", "poisson"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res = tbs.selection_bias(counts, by=[], n_resamples=n_resamples, n_null=0, bootstrap=method,
                                     rng=np.random.default_rng(seed + 1))
        r = res.groups[0].delta_api
        out.update({f"{method}_lo": r.corrected_ci.low, f"{method}_hi": r.corrected_ci.high,
                    f"{method}_bca_lo": r.ci.low, f"{method}_bca_hi": r.ci.high})
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n-studies", type=int, default=200)
    ap.add_argument("--n-resamples", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--jobs", type=int, default=2)
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    rows = []
    seeds = np.random.SeedSequence(args.seed).spawn(len(CHOOSERS))
    with ProcessPoolExecutor(args.jobs) as pool:
        for (name, chooser), ss in zip(CHOOSERS.items(), seeds):
            tasks = [(chooser, args.n_resamples, int(s.generate_state(1)[0])) for s in ss.spawn(args.n_studies)]
            d = pd.DataFrame(list(pool.map(one_study, tasks, chunksize=5)))
            row = {"chooser": name, "truth": d["truth"].mean(), "studies": len(d)}
            for m in ("multinomial", "poisson"):
                row[f"cover_{m[:4]}"] = ((d[f"{m}_lo"] - 1e-9 <= d["truth"])
                                         & (d["truth"] <= d[f"{m}_hi"] + 1e-9)).mean()
                row[f"bca_{m[:4]}"] = ((d[f"{m}_bca_lo"] <= d["truth"]) & (d["truth"] <= d[f"{m}_bca_hi"])).mean()
                row[f"width_{m[:4]}"] = (d[f"{m}_hi"] - d[f"{m}_lo"]).mean()
            row["mean |d lo|"] = (d["multinomial_lo"] - d["poisson_lo"]).abs().mean()
            row["mean |d hi|"] = (d["multinomial_hi"] - d["poisson_hi"]).abs().mean()
            rows.append(row)
    df = pd.DataFrame(rows)
    print(f"{args.n_studies} studies per chooser, {args.n_resamples} replicates, "
          f"{time.perf_counter() - t0:.0f} s\n")
    print(df.to_string(index=False, float_format=lambda v: f"{v:.3f}"))


if __name__ == "__main__":
    main()
