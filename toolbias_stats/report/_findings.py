"""Key findings: one plain sentence per fact, generated from a BiasResult's numbers (never hand-written).

Used by the HTML report's opening block, the Quarto template and the notebook display, so every output says the
same thing in the same words.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from .._format import fmt_estimate_ci, fmt_level, fmt_num, fmt_p

if TYPE_CHECKING:
    from collections.abc import Iterable

    from ..io import ToolCatalog
    from ..metrics import BiasResult

__all__ = ["key_findings", "Finding"]

_NAMES = {"delta_api": "tool (API) bias \u03b4_API", "delta_pos": "position bias \u03b4_pos"}


class Finding(tuple):
    """``(group label, [sentence, ...])``.

    Examples
    --------
    >>> f = Finding("GPT-4.1 mini", ["The position bias is large."])
    >>> f.label, f.sentences
    ('GPT-4.1 mini', ['The position bias is large.'])
    >>> label, sentences = f                   # a plain 2-tuple
    """

    __slots__ = ()

    def __new__(cls, label: object, sentences: Iterable[str]) -> Finding:
        return super().__new__(cls, (str(label), list(sentences)))

    @property
    def label(self) -> str:
        return self[0]

    @property
    def sentences(self) -> list[str]:
        return self[1]


def key_findings(result: BiasResult, catalog: ToolCatalog | None = None, *, alpha: float = 0.05) -> list[Finding]:
    """The headline of a :class:`~toolbias_stats.BiasResult`, per group, as plain sentences.

    For each group: the bias estimate with its interval and whether it is distinguishable from a fair chooser
    (the calibrated interval excludes 0 and the p-value of "no bias" is below ``alpha``); the most and least
    favoured tools (largest and smallest selection rate relative to 1/K, over all clusters); the position
    effect (how often the first listed tool is chosen against 1/K, and the position bias with its interval).

    Parameters
    ----------
    result : BiasResult
    catalog : ToolCatalog, optional
        For readable tool names (``tool_name``); tool ids otherwise.
    alpha : float, default 0.05

    Returns
    -------
    list of Finding
        ``(label, sentences)`` per group, in the result's order.

    Examples
    --------
    >>> import toolbias_stats as tbs
    >>> from toolbias_stats.simulate import simulate_selection_log
    >>> log = simulate_selection_log(n_clusters=3, n_queries=20, rng=0).log     # a fair chooser
    >>> [(f.label, len(f.sentences)) for f in key_findings(tbs.selection_bias(log, n_resamples=50, rng=1))]
    [('simulated', 4)]
    """
    level = fmt_level(result.confidence_level)
    out = []
    for g in result.groups:
        label = ", ".join(f"{v}" for v in g.keys.values()) if g.keys else "all attempts"
        s = []
        for m in ("delta_api", "delta_pos"):
            r = getattr(g, m)
            if r is None:
                continue
            est = fmt_estimate_ci(r.mean_over_runs, r.ci)
            corr = fmt_estimate_ci(r.corrected, r.corrected_ci)
            lo = r.corrected_ci.low
            fair = fmt_num(r.null_expected)
            if np.isfinite(lo) and np.isfinite(r.p_value):
                distinct = lo > 0 and r.p_value < alpha
                verdict = (f"distinguishable from a fair chooser ({fmt_p(r.p_value)})" if distinct else
                           f"not distinguishable from a fair chooser ({fmt_p(r.p_value)}; the bias-corrected "
                           f"{level} interval reaches 0)" if lo <= 0 else
                           f"not clearly distinguishable from a fair chooser ({fmt_p(r.p_value)})")
            elif np.isfinite(r.p_value):
                verdict = ("distinguishable from a fair chooser" if r.p_value < alpha else
                           "not distinguishable from a fair chooser") + f" ({fmt_p(r.p_value)})"
            else:
                verdict = "not tested against a fair chooser (no null draws)"
            # the interval for the true delta leads (issue 21); the plug-in and its interval follow, labelled
            if np.isfinite(r.corrected) and np.all(np.isfinite(r.corrected_ci)):
                # the plug-in without its bootstrap interval (issue 35: near uniformity it covers neither the true
                # delta nor the expected plug-in value)
                lead = (f"The {_NAMES[m]} is {corr} (bias-corrected, {level} calibrated CI; plug-in "
                        f"{fmt_num(r.mean_over_runs)}, biased upward by sampling noise)")
            else:
                lead = f"The {_NAMES[m]} is {est} (plug-in, {level} CI)"
            s.append(f"{lead}; a fair chooser would show about {fair} from noise alone, so it is {verdict}.")
        fav = _favoured(g, catalog)
        if fav:
            (t_hi, c_hi, r_hi, u_hi), (t_lo, c_lo, r_lo, u_lo) = fav
            s.append(f"Most favoured tool: {t_hi} (cluster {c_hi}), chosen {_pct(r_hi)} of the time against "
                     f"{_pct(u_hi)} for a fair chooser; least favoured: {t_lo} (cluster {c_lo}), {_pct(r_lo)} "
                     f"against {_pct(u_lo)}.")
        first = _first_position(g)
        if first is not None:
            share, uniform = first
            direction = "more" if share > uniform else "less"
            s.append(f"Position effect: the first listed tool is chosen {_pct(share)} of the time on average over "
                     f"clusters, {direction} than the {_pct(uniform)} of a fair chooser.")
        out.append(Finding(label, s))
    return out


def _pct(x) -> str:
    return "\u2013" if not np.isfinite(x) else f"{100 * x:.1f}%"


def _favoured(g, catalog):
    best = worst = None
    for c in g.clusters:
        if c.n_used == 0:
            continue
        u = 1.0 / c.K
        for t, rate in c.rates.items():
            if not np.isfinite(rate):
                continue
            item = (rate - u, t, str(c.cluster), rate, u)
            if best is None or item[0] > best[0]:
                best = item
            if worst is None or item[0] < worst[0]:
                worst = item
    if best is None:
        return None
    return tuple((_tool_name(x[1], catalog), x[2], x[3], x[4]) for x in (best, worst))


def _tool_name(tool_id, catalog) -> str:
    if catalog is None:
        return str(tool_id)
    tab = catalog.table
    row = tab.loc[tab["tool_id"] == tool_id]
    if row.empty:
        return str(tool_id)
    name = row["tool_name"].iloc[0]
    return str(name) if isinstance(name, str) and name and name != tool_id else str(tool_id)


def _first_position(g):
    shares, uniforms = [], []
    for c in g.clusters:
        if c.position_rates is None or not np.isfinite(c.position_rates[0]):
            continue
        shares.append(c.position_rates[0])
        uniforms.append(1.0 / len(c.position_rates))
    if not shares:
        return None
    return float(np.mean(shares)), float(np.mean(uniforms))
