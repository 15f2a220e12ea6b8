"""HTML section / page for TOOL-SHADOW results (formatting only: nothing is computed here; the terminal text is
:func:`toolbias_stats._text.format_shadow_text`).

Every number is rounded by :mod:`toolbias_stats._format`; every string from the data (group values, notes) is
HTML-escaped with the report's escaping helper; figures are inline SVG drawn by :mod:`toolbias_stats.plots._shadow`. The
paper's banner ("pre-validation; not for deployment gating") heads every output, and the per-domain breakdown
is always shown where a PBS exceeds 60 (the paper's rule).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._format import fmt_ci, fmt_estimate_ci, fmt_int, fmt_level, fmt_num
from .._text import SHADOW_DOMAIN_NAMES as _NAMES
from .._text import SHADOW_DOMAINS as _DOMAINS
from .._text import needs_breakdown as _needs_breakdown
from .._text import shadow_label as _label
from ._render_html import _e, _svg, _table, html_page

if TYPE_CHECKING:
    import os

    from ..shadow import ShadowResult

__all__ = ["render_shadow_section", "render_shadow_report"]


def _pbs_table(result, scale):
    other = "effect" if scale == "paper" else "paper"
    head = ("<tr><th>harness</th><th class=\"num\">turns</th><th class=\"num\">tools</th>"
            f"<th class=\"num\">PBS ({_e(scale)}) [{_e(fmt_level(result.confidence_level))} CI]</th>"
            "<th class=\"num\">weight sensitivity</th>"
            f"<th class=\"num\">PBS ({_e(other)}) [CI]</th><th class=\"num\">weight sensitivity</th></tr>")
    body = []
    for g in result.groups:
        p, o = g.pbs[scale], g.pbs[other]
        body.append(f"<tr><td>{_e(_label(g.keys))}</td><td class=\"num\">{_e(fmt_int(g.n_turns))}</td>"
                    f"<td class=\"num\">{g.n_tools}</td>"
                    f"<td class=\"num\">{_e(fmt_estimate_ci(p.estimate, p.ci, 1))}</td>"
                    f"<td class=\"num\">{_e(fmt_ci(p.sensitivity, 1))}</td>"
                    f"<td class=\"num\">{_e(fmt_estimate_ci(o.estimate, o.ci, 1))}</td>"
                    f"<td class=\"num\">{_e(fmt_ci(o.sensitivity, 1))}</td></tr>")
    return _table(head, body, caption="Positional Bias Score per harness (0-100; 50 = no bias)")


def _domain_table(g):
    head = ("<tr><th>domain</th><th class=\"num\">statistic [CI]</th><th class=\"num\">z [CI]</th>"
            "<th class=\"num\">effect [CI]</th><th class=\"num\">n</th><th class=\"num\">weight</th>"
            "<th class=\"num\">w\u00b7z</th><th class=\"num\">w\u00b7effect</th><th>precision</th><th>note</th></tr>")
    body = []
    for d in _DOMAINS:
        s = g.domains[d]
        if not s.available:
            body.append(f"<tr><td>{d} ({_e(_NAMES[d])})</td><td colspan=\"8\">not computed</td>"
                        f"<td>{_e(s.note or '')}</td></tr>")
            continue
        body.append(f"<tr><td>{d} ({_e(_NAMES[d])})</td>"
                    f"<td class=\"num\">{_e(fmt_estimate_ci(s.statistic, s.statistic_ci))}</td>"
                    f"<td class=\"num\">{_e(fmt_estimate_ci(s.z, s.z_ci, 2))}</td>"
                    f"<td class=\"num\">{_e(fmt_estimate_ci(s.effect, s.effect_ci))}</td>"
                    f"<td class=\"num\">{_e(fmt_int(s.n))}</td><td class=\"num\">{_e(fmt_num(s.weight))}</td>"
                    f"<td class=\"num\">{_e(fmt_num(s.contribution('paper'), 2))}</td>"
                    f"<td class=\"num\">{_e(fmt_num(s.contribution('effect')))}</td>"
                    f"<td>{_e(s.precision)}</td><td>{_e(s.note or '')}</td></tr>")
    return _table(head, body, caption=f"Domain breakdown: {_label(g.keys)}")


def _weights_table(weights):
    head = ("<tr><th>domain</th><th>source</th><th class=\"num\">HR lower</th><th class=\"num\">HR upper</th>"
            "<th class=\"num\">SE</th><th class=\"num\">1/SE\u00b2</th><th class=\"num\">before renormalisation</th>"
            "<th class=\"num\">weight</th><th>precision</th></tr>")
    body = [f"<tr><td>{_e(r.domain)}</td><td>{_e(r.source)}</td><td class=\"num\">{_e(fmt_num(r.hr_lower))}</td>"
            f"<td class=\"num\">{_e(fmt_num(r.hr_upper))}</td><td class=\"num\">{_e(fmt_num(r.se))}</td>"
            f"<td class=\"num\">{_e(fmt_num(r.inverse_variance, 1))}</td>"
            f"<td class=\"num\">{_e(fmt_num(r.weight_before_renormalisation))}</td>"
            f"<td class=\"num\">{_e(fmt_num(r.weight))}</td><td>{_e(r.precision)}</td></tr>"
            for r in weights.table.itertuples(index=False)]
    return _table(head, body, caption=f"Weight derivation ({weights.rule})")


def render_shadow_section(result: ShadowResult, *, scale: str | None = None, figures: bool = True) -> str:
    """HTML fragment ``<section id="shadow">``: banner, PBS per harness, domain breakdown, weights.

    Parameters
    ----------
    result : ShadowResult
    scale : {"paper", "effect"}, optional
        Scale shown first (default ``result.scale``); the other is shown next to it.
    figures : bool, default True
        Include the PBS and contribution figures (inline SVG).

    Returns
    -------
    str
        A complete ``<section id="shadow">`` for ``render_bias_report(..., extra_sections=...)``.

    Examples
    --------
    A simulated audit (120 turns, 6 tools), few replicates:

    >>> import toolbias_stats as tbs
    >>> from toolbias_stats.shadow import simulate_audit
    >>> res = tbs.tool_shadow(simulate_audit(120, 6, rng=1), encoder=False, n_resamples=20, n_weight_draws=20, rng=1)
    >>> html = render_shadow_section(res, figures=False)
    >>> html.split("\\n")[:2]
    ['<section id="shadow">', '<h2>TOOL-SHADOW Positional Bias Score</h2>']
    """
    scale = result.scale if scale is None else scale
    parts = ['<section id="shadow">', "<h2>TOOL-SHADOW Positional Bias Score</h2>",
             (f'<div class="note"><p><strong>{_e(result.banner)}</strong>. No harness has been validated with '
             "TOOL-SHADOW v1; the score measures an associational residual, not a mechanism.</p>"
             "<p>PBS = 100 \u00b7 logistic(\u03a3 w<sub>d</sub> z<sub>d</sub>) (paper scale: grows with the number "
             "of turns) and the same on effect sizes (effect scale: does not). Intervals: "
             f"{_e(fmt_level(result.confidence_level))} turn-level bootstrap, {_e(fmt_int(result.n_resamples))} "
             f"replicates; weight sensitivity: {_e(fmt_int(result.n_weight_draws))} weight draws around the weights "
             "with the low-precision floors kept.</p></div>")]
    # issue 26: the first screen -- the sentences across harnesses and the PBS figure, before the tables
    from ._summary import shadow_summary

    summary = "".join(f"<li>{_e(x)}</li>" for x in shadow_summary(result, scale=scale))
    first = f'<ul class="summary" id="shadow-summary">{summary}</ul>'
    if figures and result.groups:
        from ..plots import plot_shadow_pbs

        svg = _svg(plot_shadow_pbs(result, scale=scale), title="PBS per harness")
        first += (f'<figure id="shadow-overview-figure">{svg}'
                  "<figcaption>PBS with its bootstrap CI (line) and weight-sensitivity band (shaded); dashed: 50 "
                  "(no bias); dotted: 60, above which the per-domain breakdown is mandatory.</figcaption></figure>")
    parts.append(f'<div class="first-screen">{first}</div>')
    parts.append(_pbs_table(result, scale))
    if figures and result.groups:
        from ..plots import plot_shadow_contributions

        parts.append(f"<figure>{_svg(plot_shadow_contributions(result, scale=scale), title='Domain contributions')}"
                     "<figcaption>Contribution of each domain to the score (w<sub>d</sub> z<sub>d</sub> or "
                     "w<sub>d</sub> effect<sub>d</sub>) with w<sub>d</sub> times the bootstrap CI; pale bars: "
                     "low-precision domains at the weight floor.</figcaption></figure>")
    parts.append("<h3>Per-domain breakdown</h3>")
    for g in result.groups:
        flag = " (PBS &gt; 60: breakdown mandatory)" if _needs_breakdown(g, scale) else ""
        parts.append(f"<p><strong>{_e(_label(g.keys))}</strong>{flag}</p>")
        parts.append(_domain_table(g))
        if g.notes:
            parts.append('<ul class="notes">' + "".join(f'<li class="warning">{_e(n)}</li>' for n in g.notes)
                         + "</ul>")
    parts.append("<h3>Weights</h3>")
    parts.append(_weights_table(result.weights))
    if result.n_excluded:
        parts.append("<p class=\"muted\">Excluded attempts: " + _e(", ".join(
            f"{k} {fmt_int(v)}" for k, v in result.n_excluded.items())) + ".</p>")
    parts.append("</section>")
    return "\n".join(parts)


def render_shadow_report(result: ShadowResult, *, path: str | os.PathLike[str] | None = None,
                         title: str = "TOOL-SHADOW audit", scale: str | None = None) -> str:
    """A self-contained HTML page (inline CSS and SVG, no script) around :func:`render_shadow_section`.

    Parameters
    ----------
    result : ShadowResult
    path : path-like, optional
        Where to write the page (UTF-8, through a temporary file); nothing is written when omitted.
    title : str
    scale : {"paper", "effect"}, optional

    Returns
    -------
    str

    Examples
    --------

    >>> import toolbias_stats as tbs
    >>> from toolbias_stats.shadow import simulate_audit
    >>> res = tbs.tool_shadow(simulate_audit(120, 6, rng=1), encoder=False, n_resamples=20, n_weight_draws=20, rng=1)
    >>> page = render_shadow_report(res)              # path="shadow.html" also writes it
    >>> page.startswith("<!DOCTYPE html>"), '<section id="shadow">' in page
    (True, True)
    """
    from .. import __version__

    doc = html_page(title, render_shadow_section(result, scale=scale),
                    header=f'<p class="subtitle">{_e(result.banner)} \u00b7 generated by toolbias_stats '
                           f'<span class="version">{_e(__version__)}</span></p>',
                    footer=f"Generated by toolbias_stats {_e(__version__)}. Self-contained: no external resource, "
                           "no script.")
    if path is not None:
        from .._output import write_text

        write_text(path, doc, option="path")   # atomic: nothing partial, no temporary file left (issue 21)
    return doc
