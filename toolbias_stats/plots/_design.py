"""Figures of study design: where the variance comes from, and CI half-width against the number of calls.

Every function takes an already computed result (:class:`~toolbias_stats.design.VarianceComponents` or
:class:`~toolbias_stats.design.StudyPlan`) and draws it; nothing is estimated here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ._bias import _colours, _figure_and_axes, _mpl_text

if TYPE_CHECKING:
    from typing import Literal

    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    from ..design import StudyPlan, VarianceComponents

__all__ = ["plot_variance_shares", "plot_plan_widths"]

_NAMES = {"delta_api": "δ_API", "delta_pos": "δ_pos", "delta_model": "δ_model"}
_COMP_COLOURS = {"query": "#1f77b4", "rotation": "#9467bd", "run": "#d62728", "query_x_run": "#ff7f0e",
                 "attempt": "#2ca02c"}


def _label(row, by):
    return ", ".join(_mpl_text(row[b]) for b in by) or "all"


def plot_variance_shares(components: VarianceComponents, *,
                         metric: Literal["delta_api", "delta_pos", "delta_model"] = "delta_api",
                         ax: Axes | None = None) -> Figure:
    """Stacked bars: share of Var(delta estimate) from each source at the study's design, one bar per group.

    Parameters
    ----------
    components : VarianceComponents
    metric : {"delta_api", "delta_pos", "delta_model"}, default "delta_api"
    ax : matplotlib.axes.Axes, optional

    Returns
    -------
    matplotlib.figure.Figure

    Examples
    --------
    >>> import toolbias_stats as tbs
    >>> from toolbias_stats.simulate import simulate_selection_log
    >>> sim = simulate_selection_log(n_clusters=3, n_queries=20, n_runs=3, rng=0)
    >>> vc = tbs.variance_components(sim.log, metrics=["delta_api"], n_resamples=50, rng=1)
    >>> fig = plot_variance_shares(vc)
    >>> fig.axes[0].get_xlabel()
    "share of Var(δ_API estimate) at the study's design"
    """
    t = components.table
    t = t[(t["metric"] == metric) & (t["component"] != "cluster")]
    by = list(components.by)
    groups = list(dict.fromkeys(tuple(r) for r in t[by].itertuples(index=False, name=None))) if by else [()]
    fig, ax = _figure_and_axes(ax, (6.0, max(2.2, 0.42 * len(groups) + 1.2)))
    for i, g in enumerate(groups):
        sel = np.ones(len(t), bool)
        for b, v in zip(by, g):
            sel &= (t[b] == v).to_numpy()
        left = 0.0
        for comp, colour in _COMP_COLOURS.items():
            row = t[sel & (t["component"] == comp).to_numpy()]
            share = float(row["share"].iloc[0]) if len(row) and np.isfinite(row["share"].iloc[0]) else 0.0
            ax.barh(i, share, left=left, color=colour, label=comp if i == 0 else None, height=0.7)
            left += share
    ax.set_yticks(range(len(groups)))
    ax.set_yticklabels([", ".join(_mpl_text(v) for v in g) or "all" for g in groups], fontsize=7)
    ax.invert_yaxis()
    ax.set_xlim(0, 1)
    ax.set_xlabel(f"share of Var({_NAMES.get(metric, metric)} estimate) at the study's design")
    ax.legend(fontsize=7, ncol=5, loc="lower center", bbox_to_anchor=(0.5, 1.0), frameon=False)
    return fig


def plot_plan_widths(plan: StudyPlan, *, metric: str = "delta_api", runs: int | None = None,
                     ax: Axes | None = None) -> Figure:
    """Expected CI half-width of delta against LLM calls per group, one line per group (grid of the plan).

    Parameters
    ----------
    plan : StudyPlan
    metric : str, default "delta_api"
    runs : int, optional
        Which runs of the grid to draw (default: the pilot's).
    ax : matplotlib.axes.Axes, optional

    Returns
    -------
    matplotlib.figure.Figure

    Examples
    --------
    >>> import numpy as np
    >>> import toolbias_stats as tbs
    >>> pilot = np.tile([0.4, 0.15, 0.15, 0.15, 0.15], (10, 1))
    >>> plan = tbs.plan_study(pilot, target=0.03, metrics=["delta_api"], queries=[25, 50, 100, 200], runs=[1],
    ...                       rotations=[5], rng=1)
    >>> fig = plot_plan_widths(plan)
    >>> fig.axes[0].get_xlabel()
    'LLM calls per group'
    """
    grid = plan.grid[plan.grid["metric"] == metric]
    ach = plan.achieved[plan.achieved["metric"] == metric]
    by = [b for b in plan.settings.get("by", []) if b in grid.columns]
    fig, ax = _figure_and_axes(ax, (6.0, 3.8))
    groups = list(dict.fromkeys(tuple(r) for r in ach[by].itertuples(index=False, name=None))) if by else [()]
    colours = _colours(max(1, len(groups)))
    for i, g in enumerate(groups):
        gsel = np.ones(len(grid), bool)
        asel = np.ones(len(ach), bool)
        for b, v in zip(by, g):
            gsel &= (grid[b] == v).to_numpy()
            asel &= (ach[b] == v).to_numpy()
        a = ach[asel].iloc[0]
        s = int(runs or a["runs"])
        rows = grid[gsel & (grid["runs"] == s).to_numpy() & (grid["rotations"] == a["rotations"]).to_numpy()]
        rows = rows.sort_values("calls")
        col = colours[i % len(colours)]
        ax.plot(rows["calls"], rows["half_width"], color=col, lw=1.3, marker=".", ms=4,
                label=(", ".join(_mpl_text(v) for v in g) or "all") + f" ({s} run{'s' if s > 1 else ''})")
        ax.plot([a["calls"]], [a["half_width"]], "o", color=col, ms=7, mfc="none")
    target = plan.target
    if target["value"] is not None and target["kind"] == "width":
        ax.axhline(target["value"], color="0.3", ls="--", lw=1)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("LLM calls per group")
    ax.set_ylabel(f"expected CI half-width of {_NAMES.get(metric, metric)}")
    ax.set_title(f"{plan.settings['confidence_level']:.0%} CI half-width by design (○: the study as run)", fontsize=8)
    ax.legend(fontsize=6, ncol=2, frameon=False)
    return fig
