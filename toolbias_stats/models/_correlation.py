"""Pearson (and Spearman) correlations between tool features and selection rates, per LLM (Table 4)."""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from .._display import ReprHTMLMixin
from .._json import finite as _num
from .._validation import check_confidence_level
from ..exceptions import DegenerateDataWarning, SmallSampleWarning
from ._design import design

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ..features import ToolFeatures
    from ..metrics import BiasResult

__all__ = ["feature_correlations", "CorrelationResult"]

#: Fewer pairs than this trigger a SmallSampleWarning (the Fisher z interval is a large-sample result).
SMALL_N = 10

_COLUMNS = ("model", "feature", "n", "r", "ci_low", "ci_high", "p_value", "p_holm", "p_bh", "spearman_rho",
            "spearman_p", "method", "confidence_level")


@dataclass(frozen=True, eq=False)
class CorrelationResult(ReprHTMLMixin):
    """Result of :func:`feature_correlations`.

    Attributes
    ----------
    table : pandas.DataFrame
        One row per LLM and feature: ``model, feature, n, r, ci_low, ci_high, p_value, p_holm,
        p_bh, spearman_rho, spearman_p, method, confidence_level`` (unrounded).
    models : list of str
    feature_names : list of str
    center : bool
    confidence_level : float
    n_tests : int
        Tests in the multiplicity adjustment (every finite Pearson p of every LLM and feature).
    dropped_features : list of str
        Features left out (all missing, constant, duplicate), with a warning.
    warnings : list of str
    notes : list of str

    Examples
    --------

    >>> import toolbias_stats as tbs
    >>> from toolbias_stats.features import read_feature_table
    >>> feats = read_feature_table(tbs.datasets.path("biasbusters/authors_features.json"))
    >>> from toolbias_stats.models import feature_correlations
    >>> res = feature_correlations(feats)
    >>> res.matrix("r").shape                     # features x LLMs
    (7, 6)
    >>> list(res.to_frame().columns[:7])
    ['model', 'feature', 'n', 'r', 'ci_low', 'ci_high', 'p_value']
    """

    table: pd.DataFrame
    models: list
    feature_names: list
    center: bool
    confidence_level: float
    n_tests: int
    dropped_features: list = field(default_factory=list)
    warnings: list = field(default_factory=list)
    notes: list = field(default_factory=list)

    def to_frame(self) -> pd.DataFrame:
        """Tidy, unrounded table: one row per LLM and feature."""
        return self.table.copy()

    def matrix(self, value: str = "r") -> pd.DataFrame:
        """One column per LLM, one row per feature, holding ``value`` (any column of the table)."""
        if value not in self.table.columns:
            raise ValueError(f"`value` must be a column of the table {list(self.table.columns)}; got {value!r} "
                             "instead.")
        m = self.table.pivot(index="feature", columns="model", values=value)
        return m.reindex(index=self.feature_names, columns=self.models)

    def to_dict(self) -> dict:
        """``{model: {feature: {r, p, ci, n, p_holm, p_bh, spearman_rho, spearman_p}}}`` (JSON-ready)."""
        out: dict = {}
        for row in self.table.itertuples(index=False):
            out.setdefault(row.model, {})[row.feature] = {
                "r": _num(row.r), "p": _num(row.p_value), "ci": [_num(row.ci_low), _num(row.ci_high)], "n": int(row.n),
                "p_holm": _num(row.p_holm), "p_bh": _num(row.p_bh), "spearman_rho": _num(row.spearman_rho),
                "spearman_p": _num(row.spearman_p)}
        return out


