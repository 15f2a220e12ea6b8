"""Error rates of the release gate by simulation (issue 39), at the bundled study's size.

The bundled BiasBusters study has, per model, 10 clusters x 5 tools x 100 queries x 5 cyclic rotations x 3 runs
= 15,000 attempts; the simulated studies below have exactly that design (``toolbias_stats.simulate``), and the gate
runs with its defaults (2000 query-bootstrap replicates, 95% calibrated intervals; ``compare``: 2000 permutations,
Holm across tools).

``check`` (threshold X = 0.20 on the metric, chooser with an API preference for delta_API or a position preference
for delta_pos, true value set exactly):

- ``exceeds`` at the threshold (true delta = X): fail rate, must be <= 5% (the rule's nominal one-sided level 2.5%);
- ``exceeds`` 0.10 above (true delta = X + 0.10): fail rate, must be >= 80%;
- ``within`` at the threshold: pass rate, must be <= 5%.

``compare`` (max shift Z = 0.10): a base version (uniform chooser) against a new version with true position shift 0
(another uniform chooser) or Z + 0.10 (a position preference whose position distribution is 0.20 from uniform);
``paired`` (the same query ids: resampled together) and ``unpaired`` (the new version's query ids relabelled:
independent). Fail rate at shift 0 must be <= 5%, at Z + 0.10 >= 80%.

Every rate is reported with its Monte-Carlo standard error sqrt(p (1 - p) / n) and a 95% Wilson interval.
Usage::

    .venv/bin/python analyses/gate_error_rates.py [--reps N] [--part check|compare|all]

Writes ``analyses/gate_error_rates.json`` (merged with an existing file, part by part).
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
from statsmodels.stats.proportion import proportion_confint

from toolbias_stats.gate import check_selection_bias, compare_selection
from toolbias_stats.io import SelectionLog
from toolbias_stats.simulate import simulate_selection_log

OUT = Path(__file__).with_suffix(".json")
SIZE = dict(n_clusters=10, n_tools=5, n_queries=100, n_runs=3)   # the bundled study, per model
X = 0.20          # check threshold
Z = 0.10          # compare threshold


def preference(tv: float, k: int = 5) -> list:
    """A distribution over k items whose TV distance to uniform is exactly ``tv`` (one favourite)."""
    top = 1 / k + tv
    return [top] + [(1 - top) / (k - 1)] * (k - 1)


def rate(hits: int, n: int) -> dict:
    p = hits / n
    lo, hi = proportion_confint(hits, n, alpha=0.05, method="wilson")
    return {"rate": p, "hits": hits, "n": n, "mc_se": float(np.sqrt(p * (1 - p) / n)), "wilson_low": float(lo),
            "wilson_high": float(hi)}


def check_part(reps: int, seed: int, at_threshold_only: bool = False) -> dict:
    out = {}
    cases = (("at_threshold", X),) if at_threshold_only else (("at_threshold", X), ("threshold_plus_0.10", X + 0.10))
    for metric, arg in (("delta_api", "tool_probs"), ("delta_pos", "position_probs")):
        for label, true in cases:
            n = reps if label == "at_threshold" else max(reps // 2, 1)
            fails_exceeds = passes_within = 0
            truth = None
            t0 = time.time()
            for r in range(n):
                sim = simulate_selection_log(**SIZE, **{arg: preference(true)}, rng=seed + 1000 * r)
                truth = getattr(sim, metric)
                kw = {"max_" + metric: X}
                ex = check_selection_bias(sim.log, **kw, plan=False, rng=seed + 1000 * r + 1)
                fails_exceeds += ex.exit_code == 1
                if label == "at_threshold":
                    # the same interval decides `within` (same data, same seed)
                    d = ex.decisions[0]
                    passes_within += d.outcome == "below"
            key = f"{metric}_{label}"
            out[key] = {"true_value": truth, "threshold": X, "exceeds_fail": rate(fails_exceeds, n),
                        "seconds": time.time() - t0}
            if label == "at_threshold":
                out[key]["within_pass"] = rate(passes_within, n)
            print(key, json.dumps(out[key]), flush=True)
    return out


def _relabel(log: SelectionLog) -> SelectionLog:
    """The same attempts with query ids no other version has (an independent query set)."""
    return SelectionLog.from_frame(log.data.assign(query_id="n-" + log.data["query_id"].astype(str)), log.catalog)


def compare_part(reps: int, seed: int) -> dict:
    out = {}
    for label, shift in (("shift_0", 0.0), ("threshold_plus_0.10", Z + 0.10)):
        for pairing in ("paired", "unpaired"):
            n = reps if label == "shift_0" else max(reps // 2, 1)
            fails = 0
            by_reason = {"shift": 0, "tools": 0}
            t0 = time.time()
            for r in range(n):
                base = simulate_selection_log(**SIZE, rng=seed + 1000 * r)
                new = simulate_selection_log(**SIZE, position_probs=preference(shift) if shift else None,
                                             rng=seed + 1000 * r + 1)
                new_log = new.log if pairing == "paired" else _relabel(new.log)
                res = compare_selection(base.log, new_log, max_shift=Z, rng=seed + 1000 * r + 2)
                assert res.settings["pairing_used"] == ("paired" if pairing == "paired" else "independent")
                fails += res.exit_code == 1
                failed = {d.metric for d in res.decisions if not d.passed}
                by_reason["shift"] += bool(failed & {"shift_api", "shift_pos"})
                by_reason["tools"] += "tools" in failed
            key = f"{label}_{pairing}"
            out[key] = {"true_shift_pos": shift, "max_shift": Z, "fail": rate(fails, n),
                        "fail_by_shift": rate(by_reason["shift"], n), "fail_by_tools": rate(by_reason["tools"], n),
                        "seconds": time.time() - t0}
            print(key, json.dumps(out[key]), flush=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=200)
    ap.add_argument("--part", choices=("check", "compare", "all"), default="all")
    ap.add_argument("--seed", type=int, default=39)
    ap.add_argument("--at-threshold-only", action="store_true",
                    help="check: only the cases at the threshold (more replicates where the rate is small)")
    ap.add_argument("--key", default=None, help="store the part under this key (default: the part's name)")
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    def merged(part, value):   # re-read before writing: the two parts may run as two processes
        found = json.loads(OUT.read_text()) if OUT.exists() else {}
        found[part] = value
        OUT.write_text(json.dumps(found, indent=2) + "\n")
        return found

    found = json.loads(OUT.read_text()) if OUT.exists() else {}
    settings = {"size": SIZE, "check_threshold": X, "compare_threshold": Z, "reps": args.reps, "seed": args.seed,
                "n_resamples": 2000, "n_permutations": 2000, "confidence_level": 0.95}
    if args.part in ("check", "all"):
        found = merged(args.key or "check", {"settings": settings, "results": check_part(
            args.reps, args.seed, args.at_threshold_only)})
    if args.part in ("compare", "all"):
        found = merged("compare", {"settings": settings, "results": compare_part(args.reps, args.seed)})
    rows = [{"part": part, "case": k, **{m: v["rate"] for m, v in res.items() if isinstance(v, dict) and "rate" in v}}
            for part in found for k, res in found[part]["results"].items()]
    print(pd.DataFrame(rows).to_string(index=False))


if __name__ == "__main__":
    main()
