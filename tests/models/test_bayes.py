"""Tests of the hierarchical Bayesian model (fit_bayes), main-effects variant v1, on tiny simulated logs.

The variant v2 and the model comparison are tested in test_bayes_variants.py (the experimental variants
moved to analyses/bayes_experimental, with their checks). The fits here are deliberately small (2 LLMs x 2
clusters x 3 tools, a few hundred draws, the C back-end, chains run one after the other) so that the whole
module stays fast; the full fit on the bundled study is a benchmark (benchmarks/bench_bayes.py), and
coverage is checked by simulation in analyses/recovery_bayes.py and analyses/sbc_bayes.py.
"""

from __future__ import annotations

import json
import warnings

import numpy as np
import pandas as pd
import pytest

from toolbias_stats.exceptions import ExcludedRowsWarning
from toolbias_stats.io import SelectionLog
from toolbias_stats.models import ConvergenceWarning, fit_bayes, simulate_bayes_log
from toolbias_stats.models import _bayes as B

# Strong, known effects: the first slot is preferred by both LLMs; tools differ within clusters.
ALPHA = np.array([[[1.2, 0.0, -1.2], [0.0, 0.8, -0.8]],
                  [[1.0, 0.2, -1.2], [-0.6, 1.0, -0.4]]])
BETA = np.array([[1.0, 0.0, -1.0], [0.6, 0.1, -0.7]])
FAST = dict(draws=300, tune=300, chains=2, cores=1, sampler="pymc")
V1 = dict(FAST, model="v1")


def _with_invalid_rows(log):
    """Add 3 no-call rows and 2 valid-looking rows whose ordering is unknown."""
    d = log.data.copy()
    extra = d.iloc[:5].copy()
    extra["query_id"] = ["x1", "x2", "x3", "x4", "x5"]
    extra["status"] = ["no_call"] * 3 + ["ok"] * 2
    extra.loc[extra.index[:3], ["chosen_tool", "chosen_position"]] = None
    extra.loc[extra.index[3:], ["ordering", "chosen_position"]] = None
    extra["rotation"] = pd.NA
    return SelectionLog.from_frame(pd.concat([d, extra], ignore_index=True), log.catalog)


@pytest.fixture(scope="module")
def sim_log():
    return _with_invalid_rows(simulate_bayes_log(ALPHA, BETA, n_per_ordering=100, rng=11))


@pytest.fixture(scope="module")
def fit(sim_log):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = fit_bayes(sim_log, rng=1, **V1)
    return res, caught


class TestV1Unchanged:
    """v1 gives exactly the numbers of the first version (regression pins; PyMC C back-end, seed 1).

    The values were recorded with the v1 code before the model was split into a package and gained
    variants; they must not move (tolerance: last digits of float64, for BLAS differences).
    """

    def test_pinned_numbers(self, fit):
        res, _ = fit
        assert res.model == "v1" and res.diagnostics.seed == 1016164991
        beta = res.idata.posterior["beta"].values.mean((0, 1))
        np.testing.assert_allclose(beta, [[1.12102836324, -0.033499535491, -1.087528827749],
                                          [0.629685502531, 0.042914431575, -0.672599934107]], rtol=0, atol=1e-9)
        alpha = res.idata.posterior["alpha"].values[..., 0, :].mean((0, 1))
        np.testing.assert_allclose(alpha, [[1.195621931793, -0.044619791274, -1.151002140519],
                                           [1.007682859434, 0.200154321165, -1.207837180599]], rtol=0, atol=1e-9)
        np.testing.assert_allclose(res.implied["mean"].to_numpy(),
                                   [0.238509062639, 0.327060126905, 0.282101772903, 0.153211010751,
                                    0.238436301145, 0.325435132004, 0.279055271645, 0.149709348689],
                                   rtol=0, atol=1e-9)
        assert (res.ppc.p_value, res.ppc.p_value_rows) == (0.5633333333333334, 0.45)
        np.testing.assert_allclose(res.diagnostics.max_rhat, 1.0092162870533488, rtol=1e-9)
        assert set(res.idata.log_likelihood.data_vars) == {"y", "y_query"}   # y as in v1; y_query added

    def test_shim_keeps_the_old_module(self):
        from toolbias_stats.models import bayes

        assert B.fit_bayes is bayes.fit_bayes and B._design is bayes._design._design
        assert B.DEFAULT_PRIORS == {"mu_sd": 1.5, "sigma_alpha_sd": 1.0, "beta_bar_sd": 1.0, "sigma_beta_sd": 1.0}


