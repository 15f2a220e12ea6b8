"""``compare``: two agent versions (or prompts, or tool orders) on the same queries, through ``selection_shift``."""

from __future__ import annotations

import os
import warnings
from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal

import numpy as np
import pandas as pd

from .._validation import check_choice, check_confidence_level, check_n_resamples
from ._check import check_threshold, decide, message
from ._result import RULES, GateDecision, GateResult

if TYPE_CHECKING:
    from ..io import SelectionLog, Study

__all__ = ["compare_selection", "combine_versions", "VERSION_COLUMN"]

#: The design column that labels the two versions in the combined log (``"base"`` and ``"new"``).
VERSION_COLUMN = "version"
#: The metrics compared with ``max_shift``.
SHIFT_METRICS = ("shift_api", "shift_pos")
#: Error when the two logs refer to different tools.
ERR_CATALOG = ("the two logs refer to different tools: {n} tool(s) of NEW are not in BASE's catalog (first: "
               "{first}); compare versions of an agent on the same tool clusters")


def combine_versions(base: SelectionLog | Study | str | os.PathLike[str],
                     new: SelectionLog | Study | str | os.PathLike[str]) -> tuple[SelectionLog, str]:
    """One log holding both versions, told apart by a design column, and that column's name.

    Parameters
    ----------
    base, new : SelectionLog, Study or path to a manifest

    Returns
    -------
    log : SelectionLog
        BASE's rows with ``version = "base"`` and NEW's with ``version = "new"`` (BASE's catalog).
    column : str
        ``"version"`` (``"compared_version"`` when a log already has a ``version`` column).

    Raises
    ------
    ValueError
        NEW chooses tools that BASE's catalog does not have.

    Examples
    --------
    >>> from toolbias_stats.simulate import simulate_selection_log
    >>> a = simulate_selection_log(n_clusters=2, n_queries=5, rng=0).log
    >>> b = simulate_selection_log(n_clusters=2, n_queries=5, rng=1).log
    >>> log, col = combine_versions(a, b)
    >>> col, log.data[col].value_counts().to_dict()
    ('version', {'base': 50, 'new': 50})
    """
    from .._schema import COUNT_COLUMN
    from ..io import SelectionLog, load_selection_log

    a, b = load_selection_log(base), load_selection_log(new)
    col = VERSION_COLUMN
    if col in a.data.columns or col in b.data.columns:
        col = "compared_version"
    known = set(a.catalog.table["tool_id"])
    chosen = b.data["chosen_tool"].dropna()
    foreign = sorted({str(t) for t in chosen if t not in known})
    if foreign:
        raise ValueError(ERR_CATALOG.format(n=len(foreign), first=foreign[0]))
    frame = pd.concat([a.data.assign(**{col: "base"}), b.data.assign(**{col: "new"})], ignore_index=True)
    if COUNT_COLUMN in frame.columns:   # an aggregated log: the count stays the last column
        frame = frame[[c for c in frame.columns if c != COUNT_COLUMN] + [COUNT_COLUMN]]
        frame[COUNT_COLUMN] = frame[COUNT_COLUMN].fillna(1).astype("int64")
    diagnostics = {**a.diagnostics, **b.diagnostics}
    # repeated attempts stay allowed where a part allowed them (as SelectionLog.concat decides)
    mode = "count" if any(isinstance(d, dict) and d.get("duplicates") == "count"
                          for d in diagnostics.values()) else "error"
    return SelectionLog.from_frame(frame, a.catalog, diagnostics=diagnostics, source="<compare>",
                                   duplicates=mode), col


