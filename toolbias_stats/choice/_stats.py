"""Position bias of multiple-choice answers and pairwise judges: delta_pos, accuracy by gold position, consistency."""

from __future__ import annotations

import json
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from os import PathLike
from typing import Any, Literal

import numpy as np
import pandas as pd

from .._display import ReprHTMLMixin
from .._json import records as _frame_records
from .._resampling import percentile_ci, query_weights, wilson_interval
from .._validation import check_by, check_confidence_level, check_n_resamples, check_rng, renamed_attribute
from ..exceptions import DegenerateDataWarning
from ..io import ChoiceLog

#: What the statistics accept as ``log``: a ChoiceLog or the path of a choice-study manifest.
ChoiceLogLike = ChoiceLog | str | PathLike[str]
#: Accepted ``rng``: a seed, a Generator or None (fresh entropy).
RngLike = np.random.Generator | int | None

__all__ = ["option_position_bias", "accuracy_by_gold_position", "k_weighted_delta_pos", "OptionPositionBias",
           "GoldPositionAccuracy", "K_WEIGHTS"]


def json_records(frame: pd.DataFrame) -> list[dict]:
    """Rows of a result table for ``to_dict()``: every interval as one ``[low, high]`` list and ``excluded`` as a
    dict (never JSON inside a string).

    ``<x>_ci_low`` / ``<x>_ci_high`` become ``<x>_ci``, ``ci_low`` / ``ci_high`` become ``ci`` and another
    ``<x>_low`` / ``<x>_high`` pair (``wilson_low``) becomes ``<x>_ci``.

    Examples
    --------
    >>> json_records(pd.DataFrame({"rate": [0.5], "rate_ci_low": [0.25], "rate_ci_high": [0.75],
    ...                            "wilson_low": [0.2], "wilson_high": [0.8], "excluded": ['{"unpaired": 2}']}))
    [{'rate': 0.5, 'rate_ci': [0.25, 0.75], 'wilson_ci': [0.2, 0.8], 'excluded': {'unpaired': 2}}]
    """
    from .._json import interval_lists

    rows = interval_lists(_frame_records(frame))
    for row in rows:
        if isinstance(row.get("excluded"), str):
            row["excluded"] = json.loads(row["excluded"])
    return rows


def _as_choice_log(log) -> ChoiceLog:
    if isinstance(log, ChoiceLog):
        return log
    from ._study import read_choice_study

    if isinstance(log, (str, bytes)) or hasattr(log, "__fspath__"):
        return read_choice_study(log)
    raise TypeError(f"expected a ChoiceLog or a path to a choice-study manifest; got {type(log).__name__}.")


# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class OptionPositionBias(ReprHTMLMixin):
    """Result of :func:`option_position_bias`.

    Attributes
    ----------
    bias : BiasResult
        The tool machinery's result on the option-slot log (:meth:`ChoiceLog.to_selection_log`);
        its ``delta_pos`` is the answer-position bias (its ``delta_api`` is the same number, since
        the "tools" are the slots).
    gold : pandas.DataFrame
        Per group, K and position: how often the gold answer sat there (a skewed answer key makes a
        perfect model look position-biased: compare ``rate`` with ``gold_rate``).

    Examples
    --------
    Six yes/no items, each shown in both orders, always answered with the first option:

    >>> import json
    >>> import pandas as pd
    >>> import toolbias_stats as tbs
    >>> rows = [{"item_id": f"q{i}", "n_options": 2, "options": json.dumps(o), "gold_position": o.index("yes") + 1,
    ...          "chosen_position": 1, "status": "ok"} for i in range(6) for o in (["yes", "no"], ["no", "yes"])]
    >>> log = tbs.ChoiceLog.from_frame(pd.DataFrame(rows))
    >>> res = tbs.option_position_bias(log, n_resamples=50, n_null=50, rng=0)
    >>> res.to_frame()[["metric", "pooled"]]
          metric  pooled
    0  delta_pos     0.5
    >>> sorted(res.to_dict())
    ['bias', 'by', 'by_k', 'delta_pos', 'positions']
    """

    bias: Any
    gold: pd.DataFrame
    by: list
    weighted: pd.DataFrame = field(default_factory=pd.DataFrame)
    by_k: pd.DataFrame = field(default_factory=pd.DataFrame)

    def to_frame(self) -> pd.DataFrame:
        """One row per group: delta_pos weighted over the K groups (``weights``: by answers by default) with its
        item-bootstrap CI (``weighted_ci_low`` / ``_high``), then the tool machinery's columns: the mean over K
        groups (``mean_over_runs``), its CI, bias-corrected value, null and p-value; ``k_note`` when the K groups
        are unbalanced."""
        f = self.bias.to_frame()
        f = f[f["metric"] == "delta_pos"].reset_index(drop=True)
        if len(self.weighted):
            w = self.weighted[list(self.by) + ["weights", "n_k", "delta_pos", "ci_low", "ci_high", "corrected",
                                               "corrected_ci_low", "corrected_ci_high", "unit", "note"]]
            w = w.rename(columns={"delta_pos": "weighted", "ci_low": "weighted_ci_low", "ci_high": "weighted_ci_high",
                                  "corrected": "weighted_corrected", "corrected_ci_low": "weighted_corrected_ci_low",
                                  "corrected_ci_high": "weighted_corrected_ci_high", "note": "k_note"})
            f = w.merge(f, on=list(self.by), how="right") if self.by else pd.concat([w, f], axis=1)
            f = f[["metric"] + [c for c in f.columns if c != "metric"]]
        return f

    def rates_frame(self) -> pd.DataFrame:
        """Share of answers at each position, with Wilson and item-bootstrap CIs, next to the gold share."""
        r = self.bias.rates_frame().rename(columns={"cluster": "options", "api_index": "position"})
        r = r.drop(columns=["tool_id"])
        if len(self.gold):
            r = r.merge(self.gold, on=list(self.by) + ["options", "position"], how="left")
        return r

    def _headline(self):
        cols = list(self.by) + ["mean_over_runs", "ci_low", "ci_high", "corrected", "corrected_ci_low",
                                "corrected_ci_high", "null_expected", "p_value", "n_used", "n_excluded"]
        f = self.to_frame()
        return "Answer-position bias delta_pos (TV to uniform)", f[[c for c in cols if c in f.columns]], None

    def to_dict(self) -> dict:
        d = self.bias.to_dict()
        return {"by": list(self.by), "delta_pos": json_records(self.to_frame()), "by_k": json_records(self.by_k),
                "positions": json_records(self.rates_frame()), "bias": d}


