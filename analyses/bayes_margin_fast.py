"""The collapsed margin model's vendored fit, fast (issue 38, "the vendored fit").

The model is the one of ``analyses/bayes_margin.py`` (same priors, same exact Dirichlet-multinomial likelihood
from the rising-factorial sufficient statistics), written for NumPyro (JAX on the CPU, float64) so that

* the log-density and its gradient are one compiled XLA function (the vendored study: 70 cells x 5 tools x
  15 attempts, whatever the 7,000 queries);
* the hierarchy can be written *centred*: about 100 queries x 13 attempts per (LLM, cluster) cell make the
  data dominate each cell's effects, and the non-centred form (``a = mu + sigma * z``) then makes the posterior
  of ``(sigma, z)`` a thin curved ridge that NUTS crosses with long trajectories (the PyMC fit's ~350
  gradients per iteration);
* the chains run in parallel on the two cores (``chain_method="parallel"``, one XLA host device per chain; four
  host devices are declared, so four chains share the two cores).

Parameterisations (``param``): a string of three letters for the tool effects ``a[m, c]``, the LLM position
effects ``beta[m]`` and the cluster position effects ``b[m, c]``, ``c`` = centred, ``n`` = non-centred, and for
the tool effects ``m`` = mixed (each cell's coordinates rotated so that the directions of its sparse tools, chosen
fewer than ``RICH`` times, are non-centred and the rest centred: ``sparse_rotations``); ``"nnn"`` is the
reference model's form, ``"mnc"`` the chosen one (31 gradients per draw on the vendored study, against 506).
The effects live in the K - 1 coordinates of the
orthonormal zero-sum basis (PyMC's ``ZeroSumNormal`` is iid normal in those coordinates, so the posterior is the
same). The concentrations are sampled as ``log kappa`` with a standard logistic prior (``rho = 1 / (1 + kappa)``
uniform), as in the reference.

Options (``prepared``): ``likelihood="quasi"`` (the cells' pooled multinomials tempered by their Pearson
dispersion, ``bayes_margin.pooled_stats``: no concentrations) and ``pooling="cluster"`` (one ``sigma_alpha`` per
cluster), the variant ``analyses/bayes_margin_sim.py`` chose; configuration ``mnc-quasi-cluster-4x1000``.

Run ``python analyses/bayes_margin_fast.py --measure`` (writes ``analyses/bayes_margin_fast.json``);
``--config`` picks a configuration (``--list`` shows them), ``--all`` measures every one.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import time
from pathlib import Path

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=4")

import numpy as np

HERE = Path(__file__).resolve().parent
OUT = HERE / "bayes_margin_fast.json"
SEED = 20251121
#: "m" parameterisation of the tool effects: a tool chosen fewer times than this in a cell is *sparse*, its
#: direction of the cell's effects is sampled non-centred (``sparse_rotations``), everything else centred
RICH = 10

#: configurations measured (the chosen one first)
CONFIGS = {
    "mnc-diag-4x1000": {"param": "mnc", "dense": False, "tune": 500, "draws": 1000, "chains": 4},
    # the variant the coverage study chose (bayes_margin.py: pooled multinomials tempered by their Pearson
    # dispersion, one scale of the LLMs' deviations per cluster)
    "mnc-quasi-cluster-4x1000": {"param": "mnc", "dense": False, "tune": 500, "draws": 1000, "chains": 4,
                                 "likelihood": "quasi", "pooling": "cluster"},
    "mnc-quasi-hier-4x1000": {"param": "mnc", "dense": False, "tune": 500, "draws": 1000, "chains": 4,
                              "likelihood": "quasi", "pooling": "hier"},
    "mnc-diag-4x500": {"param": "mnc", "dense": False, "tune": 500, "draws": 500, "chains": 4},
    "mcc-diag-1000": {"param": "mcc", "dense": False, "tune": 500, "draws": 1000, "chains": 2},
    "mnc-diag-t300": {"param": "mnc", "dense": False, "tune": 300, "draws": 1000, "chains": 2},
    "mnc-diag-vec": {"param": "mnc", "dense": False, "tune": 500, "draws": 1000, "chains": 2, "method": "vectorized"},
    "mcc-diag": {"param": "mcc", "dense": False, "tune": 500, "draws": 500, "chains": 2},
    "mcc-diag-4ch": {"param": "mcc", "dense": False, "tune": 500, "draws": 500, "chains": 4},
    "mnc-diag-1000": {"param": "mnc", "dense": False, "tune": 500, "draws": 1000, "chains": 2},
    "mcc-diag-ta80": {"param": "mcc", "dense": False, "tune": 500, "draws": 500, "chains": 2, "target_accept": 0.8},
    "ccc-diag": {"param": "ccc", "dense": False, "tune": 500, "draws": 500, "chains": 2},
    "nnn-diag": {"param": "nnn", "dense": False, "tune": 500, "draws": 500, "chains": 2},
    # 5 + 5 draws: the cost of compilation (not a fit)
    "mnc-compile": {"param": "mnc", "dense": False, "tune": 5, "draws": 5, "chains": 2},
    "mcc-dense": {"param": "mcc", "dense": True, "tune": 300, "draws": 300, "chains": 2},
}
DEFAULT = "mnc-diag-4x1000"


def _jax():
    import jax

    jax.config.update("jax_enable_x64", True)
    cache = os.environ.get("MARGIN_JAX_CACHE")
    if cache:                                   # a persistent compile cache: later processes skip compilation
        jax.config.update("jax_compilation_cache_dir", cache)
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.5)
    return jax


def prepared(data, priors=None, rich=None, likelihood="dm", pooling="hier"):
    """Arrays the model needs: the sufficient statistics of both parts and the zero-sum basis.

    ``likelihood="dm"``: the rising-factorial statistics of the Dirichlet-multinomials (``At, Bt, Ap, Bp``);
    ``"quasi"``: the cells' pooled counts and Pearson dispersions (``bayes_margin.pooled_stats``: ``At, Bt`` are
    then ``Y, phi`` of the tools, ``Ap, Bp`` of the positions). ``pooling``: ``"hier"`` (one ``sigma_alpha``)
    or ``"cluster"`` (``sigma_alpha_c`` per cluster), as ``bayes_margin.sample_numpyro_raw``.
    """
    import bayes_margin as bm

    bm._check_likelihood(likelihood)
    if pooling not in POOLINGS:
        raise ValueError(f"pooling must be one of {POOLINGS}, got {pooling!r}")
    pr = {**bm.PRIORS, **(priors or {})}
    M, C, K = data["M"], data["C"], data["K"]
    At, Bt, Ap, Bp = bm._stats(data, likelihood)
    tot = np.zeros((M * C, K))
    np.add.at(tot, data["cell"], data["T"])
    R, sparse = sparse_rotations(tot, bm._basis(K), rich)
    return {"At": At, "Bt": Bt, "Ap": Ap, "Bp": Bp, "H": bm._basis(K), "M": M, "C": C, "K": K, "priors": pr,
            "R": R, "sparse": sparse, "likelihood": likelihood, "pooling": pooling}


POOLINGS = ("hier", "cluster")


def quasi_loglik(Y, phi, probs):
    """The tempered pooled multinomial (``bayes_margin``'s ``likelihood="quasi"``): ``sum_c sum_j Y log p / phi``."""
    import jax.numpy as jnp

    return ((Y * jnp.log(probs)).sum(-1) / phi).sum()


def dm_loglik(A, B, conc, probs):
    """Dirichlet-multinomial log-likelihood from the rising-factorial statistics (``bayes_margin.rising_stats``):
    ``sum A log(conc p + i) - sum B log(conc + i)``; ``conc`` (cells,), ``probs`` (cells, K)."""
    import jax.numpy as jnp

    i = jnp.arange(A.shape[-1], dtype=A.dtype)
    x = (conc[:, None] * probs)[:, :, None] + i
    return (A * jnp.log(x)).sum() - (B * jnp.log(conc[:, None] + i)).sum()


def _effect(name, loc, scale, shape, centred):
    """``loc + scale * z`` (non-centred, sampling ``z_<name>``) or a normal around ``loc`` (centred)."""
    import numpyro
    import numpyro.distributions as dist

    if centred:
        return numpyro.sample(name, dist.Normal(loc, scale * np.ones(shape)).to_event(len(shape)))
    z = numpyro.sample("z_" + name, dist.Normal(np.zeros(shape), 1.0).to_event(len(shape)))
    return numpyro.deterministic(name, loc + scale * z)


def sparse_rotations(tot, H, rich=None):
    """Per cell, the rotation of the zero-sum coordinates whose first rows span the directions of the cell's
    sparse tools, and the mask of those rows: the package's (``toolbias_stats.models.bayes._margin``)."""
    from toolbias_stats.models.bayes._margin import sparse_rotations as package_rotations

    return package_rotations(tot, H, RICH if rich is None else rich)


def _mixed_effect(name, loc, scale, R, mask):
    """Effects ``u`` (rows, d) ~ N(loc, scale^2 I), sampled as ``v`` in the rotated coordinates ``w = R u``:
    ``w = (R loc) + scale * v`` (non-centred) where ``mask``, ``w = v`` (centred) elsewhere; the log density of
    ``v`` is added by hand (N(0, 1) or N(R loc, scale^2) element by element)."""
    import jax.numpy as jnp
    import numpyro
    import numpyro.distributions as dist
    from jax.scipy.stats import norm

    Rj, mj = jnp.asarray(R), jnp.asarray(mask)
    rl = jnp.einsum("rij,rj->ri", Rj, loc)
    v = numpyro.sample(name + "_v", dist.ImproperUniform(dist.constraints.real_vector, (), event_shape=loc.shape))
    lp = jnp.where(mj, norm.logpdf(v), norm.logpdf(v, rl, scale))
    numpyro.factor(name + "_prior", lp.sum())
    w = jnp.where(mj, rl + scale * v, v)
    return numpyro.deterministic(name, jnp.einsum("rji,rj->ri", Rj, w))


def model(P, param="ccc"):
    """The margin model in NumPyro (``P`` from :func:`prepared`); ``param`` as in the module docstring."""
    import jax.numpy as jnp
    import numpyro
    import numpyro.distributions as dist
    from jax.nn import softmax

    M, C, K, H, pr = P["M"], P["C"], P["K"], jnp.asarray(P["H"]), P["priors"]
    d = K - 1
    ca, cbm, cbc = (ch == "c" for ch in param)
    mu = numpyro.sample("mu", dist.Normal(jnp.zeros((C, d)), pr["mu_sd"]).to_event(2))
    if P.get("pooling", "hier") == "cluster":   # one scale per cluster (bayes_margin's twin also samples an
        # unused sigma_alpha from its prior; it is left out here: it changes no other margin of the posterior)
        sac = numpyro.sample("sigma_alpha_c", dist.HalfNormal(pr["sigma_alpha_sd"] * jnp.ones(C)).to_event(1))
        sa = jnp.broadcast_to(sac[None, :, None], (M, C, 1))
    else:
        sa = numpyro.sample("sigma_alpha", dist.HalfNormal(pr["sigma_alpha_sd"]))
    if param[0] == "m":
        loc = jnp.broadcast_to(mu[None], (M, C, d)).reshape(M * C, d)
        sr = sa.reshape(M * C, 1) if jnp.ndim(sa) else sa
        ua = _mixed_effect("ua", loc, sr, P["R"], P["sparse"]).reshape(M, C, d)
    else:
        ua = _effect("ua", mu[None], sa, (M, C, d), ca)
    bb = numpyro.sample("beta_bar", dist.Normal(jnp.zeros(d), pr["beta_bar_sd"]).to_event(1))
    sb = numpyro.sample("sigma_beta", dist.HalfNormal(pr["sigma_beta_sd"]))
    sg = numpyro.sample("sigma_gamma", dist.HalfNormal(pr["sigma_gamma_sd"]))
    um = _effect("ubm", bb[None], sb, (M, d), cbm)
    ub = _effect("ub", um[:, None], sg, (M, C, d), cbc)
    a = ua @ H
    b = ub @ H
    numpyro.deterministic("a", a)
    numpyro.deterministic("b", b)
    pa = softmax(a.reshape(M * C, K), -1)
    pb = softmax(b.reshape(M * C, K), -1)
    if P.get("likelihood", "dm") == "quasi":
        numpyro.factor("loglik_tools", quasi_loglik(P["At"], P["Bt"], pa))
        numpyro.factor("loglik_positions", quasi_loglik(P["Ap"], P["Bp"], pb))
        return
    lk = numpyro.sample("log_kappa", dist.Logistic(jnp.zeros(M * C), 1.0).to_event(1))
    ll = numpyro.sample("log_lambda", dist.Logistic(jnp.zeros(M * C), 1.0).to_event(1))
    numpyro.factor("loglik_tools", dm_loglik(P["At"], P["Bt"], jnp.exp(lk), pa))
    numpyro.factor("loglik_positions", dm_loglik(P["Ap"], P["Bp"], jnp.exp(ll), pb))


def run_nuts(P, *, param="ccc", dense=False, tune=500, draws=500, chains=2, seed=SEED, target_accept=0.9,
             max_tree_depth=10, method=None):
    """NUTS with NumPyro; returns ``(mcmc, seconds)``; chains in parallel where there are devices for them."""
    jax = _jax()
    from numpyro.infer import MCMC, NUTS

    method = method or ("parallel" if jax.local_device_count() >= chains else "sequential")
    kern = NUTS(model, target_accept_prob=target_accept, dense_mass=dense, max_tree_depth=max_tree_depth)
    mcmc = MCMC(kern, num_warmup=tune, num_samples=draws, num_chains=chains, chain_method=method,
                progress_bar=False)
    mcmc.run(jax.random.PRNGKey(seed), P, param=param,
             extra_fields=("num_steps", "diverging", "accept_prob", "potential_energy"))
    return mcmc


def to_idata(mcmc):
    """ArviZ InferenceData with the reference model's names (``a``, ``b``, ``log_kappa``, ``log_lambda``), so
    ``bayes_margin.summarise`` / ``ppc`` apply unchanged."""
    import arviz as az

    post = {k: np.asarray(v) for k, v in mcmc.get_samples(group_by_chain=True).items()}
    ex = mcmc.get_extra_fields(group_by_chain=True)
    stats = {"diverging": np.asarray(ex["diverging"]), "n_steps": np.asarray(ex["num_steps"]),
             "acceptance_rate": np.asarray(ex["accept_prob"]), "lp": -np.asarray(ex["potential_energy"])}
    return az.from_dict(posterior=post, sample_stats=stats)


def diagnostics(idata):
    """Max R-hat, min bulk / tail ESS over every sampled and derived quantity, divergences, leapfrog steps."""
    import arviz as az

    summ = az.summary(idata, kind="diagnostics", round_to="none")
    steps = np.asarray(idata.sample_stats["n_steps"].values)
    return {"max_rhat": float(summ["r_hat"].max()), "min_ess_bulk": float(summ["ess_bulk"].min()),
            "min_ess_tail": float(summ["ess_tail"].min()),
            "worst_rhat": str(summ["r_hat"].idxmax()), "worst_ess": str(summ["ess_bulk"].idxmin()),
            "divergences": int(np.asarray(idata.sample_stats["diverging"].values).sum()),
            "grads_per_draw_mean": float(steps.mean()), "grads_per_draw_max": int(steps.max()),
            "tree_depth_mean": float(np.log2(steps + 1).mean()),
            "tree_depth_max": int(np.ceil(np.log2(steps.max() + 1)))}


def load_vendored():
    import bayes_margin as bm

    from toolbias_stats.io._load import load_selection_log

    log = load_selection_log(str(HERE.parent / "data/biasbusters/study.toml"))
    D = bm.design_of(log)
    return D, bm.margin_data(D)


def measure(name, D=None, data=None, seed=SEED, with_ppc=True):
    """One configuration on the vendored study: wall / CPU of the fit (compile included), diagnostics, PPCs."""
    import bayes_margin as bm

    if data is None:
        D, data = load_vendored()
    cfg = CONFIGS[name]
    P = prepared(data, likelihood=cfg.get("likelihood", "dm"), pooling=cfg.get("pooling", "hier"))
    load0 = os.getloadavg()
    t0, c0 = time.perf_counter(), resource.getrusage(resource.RUSAGE_SELF)
    mcmc = run_nuts(P, param=cfg["param"], dense=cfg["dense"], tune=cfg["tune"], draws=cfg["draws"],
                    chains=cfg["chains"], seed=seed, target_accept=cfg.get("target_accept", 0.9),
                    method=cfg.get("method"))
    idata = to_idata(mcmc)
    c1 = resource.getrusage(resource.RUSAGE_SELF)
    wall = time.perf_counter() - t0
    cpu = (c1.ru_utime + c1.ru_stime) - (c0.ru_utime + c0.ru_stime)
    out = {"config": name, **cfg, "seed": seed, "fit_wall_s": round(wall, 2), "fit_cpu_s": round(cpu, 2),
           "load_before": [round(x, 2) for x in load0], "load_after": [round(x, 2) for x in os.getloadavg()],
           **diagnostics(idata)}
    if with_ppc:
        t1 = time.perf_counter()
        out["ppc"] = bm.ppc(idata, data, gen=seed)
        out["ppc_s"] = round(time.perf_counter() - t1, 2)
        post = bm.summarise(idata, margin=0.02, gen=seed)
        out["delta_api"] = post["delta_api"].mean(0).round(4).tolist()
        out["delta_pos"] = post["delta_pos"].mean(0).round(4).tolist()
        out["delta_api_hdi94"] = np.asarray(post["hdi"]["delta_api"]).round(4).tolist()
        out["p_no_position"] = post["p_no_position"].round(4).tolist()
        out["p_equal_worth_max"] = float(post["p_equal_worth"].max())
    out["llms"] = list(D.llms)
    return out, idata


def dispersion_anatomy(idata, data, llm, n_draws=300, seed=SEED):
    """Per cluster of one LLM: where its per-query dispersion PPC (``bayes_margin.ppc``) comes from.

    Same statistic (Pearson chi-square of every query's tool counts around ``n_q pi``) and the same Polya-urn
    replicate as the PPC, split by cell; beside it the cell's posterior median concentration ``kappa``, the
    share of its queries that chose one position in every attempt, and the share of its full queries (15 attempts)
    whose tool counts are exactly balanced (3 of each tool: what a position-only chooser produces when every
    tool is shown once at every position, the study's 5 cyclic rotations x 3 runs). ``cluster`` is the 0-based
    index into the design's clusters.
    """
    import bayes_margin as bm

    gen = np.random.default_rng(seed)
    post = idata.posterior
    S = post.sizes["chain"] * post.sizes["draw"]
    sel = gen.choice(S, size=min(n_draws, S), replace=False)
    M, C, K = data["M"], data["C"], data["K"]
    T, Pc, cell = data["T"], data["Pc"], data["cell"]
    n = T.sum(1)
    pa = np.exp(np.asarray(post["a"].values).reshape(S, M * C, K)[sel])
    pa /= pa.sum(-1, keepdims=True)
    kap = np.exp(np.asarray(post["log_kappa"].values).reshape(S, M * C)[sel])
    obs, rep = np.zeros((len(sel), M * C)), np.zeros((len(sel), M * C))
    for s in range(len(sel)):
        E = n[:, None] * pa[s, cell]
        r = bm._polya(gen, pa[s, cell], kap[s, cell], n)
        obs[s] = np.bincount(cell, ((T - E) ** 2 / E).sum(1), M * C)
        rep[s] = np.bincount(cell, ((r - E) ** 2 / E).sum(1), M * C)
    rows = []
    for c in range(C):
        j = llm * C + c
        q = cell == j
        full = q & (n == n.max())
        rows.append({"cluster": c, "queries": int(q.sum()), "obs": round(float(obs[:, j].mean()), 1),
                     "rep_mean": round(float(rep[:, j].mean()), 1), "rep_sd": round(float(rep[:, j].std()), 1),
                     "multinomial_mean": float((K - 1) * q.sum()),
                     "p": round(float((rep[:, j] >= obs[:, j]).mean()), 3),
                     "kappa_median": round(float(np.median(kap[:, j])), 1),
                     "one_position_always": round(float((Pc[q].max(1) == n[q]).mean()), 3),
                     "balanced_tool_counts": round(float((T[full] == n.max() / K).all(1).mean()), 3)
                     if full.any() else None})
    cs = slice(llm * C, llm * C + C)
    return {"cells": rows, "p": float((rep[:, cs].sum(1) >= obs[:, cs].sum(1)).mean())}


def _save(records):
    old = json.loads(OUT.read_text()) if OUT.exists() else {"configs": []}
    keep = [r for r in old["configs"] if r["config"] not in {x["config"] for x in records}]
    old["configs"] = keep + records
    OUT.write_text(json.dumps(old, indent=1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--measure", action="store_true")
    ap.add_argument("--config", default=DEFAULT, help="one or more names (comma-separated) of CONFIGS")
    ap.add_argument("--all", action="store_true")
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--no-save", action="store_true")
    ap.add_argument("--seed", type=int, default=SEED)
    ap.add_argument("--anatomy", action="store_true", help="fit the default and split the dispersion PPC by cell")
    a = ap.parse_args()
    if a.list:
        print(json.dumps(CONFIGS, indent=1))
        return
    if a.anatomy:
        D, data = load_vendored()
        _, idata = measure(DEFAULT, D, data, with_ppc=False)
        out = {D.llms[m]: dispersion_anatomy(idata, data, m) for m in range(data["M"])}
        old = json.loads(OUT.read_text()) if OUT.exists() else {"configs": []}
        old["dispersion_anatomy"] = {"config": DEFAULT, "per_llm": out}
        OUT.write_text(json.dumps(old, indent=1))
        print(json.dumps(out[D.llms[1]], indent=1))
    if a.measure or a.all:
        D, data = load_vendored()
        names = list(CONFIGS) if a.all else a.config.split(",")
        for n in names:
            rec, _ = measure(n, D, data, seed=a.seed)
            print(json.dumps(rec), flush=True)
            if not a.no_save:
                _save([rec])


if __name__ == "__main__":
    main()
