"""Benchmark: `toolbias-stats bias` on 1M, 10M and 100M-row Parquet logs (not a test).

Usage:  python benchmarks/bench_scale.py [--rows 1e6 1e7 1e8] [--dir /tmp/toolbias_scale] [--engine duckdb]
                                         [--bootstrap 0 2000] [--keep] [--parts 8 --attempt] [--design 3]
                                         [--before DIR --repeat 3] [--by model,design0]

Generates, in chunks (never the whole log in memory), a synthetic log in the table schema: 7 models x 3 runs x
10 clusters (the bundled BiasBusters catalog, K = 5) x Q queries x 5 cyclic rotations, Q = rows / 1,050; each
attempt chooses with probability proportional to tool preference x position preference (both differ by model),
3% `no_call` and 0.5% `unknown_tool` rows. The files are written to --dir (deleted afterwards unless --keep;
they are never part of the repository). Each size is timed through the CLI in a fresh process
(`toolbias-stats bias STUDY --n-resamples N --json`, imports included), with the peak resident memory of that
process (its own and its children's). The fitted exponent b of time ~ rows^b is printed for each setting.
``--before DIR`` also runs the package found in DIR (e.g. ``git archive`` of an older commit) on the same files,
alternating old and new ``--repeat`` times, and says whether their JSON outputs are byte-identical. ``--by`` is
passed to `bias` (e.g. ``--design 3 --by model,design0``: grouping by a design column, issue 37).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
CATALOG = ROOT / "data" / "biasbusters" / "clusters.json"
MODELS = 7
RUNS = 3
ROTATIONS = 5


def generate(path: Path, n_rows: int, seed: int = 1, parts: int = 0, attempt: bool = False,
             design: int = 0) -> int:
    """Write a synthetic Parquet log of about ``n_rows`` rows, one (model, run) at a time.

    ``parts`` > 0: ``path`` is a folder of that many Parquet files (every (model, run) block is split over all
    of them, so queries span files); ``attempt``: a column ``attempt`` with a distinct id per row (issue 27);
    ``design`` > 0: that many integer columns ``design0``, ``design1``, ... of 3 levels, random per row (as
    ``bench_shapes.py``'s ``design3``), drawn from their own stream so the other columns are the base file's."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    import toolbias_stats as tbs

    catalog = tbs.read_biasbusters_catalog(CATALOG)
    clusters = catalog.clusters
    k = ROTATIONS
    q = max(1, round(n_rows / (MODELS * RUNS * len(clusters) * k)))
    rng = np.random.default_rng(seed)
    design_rng = np.random.default_rng([seed, 37])
    tools = np.array([catalog.tools(c) for c in clusters])                      # (C, K)
    written = 0
    schema = pa.schema([("model", pa.string()), ("run", pa.int64()), ("cluster_id", pa.string()),
                        ("query_id", pa.int64()), ("rotation", pa.int64()), ("chosen_tool", pa.string()),
                        ("status", pa.string())] + ([("attempt", pa.int64())] if attempt else [])
                       + [(f"design{e}", pa.int64()) for e in range(design)])
    if parts:
        path.mkdir(parents=True, exist_ok=True)
        writers = [pq.ParquetWriter(path / f"part-{i}.parquet", schema, compression="zstd") for i in range(parts)]
    else:
        writers = [pq.ParquetWriter(path, schema, compression="zstd")]
    try:
        for m in range(MODELS):
            tool_pref = rng.dirichlet(np.full(k, 2.0), size=len(clusters))       # (C, K) by catalog index
            pos_pref = np.exp(-np.arange(k) * rng.uniform(0.05, 0.5))           # (K,) by position
            for run in range(1, RUNS + 1):
                # every cluster x query x rotation once
                c_idx = np.repeat(np.arange(len(clusters)), q * k)
                q_idx = np.tile(np.repeat(np.arange(1, q + 1), k), len(clusters))
                rot = np.tile(np.arange(1, k + 1), len(clusters) * q)
                # under rotation r, position p (0-based) shows catalog tool (p + r - 1) mod K
                shown = (np.arange(k)[None, :] + rot[:, None] - 1) % k                # (N, K) catalog index
                w = tool_pref[c_idx[:, None], shown] * pos_pref[None, :]
                u = rng.random(len(rot))[:, None]
                pick = (np.cumsum(w / w.sum(1, keepdims=True), 1) < u).sum(1).clip(max=k - 1)
                chosen = tools[c_idx, shown[np.arange(len(rot)), pick]]
                v = rng.random(len(rot))
                status = np.where(v < 0.03, "no_call", np.where(v < 0.035, "unknown_tool", "ok"))
                chosen = np.where(status == "ok", chosen, None)
                cols = {"model": pa.array(np.full(len(rot), f"model_{m + 1}")), "run": np.full(len(rot), run),
                        "cluster_id": pa.array(np.asarray(clusters)[c_idx]), "query_id": q_idx,
                        "rotation": rot, "chosen_tool": pa.array(chosen, type=pa.string()),
                        "status": pa.array(status)}
                if attempt:
                    cols["attempt"] = written + 1 + np.arange(len(rot))
                for e in range(design):
                    cols[f"design{e}"] = design_rng.integers(0, 3, len(rot))
                table = pa.table(cols, schema=schema)
                bounds = np.linspace(0, len(rot), len(writers) + 1).astype(int)
                for wr, a, b in zip(writers, bounds[:-1], bounds[1:]):
                    wr.write_table(table.slice(a, b - a), row_group_size=1_000_000)
                written += len(rot)
    finally:
        for wr in writers:
            wr.close()
    return written


def manifest(path: Path, log: Path, design: int = 0) -> Path:
    declared = f"design = [{', '.join(repr(f'design{e}') for e in range(design))}]\n" if design else ""
    path.write_text(f'name = "synthetic scale benchmark"\nformat = "table"\ncatalog = "{CATALOG}"\n{declared}\n'
                    f'[[logs]]\npath = "{log}"\n', encoding="utf-8")
    return path


def _cpu_of(stderr: str) -> float:
    return next(float(line.split()[1]) for line in stderr.splitlines() if line.startswith("CPU_S"))


def run_cli(study: Path, bootstrap: int, engine: str, package: str | None = None,
            command: list | None = None, by: str | None = None) -> tuple[float, float, dict, float]:
    """Wall time (s), peak RSS (GiB), the JSON output and the CPU time (s, all threads) of one CLI run in a fresh
    process (``package``: a folder holding another version of ``toolbias_stats``, put first on the path;
    ``command``: the CLI arguments, ``bias STUDY --n-resamples N --json --engine E`` by default)."""
    cli_args = command or (["bias", str(study), "--n-resamples", str(bootstrap), "--json", "--engine", engine]
                           + (["--by", by] if by else []))
    code = ("import resource, sys\n"
            "import toolbias_stats.cli.__main__ as m\n"
            "try:\n    rc = m.main(sys.argv[1:])\nfinally:\n"
            "    r = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
            "    try:\n"  # VmHWM is this process's own peak: ru_maxrss keeps the parent's from before the exec
            "        r = int(next(x for x in open('/proc/self/status') if x.startswith('VmHWM')).split()[1])\n"
            "    except (OSError, StopIteration):\n        pass\n"
            "    c = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss\n"
            "    print('PEAK_RSS_KB', max(r, c), file=sys.stderr)\n"
            "    u = resource.getrusage(resource.RUSAGE_SELF)\n"
            "    print('CPU_S', u.ru_utime + u.ru_stime, file=sys.stderr)\n"
            "    print('PACKAGE', m.__file__, file=sys.stderr)\n"
            "sys.exit(rc)")
    t = time.perf_counter()
    # run from the study's folder (not the checkout: `python -c` puts the working directory first on the path)
    path = os.pathsep.join([package or str(ROOT), os.environ.get("PYTHONPATH", "")])
    proc = subprocess.run([sys.executable, "-c", code, *cli_args], capture_output=True, text=True,
                          env={**os.environ, "CI": "1", "PYTHONPATH": path}, check=False, cwd=study.parent)
    wall = time.perf_counter() - t
    if proc.returncode:
        raise RuntimeError(proc.stderr[-2000:])
    peak = next(int(line.split()[1]) for line in proc.stderr.splitlines() if line.startswith("PEAK_RSS_KB"))
    try:
        out = json.loads(proc.stdout)
    except json.JSONDecodeError:
        raise RuntimeError("not JSON: " + proc.stdout[:300]) from None
    out["__text__"] = proc.stdout
    out["__package__"] = next(line.split()[1] for line in proc.stderr.splitlines() if line.startswith("PACKAGE"))
    return wall, peak / 2**20, out, _cpu_of(proc.stderr)


def compare_versions(study: Path, bootstrap: int, engine: str, before: str, repeat: int, by: str | None = None
                     ) -> None:
    """Old (``before``) and new alternated ``repeat`` times on one file: wall, CPU, peak, load; same output?"""
    texts = {}
    for i in range(repeat):
        for tag, package in (("before", before), ("after", None)):
            load = os.getloadavg()[0]
            wall, peak, res, cpu = run_cli(study, bootstrap, engine, package, by=by)
            texts.setdefault(tag, res["__text__"])
            print(f"    {tag:>6} #{i + 1}: wall {wall:7.2f} s  CPU {cpu:7.2f} s  peak RSS {peak:5.2f} GiB  "
                  f"load {load:.2f} -> {os.getloadavg()[0]:.2f}  ({res['__package__']})", flush=True)
    print(f"    JSON output byte-identical: {texts['before'] == texts['after']}", flush=True)


def run_duckdb_baseline(log: Path) -> tuple[float, float]:
    """Wall time (s) of DuckDB's bare counting query over the same file(s), in a fresh process (the counts stay
    in DuckDB: fetching millions of groups into Python would time the transfer, not the count)."""
    src = f"{log}/*.parquet" if log.is_dir() else str(log)
    code = ("import duckdb\n"
            "duckdb.sql('SET enable_progress_bar = false')\n"
            f"duckdb.sql(\"CREATE TABLE c AS SELECT model, run, cluster_id, query_id, status, chosen_tool, count(*) "
            f"FROM read_parquet('{src}') GROUP BY ALL\")\n"
            "duckdb.sql('SELECT count(*) FROM c').fetchall()\n"
            "import resource, sys\n"
            "u = resource.getrusage(resource.RUSAGE_SELF)\n"
            "print('CPU_S', u.ru_utime + u.ru_stime, file=sys.stderr)")
    t = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    return time.perf_counter() - t, _cpu_of(proc.stderr)


def _max_difference(a, b) -> float:
    """Largest absolute difference between the numbers of two JSON structures (inf if they differ otherwise)."""
    if isinstance(a, dict):
        return max([_max_difference(a[k], b[k]) for k in a] + [0.0]) if a.keys() == b.keys() else float("inf")
    if isinstance(a, list):
        return max([_max_difference(x, y) for x, y in zip(a, b)] + [0.0]) if len(a) == len(b) else float("inf")
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
        return abs(a - b)
    return 0.0 if a == b else float("inf")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=float, nargs="+", default=[1e6, 1e7, 1e8])
    ap.add_argument("--bootstrap", type=int, nargs="+", default=[0, 2000])
    ap.add_argument("--engine", default="duckdb")
    ap.add_argument("--compare", default=None, metavar="ENGINE",
                    help="also run ENGINE (e.g. dask) on each log and report the largest difference from --engine")
    ap.add_argument("--dir", default="/tmp/toolbias_scale")
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--parts", type=int, default=0,
                    help="write each log as a folder of this many Parquet files, read as a folder (issue 27)")
    ap.add_argument("--attempt", action="store_true", help="add a column `attempt` with a distinct id per row")
    ap.add_argument("--design", type=int, default=0, metavar="N",
                    help="add N declared design columns of 3 levels, random per row (issue 37: `--design 3`)")
    ap.add_argument("--skip-bootstrap-above", type=float, default=1e8,
                    help="do not run the bootstrap setting above this many rows (default: run all)")
    ap.add_argument("--before", default=None, metavar="DIR",
                    help="a folder holding an older toolbias_stats: run both, alternated, and compare outputs")
    ap.add_argument("--repeat", type=int, default=2, help="runs of each version with --before")
    ap.add_argument("--by", default=None, help="`bias --by` (default: the command's, model)")
    args = ap.parse_args()
    out_dir = Path(args.dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    print(f"machine: {platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}; "
          f"engine {args.engine}")
    results = []
    for n in args.rows:
        n = int(n)
        tag = ((f"_{args.parts}parts" if args.parts else "") + ("_attempt" if args.attempt else "")
               + (f"_design{args.design}" if args.design else ""))
        log = out_dir / (f"log_{n}{tag}" + ("" if args.parts else ".parquet"))
        if not log.exists():
            t = time.perf_counter()
            rows = generate(log, n, parts=args.parts, attempt=args.attempt, design=args.design)
            size = sum(f.stat().st_size for f in log.glob("*")) if log.is_dir() else log.stat().st_size
            print(f"generated {rows:,} rows in {time.perf_counter() - t:.1f} s ({size / 2**20:.0f} MiB"
                  f"{f', {args.parts} files' if args.parts else ''})")
        study = manifest(out_dir / f"study_{n}{tag}.toml", log, args.design)
        base, base_cpu = run_duckdb_baseline(log)
        print(f"rows {n:>11,}  DuckDB bare counting query: {base:.2f} s (CPU {base_cpu:.2f} s)  "
              f"load {os.getloadavg()[0]:.2f}", flush=True)
        for b in args.bootstrap:
            if b and n > args.skip_bootstrap_above:
                continue
            if args.before:
                compare_versions(study, b, args.engine, args.before, args.repeat, by=args.by)
                continue
            wall, peak, res, cpu = run_cli(study, b, args.engine, by=args.by)
            used = sum(g["rows"]["total"] for g in res["groups"])
            d_api = res["groups"][0]["delta_api"]["mean_over_runs"]
            print(f"rows {used:>11,}  bootstrap {b:>4}  wall {wall:7.2f} s  CPU {cpu:7.2f} s  peak RSS {peak:5.2f} GiB"
                  f"  load {os.getloadavg()[0]:.2f}  (model_1 delta_API {d_api:.4f})", flush=True)
            if not b:
                print(f"    ratio to DuckDB's bare query: {wall / base:.1f}x wall, {cpu / base_cpu:.1f}x CPU",
                      flush=True)
            results.append((used, b, wall, peak))
            if args.compare:
                wall2, peak2, res2, _ = run_cli(study, b, args.compare, by=args.by)
                diff = _max_difference(res["groups"], res2["groups"])
                print(f"    {args.compare}: wall {wall2:7.2f} s  peak RSS {peak2:5.2f} GiB (client)  "
                      f"largest difference from {args.engine}: {diff:.3g}", flush=True)
        if not args.keep:
            shutil.rmtree(log) if log.is_dir() else log.unlink()
    for b in args.bootstrap:
        pts = [(r, w) for r, bb, w, _ in results if bb == b]
        if len(pts) >= 2:
            x, y = np.log([p[0] for p in pts]), np.log([p[1] for p in pts])
            slope = np.polyfit(x, y, 1)[0]
            print(f"bootstrap {b}: time ~ rows^{slope:.2f} over {len(pts)} sizes")
    if not args.keep:
        shutil.rmtree(out_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