def option_position_bias(log: ChoiceLogLike, *, by: str | Sequence[str] = ("model",), n_resamples: int = 2000,
                         confidence_level: float = 0.95, ci_method: Literal["bca", "percentile"] = "bca",
                         n_null: int = 2000, weights: str = "answers", rng: RngLike = None) -> OptionPositionBias:
    """Answer-position bias delta_pos of multiple-choice answers, with item-bootstrap CIs and a uniform null.

    The unit is "the option shown at position p": each number of options K is a cluster whose
    "tools" are the K slots, each item a query (:meth:`ChoiceLog.to_selection_log`), and
    :func:`~toolbias_stats.selection_bias` computes delta_pos = TV(P_pos, U) per K, averaged over K
    (then runs), with the item bootstrap (BCa), the bias-corrected estimate and calibrated CI, the
    exact expectation under a uniform chooser and a Monte-Carlo p-value.

    Parameters
    ----------
    log : ChoiceLog or path to a choice-study manifest
    by : str or sequence of str, default ("model",)
    n_resamples, confidence_level, ci_method, n_null, rng
        As in :func:`~toolbias_stats.selection_bias`.
    weights : {"answers", "items", "k"}, default "answers"
        How the per-K values of items with different numbers of options K combine into one delta_pos
        (``to_frame()["weighted"]``): by each K group's valid answers, by its items, or equally (``"k"``: the
        unweighted mean over K, what ``mean_over_runs`` holds).

    Returns
    -------
    OptionPositionBias

    Notes
    -----
    delta_pos measures departure of the answer positions from uniform. When the gold answers are not
    uniformly spread over positions (an unbalanced answer key, no shuffling), a perfectly accurate
    model also has delta_pos > 0; ``rates_frame()`` shows the gold share next to each rate and
    :func:`accuracy_by_gold_position` separates the two.

    Examples
    --------
    20 four-option questions, each shown in all 4 rotations; half are answered correctly, the other half always
    with option A (position 1):

    >>> import json
    >>> import pandas as pd
    >>> import toolbias_stats as tbs
    >>> opts = ["a", "b", "c", "d"]
    >>> rows = [{"item_id": f"q{i}", "n_options": 4, "options": json.dumps(opts[r:] + opts[:r]),
    ...          "gold_position": (4 - r) % 4 + 1, "chosen_position": (4 - r) % 4 + 1 if i % 2 else 1,
    ...          "status": "ok"} for i in range(20) for r in range(4)]
    >>> log = tbs.ChoiceLog.from_frame(pd.DataFrame(rows))
    >>> res = tbs.option_position_bias(log, n_resamples=200, n_null=200, rng=1)
    >>> res.to_frame()[["metric", "pooled", "corrected", "corrected_ci_low", "corrected_ci_high", "p_value"]].round(3)
          metric  pooled  corrected  corrected_ci_low  corrected_ci_high  p_value
    0  delta_pos   0.375      0.373             0.219              0.527    0.005
    """
    from ..metrics import selection_bias

    clog = _as_choice_log(log)
    by = check_by(by, clog.design_columns)
    slog = clog.to_selection_log(identity="position")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", category=UserWarning)
        res = selection_bias(slog, by=by, n_resamples=n_resamples, confidence_level=confidence_level,
                             ci_method=ci_method, n_null=n_null, rng=rng)
    d = clog.data
    gold = d[d["gold_position"].notna()]
    if len(gold):
        g = gold.groupby(by + ["n_options", "gold_position"], sort=True).size().rename("gold_count").reset_index()
        tot = g.groupby(by + ["n_options"])["gold_count"].transform("sum")
        g["gold_rate"] = g["gold_count"] / tot
        g["options"] = "K=" + g["n_options"].astype(str)
        g["position"] = g["gold_position"].astype(int)
        g = g.drop(columns=["n_options", "gold_position"])
    else:
        g = pd.DataFrame(columns=by + ["options", "position", "gold_count", "gold_rate"])
    weighted, by_k = k_weighted_delta_pos(clog, by=by, weights=weights, n_resamples=n_resamples,
                                          confidence_level=confidence_level, rng=rng)
    return OptionPositionBias(bias=res, gold=g, by=by, weighted=weighted, by_k=by_k)


#: ``weights`` of :func:`k_weighted_delta_pos`.
K_WEIGHTS = ("answers", "items", "k")


