"""Benchmark: cost by *shape* at a fixed number of rows (not a test).

Usage:  python benchmarks/bench_shapes.py [--rows 1e6] [--shapes base clusters2000 design3 k40 files240]
                                          [--bootstrap 0 2000] [--dir /tmp/toolbias_shapes] [--keep]
                                          [--validate 100000] [--package DIR] [--out FILE.json]

Each shape is a synthetic `table` log of about ``--rows`` rows with its own catalog and manifest, timed through
the CLI in a fresh process (``toolbias-stats bias STUDY --n-resamples N --json``, as ``bench_scale.py`` does), with
the peak resident memory. The shapes (issue 37's table):

``base``          7 models x 3 runs x 10 clusters (K = 5) x Q queries x 5 rotations
``clusters2000``  the same rows spread over 2,000 clusters of K = 5
``design3``       ``base`` plus 3 declared design columns of 3 levels each (189 groups)
``k40``           10 clusters of K = 40 tools (40 rotations)
``files240``      240 Parquet files, one model per file (240 groups; the model comes from the manifest)

Each time is printed with its ratio to ``base`` at the same bootstrap setting; the target is <= 1.5x. ``--out``
appends every run (wall and CPU seconds, peak memory, load, the version timed) to a JSON file; this round's runs,
this checkout and main (``--package /work/main``) under the same load, are in ``benchmarks/bench_shapes.json``.

``--validate N`` (issue 37) also times ``toolbias-stats validate STUDY --json`` end to end on an OpenAI Batch
input/output pair of N requests (``bench_api_logs.write_openai``'s synthetic requests, clusters inferred), with
the requests per second by the wall clock and per CPU second; the target is >= 50,000 requests/s.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_scale import run_cli  # the fresh-process CLI timer shared with the scale benchmark

SHAPES = {  # name: (clusters, K, design columns, files, models)
    "base": (10, 5, 0, 1, 7),
    "clusters2000": (2000, 5, 0, 1, 7),
    "design3": (10, 5, 3, 1, 7),
    "k40": (10, 40, 0, 1, 7),
    "files240": (10, 5, 0, 240, 240),
}
RUNS = 3


def _block(rng, tools, n_clusters, k, q, extra):
    """One (model, run) block: every cluster x query x rotation once, a position-biased chooser, 3% no_call."""
    import pyarrow as pa

    n = n_clusters * q * k
    c_idx = np.repeat(np.arange(n_clusters), q * k)
    q_idx = np.tile(np.repeat(np.arange(1, q + 1), k), n_clusters)
    rot = np.tile(np.arange(1, k + 1), n_clusters * q)
    shown = (np.arange(k)[None, :] + rot[:, None] - 1) % k
    pick = np.where(rng.random(n) < 0.3, 0, rng.integers(0, k, n))
    chosen = tools[c_idx, shown[np.arange(n), pick]]
    status = np.where(rng.random(n) < 0.03, "no_call", "ok")
    cols = {"cluster_id": pa.array(np.char.add("c", c_idx.astype(str))), "query_id": q_idx, "rotation": rot,
            "chosen_tool": pa.array(np.where(status == "ok", chosen, None), type=pa.string()),
            "status": pa.array(status)}
    for e in range(extra):
        cols[f"design{e}"] = rng.integers(0, 3, n)
    return cols


def generate(folder: Path, shape: str, n_rows: int, seed: int = 1) -> Path:
    """Write the catalog, log file(s) and manifest of one shape; returns the manifest's path."""
    import pandas as pd
    import pyarrow as pa
    import pyarrow.parquet as pq

    n_clusters, k, extra, files, models = SHAPES[shape]
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    tools = np.array([[f"t{c}_{j}" for j in range(k)] for c in range(n_clusters)])
    pd.DataFrame({"tool_id": tools.ravel(), "cluster_id": np.repeat([f"c{c}" for c in range(n_clusters)], k)}
                 ).to_csv(folder / "catalog.csv", index=False)
    q = max(1, round(n_rows / (models * RUNS * n_clusters * k)))
    design = f"design = [{', '.join(repr(f'design{e}') for e in range(extra))}]\n" if extra else ""
    text = f'name = "shape {shape}"\nformat = "table"\ncatalog = "catalog.csv"\n{design}'
    for m in range(models):
        tables = []
        for run in range(1, RUNS + 1):
            cols = _block(rng, tools, n_clusters, k, q, extra)
            n = len(cols["query_id"])
            tables.append(pa.table({**({} if files > 1 else {"model": pa.array(np.full(n, f"m{m}"))}),
                                    "run": np.full(n, run), **cols}))
        name = f"log_{m}.parquet" if files > 1 else "log.parquet"
        if files > 1 or m == 0:
            writer = pq.ParquetWriter(folder / name, tables[0].schema)
            if files > 1:
                text += f'\n[[logs]]\npath = "{name}"\nmodel = "m{m}"\n'
        for t in tables:
            writer.write_table(t)
        if files > 1 or m == models - 1:
            writer.close()
    if files == 1:
        text += '\n[[logs]]\npath = "log.parquet"\n'
    (folder / "study.toml").write_text(text, encoding="utf-8")
    return folder / "study.toml"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=float, default=1e6)
    ap.add_argument("--shapes", nargs="*", default=list(SHAPES), choices=list(SHAPES),
                    help="the bias shapes to time (none: `--shapes` alone, e.g. with --validate)")
    ap.add_argument("--bootstrap", type=int, nargs="+", default=[0, 2000])
    ap.add_argument("--engine", default="duckdb")
    ap.add_argument("--dir", default="/tmp/toolbias_shapes")
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--package", default=None,
                    help="a folder holding another version of toolbias_stats (e.g. `git archive <commit> "
                         "toolbias_stats | tar -x -C DIR`), timed instead of this checkout")
    ap.add_argument("--save", default=None, help="write each run's JSON output to SAVE/<shape>_<bootstrap>.json "
                                                 "(to compare two versions byte for byte)")
    ap.add_argument("--validate", type=int, default=0, metavar="N",
                    help="also time `validate` end to end on an OpenAI batch of N requests (e.g. 100000)")
    ap.add_argument("--out", default=None, help="also write the timings to this JSON file (e.g. "
                                                "benchmarks/bench_shapes.json); runs already there are kept")
    args = ap.parse_args()
    out = Path(args.dir)
    print(f"machine: {platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}; "
          f"engine {args.engine}; ~{int(args.rows):,} rows per shape")
    base: dict[int, float] = {}
    for shape in (["base"] if args.shapes and "base" not in args.shapes else []) + args.shapes:
        study = out / shape / "study.toml"
        if not study.exists():
            t = time.perf_counter()
            study = generate(out / shape, shape, int(args.rows))
            print(f"generated {shape} in {time.perf_counter() - t:.1f} s", flush=True)
        for b in args.bootstrap:
            load = os.getloadavg()[0]
            try:
                wall, peak, res, cpu = run_cli(study, b, args.engine, args.package)
            except RuntimeError as exc:
                why = (str(exc).strip().splitlines() or ["no message (killed, e.g. out of memory?)"])[-1]
                print(f"{shape:>13}  bootstrap {b:>4}  FAILED: {why[:200]}", flush=True)
                continue
            if args.save:
                Path(args.save).mkdir(parents=True, exist_ok=True)
                (Path(args.save) / f"{shape}_{b}.json").write_text(res["__text__"], encoding="utf-8")
            rows = sum(g["rows"]["total"] for g in res["groups"])
            base.setdefault(b, wall) if shape == "base" else None
            _record(args, shape=shape, bootstrap=b, rows=rows, groups=len(res["groups"]), wall_s=round(wall, 2),
                    cpu_s=round(cpu, 2), peak_gib=round(peak, 2), load=round(load, 2),
                    ratio_to_base=round(wall / base[b], 2) if b in base else None)
            ratio = f"{wall / base[b]:5.1f}x base" if b in base else ""
            print(f"{shape:>13}  bootstrap {b:>4}  rows {rows:>10,}  groups {len(res['groups']):>4}  wall {wall:7.2f} s"
                  f"  CPU {cpu:7.2f} s  peak {peak:5.2f} GiB  load {load:.2f}  {ratio}", flush=True)
    if args.validate:
        _record(args, **validate_shape(out / "validate", args.validate, args.package))
    if not args.keep:
        shutil.rmtree(out, ignore_errors=True)


