"""The TOOL-SHADOW v1 Positional Bias Score (PBS) with turn-level bootstrap CIs and a weight-sensitivity band."""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

import numpy as np
import pandas as pd

from .._display import ReprHTMLMixin
from .._json import finite as _num
from .._json import plain as _plain
from .._resampling import ConfidenceInterval, percentile_ci, resampled_counts
from .._validation import check_choice, check_confidence_level, check_n_resamples, check_rng
from ..exceptions import DegenerateDataWarning
from . import _domains as dm
from ._io import ShadowAudit
from ._weights import BANNER, DOMAINS, ShadowWeights, draw_weights, worksheet_weights

__all__ = ["tool_shadow", "ShadowResult", "ShadowGroup", "DomainScore", "PBSScore", "SCALES", "name_task_similarity"]

#: ``"paper"``: PBS = 100 logistic(sum w_d z_d) as published; ``"effect"``: the same on effect sizes.
SCALES = ("paper", "effect")

#: What each domain's ``statistic`` is.
STATISTICS = {
    "L": "Mantel-Haenszel log odds ratio of Pr[called | relevant], top vs bottom position quartile, stratified by "
         "description-length tertile",
    "D": "logistic coefficient of description length (per 2 SD) on `called` among relevant tools, adjusted for "
         "position",
    "S": "Pearson r across tools between mean (task, tool-name) cosine similarity and call rate when relevant, "
         "held-out turns",
    "R": "minus the logistic coefficient of the position index (per 2 SD) on `called`, adjusted for relevance, "
         "description length and name-task similarity",
}
#: The effect-size scale of each domain (log odds ratio units).


class TextEncoder(Protocol):
    """What :func:`name_task_similarity` needs of an encoder: ``encode(list of str) -> (n, dim) array``."""

    def encode(self, texts: list[str], /) -> Any:
        ...


EFFECTS = {"L": "log OR (top vs bottom quartile)", "D": "log OR per 2 SD of description length",
           "S": "Pearson r across tools (an ecological correlation: no conversion to a log OR applies)",
           "R": "log OR per 2 SD earlier in the list"}


@dataclass(frozen=True)
class DomainScore:
    """One domain of one harness.

    Attributes
    ----------
    name : str
        ``"L"``, ``"D"``, ``"S"`` or ``"R"``.
    statistic, statistic_ci : float, ConfidenceInterval
        The domain's statistic (see :data:`STATISTICS`) with its percentile bootstrap interval.
    z, z_ci : float, ConfidenceInterval
        The paper's z (positive = more bias) and its bootstrap interval.
    effect, effect_ci : float, ConfidenceInterval
        The effect size (log-odds units, does not grow with the number of turns) and its interval.
    n : int
        Rows (L, D, R) or tools (S) used.
    weight : float
        Weight used in the PBS (0 when the domain is not available; the others are renormalised).
    precision : str
        ``"medium"`` or ``"low"`` (the floor).
    available : bool
    note : str or None
        Why the domain is missing, or what was adjusted (dropped covariates, zero cells).
    bootstrap_z, bootstrap_effect : numpy.ndarray
        Replicates (NaN where a replicate could not be computed).

    Examples
    --------
    A simulated audit whose first positions are favoured (log OR 1.5 between the first and the last place):

    >>> import toolbias_stats as tbs
    >>> audit = tbs.shadow.simulate_audit(200, 8, position_effect=1.5, rng=0)
    >>> res = tbs.tool_shadow(audit, n_resamples=50, n_weight_draws=50, rng=0)
    >>> L = res.groups[0].domains["L"]
    >>> L.name, L.available, round(L.weight, 3), round(L.effect, 2)
    ('L', True, 0.3, 1.78)
    >>> round(L.contribution("effect"), 3) == round(L.weight * L.effect, 3)
    True
    """

    name: str
    statistic: float
    statistic_ci: ConfidenceInterval
    z: float
    z_ci: ConfidenceInterval
    effect: float
    effect_ci: ConfidenceInterval
    n: int
    weight: float
    precision: str
    available: bool
    note: str | None
    bootstrap_z: np.ndarray | None = field(repr=False, default=None)
    bootstrap_effect: np.ndarray | None = field(repr=False, default=None)

    def contribution(self, scale: Literal["paper", "effect"] = "paper") -> float:
        """``w_d z_d`` (paper) or ``w_d effect_d`` (effect); 0 when the domain is not available.

        Parameters
        ----------
        scale : {"paper", "effect"}, default "paper"

        Returns
        -------
        float
        """
        if not self.available:
            return 0.0
        return self.weight * (self.z if scale == "paper" else self.effect)


