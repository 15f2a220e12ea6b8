"""SelectionCounts: the sufficient statistics every bias statistic is computed from.

Every statistic of the package depends on the attempts only through counts: how often each tool and each
position was chosen, per query (for the bootstrap) or per ordering (for the Bayesian model), and how many
attempts ended in each status. An *engine* computes these counts (``pandas`` from an in-memory
:class:`SelectionLog`, ``duckdb`` from files in place, ``dask`` on a cluster); the statistics never need the rows.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from .._schema import COUNT_COLUMN, STATUSES
from ._catalog import ToolCatalog

if TYPE_CHECKING:
    from ._selection_log import SelectionLog
    from ._study_design import DeclaredDesign

__all__ = ["SelectionCounts", "QueryArrays", "COUNT_LEVELS", "STATUS_COLUMNS", "ROW_COLUMNS", "counts_from_log",
           "QUERY_ORDERING_KEYS", "QUERY_ORDERINGS_MAX_OK", "finalize_query_orderings"]

#: Levels of aggregation: per query (everything, bootstrap included) or per cluster (point estimates only).
COUNT_LEVELS = ("query", "cluster")
#: Count columns of attempts by status (``n_ok`` = valid choices).
STATUS_COLUMNS = tuple(f"n_{s}" for s in STATUSES)
#: Aggregated logs only: table rows by status (``n_*`` are then sums of ``count``, i.e. attempts).
ROW_COLUMNS = tuple(f"rows_{s}" for s in STATUSES)
#: Columns of the ``cells`` table besides the design columns and ``count``.
CELL_KEYS = ("cluster_id", "ordering", "status", "chosen_tool", "chosen_position")
#: Keys of the ``query_orderings`` table besides the design columns (issue 35: the paired null of
#: :func:`~toolbias_stats.selection_shift` deals a query's valid choices within the list each was shown in).
QUERY_ORDERING_KEYS = ("cluster_id", "query_id", "ordering", "api_index", "chosen_rank")
#: Above this many valid choices the DuckDB engine does not build ``query_orderings`` (a frame of up to one row per
#: valid choice would undo the compact arrays of a large log); the shift's paired null then deals within query.
QUERY_ORDERINGS_MAX_OK = 5_000_000


def tool_columns(k: int) -> list[str]:
    """``tool_1 .. tool_k``: choices of the tool with catalog index ``api_index`` = 1..k."""
    return [f"tool_{i}" for i in range(1, k + 1)]


def position_columns(k: int) -> list[str]:
    """``pos_1 .. pos_k``: valid choices whose position is known, by rank among the cluster's tools as shown
    (``chosen_rank``; the position in the list when the list is the cluster's tools)."""
    return [f"pos_{i}" for i in range(1, k + 1)]


class QueryArrays:
    """The query-level count table as compact arrays, rows in the table's order (an engine's output at scale).

    ``keys``: ``{column: values}`` for the design columns, ``cluster_id``, ``query_id`` and ``n_candidates`` in
    the table's column order (text keys as categoricals with sorted categories, numbers as arrays of the
    smallest integer type that holds them; ``key_dtypes`` their dtype in the table); ``counts``: ``{column:
    unsigned integer array}`` for ``n_*``, ``tool_*`` and ``pos_*``. :meth:`to_table` builds the frame that
    :func:`finalize_table` returns for the same counts (the table is sorted by key already); the bias reads the
    arrays themselves, so a 100M-row log never has its int64 table in memory.

    Examples
    --------
    >>> import numpy as np, pandas as pd
    >>> cat = pd.Categorical.from_codes([0, 0], categories=pd.Index(["a"], dtype="string"))
    >>> qid = pd.Categorical.from_codes([0, 1], categories=pd.Index(["1", "2"], dtype="string"))
    >>> keys = {"model": cat, "run": np.array([1, 1], dtype=np.int8), "condition": cat, "cluster_id": cat,
    ...         "query_id": qid, "n_candidates": np.array([2, 2], dtype=np.int8)}
    >>> counts = {c: np.array([1, 0], dtype=np.uint8) for c in ["n_ok", "tool_1", "tool_2", "pos_1", "pos_2"]}
    >>> qa = QueryArrays(keys, {"run": np.dtype(np.int64), "n_candidates": np.dtype(np.int64)}, counts, 2)
    >>> qa.to_table()[["query_id", "run", "n_ok", "n_no_call", "tool_1"]].to_dict("records")
    [{'query_id': '1', 'run': 1, 'n_ok': 1, 'n_no_call': 0, 'tool_1': 1}, {'query_id': '2', 'run': 1, 'n_ok': 0, \
'n_no_call': 0, 'tool_1': 0}]
    """

    def __init__(self, keys: dict[str, Any], key_dtypes: dict[str, np.dtype], counts: dict[str, np.ndarray],
                 k_max: int) -> None:
        self.keys, self.key_dtypes, self.counts, self.k_max = keys, key_dtypes, counts, k_max

    def __len__(self) -> int:
        return len(next(iter(self.counts.values()))) if self.counts else 0

    def count(self, name: str) -> np.ndarray:
        """The count column ``name`` (zeros when no row has it: a status nobody had)."""
        col = self.counts.get(name)
        return np.zeros(len(self), dtype=np.uint8) if col is None else col

    def matrix(self, names: Sequence[str]) -> np.ndarray:
        """The count columns ``names`` side by side, (rows, len(names)), in their compact integer type."""
        cols = [self.count(c) for c in names]
        dtype = np.result_type(*cols) if cols else np.uint8
        out = np.empty((len(self), len(cols)), dtype=dtype)
        for j, col in enumerate(cols):
            out[:, j] = col
        return out

    def key(self, name: str) -> Any:
        """A key column as the table holds it (numbers in their table dtype)."""
        col = self.keys[name]
        return col.astype(self.key_dtypes[name]) if name in self.key_dtypes else col

    def to_table(self) -> pd.DataFrame:
        """The count table (``finalize_table``'s layout: counts int64, text keys categorical)."""
        out = pd.DataFrame({c: self.key(c) for c in self.keys})
        names = ([f"n_{s}" for s in STATUSES] + tool_columns(self.k_max) + position_columns(self.k_max))
        for c in names:
            out[c] = self.count(c).astype(np.int64)
        return out


class _LazyTable:
    """A frame field of :class:`SelectionCounts` (``table``, ``query_orderings``): a DataFrame (or None), or a
    function making it on first use."""

    def __init__(self, name: str) -> None:
        self._slot = "_lazy_" + name

    def __get__(self, obj: Any, objtype: Any = None) -> pd.DataFrame:
        if obj is None:
            raise AttributeError(self._slot)
        value = obj.__dict__[self._slot]
        if callable(value):
            value = value()
            obj.__dict__[self._slot] = value
        return value

    def __set__(self, obj: Any, value: pd.DataFrame | Callable[[], pd.DataFrame]) -> None:
        obj.__dict__[self._slot] = value


@dataclass(frozen=True, eq=False)
class SelectionCounts:
    """Counts of choices per query (or per cluster) and per ordering: the sufficient statistics of a log.

    Build it with :meth:`SelectionLog.counts` (pandas engine), :func:`toolbias_stats.read_study` with
    ``engine="duckdb"`` or ``engine="dask"``, or :func:`toolbias_stats.count_selections`.

    Attributes
    ----------
    table : pandas.DataFrame
        One row per (design columns, ``cluster_id``, ``query_id``, ``n_candidates``) at level
        ``"query"``; at level ``"cluster"`` ``query_id`` is null and there is one row per
        (design columns, ``cluster_id``, ``n_candidates``). Columns: the keys, ``n_ok``,
        ``n_no_call``, ``n_unknown_tool``, ``n_parse_error``, ``n_forced``, ``n_off_cluster``
        (attempts by status), ``tool_1 .. tool_K`` (valid choices of the tool with catalog index 1..K
        of its cluster; K is the largest cluster) and ``pos_1 .. pos_K`` (valid choices with a known
        position, by ``chosen_rank``: the rank among the cluster's tools as shown, which is the list
        position when the list is the cluster's tools), all int64. For an aggregated log (a ``count``
        column, see :attr:`weighted`) all of these are sums of ``count`` (attempts) and four more columns ``rows_ok``,
        ``rows_no_call``, ``rows_unknown_tool``, ``rows_parse_error`` give the table rows by status;
        logs without counts have no ``rows_*`` columns (one row is one attempt).
    cells : pandas.DataFrame or None
        One row per (design columns, ``cluster_id``, ``ordering``, ``status``, ``chosen_tool``,
        ``chosen_position``) with ``count``: what the Bayesian model needs (which tool was chosen
        under which list). None when an engine was asked not to count them.
    catalog : ToolCatalog
    design_columns : tuple of str
        ``model``, ``run``, ``condition`` and the extra manifest columns, in order.
    query_orderings : pandas.DataFrame or None
        Valid choices per (design columns, ``cluster_id``, ``query_id``, ``ordering``, ``api_index``,
        ``chosen_rank``) with ``count`` (``chosen_rank`` 0 where the position is unknown, ``ordering`` missing
        where no list is known): which tool was chosen at which rank, per query *and list shown*. The paired
        null of :func:`~toolbias_stats.selection_shift` deals choices only between attempts that saw the same
        query in the same list (issue 35). Query-level counts of the pandas and DuckDB engines (with
        ``cells``; DuckDB: up to ``QUERY_ORDERINGS_MAX_OK`` valid choices); None otherwise.
    level : {"query", "cluster"}
    diagnostics : dict
        Reader notes keyed by source file (rows, rows by status, ...).
    engine : str
        The engine that produced the counts.
    declared_design : mapping, optional
        A declared study design; :attr:`design` gives the design in force (unit, replicates, factors, strata)
        and :attr:`n_units` the number of units.

    Notes
    -----
    *Sufficiency.* For a cluster with K tools, delta_API, delta_pos and delta_model (per run, mean over runs,
    pooled), their null expectations and Monte-Carlo p-values are functions of the per-(design, cluster)
    counts alone; the query bootstrap (which resamples queries with all their rotations and runs) and the
    BCa jackknife are functions of the per-query counts; the Bayesian multinomial model is a function of the
    ``cells``. Rows by status per group come from the ``n_*`` columns. So every statistic computed from a
    :class:`SelectionLog` equals the one computed from its counts (the test suite checks this). What the
    counts do not keep: provenance (file and row of each attempt), raw choice texts and the pairing of a
    query's choices with its orderings (a per-query ordering model needs the log).

    Examples
    --------
    >>> from toolbias_stats.simulate import simulate_selection_log
    >>> log = simulate_selection_log(n_clusters=2, n_queries=5, rng=0).log
    >>> counts = log.counts()
    >>> counts.n_rows, len(counts.table), counts.k_max
    (50, 10, 5)
    >>> counts.collapse("cluster").table[["cluster_id", "n_ok"]].to_dict("records")
    [{'cluster_id': '1', 'n_ok': 25}, {'cluster_id': '2', 'n_ok': 25}]
    """

    #: a DataFrame; an engine at scale passes a function that builds it on first use from :attr:`query_arrays`
    #: (the field's descriptor, set below the class, calls it)
    table: pd.DataFrame
    cells: pd.DataFrame
    catalog: ToolCatalog
    design_columns: tuple
    level: str = "query"
    diagnostics: dict = field(default_factory=dict)
    engine: str = "pandas"
    #: the query-level table as compact arrays (DuckDB engine, unweighted logs); None otherwise
    query_arrays: QueryArrays | None = field(default=None, repr=False)
    #: a declared design (a mapping of :data:`~toolbias_stats.io._selection_log.DESIGN_KEYS`), if any
    declared_design: Mapping[str, Any] | None = field(default=None, repr=False)
    #: valid choices per query and list shown (see the class notes); None where an engine did not count them
    query_orderings: pd.DataFrame | None = field(default=None, repr=False)

    # -- views ------------------------------------------------------------------------------
    @property
    def design(self) -> DeclaredDesign:
        """The study design (:class:`~toolbias_stats.io.DeclaredDesign`): declared, else derived from the design
        columns (``run`` and ``attempt`` are replicates; the other design columns are factors)."""
        from ._study_design import DeclaredDesign

        return DeclaredDesign.from_columns(self.design_columns, declared=self.declared_design)

    @property
    def n_units(self) -> int | None:
        """Independent units (distinct cluster and query); None for cluster-level counts. Rows without a cluster
        (attempts no cluster could be given, excluded by status; issue 36) are no unit."""
        if self.level != "query":
            return None
        if self.compact is not None:
            keys = self.compact.keys
            cl = np.asarray(keys["cluster_id"].codes, dtype=np.int64)
            pairs = cl * (len(keys["query_id"].categories) + 1) + np.asarray(keys["query_id"].codes, dtype=np.int64)
            return int(np.unique(pairs[cl >= 0]).size)
        table = self.table[self.table["cluster_id"].notna()]
        return int(table.groupby(["cluster_id", "query_id"], observed=True, dropna=False).ngroups)

    def with_design(self, design: Mapping[str, Any] | DeclaredDesign | None = None, **keys: Any) -> SelectionCounts:
        """A copy with a declared design (see :meth:`SelectionLog.with_design`)."""
        from dataclasses import replace

        from ._study_design import DeclaredDesign

        decl = dict(design.to_dict() if isinstance(design, DeclaredDesign) else (design or {}))
        decl.update(keys)
        decl.pop("source", None)
        DeclaredDesign.from_columns(self.design_columns, declared=decl)
        table = self.__dict__.get("_lazy_table")
        return replace(self, table=table, declared_design=decl or None)

    @property
    def compact(self) -> QueryArrays | None:
        """:attr:`query_arrays` while the table has not been built (then the arrays answer the views)."""
        return self.query_arrays if callable(self.__dict__.get("_lazy_table")) else None

    @property
    def k_max(self) -> int:
        """Number of ``tool_*`` (and ``pos_*``) columns."""
        if self.compact is not None:
            return self.compact.k_max
        return sum(1 for c in self.table.columns if c.startswith("tool_"))

    @property
    def n_rows(self) -> int:
        """Attempts represented (every status)."""
        return sum(self.status_totals().values())

    @property
    def weighted(self) -> bool:
        """Whether the counts come from an aggregated log (rows with a ``count``; ``rows_*`` columns present)."""
        if self.compact is not None:
            return False
        return ROW_COLUMNS[0] in self.table.columns

    def row_totals(self) -> dict:
        """``{status: table rows}`` over the whole study (equals :meth:`status_totals` for unweighted logs)."""
        if not self.weighted:
            return self.status_totals()
        sums = self.table[list(ROW_COLUMNS)].sum()
        return {s: int(sums[f"rows_{s}"]) for s in STATUSES}

    def status_totals(self) -> dict:
        """``{status: attempts}`` over the whole study (zeros included)."""
        if self.compact is not None:
            return {s: int(self.compact.count(f"n_{s}").sum(dtype=np.int64)) for s in STATUSES}
        sums = self.table[list(STATUS_COLUMNS)].sum()
        return {s: int(sums[f"n_{s}"]) for s in STATUSES}

    def summary(self, by: Sequence[str] = ("model",)) -> pd.DataFrame:
        """Attempts by status per ``by`` group: ``total`` and one column per status."""
        by = list(by)
        out = self.table.groupby(by, sort=True, dropna=False)[list(STATUS_COLUMNS)].sum()
        out.columns = list(STATUSES)
        out.insert(0, "total", out.sum(axis=1))
        out = out.reset_index()
        for c in by:
            if isinstance(out[c].dtype, pd.CategoricalDtype):
                out[c] = out[c].astype("string")
        return out

    def collapse(self, level: str = "cluster") -> SelectionCounts:
        """The same counts at a coarser level (``"cluster"``: summed over queries)."""
        if level not in COUNT_LEVELS:
            raise ValueError(f"`level` must be one of {list(COUNT_LEVELS)}; got {level!r} instead.")
        if level == self.level or level == "query":
            if level != self.level:
                raise ValueError("cluster-level counts cannot be expanded to query level; count the log again.")
            return self
        keys = list(self.design_columns) + ["cluster_id", "n_candidates"]
        value_cols = [c for c in self.table.columns if c not in keys + ["query_id"]]
        tab = self.table.groupby(keys, sort=False, dropna=False)[value_cols].sum().reset_index()
        tab.insert(len(self.design_columns) + 1, "query_id", pd.array([pd.NA] * len(tab), dtype="string"))
        return SelectionCounts(tab, self.cells, self.catalog, self.design_columns, "cluster", self.diagnostics,
                               self.engine, declared_design=self.declared_design)   # no query_orderings: no queries

    def to_frame(self) -> pd.DataFrame:
        """The per-query (or per-cluster) count table (a copy)."""
        return self.table.copy()

    def __len__(self):
        return self.n_rows

    def __repr__(self):
        n_table = len(self.compact) if self.compact is not None else len(self.table)
        return (f"SelectionCounts(level={self.level!r}, engine={self.engine!r}, {self.n_rows} attempts in "
                f"{n_table} count rows, status={self.status_totals()})")


# set after the dataclass is made, so that `table` stays a field without a default
setattr(SelectionCounts, "table", _LazyTable("table"))  # noqa: B010
# the pandas engine's query_orderings are summed on first use (issue 37: `validate` never reads them)
setattr(SelectionCounts, "query_orderings", _LazyTable("query_orderings"))  # noqa: B010


# ------------------------------------------------------------------------------------------------
def counts_from_log(log: SelectionLog, *, level: str = "query") -> SelectionCounts:
    """The pandas engine: count an in-memory :class:`SelectionLog`.

    Parameters
    ----------
    log : SelectionLog
    level : {"query", "cluster"}, default "query"

    Returns
    -------
    SelectionCounts
        Engine ``"pandas"``; the same frames as the DuckDB and Dask engines give for the same rows.

    Examples
    --------
    >>> from toolbias_stats.simulate import simulate_selection_log
    >>> log = simulate_selection_log(n_clusters=2, n_queries=5, rng=0).log
    >>> counts_from_log(log, level="cluster").n_rows
    50
    """
    if level not in COUNT_LEVELS:
        raise ValueError(f"`level` must be one of {list(COUNT_LEVELS)}; got {level!r} instead.")
    d = log.data
    design = tuple(log.design_columns)
    catalog = log.catalog
    k_max = max(catalog.n_tools(c) for c in catalog.clusters)
    keys = list(design) + ["cluster_id", "query_id", "n_candidates"]
    if level == "cluster":
        keys.remove("query_id")
    codes = d.groupby(keys, sort=True, dropna=False).ngroup().to_numpy()
    n_groups = int(codes.max()) + 1 if len(codes) else 0
    first = np.unique(codes, return_index=True)[1]              # first row of every group
    status = d["status"].to_numpy(dtype=object)
    out = d[keys].iloc[first].reset_index(drop=True)   # only the key columns are taken
    if level == "cluster":
        out.insert(len(design) + 1, "query_id", pd.array([pd.NA] * n_groups, dtype="string"))
    # an aggregated log: every row stands for `count` attempts (sums are exact: integers below 2^53 as floats)
    w = d[COUNT_COLUMN].to_numpy(dtype=np.int64) if COUNT_COLUMN in d.columns else None
    for s in STATUSES:
        sel = status == s
        out[f"n_{s}"] = _bincount(codes[sel], None if w is None else w[sel], n_groups)
    ok = status == "ok"
    tool_idx = tool_index(catalog, d["cluster_id"].to_numpy(dtype=object), d["chosen_tool"].to_numpy(dtype=object))
    _add_counts(out, "tool", codes[ok], tool_idx[ok], n_groups, k_max, None if w is None else w[ok])
    # positions of delta_pos: the rank of the chosen tool among its cluster's tools as shown (= chosen_position
    # when the list is the cluster's tools; issue 20: a list may offer other tools too)
    pos = d["chosen_rank"].to_numpy(dtype=float, na_value=np.nan)
    known = ok & np.isfinite(pos)
    _add_counts(out, "pos", codes[known], pos[known].astype(np.int64), n_groups, k_max,
                None if w is None else w[known])
    grouped = d.groupby(list(design) + list(CELL_KEYS), sort=True, dropna=False)
    cells = ((grouped.size() if w is None else grouped[COUNT_COLUMN].sum()).rename("count")
             .astype(np.int64).reset_index())
    if w is not None:
        cells = cells[cells["count"] > 0].reset_index(drop=True)   # a row with count 0 is no attempt
        for s in STATUSES:
            out[f"rows_{s}"] = np.bincount(codes[status == s], minlength=n_groups).astype(np.int64)
    out = finalize_table(out, design, k_max)
    qo: Any = None
    if level == "query":
        # summed on first use (issue 37: `validate` never reads them); the columns are a copy-on-write snapshot
        qo = partial(_query_orderings, d[list(design) + ["cluster_id", "query_id", "ordering"]], ok, tool_idx,
                     known, pos, w, design)
    return SelectionCounts(out, cells, catalog, design, level, dict(log.diagnostics), "pandas",
                           declared_design=log.declared_design, query_orderings=qo)


def _query_orderings(keys: pd.DataFrame, ok, tool_idx, known, pos, w, design) -> pd.DataFrame:
    """The pandas engine's ``query_orderings``: the valid choices of the log (``keys``: its design, cluster, query
    and ordering columns; ``ok``, ``tool_idx``, ``known``, ``pos``, ``w``: as :func:`counts_from_log` has them)."""
    sel = keys.loc[ok].copy()
    sel["api_index"] = tool_idx[ok]
    sel["chosen_rank"] = np.where(known[ok], np.nan_to_num(pos[ok]), 0).astype(np.int64)
    sel["count"] = 1 if w is None else w[ok]
    return finalize_query_orderings(sel, design)


def finalize_query_orderings(frame: pd.DataFrame, design) -> pd.DataFrame:
    """The ``query_orderings`` table every engine returns: valid choices (one row each, or with ``count``) summed
    per key, text keys as strings (ids as the count table spells them), ``chosen_rank`` 0 where unknown, rows
    sorted by key (text by code point, missing last), counts int64.

    Examples
    --------
    >>> import pandas as pd
    >>> f = pd.DataFrame({"model": ["m", "m", "m"], "cluster_id": [1, 1, 1], "query_id": [7.0, 7.0, 7.0],
    ...                   "ordering": ["a|b", "a|b", "b|a"], "api_index": [1, 1, 1], "chosen_rank": [1, 1, 2],
    ...                   "count": [1, 1, 1]})
    >>> finalize_query_orderings(f, ["model"]).to_dict("records")
    [{'model': 'm', 'cluster_id': '1', 'query_id': '7', 'ordering': 'a|b', 'api_index': 1, 'chosen_rank': 1, \
'count': 2}, {'model': 'm', 'cluster_id': '1', 'query_id': '7', 'ordering': 'b|a', 'api_index': 1, \
'chosen_rank': 2, 'count': 1}]
    """
    keys = list(design) + list(QUERY_ORDERING_KEYS)
    out = frame[keys + ["count"]].copy()
    for c in keys:
        col = out[c]
        if c in ("api_index", "chosen_rank"):
            out[c] = col.to_numpy(dtype=float, na_value=np.nan)
            out[c] = np.nan_to_num(out[c].to_numpy(), nan=0.0).astype(np.int64)
        elif (c in ("cluster_id", "query_id", "ordering") or isinstance(col.dtype, pd.CategoricalDtype)
              or pd.api.types.is_string_dtype(col) or pd.api.types.is_object_dtype(col)):
            out[c] = _texts(col)
    out["count"] = out["count"].to_numpy(dtype=np.int64)
    out = out.groupby(keys, sort=False, dropna=False, observed=True)["count"].sum().reset_index()
    out = out[out["count"] > 0]
    return out.sort_values(keys, kind="stable", na_position="last").reset_index(drop=True)


def finalize_table(table: pd.DataFrame, design, k_max: int) -> pd.DataFrame:
    """The one layout every engine returns: text keys as categoricals (sorted categories), rows sorted by key
    (text by code point, missing last), columns in order, counts int64. Identical input counts give identical
    frames whatever the engine."""
    keys = list(design) + ["cluster_id", "query_id", "n_candidates"]
    table = table.copy() if table.index.name is not None else table
    for c in keys:
        col = table[c]
        if (c in ("cluster_id", "query_id") or isinstance(col.dtype, pd.CategoricalDtype)
                or pd.api.types.is_string_dtype(col) or pd.api.types.is_object_dtype(col)):
            table[c] = _text_categorical(col)
    for c in [k for k in table.columns if k not in keys]:
        table[c] = table[c].astype(np.int64)
    table = table.sort_values(keys, kind="stable", na_position="last").reset_index(drop=True)
    rows = list(ROW_COLUMNS) if ROW_COLUMNS[0] in table.columns else []
    return table[keys + [f"n_{s}" for s in STATUSES] + tool_columns(k_max) + position_columns(k_max) + rows]


def _text_categorical(col: pd.Series) -> pd.Categorical:
    """A categorical of the values as text, categories sorted by code point (ids: integral numbers lose '.0')."""
    codes, uniques = pd.factorize(col, use_na_sentinel=True)
    text = np.asarray([_as_text(v) for v in uniques], dtype=object).astype(str)
    cats, remap = np.unique(text, return_inverse=True)
    codes = np.where(codes >= 0, remap[np.maximum(codes, 0)] if len(remap) else 0, -1)
    return pd.Categorical.from_codes(codes, categories=pd.Index(cats, dtype="string"))


def _texts(col: pd.Series) -> pd.api.extensions.ExtensionArray:
    """The values of ``col`` as text (``_as_text``; missing stays missing), a ``string`` array: each distinct
    value is converted once when the column holds one kind of value (numbers, text, categories)."""
    if isinstance(col.dtype, pd.CategoricalDtype):
        codes, uniques = col.cat.codes.to_numpy(), col.cat.categories
    elif col.dtype != object or pd.api.types.infer_dtype(col, skipna=True) == "string":
        # one kind of value: equal values are equal texts (an object column mixing True and 1 is converted row
        # by row below, as factorize would merge them)
        codes, uniques = pd.factorize(col, use_na_sentinel=True)
    else:
        return pd.array([None if pd.isna(v) else _as_text(v) for v in col.astype(object)], dtype="string")
    text = np.asarray([_as_text(v) for v in uniques] + [None], dtype=object)
    return pd.array(text[np.where(codes >= 0, codes, len(text) - 1)], dtype="string")


def _as_text(v) -> str:
    if isinstance(v, (float, np.floating)) and float(v).is_integer():
        return str(int(v))
    return str(v)


def tool_index(catalog: ToolCatalog, clusters, tools) -> np.ndarray:
    """1-based catalog index (``api_index``) of each chosen tool within its cluster; 0 where there is none."""
    lookup = {(c, t): i for c in catalog.clusters for i, t in enumerate(catalog.tools(c), start=1)}
    # look up each distinct (cluster, tool) pair once, not every row (missing values factorise to -1: index 0)
    cc, cu = pd.factorize(np.asarray(clusters, dtype=object))
    tc, tu = pd.factorize(np.asarray(tools, dtype=object))
    out = np.zeros(len(tc), dtype=np.int64)
    ok = (cc >= 0) & (tc >= 0)
    if ok.any():
        pair, inv = np.unique(cc[ok].astype(np.int64) * len(tu) + tc[ok], return_inverse=True)
        found = [lookup.get((cu[p // len(tu)], tu[p % len(tu)]), 0) for p in pair.tolist()]
        out[ok] = np.asarray(found, dtype=np.int64)[inv]
    return out


def _bincount(codes, weights, n):
    """Occurrences (or summed integer weights) of 0..n-1, exact int64."""
    if weights is None:
        return np.bincount(codes, minlength=n).astype(np.int64)
    out = np.zeros(n, dtype=np.int64)
    np.add.at(out, codes, weights)
    return out


def _add_counts(out, prefix, codes, idx, n_groups, k_max, weights=None):
    """Append ``{prefix}_1 .. {prefix}_k_max`` columns: per group, how often index 1..k_max occurred
    (``weights``: the summed ``count`` of an aggregated log)."""
    flat = _bincount(codes * k_max + (idx - 1), weights, n_groups * k_max).reshape(n_groups, k_max)
    for j in range(k_max):
        out[f"{prefix}_{j + 1}"] = flat[:, j].astype(np.int64)
