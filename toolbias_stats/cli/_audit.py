"""``toolbias-stats design`` and ``toolbias-stats run``: from a catalog to request files, and from request files
to responses (issue 25). Wiring only; see toolbias_stats/audit and docs/audit.md."""

from __future__ import annotations

import json
import os
import sys

__all__ = ["add_parsers", "run_design", "run_run", "write_design_args", "write_planned_design"]


def write_design_args(p, *, positional=True):
    """The design options shared by ``design`` and ``plan --out-dir``."""
    from ..audit import ENDPOINTS, FORMATS, ORDERINGS

    p.add_argument("--request-format", choices=FORMATS, default="chat-jsonl",
                   help="openai-batch (OpenAI Batch API input), anthropic-batch (Message Batches requests) or "
                        "chat-jsonl (Chat Completions requests for OpenAI-compatible servers and `toolbias-stats "
                        "run`; default)")
    p.add_argument("--endpoint", choices=ENDPOINTS, default="chat",
                   help="OpenAI request shape for openai-batch: chat (Chat Completions, default) or responses")
    p.add_argument("--orderings", choices=ORDERINGS, default="cyclic",
                   help="cyclic (Latin square of rotations, default), balanced (Williams square), all, random, or "
                        "pairs (tournament of description variants)")
    p.add_argument("--model", default=None, help="model named in the requests and the manifest (required by the "
                                                 "batch formats)")
    p.add_argument("--system", default=None, help="system prompt sent with every request")
    p.add_argument("--max-tokens", type=int, default=1024, help="max_tokens of Anthropic requests (default 1024)")
    if positional:
        p.add_argument("--orderings-per-query", type=int, default=None, metavar="N", dest="n_orderings",
                       help="orderings per query and run (default: all rows of the square; fewer: a balanced "
                            "incomplete design)")
        p.add_argument("--runs", type=int, default=1, help="repetitions of every query (default 1)")
        p.add_argument("--queries-per-cluster", type=int, default=None, metavar="N", dest="n_queries",
                       help="the first N queries of each cluster (default all)")


def add_parsers(subparsers):
    """Register ``design`` and ``run``."""
    from ._vocabulary import add_aliases, add_seed

    d = subparsers.add_parser(
        "design", help="counterbalanced design -> provider request files and the study.toml that reads results",
        description="Decide which order each request shows the tools in (every tool at every position equally "
                    "often within a cluster), write the requests in a provider's batch format, and a study.toml "
                    "that reads the results back with the existing importers. See docs/audit.md.")
    d.add_argument("catalog", help="catalog: BiasBusters clusters.json, a catalog table (CSV/JSONL/Parquet/JSON) or "
                                   "a study manifest")
    d.add_argument("queries", help="queries: BiasBusters queries.json, a table with cluster_id and query, or a "
                                   "study manifest")
    d.add_argument("--out-dir", metavar="DIR", help="folder to write (required; must not hold a design already)")
    add_seed(d, " of --orderings random")
    d.add_argument("--json", action="store_true", help="print the design summary as JSON")
    write_design_args(d)
    add_aliases(d, "design")

    r = subparsers.add_parser(
        "run", help="send a design folder's requests to an OpenAI-compatible endpoint (resumable)",
        description="Send the requests of a `toolbias-stats design` folder to an OpenAI-compatible endpoint. "
                    "Every answer and error is written as it arrives, keyed by custom_id; run the same command "
                    "again to resume (requests with an answer are never sent again). 429/5xx are retried with "
                    "backoff. The API key, if any, is read from OPENAI_API_KEY.")
    r.add_argument("study_dir", help="the folder written by `toolbias-stats design`")
    r.add_argument("--base-url", required=True, metavar="URL", help="e.g. http://127.0.0.1:8000/v1")
    r.add_argument("--model", required=True, metavar="NAME", help="model name the endpoint serves")
    r.add_argument("--concurrency", type=int, default=4, metavar="N", help="requests in flight (default 4)")
    r.add_argument("--max-requests", type=int, default=None, metavar="N", help="send at most N requests now")
    r.add_argument("--max-retries", type=int, default=5, metavar="N", help="re-sends after 429/5xx (default 5)")
    r.add_argument("--timeout", type=float, default=120.0, metavar="S",
                   help="seconds per request in all: connecting, headers and the whole body (default 120)")
    r.add_argument("--json", action="store_true", help="print the run summary as JSON")
    return d, r


