"""ToolSense diagnostics: retrieval recall (Rc@k, Rf@k), the Internalization Score, probing accuracy and
annotator agreement on the ToolSense benchmarks (SAP), with intervals; offline retrieval baselines.

Readers (:func:`read_rrb`, :func:`read_probe`, :func:`read_rrb_predictions`, :func:`read_probe_predictions`,
:func:`read_annotations`) check every line and raise one :class:`ToolSenseError` naming file, line and field;
the metrics are pure functions returning frozen results with ``to_frame()`` / ``to_dict()``.
"""

import typing as _typing

from .._lazy import LazyNames as _LazyNames

_lazy = _LazyNames(__name__)
_lazy.add('._agreement', 'AgreementResult', 'agreement', 'agreement_coefficients')
_lazy.add('._baselines', 'BaselineResult', 'CorrectSetBiasResult', 'bm25_rankings', 'correct_set_bias',
           'dense_rankings', 'retrieval_baselines', 'tool_text')
_lazy.add('._io', 'CHANCE', 'TIERS', 'ProbeBenchmark', 'RRBBenchmark', 'ToolSenseError', 'bundled_path',
           'read_annotations', 'read_probe', 'read_probe_predictions', 'read_rrb', 'read_rrb_predictions')
_lazy.add('._probes', 'ProbeCorrelationResult', 'ProbeResult', 'probe_accuracy', 'probe_recall_correlation')
_lazy.add('._retrieval', 'ComparisonResult', 'ISEstimate', 'RecallEstimate', 'RetrievalResult',
           'compare_configurations', 'delta_ratio_ci', 'fieller_ratio_ci', 'internalization_score',
           'retrieval_recall')

__all__ = ["read_rrb", "read_probe", "read_rrb_predictions", "read_probe_predictions", "read_annotations",
           "bundled_path", "RRBBenchmark", "ProbeBenchmark", "ToolSenseError", "TIERS", "CHANCE",
           "retrieval_recall", "RetrievalResult", "RecallEstimate", "ISEstimate", "internalization_score",
           "fieller_ratio_ci", "delta_ratio_ci", "compare_configurations", "ComparisonResult",
           "probe_accuracy", "ProbeResult", "probe_recall_correlation", "ProbeCorrelationResult",
           "agreement", "agreement_coefficients", "AgreementResult",
           "retrieval_baselines", "BaselineResult", "bm25_rankings", "dense_rankings", "tool_text",
           "correct_set_bias", "CorrectSetBiasResult"]

if _typing.TYPE_CHECKING:  # the _lazy names, for type checkers (written by rewrite_imports.py)
    from ._agreement import AgreementResult, agreement, agreement_coefficients
    from ._baselines import (
        BaselineResult,
        CorrectSetBiasResult,
        bm25_rankings,
        correct_set_bias,
        dense_rankings,
        retrieval_baselines,
        tool_text,
    )
    from ._io import (
        CHANCE,
        TIERS,
        ProbeBenchmark,
        RRBBenchmark,
        ToolSenseError,
        bundled_path,
        read_annotations,
        read_probe,
        read_probe_predictions,
        read_rrb,
        read_rrb_predictions,
    )
    from ._probes import ProbeCorrelationResult, ProbeResult, probe_accuracy, probe_recall_correlation
    from ._retrieval import (
        ComparisonResult,
        ISEstimate,
        RecallEstimate,
        RetrievalResult,
        compare_configurations,
        delta_ratio_ci,
        fieller_ratio_ci,
        internalization_score,
        retrieval_recall,
    )

__getattr__, __dir__ = _lazy.hooks(globals())
