"""Self-contained HTML report of a bias analysis: tables, inline SVG figures, provenance.

The renderer reads a :class:`~toolbias_stats.Study` and a :class:`~toolbias_stats.BiasResult` and
computes nothing statistical: every number comes from the result (or the log's row counts), is
rounded by :mod:`toolbias_stats._format`, and every string that comes from a log, catalog or
manifest is HTML-escaped (``html.escape``) before it is written, in text, attributes and SVG titles.
The page loads nothing: CSS is inline, figures are inline SVG, there is no script, and a
Content-Security-Policy forbids any external fetch.
"""

from __future__ import annotations

import hashlib
import html
import io
import platform
import re
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from .._format import MISSING, fmt_ci, fmt_estimate_ci, fmt_int, fmt_level, fmt_mean_sd, fmt_num, fmt_p, fmt_range

if TYPE_CHECKING:
    import os
    from collections.abc import Iterable
    from typing import Literal

    from ..io import Study
    from ..metrics import BiasResult

__all__ = ["render_bias_report", "file_sha256"]

_METRIC_LABEL = {"delta_api": "\u03b4<sub>API</sub>", "delta_pos": "\u03b4<sub>pos</sub>",
                 "delta_model": "\u03b4<sub>model</sub>"}
_METRICS = ("delta_api", "delta_pos", "delta_model")
_CI_NAME = {"bca": "BCa", "percentile": "percentile", "none": "no"}

#: Deterministic SVG output: fixed id salt, no date or software stamp in the file.
_SVG_RC = {"svg.hashsalt": "toolbias_stats", "svg.fonttype": "path", "svg.image_inline": True}
_SVG_METADATA = {"Date": None, "Creator": None, "Format": None, "Type": None}

_CSS = """
:root { --fg: #1b1f24; --muted: #59636e; --line: #d0d7de; --head: #f3f5f7; --accent: #0b5cad; --warn: #8a4b00; }
* { box-sizing: border-box; }
body { margin: 0; color: var(--fg); background: #fff;
       font: 15px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif; }
main { max-width: 1240px; margin: 0 auto; padding: 24px 28px 64px; }
h1 { font-size: 1.6rem; margin: 0 0 4px; }
h2 { font-size: 1.25rem; margin: 40px 0 10px; padding-top: 8px; border-top: 2px solid var(--line); }
h3 { font-size: 1.05rem; margin: 28px 0 8px; }
p, li { max-width: 80ch; }
.muted { color: var(--muted); }
.subtitle { color: var(--muted); margin: 0 0 16px; }
nav ol { columns: 2; max-width: 60ch; padding-left: 1.2em; }
a { color: var(--accent); }
.table-wrap { overflow-x: auto; margin: 8px 0 14px; }
table { border-collapse: collapse; font-size: 0.86rem; }
caption { text-align: left; color: var(--muted); font-size: 0.85rem; padding: 2px 0 6px; caption-side: top; }
th, td { border-bottom: 1px solid var(--line); padding: 4px 10px; text-align: left; vertical-align: top; }
thead th { background: var(--head); border-bottom: 2px solid var(--line); white-space: nowrap; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
tbody tr:nth-child(even) td { background: #fafbfc; }
table.grouped tbody tr td { background: #fff; }
thead th { vertical-align: bottom; }
tr.total td { font-weight: 600; border-top: 2px solid var(--line); }
td.first-of-group { border-top: 2px solid var(--line); }
td.hash { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: 0.78rem;
          word-break: break-all; min-width: 32ch; }
td.path { word-break: break-all; }
dl.settings { display: grid; grid-template-columns: max-content 1fr; gap: 2px 18px; font-size: 0.9rem; }
dl.settings dt { color: var(--muted); }
dl.settings dd { margin: 0; }
figure { margin: 12px 0 8px; }
figure svg { display: block; width: 100%; height: auto; }
figcaption { color: var(--muted); font-size: 0.85rem; max-width: 100ch; }
.note { background: #f6f8fa; border-left: 4px solid var(--accent); padding: 8px 14px; margin: 10px 0;
        font-size: 0.9rem; }
.note p { margin: 4px 0; }
ul.notes li { margin: 4px 0; }
li.warning::marker { color: var(--warn); }
details { margin: 6px 0 12px; }
summary { cursor: pointer; color: var(--accent); }
.cluster { margin-bottom: 26px; }
.tables { display: flex; flex-wrap: wrap; gap: 10px 28px; align-items: flex-start; }
ul.findings > li { margin: 8px 0; }
ul.summary > li { margin: 6px 0; }
.first-screen { display: grid; grid-template-columns: minmax(0, 1fr) minmax(0, 1fr); gap: 20px; align-items: start; }
.first-screen figure { margin-top: 0; }
@media (max-width: 900px) { .first-screen { grid-template-columns: minmax(0, 1fr); } }
ul.findings ul { margin: 2px 0 0; padding-left: 1.2em; }
footer { margin-top: 48px; color: var(--muted); font-size: 0.8rem; }
@media (max-width: 1100px) { main { padding: 16px 14px 48px; } nav ol { columns: 1; } }
"""


