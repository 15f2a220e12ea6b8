"""The attempt-level explanation: a conditional logit with tool features, compared with OLS over per-tool rates."""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from .._display import ReprHTMLMixin, frame_html
from .._json import plain as _num

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ..choicemodel import ChoiceModelResult
    from ..features import ToolFeatures
    from ..io import SelectionLog
    from ._ols import OLSResult

__all__ = ["ChoiceExplanation", "choice_explanation"]

#: Exclusion reason of attempts whose list shows a tool with a missing feature value.
MISSING_FEATURE_REASON = "tool_without_features"


@dataclass(frozen=True, eq=False)
class ChoiceExplanation(ReprHTMLMixin):
    """Conditional logit of the choice on standardised tool features, next to OLS over per-tool rates.

    Attributes
    ----------
    result : ChoiceModelResult
        The fit (``worth="features"``, free position effects, Firth penalty, query-clustered sandwich).
    comparison : pandas.DataFrame
        One row per LLM and feature: ``sd`` (within-cluster standard deviation of the feature, the unit of
        both effects), OLS on the cluster-centred rates (``ols_coef``, ``ols_ci_low``, ``ols_ci_high``,
        ``ols_p``; cluster-robust, per 1 sd of the feature, in selection-rate units) and the conditional
        logit (``clogit_estimate``, ``clogit_ci_low``, ``clogit_ci_high``, ``clogit_p``; log-odds per 1 sd,
        query-clustered), ``same_sign`` and ``verdict`` (what the two say together).
    feature_names : list of str
    n_in, n_used, n_excluded : int
        Attempts given, used by the model, excluded (``n_in = n_used + n_excluded``).
    excluded : dict
        Excluded attempts by reason (``tool_without_features`` plus the choice model's own reasons).
    confidence_level : float
    warnings : list of str

    Examples
    --------
    >>> import numpy as np
    >>> import pandas as pd
    >>> import toolbias_stats as tbs
    >>> from toolbias_stats.choicemodel import simulate_logit_log
    >>> from toolbias_stats.models import choice_explanation, ols_fit
    >>> x = np.array([[-1.5, 0.3], [-1.0, -1.2], [-0.5, 0.8], [0.0, -0.4], [0.3, 1.1], [0.6, -0.9]])
    >>> log = simulate_logit_log(n_tools=6, set_size=3, n_queries=80, n_lists=2, worths=np.zeros(6), features=x,
    ...                           beta=np.array([0.6, 0.0]), rng=11)
    >>> feats = tbs.ToolFeatures(table=pd.DataFrame({"tool_id": [f"t{i + 1}" for i in range(6)], "cluster_id": "all",
    ...                                              "f1": x[:, 0], "f2": x[:, 1]}), feature_names=("f1", "f2"))
    >>> res = choice_explanation(feats, log, ols=ols_fit(feats, tbs.selection_bias(log, n_resamples=0, n_null=0)))
    >>> res.n_in == res.n_used + res.n_excluded, list(res.comparison["verdict"])
    (True, ['clogit only', 'neither'])
    """

    result: ChoiceModelResult
    comparison: pd.DataFrame
    feature_names: list
    n_in: int
    n_used: int
    n_excluded: int
    excluded: dict
    confidence_level: float
    warnings: list = field(default_factory=list)

    def to_frame(self) -> pd.DataFrame:
        """The comparison table (unrounded)."""
        return self.comparison.copy()

    def to_dict(self) -> dict:
        """JSON object: counts, the comparison per LLM and feature, and the fit's settings."""
        per_model: dict = {}
        for rec in self.comparison.to_dict(orient="records"):
            m = per_model.setdefault(str(rec["model"]), {})
            m[rec["feature"]] = {
                "sd": _num(rec["sd"]),
                "ols": {"coef": _num(rec["ols_coef"]), "ci": [_num(rec["ols_ci_low"]), _num(rec["ols_ci_high"])],
                        "p": _num(rec["ols_p"])},
                "clogit": {"estimate": _num(rec["clogit_estimate"]),
                           "ci": [_num(rec["clogit_ci_low"]), _num(rec["clogit_ci_high"])],
                           "p": _num(rec["clogit_p"])},
                "same_sign": None if rec["same_sign"] is None else bool(rec["same_sign"]),
                "verdict": rec["verdict"]}
        return {"method": self.result.method, "unit": "per within-cluster standard deviation of the feature",
                "features": list(self.feature_names), "n_in": self.n_in, "n_used": self.n_used,
                "n_excluded": self.n_excluded, "excluded": {k: int(v) for k, v in self.excluded.items()},
                "confidence_level": self.confidence_level, "models": per_model, "warnings": list(self.warnings)}

    def _repr_html_(self) -> str:
        return frame_html(self.comparison, title="OLS over per-tool rates vs conditional logit over attempts "
                                                 "(per 1 within-cluster sd of the feature)", max_rows=200)


