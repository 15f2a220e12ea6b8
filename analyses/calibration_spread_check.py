"""Paired before/after check of the calibrated interval's spread-path change (issue 35) on the earlier tables' designs.

Issue 35 lets the spread path of `calibrated_mean_tv`'s upper bound move ``clip(0.6 rho, 1/4, 3/4)`` of the way to
equal magnitudes (``rho``: the errors' sd over the mean observed deviation) instead of a fixed quarter. The lower bound
does not depend on that path, so the earlier coverage tables can change only through the upper bound. This script feeds
identical inputs (counts and query-bootstrap replicates of its own per-query multinomial simulator) to the function
before the change (``--before``: a checkout of the package, e.g. ``git worktree add /tmp/before <commit>``) and after
it, and reports per design: coverage and misses below / above of both, how many lower bounds are identical, and how
many upper bounds moved up / down. Designs: the end-to-end table's (10 clusters x 100 queries x 5 rotations, five
choosers) and the audit's multi-rotation small-cluster rows (5 clusters x 5 queries x 5 rotations, 20 x 5).

Usage:  nice python analyses/calibration_spread_check.py --before /work/main [--studies 200] [--resamples 500]
Writes analyses/calibration_spread_check.json. Monte-Carlo s.e. of a coverage r over n studies: sqrt(r (1 - r) / n).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import time
from pathlib import Path

import numpy as np

from toolbias_stats.metrics._calibrated import calibrated_mean_tv

CHOOSERS = {"strong": (0.40, 0.25, 0.15, 0.12, 0.08), "mild": (0.26, 0.22, 0.20, 0.18, 0.14),
            "at 1/K": (0.35, 0.20, 0.20, 0.15, 0.10), "tiny": (0.22, 0.21, 0.20, 0.19, 0.18), "uniform": (0.2,) * 5}
# name -> (chooser, clusters, queries, rotations)
DESIGNS = {**{f"{c}, 10 x 100 q x 5 rot": (c, 10, 100, 5) for c in CHOOSERS},
           "strong, 5 x 5 q x 5 rot": ("strong", 5, 5, 5), "at 1/K, 5 x 5 q x 5 rot": ("at 1/K", 5, 5, 5),
           "strong, 5 x 20 q x 5 rot": ("strong", 5, 20, 5), "at 1/K, 5 x 20 q x 5 rot": ("at 1/K", 5, 20, 5)}


def _before(path):
    spec = importlib.util.spec_from_file_location("calibrated_before",
                                                  Path(path) / "toolbias_stats" / "metrics" / "_calibrated.py")
    mod = importlib.util.module_from_spec(spec)
    mod.__package__ = "toolbias_stats.metrics"   # its relative imports (a display mixin) resolve to this package
    sys.modules["calibrated_before"] = mod
    spec.loader.exec_module(mod)
    return mod.calibrated_mean_tv


def _study(p, c, q, rot, r, rng):
    """Counts and query-bootstrap replicates of one study (queries i.i.d., a query's rotations independent draws)."""
    p = np.asarray(p, float)
    counts, boots = [], []
    for _ in range(c):
        per_query = rng.multinomial(rot, p[rng.permutation(p.size)], size=q)
        w = rng.multinomial(q, np.full(q, 1 / q), size=r)
        counts.append(per_query.sum(0))
        boots.append(w @ per_query)
    return counts, boots


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", required=True, help="a checkout of the package before the change")
    ap.add_argument("--studies", type=int, default=200)
    ap.add_argument("--resamples", type=int, default=500)
    ap.add_argument("--seed", type=int, default=21)
    ap.add_argument("--out", default=str(Path(__file__).with_suffix(".json")))
    args = ap.parse_args(argv)
    before = _before(args.before)
    rows, t0 = [], time.time()
    for name, (chooser, c, q, rot) in DESIGNS.items():
        rng = np.random.default_rng([args.seed, len(rows)])
        p = CHOOSERS[chooser]
        truth = 0.5 * np.abs(np.asarray(p) - 0.2).sum()
        res = {"before": [], "after": []}
        for _ in range(args.studies):
            counts, boots = _study(p, c, q, rot, args.resamples, rng)
            for key, fn in (("before", before), ("after", calibrated_mean_tv)):
                r = fn(counts, boots, n_units=[q] * c)
                res[key].append((r.ci_low, r.ci_high))
        row = {"design": name, "truth": truth, "studies": args.studies}
        for key, v in res.items():
            a = np.array(v)
            low, high = a[:, 0] > truth + 1e-12, a[:, 1] < truth - 1e-12
            row.update({f"{key}_coverage": float(1 - (low | high).mean()), f"{key}_miss_low": float(low.mean()),
                        f"{key}_miss_high": float(high.mean()), f"{key}_width": float((a[:, 1] - a[:, 0]).mean())})
        b, a = np.array(res["before"]), np.array(res["after"])
        row.update({"lower_identical": float(np.mean(np.abs(a[:, 0] - b[:, 0]) <= 1e-12)),
                    "upper_up": float(np.mean(a[:, 1] > b[:, 1] + 1e-9)),
                    "upper_down": float(np.mean(a[:, 1] < b[:, 1] - 1e-9))})
        rows.append(row)
        print({k: (round(v, 4) if isinstance(v, float) else v) for k, v in row.items()}, flush=True)
    Path(args.out).write_text(json.dumps({"settings": vars(args) | {"seconds": round(time.time() - t0, 1)},
                                          "designs": rows}, indent=1))


if __name__ == "__main__":
    main()
