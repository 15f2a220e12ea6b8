"""Figures of tool-selection bias: per-cluster selection rates and API vs position bias.

Every function here takes a :class:`~toolbias_stats.BiasResult` (already computed) and draws it;
nothing is estimated here. Matplotlib is imported lazily, and new figures are built on the Agg
canvas directly (no pyplot state, no ``plt.show``).
"""

from __future__ import annotations

import textwrap
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping, Sequence

    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    from ..io import ToolCatalog
    from ..metrics import BiasResult

__all__ = ["plot_selection_rates", "plot_api_vs_position"]

#: Colours for groups (the ``tab10`` palette, then ``tab20`` beyond ten groups).
_TAB10 = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22",
          "#17becf")


def plot_selection_rates(result: BiasResult, *, cluster: str, ax: Axes | None = None,
                         catalog: ToolCatalog | None = None, label_width: int = 16,
                         max_label_lines: int = 3) -> Figure:
    """Grouped bars of each group's selection rate per tool in one cluster (BiasBusters Fig. 3).

    Parameters
    ----------
    result : BiasResult
        Output of :func:`toolbias_stats.selection_bias`.
    cluster : str
        Cluster id (as in the catalog, e.g. ``"8"``).
    ax : matplotlib.axes.Axes, optional
        Axes to draw into; a new Figure (Agg canvas) is created when omitted.
    catalog : ToolCatalog, optional
        Used for tool labels (``tool_name``; ``tool_name: api_name`` when a tool name repeats in
        the cluster) and the cluster name in the title; without it the ``tool_id`` is shown.
    label_width : int, default 16
        Characters per line of the wrapped tool labels.
    max_label_lines : int, default 3
        Longer labels are cut with an ellipsis (the full names belong in a table next to the figure).

    Returns
    -------
    matplotlib.figure.Figure

    Raises
    ------
    ValueError
        When ``cluster`` is not in ``result``.

    Notes
    -----
    One bar per group and tool (in catalog order, tools numbered ``1..K``), with the
    query-bootstrap percentile interval of the rate as error bars; where a group has no
    bootstrap replicates (``n_resamples=0``) its Wilson interval is drawn instead. The dashed line
    is the uniform rate ``1/K`` (a fair chooser). Bars are drawn in the order of
    ``result.groups``; a group in which the cluster does not occur is left out.

    Examples
    --------
    >>> import toolbias_stats as tbs
    >>> from toolbias_stats.simulate import simulate_selection_log
    >>> res = tbs.selection_bias(simulate_selection_log(n_clusters=2, n_queries=10, rng=0).log, n_resamples=50, rng=1)
    >>> fig = plot_selection_rates(res, cluster="1")   # catalog=study.catalog labels the tools by name
    >>> len(fig.axes)
    1
    """
    cluster = str(cluster)
    entries = [(g, c) for g in result.groups for c in g.clusters if str(c.cluster) == cluster]
    if not entries:
        present = sorted({str(c.cluster) for g in result.groups for c in g.clusters}, key=_natural)
        raise ValueError(f"`cluster` must be one of the clusters in the result {present}; got {cluster!r} instead.")
    fig, ax = _figure_and_axes(ax, figsize=_rates_figsize(len(entries[0][1].tools), len(entries)))
    tools = list(entries[0][1].tools)
    k = len(tools)
    n_groups = len(entries)
    x = np.arange(k, dtype=float)
    width = 0.8 / n_groups
    colours = _colours(len(result.groups))
    index_of = {id(g): i for i, g in enumerate(result.groups)}
    kinds = set()
    for j, (g, c) in enumerate(entries):
        table = c.rate_table.set_index("tool_id").reindex(tools)
        rate = table["rate"].to_numpy(dtype=float)
        low, high, kind = _rate_interval(table)
        kinds.add(kind)
        xs = x - 0.4 + width * (j + 0.5)
        colour = colours[index_of[id(g)]]
        ax.bar(xs, rate, width=width, color=colour, edgecolor="white", linewidth=0.4,
               label=_mpl_text(group_label(g.keys)), zorder=2)
        yerr = np.vstack([np.clip(rate - low, 0, None), np.clip(high - rate, 0, None)])
        ok = np.isfinite(rate) & np.isfinite(low) & np.isfinite(high)
        if ok.any():
            ax.errorbar(xs[ok], rate[ok], yerr=yerr[:, ok], fmt="none", ecolor="#222222", elinewidth=0.8,
                        capsize=min(3.0, 40.0 / n_groups), zorder=3)
    ax.axhline(1.0 / k, color="#444444", linestyle="--", linewidth=1.0, label="uniform 1/K", zorder=4)
    ax.set_xticks(x)
    ax.set_xticklabels([_mpl_text(s) for s in _tool_labels(tools, catalog, cluster, label_width, max_label_lines)],
                       fontsize=8)
    ax.set_xlim(-0.55, k - 0.45)
    ax.set_ylim(0, 1)
    ax.set_ylabel("selection rate")
    ax.grid(axis="y", color="#dddddd", linewidth=0.6, zorder=0)
    ax.set_axisbelow(True)
    ax.spines[["top", "right"]].set_visible(False)
    level = result.confidence_level
    bars = " / ".join(sorted(kinds)) if kinds else "none"
    ax.set_title(_mpl_text(_cluster_title(cluster, catalog, k)), fontsize=11, loc="left")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False,
              title=f"error bars: {100 * level:g}% CI\n({bars})", title_fontsize=8, alignment="left")
    return fig