@dataclass(frozen=True)
class PBSScore:
    """A Positional Bias Score on one scale: estimate, bootstrap CI and weight-sensitivity band (0-100).

    Examples
    --------
    >>> import toolbias_stats as tbs
    >>> audit = tbs.shadow.simulate_audit(200, 8, position_effect=1.5, rng=0)
    >>> res = tbs.tool_shadow(audit, n_resamples=50, n_weight_draws=50, rng=0)
    >>> p = res.groups[0].pbs["effect"]
    >>> p.scale, round(p.estimate, 1), p.ci.low <= p.estimate <= p.ci.high
    ('effect', 67.7, True)
    """

    scale: str
    estimate: float
    ci: ConfidenceInterval
    sensitivity: ConfidenceInterval
    bootstrap_distribution: np.ndarray | None = field(repr=False, default=None)


@dataclass(frozen=True)
class ShadowGroup:
    """TOOL-SHADOW of one harness (one group of the audit).

    Attributes
    ----------
    keys : dict
        The group's values of the ``by`` columns (empty without groups).
    n_turns, n_units, n_tools, n_rows : int
    domains : dict
        ``{L, D, S, R: DomainScore}``.
    pbs : dict
        ``{"paper": PBSScore, "effect": PBSScore}``.
    weights : dict
        The weights used (renormalised over the available domains).
    notes : tuple of str

    Examples
    --------
    >>> import toolbias_stats as tbs
    >>> audit = tbs.shadow.simulate_audit(200, 8, position_effect=1.5, rng=0)
    >>> res = tbs.tool_shadow(audit, n_resamples=50, n_weight_draws=50, rng=0)
    >>> g = res.groups[0]
    >>> g.n_turns, g.n_tools, sorted(g.domains), round(g.pbs["paper"].estimate, 1)
    (200, 8, ['D', 'L', 'R', 'S'], 96.1)
    >>> print(g.notice())  # doctest: +NORMALIZE_WHITESPACE
    pre-validation; not for deployment gating; PBS > 60: the per-domain breakdown is mandatory
    (paper, calibration targets)
    """

    keys: dict
    n_turns: int
    n_units: int
    n_tools: int
    n_rows: int
    domains: dict
    pbs: dict
    weights: dict
    notes: tuple = ()

    def notice(self, scale: Literal["paper", "effect"] = "paper") -> str:
        """The banner, plus the paper's rule when PBS > 60.

        Parameters
        ----------
        scale : {"paper", "effect"}, default "paper"
            The PBS whose value decides the rule.

        Returns
        -------
        str
        """
        text = BANNER
        est = self.pbs[scale].estimate
        if np.isfinite(est) and est > 60:
            text += "; PBS > 60: the per-domain breakdown is mandatory (paper, calibration targets)"
        return text


