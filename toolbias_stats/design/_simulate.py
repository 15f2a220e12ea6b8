"""Simulation from a pilot's fitted per-query distributions: the truth the planner is checked against."""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import pandas as pd
from scipy import special

from .._schema import STATUSES
from .._validation import check_choice, check_confidence_level, check_rng
from ..io import SelectionCounts
from ..io._counts import finalize_table, position_columns, tool_columns
from ._components import DESIGN_METRICS
from ._data import pilot_groups

if TYPE_CHECKING:
    import os

    from ..io import SelectionLog, Study

__all__ = ["simulate_from_pilot", "check_plan", "PilotWorld"]


class PilotWorld:
    """A data-generating process fitted to one group of a pilot log (one attempt per query, run and rotation).

    A new query is a pilot query drawn at random (with its K rotations); an attempt at (query, rotation) draws
    its outcome (tool, position or no valid choice) from the empirical distribution of that query and rotation
    over the pilot's runs. So the world keeps the pilot's query heterogeneity, rotation effects and
    attempt-level noise, and its true rates are the pilot's rates.
    """

    def __init__(self, pilot, group=None):
        groups, _, _by = pilot_groups(pilot, list(group) if group else [])
        if group:
            groups = [g for g in groups if all(g.keys[k] == v for k, v in group.items())]
        if len(groups) != 1:
            raise ValueError(f"`group` must select exactly one group of the pilot; it selects {len(groups)}")
        if groups[0].layout != "log":
            raise ValueError("simulating from a pilot needs a log with a rotation per attempt (one attempt per "
                             f"query, run and rotation); group {groups[0].keys} does not have one")
        self.group = groups[0]
        self.keys = dict(group or {})
        self.clusters = []
        for cd in self.group.clusters:
            tool = np.where(cd.o_api > 0, cd.x_api.argmax(-1) + 1, 0)
            pos = (np.zeros_like(tool) if cd.x_pos is None else np.where(cd.o_pos > 0, cd.x_pos.argmax(-1) + 1, 0))
            self.clusters.append((cd, tool.astype(np.int64), pos.astype(np.int64)))
        self.n_rot = self.clusters[0][0].shape[2]

    def _draw(self, q, s, r, gen):
        out = []
        for cd, tool, pos in self.clusters:
            q0, s0, r0 = tool.shape
            qsel = gen.integers(0, q0, size=q)
            rots = (np.tile(np.arange(r0), (q, 1)) if r == r0 else
                    np.argsort(gen.random((q, r0)), axis=1)[:, :r])            # (q, r)
            runs = gen.integers(0, s0, size=(q, s, r))
            t = tool[qsel[:, None, None], runs, rots[:, None, :]]                 # (q, s, r)
            p = pos[qsel[:, None, None], runs, rots[:, None, :]]
            out.append((cd, t, p, rots))
        return out

    def counts(self, q, s, r, gen, model="SIMULATED") -> SelectionCounts:
        """Query-level counts of one simulated study with ``q`` queries per cluster, ``s`` runs, ``r`` rotations."""
        draws = self._draw(q, s, r, gen)
        k_max = max(cd.k for cd, *_ in draws)
        frames = []
        for cd, t, p, _ in draws:
            tc = np.stack([(t == j).sum(-1) for j in range(1, k_max + 1)], -1)    # (q, s, K)
            pc = np.stack([(p == j).sum(-1) for j in range(1, k_max + 1)], -1)
            n_ok = (t > 0).sum(-1)
            qq, ss = np.meshgrid(np.arange(q), np.arange(s), indexing="ij")
            f = pd.DataFrame({"model": model, "run": (ss + 1).ravel(), "condition": "base",
                              "cluster_id": cd.cluster, "query_id": [f"q{i:06d}" for i in qq.ravel()],
                              "n_candidates": cd.k_pos or cd.k})
            for st in STATUSES:            # every status column of the schema (no valid choice -> no_call)
                f[f"n_{st}"] = n_ok.ravel() if st == "ok" else ((r - n_ok).ravel() if st == "no_call" else 0)
            for j, col in enumerate(tool_columns(k_max)):
                f[col] = tc[..., j].ravel()
            for j, col in enumerate(position_columns(k_max)):
                f[col] = pc[..., j].ravel()
            frames.append(f)
        design = ("model", "run", "condition")
        table = finalize_table(pd.concat(frames, ignore_index=True), design, k_max)
        return SelectionCounts(table, None, self.catalog, design, "query", {}, "simulated")

    @property
    def catalog(self):
        return self._catalog

    def log(self, q, s, r, gen, model="SIMULATED"):
        """One simulated study as a :class:`SelectionLog` (rotations kept: a pilot for the planner)."""
        from ..io import SelectionLog

        draws = self._draw(q, s, r, gen)
        frames = []
        for cd, t, _, rots in draws:
            tools = np.array([None] + self.catalog.tools(cd.cluster), dtype=object)
            qq, ss, rr = np.meshgrid(np.arange(q), np.arange(s), np.arange(r), indexing="ij")
            frames.append(pd.DataFrame({
                "model": model, "run": (ss + 1).ravel(), "condition": "base", "cluster_id": cd.cluster,
                "query_id": [f"q{i:06d}" for i in qq.ravel()],
                "rotation": np.asarray(cd.rotations, dtype=np.int64)[rots[qq, rr]].ravel(),
                "chosen_tool": tools[t.ravel()], "status": np.where(t.ravel() > 0, "ok", "no_call"),
                "source_file": "<simulated from pilot>"}))
        frame = pd.concat(frames, ignore_index=True)
        frame["source_row"] = np.arange(1, len(frame) + 1)
        return SelectionLog.from_frame(frame, self.catalog, source="<simulated from pilot>")


