"""Outputs a pipeline reads: JUnit XML (one test case per group x metric), a Markdown table for a job summary
(``$GITHUB_STEP_SUMMARY``) and the terminal text. Strings only: the command line writes the files."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import numpy as np

from .._display import frame_text
from ._result import GateResult

__all__ = ["junit_xml", "markdown_summary", "text_table"]

_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_STATUS_MARK = {"pass": "pass", "warn": "pass (warning)", "fail": "**FAIL**"}


def _clean(text: object) -> str:
    """Text without the control characters XML 1.0 forbids (names come from untrusted logs)."""
    return _CONTROL.sub("?", str(text))


def _fmt(v: float) -> str:
    return "" if not np.isfinite(v) else f"{v:.3f}"


def junit_xml(result: GateResult, *, suite: str = "toolbias-stats") -> str:
    """The result as JUnit XML (Ant/Jenkins schema): one ``<testcase>`` per decision.

    Parameters
    ----------
    result : GateResult
    suite : str, default "toolbias-stats"
        Prefix of the ``<testsuite>`` name (``"<suite> check"`` / ``"<suite> compare"``).

    Returns
    -------
    str
        ``<testsuites>`` holding one ``<testsuite>`` (``name``, ``tests``, ``failures``, ``errors``,
        ``skipped``, ``time``). A failed decision has a ``<failure message=... type="SelectionBiasGate">``
        naming the numbers; a ``warn`` decision passes and carries the warning in ``<system-out>``. The rule's
        promise and the interval are ``<properties>``.

    Examples
    --------
    >>> from toolbias_stats.gate import check_selection_bias
    >>> from toolbias_stats.simulate import simulate_selection_log
    >>> sim = simulate_selection_log(n_clusters=3, n_queries=40, position_probs=[3, 1, 1, 1, 1], rng=0)
    >>> xml = junit_xml(check_selection_bias(sim.log, max_delta_pos=0.1, n_resamples=200, rng=1))
    >>> xml.splitlines()[1][:90]
    '<testsuites name="toolbias-stats" tests="1" failures="1" errors="0" skipped="0" time="0">'
    """
    failures = sum(d.status == "fail" for d in result.decisions)
    counts = {"tests": str(len(result.decisions)), "failures": str(failures), "errors": "0", "skipped": "0",
              "time": "0"}
    root = ET.Element("testsuites", {"name": suite, **counts})
    ts = ET.SubElement(root, "testsuite", {"name": f"{suite} {result.command}", **counts})
    props = ET.SubElement(ts, "properties")
    for name, value in (("rule", result.rule), ("promise", result.promise),
                        ("confidence_level", f"{result.confidence_level:g}"), ("interval", result.interval),
                        *((f"threshold.{m}", f"{t:g}") for m, t in result.thresholds.items())):
        ET.SubElement(props, "property", {"name": name, "value": _clean(value)})
    for d in result.decisions:
        group = ".".join(_clean(v) for v in d.keys.values()) or "all"
        case = ET.SubElement(ts, "testcase", {"name": _clean(d.name), "classname": f"{suite}.{result.command}."
                                              f"{group}", "time": "0"})
        if d.status == "fail":
            fail = ET.SubElement(case, "failure", {"message": _clean(d.message), "type": "SelectionBiasGate"})
            fail.text = _clean(_detail(d))
        elif d.status == "warn":
            out = ET.SubElement(case, "system-out")
            out.text = _clean(f"WARNING: {d.message}")
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def _detail(d) -> str:
    lines = [f"{k}: {v}" for k, v in d.row().items() if k not in d.keys and k != "message"]
    return "\n".join(lines)


def _md_cell(text: object) -> str:
    """A Markdown table cell: pipes, backticks and HTML escaped, no newlines (text from logs is untrusted)."""
    s = _clean(text).replace("\n", " ").replace("\r", " ")
    for a, b in (("&", "&amp;"), ("<", "&lt;"), (">", "&gt;"), ("|", "\\|"), ("`", "\\`")):
        s = s.replace(a, b)
    return s


def markdown_summary(result: GateResult) -> str:
    """A compact Markdown table for a CI job summary (e.g. appended to ``$GITHUB_STEP_SUMMARY``).

    Parameters
    ----------
    result : GateResult

    Returns
    -------
    str
        A heading with the verdict, the rule's promise, one table row per decision (group, metric, threshold,
        estimate, interval, outcome, status) and the message of every decision that did not simply pass. Text from
        the logs is escaped (pipes, backticks, HTML).

    Examples
    --------
    >>> from toolbias_stats.gate import check_selection_bias
    >>> from toolbias_stats.simulate import simulate_selection_log
    >>> sim = simulate_selection_log(n_clusters=3, n_queries=40, position_probs=[3, 1, 1, 1, 1], rng=0)
    >>> md = markdown_summary(check_selection_bias(sim.log, max_delta_pos=0.1, n_resamples=200, rng=1))
    >>> print(md.splitlines()[0])
    ### Selection-bias gate (check): FAIL
    >>> print(md.splitlines()[4])
    | model | metric | threshold | estimate | 95% CI | outcome | status |
    """
    verdict = "PASS" if result.passed else "FAIL"
    failed = sum(not d.passed for d in result.decisions)
    level = f"{result.confidence_level:.0%}"
    lines = [f"### Selection-bias gate ({result.command}): {verdict}", "",
             (f"{failed} of {len(result.decisions)} decision(s) failed. Rule `{result.rule}`: "
             f"{_md_cell(result.promise)}."), ""]
    head = [*result.by, "metric", "threshold", "estimate", f"{level} CI", "outcome", "status"]
    lines += ["| " + " | ".join(_md_cell(h) for h in head) + " |", "|" + "---|" * len(head)]
    for d in result.decisions:
        ci = "" if not np.isfinite(d.ci_low) else f"[{d.ci_low:.3f}, {d.ci_high:.3f}]"
        cells = [*(d.keys.get(b, "") for b in result.by), d.metric, _fmt(d.threshold), _fmt(d.estimate), ci,
                 d.outcome, _STATUS_MARK[d.status]]
        lines.append("| " + " | ".join(_md_cell(c) for c in cells) + " |")
    notes = [d for d in result.decisions if d.status != "pass"]
    if notes:
        lines.append("")
        lines += [f"- `{_md_cell(d.name)}`: {_md_cell(d.message)}" for d in notes]
    lines += ["", f"Interval: {_md_cell(result.interval)}."]
    return "\n".join(lines) + "\n"


def text_table(result: GateResult) -> str:
    """The terminal text: the decision table, each non-passing decision's message and the rule's promise.

    Parameters
    ----------
    result : GateResult

    Returns
    -------
    str
        Control characters from the logs are escaped.

    Examples
    --------
    >>> from toolbias_stats.gate import check_selection_bias
    >>> from toolbias_stats.simulate import simulate_selection_log
    >>> sim = simulate_selection_log(n_clusters=3, n_queries=40, rng=0)
    >>> print(text_table(check_selection_bias(sim.log, max_delta_pos=0.1, n_resamples=200, rng=1)))
    ... # doctest: +NORMALIZE_WHITESPACE
    Selection-bias gate (check, rule exceeds): PASS
        model    metric threshold estimate ci_low ci_high outcome status
    simulated delta_pos     0.100    0.029  0.000   0.088   below   pass
    Rule exceeds: fail when the 95% interval lies wholly above the threshold (evidence of bias beyond it; a
    chooser exactly at the threshold fails at most 2.5% of the time); an interval across the threshold cannot
    tell and passes with a warning.
    """
    frame = result.to_frame()
    cols = [c for c in [*result.by, "metric", "threshold", "estimate", "ci_low", "ci_high", "outcome", "status",
                        "attempts_to_decide"] if c in frame.columns]
    if "attempts_to_decide" in cols and not frame["attempts_to_decide"].notna().any():
        cols.remove("attempts_to_decide")
    verdict = "PASS" if result.passed else "FAIL"
    out = [frame_text(frame[cols], title=f"Selection-bias gate ({result.command}, rule {result.rule}): {verdict}")]
    out += [f"{d.name}: {d.message}" for d in result.decisions if d.status != "pass"]
    out.append(f"Rule {result.rule}: {result.promise}.")
    return "\n".join(_clean(x) for x in out)
