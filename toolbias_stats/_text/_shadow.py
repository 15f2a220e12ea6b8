"""Plain text of a TOOL-SHADOW result (``toolbias-stats shadow``): banner, PBS per harness, weights and the
per-domain breakdown."""

from __future__ import annotations

from .._format import fmt_ci, fmt_estimate_ci, fmt_int, fmt_level, fmt_num

__all__ = ["format_shadow_text", "format_worksheet_text", "SHADOW_DOMAINS", "SHADOW_DOMAIN_NAMES", "shadow_label",
           "needs_breakdown"]


#: TOOL-SHADOW domains and their names (the summary and the shadow section share them).
SHADOW_DOMAINS = ("L", "D", "S", "R")


SHADOW_DOMAIN_NAMES = {"L": "position salience", "D": "description-length confound", "S": "semantic overlap",
          "R": "call-frequency residual"}


def shadow_label(keys):
    """A harness group's label: ``"model=a"``, ``"audit"`` for no grouping."""
    return ", ".join(f"{k}={v}" for k, v in keys.items()) or "audit"
def needs_breakdown(g, scale):
    """True where the PBS on ``scale`` exceeds 60: the paper then makes the per-domain breakdown mandatory."""
    est = g.pbs[scale].estimate
    return est == est and est > 60


def format_worksheet_text(weights) -> str:
    """The weight-derivation table as plain text."""
    lines = [f"weights: {weights.rule}",
             (f"{'domain':<7}{'source':<18}{'HR_lower':>9}{'HR_upper':>9}{'SE':>8}{'1/SE^2':>9}{'raw w':>8}"
             f"{'weight':>8}  precision")]
    for r in weights.table.itertuples(index=False):
        lines.append(f"{r.domain:<7}{r.source:<18}{fmt_num(r.hr_lower, 3):>9}{fmt_num(r.hr_upper, 3):>9}"
                     f"{fmt_num(r.se, 3):>8}{fmt_num(r.inverse_variance, 1):>9}"
                     f"{fmt_num(r.weight_before_renormalisation, 3):>8}{fmt_num(r.weight, 3):>8}  {r.precision}")
    return "\n".join(lines)


def format_shadow_text(result, *, scale: str | None = None, brief: bool = False) -> str:
    """Plain-text TOOL-SHADOW report: banner, PBS per harness (both scales), weights, per-domain breakdown.

    Parameters
    ----------
    result : ShadowResult
    scale : {"paper", "effect"}, optional
        The scale listed first; default ``result.scale``.
    brief : bool, default False
        Leave out the per-domain breakdown -- except for a harness whose PBS exceeds 60, where the paper makes
        it mandatory.
    """
    scale = result.scale if scale is None else scale
    other = "effect" if scale == "paper" else "paper"
    lv = fmt_level(result.confidence_level)
    lines = [f"TOOL-SHADOW v1 Positional Bias Score -- {result.banner.upper()}",
             "No harness has been validated with this framework; the score is an associational audit.",
             (f"{lv} turn-level bootstrap CIs ({result.n_resamples} replicates); " if result.n_resamples else
              "no turn-level bootstrap (--n-resamples 0): point estimates only, no CIs; ")
             + "weight-sensitivity band from "
             f"{result.n_weight_draws} weight draws around the weights (floors kept).",
             "weights: " + ", ".join(f"{d} {fmt_num(result.weights.weights[d], 3)} ({result.weights.precision[d]})"
                                     for d in SHADOW_DOMAINS), ""]
    for g in result.groups:
        p, o = g.pbs[scale], g.pbs[other]
        lines.append(f"== {shadow_label(g.keys)}: {fmt_int(g.n_turns)} turns, {g.n_tools} tools")
        lines.append(f"   PBS ({scale}) {fmt_estimate_ci(p.estimate, p.ci, 1)}  weight sensitivity "
                     f"{fmt_ci(p.sensitivity, 1)}")
        lines.append(f"   PBS ({other}) {fmt_estimate_ci(o.estimate, o.ci, 1)}  weight sensitivity "
                     f"{fmt_ci(o.sensitivity, 1)}")
        if brief and not needs_breakdown(g, scale):
            lines.append("")
            continue
        if needs_breakdown(g, scale):
            lines.append("   PBS > 60: per-domain breakdown (mandatory)")
        lines.append(f"   {'domain':<33}{'statistic [CI]':<26}{'z [CI]':<26}{'weight':>7}{'w*z':>8}{'w*effect':>9}"
                     f"  precision")
        for d in SHADOW_DOMAINS:
            s = g.domains[d]
            if not s.available:
                lines.append(f"   {d} {SHADOW_DOMAIN_NAMES[d]:<31}not computed: {s.note}")
                continue
            lines.append(f"   {d} {SHADOW_DOMAIN_NAMES[d]:<31}{fmt_estimate_ci(s.statistic, s.statistic_ci):<26}"
                         f"{fmt_estimate_ci(s.z, s.z_ci, 2):<26}{fmt_num(s.weight, 3):>7}"
                         f"{fmt_num(s.contribution('paper'), 2):>8}{fmt_num(s.contribution('effect'), 3):>9}"
                         f"  {s.precision}")
            if s.note:
                lines.append(f"      note: {s.note}")
        for note in g.notes:
            lines.append(f"   note: {note}")
        lines.append(f"   {g.notice(scale)}")
        lines.append("")
    if result.n_excluded:
        lines.append("excluded attempts: " + ", ".join(f"{k} {fmt_int(v)}" for k, v in result.n_excluded.items()))
    return "\n".join(lines).rstrip()
