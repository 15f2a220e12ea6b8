"""The query mixture (``model="query-mixture"``) on the vendored BiasBusters study: the issue-22 targets.

Fits the variant (and, with ``--with-v2``, the default for reference) with the given settings and writes the
diagnostics, the three posterior predictive p-values, the per-LLM dispersion table, the scales (``lambda``,
``epsilon``), the parameters whose R-hat misses 1.01, wall and CPU time and the load average to a JSON file.

Usage::

    python analyses/bayes_mixture_vendored.py [--draws 1000 --tune 1000 --chains 4] [--out analyses/bayes_mixture.json]
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def _loadavg():
    return Path("/proc/loadavg").read_text().split()[:3]


def _fit(log, model, draws, tune, chains, seed):
    from bayes_experimental import fit_experimental as fit_bayes  # the experimental variants (issue 38)

    t0, c0 = time.perf_counter(), time.process_time()
    load0 = _loadavg()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = fit_bayes(log, model=model, draws=draws, tune=tune, chains=chains, rng=seed)
    import arviz as az

    rh = az.rhat(res.idata.posterior)
    bad = {}
    for v in rh.data_vars:
        x = np.asarray(rh[v].values, dtype=float)
        if x.size and np.nanmax(x) > 1.01:
            at = np.unravel_index(np.nanargmax(x), x.shape)
            bad[v] = {"max_rhat": float(np.nanmax(x)), "at": [int(i) for i in at]}
    d = res.diagnostics
    ss = res.idata.sample_stats
    out = {"model": model, "draws": draws, "tune": tune, "chains": chains, "seed": seed,
           "wall_s": round(time.perf_counter() - t0, 1), "cpu_s": round(time.process_time() - c0, 1),
           "loadavg_before": load0, "loadavg_after": _loadavg(),
           "max_rhat": d.max_rhat, "min_ess_bulk": d.min_ess_bulk, "min_ess_tail": d.min_ess_tail,
           "divergences": d.divergences,
           "mean_leapfrog_steps": float(ss["n_steps"].mean()) if "n_steps" in ss else None,
           "ppc_cluster_x_position": res.ppc.p_value, "ppc_finest": res.ppc.p_value_rows,
           "ppc_dispersion": res.ppc.p_value_dispersion,
           "dispersion_table": res.ppc.dispersion.to_dict(orient="records"),
           "rhat_above_1.01": bad, "warnings": [str(w.message)[:300] for w in caught]}
    sc = res.scales
    if "lambda" in set(sc["quantity"]):
        out["lambda"] = {r.llm: [r.mean, r.hdi_low, r.hdi_high] for r in sc[sc.quantity == "lambda"].itertuples()}
        e = sc[sc.quantity == "epsilon"]
        out["epsilon_summary"] = {"min": float(e["mean"].min()), "median": float(e["mean"].median()),
                                  "max": float(e["mean"].max())}
    imp = res.implied[res.implied.orderings == "randomised"]
    out["implied_randomised"] = [{"llm": r.llm, "metric": r.metric, "mean": r.mean, "hdi": [r.hdi_low, r.hdi_high]}
                                 for r in imp.itertuples()]
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--draws", type=int, default=1000)
    ap.add_argument("--tune", type=int, default=1000)
    ap.add_argument("--chains", type=int, default=4)
    ap.add_argument("--seed", type=int, default=20251121)
    ap.add_argument("--with-v2", action="store_true")
    ap.add_argument("--out", default=str(ROOT / "analyses" / "bayes_mixture.json"))
    args = ap.parse_args()
    import toolbias_stats as tbs

    log = tbs.read_study(ROOT / "data" / "biasbusters" / "study.toml").log
    runs = [_fit(log, "query-mixture", args.draws, args.tune, args.chains, args.seed)]
    if args.with_v2:
        runs.append(_fit(log, "v2", args.draws, args.tune, args.chains, args.seed))
    Path(args.out).write_text(json.dumps(runs, indent=1, default=float))
    for r in runs:
        print({k: r[k] for k in ("model", "wall_s", "cpu_s", "max_rhat", "min_ess_bulk", "divergences",
                                 "ppc_cluster_x_position", "ppc_dispersion", "loadavg_after")})


if __name__ == "__main__":
    main()
