"""Plain text of an ExplainResult (``toolbias-stats explain``)."""

from __future__ import annotations

from .._format import fmt_ci, fmt_num, fmt_p

__all__ = ["format_explain_text"]


def format_explain_text(result) -> str:
    """Plain-text summary of an ExplainResult, as ``toolbias-stats explain`` prints it (display rounding only)."""
    lines = [(f"Explaining selection ({'cluster-centred' if result.center else 'uncentred'}; "
             f"targets: {result.targets})"), ""]
    c = result.correlations
    lines.append(f"Pearson r (p / Benjamini-Hochberg p across {c.n_tests} tests) per feature and LLM")
    tab = c.to_frame().set_index(["feature", "model"])
    width = max([len(f) for f in c.feature_names] + [8])
    lines.append(" " * width + "".join(f"  {m[:20]:>20}" for m in c.models))
    for f in c.feature_names:
        cells = []
        for m in c.models:
            r = tab.loc[(f, m)]
            val = fmt_num(r["r"])
            val = val if val.startswith("-") or val == "\u2014" else "+" + val
            cell = f"{val} ({fmt_p(r['p_value'], prefix=False)}/{fmt_p(r['p_bh'], prefix=False)})"
            cells.append(f"  {cell:>20}")
        lines.append(f"{f:<{width}}" + "".join(cells))
    lines += ["", "OLS (complete cases): n, R^2, adjusted R^2"]
    for f in result.ols.fits:
        lines.append(f"  {f.model:<24} n={f.n:<4} R2={fmt_num(f.r2)}  adj={fmt_num(f.adj_r2)}")
    for name, res in (("random forest", result.random_forest), ("gradient boosting", result.gradient_boosting)):
        if res is None:
            continue
        lines += ["", f"{name}: cross-validated R^2 vs constant baseline (grouped by cluster)"]
        for fit in res.fits:
            parts = []
            for s in fit.scores.to_dict(orient="records"):
                flag = "" if s["beats_baseline"] else " WORSE"
                parts.append(f"{s['scheme']} {fmt_num(s['r2'])} vs {fmt_num(s['baseline_r2'])}{flag}")
            lines.append(f"  {fit.model:<24} " + ("; ".join(parts) if parts else
                                                   f"not fitted ({fit.n_clusters} cluster(s) with complete rows)"))
    ch = getattr(result, "choice", None)
    if ch is not None:
        lines += ["", (f"conditional logit over attempts vs OLS over per-tool rates, per 1 within-cluster sd "
                      f"({ch.n_used} of {ch.n_in} attempts used; excluded {ch.excluded})"),
                  f"  {'model':<20} {'feature':<26} {'OLS coef [CI]':>24} {'clogit log-odds [CI]':>26}  verdict"]
        for r in ch.comparison.to_dict(orient="records"):
            lines.append(f"  {str(r['model'])[:20]:<20} {r['feature'][:26]:<26} "
                         f"{fmt_num(r['ols_coef']) + ' ' + fmt_ci((r['ols_ci_low'], r['ols_ci_high'])):>24} "
                         f"{fmt_num(r['clogit_estimate']) + ' ' + fmt_ci((r['clogit_ci_low'], r['clogit_ci_high'])):>26}"  # noqa: E501
                         f"  {r['verdict']}")
    a = result.alignment
    lines += ["", f"alignment ({a.method}, {int(100 * a.confidence_level)}% CI, {a.resample}s resampled)"]
    for r in a.to_frame().to_dict(orient="records"):
        lines.append(f"  {r['model_a'][:22]:<22} ~ {r['model_b'][:22]:<22} {fmt_num(r['r'])} "
                     f"{fmt_ci((r['ci_low'], r['ci_high']))}")
    return "\n".join(lines)