def render_bias_report(study: Study, result: BiasResult, *, path: str | os.PathLike[str] | None = None,
                       title: str | None = None, extra_sections: Iterable[tuple[str, str, str]] = ()) -> str:
    """Render a bias analysis as one self-contained HTML page.

    Parameters
    ----------
    study : Study
        The study the result was computed from (:func:`toolbias_stats.read_study`); its log
        gives the row counts and reader diagnostics, its catalog the tool and cluster names.
    result : BiasResult
        Output of :func:`toolbias_stats.selection_bias` on ``study.log``.
    path : path-like, optional
        Where to write the page (UTF-8). Nothing is written when omitted.
    title : str, optional
        Page title; default ``"Tool-selection bias report: <study name>"``.
    extra_sections : sequence of (id, heading, html), optional
        Further sections rendered elsewhere (e.g. :func:`render_explain_section`), each a complete
        ``<section id=...>`` fragment; they are listed in the table of contents and placed before
        the notes.

    Returns
    -------
    str
        The complete HTML document.

    Notes
    -----
    Sections: provenance (package and schema versions, SHA-256 of every input file, seed,
    number of bootstrap replicates, confidence level, the generation settings recorded in the
    manifest), rows by status per model and run, the bias table in the style of BiasBusters
    Table 1 (mean ± sd over runs) with intervals, bias-corrected values, the uniform-chooser
    reference and p-values, one selection-rate figure and table per cluster, the API-vs-position
    chart, and notes (warnings of the result and reader diagnostics).

    The output depends only on ``study`` and ``result`` (and the versions of the software that
    draws the figures): no timestamp is written and the SVG ids are salted with a constant, so the
    same inputs give byte-identical pages.

    A folder input (e.g. a folder of transcripts) is hashed as the SHA-256 of its
    ``sha256sum``-style listing: one line ``<sha256>  <relative path>`` per file, sorted by path.

    Examples
    --------
    A small simulated study (one cluster of five tools); a real one comes from :func:`toolbias_stats.read_study`:

    >>> import toolbias_stats as tbs
    >>> from toolbias_stats.report import render_bias_report
    >>> from toolbias_stats.simulate import simulate_selection_log
    >>> log = simulate_selection_log(n_clusters=1, n_queries=10, rng=0).log
    >>> study = tbs.Study(log=log, catalog=log.catalog, name="simulated")
    >>> res = tbs.selection_bias(study.log, by="model", n_resamples=50, rng=1)
    >>> html = render_bias_report(study, res)          # path="report.html" also writes the page
    >>> html.startswith("<!DOCTYPE html>"), '<section id="bias">' in html
    (True, True)
    """
    from .. import __version__

    log = study.log
    name = str(getattr(study, "name", "") or "study")
    title = str(title) if title is not None else f"Tool-selection bias report: {name}"
    sections: list[tuple[str, str, str | None]] = [
        ("key-findings", "Key findings", _section_overview(study, result)),   # issue 26: the first screen
        ("provenance", "Provenance", _section_provenance(study, result, __version__)),
        ("rows", "Rows by status", _section_rows(log)),
        ("bias", "Bias (Table 1 style)", _section_bias(result)),
        ("clusters", "Selection rates per cluster", _section_clusters(study, result)),
        ("api-vs-position", "API bias vs position bias", _section_api_vs_position(result)),
    ]
    parts = [f'<section id="{sid}">\n<h2>{_e(head)}</h2>\n{content}\n</section>' for sid, head, content in sections]
    for sid, head, fragment in extra_sections:
        sections.append((sid, head, None))
        parts.append(fragment)
    sections.append(("notes", "Notes", None))
    parts.append(f'<section id="notes">\n<h2>Notes</h2>\n{_section_notes(study, result)}\n</section>')
    nav = "".join(f'<li><a href="#{_e(sid)}">{_e(head)}</a></li>' for sid, head, _ in sections)
    body = "\n".join(parts)
    header = (f'<p class="subtitle">Study: <strong>{_e(name)}</strong> &middot; generated by toolbias_stats\n'
              f'<span class="version">{_e(__version__)}</span> &middot; schema <span class="version">'
              f"{_e(log.schema_version)}</span></p>\n<nav><ol>{nav}</ol></nav>")
    doc = html_page(title, body, header=header,
                    footer=f'Generated by toolbias_stats <span class="version">{_e(__version__)}</span>. This page is '
                           "self-contained:\nit loads no external resource and runs no script.")
    if path is not None:
        from .._output import write_text

        write_text(path, doc, option="path")   # atomic: nothing partial, no temporary file left (issue 21)
    return doc


def html_page(title: str, content: str, *, header: str, footer: str) -> str:
    """The self-contained page every report uses: CSP (no script, no external load), inline CSS, escaped title.

    ``header`` (after the ``<h1>``), ``content`` and ``footer`` are HTML fragments whose text is already escaped.
    """
    from .. import __version__

    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; img-src data:">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="generator" content="toolbias_stats {_e(__version__)}">
