"""``toolbias-stats choice``: answer-position bias of multiple-choice answers and pairwise judges. Wiring only."""

from __future__ import annotations

import json
import math
import warnings

__all__ = ["add_parser", "run"]


def add_parser(subparsers):
    """Register ``choice`` on an ``argparse`` sub-parser collection."""
    p = subparsers.add_parser("choice", help="multiple-choice / judge position bias: delta_pos, accuracy by gold "
                                             "position, bias-corrected accuracy, swapped-pair consistency",
                              description="Read a choice-study manifest (format inspect, lm_eval or choice_table; "
                                          "docs/choice.md) and report the answer-position bias delta_pos with "
                                          "item-bootstrap CIs, accuracy by gold position and under uniformly random "
                                          "orderings, and the position consistency of pairwise judges.")
    p.add_argument("study", help="choice-study manifest (TOML)")
    p.add_argument("--by", default="model", help="comma-separated grouping columns (default: model; '' for none)")
    p.add_argument("--bootstrap", type=int, default=2000, metavar="N", help="item-bootstrap replicates (default 2000)")
    p.add_argument("--null", type=int, default=2000, metavar="N", help="uniform-chooser draws for p-values")
    p.add_argument("--invalid", choices=("incorrect", "exclude"), default="incorrect",
                   help="rows without a valid answer count as wrong (default) or are left out of accuracies")
    p.add_argument("--seed", type=int, default=20251121, help="random seed (default 20251121)")
    p.add_argument("--confidence-level", type=float, default=0.95)
    p.add_argument("--json", action="store_true", help="documented JSON on stdout (docs/choice.md)")
    return p


def run(args) -> int:
    from ..choice import accuracy_by_gold_position, judge_consistency, option_position_bias, read_choice_study
    from ._commands import _version

    log = read_choice_study(args.study)
    by = [b.strip() for b in args.by.split(",") if b.strip()]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        pos = option_position_bias(log, by=by, n_resamples=args.bootstrap, n_null=args.null,
                                   confidence_level=args.confidence_level, rng=args.seed)
        has_gold = log.data["gold_position"].notna().any()
        acc = (accuracy_by_gold_position(log, by=by, n_resamples=args.bootstrap, invalid=args.invalid,
                                         confidence_level=args.confidence_level, rng=args.seed) if has_gold else None)
        two = (log.data["n_options"] == 2).any()
        judge = (judge_consistency(log, by=by, n_resamples=args.bootstrap, confidence_level=args.confidence_level,
                                   rng=args.seed) if two else None)
    notes = sorted({str(w.message) for w in caught})
    study = log.diagnostics.get("__study__", {})
    rows = log.summary(by=by or ["model"])
    if args.json:
        out = {"study": study.get("name"), "manifest": str(args.study), "version": _version(),
               "rows": _records(rows), "position_bias": pos.to_dict(),
               "accuracy": None if acc is None else acc.to_dict(),
               "judge": None if judge is None else judge.to_dict(), "warnings": notes}
        out["position_bias"].pop("bias", None)
        print(json.dumps(out, indent=2, allow_nan=False, default=str))
        return 0
    print(f"choice study {study.get('name')!r}: {len(log)} answers, {log.data['item_id'].nunique()} items")
    print(rows.to_string(index=False))
    print("\nAnswer-position bias delta_pos = TV(position shares, uniform); item bootstrap "
          f"({args.bootstrap} replicates, {args.confidence_level:.0%} CIs)")
    f = pos.to_frame()
    for _, r in f.iterrows():
        print(f"  {_keys(r, by)}: delta_pos {r['mean_over_runs']:.3f} [{r['ci_low']:.3f}, {r['ci_high']:.3f}]  "
              f"bias-corrected {r['corrected']:.3f} [{r['corrected_ci_low']:.3f}, {r['corrected_ci_high']:.3f}]  "
              f"uniform-null {r['null_expected']:.3f}, p = {r['p_value']:.4f}  (n = {int(r['n_used'])}, "
              f"excluded {int(r['n_excluded'])})")
    rates = pos.rates_frame()
    for _, r in rates.iterrows():
        gold = "" if "gold_rate" not in r or _nan(r.get("gold_rate")) else f"   gold here {r['gold_rate']:.3f}"
        print(f"    {_keys(r, by)} {r['options']} position {int(r['position'])}: {r['rate']:.3f} "
              f"[{r['bootstrap_low']:.3f}, {r['bootstrap_high']:.3f}]{gold}")
    if acc is not None:
        print(f"\nAccuracy by gold position (invalid answers: {args.invalid})")
        for _, r in acc.summary.iterrows():
            print(f"  {_keys(r, by)} K={int(r['n_options'])}: observed {r['accuracy']:.3f} "
                  f"[{r['accuracy_ci_low']:.3f}, {r['accuracy_ci_high']:.3f}]; under random orderings "
                  f"{r['corrected_accuracy']:.3f} [{r['corrected_ci_low']:.3f}, {r['corrected_ci_high']:.3f}]; "
                  f"gap {r['gap']:+.3f} [{r['gap_ci_low']:+.3f}, {r['gap_ci_high']:+.3f}]")
        for _, r in acc.positions.iterrows():
            print(f"    {_keys(r, by)} K={int(r['n_options'])} gold at {int(r['gold_position'])}: "
                  f"{r['accuracy']:.3f} [{r['ci_low']:.3f}, {r['ci_high']:.3f}] (n = {int(r['n'])})")
    if judge is not None and judge.table["n_pairs"].sum() > 0:
        print("\nPairwise judge position consistency (swapped pairs)")
        for _, r in judge.table.iterrows():
            if r["n_pairs"] == 0:
                continue
            print(f"  {_keys(r, by)}: {int(r['n_pairs'])} pairs, consistency {r['consistency']:.3f} "
                  f"[{r['consistency_ci_low']:.3f}, {r['consistency_ci_high']:.3f}] (Wilson); first-position rate "
                  f"{r['first_position_rate']:.3f} [{r['first_ci_low']:.3f}, {r['first_ci_high']:.3f}]; "
                  f"both-first {int(r['both_first'])}, both-second {int(r['both_second'])}")
    for n in notes:
        print(f"note: {n}")
    return 0


def _keys(row, by) -> str:
    return ", ".join(f"{b}={row[b]}" for b in by) or "all"


def _nan(v) -> bool:
    return v is None or isinstance(v, float) and math.isnan(v)


def _records(frame):
    return [{k: (v.item() if hasattr(v, "item") else v) for k, v in r.items()} for r in frame.to_dict("records")]
