"""Plain text of the multiple-choice and pairwise-judge results (``toolbias-stats choice``)."""

from __future__ import annotations

from .._format import MISSING, fmt_ci, fmt_estimate_ci, fmt_num, fmt_p
from ._bias import resampling_note

__all__ = ["format_choice_position_text", "format_choice_accuracy_text", "format_choice_judge_text"]


def _keys(row, by) -> str:
    return ", ".join(f"{b}={row[b]}" for b in by) or "all"


def format_choice_position_text(pos) -> str:
    """Answer-position bias of an :class:`~toolbias_stats.choice.OptionPositionBias` (``toolbias-stats choice``)."""
    by = list(pos.by)
    n_boot = getattr(pos.bias, "n_resamples", 0)
    level = getattr(pos.bias, "confidence_level", 0.95)
    lines = [("Answer-position bias delta_pos = TV(position shares, uniform); "
             f"{resampling_note(n_boot, level, 'item-bootstrap')}")]
    for _, r in pos.to_frame().iterrows():
        corrected = fmt_estimate_ci(r["corrected"], (r["corrected_ci_low"], r["corrected_ci_high"]))
        corrected = "" if corrected == MISSING else f"  bias-corrected {corrected}"
        several_k = "n_k" in r and r["n_k"] > 1
        if several_k:   # items with different numbers of options: the weighted value first (issue 35)
            wc = (r["weighted_corrected_ci_low"], r["weighted_corrected_ci_high"])
            lines.append(f"  {_keys(r, by)}: delta_pos weighted by {r['weights']} over {int(r['n_k'])} K groups "
                         f"{fmt_estimate_ci(r['weighted'], (r['weighted_ci_low'], r['weighted_ci_high']))}  "
                         f"bias-corrected {fmt_estimate_ci(r['weighted_corrected'], wc)}")
        label = "unweighted mean over K" if several_k else "delta_pos"
        lines.append(f"  {_keys(r, by)}: {label} {fmt_estimate_ci(r['mean_over_runs'], (r['ci_low'], r['ci_high']))}"
                     f"{corrected}  uniform-null {fmt_num(r['null_expected'])}, {fmt_p(r['p_value'])}  "
                     f"(n = {int(r['n_used'])}, excluded {int(r['n_excluded'])})")
        if several_k and isinstance(r.get("k_note"), str):
            lines.append(f"    note: {r['k_note']}")
    bk = pos.by_k
    mixed = len(bk) > 0 and (bk.groupby(by)["n_options"].nunique().max() if by else bk["n_options"].nunique()) > 1
    if mixed:
        for _, r in bk.iterrows():
            lines.append(f"    {_keys(r, by)} K={int(r['n_options'])}: delta_pos "
                         f"{fmt_estimate_ci(r['delta_pos'], (r['ci_low'], r['ci_high']))} "
                         f"({int(r['n_answers'])} answers, {100 * r['share_answers']:.1f}%; {int(r['n_items'])} items)")
    for _, r in pos.rates_frame().iterrows():
        gold = r.get("gold_rate") if "gold_rate" in r else None
        gold = "" if gold is None or fmt_num(gold) == MISSING else f"   gold here {fmt_num(gold)}"
        lines.append(f"    {_keys(r, by)} {r['options']} position {int(r['position'])}: "
                     f"{fmt_estimate_ci(r['rate'], (r['bootstrap_low'], r['bootstrap_high']))}{gold}")
    return "\n".join(lines)


def format_choice_accuracy_text(acc) -> str:
    """Accuracy by gold position of a :class:`~toolbias_stats.choice.GoldPositionAccuracy`."""
    by = list(acc.by)
    lines = [(f"Accuracy by gold position (invalid answers: {acc.invalid}; "
             f"{resampling_note(acc.n_resamples, acc.confidence_level, 'item-bootstrap')})")]
    for _, r in acc.overview.iterrows():
        lines.append(f"  {_keys(r, by)} K={int(r['n_options'])}: observed "
                     f"{fmt_estimate_ci(r['accuracy'], (r['accuracy_ci_low'], r['accuracy_ci_high']))}; under random "
                     f"orderings "
                     f"{fmt_estimate_ci(r['corrected_accuracy'], (r['corrected_ci_low'], r['corrected_ci_high']))};"
                     f" gap {_signed(r['gap'])} {_signed_ci(r['gap_ci_low'], r['gap_ci_high'])}".rstrip())
    for _, r in acc.positions.iterrows():
        lines.append(f"    {_keys(r, by)} K={int(r['n_options'])} gold at {int(r['gold_position'])}: "
                     f"{fmt_estimate_ci(r['accuracy'], (r['ci_low'], r['ci_high']))} (n = {int(r['n'])})")
    return "\n".join(lines)


def _signed(x) -> str:
    s = fmt_num(x)
    return s if s == MISSING or s.startswith("-") else "+" + s


def _signed_ci(lo, hi) -> str:
    return "" if fmt_ci((lo, hi)) == MISSING else f"[{_signed(lo)}, {_signed(hi)}]"


def format_choice_judge_text(judge) -> str:
    """Swapped-pair position bias of a :class:`~toolbias_stats.choice.JudgeConsistency` (Shi et al. 2024 metrics)."""
    by = list(judge.by)
    lines = [(f"Pairwise judge position bias (swapped pairs; intervals resample the {judge.unit}s, runs and epochs "
              "are replicates)")]
    for _, r in judge.table.iterrows():
        if r["n_pairs"] == 0:
            continue

        def ci(name, prefix=None, r=r):
            prefix = prefix or name
            return fmt_estimate_ci(r[name], (r[f"{prefix}_ci_low"], r[f"{prefix}_ci_high"]))

        lines.append(f"  {_keys(r, by)}: {int(r['n_pairs'])} pairs of {int(r['n_units'])} {judge.unit}s: "
                     f"consistent {int(r['consistent'])}, primacy-preferred {int(r['primacy_preferred'])}, "
                     f"recency-preferred {int(r['recency_preferred'])}")
        lines.append(f"    position consistency {ci('consistency')}; preference score {ci('preference_score')} "
                     f"(-1 primacy, +1 recency); first-position rate {ci('first_position_rate', 'first')}; "
                     f"ties {ci('tie_rate')}")
        if r["n_repeated"] > 0:
            lines.append(f"    repetition stability {ci('repetition_stability')} over {int(r['n_repeated'])} "
                         "repeated judgements")
    return "\n".join(lines)