<title>{_e(title)}</title>
<style>{_CSS}</style>
</head>
<body>
<main>
<header>
<h1>{_e(title)}</h1>
{header}
</header>
{content}
<footer>{footer}</footer>
</main>
</body>
</html>
"""


# -- sections ------------------------------------------------------------------------------------
def _section_overview(study, result) -> str:
    """Issue 26: the overview figure and at most five sentences first; heatmaps; per-group findings collapsed."""
    from ..plots import plot_bias_overview, plot_rate_gaps
    from ._summary import bias_summary

    level = fmt_level(result.confidence_level)
    summary = "".join(f"<li>{_e(x)}</li>" for x in bias_summary(result, study.catalog))
    fig = _svg(plot_bias_overview(result), title="Bias per group: δ_API and δ_pos, bias-corrected with calibrated "
                                                "intervals, and the fair-chooser reference, largest first")
    parts = [f'<div class="first-screen"><ul class="summary" id="summary">{summary}</ul>',
             (f'<figure id="overview-figure">{fig}<figcaption>&delta;<sub>API</sub> (circles) and &delta;<sub>pos'
             f"</sub> (squares) per group, largest bias at the top: bias-corrected estimate with its {_e(level)} "
             "calibrated interval (the interval to report; the same numbers as the first column of the detailed "
             "bias table); filled when distinguishable from a fair chooser; grey tick: the plug-in &delta; a fair "
             "chooser shows from noise alone with the same counts.</figcaption></figure></div>")]
    kinds: tuple[tuple[Literal["tool", "position"], str], ...] = (
        ("tool", "tool (numbered as in the per-cluster figures)"), ("position", "list position"))
    for kind, what in kinds:
        hm = plot_rate_gaps(result, study.catalog, kind=kind)
        if hm is None:
            continue
        svg = _svg(hm, title=f"Selection rate minus 1/K by {kind} and group, one panel per cluster")
        parts.append(f'<figure id="overview-{kind}-heatmap">{svg}<figcaption>Where the bias sits: selection rate '
                     f"minus the fair rate 1/K by {_e(what)} and group, one panel per cluster (red: chosen more "
                     "often than a fair chooser would, blue: less).</figcaption></figure>")
    parts.append(f"<details><summary>Findings per group</summary>{_section_findings(study, result)}</details>")
    return "\n".join(parts)


def _section_findings(study, result) -> str:
    from ._findings import key_findings

    items = []
    for f in key_findings(result, study.catalog):
        sentences = "".join(f"<li>{_e(x)}</li>" for x in f.sentences)
        items.append(f"<li><strong>{_e(f.label)}</strong><ul>{sentences}</ul></li>")
    return (f'<ul class="findings">{"".join(items)}</ul>\n<p class="muted">Generated from the numbers below '
            "(estimates with query-bootstrap intervals; bias-corrected values with calibrated intervals; the "
            "uniform-chooser reference and the p-value of \u201cno bias\u201d).</p>")


def _section_provenance(study, result, version) -> str:
    log = study.log
    by = ", ".join(result.by) if result.by else "(none: all rows pooled)"
    settings = [
        ("study", _e(study.name)),
        ("manifest", _e(_display_path(study.path, _base(study)) if study.path else MISSING)),
        ("toolbias_stats", f'<span class="version">{_e(version)}</span>'),
        ("schema version", f'<span class="version">{_e(log.schema_version)}</span>'),
        ("software", f'<span class="version">{_e(_software())}</span>'),
        ("rows in the log", _e(fmt_int(len(log.data)))),
        ("groups (by)", _e(by)),
        ("bootstrap", _e(f"{fmt_int(result.n_resamples)} replicates, resampling unit: {result.resample} "
                         f"(queries within each cluster; all rotations and runs of a query together)"
                         if result.resample == "query" else
                         f"{fmt_int(result.n_resamples)} replicates: {getattr(result, 'interval_method', '')} "
                         "(aggregated counts without per-query rows: no query bootstrap is possible)")),
        ("delta_pos computed on", _e(f"{getattr(result, 'position_label', '')} "
                                     f"(position={getattr(result, 'position', 'cluster_rank')!r})"
                                     + "".join(f"; not computed for {', '.join(map(str, g.keys.values())) or 'all'}"
                                               f" ({g.position_note})" for g in result.groups
                                               if getattr(g, "position_note", None)))),
        ("confidence level", _e(fmt_level(result.confidence_level))),
        ("interval of the estimate", _e(_CI_NAME.get(result.ci_method, result.ci_method))),
        ("uniform-chooser draws (p-values)", _e(fmt_int(result.n_null))),
        ("seed (rng)", _e(MISSING if result.seed is None else result.seed)),
    ]
    cluster_source = (getattr(study, "settings", None) or {}).get("cluster_source")
    if cluster_source:   # clusters declared in the manifest, read from a clusters_file or inferred (issue 13)
        settings.append(("clusters", _e(cluster_source["detail"])))
    dl = "".join(f"<dt>{k}</dt><dd>{v}</dd>" for k, v in settings)
    return (f'<dl class="settings">{dl}</dl>\n<h3>Input files</h3>\n{_files_table(study)}\n'
            f"<h3>Generation settings</h3>\n{_generation_table(log)}")


def _files_table(study) -> str:
    from ._provenance import input_files  # manifest, logs and every side file (responses, clusters_file, ...)

    base = _base(study)
    body = []
    for kind, p, n in input_files(study):
        digest = file_sha256(p)
        body.append(f'<tr><td>{_e(kind)}</td><td class="path">{_e(_display_path(p, base))}</td>'
                    f'<td class="num">{_e(fmt_int(n) if n is not None else "")}</td>'
                    f'<td class="hash">{_e(digest or "(not a file on disk)")}</td></tr>')
    head = "<tr><th>kind</th><th>file</th><th class=\"num\">rows</th><th>SHA-256</th></tr>"
    cap = ("Paths relative to the manifest's folder. A folder is hashed as the SHA-256 of its sha256sum-style "
           "listing (one line per file, sorted by relative path).")
    return _table(head, body, caption=cap)


def _generation_table(log) -> str:
    data = log.data
    cols = [c for c in log.design_columns if c not in ("model", "run")]
    body = []
    for model, sub in data.groupby("model", sort=True):
        runs = ", ".join(str(int(r)) for r in sorted(sub["run"].unique()))
        cells = [f"<td>{_e(model)}</td>", f'<td class="num">{_e(runs)}</td>']
        for c in cols:
            vals = sub[c].dropna().unique().tolist()
            shown = ", ".join(_plain(v) for v in sorted(vals, key=str)) if vals else MISSING
            cells.append(f"<td>{_e(shown)}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    head = "<tr><th>model</th><th class=\"num\">runs</th>" + "".join(f"<th>{_e(c)}</th>" for c in cols) + "</tr>"
    return _table(head, body, caption="Values recorded in the manifest for each model (all runs).")


def _section_rows(log) -> str:
    summary = log.summary(by=["model", "run"])
    summary = summary.sort_values(["model", "run"], kind="stable").reset_index(drop=True)
    count_cols = [c for c in summary.columns if c not in ("model", "run")]
    body = []
    for _, r in summary.iterrows():
        cells = [f"<td>{_e(r['model'])}</td>", f'<td class="num">{_e(int(r["run"]))}</td>']
        cells += [f'<td class="num">{_e(fmt_int(r[c]))}</td>' for c in count_cols]
        body.append("<tr>" + "".join(cells) + "</tr>")
    totals = summary[count_cols].sum()
    body.append('<tr class="total"><td>all</td><td></td>'
                + "".join(f'<td class="num">{_e(fmt_int(totals[c]))}</td>' for c in count_cols) + "</tr>")
    head = ("<tr><th>model</th><th class=\"num\">run</th>"
            + "".join(f'<th class="num">{_e(c)}</th>' for c in count_cols) + "</tr>")
    cap = ("Every attempt of the log, by status; only rows with status \u201cok\u201d enter the selection rates, "
           "the others are excluded and counted here.")
    return _table(head, body, caption=cap)


def _section_bias(result) -> str:
    level = fmt_level(result.confidence_level)
    ci_name = _CI_NAME.get(result.ci_method, result.ci_method)
    keys = list(result.by)
    key_heads = "".join(f"<th>{_e(k)}</th>" for k in keys) or "<th>group</th>"

    # Compact table, as in the paper.
    body = []
    for g in result.groups:
        cells = _key_cells(g, keys)
        n_runs = max((getattr(g, m).n_runs for m in _METRICS if getattr(g, m) is not None), default=0)
        cells.append(f'<td class="num">{_e(n_runs)}</td>')
        for m in _METRICS:
            r = getattr(g, m)
            cells.append(f'<td class="num">{_e(_mean_sd(r)) if r else _NO_POS}</td>')
        body.append("<tr>" + "".join(cells) + "</tr>")
    head = (f"<tr>{key_heads}<th class=\"num\">runs</th>"
            + "".join(f'<th class="num">{_METRIC_LABEL[m]}</th>' for m in _METRICS) + "</tr>")
    compact = _table(head, body, caption="Mean over clusters and runs \u00b1 standard deviation over runs "
                                         "(BiasBusters Table 1).")

    # Detailed table: one row per group and metric.
    body = []
    for g in result.groups:
        first = True
        for m in _METRICS:
            r = getattr(g, m)
            cls = ' class="first-of-group"' if first else ""
            cells = []
            if first:
                cells = [c.replace("<td", f'<td rowspan="3"{cls}', 1) for c in _key_cells(g, keys)]
            cells.append(f"<td{cls}>{_METRIC_LABEL[m]}</td>")
            if r is None:
                cells.append(f'<td colspan="6"{cls}>{_NO_POS}</td>')
            else:
                corrected = fmt_estimate_ci(r.corrected, r.corrected_ci)
                if np.isfinite(r.corrected) and not np.all(np.isfinite(r.corrected_ci)):
                    corrected += " (no interval)"
                # no plug-in bootstrap interval (issue 35: near uniformity it covers neither the true delta nor
                # E[plug-in]; it stays in the JSON as ci)
                vals = [corrected, _mean_sd(r), fmt_num(r.pooled),
                        fmt_num(r.null_expected), fmt_p(r.p_value, prefix=False),
                        f"{fmt_int(g.rows['used'])} / {fmt_int(g.rows['total'] - g.rows['used'])}"]
                cells += [f'<td class="num"{cls}>{_e(v)}</td>' for v in vals]
            body.append("<tr>" + "".join(cells) + "</tr>")
            first = False
    head = (f"<tr>{key_heads}<th>metric</th>"
            f"<th class=\"num\">true &delta;: bias-corrected<br>[{_e(level)} calibrated CI]</th>"
            "<th class=\"num\">plug-in: mean \u00b1 sd<br>over runs</th>"
            "<th class=\"num\">pooled<br>runs</th>"
            "<th class=\"num\">uniform<br>chooser</th><th class=\"num\">p<br>(no bias)</th>"
            "<th class=\"num\">rows used /<br>excluded</th></tr>")
    detailed = _table(head, body, caption="Each metric with its uncertainty (one block of rows per group).",
                      cls="grouped")
    nulls = [getattr(g, m).null_expected for g in result.groups for m in ("delta_api", "delta_pos")
             if getattr(g, m) is not None]
    note = f"""<div class="note">
