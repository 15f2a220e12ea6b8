"""Acceptance study of TOOL-SHADOW (issue 9): simulated harness logs with a known truth, through the public API.

Scenarios (``toolbias_stats.shadow.simulate_audit``; 600 turns x 12 tools, 2-4 relevant tools per turn,
1,000 bootstrap replicates and 500 weight draws per audit):

* ``null``: no position, length or similarity effect (fixed order, and a permuted-order design);
* ``primacy``: log OR 2.0 between the first and the last slot (fixed order);
* ``confound``: long descriptions listed first (corr 0.6 between length and earliness), a true length effect
  of 0.8 log-odds per SD and no position effect.

Reported per scenario: share of audits whose effect-scale (and paper-scale) PBS interval covers 50, mean and
SD of z_L and z_R with Kolmogorov-Smirnov p-values against N(0, 1), rejection rates |z| > 1.96, and the mean
scores. A second table shows the paper's PBS drifting to 100 as the log grows while the effect-size PBS stays put
(small primacy, log OR 0.3, permuted orders, 20 audits per size).

Run: ``nice -n 10 python analyses/shadow_simulation.py [--reps 200]`` (about 2 minutes on 2 cores); prints
Markdown tables (pasted into docs/guide/tool_shadow_overview.md).
"""

from __future__ import annotations

import argparse
import warnings

import numpy as np
from scipy import stats

from toolbias_stats.shadow import simulate_audit, tool_shadow

SCENARIOS = {
    "null (fixed order)": dict(),
    "null (permuted orders)": dict(permute=True),
    "primacy, log OR 2.0": dict(position_effect=2.0),
    "length confound, no position effect": dict(length_effect=0.8, length_position_corr=0.6),
}


def run_scenario(kw, reps, seed):
    rec = {k: [] for k in ("cov_e", "cov_p", "zL", "zR", "zD", "pbs_p", "pbs_e", "L_avail")}
    for i in range(reps):
        audit = simulate_audit(600, 12, rng=seed * 100_000 + i, **kw)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            g = tool_shadow(audit, n_resamples=1000, n_weight_draws=500, rng=i).groups[0]
        rec["cov_e"].append(g.pbs["effect"].ci.low <= 50 <= g.pbs["effect"].ci.high)
        rec["cov_p"].append(g.pbs["paper"].ci.low <= 50 <= g.pbs["paper"].ci.high)
        for d in "LRD":
            rec["z" + d].append(g.domains[d].z)
        rec["pbs_p"].append(g.pbs["paper"].estimate)
        rec["pbs_e"].append(g.pbs["effect"].estimate)
        rec["L_avail"].append(g.domains["L"].available)
    return {k: np.array(v, dtype=float) for k, v in rec.items()}


def growth(reps=20):
    out = []
    for n in (100, 300, 1000, 3000, 10000):
        p, e = [], []
        for i in range(reps):
            a = simulate_audit(n, 12, position_effect=0.3, permute=True, rng=10_000 + i)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                g = tool_shadow(a, n_resamples=0, n_weight_draws=0, rng=i).groups[0]
            p.append(g.pbs["paper"].estimate)
            e.append(g.pbs["effect"].estimate)
        out.append((n, np.mean(p), np.std(p), np.mean(e), np.std(e)))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=200)
    args = ap.parse_args()
    print("| scenario | audits | effect-PBS CI covers 50 | paper-PBS CI covers 50 | z_L mean (sd) | z_R mean (sd) "
          "| KS p z_L / z_R vs N(0,1) | P(\\|z_L\\|>1.96) / P(\\|z_R\\|>1.96) | z_D mean | PBS paper (mean) "
          "| PBS effect (mean) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for j, (name, kw) in enumerate(SCENARIOS.items()):
        r = run_scenario(kw, args.reps, j + 1)
        zl, zr = r["zL"][np.isfinite(r["zL"])], r["zR"][np.isfinite(r["zR"])]
        ks_l, ks_r = stats.kstest(zl, "norm").pvalue, stats.kstest(zr, "norm").pvalue
        print(f"| {name} | {args.reps} | {100 * r['cov_e'].mean():.1f}% | {100 * r['cov_p'].mean():.1f}% "
              f"| {zl.mean():.2f} ({zl.std(ddof=1):.2f}) | {zr.mean():.2f} ({zr.std(ddof=1):.2f}) "
              f"| {ks_l:.2f} / {ks_r:.2f} | {100 * np.mean(np.abs(zl) > 1.96):.1f}% / "
              f"{100 * np.mean(np.abs(zr) > 1.96):.1f}% | {np.nanmean(r['zD']):.2f} | {r['pbs_p'].mean():.1f} "
              f"| {r['pbs_e'].mean():.1f} |", flush=True)
    print()
    print("| turns | PBS paper mean (sd) | PBS effect mean (sd) |")
    print("|---|---|---|")
    for n, pm, ps, em, es in growth():
        print(f"| {n:,} | {pm:.1f} ({ps:.1f}) | {em:.1f} ({es:.1f}) |", flush=True)


if __name__ == "__main__":
    main()
