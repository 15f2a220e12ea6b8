"""``toolbias-stats toolsense score|agreement|baselines|report``: ToolSense diagnostics. Wiring only."""

from __future__ import annotations

import json
import sys
import time
import warnings
from pathlib import Path

__all__ = ["add_parser", "run"]


def _ks(text):
    try:
        ks = sorted({int(x) for x in str(text).split(",") if x.strip()})
    except ValueError:
        raise ValueError(f"--k must be comma-separated positive integers; got {text!r} instead.") from None
    if not ks or ks[0] < 1:
        raise ValueError(f"--k must be comma-separated positive integers; got {text!r} instead.")
    return ks


def add_parser(subparsers):
    """Register ``toolsense`` and its sub-commands; returns its parser."""
    from ._vocabulary import add_aliases, add_confidence_level, add_n_resamples, add_seed

    p = subparsers.add_parser("toolsense", help="ToolSense diagnostics: recall, Internalization Score, probes, "
                                                "annotator agreement, offline baselines (docs/toolsense.md)")
    sub = p.add_subparsers(dest="toolsense_command", required=True)

    def common(sp, name):
        add_n_resamples(sp, 2000, "bootstrap replicates; 0 skips the intervals")
        add_seed(sp)
        add_confidence_level(sp)
        add_aliases(sp, "toolsense " + name)

    s = sub.add_parser("score", help="Rc@k, Rf@k, IS@k per tier (rrb) or accuracy vs chance (mcq, qa)")
    s.add_argument("--benchmark", choices=("rrb", "mcq", "qa"), required=True,
                   help="rrb (retrieval: recall at k per tier), mcq or qa (probe accuracy against chance)")
    s.add_argument("--predictions", required=True, action="append", metavar="[NAME=]P.jsonl",
                   help="prediction JSONL; repeat (NAME=path) to compare configurations on the same queries")
    s.add_argument("--benchmark-file", default=None, metavar="FILE",
                   help="benchmark JSONL (default: the vendored file)")
    s.add_argument("--k", default="1,5,10,50", help="comma-separated k (rrb; default 1,5,10,50)")
    s.add_argument("--ci-method", choices=("bca", "percentile"), default="bca",
                   help="bootstrap interval: bca (bias-corrected and accelerated, default) or percentile")
    s.add_argument("--json", action="store_true", help="documented JSON on stdout (docs/cli.md)")
    common(s, "score")

    a = sub.add_parser("agreement", help="Fleiss' kappa, Gwet's AC1, Krippendorff's alpha with item-bootstrap CIs")
    a.add_argument("annotations", help="CSV with item_id, rater, label (+ grouping columns)")
    a.add_argument("--by", default=None,
                   help="comma-separated nested grouping columns (default: benchmark,tier where present)")
    a.add_argument("--json", action="store_true", help="documented JSON on stdout (docs/cli.md)")
    common(a, "agreement")

    b = sub.add_parser("baselines", help="BM25 and MiniLM dense Recall@k on the vendored RRB (offline)")
    b.add_argument("--benchmark-file", default=None, metavar="FILE",
                   help="RRB benchmark JSONL (default: the vendored file)")
    b.add_argument("--k", default="1,5,10,50", help="comma-separated k (default 1,5,10,50)")
    b.add_argument("--methods", default="bm25,dense", help="comma-separated: bm25, dense (default both)")
    b.add_argument("--encoder", default=None, help="sentence-transformers model folder (default: bundled MiniLM)")
    b.add_argument("--json", action="store_true", help="documented JSON on stdout (docs/cli.md)")
    common(b, "baselines")

    r = sub.add_parser("report", help="self-contained HTML report of ToolSense diagnostics")
    r.add_argument("-o", "--out", required=True, metavar="FILE", help="output HTML file")
    r.add_argument("--predictions", action="append", default=[], metavar="[NAME=]P.jsonl", help="RRB predictions")
    r.add_argument("--mcq", action="append", default=[], metavar="[NAME=]P.jsonl", help="MCQ predictions")
    r.add_argument("--qa", action="append", default=[], metavar="[NAME=]P.jsonl", help="QA predictions")
    r.add_argument("--annotations", default=None, metavar="FILE.csv", help="annotation CSV")
    r.add_argument("--baselines", action="store_true", help="add the offline BM25 / MiniLM baselines")
    r.add_argument("--k", default="1,5,10,50", help="comma-separated k of the recall tables (default 1,5,10,50)")
    common(r, "report")
    return p


def run(args) -> int:
    """Run a ``toolsense`` sub-command; 0 on success, 2 on bad input."""
    from ..exceptions import SelectionLogError

    try:
        return {"score": _score, "agreement": _agreement, "baselines": _baselines,
                "report": _report}[args.toolsense_command](args)
    except (SelectionLogError, ValueError, FileNotFoundError, ImportError) as exc:
        from .._output import term_safe

        print(term_safe(f"toolbias-stats toolsense {args.toolsense_command}: error: {exc}"), file=sys.stderr)
        return 2


def _named(specs):
    out = {}
    for spec in specs:
        name, sep, path = spec.partition("=")
        if not sep or not name or Path(spec).exists():
            name, path = (Path(spec).stem if len(specs) > 1 else "model"), spec
        if name in out:
            raise ValueError(f"configuration name {name!r} is given twice; use NAME=path to name them.")
        out[name] = path
    return out


