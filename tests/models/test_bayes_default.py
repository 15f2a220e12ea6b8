"""The Bayesian model's default (issue 38): ``fit_bayes(log)`` and ``toolbias-stats bayes STUDY`` fit the margin
model; where the study or the arguments rule it out and no model was named, v2, announced (``result.model``, a
UserWarning saying why, the same note first in ``result.warnings``, the CLI's NOTE on stderr, in its JSON and
text); a model named explicitly keeps its error.

The choice of the model is tested without sampling where it can be (a spy in place of the fit); one tiny real v2
fit (1 chain x 20 draws) shows the announced fall-back end to end, in Python and in the CLI (``--json`` and text).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import warnings

import numpy as np
import pytest

from toolbias_stats.models import fit_bayes, simulate_bayes_log
from toolbias_stats.models.bayes import DEFAULT_MODEL, FALLBACK_MODEL, MODELS
from toolbias_stats.models.bayes import _fit as F
from toolbias_stats.models.bayes import _margin as mg
from toolbias_stats.models.bayes import _margin_fit as mf
from toolbias_stats.models.bayes._common import FALLBACK_NOTE

needs_numpyro = pytest.mark.skipif(importlib.util.find_spec("numpyro") is None, reason="the margin model needs numpyro")

ALPHA = np.array([[[0.8, 0.0, -0.8]], [[0.0, 0.5, -0.5]]])          # 2 LLMs x 1 cluster x 3 tools
BETA = np.array([[1.0, 0.0, -1.0], [0.5, 0.0, -0.5]])
TINY = {"draws": 20, "tune": 20, "chains": 1, "cores": 1}


def _full():
    return simulate_bayes_log(ALPHA, BETA, queries=6, runs=2, sigma_eta=0.5, rng=5)


def _short():
    """The same study with a few lists that leave out a tool: the margin model cannot fit it, v2 can."""
    log = _full()
    frame = log.to_frame()
    short = frame.index[frame["chosen_position"] <= 2][:4]
    frame.loc[short, "ordering"] = frame.loc[short, "ordering"].str.rsplit("|", n=1).str[0]
    frame.loc[short, "n_candidates"] = 2
    return type(log).from_frame(frame, log.catalog, source="<short>")


def _sizes():
    """Two clusters of 3 and 2 tools."""
    return simulate_bayes_log([np.array([[0.5, 0.0, -0.5]]), np.array([[0.3, -0.3]])], np.array([[0.5, 0.0, -0.5]]),
                              queries=4, runs=2, rng=6)


class _Spy:
    """Stands in for a fit: records which one was called and with which model."""

    def __init__(self, monkeypatch):
        self.calls = []
        monkeypatch.setattr(mf, "fit_margin", lambda log, args, variant, t0: self._hit("margin", args))
        monkeypatch.setattr(F, "_fit_variant", lambda log, args, variant, spec, t0: self._hit(variant.name, args))

    def _hit(self, name, args):
        self.calls.append((name, dict(args)))
        raise RuntimeError(f"spy: {name}")


def _which(monkeypatch, log, **kw):
    """``(model fitted, UserWarnings)`` of ``fit_bayes(log, **kw)`` with the fits replaced by the spy."""
    spy = _Spy(monkeypatch)
    with warnings.catch_warnings(record=True) as caught, pytest.raises(RuntimeError, match="spy"):
        warnings.simplefilter("always")
        fit_bayes(log, **kw)
    return spy.calls[0][0], [str(w.message) for w in caught if w.category is UserWarning]


def test_the_default_is_the_margin_model():
    import inspect

    assert DEFAULT_MODEL == "margin" and FALLBACK_MODEL == "v2" and set(MODELS) == {"v1", "v2", "margin"}
    assert inspect.signature(fit_bayes).parameters["model"].default is None


@needs_numpyro
class TestChoice:
    def test_default_fits_margin_with_its_defaults(self, monkeypatch):
        seen = {}

        def fake(P, **kw):
            seen.update(kw)
            raise RuntimeError("spy: sampled")

        monkeypatch.setattr(mg, "sample", fake)
        with warnings.catch_warnings(), pytest.raises(RuntimeError, match="spy"):
            warnings.simplefilter("ignore")
            fit_bayes(_full(), rng=1)
        assert {k: seen[k] for k in ("chains", "draws", "tune", "target_accept")} == {
            "chains": 4, "draws": 1000, "tune": 500, "target_accept": 0.9}

    @pytest.mark.parametrize("make, why", [
        (_short, "the margin model needs lists that show every tool of the cluster"),
        (_sizes, "the margin model needs clusters of one size"),
    ])
    def test_unsuitable_study_falls_back_to_v2_announced(self, monkeypatch, make, why):
        model, said = _which(monkeypatch, make(), **TINY)
        assert model == "v2"
        assert len(said) == 1 and said[0].startswith(FALLBACK_NOTE) and why in said[0]
        assert "Pass model='v2' (CLI: --variant v2)" in said[0]

    @pytest.mark.parametrize("kw, why", [
        ({"sampler": "pymc"}, "sampler='pymc' was asked for"),
        ({"parameterization": "centered"}, "parameterization='centered' was asked for"),
        ({"priors": {"rho_a": 2.0}}, "priors ['rho_a'] were given"),
    ])
    def test_arguments_only_v2_takes_fall_back(self, monkeypatch, kw, why):
        model, said = _which(monkeypatch, _full(), **kw)
        assert model == "v2" and len(said) == 1 and why in said[0]

    def test_missing_numpyro_falls_back(self, monkeypatch):
        monkeypatch.setattr(mg, "_have_numpyro", lambda: False)
        model, said = _which(monkeypatch, _full())
        assert model == "v2" and "NumPyro (JAX), which samples the margin model, is not installed" in said[0]

    def test_suitable_study_no_announcement(self, monkeypatch):
        model, said = _which(monkeypatch, _full(), priors={"mu_sd": 2.0})
        assert model == "margin" and said == []

    def test_named_models_never_fall_back(self, monkeypatch):
        for name in ("v1", "v2"):
            model, said = _which(monkeypatch, _short(), model=name)
            assert model == name and said == []

    def test_explicit_margin_keeps_its_error(self):
        with pytest.raises(ValueError, match=r"model='margin' needs lists that show every tool.*Use model='v2'"):
            fit_bayes(_short(), model="margin")
        with pytest.raises(ValueError, match=r"model='margin' needs clusters of one size.*Use model='v2'"):
            fit_bayes(_sizes(), model="margin")
        with pytest.raises(ValueError, match=r"sampled with NumPyro only"):
            fit_bayes(_full(), model="margin", sampler="pymc")

    def test_delta_margin_asks_for_the_margin_model(self):
        with pytest.raises(ValueError, match=r"model='margin' needs lists that show every tool"):
            fit_bayes(_short(), delta_margin=0.05)

    def test_input_errors_are_not_fall_backs(self):
        log = _full()
        with pytest.raises(ValueError, match=r"needs to know which attempts belong to one query.*model='v1'"):
            fit_bayes(log.counts())                         # counts alone: v2 cannot fit them either
        with pytest.raises(ValueError, match="`by` names column"):
            fit_bayes(log, by="nope")
        with pytest.raises(ValueError, match="`sampler` must be one of"):
            fit_bayes(log, sampler="stan")


@pytest.fixture(scope="module")
def margin_fit():
    """A short fit of the default on a suitable study (1 chain x 100 draws: for the report's layout, not its
    numbers)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fit_bayes(_full(), rng=2, draws=100, tune=100, chains=1, cores=1)


