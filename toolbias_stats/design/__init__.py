"""Study design: where the noise of the delta estimates comes from, and how big an audit must be.

:func:`variance_components` decomposes the variance of delta_API / delta_pos / delta_model into queries,
rotations (orderings) within a query, repeated runs, attempt-level noise and clusters; :func:`plan_study`
turns a pilot (or assumed selection distributions) into expected CI half-widths, minimum detectable effects and
the cheapest design reaching a target; :func:`check_plan` checks the planner against simulation with the
package's own estimators. See docs/design.md.
"""

import typing as _typing

from .._lazy import LazyNames as _LazyNames

_lazy = _LazyNames(__name__)
_lazy.add('._components', 'COMPONENTS', 'DESIGN_METRICS', 'VarianceComponents', 'pairing_correlation',
           'variance_components')
_lazy.add('._plan', 'TARGET_KINDS', 'StudyPlan', 'plan_study')
_lazy.add('._simulate', 'check_plan', 'simulate_from_pilot')

__all__ = ["variance_components", "VarianceComponents", "pairing_correlation", "plan_study", "StudyPlan", "check_plan",
           "simulate_from_pilot", "COMPONENTS", "DESIGN_METRICS", "TARGET_KINDS"]

if _typing.TYPE_CHECKING:  # the _lazy names, for type checkers (written by rewrite_imports.py)
    from ._components import COMPONENTS, DESIGN_METRICS, VarianceComponents, pairing_correlation, variance_components
    from ._plan import TARGET_KINDS, StudyPlan, plan_study
    from ._simulate import check_plan, simulate_from_pilot

__getattr__, __dir__ = _lazy.hooks(globals())
