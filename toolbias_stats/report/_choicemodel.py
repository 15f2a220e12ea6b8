"""HTML rendering of a :class:`ChoiceModelResult` (rounding happens here only; the text is
:func:`toolbias_stats._text.format_choice_model_text`)."""

from __future__ import annotations

import html
from typing import TYPE_CHECKING

from .._format import fmt_ci, fmt_num, fmt_p
from .._text import position_side_by_side

if TYPE_CHECKING:
    from collections.abc import Sequence

    import numpy as np

    from ..choicemodel import ChoiceModelResult
    from ..io import Study

__all__ = ["render_choice_model_section", "choice_model_section_for_report", "components_summary"]


def render_choice_model_section(result: ChoiceModelResult) -> str:
    """HTML section for the report (escaped; the lead wires it into ``report``)."""
    parts = [f"<p>{html.escape(result.method)}. Attempts used {result.n_used}, excluded {result.n_excluded}.</p>",
             _overview_block(result), _disagreement_block(result),
             "<details><summary>Choice-model tables</summary>", _side_by_side_block(result), result._repr_html_()]
    ib = result.implied_bias
    if len(ib):
        from .._display import frame_html
        parts.append(frame_html(ib, title="Implied delta_API / delta_pos: observed, fitted with the logged lists, "
                                          "fitted with uniformly shuffled lists", max_rows=60))
    parts.append("</details>")
    return "\n".join(parts)


def _disagreement_block(result) -> str:
    """First screen: one sentence per disagreement between δ_pos and the position effect (none when they agree)."""
    return "".join(f'<p class="note">{html.escape(n)}</p>' for n in position_side_by_side(result)[1])


def _side_by_side_block(result) -> str:
    """δ_pos beside the position effect (a table) and the interval advice."""
    rows = position_side_by_side(result)[0]
    if not rows:
        return ""
    body = "".join(f"<tr><td>{html.escape(r['group'])}</td><td class=\"num\">{fmt_num(r['delta_pos'])}</td>"
                   f"<td class=\"num\">{fmt_num(r['position_effect'])} {html.escape(fmt_ci(r['position_ci']))}</td>"
                   f"<td class=\"num\">{html.escape(fmt_p(r['wald_p']))}</td>"
                   f"<td class=\"num\">{fmt_num(r['position_only_delta_pos'])}</td></tr>" for r in rows)
    advice = [g["heterogeneity"]["advice"] for g in result._raw if (g.get("heterogeneity") or {}).get("advice")]
    return ("<table><caption>δ_pos (descriptive) beside the position effect</caption><tr><th>group</th>"
            "<th class=\"num\">δ_pos</th><th class=\"num\">position effect (log-odds 2 vs 1) [CI]</th>"
            "<th class=\"num\">no position effect</th><th class=\"num\">δ_pos from position alone</th></tr>"
            + body + "</table>" + "".join(f"<p>{html.escape(n)}</p>" for n in advice[:3]))


def _overview_block(result) -> str:
    """First screen of the section: the position-effect forest plot and at most three sentences (issue 26)."""
    from ..plots._choicemodel_overview import plot_choice_model_overview
    from ._render_html import _svg
    from ._summary import choice_model_summary

    level = float(result.settings.get("confidence_level", 0.95))
    fig = plot_choice_model_overview(result, alpha=1 - level)
    sentences = choice_model_summary(result, alpha=1 - level)
    return ('<div class="overview" id="choice-model-overview">'
            f'<figure>{_svg(fig, title="position effects of every group (log-odds vs position 1) with intervals")}'
            f"<figcaption>Position effects of every group: log-odds of being chosen at each position relative to "
            f"position 1 with {level:.0%} intervals, largest first; filled when the group's Wald test of no "
            f"position effect has p at most {1 - level:g}; 0 is no position effect.</figcaption></figure>"
            '<p class="summary">' + " ".join(html.escape(x) for x in sentences) + "</p></div>")


def choice_model_section_for_report(study: Study, *, by: Sequence[str] | None = ("model",),
                                    rng: int | np.random.Generator | None = None,
                                    confidence_level: float = 0.95) -> str:
    """Fit the default choice model (the ``choice-model`` command's defaults) and render its report section.

    Parameters
    ----------
    study : Study
        With row-level logs that record the list shown.
    by : sequence of str, default ("model",)
    rng : None, int or numpy.random.Generator
    confidence_level : float, default 0.95

    Returns
    -------
    str
        ``render_choice_model_section`` of the fit, or a short escaped note saying why no model was fitted
        (e.g. no list shown): the report is still written.

    Examples
    --------
    >>> import toolbias_stats as tbs
    >>> from toolbias_stats.simulate import simulate_selection_log
    >>> log = simulate_selection_log(n_clusters=2, n_queries=10, rng=0).log
    >>> html = choice_model_section_for_report(tbs.Study(log=log, catalog=log.catalog), rng=1)
    >>> html.split(".")[0]
    '<p>conditional logit; Firth-penalised; query-clustered sandwich intervals'
    """
    import warnings

    from ..choicemodel import choice_model

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res = choice_model(study.log, by=list(by or ()), confidence_level=confidence_level, rng=rng)
    except ValueError as exc:
        return f'<p class="muted">No choice model fitted: {html.escape(str(exc))}</p>'
    return render_choice_model_section(res)


def components_summary(log_or_counts) -> dict:
    """Which tools are compared with which (all attempts pooled): one entry per connected component.

    Returns
    -------
    dict
        ``components``: list of ``{component, reference_tool, n_tools, tools}`` (``tools`` all ids);
        ``not_compared``: catalog tools never shown in a usable list. Worths are identified only within a
        component (one reference tool each).

    Examples
    --------
    >>> from toolbias_stats.choicemodel import simulate_logit_log
    >>> s = components_summary(simulate_logit_log(n_queries=20, rng=1))
    >>> [c["n_tools"] for c in s["components"]], s["not_compared"]
    ([8], [])
    >>> from toolbias_stats._text import format_components_text
    >>> print(format_components_text(s, max_tools=2).splitlines()[1])
      component 1: 8 tool(s), reference t1: t1, t2, ... (+6)
    """
    import warnings

    from ..choicemodel import comparison_components

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        comp = comparison_components(log_or_counts)
    out = []
    for c, g in comp[comp["component"] > 0].groupby("component", sort=True):
        out.append({"component": int(c), "reference_tool": str(g["reference_tool"].iloc[0]),
                    "n_tools": len(g), "tools": [str(t) for t in g["tool_id"]]})
    return {"components": out, "not_compared": [str(t) for t in comp.loc[comp["component"] == 0, "tool_id"]]}
