"""HTML section / page for ToolSense diagnostics (formatting only: nothing is computed here; the terminal text is
:mod:`toolbias_stats._text`).

Every number is rounded by :mod:`toolbias_stats._format`; every string from the data (configuration names, group values)
is HTML-escaped; figures are inline SVG (deterministic) drawn by :mod:`toolbias_stats.plots._toolsense`.
"""

from __future__ import annotations

from .._format import fmt_estimate_ci, fmt_int, fmt_level, fmt_num, fmt_p
from .._text import TOOLSENSE_TIERS as _TIERS
from .._text import estimate_cell as _cell
from .._text import invalid_names_text as _invalid_text
from .._text import retrieval_rows as _retrieval_rows
from ._render_html import _e, _svg, _table, html_page

__all__ = ["render_toolsense_section", "render_toolsense_report"]

_COEF = {"fleiss_kappa": "Fleiss' \u03ba", "gwet_ac1": "Gwet's AC1", "krippendorff_alpha": "Krippendorff's \u03b1"}


# -- HTML ----------------------------------------------------------------------------------------
def _est(e) -> str:
    return "\u2013" if e is None else fmt_estimate_ci(e.estimate, e.ci)


def _recall_block(result, comparisons):
    from ..plots import plot_internalization, plot_recall_by_tier

    parts = ["<h3>Recall by tier and Internalization Score</h3>",
             (f'<p class="muted">Rc@k / Rf@k: share of queries whose top-k list holds a correct tool '
              '(paper \u00a73.3); '
             f"{_e(fmt_level(result.confidence_level))} {_e(result.ci_method)} query-bootstrap intervals "
             f"({result.n_resamples} replicates, stratified by tier). IS@k = Rf@k / Rc@k (0 when Rc@k = 0): Fieller "
             "interval (ours), bootstrap percentile, and the paper's delta method for comparison.</p>")]
    kmax = max(result.ks)
    level = fmt_level(result.confidence_level)
    shown = "; ".join(f"{c}: Rc@{kmax} {_est(result.estimates[(c, 'all', kmax)]['rc'])}, Rf@{kmax} "
                      f"{_est(result.estimates[(c, 'all', kmax)]['rf'])}" for c in result.configs)
    parts.append(f"<figure>{_svg(plot_recall_by_tier(result, k=kmax), title='Recall by tier')}<figcaption>Recall@"
                 f"{kmax} per tier and configuration with {_e(level)} intervals; all tiers: {_e(shown)}."
                 "</figcaption></figure>")
    if any(result.estimates[(c, 'all', kmax)]["is"] is not None for c in result.configs):
        shown = "; ".join(f"{c}: {_est(result.estimates[(c, 'all', kmax)]['is'])}" for c in result.configs)
        parts.append(f"<figure>{_svg(plot_internalization(result, k=kmax), title='Internalization Score')}"
                     f"<figcaption>IS@{kmax} per tier with Fieller {_e(level)} intervals; all tiers: {_e(shown)}."
                     "</figcaption></figure>")
    head = ("<tr><th>tier</th><th class='num'>k</th><th class='num'>n</th><th>Rc@k</th><th>Rf@k</th>"
            "<th>IS@k [Fieller]</th><th>IS bootstrap</th><th>IS delta (paper)</th></tr>")
    for c in result.configs:
        num = ' class="num"'
        body = ["<tr>" + "".join(f"<td{num if i in (1, 2) else ''}>{_e(v)}</td>"
                                 for i, v in enumerate(r)) + "</tr>" for r in _retrieval_rows(result, c)]
        parts.append(_table(head, body, caption=f"{c}: invalid names: {_invalid_text(result.invalid[c])}"))
    if comparisons is not None and len(comparisons.table):
        head = ("<tr><th>a</th><th>b</th><th>metric</th><th>tier</th><th class='num'>k</th><th>a \u2212 b [CI]</th>"
                "<th class='num'>only a / only b</th><th>McNemar</th><th>Holm</th></tr>")
        body = [f"<tr><td>{_e(r.config_a)}</td><td>{_e(r.config_b)}</td><td>{_e(r.metric)}</td><td>{_e(r.tier)}</td>"
                f"<td class='num'>{r.k}</td><td>{_e(fmt_estimate_ci(r.difference, (r.ci_low, r.ci_high)))}</td>"
                f"<td class='num'>{r.only_a} / {r.only_b}</td><td>{_e(fmt_p(r.p_mcnemar, prefix=False))}</td>"
                f"<td>{_e(fmt_p(r.p_holm, prefix=False))}</td></tr>" for r in comparisons.table.itertuples()]
        parts.append(_table(head, body, caption="Paired comparisons on the same queries (exact McNemar, Holm)"))
    return "\n".join(parts)