<p><strong>How to read this.</strong> Each &delta; is a total-variation (TV) distance between the observed choice
distribution and the uniform one (&frac12;&sum;|p<sub>i</sub> &minus; 1/K|): 0 means every tool (&delta;<sub>API</sub>)
or every list position (&delta;<sub>pos</sub>) is chosen equally often; 1 &minus; 1/K means always the same one.
&delta;<sub>model</sub> is their average. As in BiasBusters Table 1, the estimate is the mean over clusters, then over
runs, &plusmn; the standard deviation over runs; the intervals come from {_e(fmt_int(result.n_resamples))}
bootstrap replicates that {"resample queries" if result.resample == "query" else
"resample queries where a cluster has per-query rows and otherwise draw the attempts (" +
_e(getattr(result, "interval_method", "")) + ")"}.</p>
<p><strong>Plug-in bias.</strong> The TV of the <em>observed</em> rates overstates the true bias: sampling noise alone
makes observed rates uneven, so even a perfectly fair (uniform) chooser with the same numbers of valid choices would
score about {_e(fmt_range(nulls))} here (column &ldquo;uniform chooser&rdquo;). The <em>bias-corrected</em> column
(first) removes this upward bias, and its calibrated interval is the one meant to cover the true TV at the stated
level (test inversion on the same bootstrap replicates): it is the interval to report. The plug-in's own bootstrap
interval ({_e(ci_name)}, in the JSON as <code>ci</code>) is not shown: near uniformity it covers neither the true TV nor
the expected plug-in value. {_p_note(result)}</p>
</div>"""
    return f"{compact}\n{note}\n{detailed}"


def _p_note(result) -> str:
    """What the p-value column is (issue 21: the test keeps the resampling unit; multinomial only where it must)."""
    methods = {getattr(g, m).p_value_method for g in result.groups for m in _METRICS if getattr(g, m) is not None}
    query = any(pm.startswith("query bootstrap") for pm in methods)
    multi = any(pm.startswith("uniform multinomial") for pm in methods)
    text = []
    if query:
        text.append(f"The p-value of &ldquo;no bias&rdquo; compares the estimate with a fair chooser that has the "
                    f"observed differences between queries (centred query-bootstrap replicates, "
                    f"{_e(fmt_int(result.n_resamples))}; it cannot go below 1/(replicates + 1)).")
    if multi:
        text.append(f"{'Where there are no per-query rows (or no bootstrap), the' if query else 'The'} p-value is "
                    f"that of a uniform multinomial chooser ({_e(fmt_int(result.n_null))} draws), which assumes "
                    "independent attempts: too small when queries differ.")
    if any("exact multinomial" in pm for pm in methods):
        text.append("Where a cluster has one valid attempt per query the attempts are independent and the uniform "
                    "multinomial chooser is the exact reference (ties of the statistic broken by the squared "
                    "deviations): the query bootstrap's null is too narrow there.")
    return " ".join(text)


def _section_clusters(study, result) -> str:
    from ..plots import plot_selection_rates
    from ..plots._bias import tool_labels

    catalog = study.catalog
    present = {str(c.cluster) for g in result.groups for c in g.clusters}
    order = [c for c in catalog.clusters if c in present] + sorted(present - set(catalog.clusters))
    level = fmt_level(result.confidence_level)
    keys = list(result.by)
    key_heads = "".join(f"<th>{_e(k)}</th>" for k in keys) or "<th>group</th>"
    parts = [(f'<p class="muted">One figure per cluster: the selection rate of each tool per group, with '
             f"{_e(level)} query-bootstrap intervals (Wilson where no bootstrap was run) and the uniform rate 1/K "
             "(dashed). The tables give the full tool names and the cluster's own bias per group "
             "(percentile intervals).</p>")]
    names = _cluster_names(catalog)
    for cid in order:
        entries = [(g, c) for g in result.groups for c in g.clusters if str(c.cluster) == cid]
        k = entries[0][1].K
        cname = names.get(cid, "")
        heading = f"Cluster {cid}" + (f": {cname}" if cname else "") + f" (K = {k})"
        fig = plot_selection_rates(result, cluster=cid, catalog=catalog)
        svg = _svg(fig, title=f"Selection rates per tool, {heading}")
        # per-cluster bias table
        body = []
        for g, c in entries:
            cells = _key_cells(g, keys)
            cells.append(f'<td class="num">{_e(fmt_int(c.n_used))}</td>')
            for m in ("delta_api", "delta_pos"):
                r = getattr(c, m)
                if r is None:
                    cells.append(f'<td colspan="2">{_NO_POS}</td>')
                else:
                    cells.append(f'<td class="num">{_e(_mean_sd(r))}</td>')
                    cells.append(f'<td class="num">{_e(fmt_ci(r.ci))}</td>')
            null = c.delta_api.null_expected
            cells.append(f'<td class="num">{_e(fmt_num(null))}</td>')
            body.append("<tr>" + "".join(cells) + "</tr>")
        head = (f"<tr>{key_heads}<th class=\"num\">n used</th>"
                f"<th class=\"num\">{_METRIC_LABEL['delta_api']} (mean \u00b1 sd)</th>"
                f"<th class=\"num\">{_e(level)} CI</th>"
                f"<th class=\"num\">{_METRIC_LABEL['delta_pos']} (mean \u00b1 sd)</th>"
                f"<th class=\"num\">{_e(level)} CI</th>"
                "<th class=\"num\">uniform chooser</th></tr>")
        bias_table = _table(head, body, caption=f"Cluster {cid}" + (f" ({cname})" if cname else "")
                            + f", K = {k}: bias per group")
        # tool key
        tools = list(entries[0][1].tools)
        full = tool_labels(tools, catalog, cid)
        # this cluster's rows: a tool id may be in several clusters (issue 36)
        meta = catalog.table[catalog.table["cluster_id"] == str(cid)].set_index("tool_id")
        tbody = []
        for i, (t, label) in enumerate(zip(tools, full), start=1):
            api = _plain(meta.at[t, "api_name"]) if t in meta.index else ""
            tbody.append(f'<tr><td class="num">{i}</td><td>{_e(label)}</td><td>{_e(api)}</td>'
                         f'<td class="path">{_e(t)}</td></tr>')
        key_table = _table("<tr><th class=\"num\">#</th><th>tool</th><th>API</th><th>tool_id</th></tr>", tbody,
                           caption="Tools in catalog order (numbers as in the figure)")
        # rates (collapsed)
        rbody = []
        for i, t in enumerate(tools, start=1):
            cells = [f'<td class="num">{i}</td><td>{_e(full[i - 1])}</td>']
            for _g, c in entries:
                row = c.rate_table.set_index("tool_id").loc[t] if t in set(c.rate_table["tool_id"]) else None
                if row is None:
                    cells.append(f"<td>{MISSING}</td>")
                    continue
                lo, hi = row["bootstrap_low"], row["bootstrap_high"]
                if not (np.isfinite(lo) and np.isfinite(hi)):
                    lo, hi = row["wilson_low"], row["wilson_high"]
                cells.append(f'<td class="num">{_e(fmt_estimate_ci(row["rate"], (lo, hi)))}</td>')
            rbody.append("<tr>" + "".join(cells) + "</tr>")
        rhead = ("<tr><th class=\"num\">#</th><th>tool</th>"
                 + "".join(f'<th class="num">{_e(_group_text(g))}</th>' for g, _ in entries) + "</tr>")
        rates_table = _table(rhead, rbody, caption=f"Selection rate [{level} CI] per tool and group")
        parts.append(f"""<div class="cluster" id="cluster-{_e(_slug(cid))}">
