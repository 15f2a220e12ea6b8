"""Explaining selection: correlations, OLS, grouped-CV ensembles and cross-model alignment in one result."""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from .._display import ReprHTMLMixin
from .._json import plain
from .._validation import check_rng
from ._alignment import AlignmentResult, model_alignment
from ._correlation import CorrelationResult, feature_correlations
from ._ensembles import EnsembleResult, ensemble_cv
from ._ols import OLSResult, ols_fit

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ..features import ToolFeatures
    from ..io import SelectionLog
    from ..metrics import BiasResult
    from ._explain_choice import ChoiceExplanation

__all__ = ["explain_selection", "ExplainResult"]


@dataclass(frozen=True, eq=False)
class ExplainResult(ReprHTMLMixin):
    """Everything :func:`explain_selection` computes (BiasBusters sec. 3.3 and Appendix F.1).

    Attributes
    ----------
    correlations : CorrelationResult
    ols : OLSResult
    random_forest, gradient_boosting : EnsembleResult or None
        None when ensembles were skipped.
    alignment : AlignmentResult
    center : bool
    models : list of str
    feature_names : list of str
    features_provenance : dict
        ``ToolFeatures.provenance`` of the input (source, encoder, reference date, ...).
    targets : str
        Where the selection rates came from.
    seed : int, None or "generator"
    warnings : list of str
        Every warning of every part (also on the parts).
    choice : ChoiceExplanation or None
        The attempt-level explanation (conditional logit with the features, compared with the OLS), when
        :func:`explain_selection` was given the selection log.

    Examples
    --------

    >>> import toolbias_stats as tbs
    >>> from toolbias_stats.features import read_feature_table
    >>> feats = read_feature_table(tbs.datasets.path("biasbusters/authors_features.json"))
    >>> from toolbias_stats.models import explain_selection
    >>> res = explain_selection(feats, ensembles=False, n_resamples=20, rng=1)
    >>> type(res.ols).__name__, res.random_forest is None, len(res.models)
    ('OLSResult', True, 6)
    """

    correlations: CorrelationResult
    ols: OLSResult
    random_forest: EnsembleResult | None
    gradient_boosting: EnsembleResult | None
    alignment: AlignmentResult
    center: bool
    models: list
    feature_names: list
    features_provenance: dict = field(default_factory=dict)
    targets: str = ""
    seed: object = None
    warnings: list = field(default_factory=list)
    choice: ChoiceExplanation | None = None

    def to_frame(self) -> pd.DataFrame:
        """One row per LLM: in-sample OLS R^2 next to cross-validated ensemble R^2 and the constant baseline."""
        ols = self.ols.summary_frame().set_index("model") if self.ols.fits else pd.DataFrame()
        rows = []
        for m in self.models:
            row = {"model": m}
            if m in ols.index:
                row.update(ols_n=int(ols.at[m, "n"]), ols_r2=ols.at[m, "r2"], ols_adj_r2=ols.at[m, "adj_r2"])
            for name, res in (("rf", self.random_forest), ("gb", self.gradient_boosting)):
                if res is None:
                    continue
                fit = res.fit_for(m)
                for scheme in res.schemes:
                    row[f"{name}_{scheme}_r2"] = fit.score(scheme, "r2")
                    row[f"{name}_{scheme}_baseline_r2"] = fit.score(scheme, "baseline_r2")
            rows.append(row)
        return pd.DataFrame(rows)

    def to_dict(self) -> dict:
        """The documented JSON object of ``toolbias-stats explain --json``."""
        corr = self.correlations.to_dict()
        ols = self.ols.to_dict()
        rf = self.random_forest.to_dict() if self.random_forest is not None else {}
        gb = self.gradient_boosting.to_dict() if self.gradient_boosting is not None else {}
        per_model = {}
        for m in self.models:
            per_model[m] = {"pearson": corr.get(m, {}), "ols": ols.get(m),
                            "random_forest": rf.get(m), "gradient_boosting": gb.get(m)}
        ens = {}
        for name, res in (("random_forest", self.random_forest), ("gradient_boosting", self.gradient_boosting)):
            if res is not None:
                ens[name] = {"params": plain(res.params, fallback=str), "schemes": list(res.schemes),
                             "seed": _seed(res.seed)}
        out = {
            "center": self.center,
            "features": list(self.feature_names),
            "targets": self.targets,
            "feature_provenance": plain(self.features_provenance, fallback=str),
            "confidence_level": self.correlations.confidence_level,
            "multiplicity": {"n_tests": self.correlations.n_tests, "methods": ["holm", "fdr_bh"]},
            "dropped_features": sorted(set(self.correlations.dropped_features) | set(self.ols.dropped_features)),
            "models": per_model,
            "ensembles": ens,
            "alignment": self.alignment.to_dict(),
            "seed": _seed(self.seed),
            "warnings": list(self.warnings),
        }
        if self.choice is not None:
            out["choice_model"] = self.choice.to_dict()
        return out


