"""Bias metrics: TV distances, bootstrap intervals, the uniform-chooser reference and per-group results."""

from ._bias import BiasResult, ClusterBias, GroupBias, TVResult, selection_bias
from ._bootstrap import ConfidenceInterval, bca_ci, percentile_ci
from ._calibrated import CalibratedTV, calibrated_mean_tv
from ._tv import expected_tv_uniform, normalised_tv, rates_from_counts, tv_distance, tv_to_uniform

__all__ = ["selection_bias", "BiasResult", "GroupBias", "ClusterBias", "TVResult", "ConfidenceInterval",
           "bca_ci", "percentile_ci", "CalibratedTV", "calibrated_mean_tv", "expected_tv_uniform",
           "normalised_tv", "rates_from_counts", "tv_distance", "tv_to_uniform"]
