"""Sub-commands of ``toolbias-stats``: validate, bias, report. No statistics here, only wiring."""

from __future__ import annotations

import argparse
import json
import os
import sys
import warnings

from ._common import Stages, progress_wanted, version

__all__ = ["main", "build_parser"]


# Every sub-command in --help order with its one-line help, grouped by the module that adds its full parser.
# The top-level parser lists them all but builds (and imports) only the invoked command's group, so that
# `toolbias-stats --help` / `--version` import no pandas, scipy or model code (issue 23). A test checks that
# these lines match the full parsers' help.
_COMMANDS = {
    "validate": "read a study manifest and summarise every file (rows by status, ...)",
    "bias": "delta_API / delta_pos / delta_model per group with CIs",
    "report": "self-contained HTML report",
    "features": "tool features (similarity, readability, age, ...) one row per tool",
    "explain": "correlations, OLS, cross-validated forests/boosting, alignment",
    "bayes": "hierarchical Bayesian model of API and position effects (NumPyro / PyMC)",
    "shift": "compare levels of a design column with a base level (shift, change in bias, per-tool shares, trends)",
    "subsets": "subset-selection quality (precision, recall, exact match; Table 2)",
    "toolsense": "ToolSense diagnostics: recall, Internalization Score, probes, annotator agreement, offline "
                 "baselines (docs/toolsense.md)",
    "shadow": "TOOL-SHADOW v1 Positional Bias Score of a harness (pre-validation; not for deployment gating)",
    "plan": "is this study big enough? variance components, CI half-widths, MDEs and the cheapest design",
    "choice": "multiple-choice / judge position bias: delta_pos, accuracy by gold position, bias-corrected "
              "accuracy, swapped-pair consistency",
    "design": "counterbalanced design -> provider request files and the study.toml that reads results",
    "run": "send a design folder's requests to an OpenAI-compatible endpoint (resumable)",
    "choice-model": "conditional / mixed logit over the lists shown: tool worths, position effects, features",
    "check": "release gate: fail (exit 1) when a group's delta_API / delta_pos is beyond a threshold; JUnit, "
             "Markdown, JSON",
    "compare": "release gate for two versions: fail on a selection shift beyond a threshold or on tools whose "
               "share changed (Holm)",
}
# (commands, module in this package or None for this one, function adding their parsers)
_GROUPS = (
    (("validate", "bias", "report"), None, "_add_core_parsers"),
    (("features", "explain"), "_explain", "add_parsers"),
    (("bayes",), "_bayes", "add_parser"),
    (("shift", "subsets"), "_experiments", "add_parsers"),
    (("toolsense",), "_toolsense", "add_parser"),
    (("shadow",), "_shadow", "add_parser"),
    (("plan",), "_plan", "add_parser"),
    (("choice",), "_choice", "add_parser"),
    (("design", "run"), "_audit", "add_parsers"),
    (("choice-model",), "_choicemodel", "add_parser"),
    (("check", "compare"), "_gate", "add_parsers"),
)


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The ``toolbias-stats`` parser: every sub-command in full, or only ``command`` in full (others listed)."""
    import importlib

    p = argparse.ArgumentParser(prog="toolbias-stats", description="Audit tool-selection bias in LLM agents.")
    p.add_argument("--version", action="version", version=version())
    sub = p.add_subparsers(dest="command", required=True)
    for names, module, adder in _GROUPS:
        if command is None or command in names:
            owner = sys.modules[__name__] if module is None else importlib.import_module("." + module, __package__)
            getattr(owner, adder)(sub)
        else:
            for name in names:
                sub.add_parser(name, help=_COMMANDS[name])
    return p


def _command_in(argv) -> str:
    """The sub-command named on a command line ('' when none is): the first argument that is not an option."""
    for a in argv:
        if not a.startswith("-"):
            return a
    return ""


#: ``_resampling.BOOTSTRAP_WEIGHTS`` and ``io.ENGINES``, spelt out so that building the parser of ``validate`` imports
#: no SciPy and no reader (issue 37; a test checks that they agree).
BOOTSTRAP_WEIGHTS = ("multinomial", "poisson")
ENGINES = ("auto", "pandas", "duckdb", "dask")


def _add_core_parsers(sub) -> None:
    """validate, bias, report."""
    from ._vocabulary import add_aliases, add_confidence_level, add_n_resamples, add_seed

    def engine_args(sp):
        sp.add_argument("--engine", choices=ENGINES, default="auto",
                        help="who reads and counts the logs: duckdb (table files in place, out of core), dask "
                             "(partitioned Parquet on a cluster), pandas (in memory, every format); default auto: "
                             "duckdb for table studies, else pandas")
        sp.add_argument("--scheduler", metavar="ADDRESS", default=None,
                        help="dask scheduler address for --engine dask (default: a LocalCluster of 2 workers)")

    v = sub.add_parser("validate", help=_COMMANDS["validate"])
    v.add_argument("study", help="study manifest (TOML)")
    v.add_argument("--json", action="store_true", help="machine-readable output")
    engine_args(v)

    def stats_args(sp):
        sp.add_argument("study", help="study manifest (TOML)")
        sp.add_argument("--by", default="model", help="comma-separated grouping columns (default: model)")
        add_n_resamples(sp, 2000, "query-bootstrap replicates; 0 skips CIs and the bias correction")
        sp.add_argument("--null", type=int, default=2000, metavar="N",
                        help="Monte-Carlo draws of the uniform chooser for p-values (default 2000)")
        add_seed(sp)
        add_confidence_level(sp)
        sp.add_argument("--ci-method", choices=("bca", "percentile"), default="bca",
                        help="bootstrap interval: bca (bias-corrected and accelerated, default) or percentile")
        sp.add_argument("--position", choices=("cluster_rank", "list"), default="cluster_rank",
                        help="delta_pos on the rank among the cluster's tools as shown (default) or on the position "
                             "in the whole list offered")
        sp.add_argument("--cluster-corrected", action="store_true",
                        help="also bias-correct every single cluster (slower; cluster averages always are)")
        sp.add_argument("--bootstrap-weights", choices=BOOTSTRAP_WEIGHTS, default="multinomial",
                        help="query weights of a replicate: multinomial (classical) or poisson (streaming)")
        engine_args(sp)

    b = sub.add_parser("bias", help=_COMMANDS["bias"])
    stats_args(b)
    b.add_argument("--json", action="store_true", help="documented JSON on stdout (see docs/cli.md)")
    b.add_argument("--plugin-ci", action="store_true",
                   help="also show the plug-in's bootstrap interval in the text table (near uniformity it covers "
                        "neither the true delta nor E[plug-in]; the JSON always has it as ci)")
    add_aliases(b, "bias")

    r = sub.add_parser("report", help=_COMMANDS["report"])
    stats_args(r)
    r.add_argument("-o", "--out", metavar="FILE", help="output HTML file (required unless --out-dir)")
    r.add_argument("--out-dir", metavar="DIR", help="output folder of --format qmd (implies --format qmd)")
    r.add_argument("--format", choices=("html", "qmd"), default=None,
                   help="html: the self-contained page in --out (default); qmd: a ready-to-render copy of the "
                        "parameterised Quarto template with this study's parameters and data, in the folder "
                        "--out-dir (default with --out-dir)")
    r.add_argument("--explain", action="store_true",
                   help="add the 'Explaining selection' section (features as for `explain` with its defaults)")
    r.add_argument("--choice-model", action="store_true",
                   help="add the choice-model section (conditional logit per model; the `choice-model` defaults)")
    r.add_argument("--bayes", action="store_true",
                   help="add the hierarchical Bayesian model section (the `bayes` command's default fit)")
    r.add_argument("--experiments", action=argparse.BooleanOptionalAction, default=None,
                   help="add the Experiments section (shifts between levels; default: on when the study has "
                        "more than one condition or a numeric sweep column)")
    r.add_argument("--plan", action="store_true",
                   help="add the 'Is this study big enough?' section (variance components, achieved CI half-widths "
                        "and MDEs; the `plan` command's defaults)")
    r.add_argument("--shadow", action="store_true",
                   help="add the TOOL-SHADOW Positional Bias Score section (the `shadow` command's defaults)")
    add_aliases(r, "report")


def main(argv=None) -> int:
    """Run ``toolbias-stats``; returns the exit code (0 ok, 2 bad input or output, 130 Ctrl-C, 141 closed pipe)."""
    from ._common import stdout_failed, stdout_size

    size = stdout_size()
    try:
        code = _main(argv)
        sys.stdout.flush()   # a closed pipe (`... | head`) fails here, inside the handler below
        return code
    except KeyboardInterrupt:   # Ctrl-C: writers have removed their temporary files; no traceback
        return 130
    except BrokenPipeError:   # the reader of stdout went away (`--json | head`): end quietly
        _silence_stdout()
        return 141
    except OSError as exc:   # stdout on a full disk (`--json > file`); files go through _output (OutputError)
        code = stdout_failed(_command_in(sys.argv[1:] if argv is None else list(argv)), exc, size)
        _silence_stdout()
        return code


def _silence_stdout() -> None:
    """Point stdout at /dev/null so that the interpreter's final flush does not fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):
        pass


