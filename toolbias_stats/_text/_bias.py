"""Plain text of a :class:`~toolbias_stats.BiasResult` (``toolbias-stats bias``) and of a study's summary
(``toolbias-stats validate``)."""

from __future__ import annotations

import pandas as pd

from .._format import fmt_ci, fmt_level, fmt_mean_sd, fmt_num, fmt_p

__all__ = ["resampling_note", "format_bias_table", "format_validation"]


def resampling_note(n_resamples, confidence_level, unit="bootstrap") -> str:
    """``"2000 bootstrap replicates, 95% CIs"``; with no replicates ``"no bootstrap (point estimates only)"``."""
    if not n_resamples:
        return f"no {unit} (--n-resamples 0): point estimates only, no CIs"
    return f"{n_resamples} {unit} replicates, {fmt_level(confidence_level)} CIs"


def format_bias_table(result, *, plugin_ci: bool = False) -> str:
    """Table-1-style text table of a :class:`~toolbias_stats.BiasResult`.

    The plug-in's bootstrap interval (``ci``) is a column only with ``plugin_ci=True`` (``bias --plugin-ci``): near
    uniformity it covers neither the true delta nor E[plug-in] (issue 35; docs/guide/metrics.md has the coverage)."""
    shown = [getattr(g, m) for g in result.groups for m in ("delta_api", "delta_pos", "delta_model")
             if getattr(g, m) is not None]
    kinds = {r.ci_method for r in shown}
    ci_kind = kinds.pop() if len(kinds) == 1 else result.ci_method    # '*' marks rows whose interval differs
    return _bias_table_end(result, pd.DataFrame(_bias_rows(result, ci_kind)).fillna(""), shown, ci_kind, plugin_ci)


def _bias_rows(result, ci_kind) -> list:
    """One row of formatted cells per group and metric."""
    rows = []
    for g in result.groups:
        label = ", ".join(f"{v}" for v in g.keys.values()) or "all"
        for m in ("delta_api", "delta_pos", "delta_model"):
            r = getattr(g, m)
            if r is None:
                note = getattr(g, "position_note", None)
                rows.append({"group": label, "metric": m,
                             "corrected": f"- ({note})" if note else "- (positions unknown)"})
                continue
            # the interval for the true delta first (calibrated); the plug-in's own interval after it (issue 21)
            rows.append({
                "group": label,
                "metric": m,
                "corrected": fmt_num(r.corrected),
                "CI (true δ)": fmt_ci(r.corrected_ci),
                "plug-in": (fmt_mean_sd(r.mean_over_runs, r.sd_over_runs) if r.n_runs > 1
                            else f"{fmt_num(r.mean_over_runs)} (1 run)"),
                f"plug-in {ci_kind} CI": fmt_ci(r.ci) + ("*" if r.ci_method != ci_kind else ""),
                "pooled": fmt_num(r.pooled),
                "null E[TV]": fmt_num(r.null_expected),
                "p(no bias)": fmt_p(r.p_value),
                "used": str(g.rows["used"]),
                "excluded": str(g.rows["total"] - g.rows["used"]),
            })
    return rows


def _bias_table_end(result, table, shown, ci_kind, plugin_ci) -> str:
    """The head (what each column is) and the table, with the columns this result has."""
    if not plugin_ci:
        table = table.drop(columns=[c for c in table.columns if c.startswith("plug-in ") and c.endswith(" CI")])
    method = getattr(result, "interval_method", "query bootstrap")
    kind = "query-bootstrap" if method.startswith(("query bootstrap", "none")) else "resampled"
    if not result.n_resamples:   # --n-resamples 0: no interval column, no "0 replicates, 95% CIs"
        if "plug-in" in table.columns:   # positions unknown: say so where the estimate would be
            table["plug-in"] = table["plug-in"].where(table["plug-in"] != "", table["corrected"])
        table = table.drop(columns=[c for c in table.columns
                                    if c == "corrected" or c.endswith(" CI") or c.startswith("CI ")])
    head = (f"Tool-selection bias (TV to uniform); mean ± sd over runs; "
            f"{resampling_note(result.n_resamples, result.confidence_level, kind)}; seed {result.seed}.\n")
    if "corrected" in table.columns:
        head += ("'corrected' and 'CI (true δ)': the bias-corrected δ and its calibrated interval, the interval to "
                 "report. 'plug-in' is the paper's estimate" + _plugin_sentence(plugin_ci) +
                 "'null E[TV]' is what a perfectly fair chooser would show with the same counts.")
    else:
        head += "'null E[TV]' is what a perfectly fair chooser would show with the same counts."
    if plugin_ci and result.n_resamples and any(r.ci_method != ci_kind for r in shown):
        head += (f"\n* percentile interval instead of {ci_kind}: its bias correction is degenerate there (|z0| > z/2, "
                 "as near uniformity) or there is no jackknife over queries (`ci_note` in the JSON).")
    head += _p_value_notes({r.p_value_method for r in shown})
    if hasattr(result, "position_label"):   # issue 20: what delta_pos is computed on
        head += f"\ndelta_pos on {result.position_label} (position={result.position!r})."
    if kind != "query-bootstrap":   # aggregated counts (issue 13): say which intervals these are
        head += (f"\nIntervals: {method}. Clusters with no per-query rows (a table of counts) cannot be "
                 "query-bootstrapped; their replicates are multinomial draws of the observed counts, and 'used' / "
                 "'excluded' count attempts (sums of the count column).")
    return head + "\n\n" + table.to_string(index=False)


def _p_value_notes(p_methods) -> str:
    """The lines of the bias table's head that say which test gave p(no bias)."""
    head = ""
    if any("exact multinomial reference" in pm for pm in p_methods):
        head += ("\np(no bias): exact multinomial reference (ties broken by the squared deviations) in clusters "
                 "with one valid attempt per query, where attempts are independent and the query bootstrap's null "
                 "is too narrow (issue 35).")
    if any(pm.startswith("uniform multinomial") for pm in p_methods):
        head += ("\np(no bias): uniform multinomial chooser (attempts assumed independent) where there are no "
                 "per-query rows or no bootstrap; otherwise a fair chooser with the observed query heterogeneity.")
    if any("null is too narrow there and liberal" in pm for pm in p_methods):
        head += ("\np(no bias) is liberal where a cluster has fewer than 5 valid attempts per tool and several "
                 "attempts per query (`p_value_method` in the JSON names them).")
    return head


def _plugin_sentence(plugin_ci) -> str:
    """What the head says about the plug-in and its (shown or not shown) bootstrap interval."""
    if plugin_ci:
        return ("; its bootstrap CI covers the true δ only far from uniformity (near uniformity neither the true δ "
                "nor E[plug-in]). ")
    return (" (its bootstrap CI is not shown: near uniformity it covers neither the true δ nor E[plug-in]; "
            "--plugin-ci shows it). ")


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
    design = getattr(counts, "design", None)
    if design is not None:   # issue 35: the declared study design with its number of units
        lines.insert(-1, f"design: {design.describe(n_units=counts.n_units)}")
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
