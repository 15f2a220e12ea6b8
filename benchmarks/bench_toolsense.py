"""Benchmark: scoring 500 RRB queries x 5 configurations with 2,000 bootstrap replicates (target < 2 s).

Uses the vendored RRB and five synthetic configurations (random rankings of each query's pool, free-decoding
lists with invalid names), k = 1, 5, 10, 50; times ``retrieval_recall`` (hits, paired bootstrap, BCa,
Fieller, delta) and ``compare_configurations`` (10 pairs x 4 k, McNemar + Holm) separately.

Run:  nice -n 10 .venv/bin/python benchmarks/bench_toolsense.py [--repeat 5]
"""

from __future__ import annotations

import argparse
import os
import platform
import time
import warnings

import numpy as np
import pandas as pd

from toolbias_stats.toolsense import compare_configurations, read_rrb, retrieval_recall


def configurations(bench, n_configs=5, seed=0):
    rng = np.random.default_rng(seed)
    out = {}
    for c in range(n_configs):
        cons, free = [], []
        for pool in bench.queries["pool"]:
            ranked = [pool[i] for i in rng.permutation(len(pool))]
            ranked += [f"cfg{c}&&filler{j}" for j in range(50 - len(ranked))]  # top-50 lists
            cons.append(tuple(ranked))
            f = list(ranked)
            if rng.random() < 0.3:
                f[0] = "hallucinated&&tool"
            free.append(tuple(f))
        out[f"config{c}"] = pd.DataFrame({"sample_id": bench.queries["sample_id"], "constrained": cons, "free": free})
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args(argv)
    bench = read_rrb()
    preds = configurations(bench)
    times, cmp_times = [], []
    for r in range(args.repeat):
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res = retrieval_recall(bench, preds, k=(1, 5, 10, 50), n_resamples=2000, rng=r)
        times.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        compare_configurations(res)
        cmp_times.append(time.perf_counter() - t0)
    print(f"machine: {platform.machine()}, {os.cpu_count()} CPU(s), Python {platform.python_version()}")
    print(f"retrieval_recall, 500 queries x 5 configurations x 4 k, 2,000 replicates: "
          f"median {np.median(times):.3f} s (min {min(times):.3f}, max {max(times):.3f}; {args.repeat} runs)")
    print(f"compare_configurations, 10 pairs x 4 k: median {np.median(cmp_times):.3f} s")


if __name__ == "__main__":
    main()