def plot_api_vs_position(result: BiasResult, ax: Axes | Sequence[Axes] | None = None, *,
                         clusters: bool = False) -> Figure:
    """API bias against position bias per group, with CI whiskers and the pure-noise level (BiasBusters Fig. 4).

    Parameters
    ----------
    result : BiasResult
        Output of :func:`toolbias_stats.selection_bias`.
    ax : matplotlib.axes.Axes or sequence of two Axes, optional
        Where to draw: one Axes (group panel), or two when ``clusters=True`` (group panel, cluster
        panel). A new Figure (Agg canvas) is created when omitted.
    clusters : bool, default False
        Add a second panel with one point per group and cluster (the clusters' own
        ``delta_api``/``delta_pos`` with their percentile intervals), coloured by group.

    Returns
    -------
    matplotlib.figure.Figure

    Notes
    -----
    Each point is a group's ``mean_over_runs`` of delta_API (x) and delta_pos (y); the whiskers
    are the bootstrap intervals ``TVResult.ci`` (BCa by default). The grey bands mark
    ``[0, null_expected]`` on each axis (the largest over groups): the plug-in TV that a perfectly
    uniform chooser with the same numbers of valid choices shows on average, i.e. where pure
    sampling noise lies. The dotted diagonal is delta_API = delta_pos: points above it are
    dominated by position bias, points below by API preference. Groups without positions
    (``delta_pos`` is None) cannot be placed and are named in a note inside the panel.

    Examples
    --------
    >>> import toolbias_stats as tbs
    >>> from toolbias_stats.simulate import simulate_selection_log
    >>> res = tbs.selection_bias(simulate_selection_log(n_clusters=2, n_queries=10, rng=0).log, n_resamples=50, rng=1)
    >>> fig = plot_api_vs_position(res, clusters=True)
    >>> len(fig.axes)
    2
    """
    n_panels = 2 if clusters else 1
    if ax is None:
        fig, axes = _new_figure(n_panels, figsize=(5.6 * n_panels + 2.2, 5.4))
    else:
        axes = list(ax) if isinstance(ax, (list, tuple, np.ndarray)) else [ax]
        if len(axes) != n_panels:
            raise ValueError(f"`ax` must be {n_panels} Axes when clusters={clusters}; got {len(axes)} instead.")
        fig = axes[0].figure
    colours = _colours(len(result.groups))
    level = result.confidence_level
    placed = [(i, g) for i, g in enumerate(result.groups) if g.delta_pos is not None]
    missing = [group_label(g.keys) for g in result.groups if g.delta_pos is None]

    # Panel 1: one point per group.
    a0 = axes[0]
    pts = [(i, g.delta_api, g.delta_pos) for i, g in placed]
    _noise_bands(a0, [p[1].null_expected for p in pts], [p[2].null_expected for p in pts])
    for i, api, pos in pts:
        _point(a0, api, pos, colours[i], size=7, label=_mpl_text(group_label(result.groups[i].keys)))
    _finish_tv_axes(a0, pts)
    a0.set_title(f"per group: mean over clusters and runs\nwhiskers: {100 * level:g}% {_ci_name(pts)} CI",
                 fontsize=9, loc="left")
    if missing:
        a0.text(0.98, 0.02, _mpl_text("no positions recorded (not shown): " + ", ".join(missing)),
                transform=a0.transAxes, ha="right", va="bottom", fontsize=7, color="#555555", wrap=True)

    if clusters:
        a1 = axes[1]
        cpts = []
        for i, g in placed:
            for c in g.clusters:
                if c.delta_pos is not None:
                    cpts.append((i, c.delta_api, c.delta_pos, str(c.cluster)))
        _noise_bands(a1, [p[1].null_expected for p in cpts], [p[2].null_expected for p in cpts])
        for i, api, pos, cid in cpts:
            _point(a1, api, pos, colours[i], size=4, alpha=0.8)
            a1.annotate(_mpl_text(cid), (api.mean_over_runs, pos.mean_over_runs), xytext=(3, 2),
                        textcoords="offset points", fontsize=6, color=colours[i])
        _finish_tv_axes(a1, cpts)
        a1.set_title(f"per group and cluster (numbers: cluster id)\nwhiskers: {100 * level:g}% "
                     f"{_ci_name(cpts)} CI", fontsize=9, loc="left")
    handles, labels = a0.get_legend_handles_labels()
    if handles:
        axes[-1].legend(handles, labels, loc="upper left", bbox_to_anchor=(1.02, 1.0), fontsize=8, frameon=False)
    # Direct labels last: their placement needs the final layout.
    _label_points(a0, [(p[1].mean_over_runs, p[2].mean_over_runs, group_label(result.groups[p[0]].keys))
                       for p in pts])
    return fig


