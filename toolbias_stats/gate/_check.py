"""``check``: one pass/fail decision per group and bias metric, made on the calibrated interval."""

from __future__ import annotations

import numbers
import os
import warnings
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from .._validation import check_choice, check_confidence_level, check_n_resamples
from ._result import RULES, GateDecision, GateResult

if TYPE_CHECKING:
    from ..io import SelectionCounts, SelectionLog, Study

__all__ = ["check_selection_bias", "assert_selection_fair", "decide", "check_threshold"]

#: Error of a threshold outside [0, 1] (the tests import it).
ERR_THRESHOLD = "`{name}` must be a number in [0, 1]; got {value!r} instead."
#: Error of a call without any threshold.
ERR_NO_THRESHOLD = "give at least one threshold: `max_delta_api` or `max_delta_pos`."
#: Narrowest half-width the planner is asked for (an estimate closer to the threshold than this is undecidable).
MIN_HALF_WIDTH = 0.002
#: Metrics of :func:`check_selection_bias` and their threshold argument.
CHECK_METRICS = {"delta_api": "max_delta_api", "delta_pos": "max_delta_pos"}


def check_threshold(name: str, value: Any) -> float:
    """``value`` as a float in [0, 1], else a ValueError naming ``name``.

    Parameters
    ----------
    name : str
        The argument's name, for the message.
    value : object

    Returns
    -------
    float

    Raises
    ------
    ValueError
        ``value`` is not a number in [0, 1] (:data:`ERR_THRESHOLD`).

    Examples
    --------
    >>> check_threshold("max_delta_api", 0.2)
    0.2
    >>> check_threshold("max_delta_api", 1.5)
    Traceback (most recent call last):
    ...
    ValueError: `max_delta_api` must be a number in [0, 1]; got 1.5 instead.
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not 0 <= float(value) <= 1:
        raise ValueError(ERR_THRESHOLD.format(name=name, value=value))
    return float(value)


def decide(low: float, high: float, threshold: float, rule: str) -> tuple[str, str]:
    """``(outcome, status)`` of an interval ``[low, high]`` against ``threshold`` under ``rule``.

    Parameters
    ----------
    low, high : float
        The interval (NaN: no interval, cannot tell).
    threshold : float
    rule : {"exceeds", "within"}

    Returns
    -------
    outcome : str
        ``"above"`` (``low > threshold``), ``"below"`` (``high < threshold``) or ``"cannot tell"``.
    status : str
        ``exceeds``: above fails, below passes, cannot tell passes with a warning (``"warn"``); ``within``: below
        passes, anything else fails.

    Examples
    --------
    >>> decide(0.25, 0.31, 0.2, "exceeds"), decide(0.15, 0.25, 0.2, "exceeds"), decide(0.15, 0.25, 0.2, "within")
    (('above', 'fail'), ('cannot tell', 'warn'), ('cannot tell', 'fail'))
    """
    if np.isfinite(low) and low > threshold:
        outcome = "above"
    elif np.isfinite(high) and high < threshold:
        outcome = "below"
    else:
        outcome = "cannot tell"
    if rule == "exceeds":
        status = {"above": "fail", "below": "pass"}.get(outcome, "warn")
    else:
        status = "pass" if outcome == "below" else "fail"
    return outcome, status


def check_selection_bias(log: SelectionLog | SelectionCounts | Study | str | os.PathLike[str], *,
                         max_delta_api: float | None = None, max_delta_pos: float | None = None,
                         by: str | Sequence[str] = ("model",), rule: str = "exceeds",
                         confidence_level: float = 0.95, n_resamples: int = 2000, plan: bool = True,
                         rng: np.random.Generator | int | None = None) -> GateResult:
    """May this release ship? One decision per group and bias metric, on the calibrated interval.

    Parameters
    ----------
    log : SelectionLog, SelectionCounts, Study or path to a manifest
        The attempts (per-query rows: the intervals resample queries).
    max_delta_api, max_delta_pos : float, optional
        The largest acceptable δ_API / δ_pos (in [0, 1]); a metric without a threshold is not checked. At
        least one is needed.
    by : str or sequence of str, default ``("model",)``
        One decision per group of these columns.
    rule : {"exceeds", "within"}, default "exceeds"
        ``exceeds``: fail when the interval lies wholly above the threshold (evidence of bias beyond it).
        ``within``: pass only when it lies wholly below (evidence that the bias is small: an equivalence test).
    confidence_level : float, default 0.95
        Of the two-sided interval; each rule is a one-sided test at level ``(1 - confidence_level) / 2``.
    n_resamples : int, default 2000
        Query-bootstrap replicates of :func:`~toolbias_stats.selection_bias` (must be positive).
    plan : bool, default True
        For every ``cannot tell``, ask :func:`~toolbias_stats.plan_study` how many attempts would decide.
    rng : None, int or numpy.random.Generator

    Returns
    -------
    GateResult
        ``decisions`` (one :class:`GateDecision` per group and metric), ``passed``, ``exit_code``,
        ``to_frame()``, ``to_dict()``.

    Raises
    ------
    ValueError
        No threshold, a threshold outside [0, 1], an unknown rule or ``by`` column, ``n_resamples`` = 0.

    Notes
    -----
    The interval is ``corrected_ci`` of :func:`~toolbias_stats.selection_bias`: the calibrated interval for the
    true cluster-averaged TV (test inversion along two calibration paths, :func:`~toolbias_stats.calibrated_mean_tv`),
    whose coverage the user guide checks by simulation; the estimate shown is ``corrected``. With a two-sided
    level-``1 - a`` interval, "wholly above the threshold" rejects "δ <= threshold" at level ``a / 2``
    (``exceeds``), and "wholly below" rejects "δ >= threshold" at level ``a / 2`` (``within``, the two
    one-sided tests of an equivalence test with an upper margin only). ``analyses/gate_error_rates.py`` measures
    both error rates by simulation at the bundled study's size.

    "Cannot tell" (the interval contains the threshold) is its own outcome: it fails under ``within`` and
    passes with a warning under ``exceeds``. The planner is then asked for the cheapest design whose expected
    half-width is ``|estimate - threshold|`` (the interval would then exclude the threshold if the estimate
    stayed where it is); ``attempts_to_decide`` gives its LLM calls per group.

    Examples
    --------
    A chooser that favours the first listed position (simulated; true δ_pos 0.229) against a threshold of 0.1:

    >>> from toolbias_stats.simulate import simulate_selection_log
    >>> sim = simulate_selection_log(n_clusters=3, n_queries=40, position_probs=[3, 1, 1, 1, 1], rng=0)
    >>> res = check_selection_bias(sim.log, max_delta_api=0.1, max_delta_pos=0.1, n_resamples=200, rng=1)
    >>> res.to_frame()[["metric", "estimate", "ci_low", "ci_high", "outcome", "status"]].round(3)
          metric  estimate  ci_low  ci_high outcome status
    0  delta_api     0.000   0.000    0.052   below   pass
    1  delta_pos     0.196   0.154    0.240   above   fail
    >>> res.exit_code
    1
    """
    thresholds = _checked(max_delta_api, max_delta_pos, rule, n_resamples)
    confidence_level = check_confidence_level(confidence_level)
    from ..io._load import load_counts
    from ..metrics import selection_bias

    counts = load_counts(log)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = selection_bias(counts, by=by, n_resamples=n_resamples, n_null=0, confidence_level=confidence_level,
                             rng=rng)
    notes = [str(w.message) for w in caught] + list(res.warnings)
    decisions = []
    for g in res.groups:
        for metric, threshold in thresholds.items():
            decisions.append(_decision(g, metric, threshold, rule, confidence_level))
    if plan:
        decisions = [_with_plan(d, counts, res.by, confidence_level, rng, notes) for d in decisions]
    notes += [f"{d.name}: {d.message}" for d in decisions if d.status == "warn"]
    return GateResult(command="check", decisions=decisions, rule=rule, confidence_level=confidence_level,
                      thresholds=thresholds, by=list(res.by),
                      interval=f"calibrated corrected_ci of selection_bias ({res.interval_method}, "
                               f"{n_resamples} replicates, resampling {res.resample})",
                      settings={"n_resamples": n_resamples, "seed": res.seed, "position": res.position,
                                "plan": plan},
                      warnings=list(dict.fromkeys(notes)))


def _checked(max_delta_api, max_delta_pos, rule, n_resamples) -> dict:
    """``{metric: threshold}`` after checking every argument (one place)."""
    check_choice("rule", rule, RULES)
    given = {"delta_api": max_delta_api, "delta_pos": max_delta_pos}
    thresholds = {m: check_threshold(CHECK_METRICS[m], v) for m, v in given.items() if v is not None}
    if not thresholds:
        raise ValueError(ERR_NO_THRESHOLD)
    if check_n_resamples(n_resamples) == 0:
        raise ValueError("`n_resamples` must be positive: the decisions are made on the bootstrap's calibrated "
                         "interval; got 0 instead.")
    return thresholds


def _decision(g, metric, threshold, rule, level) -> GateDecision:
    """The decision for one group's metric (``cannot tell`` when the metric is undefined there)."""
    tv = getattr(g, metric)
    n_used, n_excluded = int(g.rows["used"]), int(g.rows["total"] - g.rows["used"])
    if tv is None:
        why = g.position_note or "not defined for this group"
        outcome, status = decide(np.nan, np.nan, threshold, rule)
        return GateDecision(keys=dict(g.keys), metric=metric, threshold=threshold, rule=rule, estimate=np.nan,
                            ci_low=np.nan, ci_high=np.nan, confidence_level=level, outcome=outcome, status=status,
                            message=f"{metric} cannot be computed ({why}): cannot tell ({status.upper()})",
                            n_used=n_used, n_excluded=n_excluded, design_to_decide="no estimate")
    low, high = tv.corrected_ci
    outcome, status = decide(low, high, threshold, rule)
    return GateDecision(keys=dict(g.keys), metric=metric, threshold=threshold, rule=rule, estimate=tv.corrected,
                        ci_low=low, ci_high=high, confidence_level=level, outcome=outcome, status=status,
                        message=message(metric, tv.corrected, low, high, threshold, level, outcome, status),
                        n_used=n_used, n_excluded=n_excluded)


