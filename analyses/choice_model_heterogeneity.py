"""Coverage of the conditional and mixed logit intervals when the position effect varies between queries (issue 35).

Design of every simulated study (a description-variant tournament): ``N_TOOLS`` variants with worths ``WORTHS``;
every pair of variants is a cluster (tools shared across pairs); each pair is asked ``N_QUERIES`` queries, each query
shows the pair in both orders, ``N_RUNS`` runs each (replicates). The first-position advantage of query ``q`` is
``GAMMA + sd * z_q`` (log-odds), ``sd`` 0 or 0.8: the position effect differs between queries, which neither model
describes (the mixed logit's random effects are query x tool), so only intervals clustered on the query can hold.

Truth. With ``sd = 0`` the model's parameters. With ``sd > 0`` each fit estimates a population-averaged
(pseudo-true) value: the conditional logit's is computed exactly (maximum likelihood on the expected choice shares,
integrated over ``z`` by Gauss-Hermite quadrature); the mixed logit's is its estimate on one study ``BIG`` times as
large (same design, its own draws), whose own Monte-Carlo error is about ``1/sqrt(BIG)`` of a study's SE.

Reported per (sd, fit, kind): coverage of the 95% intervals pooled over the parameters of that kind (the position
effect; the ``N_TOOLS - 1`` worths), the share missing low (truth below the interval) and high, the Monte-Carlo
standard error of the coverage, the mean reported SE against the sd of the estimates, and the heterogeneity check
(share of studies where it says queries differ). Writes ``analyses/choice_model_heterogeneity.json``.

Usage: ``python analyses/choice_model_heterogeneity.py [--n-studies 200] [--sds 0,0.8]``
"""

from __future__ import annotations

import argparse
import itertools
import json
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from toolbias_stats import SelectionLog, ToolCatalog
from toolbias_stats.choicemodel import choice_model

N_TOOLS, N_QUERIES, N_RUNS = 5, 8, 2
WORTHS = np.array([0.0, 0.3, 0.6, 0.9, 1.2])
GAMMA = 0.5
BIG = 100
TOOLS = [f"v{i + 1}" for i in range(N_TOOLS)]
PAIRS = list(itertools.combinations(range(N_TOOLS), 2))


def catalog() -> ToolCatalog:
    recs = []
    for a, b in PAIRS:
        cid = f"{TOOLS[a]}~{TOOLS[b]}"
        recs += [dict(tool_id=TOOLS[a], cluster_id=cid, api_index=1), dict(tool_id=TOOLS[b], cluster_id=cid,
                                                                             api_index=2)]
    return ToolCatalog(pd.DataFrame(recs))


def simulate(sd: float, rng: np.random.Generator, *, n_queries: int = N_QUERIES, cat: ToolCatalog | None = None,
             weights: bool = False) -> SelectionLog:
    """One tournament study; ``weights=True`` gives the expected-share table (the conditional logit's truth)."""
    rows = []
    nodes, wts = np.polynomial.hermite_e.hermegauss(40)
    wts = wts / wts.sum()
    for a, b in PAIRS:
        cid = f"{TOOLS[a]}~{TOOLS[b]}"
        for q in range(n_queries):
            g = GAMMA + sd * rng.standard_normal()
            for first, second in ((a, b), (b, a)):
                d = WORTHS[first] - WORTHS[second]
                base = dict(model="m", cluster_id=cid, query_id=f"q{q}", ordering=f"{TOOLS[first]}|{TOOLS[second]}",
                            n_candidates=2, status="ok", source_file="<sim>")
                if weights:
                    p1 = float(np.sum(wts / (1 + np.exp(-(d + GAMMA + sd * nodes)))))
                    for j, t in ((1, first), (2, second)):
                        rows.append(dict(base, run=1, chosen_tool=TOOLS[t], chosen_position=j,
                                         count=int(round(1e6 * (p1 if j == 1 else 1 - p1)))))
                    continue
                p1 = 1 / (1 + np.exp(-(d + g)))
                for r in range(N_RUNS):
                    j = 1 if rng.random() < p1 else 2
                    rows.append(dict(base, run=r + 1, chosen_tool=TOOLS[first if j == 1 else second],
                                     chosen_position=j))
    frame = pd.DataFrame(rows)
    frame["source_row"] = np.arange(1, len(frame) + 1)
    return SelectionLog.from_frame(frame, cat or catalog())


def _estimates(res) -> dict:
    te = res.tool_effects.set_index("tool_id")
    pe = res.position_effects.set_index("position").loc[2]
    out = {"position": (pe["estimate"], pe["se"], pe["ci_low"], pe["ci_high"])}
    for t in TOOLS[1:]:
        r = te.loc[t]
        out[t] = (r["estimate"], r["se"], r["ci_low"], r["ci_high"])
    return out


