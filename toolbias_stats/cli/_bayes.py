"""``toolbias-stats bayes``: fit the hierarchical Bayesian model of API and position effects. Wiring only."""

from __future__ import annotations

import json
import sys
import warnings
from pathlib import Path

__all__ = ["add_parser", "run"]


def add_parser(subparsers):
    """Register the ``bayes`` sub-command on an ``argparse`` sub-parser collection; returns its parser."""
    from ..models.bayes import DEFAULT_MODEL, FALLBACK_MODEL, MISMATCH_POLICIES, MODELS, PARAMETERIZATIONS, SAMPLERS
    from ._vocabulary import add_aliases, add_seed

    p = subparsers.add_parser("bayes", help="hierarchical Bayesian model of API and position effects (NumPyro / PyMC)",
                              description="Fit the hierarchical Bayesian model of API and position effects with "
                                          "partial pooling across LLMs (default: the collapsed margin model; "
                                          "--variant v2 / v1: the logit chooser softmax(alpha[llm, cluster, tool] + "
                                          "beta[llm, position] + ...)); report effects, implied bias, posterior "
                                          "predictive checks and diagnostics.")
    p.add_argument("study", help="study manifest (TOML)")
    p.add_argument("--variant", choices=MODELS, default=None,
                   help=f"model variant (default {DEFAULT_MODEL}, the collapsed margin model, whose likelihood "
                        f"carries query heterogeneity; where the study or the options rule it out, {FALLBACK_MODEL}, "
                        f"announced on stderr and in the output; v2 = the logit chooser with a Dirichlet-multinomial "
                        "per prompt, v1 = main effects only, the first version; docs/bayes.md compares them)")
    p.add_argument("--by", default="model", help="comma-separated columns that define one LLM (default: model)")
    p.add_argument("--n-draws", type=int, default=1000, metavar="N", help="posterior draws per chain (default 1000)")
    p.add_argument("--tune", type=int, default=None, metavar="N",
                   help="warm-up iterations per chain (default 500 for the margin model, 1000 for v1 / v2)")
    p.add_argument("--chains", type=int, default=4, metavar="N", help="chains (default 4)")
    p.add_argument("--cores", type=int, default=None, metavar="N", help="parallel chains (default: min(chains, CPUs))")
    add_seed(p)
    p.add_argument("--sampler", choices=SAMPLERS, default="auto",
                   help="NUTS back-end (default auto: numpyro when installed, else pymc; the margin model is sampled "
                        "by numpyro only, so another sampler without --variant fits v2, announced; nutpie needs its "
                        "extra)")
    p.add_argument("--parameterization", choices=PARAMETERIZATIONS, default="auto",
                   help="same model, different sampling geometry (default auto: centred when the data dominate, else "
                        "non-centred)")
    p.add_argument("--target-accept", type=float, default=None, metavar="P",
                   help="NUTS target acceptance rate (default 0.9 for the margin model, 0.8 for v1 / v2; raise it "
                        "after divergences)")
    p.add_argument("--delta-margin", type=float, default=None, metavar="D",
                   help="the margin model (the default): report P(delta < D) for every implied delta (default 0.02; "
                        "asks for the margin model, so a study it cannot fit is an error, not a fall-back)")
    p.add_argument("--confidence-level", type=float, default=0.94, metavar="P",
                   help="HDI mass of the Bayesian intervals (default 0.94)")
    p.add_argument("--mismatch", choices=MISMATCH_POLICIES, default="exclude",
                   help="rows whose recorded position disagrees with the ordering (default: exclude and count)")
    p.add_argument("--frequentist", action="store_true",
                   help="also compute the frequentist calibrated intervals (selection_bias, 2000 query-bootstrap "
                        "replicates, grouped like --by) and show them beside the Bayesian ones where they do not "
                        "overlap (JSON: frequentist_comparison)")
    p.add_argument("--json", action="store_true", help="documented JSON on stdout")
    p.add_argument("-o", "--out", metavar="FILE.nc", help="also save the ArviZ InferenceData (netCDF)")
    add_aliases(p, "bayes")
    return p


def run(args) -> int:
    """Run ``toolbias-stats bayes``; 0 on success (also when the fit is flagged), 2 on bad input."""
    from ..exceptions import SelectionLogError

    try:
        return _run(args)
    except (SelectionLogError, ValueError, FileNotFoundError, ImportError) as exc:
        from .._output import term_safe

        print(term_safe(f"toolbias-stats bayes: error: {exc}"), file=sys.stderr)
        return 2


def _run(args) -> int:
    from .._output import term_safe
    from .._text import format_bayes_text
    from ..io import read_study
    from ..models import fit_bayes
    from ..models.bayes import DEFAULT_MODEL
    from ._common import progress_wanted as _progress_wanted
    from ._common import version as _version
    from ._output import atomic_path, check_output, emit, study_inputs
    from ._vocabulary import spelled

    option = spelled(args, "out", "--out")
    if args.out and Path(args.out).suffix.lower() not in (".nc", ".netcdf", ".nc4"):
        raise ValueError(f"{option} must name a netCDF file (.nc); got {args.out!r} instead.")
    inputs = study_inputs(args.study)
    if args.out:   # refused before the (long) fit: an input of the study, a folder, read-only (issue 21)
        check_output(args.out, inputs, option=option)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        study = read_study(args.study)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = fit_bayes(study.log, model=args.variant, by=args.by, draws=args.n_draws, tune=args.tune,
                           chains=args.chains, cores=args.cores, sampler=args.sampler,
                           parameterization=args.parameterization,
                           target_accept=args.target_accept, confidence_level=args.confidence_level,
                           mismatch=args.mismatch,
                           rng=args.seed, progress=_progress_wanted(args),
                           delta_margin=getattr(args, "delta_margin", None))
    freq = _frequentist(study, result, args.seed) if getattr(args, "frequentist", False) else None
    if args.out:
        from .._output import write_in_child

        with atomic_path(args.out, option=option, inputs=inputs) as tmp:
            # issue 37: the netCDF (HDF5) writer dies with SIGSEGV on a full disk: it runs in a child process
            write_in_child(lambda: result.idata.to_netcdf(str(tmp)), what="the netCDF writer")
    if args.variant is None and result.model != DEFAULT_MODEL:
        # the default could not fit this study: announced on stderr whatever the output format (also in the output)
        print(term_safe(f"toolbias-stats bayes: NOTE: {result.warnings[0]}"), file=sys.stderr)
    if not result.diagnostics.converged:
        # loud on stderr whatever the output format, so that scripts piping --json still see it
        print("toolbias-stats bayes: WARNING: NOT CONVERGED: " + "; ".join(result.diagnostics.flags),
              file=sys.stderr)
    if args.json:
        out = {"study": study.name, "manifest": str(study.path), "version": _version(), **result.to_dict()}
        if freq is not None:   # NaN -> null
            out["frequentist_comparison"] = json.loads(result.compare_frequentist(freq).to_json(orient="records"))
        print(json.dumps(out, indent=2))
    else:
        emit(format_bayes_text(result, frequentist=freq))
        if args.out:
            print(f"wrote {args.out}")
    return 0


def _frequentist(study, result, seed):
    """selection_bias of the study grouped like the fit (its calibrated intervals, for the comparison)."""
    from ..metrics import selection_bias

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return selection_bias(study.counts, by=list(result.by), rng=seed)