def message(metric, estimate, low, high, threshold, level, outcome, status) -> str:
    """One sentence naming the numbers, e.g. for a JUnit failure message.

    Examples
    --------
    >>> message("delta_pos", 0.3, 0.28, 0.33, 0.2, 0.95, "above", "fail")
    'delta_pos = 0.300, 95% CI [0.280, 0.330]: wholly above the threshold 0.200 (FAIL)'
    """
    where = {"above": "wholly above", "below": "wholly below", "cannot tell": "contains"}[outcome]
    verb = f"{where} the threshold" if outcome != "cannot tell" else "contains the threshold"
    tail = " (cannot tell)" if outcome == "cannot tell" else ""
    return (f"{metric} = {estimate:.3f}, {level:.0%} CI [{low:.3f}, {high:.3f}]: {verb} {threshold:.3f}{tail} "
            f"({status.upper()})")


def _with_plan(d: GateDecision, counts, by, level, rng, notes) -> GateDecision:
    """``d`` with the attempts that would decide it (planner), for a ``cannot tell`` with an estimate."""
    if d.outcome != "cannot tell" or not np.isfinite(d.estimate):
        return d
    import dataclasses

    gap = abs(d.estimate - d.threshold)
    if gap < MIN_HALF_WIDTH:
        why = f"the estimate is within {MIN_HALF_WIDTH} of the threshold: no feasible study decides"
        return dataclasses.replace(d, design_to_decide=why, message=f"{d.message}; {why}")
    from ..design import plan_study

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            plan = plan_study(counts, target=gap, target_kind="width", metrics=[d.metric], by=by or None,
                              confidence_level=level, rng=rng, n_draws=500, run_effect=False)
    except ValueError as exc:   # e.g. an aggregated log (no queries): the planner cannot say
        notes.append(f"{d.name}: the planner cannot say how many attempts would decide: {exc}")
        return dataclasses.replace(d, design_to_decide=f"planner: {exc}")
    row = plan.cheapest
    for k, v in d.keys.items():
        if k in row.columns:
            row = row[row[k].astype(str) == str(v)]
    if not len(row) or not bool(row["feasible"].iloc[0]):
        why = "no design up to the planner's max_queries decides"
        return dataclasses.replace(d, design_to_decide=why, message=f"{d.message}; {why}")
    r = row.iloc[0]
    calls = float(r["calls"])
    design = f"{int(r['queries'])} queries per cluster x {int(r['runs'])} run(s) x {int(r['rotations'])} rotation(s)"
    return dataclasses.replace(d, attempts_to_decide=calls, design_to_decide=design,
                               message=f"{d.message}; about {calls:,.0f} attempts ({design}) would decide")


