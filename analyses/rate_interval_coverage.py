"""Coverage of the per-tool selection-rate intervals of `selection_bias` (the rate table) in small designs (issue 35).

Each simulated cluster follows `analyses/bias_audit_sim.py` (seeded NumPy, written independently of
`toolbias_stats.simulate`): a chooser ``p`` permuted over the tools, every query sends a share ``h`` of its attempts to
a favourite tool drawn at random, ``a`` attempts per query. The query bootstrap is drawn as `selection_bias` draws it
(queries resampled with replacement, a query's attempts together) and the rate table is computed by the package's own
function (`toolbias_stats.metrics._bias._rate_table`, the one `ClusterBias.rate_table` calls). Per design and true
rate: coverage of the 95% intervals and their misses below / above:

  percentile  the query bootstrap's percentile interval (``bootstrap_low`` / ``bootstrap_high`` before issue 35)
  deff-wilson Wilson's interval at the query bootstrap's effective sample size, t(Q - 1) (after issue 35)
  wilson      Wilson's interval with every attempt independent (``wilson_low`` / ``wilson_high``, unchanged)

The true rate of a tool is ``(1 - h) p_i + h / K`` (every tool is a query's favourite with probability 1/K).
Monte-Carlo s.e. of a rate r over n intervals: sqrt(r (1 - r) / n) (n = clusters x studies).

Usage:  nice python analyses/rate_interval_coverage.py [--studies 500] [--resamples 1000]
Writes analyses/rate_interval_coverage.json.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from toolbias_stats.metrics._bias import _rate_table

STRONG5 = (0.40, 0.25, 0.15, 0.12, 0.08)
# name -> (chooser, queries, attempts per query, h)
DESIGNS = {
    "strong, 10 q x 1": (STRONG5, 10, 1, 0.0),
    "strong, 25 q x 1": (STRONG5, 25, 1, 0.0),
    "strong, 5 q x 5": (STRONG5, 5, 5, 0.0),
    "strong, 20 q x 5, h=0.3": (STRONG5, 20, 5, 0.3),
    "K=20 fair, 20 q x 4, h=0.3": ((0.05,) * 20, 20, 4, 0.3),
    "K=20 fair, 80 q x 1, h=0.3": ((0.05,) * 20, 80, 1, 0.3),
}


def one_cluster(p, q, a, h, n_resamples, rng):
    """Per-tool counts, bootstrap replicate counts and the true rates (in the tools' order) of one cluster."""
    k = p.size
    pc = p[rng.permutation(k)]
    fav = rng.integers(0, k, size=q)
    pq = (1 - h) * pc[None, :] + h * np.eye(k)[fav]
    per_query = np.stack([rng.multinomial(a, pq[i]) for i in range(q)])          # (Q, K)
    weights = rng.multinomial(q, np.full(q, 1.0 / q), size=n_resamples)           # (R, Q)
    return per_query.sum(0), (weights @ per_query).astype(float), (1 - h) * pc + h / k


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--studies", type=int, default=500, help="clusters per design = 5 x studies")
    ap.add_argument("--resamples", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=35)
    ap.add_argument("--out", default=str(Path(__file__).with_suffix(".json")))
    args = ap.parse_args(argv)
    rows, t0 = [], time.time()
    alpha = 0.05
    for j, (name, (p, q, a, h)) in enumerate(DESIGNS.items()):
        rng = np.random.default_rng([args.seed, j])
        p = np.asarray(p, float)
        res: dict = {}
        for _ in range(5 * args.studies):
            counts, boot, truth = one_cluster(p, q, a, h, args.resamples, rng)
            t = _rate_table("c", [f"t{i}" for i in range(p.size)], counts, boot[:, None, :].sum(1), 1 - alpha, q)
            br = boot / boot.sum(1, keepdims=True)
            pct = np.quantile(br, [alpha / 2, 1 - alpha / 2], axis=0)
            ints = {"percentile": pct, "deff-wilson": (t["bootstrap_low"].to_numpy(), t["bootstrap_high"].to_numpy()),
                    "wilson": (t["wilson_low"].to_numpy(), t["wilson_high"].to_numpy())}
            for m, (lo, hi) in ints.items():
                for i, tr in enumerate(np.round(truth, 6)):
                    r = res.setdefault((m, float(tr)), [0, 0, 0])
                    r[0] += 1
                    r[1] += lo[i] > tr + 1e-9
                    r[2] += hi[i] < tr - 1e-9
        for (m, tr), (n, low, high) in sorted(res.items()):
            cov = 1 - (low + high) / n
            rows.append({"design": name, "method": m, "true_rate": tr, "intervals": n, "coverage": cov,
                         "miss_low": low / n, "miss_high": high / n,
                         "mc_se_coverage": float(np.sqrt(max(cov * (1 - cov), 1e-12) / n))})
        for m in ("percentile", "deff-wilson", "wilson"):
            part = [r for r in rows if r["design"] == name and r["method"] == m]
            print(f"{name:28s} {m:12s} coverage {min(r['coverage'] for r in part):.3f}-"
                  f"{max(r['coverage'] for r in part):.3f}  worst miss below {max(r['miss_low'] for r in part):.3f} "
                  f"above {max(r['miss_high'] for r in part):.3f}", flush=True)
    Path(args.out).write_text(json.dumps({"settings": vars(args) | {"seconds": round(time.time() - t0, 1)},
                                          "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
