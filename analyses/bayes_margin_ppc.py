"""The margin model's predictive checks replicated under the logged design (issue 38, helper ``ppc``).

``fit_bayes(model="margin")`` checks its fit with two posterior predictive checks (per-query dispersion of the
tool counts per LLM; the (cluster, position) table). Before: each query's pooled tool counts were replicated by a
Polya urn on the tool margin, blind to the orderings the query was shown (``urn_ppc`` below, the former package
code); a position-only chooser under cyclic rotations has exactly balanced tool counts, which no urn reproduces,
so the check flagged it (DeepSeek-V3.2-Exp on the bundled study, p = 0.99). After (the package's ``mg.ppc``): per
draw, the maximum-entropy choice law of every logged ordering with the draw's tool and position margins, the
queries' orderings and attempts as logged.

Both checks are computed on the *same* posterior draws of each fit (the fit's own check is the "after"; the
"before" is ``urn_ppc`` on the captured draws, with its own generator).

Issue 38, helper ``lim``: the design replicate's joint is now taken at its limit (``mg.limit_joint``); each fit's
draws are checked three ways, ``before`` (the urn), ``cap500`` (the design replicate with the proportional fitting
stopped at 500 rounds, ``mg.ppc(..., solver="ipf")``) and ``after`` (the package's ``mg.ppc``, at the limit), with
the share of (draw, cell) pairs that have no joint.

Run: ``python analyses/bayes_margin_ppc.py [--studies 20] [--designed 5]`` writes ``analyses/bayes_margin_ppc.json``.
"""

from __future__ import annotations

import argparse
import json
import pickle
import resource
import time
import warnings
from pathlib import Path

import numpy as np

from toolbias_stats.models import fit_bayes, simulate_bayes_log
from toolbias_stats.models.bayes import _margin as mg
from toolbias_stats.models.bayes._checks import PPC_BAND

HERE = Path(__file__).resolve().parent
OUT = HERE / "bayes_margin_ppc.json"
# the design (as tests/models/test_bayes_margin.py): 4 LLMs x 2 clusters x K = 4, 20 queries x 4
# rotations x 3 runs; LLM 1 without position effects, cluster 2 of equal worths
ALPHA = np.stack([np.array([[1.0, 0.4, -0.2, -1.2], [0.0, 0.0, 0.0, 0.0]]) * s for s in (1.0, 0.6, 1.4, 0.9)])
BETA = np.array([[0.0, 0.0, 0.0, 0.0], [1.0, 0.3, 0.0, -1.3], [0.5, 0.0, 0.0, -0.5], [1.5, 0.5, -0.5, -1.5]])
#: the captured posterior draws and data of every fit (to evaluate another replicate without refitting)
CACHE = Path("/tmp/lim_ppc_cache")
SIM_FIT = {"chains": 2, "draws": 500, "tune": 500}


def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


# ---------------------------------------------------------------------------------------------
# before: the former replicate (a Polya urn per query on the tool margin, another on the position margin)
def _polya(gen, p, conc, n):
    g = gen.gamma(np.maximum(conc[:, None] * p, 1e-300))
    q = g / np.maximum(g.sum(1, keepdims=True), 1e-300)
    q = np.where(np.isfinite(q).all(1, keepdims=True) & (g.sum(1, keepdims=True) > 0), q, p)
    q = q / q.sum(1, keepdims=True)
    return gen.multinomial(n.astype(np.int64), q).astype(float)


def urn_ppc(post, data, gen, n_draws=mg.PPC_DRAWS):
    S = post["alpha"].shape[0]
    sel = np.sort(gen.choice(S, size=min(n_draws, S), replace=False))
    M, C, K = data["M"], data["C"], data["K"]
    T, Pc, cell, qllm, qcl = data["T"], data["Pc"], data["cell"], data["qllm"], data["qcluster"]
    n = T.sum(1)
    kap = mg._kappa_of_phi(mg.pooled_stats(T, cell, M * C)[1], n, cell)[cell]
    lam = mg._kappa_of_phi(mg.pooled_stats(Pc, cell, M * C)[1], n, cell)[cell]
    tab_o = np.zeros((C, K))
    np.add.at(tab_o, qcl, Pc)
    out = {k: np.zeros((len(sel), M)) for k in ("disp_obs", "disp_rep")}
    out.update({k: np.zeros(len(sel)) for k in ("cp_obs", "cp_rep")})
    for i, s in enumerate(sel):
        pa = mg._softmax(post["alpha"][s].reshape(M * C, K))
        pb = mg._softmax(post["beta_cell"][s].reshape(M * C, K))
        E = n[:, None] * pa[cell]
        rep = _polya(gen, pa[cell], kap, n)
        out["disp_obs"][i] = np.bincount(qllm, weights=((T - E) ** 2 / E).sum(1), minlength=M)
        out["disp_rep"][i] = np.bincount(qllm, weights=((rep - E) ** 2 / E).sum(1), minlength=M)
        Eb = n[:, None] * pb[cell]
        repb = _polya(gen, pb[cell], lam, n)
        tab_E, tab_r = np.zeros((C, K)), np.zeros((C, K))
        np.add.at(tab_E, qcl, Eb)
        np.add.at(tab_r, qcl, repb)
        out["cp_obs"][i] = ((tab_o - tab_E) ** 2 / tab_E).sum()
        out["cp_rep"][i] = ((tab_r - tab_E) ** 2 / tab_E).sum()
    return out


