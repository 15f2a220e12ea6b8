"""The choice-model section's first figure: position effects of every group, with their intervals (issue 26).

Takes an already fitted :class:`~toolbias_stats.choicemodel.ChoiceModelResult` and draws it; nothing is estimated
here. The rows come from :func:`choice_model_overview_rows` (the values of ``result.to_dict()``), which the
section's sentences use too, so figure and text show the same numbers.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from ._bias import _figure_and_axes, _mpl_text

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    from ..choicemodel import ChoiceModelResult

__all__ = ["plot_choice_model_overview", "choice_model_overview_rows"]


def _finite(x) -> bool:
    return x is not None and math.isfinite(x)


def choice_model_overview_rows(result: ChoiceModelResult) -> list[dict[str, Any]]:
    """One row per group x position >= 2: log-odds vs position 1 with its interval, largest |effect| first.

    Parameters
    ----------
    result : ChoiceModelResult

    Returns
    -------
    list of dict
        ``group`` (label of the by-keys), ``position``, ``estimate``, ``ci_low``, ``ci_high`` (from
        ``result.to_dict()["groups"][i]["position_effects"]``) and the group's ``wald_p`` (test of no position
        effect). Sorted by ``|estimate|``, largest first (missing values last).

    Examples
    --------
    >>> from toolbias_stats.choicemodel import choice_model, simulate_logit_log
    >>> rows = choice_model_overview_rows(choice_model(simulate_logit_log(n_queries=40, rng=1), rng=1))
    >>> sorted(r["position"] for r in rows)
    [2, 3, 4]
    """
    rows = []
    for g in result.to_dict()["groups"]:
        label = ", ".join(f"{v}" for v in g["keys"].values()) or "all attempts"
        for p in g["position_effects"]:
            rows.append({"group": label, "position": p["position"], "estimate": p["estimate"],
                         "ci_low": p["ci"][0], "ci_high": p["ci"][1],
                         "wald_p": g["no_position_effect"]["wald_p"]})
    return sorted(rows, key=lambda r: -abs(r["estimate"]) if _finite(r["estimate"]) else math.inf)


def plot_choice_model_overview(result: ChoiceModelResult, *, alpha: float = 0.05, ax: Axes | None = None) -> Figure:
    """Forest plot of the position effects (log-odds vs position 1) of every group, largest first.

    Parameters
    ----------
    result : ChoiceModelResult
    alpha : float, default 0.05
        A marker is filled when the group's Wald test of no position effect has p <= ``alpha``.
    ax : matplotlib.axes.Axes, optional

    Returns
    -------
    matplotlib.figure.Figure

    Examples
    --------
    >>> from toolbias_stats.choicemodel import choice_model, simulate_logit_log
    >>> fig = plot_choice_model_overview(choice_model(simulate_logit_log(n_queries=40, rng=1), rng=1))
    """
    rows = choice_model_overview_rows(result)
    n = max(1, len(rows))
    fig, ax = _figure_and_axes(ax, (6.4, min(9.0, 1.2 + 0.32 * n)))
    if not rows:
        ax.text(0.5, 0.5, "no position effects", ha="center", va="center", transform=ax.transAxes)
        ax.set_axis_off()
        return fig
    for i, r in enumerate(rows):
        y = n - 1 - i
        if not _finite(r["estimate"]):
            continue
        if _finite(r["ci_low"]) and _finite(r["ci_high"]):
            ax.plot([r["ci_low"], r["ci_high"]], [y, y], color="#ff7f0e", lw=1.6, solid_capstyle="butt")
        sig = _finite(r["wald_p"]) and r["wald_p"] <= alpha
        ax.plot([r["estimate"]], [y], marker="s", ms=6, color="#ff7f0e", mfc="#ff7f0e" if sig else "white",
                mew=1.4, ls="none")
    ax.axvline(0, color="0.3", lw=0.8)
    ax.set_yticks(range(n))
    ax.set_yticklabels([_mpl_text(f"{r['group']}: position {r['position']}") for r in rows][::-1], fontsize=7)
    ax.set_ylim(-0.6, n - 0.4)
    ax.set_xlabel("log-odds of being chosen vs position 1 (0 = no position effect)")
    return fig
