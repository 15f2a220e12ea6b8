"""Benchmark: CPU milliseconds per log-density gradient of the Bayesian models on the bundled study (not a test).

Usage:  python benchmarks/bench_bayes_kernel.py [--forms old,slots,op,v2] [--rounds 6] [--evals 30]

What NumPyro evaluates: PyMC's JAX translation of the model's log-density (``get_jaxified_logp``), jit-compiled
with its gradient (``jax.value_and_grad``), at one random point near the initial point. The query mixture
(``model="query-mixture"``) in its forms (``docs/bayes_speed.md``):

  old     the first layout: two padded 2-D gathers and ``exp(x)`` (PyTensor rewrites ``log(exp(x) + 1)``
          into a softplus)
  slots   the slot layout of ``_mixture_kernel`` and ``exp(lk) * exp(logp)`` (no softplus), PyTensor graph
  op      the class sums as one JAX function (``MixtureQueryOp``; what ``sampler="numpyro"`` uses)
  v2      the default model, for reference

The forms run alternately in one process (``--rounds`` rounds of ``--evals`` evaluations each), so a change of
load hits all of them; min and median CPU time per evaluation are printed with the load average. Before the
timing, each form's log-density and gradient are compared with the first one's.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
STUDY = ROOT / "data" / "biasbusters" / "study.toml"
FORMS = {"old": ("query-mixture", "gather", "exp", False), "slots": ("query-mixture", "slots", "prod", False),
         "op": ("query-mixture", "slots", "prod", True), "v2": ("v2", "slots", "prod", False)}


def _value_and_grad(design, form):
    import jax
    from pymc.sampling.jax import get_jaxified_logp

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "analyses"))
    from bayes_experimental import ALL_PRIORS, MODEL_VARIANTS  # the query mixture moved there (issue 38)
    from bayes_experimental import _mixture_kernel as mk
    from bayes_experimental._model import ExperimentalSpec as _ModelSpec

    name, mk.LAYOUT, mk.EX, op = FORMS[form]
    variant = MODEL_VARIANTS[name]
    spec = _ModelSpec(design, {k: ALL_PRIORS[k] for k in variant.priors()}, "centered", variant)
    spec.jax_kernel = op
    model = spec.build()
    logp = get_jaxified_logp(model, negative_logp=False)
    gen = np.random.default_rng(0)
    ip = model.initial_point()
    x = [ip[v.name] + 0.1 * gen.standard_normal(np.shape(ip[v.name])) for v in model.value_vars]
    fn = jax.jit(jax.value_and_grad(logp))
    jax.block_until_ready(fn(x))
    return fn, x


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--forms", default="old,slots,op,v2")
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--evals", type=int, default=30)
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    import jax

    jax.config.update("jax_enable_x64", True)
    import toolbias_stats as tbs
    from toolbias_stats.models.bayes._design import _attach_prompts, _design

    log = tbs.read_study(STUDY).log
    design = _attach_prompts(_design(log.counts(), ["model"], "exclude"), log, ["model"], "exclude")
    forms = [f for f in args.forms.split(",") if f]
    fns = {f: _value_and_grad(design, f) for f in forms}
    ref = None
    for f, (fn, x) in fns.items():
        if FORMS[f][0] != "query-mixture":
            continue
        v, g = fn(x)
        if ref is None:
            ref = (float(v), [np.asarray(a) for a in g], f)
        rel = abs(float(v) - ref[0]) / abs(ref[0])
        grel = max(float(np.max(np.abs(np.asarray(a) - b)) / np.max(np.abs(b))) for a, b in zip(g, ref[1]))
        print(f"{f}: log-density {float(v):.10f} (relative difference to {ref[2]}: {rel:.1e}; gradient {grel:.1e})")
    cpu = {f: [] for f in fns}
    load0 = os.getloadavg()
    for _ in range(args.rounds):
        for f, (fn, x) in fns.items():
            for _ in range(args.evals):
                c = time.process_time()
                jax.block_until_ready(fn(x))
                cpu[f].append(1e3 * (time.process_time() - c))
    print(f"load average {load0[0]:.1f} -> {os.getloadavg()[0]:.1f}; CPU ms per value-and-gradient "
          f"({args.rounds} x {args.evals} evaluations, alternating)")
    print("| form | min | median |\n|---|---|---|")
    for f, v in cpu.items():
        print(f"| {f} | {np.min(v):.3f} | {np.median(v):.3f} |")


if __name__ == "__main__":
    main()
