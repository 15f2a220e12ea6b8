"""Join tool features to per-LLM selection rates: the data every explanation model starts from."""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from ..exceptions import DegenerateDataWarning

if TYPE_CHECKING:
    from typing import Any

    from ..features import ToolFeatures
    from ..metrics import BiasResult

__all__ = ["selection_rates", "design", "Design"]


def selection_rates(rates: BiasResult | ToolFeatures | pd.DataFrame | None, *,
                    features: ToolFeatures | None = None) -> pd.DataFrame:
    """Normalise selection rates into a long table ``model, cluster_id, tool_id, rate``.

    Parameters
    ----------
    rates : BiasResult, ToolFeatures, pandas.DataFrame or None
        A :class:`~toolbias_stats.BiasResult` (its ``rates_frame()``; the group key values,
        joined by ", ", become the model label), a ToolFeatures that carries rates, or a
        DataFrame with columns ``model``, ``tool_id``, ``rate`` (``cluster_id`` optional).
        ``None`` takes the rates carried by ``features``.
    features : ToolFeatures, optional
        Supplies ``cluster_id`` for a DataFrame without it, and the rates when ``rates`` is None.

    Returns
    -------
    pandas.DataFrame

    Raises
    ------
    ValueError
        No rates anywhere, or a DataFrame without the needed columns.

    Examples
    --------
    >>> import toolbias_stats as tbs
    >>> from toolbias_stats.simulate import simulate_selection_log
    >>> res = tbs.selection_bias(simulate_selection_log(n_clusters=2, n_queries=10, rng=0).log, n_resamples=0)
    >>> selection_rates(res).head(3)
           model cluster_id                tool_id  rate
    0  simulated          1  endpoint_for_tool_1_1  0.26
    1  simulated          1  endpoint_for_tool_1_2  0.20
    2  simulated          1  endpoint_for_tool_1_3  0.16
    """
    from ..features import ToolFeatures

    if rates is None:
        if features is None or getattr(features, "selection_rates", None) is None:
            raise ValueError("no selection rates: pass `rates` (a BiasResult from selection_bias(log, by='model') or "
                             "a DataFrame with model, tool_id, rate) or a feature table that carries them.")
        rates = features.selection_rates
    if isinstance(rates, ToolFeatures):
        if rates.selection_rates is None:
            raise ValueError(f"`rates`: the feature table {rates.source} carries no selection rates.")
        rates = rates.selection_rates
    if hasattr(rates, "rates_frame") and hasattr(rates, "groups"):  # BiasResult
        result: Any = rates
        by = list(result.by)
        frame = result.rates_frame()
        if frame.empty:
            raise ValueError("`rates`: the BiasResult has no selection rates.")
        label = frame[by].astype(str).agg(", ".join, axis=1) if by else pd.Series("all", index=frame.index)
        out = pd.DataFrame({"model": label, "cluster_id": frame["cluster"].astype(str),
                            "tool_id": frame["tool_id"].astype(str), "rate": frame["rate"].astype(float)})
        return out[np.isfinite(out["rate"])].reset_index(drop=True)
    if not isinstance(rates, pd.DataFrame):
        raise ValueError("`rates` must be a BiasResult, a ToolFeatures with rates or a DataFrame; "
                         f"got {type(rates).__name__} instead.")
    need = [c for c in ("model", "tool_id", "rate") if c not in rates.columns]
    if need:
        raise ValueError(f"`rates` must have the columns model, tool_id and rate; missing {need}; "
                         f"got columns {list(rates.columns)} instead.")
    out = rates[["model", "tool_id", "rate"] + (["cluster_id"] if "cluster_id" in rates.columns else [])].copy()
    out["model"] = out["model"].astype(str)
    out["tool_id"] = out["tool_id"].astype(str)
    out["rate"] = pd.to_numeric(out["rate"], errors="coerce").astype(float)
    if "cluster_id" not in out.columns:
        if features is None:
            raise ValueError("`rates` has no cluster_id column; pass `features` to look clusters up.")
        ft = features.table
        shared = sorted(set(ft["tool_id"][ft["tool_id"].duplicated()].astype(str)))
        if shared:
            raise ValueError(f"tool(s) {shared[:5]} are in several clusters: `rates` needs a cluster_id column.")
        look = dict(zip(ft["tool_id"].astype(str), ft["cluster_id"].astype(str)))
        out["cluster_id"] = out["tool_id"].map(look)
    out["cluster_id"] = out["cluster_id"].astype(str)
    return out[["model", "cluster_id", "tool_id", "rate"]][np.isfinite(out["rate"])].reset_index(drop=True)


