"""Benchmark of study design (issue 12): ``variance_components``, ``plan_study`` and ``toolbias-stats plan``.

On the vendored BiasBusters study (7 LLMs x 3 runs x 10 clusters x 100 queries x 5 rotations, plus one
transcript model): ``variance_components(study.log)`` with 200 query-bootstrap replicates; ``plan_study`` from those
components with a CI half-width target of 0.005 for delta_API and delta_pos (grid of 12 x 4 designs per model and
the exact search for the cheapest design); and the whole CLI ``toolbias-stats plan STUDY --target-width 0.005
--json`` in a fresh process (imports and reading included).

Usage: ``python benchmarks/bench_design.py [--repeat 3]``
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
import warnings

import toolbias_stats as tbs


def _best(fn, repeat):
    times = []
    out = None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return min(times), out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    path = tbs.datasets.path("biasbusters/study.toml")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        study = tbs.read_study(path)
        t_vc, vc = _best(lambda: tbs.variance_components(study.log, n_resamples=200, rng=1), args.repeat)
        t_plan, _ = _best(lambda: tbs.plan_study(vc, target=0.005, metrics=["delta_api", "delta_pos"], rng=1),
                          args.repeat)
    t_cli, _ = _best(lambda: subprocess.run([sys.executable, "-m", "toolbias_stats.cli", "plan", str(path),
                                             "--target-width", "0.005", "--json"], check=True,
                                            capture_output=True), max(1, args.repeat - 2))
    print(f"variance_components (8 models, 3 metrics, 200 bootstrap replicates): {t_vc:.2f} s")
    print(f"plan_study (8 models, 2 metrics, 48-design grid + cheapest-design search): {t_plan:.2f} s")
    print(f"toolbias-stats plan --target-width 0.005 --json (fresh process): {t_cli:.2f} s")


if __name__ == "__main__":
    main()
