"""ToolCatalog: the tools of each cluster of functionally equivalent tools."""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from .._schema import CATALOG_COLUMNS, function_name, standardise_name, toolbench_key
from ..exceptions import SelectionLogError, problem

__all__ = ["ToolCatalog"]

_REQUIRED = ("tool_id", "cluster_id")
#: Columns a catalog may omit, and what they default to (the catalog records which were defaulted).
_DEFAULTED = ("api_index", "tool_name", "api_name", "num_parameters")


@dataclass(frozen=True, eq=False)
class ToolCatalog:
    """Clusters of functionally equivalent tools, one row per tool.

    Parameters
    ----------
    table : pandas.DataFrame
        One row per tool with the columns of ``docs/schema.md``; ``tool_id`` and ``cluster_id`` are
        required, the others default (see :attr:`defaulted`).
    source : str, optional
        Where the catalog came from (file path), for provenance and error messages.

    Notes
    -----
    ``tool_id`` is the ToolBench function name ``{api}_for_{tool}`` when the source has no ids.
    Within a cluster, ``api_index`` (1-based) fixes the catalog order on which cyclic rotations
    are defined: under rotation ``r`` tool ``j`` is shown at position ``((j - r) mod K) + 1``.

    Examples
    --------
    >>> import pandas as pd
    >>> cat = ToolCatalog.from_records([
    ...     {"cluster_id": "1", "tool_name": "A", "api_name": "x", "num_parameters": 0},
    ...     {"cluster_id": "1", "tool_name": "B", "api_name": "x", "num_parameters": 1}])
    >>> cat.tools("1")
    ['x_for_a', 'x_for_b']
    """

    table: pd.DataFrame
    source: str = "<memory>"
    _index: dict = field(init=False, repr=False, compare=False)
    #: Columns the source did not have and that were defaulted (``api_index``: row order within the cluster;
    #: ``tool_name`` and ``api_name``: the tool id; ``num_parameters``: unknown).
    defaulted: tuple = field(init=False, repr=False, compare=False, default=())

    def __post_init__(self):
        missing = tuple(c for c in _DEFAULTED if c not in pd.DataFrame(self.table).columns)
        tab = _normalise_catalog(self.table, self.source)
        object.__setattr__(self, "table", tab)
        object.__setattr__(self, "defaulted", missing)
        # the table is sorted by (cluster_id, api_index) and each api_index is unique in its cluster: every cluster's
        # tools in catalog order are its rows in table order (one pass, not a sorted frame per cluster: issue 37)
        clusters: dict[str, list] = {}
        for cid, tool in zip(tab["cluster_id"].tolist(), tab["tool_id"].tolist()):
            clusters.setdefault(cid, []).append(tool)
        object.__setattr__(self, "_index", clusters)

    # -- constructors ---------------------------------------------------------------------
    @classmethod
    def from_records(cls, records: Iterable[Mapping[str, Any]], *, source: str = "<memory>") -> ToolCatalog:
        """Build a catalog from dicts; missing ``tool_id`` / ``api_index`` are derived."""
        recs = [dict(r) for r in records]
        counters: dict = {}
        any_index = any("api_index" in r for r in recs)   # none: derived (and recorded as defaulted) later
        for r in recs:
            if r.get("cluster_id") is not None:
                r["cluster_id"] = str(r["cluster_id"])
            counters[r.get("cluster_id")] = counters.get(r.get("cluster_id"), 0) + 1
            if any_index:
                r.setdefault("api_index", counters[r.get("cluster_id")])
            if not r.get("tool_id"):
                r["tool_id"] = function_name(r.get("api_name", ""), r.get("tool_name", ""))
        return cls(pd.DataFrame(recs), source=source)

    # -- queries --------------------------------------------------------------------------
    @property
    def clusters(self) -> list[str]:
        """Cluster ids in catalog order."""
        return list(self._index)

    def tools(self, cluster_id: str) -> list[str]:
        """Tool ids of ``cluster_id`` in catalog order (``api_index`` 1..K)."""
        try:
            return list(self._index[str(cluster_id)])
        except KeyError:
            raise KeyError(f"unknown cluster_id {cluster_id!r}; catalog {self.source} has {self.clusters}") from None

    def n_tools(self, cluster_id: str) -> int:
        """Number of tools K in ``cluster_id``."""
        return len(self.tools(cluster_id))

    def rotation(self, cluster_id: str, rotation: int) -> list[str]:
        """Tool ids in the order shown under cyclic ``rotation`` (1-based; rotation 1 = catalog order)."""
        tools = self.tools(cluster_id)
        k = len(tools)
        shift = (int(rotation) - 1) % k
        return tools[shift:] + tools[:shift]

    def aliases(self, cluster_id: str | None = None) -> dict[str, str]:
        """Map every accepted name (lower-cased) to its tool_id.

        Accepted: the tool_id, the standardised ToolBench function name as ToolBench spells it (the last 64
        characters) and untruncated, the last 64 characters of a longer tool_id (issue 36), and the bare
        standardised tool name (when it is unique in the scope).
        """
        if cluster_id is None:
            return _alias_map(zip(self.table["tool_id"], self.table["api_name"], self.table["tool_name"]))
        # every cluster's map is made in one pass over the table, on first use: filtering the table once per
        # cluster made a catalog of 2,000 clusters cost seconds (issue 37)
        return dict(self._cluster_aliases.get(str(cluster_id), {}))

    @functools.cached_property
    def _cluster_aliases(self) -> dict[str, dict[str, str]]:
        rows: dict[str, list] = {}
        tab = self.table
        for rec in zip(tab["cluster_id"], tab["tool_id"], tab["api_name"], tab["tool_name"]):
            rows.setdefault(rec[0], []).append(rec[1:])
        return {c: _alias_map(recs) for c, recs in rows.items()}

    def to_frame(self) -> pd.DataFrame:
        """The catalog as a DataFrame (a copy)."""
        return self.table.copy()

    def __len__(self):
        return len(self.table)

    def __repr__(self):
        return f"ToolCatalog({len(self.table)} tools in {len(self._index)} clusters, source={self.source!r})"