def simulate_from_pilot(pilot: SelectionLog | Study | str | os.PathLike[str], *, queries: int, runs: int,
                        rotations: int | None = None, group: Mapping[str, Any] | None = None, n_sims: int = 1,
                        as_log: bool = False,
                        rng: np.random.Generator | int | None = None) -> list[SelectionCounts] | list[SelectionLog]:
    """Studies simulated from a pilot's fitted per-query distributions (see :class:`PilotWorld`).

    Parameters
    ----------
    pilot : SelectionLog, Study or manifest path
        With a ``rotation`` per attempt.
    queries, runs : int
        Queries per cluster and runs of each simulated study.
    rotations : int, optional
        Rotations per query (default: all of the pilot's); fewer are drawn at random per query.
    group : dict, optional
        ``{column: value}`` selecting one group of the pilot (e.g. ``{"model": "GPT-4.1 mini"}``).
    n_sims : int, default 1
    as_log : bool, default False
        Return :class:`SelectionLog` objects (rotations kept) instead of query-level counts.
    rng : None, int or numpy.random.Generator

    Returns
    -------
    list of SelectionCounts or SelectionLog

    Examples
    --------
    Two studies of 5 queries per cluster and one run drawn from a simulated pilot, as query-level counts, and one
    as a log with 2 of the 3 rotations per query:

    >>> from toolbias_stats.design import simulate_from_pilot
    >>> from toolbias_stats.simulate import simulate_selection_log
    >>> pilot = simulate_selection_log(n_clusters=2, n_tools=3, n_queries=8, n_runs=2, rng=0).log
    >>> sims = simulate_from_pilot(pilot, queries=5, runs=1, n_sims=2, rng=2)
    >>> len(sims), type(sims[0]).__name__, sims[0].level, len(sims[0].table)
    (2, 'SelectionCounts', 'query', 10)
    >>> logs = simulate_from_pilot(pilot, queries=5, runs=1, rotations=2, as_log=True, rng=2)
    >>> type(logs[0]).__name__, len(logs[0].data)
    ('SelectionLog', 20)
    """
    gen = check_rng(rng)
    world = _world(pilot, group)
    r = world.n_rot if rotations is None else int(rotations)
    if not 1 <= r <= world.n_rot:
        raise ValueError(f"`rotations` must be in 1..{world.n_rot}; got {rotations!r} instead.")
    make = world.log if as_log else world.counts
    return [make(int(queries), int(runs), r, gen) for _ in range(int(n_sims))]


