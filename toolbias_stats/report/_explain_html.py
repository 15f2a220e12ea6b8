"""HTML fragment "Explaining selection": correlations, OLS, cross-validated ensembles, alignment.

:func:`render_explain_section` reads an :class:`~toolbias_stats.models.ExplainResult` and computes
nothing statistical; numbers are rounded by :mod:`toolbias_stats._format`, every data string
is HTML-escaped, and figures are inline SVG (deterministic, as in the bias report).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from .._format import MISSING, fmt_ci, fmt_int, fmt_level, fmt_num, fmt_p
from ._render_html import _e, _svg, _table

if TYPE_CHECKING:
    from ..models import ExplainResult

__all__ = ["render_explain_section"]

_SCHEME = {"loco": "leave one cluster out", "group_kfold": "repeated GroupKFold", "holdout": "held-out clusters"}
_EST = {"random_forest": "Random forest", "gradient_boosting": "Gradient boosting"}


def render_explain_section(result: ExplainResult, *, heading: str = "Explaining selection") -> str:
    """Render an explanation analysis as one HTML ``<section id="explain">`` fragment.

    Parameters
    ----------
    result : ExplainResult
        Output of :func:`toolbias_stats.models.explain_selection`.
    heading : str, default "Explaining selection"

    Returns
    -------
    str
        ``<section id="explain">...</section>``: the settings and where features and rates came
        from, the correlation table and heat map (BiasBusters Table 4), OLS fit statistics and
        the coefficient plot (Fig. 13), the cross-validated ensembles next to the constant
        baseline with their permutation importances, the alignment heat map (Fig. 15) and
        every warning. Self-contained (inline SVG, no script), for the bias report's page.

    Examples
    --------
    >>> import toolbias_stats as tbs
    >>> from toolbias_stats.features import read_feature_table
    >>> from toolbias_stats.models import explain_selection
    >>> feats = read_feature_table(tbs.datasets.path("biasbusters/authors_features.json"))
    >>> res = explain_selection(feats, ensembles=False, n_resamples=20, rng=1)   # correlations, OLS, alignment
    >>> html = render_explain_section(res)
    >>> html.startswith('<section id="explain">'), html.count("<svg") >= 3
    (True, True)
    """
    parts = [f'<section id="explain">\n<h2>{_e(heading)}</h2>', _intro(result), _correlations(result),
             _ols(result), _choice(result), _ensembles(result), _alignment(result), _notes(result), "</section>"]
    return "\n".join(p for p in parts if p)


def _intro(res) -> str:
    prov = res.features_provenance or {}
    src = prov.get("source", MISSING)
    enc = prov.get("encoder") or {}
    items = [("features", "computed from the catalog and queries" if src == "computed" else f"read from {src}"),
             ("features used", ", ".join(res.feature_names) or MISSING),
             ("centring", "each feature and the selection rate minus its cluster mean" if res.center
              else "none (raw values)"),
             ("targets", res.targets or MISSING),
             ("LLMs", ", ".join(res.models) or MISSING),
             ("seed (rng)", MISSING if res.seed is None else res.seed)]
    if src == "computed":
        items.insert(1, ("encoder", enc.get("encoder", "none (no similarity features)") if enc else
                         "none (no similarity features)"))
        items.insert(2, ("reference date (ages)", (f"{prov.get('reference_date', MISSING)} "
                                                  f"({prov.get('reference_date_source', '')})")))
        items.insert(3, ("texts", prov.get("combined_text", MISSING)))
    dl = "".join(f"<dt>{_e(k)}</dt><dd>{_e(v)}</dd>" for k, v in items)
    return (f'<dl class="settings">{dl}</dl>\n<div class="note"><p><strong>How to read this.</strong> One row per '
            "tool: its features and, per LLM, its selection rate in its cluster. After centring, a value says how "
            "much a tool is above or below the other tools of its cluster. The tools of one cluster share queries "
            "and compete for the same choices, so they are not independent observations and the p-values are "
            "descriptive. Cross-validation keeps every cluster's tools together and compares each model with a "
            "constant prediction.</p></div>")


def _correlations(res) -> str:
    c = res.correlations
    level = fmt_level(c.confidence_level)
    tab = c.to_frame().set_index(["feature", "model"])
    head = "<tr><th>feature</th>" + "".join(f'<th class="num">{_e(m)}</th>' for m in c.models) + "</tr>"
    body = []
    for f in c.feature_names:
        cells = [f"<td>{_e(f)}</td>"]
        for m in c.models:
            if (f, m) not in tab.index:
                cells.append(f'<td class="num">{MISSING}</td>')
                continue
            r = tab.loc[(f, m)]
            val = fmt_num(r["r"])
            if val != MISSING and not val.startswith("-"):
                val = "+" + val
            first = f"{val} ({fmt_p(r['p_value'])})"
            ci = fmt_ci((r["ci_low"], r["ci_high"]))
            extra = f"n={fmt_int(r['n'])}, BH {fmt_p(r['p_bh'], prefix=False)}"
            cells.append(f'<td class="num">{_e(first)}<br>{_e(ci)} <span class="muted">{_e(extra)}</span></td>')
        body.append("<tr>" + "".join(cells) + "</tr>")
    cap = (f"Pearson r (p) with its {level} Fisher-z interval, per feature and LLM; BH = Benjamini-Hochberg "
           f"adjusted p across all {c.n_tests} tests (Holm in the JSON output). Pairwise-complete rows.")
    table = _table(head, body, caption=cap)
    from ..plots import plot_correlations

    svg = _svg(plot_correlations(c), title="Correlation between tool features and selection rates")
    return (f"<h3>Correlations (BiasBusters Table 4)</h3>\n{table}\n<figure>{svg}<figcaption>Pearson r per feature "
            "and LLM; * marks a Benjamini-Hochberg adjusted p below 0.05.</figcaption></figure>")


def _ols(res) -> str:
    o = res.ols
    level = fmt_level(o.confidence_level)
    head = ("<tr><th>LLM</th><th class=\"num\">rows</th><th class=\"num\">excluded</th>"
            "<th class=\"num\">rows / predictor</th><th class=\"num\">R\u00b2</th><th class=\"num\">adj. R\u00b2</th>"
            "<th class=\"num\">F-test p</th></tr>")
    body = []
    for f in o.fits:
        rpp = f.n / f.n_predictors if f.n_predictors else np.nan
        vals = [fmt_int(f.n), fmt_int(f.n_excluded), fmt_num(rpp, 1), fmt_num(f.r2), fmt_num(f.adj_r2),
                fmt_p(f.f_pvalue, prefix=False)]
        body.append(f"<tr><td>{_e(f.model)}</td>" + "".join(f'<td class="num">{_e(v)}</td>' for v in vals) + "</tr>")
    summary = _table(head, body, caption="In-sample fit per LLM (complete cases). With few rows per predictor the "
                                         "in-sample R\u00b2 is optimistic: compare adjusted R\u00b2 and the "
                                         "cross-validated results below.")
    chead = ("<tr><th>LLM</th><th>term</th><th class=\"num\">coef</th><th class=\"num\">std. coef</th>"
             f"<th class=\"num\">{_e(level)} CI (HC3)</th><th class=\"num\">p (HC3)</th>"
             "<th class=\"num\">p (classical)</th><th class=\"num\">p (cluster-robust)</th></tr>")
    cbody = []
    for f in o.fits:
        for r in f.coefficients.to_dict(orient="records"):
            vals = [fmt_num(r["coef"], 4), fmt_num(r["std_coef"]), fmt_ci((r["ci_hc3_low"], r["ci_hc3_high"]), 4),
                    fmt_p(r["p_hc3"], prefix=False), fmt_p(r["p_value"], prefix=False),
                    fmt_p(r["p_cluster"], prefix=False)]
            cbody.append(f"<tr><td>{_e(f.model)}</td><td>{_e(r['term'])}</td>"
                         + "".join(f'<td class="num">{_e(v)}</td>' for v in vals) + "</tr>")
    coefs = _table(chead, cbody, caption="Coefficients: raw, standardised (sd of y per sd of x), HC3 interval; "
                                         "cluster-robust p-values rest on few clusters.")
    from ..plots import plot_ols_coefficients

    svg = _svg(plot_ols_coefficients(o), title="Standardised OLS coefficients per feature and LLM")
    return (f"<h3>Linear regression (BiasBusters Fig. 13)</h3>\n{summary}\n<figure>{svg}<figcaption>Standardised "
            f"coefficients with {_e(level)} HC3 intervals; the legend gives each LLM's in-sample R\u00b2."
            f"</figcaption></figure>\n<details><summary>All coefficients</summary>{coefs}</details>")


def _choice(res) -> str:
    """OLS over per-tool rates next to the conditional logit over attempts (when the log was given)."""
    ch = getattr(res, "choice", None)
    if ch is None:
        return ""
    level = fmt_level(ch.confidence_level)
    head = ("<tr><th>LLM</th><th>feature</th><th class=\"num\">OLS coef</th>"
            f"<th class=\"num\">{_e(level)} CI (cluster-robust)</th><th class=\"num\">clogit log-odds</th>"
            f"<th class=\"num\">{_e(level)} CI (query-clustered)</th><th>together</th></tr>")
    body = []
    for r in ch.comparison.to_dict(orient="records"):
        vals = [fmt_num(r["ols_coef"], 4), fmt_ci((r["ols_ci_low"], r["ols_ci_high"]), 4),
                fmt_num(r["clogit_estimate"]), fmt_ci((r["clogit_ci_low"], r["clogit_ci_high"]))]
        body.append(f"<tr><td>{_e(r['model'])}</td><td>{_e(r['feature'])}</td>"
                    + "".join(f'<td class="num">{_e(v)}</td>' for v in vals) + f"<td>{_e(r['verdict'])}</td></tr>")
    excl = ", ".join(f"{k} {fmt_int(v)}" for k, v in ch.excluded.items()) or "none"
    table = _table(head, body, caption="Per 1 within-cluster sd of the feature: OLS in selection-rate units over "
                                       "per-tool rates; conditional logit in log-odds over attempts (lists and "
                                       "positions shown accounted for).")
    return (f"<h3>Attempt-level explanation: conditional logit vs OLS</h3>\n<p>{_e(ch.result.method)}; attempts "
            f"used {fmt_int(ch.n_used)} of {fmt_int(ch.n_in)} (excluded: {_e(excl)}). The logit's intervals assume "
            "the features explain the tools' worths; residual differences between tools are not in them, so they "
            "are narrower than the per-tool OLS intervals by construction (docs/explain.md).</p>\n" + table)


def _ensembles(res) -> str:
    ests = [(n, r) for n, r in (("random_forest", res.random_forest), ("gradient_boosting", res.gradient_boosting))
            if r is not None]
    if not ests:
        return '<h3>Random forest and gradient boosting</h3>\n<p class="muted">Not fitted (skipped).</p>'
    head = ("<tr><th>model</th><th>LLM</th><th>validation</th><th class=\"num\">CV R\u00b2</th>"
            "<th class=\"num\">constant R\u00b2</th><th class=\"num\">CV RMSE</th><th class=\"num\">constant RMSE</th>"
            "<th>verdict</th></tr>")
    body = []
    n_total = n_worse = 0
    for name, r in ests:
        for f in r.fits:
            for s in f.scores.to_dict(orient="records"):
                finite = np.isfinite(s["rmse"]) and np.isfinite(s["baseline_rmse"])
                worse = finite and not s["beats_baseline"]
                n_total += finite
                n_worse += worse
                r2 = fmt_num(s["r2"])
                if np.isfinite(s.get("r2_sd", np.nan)):
                    r2 += f" \u00b1 {fmt_num(s['r2_sd'])}"
                verdict = (MISSING if not finite else
                           ("<strong>worse than constant</strong>" if worse else "better than constant"))
                vals = [r2, fmt_num(s["baseline_r2"]), fmt_num(s["rmse"]), fmt_num(s["baseline_rmse"])]
                body.append(f"<tr><td>{_e(_EST[name])}</td><td>{_e(f.model)}</td>"
                            f"<td>{_e(_SCHEME.get(s['scheme'], s['scheme']))}</td>"
                            + "".join(f'<td class="num">{_e(v)}</td>' for v in vals) + f"<td>{verdict}</td></tr>")
    settings = "; ".join(
        f"{_EST[n]}: {r.params.get('n_estimators')} trees, max depth {r.params.get('max_depth') or 'none'}, "
        f"GroupKFold {r.params.get('n_splits')} folds x {r.params.get('n_repeats')} repeats, "
        f"held-out {r.params.get('test_size'):g} of clusters" for n, r in ests)
    table = _table(head, body, caption=("Out-of-fold R\u00b2 and RMSE (pooled over folds; repeated GroupKFold: mean "
                                        "\u00b1 sd over repeats) next to a constant prediction (the training fold's "
                                        f"mean). Settings: {settings}."), cls=None)
    verdict = (f'<div class="note"><p><strong>{_e(n_worse)} of {_e(n_total)}</strong> cross-validated fits predict '
               "unseen clusters <strong>worse than a constant</strong>. Where a model does not beat the constant, its "
               "feature importances describe noise, not what drives selection.</p></div>")
    from ..plots import plot_importances

    figs = []
    for name, r in ests:
        svg = _svg(plot_importances(r), title=f"Permutation importance, {_EST[name]}")
        figs.append(f"<figure>{svg}<figcaption>{_e(_EST[name])}: out-of-fold permutation importance (rise in "
                    "test MSE), mean \u00b1 sd across folds; hollow markers: the model does not beat the constant."
                    "</figcaption></figure>")
    return ("<h3>Random forest and gradient boosting (grouped cross-validation)</h3>\n" + verdict + "\n" + table
            + "\n" + "\n".join(figs))


def _alignment(res) -> str:
    a = res.alignment
    from ..plots import plot_alignment

    svg = _svg(plot_alignment(a), title="Alignment of the LLMs' selection rates")
    level = fmt_level(a.confidence_level)
    body = []
    for r in a.to_frame().to_dict(orient="records"):
        vals = [fmt_num(r["r"]), fmt_ci((r["ci_low"], r["ci_high"])), fmt_int(r["n_tools"])]
        body.append(f"<tr><td>{_e(r['model_a'])}</td><td>{_e(r['model_b'])}</td>"
                    + "".join(f'<td class="num">{_e(v)}</td>' for v in vals) + "</tr>")
    head = (f"<tr><th>LLM</th><th>LLM</th><th class=\"num\">r</th><th class=\"num\">{_e(level)} CI</th>"
            "<th class=\"num\">tools</th></tr>")
    table = _table(head, body, caption=f"{a.method.capitalize()} correlation of selection-rate vectors; bootstrap "
                                       f"percentile interval, {a.n_resamples} replicates resampling {a.resample}s.")
    return (f"<h3>Alignment between LLMs (BiasBusters Fig. 15)</h3>\n<figure>{svg}<figcaption>Correlation of the "
            "LLMs' selection rates over all tools; intervals resample whole clusters (a cluster's rates sum to one)."
            f"</figcaption></figure>\n<details><summary>Pairs as a table</summary>{table}</details>")


def _notes(res) -> str:
    items = [f'<li class="warning">{_e(w)}</li>' for w in res.warnings]
    dropped = sorted(set(res.correlations.dropped_features) | set(res.ols.dropped_features))
    if dropped:
        items.insert(0, f'<li class="warning">Dropped features: {_e(", ".join(dropped))}</li>')
    if not items:
        return '<h3>Notes</h3>\n<p class="muted">No warnings.</p>'
    return f'<h3>Notes</h3>\n<ul class="notes">{"".join(items)}</ul>'