@dataclass(frozen=True)
class ShadowResult(ReprHTMLMixin):
    """Result of :func:`tool_shadow`.

    Attributes
    ----------
    groups : tuple of ShadowGroup
        One per harness (``by`` group), each with its domains and both PBS scales.
    scale : str
        The scale shown by default (``"paper"`` or ``"effect"``); both are always computed.
    weights : ShadowWeights
        The weights and their derivation table.
    by : tuple of str
    confidence_level, n_resamples, n_weight_draws, holdout : settings
    similarity : dict
        How the (task, tool-name) similarity was obtained (encoder provenance, or why it is missing).
    n_excluded : dict
        Attempts excluded before scoring, by reason.
    banner : str
        ``"pre-validation; not for deployment gating"``.
    seed : object
        The ``rng`` argument (provenance).

    Examples
    --------
    >>> import toolbias_stats as tbs
    >>> audit = tbs.shadow.simulate_audit(200, 8, position_effect=1.5, rng=0)
    >>> res = tbs.tool_shadow(audit, n_resamples=50, n_weight_draws=50, rng=0)
    >>> res.pbs_frame()[["scale", "pbs", "n_turns", "n_tools"]].round(1)
        scale   pbs  n_turns  n_tools
    0   paper  96.1      200        8
    1  effect  67.7      200        8
    >>> res.to_frame()[["domain", "effect", "weight"]].round(2)
      domain  effect  weight
    0      L    1.78    0.30
    1      D   -0.36    0.18
    2      S   -0.14    0.18
    3      R    0.83    0.35
    >>> res.to_dict()["banner"]
    'pre-validation; not for deployment gating'
    """

    groups: tuple
    scale: str
    weights: ShadowWeights
    by: tuple
    confidence_level: float
    n_resamples: int
    n_weight_draws: int
    holdout: float | None
    similarity: dict
    n_excluded: dict
    banner: str = BANNER
    seed: object = None

    def to_frame(self) -> pd.DataFrame:
        """One row per group x domain (unrounded): statistic, z, effect with CIs, weight, contributions."""
        rows = []
        for g in self.groups:
            for d in DOMAINS:
                s = g.domains[d]
                rows.append({**g.keys, "domain": d, "statistic": s.statistic, "statistic_ci_low": s.statistic_ci.low,
                             "statistic_ci_high": s.statistic_ci.high, "z": s.z, "z_ci_low": s.z_ci.low,
                             "z_ci_high": s.z_ci.high, "effect": s.effect, "effect_ci_low": s.effect_ci.low,
                             "effect_ci_high": s.effect_ci.high, "n": s.n, "weight": s.weight,
                             "contribution_paper": s.contribution("paper"),
                             "contribution_effect": s.contribution("effect"), "precision": s.precision,
                             "available": s.available, "note": s.note})
        return pd.DataFrame(rows)

    def _headline(self):
        pbs = self.pbs_frame()
        return f"ShadowResult: PBS ({self.scale} scale) per group", pbs[pbs["scale"] == self.scale], self.banner

    def pbs_frame(self) -> pd.DataFrame:
        """One row per group x scale: PBS, CI, sensitivity band, n_turns, n_tools."""
        rows = []
        for g in self.groups:
            for sc in SCALES:
                p = g.pbs[sc]
                rows.append({**g.keys, "scale": sc, "pbs": p.estimate, "ci_low": p.ci.low, "ci_high": p.ci.high,
                             "sensitivity_low": p.sensitivity.low, "sensitivity_high": p.sensitivity.high,
                             "n_turns": g.n_turns, "n_tools": g.n_tools})
        return pd.DataFrame(rows)

    def to_dict(self, scale: Literal["paper", "effect"] | None = None) -> dict[str, Any]:
        """The documented JSON (docs/tool_shadow.md): strict JSON, missing values are None.

        Parameters
        ----------
        scale : {"paper", "effect"}, optional
            The scale shown first; default :attr:`scale`.

        Returns
        -------
        dict
        """
        shown: str = self.scale if scale is None else check_choice("scale", scale, SCALES)
        other = "effect" if shown == "paper" else "paper"
        groups = []
        for g in self.groups:
            p, o = g.pbs[shown], g.pbs[other]
            groups.append({
                "keys": {k: _plain(v, fallback=str) for k, v in g.keys.items()},
                "n_turns": g.n_turns, "n_units": g.n_units,
                "n_tools": g.n_tools, "scale": shown,
                "pbs": {"estimate": _num(p.estimate), "ci": _ci(p.ci), "sensitivity": _ci(p.sensitivity)},
                "pbs_other_scale": {"scale": other, "estimate": _num(o.estimate), "ci": _ci(o.ci),
                                    "sensitivity": _ci(o.sensitivity)},
                "weights": {d: _num(g.weights[d]) for d in DOMAINS},
                "domains": {d: _domain_dict(g.domains[d], shown) for d in DOMAINS},
                "notes": list(g.notes),
                "notice": g.notice(shown),
            })
        return {"banner": self.banner, "scale": shown, "confidence_level": self.confidence_level,
                "n_resamples": self.n_resamples, "n_weight_draws": self.n_weight_draws,
                "holdout": self.holdout, "by": list(self.by), "seed": _plain(self.seed, fallback=str),
                "weights": self.weights.to_dict(), "similarity": self.similarity,
                "n_excluded": {k: int(v) for k, v in self.n_excluded.items()},
                "validated": False, "groups": groups}


def _ci(ci):
    return [_num(ci[0]), _num(ci[1])]