def _main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(_command_in(argv))
    args = parser.parse_args(argv)
    from ..exceptions import SelectionLogError

    commands = {"validate": _validate, "bias": _bias, "report": _report,
                "features": _runner("_explain", "run_features"),
                "explain": _runner("_explain", "run_explain"), "bayes": _runner("_bayes", "run"),
                "toolsense": _runner("_toolsense", "run"), "shadow": _runner("_shadow", "run"),
                "shift": _run_experiments("run_shift"), "subsets": _run_experiments("run_subsets"), "plan": _run_plan}
    commands["choice"] = _run_choice
    commands.update({"design": _runner("_audit", "run_design"), "run": _runner("_audit", "run_run")})
    commands["choice-model"] = _run_choicemodel
    commands.update({"check": _runner("_gate", "run_check"), "compare": _runner("_gate", "run_compare")})
    try:
        return commands[args.command](args)
    except (SelectionLogError, ValueError, FileNotFoundError) as exc:
        from .._output import term_safe

        text, note = str(exc), ""
        if "Out of Memory Error" in text and type(exc).__name__ != "MemoryLimitError":
            text = _duckdb_oom(text)   # DuckDB's own advice is SQL (SET threads ...), over several lines
        if ("Out of Memory Error" in text or type(exc).__name__ == "MemoryLimitError") and (cap := _cap_note()):
            note = f" ({cap})"
        print(term_safe(f"toolbias-stats {args.command}: error: {text}{note}"), file=sys.stderr)
        return 2
    except Exception as exc:   # issue 37: NumPy's MemoryError, DuckDB's out-of-memory outside the counting
        if not isinstance(exc, MemoryError) and type(exc).__name__ != "OutOfMemoryException":
            raise
        from .._memory import out_of_memory_message
        from .._output import term_safe

        detail = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else type(exc).__name__
        print(term_safe(f"toolbias-stats {args.command}: error: {out_of_memory_message(detail)}"), file=sys.stderr)
        return 2


