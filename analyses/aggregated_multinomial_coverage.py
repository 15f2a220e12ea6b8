"""Coverage of the intervals reported for aggregated counts (issue 13): multinomial replicates.

An aggregated table (one row per model, cluster and outcome with a ``count``) has no per-query rows, so
``selection_bias`` cannot resample queries; it draws the attempts instead (``Multinomial(n, p_hat)`` per cluster and
run) and feeds those replicates to the same calibrated interval as the query bootstrap. Here the data really are
multinomial (independent attempts), so the coverage of the interval for the true delta = mean_c TV(p_c, uniform)
should be close to the nominal 95%. The percentile interval of the plug-in is shown beside it: it is centred on
the upward-biased plug-in and misses the true delta near uniformity.

The last part breaks the assumption on purpose: queries differ (each query's tool probabilities are drawn from a
Dirichlet(2p), 30 queries x 10 attempts per cluster), so attempts of one query are correlated. The same data
are analysed (a) with per-query rows and counts (query bootstrap) and (b) pooled into one row per outcome (multinomial
replicates): (b) is too narrow, which is why the result names its assumption.

Every study is written as an aggregated CSV file (no query_id column) and read by ``read_table`` (pandas), so the
reader, the counts layer and the metric are all exercised.

Usage::

    nice .venv/bin/python analyses/aggregated_multinomial_coverage.py --studies 400 --resamples 500 --overdispersed 200

Prints one line per scenario and writes ``reports/aggregated_multinomial_coverage.csv``.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

import toolbias_stats as tbs
from toolbias_stats.io._catalog import ToolCatalog
from toolbias_stats.io.readers.table import read_table

ROOT = Path(__file__).resolve().parents[1]

#: name -> (K, number of clusters, attempts per cluster, per-cluster probabilities (rows cycle))
SCENARIOS = {
    "issue-like K=2, strong (0.95/0.05), n=1160": (2, 4, 1160, [[0.95, 0.05], [0.6, 0.4]]),
    "K=2, near uniform (0.53/0.47), n=300": (2, 4, 300, [[0.53, 0.47]]),
    "K=5 skewed, n=300": (5, 5, 300, [[0.4, 0.25, 0.15, 0.12, 0.08]]),
    "K=5 mild, n=200": (5, 5, 200, [[0.26, 0.22, 0.2, 0.18, 0.14]]),
    "K=5 partly uniform, n=300": (5, 6, 300, [[0.2] * 5, [0.5, 0.2, 0.1, 0.1, 0.1]]),
    "K=5 uniform (delta = 0), n=300": (5, 5, 300, [[0.2] * 5]),
}


def one_study(k, n_clusters, n, probs, rng, tmp: Path, n_resamples, seed):
    catalog = ToolCatalog.from_records([{"tool_id": f"c{c}_t{i}", "cluster_id": f"c{c}"}
                                        for c in range(n_clusters) for i in range(k)])
    rows = []
    truth = []
    for c in range(n_clusters):
        p = np.asarray(probs[c % len(probs)], dtype=float)
        truth.append(0.5 * np.abs(p - 1 / k).sum())
        draws = rng.multinomial(n, p)
        rows += [{"model": "m", "cluster_id": f"c{c}", "chosen_tool": f"c{c}_t{i}", "status": "ok",
                  "count": int(x)} for i, x in enumerate(draws)]
    path = tmp / "agg.csv"
    pd.DataFrame(rows).to_csv(path, index=False)
    log = read_table(path, catalog=catalog)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = tbs.selection_bias(log, n_resamples=n_resamples, n_null=0, rng=seed)
    r = res.groups[0].delta_api
    assert res.interval_method == "multinomial (attempts assumed independent)"
    return float(np.mean(truth)), r


def overdispersed_study(k, n_clusters, n_queries, per_query, p, concentration, rng, tmp, n_resamples, seed):
    """Correlated attempts: per-query probabilities ~ Dirichlet(concentration * p). Returns truth and both results."""
    catalog = ToolCatalog.from_records([{"tool_id": f"c{c}_t{i}", "cluster_id": f"c{c}"}
                                        for c in range(n_clusters) for i in range(k)])
    rows = []
    for c in range(n_clusters):
        pq = rng.dirichlet(concentration * np.asarray(p), size=n_queries)
        for q in range(n_queries):
            draws = rng.multinomial(per_query, pq[q])
            rows += [{"model": "m", "cluster_id": f"c{c}", "query_id": f"q{q}", "chosen_tool": f"c{c}_t{i}",
                      "status": "ok", "count": int(x)} for i, x in enumerate(draws) if x]
    frame = pd.DataFrame(rows)
    frame.to_csv(tmp / "per_query.csv", index=False)
    pooled = frame.groupby(["model", "cluster_id", "chosen_tool", "status"], as_index=False)["count"].sum()
    pooled.to_csv(tmp / "pooled.csv", index=False)
    out = []
    for name in ("per_query.csv", "pooled.csv"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res = tbs.selection_bias(read_table(tmp / name, catalog=catalog), n_resamples=n_resamples, n_null=0,
                                     rng=seed)
        out.append((res.interval_method, res.groups[0].delta_api))
    truth = 0.5 * np.abs(np.asarray(p) - 1 / k).sum()
    return truth, out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--studies", type=int, default=400)
    ap.add_argument("--resamples", type=int, default=500)
    ap.add_argument("--seed", type=int, default=20261122)
    ap.add_argument("--overdispersed", type=int, default=200, help="studies of the correlated-attempts part (0: skip)")
    ap.add_argument("--only-overdispersed", action="store_true", help="skip the independent-attempts scenarios")
    ap.add_argument("--out", default=str(ROOT / "reports" / "aggregated_multinomial_coverage.csv"))
    args = ap.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, (k, n_clusters, n, probs) in ({} if args.only_overdispersed else SCENARIOS).items():
            t0 = time.perf_counter()
            cal = pct = miss_low = miss_high = 0
            widths = []
            for _ in range(args.studies):
                truth, r = one_study(k, n_clusters, n, probs, rng, Path(tmp), args.resamples, int(rng.integers(2**31)))
                lo, hi = r.corrected_ci
                cal += lo <= truth + 1e-12 and truth - 1e-12 <= hi
                miss_low += truth < lo - 1e-12
                miss_high += truth > hi + 1e-12
                pct += r.ci.low <= truth <= r.ci.high
                widths.append(hi - lo)
            row = {"scenario": name, "true_delta": round(truth, 4), "studies": args.studies,
                   "resamples": args.resamples, "calibrated_coverage": cal / args.studies,
                   "calibrated_miss_below": miss_low / args.studies, "calibrated_miss_above": miss_high / args.studies,
                   "percentile_coverage": pct / args.studies, "mean_width": float(np.mean(widths)),
                   "seconds": round(time.perf_counter() - t0, 1)}
            out.append(row)
            print(" | ".join(f"{k_}={v}" for k_, v in row.items()), flush=True)
        if args.overdispersed:
            p = [0.4, 0.25, 0.15, 0.12, 0.08]
            t0 = time.perf_counter()
            hits, widths, methods = [0, 0], [[], []], ["", ""]
            for _ in range(args.overdispersed):
                truth, pair = overdispersed_study(5, 5, 30, 10, p, 2.0, rng, Path(tmp), args.resamples,
                                                  int(rng.integers(2**31)))
                for j, (method, r) in enumerate(pair):
                    hits[j] += r.corrected_ci.low <= truth <= r.corrected_ci.high
                    widths[j].append(r.corrected_ci.high - r.corrected_ci.low)
                    methods[j] = method
            for j, label in enumerate(("per-query rows with counts", "pooled counts (no query ids)")):
                row = {"scenario": f"K=5 skewed, OVERDISPERSED queries (Dirichlet 2p), 30 q x 10 attempts: {label}",
                       "true_delta": round(truth, 4), "studies": args.overdispersed, "resamples": args.resamples,
                       "interval_method": methods[j], "calibrated_coverage": hits[j] / args.overdispersed,
                       "mean_width": float(np.mean(widths[j])), "seconds": round(time.perf_counter() - t0, 1)}
                out.append(row)
                print(" | ".join(f"{k_}={v}" for k_, v in row.items()), flush=True)
    frame = pd.DataFrame(out)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    frame.to_csv(args.out, index=False)
    print(frame.to_string(index=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