def _domain_dict(s: DomainScore, scale):
    return {"statistic": _num(s.statistic), "statistic_ci": _ci(s.statistic_ci), "z": _num(s.z), "z_ci": _ci(s.z_ci),
            "effect": _num(s.effect), "effect_ci": _ci(s.effect_ci), "weight": _num(s.weight),
            "contribution": _num(s.contribution(scale)), "precision": s.precision, "n": int(s.n),
            "available": bool(s.available), "note": s.note, "definition": STATISTICS[s.name]}


# -- similarity ---------------------------------------------------------------------------------------------------
def name_task_similarity(audit: ShadowAudit, encoder: TextEncoder | str | None = None
                         ) -> tuple[np.ndarray, dict[str, Any]]:
    """Cosine similarity between each turn's task text and each tool name, per row of ``audit.rows``.

    Parameters
    ----------
    audit : ShadowAudit
    encoder : None, str, Encoder or object with ``encode(list[str]) -> (n, dim) array``
        ``None``: the package's offline all-MiniLM-L6-v2 :class:`~toolbias_stats.features.Encoder` with its
        on-disk cache. Any object with an ``encode`` method returning unit vectors can be injected (tests).

    Returns
    -------
    (numpy.ndarray, dict)
        Similarity per row (NaN for turns without text) and provenance.

    Examples
    --------
    A toy encoder (letter counts) stands in for the sentence encoder:

    >>> import numpy as np, pandas as pd
    >>> class Letters:
    ...     def encode(self, texts):
    ...         return np.array([[t.count(c) for c in "abcdefghijklmnopqrstuvwxyz"] for t in texts], float)
    >>> rows = pd.DataFrame({"turn_id": ["t1", "t1"], "tool_name": ["weather", "stocks"], "position": [1, 2],
    ...                      "called": [1, 0], "relevant": [1, 1], "desc_len": [50.0, 40.0]})
    >>> audit = ShadowAudit.from_frame(rows, tasks={"t1": "weather"})
    >>> sim, info = name_task_similarity(audit, encoder=Letters())
    >>> sim.round(3).tolist(), info["encoder"]   # 1 / (3 sqrt(8)) for "stocks"
    ([1.0, 0.118], 'Letters')
    """
    rows = audit.rows
    if not audit.tasks:
        return np.full(len(rows), np.nan), {"available": False, "reason": "no task text for any turn"}
    enc: TextEncoder
    if encoder is None or isinstance(encoder, str):
        from ..features import Encoder

        enc = Encoder(encoder)
    else:
        enc = encoder
    tasks = list(dict.fromkeys(audit.tasks[t] for t in rows["turn_id"].unique() if t in audit.tasks))
    name_col = rows["tool_text"] if "tool_text" in rows.columns else rows["tool_name"]
    names = list(dict.fromkeys(name_col))
    vecs = np.asarray(enc.encode(tasks + names), dtype=float)
    norms = np.linalg.norm(vecs, axis=1, keepdims=True)
    vecs = vecs / np.where(norms > 0, norms, 1)
    tv, nv = vecs[:len(tasks)], vecs[len(tasks):]
    sim = tv @ nv.T
    ti = {t: i for i, t in enumerate(tasks)}
    ni = {n: i for i, n in enumerate(names)}
    task_idx = rows["turn_id"].map(lambda t: ti.get(audit.tasks.get(t), -1)).to_numpy()
    name_idx = name_col.map(ni).to_numpy()
    out = np.where(task_idx >= 0, sim[np.maximum(task_idx, 0), name_idx], np.nan)
    texts = "cos(turn task text, tool name)"
    if "tool_text" in rows.columns:
        texts += " [catalog tool_name + api_name]"
    info = {"available": True, "texts": texts, "n_tasks": len(tasks), "n_names": len(names)}
    if hasattr(enc, "describe"):
        info.update(enc.describe())
    else:
        info["encoder"] = type(enc).__name__
    return out, info