@dataclass(frozen=True, eq=False)
class Design:
    """Features joined to targets, per LLM (internal to :mod:`toolbias_stats.models`).

    Attributes
    ----------
    models : list of str
    frames : dict
        ``{model: DataFrame}`` with ``tool_id``, ``cluster_id``, ``rate`` (raw), ``y`` (the
        target: the rate, centred on its cluster mean when ``center``) and one column per feature.
    feature_names : list of str
        Features used (after dropping).
    dropped_features : list of str
    center : bool
    notes : list of str
    """

    models: list
    frames: dict
    feature_names: list
    dropped_features: list
    center: bool
    notes: list = field(default_factory=list)


def design(features, rates=None, *, center=True, feature_names=None, caught=None, stacklevel=3) -> Design:
    """Build the per-LLM modelling tables (see :class:`Design`).

    The features are centred on their cluster means over every tool of the feature table
    (NaN ignored), the target on its cluster mean over the tools with a rate for that LLM.
    Features that are entirely missing, constant (after centring: zero everywhere) or exact
    duplicates of an earlier feature are dropped with a :class:`DegenerateDataWarning`.
    """
    from ..features import PAPER_FEATURES, ToolFeatures, center_by_cluster

    if not isinstance(features, ToolFeatures):
        raise ValueError(f"`features` must be a ToolFeatures (tool_features / read_feature_table); "
                         f"got {type(features).__name__} instead.")
    caught = caught if caught is not None else []
    long = selection_rates(rates, features=features)
    names = _choose(features, feature_names, PAPER_FEATURES)
    tab = features.table[["tool_id", "cluster_id", *names]].copy()
    tab["tool_id"] = tab["tool_id"].astype(str)
    tab["cluster_id"] = tab["cluster_id"].astype(str)
    if center and not features.centered:
        tab = center_by_cluster(tab, names)
    dropped: list[tuple[str, str]] = []
    kept: list[str] = []
    for f in names:
        col = tab[f].to_numpy(dtype=float)
        fin = col[np.isfinite(col)]
        if fin.size == 0:
            dropped.append((f, "all values missing"))
        elif np.ptp(fin) <= 1e-12 * max(1.0, np.abs(fin).max()):
            dropped.append((f, "constant" + (" within every cluster" if center else "")))
        elif any(np.array_equal(col, tab[k].to_numpy(dtype=float), equal_nan=True) for k in kept):
            dropped.append((f, "duplicate of another feature"))
        else:
            kept.append(f)
    for f, why in dropped:
        msg = f"feature {f!r} dropped: {why}"
        warnings.warn(msg, DegenerateDataWarning, stacklevel=stacklevel)
        caught.append(msg)
    known = set(tab["tool_id"])
    unknown = sorted(set(long["tool_id"]) - known)
    notes = []
    if unknown:
        msg = (f"{len(unknown)} tool(s) with selection rates have no features and are left out: "
               f"{', '.join(unknown[:5])}{', ...' if len(unknown) > 5 else ''}")
        warnings.warn(msg, DegenerateDataWarning, stacklevel=stacklevel)
        caught.append(msg)
    frames = {}
    models = list(dict.fromkeys(long["model"]))
    for m in models:
        sub = long[(long["model"] == m) & long["tool_id"].isin(known)][["tool_id", "cluster_id", "rate"]]
        # on the (cluster, tool) pair: a tool may be in several clusters, with a rate in each (issue 36)
        frame = tab[["tool_id", "cluster_id", *kept]].merge(sub, on=["tool_id", "cluster_id"], how="inner")
        y = frame["rate"].astype(float)
        if center:
            y = y - frame.groupby("cluster_id", sort=False)["rate"].transform("mean")
        frame.insert(2, "y", y.to_numpy())
        frame = frame[["tool_id", "cluster_id", "rate", "y", *kept]]
        frames[m] = frame.reset_index(drop=True)
    if center:
        notes.append("features centred on their cluster means over all tools of the feature table (NaN ignored); "
                     "target = selection rate minus its cluster mean (1/K when a cluster's rates sum to one)")
    return Design(models=models, frames=frames, feature_names=kept, dropped_features=[f for f, _ in dropped],
                  center=bool(center), notes=notes)


def _choose(features, feature_names, default):
    have = list(features.feature_names)
    if feature_names is None:
        paper = [f for f in default if f in have]
        return paper if paper else have
    if isinstance(feature_names, str):
        feature_names = [feature_names]
    names = list(dict.fromkeys(feature_names))
    bad = [f for f in names if f not in have]
    if bad or not names:
        raise ValueError(f"`feature_names` must be features of the table {have}; got {names!r} instead.")
    return names
