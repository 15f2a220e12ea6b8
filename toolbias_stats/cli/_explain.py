"""Sub-commands ``features`` and ``explain`` of ``toolbias-stats`` (wiring only: parse, call the API, print)."""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from pathlib import Path
from typing import cast

from ._common import fail, progress_wanted, version

__all__ = ["add_parsers", "run_features", "run_explain"]

#: --texts choices -> (tool description column, API description column) of the catalog.
TEXTS = {"catalog": ("tool_description", "api_description"),
         "toolbench": ("toolbench_tool_description", "toolbench_api_description")}
_OUT_SUFFIXES = {".csv": "csv", ".parquet": "parquet", ".pq": "parquet"}


def add_parsers(subparsers) -> None:
    """Add the ``features`` and ``explain`` sub-commands to an argparse sub-parser set."""
    from ._vocabulary import add_aliases, add_confidence_level, add_n_resamples, add_seed

    f = subparsers.add_parser("features", help="tool features (similarity, readability, age, ...) one row per tool")
    f.add_argument("study", help="study manifest (TOML)")
    _feature_args(f)
    f.add_argument("--center", action=argparse.BooleanOptionalAction, default=False,
                   help="cluster-mean-centred values (default here: --no-center, the raw values; `explain` "
                        "centres by default)")
    f.add_argument("-o", "--out", metavar="FILE", help="output .csv or .parquet (default: CSV on stdout)")
    f.add_argument("--json", action="store_true",
                   help="the feature table as JSON on stdout (study, reference_date, feature names, provenance, "
                        "one record per tool; docs/explain.md)")
    add_aliases(f, "features")

    e = subparsers.add_parser("explain", help="correlations, OLS, cross-validated forests/boosting, alignment")
    e.add_argument("study", help="study manifest (TOML)")
    e.add_argument("--feature-table", metavar="FILE",
                   help="feature table (CSV/JSON/Parquet) instead of computing features; default: the manifest's "
                        "`features` key, else computed. A table with selection_rate columns supplies the targets.")
    e.add_argument("--center", action=argparse.BooleanOptionalAction, default=True,
                   help="cluster-mean centring of the features (default here: --center; --no-center for none)")
    _feature_args(e)
    add_seed(e)
    add_confidence_level(e)
    add_n_resamples(e, 2000, "bootstrap replicates for the alignment intervals")
    e.add_argument("--trees", type=int, default=200, metavar="N", help="trees / boosting rounds (default 200)")
    e.add_argument("--repeats", type=int, default=5, metavar="N", help="repeats of GroupKFold (default 5)")
    e.add_argument("--importance-shuffles", type=int, default=10, metavar="N",
                   help="shuffles per feature and fold for permutation importance (default 10)")
    e.add_argument("--no-ensembles", action="store_true", help="skip the random forest and gradient boosting")
    e.add_argument("--jobs", type=int, default=1, metavar="N", help="threads per ensemble fit (default 1)")
    e.add_argument("--json", action="store_true", help="documented JSON on stdout (see docs/explain.md)")
    add_aliases(e, "explain")


def _feature_args(p):
    p.add_argument("--encoder", default=None,
                   help="sentence-transformers model name or folder (default: all-MiniLM-L6-v2, bundled, offline)")
    p.add_argument("--no-similarity", action="store_true", help="skip the two similarity features (no encoder)")
    p.add_argument("--reference-date", default=None, metavar="YYYY-MM-DD",
                   help="date ages are measured at (default: the manifest's reference_date, else today)")
    p.add_argument("--texts", choices=sorted(TEXTS), default="catalog",
                   help="description texts: the catalog's (default) or the ToolBench texts of api_meta.json "
                        "(what the BiasBusters authors used)")
    p.add_argument("--cache-dir", default=None, metavar="DIR",
                   help="embedding cache (default: $TOOLBIAS_CACHE_DIR or ~/.cache/toolbias_stats)")


def _read_study(path, lazy=False):
    from ..io import read_study

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return read_study(path, lazy=lazy)


def _compute_features(args, study):
    from ..report._build import study_features

    return study_features(study, encoder=False if args.no_similarity else args.encoder,
                          reference_date=args.reference_date, cache_dir=args.cache_dir,
                          text_columns=TEXTS[args.texts], progress=progress_wanted(args))