# -- the score ----------------------------------------------------------------------------------------------------
def _check_tool_shadow_args(audit, by, scale, weights, cis, n_resamples, n_weight_draws, confidence_level, holdout,
                            rng):
    if not isinstance(audit, ShadowAudit):
        raise ValueError("`audit` must be a ShadowAudit (read_shadow_audit, ShadowAudit.from_frame or "
                         f"audit_from_study); got {type(audit).__name__} instead.")
    scale = check_choice("scale", scale, SCALES)
    n_resamples = check_n_resamples(n_resamples)
    n_weight_draws = check_n_resamples(n_weight_draws)
    confidence_level = check_confidence_level(confidence_level)
    if holdout is not None and (isinstance(holdout, bool) or not isinstance(holdout, (int, float))
                                or not 0 < holdout <= 1):
        raise ValueError(f"`holdout` must be None or a fraction in (0, 1]; got {holdout!r} instead.")
    if weights is not None and cis is not None:
        raise ValueError("pass either `weights` or `cis` (the worksheet derives weights from CIs), not both.")
    if weights is None:
        weights = worksheet_weights(cis)
    elif isinstance(weights, dict):
        unknown = set(weights) - set(DOMAINS)
        if unknown or set(weights) != set(DOMAINS):
            raise ValueError(f"`weights` must give every domain {list(DOMAINS)}; got {sorted(weights)} instead.")
        vals = np.array([float(weights[d]) for d in DOMAINS])
        if np.any(vals < 0) or not np.isclose(vals.sum(), 1.0):
            raise ValueError(f"`weights` must be non-negative and sum to 1; got {weights!r} instead.")
        base = worksheet_weights()
        weights = ShadowWeights({d: float(weights[d]) for d in DOMAINS}, base.precision, base.floor,
                                base.table.assign(weight=vals, source="user"), "user-supplied weights")
    elif not isinstance(weights, ShadowWeights):
        raise ValueError(f"`weights` must be None, a dict or ShadowWeights; got {type(weights).__name__} instead.")
    cols = list(audit.rows.columns)
    if by is None:
        by = list(audit.group_columns)
    elif isinstance(by, str):
        by = [b.strip() for b in by.split(",") if b.strip()]
    missing = [b for b in by if b not in cols]
    if missing:
        raise ValueError(f"`by` names column(s) {missing} that the audit does not have; available: {sorted(cols)}.")
    return list(by), scale, weights, n_resamples, n_weight_draws, confidence_level, check_rng(rng)


