"""One vocabulary for the options of every ``toolbias-stats`` command (issue 40).

:data:`VOCABULARY` gives every option name its one meaning (the ``dest`` it fills and a line of what it is);
:data:`ALIASES` lists, per command, the older spellings kept for one release: hidden from ``--help``, they fill
the new option's ``dest`` (same result) and print one line on standard error naming the new option.
``tests/cli/test_parser_vocabulary.py`` walks the parser and checks both tables against it.

Imports nothing heavy: ``toolbias-stats --help`` builds these parsers.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

__all__ = ["DEFAULT_SEED", "VOCABULARY", "ALIASES", "add_aliases", "add_seed", "add_n_resamples",
           "add_confidence_level", "spelled"]

#: The seed every command uses by default (``--seed``).
DEFAULT_SEED = 20251121

#: option -> (dest, meaning). An option name means the same in every command that has it (defaults may differ;
#: each command's help states its default).
VOCABULARY: dict[str, tuple[str, str]] = {
    # counts of random replicates
    "--n-resamples": ("n_resamples", "bootstrap replicates, resampling the study's unit (query, item, turn)"),
    "--n-draws": ("n_draws", "random draws of a posterior or a simulation (Monte-Carlo, mixed-logit, weights)"),
    "--n-permutations": ("n_permutations", "label permutations of a permutation test"),
    "--null": ("null", "Monte-Carlo draws of the uniform chooser for p-values"),
    "--seed": ("seed", f"random seed, a non-negative integer (default {DEFAULT_SEED} in every command)"),
    "--confidence-level": ("confidence_level", "two-sided level of the intervals (HDI mass for bayes)"),
    # outputs
    "--json": ("json", "the documented JSON on standard output instead of text"),
    "--out": ("out", "output file (-o); written atomically, never over an input"),
    "--out-dir": ("out_dir", "output folder; written atomically, never over an input"),
    "--junit": ("junit", "also write JUnit XML to this file"),
    "--markdown": ("markdown", "also write a Markdown table to this file"),
    "--format": ("format", "format of the report written to --out / --out-dir (html, qmd)"),
    "--request-format": ("request_format", "provider format of the request files a design writes"),
    # inputs and grouping
    "--by": ("by", "grouping (break-down) columns"),
    "--engine": ("engine", "who reads and counts the logs (auto, pandas, duckdb, dask)"),
    "--scheduler": ("scheduler", "dask scheduler address for --engine dask"),
    "--feature-table": ("feature_table", "a feature table file (tool_id and feature columns)"),
    "--features": ("features", "comma-separated feature columns of the catalog or --feature-table"),
    "--encoder": ("encoder", "sentence-transformers model name or folder"),
    "--model": ("model", "the LLM named in requests / served by the endpoint"),
    "--variant": ("variant", "variant of the Bayesian model (bayes)"),
    "--position": ("position", "what delta_pos is measured on (cluster_rank or list)"),
    "--position-terms": ("position_terms", "form of the choice model's position terms"),
    "--center": ("center", "cluster-mean-centre the features (--center / --no-center)"),
    "--importance-shuffles": ("importance_shuffles", "shuffles per feature and fold for permutation importance"),
    # statistics shared by several commands
    "--ci-method": ("ci_method", "bootstrap interval: bca or percentile"),
    "--bootstrap-weights": ("bootstrap_weights", "query weights of a replicate: multinomial or poisson"),
    "--cluster-corrected": ("cluster_corrected", "also bias-correct every single cluster"),
    "--pairing": ("pairing", "paired or independent resampling of two levels / versions (auto: from the data)"),
    "--rule": ("rule", "release-gate decision rule: exceeds or within"),
    "--invalid": ("invalid", "what to do with rows without a valid answer or call"),
    # features and retrieval
    "--no-similarity": ("no_similarity", "do not embed texts (no similarity features)"),
    "--reference-date": ("reference_date", "date ages are measured at"),
    "--texts": ("texts", "which description texts: catalog or toolbench"),
    "--cache-dir": ("cache_dir", "embedding cache folder"),
    "--k": ("k", "comma-separated cut-offs k of recall at k"),
    "--benchmark-file": ("benchmark_file", "benchmark JSONL instead of the vendored file"),
    "--predictions": ("predictions", "prediction JSONL, repeatable as NAME=path"),
    # request design
    "--endpoint": ("endpoint", "OpenAI request shape of openai-batch: chat or responses"),
    "--orderings": ("orderings", "how the orderings of the tools are chosen (cyclic, balanced, all, random, pairs)"),
    "--system": ("system", "system prompt sent with every request"),
    "--max-tokens": ("max_tokens", "max_tokens of Anthropic requests"),
    "--runs": ("runs", "repetitions of every query (plan: the candidate numbers of the grid)"),
}

#: command -> {old option: new option}. The old spelling fills the new option's dest (same result) and prints
#: ``toolbias-stats COMMAND: note: OLD is deprecated; use NEW`` on standard error. A command that keeps an old
#: spelling which means something else in another command keeps its own old meaning for one release (the table
#: says which).
_RESAMPLES = {"--bootstrap": "--n-resamples"}
ALIASES: dict[str, dict[str, str]] = {
    "bias": dict(_RESAMPLES),
    "report": dict(_RESAMPLES),
    "explain": {**_RESAMPLES, "--permutations": "--importance-shuffles", "--features": "--feature-table"},
    "bayes": {"--draws": "--n-draws", "--model": "--variant", "--hdi-prob": "--confidence-level",
              "--idata": "--out"},
    "shift": {**_RESAMPLES, "--permutations": "--n-permutations"},
    "subsets": dict(_RESAMPLES),
    "toolsense score": dict(_RESAMPLES),
    "toolsense agreement": dict(_RESAMPLES),
    "toolsense baselines": dict(_RESAMPLES),
    "toolsense report": dict(_RESAMPLES),
    "shadow": {**_RESAMPLES, "--weight-draws": "--n-draws", "--report": "--out"},
    "plan": {**_RESAMPLES, "--draws": "--n-draws", "--format": "--request-format", "--write-design": "--out-dir"},
    "choice": dict(_RESAMPLES),
    "design": {"--format": "--request-format", "--out": "--out-dir"},
    "choice-model": {**_RESAMPLES, "--position": "--position-terms"},
    "check": dict(_RESAMPLES),
    "compare": {**_RESAMPLES, "--permutations": "--n-permutations"},
}


class _Deprecated(argparse.Action):
    """A hidden older spelling: stores into the new option's dest and says the new name on stderr."""

    def __init__(self, option_strings, dest, *, new: str, command: str, **kw):
        self.new, self.command = new, command
        super().__init__(option_strings, dest, **kw)

    def __call__(self, parser, namespace, values, option_string=None):
        print(f"toolbias-stats {self.command}: note: {option_string} is deprecated; use {self.new} "
              "(same meaning)", file=sys.stderr)
        setattr(namespace, self.dest, values)
        spellings = dict(getattr(namespace, "spellings_", {}) or {})
        spellings[self.dest] = option_string
        namespace.spellings_ = spellings


