"""``toolbias-stats choice``: answer-position bias of multiple-choice answers and pairwise judges. Wiring only."""

from __future__ import annotations

import json
import math
import warnings

__all__ = ["add_parser", "run"]


def add_parser(subparsers):
    """Register ``choice`` on an ``argparse`` sub-parser collection."""
    from ._output import seed

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
    p.add_argument("--seed", type=seed, default=20251121, help="random seed (default 20251121)")
    p.add_argument("--confidence-level", type=float, default=0.95)
    p.add_argument("--json", action="store_true", help="documented JSON on stdout (docs/choice.md)")
    return p


def run(args) -> int:
    from ..choice import accuracy_by_gold_position, judge_consistency, option_position_bias, read_choice_study
    from ._common import version as _version

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
    from ..report._text import format_choice_accuracy_text, format_choice_judge_text, format_choice_position_text
    from ._output import emit

    emit(f"choice study {study.get('name')!r}: {len(log)} answers, {log.data['item_id'].nunique()} items")
    emit(rows.to_string(index=False))
    emit("\n" + format_choice_position_text(pos))   # the same text as print(pos), str(acc), str(judge)
    if acc is not None:
        emit("\n" + format_choice_accuracy_text(acc))
    if judge is not None and judge.table["n_pairs"].sum() > 0:
        emit("\n" + format_choice_judge_text(judge))
    for n in notes:
        emit(f"note: {n}")
    return 0


def _keys(row, by) -> str:
    return ", ".join(f"{b}={row[b]}" for b in by) or "all"


def _nan(v) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v))


def _records(frame):
    return [{k: (v.item() if hasattr(v, "item") else v) for k, v in r.items()} for r in frame.to_dict("records")]
