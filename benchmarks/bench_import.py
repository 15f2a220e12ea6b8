"""Benchmark of start-up (issue 23): ``import toolbias_stats``, ``toolbias-stats --version`` / ``--help`` and the
``bias`` command on the bundled study, each in fresh processes, as a ratio to a bare interpreter in the same run.

Baselines: ``python -c pass`` (the interpreter) and ``python -c "import numpy"`` / ``"import pandas"`` (what a
heavy import costs on this machine at this load). Targets: import and --version/--help <= 0.3 s; ``bias STUDY
--n-resamples 0`` <= 1.5 s; with 2,000 replicates <= 2.5 s. The load average (``os.getloadavg``) is printed with the
table: the machine is shared, so read the ratios.

Usage: ``python benchmarks/bench_import.py [--repeat 5] [--skip-bias]``
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STUDY = ROOT / "data" / "biasbusters" / "study.toml"


def _once(cmd):
    t = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--skip-bias", action="store_true", help="only the import / --version / --help rows")
    args = ap.parse_args(argv)
    py = sys.executable
    cli = [py, "-m", "toolbias_stats.cli"]
    rows = [("`python -c pass` (baseline)", [py, "-c", "pass"], None),
            ('`python -c "import numpy"` (baseline)', [py, "-c", "import numpy"], None),
            ('`python -c "import pandas"` (baseline)', [py, "-c", "import pandas"], None),
            ("`import toolbias_stats`", [py, "-c", "import toolbias_stats"], 0.3),
            ("`toolbias-stats --version`", cli + ["--version"], 0.3),
            ("`toolbias-stats --help`", cli + ["--help"], 0.3)]
    if not args.skip_bias:
        rows += [("`bias STUDY --n-resamples 0`", cli + ["bias", str(STUDY), "--n-resamples", "0"], 1.5),
                 ("`bias STUDY` (2,000 replicates)", cli + ["bias", str(STUDY)], 2.5)]
    load = os.getloadavg()
    times = {label: [] for label, _, _ in rows}
    for i in range(args.repeat):   # round robin: every command sees the same load over the run
        for label, cmd, target in rows:
            if target is None or target < 1 or i < max(1, args.repeat // 2):
                times[label].append(_once(cmd))
    out = []
    for label, _, target in rows:
        t = sorted(times[label])
        out.append((label, t[0], t[len(t) // 2], target))
    base = out[0][1]
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}; "
          f"load average {load[0]:.1f} before, {os.getloadavg()[0]:.1f} after")
    print("| command (fresh process) | best (s) | median (s) | best / `python -c pass` | target (s) | met |")
    print("|---|---|---|---|---|---|")
    for label, best, med, target in out:
        met = "" if target is None else ("yes" if best <= target else "no")
        print(f"| {label} | {best:.3f} | {med:.3f} | {best / base:.1f}x | {target or ''} | {met} |")


if __name__ == "__main__":
    main()
