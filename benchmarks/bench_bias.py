"""Benchmark: wall time of `toolbias-stats bias` on the bundled study (not a test).

Usage:  python benchmarks/bench_bias.py [--repeat 5]

Times, in one warm process (imports excluded, as for a user calling the API repeatedly):
  read      read_study(data/biasbusters/study.toml)  (22 files, 105,500 rows)
  point     selection_bias(..., n_resamples=0, n_null=0)   point estimates only
  null      selection_bias(..., n_resamples=0, n_null=2000) + uniform-chooser p-values
  bootstrap selection_bias(..., n_resamples=2000, n_null=2000) everything the CLI does by default
and the whole CLI command in a fresh process (`toolbias-stats bias ... --json`), imports included.
"""

from __future__ import annotations

import argparse
import platform
import subprocess
import sys
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STUDY = ROOT / "data" / "biasbusters" / "study.toml"


def _best(fn, repeat):
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times), sorted(times)[len(times) // 2]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    import os

    import toolbias_stats as tbs

    warnings.simplefilter("ignore")
    study = tbs.read_study(STUDY)
    rows = {
        "read": _best(lambda: tbs.read_study(STUDY), args.repeat),
        "point": _best(lambda: tbs.selection_bias(study.log, n_resamples=0, n_null=0), args.repeat),
        "null": _best(lambda: tbs.selection_bias(study.log, n_resamples=0, n_null=2000, rng=1), args.repeat),
        "bootstrap": _best(lambda: tbs.selection_bias(study.log, n_resamples=2000, n_null=2000, rng=1), args.repeat),
    }
    cli = _best(lambda: subprocess.run([sys.executable, "-m", "toolbias_stats.cli", "bias", str(STUDY), "--json"],
                                       check=True, capture_output=True), max(1, args.repeat // 2))
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}")
    print("| step | best (s) | median (s) |\n|---|---|---|")
    for k, (best, med) in rows.items():
        print(f"| {k} | {best:.3f} | {med:.3f} |")
    print(f"| CLI `bias --json` (fresh process) | {cli[0]:.2f} | {cli[1]:.2f} |")
    print(f"bootstrap (2,000 replicates) adds {rows['bootstrap'][0] - rows['null'][0]:.3f} s to the point estimates")


if __name__ == "__main__":
    main()
