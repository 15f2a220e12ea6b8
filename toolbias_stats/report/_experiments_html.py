"""Report fragment (HTML) for experiments (shifts between levels, sweeps, subset mitigation).

Formatting only: every number is rounded by :mod:`toolbias_stats._format`, every string from the data is
HTML-escaped with the report's helper, figures are inline SVG drawn by
:mod:`toolbias_stats.plots._experiments`. The terminal text is
:mod:`toolbias_stats._text` (``format_shift_text``, ``format_subsets_text``).
"""

from __future__ import annotations

from .._format import fmt_ci, fmt_estimate_ci, fmt_int, fmt_level, fmt_mean_sd, fmt_num, fmt_p
from .._text import SHIFT_LABELS as _LABEL
from .._text import shift_keys as _keys
from ._render_html import _e, _svg, _table

__all__ = ["render_experiments_section", "experiments_summary", "tool_highlight"]


# ------------------------------------------------------------------------------------------------
def _names(labels, limit=3) -> str:
    if len(labels) <= limit:
        return ", ".join(labels[:-1]) + (" and " if len(labels) > 1 else "") + labels[-1]
    return ", ".join(labels[:limit]) + f" and {len(labels) - limit} more"


def experiments_summary(results) -> list:
    """At most four sentences for the top of the experiments section, generated from the numbers.

    Parameters
    ----------
    results : sequence of ShiftResult

    Returns
    -------
    list of str
        Plain text (the HTML layer escapes it): how many compared levels shift the tool / position distribution
        distinguishably from noise (Holm-adjusted p <= 1 - confidence level), the largest shift with its calibrated
        interval, the largest distinguishable change in bias, and the largest per-tool rise that survives the
        per-tool adjustment (when there is one). Each sentence covers every level at once; none is repeated per
        model. Empty without compared levels.

    Examples
    --------
    >>> experiments_summary([])
    []
    """
    from ..plots._experiments_overview import shift_overview_rows

    results = list(results)
    rows = shift_overview_rows(results)
    if not rows:
        return []
    level = results[0].confidence_level
    alpha = 1 - level
    n = len(rows)
    levels = "compared level" if n == 1 else "compared levels"
    out = [_first_sentence(rows, alpha, n, levels)]
    shift = _largest_shift_sentence(rows, fmt_level(level))
    change = _change_sentence(results, rows, alpha, n, levels)
    rise = _rise_sentence(results)
    return out + [t for t in (shift, change, rise) if t is not None]


def _first_sentence(rows, alpha, n, levels) -> str:
    """How many compared levels shift the tool / position distribution distinguishably from noise."""

    def sig(s):
        return s is not None and s.p_adjusted == s.p_adjusted and s.p_adjusted <= alpha

    tools = [r["label"] for r in rows if sig(r["shift_api"])]
    has_pos = any(r["shift_pos"] is not None for r in rows)
    pos = [r["label"] for r in rows if sig(r["shift_pos"])]

    def which(names):
        """Name the few that do (or the few that do not) when that is short."""
        if 0 < len(names) <= 2 and len(names) < n:
            return f" ({_names(names)})"
        rest = [r["label"] for r in rows if r["label"] not in names]
        if names and 0 < len(rest) <= 2:
            return f" (all but {_names(rest)})"
        return ""

    if not tools and not pos:
        return (f"None of the {n} {levels} shifts the selections distinguishably from noise "
                f"(Holm-adjusted p ≤ {alpha:g}).")
    count = "All" if len(tools) == n else f"{len(tools)} of the"
    verb = "shifts" if len(tools) == 1 and n > 1 else "shift"
    first = f"{count} {n} {levels} {verb} the tool distribution{which(tools)}"
    if has_pos:
        first += f" and {len(pos) or 'none'} the position distribution{which(pos)}"
    return first + f" distinguishably from noise (Holm-adjusted p ≤ {alpha:g})."


