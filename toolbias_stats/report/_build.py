"""Report assembly: read (or take) a study, compute the bias table and the optional sections, render one page.

:func:`build_report` is what ``toolbias-stats report`` calls; every section is computed here with the defaults of
the command that owns it (``explain``, ``choice-model``, ``bayes``, ``shadow``, ``plan``, ``shift``), so that the
full report is available from Python and the command line only parses arguments.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    import os
    from collections.abc import Iterable, Sequence

    import numpy as np

    from ..io import Study
    from ..metrics import BiasResult

__all__ = ["build_report", "default_sections", "SECTIONS"]

#: Optional sections of :func:`build_report`, in the order they appear on the page (after the bias sections).
SECTIONS = ("explain", "choice-model", "bayes", "shadow", "plan", "experiments")

#: The ``plan`` section's design grid (the pilot's own design only: no target, a small grid).
PLAN_QUERIES = (50, 100, 200, 500, 1000)
PLAN_RUNS = (1, 3)
PLAN_BOOTSTRAP = 200
#: The ``plan`` command's defaults used by the section (tests/report/test_build.py checks them against the parser).
PLAN_DEFAULTS: dict[str, Any] = {"metrics": ("delta_api", "delta_pos"), "by": ("model",), "alpha": 0.05, "power": 0.8,
                 "correlation": 0.0, "cost_per_call": None, "max_queries": 100_000, "n_draws": 2000}
#: The ``shadow`` command's defaults used by the section (checked against the parser likewise).
SHADOW_DEFAULTS = {"scale": "paper", "n_resamples": 2000, "n_weight_draws": 2000, "holdout": 0.5}

#: Description texts of the catalog used for the similarity features: (tool column, API column).
CATALOG_TEXTS = ("tool_description", "api_description")


def default_sections(study: Study) -> list[str]:
    """The optional sections a report shows when none are named: ``["experiments"]`` when the study has more than
    one ``condition`` level or a numeric design column with several levels, else none.

    Parameters
    ----------
    study : Study
        As returned by :func:`toolbias_stats.read_study`.

    Returns
    -------
    list of str

    Examples
    --------
    >>> import toolbias_stats as tbs
    >>> default_sections(tbs.read_study(tbs.datasets.path("experiments/study.toml")))
    ['experiments']
    """
    return ["experiments"] if _comparisons(study.counts) else []


def build_report(study: Study | str | os.PathLike[str], result: BiasResult | None = None, *,
                 sections: Iterable[str] | None = None, by: str | Sequence[str] = "model", n_resamples: int = 2000,
                 n_null: int = 2000, rng: int | np.random.Generator = 20251121, confidence_level: float = 0.95,
                 ci_method: str = "bca", position: str = "cluster_rank", cluster_corrected: bool = False,
                 bootstrap: str = "multinomial", path: str | os.PathLike[str] | None = None, progress: bool = False,
                 stage: Callable[[str], object] | None = None) -> str:
    """The self-contained HTML report of a study: the bias sections plus the optional ones named in ``sections``.

    Parameters
    ----------
    study : Study or path-like
        A study (:func:`toolbias_stats.read_study`), or the path of its TOML manifest (read with the defaults).
    result : BiasResult, optional
        :func:`toolbias_stats.selection_bias` of ``study.counts``; computed from the arguments below when omitted.
    sections : iterable of str, optional
        Optional sections, any of :data:`SECTIONS`: ``"explain"`` (tool features and the explanation models),
        ``"choice-model"`` (conditional logit per model), ``"bayes"`` (hierarchical Bayesian model),
        ``"shadow"`` (TOOL-SHADOW Positional Bias Score), ``"plan"`` (variance components, CI half-widths and
        MDEs) and ``"experiments"`` (shifts between levels of the design columns). They are computed with the
        defaults of the command of the same name, with this call's ``rng`` and ``confidence_level``, and appear
        in that order whatever the order given. Default: :func:`default_sections`.
    by : str or list of str, default "model"
        Grouping columns of the bias table (a comma-separated string is split); the shadow section groups by it.
    n_resamples, n_null : int, default 2000
        Bootstrap replicates (0 skips intervals and bias correction) and Monte-Carlo draws of the uniform
        chooser, for the bias table and the experiments section.
    rng : int or numpy.random.Generator, default 20251121
        Seed of every random stage; the same seed gives the same page. Unlike the analysis functions (``rng=None``:
        fresh entropy on every call), a report is reproducible by default: 20251121 is the ``--seed`` default of
        the ``toolbias-stats`` commands, so ``build_report(study)`` gives the page ``toolbias-stats report`` writes.
    confidence_level : float, default 0.95
    ci_method, position, cluster_corrected, bootstrap
        As in :func:`toolbias_stats.selection_bias`.
    path : path-like, optional
        Where to write the page (atomically, UTF-8). Nothing is written when omitted.
    progress : bool, default False
        Progress bars for the long stages.
    stage : callable, optional
        Called with a short text before each stage (``toolbias-stats report`` prints it on stderr).

    Returns
    -------
    str
        The complete HTML document (:func:`render_bias_report` with the sections appended).

    Raises
    ------
    ValueError
        An unknown section name.

    Warns
    -----
    ConvergenceWarning
        The Bayesian fit did not converge (the section shows it too).

    Examples
    --------
    A small simulated study (a manifest path, e.g. ``tbs.datasets.path("experiments/study.toml")``, works too):

    >>> import toolbias_stats as tbs
    >>> from toolbias_stats.report import build_report
    >>> from toolbias_stats.simulate import simulate_selection_log
    >>> log = simulate_selection_log(n_clusters=1, n_queries=10, rng=0).log
    >>> study = tbs.Study(log=log, catalog=log.catalog, name="simulated")
    >>> page = build_report(study, sections=[], n_resamples=0, n_null=0, rng=1)
    >>> page.startswith("<!DOCTYPE html>") and 'id="experiments"' not in page
    True
    """
    wanted = _check_sections(sections)
    stage = stage if stage is not None else (lambda text: None)
    if not hasattr(study, "counts"):
        from ..io import read_study

        stage(f"reading {study}")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            study = read_study(study)
    study = cast("Study", study)
    seed = rng
    if result is None:
        stage(f"delta estimates ({n_resamples} bootstrap replicates)")
        result = _bias(study, by=by, n_resamples=n_resamples, n_null=n_null, rng=seed,
                       confidence_level=confidence_level, ci_method=ci_method, position=position,
                       cluster_corrected=cluster_corrected, bootstrap=bootstrap, progress=progress)
    if wanted is None:
        wanted = set(default_sections(study))
    extra = []
    common = {"rng": seed, "confidence_level": confidence_level}
    for name in SECTIONS:
        if name in wanted:
            extra.append(_SECTION_BUILDERS[name](study, stage=stage, progress=progress, by=by,
                                                 n_resamples=n_resamples, n_null=n_null, bias=result, **common))
    from ._render_html import render_bias_report

    stage("rendering the report")
    return render_bias_report(study, result, extra_sections=extra, path=path)


def _check_sections(sections):
    if sections is None:
        return None
    if isinstance(sections, str):
        sections = [sections]
    wanted = set(sections)
    unknown = sorted(str(s) for s in wanted - set(SECTIONS))
    if unknown:
        raise ValueError(f"unknown report section(s) {', '.join(map(repr, unknown))}; choose from "
                         f"{', '.join(SECTIONS)}")
    return wanted


def _bias(study, *, by, n_resamples, n_null, rng, confidence_level, ci_method, position, cluster_corrected,
          bootstrap, progress):
    from ..metrics import selection_bias

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return selection_bias(study.counts, by=by, n_resamples=n_resamples, n_null=n_null, rng=rng,
                              confidence_level=confidence_level, ci_method=ci_method,
                              cluster_corrected=cluster_corrected, bootstrap=bootstrap, progress=progress,
                              position=position)


# -- the optional sections: (id, heading, html) ---------------------------------------------------------------
def _explain_section(study, *, stage, progress, rng, confidence_level, **_):
    from ._explain_html import render_explain_section

    stage("explaining selection (tool features, models)")
    explained, _, _ = explain_study(study, rng=rng, confidence_level=confidence_level, progress=progress)
    return ("explain", "Explaining selection", render_explain_section(explained))


def _choice_model_section(study, *, stage, rng, confidence_level, **_):
    from ._choicemodel import choice_model_section_for_report

    stage("choice model")
    return ("choice-model", "Choice model",
            choice_model_section_for_report(study, rng=rng, confidence_level=confidence_level))


def _bayes_section(study, *, stage, progress, rng, bias=None, **_):
    from ..exceptions import ConvergenceWarning
    from ..models import fit_bayes
    from ..models.bayes._common import FALLBACK_NOTE
    from ._bayes_html import render_bayes_section

    stage("Bayesian model")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = fit_bayes(study.log, rng=rng, progress=progress)
    if fit.warnings and fit.warnings[0].startswith(FALLBACK_NOTE):
        # the default (margin) cannot fit this study: the announced fall-back to v2 is said here too, not only on
        # the page (docs/bayes.md, "The default model")
        warnings.warn(f"Bayesian section: {fit.warnings[0]}", UserWarning, stacklevel=3)
    if not fit.diagnostics.converged:
        warnings.warn("Bayesian fit NOT CONVERGED: " + "; ".join(fit.diagnostics.flags), ConvergenceWarning,
                      stacklevel=3)
    # the bias table's calibrated intervals appear beside the Bayesian ones where they disagree (issue 38)
    freq = bias if bias is not None and bias.n_resamples > 0 else None
    return ("bayes", "Bayesian model", render_bayes_section(fit, catalog=study.catalog, frequentist=freq))


def _shadow_section(study, *, stage, rng, confidence_level, by, **_):
    from ..shadow import audit_from_study, tool_shadow
    from ._shadow_html import render_shadow_section

    stage("TOOL-SHADOW")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        audit = audit_from_study(study, by=by)
        result = tool_shadow(audit, cis=None, confidence_level=confidence_level, encoder=None, rng=rng,
                             **SHADOW_DEFAULTS)
    return ("shadow", "TOOL-SHADOW", render_shadow_section(result))


def _plan_section(study, *, stage, rng, confidence_level, **_):
    from ._design_html import render_design_section

    stage("study design (plan)")
    return ("design", "Is this study big enough?",
            render_design_section(**plan_for_study(study, rng=rng, confidence_level=confidence_level)))


def _experiments_section(study, *, stage, rng, confidence_level, n_resamples, n_null, **_):
    from ._experiments_html import render_experiments_section

    stage("experiments")
    found = experiments_for_study(study, n_resamples=n_resamples, n_permutations=n_null, rng=rng,
                                  confidence_level=confidence_level)
    return ("experiments", "Experiments", render_experiments_section(study=study, **found))


_SECTION_BUILDERS: dict[str, Callable[..., Any]] = {
    "explain": _explain_section, "choice-model": _choice_model_section, "bayes": _bayes_section,
    "shadow": _shadow_section, "plan": _plan_section, "experiments": _experiments_section}


# -- what the sections compute (shared with the commands of the same name) --------------------------------------
def study_features(study, *, encoder=None, reference_date=None, cache_dir=None, text_columns=CATALOG_TEXTS,
                   progress=False):
    """Tool features of a study's catalog and queries; returns ``(ToolFeatures, warning messages)``."""
    from ..features import tool_features

    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        feats = tool_features(study, encoder=encoder, reference_date=reference_date, cache_dir=cache_dir,
                              text_columns=text_columns, progress=progress)
    return feats, [str(w.message) for w in rec]