def _duckdb_oom(text: str) -> str:
    """Issue 37: DuckDB's out-of-memory met while reading a file (its limit reached, or a full spill folder), as one
    line naming the limit, the spill folder and what to change."""
    from ..io.engines._duckdb import MEMORY_ENV, memory_limit_setting, spill_folder

    return (f"{text.strip().splitlines()[0]} (DuckDB's memory limit is {memory_limit_setting()}; what does not fit "
            f"spills to {spill_folder()}): set {MEMORY_ENV} to a larger limit (e.g. {MEMORY_ENV}=4GB), free space in "
            "that folder (or point TMPDIR elsewhere), or use --engine pandas")


def _cap_note() -> str:
    from .._memory import address_space_limit

    limit = address_space_limit()
    return "" if limit is None else (f"the process also runs under an address-space limit of {limit / 1e9:.1f} GB "
                                     "(ulimit -v / prlimit --as): raise it or lower the DuckDB limit with it")


def _read(args):
    from ..io import read_study

    # Point estimates need counts per cluster only: far less memory for a large log.
    level = "cluster" if getattr(args, "n_resamples", 1) == 0 and args.command == "bias" else "query"
    # `bias` counts by its --by columns only (issue 37: not by every design cell); the rows are checked on all of
    # them all the same. Every other command reads every column.
    count_by = [c.strip() for c in args.by.split(",") if c.strip()] if args.command == "bias" else None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return read_study(args.study, engine=args.engine, level=level, scheduler=args.scheduler,
                          cells=args.command != "bias", progress=progress_wanted(args), count_by=count_by)


