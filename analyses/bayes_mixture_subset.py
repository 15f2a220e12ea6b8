"""The query mixture on a subset of the bundled study's LLMs, with and without a bound on epsilon.

Issue 22, fourth attempt at ``model="query-mixture"``: on the full study its chains settled in different
modes in 1-2 (LLM, cluster) cells (``epsilon`` near 0.2 in one chain, near 1 in the other). This script fits
the variant to the attempts of a few LLMs (default: Claude 3.5 Sonnet and Gemini 2.5 Flash, the two LLMs
whose cells split in the shipped run) with ``priors={"eps_max": E}`` (``epsilon = E * expit(t)``; 1 = the
unbounded variant as shipped) and reports convergence, whether the chains agree on every cell's
``epsilon``, and the three posterior predictive p-values. Results: ``analyses/bayes_mixture_subset.json``.

    nice python analyses/bayes_mixture_subset.py --eps-max 1.0,0.5 [--llms "A,B"] [--draws 300] [--out FILE]
    nice python analyses/bayes_mixture_subset.py --free-weights --eps-max 1.0   # free class weights per cell
    nice python analyses/bayes_mixture_subset.py --model query-mixture-id       # fifth attempt (identified)
    nice python analyses/bayes_mixture_subset.py --model query-mixture-id --llms ALL   # the full study

Fifth attempt (``--model query-mixture-id``): the identified mixture (indifferent queries choose by position
alone; the tools' popularity is in free class weights). Also records CPU seconds, the per-LLM dispersion
ratio, the chains' agreement on the class weights and the implied delta_API / delta_pos (docs/dev/bayes_attempts.md).
"""

from __future__ import annotations

import argparse
import json
import os
import time
import warnings

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=2")


def fit_subset(llms, eps_max, draws, chains, seed, free=False, model="query-mixture", boost_per_llm=False):
    import numpy as np
    from bayes_experimental import _variants as _common  # the experimental variants and switches (issue 38)
    from bayes_experimental import fit_experimental as fit_bayes

    import toolbias_stats as tbs
    from toolbias_stats.io import SelectionLog

    _common._MIXTURE_FREE = free      # experimental: free class weights per (LLM, cluster)
    if boost_per_llm:                 # fifth attempt, first structure: the boost lambda[m] per LLM
        import dataclasses

        v = _common.MODEL_VARIANTS["query-mixture-id"]
        _common.MODEL_VARIANTS["query-mixture-id"] = dataclasses.replace(v, boost_per_cell=False)

    study = tbs.read_study(tbs.datasets.path("biasbusters/study.toml"))
    frame = study.log.to_frame()
    if llms == ["ALL"]:
        llms = sorted(frame["model"].dropna().unique().tolist())
    log = SelectionLog.from_frame(frame[frame["model"].isin(llms)], study.log.catalog)
    t, cpu, load0 = time.perf_counter(), time.process_time(), os.getloadavg()[0]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = fit_bayes(log, model=model, draws=draws, tune=draws, chains=chains, rng=seed,
                        priors=None if model == "query-mixture-id" else {"eps_max": eps_max})
    d = res.diagnostics
    post = res.idata.posterior
    em = post["epsilon"].values.mean(1)                                     # (chain, llm, cluster)
    ss = res.idata.sample_stats
    wall, cpu = time.perf_counter() - t, time.process_time() - cpu
    free = free or model == "query-mixture-id"
    out = {"model": model, "boost_per_cell": _common.MODEL_VARIANTS[model].boost_per_cell, "llms": llms,
           "eps_max": None if free else eps_max,
           "class_weights": "free" if free else "epsilon / K",
           "draws": draws, "tune": draws, "chains": chains, "seed": seed,
           "wall_s": round(wall, 1), "cpu_s": round(cpu, 1),
           "load": [round(load0, 2), round(os.getloadavg()[0], 2)],
           "max_rhat": d.max_rhat, "min_ess_bulk": d.min_ess_bulk, "min_ess_tail": d.min_ess_tail,
           "divergences": d.divergences,
           "mean_leapfrog_steps": float(ss["n_steps"].mean()) if "n_steps" in ss else None,
           "ppc_cluster_x_position": res.ppc.p_value, "ppc_dispersion": res.ppc.p_value_dispersion,
           "ppc_finest": res.ppc.p_value_rows,
           "epsilon_chain_means_max_diff": float(np.abs(em[0] - em[1:]).max()) if len(em) > 1 else None,
           "epsilon_range": [float(em.min()), float(em.max())],
           "lambda": post["lambda"].values.mean((0, 1)).round(2).tolist()}
    if "class_weights" in res._post:
        cw = res._post["class_weights"].reshape(chains, -1, *res._post["class_weights"].shape[1:]).mean(1)
        out["class_weights_chain_means_max_diff"] = float(np.nanmax(np.abs(cw[0] - cw[1:]))) if chains > 1 else None
    disp = res.ppc.dispersion
    if disp is not None:
        out["dispersion_by_llm"] = disp.to_dict(orient="records")
    imp = res.implied
    out["implied"] = imp[["llm", "metric", "orderings", "mean", "hdi_low", "hdi_high"]].to_dict(orient="records")
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--llms", default="Claude 3.5 Sonnet,Gemini 2.5 Flash")
    ap.add_argument("--eps-max", default="1.0,0.5")
    ap.add_argument("--draws", type=int, default=300)
    ap.add_argument("--chains", type=int, default=2)
    ap.add_argument("--seed", type=int, default=20251121)
    ap.add_argument("--free-weights", action="store_true",
                    help="free class weights per (LLM, cluster), Dirichlet(1) (eps_max is then not used)")
    ap.add_argument("--model", default="query-mixture", choices=("query-mixture", "query-mixture-id"))
    ap.add_argument("--boost-per-llm", action="store_true",
                    help="query-mixture-id with the boost lambda[m] per LLM (the first structure tried)")
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    out = []
    for e in (a.eps_max.split(",") if a.model == "query-mixture" else ["1.0"]):
        r = fit_subset(a.llms.split(","), float(e), a.draws, a.chains, a.seed, a.free_weights, a.model, a.boost_per_llm)
        print(json.dumps(r, default=float), flush=True)
        out.append(r)
    if a.out:
        with open(a.out, "w") as fh:
            json.dump(out, fh, indent=1, default=float)


if __name__ == "__main__":
    main()
