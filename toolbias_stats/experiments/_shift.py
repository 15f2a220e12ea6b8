"""Effects of an intervention on tool selection: distribution shift, change in bias, per-tool shares.

One function, :func:`selection_shift`, serves every BiasBusters experiment that compares conditions
(metadata perturbations, mitigation, temperature / top-p / size sweeps, orderings, system prompts, tool
count, continued pre-training checkpoints): it compares each level of a design column with a base level,
within groups, from :class:`~toolbias_stats.SelectionCounts`, with paired query-bootstrap intervals, a
label-permutation test of "no change", the noise floor of the shift and a bias-corrected shift whose
interval is calibrated like :func:`~toolbias_stats.calibrated_mean_tv`.

The implementation is split in modules a reader can hold: :mod:`._shift_results` (the result classes),
:mod:`._shift_group` (one group's tensors, bootstrap and permutations), :mod:`._shift_stats` (calibrated shift,
multiplicity adjustment) and :mod:`._shift_levels` (levels of a design column).
"""

from __future__ import annotations

import numbers
import os
import warnings
from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal

import numpy as np

from .._validation import check_by, check_choice, check_confidence_level, check_n_resamples, check_rng
from ..exceptions import DegenerateDataWarning, ExcludedRowsWarning
from ..io._load import load_counts
from ._shift_group import _GroupData
from ._shift_levels import _is_numeric, _levels, _match_level, _py
from ._shift_results import (
    CHANGE_METRICS,
    ERR_BASE,
    ERR_BETWEEN,
    ERR_BETWEEN_IN_BY,
    PAIRINGS,
    SHIFT_METRICS,
    ChangeEstimate,
    ShiftEstimate,
    ShiftGroup,
    ShiftResult,
    TrendResult,
)
from ._shift_stats import _adjust, _adjust_tools, calibrated_mean_shift

if TYPE_CHECKING:
    from ..io import SelectionCounts, SelectionLog, Study

__all__ = ["selection_shift", "ShiftResult", "ShiftGroup", "ShiftEstimate", "ChangeEstimate", "TrendResult",
           "calibrated_mean_shift", "PAIRINGS", "SHIFT_METRICS", "CHANGE_METRICS"]


