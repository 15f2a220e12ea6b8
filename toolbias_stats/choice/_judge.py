"""Pairwise judges shown each pair in both orders: position consistency, primacy / recency preference, ties and
repetition stability (the position-bias metrics of Shi et al. 2024), with intervals that resample the compared items."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from .._display import ReprHTMLMixin
from .._resampling import percentile_ci, query_weights
from .._validation import check_by, check_confidence_level, check_n_resamples, check_rng
from ._stats import ChoiceLogLike, RngLike, _as_choice_log, json_records

__all__ = ["judge_consistency", "JudgeConsistency", "JUDGE_VERDICTS", "REPLICATE_COLUMNS", "expanded_level"]

#: A judgement of a 2-option row: the slot it preferred, or a tie (status ``"tie"``).
JUDGE_VERDICTS = ("first", "second", "tie")
#: Columns that repeat a judgement (replicates, never compared): Inspect epochs and the manifest's runs.
REPLICATE_COLUMNS = ("run", "epoch")
#: The per-unit sums every ratio of the table is built from (numerator / denominator pairs below).
_SUMS = ("n_pairs", "consistent", "primacy", "recency", "both_first", "both_second", "first", "second", "ties",
         "judgements", "stability", "n_repeated")
_RATIOS = {"consistency": ("consistent", "n_pairs"), "primacy_share": ("primacy", "inconsistent"),
           "recency_share": ("recency", "inconsistent"), "both_first_rate": ("both_first", "n_pairs"),
           "both_second_rate": ("both_second", "n_pairs"), "first_position_rate": ("first", "decided"),
           "tie_rate": ("ties", "judgements"), "repetition_stability": ("stability", "n_repeated")}
#: Interval column prefix of each ratio (``first_position_rate`` keeps its historical ``first_ci_*``).
_CI_NAME = {"first_position_rate": "first", "preference_score": "preference_score"}


@dataclass(frozen=True)
class JudgeConsistency(ReprHTMLMixin):
    """Result of :func:`judge_consistency`: one row per group in :attr:`table`, one row per swapped pair in
    :attr:`pairs`.

    Columns of :attr:`table`: ``unit`` (what the intervals resample: ``"item"``, the two compared answers of one
    question), ``n_units``, ``n_pairs`` (complete swapped pairs, every run and epoch), ``consistent``,
    ``primacy_preferred``, ``recency_preferred`` (pair counts), ``consistency`` (position consistency) with
    ``consistency_ci_low`` / ``_high``, ``primacy_share`` and ``recency_share`` of the inconsistent pairs,
    ``preference_score`` (recency minus primacy over the inconsistent pairs, in [-1, 1]), ``both_first`` /
    ``both_second`` (the slot picked both times) with rates, ``first_position_rate`` (share of the decided
    judgements of the pairs that picked slot 1; 0.5 for a position-blind judge; CI ``first_ci_*``), ``tie_rate``,
    ``repetition_stability`` over ``n_repeated`` repeated judgements (NaN when nothing is repeated), each with an
    item-bootstrap percentile CI, and ``excluded`` (rows left out, by reason, JSON text; a dict in ``to_dict()``).

    Examples
    --------
    Four pairs judged in both orders, always answered "first" (never consistent):

    >>> import json
    >>> import pandas as pd
    >>> import toolbias_stats as tbs
    >>> rows = [{"item_id": f"p{i}", "n_options": 2, "options": json.dumps([f"{a}{i}" for a in o]),
    ...          "chosen_position": 1, "status": "ok"} for i in range(4) for o in (["x", "y"], ["y", "x"])]
    >>> res = tbs.judge_consistency(tbs.ChoiceLog.from_frame(pd.DataFrame(rows)), n_resamples=50, rng=0)
    >>> res.to_frame()[["n_pairs", "consistent", "consistency", "first_position_rate", "preference_score"]]
       n_pairs  consistent  consistency  first_position_rate  preference_score
    0        4           0          0.0                  1.0              -1.0
    """

    table: pd.DataFrame
    pairs: pd.DataFrame = field(repr=False)
    by: list = field(default_factory=list)
    confidence_level: float = 0.95
    unit: str = "item"

    def to_frame(self) -> pd.DataFrame:
        return self.table.copy()

    def _headline(self):
        cols = list(self.by) + ["n_units", "n_pairs", "consistency", "consistency_ci_low", "consistency_ci_high",
                                "preference_score", "first_position_rate", "tie_rate", "repetition_stability"]
        return "Pairwise judge position consistency", self.table[[c for c in cols if c in self.table.columns]], None

    def to_dict(self) -> dict:
        """``{by, unit, confidence_level, groups}``; every interval is ``<name>_ci: [low, high]``."""
        return {"by": list(self.by), "unit": self.unit, "confidence_level": self.confidence_level,
                "groups": json_records(self.table)}


def judge_consistency(log: ChoiceLogLike, *, by: str | Sequence[str] = ("model",), n_resamples: int = 2000,
                      confidence_level: float = 0.95, rng: RngLike = None) -> JudgeConsistency:
    """Position bias of a pairwise judge shown each pair in both orders (A/B and B/A), ties included.

    Parameters
    ----------
    log : ChoiceLog or path to a choice-study manifest
        Two-option rows; a tie is a row with status ``"tie"``. Two rows form a *swapped pair* when they share
        the design columns, the ``epoch``, the two option texts, shown in opposite orders, and the item: the
        ``item_id`` where an item is shown in both orders (lm-eval's ``item``), else the ``question`` (Inspect,
        one sample per order).
    by : str or sequence of str, default ("model",)
    n_resamples : int, default 2000
        Item-bootstrap replicates; 0 skips the intervals.
    confidence_level : float, default 0.95
    rng : None, int or numpy.random.Generator

    Returns
    -------
    JudgeConsistency

    Notes
    -----
    Each judgement is ``first``, ``second`` (the slot preferred) or ``tie``. A swapped pair with verdicts
    (order 1, order 2) is, following Shi et al. (2024):

    - **consistent**: the same answer preferred both times ((first, second) or (second, first)), or tie both times;
    - **primacy-preferred**: (first, first), (first, tie), (tie, first);
    - **recency-preferred**: (second, second), (second, tie), (tie, second).

    Position consistency = consistent / pairs; the primacy and recency shares are those of the inconsistent pairs,
    and the preference score = (recency - primacy) / (recency + primacy) lies in [-1, 1] (-1: always the first
    slot, 0: no side preferred). When a judgement (the same question and options in the same order) is repeated
    over runs or epochs, repetition stability = the share of its repetitions that agree with its most frequent
    verdict, averaged over the repeated judgements.

    **Unit.** Runs and epochs are replicates: the pairs of one item (the same question and the same two answers)
    over every run and epoch are not independent, so every interval is an item-bootstrap percentile interval
    (all pairs and judgements of an item drawn together; ``unit = "item"``). Treating the repetitions as
    independent pairs (a Wilson interval over pairs) gave intervals 1.1-1.6 times too narrow and coverage below
    nominal. The intervals are *expanded* percentile intervals (:func:`expanded_level`: the plain percentile
    interval of a few dozen items covers 93%); ``analyses/judge_coverage.py`` measures their coverage. A pair
    with an invalid judgement (no answer, an unparseable one), rows with more than two options and rows without
    their swapped partner are excluded and counted by reason.

    References
    ----------
    L. Shi, C. Ma, W. Liang, X. Diao, W. Ma, S. Vosoughi (2024). Judging the Judges: A Systematic Study of
    Position Bias in LLM-as-a-Judge. arXiv:2406.07791.

    Examples
    --------
    Ten pairs, each judged in both orders: the judge answers "first" on four of them, ties one in both orders and
    picks the same answer in both orders on the other five.

    >>> import json
    >>> import pandas as pd
    >>> import toolbias_stats as tbs
    >>> rows = []
    >>> for i in range(10):
    ...     for order in (["x", "y"], ["y", "x"]):
    ...         tie = i == 4
    ...         rows.append({"item_id": f"p{i}", "question": f"Which answer is better? ({i})", "n_options": 2,
    ...                      "options": json.dumps([f"{o}{i}" for o in order]), "status": "tie" if tie else "ok",
    ...                      "chosen_position": None if tie else 1 if i < 4 else order.index("x") + 1})
    >>> res = tbs.judge_consistency(tbs.ChoiceLog.from_frame(pd.DataFrame(rows)), n_resamples=200, rng=1)
    >>> res.to_frame()[["n_pairs", "consistent", "primacy_preferred", "consistency", "preference_score"]]
       n_pairs  consistent  primacy_preferred  consistency  preference_score
    0       10           6                  4          0.6              -1.0
    >>> res.to_frame()[["consistency_ci_low", "consistency_ci_high"]].round(3).to_dict("records")
    [{'consistency_ci_low': 0.2, 'consistency_ci_high': 0.9}]
    """
    clog = _as_choice_log(log)
    by = check_by(by, clog.design_columns)
    level = check_confidence_level(confidence_level)
    n_resamples = check_n_resamples(n_resamples)
    gen = check_rng(rng)
    d = _judge_frame(clog)
    design = clog.design_columns
    rows, pair_frames = [], []
    grouped = list(d.groupby(by, sort=True, dropna=False)) if by else [((), d)]
    for key, sub in grouped:
        key = key if isinstance(key, tuple) else (key,)
        keys = dict(zip(by, (k.item() if hasattr(k, "item") else k for k in key)))
        pairs, excluded = _pairs(sub, design)
        sums = _unit_sums(sub, pairs, design)
        rows.append({**keys, "unit": "item", "n_rows": len(sub), "n_units": int((sums["n_pairs"] > 0).sum()),
                     **_estimates(sums, n_resamples, level, gen), "excluded": json.dumps(excluded, sort_keys=True)})
        pair_frames.append(pairs.assign(**keys)[list(keys) + list(pairs.columns)])
    pairs_all = pd.concat(pair_frames, ignore_index=True) if pair_frames else pd.DataFrame()
    return JudgeConsistency(table=pd.DataFrame(rows), pairs=pairs_all, by=by, confidence_level=level)


def _judge_frame(clog) -> pd.DataFrame:
    """The rows with their verdict (first / second / tie, None when invalid), option set and unit key."""
    d = clog.data.copy()
    opts = clog.option_lists
    d["_set"] = [json.dumps(sorted(o), ensure_ascii=False) for o in opts]
    d["_first"] = [o[0] for o in opts]
    pos = d["chosen_position"].astype("float").to_numpy()
    ok = (d["status"] == "ok").to_numpy()
    verdict = np.where(ok & (pos == 1), "first", np.where(ok & (pos == 2), "second",
                                                          np.where(d["status"] == "tie", "tie", "")))
    d["_verdict"] = verdict
    # the two orders of a pair share their item id (lm-eval's `item`, a table's item_id) or, where every order is
    # its own sample (Inspect sample ids), their question
    both = d.groupby(["item_id", "_set"], sort=False)["_first"].transform("nunique") >= 2
    question = d["question"].astype(object).where(d["question"].notna(), "")
    d["_pk"] = np.where(both, "i:" + d["item_id"].astype(str), "q:" + question.astype(str))
    d["_unit"] = d["_pk"] + "\x1f" + d["_set"]
    return d


def _pairs(sub: pd.DataFrame, design: list) -> tuple[pd.DataFrame, dict]:
    """The complete swapped pairs of one group (one row each, classified) and the rows left out by reason."""
    excluded: dict[str, int] = {}
    two = sub[sub["n_options"] == 2]
    if len(sub) - len(two):
        excluded["not_two_options"] = int(len(sub) - len(two))
    keys = design + ["_pk", "epoch", "_set"]
    grp = two.groupby(keys, sort=False, dropna=False)
    size = grp["_first"].transform("size")
    orders = grp["_first"].transform("nunique")
    paired = two[(size == 2) & (orders == 2)].sort_values(keys + ["_first"], kind="stable")
    if len(two) - len(paired):
        excluded["unpaired"] = int(len(two) - len(paired))
    a, b = paired.iloc[0::2], paired.iloc[1::2]
    va, vb = a["_verdict"].to_numpy(), b["_verdict"].to_numpy()
    valid = (va != "") & (vb != "")
    if (~valid).any():
        excluded["invalid_judgement"] = int(2 * (~valid).sum())
    a, b, va, vb = a[valid], b[valid], va[valid], vb[valid]
    consistent = ((va == "first") & (vb == "second")) | ((va == "second") & (vb == "first")) | \
        ((va == "tie") & (vb == "tie"))
    primacy = ~consistent & ((va == "first") | (vb == "first"))
    recency = ~consistent & ((va == "second") | (vb == "second"))
    rows = [f"{fa}:{ra}|{fb}:{rb}" for fa, ra, fb, rb in zip(a["source_file"], a["source_row"], b["source_file"],
                                                                b["source_row"])]
    out = pd.DataFrame({"item_id": a["item_id"].to_numpy(), "epoch": a["epoch"].to_numpy().astype(int),
                        "_unit": a["_unit"].to_numpy(), "rows": rows, "verdicts": [f"{x},{y}" for x, y in zip(va, vb)],
                        "consistent": consistent, "primacy_preferred": primacy, "recency_preferred": recency,
                        "first_picks": (va == "first").astype(int) + (vb == "first").astype(int),
                        "second_picks": (va == "second").astype(int) + (vb == "second").astype(int),
                        "ties": (va == "tie").astype(int) + (vb == "tie").astype(int)})
    if "run" in a.columns:
        out.insert(1, "run", a["run"].to_numpy())
    return out, excluded


def _unit_sums(sub: pd.DataFrame, pairs: pd.DataFrame, design: list) -> pd.DataFrame:
    """Per unit (item): the pair counts and the repetition-stability sums of one group."""
    p = pairs.assign(n_pairs=1, consistent=pairs["consistent"].astype(int),
                     primacy=pairs["primacy_preferred"].astype(int), recency=pairs["recency_preferred"].astype(int),
                     both_first=(pairs["first_picks"] == 2).astype(int),
                     both_second=(pairs["second_picks"] == 2).astype(int),
                     first=pairs["first_picks"], second=pairs["second_picks"], judgements=2)
    cols = [c for c in _SUMS if c in p.columns]
    sums = p.groupby("_unit", sort=True)[cols].sum()
    stab = _stability(sub, design)
    sums = sums.join(stab, how="outer").fillna(0.0)
    return sums[list(_SUMS)].astype(float)


def _stability(sub: pd.DataFrame, design: list) -> pd.DataFrame:
    """Per unit: the sum over its repeated judgements of the modal verdict's share, and their number."""
    valid = sub[(sub["n_options"] == 2) & (sub["_verdict"] != "")]
    keys = [c for c in design if c not in REPLICATE_COLUMNS] + ["_unit", "options"]
    counts = valid.groupby(keys + ["_verdict"], sort=False, dropna=False).size().unstack("_verdict", fill_value=0)
    n = counts.sum(axis=1)
    rep = n >= 2
    share = (counts.max(axis=1) / n)[rep]
    units = share.index.get_level_values("_unit")
    return pd.DataFrame({"stability": share.to_numpy(), "n_repeated": 1.0},
                        index=pd.Index(units, name="_unit")).groupby(level=0).sum()


