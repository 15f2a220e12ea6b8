"""Implied delta_pos of the conditional logit, with intervals, for the LLMs the shuffled ranking swaps (issue 22).

On the vendored BiasBusters study: the fit's delta_pos (mean over clusters) under the logged lists and under
uniformly shuffled lists per LLM, with 95% intervals from 400 draws of the parameters from their query-clustered
sandwich normal approximation, next to the descriptive delta_pos (mean over runs, BCa interval). Prints a table;
docs/choice_model.md quotes it.

Usage: ``python analyses/choice_model_delta_pos_ranking.py [--draws 400]``
"""

from __future__ import annotations

import argparse
import warnings

import numpy as np
import pandas as pd
from scipy import stats

import toolbias_stats as tbs
from toolbias_stats.choicemodel._data import prepare_groups
from toolbias_stats.choicemodel._fit import aggregate_cells
from toolbias_stats.choicemodel._model import _components, _design, _implied_bias, _references


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--draws", type=int, default=400)
    a = ap.parse_args(argv)
    rng = np.random.default_rng(20251124)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        study = tbs.read_study(tbs.datasets.path("biasbusters/study.toml"))
        res = tbs.choice_model(study.log, by="model")
        bias = tbs.selection_bias(study.log, by="model", n_resamples=1000, n_null=0, rng=1).to_frame()
        groups, _, _ = prepare_groups(study.log, ["model"])
    d = bias[bias["metric"] == "delta_pos"].set_index("model")
    raw = {g["keys"]["model"]: g for g in res._raw}
    rows = []
    for g in groups:
        m = g.keys["model"]
        r = raw[m]
        if not g.n_used:
            continue
        comp = _components(g)
        refs = _references(g, comp, None)
        X, mask, terms = _design(g, None, "free", "tool", set(refs.values()), [])
        assert [tuple(t) for t in terms] == [tuple(t) for t in r["terms"]]
        key = np.column_stack([g.items, pd.factorize(g.cluster)[0]])
        _, _, _, w, inv = aggregate_cells(X, mask, g.chosen, g.weight, key=key)
        first = np.unique(inv, return_index=True)[1]
        args = (g.items[first], g.chosen[first], g.cluster[first], w, X[first], mask[first], terms)

        def implied(theta, args=args):
            ib = _implied_bias(*args, theta, np.random.default_rng(0))
            return ib.groupby("orderings")["delta_pos"].mean()

        point = implied(r["theta"])
        draws = rng.multivariate_normal(r["theta"], r["cov"], size=a.draws, method="eigh")
        sims = pd.DataFrame([implied(t) for t in draws])
        rows.append(dict(model=m, descriptive=d.at[m, "mean_over_runs"], desc_ci_low=d.at[m, "ci_low"],
                         desc_ci_high=d.at[m, "ci_high"], observed_pooled=point["observed"],
                         logged=point["logged"], logged_ci_low=sims["logged"].quantile(0.025),
                         logged_ci_high=sims["logged"].quantile(0.975), shuffled=point["shuffled"],
                         shuffled_ci_low=sims["shuffled"].quantile(0.025),
                         shuffled_ci_high=sims["shuffled"].quantile(0.975)))
    tab = pd.DataFrame(rows).sort_values("descriptive")
    pd.set_option("display.width", 250)
    print(tab.round(4).to_string(index=False))
    for col in ("logged", "shuffled"):
        print(f"Spearman({col}, descriptive) = {stats.spearmanr(tab[col], tab['descriptive']).statistic:.3f}")


if __name__ == "__main__":
    main()
