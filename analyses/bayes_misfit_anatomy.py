"""Where the Bayesian model's misfit on the BiasBusters study comes from (numbers quoted in docs/bayes.md).

Usage:  python analyses/bayes_misfit_anatomy.py

1. **Where attempts depend on each other.** Per LLM, the probability that two valid attempts choose the same tool
   when they share the cluster; the cluster and the ordering (other queries); the query and the run (other
   orderings); the prompt (query and ordering; other runs). A multinomial per (LLM, cluster, ordering) assumes the
   last three equal the second.
2. **Is the within-(LLM, cluster) table additive?** For every (LLM, cluster) the 5 x 5 table of rotation x position
   counts is fitted by maximum likelihood with (a) additive tool + position logits (the model's mean structure,
   8 parameters, 16 residual df), (b) a "first acceptable tool" scan (each tool accepted with a probability that
   depends on tool and slot; 9 parameters), (c) a mixture of (a) with a chooser that only looks at the position
   (13 parameters). Deviances are summed over the 70 cells. If the additive table fitted, (a) would be near its
   1,120 df; overdispersion between prompts inflates it by ~2 (the replicated chi-square of the finest table
   under v2).
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parent.parent


def _valid(study):
    d = study.log.data
    ok = d[(d["status"] == "ok") & d["ordering"].notna()].copy()
    ok["pos"] = [o.split("|").index(t) if t in o.split("|") else -1 for o, t in zip(ok["ordering"], ok["chosen_tool"])]
    ok = ok[ok["pos"] + 1 == ok["chosen_position"]]                           # the model's "exclude" policy
    ok["tool"] = [study.catalog.tools(c).index(t) for c, t in zip(ok["cluster_id"], ok["chosen_tool"])]
    return ok


def _agreement(df, keys):
    num = den = 0
    for _, g in df.groupby(keys):
        v = g["tool"].value_counts().to_numpy()
        n = v.sum()
        num += (v * (v - 1)).sum()
        den += n * (n - 1)
    return num / den


def main():
    warnings.simplefilter("ignore")
    from scipy.optimize import minimize
    from scipy.special import log_expit, log_softmax, softmax

    import toolbias_stats as tbs

    study = tbs.read_study(ROOT / "data" / "biasbusters" / "study.toml")
    ok = _valid(study)
    rows = []
    for m, sub in ok.groupby("model"):
        rows.append({"LLM": m, "same cluster": _agreement(sub, ["cluster_id"]),
                     "same cluster and ordering": _agreement(sub, ["cluster_id", "rotation"]),
                     "same query and run": _agreement(sub, ["cluster_id", "query_id", "run"]),
                     "same prompt": _agreement(sub, ["cluster_id", "query_id", "rotation"])})
    print("P(two attempts choose the same tool | they share ...):")
    print(pd.DataFrame(rows).to_string(index=False, float_format=lambda x: f"{x:.3f}"))

    res = []
    for (m, _c), sub in ok.groupby(["model", "cluster_id"]):
        tab = pd.crosstab(sub["ordering"], sub["pos"]).reindex(columns=range(5), fill_value=0)
        y = tab.to_numpy(float)
        tools = sorted(set(tab.index[0].split("|")))
        T = np.array([[tools.index(t) for t in o.split("|")] for o in tab.index])
        sat = -(y * np.log(np.where(y > 0, y / y.sum(1, keepdims=True), 1))).sum()

        def additive(th, y=y, T=T):
            a, b = np.r_[0, th[:4]], np.r_[0, th[4:8]]
            return -(y * log_softmax(a[T] + b[None], 1)).sum()

        def scan(th, y=y, T=T):
            z = th[:5][T] + np.r_[0, th[5:9]][None]
            lp = log_expit(z) + np.concatenate([np.zeros((len(y), 1)), np.cumsum(log_expit(-z), 1)[:, :-1]], 1)
            lp = lp - np.logaddexp.reduce(lp, 1, keepdims=True)
            return -(y * lp).sum()

        def mixture(th, y=y, T=T):
            a, b = np.r_[0, th[:4]], np.r_[0, th[4:8]]
            lam = 1 / (1 + np.exp(-th[12]))
            p = lam * softmax(np.r_[0, th[8:12]])[None] + (1 - lam) * softmax(a[T] + b[None], 1)
            return -(y * np.log(np.maximum(p, 1e-300))).sum()

        r1 = minimize(additive, np.zeros(8), method="BFGS")
        r2 = minimize(scan, np.zeros(9), method="BFGS")
        r3 = min((minimize(mixture, np.r_[r1.x, np.zeros(4), s], method="BFGS") for s in (-3.0, 0.0)),
                 key=lambda r: r.fun)
        res.append({"LLM": m, "additive": 2 * (r1.fun - sat), "scan": 2 * (r2.fun - sat),
                    "mixture": 2 * (r3.fun - sat)})
    dev = pd.DataFrame(res).groupby("LLM").sum()
    dev.loc["all (df: 1,120 / 1,050 / 770)"] = dev.sum()
    print("\nDeviance of the rotation x position tables, summed over clusters (maximum likelihood per cell):")
    print(dev.to_string(float_format=lambda x: f"{x:,.0f}"))


if __name__ == "__main__":
    main()
