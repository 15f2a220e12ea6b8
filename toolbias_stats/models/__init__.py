"""Models that explain tool selection: correlations, OLS, grouped-CV ensembles, cross-model alignment.

Every function takes a :class:`~toolbias_stats.features.ToolFeatures` (one row per tool) and
per-LLM selection rates, and returns a frozen result with ``.to_frame()``.
"""

import typing as _typing

from .._lazy import LazyNames as _LazyNames

_lazy = _LazyNames(__name__)
_lazy.submodules('bayes')   # were attributes after the eager imports

# -- explaining selection from tool features (BiasBusters sec. 3.3, App. F.1) ------------------------
_lazy.add('._alignment', 'AlignmentResult', 'model_alignment')
_lazy.add('._correlation', 'CorrelationResult', 'feature_correlations')
_lazy.add('._design', 'selection_rates')
_lazy.add('._ensembles', 'EnsembleFit', 'EnsembleResult', 'Split', 'ensemble_cv', 'gradient_boosting_cv',
           'grouped_splits', 'random_forest_cv')
_lazy.add('._explain', 'ExplainResult', 'explain_selection')
_lazy.add('._explain_choice', 'ChoiceExplanation', 'choice_explanation')
_lazy.add('._ols', 'OLSFit', 'OLSResult', 'ols_fit')

__all__ = [
    "feature_correlations", "CorrelationResult", "ols_fit", "OLSResult", "OLSFit", "ensemble_cv",
    "random_forest_cv", "gradient_boosting_cv", "grouped_splits", "EnsembleResult", "EnsembleFit", "Split",
    "model_alignment", "AlignmentResult", "explain_selection", "ExplainResult", "selection_rates",
    "choice_explanation", "ChoiceExplanation",
]

# -- hierarchical Bayesian model of API and position effects (PyMC; imported lazily) ---------------
_lazy.add('.bayes', 'MODELS as BAYES_MODELS', 'BayesDiagnostics', 'BayesResult', 'ConvergenceWarning',
           'MisfitWarning', 'PosteriorPredictiveCheck', 'compare_bayes', 'fit_bayes', 'query_dispersion',
           'simulate_bayes_log')
_lazy.rename('simulate_choice_log', 'simulate_bayes_log', since="0.2.0")   # one release (issue 40)

__all__ += ["fit_bayes", "compare_bayes", "BayesResult", "BayesDiagnostics", "PosteriorPredictiveCheck",
            "ConvergenceWarning", "MisfitWarning", "simulate_bayes_log", "query_dispersion", "BAYES_MODELS"]

if _typing.TYPE_CHECKING:  # the _lazy names, for type checkers (written by rewrite_imports.py)
    from . import bayes as bayes
    from ._alignment import AlignmentResult, model_alignment
    from ._correlation import CorrelationResult, feature_correlations
    from ._design import selection_rates
    from ._ensembles import (
        EnsembleFit,
        EnsembleResult,
        Split,
        ensemble_cv,
        gradient_boosting_cv,
        grouped_splits,
        random_forest_cv,
    )
    from ._explain import ExplainResult, explain_selection
    from ._explain_choice import ChoiceExplanation, choice_explanation
    from ._ols import OLSFit, OLSResult, ols_fit
    from .bayes import (
        MODELS as BAYES_MODELS,
    )
    from .bayes import (
        BayesDiagnostics,
        BayesResult,
        ConvergenceWarning,
        MisfitWarning,
        PosteriorPredictiveCheck,
        compare_bayes,
        fit_bayes,
        query_dispersion,
        simulate_bayes_log,
    )

__getattr__, __dir__ = _lazy.hooks(globals())