@pytest.fixture
def no_figures(monkeypatch):
    """The section without its figures (the forest plots of a 100-draw fit are not what these tests check)."""
    import toolbias_stats.plots as plots
    from toolbias_stats.report import _bayes_html as H

    for name in ("plot_position_effects", "plot_api_effects", "plot_bayes_ppc", "plot_bayes_dispersion"):
        monkeypatch.setattr(plots, name, lambda *a, **k: None, raising=False)
    monkeypatch.setattr(H, "_svg", lambda fig, title="": "<svg></svg>")
    return H


@pytest.fixture
def fallback_like(margin_fit, monkeypatch):
    """For the CLI's and the report's wiring: the short margin fit relabelled as the fall-back, with the fall-back
    note ``fit_bayes`` writes for the short-lists study (the real fall-back fit: ``test_fallback_fit_end_to_end``,
    slow tier)."""
    import dataclasses

    _, said = _which(monkeypatch, _short())
    return dataclasses.replace(margin_fit, model="v2", implied_cells=None, warnings=[said[0], *margin_fit.warnings])


@needs_numpyro
def test_default_fit_is_the_margin_model(margin_fit):
    """``fit_bayes(log)`` (no model) on a study that suits it samples the margin model, unannounced."""
    res = margin_fit
    assert res.model == "margin" and res.diagnostics.sampler == "numpyro" and res.implied_cells is not None
    assert not any(w.startswith(FALLBACK_NOTE) for w in res.warnings)
    assert res.to_dict()["variant"] == "margin"


