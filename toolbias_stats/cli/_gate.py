"""``toolbias-stats check`` and ``compare``: the release gate (issue 39). Wiring only: the decisions are made in
:mod:`toolbias_stats.gate`; this module reads the studies, prints, and writes the JSON / JUnit / Markdown outputs.

Exit codes: 0 every decision passes, 1 a decision fails, 2 bad input (nothing written).
"""

from __future__ import annotations

import json
import warnings

__all__ = ["add_parsers", "run_check", "run_compare"]

HELP = {
    "check": "release gate: fail (exit 1) when a group's delta_API / delta_pos is beyond a threshold; JUnit, "
             "Markdown, JSON",
    "compare": "release gate for two versions: fail on a selection shift beyond a threshold or on tools whose "
               "share changed (Holm)",
}


def _outputs(p) -> None:
    p.add_argument("--json", action="store_true", help="the documented JSON on stdout (docs/cli.md)")
    p.add_argument("--junit", default=None, metavar="FILE",
                   help="also write JUnit XML: one test case per group x metric (every CI system displays it)")
    p.add_argument("--markdown", default=None, metavar="FILE",
                   help="also write a Markdown table (e.g. $GITHUB_STEP_SUMMARY; appended when FILE exists)")


def _common(p, *, threshold_help: str) -> None:
    from ..io import ENGINES
    from ._vocabulary import add_n_resamples, add_seed

    p.add_argument("--by", default="model", help="comma-separated grouping columns: one decision per group "
                                                 "(default: model)")
    p.add_argument("--rule", choices=("exceeds", "within"), default="exceeds",
                   help="exceeds (default): fail when the interval lies wholly above the threshold (evidence of "
                        "bias beyond it); within: pass only when it lies wholly below (evidence that it is small: "
                        "an equivalence test). " + threshold_help)
    p.add_argument("--confidence-level", type=float, default=0.95, metavar="P",
                   help="of the two-sided calibrated interval (default 0.95: each rule errs at most 2.5%%)")
    add_n_resamples(p, 2000, "query-bootstrap replicates")
    add_seed(p)
    p.add_argument("--engine", choices=ENGINES, default="auto", help="who reads and counts the logs (see `bias`)")


def add_parsers(subparsers) -> None:
    """Register ``check`` and ``compare`` on an ``argparse`` sub-parser collection."""
    from ._vocabulary import add_aliases

    c = subparsers.add_parser(
        "check", help=HELP["check"],
        description="One decision per group and metric on the calibrated interval of delta_API / delta_pos. Exit "
                    "0 when every group passes, 1 when any fails, 2 for bad input. See docs/guide/ci_gate.md.")
    c.add_argument("study", help="study manifest (TOML)")
    c.add_argument("--max-delta-api", type=float, default=None, metavar="X",
                   help="largest acceptable delta_API, in [0, 1]")
    c.add_argument("--max-delta-pos", type=float, default=None, metavar="Y",
                   help="largest acceptable delta_pos, in [0, 1]")
    _common(c, threshold_help="An interval across the threshold cannot tell: it passes with a warning under "
                              "exceeds and fails under within, and the planner says how many attempts would decide.")
    c.add_argument("--no-plan", action="store_true",
                   help="do not ask the planner how many attempts would decide a 'cannot tell'")
    _outputs(c)
    add_aliases(c, "check")

    m = subparsers.add_parser(
        "compare", help=HELP["compare"],
        description="Two versions of an agent (or prompts, or tool orders) on the same queries, paired when the "
                    "query ids match: the selection shift (tools and positions) against --max-shift on its "
                    "calibrated interval, and every tool's share tested for a change (Holm). Exit 0 / 1 / 2 as "
                    "for `check`. See docs/guide/ci_gate.md.")
    m.add_argument("base", help="study manifest (TOML) of the base version")
    m.add_argument("new", help="study manifest (TOML) of the new version")
    m.add_argument("--max-shift", type=float, required=True, metavar="Z",
                   help="largest acceptable shift (TV between the versions' selection distributions), in [0, 1]")
    _common(m, threshold_help="")
    m.add_argument("--n-permutations", type=int, default=2000, metavar="N",
                   help="label permutations for the per-tool tests (default 2000)")
    m.add_argument("--pairing", choices=("auto", "paired", "independent"), default="auto",
                   help="auto (default): paired when the versions share query ids")
    m.add_argument("--no-tool-tests", action="store_true",
                   help="decide on the shift only (no per-tool tests of 'no change')")
    _outputs(m)
    add_aliases(m, "compare")


