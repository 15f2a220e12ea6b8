"""Simulation-based calibration (SBC) of the hierarchical Bayesian model (`fit_bayes`).

Usage:  python analyses/sbc_bayes.py [--model v2] [--datasets 100] [--workers 2] [--out docs/img/sbc_bayes_v2.png]

For each dataset: draw every parameter from the model's own priors, simulate a small log from
them (3 LLMs x 2 clusters x 3 tools, all cyclic rotations; v1: 20 attempts per ordering; v2: 10
queries per (LLM, cluster), each shown in every rotation 3 times (runs), with the per-(LLM, cluster)
position deviations and the Dirichlet-multinomial overdispersion of the prompts drawn from their
priors too), fit the model exactly as a user would (default priors, ``parameterization="auto"``)
and record the rank of each true value among L = 99 thinned posterior draws. If the sampler and the code are
right, the ranks are uniform on 0..99 for every parameter (Talts et al. 2018, "Validating Bayesian
inference algorithms with simulation-based calibration"). The script prints a chi-square uniformity test per parameter
group and saves the rank histograms (10 bins, with the 99% band of a uniform histogram).
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
M, C, K = 3, 2, 3
N_PER_ORDERING = 20
L = 99                 # thinned posterior draws per dataset -> ranks 0..L
DRAWS, TUNE, CHAINS = 1000, 700, 2
GROUPS = ("alpha", "mu", "beta", "beta_bar", "sigma_alpha", "sigma_beta")
GROUPS_V2 = GROUPS + ("beta_cell", "sigma_delta", "kappa")
QUERIES, RUNS = 10, 3                       # v2: queries per (LLM, cluster) and runs per prompt


def _zsn(gen, sd, shape):
    """ZeroSumNormal(sd) draws over the last axis (PyMC's definition: an orthonormal zero-sum basis)."""
    from toolbias_stats.models.bayes._common import _zerosum_extend

    return _zerosum_extend(gen.normal(0.0, sd, shape[:-1] + (shape[-1] - 1,)), np)


def prior_draw(gen, priors, model="v1"):
    mu = _zsn(gen, priors["mu_sd"], (C, K))
    sa = abs(gen.normal(0.0, priors["sigma_alpha_sd"]))
    alpha = mu[None] + sa * _zsn(gen, 1.0, (M, C, K))
    bb = _zsn(gen, priors["beta_bar_sd"], (K,))
    sb = abs(gen.normal(0.0, priors["sigma_beta_sd"]))
    beta = bb[None] + sb * _zsn(gen, 1.0, (M, K))
    out = {"alpha": alpha, "mu": mu, "beta": beta, "beta_bar": bb, "sigma_alpha": np.array(sa),
           "sigma_beta": np.array(sb)}
    if model == "v2":
        sd = abs(gen.normal(0.0, priors["sigma_delta_sd"]))
        out["beta_cell"] = beta[:, None, :] + sd * _zsn(gen, 1.0, (M, C, K))
        out["sigma_delta"] = np.array(sd)
        rho = gen.beta(priors["rho_a"], priors["rho_b"], (M, C))
        out["kappa"] = 1.0 / rho - 1.0
    return out


def one(seed: int, model: str = "v1") -> dict:
    warnings.simplefilter("ignore")
    from toolbias_stats.models import fit_bayes, simulate_bayes_log
    from toolbias_stats.models.bayes import DEFAULT_PRIORS, EXTENSION_PRIORS

    gen = np.random.default_rng(seed)
    truth = prior_draw(gen, {**DEFAULT_PRIORS, **EXTENSION_PRIORS}, model)
    if model == "v1":
        log = simulate_bayes_log(truth["alpha"], truth["beta"], n_per_ordering=N_PER_ORDERING, rng=gen)
    else:
        log = simulate_bayes_log(truth["alpha"], truth["beta_cell"], queries=QUERIES, runs=RUNS,
                                  kappa=truth["kappa"], rng=gen)
    t = time.perf_counter()
    res = fit_bayes(log, model=model, draws=DRAWS, tune=TUNE, chains=CHAINS, cores=1, sampler="pymc", rng=seed)
    post = res.idata.posterior
    n = post.sizes["chain"] * post.sizes["draw"]
    keep = np.linspace(0, n - 1, L).round().astype(int)
    ranks = {}
    for g in (GROUPS if model == "v1" else GROUPS_V2):
        x = post[g].values.reshape(n, -1)[keep]                             # (L, params)
        ranks[g] = (x < np.ravel(truth[g])[None]).sum(0).tolist()
    d = res.diagnostics
    return {"seed": seed, "ranks": ranks, "seconds": time.perf_counter() - t, "max_rhat": d.max_rhat,
            "min_ess_bulk": d.min_ess_bulk, "divergences": d.divergences, "parameterization": d.parameterization}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--datasets", type=int, default=100)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--seed", type=int, default=20251121)
    ap.add_argument("--model", default="v2", choices=("v1", "v2"))
    ap.add_argument("--out", default=None, help="figure (default docs/img/sbc_bayes.png for v1, "
                                                "docs/img/sbc_bayes_v2.png for v2)")
    ap.add_argument("--json", default=None, help="also write the raw ranks as JSON")
    ap.add_argument("--replot", default=None, help="only redraw the figure from a JSON written by --json")
    args = ap.parse_args()
    if args.out is None:
        args.out = str(ROOT / "docs" / "img" / ("sbc_bayes.png" if args.model == "v1" else "sbc_bayes_v2.png"))
    groups = GROUPS if args.model == "v1" else GROUPS_V2
    if args.replot:
        _plot(json.loads(Path(args.replot).read_text())["results"], np.linspace(0, L + 1, 11), args.out, groups,
              args.model)
        return
    seeds = [int(s) for s in np.random.SeedSequence(args.seed).generate_state(args.datasets)]
    t0 = time.perf_counter()
    from functools import partial

    with ProcessPoolExecutor(args.workers) as pool:
        results = list(pool.map(partial(one, model=args.model), seeds))
    wall = time.perf_counter() - t0
    from scipy.stats import chi2

    bins = 10
    edges = np.linspace(0, L + 1, bins + 1)
    design = (f"{N_PER_ORDERING} per ordering" if args.model == "v1" else
              f"{QUERIES} queries x {K} rotations x {RUNS} runs per (LLM, cluster)")
    print(f"SBC of model={args.model!r}: {len(results)} datasets ({M} LLMs x {C} clusters x {K} tools, rotations, "
          f"{design}), {CHAINS} chains x {DRAWS} draws (+{TUNE} tune), L = {L}; {wall:.0f} s wall")
    div = np.array([r["divergences"] for r in results])
    rh = np.array([r["max_rhat"] for r in results])
    ess = np.array([r["min_ess_bulk"] for r in results])
    par = {p: sum(r["parameterization"] == p for r in results) for p in ("centered", "noncentered")}
    print(f"fits with divergences: {(div > 0).sum()} (total {div.sum()}); R-hat > 1.01: {(rh > 1.01).sum()}; "
          f"bulk ESS < 400: {(ess < 400).sum()}; parameterisation: {par}")
    summary = {}
    for g in groups:
        r = np.concatenate([np.ravel(x["ranks"][g]) for x in results])
        counts, _ = np.histogram(r, bins=edges)
        expected = len(r) / bins
        stat = float(((counts - expected) ** 2 / expected).sum())
        # ranks of the parameters of one dataset are dependent: the test is indicative, per group
        p = float(chi2.sf(stat, bins - 1))
        summary[g] = {"n_ranks": int(len(r)), "chi2": stat, "p_value": p, "counts": counts.tolist(),
                      "mean_rank_over_L": float(r.mean() / L)}
        print(f"  {g:12s} ranks {len(r):5d}  chi2({bins - 1}) = {stat:6.2f}  p = {p:.3f}  "
              f"mean rank / L = {r.mean() / L:.3f}  counts {counts.tolist()}")
    _plot(results, edges, args.out, groups, args.model)
    print(f"wrote {args.out}")
    if args.json:
        Path(args.json).write_text(json.dumps({"summary": summary, "results": results}, indent=1))