def choice_explanation(features: ToolFeatures, log: SelectionLog, *, ols: OLSResult | None = None,
                       feature_names: Sequence[str] | None = None, by: str = "model",
                       confidence_level: float = 0.95) -> ChoiceExplanation:
    """Fit the conditional logit with tool features and compare it with OLS over per-tool rates.

    Features are cluster-mean centred and divided by their pooled within-cluster standard deviation, so
    both effects are "per 1 sd of the feature": OLS in selection-rate units (the papers' analysis over ~50
    per-tool rates), the conditional logit in log-odds per attempt (every attempt a unit, the list shown
    and the position of each tool in it accounted for; a cluster constant cancels within a list). Attempts
    whose list shows a tool with a missing feature value are excluded and counted
    (``tool_without_features``).

    Parameters
    ----------
    features : ToolFeatures
    log : SelectionLog
        With the list shown (``ordering``).
    ols : OLSResult, optional
        The OLS fit to compare with (e.g. ``ExplainResult.ols``); computed with centring when None.
    feature_names : sequence of str, optional
        Default: those of ``ols`` (else every feature).
    by : str, default "model"
    confidence_level : float, default 0.95

    Returns
    -------
    ChoiceExplanation

    Examples
    --------
    Six tools with two features, shown three at a time; only ``f1`` drives the choice (0.6 log-odds per unit):

    >>> import numpy as np
    >>> import pandas as pd
    >>> import toolbias_stats as tbs
    >>> from toolbias_stats.choicemodel import simulate_logit_log
    >>> from toolbias_stats.models import ols_fit
    >>> x = np.array([[-1.5, 0.3], [-1.0, -1.2], [-0.5, 0.8], [0.0, -0.4], [0.3, 1.1], [0.6, -0.9]])
    >>> log = simulate_logit_log(n_tools=6, set_size=3, n_queries=80, n_lists=2, worths=np.zeros(6), features=x,
    ...                           beta=np.array([0.6, 0.0]), rng=11)
    >>> table = pd.DataFrame({"tool_id": [f"t{i + 1}" for i in range(6)], "cluster_id": "all",
    ...                       "f1": x[:, 0], "f2": x[:, 1]})
    >>> feats = tbs.ToolFeatures(table=table, feature_names=("f1", "f2"))
    >>> ols = ols_fit(feats, tbs.selection_bias(log, n_resamples=0, n_null=0))
    >>> res = choice_explanation(feats, log, ols=ols)
    >>> res.to_frame()[["feature", "clogit_estimate", "clogit_ci_low", "clogit_ci_high", "verdict"]].round(2)
      feature  clogit_estimate  clogit_ci_low  clogit_ci_high      verdict
    0      f1             0.55           0.35            0.75  clogit only
    1      f2            -0.11          -0.28            0.07      neither
    """
    from scipy import stats

    from ..choicemodel import choice_model
    from ..io import SelectionLog
    from ._ols import ols_fit

    if ols is None:
        ols = ols_fit(features, None, center=True, feature_names=feature_names, confidence_level=confidence_level)
    names = list(feature_names or ols.feature_names)
    table = features.table.copy()
    table["tool_id"] = table["tool_id"].astype(str)
    centred = table[names] - table.groupby("cluster_id")[names].transform("mean")
    sd = centred.std(ddof=1)
    names = [n for n in names if np.isfinite(sd[n]) and sd[n] > 0]
    scaled = centred[names] / sd[names]
    complete = scaled.notna().all(axis=1).to_numpy()
    feat = pd.concat([table[["tool_id"]], scaled], axis=1)[complete]
    ok_tools = set(feat["tool_id"])
    data = log.data
    n_in = int(log.n_attempts)
    tools_of = {o: (set(str(o).split("|")) <= ok_tools) for o in data["ordering"].dropna().unique()}
    keep = data["ordering"].map(tools_of).fillna(True).astype(bool).to_numpy()  # unknown lists: the model counts them
    if "count" in data.columns:
        n_missing = int(data.loc[~keep, "count"].sum())
    else:
        n_missing = int((~keep).sum())
    sub = SelectionLog.from_frame(data[keep].reset_index(drop=True), log.catalog, source="<explain>")
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        res = choice_model(sub, by=by, features=feat, worth="features", position="free",
                           confidence_level=confidence_level)
    msgs = list(dict.fromkeys(str(w.message) for w in rec))
    excluded = {MISSING_FEATURE_REASON: n_missing} if n_missing else {}
    for g in res.groups.to_dict(orient="records"):
        for reason, n in (g.get("excluded") or {}).items():
            excluded[reason] = excluded.get(reason, 0) + int(n)
    if n_missing:
        msgs.insert(0, f"{n_missing} attempt(s) excluded from the conditional logit: their list shows a tool with a "
                       "missing feature value (the OLS drops such tools instead).")
    z = stats.norm.ppf(0.5 + confidence_level / 2)
    fe = res.feature_effects
    by_col = by if isinstance(by, str) else None
    rows = []
    for fit in ols.fits:
        coefs = fit.coefficients.set_index("term")
        for f in names:
            r = {"model": fit.model, "feature": f, "sd": float(sd[f])}
            if f in coefs.index:
                c = coefs.loc[f]
                r.update(ols_coef=c["coef"] * sd[f], ols_ci_low=c["ci_cluster_low"] * sd[f],
                         ols_ci_high=c["ci_cluster_high"] * sd[f], ols_p=c["p_cluster"])
            else:
                r.update(ols_coef=np.nan, ols_ci_low=np.nan, ols_ci_high=np.nan, ols_p=np.nan)
            sel = fe[(fe["feature"] == f) & (fe["kind"] == "feature")]
            if by_col is not None and by_col in fe.columns:
                sel = sel[sel[by_col].astype(str) == str(fit.model)]
            if len(sel):
                e = sel.iloc[0]
                p = 2 * stats.norm.sf(abs(e["estimate"] / e["se"])) if e["se"] > 0 else np.nan
                r.update(clogit_estimate=e["estimate"], clogit_ci_low=e["ci_low"], clogit_ci_high=e["ci_high"],
                         clogit_p=p)
            else:
                r.update(clogit_estimate=np.nan, clogit_ci_low=np.nan, clogit_ci_high=np.nan, clogit_p=np.nan)
            r["same_sign"] = (None if not (np.isfinite(r["ols_coef"]) and np.isfinite(r["clogit_estimate"]))
                              else bool(np.sign(r["ols_coef"]) == np.sign(r["clogit_estimate"])))
            r["verdict"] = _verdict(r, z)
            rows.append(r)
    comp = pd.DataFrame(rows)
    n_used = int(res.n_used)
    return ChoiceExplanation(result=res, comparison=comp, feature_names=names, n_in=n_in, n_used=n_used,
                             n_excluded=n_in - n_used, excluded=excluded, confidence_level=confidence_level,
                             warnings=msgs)


def _excludes_zero(lo, hi) -> bool:
    return bool(np.isfinite(lo) and np.isfinite(hi) and (lo > 0 or hi < 0))


def _verdict(r, z) -> str:
    """What the two analyses say together (intervals at the stated level)."""
    if not np.isfinite(r["clogit_estimate"]) or not np.isfinite(r["ols_coef"]):
        return "not estimated"
    o = _excludes_zero(r["ols_ci_low"], r["ols_ci_high"])
    c = _excludes_zero(r["clogit_ci_low"], r["clogit_ci_high"])
    if o and c:
        return "both clear, same sign" if r["same_sign"] else "both clear, OPPOSITE signs"
    if c:
        return "clogit only"
    if o:
        return "OLS only"
    return "neither"