<h3>{_e(heading)}</h3>
<figure>{svg}<figcaption>Selection rate per tool and group in cluster {_e(cid)}; error bars: {_e(level)} CI;
dashed line: uniform rate 1/K. The cluster's &delta;<sub>API</sub> per group: {_e(_estimates(entries, level))}.
</figcaption></figure>
<div class="tables">{key_table}{bias_table}</div>
<details><summary>Selection rates as a table</summary>{rates_table}</details>
</div>""")
    return "\n".join(parts)


def _section_api_vs_position(result) -> str:
    from ..plots import plot_api_vs_position

    if not any(g.delta_pos is not None for g in result.groups):
        return '<p class="muted">No group has recorded positions, so position bias cannot be shown.</p>'
    fig = plot_api_vs_position(result, clusters=True)
    svg = _svg(fig, title="API bias against position bias per group and per cluster")
    level = fmt_level(result.confidence_level)
    shown = "; ".join(f"{_group_text(g)}: \u03b4_API {fmt_estimate_ci(g.delta_api.mean_over_runs, g.delta_api.ci)}, "
                      f"\u03b4_pos {fmt_estimate_ci(g.delta_pos.mean_over_runs, g.delta_pos.ci)}"
                      for g in result.groups if g.delta_pos is not None)
    return (f"""<figure>{svg}<figcaption>Left: each group's &delta;<sub>API</sub> (x) against &delta;<sub>pos</sub>
