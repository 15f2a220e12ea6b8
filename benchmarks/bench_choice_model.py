"""Benchmark of ``choice_model`` on the vendored BiasBusters study (issue 22).

105,500 attempts, 8 LLM groups (7 with the lists shown; Qwen3-8B-Base transcripts have no list and are reported
as excluded). Timed (best of ``--repeat``, study already read): the conditional logit (Firth, query-clustered
sandwich, implied bias under logged and shuffled lists, fit tables, Wald and LR tests) and the mixed logit
(query x tool random effects, 100 antithetic draws). Targets: <= 2 s and <= 20 s.

Usage: ``python benchmarks/bench_choice_model.py [--repeat 3] [--no-mixed]``
"""

from __future__ import annotations

import argparse
import os
import platform
import time
import warnings

import toolbias_stats as tbs
from toolbias_stats.choicemodel import choice_model


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--no-mixed", action="store_true")
    a = ap.parse_args(argv)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t = time.perf_counter()
        study = tbs.read_study(tbs.datasets.path("biasbusters/study.toml"))
        t_read = time.perf_counter() - t
        log = study.log
        print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs; "
              f"load average {os.getloadavg()[0]:.1f}")
        print(f"read_study: {t_read:.2f} s ({log.n_attempts} attempts)")
        # wall time, and the process CPU time (the fit is single-threaded, so on a loaded shared machine the CPU
        # time is what the wall time would be on an idle one)
        best, cpu = float("inf"), float("inf")
        for _ in range(a.repeat):
            t, c = time.perf_counter(), time.process_time()
            res = choice_model(log, by="model")
            best, cpu = min(best, time.perf_counter() - t), min(cpu, time.process_time() - c)
        print(f"conditional logit (by model): wall {best:.2f} s, CPU {cpu:.2f} s  converged={res.converged}")
        if not a.no_mixed:
            best, cpu = float("inf"), float("inf")
            for _ in range(max(1, a.repeat - 1)):
                t, c = time.perf_counter(), time.process_time()
                res = choice_model(log, by="model", mixed=True, rng=1)
                best, cpu = min(best, time.perf_counter() - t), min(cpu, time.process_time() - c)
            print(f"mixed logit (by model, 100 draws): wall {best:.2f} s, CPU {cpu:.2f} s  converged={res.converged}")
        print(f"load average after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