def _validate(args) -> int:
    from .._text import format_validation
    from ..choice import is_choice_manifest
    from ._output import emit

    if is_choice_manifest(args.study):   # a multiple-choice / judge study (issue 36)
        from ._choice import run_validate

        return run_validate(args)
    study = _read(args)
    counts = study.counts
    diagnostics = _status_in_order(counts.diagnostics)
    import pandas as pd

    if study.has_rows:
        summary = study.log.summary(by=["source_file", "model", "run", "condition"])
    else:  # counted in place: rows by status per file come from the engine
        summary = pd.DataFrame([{"source_file": f, "total": d["rows"], **d.get("status", {})} if "attempts" not in d
                                else {"source_file": f, "total": d["attempts"], **d["attempt_status"],
                                      "table_rows": d["rows"]}   # aggregated file (count column): attempts
                                for f, d in diagnostics.items()])
    totals = counts.status_totals()
    components = _components(study)
    unassigned = _unassigned(counts)
    if args.json:
        out = {
            "study": study.name,
            "engine": study.engine,
            "rows": counts.n_rows,
            "by_status": {k: v for k, v in sorted(totals.items(), key=lambda kv: -kv[1]) if v},
            "files": json.loads(summary.to_json(orient="records")),
            "clusters": sorted(counts.table["cluster_id"].dropna().unique().tolist(), key=_natural),
            "unassigned": unassigned,   # issue 36: rows no cluster could be given (kept, excluded by status)
            "models": sorted(counts.table["model"].unique().tolist()),
            "runs": sorted(int(r) for r in counts.table["run"].unique()),
            "design": {**counts.design.to_dict(), "n_units": counts.n_units},   # issue 35
            "diagnostics": diagnostics,
            "catalog_defaults": list(study.catalog.defaulted),
            "cluster_source": study.settings.get("cluster_source", {"kind": "catalog",
                                                                    "detail": str(study.catalog.source)}),
        }
        out["comparison_graph"] = components if isinstance(components, dict) else {"unavailable": components}
        print(json.dumps(out, indent=2, default=str))
    else:
        emit(format_validation(study, summary))
        emit(_unassigned_text(unassigned, totals))
        if isinstance(components, dict):
            from .._text import format_components_text

            emit("\n" + format_components_text(components))
        else:
            emit(f"\nComparison graph (choice model): not available: {components}")
    return 0


def _status_in_order(diagnostics: dict) -> dict:
    """The diagnostics with the status counts of every file an engine counted in place (DuckDB, Dask) in the
    schema's order of statuses (``ok``, ``no_call``, ... then any other, sorted): the engines group without an
    order, so the keys of ``status`` / ``attempt_status`` came in an order that could change between runs.
    Readers' own counts (pandas) keep their order (first seen)."""
    from .._schema import STATUSES

    rank = {s: i for i, s in enumerate(STATUSES)}
    out = {}
    for f, d in diagnostics.items():
        if isinstance(d, dict) and d.get("engine") in ("duckdb", "dask"):
            d = dict(d)
            for key in ("status", "attempt_status"):
                if isinstance(d.get(key), dict):
                    d[key] = dict(sorted(d[key].items(), key=lambda kv: (rank.get(kv[0], len(rank)), str(kv[0]))))
        out[f] = d
    return out


