"""
Planning a study: how many queries for a given interval width
=============================================================

:func:`toolbias_stats.plan_study` predicts the half-width of the confidence interval of each δ for candidate
designs (queries x runs x rotations) and finds the cheapest design that reaches a target. Here the pilot is an
assumed selection distribution (one row per cluster): every attempt an independent draw from it, which makes the
plan optimistic; with a real pilot log, the variance components of queries, rotations and runs are estimated
first (:func:`toolbias_stats.variance_components`).
"""

import numpy as np

import toolbias_stats as tbs

rng = np.random.default_rng(0)
pilot = rng.dirichlet(np.ones(5) * 3, size=10)  # 10 clusters of 5 tools: a moderately biased chooser
plan = tbs.plan_study(pilot, target=0.03, queries=[25, 50, 100, 200], runs=[1], rotations=[1, 5], rng=1)
plan.cheapest

# %%
# The whole grid of designs and their predicted half-widths:
plan.to_frame()[["metric", "queries", "runs", "rotations", "calls", "expected_estimate",
                 "half_width", "mds"]].round(4)

# %%
# The predicted half-width falls like one over the square root of the number of calls:
import matplotlib.pyplot as plt

from toolbias_stats.plots import plot_plan_widths

fig, ax = plt.subplots(figsize=(5, 3.5), layout="constrained")
plot_plan_widths(plan, ax=ax)