def pvals(chk):
    return {"dispersion": np.mean(chk["disp_rep"] >= chk["disp_obs"], 0).tolist(),
            "dispersion_ratio": (chk["disp_obs"].mean(0) / chk["disp_rep"].mean(0)).tolist(),
            "cluster_position": float(np.mean(chk["cp_rep"] >= chk["cp_obs"]))}


def fitted(name, make_log, seed, **fit):
    """The fit's posterior draws, data and diagnostics, from the cache (:data:`CACHE`) or fitted now."""
    path = CACHE / f"{name}.pkl"
    if path.exists():
        with path.open("rb") as f:
            return pickle.load(f)  # noqa: S301 (this script's own cache in /tmp)
    seen = {}
    real = mg.ppc

    def spy(post, data, gen, n_draws=mg.PPC_DRAWS):
        seen["post"], seen["data"] = post, data
        return real(post, data, gen, n_draws)

    mg.ppc = spy
    try:
        t0, c0 = time.perf_counter(), cpu()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res = fit_bayes(make_log(), model="margin", rng=seed, **fit)
        wall, fit_cpu = time.perf_counter() - t0, cpu() - c0
    finally:
        mg.ppc = real
    d = res.diagnostics
    rec = {"post": seen["post"], "data": seen["data"], "seed": seed, "llms": list(res.llms),
           "diagnostics": {"fit_seconds": d.seconds, "wall_s": wall, "cpu_s": fit_cpu, "max_rhat": d.max_rhat,
                           "min_ess_bulk": d.min_ess_bulk, "divergences": d.divergences,
                           "load_avg": list(__import__("os").getloadavg())},
           "fit_check": {"dispersion": res.ppc.dispersion.set_index("llm").loc[res.llms, "p_value"].tolist(),
                         "cluster_position": float(res.ppc.p_value)}}
    CACHE.mkdir(exist_ok=True)
    with path.open("wb") as f:
        pickle.dump(rec, f)
    return rec


def check(rec):
    """Both checks on one fit's draws: before (the urn, :func:`urn_ppc`) and after (the package's ``mg.ppc``),
    each with the generator seeded by the fit's seed; their CPU seconds."""
    c0 = cpu()
    before = pvals(urn_ppc(rec["post"], rec["data"], np.random.default_rng(rec["seed"])))
    c1 = cpu()
    capped = mg.ppc(rec["post"], rec["data"], np.random.default_rng(rec["seed"]), solver="ipf")
    c2 = cpu()
    out = mg.ppc(rec["post"], rec["data"], np.random.default_rng(rec["seed"]))
    c3 = cpu()
    after = pvals(out)
    after["cluster_position_design_replicate"] = float(np.mean(out["cp_rep_design"] >= out["cp_obs"]))
    return {"seed": rec["seed"], "llms": rec["llms"], **rec["diagnostics"], "before": before,
            "cap500": pvals(capped), "after": after,
            "no_joint_share": float(out["no_joint"].mean()), "no_joint_share_by_llm": out["no_joint_share"].tolist(),
            "ipf_not_converged_share": float((capped["ipf_residual"] > mg.IPF_TOL).mean()),
            "newton_steps_median": float(np.median(out["ipf_rounds"])),
            "joint_status_counts": np.bincount(out["joint_status"].ravel(), minlength=4).tolist(),
            "ppc_cpu_s": {"before": c1 - c0, "cap500": c2 - c1, "after": c3 - c2}}


def outside(p):
    lo, hi = PPC_BAND
    return bool(p < lo or p > hi)


# ---------------------------------------------------------------------------------------------
def position_only(seed, first=30.0, queries=20, runs=3):
    """One LLM that (nearly) always takes the first slot, K = 4, cyclic rotations; ``first`` its logit."""
    beta = np.array([[first, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0]])
    alpha = np.zeros((2, 1, 4))
    alpha[1, 0] = [1.0, 0.3, -0.3, -1.0]
    return simulate_bayes_log(alpha, beta, queries=queries, runs=runs, rng=seed, model_names=["first", "plain"])