def _unassigned(counts) -> dict:
    """Attempts without a cluster (issue 36: an attempt no tool list, call or cluster_id assigns; kept as a row
    with ``cluster_id`` missing and excluded by its status): ``{"rows": n, "by_status": {status: n}}``."""
    from .._schema import STATUSES

    table = counts.table
    none = table["cluster_id"].isna().to_numpy()
    by_status = {s: int(table.loc[none, f"n_{s}"].sum()) for s in STATUSES}
    by_status = {s: n for s, n in sorted(by_status.items(), key=lambda kv: -kv[1]) if n}
    return {"rows": sum(by_status.values()), "by_status": by_status}


def _unassigned_text(unassigned: dict, totals: dict) -> str:
    """The validate line counting the attempts without a cluster and the off-cluster calls."""
    n = unassigned["rows"]
    detail = f" (excluded: {', '.join(f'{s} {k}' for s, k in unassigned['by_status'].items())})" if n else ""
    return (f"unassigned (no cluster could be decided): {n} attempt(s){detail}; "
            f"off_cluster (a call to an offered tool outside the attempt's cluster): {totals.get('off_cluster', 0)} "
            "attempt(s) in all")


def _components(study):
    """Connected components of the comparison graph (dict), or the reason they are unavailable (str)."""
    from ..exceptions import SelectionLogError
    from ..report._choicemodel import components_summary

    try:
        # the counts' cells (every list shown with its choices) give the components of the rows at a fraction of
        # the cost (issue 37: a third of `validate` on 100,000 requests); the rows when there are no cells
        counts = study.counts
        return components_summary(counts if counts.cells is not None or not study.has_rows else study.log)
    except (ValueError, SelectionLogError) as exc:
        return str(exc)


def _compute(args, study):
    from ..metrics import selection_bias

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return selection_bias(study.counts, by=args.by, n_resamples=args.n_resamples, n_null=args.null,
                              rng=args.seed, confidence_level=args.confidence_level, ci_method=args.ci_method,
                              cluster_corrected=args.cluster_corrected, bootstrap=args.bootstrap_weights,
                              progress=progress_wanted(args), position=getattr(args, "position", "cluster_rank"))


def _bias(args) -> int:
    from .._text import format_bias_table
    from ._output import emit

    study = _read(args)
    result = _compute(args, study)
    if args.json:
        out = {"study": study.name, "manifest": str(study.path), "version": version(), **result.to_dict()}
        if study.settings.get("cluster_source"):
            out["cluster_source"] = study.settings["cluster_source"]
        from .._json import dumps_indented

        print(dumps_indented(out))   # json.dumps(out, indent=2), the same text (issue 37: 58 MB at 2,000 clusters)
    else:
        emit(format_bias_table(result, plugin_ci=args.plugin_ci))
        cs = study.settings.get("cluster_source")
        if cs:   # clusters declared, read from a clusters_file or inferred (issue 13)
            emit(f"\nClusters: {cs['detail']}")
    return 0


