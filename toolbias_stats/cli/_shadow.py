"""``toolbias-stats shadow``: the TOOL-SHADOW v1 Positional Bias Score (SKILL.md step 4 as our CLI). Wiring only."""

from __future__ import annotations

import json
import sys
import warnings
from pathlib import Path

__all__ = ["add_parser", "run", "compute_shadow", "parse_ci"]


def add_parser(subparsers):
    """Register the ``shadow`` sub-command; returns its parser."""
    from ._vocabulary import add_aliases, add_confidence_level, add_n_resamples, add_seed

    p = subparsers.add_parser(
        "shadow", help="TOOL-SHADOW v1 Positional Bias Score of a harness (pre-validation; not for deployment gating)",
        description="Score a harness audit (manifest JSON, call-log CSV, relevance CSV) or every group of a study "
                    "(through the SelectionLog adapter) on the domains L, D, S, R, with turn-level bootstrap CIs "
                    "and a weight-sensitivity band. Pre-validation; not for deployment gating.")
    p.add_argument("study", nargs="?", help="study manifest (TOML); or give --manifest/--calls/--labels")
    p.add_argument("--manifest", nargs="+", metavar="M.json", help="manifest JSON(s): [{name, description}, ...] in "
                   "presentation order (several with a `manifest` column in the call log)")
    p.add_argument("--calls", metavar="CALLS.csv", help="call log: turn_id, tool_name, called (0/1)")
    p.add_argument("--labels", metavar="LABELS.csv", help="relevance labels: turn_id, tool_name, relevant (0/1)")
    p.add_argument("--turns", metavar="TURNS.csv", help="turn texts: turn_id, task (for domain S)")
    p.add_argument("--by", default=None, help="study only: comma-separated grouping columns (default: model)")
    p.add_argument("--invalid", choices=("exclude", "keep"), default="exclude",
                   help="study only: attempts without a valid call are excluded and counted (default) or kept as "
                        "turns with no call")
    p.add_argument("--unit", choices=("turn", "query"), default="turn",
                   help="study only: bootstrap/cluster unit (default turn; query keeps rotations and runs together)")
    p.add_argument("--scale", choices=("paper", "effect"), default="paper",
                   help="score shown first: the paper's (z-scores; default) or the effect-size one")
    add_n_resamples(p, 2000, "turn-level bootstrap replicates; 0 skips the intervals")
    p.add_argument("--n-draws", type=int, default=2000, metavar="N",
                   help="random domain-weight draws for the sensitivity band (default 2000)")
    p.add_argument("--ci", action="append", default=[], metavar="D=LO,HI",
                   help="published 95%% CI (HR_lower,HR_upper) of a domain for the inverse-variance worksheet; "
                        "repeat per domain (e.g. --ci L=1.2,1.8)")
    p.add_argument("--holdout", type=float, default=0.5, help="fraction of turns held out for S (default 0.5)")
    p.add_argument("--no-similarity", action="store_true",
                   help="do not embed texts (S and the similarity term of R are left out)")
    add_seed(p)
    add_confidence_level(p)
    p.add_argument("--brief", action="store_true",
                   help="text output without the per-domain breakdown (kept where PBS > 60, as the paper requires)")
    p.add_argument("--json", action="store_true", help="documented JSON on stdout (docs/tool_shadow.md)")
    p.add_argument("-o", "--out", metavar="FILE.html", help="also write a self-contained HTML report")
    add_aliases(p, "shadow")
    return p


def parse_ci(items) -> dict:
    """``["L=1.2,1.8", ...]`` -> ``{"L": (1.2, 1.8)}``; a malformed item raises ValueError naming it."""
    out = {}
    for item in items or []:
        try:
            d, rng = item.split("=", 1)
            lo, hi = (float(x) for x in rng.split(","))
        except ValueError:
            raise ValueError(f"--ci must look like D=LO,HI (e.g. L=1.2,1.8); got {item!r} instead.") from None
        out[d.strip()] = (lo, hi)
    return out


def _audit(args):
    from ..shadow import audit_from_study, read_shadow_audit

    if args.study and (args.manifest or args.calls or args.labels):
        raise ValueError("give either a study manifest or --manifest/--calls/--labels, not both.")
    if args.study:
        from ..io import read_study

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            study = read_study(args.study)
            return audit_from_study(study, by=args.by or "model", invalid=args.invalid, unit=args.unit), \
                {"study": study.name, "manifest": str(study.path)}
    missing = [o for o, v in (("--manifest", args.manifest), ("--calls", args.calls), ("--labels", args.labels))
               if not v]
    if missing:
        raise ValueError(f"without a study manifest, {', '.join(missing)} must be given.")
    if args.by:
        raise ValueError("--by applies to a study; a single harness audit is one group.")
    audit = read_shadow_audit(args.manifest, args.calls, args.labels, turns=args.turns)
    return audit, {"inputs": audit.source}


def compute_shadow(args, audit):
    """Score an audit with the CLI's settings."""
    from ..shadow import tool_shadow

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return tool_shadow(audit, scale=args.scale, cis=parse_ci(args.ci) or None, n_resamples=args.n_resamples,
                           n_weight_draws=args.n_draws, confidence_level=args.confidence_level,
                           holdout=args.holdout, encoder=False if args.no_similarity else None, rng=args.seed)


def run(args) -> int:
    """Run ``toolbias-stats shadow``; 0 on success, 2 on bad input (nothing written)."""
    from ..exceptions import SelectionLogError

    try:
        return _run(args)
    except (SelectionLogError, ValueError, FileNotFoundError) as exc:
        from .._output import term_safe

        print(term_safe(f"toolbias-stats shadow: error: {exc}"), file=sys.stderr)
        return 2


def _run(args) -> int:
    from .._text import format_shadow_text
    from ..report import render_shadow_report
    from ._common import version as _version
    from ._output import check_output, emit, named_inputs, study_inputs, term_safe, write_text
    from ._vocabulary import spelled

    inputs = []
    option = spelled(args, "out", "--out")
    if args.out:
        if Path(args.out).suffix.lower() not in (".html", ".htm"):
            raise ValueError(f"{option} must name an .html file; got {args.out!r} instead.")
        # never over the study's files or the audit's CSV/JSON inputs (issue 21)
        inputs = (study_inputs(args.study) if args.study else []) + named_inputs(
            ("--manifest input", args.manifest), ("--calls input", args.calls), ("--labels input", args.labels),
            ("--turns input", args.turns))
        check_output(args.out, inputs, option=option)
    audit, meta = _audit(args)
    result = compute_shadow(args, audit)
    if args.out:
        write_text(args.out, render_shadow_report(result), option=option, inputs=inputs)
    if args.json:
        print(json.dumps({**meta, "version": _version(), **result.to_dict()}, indent=2, allow_nan=False))
    else:
        emit(format_shadow_text(result, brief=args.brief))
        if args.out:
            print(f"wrote {term_safe(args.out)}")
    return 0
