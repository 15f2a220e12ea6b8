"""tool_shadow: known-truth simulations, the score's arithmetic, JSON, grouping, injected encoder."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from toolbias_stats import DegenerateDataWarning
from toolbias_stats.shadow import DOMAINS, ShadowAudit, simulate_audit, tool_shadow, worksheet_weights
from toolbias_stats.shadow._weights import BANNER

from .conftest import strict_json


def _logistic100(x):
    return 100 / (1 + np.exp(-x))


class TestKnownTruth:
    def test_null_effect_scale_covers_50(self):
        # no position, length or similarity effect: the effect-size PBS interval covers 50 in most audits
        # (the acceptance study with 200 audits is analyses/shadow_simulation.py)
        cover, zl, zr = 0, [], []
        for seed in range(12):
            res = tool_shadow(simulate_audit(300, 8, permute=True, rng=seed), n_resamples=300, n_weight_draws=0,
                              rng=seed)
            g = res.groups[0]
            lo, hi = g.pbs["effect"].ci
            cover += lo <= 50 <= hi
            zl.append(g.domains["L"].z)
            zr.append(g.domains["R"].z)
        assert cover >= 10
        assert np.all(np.abs(zl) < 3.5) and np.all(np.abs(zr) < 3.5)

    def test_strong_primacy(self):
        res = tool_shadow(simulate_audit(600, 12, position_effect=2.0, rng=1), n_resamples=300, rng=1)
        g = res.groups[0]
        assert g.domains["L"].z > 3 and g.domains["R"].z > 3
        assert g.domains["L"].z_ci.low > 0 and g.domains["R"].z_ci.low > 0
        assert g.pbs["paper"].estimate > 90
        assert g.pbs["effect"].ci.low > 55

    def test_length_confound_goes_to_D_not_R(self):
        res = tool_shadow(simulate_audit(1500, 12, length_effect=0.8, length_position_corr=0.6, rng=2),
                          n_resamples=300, rng=2)
        g = res.groups[0]
        assert g.domains["D"].z > 4
        assert abs(g.domains["R"].z) < 3
        assert g.domains["R"].z_ci.low < 0 < g.domains["R"].z_ci.high or abs(g.domains["R"].effect) < 0.15

    def test_paper_scale_saturates_with_n_effect_scale_does_not(self):
        small = tool_shadow(simulate_audit(200, 12, position_effect=0.6, permute=True, rng=3), n_resamples=0,
                            n_weight_draws=0).groups[0]
        large = tool_shadow(simulate_audit(6000, 12, position_effect=0.6, permute=True, rng=3), n_resamples=0,
                            n_weight_draws=0).groups[0]
        assert large.pbs["paper"].estimate > 99 > small.pbs["paper"].estimate
        assert abs(large.pbs["effect"].estimate - small.pbs["effect"].estimate) < 6


@pytest.fixture(scope="module")
def res():
    return tool_shadow(simulate_audit(400, 10, position_effect=1.0, length_effect=0.3, rng=4), n_resamples=200,
                       n_weight_draws=300, rng=4)


class TestArithmetic:
    def test_pbs_from_reported_numbers(self, res):
        g = res.groups[0]
        w = np.array([g.domains[d].weight for d in DOMAINS])
        z = np.array([g.domains[d].z for d in DOMAINS])
        e = np.array([g.domains[d].effect for d in DOMAINS])
        assert w.sum() == pytest.approx(1.0)
        assert g.pbs["paper"].estimate == pytest.approx(_logistic100(w @ z))
        assert g.pbs["effect"].estimate == pytest.approx(_logistic100(w @ e))
        assert [g.domains[d].weight for d in DOMAINS] == pytest.approx([0.30, 0.175, 0.175, 0.35])

    def test_signs(self, res):
        g = res.groups[0]
        # R's z is minus the z of the position coefficient: earlier called more -> positive
        assert g.domains["R"].statistic > 0 and g.domains["R"].z > 0
        assert g.domains["S"].statistic == g.domains["S"].effect

    def test_intervals_contain_estimates(self, res):
        g = res.groups[0]
        for d in DOMAINS:
            s = g.domains[d]
            assert s.z_ci.low <= s.z <= s.z_ci.high or d == "S"
        p = g.pbs["paper"]
        assert p.ci.low <= p.estimate <= p.ci.high
        assert p.sensitivity.low <= p.sensitivity.high

    def test_frames(self, res):
        df = res.to_frame()
        assert list(df["domain"]) == list(DOMAINS)
        assert {"z_ci_low", "z_ci_high", "contribution_paper", "precision"} <= set(df.columns)
        pf = res.pbs_frame()
        assert list(pf["scale"]) == ["paper", "effect"]

    def test_json_shape_and_strict(self, res):
        doc = strict_json(json.dumps(res.to_dict(), allow_nan=False))
        g = doc["groups"][0]
        assert doc["banner"] == BANNER == "pre-validation; not for deployment gating"
        assert set(g) >= {"keys", "n_turns", "n_tools", "scale", "pbs", "weights", "domains", "notice"}
        assert set(g["pbs"]) == {"estimate", "ci", "sensitivity"}
        assert set(g["weights"]) == set(DOMAINS) and set(g["domains"]) == set(DOMAINS)
        for d in DOMAINS:
            assert set(g["domains"][d]) >= {"statistic", "z", "z_ci", "weight", "contribution", "precision"}
            assert g["domains"][d]["precision"] in ("medium", "low")
        assert g["notice"].startswith(BANNER)
        assert doc["validated"] is False
        assert res.to_dict(scale="effect")["groups"][0]["scale"] == "effect"

    def test_notice_over_60(self, res):
        g = res.groups[0]
        assert g.pbs["paper"].estimate > 60
        assert "breakdown is mandatory" in g.notice("paper")


class TestOptions:
    def test_groups(self):
        a = simulate_audit(200, 6, position_effect=1.0, rng=5)
        rows = a.rows.copy()
        rows["harness"] = np.where(rows["turn_id"] < "t00101", "x", "y")
        aud = ShadowAudit.from_frame(rows, group_columns=("harness",))
        res = tool_shadow(aud, n_resamples=50, n_weight_draws=50, rng=1)
        assert [g.keys for g in res.groups] == [{"harness": "x"}, {"harness": "y"}]
        assert sum(g.n_turns for g in res.groups) == 200

    def test_unavailable_domain_renormalised(self):
        a = simulate_audit(200, 6, rng=6)
        rows = a.rows.drop(columns="similarity")
        aud = ShadowAudit.from_frame(rows)
        with pytest.warns(DegenerateDataWarning, match="domain S not computed"):
            res = tool_shadow(aud, encoder=False, n_resamples=50, n_weight_draws=50, rng=1)
        g = res.groups[0]
        assert not g.domains["S"].available and g.domains["S"].weight == 0
        assert g.domains["L"].weight == pytest.approx(0.30 / 0.825)
        assert "encoder=False" in g.domains["S"].note
        doc = strict_json(json.dumps(res.to_dict(), allow_nan=False))
        assert doc["groups"][0]["domains"]["S"]["z"] is None

    def test_injected_encoder(self, fake_encoder, example_audit):
        rows = example_audit.rows
        sub = ShadowAudit.from_frame(rows[rows["turn_id"] <= "t0150"], tasks=example_audit.tasks)
        res = tool_shadow(sub, encoder=fake_encoder, n_resamples=50, n_weight_draws=0, rng=2)
        assert fake_encoder.calls == 1
        assert res.similarity["available"] and res.similarity["encoder"] == "FakeEncoder"
        assert res.groups[0].domains["S"].available

    def test_cis_give_worksheet_weights(self):
        res = tool_shadow(simulate_audit(100, 6, rng=7), cis={"L": (1.2, 1.8), "R": (1.1, 1.4)}, n_resamples=0,
                          n_weight_draws=0)
        assert res.weights.weights == worksheet_weights({"L": (1.2, 1.8), "R": (1.1, 1.4)}).weights

    @pytest.mark.parametrize("kw,match", [({"scale": "z"}, "`scale` must be one of"),
                                          ({"holdout": 0}, "`holdout`"),
                                          ({"n_resamples": -1}, "`n_resamples`"),
                                          ({"weights": {"L": 1.0}}, "`weights` must give every domain"),
                                          ({"by": "nope"}, "`by` names column"),
                                          ({"weights": {"L": .5, "D": .5, "S": .5, "R": .5}}, "sum to 1")])
    def test_argument_errors(self, kw, match):
        with pytest.raises(ValueError, match=match):
            tool_shadow(simulate_audit(20, 4, rng=0), **kw)

    def test_not_an_audit(self):
        with pytest.raises(ValueError, match="`audit` must be a ShadowAudit"):
            tool_shadow(pd.DataFrame())

    def test_seeded(self):
        a = simulate_audit(150, 6, position_effect=1.0, rng=8)
        r1 = tool_shadow(a, n_resamples=100, n_weight_draws=100, rng=3).to_dict()
        r2 = tool_shadow(a, n_resamples=100, n_weight_draws=100, rng=3).to_dict()
        assert r1 == r2
