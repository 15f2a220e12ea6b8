"""Plots: a result object in, a matplotlib Figure out (matplotlib is imported lazily, nothing is computed).

Each ``plot_*`` function accepts an optional ``ax`` to draw into; without one it builds a new
Figure on the Agg canvas (no pyplot state, never shown).
"""

import typing as _typing

from .._lazy import LazyNames as _LazyNames

_lazy = _LazyNames(__name__)
_lazy.add('._bias', 'plot_api_vs_position', 'plot_selection_rates')
_lazy.add('._explain', 'plot_alignment', 'plot_correlations', 'plot_importances', 'plot_ols_coefficients')

# group_label and tool_labels (in ._bias) are helpers of the plots and the report, not public (issue 40)
__all__ = ["plot_selection_rates", "plot_api_vs_position", "plot_correlations", "plot_ols_coefficients",
           "plot_importances", "plot_alignment"]

# -- hierarchical Bayesian model ------------------------------------------------------------------
_lazy.add('._bayes', 'plot_api_effects', 'plot_bayes_dispersion', 'plot_bayes_ppc', 'plot_position_effects')

__all__ += ["plot_position_effects", "plot_api_effects", "plot_bayes_ppc", "plot_bayes_dispersion"]

# -- TOOL-SHADOW and ToolSense --------------------------------------------------------------------
_lazy.add('._shadow', 'plot_shadow_contributions', 'plot_shadow_pbs')
_lazy.add('._toolsense', 'plot_internalization', 'plot_probe_accuracy', 'plot_recall_by_tier')

__all__ += ["plot_shadow_contributions", "plot_shadow_pbs", "plot_recall_by_tier", "plot_internalization",
            "plot_probe_accuracy"]

# -- experiments ----------------------------------------------------------------------------------
_lazy.add('._experiments', 'plot_shift', 'plot_sweep', 'plot_tool_count', 'plot_tool_shares')
_lazy.add('._experiments_overview', 'plot_shift_overview')

__all__ += ["plot_shift", "plot_sweep", "plot_tool_shares", "plot_tool_count", "plot_shift_overview"]

# -- the bias report's first screen (issue 26) --------------------------------------------------------
_lazy.add('._overview', 'plot_bias_overview', 'plot_rate_gaps')

__all__ += ["plot_bias_overview", "plot_rate_gaps"]

# -- study design (issue 12) ----------------------------------------------------------------------
_lazy.add('._design', 'plot_plan_widths', 'plot_variance_shares')

__all__ += ["plot_variance_shares", "plot_plan_widths"]

if _typing.TYPE_CHECKING:  # the _lazy names, for type checkers (written by rewrite_imports.py)
    from ._bayes import plot_api_effects, plot_bayes_dispersion, plot_bayes_ppc, plot_position_effects
    from ._bias import plot_api_vs_position, plot_selection_rates
    from ._design import plot_plan_widths, plot_variance_shares
    from ._experiments import plot_shift, plot_sweep, plot_tool_count, plot_tool_shares
    from ._experiments_overview import plot_shift_overview
    from ._explain import plot_alignment, plot_correlations, plot_importances, plot_ols_coefficients
    from ._overview import plot_bias_overview, plot_rate_gaps
    from ._shadow import plot_shadow_contributions, plot_shadow_pbs
    from ._toolsense import plot_internalization, plot_probe_accuracy, plot_recall_by_tier

__getattr__, __dir__ = _lazy.hooks(globals())
