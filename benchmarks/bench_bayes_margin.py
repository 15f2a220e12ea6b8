"""Benchmark: the collapsed margin model's fit on the bundled BiasBusters study (not a test; issue 38).

Usage:  python benchmarks/bench_bayes_margin.py [--configs mcc-diag,nnn-diag,...] [--list]

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
    ap.add_argument("--configs", default=f.DEFAULT, help="comma-separated names of bayes_margin_fast.CONFIGS")
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--json", action="store_true", help="print the records as JSON lines")
    a = ap.parse_args()
    if a.list:
        print(json.dumps(f.CONFIGS, indent=1))
        return
    for name in a.configs.split(","):
        rec = run_one(name)
        print(json.dumps(rec) if a.json else _fmt(rec), flush=True)


if __name__ == "__main__":
    main()
