"""Linear regression of selection rates on tool features, per LLM (statsmodels; BiasBusters Fig. 13)."""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from .._display import ReprHTMLMixin
from .._json import finite as _num
from .._validation import check_confidence_level
from ..exceptions import SmallSampleWarning
from ._design import design

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ..features import ToolFeatures
    from ..metrics import BiasResult

__all__ = ["ols_fit", "OLSResult", "OLSFit"]

#: Fewer rows per predictor than this trigger a SmallSampleWarning (a common rule of thumb: 10-20).
MIN_ROWS_PER_PREDICTOR = 10
#: Fewer clusters than this make cluster-robust standard errors unreliable (noted, with a warning).
MIN_CLUSTERS = 20

_COEF_COLUMNS = ("model", "term", "coef", "se", "ci_low", "ci_high", "t", "p_value", "se_hc3", "ci_hc3_low",
                 "ci_hc3_high", "p_hc3", "se_cluster", "ci_cluster_low", "ci_cluster_high", "p_cluster", "std_coef")


@dataclass(frozen=True, eq=False)
class OLSFit:
    """One LLM's regression.

    Attributes
    ----------
    model : str
    n : int
        Rows used (tools with every feature and the rate present).
    n_excluded : int
        Tools with a rate but a missing feature value.
    n_predictors : int
    n_clusters : int
    r2, adj_r2 : float
        In-sample R^2 and adjusted R^2 (NaN when the model could not be fitted).
    f_pvalue : float
        p-value of the overall F test (classical).
    condition_number : float
        Of the design matrix (large = collinear predictors).
    coefficients : pandas.DataFrame
        One row per term (``Intercept`` first): ``coef``, classical ``se`` / CI / ``t`` /
        ``p_value``, HC3 (``se_hc3``, ``ci_hc3_*``, ``p_hc3``), cluster-robust by cluster
        (``se_cluster``, ``ci_cluster_*``, ``p_cluster``) and ``std_coef`` (coefficient x sd(x) / sd(y)).
    formula : str

    Examples
    --------

    >>> import toolbias_stats as tbs
    >>> from toolbias_stats.features import read_feature_table
    >>> feats = read_feature_table(tbs.datasets.path("biasbusters/authors_features.json"))
    >>> from toolbias_stats.models import ols_fit
    >>> fit = ols_fit(feats).fit_for("ToolLLaMA")
    >>> fit.n, fit.n_predictors, round(fit.r2, 3)
    (43, 7, 0.387)
    """

    model: str
    n: int
    n_excluded: int
    n_predictors: int
    n_clusters: int
    r2: float
    adj_r2: float
    f_pvalue: float
    condition_number: float
    coefficients: pd.DataFrame
    formula: str

    def to_dict(self) -> dict:
        coefs = {}
        for row in self.coefficients.itertuples(index=False):
            coefs[row.term] = {
                "coef": _num(row.coef), "se": _num(row.se), "ci": [_num(row.ci_low), _num(row.ci_high)],
                "p": _num(row.p_value), "se_hc3": _num(row.se_hc3),
                "ci_hc3": [_num(row.ci_hc3_low), _num(row.ci_hc3_high)],
                "p_hc3": _num(row.p_hc3), "se_cluster": _num(row.se_cluster),
                "ci_cluster": [_num(row.ci_cluster_low), _num(row.ci_cluster_high)], "p_cluster": _num(row.p_cluster),
                "std_coef": _num(row.std_coef)}
        return {"r2": _num(self.r2), "adj_r2": _num(self.adj_r2), "n": self.n, "n_excluded": self.n_excluded,
                "n_predictors": self.n_predictors, "n_clusters": self.n_clusters, "f_pvalue": _num(self.f_pvalue),
                "condition_number": _num(self.condition_number), "coefficients": coefs}


