"""Models that explain tool selection: correlations, OLS, grouped-CV ensembles, cross-model alignment.

Every function takes a :class:`~toolbias_stats.features.ToolFeatures` (one row per tool) and
per-LLM selection rates, and returns a frozen result with ``.to_frame()``.
"""

# -- explaining selection from tool features (BiasBusters sec. 3.3, App. F.1) ------------------------
from ._alignment import AlignmentResult, model_alignment
from ._correlation import CorrelationResult, feature_correlations
from ._design import selection_rates
from ._ensembles import (EnsembleFit, EnsembleResult, Split, ensemble_cv, gradient_boosting_cv, grouped_splits,
                         random_forest_cv)
from ._explain import ExplainResult, explain_selection
from ._explain_choice import ChoiceExplanation, choice_explanation
from ._ols import OLSFit, OLSResult, ols_fit

__all__ = [
    "feature_correlations", "CorrelationResult", "ols_fit", "OLSResult", "OLSFit", "ensemble_cv",
    "random_forest_cv", "gradient_boosting_cv", "grouped_splits", "EnsembleResult", "EnsembleFit", "Split",
    "model_alignment", "AlignmentResult", "explain_selection", "ExplainResult", "selection_rates",
    "choice_explanation", "ChoiceExplanation",
]

# -- hierarchical Bayesian model of API and position effects (PyMC; imported lazily) ---------------
from .bayes import (MODELS as BAYES_MODELS, BayesDiagnostics, BayesResult, ConvergenceWarning, MisfitWarning,
                    PosteriorPredictiveCheck, compare_bayes, fit_bayes, query_dispersion, simulate_choice_log)

__all__ += ["fit_bayes", "compare_bayes", "BayesResult", "BayesDiagnostics", "PosteriorPredictiveCheck",
            "ConvergenceWarning", "MisfitWarning", "simulate_choice_log", "query_dispersion", "BAYES_MODELS"]
