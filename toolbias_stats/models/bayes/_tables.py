"""Summary tables of a fit shared by the variants (``_fit`` for v1 / v2, ``_margin_fit`` for the margin model):
position and API effects, variance shares, the convergence gate; and the counts and rows a variant needs."""

from __future__ import annotations

import numbers
import warnings

import numpy as np
import pandas as pd

from ..._validation import check_by
from ...exceptions import ConvergenceWarning
from ._common import _SHARED, ESS_MIN, RHAT_MAX, _summ


def _counts_and_rows(obj, variant):
    """The counts the main effects need, and the row-level log when available (or needed)."""
    from ...io import SelectionCounts, SelectionLog, Study, load_selection_log
    from ...io._load import load_counts

    need = variant.needs_queries
    rows = None
    if isinstance(obj, SelectionLog):
        rows = obj
    elif isinstance(obj, Study) and (obj.has_rows or need):
        try:
            rows = obj.log
        except ValueError:
            rows = None
    elif not isinstance(obj, (SelectionCounts, Study)):
        obj = rows = load_selection_log(obj)
    if need and rows is None:
        why = ("the per-query dispersion of its cells" if getattr(variant, "margin", False)
               else "its Dirichlet-multinomial/query effects")
        raise ValueError(f"model={variant.name!r} needs to know which attempts belong to one query ({why}), and "
                         "counts do not keep that pairing: pass the SelectionLog or a Study with its rows, or use "
                         "model='v1'.")
    return load_counts(obj), rows


def _fit_inputs(obj, args: dict, variant):
    """``(counts, rows, seed)`` of a fit: the counts with their per-ordering cells, the row-level log when
    available (or needed), and the seed as the result reports it (an int, None or ``"generator"``); the checked
    ``by`` is stored back in ``args``."""
    counts, rows = _counts_and_rows(obj, variant)
    if counts.cells is None:
        raise ValueError("these counts have no per-ordering cells (counted with cells=False); the Bayesian model "
                         "needs them: read the study again with cells=True.")
    args["by"] = check_by(args["by"], counts.design_columns)
    rng = args["rng"]
    seed: object = (rng if isinstance(rng, (numbers.Integral, type(None))) and not isinstance(rng, bool)
                    else "generator")
    return counts, rows, int(seed) if isinstance(seed, numbers.Integral) else seed


def _position_tables(D, post, prob):
    llm_names = D.llms
    P = D.P
    rows = []
    for m, lab in enumerate(llm_names):
        sm = _summ(post["beta"][:, m, :], prob)
        for p in range(P):
            rows.append({"llm": lab, "position": p + 1, **{k: float(v[p]) for k, v in sm.items()}})
    sm = _summ(post["beta_bar"], prob)
    for p in range(P):
        rows.append({"llm": _SHARED, "position": p + 1, **{k: float(v[p]) for k, v in sm.items()}})
    position_effects = pd.DataFrame(rows)
    diff = post["beta"][:, :, 0] - post["beta"][:, :, P - 1]                   # (S, M)
    sm = _summ(diff, prob)
    first_vs_last = pd.DataFrame({"llm": llm_names, "p_first_beats_last": (diff > 0).mean(0),
                                  "first_position": 1, "last_position": P,
                                  **sm})
    cpe = None
    if "beta_cell" in post:
        cc = D.cell_counts()
        sm = _summ(post["beta_cell"], prob)
        dm = post["delta"].mean(0)
        rows = []
        for m, lab in enumerate(llm_names):
            for c, cl in enumerate(D.clusters):
                if cc[m, c] == 0:
                    continue
                for p in range(min(P, int(D.K[c]))):
                    rows.append({"llm": lab, "cluster": cl, "position": p + 1,
                                 **{k: float(v[m, c, p]) for k, v in sm.items()}, "delta_mean": float(dm[m, c, p])})
        cpe = pd.DataFrame(rows)
    return position_effects, first_vs_last, cpe