def _largest_shift_sentence(rows, lv):
    """The largest bias-corrected tool shift (and position shift), or None."""
    best = {}
    for m in ("shift_api", "shift_pos"):
        cand = [r for r in rows if r[m] is not None and r[m].corrected == r[m].corrected]
        if cand:
            best[m] = max(cand, key=lambda r: r[m].corrected)
    if "shift_api" not in best:
        return None
    r = best["shift_api"]
    text = (f"The largest tool shift is {r['label']}: "
            f"{fmt_estimate_ci(r['shift_api'].corrected, r['shift_api'].corrected_ci)} "
            f"(bias-corrected, {lv} calibrated interval; noise alone reads about "
            f"{fmt_num(r['shift_api'].null_expected)} as a plug-in)")
    if "shift_pos" in best:
        rp = best["shift_pos"]
        text += (f"; the largest position shift is {rp['label']}: "
                 f"{fmt_estimate_ci(rp['shift_pos'].corrected, rp['shift_pos'].corrected_ci)}")
    return text + "."


def _change_sentence(results, rows, alpha, n, levels):
    """The largest distinguishable change in bias, or None."""
    changes = []
    for res in results:
        for g in res.groups:
            for m in ("delta_model", "delta_api"):
                c = g.change.get(m)
                if c is not None:
                    break
            if c is not None and c.p_adjusted == c.p_adjusted and c.p_adjusted <= alpha:
                label = next(r["label"] for r in rows if r["keys"] == g.keys and r["between"] == res.between)
                changes.append((abs(c.estimate), m, label, c))
    if not changes:
        return None
    _, m, label, c = max(changes, key=lambda t: t[0])
    name = _LABEL[m].replace("Δ", "")
    return (f"The bias changes most at {label}: {name} {fmt_num(c.base_value)} → {fmt_num(c.value)} "
            f"({fmt_estimate_ci(c.estimate, c.ci)}); {len(changes)} of {n} {levels} change the bias "
            "distinguishably.")


def _rise_sentence(results):
    """The largest per-tool rise that survives the per-tool adjustment, or None."""
    rises = []
    for res in results:
        b, _ = tool_highlight(res)
        if b is not None:
            rises.append((b["difference"], res, b))
    if not rises:
        return None
    _, res, b = max(rises, key=lambda t: t[0])
    return (f"The largest per-tool rise that survives the adjustment over every tool: {b['tool_id']} "
            f"(cluster {b['cluster']}) from {fmt_num(b['share_base'])} at {res.between} = {res.base} to "
            f"{fmt_num(b['share'])} at {b[res.between]} "
            f"({fmt_estimate_ci(b['difference'], (b['ci_low'], b['ci_high']))}).")


def _overview_block(results) -> str:
    from ..plots import plot_shift_overview

    results = [r for r in results if r.groups]
    if not results:
        return ""
    level = results[0].confidence_level
    fig = plot_shift_overview(results, alpha=1 - level)
    sentences = experiments_summary(results)
    return ('<div class="overview" id="experiments-overview">'
            f'<figure>{_svg(fig, title="shift of every compared level from its base, with calibrated intervals")}'
            f"<figcaption>Shift of the tool (circles) and position (squares) distributions of every compared level "
            f"from its base level: bias-corrected estimate with its {fmt_level(level)} calibrated interval, filled "
            "when the Holm-adjusted permutation p-value is at most "
            f"{1 - level:g}; grey ticks: the plug-in shift noise alone shows with these counts.</figcaption></figure>"
            '<p class="summary">' + " ".join(_e(x) for x in sentences) + "</p></div>")


