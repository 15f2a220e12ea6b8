"""Position bias of multiple-choice answers and pairwise LLM judges: the unit "option shown at position p".

Readers (:func:`read_choice_study`, ``io.readers.inspect_ai_log.read_inspect_choices``,
``io.readers.lm_eval.read_lm_eval``) give a :class:`ChoiceLog`; the statistics are
:func:`option_position_bias` (delta_pos with item-bootstrap CIs, through the tool machinery),
:func:`accuracy_by_gold_position` (accuracy by gold position and under random orderings) and
:func:`judge_consistency` (swapped-pair consistency, primacy / recency preference, ties, repetition
stability). See docs/choice.md.
"""

import typing as _typing

from .._lazy import LazyNames as _LazyNames

_lazy = _LazyNames(__name__)
_lazy.add('..io._choice_log', 'CHOICE_COLUMNS', 'CHOICE_STATUSES', 'ChoiceLog', 'read_choice_table')
_lazy.add('._stats', 'GoldPositionAccuracy', 'OptionPositionBias', 'accuracy_by_gold_position', 'option_position_bias',
           'k_weighted_delta_pos')
_lazy.add('._judge', 'JUDGE_VERDICTS', 'JudgeConsistency', 'judge_consistency')
_lazy.add('._study', 'CHOICE_FORMATS', 'is_choice_manifest', 'read_choice_study')

__all__ = ["ChoiceLog", "CHOICE_COLUMNS", "CHOICE_STATUSES", "CHOICE_FORMATS", "read_choice_study",
           "is_choice_manifest",
           "read_choice_table", "option_position_bias", "accuracy_by_gold_position", "judge_consistency",
           "OptionPositionBias", "GoldPositionAccuracy", "JudgeConsistency", "JUDGE_VERDICTS", "k_weighted_delta_pos"]

if _typing.TYPE_CHECKING:  # the _lazy names, for type checkers (written by rewrite_imports.py)
    from ..io._choice_log import CHOICE_COLUMNS, CHOICE_STATUSES, ChoiceLog, read_choice_table
    from ._judge import JUDGE_VERDICTS, JudgeConsistency, judge_consistency
    from ._stats import (
        GoldPositionAccuracy,
        OptionPositionBias,
        accuracy_by_gold_position,
        k_weighted_delta_pos,
        option_position_bias,
    )
    from ._study import CHOICE_FORMATS, is_choice_manifest, read_choice_study

__getattr__, __dir__ = _lazy.hooks(globals())
