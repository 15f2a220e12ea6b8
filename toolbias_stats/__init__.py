"""toolbias_stats: auditing how LLM agents choose between functionally equivalent tools.

Readers turn cached selection logs into one :class:`SelectionLog`; pure metrics return frozen
result objects with ``.to_frame()``; plots and reports only render results.

>>> import toolbias_stats as tbs
>>> round(tbs.tv_to_uniform([1, 0, 0, 0, 0]), 12)
0.8
"""

from . import datasets, features, models
from . import toolsense
from . import shadow
from .shadow import ShadowAudit, ShadowResult, read_shadow_audit, tool_shadow
from .toolsense import ToolSenseError
from ._schema import SCHEMA_VERSION, STATUSES, function_name, standardise_name
from .exceptions import (ConvergenceWarning, DegenerateDataWarning, ExcludedRowsWarning, ManifestError,
                         MisfitWarning, SelectionLogError, SmallSampleWarning)
from .io import (SelectionCounts, SelectionLog, Study, ToolCatalog, count_table, load_selection_log, read_biasbusters,
                 read_biasbusters_catalog, read_study, read_table, read_transcripts)
from .features import ToolFeatures, read_feature_table, tool_features
from .models import (BayesResult, ExplainResult, explain_selection, feature_correlations, fit_bayes, model_alignment,
                     ols_fit)
from .metrics import (BiasResult, CalibratedTV, ConfidenceInterval, TVResult, calibrated_mean_tv,
                      expected_tv_uniform, normalised_tv, selection_bias, tv_distance, tv_to_uniform)

__version__ = "0.1.0"

__all__ = [
    "__version__", "SCHEMA_VERSION", "STATUSES", "datasets", "standardise_name", "function_name",
    "SelectionLogError", "ManifestError", "DegenerateDataWarning", "ExcludedRowsWarning", "SmallSampleWarning",
    "SelectionLog", "SelectionCounts", "count_table", "ToolCatalog", "Study", "read_study", "load_selection_log",
    "read_biasbusters", "read_biasbusters_catalog", "read_table", "read_transcripts",
    "selection_bias", "BiasResult", "TVResult", "ConfidenceInterval", "CalibratedTV", "calibrated_mean_tv",
    "tv_distance", "tv_to_uniform", "normalised_tv", "expected_tv_uniform",
    "features", "models", "tool_features", "read_feature_table", "ToolFeatures", "explain_selection",
    "ExplainResult", "feature_correlations", "ols_fit", "model_alignment", "fit_bayes", "BayesResult",
    "ConvergenceWarning", "MisfitWarning",
    "toolsense", "ToolSenseError",
    "shadow", "ShadowAudit", "ShadowResult", "read_shadow_audit", "tool_shadow",
]

# -- experiments: effects of interventions (issue 8) ----------------------------------------------
from . import experiments
from .experiments import ShiftResult, SubsetMetricsResult, selection_shift, subset_selection_metrics

__all__ += ["experiments", "selection_shift", "ShiftResult", "subset_selection_metrics", "SubsetMetricsResult"]

# -- study design: variance components and planning (issue 12) ------------------------------------
from . import design  # noqa: E402
from .design import StudyPlan, VarianceComponents, plan_study, variance_components  # noqa: E402

__all__ += ["design", "variance_components", "VarianceComponents", "plan_study", "StudyPlan"]

# -- importers for other teams' API logs: OpenAI, Anthropic, OpenTelemetry GenAI traces (issue 13) -----------
from .io import read_anthropic, read_openai, read_otel  # noqa: E402

__all__ += ["read_openai", "read_anthropic", "read_otel"]

# -- Inspect AI logs and multiple-choice / judge position bias (issue 13) ----------------------------------------
from . import choice  # noqa: E402
from .choice import (ChoiceLog, accuracy_by_gold_position, judge_consistency, option_position_bias,  # noqa: E402
                     read_choice_study)
from .io.readers.inspect_ai_log import read_inspect, read_inspect_choices  # noqa: E402
from .io.readers.lm_eval import read_lm_eval  # noqa: E402

__all__ += ["choice", "ChoiceLog", "read_choice_study", "option_position_bias", "accuracy_by_gold_position",
            "judge_consistency", "read_inspect", "read_inspect_choices", "read_lm_eval"]

# -- from design to logs: counterbalanced designs, provider request files, a resumable runner (issue 25) ------------
from . import audit  # noqa: E402
from .audit import StudyDesign, design_study, run_study, write_requests  # noqa: E402

__all__ += ["audit", "design_study", "StudyDesign", "write_requests", "run_study"]

# -- choice models over the lists shown: conditional / mixed logit (issue 22) ----------------------------
from . import choicemodel  # noqa: E402
from .choicemodel import ChoiceModelResult, choice_model  # noqa: E402

__all__ += ["choicemodel", "choice_model", "ChoiceModelResult"]
