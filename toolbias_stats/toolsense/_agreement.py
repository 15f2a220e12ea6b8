"""Inter-annotator agreement: Fleiss' kappa, Gwet's AC1 and Krippendorff's alpha, with item-bootstrap intervals."""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
import pandas as pd

from .._display import ReprHTMLMixin
from .._resampling import BOOTSTRAP_CI_METHODS, ConfidenceInterval, bca_ci, percentile_ci, query_weights
from .._validation import check_choice, check_confidence_level, check_n_resamples, check_rng
from ..exceptions import DegenerateDataWarning, ExcludedRowsWarning
from ._retrieval import _ci_json, _num

__all__ = ["agreement", "AgreementResult", "agreement_coefficients", "count_table"]

_NAN_CI = ConfidenceInterval(np.nan, np.nan)
COEFFICIENTS = ("fleiss_kappa", "gwet_ac1", "krippendorff_alpha")


def count_table(annotations: pd.DataFrame):
    """Items x categories count matrix: how many raters gave each item each label.

    Returns
    -------
    counts : numpy.ndarray of shape (n_items, n_categories), int
    items : list of str
    categories : list of str
        Sorted labels present in ``annotations``.
    """
    cats = sorted(annotations["label"].unique().tolist())
    tab = pd.crosstab(annotations["item_id"], annotations["label"]).reindex(columns=cats, fill_value=0)
    return tab.to_numpy(dtype=int), tab.index.tolist(), cats


def _components(counts):
    """Per-item quantities that the three coefficients are sums of (so that a replicate is one product)."""
    m = counts.sum(axis=1).astype(float)
    sq = (counts.astype(float) ** 2).sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        p_item = np.where(m > 1, (sq - m) / (m * (m - 1)), np.nan)   # agreeing ordered pairs / all pairs
        diag = np.where(m > 1, (sq - m) / (m - 1), 0.0)              # sum_c o_cc contribution (Krippendorff)
    return m, p_item, diag


def agreement_coefficients(counts: npt.ArrayLike, weights: npt.ArrayLike | None = None) -> dict[str, Any]:
    """Fleiss' kappa, Gwet's AC1 and Krippendorff's alpha (nominal) from an items x categories count table.

    Parameters
    ----------
    counts : array_like of shape (n_items, n_categories)
        Raters per item and label. Fleiss and AC1 use the items with the full number of raters (the largest
        row sum); alpha uses every item with at least two ratings.
    weights : array_like of shape (n_resamples, n_items), optional
        Item weights of bootstrap replicates; without them the point estimates are returned.

    Returns
    -------
    dict
        ``fleiss_kappa``, ``gwet_ac1``, ``krippendorff_alpha``, ``percent_agreement`` (float, or arrays of
        shape (n_resamples,) with ``weights``).

    Notes
    -----
    With ``m`` raters, ``P_i = (sum_j n_ij^2 - m) / (m (m - 1))``, ``Pa = mean P_i`` and
    ``pi_j = sum_i n_ij / (N m)``: Fleiss (1971) ``kappa = (Pa - Pe) / (1 - Pe)``, ``Pe = sum_j pi_j^2``;
    Gwet (2008) ``AC1 = (Pa - Pe') / (1 - Pe')``, ``Pe' = sum_j pi_j (1 - pi_j) / (q - 1)``. Krippendorff's
    nominal alpha from the coincidence matrix: ``alpha = 1 - (n - 1) (n - sum_c o_cc) / (n^2 - sum_c n_c^2)``,
    ``o_cc = sum_u n_uc (n_uc - 1) / (m_u - 1)``, ``n_c = sum_u n_uc`` over items with ``m_u >= 2``.
    The point values agree with ``statsmodels.stats.inter_rater.fleiss_kappa`` and ``krippendorff.alpha``
    (tested); this form is used because a bootstrap replicate is then a weighted sum over items.

    Examples
    --------
    >>> out = agreement_coefficients([[3, 0], [0, 3], [2, 1], [3, 0]])
    >>> round(out["fleiss_kappa"], 4), round(out["gwet_ac1"], 4)
    (0.625, 0.7)
    """
    counts = np.asarray(counts, dtype=float)
    q = counts.shape[1]
    m, p_item, diag = _components(counts)
    full = m == m.max()
    mm = m.max()
    pair = m > 1
    W = np.ones((1, counts.shape[0])) if weights is None else np.asarray(weights, dtype=float)
    wf = W[:, full]
    nf = wf.sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        pa = (wf @ p_item[full]) / nf
        pi = (wf @ counts[full]) / (nf * mm)[:, None]
        pe_f = (pi**2).sum(axis=1)
        kappa = (pa - pe_f) / (1 - pe_f)
        pe_g = (pi * (1 - pi)).sum(axis=1) / (q - 1) if q > 1 else np.full_like(pa, np.nan)
        ac1 = (pa - pe_g) / (1 - pe_g)
        wp = W[:, pair]
        nc = wp @ counts[pair]
        n = nc.sum(axis=1)
        occ = wp @ diag[pair]
        alpha = 1 - (n - 1) * (n - occ) / (n**2 - (nc**2).sum(axis=1))
    out = {"fleiss_kappa": kappa, "gwet_ac1": ac1, "krippendorff_alpha": alpha, "percent_agreement": pa}
    if weights is None:
        out = {k: float(v[0]) for k, v in out.items()}
    return out


