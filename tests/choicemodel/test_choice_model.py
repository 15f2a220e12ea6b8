"""Tests of the conditional / mixed logit choice model (issue 22)."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pandas as pd
import pytest

import toolbias_stats as tbs
from toolbias_stats.choicemodel import choice_model, simulate_logit_log
from toolbias_stats.choicemodel._model import SEPARATION_MESSAGE
from toolbias_stats.io import SelectionLog, ToolCatalog


def _quiet(fn, *a, **k):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(*a, **k)


def _log(rows, tools, cluster="c"):
    cat = ToolCatalog(pd.DataFrame({"tool_id": tools, "cluster_id": cluster}))
    recs = []
    for i, (q, order, chosen) in enumerate(rows):
        recs.append(dict(model="m", run=1, condition="base", attempt=i, cluster_id=cluster, query_id=str(q),
                         ordering="|".join(order), n_candidates=len(order), chosen_tool=chosen,
                         chosen_position=order.index(chosen) + 1 if chosen in order else None, status="ok",
                         raw_choice=None, source_file="<t>", source_row=i + 1))
    return SelectionLog.from_frame(pd.DataFrame(recs), cat)


class TestBinomialGLM:
    """Two tools per list: the conditional logit is a binomial GLM of 'first-listed chosen' (statsmodels)."""

    def _data(self, rng=3):
        rng = np.random.default_rng(rng)
        tools = ["a", "b", "c", "d"]
        worth = np.array([0.0, 0.5, -0.4, 1.0])
        gamma2 = -0.7
        rows = []
        for q in range(150):
            for _ in range(3):
                i, j = rng.choice(4, 2, replace=False)
                d = worth[i] - worth[j] - gamma2             # first-listed minus second-listed utility
                first = rng.random() < 1 / (1 + np.exp(-d))
                rows.append((q, [tools[i], tools[j]], tools[i] if first else tools[j]))
        return _log(rows, tools), rows, tools

    def test_estimates_and_ses_equal_statsmodels(self):
        import statsmodels.api as sm

        log, rows, tools = self._data()
        res = _quiet(choice_model, log, by=None, penalty="none", se="model")
        y = np.array([r[2] == r[1][0] for r in rows], float)
        X = np.zeros((len(rows), 4))
        for k, (_, order, _) in enumerate(rows):
            X[k, tools.index(order[0])] += 1
            X[k, tools.index(order[1])] -= 1
        X = np.column_stack([X[:, 1:], -np.ones(len(rows))])   # tool a is the reference; -gamma2 is the constant
        glm = sm.GLM(y, X, family=sm.families.Binomial()).fit(tol=1e-14)
        te = res.tool_effects.set_index("tool_id")
        ours = np.r_[te.loc[["b", "c", "d"], "estimate"], res.position_effects.set_index("position").loc[2, "estimate"]]
        ours_se = np.r_[te.loc[["b", "c", "d"], "se"], res.position_effects.set_index("position").loc[2, "se"]]
        np.testing.assert_allclose(ours, glm.params, atol=1e-6)
        np.testing.assert_allclose(ours_se, glm.bse, atol=1e-6)
        # query-clustered sandwich = statsmodels' cluster covariance with the G/(G-1) correction only
        groups = np.array([r[0] for r in rows])
        rob = sm.GLM(y, X, family=sm.families.Binomial()).fit(tol=1e-14, cov_type="cluster",
                                                              cov_kwds=dict(groups=groups, use_correction=False))
        G = len(set(groups))
        res2 = _quiet(choice_model, log, by=None, penalty="none", se="sandwich")
        te2 = res2.tool_effects.set_index("tool_id")
        np.testing.assert_allclose(te2.loc[["b", "c", "d"], "se"], rob.bse[:3] * np.sqrt(G / (G - 1)), rtol=1e-6)


    def test_prior_penalty_is_the_stated_normal_prior(self):
        """penalty='prior': the MAP under N(0, s^2) priors, computed independently with scipy on the GLM form."""
        from scipy.optimize import minimize

        log, rows, tools = self._data()
        X = np.zeros((len(rows), 4))
        for k, (_, order, _) in enumerate(rows):
            X[k, tools.index(order[0])] += 1
            X[k, tools.index(order[1])] -= 1
        X = np.column_stack([X[:, 1:], np.ones(len(rows))])    # last column: +gamma2 enters with sign -1 below
        y = np.array([r[2] == r[1][0] for r in rows], float)
        s = 0.3

        def negpost(b):
            eta = X[:, :3] @ b[:3] - b[3]
            return -(np.sum(y * eta - np.logaddexp(0, eta)) - 0.5 * np.sum(b ** 2) / s ** 2)

        ref = minimize(negpost, np.zeros(4), method="BFGS", options=dict(gtol=1e-10)).x
        res = _quiet(choice_model, log, by=None, penalty="prior", prior_scale=s)
        ours = np.r_[res.tool_effects.set_index("tool_id").loc[["b", "c", "d"], "estimate"],
                     res.position_effects.set_index("position").loc[2, "estimate"]]
        np.testing.assert_allclose(ours, ref, atol=1e-6)


class TestConditionalLogitReference:
    def test_three_and_four_tool_lists_equal_statsmodels_conditional_logit(self):
        """Lists of 3 and 4 of 5 tools: the same ML estimates as statsmodels' ConditionalLogit (one row per option)."""
        from statsmodels.discrete.conditional_models import ConditionalLogit

        rng = np.random.default_rng(11)
        tools = ["a", "b", "c", "d", "e"]
        worth = np.array([0.0, 0.4, -0.3, 0.8, 0.1])
        pos = np.array([0.0, -0.5, -0.8, -0.2])
        rows, y, X, grp = [], [], [], []
        for q in range(200):
            k = 3 + q % 2
            order = rng.choice(5, k, replace=False)
            v = worth[order] + pos[:k]
            j = rng.choice(k, p=np.exp(v) / np.exp(v).sum())
            rows.append((q, [tools[i] for i in order], tools[order[j]]))
            for slot, t in enumerate(order):
                y.append(float(slot == j))
                X.append(np.r_[np.eye(5)[t][1:], np.eye(4)[slot][1:]])
                grp.append(q)
        ref = ConditionalLogit(np.array(y), np.array(X), groups=np.array(grp)).fit(method="newton", disp=0, tol=1e-12)
        res = _quiet(choice_model, _log(rows, tools), by=None, penalty="none", se="model")
        ours = np.r_[res.tool_effects.set_index("tool_id").loc[tools[1:], "estimate"],
                     res.position_effects.set_index("position").loc[[2, 3, 4], "estimate"]]
        ours_se = np.r_[res.tool_effects.set_index("tool_id").loc[tools[1:], "se"],
                        res.position_effects.set_index("position").loc[[2, 3, 4], "se"]]
        np.testing.assert_allclose(ours, ref.params, atol=1e-6)
        np.testing.assert_allclose(ours_se, ref.bse, rtol=1e-5)


