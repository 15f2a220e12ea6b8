"""Issue 37: size of ``selection_bias``'s uniform-chooser p-value when the null is drawn from the exact law.

Past ``EXACT_MIN_DRAWS`` multinomial draws per group and metric, each cluster's mean over runs of the uniform
chooser's TV is drawn from its exact law (``metrics/_vectorised.py``, ``uniform_null_means``) instead of from
``n_null`` multinomial vectors per cluster and run. This script checks, end to end through ``selection_bias``,
that under a uniform chooser the p-values (group and clusters, delta_API and delta_pos) reject at 5% about 5% of
the time, with the exact route forced on (``EXACT_MIN_DRAWS = 0``) and, for comparison, the multinomial route.

Usage:  python analyses/null_exact_law_size.py [--studies 600] [--clusters 40] [--queries 6] [--runs 3]

Writes ``analyses/null_exact_law_size.json`` next to this script.
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from pathlib import Path

import numpy as np

from toolbias_stats.metrics import _vectorised as vec
from toolbias_stats.metrics import selection_bias
from toolbias_stats.simulate import simulate_selection_log


def run(route: str, studies: int, clusters: int, queries: int, runs: int, n_null: int, seed: int) -> dict:
    vec.EXACT_MIN_DRAWS = 0 if route == "exact" else 1 << 62
    rej: dict[str, list] = {"delta_api": [], "delta_pos": [], "delta_api_clusters": [], "delta_pos_clusters": []}
    rng = np.random.default_rng(seed)
    for _ in range(studies):
        sim = simulate_selection_log(n_clusters=clusters, n_queries=queries, n_runs=runs, p_no_call=0.05,
                                     rng=int(rng.integers(2**31)))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res = selection_bias(sim.log, n_resamples=0, n_null=n_null, rng=int(rng.integers(2**31)))
        g = res.groups[0]
        for m in ("delta_api", "delta_pos"):
            rej[m].append(getattr(g, m).p_value <= 0.05)
            rej[m + "_clusters"].extend(getattr(c, m).p_value <= 0.05 for c in g.clusters)
    out = {}
    for k, v in rej.items():
        p = float(np.mean(v))
        out[k] = {"rejection_rate": round(p, 4), "n": len(v), "mc_se": round(float(np.sqrt(p * (1 - p) / len(v))), 4)}
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--studies", type=int, default=600)
    ap.add_argument("--clusters", type=int, default=40)
    ap.add_argument("--queries", type=int, default=6)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--null", type=int, default=500)
    ap.add_argument("--seed", type=int, default=37)
    args = ap.parse_args()
    result = {"settings": vars(args)}
    for route in ("exact", "multinomial"):
        t = time.process_time()
        result[route] = run(route, args.studies, args.clusters, args.queries, args.runs, args.null, args.seed)
        result[route]["cpu_s"] = round(time.process_time() - t, 1)
        print(route, json.dumps(result[route]), flush=True)
    Path(__file__).with_suffix(".json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
