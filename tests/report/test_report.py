"""Tests of the HTML report and its number formatting (toolbias_stats.report)."""

from __future__ import annotations

import hashlib
import html
import os
import re
from pathlib import Path

import numpy as np
import pytest
from tiny_study import MALICIOUS_API, MALICIOUS_TOOL, MODEL_A, UNRESOLVED
from tiny_study import tiny_study as _tiny_study

import toolbias_stats as tbs
from toolbias_stats._format import (
    MISSING,
    fmt_ci,
    fmt_estimate_ci,
    fmt_int,
    fmt_level,
    fmt_mean_sd,
    fmt_num,
    fmt_p,
    fmt_range,
)
from toolbias_stats.report import render_bias_report
from toolbias_stats.report._render_html import file_sha256

GOLDEN = Path(__file__).resolve().parent / "golden" / "tiny_report.html"


@pytest.fixture(scope="module")
def study():
    return _tiny_study()


@pytest.fixture(scope="module")
def result(study):
    return tbs.selection_bias(study.log, by="model", n_resamples=50, n_null=200, rng=0)


@pytest.fixture(scope="module")
def page(study, result):
    return render_bias_report(study, result)


def _normalise(doc: str) -> str:
    """What the golden file pins: everything except software versions and the figures' SVG drawing."""
    doc = re.sub(r'<span class="version">[^<]*</span>', '<span class="version">X</span>', doc)
    doc = re.sub(r'<meta name="generator" content="[^"]*">', '<meta name="generator" content="X">', doc)
    return re.sub(r"<svg\b.*?</svg>", "<svg/>", doc, flags=re.S)


# -- formatting -----------------------------------------------------------------------------------
class TestFormat:
    def test_numbers(self):
        assert fmt_num(0.36965) == "0.370"
        assert fmt_num(-0.0001) == "0.000"
        assert fmt_num(float("nan")) == MISSING
        assert fmt_num(None) == MISSING
        assert fmt_int(14997) == "14,997"

    def test_intervals(self):
        assert fmt_ci((0.35637, 0.37798)) == "[0.356, 0.378]"
        assert fmt_ci((np.nan, 0.3)) == MISSING
        assert fmt_estimate_ci(0.36965, (0.35637, 0.37798)) == "0.370 [0.356, 0.378]"
        assert fmt_estimate_ci(0.344, (np.nan, np.nan)) == "0.344"
        assert fmt_mean_sd(0.3696, 0.0052) == "0.370 \u00b1 0.005"

    def test_p_values(self):
        assert fmt_p(0.0004999) == "p < 0.001"
        assert fmt_p(0.001) == "p = 0.001"
        assert fmt_p(0.0196, prefix=False) == "0.020"
        assert fmt_p(np.nan) == MISSING

    def test_levels_and_ranges(self):
        assert fmt_level(0.95) == "95%"
        assert fmt_level(0.975) == "97.5%"
        assert fmt_range([0.0357, 0.0441]) == "0.036\u20130.044"
        assert fmt_range([0.0357, 0.0359]) == "0.036"