def _alias_map(records) -> dict[str, str]:
    """:meth:`ToolCatalog.aliases` of ``(tool_id, api_name, tool_name)`` records (in catalog order)."""
    out: dict[str, str] = {}
    bare: dict[str, set] = {}
    for tool_id, api_name, tool_name in records:
        out[str(tool_id).lower()] = tool_id
        out.setdefault(function_name(api_name, tool_name), tool_id)
        out.setdefault(function_name(api_name, tool_name, truncate=False), tool_id)
        out.setdefault(toolbench_key(str(tool_id).lower()), tool_id)
        bare.setdefault(standardise_name(tool_name), set()).add(tool_id)
    for name, ids in bare.items():
        if len(ids) == 1:
            out.setdefault(name, next(iter(ids)))
    return out


def _normalise_catalog(table: pd.DataFrame, source: str) -> pd.DataFrame:
    """A checked catalog table: required columns -> defaults -> dtypes -> values (each stage raises its problems)."""
    tab = _catalog_with_defaults(table, source)
    _cast_catalog(tab, source)
    _check_catalog_values(tab, source)
    extra = [c for c in tab.columns if c not in CATALOG_COLUMNS]
    return (tab[list(CATALOG_COLUMNS) + extra].sort_values(["cluster_id", "api_index"], key=_natural)
            .reset_index(drop=True))


def _catalog_with_defaults(table: pd.DataFrame, source: str) -> pd.DataFrame:
    """A copy with the required columns checked and the optional ones filled (names default to the id, the order
    to the row order, the parameter count to unknown)."""
    tab = pd.DataFrame(table).copy()
    problems = [problem(source, None, col, "required catalog column is missing")
                for col in _REQUIRED if col not in tab.columns]
    if problems:
        raise SelectionLogError(problems)
    # Many teams have only tool ids and clusters: names default to the id, the order to the row order,
    # the parameter count to unknown.
    if "api_index" not in tab.columns:
        tab["api_index"] = tab.groupby(tab["cluster_id"].astype(str), sort=False).cumcount() + 1
    missing_id = [problem(source, i + 1, col, "missing value") for col in _REQUIRED
                  for i in np.flatnonzero(tab[col].isna().to_numpy())]
    if missing_id:
        raise SelectionLogError(missing_id)
    for col in ("tool_name", "api_name"):
        if col not in tab.columns:
            tab[col] = tab["tool_id"].astype(str)
        else:
            tab[col] = tab[col].astype(object).where(tab[col].notna(), tab["tool_id"].astype(str))
    for col, dtype in CATALOG_COLUMNS.items():
        if col not in tab.columns:
            tab[col] = pd.NaT if dtype.startswith("datetime") else pd.NA
    for col in ("required_parameters", "optional_parameters"):
        tab[col] = [v if isinstance(v, str) or _is_missing(v) else json.dumps(v) for v in tab[col]]
    tab["cluster_id"] = tab["cluster_id"].astype(str)
    return tab


def _cast_catalog(tab: pd.DataFrame, source: str) -> None:
    """Every catalog column to its dtype (``created`` parsed as dates); the first bad values named by row."""
    try:
        tab["created"] = pd.to_datetime(tab["created"], errors="raise").astype("datetime64[ns]")
    except (ValueError, TypeError) as exc:
        raise SelectionLogError(problem(source, None, "created", f"expected dates (YYYY-MM-DD); {exc}")) from None
    for col, dtype in CATALOG_COLUMNS.items():
        if col == "created":
            continue
        try:
            tab[col] = tab[col].astype(dtype)
        except (ValueError, TypeError):
            bad = [i + 1 for i, v in enumerate(tab[col]) if not _castable(v, dtype)][:5]
            raise SelectionLogError(
                [problem(source, r, col, f"expected {dtype}, got {tab[col].iloc[r - 1]!r}") for r in bad]
            ) from None