def _world(pilot, group):
    from ..io import Study, load_selection_log

    log = pilot.log if isinstance(pilot, Study) else load_selection_log(pilot)
    world = PilotWorld(log, group)
    world._catalog = log.catalog
    return world


def check_plan(pilot: SelectionLog | Study | str | os.PathLike[str], designs: Sequence[Sequence[int]], *,
               group: Mapping[str, Any] | None = None, metrics: Sequence[str] = ("delta_api", "delta_pos"),
               n_sims: int = 40, n_resamples: int = 400, n_sims_sd: int = 0, confidence_level: float = 0.95,
               plan_from: Literal["simulated", "pilot"] = "simulated", run_effect: bool = True, n_draws: int = 4000,
               rng: np.random.Generator | int | None = None, progress: bool = False) -> pd.DataFrame:
    """Planner predictions against simulation with the package's own estimators.

    A world is fitted to one group of the pilot (:class:`PilotWorld`). The planner is fitted to a pilot study
    drawn from that world with the pilot's design (``plan_from="simulated"``, what a user has) or to the pilot
    itself (``"pilot"``); for each design, ``n_sims`` studies are drawn from the world and analysed with
    :func:`~toolbias_stats.selection_bias` (query-bootstrap percentile and BCa intervals).

    Parameters
    ----------
    pilot : SelectionLog, Study or manifest path
    designs : sequence of (queries, runs, rotations)
    group : dict, optional
    metrics : sequence of str
    n_sims, n_resamples : int
        Simulated studies per design analysed with intervals, and their bootstrap replicates.
    n_sims_sd : int, default 0
        Further simulated studies per design analysed for the point estimate only (cheap): they sharpen the
        sampling sd (``simulated_sd_half_width`` uses all ``n_sims + n_sims_sd`` estimates).
    confidence_level : float
    plan_from : {"simulated", "pilot"}
    run_effect : bool, default True
        Passed to :func:`plan_study`.
    n_draws : int
    rng : None, int or numpy.random.Generator
    progress : bool

    Returns
    -------
    pandas.DataFrame
        One row per design and metric: ``predicted_half_width`` (the package's interval) and
        ``predicted_error_half_width`` (the estimate's error, run effect included); the mean half-widths of the
        simulated studies' ``percentile`` and ``bca`` intervals (``simulated_percentile_half_width``,
        ``simulated_bca_half_width``, with Monte-Carlo standard errors); ``simulated_sd_half_width`` (z times the sd
        of their estimates: the sampling truth); the ratios predicted / simulated (``ratio_sd`` from the predicted
        error half-width); ``predicted_estimate`` and ``simulated_estimate`` (mean plug-in) and the world's true
        delta.

    Examples
    --------
    The planner's half-width for a simulated pilot's own design against the sd of the estimates of 4 studies
    drawn from the world fitted to it (a real check uses ``n_sims`` in the hundreds):

    >>> from toolbias_stats.design import check_plan
    >>> from toolbias_stats.simulate import simulate_selection_log
    >>> pilot = simulate_selection_log(n_clusters=2, n_tools=3, n_queries=8, n_runs=2, rng=0).log
    >>> res = check_plan(pilot, [(8, 2, 3)], metrics=["delta_api"], n_sims=4, n_resamples=50, n_draws=200, rng=1)
    >>> res[["queries", "runs", "rotations", "predicted_half_width", "simulated_sd_half_width"]].round(3)
       queries  runs  rotations  predicted_half_width  simulated_sd_half_width
    0        8     2          3                 0.101                    0.096
    """
    from ..metrics import selection_bias
    from ._plan import plan_study

    check_choice("plan_from", plan_from, ("simulated", "pilot"))
    confidence_level = check_confidence_level(confidence_level)
    for m in metrics:
        check_choice("metrics", m, DESIGN_METRICS)
    gen = check_rng(rng)
    world = _world(pilot, group)
    cd0 = world.group.clusters[0]
    q0, s0, r0 = cd0.shape
    pilot_log = world.log(q0, s0, r0, gen) if plan_from == "simulated" else \
        _world_log_of_group(pilot, group)
    designs = [tuple(int(x) for x in d) for d in designs]
    z = float(special.ndtri(0.5 + confidence_level / 2))
    rows = []
    it = designs
    if progress:
        from tqdm.auto import tqdm

        it = tqdm(designs, desc="check_plan", unit="design", leave=False)
    true = _world_truth(world)
    for q, s, r in it:
        plan = plan_study(pilot_log, metrics=metrics, by=[], queries=[q], runs=[s], rotations=[r],
                          confidence_level=confidence_level, n_draws=n_draws, run_effect=run_effect, rng=gen)
        sims: dict[str, list[tuple[float, float, float]]] = {m: [] for m in metrics}
        for _ in range(n_sims):
            counts = world.counts(q, s, r, gen)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                res = selection_bias(counts, by=[], n_resamples=n_resamples, n_null=0, ci_method="bca",
                                     confidence_level=confidence_level, rng=gen)
            g = res.groups[0]
            for m in metrics:
                tv = getattr(g, m)
                sims[m].append((tv.mean_over_runs, (tv.ci_percentile.high - tv.ci_percentile.low) / 2,
                                (tv.ci.high - tv.ci.low) / 2))
        extra: dict[str, list[float]] = {m: [] for m in metrics}
        for _ in range(n_sims_sd):
            counts = world.counts(q, s, r, gen)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                g = selection_bias(counts, by=[], n_resamples=0, n_null=0).groups[0]
            for m in metrics:
                extra[m].append(getattr(g, m).mean_over_runs)
        for m in metrics:
            arr = np.array(sims[m])
            all_est = np.concatenate([arr[:, 0], extra[m]])
            pr = plan.grid[plan.grid["metric"] == m].iloc[0]
            pred, pred_err = float(pr["half_width"]), float(pr["error_half_width"])
            pct, bca, sd_hw = float(arr[:, 1].mean()), float(arr[:, 2].mean()), z * float(all_est.std(ddof=1))
            rows.append({"queries": q, "runs": s, "rotations": r, "calls_per_model": int(pr["calls"]),
                         "metric": m, "predicted_half_width": pred, "predicted_error_half_width": pred_err,
                         "simulated_percentile_half_width": pct,
                         "simulated_percentile_half_width_se": float(arr[:, 1].std(ddof=1) / np.sqrt(len(arr))),
                         "simulated_bca_half_width": bca,
                         "simulated_bca_half_width_se": float(arr[:, 2].std(ddof=1) / np.sqrt(len(arr))),
                         "simulated_sd_half_width": sd_hw,
                         "ratio_percentile": pred / pct, "ratio_bca": pred / bca, "ratio_sd": pred_err / sd_hw,
                         "predicted_estimate": float(pr["expected_estimate"]),
                         "simulated_estimate": float(all_est.mean()), "true_delta": true[m], "n_sims": n_sims,
                         "n_sims_sd": n_sims + n_sims_sd})
    return pd.DataFrame(rows)


