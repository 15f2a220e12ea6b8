"""Plain text of a study plan and its variance components (``toolbias-stats plan``)."""

from __future__ import annotations

import numpy as np

from .._format import fmt_int, fmt_level, fmt_num

__all__ = ["format_plan_text", "format_study_plan_text", "PLAN_LABELS", "plan_keys", "percent"]


def format_study_plan_text(plan) -> str | None:
    """A :class:`~toolbias_stats.StudyPlan` as ``toolbias-stats plan`` prints it (with its variance components);
    ``None`` for a plan without components (``str(plan)`` then prints its headline table)."""
    if plan.components is None:
        return None
    return format_plan_text(plan.components, plan)
PLAN_LABELS = {"delta_api": "δ_API", "delta_pos": "δ_pos", "delta_model": "δ_model"}


def plan_keys(row, by):
    """A group's label from a table row: ``"model=a"``, ``"all"`` for no grouping."""
    return ", ".join(f"{b}={row[b]}" for b in by) or "all"


def percent(x):
    """A share as a whole percentage (``"42%"``); a dash when missing."""
    return "—" if x is None or not np.isfinite(x) else f"{100 * x:.0f}%"


def format_plan_text(components, plan) -> str:
    """Plain-text summary of a plan and its variance components (``toolbias-stats plan``)."""
    lv = fmt_level(plan.settings["confidence_level"])
    by = list(components.by)
    lines = [(f"Is this study big enough? ({lv} CI half-widths; MDE: smallest delta a level-{plan.settings['alpha']:g} "
             f"test against a fair chooser detects with power {plan.settings['power']:g}; MDS: the same for a change "
             "of delta between two conditions)")]
    s = components.overview
    t = components.table
    for _, a in plan.achieved.iterrows():
        lines.append("")
        lines.append(f"== {plan_keys(a, by)} {PLAN_LABELS.get(a['metric'], a['metric'])}: "
                     f"{int(a['clusters'])} clusters x {int(a['queries'])} queries x {int(a['rotations'])} "
                     f"rotations x {int(a['runs'])} runs = "
                     f"{fmt_int(a['calls'])} calls; estimate {fmt_num(a['estimate'])}")
        lines.append(f"   CI half-width ±{fmt_num(a['half_width'], 4)} (error, run shifts included: "
                     f"±{fmt_num(a['error_half_width'], 4)})   MDE {fmt_num(a['mde'])}   "
                     f"shift CI ±{fmt_num(a['shift_half_width'], 4)}   MDS {fmt_num(a['mds'])}")
        sel = (t["metric"] == a["metric"]).to_numpy().copy()
        for b in by:
            sel &= (t[b] == a[b]).to_numpy()
        parts = [f"{c.component} {percent(c.share)}" for c in t[sel].itertuples() if c.component != "cluster"]
        lines.append("   variance from: " + ", ".join(parts))
        ssel = (s["metric"] == a["metric"]).to_numpy().copy()
        for b in by:
            ssel &= (s[b] == a[b]).to_numpy()
        if ssel.any():
            r = s[ssel].iloc[0]
            if r["runs"] > 1:
                lines.append(f"   se {fmt_num(r['se'], 4)}; with 1 run {fmt_num(r['se_one_run'], 4)}; the same calls "
                             f"as 1 run of {int(r['queries'] * r['runs'])} queries "
                             f"{fmt_num(r['se_same_calls_one_run'], 4)}")
    if len(plan.cheapest):
        tg = plan.target
        lines.append("")
        lines.append(f"Cheapest design with {tg['kind']} <= {tg['value']:g} for {', '.join(tg['metrics'])}:")
        for _, c in plan.cheapest.iterrows():
            if not c["feasible"]:
                lines.append(f"   {plan_keys(c, by)}: none ({c['reason']})")
                continue
            cost = "" if not np.isfinite(c["cost"]) else f", cost {c['cost']:,.2f}"
            lines.append(f"   {plan_keys(c, by)}: {int(c['queries'])} queries x {int(c['rotations'])} rotations x "
                         f"{int(c['runs'])} runs per cluster = {fmt_int(c['calls'])} calls{cost}")
    for w in plan.warnings:
        lines.append(f"note: {w}")
    return "\n".join(lines)
