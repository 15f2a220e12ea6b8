"""Benchmark of ``selection_shift`` / ``toolbias-stats shift`` on a 20-file study (issue 8).

A SIMULATED study in the BiasBusters format with the vendored catalog: 4 models x 5 conditions (``base`` and 4
perturbations) = 20 files of 10 clusters x 100 queries x 5 cyclic rotations (100,000 attempts), written to a
temporary folder. Timed: ``read_study``; ``selection_shift(study, between="condition", base="base", by="model")``
with 2,000 bootstrap replicates and 2,000 permutations (16 comparisons, Holm/BH over 80 tests); and the whole CLI
``toolbias-stats shift STUDY --json`` in a fresh process (imports included).

Usage: ``python benchmarks/bench_shift.py [--repeat 3]``
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

import toolbias_stats as tbs
from toolbias_stats.experiments import choice_probabilities, selection_shift

BB = Path(tbs.datasets.path("biasbusters/study.toml")).parent


def write_study(folder: Path, seed: int = 1) -> Path:
    gen = np.random.default_rng(seed)
    c, k, q = 10, 5, 100
    lines = ['name = "SIMULATED benchmark study (20 files)"', 'format = "biasbusters"',
             f'catalog = "{BB / "clusters.json"}"', f'api_meta = "{BB / "api_meta.json"}"', ""]
    for m in range(4):
        base = gen.dirichlet(np.full(k, 0.8), size=c) + 0.02
        for j, cond in enumerate(["base", "p1", "p2", "p3", "p4"]):
            w = base if j == 0 else 0.5 * base + 0.5 * gen.dirichlet(np.full(k, 1.0), size=c)
            _, _, p = choice_probabilities(w, None)                                     # (C, R, J)
            u = gen.random((c, q, k))
            pos = np.minimum((u[..., None] > np.cumsum(p, -1)[:, None]).sum(-1), k - 1)   # (C, Q, R)
            ci, qi, ri = np.meshgrid(np.arange(c), np.arange(q), np.arange(k), indexing="ij")
            api = (pos + ri) % k
            keep = gen.random(pos.shape) > 0.03
            recs = np.stack([(ci * q * k + qi * k + ri + 1)[keep], ci[keep] + 1, api[keep] + 1, pos[keep] + 1], 1)
            name = f"m{m}_{cond}.json"
            (folder / name).write_text(json.dumps(recs.tolist(), separators=(",", ":")))
            lines += ["[[logs]]", f'path = "{name}"', f'model = "SIMULATED-{m}"', f'condition = "{cond}"', ""]
    path = folder / "study.toml"
    path.write_text("\n".join(lines))
    return path


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    warnings.simplefilter("ignore")
    folder = Path(tempfile.mkdtemp(prefix="bench_shift_"))
    try:
        path = write_study(folder)
        t_read, t_shift, t_cli = [], [], []
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            study = tbs.read_study(path)
            counts = study.counts
            t_read.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            res = selection_shift(counts, between="condition", base="base", by="model", n_resamples=2000,
                                  n_permutations=2000, rng=1)
            t_shift.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            subprocess.run([sys.executable, "-m", "toolbias_stats.cli", "shift", str(path), "--json"], check=True,
                           stdout=subprocess.DEVNULL)
            t_cli.append(time.perf_counter() - t0)
        print(f"20 files, {len(study.log):,} attempts, {len(res.groups)} comparisons")
        print(f"read_study + counts:                 best {min(t_read):.2f} s  "
              f"(all: {', '.join(f'{x:.2f}' for x in t_read)})")
        print(f"selection_shift, 2000 reps + perms:  best {min(t_shift):.2f} s  "
              f"(all: {', '.join(f'{x:.2f}' for x in t_shift)})")
        print(f"CLI shift --json, fresh process:     best {min(t_cli):.2f} s  "
              f"(all: {', '.join(f'{x:.2f}' for x in t_cli)})")
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
