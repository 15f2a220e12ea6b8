"""Inspect AI extension: counterbalanced tool / option orders per sample and epoch, and position bias at the end
of an eval (issue 25). Registered through Inspect's ``inspect_ai`` entry point (pyproject.toml), so that
``inspect eval`` finds, by name:

- ``toolbias_stats/order_tools`` (solver): puts the tools offered (``state.tools``) and, for multiple-choice
  samples, the options (``state.choices``) of each sample in the order the design gives for its epoch, and
  records the order shown in ``state.metadata["toolbias_order"]``;
- ``toolbias_stats/tool_position`` (scorer): the position (1-based) of the first tool the model called;
- ``toolbias_stats/position_bias`` (metric): delta_pos (and delta_API) with the package's intervals
  (:func:`~toolbias_stats.selection_bias` on the eval's attempts);
- ``toolbias_stats/all_epochs`` (epoch reducer): keeps every epoch's attempt for the metric (Inspect reduces
  the epochs of a sample before its metrics see them; with another reducer the metric sees the first epoch only).

Use ``epochs=Epochs(K, "toolbias_stats/all_epochs")`` with K the number of orderings (K tools for ``cyclic``):
each sample is then shown every row of the Latin square once, and each tool appears at each position equally
often. This module imports inspect_ai; the rest of the package never imports it. See docs/audit.md.
"""

from __future__ import annotations

import hashlib
import warnings

import numpy as np
import pandas as pd
from inspect_ai.scorer import SampleScore, Score, metric, score_reducer, scorer
from inspect_ai.solver import solver
from inspect_ai.tool import ToolDef

from ._design import ORDERINGS, latin_rows

__all__ = ["order_tools", "tool_position", "position_bias", "all_epochs", "design_order"]

#: ``state.metadata`` keys the solver writes.
ORDER_KEY, ROW_KEY, DESIGN_KEY = "toolbias_order", "toolbias_row", "toolbias_orderings"


def _stable(text: str) -> int:
    return int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "little")


def design_order(sample_id, epoch: int, k: int, orderings: str = "cyclic", *, offset=None, seed: int = 0):
    """``(row, permutation)`` the solver uses for one sample and epoch (epochs are 1-based).

    The sample's first row is ``offset`` (``sample.metadata["query_index"]`` when the sample has one, else a
    stable hash of its id) and epoch ``e`` shows row ``(offset + e - 1) mod R`` of :func:`latin_rows`: with
    ``R`` epochs every sample is shown every row once. ``random`` draws a permutation from ``seed``, the id and
    the epoch (row -1).

    Examples
    --------
    >>> design_order("s1", 1, 3, offset=0), design_order("s1", 2, 3, offset=0)
    ((0, (0, 1, 2)), (1, (1, 2, 0)))
    """
    if orderings == "random":
        gen = np.random.default_rng(_stable(f"{seed}:{sample_id}:{epoch}"))
        return -1, tuple(int(x) for x in gen.permutation(k))
    rows = latin_rows(k, orderings)
    start = _stable(f"{seed}:{sample_id}") if offset is None else int(offset)
    row = (start + int(epoch) - 1) % len(rows)
    return row, rows[row]


def _tool_name(tool) -> str:
    return ToolDef(tool).name


@solver(name="order_tools")
def order_tools(orderings: str = "cyclic", seed: int = 0):
    """Show the tools (and multiple-choice options) of each sample in the design's order for its epoch.

    Parameters
    ----------
    orderings : {"cyclic", "balanced", "all", "random", "pairs"}, default "cyclic"
        As :func:`~toolbias_stats.audit.design_study` (``pairs`` is not a full ordering and is refused here).
    seed : int, default 0
        Mixed into the per-sample offset (and the draws of ``random``).

    Notes
    -----
    Put it after the solver that sets ``state.tools`` (``use_tools``) and before ``generate``; for multiple
    choice, before ``multiple_choice()``. The catalog order is the order the tools (options) arrive in. The
    order shown is recorded in ``state.metadata``: ``toolbias_order`` (names, or option texts), ``toolbias_row``
    and ``toolbias_orderings``.
    """
    if orderings not in ORDERINGS or orderings == "pairs":
        raise ValueError(f"`orderings` must be one of {[o for o in ORDERINGS if o != 'pairs']}; got {orderings!r} "
                         "instead.")

    async def solve(state, generate):
        offset = (state.metadata or {}).get("query_index")
        tools = list(state.tools or [])
        if len(tools) > 1:
            row, perm = design_order(state.sample_id, state.epoch, len(tools), orderings, offset=offset, seed=seed)
            state.tools = [tools[i] for i in perm]
            state.metadata[ORDER_KEY] = [_tool_name(t) for t in state.tools]
            state.metadata[ROW_KEY] = row
        choices = state.choices
        if choices is not None and len(choices) > 1:
            row, perm = design_order(state.sample_id, state.epoch, len(choices), orderings, offset=offset, seed=seed)
            # Choice objects keep their original_position, so Inspect's `choice` scorer maps answers back
            choices._choices = [choices[i] for i in perm]
            state.metadata.setdefault(ORDER_KEY, [c.value for c in choices])
            state.metadata[ROW_KEY] = row
        state.metadata[DESIGN_KEY] = orderings
        return state

    return solve


def _first_call(messages):
    for m in messages:
        calls = getattr(m, "tool_calls", None)
        if getattr(m, "role", None) == "assistant" and calls:
            return calls[0].function
    return None


