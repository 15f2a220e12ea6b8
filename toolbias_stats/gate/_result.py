"""Result objects of the release gate: one :class:`GateDecision` per group and metric, collected in a
:class:`GateResult` (frozen, tidy ``to_frame``, strict-JSON ``to_dict``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from .._display import ReprHTMLMixin

__all__ = ["GateDecision", "GateResult", "RULES", "OUTCOMES", "STATUSES"]

#: The decision rules: ``exceeds`` fails on evidence of bias beyond the threshold, ``within`` passes only on
#: evidence that the bias is below it (an equivalence test).
RULES = ("exceeds", "within")
#: Where the interval lies: wholly ``above`` the threshold, wholly ``below`` it, or across it (``cannot tell``).
OUTCOMES = ("above", "below", "cannot tell")
#: ``pass``, ``warn`` (passes, with a warning: cannot tell under ``exceeds``) and ``fail``.
STATUSES = ("pass", "warn", "fail")

#: What each rule promises (printed in every output).
PROMISES = {
    "exceeds": "fail when the {level:.0%} interval lies wholly above the threshold (evidence of bias beyond it; "
               "a chooser exactly at the threshold fails at most {alpha:.1%} of the time); an interval across "
               "the threshold cannot tell and passes with a warning",
    "within": "pass only when the {level:.0%} interval lies wholly below the threshold (evidence that the bias "
              "is smaller: an equivalence test; a chooser exactly at the threshold passes at most {alpha:.1%} of "
              "the time); an interval across the threshold cannot tell and fails",
}


def _num(v):
    """JSON-ready number: None for NaN / inf, Python types for NumPy scalars."""
    if v is None:
        return None
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    if isinstance(v, (int, np.integer)):
        return int(v)
    v = float(v)
    return v if np.isfinite(v) else None


def promise(rule: str, confidence_level: float) -> str:
    """The sentence stating what ``rule`` promises at ``confidence_level`` (one-sided level ``(1 - level) / 2``).

    Parameters
    ----------
    rule : {"exceeds", "within"}
    confidence_level : float

    Returns
    -------
    str

    Examples
    --------
    >>> promise("within", 0.95)[:60]
    'pass only when the 95% interval lies wholly below the thresh'
    """
    return PROMISES[rule].format(level=confidence_level, alpha=(1 - confidence_level) / 2)


@dataclass(frozen=True)
class GateDecision:
    """One decision of the gate: one group, one metric, one threshold.

    Attributes
    ----------
    keys : dict
        The group (values of the ``by`` columns).
    metric : str
        ``delta_api`` / ``delta_pos`` (:func:`check_selection_bias`), ``shift_api`` / ``shift_pos`` or ``tools``
        (:func:`compare_selection`).
    threshold : float
        The largest acceptable value (NaN for ``tools``: any significant change counts).
    rule : str
        ``"exceeds"`` or ``"within"``.
    estimate : float
        The bias-corrected estimate (``corrected`` of the package's result); for ``tools`` the largest absolute
        change in a tool's share.
    ci_low, ci_high : float
        The calibrated interval (``corrected_ci``) the decision is made on.
    confidence_level : float
    outcome : str
        ``"above"``, ``"below"`` or ``"cannot tell"`` (for ``tools``: ``"changed"`` or ``"no change"``).
    status : str
        ``"pass"``, ``"warn"`` (passes with a warning) or ``"fail"``.
    message : str
        One sentence with the numbers (the JUnit failure message).
    n_used, n_excluded : int
        Attempts with a valid choice and attempts excluded (for comparisons: both versions together).
    attempts_to_decide : float
        When the outcome is ``cannot tell``: the attempts (LLM calls) per group that :func:`~toolbias_stats.plan_study`
        expects to give an interval narrow enough to decide (NaN when decided or when the planner cannot say).
    design_to_decide : str
        That design (queries per cluster, runs, rotations), or why there is none.
    moved : tuple of dict
        ``tools`` decisions: the tools whose share changed significantly after Holm (cluster, tool, share_base,
        share, difference, p_adjusted).

    Examples
    --------
    >>> d = GateDecision(keys={"model": "m"}, metric="delta_pos", threshold=0.2, rule="exceeds", estimate=0.3,
    ...                  ci_low=0.28, ci_high=0.33, confidence_level=0.95, outcome="above", status="fail",
    ...                  message="delta_pos above", n_used=100, n_excluded=0)
    >>> d.passed, d.to_dict()["ci_high"]
    (False, 0.33)
    """

    keys: dict
    metric: str
    threshold: float
    rule: str
    estimate: float
    ci_low: float
    ci_high: float
    confidence_level: float
    outcome: str
    status: str
    message: str
    n_used: int
    n_excluded: int
    attempts_to_decide: float = np.nan
    design_to_decide: str = ""
    moved: tuple = ()

    @property
    def passed(self) -> bool:
        """Whether the decision lets the release through (``pass`` or ``warn``)."""
        return self.status != "fail"

    @property
    def name(self) -> str:
        """``"metric[key=value, ...]"``: the JUnit test-case name."""
        group = ", ".join(f"{k}={v}" for k, v in self.keys.items())
        return f"{self.metric}[{group}]" if group else self.metric

    def row(self) -> dict:
        """The decision as one flat row (scalar cells; ``moved`` counted and named)."""
        moved = "; ".join(f"{m['cluster']}/{m['tool']} {m['difference']:+.3f}" for m in self.moved)
        return {**self.keys, "metric": self.metric, "threshold": self.threshold, "rule": self.rule,
                "estimate": self.estimate, "ci_low": self.ci_low, "ci_high": self.ci_high,
                "confidence_level": self.confidence_level, "outcome": self.outcome, "status": self.status,
                "n_used": self.n_used, "n_excluded": self.n_excluded, "attempts_to_decide": self.attempts_to_decide,
                "design_to_decide": self.design_to_decide, "n_tools_moved": len(self.moved), "tools_moved": moved,
                "message": self.message}

    def to_dict(self) -> dict:
        """Strict-JSON dict (NaN as null)."""
        out = {"keys": {k: _num(v) if isinstance(v, (float, np.floating)) else v for k, v in self.keys.items()},
               "name": self.name}
        for k, v in self.row().items():
            if k in self.keys or k == "tools_moved":
                continue
            out[k] = _num(v) if isinstance(v, (int, float, np.integer, np.floating)) else v
        out["moved"] = [{k: (_num(v) if isinstance(v, (int, float, np.integer, np.floating)) else v)
                         for k, v in m.items()} for m in self.moved]
        return out


@dataclass(frozen=True)
class GateResult(ReprHTMLMixin):
    """Result of :func:`check_selection_bias` and :func:`compare_selection`: may this release ship?

    Attributes
    ----------
    command : str
        ``"check"`` or ``"compare"``.
    decisions : list of GateDecision
        One per group and metric.
    rule : str
    confidence_level : float
    thresholds : dict
        ``{metric: threshold}``.
    by : list of str
    interval : str
        Which interval the decisions use (the calibrated ``corrected_ci``) and how it was resampled.
    settings : dict
        The call's other settings (replicates, seed, pairing, ...), for provenance.
    warnings : list of str
        Warnings of the underlying analysis and of the gate (``cannot tell`` under ``exceeds``).

    Examples
    --------
    >>> from toolbias_stats.gate import check_selection_bias
    >>> from toolbias_stats.simulate import simulate_selection_log
    >>> sim = simulate_selection_log(n_clusters=3, n_queries=40, position_probs=[3, 1, 1, 1, 1], rng=0)
    >>> res = check_selection_bias(sim.log, max_delta_pos=0.1, n_resamples=200, rng=1)
    >>> round(sim.delta_pos, 3), res.passed, res.exit_code
    (0.229, False, 1)
    >>> res.to_frame()[["metric", "threshold", "outcome", "status"]]
          metric  threshold outcome status
    0  delta_pos        0.1   above   fail
    """

    command: str
    decisions: list
    rule: str
    confidence_level: float
    thresholds: dict
    by: list
    interval: str
    settings: dict = field(default_factory=dict)
    warnings: list = field(default_factory=list)

    @property
    def passed(self) -> bool:
        """True when every decision passes (``pass`` or ``warn``)."""
        return all(d.passed for d in self.decisions)

    @property
    def exit_code(self) -> int:
        """0 when every decision passes, 1 when any fails (the command line's exit code)."""
        return 0 if self.passed else 1

    @property
    def promise(self) -> str:
        """What the rule promises, in one sentence."""
        return promise(self.rule, self.confidence_level)

    def _headline(self):
        cols = [*self.by, "metric", "threshold", "estimate", "ci_low", "ci_high", "outcome", "status",
                "attempts_to_decide"]
        frame = self.to_frame()
        verdict = "PASS" if self.passed else "FAIL"
        title = (f"GateResult ({self.command}, rule {self.rule}): {verdict}; {len(self.decisions)} decision(s), "
                 f"{sum(not d.passed for d in self.decisions)} failed")
        return title, frame[[c for c in cols if c in frame.columns]], f"Rule {self.rule}: {self.promise}."

    def to_frame(self) -> pd.DataFrame:
        """Tidy, unrounded: one row per decision (group x metric)."""
        return pd.DataFrame([d.row() for d in self.decisions])

    def to_dict(self) -> dict:
        """The documented JSON object of ``toolbias-stats check --json`` / ``compare --json`` (strict JSON)."""
        return {"command": self.command, "passed": self.passed, "exit_code": self.exit_code, "rule": self.rule,
                "promise": self.promise, "confidence_level": self.confidence_level,
                "thresholds": {k: _num(v) for k, v in self.thresholds.items()}, "by": list(self.by),
                "interval": self.interval, "settings": _records_safe(self.settings),
                "decisions": [d.to_dict() for d in self.decisions], "warnings": [str(w) for w in self.warnings]}


def _records_safe(settings: dict) -> dict:
    """Settings as strict JSON (numbers checked, anything else as text)."""
    out: dict[str, Any] = {}
    for k, v in settings.items():
        if v is None or isinstance(v, (str, bool)):
            out[k] = v
        elif isinstance(v, (int, float, np.integer, np.floating)):
            out[k] = _num(v)
        elif isinstance(v, (list, tuple)):
            out[k] = [x if isinstance(x, (str, int, bool)) else str(x) for x in v]
        else:
            out[k] = str(v)
    return out