class TestFitBayes:
    def test_idata_groups_shapes_and_coords(self, fit):
        res, _ = fit
        post = res.idata.posterior
        assert set(res.idata.groups()) >= {"posterior", "sample_stats", "log_likelihood", "posterior_predictive",
                                           "observed_data", "constant_data"}
        assert post["alpha"].shape == (2, 300, 2, 2, 3)
        assert post["beta"].shape == (2, 300, 2, 3)
        assert post["mu"].shape == (2, 300, 2, 3)
        assert list(post["llm"].values) == ["llm1", "llm2"]
        assert list(post["cluster"].values) == ["1", "2"]
        assert list(post["position"].values) == [1, 2, 3]
        assert post["tool_id"].values[0, 0] == res.tools["1"][0]
        assert res.idata.observed_data["y"].shape == (2 * 2 * 3, 3)   # LLM x cluster x rotation rows

    def test_sum_to_zero(self, fit):
        post = fit[0].idata.posterior
        for name, axis in (("alpha", -1), ("mu", -1), ("beta", -1), ("beta_bar", -1)):
            np.testing.assert_allclose(post[name].values.sum(axis), 0.0, atol=1e-9, err_msg=name)

    def test_recovers_position_and_api_effects(self, fit):
        res, _ = fit
        beta = res.position_effects.query("llm != '(shared)'").sort_values(["llm", "position"])["mean"].to_numpy()
        truth_b = (BETA - BETA.mean(1, keepdims=True)).ravel()
        assert np.corrcoef(beta, truth_b)[0, 1] > 0.95
        assert (res.first_vs_last["p_first_beats_last"] > 0.99).all()
        ae = res.api_effects.query("llm != '(shared)'")
        alpha = ae.sort_values(["llm", "cluster", "api_index"])["mean"].to_numpy()
        truth_a = (ALPHA - ALPHA.mean(-1, keepdims=True)).ravel()
        assert np.corrcoef(alpha, truth_a)[0, 1] > 0.95

    def test_implied_deltas_in_range(self, fit):
        imp = fit[0].implied
        assert set(imp["orderings"]) == {"logged", "randomised"}
        assert len(imp) == 2 * 2 * 2
        K = 3
        for col in ("mean", "hdi_low", "hdi_high"):
            assert imp[col].between(0, 1 - 1 / K).all()
        assert (imp["hdi_low"] <= imp["mean"]).all() and (imp["mean"] <= imp["hdi_high"]).all()
        # rotations balance tools over positions: randomising changes little
        piv = imp.pivot_table(index=["llm", "metric"], columns="orderings", values="mean")
        assert np.allclose(piv["logged"], piv["randomised"], atol=0.05)

    def test_excluded_rows_are_counted(self, fit):
        res, caught = fit
        assert res.rows["excluded"] == {"no_call": 3, "ordering_unknown": 2}
        assert res.rows["used"] == res.rows["total"] - 5
        assert res.rows_by_llm["llm1"]["excluded"] == {"no_call": 3, "ordering_unknown": 2}
        assert any(issubclass(w.category, ExcludedRowsWarning) for w in caught)
        assert int(res.idata.observed_data["y"].sum()) == res.rows["used"]

    def test_diagnostics_and_outputs(self, fit):
        res, _ = fit
        d = res.diagnostics
        assert d.sampler == "pymc" and d.chains == 2 and d.draws == 300 and d.seconds > 0
        assert d.parameterization == "noncentered"    # "auto" with 2 LLMs
        assert 1.0 <= d.max_rhat < 1.1 and d.min_ess_bulk > 50
        out = res.to_dict()
        json.dumps(out)                                # JSON-serialisable
        for key in ("diagnostics", "position_effects", "api_effects", "implied", "ppc_p"):
            assert key in out
        assert set(out["diagnostics"]) >= {"max_rhat", "min_ess_bulk", "divergences", "sampler", "seconds"}
        llm = out["implied"]["llm1"]["delta_pos"]["randomised"]
        assert set(llm) == {"mean", "sd", "hdi", "fits", "failed_checks"} and len(llm["hdi"]) == 2   # fits: issue 38
        assert 0 <= out["ppc_p"] <= 1
        frame = res.to_frame()
        assert {"alpha", "mu", "beta", "beta_bar", "delta_api", "delta_pos", "share_shared"} <= set(frame["quantity"])
        vs = res.variance_shares.set_index("effect")
        assert vs["share_shared"].between(0, 1).all()

    def test_ppc_table(self, fit):
        ppc = fit[0].ppc
        assert len(ppc.table) == 2 * 3
        assert (ppc.table["replicated_low"] <= ppc.table["replicated_high"]).all()
        assert ppc.table["observed"].sum() == fit[0].rows["used"]
        # data simulated from the model itself: the check must not reject it
        assert ppc.p_value > 0.01 and ppc.p_value_rows > 0.01

    def test_seed_reproducibility(self, sim_log, fit):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            again = fit_bayes(sim_log, rng=1, **V1)
        first = fit[0]
        np.testing.assert_array_equal(again.idata.posterior["alpha"].values, first.idata.posterior["alpha"].values)
        np.testing.assert_array_equal(again.idata.posterior["mu"].values, first.idata.posterior["mu"].values)
        pd.testing.assert_frame_equal(again.implied, first.implied)
        assert again.ppc.p_value == first.ppc.p_value

    def test_centred_and_noncentred_agree(self, sim_log, fit):
        """Same model, two parameterisations: the posteriors must agree (within Monte-Carlo error)."""
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            cen = fit_bayes(sim_log, rng=2, parameterization="centered", **V1)
        assert cen.diagnostics.parameterization == "centered"
        a = cen.position_effects.set_index(["llm", "position"])
        b = fit[0].position_effects.set_index(["llm", "position"])
        np.testing.assert_allclose(a["mean"], b["mean"], atol=0.1)
        np.testing.assert_allclose(a["sd"], b["sd"], rtol=0.35)
        ia = cen.implied.set_index(["llm", "metric", "orderings"])["mean"]
        ib = fit[0].implied.set_index(["llm", "metric", "orderings"])["mean"]
        np.testing.assert_allclose(ia, ib, atol=0.03)

    def test_netcdf_round_trip(self, fit, tmp_path):
        import arviz as az

        path = tmp_path / "fit.nc"
        fit[0].idata.to_netcdf(str(path))
        back = az.from_netcdf(str(path))
        np.testing.assert_allclose(back.posterior["beta"].values, fit[0].idata.posterior["beta"].values)