# ------------------------------------------------------------------------------------------------
def selection_shift(log: SelectionLog | SelectionCounts | Study | str | os.PathLike[str], *, between: str = "condition",
                    base: object = "base", by: str | Sequence[str] = ("model",), n_resamples: int = 2000,
                    n_permutations: int = 2000, confidence_level: float = 0.95,
                    pairing: Literal["auto", "paired", "independent"] = "auto",
                    rng: np.random.Generator | int | None = None) -> ShiftResult:
    """Compare every level of a design column with a base level: distribution shift and change in bias.

    Parameters
    ----------
    log : SelectionLog, SelectionCounts, Study or path to a manifest
        The attempts or their per-query counts; only ``status == "ok"`` attempts enter the rates.
    between : str, default "condition"
        The design column whose levels are compared (any manifest column: ``condition``, ``temperature``,
        ``checkpoint``, ``prompt``, ``ordering_scheme`` ...).
    base : object, default "base"
        The reference level. For a numeric column a string is read as a number (``"0.5"``).
    by : str or sequence of str, default ``("model",)``
        Comparisons are made within each group of these columns.
    n_resamples : int, default 2000
        Query-bootstrap replicates (0: no intervals, no bias correction).
    n_permutations : int, default 2000
        Label permutations for ``null_expected`` and the p-values (0: skipped).
    confidence_level : float, default 0.95
    pairing : {"auto", "paired", "independent"}, default "auto"
        ``"paired"``: queries are resampled jointly across the levels of a group (all rotations and runs of
        a query in every level together), so shared query difficulty cancels in the differences.
        ``"independent"``: each level's queries are resampled on their own. ``"auto"``: paired when each
        level shares at least half of the smaller level's query ids with the base (per group), else independent;
        the choice is recorded in ``ShiftGroup.pairing``.
    rng : None, int or numpy.random.Generator

    Returns
    -------
    ShiftResult

    Raises
    ------
    ValueError
        ``between`` is not a design column (or is also in ``by``), ``base`` is not a level of it, a bad option.

    Warns
    -----
    ExcludedRowsWarning
        Attempts without a valid choice are excluded (counts in ``ShiftGroup.rows``).
    DegenerateDataWarning
        A group without the base level or without another level is skipped (listed in ``skipped``); clusters
        that only one level has are left out of that comparison.

    Notes
    -----
    *Shift.* For cluster ``c`` and level ``L``, ``P_L`` is the mean over the level's runs of the per-run
    selection rates (tools, or positions 1..K); the shift is ``TV(P_L, P_base) = 1/2 sum_i |P_L,i - P_base,i|``,
    averaged over the clusters both levels have (``mean_over_clusters``) with the sd (ddof 1) over clusters, as
    BiasBusters Fig. 5 reports it. A *run* is one combination of the design columns other than ``by`` and
    ``between`` (``run``, and e.g. ``temperature`` when comparing conditions).

    *Change in bias.* ``delta`` of a level is ``mean_over_runs`` of :func:`~toolbias_stats.selection_bias`
    over the compared clusters; ``delta_model = (delta_API + delta_pos) / 2`` over clusters with known
    positions. Changes are level minus base, also normalised by ``1 - 1/K``.

    *Uncertainty.* Query-bootstrap replicates (within cluster; every rotation and run of a query together) are
    drawn jointly for all levels of a group when they share queries (paired), else per level; every statistic
    is recomputed in each replicate (percentile intervals). The plug-in shift has a kink at zero exactly like
    TV to uniform, so ``corrected`` / ``corrected_ci`` invert the bootstrap law of the plug-in along the two
    calibration paths of :func:`~toolbias_stats.calibrated_mean_tv`, with the deviations ``P_L - P_base``
    (see :func:`calibrated_mean_shift`).

    *Null.* Under "no change" a query's valid choices are exchangeable between the two levels and between the
    replicates (runs) of each, within one combination of the other factors (``run`` and an ``attempt`` column are
    replicates, see :class:`~toolbias_stats.io.DeclaredDesign`; e.g. ``temperature`` is a factor when comparing
    conditions). With paired data each permutation deals the valid choices of every (query, list shown) at random
    to the run slots that showed that query in that list, keeping the number of valid choices of every (query, list,
    run slot): missing choices stay where they were, so a change in the ``no_call`` rate is not read as a change in
    selection, and unequal runs keep their sizes (``null_method = "permute valid choices within query and list"``,
    from ``SelectionCounts.query_orderings``; exact when a query's runs are replicates; the tool and the position
    statistics are permuted separately). Counts that keep no list per query (``query_orderings`` None: the Dask
    engine, hand-made counts) fall back to dealing within query (``"permute valid choices within query"``): a
    chooser that prefers a tool then looks more position-variable under the null than it is, and the
    ``shift_pos`` test is conservative (size 0.8% at nominal 5% with balanced runs, issue 35). The run axis is kept, so
    every statistic (per-tool difference, shift, change in bias) is recomputed exactly as observed. Independent
    levels re-allocate whole queries at random (``"re-allocate queries (runs pooled)"``; with different numbers of
    runs a query carries the mean of its runs' counts, ``"... (runs averaged)"``), and the observed statistic is
    computed in the same representation. ``null_expected`` is the permutation mean, ``p_value = (1 + #{T* >= T})
    / (1 + N)``; two-sided for per-tool differences (``|T*| >= |T|``, ties counted half: a mid-p, since a share
    difference takes few values when a level has few valid choices) and for changes in bias, measured from the
    permutation law's centre (the two levels' plug-in biases differ when their valid counts do). Before issue 35
    whole query blocks were swapped, which balanced the two levels' valid counts in every permutation (size up to
    84% at nominal 5% when only the ``no_call`` rate differed; ``analyses/shift_design_size.py``). Holm and
    Benjamini-Hochberg adjust all levels x metrics of the result together, and separately all per-tool tests
    (levels x clusters x tools) of the result (statsmodels ``multipletests``).

    *Few units.* Where a level has valid choices on fewer than ``MIN_UNITS`` (10) queries of a compared cluster,
    no bootstrap interval is given (NaN; ``note`` on each estimate says why): the p-values stay exact.

    *Intervals and tests agree at 0.* A per-tool interval excludes 0 only where the per-tool test rejects at
    ``1 - confidence_level``, and a shift's ``corrected_ci`` has a lower bound above 0 only where the shift test
    rejects at ``(1 - confidence_level) / 2`` (otherwise the bound is moved to 0): the bootstrap law of a level
    with few valid choices is too narrow, the permutation law is exact.

    *Corrected change.* ``ChangeEstimate.corrected`` is the difference of the two levels' calibrated deltas
    (:func:`~toolbias_stats.calibrated_mean_tv`, runs pooled) and ``corrected_ci`` its MOVER interval (Zou &
    Donner 2008); unlike the percentile ``ci`` it follows the plug-in kink of a level near uniformity. Where the
    level whose lower bound enters a limit has an interval reaching 0, that limit adds the two distances instead
    of their quadrature (the upper limit is then the level's own upper bound: delta of the base is >= 0).

    References
    ----------
    Blankenstein et al., "BiasBusters", sec. 4.3 (Fig. 5), 4.4 (Table 5), App. E (Fig. 9), J, Fig. 17.
    Good, P. (2005), Permutation, Parametric and Bootstrap Tests of Hypotheses, ch. 3.
    Efron & Tibshirani (1993), An Introduction to the Bootstrap, ch. 13.
    Zou, G. Y. & Donner, A. (2008), Construction of confidence limits about effect measures: a general approach,
    Statistics in Medicine 27, 1693-1702.

    Examples
    --------
    The same queries under a base condition (a uniform chooser) and a condition that favours the first listed
    position (simulated; 3 clusters of 4 tools, 20 queries in all 4 rotations):

    >>> import numpy as np
    >>> import toolbias_stats as tbs
    >>> from toolbias_stats.experiments import simulate_conditions
    >>> pref = np.ones((3, 4))
    >>> log = simulate_conditions({"base": (pref, None), "first_wins": (pref, [4, 1, 1, 1])}, n_queries=20, rng=0)
    >>> res = tbs.selection_shift(log, between="condition", base="base", n_resamples=200, rng=1)
    >>> res.to_frame()[["condition", "metric", "estimate", "ci_low", "ci_high", "p_value"]].round(3)
        condition       metric  estimate  ci_low  ci_high  p_value
    0  first_wins    shift_api     0.112   0.092    0.234    0.441
    1  first_wins    shift_pos     0.283   0.225    0.362    0.000
    2  first_wins    delta_api    -0.046  -0.092    0.021    0.055
    3  first_wins    delta_pos     0.212   0.096    0.242    0.000
    4  first_wins  delta_model     0.083   0.023    0.113    0.000

    The bundled SIMULATED experiment (44,000 attempts, about 15 s):
    ``tbs.selection_shift(tbs.read_study(tbs.datasets.path("experiments/study.toml")), between="condition",
    base="base", rng=1)``.
    """
    counts = load_counts(log)
    confidence_level, n_resamples, n_permutations, by_cols = _checked(counts, between, by, n_resamples,
                                                                      n_permutations, confidence_level, pairing)
    design = list(counts.design_columns)
    design_of = counts.design
    table = counts.table
    numeric = _is_numeric(table[between])
    all_levels = _levels(table[between])
    base_value = _match_level(base, all_levels, numeric)
    if base_value is None:
        raise ValueError(ERR_BASE.format(base=base, col=between, levels=[_py(v) for v in all_levels]))
    seed = rng if isinstance(rng, (int, type(None))) else "generator"
    gen = check_rng(rng)
    caught, skipped = [], []
    totals = counts.status_totals()
    excluded = {s: n for s, n in totals.items() if s != "ok" and n}
    if excluded:
        msg = (f"{sum(excluded.values())} of {sum(totals.values())} attempts have no valid selection and are "
               f"excluded: {excluded}")
        warnings.warn(msg, ExcludedRowsWarning, stacklevel=2)
        caught.append(msg)
    others = [c for c in design if c not in by_cols and c != between]
    groups, trends = [], []
    grouped = list(table.groupby(by_cols, sort=True, dropna=False, observed=True)) if by_cols else [((), table)]
    for key, sub in grouped:
        key = key if isinstance(key, tuple) else (key,)
        keys = {b: _py(k) for b, k in zip(by_cols, key)}
        levels = _levels(sub[between])
        base_here = _match_level(base_value, levels, numeric)
        if base_here is None or len(levels) < 2:
            why = "has no base level" if base_here is None else "has only the base level"
            skipped.append(f"group {keys} {why} ({between!r} levels: {[_py(v) for v in levels]})")
            continue
        ctx = _GroupData(sub, counts.catalog, between, base_here, levels, others, keys, pairing, n_resamples, gen,
                         caught, numeric, replicates=design_of.replicates,
                         orderings=_orderings_of(counts, by_cols, keys))
        found, trend = _compare_levels(ctx, n_permutations, confidence_level,
                                       numeric and len(levels) >= 2 and n_resamples)
        groups += found
        trends += [trend] if trend is not None else []
    for s in skipped:
        warnings.warn(s, DegenerateDataWarning, stacklevel=2)
    caught.extend(skipped)
    groups = _adjust_tools(_adjust(groups), 1.0 - confidence_level)
    return ShiftResult(groups=groups, trends=trends, between=between, base=_py(base_value), by=by_cols, numeric=numeric,
                       n_resamples=n_resamples, n_permutations=n_permutations, confidence_level=confidence_level,
                       pairing=pairing, seed=seed, skipped=skipped, warnings=caught,
                       design=design_of.describe(n_units=counts.n_units))


