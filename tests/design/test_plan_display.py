"""A plan from assumed selection distributions prints (it has no pilot log: its components are those of
independent attempts)."""

import numpy as np

from toolbias_stats.design import plan_study
from toolbias_stats.design._components import COMPONENTS


def test_str_of_a_plan_from_assumed_distributions():
    pilot = np.tile([0.4, 0.15, 0.15, 0.15, 0.15], (10, 1))
    plan = plan_study(pilot, target=0.03, metrics=["delta_api", "delta_pos"], queries=[25, 50], runs=[1], rng=1)
    text = str(plan)
    assert "variance from: query 0%, rotation 0%, run 0%, query_x_run 0%, attempt 100%" in text, text
    assert "Cheapest design" in text and plan._repr_html_()
    assert "attempt" in str(plan.components) and plan.components._repr_html_()
    t = plan.components.to_frame()
    assert list(t["component"]) == list(COMPONENTS) * 2
    # every attempt an independent draw: Var(delta-hat) is the attempt noise, (1/n) w' diag(p) - pp' w / C
    a = t[(t["metric"] == "delta_api") & (t["component"] == "attempt")].iloc[0]
    p = pilot[0]
    w = 0.5 * np.sign(p - 0.2)
    assert np.isclose(a["contribution"], w @ (np.diag(p) - np.outer(p, p)) @ w / (100 * 5) / 10)
    assert a["share"] == 1.0
    s = plan.components.summary_frame().iloc[0]
    assert s["se"] == np.sqrt(a["contribution"]) and s["runs"] == 1 and s["layout"] == "assumed"
