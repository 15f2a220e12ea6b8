"""``toolbias-stats choice-model``: conditional / mixed logit of tool worth, position and features. Wiring only."""

from __future__ import annotations

import json
import sys
import warnings

__all__ = ["add_parser", "run"]


def add_parser(subparsers):
    """Register the ``choice-model`` sub-command; returns its parser."""
    from ..choicemodel import PENALTIES, POSITION_FORMS, SE_METHODS

    p = subparsers.add_parser(
        "choice-model", help="conditional / mixed logit over the lists shown: tool worths, position effects, features",
        description="Fit P(tool | list shown) = softmax(worth[tool] + position[p] + features @ beta) per group, with "
                    "query-clustered intervals (docs/choice_model.md).")
    p.add_argument("study", help="study manifest (TOML)")
    p.add_argument("--by", default="model", help="comma-separated design columns, one model per group "
                                                 "(default: model; '' for one model over everything)")
    p.add_argument("--features", default=None, metavar="A,B",
                   help="numeric catalog (or --feature-table) columns: the worth becomes features @ beta")
    p.add_argument("--feature-table", default=None, metavar="FILE.csv",
                   help="a feature table with tool_id and numeric columns (e.g. written by `toolbias-stats features`)")
    p.add_argument("--position", choices=POSITION_FORMS, default="free", help="position terms (default free)")
    p.add_argument("--penalty", choices=PENALTIES, default="firth", help="default firth (finite worths)")
    p.add_argument("--se", choices=SE_METHODS, default="sandwich", help="interval method (default sandwich)")
    p.add_argument("--mixed", action="store_true", help="add query x tool random effects (mixed logit; slower)")
    p.add_argument("--n-draws", type=int, default=100, metavar="R", help="draws of the mixed logit (default 100)")
    p.add_argument("--bootstrap", type=int, default=200, metavar="B",
                   help="query-bootstrap replicates when --se bootstrap (default 200)")
    p.add_argument("--interactions", default="", metavar="COL,..",
                   help="design columns interacting with the position terms and features")
    p.add_argument("--confidence-level", type=float, default=0.95)
    from ._output import seed

    p.add_argument("--seed", type=seed, default=20251124, help="random seed (default 20251124)")
    p.add_argument("--json", action="store_true", help="documented JSON on stdout")
    return p


def run(args) -> int:
    """Run ``toolbias-stats choice-model``; 0 on success, 2 on bad input."""
    from ..exceptions import SelectionLogError
    from ._common import fail

    try:
        return _run(args)
    except (SelectionLogError, ValueError, FileNotFoundError) as exc:
        return fail("choice-model", exc)   # control characters from the data escaped


def _split(text):
    return [t.strip() for t in (text or "").split(",") if t.strip()]


def _run(args) -> int:
    import pandas as pd

    from .._output import term_safe
    from ..choicemodel import choice_model
    from ..io import read_study
    from ._common import version as _version

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        study = read_study(args.study)
    features = _split(args.features) or None
    if args.feature_table:
        table = pd.read_csv(args.feature_table)
        if features:
            missing = [f for f in features if f not in table.columns]
            if missing:
                raise ValueError(f"--features {missing} are not columns of {args.feature_table}.")
            table = table[["tool_id"] + features]
        features = table
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        result = choice_model(study.log, by=_split(args.by), position=args.position, features=features,
                              penalty=args.penalty, se=args.se, mixed=args.mixed, n_draws=args.n_draws,
                              n_resamples=args.bootstrap, interactions=_split(args.interactions),
                              confidence_level=args.confidence_level, rng=args.seed)
    for _, g in result.groups[~result.groups["fitted"]].iterrows():
        keys = ", ".join(f"{k}={g[k]}" for k in result.by)
        print(term_safe(f"toolbias-stats choice-model: note: group {keys or 'all'} not fitted: no usable "
                        f"attempt (excluded {g['excluded']})"), file=sys.stderr)
    if not result.converged:
        print("toolbias-stats choice-model: WARNING: a group did not converge (see `converged`)", file=sys.stderr)
    if args.json:
        out = {"study": study.name, "manifest": str(study.path), "version": _version(), **result.to_dict()}
        print(json.dumps(out, indent=2, allow_nan=False))
    else:
        print(term_safe(str(result)), end="")
    return 0
