"""Text and HTML rendering of a :class:`ChoiceModelResult` (rounding happens here only)."""

from __future__ import annotations

import html

from ._format import fmt_ci, fmt_num, fmt_p

__all__ = ["format_choice_model_text", "render_choice_model_section"]


def _label(keys: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in keys.items()) or "all attempts"


def format_choice_model_text(result) -> str:
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
            lines.append(f"  no position effect: Wald chi2({g['wald_df']}) = {fmt_num(g['wald_stat'], 1)}, "
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
        lines.append(f"  per-query Pearson dispersion: {fmt_num(d['dispersion'])} (1 = as the model expects)")
        lines.append("")
    for w in result.warnings:
        lines.append(f"warning: {w}")
    return "\n".join(lines).rstrip() + "\n"


def render_choice_model_section(result) -> str:
    """HTML section for the report (escaped; the lead wires it into ``report``)."""
    parts = [f"<p>{html.escape(result.method)}. Attempts used {result.n_used}, excluded {result.n_excluded}.</p>"]
    parts.append(result._repr_html_())
    ib = result.implied_bias
    if len(ib):
        from .._display import frame_html
        parts.append(frame_html(ib, title="Implied delta_API / delta_pos: observed, fitted with the logged lists, "
                                          "fitted with uniformly shuffled lists", max_rows=60))
    return "\n".join(parts)
