"""Plain-text tables for the terminal (``toolbias-stats validate`` / ``bias``); rounding lives here."""

from __future__ import annotations

import pandas as pd

from ._format import fmt_ci, fmt_mean_sd, fmt_num, fmt_p

__all__ = ["format_bias_table", "format_validation"]


def format_bias_table(result) -> str:
    """Table-1-style text table of a :class:`~toolbias_stats.BiasResult`."""
    rows = []
    for g in result.groups:
        label = ", ".join(f"{v}" for v in g.keys.values()) or "all"
        for m in ("delta_api", "delta_pos", "delta_model"):
            r = getattr(g, m)
            if r is None:
                note = getattr(g, "position_note", None)
                rows.append({"group": label, "metric": m,
                             "estimate": f"- ({note})" if note else "- (positions unknown)"})
                continue
            rows.append({
                "group": label,
                "metric": m,
                "estimate": (fmt_mean_sd(r.mean_over_runs, r.sd_over_runs) if r.n_runs > 1
                             else f"{fmt_num(r.mean_over_runs)} (1 run)"),
                f"{r.ci_method} CI": fmt_ci(r.ci),
                "pooled": fmt_num(r.pooled),
                "corrected": fmt_num(r.corrected),
                "corrected CI": fmt_ci(r.corrected_ci),
                "null E[TV]": fmt_num(r.null_expected),
                "p(no bias)": fmt_p(r.p_value),
                "used": str(g.rows["used"]),
                "excluded": str(g.rows["total"] - g.rows["used"]),
            })
    table = pd.DataFrame(rows).fillna("")
    method = getattr(result, "interval_method", "query bootstrap")
    kind = "query-bootstrap" if method.startswith(("query bootstrap", "none")) else "resampled"
    head = (f"Tool-selection bias (TV to uniform); mean ± sd over runs; {result.n_resamples} {kind} "
            f"replicates, {result.confidence_level:.0%} CIs; seed {result.seed}.\n"
            "'null E[TV]' is what a perfectly fair chooser would show with the same counts; 'corrected' removes "
            "that plug-in bias (calibrated CI).")
    if hasattr(result, "position_label"):   # issue 20: what delta_pos is computed on
        head += f"\ndelta_pos on {result.position_label} (position={result.position!r})."
    if kind != "query-bootstrap":   # aggregated counts (issue 13): say which intervals these are
        head += (f"\nIntervals: {method}. Clusters with no per-query rows (a table of counts) cannot be "
                 "query-bootstrapped; their replicates are multinomial draws of the observed counts, and 'used' / "
                 "'excluded' count attempts (sums of the count column).")
    return head + "\n\n" + table.to_string(index=False)


def format_validation(study, summary: pd.DataFrame) -> str:
    """Text summary of a study: rows by status per file, clusters, runs, reader diagnostics."""
    counts = study.counts
    tab = counts.table
    totals = {k: v for k, v in sorted(counts.status_totals().items(), key=lambda kv: -kv[1]) if v}
    lines = [f"Study: {study.name} ({study.path}); engine {study.engine}",
             (f"{counts.n_rows} attempts in {sum(counts.row_totals().values())} table rows (count column); "
              f"attempts by status: {totals}" if getattr(counts, "weighted", False)
              else f"{counts.n_rows} rows; by status: {totals}"),
             f"models: {sorted(tab['model'].unique())}",
             f"clusters: {tab['cluster_id'].nunique()}; runs: {sorted(int(r) for r in tab['run'].unique())}",
             f"catalog: {len(study.catalog)} tools in {len(study.catalog.clusters)} clusters", ""]
    cluster_source = (getattr(study, "settings", None) or {}).get("cluster_source")
    if cluster_source:   # clusters declared in the manifest, read from a clusters_file or inferred (issue 13)
        lines.insert(-1, f"clusters: {cluster_source['detail']}")
    if study.catalog.defaulted:
        lines.insert(-1, f"catalog defaults: the catalog has no {', '.join(study.catalog.defaulted)} column(s); "
                         "names default to the tool id, the order to the row order, parameter counts are unknown")
    show = summary.copy()
    show["source_file"] = show["source_file"].map(lambda s: s.rsplit("/", 1)[-1])
    lines.append(show.to_string(index=False))
    notes = []
    for src, diag in counts.diagnostics.items():
        short = str(src).rsplit("/", 1)[-1]
        if diag.get("position_mismatch"):
            notes.append(f"{short}: recorded position disagrees with the rotation formula in "
                         f"{diag['position_mismatch']} records (recorded kept)")
        unresolved = diag.get("unresolved") or {}
        if unresolved:
            top = sorted(unresolved.items(), key=lambda kv: -kv[1])[:10]
            notes.append(f"{short}: {sum(unresolved.values())} unresolved names, top: {top}")
        off = diag.get("off_cluster") or {}
        if off:   # issue 20: calls to offered tools outside the attempt's cluster
            top = sorted(off.items(), key=lambda kv: -kv[1])[:10]
            notes.append(f"{short}: {sum(off.values())} calls to offered tools outside the query's cluster "
                         f"(off_cluster), top: {top}")
        how = diag.get("cluster_of_multi_cluster_requests")
        if how:
            notes.append(f"{short}: requests offering several clusters' tools: cluster from cluster_id "
                         f"{how['from_cluster_id']}, from the chosen tool {how['from_chosen_tool']}")
        if diag.get("order_unknown"):
            notes.append(f"{short}: {diag['order_unknown']['rows']} attempts without the list shown: "
                         f"{diag['order_unknown']['reason']}")
        if diag.get("multiple_calls_rows"):   # API-log readers (issue 13)
            notes.append(f"{short}: {len(diag['multiple_calls_rows'])} request(s) made several tool calls "
                         "(the first is the choice)")
        if isinstance(diag.get("notes"), dict) and diag["notes"]:   # {note: count}
            notes.append(f"{short}: " + ", ".join(f"{k}: {v}" for k, v in diag["notes"].items()))
    if notes:
        lines += ["", "Notes:"] + [f"  - {n}" for n in notes]
    return "\n".join(lines)
