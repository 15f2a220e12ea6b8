"""Size of the uniform chooser's p-values when the null is drawn on the compiled tree (issue 37, K = 40).

A uniform chooser over K = 40 tools in ``--models`` models (groups) of 10 clusters x 3 runs, every query shown in
all 40 rotations: with ``n_null = 2000`` each group's multinomial draws count 2,000 x 30 x 39 = 2.34M binomials,
past ``TREE_MIN_BINOMIALS``, so the null takes the tree with the default settings (no threshold lowered). The
p-values of every cluster and group (``delta_api`` and ``delta_pos``, ``--n-resamples 0``: the multinomial test)
should reject at 5% about 5% of the time and have mean 1/2. Writes ``null_tree_size.json`` next to this script.

Usage: python analyses/null_tree_size.py [--models 40] [--queries 4]
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from pathlib import Path

import numpy as np


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", type=int, default=40)
    ap.add_argument("--queries", type=int, default=4)
    ap.add_argument("--seed", type=int, default=37)
    args = ap.parse_args()

    from toolbias_stats import SelectionLog
    from toolbias_stats.metrics import _vectorised as vec
    from toolbias_stats.metrics import selection_bias
    from toolbias_stats.simulate import simulate_selection_log

    calls = []
    real = vec.tree_null_tv
    vec.tree_null_tv = lambda *a: calls.append(1) or real(*a)
    sims = [simulate_selection_log(n_clusters=10, n_tools=40, n_queries=args.queries, n_runs=3, p_no_call=0.03,
                                   model=f"m{i}", rng=args.seed * 1000 + i) for i in range(args.models)]
    log = SelectionLog.concat([s.log for s in sims])
    t = time.process_time()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = selection_bias(log, n_resamples=0, n_null=2000, rng=args.seed)
    cpu = time.process_time() - t
    out: dict = {"models": args.models, "clusters": 10, "runs": 3, "K": 40, "queries": args.queries,
                 "rows": args.models * 10 * args.queries * 40 * 3, "n_null": 2000,
                 "tree_calls": len(calls), "selection_bias_cpu_s": round(cpu, 2)}
    for metric in ("delta_api", "delta_pos"):
        for level, ps in (("cluster", [getattr(c, metric).p_value for g in res.groups for c in g.clusters]),
                          ("group", [getattr(g, metric).p_value for g in res.groups])):
            p = np.array(ps, dtype=float)
            rate = float(np.mean(p <= 0.05))
            out[f"{metric}_{level}"] = {"n": int(p.size), "reject_5pct": round(rate, 4),
                                        "mc_se": round(float(np.sqrt(0.05 * 0.95 / p.size)), 4),
                                        "mean_p": round(float(p.mean()), 4)}
    path = Path(__file__).with_suffix(".json")
    path.write_text(json.dumps(out, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