def ordering_interaction(seed, queries=20, runs=3, p_follow=1.0):
    """A chooser whose tool law depends on the ordering beyond any tool and position margin: in the rotation
    that shows tool 1 at slot ``(K - s) mod K`` it takes slot ``s`` (with probability ``p_follow``; else a
    uniform slot). Under the K = 4 cyclic rotations that is tool 1 in two rotations and tool 3 in the other two,
    so every query's tool counts are nearly (n/2, 0, n/2, 0), and the positions are uniform: no choice law
    ``softmax(a_t + b_pos)`` has these margins and this split (the maximum-entropy joint takes tools 1 and 3
    half and half in every ordering, so its queries' counts spread binomially). The second LLM is a plain
    chooser (tool and position effects)."""
    log = position_only(seed, first=0.0, queries=queries, runs=runs)
    f = log.to_frame()
    gen = np.random.default_rng(seed + 1)
    shown = f["ordering"].str.split("|")
    follow = gen.random(len(f)) < p_follow
    cols = [f.columns.get_loc(c) for c in ("chosen_tool", "chosen_position", "chosen_rank")]
    for i in np.flatnonzero((f["model"] == "first").to_numpy()):
        tools = shown.iloc[i]
        k = len(tools)
        at = next(j for j, t in enumerate(tools) if t.endswith("_t1"))
        slot = (k - at) % k if follow[i] else int(gen.integers(k))
        for c, v in zip(cols, (tools[slot], slot + 1, slot + 1)):
            f.iloc[i, c] = v
    return type(log).from_frame(f, log.catalog, source="<interaction>")


DESIGNS = {"position-only, pure (first-slot logit 30)": lambda s: position_only(s, 30.0),
           "position-only, noisy (first-slot logit 2.5)": lambda s: position_only(s, 2.5),
           "ordering interaction (power)": ordering_interaction}


def designed(studies, fit_only=False):
    rows = []
    for k, (kind, make) in enumerate(DESIGNS.items()):
        for seed in range(studies):
            rec = fitted(f"designed_{k}_{seed}", lambda make=make, seed=seed: make(100 + seed), 100 + seed, **SIM_FIT)
            if fit_only:
                continue
            r = check(rec)
            r["design"] = kind
            rows.append(r)
            print(kind, seed, "before", np.round(r["before"]["dispersion"], 3), "cap500",
                  np.round(r["cap500"]["dispersion"], 3), "after", np.round(r["after"]["dispersion"], 3), flush=True)
    return rows


def simulated(studies, sds=(1.0, 0.0), fit_only=False):
    rows = []
    for seed in range(studies):
        for sd in sds:
            rec = fitted(f"sim_{sd}_{seed}", lambda sd=sd, seed=seed: simulate_bayes_log(
                ALPHA, BETA, queries=20, runs=3, sigma_eta=sd, rng=2000 + seed),
                         2000 + seed, **SIM_FIT)
            if fit_only:
                print("fitted sd", sd, seed, flush=True)
                continue
            r = check(rec)
            r["sd"] = sd
            rows.append(r)
            print("sd", sd, seed, "before", np.round(r["before"]["dispersion"], 3), r["before"]["cluster_position"],
                  "after", np.round(r["after"]["dispersion"], 3), r["after"]["cluster_position"], flush=True)
    return rows


def summarise_sim(rows):
    out = {}
    for sd in sorted({r["sd"] for r in rows}):
        rr = [r for r in rows if r["sd"] == sd]
        s = {"fits": len(rr)}
        for when in ("before", "cap500", "after"):
            disp = [outside(p) for r in rr for p in r[when]["dispersion"]]
            cp = [outside(r[when]["cluster_position"]) for r in rr]
            s[when] = {"dispersion_outside": float(np.mean(disp)), "dispersion_checks": len(disp),
                       "dispersion_outside_se": float(np.sqrt(np.mean(disp) * (1 - np.mean(disp)) / len(disp))),
                       "cluster_position_outside": float(np.mean(cp)), "cluster_position_checks": len(cp),
                       "fits_any_outside": float(np.mean([any(outside(p) for p in r[when]["dispersion"])
                                                          or outside(r[when]["cluster_position"]) for r in rr]))}
        out[f"sd={sd}"] = s
    return out


def bundled():
    from toolbias_stats.cli._vocabulary import DEFAULT_SEED
    from toolbias_stats.io import read_study

    rec = fitted("bundled", lambda: read_study(str(HERE.parent / "data/biasbusters/study.toml")), DEFAULT_SEED)
    return check(rec)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--studies", type=int, default=20)
    ap.add_argument("--designed", type=int, default=5)
    ap.add_argument("--fit-only", action="store_true", help="fit and cache the simulated studies only")
    a = ap.parse_args()
    if a.fit_only:
        simulated(a.studies, fit_only=True)
        return
    res = {"bundled": bundled(), "designed": designed(a.designed)}
    rows = simulated(a.studies)
    res["simulated"] = {"summary": summarise_sim(rows), "studies": rows}
    res["designed_summary"] = {kind: {when: [r[when]["dispersion"][0] for r in res["designed"]
                                             if r["design"] == kind] for when in ("before", "cap500", "after")}
                               for kind in DESIGNS}
    OUT.write_text(json.dumps(res, indent=1))
    print(json.dumps(res["simulated"]["summary"], indent=1))
    print(json.dumps(res["designed_summary"], indent=1))
    print(json.dumps({k: res["bundled"][k] for k in ("before", "cap500", "after", "no_joint_share_by_llm")},
                     indent=1))


if __name__ == "__main__":
    main()