def explain_study(study, *, features=None, center=True, confidence_level=0.95, ensembles=True, n_estimators=200,
                  n_repeats=5, n_permutations=10, n_resamples=2000, n_jobs=1, rng=20251121, encoder=None,
                  reference_date=None, cache_dir=None, text_columns=CATALOG_TEXTS, progress=False):
    """Features (``features``, the manifest's ``features`` key, or computed) -> ExplainResult.

    The defaults are those of ``toolbias-stats explain``. Returns ``(result, notes, feature_path_or_None)``.
    """
    from ..features import read_feature_table
    from ..models import explain_selection

    notes = []
    fpath = features or (study.settings or {}).get("features")
    if fpath:
        with warnings.catch_warnings(record=True) as rec:
            warnings.simplefilter("always")
            feats = read_feature_table(fpath, catalog=study.catalog)
        notes += [str(w.message) for w in rec]
    else:
        feats, msgs = study_features(study, encoder=encoder, reference_date=reference_date, cache_dir=cache_dir,
                                     text_columns=text_columns, progress=progress)
        notes += msgs
    if feats.selection_rates is not None:
        rates = None
        targets = f"selection rates carried by the feature table {fpath}"
    else:
        from ..metrics import selection_bias

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            rates = selection_bias(study.log, by="model", n_resamples=0, n_null=0)
        targets = "selection rates per model in the study's logs (valid choices, all runs pooled)"
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        result = explain_selection(feats, rates, center=center, confidence_level=confidence_level,
                                   ensembles=ensembles, n_estimators=n_estimators, n_repeats=n_repeats,
                                   n_permutations=n_permutations, n_resamples=n_resamples, n_jobs=n_jobs, rng=rng,
                                   targets=targets, progress=progress, log=study.log)
    return result, notes, fpath


