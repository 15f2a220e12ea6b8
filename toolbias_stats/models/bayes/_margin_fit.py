"""``fit_bayes(log, model="margin")``: the collapsed margin model's fit, summarised into a :class:`BayesResult`."""

from __future__ import annotations

import time
import warnings

import numpy as np
import pandas as pd

from ..._validation import check_rng
from ...exceptions import ExcludedRowsWarning, MisfitWarning
from . import _margin as mg
from ._checks import PPC_BAND
from ._common import _SHARED, _hdi, _summ
from ._design import _attach_prompts, _design
from ._result import BayesDiagnostics, BayesResult, PosteriorPredictiveCheck
from ._sampling import _diagnostics
from ._tables import _api_table, _convergence_flags, _fit_inputs, _position_tables, _variance_shares

#: what the margin model's summaries are called in ``result.implied_cells``
_CELL_METRICS = ("delta_api", "delta_pos")


def fit_margin(log, args: dict, variant, t0: float) -> BayesResult:
    """The margin model's fit after ``fit_bayes``'s argument checks (``args``)."""
    mg.require_numpyro()
    counts, rows_log, seed_repr = _fit_inputs(log, args, variant)
    by = args["by"]
    rng = args["rng"]
    gen = check_rng(rng)
    caught: list = []
    design = _attach_prompts(_design(counts, by, args["mismatch"]), rows_log, by, args["mismatch"])
    data = mg.margin_data(design)
    if design.rows["excluded"]:
        ex = design.rows["excluded"]
        msg = f"{sum(ex.values())} of {design.rows['total']} rows cannot enter the model and are excluded: {ex}"
        warnings.warn(msg, ExcludedRowsWarning, stacklevel=3)
        caught.append(msg)
    P = mg.prepared(data, args["priors"])
    sampler_seed = int(gen.integers(0, 2**31 - 1))
    raw, stats = mg.sample(P, draws=args["draws"], tune=args["tune"], chains=args["chains"], seed=sampler_seed,
                           target_accept=args["target_accept"], progress=args["progress"])
    post = mg.package_draws(raw, P)
    diag_vals = _diagnostics(post, stats, design)
    mix = mg.mixture(post, args["priors"], gen, args["delta_margin"])
    checks = mg.ppc(post, data, gen)
    ppc = _ppc_result(design, checks, args["hdi_prob"])
    _misfit_warnings(ppc, design, caught)
    return _result(design, post, stats, mix, ppc, diag_vals, args, sampler_seed, seed_repr, caught, t0,
                   P["param"])


def _ppc_result(D, checks, prob) -> PosteriorPredictiveCheck:
    """The two checks as the package's :class:`PosteriorPredictiveCheck` (no finest table: the margin model does
    not model the orderings, so ``p_value_rows`` is NaN). The dispersion table adds ``no_joint_share``: the share
    of the LLM's checked (draw, cell) pairs whose tool and position margins no chooser has under the logged
    orderings (``_margin.limit_joint``)."""
    C, K = checks["tab_obs"].shape
    rep = checks["tab_rep"]
    lo, hi = _hdi(rep, prob)
    cs, ps = np.divmod(np.arange(C * K), K)
    table = pd.DataFrame({"cluster": [D.clusters[c] for c in cs], "position": ps + 1,
                          "observed": checks["tab_obs"][cs, ps], "replicated_mean": rep.mean(0)[cs, ps],
                          "replicated_low": lo[cs, ps], "replicated_high": hi[cs, ps]})
    p_cp = float(np.mean(checks["cp_rep"] >= checks["cp_obs"]))
    obs = np.concatenate([checks["disp_obs"], checks["disp_obs"].sum(1, keepdims=True)], 1)
    rpl = np.concatenate([checks["disp_rep"], checks["disp_rep"].sum(1, keepdims=True)], 1)
    n_q = np.bincount(D.prompts.query_llm, minlength=D.M)
    no_joint = [*checks["no_joint_share"], float(checks["no_joint"].mean())]
    rows = []
    for m, lab in enumerate([*D.llms, "(all)"]):
        lo_m, hi_m = _hdi(rpl[:, m], prob)
        rows.append({"llm": lab, "queries": int(n_q[m]) if m < D.M else int(n_q.sum()),
                     "observed": float(obs[:, m].mean()), "replicated_mean": float(rpl[:, m].mean()),
                     "replicated_low": float(lo_m), "replicated_high": float(hi_m),
                     "ratio": float(obs[:, m].mean() / rpl[:, m].mean()) if rpl[:, m].mean() > 0 else np.nan,
                     "p_value": float(np.mean(rpl[:, m] >= obs[:, m])), "no_joint_share": float(no_joint[m])})
    disp = pd.DataFrame(rows)
    return PosteriorPredictiveCheck(table=table, p_value=p_cp, p_value_rows=float("nan"), n_draws=len(rpl),
                                    p_value_dispersion=rows[-1]["p_value"], dispersion=disp)