class TestReportAndPlots:
    def test_section_renders_and_escapes(self, fit):
        import dataclasses

        from toolbias_stats._text import format_bayes_text
        from toolbias_stats.report._bayes_html import render_bayes_section

        res = fit[0]
        evil = "<b>llm1</b>&"
        ren = {"llm1": evil}
        bad = dataclasses.replace(
            res, llms=[ren.get(x, x) for x in res.llms],
            position_effects=res.position_effects.replace({"llm": ren}),
            first_vs_last=res.first_vs_last.replace({"llm": ren}),
            api_effects=res.api_effects.replace({"llm": ren}), implied=res.implied.replace({"llm": ren}))
        html = render_bayes_section(bad)
        assert html.startswith('<section id="bayes">') and html.rstrip().endswith("</section>")
        assert "<b>llm1</b>" not in html and "&lt;b&gt;llm1&lt;/b&gt;&amp;" in html
        for anchor in ("bayes-diagnostics", "bayes-implied", "bayes-position", "bayes-api", "bayes-ppc"):
            assert f'id="{anchor}"' in html
        assert html.count("<svg") == 4        # position, API, PPC and per-query dispersion
        text = format_bayes_text(res)
        assert "Implied bias" in text and "llm2" in text

    def test_not_converged_banner(self, fit):
        import dataclasses

        from toolbias_stats._text import format_bayes_text
        from toolbias_stats.report._bayes_html import render_bayes_section

        res = fit[0]
        d = dataclasses.replace(res.diagnostics, flags=["R-hat 1.2 > 1.01"])
        bad = dataclasses.replace(res, diagnostics=d)
        assert "NOT CONVERGED" in render_bayes_section(bad)
        assert format_bayes_text(bad).startswith("!!!")


