"""Benchmark: `toolbias-stats check` on the bundled study with its default intervals (not a test; issue 39).

Usage:  python benchmarks/bench_check.py [--repeat 3]

Whole CLI processes (fresh interpreters, run in turn so that each sees the same load), wall and CPU time (user +
system of the child), target 3 s for `check`:
  `python -c pass`                                                    the bare interpreter
  `bias data/biasbusters/study.toml`                                  2,000 replicates: what `check` builds on
  `check ... --max-delta-api 0.30 --max-delta-pos 0.35 --no-plan`     16 decisions, 2,000 replicates
  `check ... --max-delta-api 0.30 --max-delta-pos 0.35`               the same, with the planner for the one
                                                                      'cannot tell' (GPT-3.5-turbo's delta_API)
  `check ... --max-delta-pos 0.35`                                    no 'cannot tell': the default path
The load average is printed before and after: the machine is shared, so read CPU times and ratios to `bias`.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STUDY = str(ROOT / "data" / "biasbusters" / "study.toml")
CLI = [sys.executable, "-m", "toolbias_stats.cli"]
COMMANDS = {
    "python -c pass": [sys.executable, "-c", "pass"],
    "bias (2,000 replicates)": CLI + ["bias", STUDY],
    "check, 16 decisions, --no-plan": CLI + ["check", STUDY, "--max-delta-api", "0.30", "--max-delta-pos", "0.35",
                                             "--no-plan"],
    "check, 16 decisions, planner for 1": CLI + ["check", STUDY, "--max-delta-api", "0.30", "--max-delta-pos",
                                                 "0.35"],
    "check --max-delta-pos 0.35 (8 decisions)": CLI + ["check", STUDY, "--max-delta-pos", "0.35"],
}


def _timed(cmd):
    before = os.times()
    t = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, cwd=ROOT, check=False,
                          env=dict(os.environ, PYTHONPATH=str(ROOT), PYTHONDONTWRITEBYTECODE="1"))
    wall = time.perf_counter() - t
    after = os.times()
    if done.returncode not in (0, 1):   # check exits 1 when a decision fails: that is its answer, not an error
        raise RuntimeError(done.stderr.decode()[-2000:])
    cpu = (after.children_user - before.children_user) + (after.children_system - before.children_system)
    return wall, cpu


def _load():
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "?"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    print(f"load average before: {_load()}")
    times = {name: [] for name in COMMANDS}
    for _ in range(args.repeat):
        for name, cmd in COMMANDS.items():   # round robin: every command sees the same load
            times[name].append(_timed(cmd))
    for name, runs in times.items():
        walls, cpus = [w for w, _ in runs], [c for _, c in runs]
        print(f"{name:45s} wall {min(walls):6.2f}-{max(walls):6.2f} s (median {statistics.median(walls):6.2f}); "
              f"CPU {min(cpus):6.2f}-{max(cpus):6.2f} s")
    print(f"load average after: {_load()}")


if __name__ == "__main__":
    main()
