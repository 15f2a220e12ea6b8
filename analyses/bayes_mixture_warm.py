"""Issue 22, sixth attempt: is the free-weight query mixture's chain split a minor mode, and does a warm start help?

The query mixture with free class weights per (LLM, cluster) (``model="query-mixture"`` with the experimental
switch ``_MIXTURE_FREE = True``, analyses/bayes_experimental/_variants.py) passed both posterior predictive
checks on the bundled BiasBusters study but its two chains split (docs/dev/bayes_attempts.md, "Fourth attempt").
Two stages:

``--stage split``  fit it with 2 chains (default 2 x (300 + 300)) and compare the chains: mean log posterior
                   density (NumPyro's potential energy is the negative log density; PyMC stores it as
                   ``sample_stats.lp``), the log-likelihood summed over queries, and the cells whose class
                   weights disagree. Saves random posterior draws of every chain's free parameters to
                   ``--state`` (an ``.npz``) for the second stage.
``--stage warm``   start every chain at a different random draw of the chosen chain's posterior (``--from-chain``:
                   ``best`` = the chain with the highest mean log density, or a chain index), via the
                   ``initvals`` option of ``_sampling._sample`` (no PyMC jitter on top: the draws are already
                   spread like the posterior), and report R-hat, ESS, divergences, leapfrog steps in warm-up and
                   sampling, both PPC p-values, and whether the chains agree.

    nice -n 19 python analyses/bayes_mixture_warm.py --stage split --out analyses/bayes_mixture_warm.json
    nice -n 19 python analyses/bayes_mixture_warm.py --stage warm --chains 4 --draws 500 --tune 500 \
        --out analyses/bayes_mixture_warm.json

``--class-prior b1,b0,a`` (experimental ``_variants._MIXTURE_FREE_PRIOR``): instead of Dirichlet(1, ..., 1) over the
K + 1 classes (which makes ``epsilon ~ Beta(K, 1)``), ``epsilon ~ Beta(b1, b0)`` and the needed tools' shares
``~ Dirichlet(a, ..., a)``; the sixth attempt used ``1,1,2`` with ``--stage warm``.

Each stage adds its record to ``--out`` (a JSON list; a record of the same stage and size is replaced).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import time
import warnings

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=2")


def _load_log():
    import toolbias_stats as tbs

    return tbs.read_study(tbs.datasets.path("biasbusters/study.toml")).log


@contextlib.contextmanager
def _collect_warmup(store):
    """Run NumPyro's warm-up as its own phase that keeps its stats (leapfrog steps per iteration); the
    sampling phase then continues from the warmed-up state with fresh keys (a script-only patch)."""
    import jax
    import numpy as np
    from numpyro.infer import MCMC

    original = MCMC.run

    def run(self, rng_key, *args, extra_fields=(), init_params=None, **kwargs):
        if self.num_warmup > 0 and self._warmup_state is None and not store.get("busy"):
            store["busy"] = True
            try:
                self.warmup(rng_key, *args, extra_fields=("num_steps", "diverging", "adapt_state.step_size"),
                            collect_warmup=True, init_params=init_params, **kwargs)
            finally:
                store["busy"] = False
            store["warmup"] = {k: np.asarray(v) for k, v in self.get_extra_fields(group_by_chain=True).items()}
            rng_key = jax.vmap(lambda k: jax.random.fold_in(k, 1))(rng_key) if rng_key.ndim > 1 \
                else jax.random.fold_in(rng_key, 1)
        return original(self, rng_key, *args, extra_fields=extra_fields, init_params=init_params, **kwargs)

    MCMC.run = run
    try:
        yield
    finally:
        MCMC.run = original


def _fit(log, *, draws, tune, chains, seed, initvals=None, prior=None):
    """Fit the free-weight mixture; return the result, the raw PyMC posterior and the full sample stats."""
    from bayes_experimental import _variants as _common  # the experimental variants and switches (issue 38)
    from bayes_experimental import fit_experimental as fit_bayes

    import toolbias_stats.models.bayes._fit as fit_mod
    from toolbias_stats.models.bayes import _sampling

    _common._MIXTURE_FREE = True
    _common._MIXTURE_FREE_PRIOR = prior
    captured = {}
    original = fit_mod._sample

    def sample(spec, **kw):
        store = {}
        with _collect_warmup(store):
            raw = _sampling._sample(spec, initvals=initvals, **kw)
        raw.warmup_stats = store.get("warmup")
        raw.free_names = list(raw.posterior.data_vars)
        captured["raw"] = raw
        return raw

    fit_mod._sample = sample
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res = fit_bayes(log, model="query-mixture", draws=draws, tune=tune, chains=chains, rng=seed)
    finally:
        fit_mod._sample = original
        _common._MIXTURE_FREE = False
        _common._MIXTURE_FREE_PRIOR = None
    return res, captured["raw"]


def _per_chain(res, raw, chains):
    import numpy as np

    ss = res.idata.sample_stats
    logdens = -np.asarray(ss["lp"])                                   # NumPyro's potential energy = -log density
    llq = np.asarray(res.idata.log_likelihood["y_query"]).sum(-1)     # (chain, draw) summed over queries
    cw = res._post["class_weights"]
    cw = cw.reshape(chains, -1, *cw.shape[1:]).mean(1)                # (chain, M, C, Kmax + 1)
    llms = [str(x) for x in res.idata.posterior["llm"].values]
    clusters = [str(x) for x in res.idata.posterior["cluster"].values]
    diff = np.nanmax(np.abs(cw[:, None] - cw[None, :]), axis=(0, 1, -1))  # (M, C): max over chain pairs, classes
    cells = [{"llm": llms[m], "cluster": clusters[c], "max_abs_diff": round(float(diff[m, c]), 3),
              "epsilon_by_chain": [round(float(1 - cw[k, m, c, 0]), 3) for k in range(chains)]}
             for m, c in zip(*np.where(diff > 0.1))]
    cells.sort(key=lambda r: -r["max_abs_diff"])
    half = logdens.shape[1] // 2
    return {"log_density_mean": [round(float(v), 1) for v in logdens.mean(1)],
            "log_density_mean_first_half": [round(float(v), 1) for v in logdens[:, :half].mean(1)],
            "log_density_mean_second_half": [round(float(v), 1) for v in logdens[:, half:].mean(1)],
            "log_density_sd": [round(float(v), 1) for v in logdens.std(1)],
            "loglik_sum_queries_mean": [round(float(v), 1) for v in llq.mean(1)],
            "loglik_sum_queries_sd": [round(float(v), 1) for v in llq.std(1)],
            "class_weights_max_abs_diff": round(float(np.nanmax(diff)), 3),
            "cells_disagree_gt_0.1": cells,
            "epsilon_range_by_chain": [[round(float(1 - cw[k, ..., 0].max()), 3),
                                        round(float(1 - cw[k, ..., 0].min()), 3)] for k in range(chains)]}


def _steps(raw, tune):
    import numpy as np

    st = raw.warmup_stats
    n = np.asarray(st["num_steps"]) if st is not None else None
    samp = np.asarray(raw.sample_stats["n_steps"])
    out = {}
    if n is not None:
        q = max(n.shape[1] // 4, 1)
        out["leapfrog_per_iter_warmup_by_quarter"] = [round(float(n[:, i * q:(i + 1) * q].mean()), 1)
                                                      for i in range(4)]
        out["divergences_warmup"] = int(np.asarray(st["diverging"]).sum())
    return {**out, "leapfrog_per_iter_warmup": None if n is None else round(float(n.mean()), 1),
            "leapfrog_per_iter_sampling": round(float(samp.mean()), 1),
            "leapfrog_total": None if n is None else int(n.sum() + samp.sum()),
            "step_size_sampling": [round(float(v), 4) for v in np.asarray(raw.sample_stats["step_size"]).mean(1)]}


def _record(stage, res, raw, a, wall, cpu, load0, extra):
    d = res.diagnostics
    out = {"stage": stage, "model": "query-mixture, free class weights (_MIXTURE_FREE)", "llms": "all 7",
           "draws": a.draws, "tune": a.tune, "chains": a.chains, "seed": a.seed, "sampler": "numpyro",
           "wall_s": round(wall, 1), "cpu_s": round(cpu, 1), "load": [round(load0, 2), round(os.getloadavg()[0], 2)],
           "max_rhat": round(d.max_rhat, 4), "min_ess_bulk": round(d.min_ess_bulk, 1),
           "min_ess_tail": round(d.min_ess_tail, 1), "divergences": d.divergences,
           **_steps(raw, a.tune),
           "ppc_cluster_x_position": res.ppc.p_value, "ppc_dispersion": res.ppc.p_value_dispersion,
           "ppc_finest": res.ppc.p_value_rows, **_per_chain(res, raw, a.chains), **extra}
    disp = res.ppc.dispersion
    if disp is not None:
        out["dispersion_by_llm"] = disp.to_dict(orient="records")
    return out


def _save_state(path, raw, rng, n_keep=8):
    import numpy as np

    post = raw.posterior
    nd = post.sizes["draw"]
    idx = np.sort(rng.choice(nd, size=min(n_keep, nd), replace=False))
    arrays = {f"{name}": np.asarray(post[name].values)[:, idx] for name in raw.free_names}
    np.savez(path, **arrays)


def _initvals_from_state(path, chain, chains, rng):
    import numpy as np

    st = np.load(path)
    names = list(st.files)
    n_keep = st[names[0]].shape[1]
    pick = rng.choice(n_keep, size=chains, replace=chains > n_keep)
    return [{n: np.asarray(st[n][chain, i]) for n in names} for i in pick]


def _append(path, rec):
    old = []
    if path and os.path.exists(path):
        with open(path) as fh:
            old = json.load(fh)
    key = ("stage", "chains", "draws", "tune", "seed", "init")
    old = [r for r in old if any(r.get(k) != rec.get(k) for k in key)]
    old.append(rec)
    if path:
        with open(path, "w") as fh:
            json.dump(old, fh, indent=1, default=float)


def main():
    import numpy as np

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--stage", choices=("split", "warm"), required=True)
    ap.add_argument("--draws", type=int, default=300)
    ap.add_argument("--tune", type=int, default=300)
    ap.add_argument("--chains", type=int, default=2)
    ap.add_argument("--seed", type=int, default=20251121)
    ap.add_argument("--state", default="/tmp/bayes_mixture_warm_state.npz",
                    help="posterior draws of the split fit's chains (written by --stage split, read by warm)")
    ap.add_argument("--from-chain", default="best", help="'best' (highest mean log density) or a chain index")
    ap.add_argument("--class-prior", default=None,
                    help="b1,b0,a: epsilon ~ Beta(b1, b0), needed tools' shares ~ Dirichlet(a) (default: Dirichlet(1) "
                         "over the K + 1 classes)")
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    rng = np.random.default_rng(a.seed)
    log = _load_log()
    extra = {}
    initvals = None
    if a.stage == "warm":
        prev = []
        if a.out and os.path.exists(a.out):
            with open(a.out) as fh:
                prev = json.load(fh)
        split = next((r for r in prev if r["stage"] == "split"), None)
        if a.from_chain == "best":
            if split is None:
                raise SystemExit("--from-chain best needs the split stage's record in --out")
            chain = int(np.argmax(split["log_density_mean"]))
        else:
            chain = int(a.from_chain)
        initvals = _initvals_from_state(a.state, chain, a.chains, rng)
        extra = {"init": f"each chain at a random posterior draw of chain {chain} of the split fit (no jitter)"}
    t, cpu, load0 = time.perf_counter(), time.process_time(), os.getloadavg()[0]
    prior = None if a.class_prior is None else tuple(float(v) for v in a.class_prior.split(","))
    if prior is not None:
        extra["class_prior"] = {"epsilon": f"Beta({prior[0]:g}, {prior[1]:g})",
                                "needed_tool_shares": f"Dirichlet({prior[2]:g})"}
        extra["init"] = extra.get("init", "default") + f"; class prior {a.class_prior}"
    res, raw = _fit(log, draws=a.draws, tune=a.tune, chains=a.chains, seed=a.seed, initvals=initvals, prior=prior)
    wall, cpu = time.perf_counter() - t, time.process_time() - cpu
    rec = _record(a.stage, res, raw, a, wall, cpu, load0, extra)
    if a.stage == "split":
        _save_state(a.state, raw, rng)
    print(json.dumps({k: v for k, v in rec.items() if k != "dispersion_by_llm"}, default=float), flush=True)
    _append(a.out, rec)


if __name__ == "__main__":
    main()