def _world_log_of_group(pilot, group):
    from ..io import Study, load_selection_log

    log = pilot.log if isinstance(pilot, Study) else load_selection_log(pilot)
    if not group:
        return log
    d = log.data
    sel = np.ones(len(d), bool)
    for k, v in group.items():
        sel &= (d[k] == v).to_numpy()
    return log.subset(sel) if hasattr(log, "subset") else type(log).from_frame(d[sel].reset_index(drop=True),
                                                                              log.catalog)


def _world_truth(world):
    """True cluster-averaged delta of the world (its rates are the pilot's rates)."""
    out = {}
    api, pos = [], []
    for cd, _tool, _p in world.clusters:
        pa = cd.x_api.sum((0, 1, 2)) / max(cd.o_api.sum(), 1)
        api.append(0.5 * np.abs(pa - 1 / cd.k).sum())
        if cd.x_pos is not None:
            pp = cd.x_pos.sum((0, 1, 2)) / max(cd.o_pos.sum(), 1)
            pos.append(0.5 * np.abs(pp - 1 / cd.k_pos).sum())
    out["delta_api"] = float(np.mean(api))
    out["delta_pos"] = float(np.mean(pos)) if pos else np.nan
    out["delta_model"] = (out["delta_api"] + out["delta_pos"]) / 2
    return out
