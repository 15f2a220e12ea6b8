"""Benchmark: ``toolbias-stats validate`` end to end on an OpenAI batch (issue 37; not a test).

Usage:  python benchmarks/bench_validate.py [--requests 100000] [--dir /tmp/toolbias_validate] [--repeat 3]
                                            [--package DIR] [--text] [--out FILE.json]

Writes an OpenAI Batch input/output pair of ``--requests`` requests once (``bench_api_logs.write_openai``'s
synthetic requests, clusters inferred; the batch of ``bench_shapes.py --validate``), then times
``toolbias-stats validate STUDY --json`` (``--text``: the text output too) in a fresh process, ``--repeat`` times.
With ``--package DIR`` (a folder holding another version of ``toolbias_stats``, e.g. ``/work/main``) the two
versions alternate in the same run (the machine is shared: read the ratio) and their outputs are compared byte for
byte. Each line: wall and CPU seconds (user + system of the process), requests per second by each, peak memory and
the load average. The target is >= 50,000 requests/s by the wall clock, process start to exit.

The processes run as an installed package does, with its modules' bytecode cached (``pip install`` compiles it):
``PYTHONDONTWRITEBYTECODE`` (set in the project's sessions) is dropped from their environment and one untimed run
per version writes the ``__pycache__`` folders first. Without bytecode, Python compiles the ~120 modules the command
imports on every start (about 1.5-2.5 s of wall time on this machine); ``--no-bytecode`` measures that instead.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))

_CODE = ("import resource, sys\n"
         "import toolbias_stats.cli.__main__ as m\n"
         "try:\n    rc = m.main(sys.argv[1:])\nfinally:\n"
         "    u = resource.getrusage(resource.RUSAGE_SELF)\n"
         "    print('CPU_S', u.ru_utime + u.ru_stime, 'PEAK_KB', u.ru_maxrss, file=sys.stderr)\n"
         "sys.exit(rc)")


def write_batch(folder: Path, n: int) -> Path:
    """The study (manifest, requests, results) of ``n`` requests, written once into ``folder``."""
    from bench_api_logs import write_openai

    study = folder / "study.toml"
    if not study.exists():
        folder.mkdir(parents=True, exist_ok=True)
        write_openai(folder, n, np.random.default_rng(0))
        study.write_text('name = "validate shape"\n\n[[logs]]\nformat = "openai"\npath = "in.jsonl"\n'
                         'responses = "out.jsonl"\nmodel = "gpt-4o-mini"\n', encoding="utf-8")
    return study


def run_once(study: Path, package: str | None, text: bool, bytecode: bool = True) -> dict:
    """One ``validate`` in a fresh process: wall (process start to exit), CPU, peak memory and the output."""
    args = ["validate", str(study)] + ([] if text else ["--json"])
    path = os.pathsep.join([package or str(ROOT), os.environ.get("PYTHONPATH", "")])
    env = {**os.environ, "CI": "1", "PYTHONPATH": path}
    if bytecode:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
    load = os.getloadavg()[0]
    t = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", _CODE, *args], capture_output=True, env=env, check=False,
                          cwd=study.parent)
    wall = time.perf_counter() - t
    if proc.returncode:
        raise RuntimeError(proc.stderr.decode()[-2000:])
    fields = proc.stderr.decode().split()
    cpu = float(fields[fields.index("CPU_S") + 1])
    peak = int(fields[fields.index("PEAK_KB") + 1]) / 2**20
    return {"wall_s": round(wall, 3), "cpu_s": round(cpu, 3), "peak_gib": round(peak, 3), "load": round(load, 2),
            "output": proc.stdout}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=100_000)
    ap.add_argument("--dir", default="/tmp/toolbias_validate")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--package", default=None, help="another version to alternate with (its outputs compared)")
    ap.add_argument("--text", action="store_true", help="time the text output instead of --json")
    ap.add_argument("--out", default=None, help="append the runs to this JSON file")
    ap.add_argument("--no-bytecode", action="store_true",
                    help="run without cached bytecode (every module compiled at each start)")
    args = ap.parse_args()
    bytecode = not args.no_bytecode
    study = write_batch(Path(args.dir), args.requests)
    n = args.requests
    versions = [("this checkout", None)] + ([(args.package, args.package)] if args.package else [])
    runs, outputs = [], {}
    if bytecode:                            # untimed: writes each version's __pycache__ folders
        for _tag, package in versions:
            run_once(study, package, args.text)
    for _ in range(args.repeat):
        for tag, package in versions:
            r = run_once(study, package, args.text, bytecode)
            outputs.setdefault(tag, set()).add(r.pop("output"))
            r.update(version=tag, requests=n, bytecode=bytecode, requests_per_s=round(n / r["wall_s"]),
                     requests_per_cpu_s=round(n / r["cpu_s"]))
            runs.append(r)
            print(f"{tag:>28}  wall {r['wall_s']:6.2f} s ({r['requests_per_s']:>7,}/s)  CPU {r['cpu_s']:6.2f} s "
                  f"({r['requests_per_cpu_s']:>7,}/s)  peak {r['peak_gib']:.2f} GiB  load {r['load']:.2f}",
                  flush=True)
    for tag, outs in outputs.items():
        print(f"{tag}: {len(outs)} distinct output(s) over {args.repeat} run(s)")
    if args.package:
        same = outputs[versions[0][0]] == outputs[versions[1][0]]
        print("outputs byte-identical between the versions:", same)
    for tag, _ in versions:
        mine = [r for r in runs if r["version"] == tag]
        print(f"{tag}: median wall {np.median([r['wall_s'] for r in mine]):.2f} s, "
              f"median CPU {np.median([r['cpu_s'] for r in mine]):.2f} s")
    if args.out:
        path = Path(args.out)
        old = json.loads(path.read_text(encoding="utf-8")) if path.exists() else []
        path.write_text(json.dumps(old + runs, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
