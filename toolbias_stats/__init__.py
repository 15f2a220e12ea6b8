"""toolbias_stats: auditing how LLM agents choose between functionally equivalent tools.

Readers turn cached selection logs into one :class:`SelectionLog`; pure metrics return frozen
result objects with ``.to_frame()``; plots and reports only render results.

>>> import toolbias_stats as tbs
>>> round(tbs.tv_to_uniform([1, 0, 0, 0, 0]), 12)
0.8
"""

import typing as _typing

from ._lazy import LazyNames as _LazyNames
from ._memory import adapt_to_address_limit as _adapt

_adapt()   # issue 37: under `ulimit -v`, pyarrow must not reserve a 1 GiB arena (DuckDB then had no room: SIGSEGV)

_lazy = _LazyNames(__name__)
_lazy.submodules('exceptions', 'io', 'metrics', 'plots', 'report')   # were attributes after the eager imports
_lazy.submodules('datasets', 'features', 'models')
_lazy.submodules('toolsense')
_lazy.submodules('shadow')
_lazy.add('.shadow', 'ShadowAudit', 'ShadowResult', 'read_shadow_audit', 'tool_shadow')
_lazy.add('.toolsense', 'ToolSenseError')
_lazy.add('._schema', 'SCHEMA_VERSION', 'STATUSES', 'function_name', 'standardise_name')
_lazy.add('.exceptions', 'ConvergenceWarning', 'DegenerateDataWarning', 'ExcludedRowsWarning', 'ManifestError',
           'MisfitWarning', 'SelectionLogError', 'SmallSampleWarning')
_lazy.add('.io', 'SelectionCounts', 'SelectionLog', 'Study', 'ToolCatalog', 'count_table', 'load_selection_log',
           'read_biasbusters', 'read_biasbusters_catalog', 'read_study', 'read_table', 'read_transcripts')
_lazy.add('.features', 'ToolFeatures', 'read_feature_table', 'tool_features')
_lazy.add('.models', 'BayesResult', 'ExplainResult', 'explain_selection', 'feature_correlations', 'fit_bayes',
           'model_alignment', 'ols_fit')
_lazy.add('.metrics', 'BiasResult', 'CalibratedTV', 'ConfidenceInterval', 'TVResult', 'calibrated_mean_tv',
           'expected_tv_uniform', 'normalised_tv', 'selection_bias', 'tv_distance', 'tv_to_uniform')

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
_lazy.submodules('experiments')
_lazy.add('.experiments', 'ShiftResult', 'SubsetMetricsResult', 'selection_shift', 'subset_selection_metrics')

__all__ += ["experiments", "selection_shift", "ShiftResult", "subset_selection_metrics", "SubsetMetricsResult"]

# -- study design: variance components and planning (issue 12) ------------------------------------
_lazy.submodules('design')
_lazy.add('.design', 'StudyPlan', 'VarianceComponents', 'plan_study', 'variance_components')

__all__ += ["design", "variance_components", "VarianceComponents", "plan_study", "StudyPlan"]

# -- importers for other teams' API logs: OpenAI, Anthropic, OpenTelemetry GenAI traces (issue 13) -----------
_lazy.add('.io', 'read_anthropic', 'read_openai', 'read_otel', 'read_mcp', 'read_langchain')

__all__ += ["read_openai", "read_anthropic", "read_otel", "read_mcp", "read_langchain"]

# -- Inspect AI logs and multiple-choice / judge position bias (issue 13) ----------------------------------------
_lazy.submodules('choice')
_lazy.add('.choice', 'ChoiceLog', 'accuracy_by_gold_position', 'judge_consistency', 'option_position_bias',
           'read_choice_study')
_lazy.add('.io.readers.inspect_ai_log', 'read_inspect', 'read_inspect_choices')
_lazy.add('.io.readers.lm_eval', 'read_lm_eval')

__all__ += ["choice", "ChoiceLog", "read_choice_study", "option_position_bias", "accuracy_by_gold_position",
            "judge_consistency", "read_inspect", "read_inspect_choices", "read_lm_eval"]

# -- from design to logs: counterbalanced designs, provider request files, a resumable runner (issue 25) ------------
_lazy.submodules('audit')
_lazy.add('.audit', 'StudyDesign', 'design_study', 'run_study', 'write_requests')

__all__ += ["audit", "design_study", "StudyDesign", "write_requests", "run_study"]

# -- choice models over the lists shown: conditional / mixed logit (issue 22) ----------------------------
_lazy.submodules('choicemodel')
_lazy.add('.choicemodel', 'ChoiceModelResult', 'choice_model')

__all__ += ["choicemodel", "choice_model", "ChoiceModelResult"]


# -- release gate: check / compare decisions for CI, the pytest helper (issue 39) -------------------------------
_lazy.submodules('gate')
_lazy.add('.gate', 'GateResult', 'assert_selection_fair', 'check_selection_bias', 'compare_selection')

__all__ += ["gate", "check_selection_bias", "compare_selection", "assert_selection_fair", "GateResult"]

if _typing.TYPE_CHECKING:  # the _lazy names, for type checkers (written by rewrite_imports.py)
    from . import (
        audit,
        choice,
        choicemodel,
        datasets,
        design,
        experiments,
        features,
        gate,
        models,
        shadow,
        toolsense,
    )
    from . import (
        exceptions as exceptions,
    )
    from . import (
        io as io,
    )
    from . import (
        metrics as metrics,
    )
    from . import (
        plots as plots,
    )
    from . import (
        report as report,
    )
    from ._schema import SCHEMA_VERSION, STATUSES, function_name, standardise_name
    from .audit import StudyDesign, design_study, run_study, write_requests
    from .choice import ChoiceLog, accuracy_by_gold_position, judge_consistency, option_position_bias, read_choice_study
    from .choicemodel import ChoiceModelResult, choice_model
    from .design import StudyPlan, VarianceComponents, plan_study, variance_components
    from .exceptions import (
        ConvergenceWarning,
        DegenerateDataWarning,
        ExcludedRowsWarning,
        ManifestError,
        MisfitWarning,
        SelectionLogError,
        SmallSampleWarning,
    )
    from .experiments import ShiftResult, SubsetMetricsResult, selection_shift, subset_selection_metrics
    from .features import ToolFeatures, read_feature_table, tool_features
    from .gate import GateResult, assert_selection_fair, check_selection_bias, compare_selection
    from .io import (
        SelectionCounts,
        SelectionLog,
        Study,
        ToolCatalog,
        count_table,
        load_selection_log,
        read_anthropic,
        read_biasbusters,
        read_biasbusters_catalog,
        read_langchain,
        read_mcp,
        read_openai,
        read_otel,
        read_study,
        read_table,
        read_transcripts,
    )
    from .io.readers.inspect_ai_log import read_inspect, read_inspect_choices
    from .io.readers.lm_eval import read_lm_eval
    from .metrics import (
        BiasResult,
        CalibratedTV,
        ConfidenceInterval,
        TVResult,
        calibrated_mean_tv,
        expected_tv_uniform,
        normalised_tv,
        selection_bias,
        tv_distance,
        tv_to_uniform,
    )
    from .models import (
        BayesResult,
        ExplainResult,
        explain_selection,
        feature_correlations,
        fit_bayes,
        model_alignment,
        ols_fit,
    )
    from .shadow import ShadowAudit, ShadowResult, read_shadow_audit, tool_shadow
    from .toolsense import ToolSenseError

__getattr__, __dir__ = _lazy.hooks(globals())