def assert_selection_fair(log: SelectionLog | SelectionCounts | Study | str | os.PathLike[str], *,
                          max_delta_api: float | None = None, max_delta_pos: float | None = None,
                          by: str | Sequence[str] = ("model",), rule: str = "exceeds",
                          confidence_level: float = 0.95, n_resamples: int = 2000,
                          rng: np.random.Generator | int | None = 0) -> GateResult:
    """Fail a test (``AssertionError`` with the table) when the gate fails; a release gate for pytest.

    Parameters
    ----------
    log, max_delta_api, max_delta_pos, by, rule, confidence_level, n_resamples
        As for :func:`check_selection_bias` (the planner is not asked).
    rng : None, int or numpy.random.Generator, default 0
        Seeded by default: the same log gives the same verdict in every CI run.

    Returns
    -------
    GateResult
        When every decision passes.

    Raises
    ------
    AssertionError
        When any decision fails; the message is the decision table and what the rule promises.
    ValueError
        Bad arguments (as :func:`check_selection_bias`).

    Examples
    --------
    >>> from toolbias_stats.simulate import simulate_selection_log
    >>> fair = simulate_selection_log(n_clusters=3, n_queries=40, rng=0).log
    >>> assert_selection_fair(fair, max_delta_pos=0.1, n_resamples=200).passed
    True
    >>> biased = simulate_selection_log(n_clusters=3, n_queries=40, position_probs=[3, 1, 1, 1, 1], rng=0).log
    >>> assert_selection_fair(biased, max_delta_pos=0.1, n_resamples=200)
    Traceback (most recent call last):
    ...
    AssertionError: selection bias gate failed (rule exceeds): 1 of 1 decision(s) failed
    ...
    """
    res = check_selection_bias(log, max_delta_api=max_delta_api, max_delta_pos=max_delta_pos, by=by, rule=rule,
                               confidence_level=confidence_level, n_resamples=n_resamples, plan=False, rng=rng)
    if not res.passed:
        from ._render import text_table

        failed = sum(not d.passed for d in res.decisions)
        raise AssertionError(f"selection bias gate failed (rule {rule}): {failed} of {len(res.decisions)} "
                             f"decision(s) failed\n{text_table(res)}")
    return res