def _inputs(args):
    return [p for p in (getattr(args, "catalog", None), getattr(args, "queries", None)) if p]


def run_design(args) -> int:
    from ..audit import design_study

    if args.out_dir is None:
        raise ValueError("the design needs a folder to write: --out-dir DIR")
    design = design_study(args.catalog, args.queries, orderings=args.orderings, n_orderings=args.n_orderings,
                          runs=args.runs, n_queries=args.n_queries, rng=args.seed)
    return _write(args, design, _inputs(args))


def _write(args, design, inputs) -> int:
    from ..audit import write_requests

    info = write_requests(design, args.out_dir, format=args.request_format, endpoint=args.endpoint, model=args.model,
                          system=args.system, max_tokens=args.max_tokens, inputs=inputs)
    if getattr(args, "json", False) and args.command == "design":
        print(json.dumps({**info, **design.to_dict()}, indent=2, default=str))
        return 0
    bal = design.balance
    print(f"{info['requests']} requests ({args.request_format}) in {info['out']}: {len(bal)} clusters, "
          f"orderings={design.settings['orderings']}, runs={design.settings['runs']}")
    worst = int(bal["spread"].max()) if len(bal) else 0
    print(f"balance: each tool's count at each position differs by at most {worst} within a cluster "
          f"({', '.join(sorted(set(bal['design'])))})")
    for w in design.warnings:
        print(f"note: {w}")
    print(f"next: send the requests, then `toolbias-stats bias {os.path.join(info['out'], 'study.toml')}`")
    return 0


def write_planned_design(args, study, plan) -> None:
    """``plan --out-dir DIR``: the plan's cheapest design over the pilot's catalog and queries (the summary
    goes to stderr so that ``plan --json`` stays one JSON document)."""
    import contextlib

    from ..audit import design_study
    from ._vocabulary import spelled

    if not study.queries:
        raise ValueError(f"{spelled(args, 'out_dir', '--out-dir')} needs the pilot's queries: {study.path} names no "
                         "`queries` file.")
    design = design_study(study.catalog, study.queries, orderings=args.orderings, plan=plan, rng=args.seed)
    inputs = [study.path] + [study.settings.get(k) for k in ("catalog", "queries") if study.settings.get(k)]
    with contextlib.redirect_stdout(sys.stderr):
        _write(args, design, inputs)


def run_run(args) -> int:
    from ..audit import run_study
    from ._common import progress_wanted as _progress_wanted

    if args.max_requests is not None and args.max_requests < 1:
        # 0 would send nothing and end quietly: say so instead (leave the option out to send everything left)
        raise ValueError(f"--max-requests must be at least 1 (got {args.max_requests}): it is how many requests "
                         "to send now; leave it out to send every request without an answer.")
    try:
        res = run_study(args.study_dir, base_url=args.base_url, model=args.model, concurrency=args.concurrency,
                        max_requests=args.max_requests, api_key=os.environ.get("OPENAI_API_KEY") or None,
                        timeout=args.timeout, max_retries=args.max_retries, progress=_progress_wanted(args))
    except KeyboardInterrupt:
        print("toolbias-stats run: interrupted; every answer received is saved. Run the same command again to "
              "resume.", file=sys.stderr)
        return 130
    if args.json:
        print(json.dumps(res.to_dict(), indent=2))
    else:
        print(res._text())
    if res.stopped:
        from .._output import term_safe

        print(term_safe(f"toolbias-stats run: stopped: {res.stopped}"), file=sys.stderr)
    # the same exit code in both modes: 1 when the run stopped before sending what it was asked to
    return 1 if res.stopped else 0
