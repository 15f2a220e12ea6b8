"""Issue 26: the bias report's first screen (overview figure, at most five summary sentences, heatmaps).

- The summary sentences on three simulated studies (all fair, one biased model, all biased): the right wording,
  never more than five, no construction repeated per model.
- The overview's numbers equal the detailed bias table (Table-1 block) and the JSON (``to_dict``).
- In headless Chromium at 1280 x 900: the overview figure and the summary lie inside the first screen (DOM
  positions); the screenshot is kept under ``.test-artifacts/first_screen.png``.
"""

from __future__ import annotations

import html
import json
import re
import subprocess
import warnings
from pathlib import Path

import numpy as np
import pytest

import toolbias_stats as tbs
from toolbias_stats._format import fmt_estimate_ci
from toolbias_stats.plots._overview import bias_overview_rows, plot_bias_overview, plot_rate_gaps, rate_gap_table
from toolbias_stats.report import render_bias_report
from toolbias_stats.report._summary import bias_summary
from toolbias_stats.simulate import simulate_selection_log

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / ".test-artifacts"
STUDY = ROOT / "data" / "biasbusters" / "study.toml"
BIASED_TOOLS = [8, 1, 1, 1, 1]
BIASED_POS = [6, 1, 1, 1, 1]
SCENARIOS = {"all_fair": [False] * 3, "one_biased": [False, True, False], "all_biased": [True] * 3}


def _simulate(biased):
    sims = [simulate_selection_log(n_clusters=3, n_tools=5, n_queries=60, model=f"m{i + 1}",
                                   tool_probs=BIASED_TOOLS if b else None,
                                   position_probs=BIASED_POS if b else None, rng=10 + i)
            for i, b in enumerate(biased)]
    log = tbs.SelectionLog.concat([s.log for s in sims])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = tbs.selection_bias(log, by="model", n_resamples=200, n_null=200, rng=1)
    return res, sims[0].log.catalog


@pytest.fixture(scope="module")
def results():
    return {name: _simulate(b) for name, b in SCENARIOS.items()}


# -- the pure numbers ---------------------------------------------------------------------------------
def test_overview_rows_sorted_and_equal_result(results):
    res, _ = results["one_biased"]
    rows = bias_overview_rows(res)
    assert rows[0]["label"] == "m2"                          # the biased model first
    tops = [max(r[m]["corrected"] for m in ("delta_api", "delta_pos")) for r in rows]
    assert tops == sorted(tops, reverse=True)
    for r in rows:
        g = next(g for g in res.groups if g.keys["model"] == r["label"])
        for m in ("delta_api", "delta_pos"):
            assert r[m]["corrected"] == getattr(g, m).corrected
            assert (r[m]["low"], r[m]["high"]) == tuple(getattr(g, m).corrected_ci)
            assert r[m]["null_expected"] == getattr(g, m).null_expected


def test_rate_gaps_are_rate_minus_uniform(results):
    res, catalog = results["all_biased"]
    tab = rate_gap_table(res, catalog)
    assert len(tab) == 3 * 3 * 5                                          # models x clusters x tools
    np.testing.assert_allclose(tab["gap"], tab["rate"] - 1 / tab["K"])
    # rates of one cluster sum to 1, so the gaps sum to 0
    np.testing.assert_allclose(tab.groupby(["group", "cluster"])["gap"].sum(), 0, atol=1e-12)
    pos = rate_gap_table(res, catalog, kind="position")
    assert len(pos) == 3 * 3 * 5
    first = pos[pos["index"] == 1]
    assert (first["gap"] > 0.2).all()                                    # position 1 preferred 6:1 by every model
    with pytest.raises(ValueError, match="kind"):
        rate_gap_table(res, catalog, kind="cluster")


def test_figures_draw(results):
    res, catalog = results["one_biased"]
    assert plot_bias_overview(res).axes
    assert plot_rate_gaps(res, catalog).axes
    assert plot_rate_gaps(res, catalog, kind="position").axes


