"""Choosing the Bayesian model by evidence: every variant of `fit_bayes` on the bundled BiasBusters study.

Usage:  python analyses/compare_bayes.py [--models v1,cluster-position,v2[,thorough]] [--thorough-draws 300]
                                         [--out analyses/bayes_comparison.json]

For each variant (default settings, seed 20251121; variants with query effects with fewer draws, see
``--thorough-draws``) the script records the wall time, the convergence diagnostics, the three
posterior predictive checks (cluster x position table, finest table, per-query dispersion) and the
implied delta_API / delta_pos under logged and randomised orderings; then it compares the variants by
PSIS-LOO over queries (``compare_bayes``: every variant scored on all attempts of one query of one
LLM, the unit they share; see docs/bayes.md) and prints

* the comparison table (ELPD differences with their standard errors, Pareto k, PPC p-values),
* the headline counterfactual "if the harness shuffled the list" (implied deltas under randomised
  orderings) under v1 and under every other variant, with the change.

Everything printed is also written as JSON (``--out``) for docs/bayes.md.
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
STUDY = ROOT / "data" / "biasbusters" / "study.toml"
SEED = 20251121


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default="v1,cluster-position,v2")
    ap.add_argument("--thorough-draws", type=int, default=300,
                    help="draws (and tune) per chain for the variants with query effects (slow)")
    ap.add_argument("--out", default=str(ROOT / "analyses" / "bayes_comparison.json"))
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    from bayes_experimental import fit_experimental as fit_bayes  # also the experimental variants (issue 38)

    import toolbias_stats as tbs
    from toolbias_stats.models import compare_bayes

    log = tbs.read_study(STUDY).log
    fits, summary = {}, {}
    for name in [m for m in args.models.split(",") if m]:
        kw = {}
        if name in ("overdispersed", "thorough"):
            kw = {"draws": args.thorough_draws, "tune": args.thorough_draws}
        t = time.perf_counter()
        res = fit_bayes(log, model=name, rng=SEED, **kw)
        wall = time.perf_counter() - t
        fits[name] = res
        d = res.diagnostics
        disp = res.ppc.dispersion
        summary[name] = {
            "seconds": wall, "draws": d.draws, "tune": d.tune, "chains": d.chains,
            "max_rhat": d.max_rhat, "min_ess_bulk": d.min_ess_bulk, "min_ess_tail": d.min_ess_tail,
            "divergences": d.divergences, "converged": d.converged,
            "ppc_p_cluster_position": res.ppc.p_value, "ppc_p_rows": res.ppc.p_value_rows,
            "ppc_p_dispersion": res.ppc.p_value_dispersion,
            "dispersion": disp.to_dict(orient="records") if disp is not None else None,
            "implied": res.implied.to_dict(orient="records"),
            "scales": res.scales.to_dict(orient="records"),
            "variance_shares": res.variance_shares.to_dict(orient="records"),
            "first_vs_last": res.first_vs_last[["llm", "p_first_beats_last", "mean", "hdi_low", "hdi_high"]]
            .to_dict(orient="records"),
        }
        print(f"{name}: {wall:.1f} s, R-hat {d.max_rhat:.4f}, bulk ESS {d.min_ess_bulk:.0f}, "
              f"div {d.divergences}; PPC p: cluster x position {res.ppc.p_value:.3f}, finest "
              f"{res.ppc.p_value_rows:.3f}, per-query dispersion {res.ppc.p_value_dispersion:.3f}", flush=True)
    table = compare_bayes(fits)
    print("\nPSIS-LOO over queries (az.compare):")
    print(table.to_string(float_format=lambda x: f"{x:.3f}"))
    # the headline counterfactual under every variant against v1
    rows = []
    if "v1" in fits:
        base = fits["v1"].implied.set_index(["llm", "metric", "orderings"])
        for name, res in fits.items():
            if name == "v1":
                continue
            imp = res.implied.set_index(["llm", "metric", "orderings"])
            for (llm, metric, orderings), r in imp.iterrows():
                b = base.loc[(llm, metric, orderings)]
                rows.append({"model": name, "llm": llm, "metric": metric, "orderings": orderings,
                             "v1": b["mean"], "v1_low": b["hdi_low"], "v1_high": b["hdi_high"], "mean": r["mean"],
                             "low": r["hdi_low"], "high": r["hdi_high"], "change": r["mean"] - b["mean"],
                             "width_ratio": (r["hdi_high"] - r["hdi_low"]) / (b["hdi_high"] - b["hdi_low"])})
        import pandas as pd

        cf = pd.DataFrame(rows)
        sub = cf[cf["orderings"] == "randomised"]
        print("\nIf the harness shuffled the list (randomised orderings): implied deltas, v1 vs each variant")
        print(sub.to_string(index=False, float_format=lambda x: f"{x:.3f}"))
    out = {"study": str(STUDY.relative_to(ROOT)), "seed": SEED, "fits": summary,
           "loo": table.reset_index().to_dict(orient="records"), "counterfactual": rows}
    Path(args.out).write_text(json.dumps(_strict(out), indent=1, allow_nan=False))
    print(f"\nwrote {args.out}")


def _strict(v):
    """Plain JSON values: numpy scalars as Python numbers, NaN and infinities as null (strict JSON)."""
    if isinstance(v, dict):
        return {str(k): _strict(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_strict(x) for x in v]
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    if isinstance(v, np.integer):
        return int(v)
    if isinstance(v, (float, np.floating)):
        return float(v) if np.isfinite(v) else None
    if v is None or isinstance(v, (int, str)):
        return v
    return str(v)


if __name__ == "__main__":
    main()