# ---------------------------------------------------------------------------------------------
def group_label(keys: Mapping[str, object]) -> str:
    """Display label of a group: its ``by`` values joined by ``", "`` (``"all"`` when ungrouped).

    Parameters
    ----------
    keys : mapping
        A group's ``by`` values (``BiasResult.groups[i].keys``).

    Returns
    -------
    str

    Examples
    --------
    >>> group_label({"model": "GPT-4.1 mini", "temperature": 0.7}), group_label({})
    ('GPT-4.1 mini, 0.7', 'all')
    """
    return ", ".join(str(v) for v in keys.values()) if keys else "all"


def tool_labels(tools: Iterable[object], catalog: ToolCatalog | None = None, cluster: str | None = None) -> list[str]:
    """Full display names of ``tools`` (tool ids): ``tool_name``, plus ``: api_name`` when a name repeats.

    Without a catalog (or for a tool it lacks) the tool id itself is used.

    Parameters
    ----------
    tools : iterable
        Tool ids.
    catalog : ToolCatalog, optional
        Supplies ``tool_name`` and ``api_name``.
    cluster : str, optional
        The cluster whose catalog rows name the tools (a tool id may be in several clusters); default the first
        row of each tool.

    Returns
    -------
    list of str
        One label per tool, in the order given.

    Examples
    --------
    >>> import toolbias_stats as tbs
    >>> p = tbs.datasets.path
    >>> cat = tbs.read_biasbusters_catalog(p("biasbusters/clusters.json"), api_meta=p("biasbusters/api_meta.json"))
    >>> tool_labels(cat.to_frame().tool_id[:2].tolist(), cat)
    ['Geocode - Forward and Reverse', 'Geolocate']
    """
    if catalog is None:
        return [str(t) for t in tools]
    tab = catalog.table
    if cluster is not None and str(cluster) in set(tab["cluster_id"]):
        tab = tab[tab["cluster_id"] == str(cluster)]
    tab = tab.drop_duplicates("tool_id").set_index("tool_id")    # a tool may be in several clusters (issue 36)
    names = []
    for t in tools:
        if t in tab.index:
            names.append((_str(tab.at[t, "tool_name"]) or str(t), _str(tab.at[t, "api_name"])))
        else:
            names.append((str(t), ""))
    counts: dict[str, int] = {}
    for n, _ in names:
        counts[n] = counts.get(n, 0) + 1
    return [f"{n}: {a}" if counts[n] > 1 and a else n for n, a in names]