class TestSingleLLMRaggedClusters:
    def test_one_llm_clusters_of_different_size_and_random_orderings(self):
        g = np.random.default_rng(5)
        alpha = [g.normal(0, 1, (1, 3)), g.normal(0, 1, (1, 4))]
        beta = np.array([[0.8, 0.2, -0.4, -0.6]])
        log = simulate_bayes_log(alpha, beta, n_per_ordering=40, orderings="random", rng=6)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res = fit_bayes(log, rng=2, **V1)
        post = res.idata.posterior
        assert post["alpha"].shape[2:] == (1, 2, 4) and "sigma_alpha" not in post
        assert np.isnan(post["alpha"].values[..., 0, 3]).all()          # cluster 1 has 3 tools
        np.testing.assert_allclose(np.nansum(post["alpha"].values, -1), 0, atol=1e-9)
        assert res.tools == {"1": list(log.catalog.tools("1")), "2": list(log.catalog.tools("2"))}
        assert res.n_positions == 4
        assert res.variance_shares["share_shared"].isna().all()          # undefined with one LLM
        assert res.implied["mean"].notna().all()
        assert res.first_vs_last["p_first_beats_last"].iloc[0] > 0.9


class TestImpliedByConstruction:
    """Exact properties of the implied-bias computation (no sampling)."""

    class _D:
        def __init__(self, K, P, M=1):
            self.M, self.C, self.K, self.P = M, len(K), np.array(K), P

    def test_randomised_no_api_effect_means_no_tool_bias(self):
        g = np.random.default_rng(0)
        alpha = np.zeros((4, 1, 2, 5))
        beta = g.normal(0, 2, (4, 1, 5))
        ta, tp, _ = B._implied_randomised({"alpha": alpha, "beta": beta}, self._D([5, 5], 5), g)
        np.testing.assert_allclose(ta, 0, atol=1e-12)     # position effects cannot create tool bias
        assert (tp > 0.05).all()                           # ... but the position skew remains

    def test_randomised_no_position_effect_means_no_position_bias(self):
        g = np.random.default_rng(1)
        alpha = g.normal(0, 2, (4, 1, 2, 4))
        beta = np.zeros((4, 1, 4))
        ta, tp, _ = B._implied_randomised({"alpha": alpha, "beta": beta}, self._D([4, 4], 4), g)
        np.testing.assert_allclose(tp, 0, atol=1e-12)
        assert (ta > 0.05).all()

    def test_randomised_matches_brute_force(self):
        import itertools

        g = np.random.default_rng(2)
        alpha = g.normal(size=(3, 1, 1, 4))
        beta = g.normal(size=(3, 1, 4))
        ta, tp, _ = B._implied_randomised({"alpha": alpha, "beta": beta}, self._D([4], 4), g)
        for s in range(3):
            pt, pp = np.zeros(4), np.zeros(4)
            perms = list(itertools.permutations(range(4)))
            for pi in perms:
                lg = alpha[s, 0, 0, list(pi)] + beta[s, 0]
                pr = np.exp(lg) / np.exp(lg).sum()
                pp += pr / len(perms)
                pt[list(pi)] += pr / len(perms)
            assert np.isclose(ta[s, 0, 0], 0.5 * np.abs(pt - 0.25).sum())
            assert np.isclose(tp[s, 0, 0], 0.5 * np.abs(pp - 0.25).sum())

    def test_logged_rotations_without_position_effect(self):
        log = simulate_bayes_log(np.array([[[1.0, 0.0, -1.0]]]), np.zeros((1, 3)), n_per_ordering=5, rng=0)
        design = B._design(log.counts(), ["model"], "exclude")
        post = {"alpha": np.array([[[[1.0, 0.0, -1.0]]]]), "beta": np.zeros((1, 1, 3))}
        ta, tp = B._implied_logged(post, design)
        np.testing.assert_allclose(tp, 0, atol=1e-12)     # balanced design: tools cannot create position bias
        p = np.exp([1.0, 0.0, -1.0]) / np.exp([1.0, 0.0, -1.0]).sum()
        np.testing.assert_allclose(ta[0, 0, 0], 0.5 * np.abs(p - 1 / 3).sum())