def _misfit_warnings(ppc, D, caught) -> None:
    """A MisfitWarning for every check outside :data:`PPC_BAND` (both ends), naming the LLMs."""
    lo, hi = PPC_BAND
    disp = ppc.dispersion[ppc.dispersion["llm"].isin(D.llms)]
    for side, bad in (("below", disp[disp["p_value"] < lo]), ("above", disp[disp["p_value"] > hi])):
        if bad.empty:
            continue
        who = ", ".join(f"{r.llm} (p = {r.p_value:.3f})" for r in bad.itertuples())
        why = ("its queries differ more than the plug-in dispersion allows: the intervals may be too narrow"
               if side == "below" else
               "the tool counts are less variable than the replicates under the logged orderings, e.g. a near "
               "position-only chooser under cyclic rotations, whose posterior tool margins vary more than its "
               "position margins and the design allow: its delta_api intervals are wider than the data need "
               "(docs/bayes.md)")
        msg = (f"posterior predictive check: per-query dispersion {side} [{lo}, {hi}] for {who}; "
               f"model='margin' misfits ({why})")
        warnings.warn(msg, MisfitWarning, stacklevel=4)
        caught.append(msg)
    if not lo <= ppc.p_value <= hi:
        msg = (f"posterior predictive check: p = {ppc.p_value:.3f} on the cluster x position counts; "
               "model='margin' misfits (position effects differ between clusters more or less than the model allows)")
        warnings.warn(msg, MisfitWarning, stacklevel=4)
        caught.append(msg)


def _implied(D, mix, prob):
    """Per LLM: the implied δ (mixture draws, mean over its clusters) under the logged orderings; the randomised
    orderings are not available (the margin model has no chooser to re-order), given as NaN rows."""
    rows = []
    n_cl = (D.cell_counts() > 0).sum(1)
    for metric, draws in (("delta_api", mix["api"]), ("delta_pos", mix["pos"])):
        sm = _summ(draws, prob)
        for m, lab in enumerate(D.llms):
            rows.append({"llm": lab, "metric": metric, "orderings": "logged", "n_clusters": int(n_cl[m]),
                         **{k: float(v[m]) for k, v in sm.items()}})
    for metric in ("delta_api", "delta_pos"):
        for m, lab in enumerate(D.llms):
            rows.append({"llm": lab, "metric": metric, "orderings": "randomised", "n_clusters": int(n_cl[m]),
                         "mean": np.nan, "sd": np.nan, "hdi_low": np.nan, "hdi_high": np.nan})
    return pd.DataFrame(rows)


def _implied_cells(D, mix, prob, margin):
    """Per LLM and per (LLM, cluster): the implied δ's mixture posterior, its P0 (the point mass at 0) and
    ``P(δ < margin)``."""
    rows = []
    for metric, cell_draws, llm_draws in (("delta_api", mix["api_cell"], mix["api"]),
                                          ("delta_pos", mix["pos_cell"], mix["pos"])):
        sm_c, sm_l = _summ(cell_draws, prob), _summ(llm_draws, prob)
        for m, lab in enumerate(D.llms):
            if metric == "delta_api":
                p0_llm = float(np.prod(mix["p_equal_worth"][m]))
                below_llm = float(mix["below_api"][m])
            else:
                p0_llm = float(mix["p_no_position"][m])
                below_llm = float(mix["below_pos"][m])
            rows.append({"llm": lab, "cluster": _SHARED, "metric": metric,
                         **{k: float(v[m]) for k, v in sm_l.items()}, "p0": p0_llm, "p_below_margin": below_llm})
            for c, cl in enumerate(D.clusters):
                p0 = mix["p_equal_worth"][m, c] if metric == "delta_api" else mix["p_no_position"][m]
                below = mix["below_api_cell"][m, c] if metric == "delta_api" else mix["below_pos_cell"][m, c]
                rows.append({"llm": lab, "cluster": cl, "metric": metric,
                             **{k: float(v[m, c]) for k, v in sm_c.items()}, "p0": float(p0),
                             "p_below_margin": float(below)})
    out = pd.DataFrame(rows)
    out.insert(len(out.columns), "margin", float(margin))
    return out


