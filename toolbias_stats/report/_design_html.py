"""Report fragment (HTML) "Is this study big enough?" (the terminal text of ``toolbias-stats plan`` is
:func:`toolbias_stats._text.format_plan_text`).

Formatting only: every number is rounded by :mod:`toolbias_stats._format`, every string from the data is
HTML-escaped with the report's helper, figures are inline SVG drawn by :mod:`toolbias_stats.plots._design`.
"""

from __future__ import annotations

import numpy as np

from .._format import fmt_int, fmt_level, fmt_num
from .._text import PLAN_LABELS as _LABEL
from .._text import percent as _pct
from .._text import plan_keys as _keys
from ._render_html import _e, _svg, _table

__all__ = ["render_design_section"]

_COMP = {"query": "queries", "rotation": "rotations within a query", "run": "runs (run-level shift)",
         "query_x_run": "query × run", "attempt": "attempt noise", "cluster": "clusters (if sampled)"}


def _sci(x):
    return "—" if x is None or not np.isfinite(x) else f"{x:.2e}"


# ------------------------------------------------------------------------------------------------
def render_design_section(components, plan, *, title="Is this study big enough?") -> str:
    """HTML fragment ``<section id="design">``: achieved CI half-widths, MDEs and MDSs of the study at hand,
    where the variance comes from, and half-width against calls for other designs."""
    from ..plots import plot_plan_widths, plot_variance_shares

    lv = fmt_level(plan.settings["confidence_level"])
    by = list(components.by)
    out = [f'<section id="design">\n<h2>{_e(title)}</h2>',
           ("<p>The precision this study bought, and what other designs would buy. Half-widths are those of the "
           f"package's {lv} query-bootstrap intervals of the mean-over-runs estimate; the error half-width adds a "
           "shift shared by all queries of a run, which the query bootstrap does not see; the MDE is the smallest "
           "true delta that a level-"
           f"{plan.settings['alpha']:g} test against a fair chooser (with this study's query, rotation and run "
           f"variation) detects with probability {plan.settings['power']:g}; the MDS is the smallest change of delta "
           "between two conditions of this size that a two-sided test detects (independent query sets). The "
           "variance of each estimate is decomposed into queries, rotations within a query, runs and attempt noise "
           "(method of moments on the linearised TV; see docs/design.md); the planner draws the rates of other "
           "designs from these components.</p>")]
    head = (f"<tr><th>group</th><th>metric</th><th>calls</th><th>estimate</th><th>{lv} CI half-width</th>"
            "<th>error half-width (run shifts included)</th><th>MDE vs fair</th><th>shift CI half-width</th>"
            "<th>MDS</th></tr>")
    body = []
    for _, a in plan.achieved.iterrows():
        body.append(f"<tr><td>{_e(_keys(a, by))}</td><td>{_e(_LABEL.get(a['metric'], a['metric']))}</td>"
                    f"<td>{_e(fmt_int(a['calls']))}</td><td>{_e(fmt_num(a['estimate']))}</td>"
                    f"<td>±{_e(fmt_num(a['half_width'], 4))}</td><td>±{_e(fmt_num(a['error_half_width'], 4))}</td>"
                    f"<td>{_e(fmt_num(a['mde']))}</td>"
                    f"<td>±{_e(fmt_num(a['shift_half_width'], 4))}</td><td>{_e(fmt_num(a['mds']))}</td></tr>")
    out.append(_table(head, body, caption="Achieved precision of the study as run"))
    metrics = list(dict.fromkeys(plan.achieved["metric"]))
    for m in metrics:
        if (components.table["metric"] == m).any():
            fig = plot_variance_shares(components, metric=m)
            out.append(f'<figure>{_svg(fig, title=f"Sources of variance of {_LABEL.get(m, m)}")}'
                       f"<figcaption>Share of the variance of the {_e(_LABEL.get(m, m))} estimate from each source "
                       "at the study's design (rotations contribute nothing when every query is shown in all "
                       "rotations).</figcaption></figure>")
    t = components.table
    head = ("<tr><th>group</th><th>metric</th><th>source</th><th>variance per unit</th><th>contribution</th>"
            f"<th>share</th><th>{lv} CI of contribution</th><th>note</th></tr>")
    body = []
    for r in t.itertuples(index=False):
        d = r._asdict()
        body.append(f"<tr><td>{_e(_keys(d, by))}</td><td>{_e(_LABEL.get(d['metric'], d['metric']))}</td>"
                    f"<td>{_e(_COMP.get(d['component'], d['component']))}</td><td>{_e(_sci(d['variance']))}</td>"
                    f"<td>{_e(_sci(d['contribution']))}</td><td>{_e(_pct(d['share']))}</td>"
                    f"<td>[{_e(_sci(d['ci_low']))}, {_e(_sci(d['ci_high']))}]</td><td>{_e(d['note'])}</td></tr>")
    out.append(_table(head, body, caption="Variance components (method of moments; query-bootstrap intervals)"))
    for m in metrics:
        fig = plot_plan_widths(plan, metric=m)
        out.append(f'<figure>{_svg(fig, title=f"CI half-width of {_LABEL.get(m, m)} by design")}'
                   f"<figcaption>Expected {lv} CI half-width of {_e(_LABEL.get(m, m))} against LLM calls (more "
                   "queries per cluster along each line; circle: the study as run).</figcaption></figure>")
    for w in plan.warnings:
        out.append(f'<p class="note">{_e(w)}</p>')
    out.append("</section>")
    return "\n".join(out)
