"""Cross-model alignment: how similarly do LLMs favour the same tools? (BiasBusters Fig. 15)."""

from __future__ import annotations

import itertools
import warnings
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from .._display import ReprHTMLMixin
from .._json import finite as _num
from .._validation import check_choice, check_confidence_level, check_n_resamples, check_rng
from ..exceptions import DegenerateDataWarning, SmallSampleWarning
from ._design import selection_rates

if TYPE_CHECKING:
    from typing import Literal

    from ..features import ToolFeatures
    from ..metrics import BiasResult

__all__ = ["model_alignment", "AlignmentResult"]

_METHODS = ("pearson", "spearman")
#: Fewest resampling units (clusters or tools) a pair needs for a bootstrap interval.
MIN_UNITS = 3
_RESAMPLE = ("cluster", "tool")


@dataclass(frozen=True, eq=False)
class AlignmentResult(ReprHTMLMixin):
    """Result of :func:`model_alignment`.

    Attributes
    ----------
    models : list of str
    matrix : pandas.DataFrame
        Correlation of every pair of LLMs' selection-rate vectors (models x models; 1 on the diagonal).
    ci_low, ci_high : pandas.DataFrame
        Bootstrap percentile interval per pair (NaN without resamples).
    n_tools : pandas.DataFrame
        Tools both LLMs have a rate for.
    method : str
        ``"pearson"`` or ``"spearman"``.
    resample : str
        Bootstrap unit: ``"cluster"`` (default) or ``"tool"``.
    n_resamples : int
    confidence_level : float
    seed : int, None or "generator"
    bootstrap_distribution : numpy.ndarray
        Replicates, shape ``(n_resamples, n_pairs)`` in the order of :meth:`to_frame`.
    warnings : list of str
    notes : list of str

    Examples
    --------

    >>> import toolbias_stats as tbs
    >>> from toolbias_stats.features import read_feature_table
    >>> feats = read_feature_table(tbs.datasets.path("biasbusters/authors_features.json"))
    >>> from toolbias_stats.models import model_alignment
    >>> res = model_alignment(feats, n_resamples=0)
    >>> res.matrix.round(2).iloc[:2, :2]
                 ChatGPT 3.5  ChatGPT 4.1
    ChatGPT 3.5         1.00         0.33
    ChatGPT 4.1         0.33         1.00
    """

    models: list
    matrix: pd.DataFrame
    ci_low: pd.DataFrame
    ci_high: pd.DataFrame
    n_tools: pd.DataFrame
    method: str
    resample: str
    n_resamples: int
    confidence_level: float
    seed: object
    bootstrap_distribution: np.ndarray = field(default_factory=lambda: np.empty((0, 0)), repr=False)
    warnings: list = field(default_factory=list)
    notes: list = field(default_factory=list)

    def to_frame(self) -> pd.DataFrame:
        """Tidy, unrounded: one row per pair of LLMs (upper triangle)."""
        rows = []
        for a, b in itertools.combinations(self.models, 2):
            rows.append({"model_a": a, "model_b": b, "r": self.matrix.at[a, b], "ci_low": self.ci_low.at[a, b],
                         "ci_high": self.ci_high.at[a, b], "n_tools": int(self.n_tools.at[a, b]),
                         "method": self.method, "resample": self.resample, "confidence_level": self.confidence_level})
        return pd.DataFrame(rows, columns=["model_a", "model_b", "r", "ci_low", "ci_high", "n_tools", "method",
                                           "resample", "confidence_level"])

    def to_dict(self) -> dict:
        def grid(df):
            return [[_num(v) for v in row] for row in df.to_numpy(dtype=float)]

        return {"models": list(self.models), "matrix": grid(self.matrix), "ci_low": grid(self.ci_low),
                "ci_high": grid(self.ci_high), "n_tools": [[int(v) for v in row] for row in self.n_tools.to_numpy()],
                "method": self.method, "resample": self.resample, "n_resamples": self.n_resamples,
                "confidence_level": self.confidence_level}