def _probe_block(probes):
    from ..plots import plot_probe_accuracy

    head = ("<tr><th>probe</th><th>configuration</th><th class='num'>n</th><th>accuracy [Wilson CI]</th>"
            "<th class='num'>chance</th><th>exact binomial p</th><th class='num'>invalid answers</th></tr>")
    body = []
    for key, r in probes.items():
        kind, name = key if isinstance(key, tuple) else (r.kind, key)
        body.append(f"<tr><td>{_e(kind.upper())}</td><td>{_e(name)}</td><td class='num'>{fmt_int(r.n)}</td>"
                    f"<td>{_e(fmt_estimate_ci(r.accuracy, r.ci))}</td><td class='num'>{r.chance:g}</td>"
                    f"<td>{_e(fmt_p(r.p_value, prefix=False))}</td><td class='num'>{r.n_invalid}</td></tr>")
    shown = "; ".join(f"{(k if isinstance(k, str) else ' '.join(map(str, k)))}: "
                      f"{fmt_estimate_ci(r.accuracy, r.ci)} (chance {r.chance:g})" for k, r in probes.items())
    return "\n".join(["<h3>Probe accuracy vs chance</h3>",
                      (f"<figure>{_svg(plot_probe_accuracy(probes), title='Probe accuracy')}<figcaption>Exact-match "
                      f"accuracy with Wilson intervals against the chance level: {_e(shown)}.</figcaption></figure>"),
                      _table(head, body)])


def _agreement_block(result):
    head = ("<tr><th>group</th><th class='num'>items</th><th class='num'>raters</th>"
            "<th class='num'>observed agreement</th><th class='num'>majority label share</th>"
            + "".join(f"<th>{_e(v)}</th>" for v in _COEF.values()) + "</tr>")
    body = []
    for g, sub in result.table.groupby("group", sort=False):
        f = sub.iloc[0]
        vals = {r.coefficient: fmt_estimate_ci(r.estimate, (r.ci_low, r.ci_high)) for r in sub.itertuples()}
        body.append(f"<tr><td>{_e(g)}</td><td class='num'>{int(f.n_items)}</td><td class='num'>{int(f.n_raters)}</td>"
                    f"<td class='num'>{fmt_num(f.percent_agreement)}</td><td class='num'>{fmt_num(f.majority_share)}"
                    "</td>" + "".join(f"<td>{_e(vals[c])}</td>" for c in _COEF) + "</tr>")
    note = ('<p class="muted">With skewed labels, kappa can be low although raters nearly always agree (the kappa '
            "paradox): compare it with the observed agreement, the majority share and AC1. "
            f"{_e(fmt_level(result.confidence_level))} item-bootstrap {_e(result.ci_method)} intervals.</p>")
    warn = "".join(f'<li class="warning">{_e(w)}</li>' for w in result.warnings)
    return "\n".join(["<h3>Annotator agreement</h3>", note, _table(head, body),
                      f'<ul class="notes">{warn}</ul>' if warn else ""])


