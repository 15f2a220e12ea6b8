"""Benchmark: `toolbias-stats bias` on the bundled study, as a whole CLI process and step by step (not a test).

Usage:  python benchmarks/bench_bias.py [--repeat 3] [--before DIR] [--steps]

Whole CLI processes (fresh interpreters, run in turn so that each sees the same load), wall and CPU time (user +
system of the child):
  `python -c pass`, `python -c "import numpy, pandas, scipy.special"`   bare baselines: the interpreter, and the
                                                                          libraries the command cannot do without
  `bias data/biasbusters/study.toml --n-resamples 0`                       target 1.5 s (issue 23)
  `bias data/biasbusters/study.toml` (2,000 replicates)                  target 2.5 s
With ``--before DIR`` (a copy of the package from before the change, e.g. ``git archive <commit> | tar -x -C DIR``)
both versions run in the same round robin, and their outputs are compared byte for byte.

``--steps`` adds the steps in one warm process (CPU seconds, imports excluded): reading the study (22 files,
105,500 rows), counting, point estimates with the 2,000 null draws, and the 2,000 bootstrap replicates.
The load average is printed before and after: the machine is shared, so read ratios to the bare baselines.
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STUDY = ROOT / "data" / "biasbusters" / "study.toml"


def _timed(cmd, pythonpath):
    before = os.times()
    t = time.perf_counter()
    out = subprocess.run(cmd, capture_output=True, env=dict(os.environ, PYTHONPATH=str(pythonpath),
                                                             PYTHONDONTWRITEBYTECODE="1"), cwd=pythonpath,
                         check=True).stdout
    wall = time.perf_counter() - t
    after = os.times()
    cpu = (after.children_user - before.children_user) + (after.children_system - before.children_system)
    return wall, cpu, out


def _load():
    try:
        return Path("/proc/loadavg").read_text().split()[:3]
    except OSError:
        return ["?"] * 3


def _steps():
    sys.path.insert(0, str(ROOT))        # this checkout, not an installed copy
    import toolbias_stats as tbs

    warnings.simplefilter("ignore")
    tbs.selection_bias(tbs.read_study(STUDY).counts, n_resamples=0, n_null=10, rng=1)   # warm imports

    def cpu(fn):
        t = time.process_time()
        out = fn()
        return time.process_time() - t, out

    read, study = cpu(lambda: tbs.read_study(STUDY, cells=False))
    count, counts = cpu(lambda: study.counts)
    point, _ = cpu(lambda: tbs.selection_bias(counts, n_resamples=0, n_null=2000, rng=20251121))
    boot, _ = cpu(lambda: tbs.selection_bias(counts, n_resamples=2000, n_null=2000, rng=20251121))
    return {"read the study (22 files)": read, "count": count, "point estimates + 2,000 null draws": point,
            "everything with 2,000 replicates": boot}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--before", type=Path, default=None, help="a copy of the package before the change")
    ap.add_argument("--steps", action="store_true")
    args = ap.parse_args()
    py = sys.executable
    cli = [py, "-m", "toolbias_stats.cli", "bias", str(STUDY)]
    commands = [("`python -c pass` (baseline)", [py, "-c", "pass"], ROOT),
                ("`import numpy, pandas, scipy.special` (baseline)",
                 [py, "-c", "import numpy, pandas, scipy.special"], ROOT),
                ("`bias STUDY --n-resamples 0`", cli + ["--n-resamples", "0"], ROOT),
                ("`bias STUDY` (2,000 replicates)", cli, ROOT)]
    if args.before is not None:
        commands += [(f"{name} before", cmd, args.before) for name, cmd, _ in commands[2:]]
    load0 = _load()
    times = {name: [] for name, _, _ in commands}
    outputs = {}
    for _ in range(args.repeat):
        for name, cmd, path in commands:
            wall, cpu, out = _timed(cmd, path)
            times[name].append((wall, cpu))
            outputs[name] = out
    load1 = _load()
    if not args.repeat:
        commands = []
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}; "
          f"load average {' '.join(load0)} before, {' '.join(load1)} after")
    base = min(w for w, _ in times[commands[0][0]]) if commands else 1.0
    print("| command (fresh process) | best wall (s) | median wall (s) | best CPU (s) | best wall / `python -c pass` |")
    print("|---|---|---|---|---|")
    for name, _, _ in commands:
        walls = sorted(w for w, _ in times[name])
        cpus = sorted(c for _, c in times[name])
        print(f"| {name} | {walls[0]:.2f} | {walls[len(walls) // 2]:.2f} | {cpus[0]:.2f} | {walls[0] / base:.1f}x |")
    if args.before is not None and commands:
        for name, _, _ in commands[2:4]:
            same = outputs[name] == outputs[f"{name} before"]
            print(f"output of {name}: {'byte-identical' if same else 'DIFFERENT'} before and after")
    if args.steps:
        print("\n| step (one warm process) | CPU (s) |\n|---|---|")
        for name, sec in _steps().items():
            print(f"| {name} | {sec:.3f} |")
        print(f"load average {' '.join(_load())} after the steps")


if __name__ == "__main__":
    main()
