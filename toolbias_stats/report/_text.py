"""Plain-text tables for the terminal (``toolbias-stats validate`` / ``bias``); rounding lives here."""

from __future__ import annotations

import numpy as np
import pandas as pd

__all__ = ["format_bias_table", "format_validation", "fmt_num", "fmt_ci", "fmt_p"]


def fmt_num(x, digits=3) -> str:
    """A number with ``digits`` decimals; ``-`` for missing."""
    if x is None or (isinstance(x, float) and not np.isfinite(x)):
        return "-"
    return f"{x:.{digits}f}"


def fmt_ci(ci, digits=3) -> str:
    """``[low, high]``; ``-`` when the interval was not computed."""
    if ci is None or not np.all(np.isfinite(ci)):
        return "-"
    return f"[{ci[0]:.{digits}f}, {ci[1]:.{digits}f}]"


def fmt_p(p) -> str:
    """p-values: three decimals, ``<0.001`` below."""
    if p is None or not np.isfinite(p):
        return "-"
    return "<0.001" if p < 0.001 else f"{p:.3f}"


def format_bias_table(result) -> str:
    """Table-1-style text table of a :class:`~toolbias_stats.BiasResult`."""
    rows = []
    for g in result.groups:
        label = ", ".join(f"{v}" for v in g.keys.values()) or "all"
        for m in ("delta_api", "delta_pos", "delta_model"):
            r = getattr(g, m)
            if r is None:
                rows.append({"group": label, "metric": m, "estimate": "- (positions unknown)"})
                continue
            rows.append({
                "group": label,
                "metric": m,
                "estimate": f"{fmt_num(r.mean_over_runs)} ± {fmt_num(r.sd_over_runs)}",
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
    head = (f"Tool-selection bias (TV to uniform); mean ± sd over runs; {result.n_resamples} query-bootstrap "
            f"replicates, {result.confidence_level:.0%} CIs; seed {result.seed}.\n"
            "'null E[TV]' is what a perfectly fair chooser would show with the same counts; 'corrected' removes "
            "that plug-in bias (calibrated CI).")
    return head + "\n\n" + table.to_string(index=False)


def format_validation(study, summary: pd.DataFrame) -> str:
    """Text summary of a study: rows by status per file, clusters, runs, reader diagnostics."""
    log = study.log
    data = log.data
    lines = [f"Study: {study.name} ({study.path})",
             f"{len(data)} rows; by status: {data['status'].value_counts().to_dict()}",
             f"models: {sorted(data['model'].unique())}",
             f"clusters: {data['cluster_id'].nunique()}; runs: {sorted(int(r) for r in data['run'].unique())}",
             f"catalog: {len(study.catalog)} tools in {len(study.catalog.clusters)} clusters", ""]
    show = summary.copy()
    show["source_file"] = show["source_file"].map(lambda s: s.rsplit("/", 1)[-1])
    lines.append(show.to_string(index=False))
    notes = []
    for src, diag in log.diagnostics.items():
        short = str(src).rsplit("/", 1)[-1]
        if diag.get("position_mismatch"):
            notes.append(f"{short}: recorded position disagrees with the rotation formula in "
                         f"{diag['position_mismatch']} records (recorded kept)")
        unresolved = diag.get("unresolved") or {}
        if unresolved:
            top = sorted(unresolved.items(), key=lambda kv: -kv[1])[:10]
            notes.append(f"{short}: {sum(unresolved.values())} unresolved names, top: {top}")
    if notes:
        lines += ["", "Notes:"] + [f"  - {n}" for n in notes]
    return "\n".join(lines)
