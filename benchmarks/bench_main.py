"""Benchmark: the main job (`bash scripts/main.sh`) stage by stage, and the parts of its explain stage.

Usage:  python benchmarks/bench_main.py [--warm] [--no-bayes] [--parts] [--repeat 1] [--direct]

What is timed (wall clock and CPU seconds; the load average is printed before and after every run, since the
machine may be shared):
  main job   `bash scripts/main.sh --out TMP.html` in a fresh process with its output piped (not a terminal), so
             the report prints one line per stage with the elapsed time; the stages are read from those lines:
             start-up (interpreter, imports, argument checks), reading the study, the delta estimates (2,000
             bootstrap replicates), explaining selection, the Bayesian model, rendering. CPU is the whole
             process tree's (getrusage of the children). With --no-bayes the same report without the Bayesian
             section (`toolbias-stats report ... --explain`).
             Embedding cache: a fresh empty folder (TOOLBIAS_CACHE_DIR) for every run unless --warm, i.e. a
             first run on a fresh clone (the bundled study's vectors come from data/embeddings).
  --parts    the explain stage's parts in this process: tool features (similarities, readability, ...),
             selection rates, correlations + OLS, random-forest CV, gradient-boosting CV, alignment
             bootstrap, the attempt-level explanation; with the `explain` command's defaults and seed 0.
"""

from __future__ import annotations

import argparse
import itertools
import os
import platform
import re
import resource
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STUDY = "data/biasbusters/study.toml"
_STAGE = re.compile(r"^toolbias-stats report: \[\s*([0-9.]+) s\] (.*)$")
_NAMES = (("reading", "read study"), ("delta", "delta (2,000 bootstrap)"), ("explaining", "explain"),
          ("Bayesian", "Bayes"), ("choice", "choice model"), ("rendering", "render"), ("wrote", None))


def load() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:  # pragma: no cover - not Linux
        return "n/a"


def _label(text):
    for key, name in _NAMES:
        if text.startswith(key):
            return name
    return text


def run_main(warm_dir, bayes=True, direct=False):
    """One main job; returns (wall, cpu, [(stage, seconds)])."""
    out = Path(tempfile.mkdtemp(prefix="bench_main_")) / "report.html"
    env = dict(os.environ)
    env["TOOLBIAS_CACHE_DIR"] = warm_dir or tempfile.mkdtemp(prefix="bench_main_cache_")
    env.pop("CI", None)
    if direct:   # main.sh's command with this interpreter (no venv check): for a checkout without .venv
        env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
        cmd = [sys.executable, "-m", "toolbias_stats.cli", "report", STUDY, "--out", str(out), "--explain",
               *(["--bayes"] if bayes else [])]
    elif bayes:
        cmd = ["bash", "scripts/main.sh", "--out", str(out)]
    else:   # the same environment as main.sh, the report without --bayes
        cmd = ["bash", "-c", 'source scripts/_env.sh && toolbias-stats report "$@"', "bench_main",
               STUDY, "--out", str(out), "--explain"]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if proc.returncode != 0:
        sys.exit(f"main job failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    marks = [(float(m.group(1)), m.group(2)) for m in map(_STAGE.match, proc.stderr.splitlines()) if m]
    if not marks:
        sys.exit("no stage lines on stderr: is the report's progress output switched off?")
    # the clock of the stage lines starts in the report command; the rest is the shell, interpreter, imports, exit
    stages = [("start-up + exit", wall - marks[-1][0])]
    for (t, text), (t_next, _) in itertools.pairwise(marks):
        stages.append((_label(text), t_next - t))
    return wall, cpu, stages


def run_parts():
    """The explain stage's parts, timed in this process (wall, CPU)."""
    warnings.simplefilter("ignore")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ["TOOLBIAS_CACHE_DIR"] = tempfile.mkdtemp(prefix="bench_main_cache_")
    rows = []

    def timed(name, fn):
        t, c = time.perf_counter(), time.process_time()
        out = fn()
        rows.append((name, time.perf_counter() - t, time.process_time() - c))
        return out

    from toolbias_stats.io import read_study

    study = timed("read study (imports included)", lambda: read_study(ROOT / STUDY))
    from toolbias_stats.features import tool_features
    from toolbias_stats.metrics import selection_bias
    from toolbias_stats.models import ensemble_cv, feature_correlations, model_alignment, ols_fit
    from toolbias_stats.models._explain_choice import choice_explanation

    feats = timed("tool features (cold cache)", lambda: tool_features(study))
    rates = timed("selection rates", lambda: selection_bias(study.log, by="model", n_resamples=0, n_null=0))
    ols = timed("correlations + OLS", lambda: (feature_correlations(feats, rates), ols_fit(feats, rates))[1])
    for est in ("random_forest", "gradient_boosting"):
        timed(f"{est.replace('_', ' ')} CV (200 trees, 5 repeats)",
              lambda est=est: ensemble_cv(feats, rates, estimator=est, rng=0))
    timed("alignment (2,000 bootstrap)", lambda: model_alignment(rates, n_resamples=2000, rng=0))
    timed("attempt-level explanation", lambda: choice_explanation(feats, study.log, ols=ols))
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--warm", action="store_true", help="keep one embedding cache across runs (default: cold)")
    ap.add_argument("--no-bayes", action="store_true", help="the report without the Bayesian section")
    ap.add_argument("--parts", action="store_true", help="also time the explain stage's parts in-process")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--direct", action="store_true",
                    help="run main.sh's report command with this interpreter instead of scripts/main.sh (no venv "
                         "set-up; for a checkout that uses a shared environment)")
    args = ap.parse_args()
    print(f"# {platform.machine()} {platform.python_version()}, {os.cpu_count()} CPUs; load average {load()}")
    warm_dir = tempfile.mkdtemp(prefix="bench_main_cache_") if args.warm else None
    for r in range(args.repeat):
        lb = load()
        wall, cpu, stages = run_main(warm_dir, bayes=not args.no_bayes, direct=args.direct)
        print(f"\nmain job run {r + 1} ({'warm' if args.warm else 'cold'} embedding cache"
              f"{', no Bayes' if args.no_bayes else ''}): {wall:.1f} s wall, {cpu:.1f} s CPU; "
              f"load average before {lb}, after {load()}")
        for name, sec in stages:
            print(f"  {name:28s} {sec:7.1f} s")
    if args.parts:
        lb = load()
        rows = run_parts()
        print(f"\nexplain stage, parts (in-process; load average before {lb}, after {load()})")
        print(f"  {'part':40s} {'wall s':>7s} {'CPU s':>7s}")
        for name, w, c in rows:
            print(f"  {name:40s} {w:7.2f} {c:7.2f}")


if __name__ == "__main__":
    main()
