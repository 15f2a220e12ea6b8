"""``toolbias-stats plan``: variance components of a study and the cheapest design for a target. Wiring only."""

from __future__ import annotations

import json
import warnings

__all__ = ["add_parser", "run"]


def _ints(text):
    if text is None:
        return None
    try:
        vals = [int(x) for x in str(text).split(",") if x.strip()]
    except ValueError:
        raise ValueError(f"expected comma-separated integers; got {text!r}") from None
    if not vals:
        raise ValueError(f"expected comma-separated integers; got {text!r}")
    return vals


def add_parser(subparsers):
    """Register ``plan`` on an ``argparse`` sub-parser collection."""
    from ..design import DESIGN_METRICS
    from ..io import ENGINES
    from ._vocabulary import add_aliases, add_confidence_level, add_n_resamples, add_seed

    p = subparsers.add_parser(
        "plan", help="is this study big enough? variance components, CI half-widths, MDEs and the cheapest design",
        description="Decompose the variance of delta_API / delta_pos (/ delta_model) into queries, rotations, runs "
                    "and attempt noise, then give the expected CI half-width, the minimum detectable delta against a "
                    "fair chooser and the minimum detectable shift between two conditions per design, and the "
                    "cheapest design (fewest LLM calls) that reaches a target. See docs/design.md.")
    p.add_argument("study", help="study manifest (TOML): the pilot")
    tgt = p.add_mutually_exclusive_group()
    tgt.add_argument("--target-width", type=float, default=None, metavar="W",
                     help="target CI half-width (±W) of delta for every metric")
    tgt.add_argument("--target-mde", type=float, default=None, metavar="D",
                     help="target minimum detectable delta against a fair chooser (at --power, level --alpha)")
    tgt.add_argument("--target-shift", type=float, default=None, metavar="D",
                     help="target minimum detectable change of delta between two conditions")
    p.add_argument("--metrics", default="delta_api,delta_pos",
                   help=f"comma-separated, of {', '.join(DESIGN_METRICS)} (default: delta_api,delta_pos)")
    p.add_argument("--by", default="model", help="comma-separated grouping columns (default: model)")
    p.add_argument("--queries", default=None, metavar="LIST", help="queries per cluster of the grid (default: "
                                                                   "10..2000 and the pilot's)")
    p.add_argument("--runs", default=None, metavar="LIST", help="runs of the grid (default: 1,2,3,5 and the pilot's)")
    p.add_argument("--rotations", default=None, metavar="LIST",
                   help="rotations per query of the grid (default: the pilot's)")
    p.add_argument("--cost-per-call", type=float, default=None, metavar="PRICE", help="price of one LLM call")
    p.add_argument("--correlation", type=float, default=0.0,
                   help="correlation of two conditions' estimation errors for the shift (0: independent queries; "
                        "positive: the same queries in both)")
    p.add_argument("--alpha", type=float, default=0.05, help="test level for MDE and MDS (default 0.05)")
    p.add_argument("--power", type=float, default=0.8, help="power for MDE and MDS (default 0.8)")
    add_confidence_level(p)
    p.add_argument("--n-draws", type=int, default=2000, metavar="N",
                   help="Monte-Carlo draws per design (default 2000)")
    add_n_resamples(p, 200, "query-bootstrap replicates for the component intervals; 0 skips them")
    p.add_argument("--max-queries", type=int, default=100_000, metavar="N",
                   help="largest queries per cluster the cheapest-design search considers")
    add_seed(p)
    p.add_argument("--engine", choices=ENGINES, default="auto", help="who reads and counts the logs (see `bias`)")
    p.add_argument("--json", action="store_true", help="documented JSON on stdout (docs/cli.md)")
    # issue 25: write the cheapest design as request files (the pilot's catalog and queries)
    p.add_argument("--out-dir", default=None, metavar="DIR",
                   help="write the cheapest design for the target as request files and a study.toml in DIR (the "
                        "pilot's catalog and queries; see `toolbias-stats design`)")
    from ._audit import write_design_args

    write_design_args(p, positional=False)
    add_aliases(p, "plan")
    return p


def _target(args):
    for kind, value in (("width", args.target_width), ("mde", args.target_mde), ("shift", args.target_shift)):
        if value is not None:
            return kind, value
    return "width", None


def compute(args, study, *, progress=False):
    """(VarianceComponents, StudyPlan) for the parsed arguments."""
    from ..design import plan_study, variance_components

    kind, value = _target(args)
    metrics = [m.strip() for m in args.metrics.split(",") if m.strip()]
    by = [b.strip() for b in args.by.split(",") if b.strip()]
    pilot = study.log if study.log is not None else study.counts
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        comps = variance_components(pilot, by=by, metrics=metrics, n_resamples=args.n_resamples,
                                    confidence_level=args.confidence_level, rng=args.seed)
        plan = plan_study(comps, target=value, target_kind=kind, metrics=metrics, queries=_ints(args.queries),
                          runs=_ints(args.runs), rotations=_ints(args.rotations),
                          confidence_level=args.confidence_level, alpha=args.alpha, power=args.power,
                          correlation=args.correlation, cost_per_call=args.cost_per_call,
                          max_queries=args.max_queries, n_draws=args.n_draws, rng=args.seed, progress=progress)
    return comps, plan


def run(args) -> int:
    from ..io import read_study
    from ._common import progress_wanted as _progress_wanted
    from ._common import version as _version
    from ._output import emit

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        study = read_study(args.study, engine=args.engine)
    comps, plan = compute(args, study, progress=_progress_wanted(args))
    if args.out_dir:
        from ._audit import write_planned_design

        write_planned_design(args, study, plan)
    if args.json:
        from .._json import interval_lists

        out = {"study": study.name, "manifest": str(study.path), "version": _version(), **plan.to_dict(),
               "components": comps.to_dict()}
        print(json.dumps(interval_lists(out), indent=2, allow_nan=False))   # intervals as [low, high] (issue 36)
    else:
        from .._text import format_plan_text

        emit(format_plan_text(comps, plan))
    return 0