def _plot(results, edges, out, groups=GROUPS, model="v1"):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from scipy.stats import binom

    nrow = int(np.ceil(len(groups) / 3))
    fig = Figure(figsize=(11, 2.75 * nrow), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(nrow, 3)
    bins = len(edges) - 1
    for ax, g in zip(axes.ravel(), groups):
        r = np.concatenate([np.ravel(x["ranks"][g]) for x in results])
        n = len(r)
        lo, hi = binom.ppf([0.005, 0.995], n, 1 / bins)
        ax.hist(r, bins=edges, color="#9ecae1", edgecolor="#1f77b4", zorder=1)
        ax.axhspan(lo, hi, color="#888888", alpha=0.3, linewidth=0, label="99% band of a uniform histogram", zorder=2)
        ax.axhline(n / bins, color="#444444", linewidth=0.8, zorder=3)
        ax.set_title(f"{g} ({n} ranks)", fontsize=10, loc="left")
        ax.set_xlim(0, L + 1)
        ax.set_xlabel(f"rank of the true value among {L} posterior draws", fontsize=8)
    axes[0, 0].legend(fontsize=7, loc="lower left")
    fig.suptitle(f"Simulation-based calibration of fit_bayes(model={model!r}): {len(results)} datasets", fontsize=11)
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)


if __name__ == "__main__":
    main()