def model_alignment(rates: BiasResult | ToolFeatures | pd.DataFrame, *,
                    method: Literal["pearson", "spearman"] = "pearson", n_resamples: int = 2000,
                    confidence_level: float = 0.95, resample: Literal["cluster", "tool"] = "cluster",
                    rng: int | np.random.Generator | None = None) -> AlignmentResult:
    """Correlation between the LLMs' selection-rate vectors, with a bootstrap interval per pair.

    Parameters
    ----------
    rates : BiasResult, ToolFeatures or DataFrame
        Per-LLM selection rates (see :func:`~toolbias_stats.models.selection_rates`).
    method : {"pearson", "spearman"}, default "pearson"
        BiasBusters Fig. 15 uses Pearson.
    n_resamples : int, default 2000
        Bootstrap replicates (0: no intervals).
    confidence_level : float, default 0.95
    resample : {"cluster", "tool"}, default "cluster"
        Bootstrap unit. A cluster's rates sum to one, so its tools are not independent; the
        default resamples whole clusters (the same draw for every pair in a replicate).
    rng : None, int or numpy.random.Generator

    Returns
    -------
    AlignmentResult

    Warns
    -----
    SmallSampleWarning
        A pair with fewer than 3 clusters (or tools) in common: no interval (NaN).
    DegenerateDataWarning
        A pair with fewer than 3 common tools or a constant vector (NaN).

    Notes
    -----
    Each LLM is represented by the vector of its selection rates over all tools (clusters
    concatenated); a pair uses the tools both have rates for. The interval is the percentile
    interval of the correlation over resamples; replicates in which a vector is constant are
    dropped. It reflects which tools happen to be in the benchmark, not the sampling noise
    of the rates themselves (for that, bootstrap the queries: ``selection_bias``).

    Examples
    --------
    >>> rates = pd.DataFrame({"model": ["a"] * 4 + ["b"] * 4, "cluster_id": ["1", "1", "2", "2"] * 2,
    ...                       "tool_id": ["t1", "t2", "t3", "t4"] * 2,
    ...                       "rate": [0.9, 0.1, 0.3, 0.7, 0.8, 0.2, 0.4, 0.6]})
    >>> float(model_alignment(rates, n_resamples=0).matrix.at["a", "b"].round(3))
    0.99
    """
    check_choice("method", method, _METHODS)
    check_choice("resample", resample, _RESAMPLE)
    level = check_confidence_level(confidence_level)
    n_resamples = check_n_resamples(n_resamples)
    seed = rng if isinstance(rng, (int, type(None))) else "generator"
    gen = check_rng(rng)
    long = selection_rates(rates)
    caught: list = []
    models = list(dict.fromkeys(long["model"]))
    wide = long.pivot_table(index=["cluster_id", "tool_id"], columns="model", values="rate", aggfunc="first")
    wide = wide.reindex(columns=models)
    values = wide.to_numpy(dtype=float)                        # (tools, models)
    clusters = wide.index.get_level_values("cluster_id").astype(str).to_numpy()
    k = len(models)
    mat = np.eye(k)
    n_tools = np.zeros((k, k), dtype=int)
    pairs = list(itertools.combinations(range(k), 2))
    for i, j in pairs:
        ok = np.isfinite(values[:, i]) & np.isfinite(values[:, j])
        n_tools[i, j] = n_tools[j, i] = int(ok.sum())
        r = _corr(values[ok, i], values[ok, j], method)
        if not np.isfinite(r):
            msg = f"alignment of {models[i]!r} and {models[j]!r} is undefined ({int(ok.sum())} common tools); NaN"
            warnings.warn(msg, DegenerateDataWarning, stacklevel=2)
            caught.append(msg)
        mat[i, j] = mat[j, i] = r
    for i in range(k):
        n_tools[i, i] = int(np.isfinite(values[:, i]).sum())
    lo = np.full((k, k), np.nan)
    hi = np.full((k, k), np.nan)
    boot = np.empty((0, len(pairs)))
    if n_resamples and pairs:
        units = np.unique(clusters) if resample == "cluster" else np.arange(len(values))
        members = ([np.flatnonzero(clusters == u) for u in units] if resample == "cluster"
                   else [np.array([u]) for u in units])
        # units (clusters or tools) in which both LLMs of a pair have rates: only those are resampled for it
        has = np.isfinite(values)
        pair_units = [np.array([u for u, rows in enumerate(members) if (has[rows, i] & has[rows, j]).any()])
                      for i, j in pairs]
        few = [f"{models[i]} ~ {models[j]} ({len(u)})" for (i, j), u in zip(pairs, pair_units)
               if len(u) < MIN_UNITS]
        if few:
            msg = (f"alignment intervals need at least {MIN_UNITS} {resample}s in common; none for "
                   f"{', '.join(few[:5])}{', ...' if len(few) > 5 else ''}")
            warnings.warn(msg, SmallSampleWarning, stacklevel=2)
            caught.append(msg)
        boot = np.full((n_resamples, len(pairs)), np.nan)
        with np.errstate(invalid="ignore", divide="ignore"):
            all_units = np.arange(len(units))
            for b in range(n_resamples):
                shared = gen.integers(len(units), size=len(units))  # one draw for every pair covering all units
                for p, (i, j) in enumerate(pairs):
                    own = pair_units[p]
                    if len(own) < MIN_UNITS:
                        continue
                    draw = shared if np.array_equal(own, all_units) else own[gen.integers(len(own), size=len(own))]
                    idx = np.concatenate([members[d] for d in draw])
                    boot[b, p] = _corr(values[idx, i], values[idx, j], method)
        alpha = 1 - level
        for p, (i, j) in enumerate(pairs):
            v = boot[:, p][np.isfinite(boot[:, p])]
            if v.size:
                lo[i, j] = lo[j, i] = float(np.quantile(v, alpha / 2))
                hi[i, j] = hi[j, i] = float(np.quantile(v, 1 - alpha / 2))
        for i in range(k):
            lo[i, i] = hi[i, i] = 1.0
    frame = lambda a: pd.DataFrame(a, index=models, columns=models)  # noqa: E731
    notes = ["each LLM = vector of its selection rates over all tools (clusters concatenated)",
             f"interval: bootstrap percentile, {resample}s resampled with replacement ({n_resamples} replicates)"]
    return AlignmentResult(models=models, matrix=frame(mat), ci_low=frame(lo), ci_high=frame(hi),
                           n_tools=frame(n_tools), method=method, resample=resample, n_resamples=n_resamples,
                           confidence_level=level, seed=seed, bootstrap_distribution=boot, warnings=caught,
                           notes=notes)


def _corr(x, y, method) -> float:
    ok = np.isfinite(x) & np.isfinite(y)
    x, y = x[ok], y[ok]
    if len(x) < 3:
        return np.nan
    if method == "spearman":
        x = pd.Series(x).rank().to_numpy()
        y = pd.Series(y).rank().to_numpy()
    sx, sy = np.std(x), np.std(y)
    if sx == 0 or sy == 0:
        return np.nan
    return float(np.mean((x - x.mean()) * (y - y.mean())) / (sx * sy))