def compare_selection(base: SelectionLog | Study | str | os.PathLike[str],
                      new: SelectionLog | Study | str | os.PathLike[str], *, max_shift: float,
                      by: str | Sequence[str] = ("model",), rule: str = "exceeds", confidence_level: float = 0.95,
                      n_resamples: int = 2000, n_permutations: int = 2000,
                      pairing: Literal["auto", "paired", "independent"] = "auto", tool_tests: bool = True,
                      rng: np.random.Generator | int | None = None) -> GateResult:
    """May the new version ship? Its selection shift from the base version against a threshold, and per-tool tests.

    Parameters
    ----------
    base, new : SelectionLog, Study or path to a manifest
        The two versions' attempts (agent versions, prompts or tool orders), ideally on the same queries.
    max_shift : float
        The largest acceptable shift (TV distance between the two versions' selection distributions, averaged
        over clusters; in [0, 1]), for tools (``shift_api``) and positions (``shift_pos``).
    by : str or sequence of str, default ``("model",)``
        One comparison per group of these columns (a group must be in both logs).
    rule : {"exceeds", "within"}, default "exceeds"
        As for :func:`check_selection_bias`, applied to the shift's calibrated interval.
    confidence_level : float, default 0.95
    n_resamples, n_permutations : int, default 2000
        Query-bootstrap replicates and label permutations of :func:`~toolbias_stats.selection_shift`.
    pairing : {"auto", "paired", "independent"}, default "auto"
        ``auto``: paired when the versions share query ids (see :func:`~toolbias_stats.selection_shift`).
    tool_tests : bool, default True
        Also fail when a tool's selection share changed significantly (permutation p-values, Holm across every
        cluster x tool, at level ``1 - confidence_level``).
    rng : None, int or numpy.random.Generator

    Returns
    -------
    GateResult
        Per group: ``shift_api`` and ``shift_pos`` decisions and a ``tools`` decision naming the tools that moved
        and by how much.

    Raises
    ------
    ValueError
        A threshold outside [0, 1], an unknown rule or ``by`` column, different tools, ``n_resamples`` = 0.

    Notes
    -----
    The shift decisions use ``corrected_ci`` of :func:`~toolbias_stats.selection_shift` (the calibrated interval
    for the true cluster-averaged shift) exactly as :func:`check_selection_bias` uses δ's. The ``tools`` decision
    is a test of "no change" (not of a change beyond ``max_shift``): with ``tool_tests=True`` a version whose
    shift is small but real fails once the study is large enough to see which tools moved.

    Examples
    --------
    The same queries under a base version and a version that favours the first listed position:

    >>> from toolbias_stats.simulate import simulate_selection_log
    >>> base = simulate_selection_log(n_clusters=3, n_queries=40, rng=0).log
    >>> new = simulate_selection_log(n_clusters=3, n_queries=40, position_probs=[3, 1, 1, 1, 1], rng=1).log
    >>> res = compare_selection(base, new, max_shift=0.1, n_resamples=200, n_permutations=400, rng=2)
    >>> res.to_frame()[["metric", "outcome", "status", "n_tools_moved"]]
          metric    outcome status  n_tools_moved
    0  shift_api      below   pass              0
    1  shift_pos      above   fail              0
    2      tools  no change   pass              0
    >>> res.exit_code
    1
    """
    check_choice("rule", rule, RULES)
    threshold = check_threshold("max_shift", max_shift)
    confidence_level = check_confidence_level(confidence_level)
    if check_n_resamples(n_resamples) == 0:
        raise ValueError("`n_resamples` must be positive: the decisions are made on the bootstrap's calibrated "
                         "interval; got 0 instead.")
    from ..experiments import selection_shift

    log, col = combine_versions(base, new)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = selection_shift(log, between=col, base="base", by=by, n_resamples=n_resamples,
                              n_permutations=n_permutations if tool_tests else 0,
                              confidence_level=confidence_level, pairing=pairing, rng=rng)
    notes = [str(w.message) for w in caught] + list(res.warnings) + list(res.skipped)
    decisions = []
    for g in res.groups:
        keys = {k: v for k, v in g.keys.items() if k != col}
        n_used = int(sum(r["valid"] for r in g.rows.values()))
        n_excluded = int(sum(r["attempts"] for r in g.rows.values())) - n_used
        for metric in SHIFT_METRICS:
            decisions.append(_shift_decision(getattr(g, metric), keys, metric, threshold, rule, confidence_level,
                                             n_used, n_excluded, g.pairing))
        if tool_tests:
            decisions.append(_tools_decision(g.tools, keys, rule, confidence_level, n_used, n_excluded,
                                             n_permutations))
    notes += [f"{d.name}: {d.message}" for d in decisions if d.status == "warn"]
    pairings = sorted({g.pairing for g in res.groups})
    return GateResult(command="compare", decisions=decisions, rule=rule, confidence_level=confidence_level,
                      thresholds=dict.fromkeys(SHIFT_METRICS, threshold), by=list(res.by),
                      interval=f"calibrated corrected_ci of selection_shift ({', '.join(pairings) or 'no groups'}; "
                               f"{n_resamples} query-bootstrap replicates)",
                      settings={"n_resamples": n_resamples, "n_permutations": n_permutations, "pairing": pairing,
                                "pairing_used": ", ".join(pairings), "tool_tests": tool_tests, "seed": res.seed,
                                "version_column": col},
                      warnings=list(dict.fromkeys(notes)))