def tool_shadow(audit: ShadowAudit, *, by: str | Sequence[str] | None = None,
                scale: Literal["paper", "effect"] = "paper",
                weights: Mapping[str, float] | ShadowWeights | None = None,
                cis: Mapping[str, Sequence[float]] | None = None, n_resamples: int = 2000,
                n_weight_draws: int = 2000, confidence_level: float = 0.95, holdout: float | None = 0.5,
                encoder: TextEncoder | str | Literal[False] | None = None,
                rng: np.random.Generator | int | None = None) -> ShadowResult:
    """TOOL-SHADOW v1 Positional Bias Score of a harness audit, per harness, with honest uncertainty.

    Parameters
    ----------
    audit : ShadowAudit
        From :func:`read_shadow_audit` (files), :func:`audit_from_study` (any SelectionLog) or
        :meth:`ShadowAudit.from_frame`.
    by : str or list of str, optional
        Columns whose groups are scored separately; default the audit's ``group_columns``.
    scale : {"paper", "effect"}, default "paper"
        Which score ``to_dict`` and the reports show first; both are always computed. ``"paper"``:
        ``PBS = 100 logistic(sum_d w_d z_d)``, the paper's definition, whose z-scores grow with the square root of
        the number of turns; ``"effect"``: ``100 logistic(sum_d w_d e_d)`` with effect sizes ``e_d`` in log-odds
        units that do not grow with the log size.
    weights : dict or ShadowWeights, optional
        Domain weights; default the v1 weights (:func:`worksheet_weights`).
    cis : dict, optional
        ``{domain: (HR_lower, HR_upper)}`` published CIs: the weights are derived by the worksheet instead.
    n_resamples : int, default 2000
        Turn-level (unit-level) bootstrap replicates; 0 skips the intervals.
    n_weight_draws : int, default 2000
        Weight draws for the sensitivity band (:func:`draw_weights`); 0 skips it.
    confidence_level : float, default 0.95
    holdout : float or None, default 0.5
        Fraction of units held out for domain S (chosen with ``rng``); None uses every turn.
    encoder : None, str, Encoder, object with ``encode`` or False
        Encoder of the (task, tool-name) similarity (:func:`name_task_similarity`); ``False`` leaves S and the
        similarity term of R out. Ignored when ``audit.rows`` has a ``similarity`` column.
    rng : None, int or numpy.random.Generator

    Returns
    -------
    ShadowResult

    Raises
    ------
    ValueError
        Invalid arguments (the message names the parameter).

    Warns
    -----
    DegenerateDataWarning
        A domain cannot be computed for a group (its weight is then shared by the others and the note says why).

    Notes
    -----
    Direction everywhere: positive = more positional bias. Domains (docs/tool_shadow.md has the paper's sentence
    next to every choice):

    * **L**: Mantel-Haenszel log OR of Pr[called | relevant] between the top and bottom quartile
      (:func:`quartile_size` positions each) stratified by description-length tertile; ``z = log OR / SE``
      (Robins-Breslow-Greenland); effect = log OR.
    * **D**: logistic regression of ``called`` on position and description length among relevant tools,
      covariates centred and divided by 2 SD, turn-clustered SEs; ``z`` = z of the length term; effect = its
      coefficient.
    * **S**: Pearson r across tools between the mean (task, tool-name) cosine similarity and the call rate when
      relevant, on the held-out units; ``z = atanh(r) sqrt(n_tools - 3)``; effect = r.
    * **R**: logistic regression of ``called`` on relevance, description length, name-task similarity and the
      position index (2 SD scaled), turn-clustered SEs; ``z`` = minus the z of position; effect = minus its
      coefficient.

    ``PBS = 100 logistic(sum_d w_d z_d)`` (paper) or ``100 logistic(sum_d w_d e_d)`` (effect). A domain that
    cannot be computed gets weight 0 and the others are renormalised. CIs are percentile intervals of the
    unit-level bootstrap (one set of replicates for every domain and both scores; D and R by the one-step
    estimating-equation bootstrap). The sensitivity band is the central ``confidence_level`` range of the
    score at the point estimates under :func:`draw_weights`.

    References
    ----------
    TOOL-SHADOW v1 (2025), ``../shared/papers/tool-shadow-v1.md``. Robins, Breslow & Greenland (1986),
    Biometrics 42:311. Gelman (2008), Stat. Med. 27:2865. Hu & Kalbfleisch (2000), Can. J. Stat. 28:495.

    Examples
    --------
    The bundled example audit (600 turns, one fixed order of 12 tools; fewer replicates than the default):

    >>> import toolbias_stats as tbs
    >>> from toolbias_stats.datasets import path
    >>> audit = tbs.read_shadow_audit(path("shadow/manifest.json"), path("shadow/calls.csv"),
    ...                               path("shadow/labels.csv"), turns=path("shadow/turns.csv"))
    >>> res = tbs.tool_shadow(audit, n_resamples=200, rng=1)
    >>> res.pbs_frame()[["scale", "pbs", "ci_low", "ci_high", "n_turns", "n_tools"]].round(1)
        scale   pbs  ci_low  ci_high  n_turns  n_tools
    0   paper  92.1    81.8     96.7      600       12
    1  effect  62.4    56.6     68.3      600       12
    """
    by_cols, scale_name, shadow_weights, B, n_draws, level, gen = _check_tool_shadow_args(
        audit, by, scale, weights, cis, n_resamples, n_weight_draws, confidence_level, holdout, rng)
    rows = audit.rows
    if "similarity" in rows.columns:
        sim_all = pd.to_numeric(rows["similarity"], errors="coerce").to_numpy(float)
        sim_info = {"available": bool(np.isfinite(sim_all).any()), "source": "`similarity` column of the audit"}
    elif encoder is False:
        sim_all = np.full(len(rows), np.nan)
        sim_info = {"available": False, "reason": "encoder=False"}
    else:
        sim_all, sim_info = name_task_similarity(audit, encoder)
    groups = []
    grouped = [((), rows.index.to_numpy())] if not by_cols else \
        [(k if isinstance(k, tuple) else (k,), idx)
         for k, idx in rows.groupby(by_cols, sort=True, observed=True).indices.items()]
    for key, idx in grouped:
        keys = dict(zip(by_cols, key))
        g = rows.iloc[idx]
        groups.append(_score_group(g, sim_all[idx], keys, shadow_weights, B, n_draws, level, holdout, gen,
                                   sim_reason=None if sim_info.get("available") else sim_info.get("reason")))
    return ShadowResult(groups=tuple(groups), scale=scale_name, weights=shadow_weights, by=tuple(by_cols),
                        confidence_level=level, n_resamples=B, n_weight_draws=n_draws, holdout=holdout,
                        similarity=sim_info, n_excluded=dict(audit.n_excluded),
                        seed=rng if not isinstance(rng, np.random.Generator) else "Generator")


