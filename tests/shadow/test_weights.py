"""The weight-derivation worksheet on hand-computed numbers, and the weight draws of the sensitivity band."""

from __future__ import annotations

import numpy as np
import pytest

from toolbias_stats.shadow import DOMAINS, V1_WEIGHTS, W_FLOOR, draw_weights, worksheet_weights


class TestWorksheet:
    def test_v1_default(self):
        w = worksheet_weights()
        assert w.weights == {"L": 0.30, "D": 0.175, "S": 0.175, "R": 0.35}
        assert w.precision == {"L": "medium", "D": "low", "S": "low", "R": "medium"}
        assert sum(w.weights.values()) == pytest.approx(1.0)
        assert pytest.approx((1 - 0.30 - 0.35) / 2) == W_FLOOR

    def test_hand_computed_two_cis(self):
        # Hand computation:
        #   SE_L = (ln 1.8 - ln 1.2) / 3.92 = 0.405465 / 3.92 = 0.103435 ; 1/SE^2 = 93.4685
        #   SE_R = (ln 1.4 - ln 1.1) / 3.92 = 0.241162 / 3.92 = 0.061521 ; 1/SE^2 = 264.2130
        #   D, S at the floor 0.175 -> L and R share 0.65: w_L = 0.65 * 93.4685 / 357.6815 = 0.16986
        #                                                  w_R = 0.65 * 264.2130 / 357.6815 = 0.48014
        w = worksheet_weights({"L": (1.2, 1.8), "R": (1.1, 1.4)})
        t = w.table.set_index("domain")
        assert t.loc["L", "se"] == pytest.approx(0.103435, abs=1e-6)
        assert t.loc["R", "se"] == pytest.approx(0.061521, abs=1e-6)
        assert t.loc["L", "inverse_variance"] == pytest.approx(93.4685, abs=1e-3)
        assert t.loc["R", "inverse_variance"] == pytest.approx(264.2130, abs=1e-3)
        assert w.weights["L"] == pytest.approx(0.16986, abs=1e-5)
        assert w.weights["R"] == pytest.approx(0.48014, abs=1e-5)
        assert w.weights["D"] == w.weights["S"] == pytest.approx(0.175)
        assert w.precision == {"L": "medium", "D": "low", "S": "low", "R": "medium"}
        assert list(t.index) == list(DOMAINS)

    def test_hand_computed_all_four(self):
        # pure inverse variance: 1/SE^2 = 93.4685 (L), (3.92/ln(1.5/0.9))^2 = 58.888 (D),
        # (3.92/ln 2)^2 = 31.983 (S), 264.2130 (R); total 448.553
        w = worksheet_weights({"L": (1.2, 1.8), "D": (0.9, 1.5), "S": (1.0, 2.0), "R": (1.1, 1.4)})
        assert w.weights["L"] == pytest.approx(93.4685 / 448.553, abs=1e-4)
        assert w.weights["D"] == pytest.approx(58.888 / 448.553, abs=1e-4)
        assert w.weights["S"] == pytest.approx(31.983 / 448.553, abs=1e-4)
        assert w.weights["R"] == pytest.approx(264.213 / 448.553, abs=1e-4)

    def test_one_ci_other_domains_at_floor(self):
        w = worksheet_weights({"L": (1.2, 1.8)}, floor=0.1)
        assert w.weights == pytest.approx({"L": 0.7, "D": 0.1, "S": 0.1, "R": 0.1})
        assert w.precision["R"] == "low"

    @pytest.mark.parametrize("cis,match", [
        ({"X": (1, 2)}, "unknown domain"), ({"L": (2, 1)}, "0 < HR_lower < HR_upper"),
        ({"L": (0, 1)}, "0 < HR_lower"), ({"L": "ab"}, r"must be \(HR_lower, HR_upper\)")])
    def test_errors(self, cis, match):
        with pytest.raises(ValueError, match=match):
            worksheet_weights(cis)

    def test_floors_leave_nothing(self):
        with pytest.raises(ValueError, match="leave no weight"):
            worksheet_weights({"L": (1.1, 1.2)}, floor=0.34)


class TestDraws:
    def test_floors_kept_and_centred(self):
        w = worksheet_weights()
        d = draw_weights(w, 4000, np.random.default_rng(1))
        assert np.allclose(d.sum(1), 1)
        assert (d[:, 1] >= W_FLOOR - 1e-12).all() and (d[:, 2] >= W_FLOOR - 1e-12).all()
        # L and R vary around their v1 share of what the floors leave
        assert d[:, 0].std() > 0.03
        assert np.median(d[:, 0] / (d[:, 0] + d[:, 3])) == pytest.approx(0.30 / 0.65, abs=0.03)

    def test_unavailable_domain_gets_zero(self):
        d = draw_weights(worksheet_weights(), 100, np.random.default_rng(2), available={"L", "D", "R"})
        assert np.all(d[:, 2] == 0) and np.allclose(d.sum(1), 1)

    def test_v1_constant(self):
        assert sum(V1_WEIGHTS.values()) == pytest.approx(1.0)
