"""Size and power of the choice model's tests of "no position effect" on SIMULATED studies (issue 22).

Question: on studies simulated with no position effect, how often do the Wald test (clustered sandwich) and the
likelihood-ratio test reject at alpha = 0.05, before and after the small-sample corrections?

* before: ``W ~ chi2(q)`` and ``LR ~ chi2(q)`` (what ``choice_model`` reported until this analysis);
* after:  ``W (G - q) / (q (G - 1)) ~ F(q, G - q)`` (Hotelling's T^2 reference with G queries) and
  ``LR / (d q) ~ F(q, G - q)`` with ``d`` the Rao-Scott design effect of the position terms
  (``tr(V_model^-1 V_sandwich) / q``); what ``choice_model`` reports now (``wald_p``, ``lr_p``);
* also shown: ``W / q ~ F(q, G - 1)`` (the cluster-robust F of Stata / statsmodels' ``use_t``).

Every study: 6 tools shared across random 4-tool subsets (``simulate_logit_log``), ``G`` queries, 4 random orders
per query. Scenarios (``q`` = 3 position terms):

* ``indep``: no query heterogeneity, 1 run per list;
* ``hetero``: N(0, 1.5^2) query x tool effects and 3 runs of every list (attempts of a query are dependent: the
  query's favourite tool sits at the same position in the repeated runs);
* ``power``: as ``indep`` / ``hetero`` with position effects [0, -0.25, -0.25, -0.25] (how much power the
  corrections cost).

Monte-Carlo standard error of a rejection rate near 0.05 with 1,000 studies: 0.007. Writes
``analyses/choice_model_size.json``.

Usage: ``nice python analyses/choice_model_size.py [--n-studies 1000] [--n-power 300] [--queries 20,150]``
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from pathlib import Path

import numpy as np
from scipy import stats

from toolbias_stats.choicemodel import choice_model, simulate_logit_log

SCENARIOS = {
    "indep": dict(query_sd=0.0, n_runs=1, positions=[0.0, 0.0, 0.0, 0.0]),
    "hetero": dict(query_sd=1.5, n_runs=3, positions=[0.0, 0.0, 0.0, 0.0]),
    "power_indep": dict(query_sd=0.0, n_runs=1, positions=[0.0, -0.25, -0.25, -0.25]),
    "power_hetero": dict(query_sd=1.5, n_runs=3, positions=[0.0, -0.25, -0.25, -0.25]),
}


def one_study(scenario, n_queries, rng):
    """Test statistics of one simulated study (dict)."""
    sc = SCENARIOS[scenario]
    log = simulate_logit_log(n_tools=6, set_size=4, n_queries=n_queries, n_lists=4, n_runs=sc["n_runs"],
                              positions=sc["positions"], query_sd=sc["query_sd"], rng=rng)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = choice_model(log, by=None, rng=0)
    g = res.groups.iloc[0]
    q, G = int(g["wald_df"]), int(g["n_queries"])
    W, LR, d = float(g["wald_stat"]), float(g["lr_stat"]), float(g["lr_deff"])
    return dict(
        converged=bool(g["converged"]), G=G, q=q, wald_stat=W, lr_stat=LR, lr_deff=d,
        estimates=res.position_effects["estimate"].to_numpy()[1:].tolist(),
        p=dict(wald_chi2=float(stats.chi2.sf(W, q)), lr_chi2=float(stats.chi2.sf(LR, q)),
               wald_f_g1=float(stats.f.sf(W / q, q, G - 1)),
               wald_hotelling=float(stats.f.sf(W * (G - q) / (q * (G - 1)), q, G - q)),
               lr_rs_chi2=float(stats.chi2.sf(LR / d, q)),
               lr_rs_f_g1=float(stats.f.sf(LR / (d * q), q, G - 1)),
               lr_rs_f=float(stats.f.sf(LR / (d * q), q, G - q)),
               wald_package=float(g["wald_p"]), lr_package=float(g["lr_p"])))


def run(scenario, n_queries, n_studies, seed, alpha=0.05, first=0):
    """Rejection rates over studies ``first .. first + n_studies - 1`` (study s uses seed [seed, G, s])."""
    t0 = time.time()
    rows = [one_study(scenario, n_queries, np.random.default_rng([seed, n_queries, s]))
            for s in range(first, first + n_studies)]
    keys = list(rows[0]["p"])
    rej = {k: float(np.mean([r["p"][k] <= alpha for r in rows])) for k in keys}
    est = np.array([r["estimates"] for r in rows])
    out = dict(scenario=scenario, n_queries=n_queries, n_studies=n_studies, first_study=first, alpha=alpha,
               truth_positions=SCENARIOS[scenario]["positions"][1:], query_sd=SCENARIOS[scenario]["query_sd"],
               n_runs=SCENARIOS[scenario]["n_runs"], rejection=rej,
               mc_se=float(np.sqrt(alpha * (1 - alpha) / n_studies)),
               mean_estimate=est.mean(axis=0).round(4).tolist(), sd_estimate=est.std(axis=0, ddof=1).round(4).tolist(),
               mean_lr_deff=float(np.mean([r["lr_deff"] for r in rows])),
               converged=int(sum(r["converged"] for r in rows)), seconds=round(time.time() - t0, 1))
    print(json.dumps(out), flush=True)
    return out


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--n-studies", type=int, default=1000)
    ap.add_argument("--queries", default="20,150")
    ap.add_argument("--n-power", type=int, default=300, help="studies per power scenario")
    ap.add_argument("--scenarios", default=",".join(SCENARIOS))
    ap.add_argument("--seed", type=int, default=2026)
    ap.add_argument("--first", type=int, default=0, help="first study index (to split a run over processes)")
    ap.add_argument("--out", default=str(Path(__file__).resolve().parent / "choice_model_size.json"))
    a = ap.parse_args(argv)
    results = []
    for sc in a.scenarios.split(","):
        for nq in [int(x) for x in a.queries.split(",")]:
            n = a.n_studies if not sc.startswith("power") else a.n_power
            results.append(run(sc, nq, n, a.seed, first=a.first))
    Path(a.out).write_text(json.dumps(dict(design="6 tools, random 4-tool subsets, 4 random orders per query",
                                           results=results), indent=1) + "\n")
    print("wrote", a.out)


if __name__ == "__main__":
    main()