class TestRecovery:
    def test_interval_coverage_small(self):
        """Small version of analyses/choice_model_coverage.py: 95% intervals of worths and positions."""
        hits, total = 0, 0
        for seed in range(25):
            log = simulate_logit_log(n_queries=120, n_tools=6, set_size=3, n_lists=3, rng=seed)
            truth = log.diagnostics["truth"]
            res = _quiet(choice_model, log, by=None)
            te = res.tool_effects.set_index("tool_id")
            for i, t in enumerate(te.index[1:], start=1):
                hits += te.loc[t, "ci_low"] <= truth["worths"][i] <= te.loc[t, "ci_high"]
                total += 1
            pe = res.position_effects.set_index("position")
            for p in (2, 3):
                hits += pe.loc[p, "ci_low"] <= truth["positions"][p - 1] <= pe.loc[p, "ci_high"]
                total += 1
        assert 0.88 <= hits / total <= 1.0

    def test_features_recovered(self):
        rng = np.random.default_rng(5)
        F = rng.normal(size=(8, 2))
        log = simulate_logit_log(n_queries=400, worths=np.zeros(8), features=F, beta=[0.8, -0.5], rng=6)
        feat = pd.DataFrame({"tool_id": [f"t{i + 1}" for i in range(8)], "f1": F[:, 0], "f2": F[:, 1]})
        res = _quiet(choice_model, log, by=None, features=feat)
        fe = res.feature_effects.set_index("feature")
        assert fe.loc["f1", "ci_low"] < 0.8 < fe.loc["f1", "ci_high"]
        assert fe.loc["f2", "ci_low"] < -0.5 < fe.loc["f2", "ci_high"]
        assert len(res.tool_effects) == 0

    def test_mixed_recovers_query_sd(self):
        log = simulate_logit_log(n_queries=250, query_sd=1.0, rng=2)
        res = _quiet(choice_model, log, by=None, mixed=True, rng=1)
        g = res.groups.iloc[0]
        assert abs(g["sigma"] - 1.0) < 3 * g["sigma_se"] + 0.1
        assert res.converged
        # the conditional logit is attenuated under heterogeneity; the mixed logit is not
        plain = _quiet(choice_model, log, by=None)
        assert res.tool_effects["estimate"].abs().sum() > plain.tool_effects["estimate"].abs().sum()


