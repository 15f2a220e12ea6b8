"""Acceptance study of issue 12: the planner's predicted CI half-widths against simulation.

For each model, a data-generating world is fitted to its logs in the vendored BiasBusters study
(:class:`toolbias_stats.design.PilotWorld`: new queries are pilot queries drawn at random, every attempt draws its
outcome from that query and rotation's outcomes over the pilot's runs). Then, as a user would:

1. one pilot study is drawn from the world with the vendored design (10 clusters x 100 queries x 5 rotations x 3
   runs) and :func:`toolbias_stats.plan_study` is fitted to it (variance components, Gaussian-fold draws);
2. for each design, ``--n-sims`` studies are drawn from the world and analysed with
   :func:`toolbias_stats.selection_bias` (query bootstrap, ``--bootstrap`` replicates); their mean interval
   half-widths (percentile and BCa) are compared with the predicted CI half-width, and the sd of the estimates of
   ``--n-sims`` + ``--n-sims-sd`` studies (the sampling truth) with the predicted error half-width.

Usage: ``nice python analyses/design_check.py [--models "GPT-4.1 mini,Qwen3 235B"] [--n-sims 60]
[--bootstrap 400] [--n-sims-sd 140] [--seed 12] [--out design_check.csv]``
"""

from __future__ import annotations

import argparse
import time
import warnings

import pandas as pd

import toolbias_stats as tbs
from toolbias_stats.design import check_plan

DESIGNS = [(100, 3, 5), (50, 1, 5), (200, 1, 5), (25, 3, 5), (100, 1, 1), (300, 2, 1)]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="GPT-4.1 mini,Qwen3 235B")
    ap.add_argument("--n-sims", type=int, default=60)
    ap.add_argument("--bootstrap", type=int, default=400)
    ap.add_argument("--n-sims-sd", type=int, default=140,
                    help="further studies per design, point estimates only, for the sampling sd")
    ap.add_argument("--seed", type=int, default=12)
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        study = tbs.read_study(tbs.datasets.path("biasbusters/study.toml"))
    frames = []
    t0 = time.process_time()
    for i, model in enumerate(m.strip() for m in args.models.split(",")):
        res = check_plan(study.log, DESIGNS, group={"model": model}, metrics=("delta_api", "delta_pos"),
                         n_sims=args.n_sims, n_resamples=args.bootstrap, n_sims_sd=args.n_sims_sd,
                         plan_from="simulated",
                         rng=args.seed + i)
        res.insert(0, "model", model)
        frames.append(res)
    out = pd.concat(frames, ignore_index=True)
    cpu = time.process_time() - t0
    cols = ["model", "queries", "runs", "rotations", "calls_per_model", "metric", "predicted_half_width",
            "simulated_percentile_half_width", "simulated_bca_half_width", "predicted_error_half_width",
            "simulated_sd_half_width",
            "ratio_percentile", "ratio_bca", "ratio_sd"]
    with pd.option_context("display.width", 200, "display.max_columns", 20):
        print(out[cols].round(4).to_string(index=False))
    for c in ("ratio_percentile", "ratio_bca", "ratio_sd"):
        dev = (out[c] - 1).abs()
        print(f"{c}: max |ratio - 1| = {dev.max():.3f}; within 10%: {(dev <= 0.10).sum()} of {len(out)}")
    print(f"CPU time: {cpu:.0f} s ({args.n_sims} simulated studies per design with {args.bootstrap} bootstrap "
          f"replicates, {args.n_sims + args.n_sims_sd} for the sampling sd)")
    if args.out:
        out.to_csv(args.out, index=False)
    return out


if __name__ == "__main__":
    main()