def _scales(D, post, prob):
    rows = []
    sm = _summ(post["sigma_alpha_c"], prob)
    for c, cl in enumerate(D.clusters):
        rows.append({"quantity": "sigma_alpha", "llm": _SHARED, "cluster": cl,
                     **{k: float(v[c]) for k, v in sm.items()}})
    for name in ("sigma_beta", "sigma_delta"):
        sm = _summ(post[name], prob)
        rows.append({"quantity": name, "llm": _SHARED, "cluster": None, **{k: float(v) for k, v in sm.items()}})
    return pd.DataFrame(rows, columns=["quantity", "llm", "cluster", "mean", "sd", "hdi_low", "hdi_high"])


def _idata(D, stats, post):
    import arviz as az

    nch, ndr = post["shape"]

    def r(x):
        return x.reshape((nch, ndr) + x.shape[1:])

    tools = np.arange(1, D.Kmax + 1)
    coords = {"llm": list(D.llms), "cluster": list(D.clusters), "tool": tools, "position": tools}
    dims = {"alpha": ["llm", "cluster", "tool"], "mu": ["cluster", "tool"], "beta": ["llm", "position"],
            "beta_bar": ["position"], "beta_cell": ["llm", "cluster", "position"], "sigma_alpha": ["cluster"]}
    posterior = {"alpha": r(post["alpha"]), "mu": r(post["mu"]), "beta": r(post["beta"]),
                 "beta_bar": r(post["beta_bar"]), "beta_cell": r(post["beta_cell"]),
                 "sigma_alpha": r(post["sigma_alpha_c"]), "sigma_beta": r(post["sigma_beta"]),
                 "sigma_delta": r(post["sigma_delta"])}
    return az.from_dict(posterior=posterior, sample_stats=stats, coords=coords, dims=dims)


def _result(D, post, stats, mix, ppc, diag_vals, args, sampler_seed, seed_repr, caught, t0, param):
    prob = args["hdi_prob"]
    position_effects, first_vs_last, cluster_position = _position_tables(D, post, prob)
    flags = _convergence_flags(diag_vals, caught)
    idata = _idata(D, stats, post)
    idata.posterior.attrs.update({"sampler": "numpyro", "parameterization": param, "seed": sampler_seed,
                                  "model": "margin"})
    diagnostics = BayesDiagnostics(
        max_rhat=diag_vals["max_rhat"], min_ess_bulk=diag_vals["min_ess_bulk"],
        min_ess_tail=diag_vals["min_ess_tail"], divergences=diag_vals["divergences"], sampler="numpyro",
        seconds=time.perf_counter() - t0, chains=args["chains"], draws=args["draws"], tune=args["tune"],
        seed=sampler_seed, parameterization=param, flags=flags)
    return BayesResult(
        idata=idata, position_effects=position_effects, first_vs_last=first_vs_last,
        api_effects=_api_table(D, post, prob), implied=_implied(D, mix, prob),
        variance_shares=_variance_shares(D, post, prob), ppc=ppc, diagnostics=diagnostics, rows=D.rows,
        rows_by_llm=D.rows_by_llm, llms=list(D.llms), llm_keys=D.llm_keys, clusters=list(D.clusters),
        tools={c: list(t) for c, t in zip(D.clusters, D.tools)}, n_positions=D.P, by=list(args["by"]),
        priors=dict(args["priors"]), hdi_prob=prob, mismatch=args["mismatch"], seed=seed_repr, warnings=caught,
        model="margin", cluster_position_effects=cluster_position, scales=_scales(D, post, prob),
        implied_cells=_implied_cells(D, mix, prob, args["delta_margin"]))