def _logistic(x):
    return 100.0 / (1.0 + np.exp(-np.asarray(x, dtype=float)))


def _score_group(g, sim, keys, weights, B, n_draws, level, holdout, gen, sim_reason=None):
    unit, units = pd.factorize(g["unit"])
    tool, tools = pd.factorize(g["tool_name"])
    G, J = len(units), len(tools)
    pos = g["position"].to_numpy(np.int64)
    ntools = g["n_tools"].to_numpy(np.int64)
    called = g["called"].to_numpy(np.int64)
    rel = g["relevant"].to_numpy(np.int64)
    dlen = g["desc_len"].to_numpy(float)
    tool_len = dict(zip(tool, dlen))
    if holdout is None or holdout >= 1:
        held = np.ones(G, bool)
    else:
        held = np.zeros(G, bool)
        held[gen.permutation(G)[:max(1, math.ceil(G * holdout))]] = True
    notes = []
    L = _domain_L_stratified(unit, pos, ntools, called, rel, tool, tool_len, G)
    r1 = rel == 1
    D = dm.domain_logit(called[r1], {"position": pos[r1], "desc_len": dlen[r1]}, unit[r1], G, target="desc_len")
    cols = {"relevant": rel, "desc_len": dlen}
    if np.all(np.isfinite(sim)):
        cols["similarity"] = sim
    elif np.isfinite(sim).any():
        notes.append("R: some turns have no task text, so name-task similarity is left out of R's model")
    cols["position"] = pos
    R = dm.domain_logit(called, cols, unit, G, target="position")
    S = dm.domain_S(unit, tool, called, rel, sim, held, G, J)
    if sim_reason and S.get("note"):
        S["note"] = f"no (task, tool-name) similarity ({sim_reason})"
    for name, fit in (("D", D), ("R", R)):
        if fit.get("dropped"):
            notes.append(f"{name}: constant covariate(s) left out of the model: {', '.join(fit['dropped'])}")

    point = {"L": (L["log_or"], L["z"], L["log_or"]),
             "D": (D["beta"], D["z"], D["beta"]),
             "S": (S["r"], S["z"], S["r"]),
             "R": (-R["beta"] if np.isfinite(R["beta"]) else np.nan, -R["z"] if np.isfinite(R["z"]) else np.nan,
                   -R["beta"] if np.isfinite(R["beta"]) else np.nan)}
    src_note = {"L": L.get("note"), "D": D.get("note"), "S": S.get("note"), "R": R.get("note")}
    available = {d: bool(np.isfinite(point[d][1])) for d in DOMAINS}
    for d in DOMAINS:
        if not available[d]:
            warnings.warn(f"TOOL-SHADOW domain {d} not computed for {keys or 'the audit'}: {src_note[d]}",
                          DegenerateDataWarning, stacklevel=3)
    base = np.array([weights.weights[d] for d in DOMAINS]) * np.array([available[d] for d in DOMAINS])
    w = base / base.sum() if base.sum() > 0 else base

    stat_b, z_b, eff_b = _bootstrap_domains(L, D, S, R, B, G, gen)
    domains = {}
    for i, d in enumerate(DOMAINS):
        st, z, e = point[d]
        ci = (lambda a: percentile_ci(a, level)) if B else (lambda a: ConfidenceInterval(np.nan, np.nan))
        n = {"L": L["n"], "D": D["n"], "S": S["n"], "R": R["n"]}[d]
        note = src_note[d]
        domains[d] = DomainScore(d, float(st), ci(stat_b[d]), float(z), ci(z_b[d]), float(e), ci(eff_b[d]), int(n),
                                 float(w[i]), weights.precision[d], available[d], note, z_b[d], eff_b[d])
    zs = np.array([domains[d].z if available[d] else 0.0 for d in DOMAINS])
    es = np.array([domains[d].effect if available[d] else 0.0 for d in DOMAINS])
    draws = draw_weights(weights, n_draws, gen, available={d for d in DOMAINS if available[d]}) if n_draws else None
    pbs = _pbs_scores(w, zs, es, z_b, eff_b, available, B, level, draws)
    n_turns = int(g["turn_id"].nunique())
    return ShadowGroup(keys=keys, n_turns=n_turns, n_units=G, n_tools=J, n_rows=len(g), domains=domains, pbs=pbs,
                       weights={d: float(w[i]) for i, d in enumerate(DOMAINS)}, notes=tuple(notes))