def add_aliases(parser: argparse.ArgumentParser, command: str) -> None:
    """Add the hidden older spellings :data:`ALIASES` lists for ``command`` (after its options are added)."""
    by_name = {o: a for a in parser._actions for o in a.option_strings}
    for old, new in ALIASES.get(command, {}).items():
        target = by_name[new]
        kw: dict[str, Any] = {"choices": target.choices, "metavar": target.metavar}
        if target.type is not None:
            kw["type"] = target.type
        parser.add_argument(old, action=_Deprecated, new=new, command=command, dest=target.dest,
                            default=argparse.SUPPRESS, help=argparse.SUPPRESS, **kw)


def spelled(args, dest: str, default: str) -> str:
    """How the user named the option of ``dest`` (an older spelling when one was used), for messages."""
    return (getattr(args, "spellings_", None) or {}).get(dest, default)


def add_seed(parser, what: str = "") -> None:
    """``--seed`` with the one default of every command."""
    from ._output import seed

    parser.add_argument("--seed", type=seed, default=DEFAULT_SEED,
                        help=f"random seed{what} (default {DEFAULT_SEED})")


def add_n_resamples(parser, default: int, what: str) -> None:
    """``--n-resamples N``: ``what`` says which replicates (older spelling ``--bootstrap``)."""
    parser.add_argument("--n-resamples", type=int, default=default, metavar="N",
                        help=f"{what} (default {default})")


def add_confidence_level(parser, default: float = 0.95, what: str = "of the two-sided intervals") -> None:
    """``--confidence-level P``."""
    parser.add_argument("--confidence-level", type=float, default=default, metavar="P",
                        help=f"confidence level {what} (default {default})")
