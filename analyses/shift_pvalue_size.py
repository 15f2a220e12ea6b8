"""Size of selection_shift's "no change" tests with unequal runs, and the experiments report's false highlights.

Acceptance study of issue 21 (statistics, last two items). **SIMULATED** studies without any change: both levels draw
from the same multinomial-logit chooser (5 clusters x K = 5 tools = 25 tools, tool weights .40 .25 .15 .12 .08 in a
random order per cluster, 40 queries x 5 cyclic rotations per run), analysed through the public API.

Part A, size with unequal runs: the base has ``S_b`` runs and the level ``S_l``; paired (same queries) or
independent (disjoint query ids). Share of per-tool p-values, and of the shift_api / shift_pos / delta_api p-values,
that are <= 0.05 (n_resamples = 0).

Part B, the report's highlight: a numeric sweep (temperature 0 -> 1, 1 run each, paired) analysed with the report's
defaults (2,000 permutations; 200 bootstrap replicates here); a study counts as a false highlight when the
report's ``tool_highlight`` (the choice behind the per-tool share figure) picks a tool. The former rule (the
largest rise, highlighted when its unadjusted percentile interval excludes 0: the report's code before the fix)
is computed from ``tools_frame`` on the same studies.

Part A was run once on the current code and once on the code before the fix (same seeds) for the before/after
table; part B measures both rules in one run. The figures in docs/guide/experiments_overview.md and docs/experiments.md:
``python analyses/shift_pvalue_size.py --part A --n-studies 100 --n-permutations 300`` (about 5 CPU-minutes) and
``python analyses/shift_pvalue_size.py --part B --n-studies 200 --n-resamples 100`` (about 3 CPU-minutes);
results in ``reports/shift_pvalue_size.csv``.
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np
import pandas as pd

from toolbias_stats import SelectionLog
from toolbias_stats.experiments import selection_shift, simulate_conditions

C, K = 5, 5
PREFS = np.array([0.40, 0.25, 0.15, 0.12, 0.08])
SCENARIOS = [("paired", 1, 3, 0.0), ("paired", 2, 3, 0.5), ("independent", 1, 3, 0.0)]


def study(gen, design, runs_base, runs_level, query_effect, n_queries=40):
    prefs = np.stack([gen.permutation(PREFS) for _ in range(C)])
    log = simulate_conditions({"base": (prefs, None), "level": (prefs, None)}, n_queries=n_queries,
                              n_runs=max(runs_base, runs_level), query_effect=query_effect, rng=gen.integers(2**63))
    tab = log.to_frame()
    keep = (((tab["condition"] == "base") & (tab["run"] <= runs_base))
            | ((tab["condition"] == "level") & (tab["run"] <= runs_level)))
    tab = tab[keep].reset_index(drop=True)
    if design == "independent":
        tab["query_id"] = np.where(tab["condition"] == "level", "L" + tab["query_id"].astype(str), tab["query_id"])
    return SelectionLog.from_frame(tab, log.catalog, source="<simulated>")


def part_a(n_studies, seed, n_permutations):
    rows = []
    for design, sb, sl, qe in SCENARIOS:
        gen = np.random.default_rng(seed)
        tools, other, method = [], {"shift_api": [], "shift_pos": [], "delta_api": []}, set()
        start = time.time()
        for _ in range(n_studies):
            res = selection_shift(study(gen, design, sb, sl, qe).counts(), by=[], n_resamples=0,
                                  n_permutations=n_permutations, rng=gen.integers(2**63))
            g = res.groups[0]
            tools.append(res.tools_frame()["p_value"].to_numpy())
            other["shift_api"].append(g.shift_api.p_value)
            other["shift_pos"].append(g.shift_pos.p_value)
            other["delta_api"].append(g.change["delta_api"].p_value)
            method.add(g.shift_api.null_method)
        p = np.concatenate(tools)
        row = {"part": "A", "scenario": f"{design}, runs {sb} vs {sl}, query sd {qe}", "studies": n_studies,
               "null_method": "; ".join(sorted(method)), "per_tool_size": float(np.mean(p <= 0.05)),
               "per_tool_tests": int(p.size)}
        row.update({f"{m}_size": float(np.mean(np.array(v) <= 0.05)) for m, v in other.items()})
        row["seconds"] = round(time.time() - start, 1)
        print(row, flush=True)
        rows.append(row)
    return rows


def part_b(n_studies, seed, n_resamples):
    gen = np.random.default_rng(seed + 1)
    report, unadjusted = 0, 0
    start = time.time()
    for _ in range(n_studies):
        prefs = np.stack([gen.permutation(PREFS) for _ in range(C)])
        log = simulate_conditions({0.0: (prefs, None), 1.0: (prefs, None)}, n_queries=40, column="temperature",
                                  rng=gen.integers(2**63))
        res = selection_shift(log.counts(), between="temperature", base=0.0, by=[], n_resamples=n_resamples,
                              n_permutations=2000, rng=gen.integers(2**63))
        tf = res.tools_frame()
        unadjusted += bool(tf.loc[tf["difference"].idxmax(), "ci_low"] > 0)
        try:                         # the function the report calls to pick the highlighted tool (after the fix)
            from toolbias_stats.report._experiments_html import tool_highlight
        except ImportError:          # before the fix the report used the unadjusted rule
            tool_highlight = None
        report += (tool_highlight(res)[0] is not None) if tool_highlight else \
            bool(tf.loc[tf["difference"].idxmax(), "ci_low"] > 0)
    row = {"part": "B", "scenario": "no change, 25 tools, sweep 0 -> 1", "studies": n_studies,
           "report_false_highlight": report / n_studies, "unadjusted_rule_false_highlight": unadjusted / n_studies,
           "seconds": round(time.time() - start, 1)}
    print(row, flush=True)
    return [row]


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--n-studies", type=int, default=200)
    ap.add_argument("--n-permutations", type=int, default=1000)
    ap.add_argument("--n-resamples", type=int, default=200)
    ap.add_argument("--part", default="AB")
    ap.add_argument("--seed", type=int, default=21)
    ap.add_argument("--out", default="reports/shift_pvalue_size.csv")
    args = ap.parse_args(argv)
    warnings.simplefilter("ignore")
    rows = []
    if "A" in args.part:
        rows += part_a(args.n_studies, args.seed, args.n_permutations)
    if "B" in args.part:
        rows += part_b(args.n_studies, args.seed, args.n_resamples)
    if args.out:
        pd.DataFrame(rows).to_csv(args.out, index=False)


if __name__ == "__main__":
    main()