def _tool_labels(tools, catalog, cluster, width, max_lines):
    out = []
    for i, name in enumerate(tool_labels(tools, catalog, cluster), start=1):
        lines = textwrap.wrap(f"{i}. {name}", width=width, break_long_words=True, break_on_hyphens=True) or [f"{i}."]
        if len(lines) > max_lines:
            lines = lines[:max_lines]
            lines[-1] = lines[-1][: max(width - 1, 1)].rstrip() + "\u2026"
        out.append("\n".join(lines))
    return out


def _cluster_title(cluster, catalog, k):
    name = ""
    if catalog is not None and "cluster_name" in catalog.table.columns:
        vals = catalog.table.loc[catalog.table["cluster_id"] == cluster, "cluster_name"].dropna().unique()
        name = _str(vals[0]) if len(vals) else ""
    head = f"Cluster {cluster}" + (f": {name}" if name else "")
    return f"{head} (K = {k})"


def _rate_interval(table):
    """Bootstrap percentile interval of the rates when available, else Wilson."""
    low = table["bootstrap_low"].to_numpy(dtype=float)
    high = table["bootstrap_high"].to_numpy(dtype=float)
    if np.isfinite(low).any():
        return low, high, "query bootstrap"
    return table["wilson_low"].to_numpy(dtype=float), table["wilson_high"].to_numpy(dtype=float), "Wilson"


def _noise_bands(ax, null_x, null_y):
    nx = np.nanmax(null_x) if len(null_x) and np.isfinite(null_x).any() else np.nan
    ny = np.nanmax(null_y) if len(null_y) and np.isfinite(null_y).any() else np.nan
    label = "uniform chooser: expected plug-in TV (noise level)"
    if np.isfinite(nx):
        ax.axvspan(0, nx, color="#bbbbbb", alpha=0.35, linewidth=0, label=label, zorder=0, gid="noise-band-api")
        label = "_nolegend_"
    if np.isfinite(ny):
        ax.axhspan(0, ny, color="#bbbbbb", alpha=0.35, linewidth=0, label=label, zorder=0, gid="noise-band-pos")


def _point(ax, api, pos, colour, size, label=None, alpha=1.0):
    x, y = api.mean_over_runs, pos.mean_over_runs
    xerr = _err(x, api.ci)
    yerr = _err(y, pos.ci)
    ax.errorbar([x], [y], xerr=xerr, yerr=yerr, fmt="o", color=colour, markersize=size, elinewidth=1.0,
                capsize=2, label=label, alpha=alpha, zorder=3, markeredgecolor="white", markeredgewidth=0.5)


def _err(v, ci):
    lo, hi = ci
    if not (np.isfinite(lo) and np.isfinite(hi) and np.isfinite(v)):
        return None
    return np.array([[max(v - lo, 0.0)], [max(hi - v, 0.0)]])