class TestOptionalSamplers:
    def test_numpyro_if_installed(self, sim_log):
        pytest.importorskip("numpyro")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res = fit_bayes(sim_log, model="v2", rng=1, draws=100, tune=100, chains=2, sampler="numpyro")
        assert res.diagnostics.sampler == "numpyro"
        assert res.idata.posterior["beta"].shape == (2, 100, 2, 3)
        assert (res.first_vs_last["p_first_beats_last"] > 0.99).all()


class TestDiagnosticsFlags:
    def test_short_run_is_flagged(self, sim_log):
        with pytest.warns(ConvergenceWarning, match="NOT CONVERGED"):
            res = fit_bayes(sim_log, model="v2", rng=3, draws=10, tune=5, chains=2, cores=1, sampler="pymc")
        assert not res.diagnostics.converged
        assert any("ESS" in f for f in res.diagnostics.flags)
        assert res.warnings[0].startswith("NOT CONVERGED")
        assert res.to_dict()["diagnostics"]["converged"] is False


class TestValidation:
    @pytest.mark.parametrize("kw, match", [
        ({"draws": 5}, "`draws` must be an integer >= 10"),
        ({"tune": -1}, "`tune` must be an integer >= 0"),
        ({"chains": 0}, "`chains` must be an integer >= 1"),
        ({"cores": 0}, "`cores` must be an integer >= 1"),
        ({"sampler": "stan"}, "`sampler` must be one of"),
        ({"parameterization": "x"}, "`parameterization` must be one of"),
        ({"mismatch": "drop"}, "`mismatch` must be one of"),
        ({"confidence_level": 1.5}, "`confidence_level` must be a number in"),
        ({"target_accept": 0}, "`target_accept` must be a number in"),
        ({"priors": {"mu_sd": -1}}, r"`priors\['mu_sd'\]` must be a positive number"),
        ({"priors": {"tau": 1}}, "`priors` has unknown key"),
        ({"rng": "seed"}, "`rng` must be None, an int"),
        ({"by": "nope"}, "`by` names column"),
        ({"progress": "yes"}, "`progress` must be True or False"),
    ])
    @pytest.mark.parametrize("model", ["v2", None])           # v2 explicitly, and the default (the margin model)
    def test_bad_arguments_name_the_parameter(self, sim_log, kw, match, model):
        with pytest.raises(ValueError, match=match):
            fit_bayes(sim_log, model=model, **kw)

    def test_no_usable_row(self, sim_log):
        d = sim_log.data.copy()
        d["status"] = "no_call"
        d[["chosen_tool", "chosen_position"]] = None
        log = SelectionLog.from_frame(d, sim_log.catalog)
        with (pytest.raises(ValueError, match="no row has a valid choice and a known ordering"),
              warnings.catch_warnings()):
            warnings.simplefilter("ignore")
            fit_bayes(log, model="v2")

    def test_missing_extra_names_the_pip_extra(self, monkeypatch):
        monkeypatch.setitem(B._EXTRAS, "nutpie", ("toolbias_no_such_module", "nutpie"))
        with pytest.raises(ImportError, match=r"pip install 'toolbias_stats\[nutpie\]'"):
            B._require("nutpie")

    def test_mismatch_policies(self, sim_log):
        d = sim_log.data.copy()
        i = d.index[(d["status"] == "ok") & (d["chosen_position"] == 2)][:4]
        d.loc[i, "chosen_position"] = 1                    # recorded position contradicts the ordering
        log = SelectionLog.from_frame(d, sim_log.catalog)
        ex = B._design(log.counts(), ["model"], "exclude")
        assert ex.rows["excluded"]["position_mismatch"] == 4
        tool = B._design(log.counts(), ["model"], "tool")
        pos = B._design(log.counts(), ["model"], "position")
        assert "position_mismatch" not in tool.rows["excluded"]
        assert tool.y[:, 1].sum() - pos.y[:, 1].sum() == 4
        assert pos.y[:, 0].sum() - tool.y[:, 0].sum() == 4


