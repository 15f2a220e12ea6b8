"""The text layer: the plain text of every result, as the command line prints it and ``str(result)`` returns it.

Formatting only, from the result objects' attributes: numbers are rounded by :mod:`toolbias_stats._format` and
nothing is computed here. This package sits at the results layer (beside :mod:`toolbias_stats._display`): it
imports core modules only, so that result classes, the report and the CLI can all import it (the report's HTML
reuses the helpers exported below).

Examples
--------
>>> from toolbias_stats._text import resampling_note
>>> resampling_note(2000, 0.95)
'2000 bootstrap replicates, 95% CIs'
"""

from ._bayes import bayes_disagreements, bayes_extra_terms, fit_text, format_bayes_text
from ._bias import format_bias_table, format_validation, resampling_note
from ._choice import format_choice_accuracy_text, format_choice_judge_text, format_choice_position_text
from ._choicemodel import (
    DISAGREE_SHARE,
    choice_model_label,
    format_choice_model_text,
    format_components_text,
    position_side_by_side,
)
from ._design import PLAN_LABELS, format_plan_text, format_study_plan_text, percent, plan_keys
from ._experiments import SHIFT_LABELS, format_shift_text, format_subsets_text, shift_keys
from ._explain import format_explain_text
from ._shadow import (
    SHADOW_DOMAIN_NAMES,
    SHADOW_DOMAINS,
    format_shadow_text,
    format_worksheet_text,
    needs_breakdown,
    shadow_label,
)
from ._toolsense import (
    TOOLSENSE_TIERS,
    estimate_cell,
    format_agreement_text,
    format_baselines_text,
    format_probe_result_text,
    format_probe_text,
    format_retrieval_text,
    invalid_names_text,
    retrieval_rows,
)

__all__ = [
    # formatters: result (or its parts) -> the text the command prints
    "format_bias_table", "format_validation", "format_choice_position_text", "format_choice_accuracy_text",
    "format_choice_judge_text", "format_shift_text", "format_subsets_text", "format_shadow_text",
    "format_worksheet_text", "format_retrieval_text", "format_probe_text", "format_probe_result_text",
    "format_agreement_text", "format_baselines_text", "format_bayes_text", "format_explain_text",
    "format_plan_text", "format_study_plan_text", "format_choice_model_text", "format_components_text",
    # helpers the report's HTML shares with the text
    "resampling_note", "bayes_disagreements", "bayes_extra_terms", "fit_text", "DISAGREE_SHARE", "choice_model_label",
    "position_side_by_side", "PLAN_LABELS", "percent", "plan_keys", "SHIFT_LABELS", "shift_keys",
    "SHADOW_DOMAIN_NAMES", "SHADOW_DOMAINS", "needs_breakdown", "shadow_label", "TOOLSENSE_TIERS", "estimate_cell",
    "invalid_names_text", "retrieval_rows",
]
