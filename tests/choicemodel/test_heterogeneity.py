"""Issue 35 (row 3) and issue 36: the mixed logit's query-clustered sandwich, the position-heterogeneity check,
contrasts of worths with their covariance, and δ_pos beside the position effect.

The studies are description-variant tournaments (``analyses/choice_model_heterogeneity.py``): every pair of five
variants is a cluster, each query shows its pair in both orders twice, and the first-position advantage of a query
is ``0.5 + sd * z``. The large version (500 studies per cell) is in that script and docs/choice_model.md.
"""

from __future__ import annotations

import importlib.util
import json
import warnings
from pathlib import Path

import numpy as np
import pytest

from toolbias_stats._text import position_side_by_side
from toolbias_stats.choicemodel import choice_model

_SPEC = importlib.util.spec_from_file_location(
    "choice_model_heterogeneity", Path(__file__).resolve().parents[2] / "analyses" / "choice_model_heterogeneity.py")
sim = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(sim)


def _fit(log, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return choice_model(log, by=None, reference="v1", **kw)


def _se(res, term):
    f = res.to_frame().set_index("term")
    return float(f.loc[term, "se"]), float(f.loc[term, "estimate"])


def _hessian_by_differences(theta, d, prior_prec, pp):
    """Reference: minus the Hessian of the simulated objective by central differences of its analytic gradient
    (the draws are fixed, so the gradient is a smooth function of theta)."""
    from toolbias_stats.choicemodel._fit import _mixed_grad, _mixed_ll

    def grad(t):
        sq, _ = _mixed_grad(_mixed_ll(t[:-1], t[-1], d, prior_prec)[2], d)
        return sq.sum(axis=0) - pp * t

    H = np.zeros((len(theta), len(theta)))
    for j in range(len(theta)):
        h = 1e-4 * max(1.0, abs(float(theta[j])))
        up, dn = theta.copy(), theta.copy()
        up[j] += h
        dn[j] -= h
        H[:, j] = -(grad(up) - grad(dn)) / (2 * h)
    return 0.5 * (H + H.T)


def test_closed_form_hessian_equals_differences():
    """The mixed logit's sandwich bread (Louis' identity: expected per-draw information minus the posterior variance
    of the per-draw query scores) equals central differences of the simulated gradient."""
    from toolbias_stats.choicemodel import _fit as F
    from toolbias_stats.choicemodel import simulate_logit_log
    from toolbias_stats.choicemodel._data import prepare_groups
    from toolbias_stats.choicemodel._model import _design

    log = simulate_logit_log(n_tools=5, set_size=3, n_queries=60, n_lists=3, query_sd=1.0, rng=4)
    g = prepare_groups(log, [])[0][0]
    X, mask, _ = _design(g, None, "free", "tool", {0}, [])
    qp = g.query[:, None] * len(g.tools) + np.maximum(g.items, 0)
    uniq, pair = np.unique(qp[mask], return_inverse=True)
    pf = np.zeros(mask.shape, np.int64)
    pf[mask] = pair.ravel()
    prior = np.full(X.shape[2], 0.16)
    z = np.random.default_rng(1).standard_normal((50, len(uniq)))
    d = F._MixedData(X, mask, g.chosen, g.weight, g.query, len(g.query_labels), pf, np.concatenate([z, -z]))
    pp = np.concatenate([prior, [0.0]])
    theta = np.array([0.3, 0.5, 0.9, 1.1, -0.4, -0.7, 0.8])
    H = F._mixed_information(theta, d, prior, pp)
    ref = _hessian_by_differences(theta, d, prior, pp)
    np.testing.assert_allclose(H, ref, atol=2e-3 * np.abs(ref).max())
    assert np.all(np.linalg.eigvalsh(H) > 0)


class TestMixedSandwich:
    def test_agrees_with_the_conditional_logit_when_sigma_is_zero(self):
        """Maximum likelihood, no heterogeneity: where the mixed logit's sd is at its boundary 0 it is the
        conditional logit, and its sandwich (Hessian by differences) equals the conditional logit's sandwich."""
        cat = sim.catalog()
        checked = 0
        for seed in range(12):
            log = sim.simulate(0.0, np.random.default_rng(seed), cat=cat)
            m = _fit(log, mixed=True, penalty="none", rng=seed)
            if m.groups["sigma"].iloc[0] > 1e-3:
                continue
            c = _fit(log, penalty="none")
            for term in ("2", "v2", "v5"):
                (sm, em), (sc, ec) = _se(m, term), _se(c, term)
                assert em == pytest.approx(ec, abs=2e-3)
                assert sm == pytest.approx(sc, rel=0.02)
            checked += 1
        assert checked >= 2

    def test_does_not_shrink_when_queries_differ_in_their_position_effect(self):
        """sd 1.2 between queries: the mixed logit's position SE matches the conditional logit's clustered sandwich
        (the score outer product it used before was not clustered: issue 35 measured 60-130x narrower)."""
        log = sim.simulate(1.2, np.random.default_rng(3), cat=sim.catalog(), n_queries=16)
        m, c = _fit(log, mixed=True, rng=1), _fit(log)
        (sm, _), (sc, _) = _se(m, "2"), _se(c, "2")
        assert sm == pytest.approx(sc, rel=0.25)
        assert m.groups["se_ratio"].iloc[0] > 1.2

    def test_coverage_small(self):
        """40 studies, sd 0.8: the mixed and conditional position intervals cover their (pseudo-)truth (the large
        version: 500 studies, 93-96%)."""
        rows, _ = sim.run(0.8, 40, 7)
        cov = {f: np.mean([r["covered"] for r in rows if r["fit"] == f and r["kind"] == "position"])
               for f in ("conditional", "mixed")}
        assert cov["conditional"] >= 0.85 and cov["mixed"] >= 0.85


class TestHeterogeneityCheck:
    def test_detects_position_heterogeneity_and_says_which_interval(self):
        log = sim.simulate(1.5, np.random.default_rng(5), cat=sim.catalog(), n_queries=16)
        g = _fit(log).groups.iloc[0]
        assert g["position_heterogeneity"] and g["position_dispersion_p"] < 0.01
        assert "trust the query-clustered sandwich" in g["interval_advice"]
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            choice_model(log, by=None, se="model")
        assert any("too narrow" in str(w.message) for w in caught)

    def test_quiet_without_heterogeneity(self):
        hits = 0
        for seed in range(10):
            g = _fit(sim.simulate(0.0, np.random.default_rng(seed), cat=sim.catalog())).groups.iloc[0]
            hits += bool(g["position_heterogeneity"])
            assert 0.6 < g["position_dispersion"] < 1.5
        assert hits <= 2

    def test_in_json_and_text(self):
        res = _fit(sim.simulate(0.0, np.random.default_rng(1), cat=sim.catalog()))
        h = res.to_dict()["groups"][0]["position_heterogeneity"]
        assert set(h) == {"position_dispersion", "position_dispersion_df", "position_dispersion_p", "se_ratio",
                          "detected", "advice"}
        json.dumps(res.to_dict(), allow_nan=False)
        assert "which interval:" in str(res)


class TestContrast:
    def test_equals_the_fit_with_the_other_reference(self):
        """worth[a] - worth[b] from the covariance equals a's worth when b is the reference (the sandwich is
        invariant to the reparametrisation)."""
        log = sim.simulate(0.0, np.random.default_rng(2), cat=sim.catalog())
        a = _fit(log)
        c = a.contrast("v5", "v3")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            b = choice_model(log, by=None, reference="v3").tool_effects.set_index("tool_id").loc["v5"]
        assert c["estimate"] == pytest.approx(b["estimate"], abs=1e-6)
        assert c["se"] == pytest.approx(b["se"], rel=1e-4)
        assert (c["ci_low"], c["ci_high"]) == pytest.approx((b["ci_low"], b["ci_high"]), abs=1e-4)
        assert a.contrast("v1", "v1")["estimate"] == 0.0
        ref = a.contrast("v3", "v1")            # against the reference: its own worth
        assert ref["se"] == pytest.approx(a.tool_effects.set_index("tool_id").loc["v3", "se"])
        cov = a.covariance()
        assert list(cov.index[:2]) == ["tool:v2", "tool:v3"] and np.allclose(cov, cov.T)

    def test_unknown_tool_is_named(self):
        res = _fit(sim.simulate(0.0, np.random.default_rng(2), cat=sim.catalog()))
        with pytest.raises(ValueError, match="tool 'nope' is not shown"):
            res.contrast("v2", "nope")


class TestCli:
    @pytest.fixture()
    def manifest(self, tmp_path):
        log = sim.simulate(0.0, np.random.default_rng(4), cat=sim.catalog())
        log.catalog.table.to_csv(tmp_path / "cat.csv", index=False)
        log.data.drop(columns=["model"]).to_csv(tmp_path / "log.csv", index=False)
        (tmp_path / "s.toml").write_text('name = "t"\nformat = "table"\ncatalog = "cat.csv"\n[[logs]]\n'
                                         'path = "log.csv"\nmodel = "m"\n', encoding="utf-8")
        return tmp_path / "s.toml"

    def test_reference_contrast_text_and_json(self, manifest, capsys):
        from toolbias_stats.cli._commands import main

        assert main(["choice-model", str(manifest), "--reference", "v2", "--contrast", "v5,v3",
                     "--contrast", "v4,v2"]) == 0
        out = capsys.readouterr().out
        assert "vs v2" in out and "v5 - v3:" in out and "delta_pos (descriptive) beside the position effect" in out
        assert main(["choice-model", str(manifest), "--contrast", "v5,v3", "--json"]) == 0
        d = json.loads(capsys.readouterr().out)
        c = d["contrasts"][0]
        assert (c["tool_a"], c["tool_b"]) == ("v5", "v3") and len(c["ci"]) == 2 and "ci_low" not in c
        g = d["groups"][0]
        assert len(g["covariance"]["matrix"]) == len(g["covariance"]["terms"]) == 5   # 4 worths + position 2
        assert all(len(t["ci"]) == 2 for t in g["tool_effects"])

    def test_bad_contrast_is_an_error(self, manifest, capsys):
        from toolbias_stats.cli._commands import main

        assert main(["choice-model", str(manifest), "--contrast", "v5"]) == 2
        assert "--contrast expects two tool ids as A,B; got 'v5'" in capsys.readouterr().err


class TestSideBySide:
    def test_strong_description_preferences_leave_position_less_room(self):
        """Worths 4 log-odds apart and a position effect of 0.8: the winner wins wherever it stands, so δ_pos is
        small while the position effect is clear; the sentence says so."""
        from toolbias_stats.choicemodel import simulate_logit_log

        log = simulate_logit_log(n_tools=2, set_size=2, n_queries=600, n_lists=2, worths=[0.0, 4.0],
                                  positions=[0.0, -0.8], rng=3)
        res = _fit_plain(log)
        rows, notes = position_side_by_side(res)
        r = rows[0]
        assert r["delta_pos"] < 0.06 and r["position_only_delta_pos"] == pytest.approx(0.19, abs=0.05)
        assert r["wald_p"] < 0.05
        assert len(notes) == 1 and "leave position less room" in notes[0]
        assert "leave position less room" in str(res)

    def test_delta_pos_falls_between_groups_while_the_position_effect_does_not(self):
        """Two models with one position effect (0.8) whose description preferences differ (worths 0.5 vs 4 apart):
        δ_pos falls from the first to the second, the position effect does not; one sentence names both."""
        import pandas as pd

        from toolbias_stats import SelectionLog
        from toolbias_stats.choicemodel import simulate_logit_log

        parts = [simulate_logit_log(n_tools=2, set_size=2, n_queries=600, n_lists=2, worths=[0.0, w],
                                     positions=[0.0, -0.8], model=m, rng=i).data
                 for i, (m, w) in enumerate((("small", 0.5), ("large", 4.0)))]
        base = simulate_logit_log(n_tools=2, set_size=2, n_queries=2, rng=0)
        log = SelectionLog.from_frame(pd.concat(parts, ignore_index=True).assign(
            source_row=lambda f: range(1, len(f) + 1)), base.catalog)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res = choice_model(log, by="model")
        rows, notes = position_side_by_side(res)
        by = {r["group"]: r for r in rows}
        assert by["model=small"]["delta_pos"] > by["model=large"]["delta_pos"] + 0.05
        falls = [n for n in notes if n.startswith("δ_pos falls from model=small")]
        assert len(falls) == 1 and "while the position effect does not" in falls[0]

    def test_no_sentence_when_they_agree(self):
        from toolbias_stats.choicemodel import simulate_logit_log

        res = _fit_plain(simulate_logit_log(n_tools=2, set_size=2, n_queries=300, n_lists=2, worths=[0.0, 0.0],
                                             positions=[0.0, -0.8], rng=3))
        assert position_side_by_side(res)[1] == []


def _fit_plain(log):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return choice_model(log, by=None)
