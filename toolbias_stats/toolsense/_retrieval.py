"""Retrieval recall Rc@k / Rf@k and the Internalization Score IS@k, with bootstrap, Fieller and delta intervals.

Pure functions of a benchmark and prediction frames (see :mod:`._io`); nothing is read or written here.
"""

from __future__ import annotations

import warnings
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, overload

import numpy as np
import numpy.typing as npt
import pandas as pd
from scipy import special

from .._display import ReprHTMLMixin
from .._json import finite as _num
from .._resampling import BOOTSTRAP_CI_METHODS, ConfidenceInterval, bca_ci, percentile_ci, query_weights
from .._validation import check_choice, check_confidence_level, check_n_resamples, check_rng
from ..exceptions import DegenerateDataWarning
from ._io import TIERS, _as_ks, read_rrb  # noqa: F401  (read_rrb: doctest)

if TYPE_CHECKING:
    from ._io import RRBBenchmark

__all__ = ["retrieval_recall", "RetrievalResult", "RecallEstimate", "ISEstimate", "compare_configurations",
           "ComparisonResult", "fieller_ratio_ci", "delta_ratio_ci", "internalization_score", "DECODINGS"]

DECODINGS = ("constrained", "free")
_NAN_CI = ConfidenceInterval(np.nan, np.nan)
ALL = "all"


def _ci_json(ci):
    lo, hi = _num(ci[0]), _num(ci[1])
    return None if lo is None and hi is None else [lo, hi]


@overload
def internalization_score(rf: float, rc: float) -> float:
    ...


@overload
def internalization_score(rf: npt.ArrayLike, rc: npt.ArrayLike) -> float | np.ndarray:
    ...


