"""Does the model fit the data it summarises? The fit status beside every interval of a :class:`BayesResult`, and
where its implied bias disagrees with the frequentist calibrated interval (issue 38).

Two posterior predictive checks decide the status: the **per-query dispersion** (do the queries differ from each
other as much as the model lets them? per LLM, on that LLM's queries) and the **cluster x position** table (do the
position effects fit every cluster? one table over all LLMs). A check passes when its p-value lies in
:data:`PPC_BAND`; the finest (LLM x cluster x ordering x position) table is reported but not part of the status.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ._common import _SHARED

#: A posterior predictive p-value passes inside this band (both ends: near 0 the data vary more than the model's
#: replications, near 1 far less, i.e. the model over-disperses). Under a correct model each check is flagged in
#: about 10% of fits by chance.
PPC_BAND = (0.05, 0.95)
#: The checks behind the fit status, in the order they are named.
FIT_CHECKS = ("per-query dispersion", "cluster x position")


def _in_band(p) -> bool | None:
    if p is None or not math.isfinite(float(p)):
        return None
    return bool(PPC_BAND[0] <= float(p) <= PPC_BAND[1])


def _fmt_p(p) -> str:
    return "p = 0 (no replication as extreme)" if p == 0 else f"p = {p:.3f}"


def fit_checks(result) -> pd.DataFrame:
    """The two checks per LLM (and ``"(shared)"``, the effects common to all LLMs).

    Columns: ``llm``, ``check`` (:data:`FIT_CHECKS`), ``scope`` (the data the check is computed on), ``p_value``
    (NaN when the check could not run: the per-query dispersion needs the queries, which counts alone do not
    keep) and ``fits`` (True / False, None when not run).
    """
    ppc = result.ppc
    disp = ppc.dispersion
    rows = []
    for llm in [*result.llms, _SHARED]:
        if disp is None:
            p, scope = float("nan"), "not run: the fit had counts only (no queries)"
        else:
            sub = disp[disp["llm"] == ("(all)" if llm == _SHARED else llm)]
            p = float(sub["p_value"].iloc[0]) if len(sub) else float("nan")
            scope = "all LLMs' queries" if llm == _SHARED else "this LLM's queries"
        rows.append({"llm": llm, "check": FIT_CHECKS[0], "scope": scope, "p_value": p, "fits": _in_band(p)})
        rows.append({"llm": llm, "check": FIT_CHECKS[1], "scope": "all LLMs (one cluster x position table)",
                     "p_value": float(ppc.p_value), "fits": _in_band(ppc.p_value)})
    return pd.DataFrame(rows, columns=["llm", "check", "scope", "p_value", "fits"])


def fit_status(result) -> dict:
    """``{llm: (fits, failed_checks)}``: ``fits`` is False when a check fails, True when every check that ran
    passes, None when none ran; ``failed_checks`` names the failing checks with their p-values ("" if none)."""
    out = {}
    for llm, sub in fit_checks(result).groupby("llm", sort=False):
        ran = sub[sub["fits"].notna()]
        failed = ran[~ran["fits"].astype(bool)]
        text = "; ".join(f"{r.check} {_fmt_p(r.p_value)}" for r in failed.itertuples())
        out[llm] = (None if ran.empty else failed.empty, text)
    return out


def compare_frequentist(result, bias) -> pd.DataFrame:
    """The implied bias of a Bayesian fit next to the frequentist calibrated interval of the same LLMs.

    Parameters
    ----------
    result : BayesResult
    bias : BiasResult
        :func:`toolbias_stats.selection_bias` of the same study, grouped by the same columns as the fit's ``by``.

    Returns
    -------
    pandas.DataFrame
        One row per LLM and metric (``delta_api``, ``delta_pos``): the Bayesian implied δ under the **logged**
        orderings (the orderings the frequentist δ is computed on): ``bayes_mean``, ``bayes_low``,
        ``bayes_high`` (HDI at ``bayes_level``); the frequentist bias-corrected δ ``freq_corrected`` and its
        calibrated interval ``freq_low``, ``freq_high`` (at ``freq_level``); ``disagree`` = the two intervals do
        not overlap (``bayes_high < freq_low`` or ``freq_high < bayes_low``; False when either is missing); and
        the Bayesian fit status (``fits``, ``failed_checks``). The levels differ by default (94% HDI, 95%
        calibrated interval); non-overlap at these levels is a strong disagreement, not a test.

    Raises
    ------
    ValueError
        When ``bias`` is grouped by other columns than the fit.
    """
    if list(bias.by) != list(result.by):
        raise ValueError(f"the frequentist result is grouped by {list(bias.by)} and the Bayesian fit by "
                         f"{list(result.by)}: compute selection_bias(..., by={list(result.by)!r})")
    groups = {", ".join(str(v) for v in g.keys.values()): g for g in bias.groups}
    status = fit_status(result)
    imp = result.implied[result.implied["orderings"] == "logged"].set_index(["llm", "metric"])
    rows = []
    for llm in result.llms:
        g = groups.get(llm)
        for metric in ("delta_api", "delta_pos"):
            b = imp.loc[(llm, metric)] if (llm, metric) in imp.index else None
            tv = getattr(g, metric, None) if g is not None else None
            bl, bh = (float(b["hdi_low"]), float(b["hdi_high"])) if b is not None else (np.nan, np.nan)
            fc = float(tv.corrected) if tv is not None and tv.corrected is not None else np.nan
            fl, fh = (float(tv.corrected_ci[0]), float(tv.corrected_ci[1])) if tv is not None else (np.nan, np.nan)
            known = all(math.isfinite(x) for x in (bl, bh, fl, fh))
            rows.append({"llm": llm, "metric": metric, "bayes_mean": float(b["mean"]) if b is not None else np.nan,
                         "bayes_low": bl, "bayes_high": bh, "bayes_level": float(result.hdi_prob),
                         "freq_corrected": fc, "freq_low": fl, "freq_high": fh,
                         "freq_level": float(bias.confidence_level),
                         "disagree": bool(known and (bh < fl or fh < bl)),
                         "fits": status[llm][0], "failed_checks": status[llm][1]})
    return pd.DataFrame(rows)
