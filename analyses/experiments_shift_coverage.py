"""Coverage of the calibrated shift interval and uniformity of the "no change" p-value (SIMULATED studies).

Acceptance study of issue 8. Two conditions ("base", "level") with known selection distributions: 10 clusters x
K = 5 tools x 100 queries x 5 cyclic rotations, 1 run per condition, the same queries in both (paired design).
The chooser is a multinomial logit with tool and position weights (``choice_probabilities``), so the true
tool and position distributions, and hence the true cluster-averaged shift TV(P_level, P_base), are exact.
Every study is analysed through the public API (``toolbias_stats.selection_shift``) with 2,000 bootstrap
replicates and 2,000 label permutations.

Usage: ``python analyses/experiments_shift_coverage.py [--n-studies 200] [--scenarios a,b] [--out CSV]``
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np
import pandas as pd
from scipy import stats

from toolbias_stats.experiments import choice_probabilities, selection_shift, simulate_conditions

C, K = 10, 5
STRONG = np.array([0.40, 0.25, 0.15, 0.12, 0.08])
UNIF = np.full(K, 0.2)
POS = np.array([0.30, 0.22, 0.18, 0.16, 0.14])


def scenarios(gen):
    """{name: (base tool prefs (C, K), level tool prefs, base pos prefs, level pos prefs)}."""
    base = np.stack([gen.permutation(STRONG) for _ in range(C)])
    other = np.stack([np.roll(b, 2) for b in base])
    some = base.copy()
    # only the two most-chosen tools trade shares; three tools keep theirs
    for c in range(C):
        i, j = np.argsort(-base[c])[:2]
        some[c, i], some[c, j] = base[c, i] - 0.10, base[c, j] + 0.10
    return {
        "no shift": (base, base, POS, POS),
        "tiny (10% towards uniform)": (base, 0.9 * base + 0.1 * UNIF, POS, POS),
        "moderate (40% towards uniform, flatter positions)": (base, 0.6 * base + 0.4 * UNIF, POS, UNIF),
        "strong (tool preferences rotated)": (base, other, POS, POS[::-1]),
        "some tools unchanged (2 of 5 trade 0.10)": (base, some, POS, POS),
    }


def truth(tb, tl, pb, pl):
    a_b, p_b, _ = choice_probabilities(tb, pb)
    a_l, p_l, _ = choice_probabilities(tl, pl)
    return 0.5 * np.abs(a_l - a_b).sum(1).mean(), 0.5 * np.abs(p_l - p_b).sum(1).mean()


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--n-studies", type=int, default=200)
    ap.add_argument("--n-resamples", type=int, default=2000)
    ap.add_argument("--scenarios", default=None, help="comma-separated scenario indices (0-4)")
    ap.add_argument("--seed", type=int, default=8)
    ap.add_argument("--out", default="reports/experiments_shift_coverage.csv")
    args = ap.parse_args(argv)
    warnings.simplefilter("ignore")
    gen = np.random.default_rng(args.seed)
    scen = scenarios(gen)
    names = list(scen)
    if args.scenarios:
        names = [names[int(i)] for i in args.scenarios.split(",")]
    rows = []
    for name in names:
        tb, tl, pb, pl = scen[name]
        t_api, t_pos = truth(tb, tl, pb, pl)
        start = time.time()
        for s in range(args.n_studies):
            log = simulate_conditions({"base": (tb, pb), "level": (tl, pl)}, n_queries=100, n_runs=1,
                                      rng=gen.integers(2**63))
            res = selection_shift(log.counts(), between="condition", base="base", by=[],
                                  n_resamples=args.n_resamples, n_permutations=2000, rng=gen.integers(2**63))
            g = res.groups[0]
            for metric, tr in (("shift_api", t_api), ("shift_pos", t_pos)):
                e = getattr(g, metric)
                rows.append({"scenario": name, "metric": metric, "study": s, "truth": tr,
                             "plugin": e.mean_over_clusters, "corrected": e.corrected,
                             "low": e.corrected_ci.low, "high": e.corrected_ci.high,
                             "pct_low": e.ci.low, "pct_high": e.ci.high, "null_expected": e.null_expected,
                             "p_value": e.p_value})
        print(f"{name}: {args.n_studies} studies in {time.time() - start:.0f} s", flush=True)
    df = pd.DataFrame(rows)
    df.to_csv(args.out, index=False)
    print(markdown(summarise(df)))


def markdown(df):
    lines = ["| " + " | ".join(df.columns) + " |", "|" + "---|" * len(df.columns)]
    lines += ["| " + " | ".join(str(v) for v in r) + " |" for r in df.itertuples(index=False)]
    return "\n".join(lines)


def summarise(df):
    out = []
    for (name, metric), d in df.groupby(["scenario", "metric"], sort=False):
        tr = d["truth"].iloc[0]
        cover = ((d["low"] <= tr + 1e-12) & (tr - 1e-12 <= d["high"])).mean()
        miss_lo = (d["low"] > tr + 1e-12).mean()
        miss_hi = (d["high"] < tr - 1e-12).mean()
        pct = ((d["pct_low"] <= tr) & (tr <= d["pct_high"])).mean()
        ks = stats.kstest(d["p_value"], "uniform").pvalue if tr < 1e-12 else np.nan
        out.append({"scenario": name, "metric": metric, "truth": round(tr, 4), "n": len(d),
                    "coverage": f"{100 * cover:.1f}%", "miss low / high": f"{100 * miss_lo:.1f} / {100 * miss_hi:.1f}",
                    "mean width": round((d["high"] - d["low"]).mean(), 4),
                    "plug-in (mean)": round(d["plugin"].mean(), 4), "corrected (mean)": round(d["corrected"].mean(), 4),
                    "null_expected (mean)": round(d["null_expected"].mean(), 4),
                    "percentile CI coverage": f"{100 * pct:.1f}%",
                    "p<0.05": f"{100 * (d['p_value'] < 0.05).mean():.1f}%",
                    "KS p (uniform p-values)": "" if np.isnan(ks) else f"{ks:.2f}"})
    return pd.DataFrame(out)


if __name__ == "__main__":
    main()