@pytest.fixture(scope="module")
def fallback_fit():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = fit_bayes(_short(), rng=3, **TINY)
    return res, caught


@needs_numpyro
@pytest.mark.slow  # a real v2 fit (JAX compilation: 15-45 s); the fall-back's choice is tested above without sampling
def test_fallback_fit_end_to_end(fallback_fit):
    """The result says which model it is and why: ``model``, the warning, ``warnings[0]``, JSON, text, HTML."""
    from toolbias_stats._text import format_bayes_text
    from toolbias_stats.report._bayes_html import _diagnostics_block

    res, caught = fallback_fit
    said = [str(w.message) for w in caught if w.category is UserWarning]
    assert res.model == "v2" and res.implied_cells is None and len(said) == 1
    assert res.warnings[0] == said[0] and "lists that show every tool" in said[0]
    out = res.to_dict()
    assert out["variant"] == "v2" and out["warnings"][0] == said[0]
    assert "variant v2" in format_bayes_text(res) and said[0][:60] in format_bayes_text(res)
    assert "instead of the default" in _diagnostics_block(res)      # the report's first block says it too


def _study_file(tmp_path, log):
    log.write(tmp_path / "log.csv")
    log.catalog.to_frame().to_csv(tmp_path / "catalog.csv", index=False)
    (tmp_path / "study.toml").write_text('name = "tiny"\nformat = "table"\ncatalog = "catalog.csv"\n\n'
                                         '[[logs]]\npath = "log.csv"\n', encoding="utf-8")
    return str(tmp_path / "study.toml")


def _cli(*argv):
    from toolbias_stats.cli import _bayes as cli

    parser = argparse.ArgumentParser()
    cli.add_parser(parser.add_subparsers(dest="command"))
    return cli, parser.parse_args(["bayes", *argv])


class TestCLI:
    def test_default_variant_is_not_named(self, tmp_path, monkeypatch):
        """Without --variant the CLI asks for the default (model=None): the margin model or the fall-back."""
        import toolbias_stats.models as models

        seen = {}

        def spy(log, **kw):
            seen.update(kw)
            raise ValueError("spy")

        monkeypatch.setattr(models, "fit_bayes", spy)
        cli, args = _cli(_study_file(tmp_path, _full()))
        assert cli.run(args) == 2 and seen["model"] is None
        cli, args = _cli(_study_file(tmp_path, _full()), "--variant", "v2")
        assert cli.run(args) == 2 and seen["model"] == "v2"

    @needs_numpyro
    @pytest.mark.parametrize("fmt", ["--json", "text"])
    def test_fallback_is_announced(self, tmp_path, capsys, monkeypatch, fallback_like, fmt):
        """The note on stderr whatever the format, and in the output (JSON ``variant`` and ``warnings``; text): the
        CLI's part, given a fall-back's result (the fit itself: ``test_fallback_fit_end_to_end``)."""
        import toolbias_stats.models as models

        seen = {}

        def fake(log, **kw):
            seen.update(kw)
            return fallback_like

        monkeypatch.setattr(models, "fit_bayes", fake)
        cli, args = _cli(_study_file(tmp_path, _short()), "--n-draws", "20", "--tune", "20", "--chains", "1",
                         "--seed", "3", *([fmt] if fmt == "--json" else []))
        assert cli.run(args) == 0 and seen["model"] is None
        cap = capsys.readouterr()
        assert "toolbias-stats bayes: NOTE: model='v2' was fitted instead of the default 'margin'" in cap.err
        assert "lists that show every tool" in cap.err
        if fmt == "--json":
            out = json.loads(cap.out)
            assert out["variant"] == "v2" and out["warnings"][0].startswith(FALLBACK_NOTE)
        else:
            assert "variant v2" in cap.out and "Notes:" in cap.out and FALLBACK_NOTE in cap.out

    @needs_numpyro
    @pytest.mark.parametrize("fmt", [[], ["--json"]])
    def test_explicit_margin_keeps_its_error(self, tmp_path, capsys, fmt):
        cli, args = _cli(_study_file(tmp_path, _short()), "--variant", "margin", *fmt)
        assert cli.run(args) == 2
        cap = capsys.readouterr()
        assert cap.out == "" and "model='margin' needs lists that show every tool of the cluster" in cap.err
        assert "model='v2'" in cap.err