(y), mean over clusters and runs, with {_e(level)} intervals ({_e(shown)}). Right: the same for every group and """
            """cluster (cluster ids
next to the points). Grey bands: the value a uniform chooser would show from sampling noise alone. Dotted diagonal:
equal API and position bias; points above it are driven more by list position than by the tool itself
(cf. BiasBusters Fig. 4).</figcaption></figure>""")


def _section_notes(study, result) -> str:
    items = [f'<li class="warning">{_e(w)}</li>' for w in result.warnings]
    base = _base(study)
    diags = study.log.diagnostics or {}
    mismatches = []
    for src, diag in diags.items():
        if not isinstance(diag, dict):
            continue
        short = _display_path(src, base)
        if diag.get("position_mismatch"):
            mismatches.append((short, int(diag["position_mismatch"]), diag.get("records")))
        unresolved = diag.get("unresolved")
        if unresolved:
            total = sum(int(v) for v in dict(unresolved).values())
            items.append(f'<li class="warning">{_e(short)}: {_e(fmt_int(total))} tool names could not be matched '
                         f"to the catalog: {_e(_counts_text(unresolved))}.</li>")
    if mismatches:
        total = sum(n for _, n, _ in mismatches)
        body = [f'<tr><td class="path">{_e(f)}</td><td class="num">{_e(fmt_int(n))}</td>'
                f'<td class="num">{_e(fmt_int(rec) if rec is not None else MISSING)}</td></tr>'
                for f, n, rec in mismatches]
        table = _table('<tr><th>file</th><th class="num">mismatches</th><th class="num">records</th></tr>', body)
        items.append(f'<li class="warning">Position mismatches: in {_e(fmt_int(total))} records of '
                     f"{_e(fmt_int(len(mismatches)))} file{'s' if len(mismatches) != 1 else ''} the recorded position "
                     "disagrees with the one implied by "
                     "the rotation formula; the recorded position is kept."
                     f"<details><summary>Per file</summary>{table}</details></li>")
    out = (f'<ul class="notes">{"".join(items)}</ul>' if items
           else '<p class="muted">No warnings and no reader diagnostics.</p>')
    if diags:
        body = []
        for src, diag in diags.items():
            text = "; ".join(f"{k}: {_diag_value(v)}" for k, v in diag.items()) if isinstance(diag, dict) \
                else _plain(diag)
            body.append(f'<tr><td class="path">{_e(_display_path(src, base))}</td><td>{_e(text)}</td></tr>')
        out += ("\n<details><summary>All reader diagnostics</summary>"
                + _table("<tr><th>file</th><th>diagnostics</th></tr>", body) + "</details>")
    return out


# -- helpers --------------------------------------------------------------------------------------
_NO_POS = '<span class="muted">positions not recorded</span>'


#: Bidirectional-text controls (embeddings, overrides, isolates, marks): shown as visible ``[U+202E]``
#: markers, so that untrusted names cannot reorder what a reader sees ("Trojan Source", CVE-2021-42574).
_BIDI = re.compile("[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def _e(s) -> str:
    """HTML-escape any value (text and attributes: quotes too); bidi controls become visible markers."""
    return html.escape(_BIDI.sub(lambda m: f"[U+{ord(m.group()):04X}]", str(s)), quote=True)


#: Tables with more rows than this are collapsed (``<details>``) by default.
COLLAPSE_ROWS = 10


def _table(head, body, caption=None, cls=None) -> str:
    cap = f"<caption>{_e(caption)}</caption>" if caption else ""
    klass = f' class="{cls}"' if cls else ""
    table = (f'<div class="table-wrap"><table{klass}>{cap}<thead>{head}</thead><tbody>' + "\n".join(body)
             + "</tbody></table></div>")
    if len(body) > COLLAPSE_ROWS:
        summary = f"{_e(caption) if caption else 'Table'} ({len(body)} rows)"
        return f'<details class="table-collapse"><summary>{summary}</summary>{table}</details>'
    return table


def _mean_sd(r) -> str:
    """``mean ± sd`` over runs; with a single run there is no spread to show."""
    if r.n_runs < 2:
        return f"{fmt_num(r.mean_over_runs)} (1 run)" if r.n_runs == 1 else fmt_num(r.mean_over_runs)
    return fmt_mean_sd(r.mean_over_runs, r.sd_over_runs)


def _key_cells(g, keys) -> list:
    if not keys:
        return ["<td>all</td>"]
    return [f"<td>{_e(_plain(g.keys.get(k)))}</td>" for k in keys]


def _estimates(entries, level) -> str:
    """``group: estimate [CI]`` for the figure caption of one cluster."""
    return "; ".join(f"{_group_text(g)} {fmt_estimate_ci(c.delta_api.mean_over_runs, c.delta_api.ci)}"
                     for g, c in entries) + f" ({level} CI)"


def _group_text(g) -> str:
    return ", ".join(_plain(v) for v in g.keys.values()) if g.keys else "all"


def _plain(v) -> str:
    if v is None:
        return MISSING
    if isinstance(v, (float, np.floating)):
        return MISSING if not np.isfinite(v) else f"{float(v):g}"
    try:
        if pd.isna(v):
            return MISSING
    except (TypeError, ValueError):
        pass
    return str(v)


def _counts_text(counts, limit=20) -> str:
    items = sorted(dict(counts).items(), key=lambda kv: (-int(kv[1]), str(kv[0])))
    text = ", ".join(f"{k!s} ({int(v)})" for k, v in items[:limit])
    return text + (f", \u2026 ({len(items) - limit} more)" if len(items) > limit else "")


def _diag_value(v) -> str:
    if isinstance(v, dict):
        return "{" + _counts_text(v) + "}" if all(isinstance(x, (int, np.integer)) for x in v.values()) \
            else "{" + ", ".join(f"{k}: {_plain(x)}" for k, x in v.items()) + "}"
    if isinstance(v, (list, tuple)):
        return ", ".join(_plain(x) for x in v[:20]) + (", \u2026" if len(v) > 20 else "")
    return _plain(v)


def _cluster_names(catalog) -> dict:
    tab = catalog.table
    if "cluster_name" not in tab.columns:
        return {}
    out = {}
    for cid, name in zip(tab["cluster_id"], tab["cluster_name"]):
        if str(cid) not in out and _plain(name) != MISSING:
            out[str(cid)] = _plain(name)
    return out


def _slug(s) -> str:
    return re.sub(r"[^A-Za-z0-9_-]+", "-", str(s)).strip("-") or "x"


def _base(study):
    p = getattr(study, "path", None)
    return Path(p).resolve().parent if p is not None else None


def _display_path(p, base) -> str:
    """A path relative to the manifest's folder when it lies below it, else as given."""
    s = str(p)
    if base is None:
        return s
    try:
        return Path(s).resolve().relative_to(base).as_posix()
    except (ValueError, OSError):
        return s


