"""End-to-end calibration of `selection_bias` through the public API (the coverage table of docs/guide/metrics.md).

For each of the issue's five choosers, simulate BiasBusters-sized studies (10 clusters x 100 queries x 5 cyclic
rotations, one run) with `toolbias_stats.simulate.simulate_selection_log`, run `toolbias_stats.selection_bias`
exactly as the CLI does (2,000 query-bootstrap replicates, 2,000 uniform-chooser draws) and record, against the
known truth:
  - coverage of the calibrated 95% CI (`corrected_ci`) and of the plain plug-in intervals (BCa, percentile),
  - mean plug-in and bias-corrected estimates,
  - for the uniform chooser, the distribution of the reported `p_value` (KS test against U(0,1), rejection rate).
`--target api` puts the chooser on tools (positions uniform); `--target pos` puts it on positions (tools uniform);
`--target model` puts it on both and checks delta_model = (delta_API + delta_pos) / 2 (its calibrated interval runs the
inversion on the tool and position distributions jointly).

Usage:  python analyses/calibration_end_to_end.py [--n-studies 200] [--n-resamples 2000] [--seed 1] [--jobs 2]
"""

from __future__ import annotations

import argparse
import time
import warnings
from concurrent.futures import ProcessPoolExecutor

import numpy as np
import pandas as pd
from scipy import stats

import toolbias_stats as tbs
from toolbias_stats.simulate import simulate_selection_log

CHOOSERS = {
    "strong": (0.40, 0.25, 0.15, 0.12, 0.08),
    "mild": (0.26, 0.22, 0.20, 0.18, 0.14),
    "at 1/K": (0.35, 0.20, 0.20, 0.15, 0.10),
    "tiny": (0.22, 0.21, 0.20, 0.19, 0.18),
    "uniform": (0.20, 0.20, 0.20, 0.20, 0.20),
}


def one_study(args):
    """One simulated study -> dict of estimates and intervals for the chosen target."""
    chooser, target, n_resamples, seed = args
    rng = np.random.default_rng(seed)
    kw = ({"tool_probs": chooser} if target == "api" else {"position_probs": chooser} if target == "pos"
          else {"tool_probs": chooser, "position_probs": chooser})
    sim = simulate_selection_log(n_clusters=10, n_tools=5, n_queries=100, rng=rng, **kw)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = tbs.selection_bias(sim.log, by=[], n_resamples=n_resamples, n_null=2000, rng=rng)
    r = getattr(res.groups[0], {"api": "delta_api", "pos": "delta_pos", "model": "delta_model"}[target])
    truth = {"api": sim.delta_api, "pos": sim.delta_pos, "model": (sim.delta_api + sim.delta_pos) / 2}[target]
    return {"truth": truth, "plugin": r.mean_over_runs, "corrected": r.corrected, "lo": r.corrected_ci.low,
            "hi": r.corrected_ci.high, "bca_lo": r.ci.low, "bca_hi": r.ci.high, "pct_lo": r.ci_percentile.low,
            "pct_hi": r.ci_percentile.high, "p_value": r.p_value,
            "p_multinomial": r.p_value_multinomial, "bca": r.ci_method == "bca"}


def run(target, n_studies, n_resamples, seed, jobs):
    rows = []
    seeds = np.random.SeedSequence(seed).spawn(len(CHOOSERS))
    with ProcessPoolExecutor(jobs) as pool:
        for (name, chooser), ss in zip(CHOOSERS.items(), seeds):
            tasks = [(chooser, target, n_resamples, s) for s in ss.spawn(n_studies)]
            d = pd.DataFrame(list(pool.map(one_study, tasks, chunksize=5)))
            eps = 1e-9
            cover = (d["lo"] - eps <= d["truth"]) & (d["truth"] <= d["hi"] + eps)
            row = {
                "target": target, "chooser": name, "truth": d["truth"].mean(), "studies": len(d),
                "coverage": cover.mean(), "miss_low": (d["truth"] < d["lo"] - eps).mean(),
                "miss_high": (d["truth"] > d["hi"] + eps).mean(), "width": (d["hi"] - d["lo"]).mean(),
                "plug_in": d["plugin"].mean(), "corrected": d["corrected"].mean(),
                "bca_cover": ((d["bca_lo"] <= d["truth"]) & (d["truth"] <= d["bca_hi"])).mean(),
                "pct_cover": ((d["pct_lo"] <= d["truth"]) & (d["truth"] <= d["pct_hi"])).mean(),
                "p<0.05": (d["p_value"] < 0.05).mean(),
                "p_multinomial<0.05": (d["p_multinomial"] < 0.05).mean(), "ci_is_bca": d["bca"].mean(),
                "ks_p": stats.kstest(d["p_value"], "uniform").pvalue if name == "uniform" else np.nan,
            }
            rows.append(row)
    return pd.DataFrame(rows)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n-studies", type=int, default=200)
    ap.add_argument("--n-resamples", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--target", choices=("api", "pos", "model", "both"), default="both")
    args = ap.parse_args(argv)
    targets = ("api", "pos") if args.target == "both" else (args.target,)
    for i, target in enumerate(targets):
        t0 = time.perf_counter()
        df = run(target, args.n_studies, args.n_resamples, args.seed + i, args.jobs)
        print(f"\n### target = {target} ({time.perf_counter() - t0:.0f} s)\n")
        print(df.to_string(index=False, float_format=lambda v: f"{v:.3f}"))


if __name__ == "__main__":
    main()
