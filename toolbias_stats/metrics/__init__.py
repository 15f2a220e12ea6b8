"""Bias metrics: TV distances, bootstrap intervals, the uniform-chooser reference and per-group results."""

import typing as _typing

from .._lazy import LazyNames as _LazyNames

_lazy = _LazyNames(__name__)
_lazy.add('._bias', 'BiasResult', 'ClusterBias', 'GroupBias', 'TVResult', 'selection_bias')
_lazy.add('.._resampling', 'ConfidenceInterval', 'bca_ci', 'percentile_ci')
_lazy.add('._calibrated', 'CalibratedTV', 'calibrated_mean_tv')
_lazy.add('._tv', 'expected_tv_uniform', 'normalised_tv', 'rates_from_counts', 'tv_distance', 'tv_to_uniform')

__all__ = ["selection_bias", "BiasResult", "GroupBias", "ClusterBias", "TVResult", "ConfidenceInterval",
           "bca_ci", "percentile_ci", "CalibratedTV", "calibrated_mean_tv", "expected_tv_uniform",
           "normalised_tv", "rates_from_counts", "tv_distance", "tv_to_uniform"]

if _typing.TYPE_CHECKING:  # the _lazy names, for type checkers (written by rewrite_imports.py)
    from .._resampling import ConfidenceInterval, bca_ci, percentile_ci
    from ._bias import BiasResult, ClusterBias, GroupBias, TVResult, selection_bias
    from ._calibrated import CalibratedTV, calibrated_mean_tv
    from ._tv import expected_tv_uniform, normalised_tv, rates_from_counts, tv_distance, tv_to_uniform

__getattr__, __dir__ = _lazy.hooks(globals())