@dataclass(frozen=True, eq=False)
class AgreementResult(ReprHTMLMixin):
    """Result of :func:`agreement`.

    Attributes
    ----------
    table : pandas.DataFrame
        One row per group (``group`` = ``"all"`` or ``"col=value, ..."``) and coefficient: ``coefficient``
        (fleiss_kappa, gwet_ac1, krippendorff_alpha), ``estimate``, ``ci_low``, ``ci_high``, ``n_items``,
        ``n_raters``, ``n_categories``, ``percent_agreement``, ``majority_share`` (share of the most frequent
        label: a high share with a low kappa is the kappa paradox), ``n_items_incomplete`` (items with fewer
        raters, left out of kappa and AC1, kept in alpha), ``reference`` (the library value of the point
        estimate: statsmodels' ``fleiss_kappa`` and ``krippendorff.alpha``).
    by : list of str
    n_resamples, confidence_level, ci_method
    resample : str
        ``"item"``.
    warnings : list of str

    Examples
    --------
    Three raters label four items; two items are split 2:1:

    >>> import pandas as pd
    >>> ann = pd.DataFrame({"item_id": list("aaabbbcccddd"), "rater": list("xyz") * 4,
    ...                     "label": list("111000110001")})
    >>> res = agreement(ann, n_resamples=0)
    >>> res.to_frame()[["group", "coefficient", "estimate", "n_items", "percent_agreement"]].round(3)
      group         coefficient  estimate  n_items  percent_agreement
    0   all        fleiss_kappa     0.333        4              0.667
    1   all            gwet_ac1     0.333        4              0.667
    2   all  krippendorff_alpha     0.389        4              0.667
    """

    table: pd.DataFrame
    by: list
    n_resamples: int
    confidence_level: float
    ci_method: str
    resample: str = "item"
    warnings: list = field(default_factory=list)

    def to_frame(self) -> pd.DataFrame:
        """Tidy: one row per group and coefficient, one column per ``by`` column (no dict cells)."""
        table = self.table.copy()
        keys = table.pop("keys") if "keys" in table.columns else pd.Series([{}] * len(table), index=table.index)
        for i, col in enumerate(self.by or []):
            table.insert(1 + i, str(col), [k.get(col) for k in keys])
        return table

    def to_dict(self) -> dict:
        groups = []
        for g, sub in self.table.groupby("group", sort=False):
            first = sub.iloc[0]
            entry = {"group": g, "keys": first["keys"], "n_items": int(first["n_items"]),
                     "n_raters": int(first["n_raters"]), "n_categories": int(first["n_categories"]),
                     "percent_agreement": _num(first["percent_agreement"]),
                     "majority_share": _num(first["majority_share"]),
                     "n_items_incomplete": int(first["n_items_incomplete"])}
            for r in sub.itertuples(index=False):
                entry[r.coefficient] = {"estimate": _num(r.estimate), "ci": _ci_json((r.ci_low, r.ci_high)),
                                        "reference": _num(r.reference)}
            groups.append(entry)
        return {"by": self.by, "n_resamples": self.n_resamples, "confidence_level": self.confidence_level,
                "ci_method": self.ci_method, "resample": self.resample, "warnings": list(self.warnings),
                "groups": groups}


