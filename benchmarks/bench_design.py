"""Benchmark of study design (issues 12, 23): ``variance_components``, ``plan_study`` and ``toolbias-stats plan``.

On the vendored BiasBusters study (7 LLMs x 3 runs x 10 clusters x 100 queries x 5 rotations, plus one
transcript model): ``variance_components(study.log)`` with 200 query-bootstrap replicates; ``plan_study`` from those
components with a CI half-width target of 0.005 for delta_API and delta_pos (grid of 12 x 4 designs per model and
the exact search for the cheapest design); and the whole CLI ``toolbias-stats plan STUDY --target-width 0.005
--json`` in a fresh process (imports and reading included).

Each is timed twice in the same run: with the current code and with the former code paths (``--no-baseline``
skips them): the plan engine and search kept verbatim in tests/design/test_plan_engine.py, and the components'
bootstrap on explicit replicate copies (the grouping of the pilot's arrays and the interval of each component are
the current ones in both). Both must give the same numbers (up to floating-point rounding); the benchmark checks
it. Wall and CPU seconds (CPU: this process and its BLAS threads) and the load average are printed.

Usage: ``python benchmarks/bench_design.py [--repeat 3] [--no-baseline]``
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import resource
import subprocess
import sys
import time
import warnings
from pathlib import Path

import numpy as np

import toolbias_stats as tbs

ROOT = Path(__file__).resolve().parents[1]
REFERENCE = ROOT / "tests" / "design" / "test_plan_engine.py"
CLI_ARGS = ["plan", None, "--target-width", "0.005", "--json"]


def _reference():
    spec = importlib.util.spec_from_file_location("_plan_reference", REFERENCE)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@contextlib.contextmanager
def former_code():
    """The former plan engine and search, and the former components bootstrap (explicit replicate copies)."""
    from toolbias_stats.design import _components, _plan

    ref = _reference()
    saved = (_plan._Engine, _plan._cheapest, _components._bootstrap_mean_squares)
    _plan._Engine, _plan._cheapest = ref._ReferenceEngine, ref._reference_cheapest
    _components._bootstrap_mean_squares = ref._reference_bootstrap_mean_squares
    try:
        yield
    finally:
        _plan._Engine, _plan._cheapest, _components._bootstrap_mean_squares = saved


def _best(fn, repeat):
    walls, cpus, out = [], [], None
    for _ in range(repeat):
        c, t = time.process_time(), time.perf_counter()
        out = fn()
        walls.append(time.perf_counter() - t)
        cpus.append(time.process_time() - c)
    return min(walls), min(cpus), out


def _cli(path, former):
    here = str(Path(__file__).resolve())
    code = ("import sys; sys.argv = ['toolbias-stats'] + sys.argv[1:]\n"
            + (f"import runpy; bench = runpy.run_path({here!r}); cm = bench['former_code'](); cm.__enter__()\n"
               if former else "")
            + "from toolbias_stats.cli._commands import main; sys.exit(main())")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    res = subprocess.run([sys.executable, "-c", code, *[path if a is None else a for a in CLI_ARGS]], check=True,
                         capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), json.loads(res.stdout)


# the components' intervals changed on purpose (modified large-sample intervals, docs/design.md): not compared
CHANGED = {"ci_low", "ci_high"}


def _max_rel(a, b, worst=0.0):
    """Largest relative difference of two JSON-like objects (their structure and non-float values must agree)."""
    if isinstance(a, dict):
        assert a.keys() == b.keys()
        return max([worst] + [_max_rel(a[k], b[k]) for k in a if k not in CHANGED])
    if isinstance(a, list):
        assert len(a) == len(b)
        return max([worst] + [_max_rel(x, y) for x, y in zip(a, b)])
    if isinstance(a, float) and isinstance(b, float):
        return abs(a - b) / max(abs(a), 1e-300)
    assert a == b, (a, b)
    return worst


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--no-baseline", action="store_true", help="time only the current code")
    args = ap.parse_args(argv)
    path = str(tbs.datasets.path("biasbusters/study.toml"))
    print(f"load average at start: {os.getloadavg()[0]:.2f}")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        study = tbs.read_study(path)

        def vc():
            return tbs.variance_components(study.log, n_resamples=200, rng=1)

        def plan(comps):
            return tbs.plan_study(comps, target=0.005, metrics=["delta_api", "delta_pos"], rng=1)

        rows = []
        t_vc, c_vc, comps = _best(vc, args.repeat)
        t_plan, c_plan, new_plan = _best(lambda: plan(comps), args.repeat)
        t_cli, c_cli, new_json = _cli(path, False)
        rows.append(("current", t_vc, c_vc, t_plan, c_plan, t_cli, c_cli))
        if not args.no_baseline:
            with former_code():
                t_vc0, c_vc0, comps0 = _best(vc, max(1, args.repeat - 2))
                t_plan0, c_plan0, old_plan = _best(lambda: plan(comps), max(1, args.repeat - 2))
            t_cli0, c_cli0, old_json = _cli(path, True)
            rows.append(("former", t_vc0, c_vc0, t_plan0, c_plan0, t_cli0, c_cli0))
            diff = max(_max_rel(comps0.to_dict(), comps.to_dict()), _max_rel(old_plan.to_dict(), new_plan.to_dict()),
                       _max_rel(old_json, new_json))
    print(f"load average at end: {os.getloadavg()[0]:.2f}")
    print("code     variance_components (8 models, 3 metrics, 200 replicates)  plan_study (2 metrics, 48 designs + "
          "cheapest)  CLI plan --json (fresh process)   [wall s / CPU s]")
    for name, *t in rows:
        print(f"{name:8s} {t[0]:6.2f} / {t[1]:5.2f}{'':45s}{t[2]:6.2f} / {t[3]:5.2f}{'':22s}{t[4]:6.2f} / {t[5]:5.2f}")
    if not args.no_baseline:
        print(f"largest relative difference former vs current (components, plan, CLI JSON): {diff:.1e}")
        if not np.isfinite(diff) or diff > 1e-9:
            raise SystemExit("the current code does not give the former numbers")


if __name__ == "__main__":
    main()
