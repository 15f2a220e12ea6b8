"""Figures of the explanation models: correlation and alignment heat maps, OLS coefficients, importances.

Each function takes an already computed result (:class:`~toolbias_stats.models.CorrelationResult`,
:class:`~toolbias_stats.models.OLSResult`, :class:`~toolbias_stats.models.EnsembleResult`,
:class:`~toolbias_stats.models.AlignmentResult`) and draws it; nothing is estimated here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ._bias import _colours, _figure_and_axes, _mpl_text

if TYPE_CHECKING:
    from typing import Literal

    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    from ..models import AlignmentResult, CorrelationResult, EnsembleResult, OLSResult

__all__ = ["plot_correlations", "plot_ols_coefficients", "plot_importances", "plot_alignment"]


def plot_correlations(result: CorrelationResult, ax: Axes | None = None, *, value: str = "r", mark: str | None = "p_bh",
                      alpha: float = 0.05) -> Figure:
    """Heat map of feature-rate correlations: one row per feature, one column per LLM (cf. BiasBusters Table 4).

    Parameters
    ----------
    result : CorrelationResult
        Output of :func:`toolbias_stats.models.feature_correlations`.
    ax : matplotlib.axes.Axes, optional
    value : str, default "r"
        Column to colour by (``"r"`` or ``"spearman_rho"``).
    mark : str or None, default "p_bh"
        p-value column; cells with ``mark < alpha`` get an asterisk. None marks nothing.
    alpha : float, default 0.05

    Returns
    -------
    matplotlib.figure.Figure

    Examples
    --------
    >>> import toolbias_stats as tbs
    >>> from toolbias_stats.features import read_feature_table
    >>> res = tbs.feature_correlations(read_feature_table(tbs.datasets.path("biasbusters/authors_features.json")))
    >>> fig = plot_correlations(res)            # the heat map and its colour bar
    >>> len(fig.axes)
    2
    """
    mat = result.matrix(value)
    pm = result.matrix(mark) if mark else None
    n_f, n_m = mat.shape
    fig, ax = _figure_and_axes(ax, figsize=(1.4 + 1.05 * n_m + 1.8, 0.9 + 0.45 * n_f))
    im = ax.imshow(mat.to_numpy(dtype=float), cmap="RdBu_r", vmin=-1, vmax=1, aspect="auto")
    for i in range(n_f):
        for j in range(n_m):
            v = mat.iat[i, j]
            if not np.isfinite(v):
                ax.text(j, i, "\u2014", ha="center", va="center", fontsize=8, color="#555555")
                continue
            star = "*" if pm is not None and np.isfinite(pm.iat[i, j]) and pm.iat[i, j] < alpha else ""
            ax.text(j, i, f"{v:+.2f}{star}", ha="center", va="center", fontsize=8,
                    color="white" if abs(v) > 0.6 else "#111111")
    ax.set_xticks(range(n_m))
    ax.set_xticklabels([_mpl_text(m) for m in mat.columns], rotation=30, ha="right", fontsize=8)
    ax.set_yticks(range(n_f))
    ax.set_yticklabels([_mpl_text(f) for f in mat.index], fontsize=8)
    cb = ax.figure.colorbar(im, ax=ax, shrink=0.8)
    cb.set_label(f"Pearson {value}" if value == "r" else value, fontsize=8)
    title = "Feature-rate correlation" + (" (cluster-centred)" if result.center else "")
    if mark:
        title += f"\n* {mark} < {alpha:g}"
    ax.set_title(title, fontsize=10, loc="left")
    return fig


def plot_ols_coefficients(result: OLSResult, ax: Axes | None = None, *, kind: Literal["std_coef", "coef"] = "std_coef",
                          interval: Literal["hc3", "classical", "cluster"] = "hc3") -> Figure:
    """Grouped bars of regression coefficients per feature and LLM, with intervals (cf. BiasBusters Fig. 13).

    Parameters
    ----------
    result : OLSResult
        Output of :func:`toolbias_stats.models.ols_fit`.
    ax : matplotlib.axes.Axes, optional
    kind : {"std_coef", "coef"}, default "std_coef"
        Standardised coefficients (comparable across features) or raw ones.
    interval : {"hc3", "classical", "cluster"}, default "hc3"
        Which confidence interval to draw (raw coefficients); standardised bars are scaled from it.

    Returns
    -------
    matplotlib.figure.Figure

    Notes
    -----
    The legend shows each LLM's in-sample R^2 (and adjusted R^2), as in the paper's figure.

    Examples
    --------

    >>> import toolbias_stats as tbs
    >>> from toolbias_stats.features import read_feature_table
    >>> feats = read_feature_table(tbs.datasets.path("biasbusters/authors_features.json"))
    >>> from toolbias_stats.models import ols_fit
    >>> fig = plot_ols_coefficients(ols_fit(feats))
    >>> len(fig.axes)
    1
    """
    if kind not in ("std_coef", "coef"):
        raise ValueError(f"`kind` must be one of 'std_coef', 'coef'; got {kind!r} instead.")
    cols = {"hc3": ("ci_hc3_low", "ci_hc3_high"), "classical": ("ci_low", "ci_high"),
            "cluster": ("ci_cluster_low", "ci_cluster_high")}
    if interval not in cols:
        raise ValueError(f"`interval` must be one of {list(cols)}; got {interval!r} instead.")
    feats = list(result.feature_names)
    fits = list(result.fits)
    fig, ax = _figure_and_axes(ax, figsize=(max(6.5, 1.2 * len(feats) + 3), 4.2))
    n = max(1, len(fits))
    width = 0.8 / n
    x = np.arange(len(feats), dtype=float)
    colours = _colours(len(fits))
    lo_c, hi_c = cols[interval]
    for j, fit in enumerate(fits):
        tab = fit.coefficients.set_index("term").reindex(feats)
        coef = tab["coef"].to_numpy(dtype=float)
        lo = tab[lo_c].to_numpy(dtype=float)
        hi = tab[hi_c].to_numpy(dtype=float)
        if kind == "std_coef":
            scale = np.where(coef != 0, tab["std_coef"].to_numpy(dtype=float) / np.where(coef != 0, coef, 1), np.nan)
            coef, lo, hi = coef * scale, lo * scale, hi * scale
        xs = x - 0.4 + width * (j + 0.5)
        label = f"{fit.model} (R\u00b2 {fit.r2:.3f}, adj. {fit.adj_r2:.3f})" if np.isfinite(fit.r2) else fit.model
        ax.bar(xs, coef, width=width, color=colours[j], edgecolor="white", linewidth=0.4, label=_mpl_text(label),
               zorder=2)
        ok = np.isfinite(coef) & np.isfinite(lo) & np.isfinite(hi)
        if ok.any():
            ax.errorbar(xs[ok], coef[ok], yerr=np.vstack([coef[ok] - lo[ok], hi[ok] - coef[ok]]), fmt="none",
                        ecolor="#222222", elinewidth=0.7, capsize=min(2.5, 30.0 / n), zorder=3)
    ax.axhline(0, color="#444444", linewidth=0.8)
    ax.set_xticks(x)
    ax.set_xticklabels([_mpl_text(f) for f in feats], rotation=25, ha="right", fontsize=8)
    ax.set_ylabel("standardised coefficient" if kind == "std_coef" else "coefficient")
    ax.grid(axis="y", color="#dddddd", linewidth=0.6, zorder=0)
    ax.set_axisbelow(True)
    ax.spines[["top", "right"]].set_visible(False)
    level = 100 * result.confidence_level
    ax.set_title(f"OLS coefficients per LLM ({level:g}% {interval.upper() if interval == 'hc3' else interval} CI)",
                 fontsize=10, loc="left")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=7, frameon=False)
    return fig


def plot_importances(result: EnsembleResult, ax: Axes | None = None) -> Figure:
    """Out-of-fold permutation importance per feature and LLM, with its spread across folds.

    Parameters
    ----------
    result : EnsembleResult
        Output of :func:`toolbias_stats.models.ensemble_cv`.
    ax : matplotlib.axes.Axes, optional

    Returns
    -------
    matplotlib.figure.Figure

    Notes
    -----
    Points are the mean rise in test MSE across folds, bars +- one standard deviation across
    folds. The legend gives each LLM's cross-validated R^2 next to the constant baseline's;
    hollow markers flag LLMs whose model does not beat the baseline (their importances
    describe noise).

    Examples
    --------
    Six clusters of four tools whose selection rate rises with ``f1``; a small forest:

    >>> import numpy as np
    >>> import pandas as pd
    >>> import toolbias_stats as tbs
    >>> from toolbias_stats.models import ensemble_cv
    >>> gen = np.random.default_rng(0)
    >>> table = pd.DataFrame({"tool_id": [f"t{i}" for i in range(24)], "cluster_id": np.repeat(list("abcdef"), 4),
    ...                       "f1": gen.normal(size=24), "f2": gen.normal(size=24)})
    >>> feats = tbs.ToolFeatures(table=table, feature_names=("f1", "f2"))
    >>> rates = pd.DataFrame({"model": "m", "tool_id": table["tool_id"], "rate": 0.25 + 0.1 * table["f1"]})
    >>> fig = plot_importances(ensemble_cv(feats, rates, n_estimators=10, n_repeats=1, n_permutations=2, rng=1))
    >>> len(fig.axes)
    1
    """
    feats = list(result.feature_names)
    fits = list(result.fits)
    fig, ax = _figure_and_axes(ax, figsize=(7.5, 0.9 + 0.5 * max(1, len(feats))))
    n = max(1, len(fits))
    height = 0.8 / n
    y = np.arange(len(feats), dtype=float)
    colours = _colours(len(fits))
    scheme = result.params.get("importance_scheme", "loco")
    for j, fit in enumerate(fits):
        tab = fit.importances.set_index("feature").reindex(feats)
        mean = tab["mean"].to_numpy(dtype=float)
        sd = np.nan_to_num(tab["sd"].to_numpy(dtype=float))
        ys = y - 0.4 + height * (j + 0.5)
        r2, base = fit.score(scheme, "r2"), fit.score(scheme, "baseline_r2")
        beats = bool(np.isfinite(r2) and np.isfinite(base)
                     and fit.score(scheme, "rmse") < fit.score(scheme, "baseline_rmse"))
        label = (f"{fit.model}: CV R\u00b2 {r2:.2f} vs const. {base:.2f}" if np.isfinite(r2) else f"{fit.model}: no CV")
        ok = np.isfinite(mean)
        ax.errorbar(mean[ok], ys[ok], xerr=sd[ok], fmt="o", color=colours[j], markersize=4, elinewidth=0.8,
                    capsize=1.5, markerfacecolor=colours[j] if beats else "white", label=_mpl_text(label), zorder=3)
    ax.axvline(0, color="#444444", linewidth=0.8)
    ax.set_yticks(y)
    ax.set_yticklabels([_mpl_text(f) for f in feats], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("rise in test MSE when shuffled (mean \u00b1 sd across folds)")
    ax.grid(axis="x", color="#dddddd", linewidth=0.6, zorder=0)
    ax.spines[["top", "right"]].set_visible(False)
    ax.set_title(f"Permutation importance, {result.estimator.replace('_', ' ')} ({scheme} folds; hollow = worse "
                 "than constant)", fontsize=10, loc="left")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=7, frameon=False)
    return fig


def plot_alignment(result: AlignmentResult, ax: Axes | None = None) -> Figure:
    """Heat map of the LLMs' selection-rate correlations with bootstrap intervals (cf. BiasBusters Fig. 15).

    Parameters
    ----------
    result : AlignmentResult
        Output of :func:`toolbias_stats.models.model_alignment`.
    ax : matplotlib.axes.Axes, optional

    Returns
    -------
    matplotlib.figure.Figure

    Examples
    --------

    >>> import toolbias_stats as tbs
    >>> from toolbias_stats.features import read_feature_table
    >>> feats = read_feature_table(tbs.datasets.path("biasbusters/authors_features.json"))
    >>> from toolbias_stats.models import model_alignment
    >>> fig = plot_alignment(model_alignment(feats, n_resamples=0))
    >>> len(fig.axes)                     # the heat map and its colour bar
    2
    """
    mat = result.matrix.to_numpy(dtype=float)
    k = len(result.models)
    fig, ax = _figure_and_axes(ax, figsize=(2.0 + 1.1 * k, 1.2 + 0.85 * k))
    im = ax.imshow(mat, cmap="RdBu_r", vmin=-1, vmax=1)
    lo = result.ci_low.to_numpy(dtype=float)
    hi = result.ci_high.to_numpy(dtype=float)
    for i in range(k):
        for j in range(k):
            v = mat[i, j]
            if not np.isfinite(v):
                ax.text(j, i, "\u2014", ha="center", va="center", fontsize=8)
                continue
            txt = f"{v:.2f}"
            if i != j and np.isfinite(lo[i, j]) and np.isfinite(hi[i, j]):
                txt += f"\n[{lo[i, j]:.2f}, {hi[i, j]:.2f}]"
            ax.text(j, i, txt, ha="center", va="center", fontsize=7, color="white" if abs(v) > 0.6 else "#111111")
    labels = [_mpl_text(m) for m in result.models]
    ax.set_xticks(range(k))
    ax.set_xticklabels(labels, rotation=30, ha="right", fontsize=8)
    ax.set_yticks(range(k))
    ax.set_yticklabels(labels, fontsize=8)
    cb = ax.figure.colorbar(im, ax=ax, shrink=0.8)
    cb.set_label(f"{result.method.capitalize()} r", fontsize=8)
    title = f"Alignment of selection rates ({result.method})"
    if result.n_resamples:
        title += f"\n{100 * result.confidence_level:g}% bootstrap CI, {result.resample}s resampled"
    ax.set_title(title, fontsize=10, loc="left")
    return fig
