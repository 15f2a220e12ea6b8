"""Plain text of the ToolSense diagnostics (``toolbias-stats toolsense``)."""

from __future__ import annotations

from .._format import MISSING, fmt_ci, fmt_estimate_ci, fmt_level, fmt_num, fmt_p

__all__ = ["format_retrieval_text", "format_probe_text", "format_probe_result_text", "format_agreement_text",
           "format_baselines_text", "TOOLSENSE_TIERS", "estimate_cell", "retrieval_rows", "invalid_names_text"]


def format_probe_result_text(result) -> str:
    """One ToolSense probe result, as ``toolbias-stats toolsense score --benchmark mcq|qa`` prints it."""
    return format_probe_text({"model": result})
TOOLSENSE_TIERS = ("easy", "medium", "hard", "all")


def estimate_cell(est):
    """``"estimate [low, high]"`` of a recall estimate; a dash when there is none."""
    return MISSING if est is None else fmt_estimate_ci(est.estimate, est.ci)


def retrieval_rows(result, config):
    """One row of formatted cells per tier and k of a configuration (Rc, Rf, IS with its three intervals)."""
    rows = []
    for t in TOOLSENSE_TIERS:
        for k in result.ks:
            e = result.estimates[(config, t, k)]
            is_ = e["is"]
            rows.append((t, k, e["n"], estimate_cell(e["rc"]), estimate_cell(e["rf"]),
                         MISSING if is_ is None else fmt_estimate_ci(is_.estimate, is_.ci_fieller),
                         MISSING if is_ is None else fmt_ci(is_.ci_bootstrap),
                         MISSING if is_ is None else fmt_ci(is_.ci_delta)))
    return rows


def invalid_names_text(inv):
    """How many predicted names are not tools, per decoding (constrained, free)."""
    parts = []
    for dec in ("constrained", "free"):
        d = inv.get(dec)
        if d:
            parts.append(f"{dec}: {d['invalid']} of {d['names']} names not tools"
                         f" ({fmt_num(100 * (d['rate'] or 0), 1)}%), {d['queries_with_invalid']} queries")
    return "; ".join(parts) or "no predictions"


def format_retrieval_text(result, comparisons=None) -> str:
    """Plain-text tables of :class:`RetrievalResult` (and a :class:`ComparisonResult`)."""
    lines = []
    for c in result.configs:
        boot = (f"{fmt_level(result.confidence_level)} {result.ci_method} query bootstrap, {result.n_resamples} "
                "replicates" if result.n_resamples else "no bootstrap (--n-resamples 0): no CIs")
        lines.append(f"{c}  (Rc/Rf: {boot}; IS: Fieller, bootstrap pct, paper's delta)")
        lines.append(f"{'tier':<7}{'k':>4}{'n':>5}  {'Rc@k':<22}{'Rf@k':<22}{'IS@k [Fieller]':<22}"
                     f"{'IS boot':<17}{'IS delta':<17}")
        for r in retrieval_rows(result, c):
            lines.append(f"{r[0]:<7}{r[1]:>4}{r[2]:>5}  {r[3]:<22}{r[4]:<22}{r[5]:<22}{r[6]:<17}{r[7]:<17}")
        lines.append("invalid names: " + invalid_names_text(result.invalid[c]))
        lines.append("")
    if comparisons is not None and len(comparisons.table):
        lines.append("paired comparisons (difference a - b, paired bootstrap CI, exact McNemar, Holm):")
        for r in comparisons.table.itertuples(index=False):
            lines.append(f"  {r.config_a} - {r.config_b} {r.metric}@{r.k} {r.tier}: "
                         f"{fmt_estimate_ci(r.difference, (r.ci_low, r.ci_high))}  "
                         f"McNemar {fmt_p(r.p_mcnemar)}, Holm {fmt_p(r.p_holm)}")
    return "\n".join(lines).rstrip()


def format_probe_text(results) -> str:
    """Plain text of probe results (``{name: ProbeResult}``)."""
    lines = []
    for name, r in results.items():
        lines.append(f"{name} [{r.kind}]: accuracy {fmt_estimate_ci(r.accuracy, r.ci)} "
                     f"({r.n_correct}/{r.n}, Wilson {fmt_level(r.confidence_level)}), chance {r.chance:g}, "
                     f"exact binomial {fmt_p(r.p_value)}; {r.n_invalid} answers not among the options")
    return "\n".join(lines)


def format_agreement_text(result) -> str:
    """Plain text of an :class:`AgreementResult`."""
    lines = [(f"{'group':<28}{'items':>6}{'raters':>7}{'agree':>7}{'major':>7}  "
             f"{'Fleiss kappa':<22}{'Gwet AC1':<22}{'Krippendorff alpha':<22}")]
    for g, sub in result.table.groupby("group", sort=False):
        f = sub.iloc[0]
        vals = {r.coefficient: fmt_estimate_ci(r.estimate, (r.ci_low, r.ci_high)) for r in sub.itertuples()}
        lines.append(f"{g:<28}{int(f.n_items):>6}{int(f.n_raters):>7}{fmt_num(f.percent_agreement):>7}"
                     f"{fmt_num(f.majority_share):>7}  {vals['fleiss_kappa']:<22}{vals['gwet_ac1']:<22}"
                     f"{vals['krippendorff_alpha']:<22}")
    lines.append((f"({fmt_level(result.confidence_level)} item-bootstrap {result.ci_method} CIs, "
                  f"{result.n_resamples} replicates; " if result.n_resamples else
                  "(no bootstrap (--n-resamples 0): no CIs; ")
                 + "'agree' = observed pairwise agreement, 'major' = share of the most frequent label)")
    lines += [f"warning: {w}" for w in result.warnings]
    return "\n".join(lines)


def format_baselines_text(result) -> str:
    """Plain text of a :class:`BaselineResult` (our measurements, not the paper's)."""
    rec = result.recall
    lines = [("Retrieval baselines on the vendored RRB (OUR measurements, not the paper's): Recall@k "
             f"[{fmt_level(rec.confidence_level)} {rec.ci_method} query bootstrap]")]
    head = f"{'method/scope':<16}{'tier':<8}" + "".join(f"{'R@' + str(k):<22}" for k in rec.ks)
    lines.append(head)
    for c in rec.configs:
        for t in TOOLSENSE_TIERS:
            cells = "".join(f"{estimate_cell(rec.estimates[(c, t, k)]['rc']):<22}" for k in rec.ks)
            lines.append(f"{c:<16}{t:<8}{cells}")
    lines.append("seconds: " + ", ".join(f"{m} {s:.1f}" for m, s in result.seconds.items()))
    for c, r in result.correct_set.items():
        row = r.table[r.table["k_answers"] == "all"]
        if len(row):
            x = row.iloc[0]
            lines.append(f"correct-set bias {c}: delta {fmt_estimate_ci(x.delta, (x.ci_low, x.ci_high))}, "
                         f"uniform reference {fmt_num(x.null_expected)}, {fmt_p(x.p_value)}, first-listed answer "
                         f"ranked first {fmt_num(x.first_listed_share)} (uniform {fmt_num(x.first_listed_expected)})")
    lines += [f"note: {n}" for n in result.notes]
    return "\n".join(lines)
