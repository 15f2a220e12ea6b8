"""Plain text of the experiments' results: shifts between levels (``toolbias-stats shift``) and subset
selection (``toolbias-stats subsets``)."""

from __future__ import annotations

from .._format import fmt_ci, fmt_estimate_ci, fmt_int, fmt_level, fmt_mean_sd, fmt_num, fmt_p

__all__ = ["format_shift_text", "format_subsets_text", "SHIFT_LABELS", "shift_keys"]


SHIFT_LABELS = {"shift_api": "shift (tools)", "shift_pos": "shift (positions)", "delta_api": "Δδ_API",
          "delta_pos": "Δδ_pos", "delta_model": "Δδ_model"}


def shift_keys(keys, skip=()):
    """A group's label from its keys (leaving out ``skip``): ``"model=a"``, ``"all"`` for no grouping."""
    return ", ".join(f"{k}={v}" for k, v in keys.items() if k not in skip) or "all"


def format_shift_text(result) -> str:
    """Plain-text summary of a :class:`~toolbias_stats.experiments.ShiftResult` (``toolbias-stats shift``)."""
    lv = fmt_level(result.confidence_level)
    boot = (f"{result.n_resamples} query-bootstrap replicates, " if result.n_resamples   # --n-resamples 0: say so
            else "no query bootstrap (--n-resamples 0): no intervals, ")
    lines = [(f"Shift from {result.between} = {result.base} ({boot}"
             f"{result.n_permutations} permutations{f', {lv} intervals' if result.n_resamples else ''}; "
             "corrected = bias-corrected with calibrated CI; "
             "null = expected shift without any change)")]
    if getattr(result, "design", ""):   # issue 35: the design the comparison honoured
        lines.append(f"design: {result.design}")
    n_tools = int(sum(g.tools["p_value"].notna().sum() for g in result.groups if len(g.tools)))
    for g in result.groups:
        lines.append("")
        lines.append(f"== {shift_keys(g.keys)} vs {result.between}={g.base}: {g.n_clusters} clusters, {g.pairing}")
        if g.shift_api.note:   # issue 35: too few queries for a bootstrap interval
            lines.append(f"   {g.shift_api.note}")
        for m in ("shift_api", "shift_pos"):
            s = getattr(g, m)
            if s is None:
                continue
            lines.append(f"   {SHIFT_LABELS[m]:<18} {fmt_mean_sd(s.mean_over_clusters, s.sd_over_clusters)} "
                         f"(mean ± sd over clusters)  plug-in CI {fmt_ci(s.ci)}  corrected "
                         f"{fmt_estimate_ci(s.corrected, s.corrected_ci)}  null {fmt_num(s.null_expected)}  "
                         f"{fmt_p(s.p_value)} (Holm {fmt_p(s.p_adjusted, prefix=False)})")
        for m in ("delta_api", "delta_pos", "delta_model"):
            c = g.change.get(m)
            if c is None:
                continue
            lines.append(f"   {SHIFT_LABELS[m]:<18} {fmt_num(c.base_value)} -> {fmt_num(c.value)}: "
                         f"{fmt_estimate_ci(c.estimate, c.ci)}  corrected "
                         f"{fmt_estimate_ci(c.corrected, c.corrected_ci)}  normalised "
                         f"{fmt_estimate_ci(c.normalised_estimate, c.normalised_ci)}"
                         f"  {fmt_p(c.p_value)} (Holm {fmt_p(c.p_adjusted, prefix=False)})")
        top = g.tools.reindex(g.tools["difference"].abs().sort_values(ascending=False).index).head(3)
        for r in top.itertuples(index=False):
            lines.append(f"   tool {r.tool_id} (cluster {r.cluster}): share {fmt_num(r.share_base)} -> "
                         f"{fmt_num(r.share)} ({fmt_estimate_ci(r.difference, (r.ci_low, r.ci_high))}, "
                         f"{fmt_p(r.p_value)}, Holm over {n_tools} tool tests {fmt_p(r.p_adjusted, prefix=False)})")
    for t in result.trends:
        lines.append("")
        lines.append(f"== trend over {result.between} ({shift_keys(t.keys)}; {len(t.clusters)} clusters)")
        for m, (s, ci) in t.slopes.items():
            lines.append(f"   slope of {m}: {fmt_estimate_ci(s, ci, 4)} per unit of {result.between}")
    for s in result.skipped:
        lines.append(f"note: {s}")
    return "\n".join(lines)


def format_subsets_text(result, distribution=None) -> str:
    """Plain-text Table-2 layout of a :class:`~toolbias_stats.experiments.SubsetMetricsResult`."""
    lv = fmt_level(result.confidence_level)
    lines = [f"Subset selection ({result.counts['queries']} queries, {result.counts['empty_predictions']} empty "
             + (f"predictions; {lv} query-bootstrap CIs, {result.n_resamples} replicates)" if result.n_resamples
                else "predictions; no query bootstrap (--n-resamples 0): point estimates only, no CIs)"),
             f"{'':<10}{'n':>6}  {'micro precision':<24}{'micro recall':<24}{'exact set match':<24}"]

    def row(label, d):
        cells = (f"{fmt_estimate_ci(d[m][0], d[m][1], 4):<24}" for m in ("micro_precision", "micro_recall",
                                                                           "exact_match"))
        return f"{label:<10}{fmt_int(d['n']):>6}  " + "".join(cells)

    lines.append(row("overall", result.overall))
    for g in result.by_group:
        lines.append(row(f"{result.by}={g[result.by]}", g))
    lines.extend(_subset_diagnostic_lines(result))
    if distribution is not None:
        lines.append("")
        lines.append(f"'choose uniformly from the predicted subset': delta_API "
                     f"{fmt_estimate_ci(distribution.delta_api, distribution.ci)}, corrected "
                     f"{fmt_estimate_ci(distribution.corrected, distribution.corrected_ci)}")
    return "\n".join(lines)


def _subset_diagnostic_lines(result, limit=10) -> list:
    """Notes on predicted names that are not candidates (false positives) and tools repeated in one prediction."""
    diag = getattr(result, "diagnostics", None) or {}
    src = (getattr(result, "source", None) or {}).get("predictions", "<predictions>")
    out = []
    for key, what in (("not_candidates", ("predicted name(s) not among the candidates of their query: counted as "
                                         "wrong predictions (false positives)")),
                      ("repeated", "tool(s) named more than once in one prediction: counted once (a subset is a set)")):
        items = diag.get(key) or []
        if not items:
            continue
        out.append(f"note: {len(items)} {what}:")
        for d in items[:limit]:
            times = f" x{d['times']}" if "times" in d else ""
            out.append(f"  {src}:{d['line']}: query {d['query_id']}: {d['tool']!r}{times}")
        if len(items) > limit:
            out.append(f"  ... and {len(items) - limit} more (--json lists all)")
    return out