def run_features(args) -> int:
    """``toolbias-stats features STUDY.toml [--encoder ...] [--reference-date ...] [--out FILE]``.

    Writes one row per tool (identifiers, features, ``reference_date``) as CSV or Parquet by the
    extension of ``--out`` (CSV on stdout without it). Parquet files also carry the full
    provenance as JSON in the schema metadata key ``toolbias_stats``. Nothing is written when an
    error occurs (exit 2).
    """
    from .._output import check_output, spreadsheet_safe, study_inputs, term_safe
    from ..exceptions import SelectionLogError

    try:
        kind = None
        inputs = study_inputs(args.study)
        if args.out is not None:
            kind = _OUT_SUFFIXES.get(Path(args.out).suffix.lower())
            if kind is None:
                raise ValueError(f"--out must end in {', '.join(_OUT_SUFFIXES)}; got {args.out!r} instead")
            check_output(args.out, inputs)   # never over the catalog, a log or the manifest (issue 21)
        study = _read_study(args.study, lazy=True)   # features need the catalog and queries, not the logs
        feats, msgs = _compute_features(args, study)
        if args.center:
            feats = feats.center()
        table = feats.to_frame()
        table["reference_date"] = feats.reference_date.isoformat() if feats.reference_date else None
        if getattr(args, "json", False):
            _print_json(args, study, feats, table)
            if args.out is not None:
                _write_table(table, Path(args.out), cast(str, kind), feats.provenance, inputs=inputs)
        elif args.out is None:
            # formula cells neutralised, control characters from the catalog escaped (stdout may be a terminal)
            sys.stdout.write(term_safe(spreadsheet_safe(table).to_csv(index=False)))
        else:
            _write_table(table, Path(args.out), cast(str, kind), feats.provenance, inputs=inputs)
            print(f"wrote {args.out} ({len(table)} tools, {len(feats.feature_names)} features, reference date "
                  f"{table['reference_date'].iloc[0]})")
        for m in msgs:
            print(term_safe(f"note: {m}"), file=sys.stderr)
        return 0
    except (SelectionLogError, ValueError, FileNotFoundError) as exc:
        return fail("features", exc)


def _print_json(args, study, feats, table) -> None:
    """``features --json``: the table as records (raw values, as every --json), with its provenance."""
    out = {"study": study.name, "manifest": str(study.path), "version": version(),
           "reference_date": table["reference_date"].iloc[0] if len(table) else None,
           "centered": bool(args.center), "features": list(feats.feature_names), "out": args.out,
           "provenance": feats.provenance, "tools": json.loads(table.to_json(orient="records"))}
    print(json.dumps(out, indent=2, default=str))


def _write_table(table, out: Path, kind: str, provenance: dict, inputs=()) -> None:
    """CSV (formula cells neutralised) or Parquet (raw, provenance in the schema metadata), written atomically."""
    from .._output import atomic_path, spreadsheet_safe

    with atomic_path(out, inputs=inputs) as tmp:
        if kind == "csv":
            spreadsheet_safe(table).to_csv(tmp, index=False)
        else:
            import pyarrow as pa
            import pyarrow.parquet as pq

            arrow = pa.Table.from_pandas(table, preserve_index=False)
            meta = dict(arrow.schema.metadata or {})
            meta[b"toolbias_stats"] = json.dumps(provenance, default=str).encode("utf-8")
            pq.write_table(arrow.replace_schema_metadata(meta), tmp)


def run_explain(args) -> int:
    """``toolbias-stats explain STUDY.toml [--feature-table FILE] [--no-center] [--json]``.

    Features: ``--feature-table``, else the manifest's ``features`` key, else computed from the
    catalog and queries. Targets: the feature table's own ``selection_rate`` columns when it has
    them (its LLMs then define the analysis), else each model's selection rates in the study's
    logs (all runs pooled). Prints a summary, or with ``--json`` the documented JSON object.
    """
    from ..exceptions import SelectionLogError

    try:
        study = _read_study(args.study)
        result, notes, fpath = compute_explain(args, study)
        if args.json:
            out = {"study": study.name, "manifest": str(study.path), "version": version(),
                   "feature_source": str(fpath) if fpath else "computed", **result.to_dict()}
            out["warnings"] = list(dict.fromkeys(notes + out["warnings"]))
            print(json.dumps(out, indent=2))
        else:
            from .._output import term_safe

            print(term_safe(format_explain(result)))
            for m in dict.fromkeys(notes + result.warnings):
                print(term_safe(f"note: {m}"), file=sys.stderr)
        return 0
    except (SelectionLogError, ValueError, FileNotFoundError) as exc:
        return fail("explain", exc)


def compute_explain(args, study):
    """Features (``--feature-table``, the manifest's ``features`` key, or computed) -> ExplainResult.

    Returns ``(result, notes, feature_path_or_None)``; the library's
    :func:`~toolbias_stats.report._build.explain_study` with the parsed arguments.
    """
    from ..report._build import explain_study

    return explain_study(study, features=args.feature_table, center=args.center,
                         confidence_level=args.confidence_level, ensembles=not args.no_ensembles,
                         n_estimators=args.trees, n_repeats=args.repeats, n_permutations=args.importance_shuffles,
                         n_resamples=args.n_resamples, n_jobs=args.jobs, rng=args.seed,
                         encoder=False if args.no_similarity else args.encoder, reference_date=args.reference_date,
                         cache_dir=args.cache_dir, text_columns=TEXTS[args.texts], progress=progress_wanted(args))


def format_explain(result) -> str:
    """Plain-text summary of an ExplainResult (what ``explain`` prints; formatted in :mod:`toolbias_stats.report`)."""
    from .._text import format_explain_text

    return format_explain_text(result)