# -- the sentences ------------------------------------------------------------------------------------
def _check_common(sentences):
    assert 1 <= len(sentences) <= 5
    starts = [" ".join(s.split()[:3]) for s in sentences]
    assert len(set(starts)) == len(starts)                               # no construction repeated per model


def test_summary_all_fair(results):
    res, catalog = results["all_fair"]
    s = bias_summary(res, catalog)
    _check_common(s)
    assert s[0].startswith("No model is distinguishable from a fair chooser")
    assert "the 3 models" in s[0]
    assert s[4].startswith("No model chooses the first listed tool distinguishably more often")


def test_summary_one_biased(results):
    res, catalog = results["one_biased"]
    s = bias_summary(res, catalog)
    _check_common(s)
    assert s[0].startswith("Distinguishable from a fair chooser, of the 3 models: m2 in tool choice; m2 in list "
                           "position")
    g = next(g for g in res.groups if g.keys["model"] == "m2")
    assert (f"The largest tool bias \u03b4_API is {fmt_estimate_ci(g.delta_api.corrected, g.delta_api.corrected_ci)}"
            " (m2)") in s[1]
    assert (f"The largest position bias \u03b4_pos is "
            f"{fmt_estimate_ci(g.delta_pos.corrected, g.delta_pos.corrected_ci)} (m2)") in s[2]
    assert s[3].startswith("The most favoured tool overall is ") and "(most by m2," in s[3]
    assert s[4].startswith("1 of the 3 models (m2) chooses the first listed tool more often than a fair chooser")


def test_summary_all_biased(results):
    res, catalog = results["all_biased"]
    s = bias_summary(res, catalog)
    _check_common(s)
    assert s[0].startswith("All 3 models are distinguishable from a fair chooser in tool choice and in list position")
    assert s[4].startswith("Every model chooses the first listed tool more often than a fair chooser")
    assert len(s) == 5