def render_experiments_section(results, *, study=None, mitigation=None, tool_count=None,
                               title="Experiments: effects of interventions") -> str:
    """HTML fragment ``<section id="experiments">`` for one or more shift results.

    Parameters
    ----------
    results : sequence of ShiftResult
        E.g. one comparing ``condition`` levels and one per numeric sweep column.
    study : Study, optional
        For tool and cluster names.
    mitigation : MitigationResult, optional
        The counterfactual "uniform over the predicted subset" delta_API, shown next to the observed
        before/after table.
    tool_count : ToolCountResult, optional
        Adds the tool-count plot and table.
    title : str

    Returns
    -------
    str
        First an overview of every compared level of every result (:func:`~toolbias_stats.plots.plot_shift_overview`)
        with at most four sentences (:func:`experiments_summary`); then per result: a Fig. 5-style shift figure
        (plug-in bars, sd over clusters, corrected value with its calibrated interval, the null line), the shift
        table, a Table 5-style before/after table of delta_API / delta_pos / delta_model with the change and its
        interval; for numeric columns a
        Fig. 9-style sweep figure and, when a tool's rise survives Holm across every level x cluster x tool
        (:func:`tool_highlight`), a Fig. 17-style per-tool figure.
    """
    catalog = getattr(study, "catalog", None)
    simulated = "SIMULATED" in str(getattr(study, "name", ""))
    parts = [f'<section id="experiments">\n<h2>{_e(title)}</h2>']
    if simulated:
        parts.append('<p class="warning"><strong>SIMULATED data:</strong> every selection in this study is '
                     "simulated; the numbers illustrate the method only.</p>")
    parts += [_overview_block(results),
             ("<p>Each level of a design column is compared with a base level within each model. The shift is the "
             "total-variation distance between the two selection distributions (per cluster, then averaged over the "
             "clusters both levels have); its plug-in value is biased upward by sampling noise, so the "
             "<em>null</em> (the shift two samples of the same distribution with these counts show) and a "
             "bias-corrected value with a calibrated interval are given. Intervals come from a query bootstrap that "
             "resamples queries jointly across levels when they share queries (paired); p-values from permuting "
             "level labels within query, adjusted by Holm across all levels and metrics; per-tool changes in share "
             "form "
             "their own family (Holm across every level, cluster and tool), and a tool is highlighted only when its "
             "rise survives that adjustment.</p>")]
    for i, res in enumerate(results):
        parts.append(_result_block(res, i, catalog))
    if mitigation is not None:
        parts.append(_mitigation_block(mitigation))
    if tool_count is not None and not tool_count.units.empty:
        parts.append(_tool_count_block(tool_count))
    parts.append("</section>")
    return "\n".join(parts)