def k_weighted_delta_pos(log: ChoiceLogLike, *, by: str | Sequence[str] = ("model",), weights: str = "answers",
                         n_resamples: int = 2000, confidence_level: float = 0.95,
                         rng: RngLike = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """delta_pos of items with different numbers of options K: per K, and weighted over K (issue 35).

    Parameters
    ----------
    log : ChoiceLog or path to a choice-study manifest
    by : str or sequence of str, default ("model",)
    weights : {"answers", "items", "k"}, default "answers"
        Weight of each K group: its share of the valid answers, of the items, or 1 / (number of K groups).
    n_resamples : int, default 2000
        Item-bootstrap replicates (items resampled within each K group, every presentation, run and epoch of an
        item together); 0 skips the intervals.
    confidence_level : float, default 0.95
    rng : None, int or numpy.random.Generator

    Returns
    -------
    (weighted, by_k) : tuple of pandas.DataFrame
        ``weighted``: one row per group with ``weights``, ``n_k`` (K groups), ``delta_pos`` = sum_K w_K delta_K
        with its percentile CI (``ci_low``, ``ci_high``), ``corrected`` = delta_pos minus its bootstrap bias
        (mean of the replicates minus the estimate; the plug-in TV is biased upward, most in small K groups)
        with the percentile CI shifted by the same amount (``corrected_ci_low`` / ``_high``, within [0, 1]; the
        recommended interval), ``unweighted`` (the mean over K), ``unit`` and a
        ``note`` when the K groups are unbalanced (the smallest holds under 5% of the answers, or the
        weighted and unweighted values differ by more than 0.02). ``by_k``: one row per group and K with
        ``n_items``, ``n_answers``, ``share_answers``, ``share_items``, ``delta_pos`` and its CI.

    Notes
    -----
    ``delta_K = TV(P_pos, U_K) = 1/2 sum_p |P_K(p) - 1/K|`` over the valid answers of the K group (runs and epochs
    pooled: they are replicates). The unweighted mean over K lets 3 five-option questions weigh as much as 261
    three-option ones; weighting by answers estimates the position bias of the study's answers. The plug-in TV
    is biased upward in small groups (the ``corrected`` columns of :func:`option_position_bias` correct it for
    the mean over K); with answer weights a small group's bias weighs only its share.
    ``analyses/choice_mixed_K_coverage.py`` measures the coverage of the weighted interval.

    Examples
    --------
    300 three-option answers that always pick position 1 and 10 five-option answers spread evenly:

    >>> import json
    >>> import pandas as pd
    >>> rows = [{"item_id": f"a{i}", "n_options": 3, "options": json.dumps(["x", "y", "z"]), "status": "ok",
    ...          "chosen_position": 1} for i in range(300)]
    >>> rows += [{"item_id": f"b{i}", "n_options": 5, "options": json.dumps(list("vwxyz")), "status": "ok",
    ...           "chosen_position": i % 5 + 1} for i in range(10)]
    >>> weighted, by_k = k_weighted_delta_pos(ChoiceLog.from_frame(pd.DataFrame(rows)), n_resamples=0)
    >>> weighted[["delta_pos", "unweighted"]].round(4)
       delta_pos  unweighted
    0     0.6452      0.3333
    >>> by_k[["n_options", "n_answers", "delta_pos"]].round(4)
       n_options  n_answers  delta_pos
    0          3        300     0.6667
    1          5         10     0.0000
    """
    clog = _as_choice_log(log)
    by = check_by(by, clog.design_columns)
    if weights not in K_WEIGHTS:
        raise ValueError(f"`weights` must be one of {list(K_WEIGHTS)}; got {weights!r} instead.")
    level = check_confidence_level(confidence_level)
    n_resamples = check_n_resamples(n_resamples)
    gen = check_rng(rng)
    d = clog.data[clog.data["status"] == "ok"]
    head, per_k = [], []
    groups = list(d.groupby(by, sort=True)) if by else [((), d)]
    for key, sub in groups:
        key = key if isinstance(key, tuple) else (key,)
        keys = dict(zip(by, (k.item() if hasattr(k, "item") else k for k in key)))
        h, rows = _k_group(sub, keys, weights, n_resamples, level, gen)
        head.append(h)
        per_k.extend(rows)
    return pd.DataFrame(head), pd.DataFrame(per_k)


def _k_group(sub: pd.DataFrame, keys: dict, weights: str, n_resamples: int, level: float, gen) -> tuple:
    """The weighted row and the per-K rows of one group (valid answers only)."""
    ks = sorted(int(k) for k in sub["n_options"].unique())
    tv, n_ans, n_items, boot_tv, boot_n = [], [], [], [], []
    for k in ks:
        part = sub[sub["n_options"] == k]
        items, inv = np.unique(part["item_id"].to_numpy(dtype=object).astype(str), return_inverse=True)
        counts = np.zeros((len(items), k))
        np.add.at(counts, (inv, part["chosen_position"].astype(int).to_numpy() - 1), 1.0)
        tot = counts.sum(0)
        tv.append(0.5 * np.abs(tot / tot.sum() - 1 / k).sum())
        n_ans.append(tot.sum())
        n_items.append(len(items))
        if n_resamples:
            b = query_weights(len(items), n_resamples, gen) @ counts
            bn = b.sum(1)
            with np.errstate(invalid="ignore", divide="ignore"):
                boot_tv.append(0.5 * np.abs(b / bn[:, None] - 1 / k).sum(1))
            boot_n.append(bn)
    tv_a, n_a, i_a = np.array(tv), np.array(n_ans), np.array(n_items, dtype=float)
    w = {"answers": n_a, "items": i_a, "k": np.ones(len(ks))}[weights]
    est = float((w * tv_a).sum() / w.sum())
    if n_resamples:
        bt, bn = np.array(boot_tv), np.array(boot_n)      # (K groups, replicates)
        bw = {"answers": bn, "items": np.repeat(i_a[:, None], n_resamples, 1),
              "k": np.ones_like(bn)}[weights]
        boot = (bw * np.nan_to_num(bt)).sum(0) / bw.sum(0)
        ci = percentile_ci(boot, level)
        # the plug-in TV is biased upward (most in small K groups): the bootstrap estimate of that bias
        shift = float(np.mean(boot)) - est
        corr = (max(est - shift, 0.0), max(ci.low - shift, 0.0), min(max(ci.high - shift, 0.0), 1.0))
        ci_k = [percentile_ci(x, level) for x in bt]
    else:
        ci = percentile_ci([], level)
        corr = (np.nan, np.nan, np.nan)
        ci_k = [ci] * len(ks)
    share = n_a / n_a.sum()
    rows = [{**keys, "n_options": k, "n_items": int(i_a[j]), "n_answers": int(n_a[j]), "share_answers": share[j],
             "share_items": i_a[j] / i_a.sum(), "delta_pos": tv_a[j], "ci_low": ci_k[j].low, "ci_high": ci_k[j].high}
            for j, k in enumerate(ks)]
    unweighted = float(tv_a.mean())
    note = None
    if len(ks) > 1 and (share.min() < 0.05 or abs(est - unweighted) > 0.02):
        parts = ", ".join(f"K={k} {100 * s:.0f}%" for k, s in zip(ks, share))
        note = (f"K groups unbalanced (answers: {parts}): delta_pos weighted by {weights} {est:.3f}, unweighted "
                f"mean over K {unweighted:.3f}; per-K values in by_k")
    head = {**keys, "weights": weights, "n_k": len(ks), "delta_pos": est, "ci_low": ci.low, "ci_high": ci.high,
            "corrected": corr[0], "corrected_ci_low": corr[1], "corrected_ci_high": corr[2],
            "unweighted": unweighted, "unit": "item", "note": note}
    return head, rows


# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class GoldPositionAccuracy(ReprHTMLMixin):
    """Result of :func:`accuracy_by_gold_position`.

    Attributes
    ----------
    positions : pandas.DataFrame
        One row per group, K and gold position p: ``n`` presentations with the gold answer at p,
        ``correct``, ``accuracy`` and its item-bootstrap percentile CI and Wilson CI.
    overview : pandas.DataFrame
        (Named ``summary`` until 0.1.0; that name still works for one release with a DeprecationWarning.)
        One row per group and K: observed ``accuracy`` (CI), ``corrected_accuracy`` = mean over
        positions of the accuracy-when-gold-at-p (the expected accuracy under uniformly random
        orderings) with its CI, ``gap`` = observed - corrected with its CI, ``spread`` = max - min
        of the per-position accuracies with its CI, rows used and excluded by reason.

    Examples
    --------
    Six yes/no items, each shown in both orders, always answered with the first option:

    >>> import json
    >>> import pandas as pd
    >>> import toolbias_stats as tbs
    >>> rows = [{"item_id": f"q{i}", "n_options": 2, "options": json.dumps(o), "gold_position": o.index("yes") + 1,
    ...          "chosen_position": 1, "status": "ok"} for i in range(6) for o in (["yes", "no"], ["no", "yes"])]
    >>> log = tbs.ChoiceLog.from_frame(pd.DataFrame(rows))
    >>> res = tbs.accuracy_by_gold_position(log, n_resamples=50, rng=0)
    >>> res.to_frame()[["n_options", "accuracy", "spread"]]
       n_options  accuracy  spread
    0          2       0.5     1.0
    """

    positions: pd.DataFrame
    overview: pd.DataFrame
    by: list
    n_resamples: int
    confidence_level: float
    invalid: str
    seed: object

    summary = renamed_attribute("summary", "overview", since="0.1.0")

    def to_frame(self) -> pd.DataFrame:
        return self.overview.copy()

    def summary_frame(self) -> pd.DataFrame:
        """One row per group and K (a copy of :attr:`overview`), as ``summary_frame()`` of the other results."""
        return self.overview.copy()

    def _headline(self):
        cols = list(self.by) + ["n_options", "n_rows", "accuracy", "corrected_accuracy", "corrected_ci_low",
                                "corrected_ci_high", "gap", "gap_ci_low", "gap_ci_high"]
        return ("Accuracy by gold position and under random orderings",
                self.overview[[c for c in cols if c in self.overview.columns]], None)

    def to_dict(self) -> dict:
        return {"by": list(self.by), "n_resamples": self.n_resamples, "confidence_level": self.confidence_level,
                "invalid": self.invalid, "seed": self.seed if isinstance(self.seed, (int, type(None))) else
                repr(self.seed), "summary": json_records(self.overview),
                "positions": json_records(self.positions)}


def _gold_rows_used(sub: pd.DataFrame, invalid: str) -> tuple[pd.DataFrame, dict]:
    """The rows of one group with a single gold position (and, for ``invalid="exclude"``, a valid answer), and
    the rows left out by reason."""
    excluded = {}
    no_gold = sub["gold_position"].isna()
    multi = no_gold & sub["gold_positions"].fillna("").str.contains(r"\|")
    if multi.any():
        excluded["several_gold"] = int(multi.sum())
    if (no_gold & ~multi).any():
        excluded["no_gold"] = int((no_gold & ~multi).sum())
    use = sub[~no_gold]
    bad = use["status"] != "ok"
    if invalid == "exclude" and bad.any():
        for s, n in use.loc[bad, "status"].value_counts().items():
            excluded[s] = int(n)
        use = use[~bad]
    return use, excluded


def accuracy_by_gold_position(log: ChoiceLogLike, *, by: str | Sequence[str] = ("model",), n_resamples: int = 2000,
                              confidence_level: float = 0.95, invalid: str = "incorrect",
                              rng: RngLike = None) -> GoldPositionAccuracy:
    """Accuracy when the gold answer is at position p, and the accuracy expected under random orderings.

    Parameters
    ----------
    log : ChoiceLog or path to a choice-study manifest
    by : str or sequence of str, default ("model",)
    n_resamples : int, default 2000
        Item-bootstrap replicates (every presentation of an item is kept together); 0 skips CIs.
    confidence_level : float, default 0.95
    invalid : {"incorrect", "exclude"}, default "incorrect"
        Rows without a valid answer count as wrong (Inspect's and lm-eval's convention) or are left
        out. Rows without a single gold position (none, or several correct options) are always
        left out and counted in ``excluded``.
    rng : None, int or numpy.random.Generator

    Returns
    -------
    GoldPositionAccuracy

    Notes
    -----
    With ``a_p`` the accuracy over presentations whose gold option is shown at position ``p``, the
    **bias-corrected accuracy** is ``(1/K) * sum_p a_p``: the accuracy expected if every ordering
    were drawn uniformly at random, so that the gold answer lands at each position with
    probability 1/K (the counterfactual that :func:`~toolbias_stats.fit_bayes` computes for tools).
    It differs from the observed accuracy when the gold positions of the data are unevenly spread
    and accuracy depends on position. It estimates that counterfactual without bias when the
    gold position is assigned independently of the item (shuffled or rotated orderings); with a
    fixed answer key the items at each position differ and ``a_p`` mixes item difficulty with
    position. A position that never holds the gold answer makes it undefined (NaN, noted in
    ``missing_positions``). CIs are item-bootstrap percentile intervals; Wilson intervals treat
    presentations as independent.

    Examples
    --------
    20 four-option questions, each shown in all 4 rotations; half are answered correctly, the other half always
    with option A (position 1):

    >>> import json
    >>> import pandas as pd
    >>> import toolbias_stats as tbs
    >>> opts = ["a", "b", "c", "d"]
    >>> rows = [{"item_id": f"q{i}", "n_options": 4, "options": json.dumps(opts[r:] + opts[:r]),
    ...          "gold_position": (4 - r) % 4 + 1, "chosen_position": (4 - r) % 4 + 1 if i % 2 else 1,
    ...          "status": "ok"} for i in range(20) for r in range(4)]
    >>> log = tbs.ChoiceLog.from_frame(pd.DataFrame(rows))
    >>> res = tbs.accuracy_by_gold_position(log, n_resamples=200, rng=1)
    >>> res.to_frame()[["n_options", "accuracy", "spread", "spread_ci_low", "spread_ci_high"]].round(3)
       n_options  accuracy  spread  spread_ci_low  spread_ci_high
    0          4     0.625     0.5            0.3             0.7
    """
    clog = _as_choice_log(log)
    by = check_by(by, clog.design_columns)
    level = check_confidence_level(confidence_level)
    n_resamples = check_n_resamples(n_resamples)
    if invalid not in ("incorrect", "exclude"):
        raise ValueError(f"`invalid` must be 'incorrect' or 'exclude'; got {invalid!r} instead.")
    seed = rng if isinstance(rng, (int, type(None))) else "generator"
    gen = check_rng(rng)
    d = clog.data
    pos_rows, sum_rows = [], []
    groups = list(d.groupby(by + ["n_options"], sort=True)) if by else list(d.groupby(["n_options"], sort=True))
    for key, sub in groups:
        key = key if isinstance(key, tuple) else (key,)
        keys = dict(zip(by, (k.item() if hasattr(k, "item") else k for k in key[:-1])))
        k = int(key[-1])
        use, excluded = _gold_rows_used(sub, invalid)
        items, inv = np.unique(use["item_id"].to_numpy(dtype=object).astype(str), return_inverse=True)
        gp = use["gold_position"].astype(int).to_numpy() - 1
        correct = ((use["status"] == "ok") & (use["chosen_position"] == use["gold_position"])).fillna(False)
        correct = correct.to_numpy(dtype=bool)
        n_ip = np.zeros((len(items), k))
        c_ip = np.zeros((len(items), k))
        np.add.at(n_ip, (inv, gp), 1.0)
        np.add.at(c_ip, (inv, gp), correct.astype(float))
        n_p, c_p = n_ip.sum(0), c_ip.sum(0)
        with np.errstate(invalid="ignore", divide="ignore"):
            acc_p = c_p / n_p
        corrected = acc_p.mean() if np.all(n_p > 0) else np.nan
        overall = c_p.sum() / n_p.sum() if n_p.sum() > 0 else np.nan
        spread = np.nanmax(acc_p) - np.nanmin(acc_p) if np.all(n_p > 0) else np.nan
        if n_resamples and len(items) > 0:
            w = query_weights(len(items), n_resamples, gen)
            bn, bc = w @ n_ip, w @ c_ip
            with np.errstate(invalid="ignore", divide="ignore"):
                bacc = bc / bn
                bover = bc.sum(1) / bn.sum(1)
            bcorr = np.where(np.all(bn > 0, axis=1), bacc.mean(1), np.nan) if np.all(n_p > 0) else \
                np.full(n_resamples, np.nan)
            bspread = np.where(np.all(bn > 0, axis=1), np.max(np.where(bn > 0, bacc, -np.inf), 1)
                               - np.min(np.where(bn > 0, bacc, np.inf), 1), np.nan)
            ci_p = [percentile_ci(bacc[:, p], level) for p in range(k)]
            ci_over, ci_corr = percentile_ci(bover, level), percentile_ci(bcorr, level)
            ci_gap, ci_spread = percentile_ci(bover - bcorr, level), percentile_ci(bspread, level)
        else:
            nan = percentile_ci([], level)
            ci_p, ci_over, ci_corr, ci_gap, ci_spread = [nan] * k, nan, nan, nan, nan
        wl, wh = (wilson_interval(c_p, np.where(n_p > 0, n_p, 1), level) if k else ([], []))
        missing = [p + 1 for p in range(k) if n_p[p] == 0]
        if missing:
            warnings.warn(f"group {keys} K={k}: the gold answer is never at position(s) {missing}; the corrected "
                          "accuracy is undefined (NaN)", DegenerateDataWarning, stacklevel=2)
        for p in range(k):
            pos_rows.append({**keys, "n_options": k, "gold_position": p + 1, "n": int(n_p[p]), "correct": int(c_p[p]),
                             "accuracy": acc_p[p], "ci_low": ci_p[p].low, "ci_high": ci_p[p].high,
                             "wilson_low": wl[p] if n_p[p] > 0 else np.nan,
                             "wilson_high": wh[p] if n_p[p] > 0 else np.nan})
        sum_rows.append({**keys, "n_options": k, "n_rows": len(sub), "n_used": int(n_p.sum()),
                         "n_items": len(items), "accuracy": overall, "accuracy_ci_low": ci_over.low,
                         "accuracy_ci_high": ci_over.high, "corrected_accuracy": corrected,
                         "corrected_ci_low": ci_corr.low, "corrected_ci_high": ci_corr.high,
                         "gap": overall - corrected, "gap_ci_low": ci_gap.low, "gap_ci_high": ci_gap.high,
                         "spread": spread, "spread_ci_low": ci_spread.low, "spread_ci_high": ci_spread.high,
                         "missing_positions": "|".join(map(str, missing)),
                         "excluded": json.dumps(excluded, sort_keys=True)})
    return GoldPositionAccuracy(positions=pd.DataFrame(pos_rows), overview=pd.DataFrame(sum_rows), by=by,
                                n_resamples=n_resamples, confidence_level=level, invalid=invalid, seed=seed)
