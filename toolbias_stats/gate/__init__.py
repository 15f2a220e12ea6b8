"""The release gate (issue 39): may this agent release ship?

:func:`check_selection_bias` decides per group and metric whether the calibrated interval of δ_API / δ_pos lies
above a threshold (``rule="exceeds"``) or below it (``rule="within"``); :func:`compare_selection` does the same
for the selection shift between two versions and tests every tool's share (Holm); :func:`assert_selection_fair`
is the pytest helper. The results are :class:`GateResult` objects; :func:`junit_xml` and
:func:`markdown_summary` render them for CI systems. ``toolbias-stats check`` and ``compare`` wire them.
"""

from ._check import assert_selection_fair, check_selection_bias, check_threshold, decide
from ._compare import combine_versions, compare_selection
from ._render import junit_xml, markdown_summary, text_table
from ._result import OUTCOMES, RULES, STATUSES, GateDecision, GateResult, promise

__all__ = ["check_selection_bias", "compare_selection", "assert_selection_fair", "GateResult", "GateDecision",
           "junit_xml", "markdown_summary", "text_table", "decide", "check_threshold", "combine_versions",
           "promise", "RULES", "OUTCOMES", "STATUSES"]