class TestCLI:
    def _study(self, tmp_path):
        log = simulate_bayes_log(ALPHA[:, :1], BETA, n_per_ordering=30, rng=4)
        log.write(tmp_path / "log.csv")
        log.catalog.to_frame().to_csv(tmp_path / "catalog.csv", index=False)
        (tmp_path / "study.toml").write_text('name = "tiny"\nformat = "table"\ncatalog = "catalog.csv"\n\n'
                                             '[[logs]]\npath = "log.csv"\n', encoding="utf-8")
        return tmp_path / "study.toml"

    def _args(self, *argv):
        import argparse

        from toolbias_stats.cli import _bayes as cli

        parser = argparse.ArgumentParser()
        cli.add_parser(parser.add_subparsers(dest="command"))
        return cli, parser.parse_args(["bayes", *argv])

    def test_bayes_json_and_loud_flag(self, tmp_path, capsys):
        study = self._study(tmp_path)
        cli, args = self._args(str(study), "--variant", "v2", "--draws", "10", "--tune", "5", "--chains", "2",
                               "--cores", "1", "--sampler", "pymc", "--json", "--idata", str(tmp_path / "fit.nc"))
        rc = cli.run(args)
        captured = capsys.readouterr()
        assert rc == 0
        out = json.loads(captured.out)
        assert set(out) >= {"diagnostics", "position_effects", "api_effects", "implied", "ppc_p", "rows"}
        assert out["diagnostics"]["converged"] is False
        assert "NOT CONVERGED" in captured.err
        assert (tmp_path / "fit.nc").exists()

    def test_report_with_bayes_section(self, tmp_path, capsys, monkeypatch):
        """`toolbias-stats report --bayes` puts the section (and its loud flag) into the page."""
        import toolbias_stats.models as models
        from toolbias_stats.cli._commands import main

        real = models.fit_bayes
        monkeypatch.setattr(models, "fit_bayes", lambda log, **kw: real(
            log, **{**kw, "model": "v2", "draws": 10, "tune": 5, "chains": 2, "cores": 1, "sampler": "pymc"}))
        study = self._study(tmp_path)
        rc = main(["report", str(study), "--out", str(tmp_path / "r.html"), "--bayes", "--bootstrap", "50",
                   "--null", "50"])
        captured = capsys.readouterr()
        assert rc == 0, captured.err
        page = (tmp_path / "r.html").read_text()
        assert '<section id="bayes">' in page and '<a href="#bayes">Bayesian model</a>' in page
        assert "NOT CONVERGED" in captured.err

    def test_bad_input_exits_2(self, tmp_path, capsys):
        study = self._study(tmp_path)
        cli, args = self._args(str(study), "--draws", "3")
        assert cli.run(args) == 2
        assert "`draws` must be an integer >= 10" in capsys.readouterr().err
        cli, args = self._args(str(tmp_path / "missing.toml"))
        assert cli.run(args) == 2


class TestFromCounts:
    """Issue 7: the model takes SelectionCounts; its data equal a row-level count of the log."""

    def test_design_counts_equal_rows(self, bb_study):
        log = bb_study.log
        design = B._design(log.counts(), ["model"], "tool")
        d = log.data
        ok = d[(d["status"] == "ok") & d["ordering"].notna()]
        pos = [o.split("|").index(t) for o, t in zip(ok["ordering"], ok["chosen_tool"])]
        direct = ok.assign(pos=pos).groupby(["model", "cluster_id", "ordering", "pos"]).size()
        got = {}
        for r in range(len(design.y)):
            for p in np.flatnonzero(design.y[r]):
                key = (design.llms[design.row_llm[r]], design.clusters[design.row_cluster[r]], design.orderings[r],
                       int(p))
                got[key] = int(design.y[r, p])
        assert got == {k: int(v) for k, v in direct.items()}
        assert design.rows["total"] == len(log)

    def test_counts_without_cells_are_refused(self, bb_study):
        counts = bb_study.log.counts()
        bare = type(counts)(counts.table, None, counts.catalog, counts.design_columns)
        with pytest.raises(ValueError, match="no per-ordering cells"):
            fit_bayes(bare, model="v1", draws=10, tune=10, chains=1)
        with pytest.raises(ValueError, match="needs to know which attempts belong to one query"):
            fit_bayes(bare, model="v2", draws=10, tune=10, chains=1)        # v2 needs the queries
