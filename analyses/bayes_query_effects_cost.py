"""What query effects cost NUTS on the bundled study: latent dimension, seconds per gradient, leapfrog steps.

Issue 22 asks for a Bayesian model with query effects that passes the per-query dispersion and the
cluster x position checks, converges, and fits in 30 s (default) / 120 s (thorough) on this machine.
This script measures the three factors of a NUTS fit's time for the variants with and without query
effects: the gradient of the JAX-compiled log-density (the model exactly as ``fit_bayes`` builds it),
and the number of leapfrog steps per iteration from a short NumPyro run (2 chains x (``--iters`` tune +
``--iters`` draws)). The projection for a default-sized fit (4 chains x (1000 + 1000)) is
``4 x 2000 x steps x seconds-per-gradient / cores`` (chains run in parallel on the 2 cores).

    nice python analyses/bayes_query_effects_cost.py [--models v2,query-shared] [--iters 50] [--out FILE.json]
"""

from __future__ import annotations

import argparse
import json
import os
import time
import warnings

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=2")


def measure(study_log, name, iters, reps=30):
    import jax
    import numpy as np
    from bayes_experimental import ALL_PRIORS, MODEL_VARIANTS  # the experimental variants (issue 38)
    from bayes_experimental._model import ExperimentalSpec as _ModelSpec
    from pymc.sampling.jax import get_jaxified_logp

    from toolbias_stats.models.bayes import _fit
    from toolbias_stats.models.bayes._design import _attach_prompts, _design
    from toolbias_stats.models.bayes._sampling import _sample

    v = MODEL_VARIANTS[name]
    counts, rows = _fit._counts_and_rows(study_log, v)
    D = _attach_prompts(_design(counts, ["model"], "exclude"), rows, ["model"], "exclude")
    spec = _ModelSpec(D, {k: ALL_PRIORS[k] for k in v.priors()}, "centered", v)
    model = spec.build()
    logp = get_jaxified_logp(model)
    ip = model.initial_point()
    vals = [np.asarray(ip[x.name]) + 0.01 for x in model.value_vars]
    grad = jax.jit(jax.value_and_grad(logp))
    t = time.perf_counter()
    jax.block_until_ready(grad(vals))
    compile_s = time.perf_counter() - t
    t = time.perf_counter()
    for _ in range(reps):
        out = grad(vals)
    jax.block_until_ready(out)
    per_grad = (time.perf_counter() - t) / reps
    t = time.perf_counter()
    raw = _sample(spec, sampler="numpyro", draws=iters, tune=iters, chains=2, cores=2, seed=1,
                  target_accept=0.8, progress=False)
    sample_s = time.perf_counter() - t
    steps = float(np.asarray(raw.sample_stats["n_steps"]).mean())
    depth = float(np.asarray(raw.sample_stats["tree_depth"]).mean())
    return {"model": name, "latent_parameters": int(sum(np.size(x) for x in vals)),
            "prompt_positions": int(D.prompts.y.size) if D.prompts is not None else None,
            "compile_s": round(compile_s, 2), "ms_per_gradient": round(per_grad * 1e3, 3),
            "short_run": {"chains": 2, "tune": iters, "draws": iters, "seconds": round(sample_s, 1),
                          "mean_leapfrog_steps": round(steps, 1), "mean_tree_depth": round(depth, 2)},
            "projected_default_fit_s": round(4 * 2000 * steps * per_grad / 2, 0),
            "seconds_per_iteration": round(sample_s / (2 * iters), 3)}   # tune + draws, chains in parallel


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="v2,query-shared")
    ap.add_argument("--iters", type=int, default=50)
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    import toolbias_stats as tbs

    study = tbs.read_study(tbs.datasets.path("biasbusters/study.toml"))
    res = {"load_before": os.getloadavg()[0], "results": []}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name in a.models.split(","):
            r = measure(study.log, name, a.iters)
            r["load"] = round(os.getloadavg()[0], 2)
            print(json.dumps(r), flush=True)
            res["results"].append(r)
    if a.out:
        with open(a.out, "w") as fh:
            json.dump(res, fh, indent=1)


if __name__ == "__main__":
    main()
