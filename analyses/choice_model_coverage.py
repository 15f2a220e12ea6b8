"""Coverage of the choice model's 95% intervals on SIMULATED studies (issue 22 acceptance).

Every study: 8 tools shared across lists, each query shows a random subset of 4 in 4 random orders (so tools
meet in many different sets), position effects [0, -0.4, -0.6, -0.3] (log-odds vs position 1).
Scenarios:

* ``worths``: free tool worths (linspace), no query heterogeneity; conditional logit (Firth, sandwich).
* ``features``: worth = features @ beta (two standard-normal features, beta = [0.8, -0.5]); conditional logit.
* ``hetero``: worths as in ``worths`` plus N(0, 1) query x tool effects; the conditional logit AND the mixed
  logit are fitted to the same studies (the conditional logit estimates attenuated, population-averaged
  effects, so its intervals miss the model's conditional parameters; the mixed logit keeps coverage).

Coverage is the share of intervals containing the true value, pooled over all parameters of a kind (with a
binomial 95% band for 0.95 at that count). Writes ``analyses/choice_model_coverage.json``.

Usage: ``python analyses/choice_model_coverage.py [--n-studies 200] [--scenarios worths,features,hetero]``
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from toolbias_stats.choicemodel import choice_model, simulate_logit_log

N_TOOLS, SET_SIZE, N_QUERIES, N_LISTS = 8, 4, 150, 4
BETA = np.array([0.8, -0.5])


def _cover(res, truth, feat_truth=None):
    out = {"worth": [], "position": [], "feature": []}
    te = res.tool_effects
    if len(te):
        te = te.set_index("tool_id")
        for i in range(1, N_TOOLS):
            r = te.loc[f"t{i + 1}"]
            out["worth"].append(bool(r["ci_low"] <= truth["worths"][i] <= r["ci_high"]))
    pe = res.position_effects.set_index("position")
    for p in range(2, SET_SIZE + 1):
        out["position"].append(bool(pe.loc[p, "ci_low"] <= truth["positions"][p - 1] <= pe.loc[p, "ci_high"]))
    if feat_truth is not None:
        fe = res.feature_effects.set_index("feature")
        for j, b in enumerate(feat_truth):
            out["feature"].append(bool(fe.loc[f"f{j + 1}", "ci_low"] <= b <= fe.loc[f"f{j + 1}", "ci_high"]))
    return out


def run(scenario, n_studies, seed):
    rows = []
    t0 = time.time()
    for s in range(n_studies):
        rng = np.random.default_rng([seed, s])
        if scenario == "features":
            F = rng.normal(size=(N_TOOLS, 2))
            log = simulate_logit_log(n_tools=N_TOOLS, set_size=SET_SIZE, n_queries=N_QUERIES, n_lists=N_LISTS,
                                      worths=np.zeros(N_TOOLS), features=F, beta=BETA, rng=rng)
            feat = pd.DataFrame({"tool_id": [f"t{i + 1}" for i in range(N_TOOLS)], "f1": F[:, 0], "f2": F[:, 1]})
            fits = {"conditional": dict(features=feat)}
        else:
            log = simulate_logit_log(n_tools=N_TOOLS, set_size=SET_SIZE, n_queries=N_QUERIES, n_lists=N_LISTS,
                                      query_sd=1.0 if scenario == "hetero" else 0.0, rng=rng)
            fits = {"conditional": {}}
            if scenario == "hetero":
                fits["mixed"] = dict(mixed=True, rng=rng)
        truth = log.diagnostics["truth"]
        for name, kw in fits.items():
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                res = choice_model(log, by=None, **kw)
            cov = _cover(res, truth, BETA if scenario == "features" else None)
            for kind, hits in cov.items():
                for h in hits:
                    rows.append(dict(scenario=scenario, fit=name, study=s, kind=kind, covered=h,
                                     converged=res.converged))
    print(f"{scenario}: {n_studies} studies in {time.time() - t0:.0f} s", flush=True)
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n-studies", type=int, default=200)
    ap.add_argument("--scenarios", default="worths,features,hetero")
    ap.add_argument("--seed", type=int, default=20251124)
    ap.add_argument("--out", default=str(Path(__file__).resolve().parent / "choice_model_coverage.json"))
    a = ap.parse_args(argv)
    rows = []
    for sc in a.scenarios.split(","):
        rows += run(sc, a.n_studies, a.seed)
    df = pd.DataFrame(rows)
    summ = (df.groupby(["scenario", "fit", "kind"]).agg(coverage=("covered", "mean"), n_intervals=("covered", "size"),
                                                         converged=("converged", "mean")).reset_index())
    summ["band_low"] = 0.95 - 1.96 * np.sqrt(0.95 * 0.05 / summ["n_intervals"])
    summ["band_high"] = 0.95 + 1.96 * np.sqrt(0.95 * 0.05 / summ["n_intervals"])
    print(summ.to_string(index=False))
    Path(a.out).write_text(json.dumps({"n_studies": a.n_studies, "seed": a.seed, "design": dict(
        n_tools=N_TOOLS, set_size=SET_SIZE, n_queries=N_QUERIES, n_lists=N_LISTS),
        "summary": summ.to_dict(orient="records")}, indent=2, allow_nan=False) + "\n")


if __name__ == "__main__":
    main()