def _prepare(args, manifests) -> None:
    """Refuse bad outputs and thresholds before any work (exit 2, nothing written)."""
    from ..gate import check_threshold
    from ._output import check_output, study_inputs

    for name in ("max_delta_api", "max_delta_pos", "max_shift"):
        value = getattr(args, name, None)
        if value is not None:
            check_threshold(name, value)
    if args.command == "check" and args.max_delta_api is None and args.max_delta_pos is None:
        raise ValueError("give at least one threshold: --max-delta-api or --max-delta-pos")
    inputs = [i for m in manifests for i in study_inputs(m)]
    outs = [o for o in (args.junit, args.markdown) if o]
    if len(set(outs)) < len(outs):
        raise ValueError(f"--junit and --markdown name the same file {outs[0]!r}")
    for option, out in (("--junit", args.junit), ("--markdown", args.markdown)):
        if out:
            check_output(out, inputs, option=option)


def _read(path, engine):
    from ..io import read_study

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return read_study(path, engine=engine)


def _finish(args, result, manifests) -> int:
    """Print the result, write the requested files, return the exit code (0 pass, 1 fail)."""
    from ..gate import junit_xml, markdown_summary, text_table
    from ._common import version
    from ._output import emit, study_inputs, write_text

    inputs = [i for m in manifests for i in study_inputs(m)]
    if args.junit:
        write_text(args.junit, junit_xml(result), option="--junit", inputs=inputs)
    if args.markdown:
        _write_markdown(args.markdown, markdown_summary(result), inputs)
    if args.json:
        out = {"manifests": [str(m) for m in manifests], "version": version(), **result.to_dict()}
        print(json.dumps(out, indent=2, allow_nan=False))
    else:
        emit(text_table(result))
        for w in result.warnings:
            if not any(w.startswith(d.name + ":") for d in result.decisions):
                emit(f"note: {w}")
    return result.exit_code


def _write_markdown(out, text, inputs) -> None:
    """Write (or append to: a job summary file collects several steps) the Markdown table, never over an input."""
    from pathlib import Path

    from ._output import write_text

    p = Path(out)
    if p.is_file() and p.stat().st_size:
        text = p.read_text(encoding="utf-8") + "\n" + text
    write_text(out, text, option="--markdown", inputs=inputs)


def run_check(args) -> int:
    """``toolbias-stats check``."""
    from ..gate import check_selection_bias

    _prepare(args, [args.study])
    study = _read(args.study, args.engine)
    result = check_selection_bias(study.counts, max_delta_api=args.max_delta_api, max_delta_pos=args.max_delta_pos,
                                  by=[b.strip() for b in args.by.split(",") if b.strip()], rule=args.rule,
                                  confidence_level=args.confidence_level, n_resamples=args.n_resamples,
                                  plan=not args.no_plan, rng=args.seed)
    return _finish(args, result, [args.study])


def run_compare(args) -> int:
    """``toolbias-stats compare``."""
    from ..gate import compare_selection

    _prepare(args, [args.base, args.new])
    # the comparison pairs queries row by row: both studies are read into rows (pandas engine)
    engine = "pandas" if args.engine == "auto" else args.engine
    base, new = _read(args.base, engine), _read(args.new, engine)
    result = compare_selection(base, new, max_shift=args.max_shift,
                               by=[b.strip() for b in args.by.split(",") if b.strip()], rule=args.rule,
                               confidence_level=args.confidence_level, n_resamples=args.n_resamples,
                               n_permutations=args.n_permutations, pairing=args.pairing,
                               tool_tests=not args.no_tool_tests, rng=args.seed)
    return _finish(args, result, [args.base, args.new])