@score_reducer(name="toolbias_stats/all_epochs")
def all_epochs():
    """Epoch reducer that keeps every epoch's attempt (``metadata["epochs"]``) for :func:`position_bias`; its
    value is the mean of the epochs' values."""

    def reduce(scores: list[Score]) -> Score:
        vals = [s.as_float() for s in scores]
        return Score(value=float(np.mean(vals)) if vals else 0.0,
                     metadata={"epochs": [dict(s.metadata or {}) for s in scores]})

    return reduce


@metric(name="position_bias")
def position_bias(clusters=None, n_resamples: int = 1000, confidence_level: float = 0.95, seed: int = 20251121):
    """delta_pos and delta_API of the eval's attempts, with the package's bootstrap intervals.

    Parameters
    ----------
    clusters : dict, optional
        ``{cluster: [tool names]}``; default: every distinct set of tools offered is a cluster.
    n_resamples : int, default 1000
        Query-bootstrap replicates of :func:`~toolbias_stats.selection_bias` (0: no interval).
    confidence_level : float, default 0.95
    seed : int, default 20251121

    Returns
    -------
    Metric
        Its value is a dict: ``delta_pos``, ``delta_pos_ci_low``, ``delta_pos_ci_high``, ``delta_api``,
        ``delta_api_ci_low``, ``delta_api_ci_high`` (``mean_over_runs`` and its interval), ``n_used`` and
        ``n_excluded``.
    """

    def compute(scores: list[SampleScore]):
        log = attempts_log(scores, clusters=clusters)
        from ..metrics import selection_bias

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res = selection_bias(log, by=[], n_resamples=n_resamples, confidence_level=confidence_level,
                                 n_null=0, rng=seed)
        frame = res.to_frame().set_index("metric")
        out = {}
        for m, key in (("delta_pos", "delta_pos"), ("delta_api", "delta_api")):
            if m in frame.index:
                row = frame.loc[m]
                out[key] = float(row["mean_over_runs"])
                out[f"{key}_ci_low"] = float(row.get("ci_low", np.nan))
                out[f"{key}_ci_high"] = float(row.get("ci_high", np.nan))
        out["n_used"] = float(frame["n_used"].iloc[0])
        out["n_excluded"] = float(frame["n_excluded"].iloc[0])
        return out

    return compute


def attempts_log(scores, *, clusters=None):
    """The SelectionLog of an eval's :func:`tool_position` scores (one row per sample and epoch), as the
    ``inspect`` importer reads the log: ``query_id`` is the sample id, ``epoch`` a design column, ``run`` 1."""
    from ..io import SelectionLog, ToolCatalog

    rows = []
    for ss in scores:
        meta = ss.score.metadata or {}
        for ep in meta.get("epochs", [meta]):
            if not ep.get("order"):
                continue
            rows.append({"sample": str(ss.sample_id), "epoch": int(ep.get("epoch", 1)), "order": list(ep["order"]),
                         "chosen": ep.get("chosen_tool"), "status": ep.get("status", "no_call")})
    if not rows:
        raise ValueError("no scored tool-calling attempts (did the samples offer tools?)")
    if clusters is None:
        sets = {}
        for r in rows:
            sets.setdefault(frozenset(r["order"]), f"c{len(sets) + 1}")
        member = {t: c for s, c in sets.items() for t in s}
    else:
        member = {t: str(c) for c, tools in clusters.items() for t in tools}
    catalog = ToolCatalog.from_records([{"tool_id": t, "cluster_id": c} for t, c in member.items()],
                                       source="<inspect eval>")
    frame = pd.DataFrame({
        "model": "inspect", "run": 1, "condition": "base", "epoch": [r["epoch"] for r in rows],
        "cluster_id": [member[r["order"][0]] for r in rows], "query_id": [r["sample"] for r in rows],
        "rotation": pd.array([pd.NA] * len(rows), dtype="Int64"), "ordering": ["|".join(r["order"]) for r in rows],
        "chosen_tool": [r["chosen"] if r["status"] == "ok" else None for r in rows],
        "status": [r["status"] for r in rows], "raw_choice": [r["chosen"] for r in rows],
        "source_file": "<inspect eval>", "source_row": np.arange(1, len(rows) + 1)})
    return SelectionLog.from_frame(frame, catalog, source="<inspect eval>")


@scorer(name="tool_position", metrics=[position_bias()])
def tool_position():
    """Score each sample by the position (1-based) of the first tool the model called; 0 when it called none.

    Notes
    -----
    Its metric is :func:`position_bias` with the defaults; for known clusters or other settings give the task
    ``metrics=[position_bias(clusters=..., n_resamples=...)]``.

    ``Score.metadata``: ``order`` (tool names in the order shown), ``chosen_tool``, ``chosen_position``,
    ``status`` (``ok``, ``no_call`` or ``unknown_tool``, as the importer's) and ``epoch``.
    """
    async def score(state, target):
        order = list((state.metadata or {}).get(ORDER_KEY) or [_tool_name(t) for t in state.tools or []])
        name = _first_call(state.messages)
        if name is None:
            status, pos = "no_call", 0
        elif name in order:
            status, pos = "ok", order.index(name) + 1
        else:
            status, pos = "unknown_tool", 0
        return Score(value=pos, answer=name,
                     metadata={"order": order, "chosen_tool": name, "chosen_position": pos or None,
                               "status": status, "epoch": int(state.epoch)})

    return score