def _shift_decision(s, keys, metric, threshold, rule, level, n_used, n_excluded, pairing) -> GateDecision:
    """The decision on one shift estimate (``cannot tell`` when it is undefined, e.g. positions unknown)."""
    if s is None:
        outcome, status = decide(np.nan, np.nan, threshold, rule)
        return GateDecision(keys=keys, metric=metric, threshold=threshold, rule=rule, estimate=np.nan,
                            ci_low=np.nan, ci_high=np.nan, confidence_level=level, outcome=outcome, status=status,
                            message=f"{metric} cannot be computed (no cluster with known positions in both "
                                    f"versions): cannot tell ({status.upper()})",
                            n_used=n_used, n_excluded=n_excluded)
    low, high = s.corrected_ci
    outcome, status = decide(low, high, threshold, rule)
    text = message(metric, s.corrected, low, high, threshold, level, outcome, status)
    return GateDecision(keys=keys, metric=metric, threshold=threshold, rule=rule, estimate=s.corrected,
                        ci_low=low, ci_high=high, confidence_level=level, outcome=outcome, status=status,
                        message=f"{text}; {pairing}", n_used=n_used, n_excluded=n_excluded)


def _tools_decision(tools: pd.DataFrame, keys, rule, level, n_used, n_excluded, n_permutations) -> GateDecision:
    """Fail when any tool's share changed significantly after Holm; name the tools and their changes."""
    alpha = 1 - level
    tested = tools[np.isfinite(tools["p_adjusted"].to_numpy(float))] if len(tools) else tools
    if len(tested) and len(tested) / (n_permutations + 1) > alpha:
        # the smallest permutation p-value is 1 / (N + 1); Holm multiplies it by the number of tools: no tool
        # could ever be significant, so "no change" would be a vacuous pass
        tested = tested.iloc[0:0]
        status = "warn" if rule == "exceeds" else "fail"
        need = int(np.ceil(len(tools) / alpha))
        return GateDecision(keys=keys, metric="tools", threshold=np.nan, rule=rule, estimate=np.nan,
                            ci_low=np.nan, ci_high=np.nan, confidence_level=level, outcome="cannot tell",
                            status=status, message=f"{n_permutations} permutations cannot show a change of any of "
                                                   f"{len(tools)} tools after Holm (use at least {need}): cannot "
                                                   f"tell ({status.upper()})", n_used=n_used, n_excluded=n_excluded)
    sig = tested[tested["significant"].astype(bool)] if len(tested) else tested
    biggest = float(np.nanmax(np.abs(tools["difference"].to_numpy(float)))) if len(tools) else np.nan
    moved = tuple({"cluster": str(r["cluster"]), "tool": str(r["tool_id"]), "share_base": float(r["share_base"]),
                   "share": float(r["share"]), "difference": float(r["difference"]),
                   "p_adjusted": float(r["p_adjusted"])}
                  for _, r in sig.sort_values("p_adjusted", kind="stable").iterrows())
    if not len(tested):
        status = "warn" if rule == "exceeds" else "fail"
        return GateDecision(keys=keys, metric="tools", threshold=np.nan, rule=rule, estimate=biggest,
                            ci_low=np.nan, ci_high=np.nan, confidence_level=level, outcome="cannot tell",
                            status=status, message=f"no tool could be tested (no permutations): cannot tell "
                                                   f"({status.upper()})", n_used=n_used, n_excluded=n_excluded)
    if moved:
        named = ", ".join(f"{m['cluster']}/{m['tool']} {m['share_base']:.3f} -> {m['share']:.3f} "
                          f"({m['difference']:+.3f}, Holm p = {m['p_adjusted']:.3g})" for m in moved[:10])
        more = f" and {len(moved) - 10} more" if len(moved) > 10 else ""
        text = (f"{len(moved)} of {len(tested)} tools changed their selection share significantly (Holm, "
                f"alpha {alpha:.2g}): {named}{more} (FAIL)")
        return GateDecision(keys=keys, metric="tools", threshold=np.nan, rule=rule, estimate=biggest,
                            ci_low=np.nan, ci_high=np.nan, confidence_level=level, outcome="changed", status="fail",
                            message=text, n_used=n_used, n_excluded=n_excluded, moved=moved)
    text = (f"no tool's selection share changed significantly (Holm over {len(tested)} tools, alpha {alpha:.2g}; "
            f"largest change {biggest:+.3f}) (PASS)")
    return GateDecision(keys=keys, metric="tools", threshold=np.nan, rule=rule, estimate=biggest, ci_low=np.nan,
                        ci_high=np.nan, confidence_level=level, outcome="no change", status="pass", message=text,
                        n_used=n_used, n_excluded=n_excluded)