@dataclass(frozen=True, eq=False)
class OLSResult(ReprHTMLMixin):
    """Result of :func:`ols_fit`: one :class:`OLSFit` per LLM.

    Attributes
    ----------
    fits : list of OLSFit
    feature_names : list of str
    center : bool
    confidence_level : float
    dropped_features : list of str
    warnings : list of str
    notes : list of str

    Examples
    --------

    >>> import toolbias_stats as tbs
    >>> from toolbias_stats.features import read_feature_table
    >>> feats = read_feature_table(tbs.datasets.path("biasbusters/authors_features.json"))
    >>> from toolbias_stats.models import ols_fit
    >>> res = ols_fit(feats)
    >>> list(res.to_frame().columns[:6])          # one row per LLM and term
    ['model', 'term', 'coef', 'se', 'ci_low', 'ci_high']
    >>> round(res.fit_for("ToolLLaMA").r2, 3)    # BiasBusters F.1
    0.387
    """

    fits: list
    feature_names: list
    center: bool
    confidence_level: float
    dropped_features: list = field(default_factory=list)
    warnings: list = field(default_factory=list)
    notes: list = field(default_factory=list)

    def to_frame(self) -> pd.DataFrame:
        """Tidy, unrounded coefficient table: one row per LLM and term."""
        parts = [f.coefficients for f in self.fits]
        return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=list(_COEF_COLUMNS))

    def summary_frame(self) -> pd.DataFrame:
        """One row per LLM: n, n_excluded, n_predictors, rows per predictor, r2, adj_r2, F-test p, condition number."""
        return pd.DataFrame([{"model": f.model, "n": f.n, "n_excluded": f.n_excluded, "n_predictors": f.n_predictors,
                              "rows_per_predictor": f.n / f.n_predictors if f.n_predictors else np.nan,
                              "n_clusters": f.n_clusters, "r2": f.r2, "adj_r2": f.adj_r2, "f_pvalue": f.f_pvalue,
                              "condition_number": f.condition_number} for f in self.fits])

    def fit_for(self, model: str) -> OLSFit:
        """The fit of one LLM."""
        for f in self.fits:
            if f.model == model:
                return f
        raise KeyError(f"no fit for model {model!r}; have {[f.model for f in self.fits]}")

    def to_dict(self) -> dict:
        return {f.model: f.to_dict() for f in self.fits}