def _report(args) -> int:
    from ..exceptions import ConvergenceWarning
    from ..report import build_report, default_sections
    from ._output import check_output, study_inputs, write_report

    _report_target(args)
    # refused before any work: an output that is an input (or a folder, a read-only file, ...); issue 21
    inputs = study_inputs(args.study)
    check_output(args.target, inputs, kind="folder" if args.format == "qmd" else "file", option=args.target_option)
    if args.format == "qmd":
        return _report_qmd(args)
    stage = Stages(args)
    stage(f"reading {args.study}")
    study = _read(args)
    flags = {"explain": args.explain, "choice-model": args.choice_model, "bayes": args.bayes,
             "shadow": args.shadow, "plan": args.plan}
    sections = [name for name, on in flags.items() if on]
    if args.experiments or (args.experiments is None and "experiments" in default_sections(study)):
        sections.append("experiments")
    shown = warnings.showwarning

    def loud(message, category, *rest, **kw):   # a Bayesian fit that did not converge: one plain line
        if issubclass(category, ConvergenceWarning) and str(message).startswith("Bayesian fit"):
            print(f"toolbias-stats report: WARNING: {message}", file=sys.stderr)
        else:
            shown(message, category, *rest, **kw)

    with warnings.catch_warnings():
        warnings.showwarning = loud
        warnings.simplefilter("always", ConvergenceWarning)
        page = build_report(study, sections=sections, by=args.by, n_resamples=args.n_resamples, n_null=args.null,
                            rng=args.seed, confidence_level=args.confidence_level, ci_method=args.ci_method,
                            position=args.position, cluster_corrected=args.cluster_corrected,
                            bootstrap=args.bootstrap_weights, progress=progress_wanted(args), stage=stage)
    write_report(args.out, page, inputs=inputs)
    stage(f"wrote {args.out}")
    return 0


def _report_target(args) -> None:
    """Where ``report`` writes: ``--out FILE`` (html) or ``--out-dir DIR`` (qmd); the older ``--format qmd --out
    DIR`` still names a folder (with a note). Sets ``args.format``, ``args.target`` and ``args.target_option``."""
    if args.out is not None and args.out_dir is not None:
        raise ValueError("give --out FILE (html) or --out-dir DIR (qmd), not both")
    if args.out_dir is not None:
        if args.format == "html":
            raise ValueError("--out-dir names the folder of --format qmd; the html page goes to --out FILE")
        args.format, args.target, args.target_option = "qmd", args.out_dir, "--out-dir"
        return
    if args.out is None:
        raise ValueError("the report needs an output: --out FILE.html, or --out-dir DIR for --format qmd")
    if args.format == "qmd":
        print("toolbias-stats report: note: --format qmd --out DIR is deprecated; use --out-dir DIR (same meaning)",
              file=sys.stderr)
    args.format = args.format or "html"
    args.target, args.target_option = args.out, "--out"


def _report_qmd(args) -> int:
    from ..report import export_quarto

    if args.explain or args.bayes or args.shadow or getattr(args, "plan", False):
        raise ValueError("--format qmd renders the bias sections; --explain, --bayes, --shadow and --plan are "
                         "HTML-only for now")
    path = export_quarto(args.study, args.target, rng=args.seed, n_resamples=args.n_resamples, by=args.by,
                         option=args.target_option)
    print(f"wrote {path} (render with `quarto render {path}`; without Quarto, "
          "toolbias_stats.report.qmd_to_notebook + run_notebook execute it)")
    return 0


def _run_choice(args):
    """The `choice` runner (multiple-choice / judge position bias), imported when called."""
    from ._choice import run

    return run(args)


def _run_choicemodel(args):
    """The `choice-model` runner (conditional / mixed logit), imported when called."""
    from ._choicemodel import run

    return run(args)


def _run_plan(args):
    """The `plan` runner, imported when called (keeps `toolbias-stats --help` fast)."""
    from ._plan import run

    return run(args)


def _runner(module, name):
    """The runner ``name`` of the module ``module`` of this package, imported when called (only the command
    that runs is imported)."""
    def run(args):
        import importlib

        return getattr(importlib.import_module("." + module, __package__), name)(args)
    return run


def _run_experiments(name):
    """The `shift` / `subsets` runner, imported when called (keeps `toolbias-stats --help` fast)."""
    def run(args):
        from . import _experiments

        return getattr(_experiments, name)(args)
    return run


def _natural(x):
    return (0, int(x), "") if str(x).isdigit() else (1, 0, str(x))