def file_sha256(path: str | os.PathLike[str]) -> str | None:
    """SHA-256 (hex) of a file, or of a folder's sorted ``sha256sum`` listing; None when there is no such path.

    Parameters
    ----------
    path : path-like

    Returns
    -------
    str or None
        For a folder: the SHA-256 of the text made of one line ``"<sha256>  <relative/posix/path>\\n"``
        per file below it, sorted by relative path, which is what
        ``(cd DIR && find . -type f -printf '%P\\n' | LC_ALL=C sort | xargs sha256sum) | sha256sum`` prints.

    Examples
    --------
    >>> import tempfile
    >>> from pathlib import Path
    >>> folder = Path(tempfile.mkdtemp())
    >>> _ = (folder / "a.txt").write_text("hello\\n")
    >>> file_sha256(folder / "a.txt")                      # the same as `sha256sum a.txt`
    '5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03'
    >>> file_sha256(folder / "missing") is None
    True
    """
    p = Path(str(path))
    try:
        if p.is_file():
            return _sha256_file(p)
        if p.is_dir():
            files = sorted((f for f in p.rglob("*") if f.is_file()), key=lambda f: f.relative_to(p).as_posix())
            listing = "".join(f"{_sha256_file(f)}  {f.relative_to(p).as_posix()}\n" for f in files)
            return hashlib.sha256(listing.encode("utf-8")).hexdigest()
    except OSError:
        return None
    return None