def _check_catalog_values(tab: pd.DataFrame, source: str) -> None:
    """Tool ids unique within their cluster and without ``|``, parameter counts >= 0, one ``api_index`` per tool of a
    cluster (issue 21: values that pass the dtypes but break the analysis).

    A tool id may belong to several clusters (issue 36: a tournament of description variants shows each variant in
    several pair clusters); a row is named by its ``(cluster_id, tool_id)``, and the choice model gives one worth per
    tool id across every cluster that shows it.
    """
    dup = tab[tab.duplicated(["cluster_id", "tool_id"])]
    if len(dup):
        raise SelectionLogError([problem(source, i + 1, "tool_id", f"duplicate tool_id {t!r} in cluster {c!r} (a tool "
                                                                   "may be in several clusters, once in each)")
                                 for i, c, t in zip(dup.index, dup["cluster_id"], dup["tool_id"])])
    problems = [problem(source, i + 1, "tool_id", f"tool id {t!r} contains '|', which separates the tools of an "
                                                   "ordering; rename the tool")
                for i, t in enumerate(tab["tool_id"].tolist()) if "|" in str(t)]
    n_par = tab["num_parameters"]
    negative = (n_par.notna() & (n_par < 0)).to_numpy(dtype=bool)   # Int64: NA & ... is False where not known
    problems += [problem(source, i + 1, "num_parameters", f"expected a number of parameters >= 0, got {int(v)}")
                 for i, v in zip(np.flatnonzero(negative), n_par[negative].tolist())]
    problems += _lookalike_problems(tab, source)
    # only the clusters that give one api_index twice are looked at one by one (a frame per cluster cost a second
    # at 2,000 clusters: issue 37)
    shared = tab["cluster_id"][tab.duplicated(["cluster_id", "api_index"], keep=False)]
    for cid, sub in tab[tab["cluster_id"].isin(set(shared.tolist()))].groupby("cluster_id", sort=False):
        twice = sub["api_index"][sub["api_index"].duplicated(keep=False)]
        for v in sorted(set(twice)):
            tools = sub.loc[sub["api_index"] == v, "tool_id"].tolist()
            problems.append(problem(source, None, "api_index", f"cluster {cid!r}: api_index {int(v)} is given to "
                                                               f"{len(tools)} tools ({tools[:5]}); each tool of a "
                                                               "cluster needs its own place in the catalog order"))
    if problems:
        raise SelectionLogError(problems)


def _lookalike_problems(tab: pd.DataFrame, source: str) -> list:
    """Issue 37: tool or cluster ids that print alike (homoglyphs, full-width forms, invisible characters), and
    NUL characters in any text cell, each named by row and column."""
    from ._row_rules import NUL_IN_CELL, lookalike_message, lookalike_pairs

    out = []
    for col, what in (("tool_id", "tool id"), ("cluster_id", "cluster id")):
        values = tab[col].astype(str).tolist()
        for first, other in lookalike_pairs(values):
            out.append(problem(source, values.index(other) + 1, col,
                               lookalike_message(what, first, other, f"row {values.index(first) + 1}")))
    for col in tab.columns:
        if tab[col].dtype == object or isinstance(tab[col].dtype, pd.StringDtype):
            out += [problem(source, i + 1, col, NUL_IN_CELL) for i, v in enumerate(tab[col].tolist())
                    if isinstance(v, str) and "\x00" in v]
    return out


#: Most tools one cluster may have: counts keep a column per tool and per position, and a uniform reference over
#: thousands of equivalent tools needs far more choices than any study has (issue 21: 10,000 tools crashed DuckDB;
#: 256 tools are read, counted and analysed in about 10 s by either engine).
MAX_CLUSTER_TOOLS = 256


def check_cluster_sizes(catalog: ToolCatalog, *, error=SelectionLogError) -> None:
    """Refuse clusters of one tool (no choice to make) or of more than :data:`MAX_CLUSTER_TOOLS`, naming them."""
    problems = []
    for c in catalog.clusters:
        k = catalog.n_tools(c)
        if k < 2:
            problems.append(problem(catalog.source, None, "cluster_id",
                                    f"cluster {c!r} has {k} tool ({catalog.tools(c)}); a cluster needs at least 2 "
                                    "equivalent tools (remove it or add its alternatives)"))
        elif k > MAX_CLUSTER_TOOLS:
            problems.append(problem(catalog.source, None, "cluster_id",
                                    f"cluster {c!r} has {k} tools; at most {MAX_CLUSTER_TOOLS} tools per cluster are "
                                    "supported (split it into clusters of equivalent tools)"))
    if problems:
        raise error(problems)


def _is_missing(v) -> bool:
    return v is None or v is pd.NA or v is pd.NaT or (isinstance(v, float) and np.isnan(v))


def _castable(v, dtype) -> bool:
    try:
        pd.Series([v]).astype(dtype)
        return True
    except (ValueError, TypeError):
        return False


def _natural(col: pd.Series) -> pd.Series:
    """Sort key: numeric ids numerically ("2" < "10"), others as strings."""
    if col.name == "cluster_id":
        num = pd.to_numeric(col, errors="coerce")
        if num.notna().all():
            return num
    return col
