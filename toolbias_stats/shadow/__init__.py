"""TOOL-SHADOW v1: the Positional Bias Score (PBS) of an agent harness's tool manifest, with honest uncertainty.

Readers (:func:`read_shadow_audit`: manifest JSON, call log, relevance labels, turns; :func:`audit_from_study`:
any SelectionLog) give a :class:`ShadowAudit`; :func:`tool_shadow` scores it on the four domains L, D, S, R
(:class:`ShadowResult`, both the paper's scale and an effect-size scale, turn-level bootstrap CIs and a
weight-sensitivity band); :func:`worksheet_weights` is the paper's weight-derivation worksheet; the validation
protocol is :func:`ab_primary_outcome`, :func:`calibration_in_the_large` and :func:`discrimination_auc`.

Every output carries the paper's banner: **pre-validation; not for deployment gating**. No harness has been
validated with this framework.
"""

import typing as _typing

from .._lazy import LazyNames as _LazyNames

_lazy = _LazyNames(__name__)
_lazy.add('._adapter', 'audit_from_selection_log', 'audit_from_study')
_lazy.add('._io', 'ShadowAudit', 'read_manifest', 'read_shadow_audit')
_lazy.add('._score', 'DomainScore', 'PBSScore', 'ShadowGroup', 'ShadowResult', 'name_task_similarity', 'tool_shadow')
_lazy.add('._simulate', 'simulate_audit')
_lazy.add('._validation_protocol', 'ABOutcome', 'CalibrationResult', 'DiscriminationResult', 'ab_primary_outcome',
           'calibration_in_the_large', 'discrimination_auc', 'VALIDATION_STATUS')
_lazy.add('._weights', 'DOMAINS', 'V1_WEIGHTS', 'W_FLOOR', 'ShadowWeights', 'draw_weights', 'worksheet_weights')
# the banner text is what every result carries (``ShadowResult.banner``), not a public constant (issue 40)

__all__ = ["ShadowAudit", "read_shadow_audit", "read_manifest", "audit_from_study", "audit_from_selection_log",
           "tool_shadow", "ShadowResult", "ShadowGroup", "DomainScore", "PBSScore", "name_task_similarity",
           "worksheet_weights", "ShadowWeights", "draw_weights", "V1_WEIGHTS", "W_FLOOR", "DOMAINS",
           "simulate_audit", "ab_primary_outcome", "calibration_in_the_large", "discrimination_auc", "ABOutcome",
           "CalibrationResult", "DiscriminationResult", "VALIDATION_STATUS"]

if _typing.TYPE_CHECKING:  # the _lazy names, for type checkers (written by rewrite_imports.py)
    from ._adapter import audit_from_selection_log, audit_from_study
    from ._io import ShadowAudit, read_manifest, read_shadow_audit
    from ._score import DomainScore, PBSScore, ShadowGroup, ShadowResult, name_task_similarity, tool_shadow
    from ._simulate import simulate_audit
    from ._validation_protocol import (
        VALIDATION_STATUS,
        ABOutcome,
        CalibrationResult,
        DiscriminationResult,
        ab_primary_outcome,
        calibration_in_the_large,
        discrimination_auc,
    )
    from ._weights import DOMAINS, V1_WEIGHTS, W_FLOOR, ShadowWeights, draw_weights, worksheet_weights

__getattr__, __dir__ = _lazy.hooks(globals())