def _label_points(ax, pts, fontsize=8):
    """Name each point, choosing per label the first of a few offsets that overlaps no earlier label.

    Label boxes are estimated in points after the layout is settled (the Agg renderer measures
    the text), so the result is deterministic and needs no extra dependency.
    """
    if not pts:
        return
    fig = ax.figure
    fig.draw_without_rendering()
    renderer = fig.canvas.get_renderer()
    to_pt = 72.0 / fig.dpi
    axbox = ax.get_window_extent(renderer)
    candidates = [(6, 2, "left", "bottom"), (6, -10, "left", "top"), (-6, 2, "right", "bottom"),
                  (-6, -10, "right", "top"), (6, 12, "left", "bottom"), (6, -20, "left", "top"),
                  (-6, 12, "right", "bottom"), (-6, -20, "right", "top"), (6, 22, "left", "bottom"),
                  (6, -30, "left", "top")]
    placed = []
    marker_boxes = []
    for x, y, _ in pts:
        px, py = ax.transData.transform((x, y))
        marker_boxes.append((px * to_pt - 4, py * to_pt - 4, px * to_pt + 4, py * to_pt + 4))
    # Place labels from top to bottom, left to right, so the choice does not depend on input order.
    order = sorted(range(len(pts)), key=lambda i: (-pts[i][1], pts[i][0]))
    for i in order:
        x, y, text = pts[i]
        label = _mpl_text(text)
        probe = ax.text(0, 0, label, fontsize=fontsize)
        ext = probe.get_window_extent(renderer)
        probe.remove()
        w, h = ext.width * to_pt, ext.height * to_pt
        px, py = (v * to_pt for v in ax.transData.transform((x, y)))
        best = None
        for dx, dy, ha, va in candidates:
            x0 = px + dx if ha == "left" else px + dx - w
            y0 = py + dy if va == "bottom" else py + dy - h + 10
            box = (x0, y0, x0 + w, y0 + h)
            inside = (box[0] >= axbox.x0 * to_pt and box[2] <= axbox.x1 * to_pt
                      and box[1] >= axbox.y0 * to_pt and box[3] <= axbox.y1 * to_pt)
            clash = any(_overlap(box, b) for b in placed) or any(
                _overlap(box, b) for j, b in enumerate(marker_boxes) if j != i)
            if inside and not clash:
                best = (dx, dy, ha, va, box)
                break
        if best is None:
            dx, dy, ha, va = candidates[0]
            x0 = px + dx
            best = (dx, dy, ha, va, (x0, py + dy, x0 + w, py + dy + h))
        dx, dy, ha, va, box = best
        placed.append(box)
        ax.annotate(label, (x, y), xytext=(dx, dy if va == "bottom" else dy + 10), textcoords="offset points",
                    fontsize=fontsize, ha=ha, va=va, color="#222222", zorder=5)


def _overlap(a, b) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def _finish_tv_axes(ax, pts):
    highs = [0.1]
    for p in pts:
        for r in (p[1], p[2]):
            highs += [v for v in (r.mean_over_runs, r.ci.high, r.null_expected) if np.isfinite(v)]
    lim = min(1.0, max(highs) * 1.15 + 0.02)
    ax.plot([0, lim], [0, lim], linestyle=":", color="#777777", linewidth=1.0,
            label=r"$\delta_{\mathrm{API}} = \delta_{\mathrm{pos}}$",
            zorder=1)
    ax.set_xlim(0, lim)
    ax.set_ylim(0, lim)
    ax.set_aspect("equal", adjustable="box")
    ax.set_xlabel(r"API bias $\delta_{\mathrm{API}}$ (TV to uniform)")
    ax.set_ylabel(r"position bias $\delta_{\mathrm{pos}}$ (TV to uniform)")
    ax.grid(color="#eeeeee", linewidth=0.6, zorder=0)
    ax.set_axisbelow(True)
    ax.spines[["top", "right"]].set_visible(False)


def _ci_name(pts):
    methods = {r.ci_method for p in pts for r in (p[1], p[2])} - {"none"}
    names = {"bca": "BCa"}
    return "/".join(sorted(names.get(m, m) for m in methods)) if methods else "no"


def _rates_figsize(k, n_groups):
    per_tool = max(1.25, 0.16 * n_groups + 0.35)
    return (min(2.6 + k * per_tool, 16.0), 4.4)


def _figure_and_axes(ax, figsize):
    if ax is not None:
        return ax.figure, ax
    fig, axes = _new_figure(1, figsize)
    return fig, axes[0]


def _new_figure(n, figsize):
    """A Figure on the Agg canvas (no pyplot: nothing global, nothing shown)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=figsize, layout="constrained")
    FigureCanvasAgg(fig)
    axes = [fig.add_subplot(1, n, i + 1) for i in range(n)]
    return fig, axes


def _colours(n):
    if n <= len(_TAB10):
        return list(_TAB10[:n])
    from matplotlib import colormaps

    cmap = colormaps["tab20"]
    return [cmap(i % 20) for i in range(n)]


def _mpl_text(s) -> str:
    """Escape ``$`` so names from logs are never parsed as mathtext."""
    return str(s).replace("$", r"\$")


def _str(v) -> str:
    try:
        import pandas as pd

        if v is None or pd.isna(v):
            return ""
    except (TypeError, ValueError):
        pass
    return str(v)


def _natural(x):
    return (0, int(x), "") if str(x).isdigit() else (1, 0, str(x))