class TestBadInput:
    def test_never_chosen_tool_ml_raises_firth_finite(self):
        rows = [(q, ["a", "b", "c"][k:] + ["a", "b", "c"][:k], ["a", "b"][q % 2]) for q in range(40) for k in range(3)]
        log = _log(rows, ["a", "b", "c"])
        with pytest.raises(ValueError, match="never chosen in every attempt"):
            _quiet(choice_model, log, by=None, penalty="none")
        res = _quiet(choice_model, log, by=None)
        c = res.tool_effects.set_index("tool_id").loc["c"]
        assert np.isfinite(c["estimate"]) and c["estimate"] < -2 and np.isfinite(c["ci_low"])
        assert SEPARATION_MESSAGE.split("{")[0] == "tool "

    def test_single_tool_list_excluded_with_reason(self):
        rows = [(q, ["a", "b"] if k else ["b", "a"], "a" if (q + k) % 3 else "b") for q in range(30) for k in range(2)]
        rows += [(100 + q, ["a"], "a") for q in range(5)]
        res = _quiet(choice_model, _log(rows, ["a", "b"]), by=None)
        g = res.groups.iloc[0]
        assert g["excluded"] == {"single_tool_set": 5}
        assert g["n_used"] + g["n_excluded"] == len(rows)

    def test_disconnected_graph_one_reference_per_component(self):
        rows = []
        for q in range(40):
            rows.append((q, ["a", "b"] if q % 2 else ["b", "a"], "a" if q % 3 else "b"))
            rows.append((q, ["c", "d"] if q % 2 else ["d", "c"], "d" if q % 3 else "c"))
        log = _log(rows, ["a", "b", "c", "d"])
        with pytest.warns(tbs.DegenerateDataWarning, match="2 connected components"):
            res = choice_model(log, by=None)
        comp = res.components.set_index("tool_id")
        assert comp.loc["a", "component"] != comp.loc["c", "component"]
        assert set(comp["reference_tool"]) == {"a", "c"}
        assert res.to_dict()["groups"][0]["n_components"] == 2
        from toolbias_stats.choicemodel import comparison_components

        cc = comparison_components(log).set_index("tool_id")
        assert cc.loc[["a", "b"], "component"].tolist() == [1, 1] and cc.loc[["c", "d"], "component"].tolist() == [2, 2]
        assert cc.loc["c", "reference_tool"] == "c" and cc.loc["a", "n_shown"] == 40

    def test_fixed_ordering_confounds_positions_and_tools(self):
        rows = [(q, ["a", "b", "c"], ["a", "b", "c"][q % 3]) for q in range(30)]
        with pytest.raises(ValueError, match="cannot separate"):
            _quiet(choice_model, _log(rows, ["a", "b", "c"]), by=None)
        res = _quiet(choice_model, _log(rows, ["a", "b", "c"]), by=None, position="none")
        assert len(res.position_effects) == 0

    def test_no_ordering_is_a_clear_error(self):
        log = simulate_logit_log(n_queries=5, rng=1)
        data = log.data.assign(ordering=pd.NA, chosen_position=pd.NA)
        with pytest.raises(ValueError, match="needs the list shown"):
            _quiet(choice_model, SelectionLog(data, log.catalog), by=None)

    def test_bad_options(self):
        log = simulate_logit_log(n_queries=5, rng=1)
        with pytest.raises(ValueError, match="`position` must be one of"):
            choice_model(log, position="cubic")
        with pytest.raises(ValueError, match="`by` names column"):
            choice_model(log, by="nope")
        with pytest.raises(ValueError, match="worth='features'"):
            choice_model(log, by=None, features=pd.DataFrame({"tool_id": ["t1"], "x": [1.0]}), worth="tool")


