"""Figures of the hierarchical Bayesian model: forest plots of effects and the posterior predictive check.

Every function takes a :class:`~toolbias_stats.models.BayesResult` (already fitted and summarised)
and draws it; nothing is estimated here. Matplotlib is imported lazily and new figures are built
on the Agg canvas (no pyplot state).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ._bias import _colours, _figure_and_axes, _mpl_text, tool_labels

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    from ..io import ToolCatalog
    from ..models.bayes import BayesResult

__all__ = ["plot_position_effects", "plot_api_effects", "plot_bayes_ppc", "plot_bayes_dispersion"]

_SHARED = "(shared)"


def plot_position_effects(result: BayesResult, ax: Axes | None = None) -> Figure:
    """Forest plot of the position effects ``beta`` of every LLM (and the shared ``beta_bar``).

    Parameters
    ----------
    result : BayesResult
        Output of :func:`toolbias_stats.models.fit_bayes`.
    ax : matplotlib.axes.Axes, optional
        Axes to draw into; a new Figure (Agg canvas) is created when omitted.

    Returns
    -------
    matplotlib.figure.Figure

    Notes
    -----
    One row per LLM; the P positions are drawn as coloured points with their ``hdi_prob``
    highest-density intervals, slightly offset within the row. Effects are on the logit scale and
    sum to zero over positions: a point right of 0 is a slot chosen more often than average when
    the tools shown are equally attractive.

    Examples
    --------
    A tiny fit (one LLM, two clusters of three tools; 50 draws, too few to converge, but a few seconds):

    >>> import numpy as np
    >>> import toolbias_stats as tbs
    >>> from toolbias_stats.models import simulate_bayes_log
    >>> alpha = np.array([[[1.0, 0.0, -1.0], [0.0, 0.5, -0.5]]])     # API effects: LLM x cluster x tool
    >>> log = simulate_bayes_log(alpha, np.array([[1.0, 0.0, -1.0]]), n_per_ordering=20, rng=1)
    >>> res = tbs.fit_bayes(log, model="v1", draws=50, tune=50, chains=1, cores=1, sampler="pymc", rng=1)
    >>> fig = plot_position_effects(res)
    >>> [t.get_text() for t in fig.axes[0].get_yticklabels()]   # one row per LLM, then the shared mean
    ['(shared)', 'llm1']
    """
    pe = result.position_effects
    llms = list(result.llms) + [_SHARED]
    P = int(result.n_positions)
    fig, ax = _figure_and_axes(ax, (7.5, 0.55 * len(llms) * max(1.0, P / 5) + 1.6))
    colours = _colours(P)
    width = 0.7
    offsets = (np.arange(P) - (P - 1) / 2) * (width / max(P, 1))
    for i, llm in enumerate(llms):
        sub = pe[pe["llm"] == llm].sort_values("position")
        y = len(llms) - 1 - i
        for j, r in enumerate(sub.itertuples()):
            ax.errorbar([r.mean], [y + offsets[j]], xerr=[[r.mean - r.hdi_low], [r.hdi_high - r.mean]], fmt="o",
                        color=colours[j], markersize=4, elinewidth=1.0, capsize=0,
                        label=f"position {r.position}" if i == 0 else None,
                        markerfacecolor="white" if llm == _SHARED else colours[j])
    ax.axvline(0, color="#777777", linewidth=0.8, linestyle=":")
    ax.set_yticks(range(len(llms)))
    ax.set_yticklabels([_mpl_text(x) for x in reversed(llms)], fontsize=8)
    ax.set_xlabel(r"position effect $\beta$ (logit scale, sums to 0 over positions)")
    ax.grid(axis="x", color="#eeeeee", linewidth=0.6)
    ax.set_axisbelow(True)
    ax.spines[["top", "right"]].set_visible(False)
    ax.set_title(f"Position effects per LLM, {100 * result.hdi_prob:g}% HDI (open markers: shared mean)",
                 fontsize=10, loc="left")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
    return fig


def plot_api_effects(result: BayesResult, ax: Axes | None = None, *, show_llms: bool = True,
                     catalog: ToolCatalog | None = None) -> Figure:
    """Forest plot of the shared API effects ``mu`` per cluster and tool, with each LLM's ``alpha``.

    Parameters
    ----------
    result : BayesResult
    ax : matplotlib.axes.Axes, optional
    show_llms : bool, default True
        Overlay each LLM's posterior mean ``alpha`` as small coloured ticks.
    catalog : ToolCatalog, optional
        For tool names (``tool_name``); without it the tool ids are shown.

    Returns
    -------
    matplotlib.figure.Figure

    Notes
    -----
    One row per tool, grouped by cluster (clusters separated by thin lines); black points and
    bars are ``mu`` with its highest-density interval. Effects are on the logit scale and sum to
    zero within each cluster.

    Examples
    --------
    A tiny fit (one LLM, two clusters of three tools; 50 draws, too few to converge, but a few seconds):

    >>> import numpy as np
    >>> import toolbias_stats as tbs
    >>> from toolbias_stats.models import simulate_bayes_log
    >>> alpha = np.array([[[1.0, 0.0, -1.0], [0.0, 0.5, -0.5]]])     # API effects: LLM x cluster x tool
    >>> log = simulate_bayes_log(alpha, np.array([[1.0, 0.0, -1.0]]), n_per_ordering=20, rng=1)
    >>> res = tbs.fit_bayes(log, model="v1", draws=50, tune=50, chains=1, cores=1, sampler="pymc", rng=1)
    >>> fig = plot_api_effects(res)
    >>> len(fig.axes[0].get_yticklabels())       # one row per (cluster, tool)
    6
    """
    ae = result.api_effects
    shared = ae[ae["llm"] == _SHARED].reset_index(drop=True)
    n = len(shared)
    fig, ax = _figure_and_axes(ax, (8.0, 0.22 * n + 1.8))
    names = tool_labels(list(shared["tool_id"]), catalog)
    ys = n - 1 - np.arange(n)
    if show_llms:
        colours = _colours(len(result.llms))
        for k, llm in enumerate(result.llms):
            sub = ae[ae["llm"] == llm].set_index(["cluster", "tool_id"])
            vals = [sub["mean"].get((c, t), np.nan) for c, t in zip(shared["cluster"], shared["tool_id"])]
            used = [sub["n_used"].get((c, t), 0) for c, t in zip(shared["cluster"], shared["tool_id"])]
            shown = np.where(np.asarray(used) > 0, vals, np.nan)
            ax.plot(shown, ys, "|", color=colours[k], markersize=7, alpha=0.8, label=_mpl_text(llm))
    ax.errorbar(shared["mean"], ys, xerr=[shared["mean"] - shared["hdi_low"], shared["hdi_high"] - shared["mean"]],
                fmt="o", color="#111111", markersize=3.5, elinewidth=1.2, capsize=0, label="shared $\\mu$ (HDI)")
    # cluster separators and labels
    starts = np.flatnonzero(np.r_[True, shared["cluster"].to_numpy()[1:] != shared["cluster"].to_numpy()[:-1]])
    for s in starts[1:]:
        ax.axhline(n - s - 0.5, color="#cccccc", linewidth=0.6)
    ax.axvline(0, color="#777777", linewidth=0.8, linestyle=":")
    labels = [f"{c} \u00b7 {_mpl_text(t)}" for c, t in zip(shared["cluster"], names)]
    ax.set_yticks(ys)
    ax.set_yticklabels(labels, fontsize=7)
    ax.set_ylim(-0.7, n - 0.3)
    ax.set_xlabel(r"API effect (logit scale, sums to 0 within a cluster)")
    ax.grid(axis="x", color="#eeeeee", linewidth=0.6)
    ax.set_axisbelow(True)
    ax.spines[["top", "right"]].set_visible(False)
    ax.set_title(f"API effects per cluster (cluster \u00b7 tool), {100 * result.hdi_prob:g}% HDI",
                 fontsize=10, loc="left")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=7, frameon=False)
    return fig


def plot_bayes_ppc(result: BayesResult, ax: Axes | None = None) -> Figure:
    """Posterior predictive check: observed against replicated choice counts per cluster and position.

    Parameters
    ----------
    result : BayesResult
    ax : matplotlib.axes.Axes, optional

    Returns
    -------
    matplotlib.figure.Figure

    Notes
    -----
    For every cluster (groups along x) and position (within a group) the grey bar spans the
    ``hdi_prob`` interval of the replicated counts and the dot is the observed count (red when
    it lies outside the interval). The title carries the two chi-square PPC p-values.

    Examples
    --------
    A tiny fit (one LLM, two clusters of three tools; 50 draws, too few to converge, but a few seconds):

    >>> import numpy as np
    >>> import toolbias_stats as tbs
    >>> from toolbias_stats.models import simulate_bayes_log
    >>> alpha = np.array([[[1.0, 0.0, -1.0], [0.0, 0.5, -0.5]]])     # API effects: LLM x cluster x tool
    >>> log = simulate_bayes_log(alpha, np.array([[1.0, 0.0, -1.0]]), n_per_ordering=20, rng=1)
    >>> res = tbs.fit_bayes(log, model="v1", draws=50, tune=50, chains=1, cores=1, sampler="pymc", rng=1)
    >>> fig = plot_bayes_ppc(res)
    >>> [t.get_text() for t in fig.axes[0].get_xticklabels()]   # the clusters
    ['1', '2']
    """
    t = result.ppc.table
    fig, ax = _figure_and_axes(ax, (max(6.0, 0.16 * len(t) + 2.0), 3.8))
    clusters = list(dict.fromkeys(t["cluster"]))
    xs_all: list[float] = []
    ticks = []
    pos = 0.0
    for c in clusters:
        sub = t[t["cluster"] == c]
        xs = pos + np.arange(len(sub))
        xs_all.extend(xs)
        ticks.append((xs.mean(), c))
        pos = xs[-1] + 2.0
    x = np.asarray(xs_all)
    lo, hi, obs = (t[k].to_numpy(dtype=float) for k in ("replicated_low", "replicated_high", "observed"))
    ax.vlines(x, lo, hi, color="#9aa4ae", linewidth=4, label=f"replicated, {100 * result.hdi_prob:g}% HDI")
    ax.plot(x, t["replicated_mean"], "_", color="#555555", markersize=6)
    out = (obs < lo) | (obs > hi)
    ax.plot(x[~out], obs[~out], "o", color="#1f77b4", markersize=3.5, label="observed")
    if out.any():
        ax.plot(x[out], obs[out], "o", color="#d62728", markersize=3.5, label="observed (outside)")
    ax.set_xticks([p for p, _ in ticks])
    ax.set_xticklabels([_mpl_text(c) for _, c in ticks], fontsize=8)
    ax.set_xlabel("cluster (positions 1..K left to right)")
    ax.set_ylabel("choices (all LLMs and orderings)")
    ax.spines[["top", "right"]].set_visible(False)
    ax.grid(axis="y", color="#eeeeee", linewidth=0.6)
    ax.set_axisbelow(True)
    ax.set_title(f"Posterior predictive check: {_p(result.ppc.p_value)} (cluster x position), "
                 f"{_p(result.ppc.p_value_rows)} (LLM x cluster x ordering x position)", fontsize=9, loc="left")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
    return fig


def plot_bayes_dispersion(result: BayesResult, ax: Axes | None = None) -> Figure:
    """Posterior predictive check of the per-query dispersion, per LLM.

    Parameters
    ----------
    result : BayesResult
        A fit that knows the queries (``result.ppc.dispersion`` is not None).
    ax : matplotlib.axes.Axes, optional

    Returns
    -------
    matplotlib.figure.Figure

    Notes
    -----
    For every LLM the grey bar is the ``hdi_prob`` interval of the replicated dispersion statistic
    (Pearson chi-square of each query's tool counts against the model's expectation, summed over
    the LLM's queries), divided by its replicated mean; the dot is the observed value on the same
    scale (red when outside the interval). A dot right of the bar: queries differ from each other
    more than the model allows.

    Examples
    --------
    A tiny fit (one LLM, two clusters of three tools; 50 draws, too few to converge, but a few seconds):

    >>> import numpy as np
    >>> import toolbias_stats as tbs
    >>> from toolbias_stats.models import simulate_bayes_log
    >>> alpha = np.array([[[1.0, 0.0, -1.0], [0.0, 0.5, -0.5]]])     # API effects: LLM x cluster x tool
    >>> log = simulate_bayes_log(alpha, np.array([[1.0, 0.0, -1.0]]), n_per_ordering=20, rng=1)
    >>> res = tbs.fit_bayes(log, model="v1", draws=50, tune=50, chains=1, cores=1, sampler="pymc", rng=1)
    >>> fig = plot_bayes_dispersion(res)
    >>> [t.get_text() for t in fig.axes[0].get_yticklabels()]
    ['llm1']
    """
    t = result.ppc.dispersion
    if t is None:
        raise ValueError("this fit has no per-query dispersion check (it was fitted on counts without queries).")
    t = t[t["llm"] != "(all)"].reset_index(drop=True)
    fig, ax = _figure_and_axes(ax, (7.0, 0.4 * len(t) + 1.6))
    y = len(t) - 1 - np.arange(len(t))
    scale = t["replicated_mean"].to_numpy(dtype=float)
    lo = t["replicated_low"].to_numpy(dtype=float) / scale
    hi = t["replicated_high"].to_numpy(dtype=float) / scale
    obs = t["observed"].to_numpy(dtype=float) / scale
    ax.hlines(y, lo, hi, color="#9aa4ae", linewidth=5, label=f"replicated, {100 * result.hdi_prob:g}% HDI")
    out = (obs < lo) | (obs > hi)
    ax.plot(obs[~out], y[~out], "o", color="#1f77b4", markersize=4, label="observed")
    if out.any():
        ax.plot(obs[out], y[out], "o", color="#d62728", markersize=4, label="observed (outside)")
    ax.axvline(1.0, color="#777777", linewidth=0.8, linestyle=":")
    ax.set_yticks(y)
    ax.set_yticklabels([_mpl_text(x) for x in t["llm"]], fontsize=8)
    ax.set_xlabel("per-query dispersion / replicated mean")
    ax.spines[["top", "right"]].set_visible(False)
    ax.grid(axis="x", color="#eeeeee", linewidth=0.6)
    ax.set_axisbelow(True)
    ax.set_title(f"Per-query dispersion: {_p(result.ppc.p_value_dispersion)} (all LLMs)", fontsize=9, loc="left")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
    return fig


def _p(p):
    if not np.isfinite(p):
        return "p n/a"
    return "p < 0.001" if p < 0.001 else f"p = {p:.3f}"