def expanded_level(level: float, n_units: int) -> float:
    """The percentile level of the *expanded* bootstrap percentile interval (Hesterberg 2015) for ``n_units`` units.

    The plain percentile interval is too narrow in small samples (its spread is that of the plug-in, n rather than
    n - 1, and it uses normal rather than t quantiles); the expanded interval reads the bootstrap distribution at
    ``Phi(-sqrt(n / (n - 1)) * t_{n-1, (1 + level) / 2})`` on each side instead of ``(1 - level) / 2``.

    Examples
    --------
    >>> round(expanded_level(0.95, 40), 4), round(expanded_level(0.95, 10_000), 4)
    (0.9595, 0.95)
    """
    from scipy.stats import norm, t

    if n_units < 2:
        return level
    return float(1 - 2 * norm.cdf(-np.sqrt(n_units / (n_units - 1)) * t.ppf((1 + level) / 2, n_units - 1)))


def _estimates(sums: pd.DataFrame, n_resamples: int, level: float, gen: np.random.Generator) -> dict:
    """Counts, ratios and their item-bootstrap percentile intervals from the per-unit sums."""
    s = sums.copy()
    s["inconsistent"] = s["primacy"] + s["recency"]
    s["decided"] = s["first"] + s["second"]
    s["pref_num"] = s["recency"] - s["primacy"]
    tot = s.sum()
    ratios = dict(_RATIOS, preference_score=("pref_num", "inconsistent"))
    out: dict = {"n_pairs": int(tot["n_pairs"]), "consistent": int(tot["consistent"]),
                 "primacy_preferred": int(tot["primacy"]), "recency_preferred": int(tot["recency"]),
                 "both_first": int(tot["both_first"]), "both_second": int(tot["both_second"]),
                 "n_repeated": int(tot["n_repeated"])}
    # the pair ratios resample the items with a complete pair, repetition stability those with a repeated judgement
    units = {"n_pairs": s[s["n_pairs"] > 0], "n_repeated": s[s["n_repeated"] > 0]}
    weights = {k: query_weights(len(u), n_resamples, gen) if n_resamples and len(u) else None
               for k, u in units.items()}
    levels = {k: expanded_level(level, len(u)) for k, u in units.items()}
    for name, (num, den) in ratios.items():
        out[name] = tot[num] / tot[den] if tot[den] > 0 else np.nan
        basis = "n_repeated" if name == "repetition_stability" else "n_pairs"
        w, u = weights[basis], units[basis]
        if w is not None and tot[den] > 0:
            with np.errstate(invalid="ignore", divide="ignore"):
                ci = percentile_ci((w @ u[num].to_numpy()) / (w @ u[den].to_numpy()), levels[basis])
        else:
            ci = percentile_ci([], level)
        prefix = _CI_NAME.get(name, name)
        out[f"{prefix}_ci_low"], out[f"{prefix}_ci_high"] = ci.low, ci.high
    return out