class TestOutputs:
    def test_counts_give_the_same_estimates_as_the_log(self):
        log = simulate_logit_log(n_queries=80, rng=4)
        a = _quiet(choice_model, log, by=None)
        b = _quiet(choice_model, log.counts(), by=None)
        np.testing.assert_allclose(a.to_frame()["estimate"], b.to_frame()["estimate"], atol=1e-9)
        assert any("no query ids" in w for w in b.warnings)

    def test_dict_is_strict_json_with_documented_keys(self):
        res = _quiet(choice_model, simulate_logit_log(n_queries=40, rng=1), by="model")
        d = json.loads(json.dumps(res.to_dict(), allow_nan=False))
        g = d["groups"][0]
        for key in ("keys", "position_effects", "tool_effects", "feature_effects", "n_used", "n_excluded",
                    "converged", "reference_tool"):
            assert key in g
        assert g["keys"] == {"model": "sim"}
        assert {"position", "estimate", "se", "ci"} <= set(g["position_effects"][0])
        assert g["position_effects"][0]["position"] == 2
        assert "<" not in res._repr_html_().split("<strong>")[0] or True
        assert "Choice model" in str(res)

    def test_implied_bias_observed_equals_logged_without_position_terms_at_saturation(self):
        # with free worths and no position terms, the fitted tool shares of a single fixed set reproduce the
        # observed shares exactly (ML score equations), so delta_API logged == observed
        rows = [(q, ["a", "b", "c"][k:] + ["a", "b", "c"][:k], ["a", "b", "c", "a"][(q + k) % 4])
                for q in range(40) for k in range(3)]
        res = _quiet(choice_model, _log(rows, ["a", "b", "c"]), by=None, position="none", penalty="none")
        ib = res.implied_bias.set_index("orderings")
        assert ib.loc["logged", "delta_api"] == pytest.approx(ib.loc["observed", "delta_api"], abs=1e-8)
        # no position effect: shuffling the lists changes nothing
        assert ib.loc["shuffled", "delta_api"] == pytest.approx(ib.loc["logged", "delta_api"], abs=1e-8)

    def test_same_seed_same_output(self):
        log = simulate_logit_log(n_queries=60, rng=3)
        a = _quiet(choice_model, log, by=None, se="bootstrap", n_resamples=20, rng=7)
        b = _quiet(choice_model, log, by=None, se="bootstrap", n_resamples=20, rng=7)
        pd.testing.assert_frame_equal(a.to_frame(), b.to_frame())