def _orderings_of(counts, by_cols, keys):
    """The group's rows of ``counts.query_orderings`` (None when the counts do not keep the lists)."""
    qo = getattr(counts, "query_orderings", None)
    if qo is None:
        return None
    keep = np.ones(len(qo), dtype=bool)
    for b in by_cols:
        want = keys[b]
        col = qo[b].astype(object)
        keep &= col.isna().to_numpy() if want is None or want != want else \
            (col.astype(str) == str(want)).to_numpy()
    return qo[keep]


def _checked(counts, between, by, n_resamples, n_permutations, confidence_level, pairing):
    """The validated ``(confidence_level, n_resamples, n_permutations, by)``; a clear ValueError otherwise."""
    confidence_level = check_confidence_level(confidence_level)
    n_resamples = check_n_resamples(n_resamples)
    if isinstance(n_permutations, bool) or not isinstance(n_permutations, numbers.Integral) or n_permutations < 0:
        raise ValueError(f"`n_permutations` must be a non-negative integer; got {n_permutations!r} instead.")
    n_permutations = int(n_permutations)
    check_choice("pairing", pairing, PAIRINGS)
    design = list(counts.design_columns)
    if not isinstance(between, str) or between not in design:
        raise ValueError(ERR_BETWEEN.format(col=between, cols=sorted(design)))
    by = check_by(by, design)
    if between in by:
        raise ValueError(ERR_BETWEEN_IN_BY.format(col=between, by=by))
    if (n_resamples or n_permutations) and counts.level != "query":
        raise ValueError("the bootstrap and the permutation test work on queries, so they need query-level counts; "
                         f"got counts at level {counts.level!r} instead (count with level='query').")
    return confidence_level, n_resamples, n_permutations, by


def _compare_levels(ctx, n_permutations, confidence_level, with_trend):
    """One group's comparisons of every other level with the base, and its trend (``None`` when not wanted)."""
    found = []
    for level in ctx.others:
        g = ctx.compare(level, n_permutations, confidence_level)
        if g is not None:
            found.append(g)
    return found, ctx.trend(confidence_level) if with_trend else None