def test_summary_single_group():
    sim = simulate_selection_log(n_clusters=2, n_tools=4, n_queries=40, rng=3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = tbs.selection_bias(sim.log, n_resamples=100, n_null=100, rng=1)
    s = bias_summary(res, sim.log.catalog)
    _check_common(s)
    assert "first listed tool is chosen" in s[-1]


# -- the report: numbers equal the Table-1 block and the JSON; first screen in a browser ---------------------
@pytest.fixture(scope="module")
def bundled():
    study = tbs.read_study(tbs.datasets.path("biasbusters/study.toml"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = tbs.selection_bias(study.log, by="model", n_resamples=100, n_null=100, rng=1)
    return study, res, render_bias_report(study, res)


def test_overview_numbers_equal_table_and_json(bundled):
    study, res, page = bundled
    text = html.unescape(re.sub(r"<[^>]+>", " ", page))
    doc = json.loads(json.dumps(res.to_dict(), default=str))
    by_label = {", ".join(str(v) for v in g["keys"].values()): g for g in doc["groups"]}
    n_checked = 0
    for r in bias_overview_rows(res):
        for m in ("delta_api", "delta_pos"):
            if r[m] is None:                                              # no positions for this model
                assert by_label[r["label"]][m] is None
                continue
            shown = fmt_estimate_ci(r[m]["corrected"], (r[m]["low"], r[m]["high"]))
            assert shown in text                                          # the detailed bias table's first column
            js = by_label[r["label"]][m]
            assert js["corrected"] == pytest.approx(r[m]["corrected"], rel=1e-12)
            assert js["corrected_ci"] == pytest.approx([r[m]["low"], r[m]["high"]], rel=1e-12)
            assert js["null_expected"] == pytest.approx(r[m]["null_expected"], rel=1e-12)
            n_checked += 1
    assert n_checked >= 15
    summary = re.search(r'<ul class="summary" id="summary">(.*?)</ul>', page, re.S).group(1)
    for sentence in bias_summary(res, study.catalog):
        assert html.escape(sentence, quote=True) in summary or sentence in html.unescape(summary)
    best = max(bias_overview_rows(res), key=lambda r: r["delta_api"]["corrected"])
    assert fmt_estimate_ci(best["delta_api"]["corrected"], (best["delta_api"]["low"], best["delta_api"]["high"])) \
        in html.unescape(summary)
    # per-model findings stay, collapsed
    assert re.search(r"<details><summary>Findings per group</summary><ul class=\"findings\">", page)
    assert page.index('id="overview-figure"') < page.index('id="provenance"')


_PROBE = """<script>
window.addEventListener('load', () => {
  const out = {};
  for (const id of ['summary', 'overview-figure']) {
    const r = document.getElementById(id).getBoundingClientRect();
    out[id] = [r.top, r.bottom, r.left, r.right];
  }
  const pre = document.createElement('pre'); pre.id = 'probe'; pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
});
</script>"""


def test_first_screen_in_browser(bundled, tmp_path):
    import shutil

    chromium = next((p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p), None)
    if chromium is None:
        pytest.skip("no Chromium (Debian package `chromium`): the first screen was not checked in a browser")
    _, _, page = bundled
    shot = tmp_path / "report.html"
    shot.write_text(page, encoding="utf-8")
    # the probe copy: the page's CSP forbids scripts, so a copy without it measures the layout
    probe = tmp_path / "probe.html"
    probe.write_text(re.sub(r'<meta http-equiv="Content-Security-Policy"[^>]*>', "", page)
                     .replace("</body>", _PROBE + "</body>"), encoding="utf-8")
    args = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-extensions",
            "--hide-scrollbars", "--window-size=1280,900", "--virtual-time-budget=5000"]
    dom = subprocess.run(args + ["--dump-dom", probe.as_uri()], capture_output=True, text=True, timeout=180,
                         check=False).stdout
    ARTIFACTS.mkdir(exist_ok=True)
    png = ARTIFACTS / "first_screen.png"
    subprocess.run(args + [f"--screenshot={png}", shot.as_uri()], capture_output=True, timeout=180, check=False)
    m = re.search(r'<pre id="probe">(.*?)</pre>', dom, re.S)
    assert m, "the layout probe did not run"
    pos = json.loads(html.unescape(m.group(1)))
    for key in ("summary", "overview-figure"):
        top, bottom, left, right = pos[key]
        assert 0 <= top < bottom <= 900, (key, pos[key])                  # wholly inside the first screen
        assert 0 <= left < right <= 1280, (key, pos[key])
    assert png.stat().st_size > 10_000


def test_quarto_template_opens_with_the_summary(tmp_path):
    """The Quarto template (run as a notebook) shows the same summary first, then the collapsed per-group findings."""
    pytest.importorskip("jupytext")
    pytest.importorskip("nbclient")
    from toolbias_stats.cli._commands import main
    from toolbias_stats.report import qmd_to_notebook, run_notebook

    assert main(["report", str(STUDY), "--format", "qmd", "--out", str(tmp_path), "--bootstrap", "50",
                 "--seed", "5"]) == 0
    nb = run_notebook(qmd_to_notebook(tmp_path / "report.qmd", parameters={"sections": "findings"}), cwd=tmp_path)
    outs = [o for c in nb.cells for o in c.get("outputs", [])]
    assert not [o for o in outs if o.get("output_type") == "error"]
    text = "\n".join("".join(v) if isinstance(v, list) else str(v)
                     for o in outs for k, v in o.get("data", {}).items() if k in ("text/markdown", "text/html"))
    study = tbs.read_study(STUDY)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = tbs.selection_bias(study, by="model", n_resamples=50, rng=5)
    summary = bias_summary(res, study.catalog)
    assert 1 <= len(summary) <= 5
    for sentence in summary:
        assert sentence in text
    assert text.index(summary[0]) < text.index("<details><summary>Findings per group</summary>")


# -- TOOL-SHADOW: the same first screen ------------------------------------------------------------------
def _shadow(effect, rng=1):
    from toolbias_stats.shadow import ShadowAudit, simulate_audit, tool_shadow

    a = simulate_audit(300, 8, position_effect=effect, rng=rng).rows
    a["harness"] = np.where(a["turn_id"] <= "t00150", "h1", "h2")
    return tool_shadow(ShadowAudit.from_frame(a, group_columns=("harness",)), n_resamples=100, n_weight_draws=100,
                       rng=1)


def test_shadow_summary_biased_and_fair():
    from toolbias_stats.report._shadow_html import render_shadow_section
    from toolbias_stats.report._summary import shadow_summary

    res = _shadow(2.0)
    s = shadow_summary(res)
    assert 1 <= len(s) <= 5
    assert s[0] == (f"All 2 harnesses score above 50 (no positional bias) on the {res.scale} scale, with the 95% "
                    "interval above 50.")
    top = max(res.groups, key=lambda g: g.pbs[res.scale].estimate)
    assert fmt_estimate_ci(top.pbs[res.scale].estimate, top.pbs[res.scale].ci, 1) in s[1]
    page = render_shadow_section(res)
    assert page.index('id="shadow-summary"') < page.index("Positional Bias Score per harness")
    assert page.index('id="shadow-overview-figure"') < page.index("Domain breakdown:")
    fair_res = _shadow(0.0)
    assert all(g.pbs[fair_res.scale].ci[0] <= 50 for g in fair_res.groups)   # this seed: both intervals reach 50
    fair = shadow_summary(fair_res)
    assert fair[0].startswith("No harness scores distinguishably above 50")
    starts = [" ".join(x.split()[:3]) for x in fair]
    assert len(set(starts)) == len(starts)                                     # no sentence per harness


# -- ToolSense: sentences first ----------------------------------------------------------------------------
def test_toolsense_summary(tmp_path):
    import json as _json

    import toolbias_stats.toolsense as ts
    from toolbias_stats.report._summary import toolsense_summary
    from toolbias_stats.report._toolsense_html import render_toolsense_section

    tiers = ["easy", "medium", "hard"] * 4
    bench_recs, preds = [], []
    for i, tier in enumerate(tiers):
        tools = [{"tool_name": f"{n}{i}&&go", "tool_title": f"{n}{i}", "tool_description": "x", "api_title": "go",
                  "api_description": "None"} for n in ("t", "d")]
        gt = tools[0] if tier == "easy" else [tools[0]]
        bench_recs.append({"sample_id": f"s{i}", "query": f"q{i}", "tool": gt, "complexity": tier,
                           "analyzed_tools": tools})
        right, wrong = ["t" + str(i) + "&&go"], ["d" + str(i) + "&&go"]
        preds.append({"sample_id": f"s{i}", "constrained": right if tier != "hard" or i % 2 else wrong,
                      "free": right if tier == "easy" else wrong})
    (tmp_path / "b.jsonl").write_text("\n".join(_json.dumps(r) for r in bench_recs))
    (tmp_path / "p.jsonl").write_text("\n".join(_json.dumps(r) for r in preds))
    bench = ts.read_rrb(tmp_path / "b.jsonl")
    res = ts.retrieval_recall(bench, {"m": ts.read_rrb_predictions(tmp_path / "p.jsonl", bench)}, k=[1],
                              n_resamples=50, rng=0)
    s = toolsense_summary(res)
    assert 1 <= len(s) <= 4, s
    rc = res.estimates[("m", "all", 1)]["rc"]
    assert s[0] == (f"The constrained recall Rc@1 over all tiers is {fmt_estimate_ci(rc.estimate, rc.ci)}, with 95% "
                    "query-bootstrap interval.")
    assert s[-1].startswith("The hard tier is the hardest to retrieve"), s
    assert s[1].startswith("Free recall Rf@1 falls below constrained recall: "), s
    page = render_toolsense_section(retrieval=res)
    assert page.index('id="toolsense-summary"') < page.index("<figure")
