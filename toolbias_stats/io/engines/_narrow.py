"""Counting by fewer design columns (issue 37): what ``read_study(..., count_by=[...])`` does in every engine.

A study with extra design columns (``design0``, ``temperature``, ...) has one query-level count row per design
cell and query. A command that groups by ``model`` only (``toolbias-stats bias``) does not need those cells:
its statistics sum over them. Counting by the columns it needs only gives the same statistics from a table as
small as the study's without design columns (10M rows with 3 design columns: 9.3M count rows become 2.0M).

Only the *counting key* is narrowed. Everything decided on an attempt's identity (duplicate and repeated rows,
their notes and error messages, statuses, rows excluded by reason) is decided before, on every design column,
exactly as without ``count_by``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from ..._schema import DESIGN_COLUMNS
from .._counts import CELL_KEYS, SelectionCounts, finalize_query_orderings, finalize_table

__all__ = ["counted_design", "narrow_counts", "COUNT_KEYS"]

#: Keys of every count table besides the design columns (naming them in ``count_by`` changes nothing).
COUNT_KEYS = ("cluster_id", "query_id", "n_candidates")


def counted_design(design: Sequence[str], count_by: Iterable[str] | None) -> list[str]:
    """The design columns to count by: ``model``, ``run``, ``condition`` and the extra columns in ``count_by``.

    ``count_by`` None keeps every column. A name that is neither a design column nor a key of the count table
    (a typo, a column the study lacks) also keeps every column, so that the caller's own check of the name (e.g.
    :func:`~toolbias_stats.selection_bias`'s ``by``) sees, and lists, all of them as before.

    Examples
    --------
    >>> design = ["model", "run", "condition", "design0", "design1"]
    >>> counted_design(design, ["model"])
    ['model', 'run', 'condition']
    >>> counted_design(design, ["design1", "cluster_id"])
    ['model', 'run', 'condition', 'design1']
    >>> counted_design(design, ["desing1"]) == design
    True
    """
    design = [str(c) for c in design]
    if count_by is None:
        return design
    wanted = {str(c) for c in count_by}
    if any(c not in design and c not in COUNT_KEYS for c in wanted):
        return design
    return [c for c in design if c in DESIGN_COLUMNS or c in wanted]


def narrow_counts(counts: SelectionCounts, count_by: Iterable[str] | None) -> SelectionCounts:
    """``counts`` summed over the design columns :func:`counted_design` drops (unchanged if it drops none).

    The table, ``cells`` and ``query_orderings`` are summed over those columns and laid out as every engine lays
    them out (:func:`~toolbias_stats.io._counts.finalize_table`), so the result equals the counts an engine
    makes with ``count_by`` (the pandas engine counts its log in full, then calls this; the DuckDB and Dask
    engines group by the kept columns themselves).

    Examples
    --------
    >>> from toolbias_stats.simulate import simulate_selection_log
    >>> log = simulate_selection_log(n_clusters=2, n_queries=5, rng=0).log
    >>> log.data["seed"] = log.data.index % 3          # an extra design column
    >>> full = log.counts()
    >>> full.design_columns, len(full.table)
    (('model', 'run', 'condition', 'seed'), 30)
    >>> narrow = narrow_counts(full, ["model"])
    >>> narrow.design_columns, len(narrow.table), narrow.status_totals() == full.status_totals()
    (('model', 'run', 'condition'), 10, True)
    """
    design = counted_design(counts.design_columns, count_by)
    if design == list(counts.design_columns):
        return counts
    keys = design + list(COUNT_KEYS)
    table = counts.table
    values = [c for c in table.columns if c not in counts.design_columns and c not in keys]
    summed = table.groupby(keys, sort=False, dropna=False, observed=True)[values].sum().reset_index()
    summed = finalize_table(summed, design, counts.k_max)
    cells = counts.cells
    if cells is not None:
        cells = (cells.groupby(design + list(CELL_KEYS), sort=True, dropna=False, observed=True)["count"].sum()
                 .reset_index())
    qo = counts.query_orderings
    if qo is not None:
        qo = finalize_query_orderings(qo, design)
    return SelectionCounts(summed, cells, counts.catalog, tuple(design), counts.level, counts.diagnostics,
                           counts.engine, declared_design=counts.declared_design, query_orderings=qo)
