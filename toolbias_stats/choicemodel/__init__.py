"""Choice models of tool selection: conditional and mixed logit over the lists actually shown (issue 22).

:func:`choice_model` fits ``P(tool | list) = softmax(worth[tool] + position[p] + features @ beta)`` with one
worth per tool across every list that shows it, query-clustered standard errors, Firth or prior penalties and
an optional mixed logit with query x tool random effects. ``docs/choice_model.md`` has the details.

Distinct from :mod:`toolbias_stats.choice`, which audits multiple-choice answer positions.
"""

import typing as _typing

from .._lazy import LazyNames as _LazyNames

_lazy = _LazyNames(__name__)
_lazy.add('._model', 'PENALTIES', 'POSITION_FORMS', 'SE_METHODS', 'WORTHS', 'choice_model', 'comparison_components')
_lazy.add('._result', 'ChoiceModelResult')
_lazy.add('._simulate', 'simulate_logit_log')
_lazy.rename('simulate_choice_log', 'simulate_logit_log', since="0.2.0")   # one release (issue 40)

__all__ = ["choice_model", "comparison_components", "ChoiceModelResult", "simulate_logit_log", "POSITION_FORMS",
           "PENALTIES", "SE_METHODS", "WORTHS"]

if _typing.TYPE_CHECKING:  # the _lazy names, for type checkers (written by rewrite_imports.py)
    from ._model import PENALTIES, POSITION_FORMS, SE_METHODS, WORTHS, choice_model, comparison_components
    from ._result import ChoiceModelResult
    from ._simulate import simulate_logit_log

__getattr__, __dir__ = _lazy.hooks(globals())
