"""TOOL-SHADOW on the vendored BiasBusters study: PBS per LLM (both scales, CIs) and its rank agreement with delta_pos.

Through the public API: ``read_study`` -> ``shadow.audit_from_study`` (each attempt a turn, its ordering the
manifest, every tool of the cluster relevant, the chosen tool called; attempts without a valid call excluded and
counted; description lengths from the catalog; task text = the query) -> ``shadow.tool_shadow`` (2,000 bootstrap
replicates, the shipped MiniLM encoder for S). The bootstrap unit is the turn (the paper's); a second run
resamples whole queries (all rotations and runs of a query together), which is the honest unit for this design.
delta_pos (mean over runs, BiasBusters Table 1 style) comes from ``selection_bias(study.log, by="model")``;
Spearman's rho between each score and delta_pos over the 7 LLMs with an exact permutation p-value.

Run: ``HF_HUB_OFFLINE=1 nice -n 10 python analyses/shadow_biasbusters.py`` (about 1 minute on 2 cores; the
first run embeds ~1,050 texts). Prints Markdown tables (pasted into docs/guide/tool_shadow_overview.md).
"""

from __future__ import annotations

import itertools
import warnings

import numpy as np
from scipy import stats

import toolbias_stats as tbs
from toolbias_stats.shadow import audit_from_study, tool_shadow

SEED = 20251121


def exact_spearman(x, y):
    """Spearman's rho and its exact two-sided permutation p-value (all n! orderings)."""
    rho = stats.spearmanr(x, y).statistic
    ry = stats.rankdata(y)
    rx = stats.rankdata(x)
    perms = [stats.pearsonr(rx, np.array(p)).statistic for p in itertools.permutations(ry)]
    p = np.mean(np.abs(perms) >= abs(rho) - 1e-12)
    return rho, p


def main():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        study = tbs.read_study("data/biasbusters/study.toml")
        bias = tbs.selection_bias(study.log, by="model", n_resamples=0, n_null=0).to_frame()
        res = {u: tool_shadow(audit_from_study(study, by="model", unit=u), n_resamples=2000, rng=SEED)
               for u in ("turn", "query")}
    dpos = bias[bias.metric == "delta_pos"].set_index("model")["mean_over_runs"]
    turn, query = res["turn"], res["query"]
    qmap = {g.keys["model"]: g for g in query.groups}
    print("| LLM | turns | δ_pos | PBS paper [95% CI] | PBS effect [95% CI] (turn) | [95% CI] (query) | "
          "sensitivity (effect) | z_L | z_D | z_S | z_R | e_L | e_D | r_S | e_R |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    rows = []
    for g in sorted(turn.groups, key=lambda g: -dpos.get(g.keys["model"], np.nan)):
        m = g.keys["model"]
        p, e, q = g.pbs["paper"], g.pbs["effect"], qmap[m].pbs["effect"]
        d = g.domains
        print(f"| {m} | {g.n_turns:,} | {dpos[m]:.3f} | {p.estimate:.1f} [{p.ci.low:.1f}, {p.ci.high:.1f}] "
              f"| {e.estimate:.1f} [{e.ci.low:.1f}, {e.ci.high:.1f}] | [{q.ci.low:.1f}, {q.ci.high:.1f}] "
              f"| [{e.sensitivity.low:.1f}, {e.sensitivity.high:.1f}] | "
              + " | ".join(f"{d[k].z:.1f}" for k in "LDSR") + " | "
              + " | ".join(f"{d[k].effect:.3f}" for k in "LDSR") + " |")
        lin = sum(d[k].contribution("paper") for k in "LDSR")
        rows.append((m, dpos[m], p.estimate, e.estimate, d["L"].effect, d["R"].effect, lin))
    dp = np.array([r[1] for r in rows])
    print()
    print("| score | Spearman ρ with δ_pos (7 LLMs) | exact p |")
    print("|---|---|---|")
    for name, col in (("PBS paper (unrounded; all display as 100.0)", 2), ("paper linear predictor sum w_d z_d", 6),
                      ("PBS effect", 3), ("L effect (log OR)", 4), ("R effect", 5)):
        x = np.array([r[col] for r in rows])
        rho, p = exact_spearman(x, dp)
        print(f"| {name} | {rho:.3f} | {p:.4f} |")
    print()
    print(f"excluded attempts: {turn.n_excluded}; similarity: {turn.similarity.get('encoder')} "
          f"({turn.similarity.get('texts')})")


if __name__ == "__main__":
    main()
