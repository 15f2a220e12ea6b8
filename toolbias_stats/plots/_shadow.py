"""Figures of TOOL-SHADOW results: per-domain contributions w_d z_d and PBS per harness with its bands.

Every function takes a :class:`~toolbias_stats.shadow.ShadowResult` (already computed) and draws it; nothing
is estimated here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ._bias import _colours, _figure_and_axes, _mpl_text

if TYPE_CHECKING:

    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    from ..shadow import ShadowResult

__all__ = ["plot_shadow_contributions", "plot_shadow_pbs"]

_DOMAINS = ("L", "D", "S", "R")


def _label(keys):
    return ", ".join(str(v) for v in keys.values()) or "audit"


def plot_shadow_contributions(result: ShadowResult, *, scale: str | None = None,
                              ax: Axes | None = None) -> Figure:
    """Horizontal bars of each domain's contribution ``w_d z_d`` (or ``w_d e_d``) per harness, with bootstrap CIs.

    Parameters
    ----------
    result : ShadowResult
    scale : {"paper", "effect"}, optional
        Default ``result.scale``.
    ax : matplotlib.axes.Axes, optional

    Returns
    -------
    matplotlib.figure.Figure

    Notes
    -----
    The error bar of a contribution is ``w_d`` times the percentile interval of ``z_d`` (or of the effect);
    greyed bars are low-precision domains (the floor weight), missing bars domains that could not be computed.

    Examples
    --------
    A simulated audit (120 turns, 6 tools), few replicates:

    >>> import toolbias_stats as tbs
    >>> from toolbias_stats.shadow import simulate_audit
    >>> res = tbs.tool_shadow(simulate_audit(120, 6, rng=1), encoder=False, n_resamples=20, n_weight_draws=20, rng=1)
    >>> fig = plot_shadow_contributions(res)
    >>> fig.axes[0].get_xlabel()
    'contribution w·z (paper scale)'
    """
    scale = result.scale if scale is None else scale
    groups = result.groups
    n = len(groups)
    fig, ax = _figure_and_axes(ax, figsize=(7.0, 1.0 + 0.55 * n * 1.0 + 0.8))
    height = 0.8 / len(_DOMAINS)
    colours = _colours(len(_DOMAINS))
    y = np.arange(n, dtype=float)
    for j, d in enumerate(_DOMAINS):
        vals, lo, hi = [], [], []
        for g in groups:
            s = g.domains[d]
            ci = s.z_ci if scale == "paper" else s.effect_ci
            c = s.contribution(scale) if s.available else np.nan
            vals.append(c)
            lo.append(max(c - s.weight * ci.low, 0) if np.isfinite(ci.low) and s.available else 0)
            hi.append(max(s.weight * ci.high - c, 0) if np.isfinite(ci.high) and s.available else 0)
        ys = y - 0.4 + height * (j + 0.5)
        prec = groups[0].domains[d].precision if groups else "low"
        ax.barh(ys, vals, height=height * 0.9, color=colours[j], alpha=1.0 if prec == "medium" else 0.55,
                xerr=np.array([lo, hi]), error_kw={"elinewidth": 0.8, "capsize": 1.5},
                label=f"{d} ({prec} precision)")
    ax.axvline(0, color="#444", lw=0.8)
    ax.set_yticks(y)
    ax.set_yticklabels([_mpl_text(_label(g.keys)) for g in groups])
    ax.invert_yaxis()
    ax.set_xlabel("contribution w\u00b7z (paper scale)" if scale == "paper"
                  else "contribution w\u00b7effect (effect scale)")
    ax.legend(loc="best", fontsize=7, frameon=False)
    ax.set_title("TOOL-SHADOW domain breakdown (pre-validation; not for deployment gating)", fontsize=9)
    return fig


def plot_shadow_pbs(result: ShadowResult, *, scale: str | None = None,
                    ax: Axes | None = None) -> Figure:
    """PBS per harness with its bootstrap CI (bar) and weight-sensitivity band (shaded), on 0-100.

    Parameters
    ----------
    result : ShadowResult
    scale : {"paper", "effect"}, optional
    ax : matplotlib.axes.Axes, optional

    Returns
    -------
    matplotlib.figure.Figure

    Examples
    --------

    >>> import toolbias_stats as tbs
    >>> from toolbias_stats.shadow import simulate_audit
    >>> res = tbs.tool_shadow(simulate_audit(120, 6, rng=1), encoder=False, n_resamples=20, n_weight_draws=20, rng=1)
    >>> fig = plot_shadow_pbs(res)
    >>> fig.axes[0].get_xlabel()
    'PBS (paper scale)'
    """
    scale = result.scale if scale is None else scale
    groups = result.groups
    n = len(groups)
    fig, ax = _figure_and_axes(ax, figsize=(6.5, 0.9 + 0.4 * n + 0.6))
    for i, g in enumerate(groups):
        p = g.pbs[scale]
        if np.all(np.isfinite(p.sensitivity)):
            ax.fill_betweenx([i - 0.3, i + 0.3], p.sensitivity.low, p.sensitivity.high, color="#9ecae1", alpha=0.6,
                             lw=0, label="weight sensitivity" if i == 0 else None)
        if np.all(np.isfinite(p.ci)):
            ax.plot([p.ci.low, p.ci.high], [i, i], color="#08519c", lw=1.6,
                    label=f"{100 * result.confidence_level:g}% bootstrap CI" if i == 0 else None)
        ax.plot([p.estimate], [i], "o", color="#08519c", ms=4)
    ax.axvline(50, color="#444", lw=0.8, ls="--")
    ax.axvline(60, color="#d62728", lw=0.8, ls=":", label="60 (breakdown mandatory above)")
    ax.set_xlim(0, 100)
    ax.set_yticks(range(n))
    ax.set_yticklabels([_mpl_text(_label(g.keys)) for g in groups])
    ax.invert_yaxis()
    ax.set_xlabel(f"PBS ({scale} scale)")
    ax.legend(loc="best", fontsize=7, frameon=False)
    return fig