def _domain_L_stratified(unit, pos, ntools, called, rel, tool, tool_len, G):
    """Domain L within description-length strata: tertiles, else a median split, else unstratified (noted)."""
    strata_map = dm.length_strata(tool_len)
    n_strata = max(strata_map.values()) + 1
    stratum = np.array([strata_map[t] for t in tool], dtype=np.int64)

    L = dm.domain_L(unit, pos, ntools, called, rel, stratum, G, n_strata)
    for k, why in ((2, "a median split of description length (the tertiles left no stratum with both quartiles)"),
                   (1, ("no description-length stratification: no length stratum holds tools of both quartiles, "
                       "so L is not controlled for length here (D and R are)"))):
        if np.isfinite(L["z"]) or n_strata <= k:
            continue
        strata_map = dm.length_strata(tool_len, k) if k > 1 else dict.fromkeys(tool_len, 0)
        n_strata = max(strata_map.values()) + 1
        stratum = np.array([strata_map[t] for t in tool], dtype=np.int64)
        L = dm.domain_L(unit, pos, ntools, called, rel, stratum, G, n_strata)
        if np.isfinite(L["z"]):
            L["note"] = "; ".join(x for x in ("stratified by " + why if k > 1 else why, L["note"]) if x)
    return L


def _bootstrap_domains(L, D, S, R, B, G, gen):
    """Bootstrap replicates of every domain's statistic, z and effect, with one set of unit weights for all."""
    stat_b = {d: np.full(B, np.nan) for d in DOMAINS}
    z_b = {d: np.full(B, np.nan) for d in DOMAINS}
    eff_b = {d: np.full(B, np.nan) for d in DOMAINS}
    if B:
        targets = [np.ones((G, 1)), L["tables"], S["called_rel"], S["rel"], S["sim_rel"]]
        fits = [f for f in (D, R) if "score" in f]
        for f in fits:
            targets += [f["score"], f["hess"], f["outer"]]
        out = resampled_counts(targets, B, gen)
        n_b = out[0][:, 0]
        lor, lse = dm.mh_logor(out[1])
        stat_b["L"], eff_b["L"] = lor, lor
        with np.errstate(invalid="ignore", divide="ignore"):
            z_b["L"] = lor / lse
        r_b, k_b = dm.tool_correlation(out[2], out[3], out[4])
        stat_b["S"] = r_b
        with np.errstate(invalid="ignore"):
            z_b["S"] = np.arctanh(np.clip(r_b, -0.999999, 0.999999)) * np.sqrt(np.maximum(k_b - 3, 0))
        eff_b["S"] = r_b
        k = 5
        for f in fits:
            beta_b, zz = dm.logit_replicates(f, out[k], out[k + 1], out[k + 2], n_b)
            k += 3
            d = "D" if f is D else "R"
            sign = 1.0 if d == "D" else -1.0
            stat_b[d], z_b[d], eff_b[d] = sign * beta_b, sign * zz, sign * beta_b
    return stat_b, z_b, eff_b


def _pbs_scores(w, zs, es, z_b, eff_b, available, B, level, draws):
    """The PBS on both scales with its bootstrap interval and its weight-sensitivity band."""
    pbs = {}
    alpha = (1 - level) / 2
    for sc, vec, boot in (("paper", zs, z_b), ("effect", es, eff_b)):
        est = float(_logistic(w @ vec)) if w.sum() > 0 else np.nan
        if B and w.sum() > 0:
            mat = np.column_stack([np.where(available[d], boot[d], 0.0) for d in DOMAINS])
            dist = _logistic(mat @ w)
            pci = percentile_ci(dist, level)
        else:
            dist, pci = None, ConfidenceInterval(np.nan, np.nan)
        if draws is not None and w.sum() > 0:
            band = _logistic(draws @ vec)
            sens = ConfidenceInterval(*np.quantile(band, [alpha, 1 - alpha]))
        else:
            sens = ConfidenceInterval(np.nan, np.nan)
        pbs[sc] = PBSScore(sc, est, pci, sens, dist)
    return pbs