def _result_block(res, i, catalog) -> str:
    from ..plots import plot_shift, plot_sweep, plot_tool_shares

    lv = fmt_level(res.confidence_level)
    out = [f"<h3>{_e(res.between)}: levels compared with {_e(res.between)} = {_e(res.base)}</h3>"]
    for metric in ("shift_api", "shift_pos"):
        rows = [g for g in res.groups if getattr(g, metric) is not None]
        if not rows:
            continue
        caption = "; ".join(f"{_keys(g.keys)}: {fmt_num(getattr(g, metric).mean_over_clusters)} plug-in, corrected "
                            f"{fmt_estimate_ci(getattr(g, metric).corrected, getattr(g, metric).corrected_ci)}, null "
                            f"{fmt_num(getattr(g, metric).null_expected)}" for g in rows)
        fig = plot_shift(res, metric=metric)
        out.append(f'<figure>{_svg(fig, title=f"{_LABEL[metric]} by level of {res.between}")}'
                   f"<figcaption>{_e(_LABEL[metric])} ({lv} calibrated CIs): {_e(caption)}</figcaption></figure>")
    head = ("<tr><th>group</th><th>vs base</th><th>clusters</th><th>metric</th><th>mean ± sd over clusters</th>"
            f"<th>plug-in {lv} CI</th><th>corrected [{lv} CI]</th><th>null</th><th>p</th><th>Holm</th></tr>")
    body = []
    for g in res.groups:
        for m in ("shift_api", "shift_pos"):
            s = getattr(g, m)
            if s is None:
                continue
            body.append(f"<tr><td>{_e(_keys(g.keys))}</td><td>{_e(g.base)}</td><td>{s.n_clusters}</td>"
                        f"<td>{_e(_LABEL[m])}</td><td>{_e(fmt_mean_sd(s.mean_over_clusters, s.sd_over_clusters))}</td>"
                        f"<td>{_e(fmt_ci(s.ci))}</td><td>{_e(fmt_estimate_ci(s.corrected, s.corrected_ci))}</td>"
                        f"<td>{_e(fmt_num(s.null_expected))}</td><td>{_e(fmt_p(s.p_value, prefix=False))}</td>"
                        f"<td>{_e(fmt_p(s.p_adjusted, prefix=False))}</td></tr>")
    out.append(_table(head, body, caption=f"Distribution shift from {res.between} = {res.base}"))
    # Table 5 style: before / after
    head = ("<tr><th>group</th><th>metric</th><th>base</th><th>level</th><th>change [CI]</th>"
            "<th>corrected change [CI]</th><th>normalised change</th><th>p</th><th>Holm</th></tr>")
    body = []
    for g in res.groups:
        for m in ("delta_api", "delta_pos", "delta_model"):
            c = g.change.get(m)
            if c is None:
                continue
            body.append(f"<tr><td>{_e(_keys(g.keys))}</td><td>{_e(m)}</td><td>{_e(fmt_num(c.base_value))}</td>"
                        f"<td>{_e(fmt_num(c.value))}</td><td>{_e(fmt_estimate_ci(c.estimate, c.ci))}</td>"
                        f"<td>{_e(fmt_estimate_ci(c.corrected, c.corrected_ci))}</td>"
                        f"<td>{_e(fmt_estimate_ci(c.normalised_estimate, c.normalised_ci))}</td>"
                        f"<td>{_e(fmt_p(c.p_value, prefix=False))}</td>"
                        f"<td>{_e(fmt_p(c.p_adjusted, prefix=False))}</td></tr>")
    out.append(_table(head, body, caption=f"Bias before ({res.between} = {res.base}) and after (Table 5 style); "
                                          "corrected: the difference of the two calibrated deltas with its MOVER "
                                          "interval, which follows the kink of a level near uniformity"))
    notes = sorted({g.shift_api.note for g in res.groups if g.shift_api.note})
    if notes:   # issue 35: a level on too few queries gets p-values but no intervals, and the reader is told why
        out.append("<p>" + "<br>".join(_e(f"{n}") for n in notes) + "</p>")
    if res.numeric and res.trends:
        fig = plot_sweep(res)
        cap = "; ".join(f"{_keys(t.keys)}: slope of {m} {fmt_estimate_ci(s, ci, 4)}" for t in res.trends
                        for m, (s, ci) in t.slopes.items())
        out.append(f'<figure>{_svg(fig, title=f"bias against {res.between}")}<figcaption>Bias against '
                   f"{_e(res.between)} ({lv} query-bootstrap CIs): {_e(cap)}</figcaption></figure>")
        best, n_tests = tool_highlight(res)
        if best is not None:
            keys = {k: best[k] for k in res.by}
            fig = plot_tool_shares(res, keys=keys, catalog=catalog, cluster=best["cluster"],
                                   highlight=best["tool_id"])
            out.append(f'<figure>{_svg(fig, title=f"tool shares across {res.between}")}<figcaption>Selection '
                       f"share per tool across {_e(res.between)} ({_e(_keys(keys))}); highlighted: "
                       f"{_e(best['tool_id'])}, {fmt_num(best['share_base'])} at {_e(res.between)} = "
                       f"{_e(res.base)}, {fmt_num(best['share'])} at {_e(best[res.between])} "
                       f"(difference {_e(fmt_estimate_ci(best['difference'], (best['ci_low'], best['ci_high'])))}, "
                       f"Holm-adjusted {_e(fmt_p(best['p_adjusted']))} across {n_tests} per-tool tests)"
                       "</figcaption></figure>")
        elif n_tests and res.n_permutations:
            alpha = 1 - res.confidence_level
            floor = min(1.0, n_tests / (res.n_permutations + 1))
            why = (f" (with {res.n_permutations} permutations the smallest attainable Holm-adjusted p is "
                   f"{fmt_num(floor, 3)}: use more permutations)" if floor > alpha else "")
            out.append(f"<p>No tool's share changed distinguishably from noise after adjusting for the {n_tests} "
                       f"per-tool tests (Holm, {fmt_p(alpha, prefix=False)} level){_e(why)}.</p>")
    if res.skipped:
        out.append("<p>Not compared: " + "; ".join(_e(s) for s in res.skipped) + ".</p>")
    return "\n".join(out)


