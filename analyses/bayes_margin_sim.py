"""Simulation study of the collapsed margin model (``analyses/bayes_margin.py``), issue 38.

Data: the independent simulator of ``analyses/bayes_query_sim.py`` (4 LLMs x 2 clusters x K = 4 tools,
20 queries x all 4 cyclic rotations x 3 runs, choices from softmax(alpha + beta + u[query]), u ~ N(0, sd^2)
shared by every ordering and run of a query; LLM 1 has no position effect, cluster 2 has tools of equal worth).

Truth: the margins the model's parameters describe, computed from the simulator's true parameters: a new
query's probabilities of each tool and of each position in a (LLM, cluster) cell, averaged over the logged
orderings (the 4 rotations, equal weights) and over the query population (Monte Carlo nodes closed under the
cyclic shifts of the tools and under sign, so an equal-worth cluster's tool margin is exactly uniform and an
LLM without position effects has exactly uniform position margins). delta = TV to uniform; effects = the
margins' centred logs.

Run: ``python analyses/bayes_margin_sim.py --studies 40`` appends one line per fit to
``analyses/bayes_margin_sim.jsonl``; ``--summary`` writes the coverage table to ``analyses/bayes_margin_sim.json``.
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
OUT = HERE / "bayes_margin_sim.jsonl"
QUANTITIES = ("delta_api_cell", "delta_pos", "delta_api", "a", "b")


def true_margins(sd, nodes=16384, seed=7):
    """True tool and position margins (M, C, K) of the simulator's cells (simulator's LLM / cluster / tool order)."""
    from bayes_query_sim import ALPHA, BETA, C, K, M

    z = np.random.default_rng(seed).standard_normal((nodes, K))
    z = np.concatenate([np.roll(z, s, axis=1) for s in range(K)])
    u = sd * np.concatenate([z, -z])                                       # (N, K) query effects by tool
    tools = np.zeros((M, C, K))
    pos = np.zeros((M, C, K))
    for m in range(M):
        for c in range(C):
            for r in range(K):
                order = np.roll(np.arange(K), -r)                           # tool at each position
                lg = ALPHA[m, c, order][None] + BETA[m][None] + u[:, order]
                p = np.exp(lg - lg.max(1, keepdims=True))
                p = (p / p.sum(1, keepdims=True)).mean(0)                  # by position
                pos[m, c] += p / K
                tools[m, c, order] += p / K
    return tools, pos


def truths(design, sd):
    tools, pos = true_margins(sd)
    li = [int(s.replace("llm", "")) - 1 for s in design.llms]
    ci = [int(s.replace("k", "")) - 1 for s in design.clusters]
    ti = [[int(t.split("tool")[1]) - 1 for t in design.tools[c]] for c in range(len(ci))]
    tl = np.stack([np.stack([tools[m, ci[c], ti[c]] for c in range(len(ci))]) for m in li])
    ps = pos[li][:, ci]
    tv_api = 0.5 * np.abs(tl - 1 / tl.shape[-1]).sum(-1)
    tv_pos = 0.5 * np.abs(ps - 1 / ps.shape[-1]).sum(-1)
    la, lb = np.log(tl), np.log(ps)
    return {"delta_api_cell": tv_api, "delta_api": tv_api.mean(-1), "delta_pos": tv_pos.mean(-1),
            "a": la - la.mean(-1, keepdims=True), "b": lb - lb.mean(-1, keepdims=True)}


def covers(draws, truth, prob=0.94, tol=1e-9):
    from toolbias_stats.models.bayes._common import _hdi

    x = draws.reshape(len(draws), -1)
    lo, hi = _hdi(x, prob)
    t = np.asarray(truth).ravel()
    return ((lo - tol <= t) & (t <= hi + tol)).astype(int).tolist()


class Refitter:
    """One compiled model reused for every study of the same shape (``pm.set_data``)."""

    def __init__(self):
        self.model = None

    def fit(self, data, draws, tune, chains, seed):

        from bayes_margin import build_model, sample, set_data

        if self.model is None:
            self.model = build_model(data)
        else:
            set_data(self.model, data)
        return sample(self.model, draws=draws, tune=tune, chains=chains, cores=1, seed=seed)


def one_fit(refit, sd, seed, draws, tune, chains, w0):
    from bayes_margin import design_of, diagnostics, margin_data, summarise
    from bayes_query_sim import simulate

    D = design_of(simulate(sd, seed))
    data = margin_data(D)
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        idata = refit.fit(data, draws, tune, chains, seed)
    sec = time.perf_counter() - t0
    post = summarise(idata, margin=0.02, gen=seed, w0=w0)
    tr = truths(D, sd)
    rec = {"sd": sd, "seed": seed, "w0": w0, "seconds": sec, **diagnostics(idata), "llms": list(D.llms),
           "clusters": list(D.clusters), "p_no_position": post["p_no_position"].tolist(),
           "p_equal_worth": post["p_equal_worth"].tolist()}
    for q in QUANTITIES:
        rec[q] = covers(post[q], tr[q])
        rec[q + "_mean"] = post[q].mean(0).ravel().tolist()
    return rec


def summary(path=OUT):
    recs = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    rows = []
    for (sd, w0), grp in pd.DataFrame(recs).groupby(["sd", "w0"]):
        for q in QUANTITIES:
            arr = np.array(grp[q].tolist(), dtype=float)
            per = arr.mean(0)
            n = len(arr)
            rows.append({"sd": sd, "w0": w0, "quantity": q, "studies": n, "coverage_all": float(arr.mean()),
                         "coverage_min_unit": float(per.min()), "coverage_max_unit": float(per.max()),
                         "mc_se_unit_at_94": float(np.sqrt(0.94 * 0.06 / n)), "per_unit": per.round(3).tolist()})
        rows.append({"sd": sd, "w0": w0, "quantity": "fit", "studies": len(grp),
                     "seconds_median": float(grp["seconds"].median()),
                     "rhat_max": float(grp["max_rhat"].max()), "ess_bulk_min": float(grp["min_ess_bulk"].min()),
                     "divergent_fits": int((grp["divergences"] > 0).sum())})
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--studies", type=int, default=40)
    ap.add_argument("--sd", default="0,1.0")
    ap.add_argument("--draws", type=int, default=500)
    ap.add_argument("--tune", type=int, default=500)
    ap.add_argument("--chains", type=int, default=2)
    ap.add_argument("--w0", type=float, default=0.2)
    ap.add_argument("--start", type=int, default=0)
    ap.add_argument("--summary", action="store_true")
    a = ap.parse_args()
    if a.summary:
        rows = summary()
        (HERE / "bayes_margin_sim.json").write_text(json.dumps(rows, indent=1))
        print(pd.DataFrame(rows).drop(columns=["per_unit"]).to_string())
        return
    refit = Refitter()
    for i in range(a.start, a.start + a.studies):
        for sd in [float(s) for s in a.sd.split(",")]:
            rec = one_fit(refit, sd, 1000 + i, a.draws, a.tune, a.chains, a.w0)
            with OUT.open("a") as f:
                f.write(json.dumps(rec) + "\n")
            print(sd, i, round(rec["seconds"], 1), rec["max_rhat"], rec["divergences"], flush=True)


if __name__ == "__main__":
    main()
