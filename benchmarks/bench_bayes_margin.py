"""Benchmark: the collapsed margin model's fit on the bundled BiasBusters study (not a test; issue 38).

Usage:  python benchmarks/bench_bayes_margin.py [--seed N] [--json]
        python benchmarks/bench_bayes_margin.py --configs mcc-diag,nnn-diag,... [--list]

Without ``--configs`` it times the package's variant, ``fit_bayes(study.log, model="margin")`` with its defaults
(4 chains x (500 + 1,000), NumPyro), in a fresh Python process: reading the study, the fit (compilation
included), the summaries and both posterior predictive checks; it prints wall and CPU seconds of the fit call, the
load average, max R-hat, min bulk / tail ESS, divergences, both PPCs per LLM and whether the acceptance is met.

``--configs mnc-quasi-cluster-4x1000,mnc-diag-4x1000`` compares the coverage study's variant (quasi-likelihood,
one scale per cluster) with the Dirichlet-multinomial form in one run.

Each configuration (``analyses/bayes_margin_fast.py``, ``CONFIGS``: parameterisation, mass matrix, tuning and
draws, chains) runs in a fresh Python process, so the time includes JAX's compilation (there is no persistent
compile cache). Reported per configuration: wall and CPU seconds of the fit (NUTS, compilation included; reading
the study and the posterior predictive checks are timed apart), the load average before and after, leapfrog
steps (gradients) per draw and the tree depth, max R-hat, min bulk / tail ESS, divergences, and both posterior
predictive p-values (per-query dispersion per LLM, cluster x position). The issue's acceptance is R-hat <= 1.01,
bulk ESS >= 400, no divergences, every PPC p in [0.05, 0.95] and <= 60 s.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

_CHILD = """
import json, sys, warnings
warnings.simplefilter("ignore")
import bayes_margin_fast as f
D, data = f.load_vendored()
rec, _ = f.measure(sys.argv[1], D, data)
print("RESULT " + json.dumps(rec))
"""


_PACKAGE_CHILD = """
import json, os, resource, sys, time, warnings
warnings.simplefilter("ignore")
import toolbias_stats as tbs
from toolbias_stats.models import fit_bayes
study = tbs.read_study(sys.argv[1])
load0 = os.getloadavg()
t0, c0 = time.perf_counter(), resource.getrusage(resource.RUSAGE_SELF)
res = fit_bayes(study.log, model="margin", rng=int(sys.argv[2]))
c1 = resource.getrusage(resource.RUSAGE_SELF)
d = res.diagnostics
disp = res.ppc.dispersion.set_index("llm")["p_value"]
rec = {"config": "package fit_bayes(model='margin')", "seed": int(sys.argv[2]),
       "fit_wall_s": round(time.perf_counter() - t0, 2),
       "fit_cpu_s": round(c1.ru_utime + c1.ru_stime - c0.ru_utime - c0.ru_stime, 2),
       "load_before": [round(x, 2) for x in load0], "load_after": [round(x, 2) for x in os.getloadavg()],
       "max_rhat": d.max_rhat, "min_ess_bulk": d.min_ess_bulk, "min_ess_tail": d.min_ess_tail,
       "divergences": d.divergences, "parameterization": d.parameterization,
       "ppc": {"dispersion": [float(disp[m]) for m in res.llms], "cluster_position": float(res.ppc.p_value)},
       "llms": res.llms, "flags": d.flags, "fits": {r.llm: r.fits for r in res.fit_checks().itertuples()
                                                    if r.check == "per-query dispersion"}}
print("RESULT " + json.dumps(rec))
"""


def run_package(seed):
    """``fit_bayes(model="margin")`` on the bundled study in a fresh process; returns its record."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, "-c", _PACKAGE_CHILD, str(ROOT / "data/biasbusters/study.toml"),
                           str(seed)], capture_output=True, text=True, env=env, cwd=ROOT, check=False)
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    raise RuntimeError(f"the package fit failed:\n{proc.stderr[-3000:]}")


def _fmt_package(rec):
    ppc = rec["ppc"]
    ok = (rec["max_rhat"] <= 1.01 and rec["min_ess_bulk"] >= 400 and rec["divergences"] == 0
          and all(0.05 <= p <= 0.95 for p in ppc["dispersion"] + [ppc["cluster_position"]])
          and rec["fit_wall_s"] <= 60)
    return (f"{rec['config']} ({rec['parameterization']}), seed {rec['seed']}: wall {rec['fit_wall_s']:.1f} s  "
            f"cpu {rec['fit_cpu_s']:.1f} s  load {rec['load_before'][0]:.1f}->{rec['load_after'][0]:.1f}  "
            f"R-hat {rec['max_rhat']:.4f}  ESS bulk {rec['min_ess_bulk']:.0f} tail {rec['min_ess_tail']:.0f}  "
            f"div {rec['divergences']}  PPC disp {[round(p, 2) for p in ppc['dispersion']]} "
            f"cxp {ppc['cluster_position']:.2f}  {'MEETS' if ok else 'misses'} the acceptance")


def run_one(name):
    """Fit one configuration in a fresh process and return its record (``bayes_margin_fast.measure``)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "analyses"),
                                                         os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, "-c", _CHILD, name], capture_output=True, text=True, env=env,
                          cwd=ROOT, check=False)
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    raise RuntimeError(f"{name} failed:\n{proc.stderr[-3000:]}")


def _fmt(rec):
    ppc = rec["ppc"]
    ok = (rec["max_rhat"] <= 1.01 and rec["min_ess_bulk"] >= 400 and rec["divergences"] == 0
          and all(0.05 <= p <= 0.95 for p in ppc["dispersion"] + [ppc["cluster_position"]])
          and rec["fit_wall_s"] <= 60)
    return (f"{rec['config']:<16} wall {rec['fit_wall_s']:7.1f} s  cpu {rec['fit_cpu_s']:7.1f} s  "
            f"load {rec['load_before'][0]:.1f}->{rec['load_after'][0]:.1f}  "
            f"grads/draw {rec['grads_per_draw_mean']:6.1f} (depth <= {rec['tree_depth_max']})  "
            f"R-hat {rec['max_rhat']:.4f}  ESS bulk {rec['min_ess_bulk']:.0f} tail {rec['min_ess_tail']:.0f}  "
            f"div {rec['divergences']}  PPC disp {[round(p, 2) for p in ppc['dispersion']]} "
            f"cxp {ppc['cluster_position']:.2f}  ppc {rec['ppc_s']:.1f} s  {'MEETS' if ok else 'misses'}")


def main():
    sys.path[:0] = [str(ROOT), str(ROOT / "analyses")]
    import bayes_margin_fast as f

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--configs", default=None, help="comma-separated names of bayes_margin_fast.CONFIGS (the "
                    "analyses' forms); default: the package's fit_bayes(model='margin')")
    ap.add_argument("--seed", type=int, default=20251121, help="rng of the package's fit (default 20251121)")
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--json", action="store_true", help="print the records as JSON lines")
    a = ap.parse_args()
    if a.list:
        print(json.dumps(f.CONFIGS, indent=1))
        return
    if a.configs is None:
        rec = run_package(a.seed)
        print(json.dumps(rec) if a.json else _fmt_package(rec), flush=True)
        return
    for name in a.configs.split(","):
        rec = run_one(name)
        print(json.dumps(rec) if a.json else _fmt(rec), flush=True)


if __name__ == "__main__":
    main()