@needs_numpyro
class TestReportSection:
    """The report's Bayesian section of the default: the margin model's δ with P0 and P(δ < margin), both checks
    against the band, the frequentist interval beside a disagreeing Bayesian one, and a truthful model text."""

    def test_margin_section(self, margin_fit, monkeypatch, no_figures):
        H = no_figures
        res = margin_fit
        assert res.model == "margin" and not any(w.startswith(FALLBACK_NOTE) for w in res.warnings)
        llm = res.llms[0]
        monkeypatch.setattr(H, "_disagreements", lambda result, freq: {(llm, "delta_api"): "0.500 [0.450, 0.550]"})
        import types

        html = H.render_bayes_section(res, frequentist=types.SimpleNamespace(by=list(res.by)))
        implied = html.split('id="bayes-implied"')[1].split('id="bayes-position"')[0]
        assert "P0" in implied and "P(&delta; &lt; 0.02)" in implied and "randomised orderings</th>" not in implied
        assert "frequentist 0.500 [0.450, 0.550]: the intervals do not overlap" in implied
        assert implied.count("<tr>") >= 2 + len(res.llms) + len(res.llms) * len(res.clusters)
        model = html.split('id="bayes-model"')[1].split('id="bayes-implied"')[0]
        assert "collapsed margin model" in model and "Pearson" in model and "v2 adds" not in html
        ppc = html.split('id="bayes-ppc"')[1]
        assert "per-query dispersion" in ppc and "ordering &times; position table is not checked" in ppc
        assert "margin (the default)" in H._diagnostics_block(res)

    def test_margin_ppc_band_has_two_ends(self, margin_fit):
        """A dispersion p above 0.95 fails as one below 0.05 (the margin model's rule), naming the LLM."""
        import dataclasses

        from toolbias_stats.report import _bayes_html as H

        res = margin_fit
        disp = res.ppc.dispersion.copy()
        disp.loc[disp["llm"] == res.llms[0], "p_value"] = 0.99
        bad = dataclasses.replace(res, ppc=dataclasses.replace(res.ppc, dispersion=disp, p_value=0.5))
        verdict = H._margin_ppc_block(bad, "", "")
        assert "Outside the band [0.05, 0.95]" in verdict and f"dispersion of {res.llms[0]} (p = 0.990)" in verdict

    def test_report_announces_the_fallback(self, fallback_like, monkeypatch, no_figures):
        """``report --bayes`` on a study the default cannot fit: the section is v2's and the fall-back is warned."""
        import types

        import toolbias_stats.models as models
        from toolbias_stats.report._build import _bayes_section

        monkeypatch.setattr(models, "fit_bayes", lambda log, **kw: fallback_like)
        study = types.SimpleNamespace(log=None, catalog=None)
        with pytest.warns(UserWarning, match=r"Bayesian section: model='v2' was fitted instead of the default"):
            sid, _, html = _bayes_section(study, stage=lambda s: None, progress=False, rng=1)
        assert sid == "bayes" and "instead of the default" in html
