"""``toolbias-stats choice``: answer-position bias of multiple-choice answers and pairwise judges. Wiring only."""

from __future__ import annotations

import json
import math
import warnings

__all__ = ["add_parser", "run", "run_validate", "run_shift"]


def add_parser(subparsers):
    """Register ``choice`` on an ``argparse`` sub-parser collection."""
    from ._vocabulary import add_aliases, add_confidence_level, add_n_resamples, add_seed

    p = subparsers.add_parser("choice", help="multiple-choice / judge position bias: delta_pos, accuracy by gold "
                                             "position, bias-corrected accuracy, swapped-pair consistency",
                              description="Read a choice-study manifest (format inspect, lm_eval or choice_table; "
                                          "docs/choice.md) and report the answer-position bias delta_pos with "
                                          "item-bootstrap CIs, accuracy by gold position and under uniformly random "
                                          "orderings, and the position consistency of pairwise judges.")
    p.add_argument("study", help="choice-study manifest (TOML)")
    p.add_argument("--by", default="model", help="comma-separated grouping columns (default: model; '' for none)")
    add_n_resamples(p, 2000, "item-bootstrap replicates")
    p.add_argument("--null", type=int, default=2000, metavar="N",
                   help="Monte-Carlo draws of the uniform chooser for p-values (default 2000)")
    p.add_argument("--weights", choices=("answers", "items", "k"), default="answers",
                   help="how delta_pos of items with different numbers of options K combines over K: by answers "
                        "(default), by items, or equally (the mean over K)")
    p.add_argument("--invalid", choices=("incorrect", "exclude"), default="incorrect",
                   help="rows without a valid answer count as wrong (default) or are left out of accuracies")
    add_seed(p)
    add_confidence_level(p)
    p.add_argument("--json", action="store_true", help="documented JSON on stdout (docs/choice.md)")
    add_aliases(p, "choice")
    return p


def run(args) -> int:
    from ..choice import accuracy_by_gold_position, judge_consistency, option_position_bias, read_choice_study
    from ._common import version as _version

    log = read_choice_study(args.study)
    by = [b.strip() for b in args.by.split(",") if b.strip()]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        pos = option_position_bias(log, by=by, n_resamples=args.n_resamples, n_null=args.null,
                                   confidence_level=args.confidence_level, weights=args.weights, rng=args.seed)
        has_gold = log.data["gold_position"].notna().any()
        acc = (accuracy_by_gold_position(log, by=by, n_resamples=args.n_resamples, invalid=args.invalid,
                                         confidence_level=args.confidence_level, rng=args.seed) if has_gold else None)
        two = (log.data["n_options"] == 2).any()
        judge = (judge_consistency(log, by=by, n_resamples=args.n_resamples, confidence_level=args.confidence_level,
                                   rng=args.seed) if two else None)
    notes = sorted({str(w.message) for w in caught})
    study = log.diagnostics.get("__study__", {})
    rows = log.summary(by=by or ["model"])
    if args.json:
        out = {"study": study.get("name"), "manifest": str(args.study), "version": _version(), "unit": "item",
               "rows": _records(rows), "position_bias": pos.to_dict(),
               "accuracy": None if acc is None else acc.to_dict(),
               "judge": None if judge is None else judge.to_dict(), "warnings": notes}
        out["position_bias"].pop("bias", None)
        print(json.dumps(out, indent=2, allow_nan=False, default=str))
        return 0
    from .._text import format_choice_accuracy_text, format_choice_judge_text, format_choice_position_text
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


def _notes(log) -> list[str]:
    """Reader notes worth a line in ``validate`` (lm-eval letter continuations beside a ``doc.choices`` list)."""
    out = []
    for f, d in log.diagnostics.items():
        if isinstance(d, dict) and isinstance(d.get("letter_choices"), dict):
            out.append(f"{f}: {d['letter_choices']['rows']} rows: {d['letter_choices']['note']}")
    return out


def run_validate(args) -> int:
    """``toolbias-stats validate`` of a choice-study manifest: rows by status per file, items, design, notes."""
    from ..choice import read_choice_study
    from ._output import emit

    log = read_choice_study(args.study)
    study = log.diagnostics.get("__study__", {})
    d = log.data
    files = log.summary(by=["source_file", "model"])
    design = log.design_columns
    notes = _notes(log)
    replicates = [c for c in ("run", "epoch") if c in d.columns and d[c].nunique() > 1]
    if getattr(args, "json", False):
        totals = d["status"].value_counts()
        out = {"study": study.get("name"), "kind": "choice", "rows": len(d),
               "by_status": {k: int(v) for k, v in totals.items() if v}, "files": _records(files),
               "unit": "item", "n_units": int(d["item_id"].nunique()), "replicates": replicates,
               "design": design, "models": sorted(d["model"].astype(str).unique().tolist()),
               "n_options": sorted(int(k) for k in d["n_options"].unique()),
               "diagnostics": {k: v for k, v in log.diagnostics.items() if k != "__study__"}, "notes": notes}
        print(json.dumps(out, indent=2, default=str))
        return 0
    emit(f"choice study {study.get('name')!r} ({args.study}): {len(d)} answers, unit = item "
         f"({d['item_id'].nunique()} items); design columns {design}; replicates {replicates or 'none'}; "
         f"options per item K = {sorted(int(k) for k in d['n_options'].unique())}")
    emit(files.to_string(index=False))
    for n in notes:
        emit(f"note: {n}")
    return 0


def run_shift(args) -> int:
    """``toolbias-stats shift`` of a choice-study manifest: the option-slot log of :meth:`ChoiceLog.to_selection_log`
    (items are the queries, the unit of every resample), compared between levels as for tools."""
    from .._text import format_shift_text
    from ..choice import read_choice_study
    from ..experiments import selection_shift
    from ._common import version as _version
    from ._output import emit

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        log = read_choice_study(args.study)
        by = [b.strip() for b in args.by.split(",") if b.strip()]
        result = selection_shift(log.to_selection_log(identity="position"), between=args.between, base=args.base,
                                 by=by, n_resamples=args.n_resamples, n_permutations=args.n_permutations,
                                 pairing=args.pairing, confidence_level=args.confidence_level, rng=args.seed)
    if args.json:
        study = log.diagnostics.get("__study__", {})
        out = {"study": study.get("name"), "manifest": str(args.study), "version": _version(), "kind": "choice",
               "unit": "item", **result.to_dict()}
        print(json.dumps(out, indent=2, allow_nan=False))
    else:
        emit("choice study: the 'tools' are the option slots (K=4:A = whatever is shown first of 4), the queries "
             "the items")
        emit(format_shift_text(result))
    return 0