def agreement(annotations: pd.DataFrame, *, by: str | Sequence[str] | None = None, n_resamples: int = 2000,
              confidence_level: float = 0.95, ci_method: Literal["percentile", "bca"] = "percentile",
              rng: np.random.Generator | int | None = None) -> AgreementResult:
    """Fleiss' kappa, Gwet's AC1 and Krippendorff's alpha overall and per group, with item-bootstrap CIs.

    Parameters
    ----------
    annotations : pandas.DataFrame
        ``item_id``, ``rater``, ``label`` (from :func:`read_annotations`) and grouping columns.
    by : str or sequence of str, optional
        Grouping columns, nested: ``["benchmark", "tier"]`` gives rows for all items, for each benchmark and
        for each benchmark x tier.
    n_resamples : int, default 2000
        Item-bootstrap replicates (0: none).
    confidence_level : float, default 0.95
    ci_method : {"percentile", "bca"}, default "percentile"
    rng : None, int or numpy.random.Generator

    Returns
    -------
    AgreementResult

    Warns
    -----
    ExcludedRowsWarning
        When items have fewer raters than the others (left out of kappa and AC1).

    Notes
    -----
    See :func:`agreement_coefficients` for the formulas. Kappa's chance term uses the observed label
    shares, so with skewed labels (most RRB candidates are not correct) near-perfect raw agreement can give
    a low kappa (Feinstein & Cicchetti 1990, "the kappa paradox"); AC1's chance term shrinks as the labels get
    skewed, which is why it is shown next to kappa.

    Examples
    --------
    >>> import pandas as pd
    >>> ann = pd.DataFrame({"item_id": list("aaabbbccc"), "rater": list("xyz") * 3, "label": list("11100010x")})
    >>> res = agreement(ann, n_resamples=0)
    >>> res.table[["coefficient", "n_items"]].values.tolist()[0]
    ['fleiss_kappa', 3]
    """
    import krippendorff
    from statsmodels.stats.inter_rater import fleiss_kappa

    level = check_confidence_level(confidence_level)
    n_resamples = check_n_resamples(n_resamples)
    check_choice("ci_method", ci_method, BOOTSTRAP_CI_METHODS)
    gen = check_rng(rng)
    for c in ("item_id", "rater", "label"):
        if c not in annotations.columns:
            raise ValueError(f"`annotations` must have columns item_id, rater, label; {c!r} is missing.")
    by = [b.strip() for b in by.split(",") if b.strip()] if isinstance(by, str) else list(by or [])
    for b in by:
        if b not in annotations.columns:
            raise ValueError(f"`by` names column {b!r} that the annotations do not have; available: "
                             f"{sorted(annotations.columns)}.")
    groups: list[tuple[str, dict[str, str], pd.DataFrame]] = [("all", {}, annotations)]
    for depth in range(1, len(by) + 1):
        cols = by[:depth]
        for key, sub in annotations.groupby(cols, sort=True):
            key = key if isinstance(key, tuple) else (key,)
            keys = dict(zip(cols, (str(v) for v in key)))
            groups.append((", ".join(f"{c}={v}" for c, v in keys.items()), keys, sub))
    records, warns = [], []
    for name, keys, sub in groups:
        counts, items, cats = count_table(sub)
        m = counts.sum(axis=1)
        incomplete = int(np.sum(m < m.max()))
        if incomplete:
            msg = f"{name}: {incomplete} item(s) have fewer than {int(m.max())} raters (left out of kappa and AC1)"
            warns.append(msg)
            warnings.warn(msg, ExcludedRowsWarning, stacklevel=2)
        point = agreement_coefficients(counts)
        full = counts[m == m.max()]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ref_kappa = float(fleiss_kappa(full, method="fleiss")) if len(cats) > 1 else np.nan
            rel = _reliability(sub, cats)
            # krippendorff.alpha raises without an item that two raters labelled: undefined, as ours says
            ref_alpha = float(krippendorff.alpha(reliability_data=rel, level_of_measurement="nominal")) \
                if len(cats) > 1 and m.max() > 1 else np.nan
        if m.max() < 2:
            msg = (f"{name}: no item has more than one rater ({len(items)} item(s), one rating each); agreement "
                   "coefficients are undefined (NaN)")
            warns.append(msg)
            warnings.warn(msg, DegenerateDataWarning, stacklevel=2)
        elif len(cats) < 2:
            msg = f"{name}: every rating has the same label; agreement coefficients are undefined"
            warns.append(msg)
            warnings.warn(msg, DegenerateDataWarning, stacklevel=2)
        cis = dict.fromkeys(COEFFICIENTS, (_NAN_CI, _NAN_CI))
        if n_resamples and len(items) > 1:
            w = query_weights(len(items), n_resamples, gen)
            reps = agreement_coefficients(counts, w)
            jack_w = np.ones((len(items), len(items))) - np.eye(len(items))
            jack = agreement_coefficients(counts, jack_w) if ci_method == "bca" else None
            for c in COEFFICIENTS:
                pct = percentile_ci(reps[c], level)
                cis[c] = (pct, bca_ci(reps[c], point[c], jack[c], level) if jack is not None else pct)
        shares = counts.sum(axis=0) / counts.sum()
        for c in COEFFICIENTS:
            ci = cis[c][1] if ci_method == "bca" else cis[c][0]
            records.append({"group": name, "keys": keys, "coefficient": c, "estimate": point[c],
                            "ci_low": ci[0], "ci_high": ci[1], "n_items": len(items),
                            "n_raters": int(m.max()), "n_categories": len(cats),
                            "percent_agreement": point["percent_agreement"], "majority_share": float(shares.max()),
                            "n_items_incomplete": incomplete,
                            "reference": {"fleiss_kappa": ref_kappa, "gwet_ac1": np.nan,
                                          "krippendorff_alpha": ref_alpha}[c]})
    return AgreementResult(table=pd.DataFrame.from_records(records), by=by, n_resamples=n_resamples,
                           confidence_level=level, ci_method=ci_method, warnings=warns)


def _reliability(sub, cats):
    """Raters x items matrix of label codes (NaN = not rated), as ``krippendorff.alpha`` wants it."""
    code = {c: i for i, c in enumerate(cats)}
    wide = sub.assign(code=sub["label"].map(code)).pivot(index="rater", columns="item_id", values="code")
    return wide.to_numpy(dtype=float)