def feature_correlations(features: ToolFeatures, rates: BiasResult | ToolFeatures | pd.DataFrame | None = None, *,
                         center: bool = True, feature_names: Sequence[str] | None = None,
                         confidence_level: float = 0.95) -> CorrelationResult:
    """Pearson correlation of every feature with the selection rate, per LLM, with Fisher-z CIs and adjusted p.

    Parameters
    ----------
    features : ToolFeatures
        One row per tool (:func:`~toolbias_stats.features.tool_features` or
        :func:`~toolbias_stats.features.read_feature_table`).
    rates : BiasResult, DataFrame or None
        Per-LLM selection rates (see :func:`~toolbias_stats.models.selection_rates`); None uses
        the rates the feature table carries.
    center : bool, default True
        Centre features (and rates) on their cluster means, as in BiasBusters (Appendix F.1).
    feature_names : sequence of str, optional
        Default: the paper's seven features when present, else every feature.
    confidence_level : float, default 0.95

    Returns
    -------
    CorrelationResult

    Warns
    -----
    SmallSampleWarning
        When a correlation rests on fewer than 10 pairs.
    DegenerateDataWarning
        For dropped features and for a feature or target that is constant for an LLM (r is NaN).

    Notes
    -----
    Each correlation uses the tools where both the feature and the rate are present
    (pairwise-complete), so ``n`` differs between features when some values are missing
    (BiasBusters: 43 tools have an age, 50 everything else). ``p_value`` is the two-sided
    t-test of r = 0 with ``n - 2`` degrees of freedom; the interval is Fisher's z,
    ``tanh(atanh(r) +- z_{1-a/2} / sqrt(n - 3))``. ``p_holm`` (family-wise error) and ``p_bh``
    (false discovery rate, Benjamini-Hochberg) adjust across *all* features x LLMs of the
    call. Spearman's rho and its p-value are given alongside (unadjusted). Tools of one cluster
    share queries and compete for the same choices, so the pairs are not independent; read
    the p-values as descriptive.

    With the authors' table (``authors_features.json``) this reproduces BiasBusters Table 4
    exactly (every r and p to 0.001).

    References
    ----------
    Blankenstein et al., BiasBusters, sec. 3.3, Table 4 and Appendix F.1.
    Holm (1979), Scand. J. Statist. 6:65-70; Benjamini & Hochberg (1995), JRSS B 57:289-300.

    Examples
    --------
    >>> import toolbias_stats as tbs
    >>> from toolbias_stats.features import read_feature_table
    >>> feats = read_feature_table(tbs.datasets.path("biasbusters/authors_features.json"))
    >>> res = feature_correlations(feats)
    >>> round(float(res.matrix("r").loc["avg_similarity_api_desc", "Qwen"]), 3)
    0.411
    """
    from scipy import stats
    from statsmodels.stats.multitest import multipletests

    from .._multitest import holm_adjusted

    level = check_confidence_level(confidence_level)
    caught: list = []
    d = design(features, rates, center=center, feature_names=feature_names, caught=caught)
    rows = []
    small = []
    for m in d.models:
        frame = d.frames[m]
        for f in d.feature_names:
            ok = frame[f].notna() & frame["y"].notna()
            x = frame.loc[ok, f].to_numpy(dtype=float)
            y = frame.loc[ok, "y"].to_numpy(dtype=float)
            n = int(ok.sum())
            row = {"model": m, "feature": f, "n": n, "r": np.nan, "ci_low": np.nan, "ci_high": np.nan,
                   "p_value": np.nan, "spearman_rho": np.nan, "spearman_p": np.nan}
            if n < 3 or np.ptp(x) == 0 or np.ptp(y) == 0:
                msg = (f"{m}: correlation with {f!r} is undefined (n = {n}"
                       + (", constant values" if n >= 3 else "") + "); NaN")
                warnings.warn(msg, DegenerateDataWarning, stacklevel=2)
                caught.append(msg)
            else:
                pr = stats.pearsonr(x, y)
                row.update(r=float(pr.statistic), p_value=float(pr.pvalue))
                if n > 3:
                    ci = pr.confidence_interval(confidence_level=level)
                    row.update(ci_low=float(ci.low), ci_high=float(ci.high))
                sr = stats.spearmanr(x, y)
                row.update(spearman_rho=float(sr.statistic), spearman_p=float(sr.pvalue))
                if n < SMALL_N:
                    small.append(f"{m}/{f} (n = {n})")
            rows.append(row)
    if small:
        msg = (f"{len(small)} correlation(s) rest on fewer than {SMALL_N} tools: {', '.join(small[:5])}"
               f"{', ...' if len(small) > 5 else ''}; their intervals are rough")
        warnings.warn(msg, SmallSampleWarning, stacklevel=2)
        caught.append(msg)
    table = pd.DataFrame(rows, columns=[c for c in _COLUMNS if c not in ("p_holm", "p_bh", "method",
                                                                          "confidence_level")])
    p = table["p_value"].to_numpy(dtype=float)
    fin = np.isfinite(p)
    holm = np.full(len(p), np.nan)
    bh = np.full(len(p), np.nan)
    if fin.any():
        holm[fin] = holm_adjusted(p[fin])
        bh[fin] = multipletests(p[fin], method="fdr_bh")[1]
    table["p_holm"] = holm
    table["p_bh"] = bh
    table["method"] = "pearson"
    table["confidence_level"] = level
    table = table[list(_COLUMNS)]
    notes = list(d.notes) + [
        "pairwise-complete: each feature uses the tools where it and the rate are present",
        f"p_holm / p_bh adjust across all {int(fin.sum())} feature x LLM tests",
        "tools of one cluster are not independent observations; p-values are descriptive",
    ]
    return CorrelationResult(table=table, models=list(d.models), feature_names=list(d.feature_names),
                             center=d.center, confidence_level=level, n_tests=int(fin.sum()),
                             dropped_features=list(d.dropped_features), warnings=caught, notes=notes)


