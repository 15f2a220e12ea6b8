"""Figures of experiments: shift bars (Fig. 5), sweep lines (Fig. 9), per-tool shares across levels (Fig. 17),
bias against the number of tools shown (App. J).

Every function takes an already computed result (:class:`~toolbias_stats.experiments.ShiftResult` or
:class:`~toolbias_stats.experiments.ToolCountResult`) and draws it; nothing is estimated here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ._bias import _colours, _figure_and_axes, _mpl_text

if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any, Literal

    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    from ..experiments import ShiftResult, ToolCountResult
    from ..io import ToolCatalog

__all__ = ["plot_shift", "plot_sweep", "plot_tool_shares", "plot_tool_count"]

_NAMES = {"shift_api": "shift of tool distribution", "shift_pos": "shift of position distribution",
          "delta_api": "δ_API", "delta_pos": "δ_pos", "delta_model": "δ_model"}


def _label(keys):
    return ", ".join(f"{_mpl_text(v)}" for v in keys.values())


def plot_shift(result: ShiftResult, *, metric: Literal["shift_api", "shift_pos"] = "shift_api",
               ax: Axes | None = None) -> Figure:
    """Bars of the cluster-averaged shift per compared level (BiasBusters Fig. 5), with intervals and the null.

    Parameters
    ----------
    result : ShiftResult
    metric : {"shift_api", "shift_pos"}, default "shift_api"
    ax : matplotlib.axes.Axes, optional

    Returns
    -------
    matplotlib.figure.Figure

    Notes
    -----
    Bar: the plug-in ``mean_over_clusters``; thin grey whisker: ± the sd over clusters (the paper's error bar);
    black dot and whisker: the bias-corrected shift and its calibrated interval; red tick: ``null_expected``,
    the shift two samples of the same distribution with these counts show.

    Examples
    --------

    >>> import numpy as np
    >>> import toolbias_stats as tbs
    >>> from toolbias_stats.experiments import simulate_conditions
    >>> pref = np.ones((3, 4))          # 3 clusters of 4 equally preferred tools; "first_wins" favours position 1
    >>> log = simulate_conditions({"base": (pref, None), "first_wins": (pref, [4, 1, 1, 1])}, n_queries=20, rng=0)
    >>> res = tbs.selection_shift(log, between="condition", base="base", n_resamples=50, n_permutations=50, rng=1)
    >>> fig = plot_shift(res)
    >>> fig.axes[0].get_ylabel()
    'TV to base (shift of tool distribution)'
    """
    rows = [(g, getattr(g, metric)) for g in result.groups if getattr(g, metric) is not None]
    fig, ax = _figure_and_axes(ax, (max(4.5, 1.3 * len(rows) + 1.5), 3.8))
    colours = _colours(max(1, len({tuple((k, v) for k, v in g.keys.items() if k != result.between) for g, _ in rows})))
    group_ids: dict[tuple, int] = {}
    for i, (g, s) in enumerate(rows):
        gid = tuple((k, v) for k, v in g.keys.items() if k != result.between)
        col = colours[group_ids.setdefault(gid, len(group_ids)) % len(colours)]
        ax.bar(i, s.mean_over_clusters, color=col, alpha=0.55, width=0.7)
        if np.isfinite(s.sd_over_clusters):
            ax.errorbar(i - 0.18, s.mean_over_clusters, yerr=s.sd_over_clusters, color="0.45", capsize=2, lw=1)
        if np.isfinite(s.corrected):
            lo, hi = s.corrected_ci
            ax.errorbar(i + 0.12, s.corrected, yerr=[[max(s.corrected - lo, 0)], [max(hi - s.corrected, 0)]],
                        fmt="o", color="black", ms=4, capsize=3, lw=1.2)
        if np.isfinite(s.null_expected):
            ax.plot([i - 0.35, i + 0.35], [s.null_expected] * 2, color="#d62728", lw=1.5, ls="--")
    ax.set_xticks(range(len(rows)))
    ax.set_xticklabels(["\n".join(_mpl_text(v) for v in g.keys.values()) + f"\n({s.n_clusters} clusters)"
                        for g, s in rows], fontsize=7, rotation=0)
    ax.set_ylabel(f"TV to base ({_NAMES.get(metric, metric)})")
    ax.set_ylim(bottom=0)
    ax.set_title(f"Shift from {_mpl_text(result.between)} = {_mpl_text(result.base)}\nbar: plug-in ± sd over clusters; "
                 f"●: corrected [{result.confidence_level:.0%} CI]; dashes: null", fontsize=8)
    return fig


def plot_sweep(result: ShiftResult, *, ax: Axes | None = None) -> Figure:
    """Per-level bias with intervals against a numeric ``between`` column (BiasBusters Fig. 9).

    One line per ``by`` group and metric (δ_API solid, δ_pos dashed, δ_model dotted), with the query-bootstrap
    percentile intervals of ``result.trend_frame()``.

    Parameters
    ----------
    result : ShiftResult
        A :func:`~toolbias_stats.selection_shift` over a numeric ``between`` column (its ``trend_frame()``).
    ax : matplotlib.axes.Axes, optional
        Axes to draw into; a new Figure (Agg canvas) is created when omitted.

    Returns
    -------
    matplotlib.figure.Figure
        With the text "no numeric sweep" when ``result.trend_frame()`` is empty.

    Examples
    --------
    >>> import numpy as np
    >>> import toolbias_stats as tbs
    >>> from toolbias_stats.experiments import simulate_conditions
    >>> pref = np.ones((3, 4))
    >>> levels = {0.0: (pref, None), 0.5: (pref, [2, 1, 1, 1]), 1.0: (pref, [4, 1, 1, 1])}
    >>> log = simulate_conditions(levels, column="temperature", n_queries=20, rng=0)
    >>> res = tbs.selection_shift(log, between="temperature", base=0.0, n_resamples=50, n_permutations=50, rng=1)
    >>> fig = plot_sweep(res)
    >>> fig.axes[0].get_xlabel()
    'temperature'
    """
    fig, ax = _figure_and_axes(ax, (5.2, 3.6))
    frame = result.trend_frame()
    if frame.empty:
        ax.text(0.5, 0.5, "no numeric sweep", ha="center", va="center", transform=ax.transAxes)
        return fig
    styles = {"delta_api": "-", "delta_pos": "--", "delta_model": ":"}
    by = list(result.by)
    groups = list(frame.groupby(by, sort=False)) if by else [((), frame)]
    colours = _colours(len(groups))
    for (key, d), col in zip(groups, colours):
        key = key if isinstance(key, tuple) else (key,)
        for m, dd in d.groupby("metric", sort=False):
            dd = dd.sort_values("level")
            x = dd["level"].to_numpy(float)
            y = dd["estimate"].to_numpy(float)
            ax.plot(x, y, styles.get(m, "-"), color=col, marker="o", ms=3,
                    label=f"{', '.join(_mpl_text(k) for k in key)} {_NAMES.get(m, m)}".strip())
            ax.fill_between(x, dd["ci_low"].to_numpy(float), dd["ci_high"].to_numpy(float), color=col, alpha=0.12)
    ax.set_xlabel(_mpl_text(result.between))
    ax.set_ylabel("bias (TV to uniform)")
    ax.set_ylim(bottom=0)
    ax.legend(fontsize=7, frameon=False)
    return fig


def plot_tool_shares(result: ShiftResult, *, cluster: str | None = None, highlight: str | None = None,
                     keys: Mapping[str, Any] | None = None, catalog: ToolCatalog | None = None,
                     ax: Axes | None = None) -> Figure:
    """Selection share of each tool at every level of ``between`` (BiasBusters Fig. 17), target highlighted.

    Parameters
    ----------
    result : ShiftResult
    cluster : str, optional
        Default: the cluster of the tool whose share rose most.
    highlight : str, optional
        The exposed / target tool id; default the tool whose share rose most.
    keys : dict, optional
        The ``by`` group to draw (default: the first).
    catalog : ToolCatalog, optional
        For tool names.
    ax : matplotlib.axes.Axes, optional

    Returns
    -------
    matplotlib.figure.Figure

    Examples
    --------
    >>> import numpy as np
    >>> import toolbias_stats as tbs
    >>> from toolbias_stats.experiments import simulate_conditions
    >>> pref = np.ones((3, 4))          # 3 clusters of 4 equally preferred tools; "first_wins" favours position 1
    >>> log = simulate_conditions({"base": (pref, None), "first_wins": (pref, [4, 1, 1, 1])}, n_queries=20, rng=0)
    >>> res = tbs.selection_shift(log, between="condition", base="base", n_resamples=50, n_permutations=50, rng=1)
    >>> tool = log.catalog.tools("1")[0]
    >>> fig = plot_tool_shares(res, cluster="1", highlight=tool)
    >>> fig.axes[0].get_ylabel()
    'selection share (cluster 1)'
    """
    tf = result.tools_frame()
    if keys is None and result.groups:
        keys = {k: v for k, v in result.groups[0].keys.items() if k != result.between}
    keys = keys or {}
    for k, v in keys.items():
        tf = tf[tf[k].astype(str) == str(v)]
    if highlight is None and len(tf):
        highlight = str(tf.loc[tf["difference"].idxmax(), "tool_id"])
    if cluster is None and len(tf):
        cluster = str(tf.loc[tf["tool_id"] == highlight, "cluster"].iloc[0]) if highlight in set(tf["tool_id"]) \
            else str(tf["cluster"].iloc[0])
    tf = tf[tf["cluster"].astype(str) == str(cluster)]
    fig, ax = _figure_and_axes(ax, (5.6, 3.6))
    if tf.empty:
        ax.text(0.5, 0.5, "no data", ha="center", va="center", transform=ax.transAxes)
        return fig
    levels = [result.base] + list(dict.fromkeys(tf[result.between].tolist()))
    x = np.arange(len(levels))
    names = {}
    if catalog is not None:
        t = catalog.table
        names = dict(zip(t["tool_id"], t["tool_name"]))
    for tool, d in tf.groupby("tool_id", sort=False):
        y = [d["share_base"].iloc[0]] + d["share"].tolist()
        lo = [np.nan] + (d["share_base"].iloc[0] + d["ci_low"]).tolist()
        hi = [np.nan] + (d["share_base"].iloc[0] + d["ci_high"]).tolist()
        target = str(tool) == str(highlight)
        ax.plot(x, y, marker="o", lw=2.4 if target else 1.0, color="#d62728" if target else "0.55",
                label=_mpl_text(names.get(tool, tool))[:40] + (" (target)" if target else ""),
                zorder=3 if target else 2)
        if target:
            ax.fill_between(x, lo, hi, color="#d62728", alpha=0.15)
    ax.set_xticks(x)
    ax.set_xticklabels([_mpl_text(v) for v in levels], fontsize=8)
    ax.set_xlabel(_mpl_text(result.between))
    ax.set_ylabel(f"selection share (cluster {_mpl_text(cluster)})")
    ax.set_ylim(0, 1)
    ax.legend(fontsize=7, frameon=False)
    return fig


def plot_tool_count(result: ToolCountResult, *, ax: Axes | None = None) -> Figure:
    """Normalised bias against the number of tools shown (BiasBusters App. J), one line per group.

    Parameters
    ----------
    result : ToolCountResult

    Returns
    -------
    matplotlib.figure.Figure

    Examples
    --------
    The bundled simulated study that shows subsets of 2 to 5 tools:

    >>> import toolbias_stats as tbs
    >>> from toolbias_stats.experiments import tool_count_bias
    >>> study = tbs.read_study(tbs.datasets.path("experiments/toolcount.toml"))
    >>> fig = plot_tool_count(tool_count_bias(study.log))
    >>> fig.axes[0].get_xlabel()
    'tools shown (K)'
    """
    fig, ax = _figure_and_axes(ax, (5.0, 3.4))
    frame = result.to_frame()
    if frame.empty:
        ax.text(0.5, 0.5, "no data", ha="center", va="center", transform=ax.transAxes)
        return fig
    by = list(result.by)
    groups = list(frame.groupby(by, sort=False)) if by else [((), frame)]
    for (key, d), col in zip(groups, _colours(len(groups))):
        key = key if isinstance(key, tuple) else (key,)
        d = d.sort_values("K")
        for m, ls in (("delta_api_normalised", "-"), ("delta_pos_normalised", "--")):
            ax.plot(d["K"], d[m], ls, marker="o", color=col, label=f"{', '.join(_mpl_text(k) for k in key)} "
                                                                 f"{'δ_API' if 'api' in m else 'δ_pos'}".strip())
        ax.plot(d["K"], d["null_normalised"], ":", color=col, lw=1)
    ax.set_xlabel("tools shown (K)")
    ax.set_ylabel("normalised δ (TV / (1 - 1/K))")
    ax.set_ylim(bottom=0)
    ax.legend(fontsize=7, frameon=False)
    return fig
