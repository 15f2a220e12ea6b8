"""Issue 14: the parameterised Quarto template (run as a notebook: jupytext + nbclient) and the example notebook.

quarto-cli cannot be installed on these machines (its package downloads a binary at build time), so the template
is tested by executing it as a notebook; where a `quarto` binary exists it is also rendered.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import warnings
from pathlib import Path

import pytest

import toolbias_stats as tbs
from toolbias_stats._format import fmt_estimate_ci
from toolbias_stats.cli._commands import main
from toolbias_stats.report import TEMPLATE, qmd_to_notebook, run_notebook

ROOT = Path(__file__).resolve().parents[2]
STUDY = ROOT / "data" / "biasbusters" / "study.toml"


def _outputs(nb):
    """(errors, texts) of an executed notebook."""
    errors, texts = [], []
    for cell in nb.cells:
        for o in cell.get("outputs", []):
            if o.get("output_type") == "error":
                errors.append(f"{o['ename']}: {o['evalue']}")
            data = o.get("data", {})
            texts += [data.get("text/markdown", ""), data.get("text/html", ""), data.get("text/plain", ""),
                      o.get("text", "")]
    return errors, "\n".join(t if isinstance(t, str) else "".join(t) for t in texts)


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    out = tmp_path_factory.mktemp("qmd")
    code = main(["report", str(STUDY), "--format", "qmd", "--out", str(out), "--bootstrap", "100", "--seed", "5"])
    assert code == 0
    return out


class TestQuartoTemplate:
    def test_repository_template_is_the_packaged_one(self):
        assert (ROOT / "reports" / "template.qmd").resolve() == TEMPLATE.resolve()

    def test_export_writes_template_parameters_and_data(self, exported):
        text = (exported / "report.qmd").read_text(encoding="utf-8")
        assert '  study: "data/study.toml"' in text and "  seed: 5" in text and "  n_resamples: 100" in text
        assert "study = 'data/study.toml'" in text and "seed = 5" in text
        assert (exported / "data" / "study.toml").is_file()
        assert (exported / "data" / "selection_logs").is_dir()

    def test_executes_as_notebook_with_the_api_numbers(self, exported):
        nb = run_notebook(qmd_to_notebook(exported / "report.qmd"), cwd=exported)
        errors, text = _outputs(nb)
        assert not errors, errors
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res = tbs.selection_bias(tbs.read_study(STUDY), by="model", n_resamples=100, rng=5)
        g = res.groups[0]
        assert f"**{g.keys['model']}**" in text
        assert fmt_estimate_ci(g.delta_api.mean_over_runs, g.delta_api.ci) in text       # same seed, same numbers
        assert "Cluster 10" in text

    def test_parameters_are_injected(self, exported):
        nb = qmd_to_notebook(exported / "report.qmd", parameters={"sections": "findings"})
        sources = [c.source for c in nb.cells if c.cell_type == "code"]
        i = next(i for i, s in enumerate(sources) if "#| tags: [parameters]" in s)
        assert sources[i + 1].startswith("# injected parameters") and "sections = 'findings'" in sources[i + 1]

    def test_bad_sections(self, tmp_path):
        from toolbias_stats.report import export_quarto

        with pytest.raises(ValueError, match=r"`sections` must be among"):
            export_quarto(STUDY, tmp_path, sections=["everything"])

    @pytest.mark.skipif(shutil.which("quarto") is None, reason="no quarto binary on this machine "
                        "(quarto-cli cannot be installed here); the template ran as a notebook instead")
    def test_renders_with_quarto(self, exported):
        subprocess.run(["quarto", "render", str(exported / "report.qmd")], check=True, cwd=exported, timeout=600)
        assert (exported / "report.html").is_file()


def test_example_notebook_executes():
    """analyses/example.ipynb runs top to bottom (nbclient), showing the headline tables."""
    import nbformat

    nb = nbformat.read(ROOT / "analyses" / "example.ipynb", as_version=4)
    run_notebook(nb, cwd=ROOT)
    errors, text = _outputs(nb)
    assert not errors, errors
    assert "BiasResult: 8 group(s)" in text and "SelectionCounts(level='query'" in text
    assert json.dumps(nb.cells[-1]["outputs"])      # the last cell produced output
