"""Text and HTML rendering of a :class:`ChoiceModelResult` (rounding happens here only)."""

from __future__ import annotations

import html
import math
from typing import TYPE_CHECKING, Any

from ._format import fmt_ci, fmt_num, fmt_p

if TYPE_CHECKING:
    from collections.abc import Sequence

    import numpy as np

    from ..choicemodel import ChoiceModelResult
    from ..io import Study

__all__ = ["format_choice_model_text", "render_choice_model_section", "choice_model_section_for_report",
           "components_summary", "format_components_text", "position_side_by_side"]


def _label(keys: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in keys.items()) or "all attempts"


#: The descriptive delta_pos "disagrees" with the position effect when it is below this share of the delta_pos that
#: the position effect alone gives tools of equal worth (and the position effect is significant).
DISAGREE_SHARE = 0.5


def position_side_by_side(result: ChoiceModelResult) -> tuple[list[dict], list[str]]:
    """The descriptive δ_pos beside the choice model's position effect, per group, and where they disagree.

    For every fitted group: ``delta_pos`` (descriptive: the observed choices, mean over clusters of the TV distance
    of the position shares to uniform), ``position_effect`` (log-odds of position 2 vs 1, with its interval),
    ``position_only_delta_pos`` (the TV to uniform of the implied position shares among tools of equal worth: the
    δ_pos the position effect alone would produce) and ``wald_p``. A sentence is returned where the two disagree:
    within a group, when the position effect is significant but δ_pos is below half the position-only δ_pos; across
    groups, when δ_pos falls by more than 0.02 from one group to another while the other's position effect is
    significant and not smaller (the first's lies in its interval, or it is larger). Strong description
    (worth) preferences leave position less room: the winner is chosen wherever it stands, so δ_pos shrinks while
    the position effect among comparable tools stays.

    Examples
    --------
    >>> import toolbias_stats as tbs
    >>> from toolbias_stats.choicemodel import simulate_choice_log
    >>> rows, notes = position_side_by_side(tbs.choice_model(simulate_choice_log(n_queries=60, rng=1), by=None))
    >>> sorted(rows[0])[:3], notes
    (['delta_pos', 'group', 'position_ci'], [])
    """
    alpha = 1 - float(result.settings.get("confidence_level", 0.95))
    rows: list[dict[str, Any]] = []
    for g in result._raw:
        pe, ib = g["position_effects"], g["implied_bias"]
        if not len(pe) or not len(ib):
            continue
        obs = ib[ib["orderings"] == "observed"]["delta_pos"]
        p2 = pe[pe["position"] == 2].iloc[0]
        shares = pe["share"].to_numpy(dtype=float)
        rows.append(dict(group=_label(g["keys"]), delta_pos=float(obs.mean()) if obs.notna().any() else float("nan"),
                         position_effect=float(p2["estimate"]),
                         position_ci=(float(p2["ci_low"]), float(p2["ci_high"])),
                         position_only_delta_pos=float(0.5 * abs(shares - 1 / len(shares)).sum()),
                         wald_p=float(g["wald_p"])))
    notes = []
    for r in rows:
        if r["wald_p"] <= alpha and r["delta_pos"] < DISAGREE_SHARE * r["position_only_delta_pos"]:
            notes.append(f"{r['group']}: the descriptive δ_pos ({r['delta_pos']:.3f}) is well below the "
                         f"{r['position_only_delta_pos']:.3f} that the position effect alone gives tools of equal "
                         "worth: strong description preferences leave position less room, so δ_pos understates the "
                         "position effect here.")
    for a, b in ((a, b) for a in rows for b in rows if a is not b):
        lo, hi = b["position_ci"]
        # the position effect "does not fall": b's is significant and not smaller than a's beyond b's interval
        steady = lo <= a["position_effect"] <= hi or abs(b["position_effect"]) >= abs(a["position_effect"])
        if a["delta_pos"] > b["delta_pos"] + 0.02 and b["wald_p"] <= alpha and steady:
            notes.append(f"δ_pos falls from {a['group']} ({a['delta_pos']:.3f}) to {b['group']} "
                         f"({b['delta_pos']:.3f}) while the position effect does not ({a['position_effect']:.2f} vs "
                         f"{b['position_effect']:.2f} log-odds): strong description preferences leave position less "
                         "room.")
            break
    return rows, notes


