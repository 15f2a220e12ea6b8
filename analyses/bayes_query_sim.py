"""Simulation study of the query-Laplace Bayesian model (issue 38): coverage of the implied delta and the effects.

Our own simulator, written independently of the package's: 4 LLMs x 2 clusters x K = 4 tools, 20 queries per
(LLM, cluster), each shown in all 4 cyclic rotations, 3 runs per prompt; an attempt chooses from
softmax(alpha[LLM, cluster, tool] + beta[LLM, position] + u[query, tool]) with u ~ N(0, sd^2) iid per tool,
drawn once per query and shared by every ordering and run of it. LLM 1 has no position effect; cluster 2 has tools
of equal worth for every LLM. ``sd`` in {0, 1.0}.

Truths: the effects (sum-to-zero) and the implied delta of a new query's chooser under the logged orderings
(``bayes_experimental.query_laplace.population_implied``, the quantity the model reports), computed
from the true parameters with the same function: 0 exactly for the LLM without position effects (delta_pos) and
for the equal-worth cluster (delta_API).

Run: ``python analyses/bayes_query_sim.py --studies 40 [--sd 0,1.0] [--model query-laplace]``; results are
appended to ``analyses/bayes_query_sim.jsonl`` one fit per line, and ``--summary`` prints the coverage table
(with Monte-Carlo standard errors) into ``analyses/bayes_query_sim.json``.
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
OUT = HERE / "bayes_query_sim.jsonl"

M, C, K, Q, RUNS = 4, 2, 4, 20, 3
#: fixed true effects (the data differ between studies, the truth does not)
ALPHA = np.array([[[1.0, 0.3, -0.4, -0.9], [0, 0, 0, 0]],
                  [[0.8, 0.5, -0.6, -0.7], [0, 0, 0, 0]],
                  [[1.3, -0.1, -0.2, -1.0], [0, 0, 0, 0]],
                  [[0.5, 0.6, -0.3, -0.8], [0, 0, 0, 0]]])
BETA = np.array([[0.0, 0.0, 0.0, 0.0],
                 [0.6, 0.1, -0.2, -0.5],
                 [1.0, 0.0, -0.4, -0.6],
                 [0.4, 0.2, -0.2, -0.4]])


def simulate(sd: float, seed: int):
    """One study as a SelectionLog (our own generator: rotations, shared query effects, independent runs)."""
    from toolbias_stats.io._catalog import ToolCatalog
    from toolbias_stats.io._selection_log import SelectionLog

    gen = np.random.default_rng(seed)
    catalog = ToolCatalog.from_records([{"cluster_id": f"k{c + 1}", "tool_name": f"k{c + 1}_tool{j + 1}",
                                         "api_name": "endpoint", "num_parameters": 1}
                                        for c in range(C) for j in range(K)], source="<sim>")
    names = [catalog.tools(f"k{c + 1}") for c in range(C)]
    recs = []
    rot = [np.roll(np.arange(K), -r) for r in range(K)]
    for m in range(M):
        for c in range(C):
            for q in range(Q):
                u = gen.normal(0.0, sd, K) if sd > 0 else np.zeros(K)
                for order in rot:
                    z = ALPHA[m, c, order] + BETA[m] + u[order]
                    p = np.exp(z - z.max())
                    p /= p.sum()
                    for r in range(RUNS):
                        pos = int(gen.choice(K, p=p))
                        recs.append({"model": f"llm{m + 1}", "cluster_id": f"k{c + 1}", "query_id": f"q{q + 1}",
                                     "run": r + 1, "ordering": "|".join(names[c][j] for j in order),
                                     "chosen_tool": names[c][order[pos]], "chosen_position": pos + 1,
                                     "status": "ok", "source_file": "<sim>"})
    return SelectionLog.from_frame(pd.DataFrame(recs), catalog, source="<sim>")


def truths(design, sd):
    """True implied delta (M, C) and effects in the design's LLM / cluster / tool order."""
    from bayes_experimental.query_laplace import population_implied

    li = [int(s.replace("llm", "")) - 1 for s in design.llms]
    ci = [int(s.replace("k", "")) - 1 for s in design.clusters]
    ti = [[int(t.split("tool")[1]) - 1 for t in design.tools[c]] for c in range(len(ci))]
    alpha = np.stack([np.stack([ALPHA[m, ci[c], ti[c]] for c in range(len(ci))]) for m in li])
    alpha = alpha - alpha.mean(-1, keepdims=True)
    beta = BETA[li] - BETA[li].mean(-1, keepdims=True)
    api, pos = population_implied(alpha[None], np.repeat(beta[:, None, :], len(ci), 1)[None],
                                  np.full((1, len(li)), sd), design)
    return {"alpha": alpha, "beta": beta, "delta_api_cell": api[0], "delta_api": np.nanmean(api[0], -1),
            "delta_pos": np.nanmean(pos[0], -1)}


