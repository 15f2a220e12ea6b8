"""Experiments: effects of interventions on tool selection (BiasBusters sec. 4.3-4.4, App. E, J).

:func:`selection_shift` compares the levels of any design column (condition, temperature, checkpoint, ...)
with a base level; :func:`subset_selection_metrics` scores subset-selection mitigation (Table 2) and
:func:`mitigation_distribution` gives the selection distribution that "choose uniformly from the predicted
subset" implies.
"""

import typing as _typing

from .._lazy import LazyNames as _LazyNames

_lazy = _LazyNames(__name__)
_lazy.add('._shift', 'CHANGE_METRICS', 'PAIRINGS', 'SHIFT_METRICS', 'ChangeEstimate', 'ShiftEstimate', 'ShiftGroup',
           'ShiftResult', 'TrendResult', 'calibrated_mean_shift', 'selection_shift')
_lazy.add('._mitigation', 'SUBSET_METRICS', 'MitigationResult', 'SubsetData', 'SubsetMetricsResult', 'load_subsets',
           'mitigation_distribution', 'read_subset_predictions', 'read_subset_table', 'read_subset_truth',
           'subset_selection_metrics')
_lazy.add('._simulate', 'choice_probabilities', 'simulate_conditions')
_lazy.add('._toolcount', 'ToolCountResult', 'tool_count_bias')

__all__ = ["selection_shift", "ShiftResult", "ShiftGroup", "ShiftEstimate", "ChangeEstimate", "TrendResult",
           "calibrated_mean_shift", "PAIRINGS", "SHIFT_METRICS", "CHANGE_METRICS", "simulate_conditions",
           "choice_probabilities", "subset_selection_metrics", "SubsetMetricsResult", "mitigation_distribution",
           "MitigationResult", "SubsetData", "load_subsets", "read_subset_predictions", "read_subset_truth",
           "read_subset_table", "SUBSET_METRICS", "tool_count_bias", "ToolCountResult"]

if _typing.TYPE_CHECKING:  # the _lazy names, for type checkers (written by rewrite_imports.py)
    from ._mitigation import (
        SUBSET_METRICS,
        MitigationResult,
        SubsetData,
        SubsetMetricsResult,
        load_subsets,
        mitigation_distribution,
        read_subset_predictions,
        read_subset_table,
        read_subset_truth,
        subset_selection_metrics,
    )
    from ._shift import (
        CHANGE_METRICS,
        PAIRINGS,
        SHIFT_METRICS,
        ChangeEstimate,
        ShiftEstimate,
        ShiftGroup,
        ShiftResult,
        TrendResult,
        calibrated_mean_shift,
        selection_shift,
    )
    from ._simulate import choice_probabilities, simulate_conditions
    from ._toolcount import ToolCountResult, tool_count_bias

__getattr__, __dir__ = _lazy.hooks(globals())