FITS = {"conditional": dict(), "mixed": dict(mixed=True, n_draws=50)}


def _fit(log, name, rng):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return choice_model(log, by=None, reference="v1", rng=rng, **FITS[name])


def truths(sd: float, seed: int) -> dict:
    cat = catalog()
    out = {}
    if sd == 0:
        t = {"position": -GAMMA, **{TOOLS[i]: WORTHS[i] for i in range(1, N_TOOLS)}}
        return {"conditional": t, "mixed": t}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        exact = choice_model(simulate(sd, np.random.default_rng(0), cat=cat, weights=True, n_queries=1), by=None,
                             reference="v1", penalty="none", se="model")
    out["conditional"] = {k: v[0] for k, v in _estimates(exact).items()}
    rng = np.random.default_rng([seed, 999])
    big = simulate(sd, rng, n_queries=N_QUERIES * BIG, cat=cat)
    out["mixed"] = {k: v[0] for k, v in _estimates(_fit(big, "mixed", rng)).items()}
    return out


def run(sd: float, n_studies: int, seed: int, fits=("conditional", "mixed")) -> tuple[list, dict]:
    cat = catalog()
    truth = truths(sd, seed)
    rows = []
    t0 = time.time()
    for s in range(n_studies):
        rng = np.random.default_rng([seed, int(sd * 10), s])
        log = simulate(sd, rng, cat=cat)
        for name in fits:
            res = _fit(log, name, rng)
            g = res.groups.iloc[0]
            for k, (e, se, lo, hi) in _estimates(res).items():
                tv = truth[name][k]
                rows.append(dict(sd=sd, fit=name, study=s, param=k, kind="position" if k == "position" else "worth",
                                 estimate=e, se=se, truth=tv, covered=bool(lo <= tv <= hi), miss_low=bool(tv < lo),
                                 miss_high=bool(tv > hi), detected=bool(g.get("position_heterogeneity", False)),
                                 position_dispersion=g.get("position_dispersion", np.nan),
                                 se_ratio=g.get("se_ratio", np.nan),
                                 sigma=g["sigma"], converged=bool(res.converged)))
    print(f"sd={sd}: {n_studies} studies in {time.time() - t0:.0f} s", flush=True)
    return rows, truth


def summarise(df: pd.DataFrame) -> pd.DataFrame:
    per_param = df.groupby(["sd", "fit", "kind", "param"]).agg(sd_est=("estimate", "std")).reset_index()
    df = df.merge(per_param, on=["sd", "fit", "kind", "param"])
    s = (df.groupby(["sd", "fit", "kind"])
         .agg(coverage=("covered", "mean"), miss_low=("miss_low", "mean"), miss_high=("miss_high", "mean"),
              n_intervals=("covered", "size"), mean_se=("se", "mean"), sd_estimate=("sd_est", "mean"),
              detected=("detected", "mean"), position_dispersion=("position_dispersion", "mean"),
              se_ratio=("se_ratio", "mean"), converged=("converged", "mean")).reset_index())
    # Monte-Carlo error: intervals of one study are correlated, so the study is the unit
    by_study = df.groupby(["sd", "fit", "kind", "study"])["covered"].mean().reset_index()
    mc = by_study.groupby(["sd", "fit", "kind"])["covered"].agg(lambda x: x.std(ddof=1) / np.sqrt(len(x)))
    s["mc_se"] = mc.to_numpy()
    return s


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n-studies", type=int, default=200)
    ap.add_argument("--sds", default="0,0.8")
    ap.add_argument("--seed", type=int, default=20261128)
    ap.add_argument("--out", default=str(Path(__file__).with_suffix(".json")))
    a = ap.parse_args(argv)
    rows, truth = [], {}
    for sd in (float(x) for x in a.sds.split(",")):
        r, t = run(sd, a.n_studies, a.seed)
        rows += r
        truth[str(sd)] = t
    summ = summarise(pd.DataFrame(rows))
    print(summ.to_string(index=False))
    Path(a.out).write_text(json.dumps({
        "n_studies": a.n_studies, "seed": a.seed,
        "design": dict(n_tools=N_TOOLS, worths=WORTHS.tolist(), gamma=GAMMA, pairs=len(PAIRS), n_queries=N_QUERIES,
                       orders=2, n_runs=N_RUNS, big=BIG, mixed_draws=FITS["mixed"]["n_draws"]),
        "truth": truth, "summary": summ.astype(object).where(summ.notna(), None).to_dict(orient="records")},
        indent=2, allow_nan=False) + "\n")


if __name__ == "__main__":
    main()