def internalization_score(rf: npt.ArrayLike, rc: npt.ArrayLike) -> float | np.ndarray:
    """IS = Rf / Rc, and 0 where Rc = 0 (the paper's Eq. 2); works elementwise on arrays.

    Parameters
    ----------
    rf : float or array_like
        Free-decoding recall Rf@k.
    rc : float or array_like
        Constrained-decoding recall Rc@k (same shape, or broadcastable).

    Returns
    -------
    float or numpy.ndarray
        A float for scalar input, else an array of the broadcast shape.

    Examples
    --------
    >>> internalization_score(0.3, 0.4)
    0.7499999999999999
    >>> internalization_score(0.0, 0.0)
    0.0
    """
    rf = np.asarray(rf, dtype=float)
    rc = np.asarray(rc, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.where(rc > 0, rf / np.where(rc > 0, rc, 1.0), 0.0)
    return float(out) if out.ndim == 0 else out


def fieller_ratio_ci(mean_f: float, mean_c: float, var_f: float, var_c: float, cov_fc: float,
                     confidence_level: float = 0.95) -> ConfidenceInterval:
    """Fieller's interval for the ratio ``mean_f / mean_c`` of two (correlated) asymptotically normal means.

    Parameters
    ----------
    mean_f, mean_c : float
        The estimated numerator and denominator (here Rf@k and Rc@k).
    var_f, var_c, cov_fc : float
        Their estimated variances and covariance (variances of the means, not of single queries).
    confidence_level : float

    Returns
    -------
    ConfidenceInterval
        The set ``{theta : (mean_f - theta mean_c)^2 <= z^2 (var_f - 2 theta cov_fc + theta^2 var_c)}``,
        cut at 0 from below (a ratio of recalls is not negative). When the denominator is not significantly
        different from 0 at this level (``mean_c^2 <= z^2 var_c``) the set is unbounded and
        ``(low, inf)`` or ``(0, inf)`` is returned (:func:`retrieval_recall` also returns ``(0, inf)`` when no
        query has a constrained hit).

    Notes
    -----
    Fieller (1954); the interval inverts the test of ``mean_f - theta mean_c = 0``, whose statistic is
    exactly normal for fixed theta under the normal approximation of the two means, so it does not
    rely on a linearisation of the ratio (unlike the delta method) and is not symmetric around the
    estimate.

    Examples
    --------
    >>> lo, hi = fieller_ratio_ci(0.3, 0.4, 0.0004, 0.0005, 0.0003)
    >>> round(lo, 4), round(hi, 4)
    (0.6768, 0.8268)
    """
    z = special.ndtri(0.5 + confidence_level / 2)
    z2 = z * z
    a = mean_c**2 - z2 * var_c
    b = -2.0 * (mean_f * mean_c - z2 * cov_fc)
    c = mean_f**2 - z2 * var_f
    if not all(np.isfinite([a, b, c])):
        return _NAN_CI
    disc = b * b - 4 * a * c
    if a > 0 and disc >= 0:
        r = np.sqrt(disc)
        lo, hi = (-b - r) / (2 * a), (-b + r) / (2 * a)
        return ConfidenceInterval(max(lo, 0.0), max(hi, 0.0))
    if a > 0:  # cannot happen with a positive semi-definite covariance; guard against rounding
        return _NAN_CI
    # denominator indistinguishable from 0: the confidence set is unbounded
    if disc > 0 and a < 0:
        # complement of a bounded interval: (-inf, r1] U [r2, inf); keep the part above 0
        r = np.sqrt(disc)
        r1, r2 = sorted(((-b - r) / (2 * a), (-b + r) / (2 * a)))
        return ConfidenceInterval(0.0 if r1 >= 0 else max(r2, 0.0), np.inf)
    return ConfidenceInterval(0.0, np.inf)


def delta_ratio_ci(is_hat: float, rf: float, rc: float, ci_f: Sequence[float], ci_c: Sequence[float],
                   confidence_level: float = 0.95) -> ConfidenceInterval:
    """The paper's delta-method interval for IS (Appendix G), for comparison.

    ``sigma_x`` is the half-width of the bootstrap interval of ``R_x`` divided by ``z`` (1.96 at 95%),
    ``sigma_IS = IS * sqrt((sigma_f/Rf)^2 + (sigma_c/Rc)^2)`` (written as ``sqrt(sigma_f^2 + IS^2 sigma_c^2)/Rc``,
    its limit when Rf = 0), and the interval ``IS +- z sigma_IS`` clipped to [0, 1]. Undefined (NaN) when
    Rc = 0.

    Parameters
    ----------
    is_hat : float
        The estimate ``Rf / Rc``.
    rf, rc : float
        Free and constrained recall (``rf`` is kept for the paper's signature; the formula uses ``is_hat``).
    ci_f, ci_c : (float, float)
        Bootstrap intervals of Rf and Rc.
    confidence_level : float, default 0.95
        The level of ``ci_f`` and ``ci_c`` and of the returned interval.

    Returns
    -------
    ConfidenceInterval
        ``(nan, nan)`` when ``rc`` is not positive or an interval bound is not finite.

    Examples
    --------
    >>> lo, hi = delta_ratio_ci(0.75, 0.3, 0.4, (0.26, 0.34), (0.36, 0.44))
    >>> round(lo, 4), round(hi, 4)
    (0.625, 0.875)
    """
    z = special.ndtri(0.5 + confidence_level / 2)
    if not rc > 0 or not np.all(np.isfinite(list(ci_f) + list(ci_c))):
        return _NAN_CI
    sf = (ci_f[1] - ci_f[0]) / (2 * z)
    sc = (ci_c[1] - ci_c[0]) / (2 * z)
    s = np.sqrt(sf**2 + (is_hat * sc) ** 2) / rc
    return ConfidenceInterval(min(max(is_hat - z * s, 0.0), 1.0), min(max(is_hat + z * s, 0.0), 1.0))


@dataclass(frozen=True)
class RecallEstimate:
    """Rc@k or Rf@k of one configuration and tier.

    Attributes
    ----------
    estimate : float
        Share of queries whose top-k list contains at least one correct tool.
    hits : int
    n : int
    ci : ConfidenceInterval
        Query-bootstrap interval by ``ci_method`` (BCa by default).
    ci_percentile, ci_bca : ConfidenceInterval
    standard_error : float
        Bootstrap standard error.

    Examples
    --------
    Ranking each query's candidate pool in file order (the file lists the anchor tool first):

    >>> import pandas as pd
    >>> rrb = read_rrb()
    >>> q = rrb.queries
    >>> in_order = pd.DataFrame({"sample_id": q["sample_id"], "constrained": q["pool"],
    ...                          "free": [p[1:] for p in q["pool"]]})
    >>> res = retrieval_recall(rrb, in_order, k=[1, 5], n_resamples=200, rng=0)
    >>> rc = res.estimates[("model", "all", 1)]["rc"]
    >>> rc.hits, rc.n, rc.estimate, rc.ci.low < rc.estimate < rc.ci.high
    (413, 500, 0.826, True)
    """

    estimate: float
    hits: int
    n: int
    ci: ConfidenceInterval = _NAN_CI
    ci_percentile: ConfidenceInterval = _NAN_CI
    ci_bca: ConfidenceInterval = _NAN_CI
    standard_error: float = np.nan

    def to_dict(self) -> dict:
        return {"estimate": _num(self.estimate), "ci": _ci_json(self.ci), "hits": int(self.hits), "n": int(self.n),
                "ci_percentile": _ci_json(self.ci_percentile), "ci_bca": _ci_json(self.ci_bca),
                "standard_error": _num(self.standard_error)}


@dataclass(frozen=True)
class ISEstimate:
    """IS@k = Rf@k / Rc@k (0 when Rc@k = 0) with four intervals.

    Attributes
    ----------
    estimate : float
    ci : ConfidenceInterval
        The recommended interval (Fieller; see the coverage table in docs/guide/toolsense_overview.md).
    ci_fieller : ConfidenceInterval
        Fieller's interval with the (tier-stratified) variances and covariance of the per-query hits.
    ci_bootstrap : ConfidenceInterval
        Percentile interval of the ratio recomputed in each query-bootstrap replicate.
    ci_bca : ConfidenceInterval
        BCa interval of the same replicates.
    ci_delta : ConfidenceInterval
        The paper's delta-method interval (Appendix G), for comparison only.

    Examples
    --------
    >>> import pandas as pd
    >>> rrb = read_rrb()
    >>> q = rrb.queries
    >>> in_order = pd.DataFrame({"sample_id": q["sample_id"], "constrained": q["pool"],
    ...                          "free": [p[1:] for p in q["pool"]]})
    >>> res = retrieval_recall(rrb, in_order, k=[1, 5], n_resamples=200, rng=0)
    >>> est = res.estimates[("model", "all", 1)]
    >>> is_ = est["is"]
    >>> round(is_.estimate, 4) == round(est["rf"].estimate / est["rc"].estimate, 4), is_.ci == is_.ci_fieller
    (True, True)
    >>> [round(x, 3) for x in is_.ci_fieller]
    [0.238, 0.32]
    """

    estimate: float
    ci: ConfidenceInterval = _NAN_CI
    ci_fieller: ConfidenceInterval = _NAN_CI
    ci_bootstrap: ConfidenceInterval = _NAN_CI
    ci_bca: ConfidenceInterval = _NAN_CI
    ci_delta: ConfidenceInterval = _NAN_CI

    def to_dict(self) -> dict:
        return {"estimate": _num(self.estimate), "ci": _ci_json(self.ci), "ci_fieller": _ci_json(self.ci_fieller),
                "ci_bootstrap": _ci_json(self.ci_bootstrap), "ci_bca": _ci_json(self.ci_bca),
                "ci_delta": _ci_json(self.ci_delta)}


@dataclass(frozen=True, eq=False)
class RetrievalResult(ReprHTMLMixin):
    """Result of :func:`retrieval_recall`.

    Attributes
    ----------
    table : pandas.DataFrame
        One row per configuration, tier (``easy``, ``medium``, ``hard``, ``all``) and k with
        ``rc``, ``rf``, ``is`` estimates and every interval as ``<metric>_<method>_low/high`` (unrounded).
    estimates : dict
        ``{(config, tier, k): {"rc": RecallEstimate|None, "rf": RecallEstimate|None, "is": ISEstimate|None}}``.
    configs : list of str
    ks : list of int
    invalid : dict
        Per configuration and decoding: ``{"names", "invalid", "rate", "queries_with_invalid"}``: predicted
        names that are not tools of the catalog (counted as misses, never dropped).
    hits : dict
        ``{config: {decoding: bool array (n_queries, len(ks))}}`` per-query hit indicators (query order of
        ``query_ids``), kept for paired comparisons.
    query_ids, tiers : numpy.ndarray
    replicates : dict
        ``{config: {decoding: array (n_resamples, 4, len(ks))}}`` bootstrap recalls (tiers easy, medium, hard,
        all), drawn with the same query weights for every configuration (so differences are paired).
    n_resamples, confidence_level, ci_method, seed
    resample : str
        ``"query, stratified by tier"``.
    warnings : list of str

    Examples
    --------
    >>> import pandas as pd
    >>> rrb = read_rrb()
    >>> q = rrb.queries
    >>> in_order = pd.DataFrame({"sample_id": q["sample_id"], "constrained": q["pool"],
    ...                          "free": [p[1:] for p in q["pool"]]})
    >>> res = retrieval_recall(rrb, in_order, k=[1, 5], n_resamples=200, rng=0)
    >>> res.to_frame().query("tier == 'all'")[["config", "k", "rc", "rf", "is"]].round(3)
      config  k     rc     rf     is
    6  model  1  0.826  0.230  0.278
    7  model  5  0.952  0.572  0.601
    >>> res.to_dict()["rows"][0]["tier"], res.invalid["model"]["constrained"]["invalid"]
    ('easy', 0)
    """

    table: pd.DataFrame
    estimates: dict
    configs: list
    ks: list
    invalid: dict
    hits: dict = field(repr=False)
    query_ids: np.ndarray = field(repr=False)
    tiers: np.ndarray = field(repr=False)
    replicates: dict = field(repr=False)
    n_resamples: int = 2000
    confidence_level: float = 0.95
    ci_method: str = "bca"
    resample: str = "query, stratified by tier"
    warnings: list = field(default_factory=list)

    def to_frame(self) -> pd.DataFrame:
        """Tidy, unrounded table (one row per configuration, tier and k)."""
        return self.table.copy()

    def rows(self, config: str | None = None) -> list[dict[str, Any]]:
        """The documented ``rows`` of ``toolsense score --json`` for one configuration.

        Parameters
        ----------
        config : str, optional
            Default: the first configuration.

        Returns
        -------
        list of dict
            One per tier (easy, medium, hard, all) and k.
        """
        config = self.configs[0] if config is None else config
        out = []
        for tier in (*TIERS, ALL):
            for k in self.ks:
                e = self.estimates[(config, tier, k)]
                out.append({"tier": tier, "k": int(k), "n": int(e["n"]),
                            **{m: (None if e[m] is None else e[m].to_dict()) for m in ("rc", "rf", "is")}})
        return out

    def to_dict(self) -> dict:
        """JSON-ready dict: settings, ``rows`` and ``invalid`` (per configuration when there are several)."""
        base = {"ks": [int(k) for k in self.ks], "n_resamples": self.n_resamples,
                "confidence_level": self.confidence_level, "ci_method": self.ci_method, "resample": self.resample,
                "is_interval": "fieller", "warnings": list(self.warnings)}
        if len(self.configs) == 1:
            c = self.configs[0]
            return {**base, "rows": self.rows(c), "invalid": self.invalid[c]}
        return {**base, "configurations": [{"name": c, "rows": self.rows(c), "invalid": self.invalid[c]}
                                           for c in self.configs]}


def _hit_matrix(answers, lists, ks, valid):
    """Per query: hit within top-k for each k, plus invalid-name counts."""
    ranks = np.full(len(answers), np.inf)
    n_names = n_invalid = q_invalid = 0
    for i, (ans, lst) in enumerate(zip(answers, lists)):
        ans = set(ans)
        bad = 0
        for r, name in enumerate(lst, start=1):
            if name not in valid:
                bad += 1
            elif np.isinf(ranks[i]) and name in ans:
                ranks[i] = r
        n_names += len(lst)
        n_invalid += bad
        q_invalid += bad > 0
    hits = ranks[:, None] <= np.asarray(ks)[None, :]
    return hits, {"names": int(n_names), "invalid": int(n_invalid),
                  "rate": (n_invalid / n_names) if n_names else None, "queries_with_invalid": int(q_invalid)}


def retrieval_recall(benchmark: RRBBenchmark, predictions: pd.DataFrame | Mapping[str, pd.DataFrame], *,
                     k: int | Sequence[int] = (1, 5, 10, 50), catalog: Collection[str] | None = None,
                     n_resamples: int = 2000, confidence_level: float = 0.95,
                     ci_method: Literal["bca", "percentile"] = "bca",
                     rng: np.random.Generator | int | None = None) -> RetrievalResult:
    """Constrained and free Recall@k and the Internalization Score per tier, with intervals.

    Parameters
    ----------
    benchmark : RRBBenchmark
        From :func:`read_rrb`.
    predictions : pandas.DataFrame or dict of str to DataFrame
        From :func:`read_rrb_predictions`; a dict scores several configurations on the same queries with the
        same bootstrap replicates (paired, see :func:`compare_configurations`).
    k : int or sequence of int, default (1, 5, 10, 50)
    catalog : collection of str, optional
        Valid tool names. Default: every tool of the benchmark file. Other names count as misses and are
        reported in ``invalid``.
    n_resamples : int, default 2000
        Query-bootstrap replicates (0: no bootstrap; the Fieller interval is still computed).
    confidence_level : float, default 0.95
    ci_method : {"bca", "percentile"}, default "bca"
        Interval reported as ``ci`` of the recalls.
    rng : None, int or numpy.random.Generator

    Returns
    -------
    RetrievalResult

    Notes
    -----
    ``Rc@k = 1/|Q| sum_q 1[A(q) ∩ Â_c(q, k) ≠ ∅]`` and likewise Rf@k with the free-decoding list (paper §3.3);
    ``IS@k = Rf@k / Rc@k`` and 0 when Rc@k = 0 (Eq. 2). The bootstrap resamples queries within each tier
    (the tiers are design strata of fixed size); the ``all`` row is the mean over all queries. IS intervals:
    Fieller's (``ci``), the bootstrap of the ratio (percentile and BCa) and the paper's delta method
    (``ci_delta``, shown for comparison; it fails at low Rc and near IS = 1; docs/guide/toolsense_overview.md).

    Examples
    --------
    >>> import pandas as pd
    >>> rrb = read_rrb()
    >>> q = rrb.queries
    >>> preds = pd.DataFrame({"sample_id": q["sample_id"], "constrained": q["pool"],
    ...                       "free": [p[1:] for p in q["pool"]]})
    >>> res = retrieval_recall(rrb, preds, k=[1], n_resamples=0)
    >>> round(res.estimates[("model", "easy", 1)]["rc"].estimate, 3)    # the file's pool order leaks the anchor
    0.982
    """
    ks = _as_ks(k)
    confidence_level = check_confidence_level(confidence_level)
    n_resamples = check_n_resamples(n_resamples)
    check_choice("ci_method", ci_method, BOOTSTRAP_CI_METHODS)
    gen = check_rng(rng)
    preds = {"model": predictions} if isinstance(predictions, pd.DataFrame) else dict(predictions)
    if not preds:
        raise ValueError("`predictions` must hold at least one configuration.")
    valid = frozenset(catalog) if catalog is not None else benchmark.tool_names()
    q = benchmark.queries
    qids = q["sample_id"].to_numpy()
    tiers = q["tier"].astype(str).to_numpy()
    answers = q["answers"].tolist()
    warns = []
    hits, invalid = _all_hits(preds, qids, answers, ks, valid)
    tier_index = {t: np.flatnonzero(tiers == t) for t in TIERS}
    groups = [(t, tier_index[t]) for t in TIERS] + [(ALL, np.arange(len(qids)))]
    # one set of query weights per tier, shared by every configuration and decoding (paired replicates)
    weights = {t: query_weights(len(ix), n_resamples, gen) if len(ix) and n_resamples else None
               for t, ix in tier_index.items()}
    replicates = {name: _replicates(hits[name], tier_index, weights, n_resamples, ks, len(qids)) for name in preds}
    estimates, records = _all_estimates(preds, groups, ks, hits, replicates, tiers, n_resamples, confidence_level,
                                        ci_method)
    for name in preds:
        for dec in DECODINGS:
            inv = invalid[name][dec]
            if inv and inv["invalid"]:
                warns.append(f"{name}: {inv['invalid']} of {inv['names']} {dec} names are not tools of the catalog "
                             "(counted as misses)")
    return RetrievalResult(table=pd.DataFrame.from_records(records), estimates=estimates, configs=list(preds), ks=ks,
                           invalid=invalid, hits=hits, query_ids=qids, tiers=tiers, replicates=replicates,
                           n_resamples=n_resamples, confidence_level=confidence_level, ci_method=ci_method,
                           warnings=warns)


def _all_hits(preds, qids, answers, ks, valid):
    """Hit matrices and invalid-name counts of every configuration and decoding (None where absent)."""
    hits, invalid = {}, {}
    for name, df in preds.items():
        if not isinstance(df, pd.DataFrame) or "sample_id" not in df.columns:
            raise ValueError(f"predictions of {name!r} must be a DataFrame with a `sample_id` column.")
        aligned = df.set_index("sample_id").reindex(qids)
        if aligned.index.has_duplicates or len(df) != len(set(df["sample_id"])):
            raise ValueError(f"predictions of {name!r} have duplicate sample_id values.")
        hits[name], invalid[name] = {}, {}
        for dec in DECODINGS:
            col = aligned[dec] if dec in aligned.columns else pd.Series([None] * len(qids))
            present = col.notna().to_numpy()
            if not present.any():
                hits[name][dec], invalid[name][dec] = None, None
                continue
            if not present.all():
                raise ValueError(f"predictions of {name!r}: decoding {dec!r} is missing for "
                                 f"{int((~present).sum())} benchmark queries.")
            h, inv = _hit_matrix(answers, col.tolist(), ks, valid)
            hits[name][dec], invalid[name][dec] = h, inv
        if all(v is None for v in hits[name].values()):
            raise ValueError(f"predictions of {name!r} have neither a `constrained` nor a `free` list.")
    return hits, invalid


def _replicates(hits, tier_index, weights, n_resamples, ks, n_queries):
    """Bootstrap recalls of one configuration per decoding: (replicates, 3 tiers + all, k); None where absent."""
    out = {}
    for dec in DECODINGS:
        h = hits[dec]
        if h is None:
            out[dec] = None
            continue
        rep = np.full((n_resamples, 4, len(ks)), np.nan)
        total = np.zeros((n_resamples, len(ks)))
        for j, t in enumerate(TIERS):
            ix = tier_index[t]
            if weights[t] is None:
                continue
            counts = weights[t] @ h[ix].astype(float)
            rep[:, j] = counts / len(ix)
            total += counts
        rep[:, 3] = total / n_queries
        out[dec] = rep
    return out


def _all_estimates(preds, groups, ks, hits, replicates, tiers, n_resamples, confidence_level, ci_method):
    """Rc, Rf and IS estimates per configuration, tier and k: (``{(name, tier, k): estimate}``, table records)."""
    estimates, records = {}, []
    for name in preds:
        for gi, (tier, ix) in enumerate(groups):
            n = len(ix)
            for ki, kk in enumerate(ks):
                est = {"n": n}
                for dec, key in (("constrained", "rc"), ("free", "rf")):
                    h = hits[name][dec]
                    if h is None or n == 0:
                        est[key] = None
                        continue
                    x = h[ix, ki].astype(float)
                    rep = replicates[name][dec]
                    est[key] = _recall_estimate(x, None if rep is None or not n_resamples else rep[:, gi, ki],
                                                confidence_level, ci_method)
                est["is"] = None
                if est.get("rc") is not None and est.get("rf") is not None:
                    est["is"] = _is_estimate(hits[name]["free"][:, ki], hits[name]["constrained"][:, ki], tiers, ix,
                                             est["rf"], est["rc"],
                                             None if not n_resamples else replicates[name]["free"][:, gi, ki],
                                             None if not n_resamples else replicates[name]["constrained"][:, gi, ki],
                                             confidence_level)
                estimates[(name, tier, kk)] = est
                records.append(_record(name, tier, kk, est))
    return estimates, records


def _recall_estimate(x, rep, level, method) -> RecallEstimate:
    n = x.size
    m = float(x.mean())
    if rep is None:
        return RecallEstimate(estimate=m, hits=int(x.sum()), n=n)
    jack = (x.sum() - x) / (n - 1) if n > 1 else np.array([m])
    pct = percentile_ci(rep, level)
    bca = bca_ci(rep, m, jack, level)
    return RecallEstimate(estimate=m, hits=int(x.sum()), n=n, ci=bca if method == "bca" else pct, ci_percentile=pct,
                          ci_bca=bca, standard_error=float(np.std(rep, ddof=1)) if rep.size > 1 else np.nan)


def _stratified_moments(f, c, tiers, ix):
    """Means, variances of the means and covariance of (f, c) over queries ``ix``, stratified by tier."""
    n = len(ix)
    vf = vc = cfc = 0.0
    for t in TIERS:
        sub = ix[tiers[ix] == t]
        nt = len(sub)
        if nt < 2:
            continue
        ft, ct = f[sub].astype(float), c[sub].astype(float)
        w = nt / n
        vf += w**2 * ft.var(ddof=1) / nt
        vc += w**2 * ct.var(ddof=1) / nt
        cfc += w**2 * np.cov(ft, ct, ddof=1)[0, 1] / nt
    return float(f[ix].mean()), float(c[ix].mean()), vf, vc, cfc


def _is_estimate(f, c, tiers, ix, rf_est, rc_est, rep_f, rep_c, level) -> ISEstimate:
    mf, mc, vf, vc, cfc = _stratified_moments(f, c, tiers, ix)
    is_hat = internalization_score(mf, mc)
    # Rc = 0 observed: the data say nothing about the ratio, and the honest confidence set is [0, inf)
    fieller = fieller_ratio_ci(mf, mc, vf, vc, cfc, level) if mc > 0 else ConfidenceInterval(0.0, np.inf)
    if rep_f is None:
        return ISEstimate(estimate=is_hat, ci=fieller, ci_fieller=fieller)
    rep = internalization_score(rep_f, rep_c)
    fs, cs = f[ix].astype(float), c[ix].astype(float)
    with np.errstate(divide="ignore", invalid="ignore"):
        jack = internalization_score(fs.sum() - fs, cs.sum() - cs)
    boot = percentile_ci(rep, level)
    bca = bca_ci(rep, is_hat, jack, level)
    delta = delta_ratio_ci(is_hat, mf, mc, rf_est.ci_percentile, rc_est.ci_percentile, level)
    return ISEstimate(estimate=is_hat, ci=fieller, ci_fieller=fieller, ci_bootstrap=boot, ci_bca=bca, ci_delta=delta)


def _record(name, tier, k, est) -> dict:
    out = {"config": name, "tier": tier, "k": k, "n": est["n"]}
    for key in ("rc", "rf"):
        e = est[key]
        out[key] = np.nan if e is None else e.estimate
        out[f"{key}_hits"] = np.nan if e is None else e.hits
        for meth, attr in (("", "ci"), ("_percentile", "ci_percentile"), ("_bca", "ci_bca")):
            ci = _NAN_CI if e is None else getattr(e, attr)
            out[f"{key}{meth}_low"], out[f"{key}{meth}_high"] = ci
        out[f"{key}_se"] = np.nan if e is None else e.standard_error
    e = est["is"]
    out["is"] = np.nan if e is None else e.estimate
    for meth in ("fieller", "bootstrap", "bca", "delta"):
        ci = _NAN_CI if e is None else getattr(e, f"ci_{meth}")
        out[f"is_{meth}_low"], out[f"is_{meth}_high"] = ci
    return out


# -- paired comparisons ------------------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class ComparisonResult(ReprHTMLMixin):
    """Result of :func:`compare_configurations`.

    Attributes
    ----------
    table : pandas.DataFrame
        One row per comparison: ``config_a, config_b, metric, tier, k, n, recall_a, recall_b, difference,
        ci_low, ci_high`` (paired query-bootstrap percentile interval of ``recall_a - recall_b``), ``only_a``,
        ``only_b`` (discordant queries), ``p_mcnemar`` (exact), ``p_holm`` (Holm over all rows).
    confidence_level : float

    Examples
    --------
    See :func:`compare_configurations`:

    >>> import pandas as pd
    >>> rrb = read_rrb()
    >>> q = rrb.queries
    >>> preds = {"in_order": pd.DataFrame({"sample_id": q["sample_id"], "constrained": q["pool"], "free": None}),
    ...          "reversed": pd.DataFrame({"sample_id": q["sample_id"], "constrained": [p[::-1] for p in q["pool"]],
    ...                                    "free": None})}
    >>> cmp = compare_configurations(retrieval_recall(rrb, preds, k=1, n_resamples=200, rng=0))
    >>> cmp.to_dict()["comparisons"][0]["only_a"], cmp.to_dict()["comparisons"][0]["only_b"]
    (383, 16)
    """

    table: pd.DataFrame
    confidence_level: float

    def to_frame(self) -> pd.DataFrame:
        return self.table.copy()

    def to_dict(self) -> dict:
        """JSON-ready mapping: ``confidence_level`` and ``comparisons`` (one record per row of the table)."""
        return {"confidence_level": self.confidence_level,
                "comparisons": [{k: (_num(v) if isinstance(v, (float, np.floating)) else
                                     int(v) if isinstance(v, (np.integer,)) else v) for k, v in r.items()}
                                for r in self.table.to_dict(orient="records")]}


def compare_configurations(result: RetrievalResult, *, pairs: Sequence[tuple[str, str]] | None = None,
                           metric: Literal["rc", "rf"] = "rc", k: int | Sequence[int] | None = None,
                           tier: str | Sequence[str] = "all") -> ComparisonResult:
    """Paired comparisons of configurations scored on the same queries: recall difference, McNemar, Holm.

    Parameters
    ----------
    result : RetrievalResult
        From :func:`retrieval_recall` with a dict of configurations.
    pairs : sequence of (str, str), optional
        Default: every pair, in the order of ``result.configs``.
    metric : {"rc", "rf"}, default "rc"
    k : int or sequence of int, optional
        Default: every k of the result.
    tier : str or sequence of str, default "all"

    Returns
    -------
    ComparisonResult

    Notes
    -----
    The interval of ``recall_a - recall_b`` is the percentile interval of the differences of the two
    configurations' replicates, which share the query weights (paired bootstrap, stratified by tier). The
    exact McNemar test (``statsmodels.stats.contingency_tables.mcnemar(exact=True)``) uses the discordant
    queries; Holm's step-down adjustment (as ``statsmodels.stats.multitest.multipletests``) runs over every
    row of the table.

    Examples
    --------
    The pool in file order (anchor first) against the same pool reversed, on the same queries and replicates:

    >>> import pandas as pd
    >>> rrb = read_rrb()
    >>> q = rrb.queries
    >>> preds = {"in_order": pd.DataFrame({"sample_id": q["sample_id"], "constrained": q["pool"], "free": None}),
    ...          "reversed": pd.DataFrame({"sample_id": q["sample_id"], "constrained": [p[::-1] for p in q["pool"]],
    ...                                    "free": None})}
    >>> res = retrieval_recall(rrb, preds, k=[1, 5], n_resamples=200, rng=0)
    >>> cmp = compare_configurations(res, k=1, tier=["easy", "all"])
    >>> cmp.to_frame()[["config_a", "config_b", "tier", "recall_a", "recall_b", "only_a", "only_b"]].round(3)
       config_a  config_b  tier  recall_a  recall_b  only_a  only_b
    0  in_order  reversed  easy     0.982     0.000     164       0
    1  in_order  reversed   all     0.826     0.092     383      16
    """
    from statsmodels.stats.contingency_tables import mcnemar

    from .._multitest import holm_adjusted

    check_choice("metric", metric, ("rc", "rf"))
    dec = "constrained" if metric == "rc" else "free"
    ks = result.ks if k is None else _as_ks(k)
    for kk in ks:
        if kk not in result.ks:
            raise ValueError(f"`k` must be among the result's k {result.ks}; got {kk!r} instead.")
    tiers = [tier] if isinstance(tier, str) else list(tier)
    for t in tiers:
        check_choice("tier", t, (*TIERS, ALL))
    if pairs is None:
        pairs = [(a, b) for i, a in enumerate(result.configs) for b in result.configs[i + 1:]]
    rows = []
    level = result.confidence_level
    for a, b in pairs:
        for name in (a, b):
            if name not in result.configs:
                raise ValueError(f"configuration {name!r} is not in the result {result.configs}.")
            if result.hits[name][dec] is None:
                raise ValueError(f"configuration {name!r} has no {dec} predictions (metric {metric!r}).")
        for t in tiers:
            gi = (*TIERS, ALL).index(t)
            ix = np.arange(len(result.tiers)) if t == ALL else np.flatnonzero(result.tiers == t)
            for kk in ks:
                ki = result.ks.index(kk)
                ha = result.hits[a][dec][ix, ki]
                hb = result.hits[b][dec][ix, ki]
                only_a = int(np.sum(ha & ~hb))
                only_b = int(np.sum(~ha & hb))
                table = [[int(np.sum(ha & hb)), only_a], [only_b, int(np.sum(~ha & ~hb))]]
                p = float(mcnemar(table, exact=True).pvalue) if only_a + only_b else 1.0
                ci = _NAN_CI
                if result.n_resamples:
                    d = result.replicates[a][dec][:, gi, ki] - result.replicates[b][dec][:, gi, ki]
                    ci = percentile_ci(d, level)
                rows.append({"config_a": a, "config_b": b, "metric": metric, "tier": t, "k": kk, "n": len(ix),
                             "recall_a": float(ha.mean()), "recall_b": float(hb.mean()),
                             "difference": float(ha.mean() - hb.mean()), "ci_low": ci[0], "ci_high": ci[1],
                             "only_a": only_a, "only_b": only_b, "p_mcnemar": p})
    df = pd.DataFrame(rows)
    if len(df):
        df["p_holm"] = holm_adjusted(df["p_mcnemar"].to_numpy())
    else:
        warnings.warn("no comparisons to make (fewer than two configurations)", DegenerateDataWarning, stacklevel=2)
        df["p_holm"] = []
    return ComparisonResult(table=df, confidence_level=level)