def plan_for_study(study, *, rng=20251121, confidence_level=0.95) -> dict:
    """What the "Is this study big enough?" section shows: the ``plan`` command's defaults with this seed and level,
    the pilot's own design only (no target, the grid :data:`PLAN_QUERIES` x :data:`PLAN_RUNS`).

    Returns ``{"components": VarianceComponents, "plan": StudyPlan}``.
    """
    from ..design import plan_study, variance_components

    d = PLAN_DEFAULTS
    metrics = list(d["metrics"])
    pilot = study.log if study.log is not None else study.counts
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        comps = variance_components(pilot, by=list(d["by"]), metrics=metrics, n_resamples=PLAN_BOOTSTRAP,
                                    confidence_level=confidence_level, rng=rng)
        plan = plan_study(comps, target=None, target_kind="width", metrics=metrics, queries=list(PLAN_QUERIES),
                          runs=list(PLAN_RUNS), rotations=None, confidence_level=confidence_level,
                          alpha=d["alpha"], power=d["power"], correlation=d["correlation"],
                          cost_per_call=d["cost_per_call"], max_queries=d["max_queries"], n_draws=d["n_draws"],
                          rng=rng, progress=False)
    return {"components": comps, "plan": plan}


def _comparisons(counts):
    """(between, base) pairs worth showing: condition (base "base") and numeric design columns (base = smallest).

    Only the design's factors are compared (issue 35): a replicate (``run``, the API readers' ``attempt`` numbering
    repeated requests, a declared ``epoch``) is never an experiment, whatever its levels."""
    from ..experiments._shift_levels import _is_numeric, _levels

    tab = counts.table
    factors = set(getattr(counts, "design", None).factors if hasattr(counts, "design") else counts.design_columns)
    out = []
    if "condition" in factors and "condition" in tab.columns and len(_levels(tab["condition"])) > 1:
        levels = _levels(tab["condition"])
        out.append(("condition", "base" if "base" in [str(v) for v in levels] else levels[0]))
    for col in counts.design_columns:
        if col in ("run", "condition", "model") or col not in factors or not _is_numeric(tab[col]):
            continue
        by = ["model"] if "model" in tab.columns else []
        n_levels = tab.groupby(by, observed=True)[col].nunique().max() if by else tab[col].nunique()
        if n_levels > 1:
            out.append((col, min(_levels(tab[col]))))
    return out


def experiments_for_study(study, *, n_resamples=2000, n_permutations=2000, rng=20251121, confidence_level=0.95):
    """What the Experiments section shows: the ``shift`` defaults for every comparison worth showing.

    Returns ``{"results": [ShiftResult, ...], "tool_count": ToolCountResult or None}``; the tool-count analysis is
    added when some attempts were shown fewer tools than their cluster has.
    """
    from ..experiments import selection_shift, tool_count_bias

    results = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for between, base in _comparisons(study.counts):
            by = ["model"] if "model" in study.counts.design_columns else []
            res = selection_shift(study.counts, between=between, base=base, by=by,
                                  n_resamples=max(n_resamples, 0), n_permutations=n_permutations,
                                  confidence_level=confidence_level, rng=rng)
            if res.groups:
                results.append(res)
        counts = study.counts
        k_of = {c: counts.catalog.n_tools(c) for c in counts.catalog.clusters}
        full = counts.table["cluster_id"].astype(str).map(k_of).to_numpy()
        subsets = (counts.table["n_candidates"].to_numpy() < full).any()
        tool_count = tool_count_bias(counts, by=["model"]) if subsets and counts.cells is not None else None
    return {"results": results, "tool_count": tool_count}