def one_fit(sd, seed, model, draws, tune, chains, sampler):
    from bayes_experimental.query_laplace import fit_query_laplace

    log = simulate(sd, seed)
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = fit_query_laplace(log, draws=draws, tune=tune, chains=chains, sampler=sampler, rng=seed,
                                cluster_position=(model == "query-laplace-cp"))
    sec = time.perf_counter() - t0
    D = fit["design"]
    tr = truths(D, sd)
    post = fit["post"]
    out = {"sd": sd, "seed": seed, "model": model, "seconds": sec, **fit["diagnostics"]}

    def cover(draws_, truth, tol=1e-9):
        from toolbias_stats.models.bayes._common import _hdi

        lo, hi = _hdi(draws_, 0.94)
        return ((lo - tol <= truth) & (truth <= hi + tol)).tolist(), draws_.mean(0).tolist()

    out["delta_api"], out["delta_api_mean"] = cover(post["delta_api"], tr["delta_api"])
    out["delta_pos"], out["delta_pos_mean"] = cover(post["delta_pos"], tr["delta_pos"])
    out["delta_api_cell"], _ = cover(post["delta_api_cell"].reshape(len(post["delta_api"]), -1),
                                     tr["delta_api_cell"].ravel())
    a = post["alpha"][:, :, :, :K].reshape(len(post["alpha"]), -1)
    out["alpha"], _ = cover(a, tr["alpha"].ravel())
    out["beta"], _ = cover(post["beta"].reshape(len(post["beta"]), -1), tr["beta"].ravel())
    out["truth_delta_api"] = tr["delta_api"].tolist()
    out["truth_delta_pos"] = tr["delta_pos"].tolist()
    out["llms"] = list(D.llms)
    out["clusters"] = list(D.clusters)
    out["p_no_position"] = post["p_no_position"].tolist()
    out["p_equal_worth"] = post["p_equal_worth"].tolist()
    return out


def summary(path=OUT):
    """Coverage per cell and quantity (with Monte-Carlo se) from the JSON lines."""
    recs = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    failed = [r for r in recs if "error" in r]
    recs = [r for r in recs if "error" not in r]
    rows = []
    for (model, sd), grp in pd.DataFrame(recs).groupby(["model", "sd"]):
        for qty in ("delta_api", "delta_pos", "delta_api_cell", "alpha", "beta"):
            arr = np.array(grp[qty].tolist(), dtype=float)                      # (studies, units)
            per_unit = arr.mean(0)
            se = np.sqrt(per_unit * (1 - per_unit) / len(arr))
            rows.append({"model": model, "sd": sd, "quantity": qty, "studies": len(arr),
                         "coverage_all": float(arr.mean()), "coverage_min_unit": float(per_unit.min()),
                         "coverage_max_unit": float(per_unit.max()), "per_unit": per_unit.round(3).tolist(),
                         "mc_se_unit": float(se.max())})
        rows.append({"model": model, "sd": sd, "quantity": "fit", "studies": len(grp),
                     "seconds_median": float(grp["seconds"].median()),
                     "rhat_max_median": float(grp["max_rhat"].median()),
                     "divergent_fits": int((grp["divergences"] > 0).sum()),
                     "failed_fits": sum(1 for r in failed if r["sd"] == sd and r["model"] == model)})
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--studies", type=int, default=40)
    ap.add_argument("--sd", default="0,1.0")
    ap.add_argument("--model", default="query-laplace")
    ap.add_argument("--draws", type=int, default=1000)
    ap.add_argument("--tune", type=int, default=1000)
    ap.add_argument("--chains", type=int, default=2)
    ap.add_argument("--sampler", default="pymc")
    ap.add_argument("--start", type=int, default=0)
    ap.add_argument("--summary", action="store_true")
    a = ap.parse_args()
    if a.summary:
        rows = summary()
        (HERE / "bayes_query_sim.json").write_text(json.dumps(rows, indent=1))
        print(pd.DataFrame(rows).drop(columns=["per_unit"], errors="ignore").to_string())
        return
    sds = [float(s) for s in a.sd.split(",")]
    for i in range(a.start, a.start + a.studies):
        for sd in sds:
            try:
                rec = one_fit(sd, 1000 + i, a.model, a.draws, a.tune, a.chains, a.sampler)
            except Exception as exc:
                rec = {"sd": sd, "seed": 1000 + i, "model": a.model, "error": repr(exc), "seconds": float("nan")}
            with OUT.open("a") as f:
                f.write(json.dumps(rec) + "\n")
            print(sd, i, round(rec["seconds"], 1), rec.get("error", ""), flush=True)


if __name__ == "__main__":
    main()