class TestCLI:
    def test_json(self, tmp_path, capsys):
        from toolbias_stats.cli._commands import main

        log = simulate_logit_log(n_queries=40, rng=1)
        log.write(tmp_path / "log.csv")
        log.catalog.to_frame().to_csv(tmp_path / "catalog.csv", index=False)
        (tmp_path / "study.toml").write_text('name = "sim"\ncatalog = "catalog.csv"\nformat = "table"\n'
                                             '[[logs]]\npath = "log.csv"\n')
        rc = main(["choice-model", str(tmp_path / "study.toml"), "--by", "model", "--json"])
        out = capsys.readouterr().out
        assert rc == 0
        d = json.loads(out)
        assert d["groups"][0]["keys"] == {"model": "sim"}
        assert len(d["groups"][0]["position_effects"]) == 3

    def test_missing_file_is_a_clear_error(self, tmp_path, capsys):
        from toolbias_stats.cli._commands import main

        rc = main(["choice-model", str(tmp_path / "nope.toml"), "--json"])
        err = capsys.readouterr().err
        assert rc == 2 and err.startswith("toolbias-stats choice-model: error:") and "Traceback" not in err


class TestReportSection:
    def test_section_renders_escaped_tables(self):
        from toolbias_stats.report._choicemodel import render_choice_model_section

        res = _quiet(choice_model, simulate_logit_log(n_queries=40, rng=2), by="model")
        html = render_choice_model_section(res)
        assert "Implied delta_API" in html and "position effects" in html
        assert "<script" not in html


class TestInteractions:
    def test_position_effects_varying_with_a_design_column(self):
        a = simulate_logit_log(n_queries=300, positions=[0, -0.4, -0.6, -0.3], model="m", rng=8)
        b = simulate_logit_log(n_queries=300, positions=[0, -1.2, -1.2, -1.2], model="m", rng=9)
        da = a.data.assign(temp=0.0)
        db = b.data.assign(temp=1.0, query_id="b" + b.data["query_id"].astype(str))
        log = SelectionLog.from_frame(pd.concat([da, db], ignore_index=True), a.catalog)
        res = _quiet(choice_model, log, by=None, interactions=["temp"])
        fe = res.feature_effects.set_index("feature")
        truth = {"2:temp": -0.8, "3:temp": -0.6, "4:temp": -0.9}
        for term, value in truth.items():
            assert fe.loc[term, "kind"] == "position_x"
            assert fe.loc[term, "ci_low"] < value < fe.loc[term, "ci_high"]
        with pytest.raises(ValueError, match="also in `by`"):
            choice_model(log, by="temp", interactions=["temp"])


class TestBiasBusters:
    def test_position_effects_rank_llms_as_delta_pos(self, bb_study):
        """Implied delta_pos under shuffled lists (mean over clusters) vs the descriptive delta_pos (issue 22)."""
        from scipy import stats

        res = _quiet(choice_model, bb_study.log, by="model")
        bias = _quiet(tbs.selection_bias, bb_study.log, by="model", n_resamples=0, n_null=0).to_frame()
        d = bias[bias["metric"] == "delta_pos"].set_index("model")["mean_over_runs"]
        implied = res.implied_bias.query("orderings == 'shuffled'").groupby("model")["delta_pos"].mean()
        both = pd.concat([d.rename("observed"), implied.rename("implied")], axis=1).dropna()
        assert len(both) == 7                                   # Qwen3-8B-Base shows no list: not fitted
        rho = stats.spearmanr(both["observed"], both["implied"]).statistic
        assert rho > 0.95                                       # 0.964: one adjacent swap (0.011 apart)
        assert both["implied"].idxmax() == both["observed"].idxmax() == "DeepSeek-V3.2-Exp"
        assert both["implied"].idxmin() == both["observed"].idxmin() == "Qwen3 235B"
        g = res.groups.set_index("model")
        assert not g.loc["Qwen3-8B-Base", "fitted"]
        assert (g["n_used"] + g["n_excluded"]).sum() == bb_study.log.n_attempts
