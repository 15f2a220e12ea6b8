"""The calibrated lower bound of delta_pos in the release gate's design, at the interval level (issue 35).

The gate's ``check --rule exceeds`` fails when the calibrated interval lies wholly above the threshold; at a true
delta_pos equal to the threshold its fail rate is the lower bound's miss rate (nominal one-sided 2.5%; the gate asks
<= 5%). `analyses/gate_error_rates.py` measured 5.3% +- 1.3 end to end. This script checks the interval itself on the
same design with its own simulator: 10 clusters x 100 queries, each query 15 attempts (5 rotations x 3 runs) whose
positions are drawn from the gate's position chooser (one favourite, 0.40, the other four 0.15: delta_pos = 0.20), the
query bootstrap drawn as `selection_bias` draws it (queries with replacement, a query's attempts together), and
`calibrated_mean_tv` called as `selection_bias` calls it (``n_units`` = queries). Misses below / above with their
Monte-Carlo standard errors.

Usage:  nice python analyses/gate_delta_pos_lower_bound.py [--studies 500] [--resamples 1000]
Writes analyses/gate_delta_pos_lower_bound.json.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from toolbias_stats.metrics._calibrated import calibrated_mean_tv

PREF = np.array([0.40, 0.15, 0.15, 0.15, 0.15])      # delta_pos 0.20, the gate's threshold
CLUSTERS, QUERIES, ATTEMPTS = 10, 100, 15


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--studies", type=int, default=500)
    ap.add_argument("--resamples", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=39)
    ap.add_argument("--out", default=str(Path(__file__).with_suffix(".json")))
    args = ap.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    truth = 0.5 * float(np.abs(PREF - 0.2).sum())
    low = high = 0
    t0 = time.time()
    for _ in range(args.studies):
        counts, boots = [], []
        for _c in range(CLUSTERS):
            per_query = rng.multinomial(ATTEMPTS, PREF, size=QUERIES)
            weights = rng.multinomial(QUERIES, np.full(QUERIES, 1.0 / QUERIES), size=args.resamples)
            counts.append(per_query.sum(0))
            boots.append(weights @ per_query)
        r = calibrated_mean_tv(counts, boots, n_units=[QUERIES] * CLUSTERS)
        low += r.ci_low > truth + 1e-12
        high += r.ci_high < truth - 1e-12
    n = args.studies
    out = {"settings": vars(args) | {"seconds": round(time.time() - t0, 1)}, "truth": truth, "studies": n,
           "miss_below": low / n, "miss_above": high / n, "coverage": 1 - (low + high) / n,
           "mc_se_miss_below": float(np.sqrt(max(low / n * (1 - low / n), 1e-12) / n))}
    print(out, flush=True)
    Path(args.out).write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