def _record(args, **run) -> None:
    """Append one run to ``--out`` (with the version timed and the machine)."""
    if not args.out:
        return
    import json

    path = Path(args.out)
    runs = json.loads(path.read_text(encoding="utf-8")) if path.exists() else []
    runs.append({"version": args.package or "this checkout", "engine": args.engine, "rows_target": int(args.rows),
                 "cpus": os.cpu_count(), **run})
    path.write_text(json.dumps(runs, indent=1) + "\n", encoding="utf-8")


def validate_shape(folder: Path, n: int, package: str | None = None) -> dict:
    """Time ``validate`` on an OpenAI batch of ``n`` requests (written once into ``folder``)."""
    from bench_validate import write_batch  # the batch study of bench_validate.py, the same files

    study = write_batch(folder, n)
    load = os.getloadavg()[0]
    wall, peak, res, cpu = run_cli(study, 0, "", package, command=["validate", str(study), "--json"])
    print(f"{'validate':>13}  requests {res['rows']:>10,}  wall {wall:7.2f} s ({res['rows'] / wall:,.0f}/s)  "
          f"CPU {cpu:7.2f} s ({res['rows'] / cpu:,.0f}/s)  peak {peak:5.2f} GiB  load {load:.2f}", flush=True)
    return {"shape": "validate", "requests": res["rows"], "wall_s": round(wall, 2), "cpu_s": round(cpu, 2),
            "requests_per_s": round(res["rows"] / wall), "requests_per_cpu_s": round(res["rows"] / cpu),
            "peak_gib": round(peak, 2), "load": round(load, 2)}


if __name__ == "__main__":
    main()