# -- report content ---------------------------------------------------------------------------------
class TestRenderBiasReport:
    def test_sections(self, page):
        for sid, head in (("provenance", "Provenance"), ("rows", "Rows by status"), ("bias", "Bias (Table 1 style)"),
                          ("clusters", "Selection rates per cluster"), ("api-vs-position", "API bias vs position bias"),
                          ("notes", "Notes")):
            assert f'<section id="{sid}">' in page
            assert f"<h2>{html.escape(head)}</h2>" in page
        assert page.count('<div class="cluster"') == 2
        # one figure per cluster + the API-vs-position chart + the first screen (issue 26): overview, tool and
        # position heatmaps
        assert page.count("<svg") == 6

    def test_provenance(self, page, result):
        assert f'<span class="version">{tbs.__version__}</span>' in page
        assert f'<span class="version">{tbs.SCHEMA_VERSION}</span>' in page
        assert "<dt>seed (rng)</dt><dd>0</dd>" in page
        assert "<dt>confidence level</dt><dd>95%</dd>" in page
        assert "50 replicates, resampling unit: query" in page
        assert "<th>temperature</th>" in page and "<td>0.5</td>" in page  # generation settings

    def test_rows_by_status(self, page, study):
        summary = study.log.summary(by=["model", "run"])
        for s in tbs.STATUSES:
            assert f'<th class="num">{s}</th>' in page
        assert ('<tr class="total"><td>all</td><td></td><td class="num">144</td><td class="num">140</td>'
                '<td class="num">4</td><td class="num">0</td><td class="num">0</td><td class="num">0</td>'
                '<td class="num">0</td></tr>') in page
        assert int(summary["total"].sum()) == 144

    def test_bias_numbers_as_formatted(self, page, result):
        for g in result.groups:
            for m in ("delta_api", "delta_pos", "delta_model"):
                r = getattr(g, m)
                assert html.escape(fmt_mean_sd(r.mean_over_runs, r.sd_over_runs)) in page
                # the plug-in's bootstrap interval is not shown (issue 35); the calibrated one is
                assert fmt_estimate_ci(r.corrected, r.corrected_ci) in page
                assert fmt_num(r.null_expected) in page
            assert fmt_estimate_ci(g.delta_api.corrected, g.delta_api.corrected_ci) in page
            assert html.escape(fmt_p(g.delta_api.p_value, prefix=False)) in page
            for c in g.clusters:
                assert fmt_ci(c.delta_api.ci) in page
        assert "Plug-in bias." in page and "bias-corrected" in page

    def test_escapes_names_from_logs_and_catalogs(self, page):
        for raw in (MALICIOUS_TOOL, MALICIOUS_API, MODEL_A, UNRESOLVED, "Geocoding <b>", "tiny <study> & co"):
            assert raw not in page
            assert html.escape(raw) in page
        assert "<script" not in page.lower()
        assert "<img" not in page  # the api name's tag survives only as escaped text
        assert "<b>" not in page

    def test_escapes_inside_svg_and_attributes(self, page):
        for svg in re.findall(r"<svg\b.*?</svg>", page, flags=re.S):
            assert MALICIOUS_TOOL not in svg and MODEL_A not in svg
        for attr in re.findall(r'(?:alt|title|aria-label)="([^"]*)"', page):
            assert "<" not in attr and ">" not in attr

    def test_no_external_resources(self, page):
        assert not re.search(r"""(?:src|href|action)\s*=\s*["']?\s*(?:https?:)?//""", page, flags=re.I)
        assert not re.search(r"url\(\s*['\"]?\s*(?:https?:)?//", page, flags=re.I)
        assert "@import" not in page
        assert "<link" not in page and "<script" not in page
        assert "default-src 'none'" in page

    def test_notes(self, page, result):
        for w in result.warnings:
            assert html.escape(w) in page
        assert "Position mismatches: in 3 records of 1 file the recorded position" in page
        assert "2 tool names could not be matched" in page

    def test_deterministic(self, study, result, page):
        assert render_bias_report(study, result) == page

    def test_writes_path_and_title(self, study, result, tmp_path):
        out = tmp_path / "r.html"
        doc = render_bias_report(study, result, path=out, title="My <title>")
        assert out.read_text(encoding="utf-8") == doc
        assert "<title>My &lt;title&gt;</title>" in doc

    def test_input_hashes(self, tmp_path):
        (tmp_path / "log.csv").write_text("a,b\n1,2\n", encoding="utf-8")
        folder = tmp_path / "transcripts"
        folder.mkdir()
        (folder / "b.txt").write_bytes(b"second")
        (folder / "a.txt").write_bytes(b"first")
        assert file_sha256(tmp_path / "log.csv") == hashlib.sha256(b"a,b\n1,2\n").hexdigest()
        listing = "".join(f"{hashlib.sha256(c).hexdigest()}  {n}\n" for n, c in (("a.txt", b"first"),
                                                                                ("b.txt", b"second")))
        assert file_sha256(folder) == hashlib.sha256(listing.encode()).hexdigest()
        assert file_sha256(tmp_path / "missing") is None

    def test_input_files_relative_to_manifest(self, tmp_path):

        log_file = tmp_path / "logs" / "m.csv"
        log_file.parent.mkdir()
        log_file.write_text("x\n", encoding="utf-8")
        manifest = tmp_path / "study.toml"
        manifest.write_text("name = 'x'\n", encoding="utf-8")
        base = _tiny_study()
        data = base.log.data.assign(source_file=str(log_file))
        log = tbs.SelectionLog(data, base.catalog, {})
        study = base.replace(log=log, path=manifest)
        res = tbs.selection_bias(log, by="model", n_resamples=0, n_null=0)
        doc = render_bias_report(study, res)
        assert '<td class="path">logs/m.csv</td><td class="num">144</td>' in doc
        assert hashlib.sha256(b"x\n").hexdigest() in doc
        assert hashlib.sha256(b"name = 'x'\n").hexdigest() in doc
        assert str(tmp_path) not in doc

    def test_without_bootstrap(self, study):
        res = tbs.selection_bias(study.log, by="model", n_resamples=0, n_null=0)
        doc = render_bias_report(study, res)
        assert "0 replicates" in doc
        assert "Wilson" in doc


class TestGolden:
    def test_matches_golden_file(self, page):
        got = _normalise(page)
        if os.environ.get("UPDATE_GOLDEN") == "1":
            GOLDEN.parent.mkdir(parents=True, exist_ok=True)
            GOLDEN.write_text(got, encoding="utf-8")
        if not GOLDEN.exists():
            pytest.fail(f"golden file {GOLDEN} is missing; create it with UPDATE_GOLDEN=1 "
                        "python -m pytest tests/report -k golden")
        want = GOLDEN.read_text(encoding="utf-8")
        if got != want:
            import difflib

            diff = "".join(list(difflib.unified_diff(want.splitlines(True), got.splitlines(True), "golden",
                                                     "rendered", n=1))[:60])
            pytest.fail("the rendered tiny report differs from tests/report/golden/tiny_report.html "
                        "(software versions and SVG drawings are ignored). If the change is intended, "
                        "regenerate it with UPDATE_GOLDEN=1 python -m pytest tests/report -k golden and review "
                        f"the diff.\n{diff}")