def ols_fit(features: ToolFeatures, rates: BiasResult | ToolFeatures | pd.DataFrame | None = None, *,
            center: bool = True, feature_names: Sequence[str] | None = None,
            confidence_level: float = 0.95) -> OLSResult:
    """Ordinary least squares of the selection rate on the features, per LLM, with robust standard errors.

    Parameters
    ----------
    features : ToolFeatures
    rates : BiasResult, DataFrame or None
        Per-LLM selection rates; None uses the rates the feature table carries.
    center : bool, default True
        Centre features and rates on their cluster means (BiasBusters Appendix F.1).
    feature_names : sequence of str, optional
        Predictors; default the paper's seven when present, else every feature.
    confidence_level : float, default 0.95

    Returns
    -------
    OLSResult

    Warns
    -----
    SmallSampleWarning
        Fewer than 10 rows per predictor (BiasBusters: 43 rows for 7 predictors), fewer than 20
        clusters for the cluster-robust errors, or too few rows to fit at all (NaN).
    DegenerateDataWarning
        Dropped features (all missing, constant, duplicate).

    Notes
    -----
    Fitted with the statsmodels formula API (``smf.ols("y ~ x1 + ... + xp")``) on the tools
    with every predictor present (complete cases). Three sets of standard errors are reported
    for the same coefficients: classical, HC3 (heteroskedasticity-consistent, MacKinnon &
    White 1985) and cluster-robust with the tool's cluster as group (statsmodels' small-sample
    correction, t with G - 1 df). With 10 clusters the cluster-robust errors are themselves very
    uncertain. Centring subtracts cluster means that the classical degrees of freedom do not
    count (``n - p - 1`` instead of ``n - p - G``), which makes classical p-values slightly small.
    ``std_coef`` is the coefficient in standard deviations of y per standard deviation of x.

    In-sample R^2 with few rows per predictor is optimistic; compare ``adj_r2`` and the
    cross-validated R^2 of :func:`~toolbias_stats.models.ensemble_cv`. With the authors' table
    this gives R^2 = 0.143 for GPT-4.1 mini and 0.387 for ToolLLaMA (BiasBusters F.1).

    Examples
    --------
    >>> import toolbias_stats as tbs
    >>> from toolbias_stats.features import read_feature_table
    >>> feats = read_feature_table(tbs.datasets.path("biasbusters/authors_features.json"))
    >>> round(float(ols_fit(feats).fit_for("ToolLLaMA").r2), 3)
    0.387
    """
    import statsmodels.formula.api as smf

    level = check_confidence_level(confidence_level)
    alpha = 1 - level
    caught: list = []
    d = design(features, rates, center=center, feature_names=feature_names, caught=caught)
    names = list(d.feature_names)
    alias = {f: f"x{i}" for i, f in enumerate(names)}
    formula = "y ~ " + (" + ".join(alias.values()) if names else "1")
    readable = "y ~ " + (" + ".join(names) if names else "1")
    fits = []
    few_rows, few_clusters = [], []
    for m in d.models:
        frame = d.frames[m]
        ok = frame[["y", *names]].notna().all(axis=1)
        data = frame.loc[ok].rename(columns=alias).reset_index(drop=True)
        n, p = len(data), len(names)
        n_clusters = int(data["cluster_id"].nunique()) if n else 0
        if n <= p + 1:
            msg = f"{m}: {n} complete rows for {p} predictors: the regression cannot be fitted (NaN)"
            warnings.warn(msg, SmallSampleWarning, stacklevel=2)
            caught.append(msg)
            fits.append(_empty_fit(m, n, int((~ok).sum()), p, n_clusters, names, readable))
            continue
        if p and n / p < MIN_ROWS_PER_PREDICTOR:
            few_rows.append(f"{m} ({n} rows / {p} predictors = {n / p:.1f})")
        if n_clusters < MIN_CLUSTERS:
            few_clusters.append(m)
        model = smf.ols(formula, data=data)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # statsmodels' own small-sample chatter; ours is explicit
            classical = model.fit()
            hc3 = model.fit(cov_type="HC3", use_t=True)
            clus = (model.fit(cov_type="cluster", cov_kwds={"groups": pd.factorize(data["cluster_id"])[0]},
                              use_t=True) if n_clusters >= 2 else None)
        terms = ["Intercept", *names]
        keys = ["Intercept", *alias.values()]
        ci = classical.conf_int(alpha)
        ci3 = hc3.conf_int(alpha)
        cic = clus.conf_int(alpha) if clus is not None else None
        sd_y = float(data["y"].std(ddof=1))
        rows = []
        for term, key in zip(terms, keys):
            sd_x = float(data[key].std(ddof=1)) if key != "Intercept" else np.nan
            rows.append({
                "model": m, "term": term, "coef": float(classical.params[key]), "se": float(classical.bse[key]),
                "ci_low": float(ci.loc[key, 0]), "ci_high": float(ci.loc[key, 1]), "t": float(classical.tvalues[key]),
                "p_value": float(classical.pvalues[key]), "se_hc3": float(hc3.bse[key]),
                "ci_hc3_low": float(ci3.loc[key, 0]), "ci_hc3_high": float(ci3.loc[key, 1]),
                "p_hc3": float(hc3.pvalues[key]),
                "se_cluster": float(clus.bse[key]) if clus is not None else np.nan,
                "ci_cluster_low": float(cic.loc[key, 0]) if cic is not None else np.nan,
                "ci_cluster_high": float(cic.loc[key, 1]) if cic is not None else np.nan,
                "p_cluster": float(clus.pvalues[key]) if clus is not None else np.nan,
                "std_coef": float(classical.params[key]) * sd_x / sd_y if key != "Intercept" and sd_y > 0 else np.nan,
            })
        fits.append(OLSFit(model=m, n=n, n_excluded=int((~ok).sum()), n_predictors=p, n_clusters=n_clusters,
                           r2=float(classical.rsquared), adj_r2=float(classical.rsquared_adj),
                           f_pvalue=float(classical.f_pvalue) if p else np.nan,
                           condition_number=float(classical.condition_number),
                           coefficients=pd.DataFrame(rows, columns=list(_COEF_COLUMNS)), formula=readable))
    if few_rows:
        msg = (f"few rows per predictor (< {MIN_ROWS_PER_PREDICTOR}) for {', '.join(few_rows)}: coefficients are "
               "imprecise and in-sample R^2 is optimistic (see adj_r2 and the cross-validated R^2)")
        warnings.warn(msg, SmallSampleWarning, stacklevel=2)
        caught.append(msg)
    if few_clusters:
        msg = (f"cluster-robust standard errors rest on fewer than {MIN_CLUSTERS} clusters for "
               f"{len(few_clusters)} LLM(s); treat them as rough")
        warnings.warn(msg, SmallSampleWarning, stacklevel=2)
        caught.append(msg)
    notes = list(d.notes) + [
        "complete cases: tools with every predictor and the rate present",
        "standard errors: classical, HC3, and cluster-robust by cluster (t with G-1 df)",
        "centring uses cluster means that classical df do not count: classical p-values are slightly small",
    ]
    return OLSResult(fits=fits, feature_names=names, center=d.center, confidence_level=level,
                     dropped_features=list(d.dropped_features), warnings=caught, notes=notes)


def _empty_fit(model, n, n_excluded, p, n_clusters, names, formula) -> OLSFit:
    rows = [dict.fromkeys(_COEF_COLUMNS, np.nan) | {"model": model, "term": t} for t in ["Intercept", *names]]
    return OLSFit(model=model, n=n, n_excluded=n_excluded, n_predictors=p, n_clusters=n_clusters, r2=np.nan,
                  adj_r2=np.nan, f_pvalue=np.nan, condition_number=np.nan,
                  coefficients=pd.DataFrame(rows, columns=list(_COEF_COLUMNS)), formula=formula)