def tool_highlight(res):
    """The tool whose share rose most among those that rose distinguishably after multiplicity adjustment.

    Parameters
    ----------
    res : ShiftResult

    Returns
    -------
    (pandas.Series or None, int)
        The ``tools_frame()`` row of the highlighted tool (None when no tool's rise has a Holm-adjusted p-value
        <= 1 - confidence level across every level x cluster x tool of the result), and the number of per-tool
        tests in that family. The unadjusted interval is not used: with 25 tools it excludes 0 for some tool in
        about half of the studies without any change.

    Examples
    --------
    A position effect only: no tool's share changes significantly among the 12 tested (3 clusters x 4 tools).

    >>> import numpy as np
    >>> import toolbias_stats as tbs
    >>> from toolbias_stats.experiments import simulate_conditions
    >>> from toolbias_stats.report._experiments_html import tool_highlight
    >>> pref = np.ones((3, 4))
    >>> log = simulate_conditions({"base": (pref, None), "first_wins": (pref, [4, 1, 1, 1])}, n_queries=20, rng=0)
    >>> res = tbs.selection_shift(log, between="condition", base="base", n_resamples=200, rng=1)
    >>> tool_highlight(res)
    (None, 12)
    """
    tf = res.tools_frame()
    if not len(tf) or "significant" not in tf:
        return None, 0
    n_tests = int(tf["p_value"].notna().sum())
    rose = tf[tf["significant"].astype(bool) & (tf["difference"] > 0)]
    if rose.empty:
        return None, n_tests
    return rose.loc[rose["difference"].idxmax()], n_tests


def _mitigation_block(m) -> str:
    head = "<tr><th>cluster</th><th>K</th><th>queries</th><th>selecting</th><th>δ_API [CI]</th><th>null</th></tr>"
    body = [f"<tr><td>{_e(r.cluster)}</td><td>{r.K}</td><td>{fmt_int(r.n_queries)}</td>"
            f"<td>{fmt_int(r.n_selecting)}</td>"
            f"<td>{_e(fmt_estimate_ci(r.delta_api, (r.ci_low, r.ci_high)))}</td>"
            f"<td>{_e(fmt_num(r.null_expected))}</td></tr>"
            for r in m.clusters.itertuples(index=False)]
    return ("<h3>Counterfactual mitigation: choose uniformly from the predicted subset</h3>"
            f"<p>Implied δ_API (mean over clusters): {_e(fmt_estimate_ci(m.delta_api, m.ci))}; bias-corrected "
            f"{_e(fmt_estimate_ci(m.corrected, m.corrected_ci))}.</p>"
            + _table(head, body, caption="Implied selection distribution per cluster"))


def _tool_count_block(tc) -> str:
    from ..plots import plot_tool_count

    frame = tc.to_frame()
    fig = plot_tool_count(tc)
    head = ("<tr><th>group</th><th>K</th><th>units</th><th>valid choices</th><th>δ_API (normalised)</th>"
            "<th>δ_pos (normalised)</th><th>null (normalised)</th></tr>")
    body = [f"<tr><td>{_e(_keys({k: getattr(r, k) for k in tc.by}))}</td><td>{r.K}</td><td>{r.n_units}</td>"
            f"<td>{fmt_int(r.n_used)}</td><td>{fmt_num(r.delta_api)} ({fmt_num(r.delta_api_normalised)})</td>"
            f"<td>{fmt_num(r.delta_pos)} ({fmt_num(r.delta_pos_normalised)})</td>"
            f"<td>{fmt_num(r.null_expected)} ({fmt_num(r.null_normalised)})</td></tr>"
            for r in frame.itertuples(index=False)]
    return ("<h3>Tool count (App. J)</h3>"
            f'<figure>{_svg(fig, title="normalised bias against tools shown")}<figcaption>Normalised δ per '
            "(cluster, tool set shown), averaged per number of tools shown K; dotted: uniform-chooser expectation."
            "</figcaption></figure>" + _table(head, body, caption="Bias by number of tools shown"))
