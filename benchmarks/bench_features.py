"""Benchmark: feature extraction for the 50 vendored APIs x 1,000 queries, cold and warm embedding cache.

Usage:  python benchmarks/bench_features.py [--repeat 3] [--device cpu]

Times (wall clock, seconds):
  import     importing sentence-transformers / torch (paid once per process, only when encoding)
  cold       tool_features(study) with an empty cache and the shipped vectors switched off: model load +
             encoding 1,000 queries and 98 distinct descriptions + the other features (one fresh cache folder
             per repeat); what a study other than the bundled one costs on its first run
  shipped    the same with the shipped vectors of data/embeddings (the bundled study's first run)
  warm       tool_features(study) with a filled cache and a new Encoder object (nothing encoded,
             the model is not even loaded)
  CLI warm   `toolbias-stats features study.toml --out f.csv` in a fresh process (imports and
             reading the 22 log files of the manifest included)
Every cache lives in a temporary folder that is deleted afterwards.
"""

from __future__ import annotations

import argparse
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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--device", default="cpu")
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    import toolbias_stats as tbs
    from toolbias_stats.features import Encoder, tool_features

    study = tbs.read_study(STUDY)
    n_queries = sum(len(v) for v in study.queries.values())
    t = time.perf_counter()
    import sentence_transformers  # noqa: F401
    import torch
    t_import = time.perf_counter() - t

    import toolbias_stats.features._similarity as similarity

    cold, warm, shipped, encoded = [], [], [], None
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.repeat):   # first run with the shipped vectors (data/embeddings): nothing encoded
            enc = Encoder(cache_dir=Path(tmp) / f"shipped{r}", device=args.device)
            t = time.perf_counter()
            tool_features(study, encoder=enc)
            shipped.append(time.perf_counter() - t)
            assert enc.n_encoded == 0 and enc._model is None
        bundled = similarity._bundled_store
        similarity._bundled_store = lambda name, path: None     # cold: as for a study without shipped vectors
        for r in range(args.repeat):
            cache = Path(tmp) / f"cold{r}"
            enc = Encoder(cache_dir=cache, device=args.device)
            t = time.perf_counter()
            tool_features(study, encoder=enc)
            cold.append(time.perf_counter() - t)
            encoded = enc.n_encoded
        similarity._bundled_store = bundled
        for _ in range(args.repeat):
            enc = Encoder(cache_dir=Path(tmp) / "cold0", device=args.device)
            t = time.perf_counter()
            tool_features(study, encoder=enc)
            warm.append(time.perf_counter() - t)
            assert enc.n_encoded == 0 and enc._model is None
        env = dict(os.environ, TOOLBIAS_CACHE_DIR=str(Path(tmp) / "cli"))
        cmd = [sys.executable, "-m", "toolbias_stats.cli._explain", "features", str(STUDY), "--out",
               str(Path(tmp) / "f.csv")]
        subprocess.run(cmd, check=True, capture_output=True, env=env)          # fills the CLI cache
        cli = []
        for _ in range(args.repeat):
            t = time.perf_counter()
            subprocess.run(cmd, check=True, capture_output=True, env=env)
            cli.append(time.perf_counter() - t)

    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, torch threads {torch.get_num_threads()}, "
          f"device {args.device}, Python {platform.python_version()}, torch {torch.__version__}")
    print(f"workload: {len(study.catalog)} APIs, {n_queries} queries, {encoded} distinct texts encoded when cold")
    print("| step | best (s) | median (s) |\n|---|---|---|")
    print(f"| import sentence-transformers + torch (once per process) | {t_import:.2f} | |")
    for name, v in (("cold cache (model load + encode + features)", cold),
                    ("empty cache, shipped vectors (bundled study's first run)", shipped),
                    ("warm cache (in process)", warm),
                    ("warm cache, CLI `features` in a fresh process", cli)):
        v = sorted(v)
        print(f"| {name} | {v[0]:.3f} | {v[len(v) // 2]:.3f} |")


if __name__ == "__main__":
    main()