def _baseline_block(result):
    rec = result.recall
    head = "<tr><th>method / scope</th><th>tier</th>" + "".join(f"<th>R@{k}</th>" for k in rec.ks) + "</tr>"
    body = ["<tr>" + f"<td>{_e(c)}</td><td>{t}</td>"
            + "".join(f"<td>{_e(_cell(rec.estimates[(c, t, k)]['rc']))}</td>" for k in rec.ks) + "</tr>"
            for c in rec.configs for t in _TIERS]
    rows = []
    for c, r in result.correct_set.items():
        for x in r.table.itertuples():
            rows.append(f"<tr><td>{_e(c)}</td><td>{_e(x.k_answers)}</td><td class='num'>{x.n}</td>"
                        f"<td>{_e(fmt_estimate_ci(x.delta, (x.ci_low, x.ci_high)))}</td>"
                        f"<td class='num'>{fmt_num(x.null_expected)}</td><td>{_e(fmt_p(x.p_value, prefix=False))}</td>"
                        f"<td class='num'>{fmt_num(x.first_listed_share)} / {fmt_num(x.first_listed_expected)}</td>"
                        "</tr>")
    head2 = ("<tr><th>ranker</th><th>K correct</th><th class='num'>n</th><th>\u03b4 over correct set [CI]</th>"
             "<th class='num'>uniform reference</th><th>p</th><th class='num'>first-listed wins / 1/K</th></tr>")
    return "\n".join([
        "<h3>Offline retrieval baselines (our measurements)</h3>",
        ('<p class="muted">BM25 (bm25s) and all-MiniLM-L6-v2 cosine retrieval computed by this package on the vendored '
        "RRB, within each query's 14-tool pool and over the union catalog of the file; these are not the paper's "
        "numbers.</p>"), _table(head, body),
        "<h3>Tool-selection bias among equally correct tools</h3>",
        ('<p class="muted">Which answer slot a ranker puts first when several tools are correct: TV to uniform '
        "(\u03b4) per answer-set size, with the exact expectation of a uniform chooser and a Monte-Carlo p-value.</p>"),
        _table(head2, rows)])


def render_toolsense_section(*, retrieval=None, comparisons=None, probes=None, agreement=None, baselines=None,
                             title="ToolSense diagnostics") -> str:
    """HTML fragment ``<section id="toolsense">`` with whichever results are given.

    Parameters
    ----------
    retrieval : RetrievalResult, optional
    comparisons : ComparisonResult, optional
    probes : dict of ProbeResult, optional
        Keyed by ``(kind, name)`` or name.
    agreement : AgreementResult, optional
    baselines : BaselineResult, optional
    title : str

    Returns
    -------
    str
    """
    parts = [f'<section id="toolsense">\n<h2>{_e(title)}</h2>']
    if retrieval is not None:   # issue 26: the sentences across configurations first, the recall figure next
        from ._summary import toolsense_summary

        summary = "".join(f"<li>{_e(x)}</li>" for x in toolsense_summary(retrieval, comparisons))
        parts.append(f'<ul class="summary" id="toolsense-summary">{summary}</ul>')
        parts.append(_recall_block(retrieval, comparisons))
    if probes:
        parts.append(_probe_block(probes))
    if agreement is not None:
        parts.append(_agreement_block(agreement))
    if baselines is not None:
        parts.append(_baseline_block(baselines))
    parts.append("</section>")
    return "\n".join(parts)


def render_toolsense_report(*, path=None, title="ToolSense diagnostics", **results) -> str:
    """A self-contained HTML page (inline CSS and SVG, no script) around :func:`render_toolsense_section`.

    Parameters
    ----------
    path : path-like, optional
        Where to write the page; nothing is written when omitted.
    title : str
    **results
        As for :func:`render_toolsense_section`.

    Returns
    -------
    str
    """
    from .. import __version__

    section = render_toolsense_section(title=title, **results)
    doc = html_page(title, section,
                    header=f'<p class="subtitle">generated by toolbias_stats <span class="version">{_e(__version__)}'
                           "</span></p>",
                    footer=f"Generated by toolbias_stats {_e(__version__)}. Self-contained: no external resource, "
                           "no script.")
    if path is not None:
        from .._output import write_text

        write_text(path, doc, option="path")   # atomic: nothing partial, no temporary file left (issue 21)
    return doc
