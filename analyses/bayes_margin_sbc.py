"""Simulation-based calibration (Talts et al. 2018) of the collapsed margin model (``analyses/bayes_margin.py``).

Each replicate draws every parameter from the prior, the tool counts and the position counts of every query from
the model's two Dirichlet-multinomials, fits the model (NUTS), and records the rank of the true value among
``L`` thinned posterior draws for a set of scalar quantities (hyper-parameters, one cell's effects, concentrations
and the cell's delta). Calibrated computation gives uniform ranks: the chi-square test of 10 rank bins per
quantity (Bonferroni over the quantities) and the min / max bin counts are written to
``analyses/bayes_margin_sbc.json``.

Design: 2 LLMs x 2 clusters x K = 4, 20 queries per cell, 12 attempts per query (the simulator's 4 rotations x 3
runs). Run: ``python analyses/bayes_margin_sbc.py --reps 100``.
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
OUT = HERE / "bayes_margin_sbc.jsonl"
M, C, K, Q, N = 2, 2, 4, 20, 12


def _zerosum(gen, sd, shape):
    x = gen.normal(0.0, sd, shape)
    return x - x.mean(-1, keepdims=True)


def prior_draw(gen, pr):
    """Parameters from the prior (the model's own: ZeroSumNormals, HalfNormals, rho = 1/(1+kappa) uniform)."""
    sa, sb, sg = (abs(gen.normal(0, pr[k])) for k in ("sigma_alpha_sd", "sigma_beta_sd", "sigma_gamma_sd"))
    mu = _zerosum(gen, pr["mu_sd"], (C, K))
    a = mu[None] + sa * _zerosum(gen, 1.0, (M, C, K))
    bb = _zerosum(gen, pr["beta_bar_sd"], (K,))
    b = bb + sb * _zerosum(gen, 1.0, (M, K))[:, None] + sg * _zerosum(gen, 1.0, (M, C, K))
    rho = gen.uniform(size=(2, M * C))
    lk = np.log((1 - rho) / rho)
    return {"mu": mu, "sigma_alpha": sa, "a": a, "beta_bar": bb, "sigma_beta": sb, "sigma_gamma": sg, "b": b,
            "log_kappa": lk[0], "log_lambda": lk[1]}


def simulate(gen, th):
    from bayes_margin import _polya

    cell = np.repeat(np.arange(M * C), Q)
    n = np.full(len(cell), N)

    def soft(x):
        e = np.exp(x - x.max(-1, keepdims=True))
        return e / e.sum(-1, keepdims=True)

    pa = soft(th["a"].reshape(M * C, K))[cell]
    pb = soft(th["b"].reshape(M * C, K))[cell]
    T = _polya(gen, pa, np.exp(th["log_kappa"])[cell], n)
    Pc = _polya(gen, pb, np.exp(th["log_lambda"])[cell], n)
    return {"T": T, "Pc": Pc, "cell": cell, "M": M, "C": C, "K": K, "qllm": cell // C, "qcluster": cell % C}


def scalars(th_or_post):
    """The checked quantities (dict of scalars, or of draw vectors)."""
    from bayes_margin import _tv

    g = th_or_post
    return {"mu[0,0]": g["mu"][..., 0, 0], "sigma_alpha": g["sigma_alpha"], "beta_bar[0]": g["beta_bar"][..., 0],
            "sigma_beta": g["sigma_beta"], "sigma_gamma": g["sigma_gamma"], "a[0,0,0]": g["a"][..., 0, 0, 0],
            "a[1,1,2]": g["a"][..., 1, 1, 2], "b[0,0,0]": g["b"][..., 0, 0, 0], "b[1,1,3]": g["b"][..., 1, 1, 3],
            "log_kappa[0]": g["log_kappa"][..., 0], "log_lambda[3]": g["log_lambda"][..., 3],
            "delta_api[0,0]": _tv(g["a"])[..., 0, 0], "delta_pos[1,1]": _tv(g["b"])[..., 1, 1]}


def main():
    from bayes_margin import PRIORS, build_model, sample, set_data

    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=100)
    ap.add_argument("--start", type=int, default=0)
    ap.add_argument("--draws", type=int, default=500)
    ap.add_argument("--tune", type=int, default=500)
    ap.add_argument("--summary", action="store_true")
    a = ap.parse_args()
    if a.summary:
        return summary()
    model = None
    for r in range(a.start, a.start + a.reps):
        gen = np.random.default_rng(7000 + r)
        th = prior_draw(gen, PRIORS)
        data = simulate(gen, th)
        if model is None:
            model = build_model(data)
        else:
            set_data(model, data)
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            idata = sample(model, draws=a.draws, tune=a.tune, chains=2, seed=7000 + r)
        post = {k: np.asarray(idata.posterior[k].values).reshape((-1,) + idata.posterior[k].shape[2:])
                for k in ("mu", "sigma_alpha", "a", "beta_bar", "sigma_beta", "sigma_gamma", "b", "log_kappa",
                          "log_lambda")}
        thin = slice(None, None, max(len(post["a"]) // 100, 1))            # L = 100 draws per replicate
        truth = scalars(th)
        draws = scalars({k: v[thin] for k, v in post.items()})
        ranks = {k: int((draws[k] < truth[k]).sum()) for k in truth}
        rec = {"rep": r, "seconds": time.perf_counter() - t0, "L": int(len(draws["mu[0,0]"])),
               "divergences": int(idata.sample_stats["diverging"].values.sum()), "ranks": ranks}
        with OUT.open("a") as f:
            f.write(json.dumps(rec) + "\n")
        print(r, round(rec["seconds"], 1), rec["divergences"], flush=True)


def summary():
    from scipy.stats import chi2

    recs = [json.loads(x) for x in OUT.read_text().splitlines() if x.strip()]
    L = recs[0]["L"]
    out = {"replicates": len(recs), "L": L, "bins": 10, "divergent_fits": sum(r["divergences"] > 0 for r in recs),
           "quantities": {}}
    names = list(recs[0]["ranks"])
    for k in names:
        rk = np.array([r["ranks"][k] for r in recs])
        counts = np.bincount(np.minimum(rk * 10 // (L + 1), 9), minlength=10)
        e = len(rk) / 10
        stat = float(((counts - e) ** 2 / e).sum())
        out["quantities"][k] = {"chi2": stat, "p": float(chi2.sf(stat, 9)), "bins": counts.tolist()}
    ps = [v["p"] for v in out["quantities"].values()]
    out["min_p"] = min(ps)
    out["bonferroni_pass"] = bool(min(ps) >= 0.05 / len(ps))
    (HERE / "bayes_margin_sbc.json").write_text(json.dumps(out, indent=1))
    print(json.dumps({k: v for k, v in out.items() if k != "quantities"}),
          {k: round(v["p"], 3) for k, v in out["quantities"].items()})


if __name__ == "__main__":
    main()