def format_choice_model_text(result: ChoiceModelResult) -> str:
    """Plain-text summary: per group, position effects, the position test, fit and the largest worths."""
    lines = [f"Choice model: {result.method}", ""]
    for g in result._raw:
        lines.append(f"== {_label(g['keys'])}: {g['n_used']} attempts used, {g['n_excluded']} excluded"
                     + (f" {g['excluded']}" if g["excluded"] else "")
                     + ("" if g["converged"] else "  [NOT CONVERGED]"))
        pe = g["position_effects"]
        if len(pe):
            lines.append("  position  log-odds vs 1 [CI]          implied share")
            for _, r in pe.iterrows():
                lines.append(f"  {int(r['position']):>8}  {fmt_num(r['estimate']):>7} "
                             f"{fmt_ci((r['ci_low'], r['ci_high'])):<20} {fmt_num(r['share'])}")
            ref = (f"F({g['wald_df']}, {g['wald_df_resid']:.0f}) reference" if math.isfinite(g["wald_df_resid"])
                   else f"chi2({g['wald_df']}) reference")
            lines.append(f"  no position effect: Wald W = {fmt_num(g['wald_stat'], 1)}, {ref}, "
                         f"{fmt_p(g['wald_p'])}")
        fe = g["feature_effects"]
        for _, r in fe.iterrows():
            lines.append(f"  feature {r['feature']}: {fmt_num(r['estimate'])} {fmt_ci((r['ci_low'], r['ci_high']))}")
        te = g["tool_effects"]
        if len(te):
            top = te.reindex(te["estimate"].abs().sort_values(ascending=False).index).head(5)
            lines.append(f"  {len(te)} tool worths (vs the reference of each of "
                         f"{te['component'].nunique()} component(s)); largest |worth|:")
            for _, r in top.iterrows():
                lines.append(f"    {r['tool_id']}: {fmt_num(r['estimate'])} {fmt_ci((r['ci_low'], r['ci_high']))}"
                             f" vs {r['reference_tool']}")
        if g["sigma"] is not None:
            lines.append(f"  query x tool random-effect sd: {fmt_num(g['sigma'])} (se {fmt_num(g['sigma_se'])})")
        d = g["dispersion"]
        lines.append(f"  per-query x tool Pearson dispersion: {fmt_num(d['dispersion'])} (1 = as the model expects)")
        h = g.get("heterogeneity") or {}
        if h.get("advice"):
            lines.append(f"  which interval: {h['advice']}")
        lines.append("")
    side, notes = position_side_by_side(result)
    if side:
        lines.append("delta_pos (descriptive) beside the position effect (log-odds of position 2 vs 1):")
        for r in side:
            lines.append(f"  {r['group']}: delta_pos {fmt_num(r['delta_pos'])}; position effect "
                         f"{fmt_num(r['position_effect'])} {fmt_ci(r['position_ci'])} {fmt_p(r['wald_p'])}; "
                         f"delta_pos from position alone {fmt_num(r['position_only_delta_pos'])}")
        lines += [f"  note: {n}" for n in notes]
        lines.append("")
    for w in result.warnings:
        lines.append(f"warning: {w}")
    return "\n".join(lines).rstrip() + "\n"


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
    >>> from toolbias_stats.choicemodel import simulate_choice_log
    >>> s = components_summary(simulate_choice_log(n_queries=20, rng=1))
    >>> [c["n_tools"] for c in s["components"]], s["not_compared"]
    ([8], [])
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


def format_components_text(summary: dict, *, max_tools=6) -> str:
    """One line per connected component of the comparison graph (tool lists shortened)."""
    comps = summary["components"]
    lines = [(f"Comparison graph (choice model): {len(comps)} connected component(s); a tool worth is identified "
             "only within its component")]
    for c in comps:
        tools = c["tools"]
        shown = ", ".join(tools[:max_tools]) + (f", ... (+{len(tools) - max_tools})" if len(tools) > max_tools else "")
        lines.append(f"  component {c['component']}: {c['n_tools']} tool(s), reference {c['reference_tool']}: {shown}")
    if summary["not_compared"]:
        nc = summary["not_compared"]
        lines.append(f"  never shown in a usable list ({len(nc)}): " + ", ".join(nc[:max_tools])
                     + (" ..." if len(nc) > max_tools else ""))
    return "\n".join(lines)
