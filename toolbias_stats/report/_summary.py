"""The bias report's first screen in words: at most five sentences across all groups (issue 26).

Generated from the numbers of :func:`~toolbias_stats.plots._overview.bias_overview_rows` and
:func:`~toolbias_stats.plots._overview.rate_gap_table` (the same rows the overview figures draw), so figure and text
show the same numbers. Each sentence covers every group at once; none is repeated per model (the per-group findings
of :func:`~toolbias_stats.report.key_findings` stay in the report, collapsed).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from .._format import fmt_estimate_ci, fmt_level, fmt_num
from .._text import SHADOW_DOMAIN_NAMES as _NAMES
from .._text import SHADOW_DOMAINS as _DOMAINS
from .._text import shadow_label as _label

if TYPE_CHECKING:
    from typing import Any

    from ..choicemodel import ChoiceModelResult
    from ..io import ToolCatalog
    from ..metrics import BiasResult
    from ..shadow import ShadowResult
    from ..toolsense import ComparisonResult, RetrievalResult


__all__ = ["bias_summary", "shadow_summary", "toolsense_summary", "choice_model_summary"]

_NAME = {"delta_api": "tool choice", "delta_pos": "list position"}


def _finite(col):
    """Finite numbers of a column that may hold None (object dtype: clusters of several list lengths)."""
    return np.isfinite(pd.to_numeric(col, errors="coerce").astype(float))

def _names(items) -> str:
    items = [str(x) for x in items]
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + " and " + items[-1]


def _pct(x) -> str:
    return "\u2013" if not np.isfinite(x) else f"{100 * x:.1f}%"


def bias_summary(result: BiasResult, catalog: ToolCatalog | None = None) -> list[str]:
    """At most five plain sentences summarising a :class:`~toolbias_stats.BiasResult` across its groups.

    Parameters
    ----------
    result : BiasResult
    catalog : ToolCatalog, optional
        For readable tool names.

    Returns
    -------
    list of str
        Plain text (the HTML layer escapes it), in this order, each only when its numbers exist: which groups are
        distinguishable from a fair chooser (calibrated interval above 0 and p-value below 1 - confidence level)
        in tool choice and in list position; the largest tool bias δ_API and the largest position bias δ_pos with
        their bias-corrected values and calibrated intervals and the fair-chooser reference; the most favoured tool
        overall (largest selection rate minus 1/K averaged over groups); how the first listed position fares
        against 1/K. Empty for a result without groups.

    Examples
    --------
    >>> import toolbias_stats as tbs
    >>> from toolbias_stats.simulate import simulate_selection_log
    >>> res = tbs.selection_bias(simulate_selection_log(n_clusters=2, n_queries=10, rng=0).log, n_resamples=50, rng=1)
    >>> print(bias_summary(res)[0])  # doctest: +NORMALIZE_WHITESPACE
    The model is not distinguishable from a fair chooser, in tool choice or in list position (bias-corrected 95%
    interval reaching 0 or p-value above 0.05).
    """
    from ..plots._overview import bias_overview_rows

    rows = bias_overview_rows(result)
    if not rows:
        return []
    ctx: dict[str, Any] = {"lv": fmt_level(result.confidence_level), "alpha": 1 - result.confidence_level,
                           "n": len(rows), "noun": "model" if list(result.by) == ["model"] else "group"}
    ctx["nouns"] = ctx["noun"] + ("s" if ctx["n"] != 1 else "")
    out = _distinguishable_sentences(rows, ctx) + _largest_bias_sentences(rows, ctx)
    out += _favoured_tool_sentences(result, catalog, ctx) + _first_position_sentences(result, catalog, rows, ctx)
    return out[:5]


def _unpack(ctx):
    return ctx["lv"], ctx["alpha"], ctx["n"], ctx["noun"], ctx["nouns"]


def _distinguishable_sentences(rows, ctx) -> list:
    """1. Which groups are distinguishable from a fair chooser."""
    lv, alpha, n, noun, nouns = _unpack(ctx)
    out = []
    # 1. which are distinguishable from a fair chooser
    parts = []
    n_tested = {m: sum(r[m] is not None for r in rows) for m in ("delta_api", "delta_pos")}
    for m in ("delta_api", "delta_pos"):
        tested = [r for r in rows if r[m] is not None]
        if not tested:
            continue
        yes = [r["label"] for r in tested if r[m]["distinguishable"]]
        if not yes:
            parts.append((m, f"none in {_NAME[m]}"))
        elif len(yes) == len(tested):
            parts.append((m, f"{'all' if len(tested) > 1 else 'it'} in {_NAME[m]}"))
        else:
            parts.append((m, f"{_names(yes)} in {_NAME[m]}"))
    if parts:
        any_yes = any(r[m] is not None and r[m]["distinguishable"] for r in rows for m in ("delta_api", "delta_pos"))
        scope = f"the only {noun}" if n == 1 else f"the {n} {nouns}"
        if not any_yes:
            out.append(f"No {noun} is distinguishable from a fair chooser: for {scope}, the bias-corrected {lv} "
                       f"interval of \u03b4 reaches 0 or the p-value of \u201cno bias\u201d is above {alpha:g}, "
                       "in tool choice and in list position alike." if n > 1 else
                       f"The {noun} is not distinguishable from a fair chooser, in tool choice or in list position "
                       f"(bias-corrected {lv} interval reaching 0 or p-value above {alpha:g}).")
        elif all(p.startswith(("all ", "it ")) for _, p in parts):
            # "in list position" covers only the groups whose lists are known: say how many when not all
            what = " and in ".join(_NAME[m] + ("" if n_tested[m] == n else f" (the {n_tested[m]} with known lists)")
                                   for m, _ in parts)
            subject = f"All {n} {nouns} are" if n > 1 else f"The {noun} is"
            out.append(f"{subject} distinguishable from a fair chooser in {what} (bias-corrected {lv} interval "
                       f"above 0 and p < {alpha:g}).")
        else:
            out.append(f"Distinguishable from a fair chooser, of {scope}: " + "; ".join(p for _, p in parts)
                       + f" (bias-corrected {lv} interval above 0 and p < {alpha:g}).")
    return out


def _largest_bias_sentences(rows, ctx) -> list:
    """2./3. The largest tool bias and the largest position bias, with intervals."""
    lv, n = ctx["lv"], ctx["n"]
    out = []
    # 2./3. largest tool bias and largest position bias, with intervals
    for m, what in (("delta_api", "tool bias \u03b4_API"), ("delta_pos", "position bias \u03b4_pos")):
        cand = [r for r in rows if r[m] is not None and np.isfinite(r[m]["corrected"])]
        if not cand:
            continue
        top = max(cand, key=lambda r: r[m]["corrected"])
        s = top[m]
        where = f" ({top['label']})" if n > 1 or top["label"] != "all" else ""
        est = fmt_estimate_ci(s["corrected"], (s["low"], s["high"]))
        out.append(f"The largest {what} is {est}{where}, bias-corrected with its {lv} calibrated interval; a fair "
                   f"chooser would show about {fmt_num(s['null_expected'])} from noise alone.")
    return out


def _favoured_tool_sentences(result, catalog, ctx) -> list:
    """4. The most favoured tool overall."""
    nouns = ctx["nouns"]
    from ..plots._overview import rate_gap_table

    out = []
    # 4. the most favoured tool overall
    tools = rate_gap_table(result, catalog, kind="tool")
    tools = tools[_finite(tools["gap"])]
    if not tools.empty:
        mean = tools.groupby(["cluster", "item"], sort=False).agg(gap=("gap", "mean"), rate=("rate", "mean"),
                                                                   K=("K", "first"))
        (cid, item), best = next(iter(mean.sort_values("gap", ascending=False, kind="stable").iterrows()))
        per = tools[(tools["cluster"] == cid) & (tools["item"] == item)]
        text = (f"The most favoured tool overall is {item} (cluster {cid}), chosen {_pct(best['rate'])} of the time"
                f"{' on average over ' + nouns if per['group'].nunique() > 1 else ''} against "
                f"{_pct(1 / best['K'])} for a fair chooser")
        if per["group"].nunique() > 1:
            hi = per.loc[per["rate"].idxmax()]
            text += f" (most by {hi['group']}, {_pct(hi['rate'])})"
        out.append(text + ".")
    return out


def _first_position_sentences(result, catalog, rows, ctx) -> list:
    """5. The first listed position against 1/K."""
    n, noun, nouns = ctx["n"], ctx["noun"], ctx["nouns"]
    from ..plots._overview import rate_gap_table

    out = []
    # 5. the first listed position against 1/K
    pos = rate_gap_table(result, catalog, kind="position")
    pos = pos[(pos["index"] == 1) & _finite(pos["gap"])]
    if not pos.empty:
        per = pos.groupby("group", sort=False).agg(rate=("rate", "mean"), fair=("K", lambda k: float(np.mean(1 / k))))
        # "more often" only where the position bias is distinguishable too: a point estimate above 1/K is noise
        clear = {r["label"] for r in rows if r["delta_pos"] is not None and r["delta_pos"]["distinguishable"]}
        above = [g for g in per.index[per["rate"] > per["fair"]] if g in clear]
        fair = float(np.mean(1 / pos["K"]))
        if len(per) == 1:
            r = per.iloc[0]
            out.append(f"The first listed tool is chosen {_pct(r['rate'])} of the time on average over clusters, "
                       f"{'more' if r['rate'] > r['fair'] else 'less'} than the {_pct(r['fair'])} of a fair chooser.")
        else:
            lo, hi = per["rate"].idxmin(), per["rate"].idxmax()
            which = f" ({_names(above)})" if 0 < len(above) <= 3 and len(above) < len(per) else ""
            span = (f"from {_pct(per.at[lo, 'rate'])} ({lo}) to {_pct(per.at[hi, 'rate'])} ({hi}) on average over "
                    "clusters")
            ref = f"a fair chooser (1/K, {_pct(fair)} on average)"
            if len(above) == len(per):
                subject = (f"Every {noun} chooses" if len(per) == n else
                           f"All {len(per)} {nouns} with known list positions choose")
                out.append(f"{subject} the first listed tool more often than {ref}, with a distinguishable "
                           f"position bias: {span}.")
            elif not above:
                out.append(f"No {noun} chooses the first listed tool distinguishably more often than {ref}: {span}.")
            else:
                verb = "chooses" if len(above) == 1 else "choose"
                known = "" if len(per) == n else " with known list positions"
                out.append(f"{len(above)} of the {len(per)} {nouns}{known}{which} {verb} the first listed tool "
                           f"more often than {ref}, with a distinguishable position bias: {span}.")
    return out


def shadow_summary(result: ShadowResult, *, scale: str | None = None) -> list[str]:
    """At most four plain sentences summarising a TOOL-SHADOW :class:`~toolbias_stats.shadow.ShadowResult`.

    Parameters
    ----------
    result : ShadowResult
    scale : {"paper", "effect"}, optional
        The scale the sentences use; default ``result.scale``.

    Returns
    -------
    list of str
        Which harnesses score above 50 (no bias) with the bootstrap interval above 50; the highest PBS with its
        interval and weight-sensitivity band; which harnesses exceed 60 (per-domain breakdown mandatory); the domain
        contributing most to the score, over harnesses. Each sentence covers all harnesses at once. Empty without
        harnesses.

    Examples
    --------
    >>> from toolbias_stats.shadow import simulate_audit, tool_shadow
    >>> res = tool_shadow(simulate_audit(200, 6, rng=1), n_resamples=200, rng=1)
    >>> print(shadow_summary(res)[0])  # doctest: +NORMALIZE_WHITESPACE
    The harness does not score distinguishably above 50 (no positional bias) on the paper scale: its 95% interval
    reaches 50.
    """

    scale = result.scale if scale is None else scale
    groups = list(result.groups)
    if not groups:
        return []
    n = len(groups)
    lv = fmt_level(result.confidence_level)
    label = {id(g): _label(g.keys) for g in groups}
    out = []
    above = [label[id(g)] for g in groups if np.isfinite(g.pbs[scale].ci[0]) and g.pbs[scale].ci[0] > 50]
    if not above:
        out.append(f"No harness scores distinguishably above 50 (no positional bias) on the {scale} scale: every "
                   f"{lv} interval reaches 50." if n > 1 else
                   f"The harness does not score distinguishably above 50 (no positional bias) on the {scale} scale: "
                   f"its {lv} interval reaches 50.")
    elif len(above) == n:
        out.append(f"{'All ' + str(n) + ' harnesses score' if n > 1 else 'The harness scores'} above 50 (no "
                   f"positional bias) on the {scale} scale, with the {lv} interval above 50.")
    else:
        out.append(f"{len(above)} of the {n} harnesses ({_names(above)}) score above 50 (no positional bias) on the "
                   f"{scale} scale with the {lv} interval above 50.")
    finite = [g for g in groups if np.isfinite(g.pbs[scale].estimate)]
    if finite:
        top = max(finite, key=lambda g: g.pbs[scale].estimate)
        p = top.pbs[scale]
        where = f" for {label[id(top)]}" if n > 1 else ""
        out.append(f"The highest PBS is {fmt_estimate_ci(p.estimate, p.ci, 1)}{where} ({lv} turn-level bootstrap), "
                   f"{fmt_num(p.sensitivity[0], 1)} to {fmt_num(p.sensitivity[1], 1)} under other plausible weights.")
    over = [label[id(g)] for g in groups if np.isfinite(g.pbs[scale].estimate) and g.pbs[scale].estimate > 60]
    if over:
        out.append(f"Above 60, where the per-domain breakdown is mandatory: {_names(over)}.")
    totals: dict = {}
    for g in groups:
        for d in _DOMAINS:
            s = g.domains[d]
            c = s.contribution(scale) if s.available else np.nan
            if np.isfinite(c):
                totals.setdefault(d, []).append(c)
    if totals:
        d = max(totals, key=lambda k: np.mean(totals[k]))
        out.append(f"The domain contributing most to the score is {d} ({_NAMES[d]}), "
                   f"{fmt_num(float(np.mean(totals[d])), 2)} on average over "
                   f"{'harnesses' if n > 1 else 'the harness'}.")
    return out[:5]


def toolsense_summary(retrieval: RetrievalResult, comparisons: ComparisonResult | None = None, *,
                      alpha: float = 0.05) -> list[str]:
    """At most four plain sentences summarising ToolSense retrieval (and its paired comparisons) across configurations.

    Parameters
    ----------
    retrieval : RetrievalResult
    comparisons : ComparisonResult, optional
    alpha : float, default 0.05
        Level of the Holm-adjusted McNemar tests counted in the last sentence.

    Returns
    -------
    list of str
        The best constrained recall Rc@k (largest k, all tiers) with its interval and its configuration; the
        largest gap between constrained and free recall (Rc@k - Rf@k: what the model knows only when the tools are
        listed); the tier with the lowest Rc@k; how many paired comparisons differ (Holm-adjusted p <= ``alpha``).
        Each sentence covers all configurations at once.

    Examples
    --------
    The realistic-retrieval benchmark, with a model that answers the listed pool in the file's order (constrained)
    and the same list without its first tool (free):

    >>> import pandas as pd
    >>> from toolbias_stats.toolsense import read_rrb, retrieval_recall
    >>> rrb = read_rrb()
    >>> q = rrb.queries
    >>> preds = pd.DataFrame({"sample_id": q["sample_id"], "constrained": q["pool"],
    ...                       "free": [p[1:] for p in q["pool"]]})
    >>> for s in toolsense_summary(retrieval_recall(rrb, preds, k=[1], n_resamples=0)):
    ...     print(s)
    The constrained recall Rc@1 over all tiers is 0.826, with 95% query-bootstrap interval.
    Free recall Rf@1 falls below constrained recall: 0.230 against 0.826 (a gap of 0.596).
    The medium tier is the hardest to retrieve: Rc@1 0.605.
    """
    res = retrieval
    k = max(res.ks)
    configs = list(res.configs)
    if not configs:
        return []
    lv = fmt_level(res.confidence_level)
    many = len(configs) > 1
    out = []

    def est(c, tier, m):
        e = res.estimates.get((c, tier, k))
        return None if e is None else e.get(m)

    rc = [(c, est(c, "all", "rc")) for c in configs]
    rc = [(c, e) for c, e in rc if e is not None and np.isfinite(e.estimate)]
    if rc:
        c, e = max(rc, key=lambda x: x[1].estimate)
        out.append(f"The {'best ' if many else ''}constrained recall Rc@{k} over all tiers is "
                   f"{fmt_estimate_ci(e.estimate, e.ci)}{f' ({c})' if many else ''}, with {lv} query-bootstrap "
                   "interval.")
    gaps = []
    for c in configs:
        a, b = est(c, "all", "rc"), est(c, "all", "rf")
        if a is not None and b is not None and np.isfinite(a.estimate) and np.isfinite(b.estimate):
            gaps.append((a.estimate - b.estimate, c, a.estimate, b.estimate))
    if gaps:
        g, c, a, b = max(gaps)
        out.append(f"Free recall Rf@{k} falls {'furthest ' if many else ''}below constrained recall"
                   f"{f' for {c}' if many else ''}: {fmt_num(b)} against {fmt_num(a)} (a gap of {fmt_num(g)}).")
    tiers = []
    for t in ("easy", "medium", "hard"):
        vals = [est(c, t, "rc") for c in configs]
        vals = [v.estimate for v in vals if v is not None and np.isfinite(v.estimate)]
        if vals:
            tiers.append((float(np.mean(vals)), t))
    if len(tiers) > 1:
        v, t = min(tiers)
        out.append(f"The {t} tier is the hardest to retrieve: Rc@{k} {fmt_num(v)}"
                   f"{' on average over configurations' if many else ''}.")
    if comparisons is not None and len(comparisons.table):
        tab = comparisons.table
        n_sig = int((tab["p_holm"] <= alpha).sum())
        out.append(f"{n_sig} of the {len(tab)} paired comparisons differ (exact McNemar, Holm-adjusted "
                   f"p \u2264 {alpha:g}).")
    return out[:5]


def choice_model_summary(result: ChoiceModelResult, *, alpha: float = 0.05) -> list[str]:
    """At most three sentences on a :class:`~toolbias_stats.choicemodel.ChoiceModelResult` (issue 26).

    Which groups show a position effect distinguishable from none (Wald test, p <= ``alpha``), the largest
    position effect with its interval (the first row of
    :func:`~toolbias_stats.plots._choicemodel_overview.choice_model_overview_rows`) and the most favoured tool
    (largest worth vs its component's reference, over all groups). Each sentence covers all groups at once.

    Examples
    --------
    >>> from toolbias_stats.choicemodel import choice_model, simulate_logit_log
    >>> s = choice_model_summary(choice_model(simulate_logit_log(n_queries=40, rng=1), rng=1))
    >>> len(s) <= 3
    True
    """
    from ..plots._choicemodel_overview import choice_model_overview_rows

    d = result.to_dict()
    out = []
    tested = [g for g in d["groups"] if g["no_position_effect"]["wald_p"] is not None]
    if tested:
        label = {id(g): (", ".join(str(v) for v in g["keys"].values()) or "all attempts") for g in tested}
        yes = [label[id(g)] for g in tested if g["no_position_effect"]["wald_p"] <= alpha]
        if not yes:
            out.append(f"No group shows a position effect distinguishable from none (Wald test, p > {alpha:g}).")
        elif len(yes) == len(tested):
            out.append(f"Every group ({_names(yes)}) shows a position effect distinguishable from none "
                       f"(Wald test, p <= {alpha:g}).")
        else:
            out.append(f"{_names(yes)} show{'s' if len(yes) == 1 else ''} a position effect distinguishable from "
                       f"none (Wald test, p <= {alpha:g}); the other {len(tested) - len(yes)} group(s) do not.")
    rows = [r for r in choice_model_overview_rows(result) if r["estimate"] is not None]
    if rows:
        r = rows[0]
        lo = np.nan if r["ci_low"] is None else r["ci_low"]
        hi = np.nan if r["ci_high"] is None else r["ci_high"]
        out.append(f"The largest position effect is position {r['position']} for {r['group']}: "
                   f"{fmt_estimate_ci(r['estimate'], (lo, hi))} log-odds vs position 1.")
    tools = [(t["estimate"], t, g) for g in d["groups"] for t in g["tool_effects"] if t["estimate"] is not None]
    if tools:
        est, t, g = max(tools, key=lambda x: x[0])
        grp = ", ".join(str(v) for v in g["keys"].values()) or "all attempts"
        if est > 0:
            out.append(f"The most favoured tool is {t['tool_id']} ({grp}): "
                       f"{fmt_estimate_ci(est, tuple(np.nan if c is None else c for c in t['ci']))} log-odds vs "
                       f"{t['reference_tool']}.")
        else:
            out.append(f"No tool is favoured over its reference tool ({t['reference_tool']}) in any group.")
    return out[:3]
