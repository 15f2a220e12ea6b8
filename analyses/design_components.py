"""Variance components of delta_API / delta_pos / delta_model in the vendored BiasBusters study (issue 12).

Prints, per LLM and metric, the share of Var(estimate) from each source at the study's design (10 clusters x 100
queries x 5 cyclic rotations x 3 runs), the standard error, and what the same calls would have bought as one run
of 300 queries; then the per-LLM Markdown table that docs/guide/study_design.md shows.

Usage: ``python analyses/design_components.py [--bootstrap 200] [--seed 12] [--out components.csv]``
"""

from __future__ import annotations

import argparse
import time
import warnings

import pandas as pd

import toolbias_stats as tbs


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bootstrap", type=int, default=200)
    ap.add_argument("--seed", type=int, default=12)
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        study = tbs.read_study(tbs.datasets.path("biasbusters/study.toml"))
        t0 = time.perf_counter()
        vc = tbs.variance_components(study.log, n_resamples=args.bootstrap, rng=args.seed)
        elapsed = time.perf_counter() - t0
    t, s = vc.table, vc.overview
    with pd.option_context("display.width", 220, "display.max_columns", 30, "display.max_rows", 500):
        print(t.drop(columns=["note"]).round(6).to_string(index=False))
        print()
        print(s.round(5).to_string(index=False))
    print(f"\nvariance_components: {elapsed:.1f} s ({args.bootstrap} query-bootstrap replicates)\n")
    # the table of docs/guide/study_design.md: shares of Var(estimate) and standard errors of other allocations of calls
    lines = [("| LLM | metric | queries | runs | query × run | attempts | se (as run) | se, 1 run | "
              "se, 300 queries × 1 run | se, 1 rotation per query |"), "|---|---|---|---|---|---|---|---|---|---|"]
    for (model, metric), g in t.groupby(["model", "metric"], sort=False):
        sm = s[(s["model"] == model) & (s["metric"] == metric)].iloc[0]
        if sm["runs"] < 2:
            continue
        sh = g.set_index("component")

        def cell(c, sh=sh):
            r = sh.loc[c]
            if not r["identified"]:
                return "n/a"
            if c == "run":
                return f"{100 * r['share']:.0f}%"
            return f"{100 * r['share']:.0f}%"
        lines.append(f"| {model} | {metric.replace('delta_', 'δ_')} | {cell('query')} | {cell('run')} | "
                     f"{cell('query_x_run')} | {cell('attempt')} | {sm['se']:.4f} | {sm['se_one_run']:.4f} | "
                     f"{sm['se_same_calls_one_run']:.4f} | {sm['se_one_rotation']:.4f} |")
    print("\n".join(lines))
    if args.out:
        t.to_csv(args.out, index=False)
    return vc


if __name__ == "__main__":
    main()