def explain_selection(features: ToolFeatures, rates: BiasResult | ToolFeatures | pd.DataFrame | None = None, *,
                      center: bool = True, feature_names: Sequence[str] | None = None,
                      confidence_level: float = 0.95, ensembles: bool = True, n_estimators: int = 200,
                      n_repeats: int = 5, n_permutations: int = 10, n_resamples: int = 2000, n_jobs: int = 1,
                      rng: int | np.random.Generator | None = None, targets: str | None = None,
                      progress: bool = False, log: SelectionLog | None = None) -> ExplainResult:
    """Run the whole attribute-level analysis of BiasBusters on one feature table.

    Parameters
    ----------
    features : ToolFeatures
    rates : BiasResult, DataFrame or None
        Per-LLM selection rates; None uses the rates the feature table carries.
    center : bool, default True
        Cluster-mean centring of features and rates (as in the paper).
    feature_names : sequence of str, optional
        Default: the paper's seven features when present, else every feature.
    confidence_level : float, default 0.95
    ensembles : bool, default True
        Fit the random forest and gradient boosting (the slow part).
    n_estimators, n_repeats, n_permutations : int
        Passed to :func:`~toolbias_stats.models.ensemble_cv`.
    n_resamples : int, default 2000
        Bootstrap replicates of the alignment intervals.
    n_jobs : int, default 1
    rng : None, int or numpy.random.Generator
        The only source of randomness; each part gets its own child generator, so the same seed
        gives identical output.
    targets : str, optional
        Description of where the rates came from (recorded).
    progress : bool, default False
    log : SelectionLog, optional
        The attempts with the lists shown: adds the attempt-level explanation (a conditional logit with the
        features, :func:`~toolbias_stats.models.choice_explanation`) compared with the OLS. It does not
        change any other output; if it cannot be fitted, a warning says why and ``choice`` is None.

    Returns
    -------
    ExplainResult

    Examples
    --------
    >>> import toolbias_stats as tbs
    >>> from toolbias_stats.features import read_feature_table
    >>> feats = read_feature_table(tbs.datasets.path("biasbusters/authors_features.json"))
    >>> res = explain_selection(feats, ensembles=False, n_resamples=200, rng=1)   # correlations and OLS only
    >>> res.to_frame().round(3)             # BiasBusters F.1: R^2 0.143 (GPT-4.1 mini), 0.387 (ToolLLaMA)
             model  ols_n  ols_r2  ols_adj_r2
    0  ChatGPT 3.5     43   0.222       0.067
    1  ChatGPT 4.1     43   0.143      -0.029
    2     DeepSeek     43   0.182       0.019
    3       Gemini     43   0.120      -0.056
    4         Qwen     43   0.226       0.071
    5    ToolLLaMA     43   0.387       0.264

    With the cross-validated ensembles (the default; about 10 s of CPU on the bundled features):
    ``explain_selection(feats, n_estimators=50, n_repeats=2, rng=1)``.
    """
    seed = rng if isinstance(rng, (int, type(None))) else "generator"
    gen = check_rng(rng)
    kids = [np.random.default_rng(s) for s in gen.integers(2**63 - 1, size=3)]
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        corr = feature_correlations(features, rates, center=center, feature_names=feature_names,
                                    confidence_level=confidence_level)
        ols = ols_fit(features, rates, center=center, feature_names=feature_names, confidence_level=confidence_level)
        rf = gb = None
        if ensembles:
            common: dict[str, Any] = dict(center=center, feature_names=feature_names, n_estimators=n_estimators,
                                          n_repeats=n_repeats, n_permutations=n_permutations, n_jobs=n_jobs,
                                          progress=progress)
            rf = ensemble_cv(features, rates, estimator="random_forest", rng=kids[0], **common)
            gb = ensemble_cv(features, rates, estimator="gradient_boosting", rng=kids[1], **common)
        align = model_alignment(rates if rates is not None else features, n_resamples=n_resamples,
                                confidence_level=confidence_level, rng=kids[2])
        choice = None
        if log is not None:
            from ._explain_choice import choice_explanation

            try:
                choice = choice_explanation(features, log, ols=ols, confidence_level=confidence_level)
            except ValueError as exc:
                warnings.warn(f"the attempt-level explanation (conditional logit) was not fitted: {exc}",
                              UserWarning, stacklevel=2)
    seen = set()
    for w in rec:  # pass every distinct warning on to the caller, once
        key = (w.category, str(w.message))
        if key not in seen:
            seen.add(key)
            warnings.warn(str(w.message), w.category, stacklevel=2)
    all_msgs = list(dict.fromkeys(str(w.message) for w in rec))
    prov = dict(getattr(features, "provenance", {}) or {})
    if targets is None:
        targets = ("selection rates carried by the feature table" if rates is None
                   else "selection rates passed in (from the selection log)")
    return ExplainResult(correlations=corr, ols=ols, random_forest=rf, gradient_boosting=gb, alignment=align,
                         center=bool(center), models=list(corr.models), feature_names=list(corr.feature_names),
                         features_provenance=prov, targets=targets, seed=seed, warnings=all_msgs, choice=choice)


def _seed(s):
    return s if isinstance(s, (int, type(None))) else repr(s)


