"""The bias report's first figures: δ per group with its calibrated interval, and where the bias sits.

Takes an already computed :class:`~toolbias_stats.BiasResult` and draws it; nothing is estimated here. The numbers
come from two small pure functions, :func:`bias_overview_rows` (one row per group, ordered by bias) and
:func:`rate_gap_table` (selection rate minus 1/K per cluster, tool or position, and group), which the report's
sentences use too, so figure and text show the same numbers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from ._bias import _figure_and_axes, _mpl_text, group_label, tool_labels

if TYPE_CHECKING:
    from typing import Literal

    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    from ..io import ToolCatalog
    from ..metrics import BiasResult

__all__ = ["plot_bias_overview", "plot_rate_gaps", "bias_overview_rows", "rate_gap_table"]

_MARK = {"delta_api": ("o", "#1f77b4", "\u03b4_API (tools)"), "delta_pos": ("s", "#ff7f0e", "\u03b4_pos (positions)")}


def bias_overview_rows(result: BiasResult, *, alpha: float | None = None) -> list[dict[str, Any]]:
    """One row per group of ``result``, ordered by the larger bias-corrected δ (largest first).

    Parameters
    ----------
    result : BiasResult
    alpha : float, optional
        Level of the "distinguishable from a fair chooser" verdict; default ``1 - result.confidence_level``.

    Returns
    -------
    list of dict
        ``label`` (the group's ``by`` values), ``keys`` and per metric (``delta_api``, ``delta_pos``) either None
        (no positions) or a dict with ``corrected``, ``low``, ``high`` (the calibrated interval, the one the
        package shows first for δ), ``null_expected`` (the plug-in δ of a fair chooser with these counts),
        ``p_value`` and ``distinguishable`` (calibrated interval above 0 and p-value below ``alpha``, as in
        the per-group findings). Groups without a finite corrected δ come last.

    Examples
    --------
    >>> import toolbias_stats as tbs
    >>> from toolbias_stats.simulate import simulate_selection_log
    >>> res = tbs.selection_bias(simulate_selection_log(n_clusters=2, n_queries=10, rng=0).log, n_resamples=50, rng=1)
    >>> rows = bias_overview_rows(res)
    >>> rows[0]["label"], sorted(rows[0]["delta_api"])
    ('simulated', ['corrected', 'distinguishable', 'high', 'low', 'null_expected', 'p_value'])
    """
    alpha = 1 - result.confidence_level if alpha is None else float(alpha)
    rows = []
    for g in result.groups:
        row: dict[str, Any] = {"label": group_label(g.keys), "keys": dict(g.keys)}
        for m in _MARK:
            r = getattr(g, m)
            if r is None:
                row[m] = None
                continue
            lo, hi = (float(x) for x in r.corrected_ci)
            p = float(r.p_value)
            row[m] = {"corrected": float(r.corrected), "low": lo, "high": hi,
                      "null_expected": float(r.null_expected), "p_value": p,
                      "distinguishable": bool(np.isfinite(lo) and lo > 0 and np.isfinite(p) and p < alpha)}
        rows.append(row)

    def key(r):
        vals = [r[m]["corrected"] for m in _MARK if r[m] is not None and np.isfinite(r[m]["corrected"])]
        return -max(vals) if vals else np.inf

    return sorted(rows, key=key)   # stable: ties keep the result's order


def rate_gap_table(result: BiasResult, catalog: ToolCatalog | None = None, *,
                   kind: Literal["tool", "position"] = "tool") -> pd.DataFrame:
    """Selection rate minus the fair rate 1/K, per cluster, tool (or list position) and group.

    Parameters
    ----------
    result : BiasResult
    catalog : ToolCatalog, optional
        For tool names (``tool_labels``); tool ids otherwise.
    kind : {"tool", "position"}
        ``"position"`` uses the per-position rates (empty when no cluster knows positions).

    Returns
    -------
    pandas.DataFrame
        Columns ``cluster``, ``K``, ``index`` (1-based tool number in catalog order, or list position), ``item``
        (tool label or ``"position i"``), ``group`` (label), ``rate``, ``gap`` (``rate - 1/K``). Clusters in the
        result's order; groups in the result's order.

    Examples
    --------
    >>> import toolbias_stats as tbs
    >>> from toolbias_stats.simulate import simulate_selection_log
    >>> res = tbs.selection_bias(simulate_selection_log(n_clusters=2, n_queries=10, rng=0).log, n_resamples=50, rng=1)
    >>> rate_gap_table(res).columns.tolist()
    ['cluster', 'K', 'index', 'item', 'group', 'rate', 'gap']
    """
    if kind not in ("tool", "position"):
        raise ValueError(f"kind must be 'tool' or 'position', not {kind!r}")
    records = []
    for g in result.groups:
        label = group_label(g.keys)
        for c in g.clusters:
            cid = str(c.cluster)
            if kind == "tool":
                tools = list(c.tools)
                names = tool_labels(tools, catalog, cid)
                for i, (t, name) in enumerate(zip(tools, names), start=1):
                    rate = float(c.rates.get(t, np.nan)) if c.n_used else np.nan
                    records.append((cid, c.K, i, name, label, rate, rate - 1.0 / c.K))
            else:
                pr = c.position_rates
                if pr is None:
                    continue
                k = len(pr)
                for i, rate in enumerate(pr, start=1):
                    rate = float(rate) if c.n_used else np.nan
                    records.append((cid, k, i, f"position {i}", label, rate, rate - 1.0 / k))
    return pd.DataFrame.from_records(records, columns=["cluster", "K", "index", "item", "group", "rate", "gap"])


def plot_bias_overview(result: BiasResult, *, alpha: float | None = None, ax: Axes | None = None) -> Figure:
    """Forest plot of δ_API and δ_pos per group: bias-corrected value, calibrated interval, fair-chooser tick.

    Parameters
    ----------
    result : BiasResult
    alpha : float, optional
        A marker is filled when the group's δ is distinguishable from a fair chooser at this level (see
        :func:`bias_overview_rows`), open otherwise. Default ``1 - result.confidence_level``.
    ax : matplotlib.axes.Axes, optional

    Returns
    -------
    matplotlib.figure.Figure

    Notes
    -----
    One line per group, ordered by the larger corrected δ (largest at the top). Circle: δ_API, square: δ_pos;
    each the bias-corrected estimate with its calibrated interval (``corrected``, ``corrected_ci``). The grey tick
    is ``null_expected``, the plug-in δ a fair chooser shows from noise alone with these counts; 0 is "no bias".

    Examples
    --------
    >>> import toolbias_stats as tbs
    >>> from toolbias_stats.simulate import simulate_selection_log
    >>> res = tbs.selection_bias(simulate_selection_log(n_clusters=2, n_queries=10, rng=0).log, n_resamples=50, rng=1)
    >>> fig = plot_bias_overview(res)
    >>> len(fig.axes)
    1
    """
    rows = bias_overview_rows(result, alpha=alpha)
    a = 1 - result.confidence_level if alpha is None else float(alpha)
    n = max(1, len(rows))
    fig, ax = _figure_and_axes(ax, (6.4, min(9.0, 1.3 + 0.42 * n)))
    if not rows:
        ax.text(0.5, 0.5, "no groups", ha="center", va="center", transform=ax.transAxes)
        ax.set_axis_off()
        return fig
    offsets = {"delta_api": -0.14, "delta_pos": 0.14}
    shown = set()
    for i, r in enumerate(rows):
        y = n - 1 - i
        for m, (marker, colour, _) in _MARK.items():
            s = r[m]
            if s is None or not np.isfinite(s["corrected"]):
                continue
            yy = y + offsets[m]
            if np.isfinite(s["low"]) and np.isfinite(s["high"]):
                ax.plot([s["low"], s["high"]], [yy, yy], color=colour, lw=1.6, solid_capstyle="butt")
            ax.plot([s["corrected"]], [yy], marker=marker, ms=6, color=colour,
                    mfc=colour if s["distinguishable"] else "white", mew=1.4, ls="none")
            shown.add(m)
            if np.isfinite(s["null_expected"]):
                ax.plot([s["null_expected"]] * 2, [yy - 0.1, yy + 0.1], color="0.55", lw=1)
    ax.axvline(0, color="0.3", lw=0.8)
    ax.set_yticks(range(n))
    ax.set_yticklabels([_mpl_text(r["label"]) for r in rows][::-1], fontsize=8)
    ax.set_ylim(-0.6, n - 0.4)
    ax.set_xlim(left=min(-0.01, ax.get_xlim()[0]))
    lv = f"{100 * result.confidence_level:g}%"
    ax.set_xlabel(f"\u03b4 (TV distance to uniform), bias-corrected [{lv} calibrated CI]", fontsize=8)
    ax.set_title(f"Bias per group, largest first (filled: distinguishable from a fair chooser at {a:g};\n"
                 "grey tick: the plug-in \u03b4 of a fair chooser from noise alone)", fontsize=8)
    from matplotlib.lines import Line2D

    handles = [Line2D([], [], marker=_MARK[m][0], color=_MARK[m][1], ls="-", lw=1.6, ms=6, label=_MARK[m][2])
               for m in _MARK if m in shown]
    ax.legend(handles=handles, fontsize=7, frameon=False, loc="lower right")
    return fig


def plot_rate_gaps(result: BiasResult, catalog: ToolCatalog | None = None, *,
                   kind: Literal["tool", "position"] = "tool", ncols: int = 4) -> Figure | None:
    """Heatmaps of selection rate minus 1/K, one small multiple per cluster: tools (or positions) × groups.

    Parameters
    ----------
    result : BiasResult
    catalog : ToolCatalog, optional
    kind : {"tool", "position"}
    ncols : int, default 4

    Returns
    -------
    matplotlib.figure.Figure or None
        None when there is nothing to draw (``kind="position"`` without known positions).

    Notes
    -----
    Red: chosen more often than a fair chooser would (rate above 1/K), blue: less; one colour scale for all
    panels, symmetric around 0. Rows are numbered as in the per-cluster figures (tools in catalog order).

    Examples
    --------
    >>> import toolbias_stats as tbs
    >>> from toolbias_stats.simulate import simulate_selection_log
    >>> res = tbs.selection_bias(simulate_selection_log(n_clusters=2, n_queries=10, rng=0).log, n_resamples=50, rng=1)
    >>> fig = plot_rate_gaps(res)         # one panel per cluster size, plus the colour bar
    >>> len(fig.axes)
    3
    """
    tab = rate_gap_table(result, catalog, kind=kind)
    if tab.empty:
        return None
    clusters = list(dict.fromkeys(tab["cluster"]))
    groups = list(dict.fromkeys(tab["group"]))
    ncols = max(1, min(int(ncols), len(clusters)))
    nrows = -(-len(clusters) // ncols)
    kmax = int(tab["index"].max())
    width = min(16.0, ncols * (1.0 + 0.32 * len(groups)) + 1.2)
    height = min(18.0, nrows * (0.55 + 0.2 * kmax + 0.06 * max(len(str(g)) for g in groups)) + 0.6)
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(nrows, ncols, squeeze=False)
    vmax = float(np.nanmax(np.abs(tab["gap"].to_numpy()))) if np.isfinite(tab["gap"]).any() else 1.0
    vmax = vmax if vmax > 0 else 1.0
    im = None
    for ax, cid in zip(axes.flat, clusters):
        sub = tab[tab["cluster"] == cid]
        mat = sub.pivot_table(index="index", columns="group", values="gap", dropna=False)
        mat = mat.reindex(columns=[g for g in groups if g in set(sub["group"])])
        im = ax.imshow(mat.to_numpy(dtype=float), cmap="RdBu_r", vmin=-vmax, vmax=vmax, aspect="auto")
        ax.set_yticks(range(len(mat.index)))
        ax.set_yticklabels([str(i) for i in mat.index], fontsize=7)
        ax.set_xticks(range(len(mat.columns)))
        ax.set_xticklabels([_mpl_text(c) for c in mat.columns], fontsize=7, rotation=45, ha="right")
        ax.set_title(_mpl_text(f"cluster {cid} (K = {int(sub['K'].iloc[0])})"), fontsize=8)
        if kind == "position":
            ax.set_ylabel("list position", fontsize=7)
    for ax in list(axes.flat)[len(clusters):]:
        ax.set_axis_off()
    if im is not None:
        cb = fig.colorbar(im, ax=axes, shrink=0.8)
        cb.set_label("selection rate \u2212 1/K", fontsize=8)
        cb.ax.tick_params(labelsize=7)
    what = "tool (numbers as in the cluster figures)" if kind == "tool" else "list position"
    fig.suptitle(f"Selection rate minus the fair rate 1/K, by {what} and group", fontsize=9)
    return fig

