"""Figures of ToolSense diagnostics: recall by tier, Internalization Score, probe accuracy vs chance.

Every function takes results that are already computed and draws them; nothing is estimated here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ._bias import _colours, _figure_and_axes, _mpl_text

if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    from ..toolsense import ProbeResult, RetrievalResult

__all__ = ["plot_recall_by_tier", "plot_internalization", "plot_probe_accuracy"]

_TIERS = ("easy", "medium", "hard", "all")


def _err(est, ci):
    lo, hi = ci
    if not (np.isfinite(est) and np.isfinite(lo) and np.isfinite(hi)):
        return np.array([[np.nan], [np.nan]])
    return np.array([[max(est - lo, 0.0)], [max(hi - est, 0.0)]])


def plot_recall_by_tier(result: RetrievalResult, *, k: int | None = None, ax: Axes | None = None) -> Figure:
    """Rc@k (filled) and Rf@k (hatched) per tier and configuration, with the bootstrap intervals.

    Parameters
    ----------
    result : RetrievalResult
        From :func:`toolbias_stats.toolsense.retrieval_recall`.
    k : int, optional
        Default: the largest k of the result.
    ax : matplotlib.axes.Axes, optional

    Returns
    -------
    matplotlib.figure.Figure

    Examples
    --------
    The bundled benchmark with a model that answers the pool in the file's order (free: without its first tool):

    >>> import pandas as pd
    >>> from toolbias_stats.toolsense import read_rrb, retrieval_recall
    >>> rrb = read_rrb()
    >>> q = rrb.queries
    >>> preds = pd.DataFrame({"sample_id": q["sample_id"], "constrained": q["pool"],
    ...                       "free": [p[1:] for p in q["pool"]]})
    >>> res = retrieval_recall(rrb, preds, k=[1, 3], n_resamples=20, rng=1)
    >>> fig = plot_recall_by_tier(res)
    >>> len(fig.axes)
    1
    """
    k = max(result.ks) if k is None else int(k)
    if k not in result.ks:
        raise ValueError(f"`k` must be one of the result's k {result.ks}; got {k!r} instead.")
    configs = result.configs
    has_free = any(result.hits[c]["free"] is not None for c in configs)
    fig, ax = _figure_and_axes(ax, figsize=(7.5, 3.6))
    bars = len(configs) * (2 if has_free else 1)
    width = 0.8 / bars
    colours = _colours(len(configs))
    x = np.arange(len(_TIERS), dtype=float)
    j = 0
    for ci_, c in enumerate(configs):
        for key, hatch in (("rc", None), ("rf", "///")):
            if key == "rf" and not has_free:
                continue
            xs = x - 0.4 + width * (j + 0.5)
            j += 1
            for ti, t in enumerate(_TIERS):
                e = result.estimates[(c, t, k)][key]
                if e is None:
                    continue
                ax.bar(xs[ti], e.estimate, width=width, color=colours[ci_] if hatch is None else "white",
                       edgecolor=colours[ci_], hatch=hatch, linewidth=0.8, zorder=2,
                       label=_mpl_text(f"{c} {'Rc' if key == 'rc' else 'Rf'}") if ti == 0 else None)
                ax.errorbar([xs[ti]], [e.estimate], yerr=_err(e.estimate, e.ci), fmt="none", ecolor="#222222",
                            elinewidth=0.8, capsize=2.5, zorder=3)
    ax.set_xticks(x)
    ax.set_xticklabels(list(_TIERS))
    ax.set_ylim(0, 1.02)
    ax.set_ylabel(f"Recall@{k}")
    ax.grid(axis="y", color="#dddddd", linewidth=0.6, zorder=0)
    ax.set_axisbelow(True)
    ax.spines[["top", "right"]].set_visible(False)
    ax.set_title(f"Recall@{k} by tier ({100 * result.confidence_level:g}% {result.ci_method} query-bootstrap CI)",
                 fontsize=10, loc="left")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
    return fig


def plot_internalization(result: RetrievalResult, *, k: int | None = None, tier: str = "all",
                         ax: Axes | None = None) -> Figure:
    """IS@k per configuration with Fieller, bootstrap and the paper's delta-method intervals side by side.

    Parameters
    ----------
    result : RetrievalResult
    k : int, optional
        Default: the largest k.
    tier : str, default "all"
    ax : matplotlib.axes.Axes, optional

    Returns
    -------
    matplotlib.figure.Figure

    Examples
    --------

    >>> import pandas as pd
    >>> from toolbias_stats.toolsense import read_rrb, retrieval_recall
    >>> rrb = read_rrb()
    >>> q = rrb.queries
    >>> preds = pd.DataFrame({"sample_id": q["sample_id"], "constrained": q["pool"],
    ...                       "free": [p[1:] for p in q["pool"]]})
    >>> res = retrieval_recall(rrb, preds, k=[1, 3], n_resamples=20, rng=1)
    >>> fig = plot_internalization(res)
    >>> fig.axes[0].get_xlabel()
    'IS@3 = Rf@3 / Rc@3  (all)'
    """
    k = max(result.ks) if k is None else int(k)
    configs = [c for c in result.configs if result.estimates[(c, tier, k)]["is"] is not None]
    fig, ax = _figure_and_axes(ax, figsize=(7.0, 0.9 + 0.45 * max(len(configs), 1)))
    methods = (("ci_fieller", "Fieller (ours)", "#1f77b4"), ("ci_bootstrap", "bootstrap pct", "#2ca02c"),
               ("ci_delta", "delta (paper)", "#d62728"))
    for i, c in enumerate(configs):
        e = result.estimates[(c, tier, k)]["is"]
        for j, (attr, label, col) in enumerate(methods):
            y = i + (j - 1) * 0.22
            lo, hi = getattr(e, attr)
            hi_draw = min(hi, 2.0) if np.isfinite(lo) else np.nan
            if np.isfinite(lo):
                ax.plot([lo, hi_draw], [y, y], color=col, linewidth=2, label=label if i == 0 else None,
                        solid_capstyle="butt")
                if not np.isfinite(hi) or hi > 2.0:
                    ax.annotate("\u2192", (hi_draw, y), fontsize=8, color=col, va="center")
            ax.plot([e.estimate], [y], "o", color="#222222", markersize=3.5, zorder=3)
    ax.axvline(1.0, color="#444444", linestyle=":", linewidth=1.0)
    ax.set_yticks(range(len(configs)))
    ax.set_yticklabels([_mpl_text(c) for c in configs], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlim(0, max(1.1, min(2.0, ax.get_xlim()[1])))
    ax.set_xlabel(f"IS@{k} = Rf@{k} / Rc@{k}  ({tier})")
    ax.spines[["top", "right"]].set_visible(False)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False,
              title=f"{100 * result.confidence_level:g}% CI", title_fontsize=8)
    return fig


def plot_probe_accuracy(results: Mapping[Any, ProbeResult], *, ax: Axes | None = None) -> Figure:
    """Probe accuracy with Wilson intervals against the chance level (dashed) per probe and configuration.

    Parameters
    ----------
    results : dict
        ``{(kind, name): ProbeResult}`` or ``{name: ProbeResult}``.
    ax : matplotlib.axes.Axes, optional

    Returns
    -------
    matplotlib.figure.Figure

    Examples
    --------
    The bundled QA probe answered "Yes" throughout:

    >>> import pandas as pd
    >>> from toolbias_stats.toolsense import probe_accuracy, read_probe
    >>> qa = read_probe("qa")
    >>> res = probe_accuracy(qa, pd.DataFrame({"id": qa.items["id"], "answer": "Yes"}))
    >>> fig = plot_probe_accuracy({"always yes": res})
    >>> fig.axes[0].get_xlabel()
    'exact-match accuracy (dashed: chance, 0.25 MCQ / 0.5 QA)'
    """
    items = list(results.items())
    fig, ax = _figure_and_axes(ax, figsize=(6.5, 0.9 + 0.4 * max(len(items), 1)))
    for i, (key, r) in enumerate(items):
        label = " / ".join(str(x) for x in key) if isinstance(key, tuple) else str(key)
        col = "#1f77b4" if r.kind == "mcq" else "#ff7f0e"
        ax.errorbar([r.accuracy], [i], xerr=_err(r.accuracy, r.ci), fmt="o", color=col, capsize=3, markersize=4)
        ax.plot([r.chance, r.chance], [i - 0.35, i + 0.35], color="#444444", linestyle="--", linewidth=1)
        ax.text(1.01, i, _mpl_text(label), va="center", fontsize=8, transform=ax.get_yaxis_transform())
    ax.set_yticks([])
    ax.set_xlim(0, 1)
    ax.set_ylim(len(items) - 0.5, -0.5)
    ax.set_xlabel("exact-match accuracy (dashed: chance, 0.25 MCQ / 0.5 QA)")
    ax.spines[["top", "right", "left"]].set_visible(False)
    return fig
