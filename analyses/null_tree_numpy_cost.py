"""CPU of the tree null's NumPy port against the compiled kernel, per call, over K and n (issue 37: K = 40
without numba). Writes ``null_tree_numpy_cost.json`` next to this script.

Each case draws ``n_null`` = 2,000 TVs for 30 cells (10 clusters x 3 runs, as the k40 shape's groups) of ``n``
valid choices around the given value, K tools; the tables are built first (once per process, timed apart), then
the draws are timed ``REPEAT`` times (CPU seconds, the best and the median) and checked equal bit for bit.

Usage: ``python analyses/null_tree_numpy_cost.py`` (a few minutes on 2 cores).
"""

from __future__ import annotations

import json
import statistics
import time
from pathlib import Path

import numpy as np

from toolbias_stats.metrics import _null_kernel as nk
from toolbias_stats.metrics import _null_tree_numpy as tn

REPEAT = 5
N_NULL = 2000
CASES = [(16, 300), (16, 4600), (20, 1000), (33, 4600), (40, 120), (40, 1000), (40, 4600), (40, 20_000),
         (64, 4600)]


def _cpu(fn) -> list[float]:
    out = []
    for _ in range(REPEAT):
        t = time.process_time()
        fn()
        out.append(time.process_time() - t)
    return out


def main() -> None:
    rng = np.random.default_rng(0)
    nk.tree_tv(np.array([5]), 3, 2, seed=0)                      # numba and the kernel loaded, not timed
    rows = []
    for k, n in CASES:
        ns = n + rng.integers(-15, 16, 30)
        bands = {tn.band(int(x)) for x in ns}
        t = time.process_time()
        for lo, hi in bands:
            tn._layout(k, lo, hi)
        port_tables = time.process_time() - t
        t = time.process_time()
        for lo, hi in bands:
            nk.tables(k, lo, hi)
        kernel_tables = time.process_time() - t
        same = np.array_equal(tn.tree_tv(ns, k, N_NULL, 1), nk.tree_tv(ns, k, N_NULL, 1))
        port = _cpu(lambda ns=ns, k=k: tn.tree_tv(ns, k, N_NULL, 2))
        kernel = _cpu(lambda ns=ns, k=k: nk.tree_tv(ns, k, N_NULL, 2))
        binomials = N_NULL * ns.size * (k - 1)
        row = {"k": k, "n": n, "binomials": binomials, "table_entries": tn.table_entries(ns, k),
               "port_s_best": round(min(port), 4), "port_s_median": round(statistics.median(port), 4),
               "kernel_s_best": round(min(kernel), 4), "kernel_s_median": round(statistics.median(kernel), 4),
               "ratio_best": round(min(port) / min(kernel), 2),
               "extra_ns_per_binomial": round((min(port) - min(kernel)) / binomials * 1e9, 1),
               "port_tables_s": round(port_tables, 4), "kernel_tables_s": round(kernel_tables, 4),
               "bit_identical": bool(same)}
        rows.append(row)
        print(row, flush=True)
    out = Path(__file__).with_suffix(".json")
    import os
    out.write_text(json.dumps({"load": os.getloadavg(), "cases": rows}, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
