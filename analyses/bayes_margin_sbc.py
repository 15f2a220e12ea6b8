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


def prior_draw(gen, pr, pooling="hier"):
    """Parameters from the prior (the model's own: ZeroSumNormals, HalfNormals, rho = 1/(1+kappa) uniform);
    ``pooling`` as in ``bayes_margin.sample_numpyro_raw`` (the default draws the same stream as before)."""
    sa, sb, sg = (abs(gen.normal(0, pr[k])) for k in ("sigma_alpha_sd", "sigma_beta_sd", "sigma_gamma_sd"))
    mu = _zerosum(gen, pr["mu_sd"], (C, K))
    a = mu[None] + sa * _zerosum(gen, 1.0, (M, C, K))
    extra = {}
    if pooling == "cluster":                 # (the model's shared sigma_alpha is then a prior-only parameter)
        extra["sigma_alpha_c"] = sac = np.abs(gen.normal(0, pr["sigma_alpha_sd"], C))
        a = mu[None] + sac[None, :, None] * _zerosum(gen, 1.0, (M, C, K))
    elif pooling == "none":
        a = _zerosum(gen, pr["mu_sd"], (M, C, K))
    bb = _zerosum(gen, pr["beta_bar_sd"], (K,))
    b = bb + sb * _zerosum(gen, 1.0, (M, K))[:, None] + sg * _zerosum(gen, 1.0, (M, C, K))
    rho = gen.uniform(size=(2, M * C))
    lk = np.log((1 - rho) / rho)
    return {**extra, "mu": mu, "sigma_alpha": sa, "a": a, "beta_bar": bb, "sigma_beta": sb, "sigma_gamma": sg, "b": b,
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
    out = {"mu[0,0]": g["mu"][..., 0, 0], "sigma_alpha": g["sigma_alpha"], "beta_bar[0]": g["beta_bar"][..., 0],
            "sigma_beta": g["sigma_beta"], "sigma_gamma": g["sigma_gamma"], "a[0,0,0]": g["a"][..., 0, 0, 0],
            "a[1,1,2]": g["a"][..., 1, 1, 2], "b[0,0,0]": g["b"][..., 0, 0, 0], "b[1,1,3]": g["b"][..., 1, 1, 3],
            "delta_api[0,0]": _tv(g["a"])[..., 0, 0], "delta_pos[1,1]": _tv(g["b"])[..., 1, 1]}
    if "sigma_alpha_c" in g:
        out["sigma_alpha_c[0]"] = g["sigma_alpha_c"][..., 0]
    if "log_kappa" in g:                      # the quasi-likelihood has no concentrations (plug-in dispersion)
        out.update({"log_kappa[0]": g["log_kappa"][..., 0], "log_lambda[3]": g["log_lambda"][..., 3]})
    return out


def one_rep(r, draws, tune, sampler="pymc", likelihood="dm", cache=None):
    """One SBC replicate: prior draw -> data -> fit -> ranks of the true values among L = 100 thinned draws."""
    from bayes_margin import PRIORS

    gen = np.random.default_rng(7000 + r)
    th = prior_draw(gen, PRIORS)
    data = simulate(gen, th)
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if sampler == "numpyro":
            from bayes_margin import sample_numpyro_raw

            raw, div = sample_numpyro_raw(data, draws=draws, tune=tune, chains=2, seed=7000 + r,
                                          likelihood=likelihood)
            post = {k: v.reshape((-1,) + v.shape[2:]) for k, v in raw.items()}
            n_div = int(np.asarray(div).sum())
        else:
            from bayes_margin import build_model, sample, set_data

            if likelihood != "dm":
                raise ValueError("the PyMC model has the Dirichlet-multinomial likelihood only")
            if cache.get("model") is None:
                cache["model"] = build_model(data)
            else:
                set_data(cache["model"], data)
            idata = sample(cache["model"], draws=draws, tune=tune, chains=2, seed=7000 + r)
            post = {k: np.asarray(idata.posterior[k].values).reshape((-1,) + idata.posterior[k].shape[2:])
                    for k in idata.posterior.data_vars}
            n_div = int(idata.sample_stats["diverging"].values.sum())
    thin = slice(None, None, max(len(post["a"]) // 100, 1))                # L = 100 draws per replicate
    truth = scalars(th)
    draws_ = scalars({k: v[thin] for k, v in post.items()})
    ranks = {k: int((draws_[k] < truth[k]).sum()) for k in truth if k in draws_}
    return {"rep": r, "likelihood": likelihood, "sampler": sampler, "seconds": time.perf_counter() - t0,
            "L": int(len(draws_["mu[0,0]"])), "divergences": n_div, "ranks": ranks}


def run_batched(reps, start, draws, tune, likelihood, batch, out, pooling="hier"):
    """SBC replicates with the batched NumPyro twin (``batch`` replicates per ``jax.vmap``); replicates already in
    ``out`` are skipped (resumable)."""
    from bayes_margin import PRIORS, sample_numpyro_batch

    done = set()
    if Path(out).exists():
        done = {(r["rep"], r["likelihood"], r.get("pooling", "hier"))
                for r in map(json.loads, Path(out).read_text().splitlines())}
    todo = [r for r in range(start, start + reps) if (r, likelihood, pooling) not in done]
    for b0 in range(0, len(todo), batch):
        rs = todo[b0:b0 + batch]
        ths, datas = [], []
        for r in rs:
            gen = np.random.default_rng(7000 + r)
            ths.append(prior_draw(gen, PRIORS, pooling))
            datas.append(simulate(gen, ths[-1]))
        t0 = time.perf_counter()
        res = sample_numpyro_batch(datas, draws=draws, tune=tune, chains=2, seed=7000 + rs[0], likelihood=likelihood,
                                   pooling=pooling)
        sec = time.perf_counter() - t0
        with Path(out).open("a") as f:
            for r, th, (raw, div) in zip(rs, ths, res):
                post = {k: v.reshape((-1,) + v.shape[2:]) for k, v in raw.items()}
                thin = slice(None, None, max(len(post["a"]) // 100, 1))    # L = 100 draws per replicate
                truth = scalars(th)
                dr = scalars({k: v[thin] for k, v in post.items()})
                rec = {"rep": r, "likelihood": likelihood, "pooling": pooling, "sampler": "numpyro-batch",
                       "batch_seconds": sec,
                       "L": int(len(dr["mu[0,0]"])), "divergences": int(np.asarray(div).sum()),
                       "ranks": {k: int((dr[k] < truth[k]).sum()) for k in truth if k in dr}}
                f.write(json.dumps(rec) + "\n")
        print(likelihood, f"{b0 + len(rs)}/{len(todo)}", f"{sec:.0f} s", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=100)
    ap.add_argument("--start", type=int, default=0)
    ap.add_argument("--draws", type=int, default=500)
    ap.add_argument("--tune", type=int, default=500)
    ap.add_argument("--sampler", default="pymc", choices=("pymc", "numpyro"))
    ap.add_argument("--likelihood", default="dm", choices=("dm", "quasi"))
    ap.add_argument("--pooling", default="hier", choices=("hier", "cluster", "none"))
    ap.add_argument("--shard", default="0/1", help="i/n: this process runs the replicates r with r % n == i")
    ap.add_argument("--out", default=str(OUT))
    ap.add_argument("--summary", action="store_true")
    ap.add_argument("--batch", type=int, default=0, help="> 0: the batched NumPyro twin, this many replicates at once")
    a = ap.parse_args()
    if a.summary:
        return summary(Path(a.out))
    if a.batch:
        return run_batched(a.reps, a.start, a.draws, a.tune, a.likelihood, a.batch, a.out, a.pooling)
    i, n = (int(x) for x in a.shard.split("/"))
    cache: dict = {}
    for r in range(a.start, a.start + a.reps):
        if r % n != i:
            continue
        rec = one_rep(r, a.draws, a.tune, a.sampler, a.likelihood, cache)
        with Path(a.out).open("a") as f:
            f.write(json.dumps(rec) + "\n")
        print(r, round(rec["seconds"], 1), rec["divergences"], flush=True)


def summary(path=OUT):
    """Rank histograms (10 bins) and chi-square tests per quantity, per likelihood, into ``bayes_margin_sbc.json``."""
    from scipy.stats import chi2

    recs = [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
    res = {}
    for lik in sorted({(r.get("likelihood", "dm"), r.get("pooling", "hier")) for r in recs}):
        rs = [r for r in recs if (r.get("likelihood", "dm"), r.get("pooling", "hier")) == lik]
        L = rs[0]["L"]
        out = {"replicates": len(rs), "L": L, "bins": 10, "divergent_fits": sum(r["divergences"] > 0 for r in rs),
               "quantities": {}}
        for k in rs[0]["ranks"]:
            rk = np.array([r["ranks"][k] for r in rs])
            counts = np.bincount(np.minimum(rk * 10 // (L + 1), 9), minlength=10)
            e = len(rk) / 10
            stat = float(((counts - e) ** 2 / e).sum())
            out["quantities"][k] = {"chi2": stat, "p": float(chi2.sf(stat, 9)), "bins": counts.tolist()}
        ps = [v["p"] for v in out["quantities"].values()]
        out["min_p"] = min(ps)
        out["failing_at_0.05"] = [k for k, v in out["quantities"].items() if v["p"] < 0.05]
        out["bonferroni_pass"] = bool(min(ps) >= 0.05 / len(ps))
        lik = "/".join(lik)
        res[lik] = out
        print(lik, json.dumps({k: v for k, v in out.items() if k != "quantities"}),
              {k: round(v["p"], 3) for k, v in out["quantities"].items()})
    (HERE / "bayes_margin_sbc.json").write_text(json.dumps(res, indent=1))
    return res


if __name__ == "__main__":
    main()