def _dump(obj):
    print(json.dumps(obj, indent=2, allow_nan=False))


def _retrieval(args, specs, ks):
    from ..toolsense import read_rrb, read_rrb_predictions, retrieval_recall

    bench = read_rrb(getattr(args, "benchmark_file", None))
    preds = {name: read_rrb_predictions(path, bench, k=ks) for name, path in _named(specs).items()}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = retrieval_recall(bench, preds, k=ks, n_resamples=args.n_resamples, rng=args.seed,
                               confidence_level=args.confidence_level, ci_method=getattr(args, "ci_method", "bca"))
    return bench, preds, res


def _probe(kind, path, args, bench_file=None):
    from ..toolsense import probe_accuracy, read_probe, read_probe_predictions

    bench = read_probe(kind, bench_file)
    return probe_accuracy(bench, read_probe_predictions(path, bench), confidence_level=args.confidence_level)


def _score(args) -> int:
    from .._text import format_probe_text, format_retrieval_text
    from ._common import version as _version
    from ._output import emit

    if args.benchmark == "rrb":
        from ..toolsense import compare_configurations

        ks = _ks(args.k)
        _, _, res = _retrieval(args, args.predictions, ks)
        cmp = None
        if len(res.configs) > 1:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                cmp = compare_configurations(res, tier=["easy", "medium", "hard", "all"])
        if args.json:
            out = {"version": _version(), "benchmark": "rrb", "seed": args.seed, **res.to_dict()}
            if cmp is not None:
                out["comparisons"] = cmp.to_dict()["comparisons"]
            _dump(out)
        else:
            emit(format_retrieval_text(res, cmp))
        return 0
    named = _named(args.predictions)
    results = {n: _probe(args.benchmark, p, args, args.benchmark_file) for n, p in named.items()}
    if args.json:
        if len(results) == 1:
            _dump({"version": _version(), **next(iter(results.values())).to_dict()})
        else:
            _dump({"version": _version(), "configurations": [{"name": n, **r.to_dict()} for n, r in results.items()]})
    else:
        emit(format_probe_text(results))
    return 0


def _annotation_result(path, args, by=None):
    from ..toolsense import agreement, read_annotations

    ann = read_annotations(path)
    if by is None:
        by = [c for c in ("benchmark", "tier") if c in ann.columns]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return agreement(ann, by=by, n_resamples=args.n_resamples, rng=args.seed,
                         confidence_level=args.confidence_level)


def _agreement(args) -> int:
    from .._text import format_agreement_text
    from ._common import version as _version
    from ._output import emit

    res = _annotation_result(args.annotations, args, args.by)
    if args.json:
        _dump({"version": _version(), "annotations": str(args.annotations), **res.to_dict()})
    else:
        emit(format_agreement_text(res))
    return 0


def _baseline_result(args, ks):
    from ..toolsense import read_rrb, retrieval_baselines

    methods = [m.strip() for m in getattr(args, "methods", "bm25,dense").split(",") if m.strip()]
    encoder = None
    if "dense" in methods and getattr(args, "encoder", None):
        from ..features import Encoder

        encoder = Encoder(args.encoder)
    bench = read_rrb(getattr(args, "benchmark_file", None))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return retrieval_baselines(bench, methods=methods, k=ks, encoder=encoder, n_resamples=args.n_resamples,
                                   confidence_level=args.confidence_level, rng=args.seed)


def _baselines(args) -> int:
    import os
    import platform

    from .._text import format_baselines_text
    from ._common import version as _version
    from ._output import emit

    t0 = time.perf_counter()
    res = _baseline_result(args, _ks(args.k))
    total = time.perf_counter() - t0
    if args.json:
        _dump({"version": _version(), "seed": args.seed, "seconds_total": total,
               "machine": f"{platform.machine()}, {os.cpu_count()} CPU(s), {platform.python_implementation()} "
                          f"{platform.python_version()}", **res.to_dict()})
    else:
        emit(format_baselines_text(res))
        print(f"\ntotal {total:.1f} s")
    return 0


def _report(args) -> int:
    from ..report._toolsense_html import render_toolsense_report
    from ._output import check_output, named_inputs

    # every file this command reads; the report may not overwrite any of them (issue 21)
    inputs = named_inputs(*[(f"--{kind} input", _named(getattr(args, kind)).values())
                            for kind in ("predictions", "mcq", "qa")], ("--annotations input", args.annotations))
    check_output(args.out, inputs)
    ks = _ks(args.k)
    retrieval = comparisons = None
    if args.predictions:
        from ..toolsense import compare_configurations

        _, _, retrieval = _retrieval(args, args.predictions, ks)
        if len(retrieval.configs) > 1:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                comparisons = compare_configurations(retrieval)
    probes = {}
    for kind in ("mcq", "qa"):
        for name, path in _named(getattr(args, kind)).items():
            probes[(kind, name)] = _probe(kind, path, args)
    agree = _annotation_result(args.annotations, args) if args.annotations else None
    base = _baseline_result(args, ks) if args.baselines else None
    if retrieval is None and not probes and agree is None and base is None:
        raise ValueError("nothing to report: give --predictions, --mcq, --qa, --annotations or --baselines.")
    from ._output import write_report

    write_report(args.out, render_toolsense_report(retrieval=retrieval, comparisons=comparisons, probes=probes,
                                                   agreement=agree, baselines=base), inputs=inputs)
    return 0
