"""Benchmark: the hierarchical Bayesian fit (`fit_bayes`) on the bundled BiasBusters study (not a test).

Usage:  python benchmarks/bench_bayes.py [--configs v1,v2,thorough,...] [--skip-slow]

Every configuration runs in a fresh process, twice:
  cold  with empty PyTensor, numba and JAX compile caches (a new machine, or CI), and
  warm  with the caches the cold run left behind (every later run on the same machine).
The time reported is the wall time of the `fit_bayes(...)` call (model building, compilation,
sampling, diagnostics and every summary); reading the study and importing are listed apart.
For every configuration it also prints the convergence numbers, the posterior predictive p-values
and the Spearman rank correlation between the model-implied delta_pos (logged orderings) and the
empirical delta_pos. Configurations are (model variant, sampler, chains); the sampler comparison
of v1 is kept under names with a "v1/" prefix.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STUDY = ROOT / "data" / "biasbusters" / "study.toml"

#: name -> fit_bayes keyword arguments (everything else at its default: 4 chains x 1,000 draws, 1,000 tune)
CONFIGS = {
    "v1": {"model": "v1"},
    "v2": {"model": "v2"},                                 # the default until issue 38 (the margin model since)
    "cluster-position": {"model": "cluster-position"},
    "thorough": {"model": "thorough"},
    "thorough/500": {"model": "thorough", "draws": 500, "tune": 500},
    "query-urn": {"model": "query-urn"},                   # experimental (docs/bayes.md, "The query-level urn")
    "query-mixture": {"model": "query-mixture"},           # experimental (docs/bayes.md, "The query mixture")
    "query-mixture/500": {"model": "query-mixture", "draws": 500, "tune": 500},
    "v2/pymc": {"model": "v2", "sampler": "pymc"},
    "v1/pymc": {"model": "v1", "sampler": "pymc"},
    "v1/pymc-numba": {"model": "v1", "sampler": "pymc-numba"},
    "v1/pymc/2-chains": {"model": "v1", "sampler": "pymc", "chains": 2},
    "v1/pymc-numba/2-chains": {"model": "v1", "sampler": "pymc-numba", "chains": 2},
    "v1/numpyro/2-chains": {"model": "v1", "sampler": "numpyro", "chains": 2},
    "v1/nutpie": {"model": "v1", "sampler": "nutpie"},
    "v1/numpyro/non-centred": {"model": "v1", "sampler": "numpyro", "parameterization": "noncentered"},
}
SLOW = {"v1/numpyro/non-centred", "thorough", "thorough/500", "query-urn", "query-mixture", "query-mixture/500"}


def _one(name: str) -> dict:
    t0 = time.perf_counter()
    import toolbias_stats as tbs
    sys.path.insert(0, str(ROOT / "analyses"))
    from bayes_experimental import fit_experimental as fit_bayes  # also the experimental variants (issue 38)

    warnings.simplefilter("ignore")
    t1 = time.perf_counter()
    log = tbs.read_study(STUDY).log
    t2, c2 = time.perf_counter(), time.process_time()
    res = fit_bayes(log, rng=20251121, **CONFIGS[name])
    t3, c3 = time.perf_counter(), time.process_time()
    out = {"config": name, "imports_s": t1 - t0, "read_s": t2 - t1, "fit_s": t3 - t2, "fit_cpu_s": c3 - c2,
           "load": os.getloadavg()[0],
           **{k: v for k, v in res.diagnostics.to_dict().items() if k != "thresholds"},
           "model": res.model, "ppc_p": res.ppc.p_value, "ppc_p_rows": res.ppc.p_value_rows,
           "ppc_p_dispersion": res.ppc.p_value_dispersion}
    from scipy.stats import spearmanr

    emp = tbs.selection_bias(log, by="model", n_resamples=0, n_null=0)
    e = {g.keys["model"]: g.delta_pos.mean_over_runs for g in emp.groups if g.delta_pos is not None}
    imp = res.implied[(res.implied["metric"] == "delta_pos") & (res.implied["orderings"] == "logged")]
    imp = imp.set_index("llm")["mean"]
    llms = [m for m in res.llms if m in e]
    out["spearman_delta_pos"] = float(spearmanr([imp[m] for m in llms], [e[m] for m in llms]).statistic)
    out["implied_delta_pos"] = {m: float(imp[m]) for m in llms}
    out["empirical_delta_pos"] = {m: float(e[m]) for m in llms}
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--configs", default="v1,cluster-position,v2", help="comma-separated names (all: "
                    + ",".join(CONFIGS) + ")")
    ap.add_argument("--skip-slow", action="store_true", help="leave out the slow runs (query effects, non-centred)")
    ap.add_argument("--one", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        print("RESULT " + json.dumps(_one(args.one)), flush=True)
        return
    names = [n for n in args.configs.split(",") if n]
    if args.skip_slow:
        names = [n for n in names if n not in SLOW]
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}; "
          f"study: {STUDY.relative_to(ROOT)}")
    rows = []
    for name in names:
        with tempfile.TemporaryDirectory(prefix="tbs-bench-") as cache:
            env = dict(os.environ, PYTENSOR_FLAGS=f"base_compiledir={cache}", NUMBA_CACHE_DIR=cache,
                       TOOLBIAS_STATS_JAX_CACHE=os.path.join(cache, "jax"))
            env.pop("JAX_COMPILATION_CACHE_DIR", None)
            for phase in ("cold", "warm") if name not in SLOW else ("cold",):
                t = time.perf_counter()
                proc = subprocess.run([sys.executable, __file__, "--one", name], env=env, capture_output=True,
                                      text=True, check=False)
                wall = time.perf_counter() - t
                line = [x for x in proc.stdout.splitlines() if x.startswith("RESULT ")]
                if proc.returncode or not line:
                    tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["?"]
                    print(f"| {name} | {phase} | failed: {tail[0]} |", flush=True)
                    break
                r = json.loads(line[0][7:])
                r.update(phase=phase, process_s=wall)
                rows.append(r)
                print(_row(name, phase, r), flush=True)
    print("\n| configuration | cache | fit (s) | process (s) | max R-hat | min bulk ESS | divergences | "
          "PPC p (cluster x position / finest / per-query) | Spearman delta_pos |\n"
          "|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(_row(r["config"], r["phase"], r))
    print("\n" + json.dumps(rows, indent=1))


def _row(name, phase, r):
    ppc = " / ".join("n/a" if p is None or p != p else f"{p:.3f}"
                     for p in (r["ppc_p"], r["ppc_p_rows"], r.get("ppc_p_dispersion")))
    return (f"| {name} | {phase} | {r['fit_s']:.1f} (CPU {r['fit_cpu_s']:.1f}, load {r['load']:.1f}) | "
            f"{r['process_s']:.1f} | {r['max_rhat']:.4f} | "
            f"{r['min_ess_bulk']:.0f} | {r['divergences']} | {ppc} | {r['spearman_delta_pos']:.3f} |")


if __name__ == "__main__":
    main()
