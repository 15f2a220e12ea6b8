"""HTML section and text of TOOL-SHADOW: banner, breakdown rule, escaping, figures."""

from __future__ import annotations

import numpy as np
import pytest

from toolbias_stats._text import format_shadow_text, format_worksheet_text
from toolbias_stats.report import render_shadow_report, render_shadow_section
from toolbias_stats.shadow import ShadowAudit, simulate_audit, tool_shadow, worksheet_weights

EVIL = '<script>alert("x")</script>'


@pytest.fixture(scope="module")
def result():
    a = simulate_audit(300, 8, position_effect=2.0, rng=1).rows
    a["harness"] = np.where(a["turn_id"] <= "t00150", EVIL, "plain")
    return tool_shadow(ShadowAudit.from_frame(a, group_columns=("harness",)), n_resamples=100, n_weight_draws=100,
                       rng=1)


def test_section(result):
    html = render_shadow_section(result)
    assert html.startswith('<section id="shadow">') and html.rstrip().endswith("</section>")
    assert "pre-validation; not for deployment gating" in html
    assert EVIL not in html and "&lt;script&gt;" in html
    assert html.count("breakdown mandatory") == sum(g.pbs["paper"].estimate > 60 for g in result.groups) >= 1
    assert html.count("Domain breakdown:") == 2
    assert "Weight derivation" in html and "<svg" in html


def test_section_in_bias_report_contract(result):
    # render_bias_report takes (id, heading, html) tuples; the fragment must be a complete section
    frag = render_shadow_section(result, figures=False)
    assert "<svg" not in frag and frag.count("<section") == frag.count("</section>") == 1


def test_page_written_atomically(result, tmp_path):
    out = tmp_path / "sub" / "p.html"
    doc = render_shadow_report(result, path=out)
    assert out.read_text(encoding="utf-8") == doc
    assert doc.startswith("<!DOCTYPE html>") and "Content-Security-Policy" in doc


def test_text(result):
    txt = format_shadow_text(result)
    assert txt.startswith("TOOL-SHADOW v1 Positional Bias Score -- PRE-VALIDATION; NOT FOR DEPLOYMENT GATING")
    assert "w*z" in txt and "PBS (paper)" in txt and "PBS (effect)" in txt


def test_worksheet_text():
    txt = format_worksheet_text(worksheet_weights({"L": (1.2, 1.8), "R": (1.1, 1.4)}))
    assert "0.103" in txt and "0.170" in txt and "floor (no CI)" in txt
