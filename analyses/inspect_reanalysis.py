"""Re-analysis of real Inspect AI eval logs, end to end through manifests (format = "inspect"), no hand conversion.

The logs in data/choice/logs were written by ``inspect_ai.eval`` with Inspect's mock model and the documented
choosers of analyses/inspect_make_example.py, so the truth is known: the script prints every estimate with its CI
next to the value the chooser implies, and whether the interval covers it.

Usage::

    python analyses/inspect_reanalysis.py                 # the shipped logs (data/choice)
    python analyses/inspect_reanalysis.py --regenerate    # run the Inspect evals again (about 30 s), then analyse
    python analyses/inspect_reanalysis.py --json out.json

The same numbers come from the CLI::

    toolbias-stats bias data/choice/tools_study.toml --by model
    toolbias-stats choice data/choice/choice_study.toml --by model,condition
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))

from inspect_make_example import make_logs, truth  # noqa: E402

SEED = 20251122


def analyse(data_dir: Path, n_resamples: int = 2000) -> list[dict]:
    import toolbias_stats as tbs
    from toolbias_stats.choice import (
        accuracy_by_gold_position,
        judge_consistency,
        option_position_bias,
        read_choice_study,
    )

    t = truth()
    rows = []

    def add(what, est, lo, hi, true, n):
        rows.append({"quantity": what, "estimate": float(est), "ci_low": float(lo), "ci_high": float(hi),
                     "truth": float(true), "covered": bool(lo <= true <= hi), "n": int(n)})

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        study = tbs.read_study(data_dir / "tools_study.toml")            # format = "inspect"
        log = study.log
        bias = tbs.selection_bias(log, by="model", n_resamples=n_resamples, n_null=n_resamples, rng=SEED)
        f = bias.to_frame().set_index("metric")
        n_ok = int((log.data["status"] == "ok").sum())
        for m, key in (("delta_pos", "tools_delta_pos"), ("delta_api", "tools_delta_api")):
            r = f.loc[m]
            add(f"tools: {m} (plug-in, BCa CI)", r["mean_over_runs"], r["ci_low"], r["ci_high"], t[key], n_ok)
            add(f"tools: {m} (bias-corrected, calibrated CI)", r["corrected"], r["corrected_ci_low"],
                r["corrected_ci_high"], t[key], n_ok)
        n_nc = int((log.data["status"] == "no_call").sum())
        from toolbias_stats._resampling import wilson_interval

        lo, hi = wilson_interval(n_nc, len(log), 0.95)
        add("tools: no-call rate (Wilson)", n_nc / len(log), lo, hi, t["tools_no_call_rate"], len(log))

        choices = read_choice_study(data_dir / "choice_study.toml")      # format = "inspect"
        by = ["model", "condition"]
        pos = option_position_bias(choices, by=by, n_resamples=n_resamples, n_null=n_resamples, rng=SEED)
        pf = pos.to_frame().set_index("condition")
        for cond, key in (("mc_rotated", "mc_rotated_delta_pos"), ("mc_fixed_key", "mc_fixed_key_delta_pos")):
            r = pf.loc[cond]
            add(f"{cond}: delta_pos (plug-in, BCa CI)", r["mean_over_runs"], r["ci_low"], r["ci_high"], t[key],
                r["n_used"])
            add(f"{cond}: delta_pos (bias-corrected)", r["corrected"], r["corrected_ci_low"], r["corrected_ci_high"],
                t[key], r["n_used"])
        acc = accuracy_by_gold_position(choices, by=by, n_resamples=n_resamples, rng=SEED)
        ps = acc.positions.set_index(["condition", "gold_position"])
        for p in range(1, 5):
            r = ps.loc[("mc_rotated", p)]
            add(f"mc_rotated: accuracy with gold at {p}", r["accuracy"], r["ci_low"], r["ci_high"],
                t["mc_accuracy_by_gold_position"][p - 1], r["n"])
        sm = acc.overview.set_index("condition")
        for cond in ("mc_rotated", "mc_fixed_key"):
            r = sm.loc[cond]
            add(f"{cond}: accuracy under random orderings", r["corrected_accuracy"], r["corrected_ci_low"],
                r["corrected_ci_high"], t["mc_corrected_accuracy"], r["n_used"])
        r = sm.loc["mc_fixed_key"]
        add("mc_fixed_key: observed accuracy", r["accuracy"], r["accuracy_ci_low"], r["accuracy_ci_high"],
            t["mc_fixed_key_expected_accuracy"], r["n_used"])
        jc = judge_consistency(choices, by=by, n_resamples=n_resamples, rng=SEED).to_frame().set_index("condition")
        r = jc.loc["judge_pairs"]
        add("judge: position consistency (Wilson)", r["consistency"], r["consistency_ci_low"],
            r["consistency_ci_high"], t["judge_consistency"], r["n_pairs"])
        add("judge: first-position rate (pair bootstrap)", r["first_position_rate"], r["first_ci_low"],
            r["first_ci_high"], t["judge_first_position_rate"], r["n_pairs"])
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--regenerate", action="store_true", help="run the Inspect evals again into a temporary folder")
    ap.add_argument("--bootstrap", type=int, default=2000)
    ap.add_argument("--json", default=None, help="also write the rows as JSON")
    args = ap.parse_args(argv)
    data = ROOT / "data" / "choice"
    tmp = None
    if args.regenerate:
        tmp = Path(tempfile.mkdtemp(prefix="inspect_reanalysis_"))
        for name in ("tools_catalog.csv", "tools_study.toml", "choice_study.toml"):
            shutil.copy(data / name, tmp / name)
        make_logs(tmp / "logs")
        data = tmp
    rows = analyse(data, args.bootstrap)
    width = max(len(r["quantity"]) for r in rows)
    print(f"{'quantity':<{width}}  estimate  95% CI            truth   covered  n")
    for r in rows:
        print(f"{r['quantity']:<{width}}  {r['estimate']:8.3f}  [{r['ci_low']:.3f}, {r['ci_high']:.3f}]  "
              f"{r['truth']:6.3f}  {'yes' if r['covered'] else 'NO':7}  {r['n']}")
    print(f"{sum(r['covered'] for r in rows)} of {len(rows)} intervals cover the chooser's value "
          f"(logs: {data / 'logs'})")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2), encoding="utf-8")
    if tmp is not None:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    np.seterr(all="ignore")
    raise SystemExit(main())