def _sha256_file(p: Path) -> str:
    h = hashlib.sha256()
    with p.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _software() -> str:
    import matplotlib

    return (f"Python {platform.python_version()}, numpy {np.__version__}, pandas {pd.__version__}, "
            f"matplotlib {matplotlib.__version__}")


_SVG_HEAD = re.compile(r"\A.*?(<svg\b)", re.S)
_SVG_METADATA_RE = re.compile(r"<metadata>.*?</metadata>\s*", re.S)
_SVG_SIZE = re.compile(r'<svg\b([^>]*?)\swidth="([\d.]+)pt"\sheight="([\d.]+)pt"')


def _svg(fig, *, title) -> str:
    """The figure as inline SVG (deterministic), with an escaped ``<title>`` for tooltips and screen readers."""
    import matplotlib

    buf = io.StringIO()
    with matplotlib.rc_context(_SVG_RC):
        fig.savefig(buf, format="svg", metadata=dict(_SVG_METADATA))
    svg = buf.getvalue()
    # Drop the XML declaration and DOCTYPE (not allowed inside HTML) and the RDF metadata block.
    svg = _SVG_HEAD.sub(r"\1", svg, count=1)
    svg = _SVG_METADATA_RE.sub("", svg, count=1)
    # matplotlib writes every text it draws into comments as well: drop them (smaller page; no untrusted text)
    svg = re.sub(r"<!--.*?-->", "", svg, flags=re.S)
    m = _SVG_SIZE.search(svg)
    if m:
        width = m.group(2)
        svg = _SVG_SIZE.sub(lambda mm: f'<svg{mm.group(1)} style="max-width: {width}pt"', svg, count=1)
    t = _e(title)
    # A function as replacement: the (escaped) title must never be read as a regex template.
    svg = re.sub(r"<svg\b([^>]*)>", lambda mm: f'<svg{mm.group(1)} role="img" aria-label="{t}"><title>{t}</title>',
                 svg, count=1)
    return svg
