"""Coverage of 95% intervals for the Internalization Score IS@k = Rf@k / Rc@k, by simulation with known truth.

Each study draws n queries; per query a constrained hit c ~ Bernoulli(Rc) and a free hit f with
P(f = 1 | c = 1) = p11, P(f = 1 | c = 0) = leak (free decoding occasionally finds a tool the trie beam missed),
so that E[f] = Rf and the true IS is Rf / Rc. The study is written as ranked predictions on a synthetic RRB
(the correct tool at rank 1 for a hit, a wrong tool otherwise) and scored through the public API
(``retrieval_recall``, 2,000 query-bootstrap replicates), so every interval is the package's own:
Fieller (``ci``), bootstrap percentile and BCa of the ratio, and the paper's delta method (Appendix G).

Run:  nice -n 10 .venv/bin/python analyses/toolsense_is_coverage.py [--reps 400]
      [--out reports/toolsense_is_coverage.csv]
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np
import pandas as pd

from toolbias_stats.toolsense import RRBBenchmark, retrieval_recall

#: (name, Rc, Rf, n, leak): typical flat, hierarchical (the paper's TG-H), low Rc, very low Rc, IS near 1,
#: IS = 1 at high and at low Rc, IS above 1 (where the paper's clipping at 1 bites), few hits at n = 100.
SCENARIOS = [
    ("flat (Table 3-like)", 0.45, 0.38, 500, 0.02),
    ("hierarchical, IS 0.33", 0.27, 0.09, 500, 0.01),
    ("low Rc, one tier", 0.06, 0.05, 166, 0.01),
    ("very low Rc", 0.03, 0.02, 166, 0.005),
    ("IS near 1", 0.60, 0.59, 166, 0.10),
    ("IS = 1, high Rc", 0.85, 0.85, 500, 0.30),
    ("IS = 1, low Rc", 0.10, 0.10, 166, 0.05),
    ("IS above 1 (free beats trie)", 0.40, 0.44, 500, 0.15),
    ("low Rc, n = 100 (G3 size)", 0.03, 0.015, 100, 0.005),
]
METHODS = {"fieller (ours, default)": "ci_fieller", "bootstrap percentile": "ci_bootstrap",
           "bootstrap BCa": "ci_bca", "delta (paper)": "ci_delta"}


def synthetic_rrb(n: int) -> RRBBenchmark:
    """n one-answer queries (tier easy), answer ``t<i>``, one shared wrong tool ``wrong``."""
    ids = [f"q{i}" for i in range(n)]
    answers = [(f"t{i}",) for i in range(n)]
    tier = pd.Categorical(["easy"] * n, categories=["easy", "medium", "hard"])
    queries = pd.DataFrame({"sample_id": ids, "query": ids, "tier": tier,
                            "tool": [a[0] for a in answers], "answers": answers, "n_answers": 1,
                            "pool": [(a[0], "wrong") for a in answers], "source_line": np.arange(1, n + 1)})
    names = [f"t{i}" for i in range(n)] + ["wrong"]
    tools = pd.DataFrame({"tool_name": names, "tool_title": names, "tool_description": names, "api_title": names,
                          "api_description": names})
    return RRBBenchmark(queries=queries, tools=tools, path="<synthetic>")


def one_study(bench, rc, rf, leak, rng):
    n = bench.n
    p11 = (rf - (1 - rc) * leak) / rc
    c = rng.random(n) < rc
    f = np.where(c, rng.random(n) < p11, rng.random(n) < leak)
    ans = bench.queries["tool"].to_numpy()
    preds = pd.DataFrame({"sample_id": bench.queries["sample_id"],
                          "constrained": [(a,) if h else ("wrong",) for a, h in zip(ans, c)],
                          "free": [(a,) if h else ("wrong",) for a, h in zip(ans, f)]})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = retrieval_recall(bench, preds, k=[1], n_resamples=2000, rng=rng)
    return res.estimates[("model", "all", 1)]["is"], res.estimates[("model", "all", 1)]["rc"]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=400, help="studies per scenario (default 400)")
    ap.add_argument("--seed", type=int, default=20251122)
    ap.add_argument("--out", default="reports/toolsense_is_coverage.csv")
    args = ap.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    rows = []
    t0 = time.perf_counter()
    for name, rc, rf, n, leak in SCENARIOS:
        bench = synthetic_rrb(n)
        truth = rf / rc
        hits = {m: [] for m in METHODS}
        for _ in range(args.reps):
            est, _rc_est = one_study(bench, rc, rf, leak, rng)
            for m, attr in METHODS.items():
                lo, hi = getattr(est, attr)
                ok = np.isfinite(lo) and np.isfinite(hi) if m != "fieller (ours, default)" else np.isfinite(lo)
                hits[m].append((ok and lo <= truth <= hi, ok and hi < truth, ok and lo > truth, not ok,
                                (hi - lo) if ok and np.isfinite(hi) else np.nan, not np.isfinite(hi)))
        for m, h in hits.items():
            a = np.array(h, dtype=float)
            rows.append({"scenario": name, "rc": rc, "rf": rf, "is_true": truth, "n": n, "method": m,
                         "coverage": a[:, 0].mean(), "miss_low": a[:, 1].mean(), "miss_high": a[:, 2].mean(),
                         "undefined": a[:, 3].mean(), "unbounded": a[:, 5].mean() - a[:, 3].mean(),
                         "median_width": np.nanmedian(a[:, 4]), "reps": args.reps})
        print(f"{name}: done ({time.perf_counter() - t0:.0f} s)", flush=True)
    df = pd.DataFrame(rows)
    from pathlib import Path

    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    df.to_csv(args.out, index=False)
    wide = df.pivot_table(index=["scenario", "rc", "rf", "n"], columns="method", values="coverage", sort=False)
    print(wide.round(3).to_string())
    print("\n| scenario | Rc | Rf | IS | n | method | coverage | miss low / high | undefined | median width |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in df.itertuples(index=False):
        print(f"| {r.scenario} | {r.rc:.2f} | {r.rf:.2f} | {r.is_true:.3f} | {r.n} | {r.method} | "
              f"**{100 * r.coverage:.1f}%** | {100 * r.miss_low:.1f} / {100 * r.miss_high:.1f} | "
              f"{100 * r.undefined:.1f}% | {r.median_width:.3f} |")
    print(f"\ntotal {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
