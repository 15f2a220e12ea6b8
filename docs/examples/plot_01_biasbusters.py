"""
BiasBusters Table 1 with intervals
==================================

Read the bundled BiasBusters study (7 LLMs x 3 runs, 105,500 attempts), count it, and compute the
total-variation bias metrics per LLM: δ_API (preference for providers), δ_pos (preference for list
positions) with the bias-corrected estimate and its calibrated interval, the run-to-run mean and sd of the
paper, and a p-value against a uniform chooser. A small number of bootstrap replicates keeps the example fast;
use ``n_resamples=2000`` (the default) for a report.
"""

import toolbias_stats as tbs

study = tbs.read_study(tbs.datasets.path("biasbusters/study.toml"))
print(study.log)

# %%
# Every attempt is a row with a status; nothing is dropped.
study.log.summary(by=["model"])

# %%
# The bias metrics per LLM. ``corrected`` and ``corrected_ci`` are the estimate and interval to report for the
# true δ; ``mean_over_runs`` and ``sd_over_runs`` are BiasBusters' Table-1 numbers.
res = tbs.selection_bias(study.log, by="model", n_resamples=200, rng=1)
frame = res.to_frame()
frame[["model", "metric", "mean_over_runs", "sd_over_runs", "corrected", "corrected_ci_low",
       "corrected_ci_high", "p_value", "n_used"]].round(3)

# %%
# δ_API against δ_pos, one point per LLM, with the band a uniform chooser would reach by chance.
# The plot functions return a matplotlib Figure; given ``ax`` they draw into it.
import matplotlib.pyplot as plt

from toolbias_stats.plots import plot_api_vs_position

fig, ax = plt.subplots(figsize=(8.5, 5), layout="constrained")
plot_api_vs_position(res, ax=ax)