def _api_table(D, post, prob):
    cc = D.cell_counts()
    tc = D.tool_counts()
    rows = []
    sm_mu = _summ(post["mu"], prob)
    sm_a = _summ(post["alpha"], prob)
    for c, cl in enumerate(D.clusters):
        for j, t in enumerate(D.tools[c]):
            rows.append({"llm": _SHARED, "cluster": cl, "tool_id": t, "api_index": j + 1,
                         "n_used": int(tc[:, c, :].sum()), **{k: float(v[c, j]) for k, v in sm_mu.items()}})
    for m, lab in enumerate(D.llms):
        for c, cl in enumerate(D.clusters):
            for j, t in enumerate(D.tools[c]):
                rows.append({"llm": lab, "cluster": cl, "tool_id": t, "api_index": j + 1,
                             "n_used": int(cc[m, c]), **{k: float(v[m, c, j]) for k, v in sm_a.items()}})
    return pd.DataFrame(rows)


def _variance_shares(D, post, prob):
    S = post["alpha"].shape[0]
    M, Kmax = D.M, D.Kmax
    observed = D.cell_counts() > 0
    rows = []
    valid_tool = np.arange(Kmax)[None, :] < D.K[:, None]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        v_shared_api = np.nanmean(np.where(valid_tool[None], post["mu"] ** 2, np.nan).reshape(S, -1), 1)
        dev = (post["alpha"] - post["mu"][:, None]) ** 2
        dev = np.where((observed[:, :, None] & valid_tool[None])[None], dev, np.nan)
        v_between_api = np.nanmean(dev.reshape(S, -1), 1)
        v_shared_pos = (post["beta_bar"] ** 2).mean(1)
        v_between_pos = ((post["beta"] - post["beta_bar"][:, None]) ** 2).mean((1, 2))
        v_cluster_pos = None
        if "delta" in post:
            valid_pos = np.arange(D.P)[None, :] < D.K[:, None]                  # (C, P)
            dd = np.where((observed[:, :, None] & valid_pos[None])[None], post["delta"] ** 2, np.nan)
            v_cluster_pos = np.nanmean(dd.reshape(S, -1), 1)
    for eff, vs, vb, vc in (("api", v_shared_api, v_between_api, None),
                            ("position", v_shared_pos, v_between_pos, v_cluster_pos)):
        row = {"effect": eff}
        if M > 1:
            share = vs / (vs + vb + (vc if vc is not None else 0))
            sm = _summ(share, prob)
            row.update({"share_shared": float(sm["mean"]), "share_shared_sd": float(sm["sd"]),
                        "share_low": float(sm["hdi_low"]), "share_high": float(sm["hdi_high"]),
                        "sd_shared": float(np.sqrt(vs).mean()), "sd_between": float(np.sqrt(vb).mean())})
        else:
            row.update({"share_shared": np.nan, "share_shared_sd": np.nan, "share_low": np.nan, "share_high": np.nan,
                        "sd_shared": float(np.sqrt(vs).mean()), "sd_between": np.nan})
        if "delta" in post:
            row["sd_cluster"] = float(np.sqrt(vc).mean()) if vc is not None else np.nan
        rows.append(row)
    return pd.DataFrame(rows)


def _convergence_flags(diag_vals, caught):
    """The convergence gate: flags for R-hat, bulk ESS and divergences, and a ConvergenceWarning if any."""
    flags = []
    if np.isfinite(diag_vals["max_rhat"]) and diag_vals["max_rhat"] > RHAT_MAX:
        flags.append(f"R-hat {diag_vals['max_rhat']:.4f} > {RHAT_MAX}")
    if not np.isfinite(diag_vals["max_rhat"]):
        flags.append("R-hat not computable (fewer than 2 chains)")
    if diag_vals["min_ess_bulk"] < ESS_MIN:
        flags.append(f"bulk ESS {diag_vals['min_ess_bulk']:.0f} < {ESS_MIN}")
    if diag_vals["divergences"] > 0:
        flags.append(f"{diag_vals['divergences']} divergent transition(s)")
    if flags:
        msg = "NOT CONVERGED: " + "; ".join(flags) + (" (run longer with more --draws/--tune, or raise "
                                                       "target_accept if there are divergences)")
        warnings.warn(msg, ConvergenceWarning, stacklevel=5)
        caught.insert(0, msg)
    return flags
