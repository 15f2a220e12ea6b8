"""The experiments report's first figure: the shift of every compared level, with its calibrated interval.

Takes already computed :class:`~toolbias_stats.experiments.ShiftResult` objects and draws them; nothing is
estimated here (the rows and their order come from :func:`shift_overview_rows`, which the report's sentences use
too, so figure and text show the same numbers).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ._bias import _figure_and_axes, _mpl_text

if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any

    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    from ..experiments import ShiftResult

__all__ = ["plot_shift_overview", "shift_overview_rows"]

_MARK = {"shift_api": ("o", "#1f77b4", "tools"), "shift_pos": ("s", "#ff7f0e", "positions")}


def _as_list(results):
    if results is None:
        return []
    return list(results) if isinstance(results, (list, tuple)) else [results]


def shift_overview_rows(results: ShiftResult | Sequence[ShiftResult]) -> list[dict[str, Any]]:
    """One row per compared level (every ``ShiftResult`` in ``results``), ordered by the larger corrected shift.

    Parameters
    ----------
    results : ShiftResult or sequence of ShiftResult

    Returns
    -------
    list of dict
        ``between``, ``base``, ``keys`` (the ``by`` values and the level), ``label`` and per metric
        (``shift_api``, ``shift_pos``) the :class:`~toolbias_stats.experiments.ShiftEstimate` or None. Sorted by
        the larger of the two corrected shifts, largest first (missing values last).

    Examples
    --------
    >>> shift_overview_rows([])
    []
    """
    rows = []
    for res in _as_list(results):
        for g in res.groups:
            label = ", ".join(f"{v}" for k, v in g.keys.items() if k != res.between)
            level = f"{res.between} = {g.keys.get(res.between)} vs {g.base}"
            rows.append({"between": res.between, "base": g.base, "keys": dict(g.keys),
                         "label": f"{label}: {level}" if label else level,
                         "shift_api": g.shift_api, "shift_pos": g.shift_pos})

    def key(r):
        vals = [s.corrected for s in (r["shift_api"], r["shift_pos"]) if s is not None and np.isfinite(s.corrected)]
        return -max(vals) if vals else np.inf

    return sorted(rows, key=key)


def plot_shift_overview(results: ShiftResult | Sequence[ShiftResult], *, alpha: float = 0.05,
                        ax: Axes | None = None) -> Figure:
    """Forest plot of the shift of every compared level: corrected value and calibrated interval, tools and positions.

    Parameters
    ----------
    results : ShiftResult or sequence of ShiftResult
        E.g. one comparing ``condition`` levels and one per numeric sweep column.
    alpha : float, default 0.05
        A marker is filled when the level's Holm-adjusted permutation p-value (``p_adjusted``) is <= ``alpha``
        (distinguishable from noise), open otherwise.
    ax : matplotlib.axes.Axes, optional

    Returns
    -------
    matplotlib.figure.Figure

    Notes
    -----
    One line per compared level (``by`` group x level), ordered by the larger corrected shift. Circle: the shift of
    the tool distribution, square: of the position distribution; each the bias-corrected estimate with its
    calibrated interval (``corrected``, ``corrected_ci``: the interval the package shows first for a shift). The
    grey tick is ``null_expected``, the plug-in shift two samples of one distribution show with these counts, for
    comparison with a plug-in bar; 0 is "no change".

    Examples
    --------
    >>> import numpy as np
    >>> import toolbias_stats as tbs
    >>> from toolbias_stats.experiments import simulate_conditions
    >>> pref = np.ones((3, 4))
    >>> log = simulate_conditions({"base": (pref, None), "first_wins": (pref, [4, 1, 1, 1])}, n_queries=20, rng=0)
    >>> res = tbs.selection_shift(log, between="condition", base="base", n_resamples=200, rng=1)
    >>> fig = plot_shift_overview([res])
    >>> len(fig.axes)
    1
    """
    rows = shift_overview_rows(results)
    n = max(1, len(rows))
    fig, ax = _figure_and_axes(ax, (6.4, min(9.0, 1.2 + 0.42 * n)))
    if not rows:
        ax.text(0.5, 0.5, "no compared levels", ha="center", va="center", transform=ax.transAxes)
        ax.set_axis_off()
        return fig
    offsets = {"shift_api": -0.14, "shift_pos": 0.14}
    shown = set()
    for i, r in enumerate(rows):
        y = n - 1 - i
        for m, (marker, colour, _name) in _MARK.items():
            s = r[m]
            if s is None or not np.isfinite(s.corrected):
                continue
            lo, hi = s.corrected_ci
            sig = np.isfinite(s.p_adjusted) and s.p_adjusted <= alpha
            yy = y + offsets[m]
            if np.isfinite(lo) and np.isfinite(hi):
                ax.plot([lo, hi], [yy, yy], color=colour, lw=1.6, solid_capstyle="butt")
            ax.plot([s.corrected], [yy], marker=marker, ms=6, color=colour, mfc=colour if sig else "white",
                    mew=1.4, ls="none")
            shown.add(m)
            if np.isfinite(s.null_expected):
                ax.plot([s.null_expected] * 2, [yy - 0.1, yy + 0.1], color="0.55", lw=1)
    ax.axvline(0, color="0.3", lw=0.8)
    ax.set_yticks(range(n))
    ax.set_yticklabels([_mpl_text(r["label"]) for r in rows][::-1], fontsize=7)
    ax.set_ylim(-0.6, n - 0.4)
    ax.set_xlim(left=min(-0.01, ax.get_xlim()[0]))
    ax.set_xlabel("shift from the base level (TV), corrected [calibrated CI]", fontsize=8)
    ax.set_title(f"Shift per compared level (filled: Holm-adjusted p ≤ {alpha:g};\n"
                 "grey tick: the plug-in shift of noise alone)", fontsize=8)
    from matplotlib.lines import Line2D

    handles = [Line2D([], [], marker=_MARK[m][0], color=_MARK[m][1], ls="-", lw=1.6, ms=6, label=_MARK[m][2])
               for m in ("shift_api", "shift_pos") if m in shown]
    ax.legend(handles=handles, fontsize=7, frameon=False, loc="lower right")
    return fig
