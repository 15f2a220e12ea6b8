"""Plain text of a :class:`~toolbias_stats.choicemodel.ChoiceModelResult` (``toolbias-stats choice-model``)
and of its comparison graph."""

from __future__ import annotations

import math
from typing import Any

from .._format import fmt_ci, fmt_num, fmt_p

__all__ = ["format_choice_model_text", "format_components_text", "position_side_by_side", "DISAGREE_SHARE",
           "choice_model_label"]


def choice_model_label(keys: dict) -> str:
    """A group's label: ``"model=a, run=1"``, ``"all attempts"`` for no grouping."""
    return ", ".join(f"{k}={v}" for k, v in keys.items()) or "all attempts"


#: The descriptive delta_pos "disagrees" with the position effect when it is below this share of the delta_pos that
#: the position effect alone gives tools of equal worth (and the position effect is significant).
DISAGREE_SHARE = 0.5


def position_side_by_side(result) -> tuple[list[dict], list[str]]:
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
    >>> from toolbias_stats.choicemodel import simulate_logit_log
    >>> rows, notes = position_side_by_side(tbs.choice_model(simulate_logit_log(n_queries=60, rng=1), by=None))
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
        rows.append(dict(group=choice_model_label(g["keys"]),
                         delta_pos=float(obs.mean()) if obs.notna().any() else float("nan"),
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


def format_choice_model_text(result) -> str:
    """Plain-text summary: per group, position effects, the position test, fit and the largest worths."""
    lines = [f"Choice model: {result.method}", ""]
    for g in result._raw:
        lines.append(f"== {choice_model_label(g['keys'])}: {g['n_used']} attempts used, {g['n_excluded']} excluded"
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
