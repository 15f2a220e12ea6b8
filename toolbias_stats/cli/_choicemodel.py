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
    p.add_argument("--reference", default=None, metavar="TOOL[,TOOL]",
                   help="reference tool (worth 0) of each component of the comparison graph (default: the first tool "
                        "of each component in catalog order)")
    p.add_argument("--contrast", action="append", default=[], metavar="A,B",
                   help="the difference of worths A - B (log-odds) with its interval, from the interval covariance; "
                        "repeatable")
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
                              confidence_level=args.confidence_level, reference=_split(args.reference) or None,
                              rng=args.seed)
    contrasts = _contrasts(result, args.contrast)
    for _, g in result.groups[~result.groups["fitted"]].iterrows():
        keys = ", ".join(f"{k}={g[k]}" for k in result.by)
        print(term_safe(f"toolbias-stats choice-model: note: group {keys or 'all'} not fitted: no usable "
                        f"attempt (excluded {g['excluded']})"), file=sys.stderr)
    if not result.converged:
        print("toolbias-stats choice-model: WARNING: a group did not converge (see `converged`)", file=sys.stderr)
    if args.json:
        out = {"study": study.name, "manifest": str(study.path), "version": _version(), **result.to_dict(),
               "contrasts": [_contrast_json(c) for c in contrasts]}
        print(json.dumps(out, indent=2, allow_nan=False))
    else:
        print(term_safe(str(result)), end="")
        if contrasts:
            print(term_safe(_contrasts_text(contrasts, args.confidence_level)), end="")
    return 0


def _pairs(specs):
    """``["A,B", ...]`` as ``[(A, B), ...]``; a malformed one is an error naming it."""
    out = []
    for spec in specs:
        parts = [t.strip() for t in spec.split(",")]
        if len(parts) != 2 or not all(parts):
            raise ValueError(f"--contrast expects two tool ids as A,B; got {spec!r} instead.")
        out.append((parts[0], parts[1]))
    return out


def _contrasts(result, specs):
    """Every requested contrast in every fitted group (a group that does not show both tools says why)."""
    out = []
    pairs = _pairs(specs)
    for g in result._raw:
        if not g.get("terms"):
            continue
        for a, b in pairs:
            try:
                out.append(result.contrast(a, b, keys=g["keys"]))
            except ValueError as exc:
                out.append({**g["keys"], "tool_a": a, "tool_b": b, "estimate": None, "se": None, "ci_low": None,
                            "ci_high": None, "p_value": None, "note": str(exc)})
    if pairs and all(c["estimate"] is None for c in out):
        raise ValueError("; ".join(dict.fromkeys(c["note"] for c in out)))
    return out


def _contrast_json(c):
    from .._json import plain

    rest = {k: plain(v) for k, v in c.items() if k not in ("ci_low", "ci_high")}
    return {**rest, "ci": [plain(c["ci_low"]), plain(c["ci_high"])]}


def _contrasts_text(contrasts, level):
    from ..report import fmt_ci, fmt_num, fmt_p

    lines = [f"Contrasts of worths (log-odds, {level:.0%} interval from the covariance):"]
    for c in contrasts:
        keys = ", ".join(f"{k}={v}" for k, v in c.items() if k not in _CONTRAST_FIELDS)
        head = f"  {keys + ': ' if keys else ''}{c['tool_a']} - {c['tool_b']}"
        if c["estimate"] is None:
            lines.append(f"{head}: not estimable ({c['note']})")
        else:
            lines.append(f"{head}: {fmt_num(c['estimate'])} {fmt_ci((c['ci_low'], c['ci_high']))}, "
                         f"{fmt_p(c['p_value'])}")
    return "\n".join(lines) + "\n"


_CONTRAST_FIELDS = ("tool_a", "tool_b", "estimate", "se", "ci_low", "ci_high", "p_value", "note")
