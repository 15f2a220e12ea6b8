"""Hierarchical Bayesian model of API and position effects (PyMC + ArviZ), in named variants.

The descriptive metrics (:func:`toolbias_stats.selection_bias`) say *how skewed* a model's choices
are; this model says *where the skew comes from*: from which tool is shown (API effect) or from
where it sits in the list (position effect). ``fit_bayes(log, model=...)`` fits one variant:

* ``"margin"`` (default, :data:`DEFAULT_MODEL`): the collapsed margin model, whose likelihood carries query
  heterogeneity (NumPyro); where a study or the arguments rule it out and no model was named, ``"v2"``
  (:data:`FALLBACK_MODEL`), announced;
* ``"v1"``: main effects, one multinomial per (LLM, cluster, ordering) (the first version);
* ``"v2"``: + per-(LLM, cluster) position deviations and a Dirichlet-multinomial per
  prompt (LLM, cluster, query, ordering) over its runs.

The experimental query models of issue 22 (``cluster-position``, ``overdispersed``, ``thorough``,
``query-urn``, ``query-shared``, ``query-mixture``, ``query-mixture-id``), none of which passes its
own checks (``docs/bayes.md``), moved to the repository's ``analyses/bayes_experimental`` (issue 38).

Layout: ``_design`` (counts -> model data), ``_model`` (the PyMC model and its extension hooks),
``_sampling`` (NUTS back-ends, convergence diagnostics), ``_summaries`` (implied bias, posterior
predictive checks), ``_loglik`` and ``_compare`` (pointwise log-likelihoods, PSIS-LOO comparison),
``_result`` (frozen result objects), ``_simulate`` (simulated logs with known effects), ``_fit``
(``fit_bayes``).
"""

from ...exceptions import ConvergenceWarning, MisfitWarning
from ._common import (
    DEFAULT_MODEL,
    DEFAULT_PRIORS,
    ESS_MIN,
    EXTENSION_PRIORS,
    FALLBACK_MODEL,
    MISMATCH_POLICIES,
    MODEL_VARIANTS,
    MODELS,
    PARAMETERIZATIONS,
    RHAT_MAX,
    SAMPLERS,
)
from ._compare import compare_bayes
from ._fit import fit_bayes
from ._result import BayesDiagnostics, BayesResult, PosteriorPredictiveCheck
from ._simulate import simulate_bayes_log
from ._summaries import query_dispersion

__all__ = ["fit_bayes", "compare_bayes", "BayesResult", "BayesDiagnostics", "PosteriorPredictiveCheck",
           "ConvergenceWarning", "MisfitWarning", "DEFAULT_PRIORS", "EXTENSION_PRIORS", "SAMPLERS",
           "PARAMETERIZATIONS", "MISMATCH_POLICIES", "MODELS", "MODEL_VARIANTS", "DEFAULT_MODEL",
           "FALLBACK_MODEL",
           "simulate_bayes_log", "query_dispersion", "RHAT_MAX", "ESS_MIN"]


def __getattr__(name: str):
    # `simulate_choice_log` was this simulator's name until 0.1.0 (the choice model's simulator had the same name:
    # issue 40); the old name works for one release with a DeprecationWarning
    if name == "simulate_choice_log":
        import warnings
        warnings.warn("`toolbias_stats.models.bayes.simulate_choice_log` was renamed `simulate_bayes_log` in 0.2.0; "
                      "`simulate_choice_log` will be removed in the next minor release.", DeprecationWarning,
                      stacklevel=2)
        return simulate_bayes_log
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
