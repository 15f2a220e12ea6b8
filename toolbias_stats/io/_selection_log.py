"""SelectionLog: the one tidy table every statistic in toolbias_stats reads."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from os import PathLike
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from .._schema import AGGREGATED_QUERY_ID, COUNT_COLUMN, LOG_COLUMNS, SCHEMA_VERSION, STATUSES
from ..exceptions import SelectionLogError, problem
from ._catalog import ToolCatalog
from ._row_rules import CELL_OUTCOME as CELL_OUTCOME  # re-exported: the engines import these from here
from ._row_rules import COUNT_MESSAGE as COUNT_MESSAGE
from ._row_rules import MAX_COUNT as MAX_COUNT
from ._row_rules import MAX_INT as MAX_INT
from ._row_rules import (
    MISSING,
    NOT_INTEGER,
    OK_WITHOUT_TOOL,
    POSITION_RANGE,
    RANK_RANGE,
    REQUIRED_COLUMN,
    ROTATION_RANGE,
    RUN_BELOW_ONE,
    one_of_message,
    ordering_message,
    unknown_cluster_message,
)
from ._row_rules import count_problems as count_problems
from ._row_rules import duplicate_cell_message as duplicate_cell_message
from ._row_rules import duplicate_message as duplicate_message
from ._row_rules import not_in_cluster_message as not_in_cluster_message
from ._row_rules import plain as _plain
from ._study_design import DESIGN_KEYS as DESIGN_KEYS  # re-exported: the design's keys and defaults
from ._study_design import ERR_DESIGN_COLUMN as ERR_DESIGN_COLUMN
from ._study_design import REPLICATE_COLUMNS as REPLICATE_COLUMNS
from ._study_design import DeclaredDesign

if TYPE_CHECKING:
    from ._counts import SelectionCounts

__all__ = ["SelectionLog", "DeclaredDesign", "REPLICATE_COLUMNS", "DESIGN_KEYS"]

#: Statuses whose row may have no cluster (``cluster_id`` missing): every status but a valid choice (issue 36).
UNASSIGNABLE = tuple(s for s in STATUSES if s != "ok")
#: Columns of the design, before extra manifest columns.
_DESIGN = ("model", "run", "condition")
_ATTEMPT = (
    "cluster_id", "query_id", "rotation", "ordering", "n_candidates", "chosen_tool",
    "chosen_position", "chosen_rank", "status", "raw_choice", "source_file", "source_row",
)


@dataclass(frozen=True, eq=False)
class SelectionLog:
    """One row per inference attempt, valid or not, with its study metadata.

    Build it with a reader (:func:`toolbias_stats.read_study`, :func:`read_biasbusters`,
    :func:`read_table`, :func:`read_transcripts`) or :meth:`from_frame`; it validates once, here.

    Parameters
    ----------
    data : pandas.DataFrame
        The rows, with the columns of ``docs/schema.md``.
    catalog : ToolCatalog
        The tools the rows refer to.
    diagnostics : dict, optional
        Reader notes (e.g. unresolved names, position mismatches), keyed by source file.

    Attributes
    ----------
    design_columns : list of str
        ``model``, ``run``, ``condition`` and every extra manifest column, in order.
    design : DeclaredDesign
        The unit, replicates, factors and strata (derived from the columns unless declared; a column named
        ``attempt`` or ``run`` is a replicate). ``declared_design`` holds a declaration, if any
        (:meth:`with_design`, a manifest's ``[design]`` table).
    n_units : int
        Independent units (distinct cluster and query).
    schema_version : str

    Notes
    -----
    Rows without a valid selection stay in the log with a ``status`` other than ``"ok"``;
    statistics count them as excluded, by status.

    *Aggregated logs.* A ``count`` column (integer >= 0) makes every row stand for ``count``
    identical attempts (see ``docs/schema.md``, "Aggregated logs"); it is then the last column of
    :attr:`data`, :attr:`weighted` is True and every statistic sums the counts instead of the rows.
    ``query_id`` may then be absent (one pseudo-query ``"(aggregated)"`` per cluster). Logs without
    the column are unchanged (no ``count`` column is added).

    Examples
    --------
    >>> from toolbias_stats.simulate import simulate_selection_log
    >>> log = simulate_selection_log(n_clusters=2, n_queries=5, p_no_call=0.2, rng=0).log
    >>> log
    SelectionLog(50 rows, status={'ok': 42, 'no_call': 8}, clusters=2)
    >>> log.summary()[["total", "ok", "no_call"]].to_dict("records")
    [{'total': 50, 'ok': 42, 'no_call': 8}]

    A study's log: ``tbs.read_study(tbs.datasets.path("biasbusters/study.toml")).log``.
    """

    data: pd.DataFrame
    catalog: ToolCatalog
    diagnostics: dict = field(default_factory=dict)
    schema_version: str = SCHEMA_VERSION
    declared_design: Mapping[str, Any] | None = None

    # -- construction -----------------------------------------------------------------
    @classmethod
    def from_frame(cls, frame: pd.DataFrame, catalog: ToolCatalog, *, diagnostics: Mapping[str, Any] | None = None,
                   source: str = "<frame>", duplicates: str = "error",
                   declared_design: Mapping[str, Any] | None = None) -> SelectionLog:
        """Validate a DataFrame against the schema and wrap it.

        Derives ``ordering`` from ``rotation`` (and ``chosen_position`` from ``ordering``) where
        they are missing. Raises one :class:`SelectionLogError` listing every problem.
        ``duplicates="count"`` accepts two attempts with the same identity (the same query shown the
        same list again: independent calls; issue 20); ``"error"`` names both rows. ``declared_design``: a
        declared :class:`DeclaredDesign` mapping (see :meth:`with_design`).
        """
        data = _validate(frame, catalog, source, duplicates=duplicates)
        return cls(data, catalog, dict(diagnostics or {}), declared_design=declared_design)

    @classmethod
    def concat(cls, logs: Iterable[SelectionLog], *, catalog: ToolCatalog | None = None) -> SelectionLog:
        """Stack several logs (they must share a catalog) and re-check uniqueness of attempts."""
        logs = list(logs)
        if not logs:
            raise ValueError("`logs` must contain at least one SelectionLog; got an empty sequence instead.")
        catalog = catalog or logs[0].catalog
        frames = [lg.data for lg in logs]
        if any(lg.weighted for lg in logs):   # a log without counts: one attempt per row
            frames = [f if COUNT_COLUMN in f.columns else f.assign(**{COUNT_COLUMN: 1}) for f in frames]
        frame = pd.concat(frames, ignore_index=True)
        diagnostics = {}
        for lg in logs:
            diagnostics.update(lg.diagnostics)
        declared = next((lg.declared_design for lg in logs if lg.declared_design), None)
        # repeats are allowed when a part allowed them (a table file read with duplicates = "count")
        mode = "count" if any(isinstance(d, dict) and d.get("duplicates") == "count"
                              for d in diagnostics.values()) else "error"
        if _FAST_CONCAT and all(lg.catalog is catalog for lg in logs):
            # every part is valid against this catalog; validating a valid table again changes nothing, so only
            # the attempts of different parts can still clash (tests/io/test_fast_paths.py compares the two)
            return cls(_check_stacked(frame, duplicates=mode), catalog, diagnostics, declared_design=declared)
        return cls.from_frame(frame, catalog, diagnostics=diagnostics, source="<concat>", duplicates=mode,
                              declared_design=declared)

    # -- views ------------------------------------------------------------------------
    @property
    def design_columns(self) -> list[str]:
        """``model``, ``run``, ``condition`` and the extra manifest columns."""
        return [c for c in self.data.columns if c not in _ATTEMPT and c != COUNT_COLUMN]

    @property
    def design(self) -> DeclaredDesign:
        """The study design (:class:`DeclaredDesign`): the declared one, else derived from the design columns (a
        ``run`` or ``attempt`` column is a replicate, every other design column a factor)."""
        return DeclaredDesign.from_columns(self.design_columns, declared=self.declared_design)

    @property
    def n_units(self) -> int:
        """Independent units: distinct (cluster, unit id) pairs (the unit is the query); a row without a cluster
        (issue 36) is no unit."""
        data = self.data[self.data["cluster_id"].notna()]
        return int(data.groupby(["cluster_id", "query_id"], observed=True, dropna=False).ngroups)

    def with_design(self, design: Mapping[str, Any] | DeclaredDesign | None = None, **keys: Any) -> SelectionLog:
        """A copy of this log with a declared design (``unit``, ``replicates``, ``factors``, ``strata``).

        Examples
        --------
        >>> from toolbias_stats.simulate import simulate_selection_log
        >>> log = simulate_selection_log(n_clusters=1, n_queries=4, rng=0).log
        >>> log.design.replicates, log.with_design(factors=["run"]).design.factors
        (('run',), ('model', 'run', 'condition'))
        """
        decl = dict(design.to_dict() if isinstance(design, DeclaredDesign) else (design or {}))
        decl.update(keys)
        decl.pop("source", None)
        DeclaredDesign.from_columns(self.design_columns, declared=decl)   # checked now, not at first use
        return replace(self, declared_design=decl or None)

    @property
    def weighted(self) -> bool:
        """Whether the rows carry a ``count`` (an aggregated log: a row stands for ``count`` attempts)."""
        return COUNT_COLUMN in self.data.columns

    @property
    def n_attempts(self) -> int:
        """Attempts represented: the sum of ``count`` for an aggregated log, else the number of rows."""
        return int(self.data[COUNT_COLUMN].sum()) if self.weighted else len(self.data)

    @property
    def valid(self) -> pd.DataFrame:
        """Rows with ``status == "ok"``."""
        return self.data[self.data["status"] == "ok"]

    def to_frame(self) -> pd.DataFrame:
        """The log as a DataFrame (a copy), schema columns first."""
        return self.data.copy()

    def summary(self, by: Sequence[str] = ("source_file",)) -> pd.DataFrame:
        """Rows by status (columns) per ``by`` group, with totals.

        Parameters
        ----------
        by : sequence of str, default ``("source_file",)``
            Grouping columns, e.g. ``("model", "run")``.

        Returns
        -------
        pandas.DataFrame
            One row per group: ``total`` and one column per status (zeros included). For an
            aggregated log (:attr:`weighted`) these are attempts (sums of ``count``) and a last
            column ``table_rows`` gives the number of rows of the group.
        """
        by = list(by)
        grouped = self.data.groupby(by + ["status"], sort=False, dropna=False)
        counts = (grouped[COUNT_COLUMN].sum() if self.weighted else grouped.size()).unstack("status", fill_value=0)
        for s in STATUSES:
            if s not in counts.columns:
                counts[s] = 0
        extra = [c for c in counts.columns if c not in STATUSES]
        counts = counts[list(STATUSES) + extra]
        counts.insert(0, "total", counts.sum(axis=1))
        if self.weighted:
            counts["table_rows"] = self.data.groupby(by, sort=False, dropna=False).size()
        return counts.reset_index()

    def counts(self, *, level: str = "query") -> SelectionCounts:
        """The sufficient statistics of this log (:class:`~toolbias_stats.SelectionCounts`, pandas engine).

        Parameters
        ----------
        level : {"query", "cluster"}, default "query"
            ``"query"`` keeps one row per query (needed by the bootstrap); ``"cluster"`` sums over
            queries (point estimates, null references and p-values only).
        """
        from ._counts import counts_from_log

        return counts_from_log(self, level=level)

    def aggregate(self, *, queries: bool = True, lists: bool = True) -> SelectionLog:
        """An aggregated copy: one row per cell with a ``count`` column (see ``docs/schema.md``).

        Parameters
        ----------
        queries : bool, default True
            Keep ``query_id`` (cells per query: the query bootstrap still works). False pools the
            queries of each (design, cluster) into the pseudo-query ``"(aggregated)"``, as in
            published tables of counts (intervals are then multinomial).
        lists : bool, default True
            Keep ``rotation`` / ``ordering`` (needed by the Bayesian model's ``cells``). False keeps
            only ``n_candidates`` and the chosen position.

        Returns
        -------
        SelectionLog
            Weighted: every count and statistic equals that of this log (the test suite checks
            it); provenance is lost (``source_file`` is ``"<aggregate>"``, ``source_row`` the cell).
        """
        d = self.data
        keys = self.design_columns + ["cluster_id"] + (["query_id"] if queries else [])
        keys += (["rotation", "ordering"] if lists else []) + ["n_candidates", "status", "chosen_tool",
                                                                "chosen_position", "chosen_rank", "raw_choice"]
        grouped = d.groupby(keys, sort=True, dropna=False, observed=True)
        cells = (grouped[COUNT_COLUMN].sum() if self.weighted else grouped.size()).rename(COUNT_COLUMN).reset_index()
        cells = cells[cells[COUNT_COLUMN] > 0].reset_index(drop=True)
        cells["source_file"] = "<aggregate>"
        cells["source_row"] = np.arange(1, len(cells) + 1)
        if not queries:
            cells = cells.assign(query_id=AGGREGATED_QUERY_ID)
        return type(self).from_frame(cells, self.catalog, diagnostics=self.diagnostics, source="<aggregate>",
                                     declared_design=self.declared_design)

    def write(self, path: str | PathLike[str]) -> Path:
        """Write the log in the generic tabular format (``.csv``, ``.jsonl`` or ``.parquet``).

        The file reads back with :func:`toolbias_stats.read_table` into an identical log. In CSV, a text cell
        that starts with ``= + - @`` (a spreadsheet formula) gets a leading ``'``; ``.parquet`` and ``.jsonl``
        keep every value raw. The file is written atomically (a unique temporary name, then a rename).
        """
        from .._output import atomic_path, spreadsheet_safe

        path = Path(path)
        frame = self.data
        suffix = path.suffix.lower()
        if suffix not in (".csv", ".jsonl", ".ndjson", ".parquet"):
            raise ValueError(f"`path` must end in .csv, .jsonl or .parquet; got {path.name!r} instead.")
        with atomic_path(path, option="path") as tmp:   # nothing partial on failure (issue 21)
            if suffix == ".csv":   # text starting with = + - @ is quoted for spreadsheets; JSONL/Parquet stay raw
                spreadsheet_safe(frame).to_csv(tmp, index=False)
            elif suffix in (".jsonl", ".ndjson"):
                frame.to_json(tmp, orient="records", lines=True, force_ascii=False)
            else:
                frame.to_parquet(tmp, index=False)
        return path

    def __len__(self):
        return len(self.data)

    def __repr__(self):
        st = self.data["status"].value_counts().to_dict()
        extra = f", {self.n_attempts} attempts (count column)" if self.weighted else ""
        return (f"SelectionLog({len(self.data)} rows{extra}, status={st}, "
                f"clusters={self.data['cluster_id'].nunique()})")


# ---------------------------------------------------------------------------------------
def _validate(frame: pd.DataFrame, catalog: ToolCatalog, source: str, duplicates: str = "error") -> pd.DataFrame:
    """Check every row of a selection log and complete its derived columns: prepare -> check values -> resolve
    orderings -> check choices -> derive positions and ranks -> duplicates. Raises one SelectionLogError listing
    every problem of a stage (``file:row:column: message``)."""
    df, weighted = _prepare_frame(frame, source)
    rows = _RowProblems(df)
    _check_values(rows, catalog, weighted)
    status = df["status"].astype("string")
    given_ordering = df["ordering"].astype("string").copy()
    n_listed = _resolve_orderings(rows, catalog)
    has_ord = df["ordering"].notna()
    ok = (status == "ok").fillna(False).to_numpy()
    rank_in = _check_choices(rows, catalog, ok, n_listed)
    _derive_ranks(rows, catalog, ok, has_ord.to_numpy(), rank_in)
    # chosen tool / position only for ok rows
    df.loc[~ok, "chosen_position"] = pd.NA
    df.loc[~ok, "chosen_rank"] = pd.NA
    df.loc[~ok, "chosen_tool"] = pd.NA

    extras = [c for c in df.columns if c not in LOG_COLUMNS and c != COUNT_COLUMN]
    _check_duplicates(df, extras, given_ordering, rows.files, rows.rows, weighted, duplicates)
    for col, dtype in LOG_COLUMNS.items():
        df[col] = df[col].astype(dtype)
    return df[list(_DESIGN) + extras + list(_ATTEMPT) + ([COUNT_COLUMN] if weighted else [])]


class _RowProblems:
    """The frame being validated and the problems found so far, each named by source file and row."""

    def __init__(self, df: pd.DataFrame) -> None:
        self.df = df
        self.problems: list[str] = []
        self.files = df["source_file"].astype(str).to_numpy()
        self.rows = df["source_row"].to_numpy()

    def add(self, i: int | np.integer, col: str, message: str) -> None:
        """One problem at row position ``i``."""
        self.problems.append(problem(self.files[i], self.rows[i], col, message))

    def where(self, mask, col: str, msg: str) -> None:
        """One problem per row of ``mask``; ``{value}`` in ``msg`` is the row's current value of ``col``."""
        df = self.df
        for i in np.flatnonzero(np.asarray(mask, dtype=bool)):
            value: Any = df[col].iloc[i] if col in df.columns else None
            value = value.item() if hasattr(value, "item") else value
            self.add(i, col, msg.format(value=value))

    def raise_any(self) -> None:
        """Raise the problems found so far (if any) as one SelectionLogError."""
        if self.problems:
            raise SelectionLogError(self.problems)


def _prepare_frame(frame: pd.DataFrame, source: str) -> tuple[pd.DataFrame, bool]:
    """A copy with the required columns checked and the optional ones filled (defaults, ``source_row``, nulls);
    ``weighted``: whether it has a ``count`` column."""
    df = pd.DataFrame(frame).copy().reset_index(drop=True)
    if len(df) == 0:
        raise SelectionLogError(problem(source, None, None, "the selection log is empty (no rows)"))
    weighted = COUNT_COLUMN in df.columns
    if weighted and "query_id" not in df.columns:
        # an aggregated file without per-query rows: one pseudo-query per (design, cluster)
        df["query_id"] = AGGREGATED_QUERY_ID
    problems = [problem(source, None, col, REQUIRED_COLUMN)
                for col in ("cluster_id", "query_id", "status") if col not in df.columns]
    if problems:
        raise SelectionLogError(problems)
    defaults = {"model": "unknown", "run": 1, "condition": "base", "source_file": source}
    for col, val in defaults.items():
        if col not in df.columns:
            df[col] = val
    if "source_row" not in df.columns:
        df["source_row"] = np.arange(1, len(df) + 1)
    for col in LOG_COLUMNS:
        if col not in df.columns:
            df[col] = pd.NA
    return df, weighted


def _check_values(rows: _RowProblems, catalog: ToolCatalog, weighted: bool) -> None:
    """Missing keys, integers (``run``, ``rotation``, ``n_candidates``, ``chosen_position``, ``count``), statuses and
    cluster ids; ids become strings and integers Int64."""
    df, where = rows.df, rows.where
    for col in ("query_id", "status", "model", "condition"):
        where(df[col].isna(), col, MISSING)
    # a row without a valid choice may have no cluster (an attempt that no tool list, call or record assigns to one:
    # kept, counted and excluded by its status; issue 36); a valid choice always names its cluster
    no_cluster = df["cluster_id"].isna()
    if no_cluster.any():
        where(no_cluster & ~df["status"].astype("string").isin(UNASSIGNABLE).fillna(False), "cluster_id", MISSING)
    df["cluster_id"] = _id_strings(df["cluster_id"])
    df["query_id"] = _id_strings(df["query_id"])

    # Integers: run, rotation, n_candidates, chosen_position
    for col, nullable in (("run", False), ("rotation", True), ("n_candidates", True), ("chosen_position", True)):
        num = pd.to_numeric(df[col], errors="coerce")
        # infinities (JSON Infinity, 1e400) and values beyond exact integers are not integers (issue 21)
        huge = (pd.to_numeric(num, errors="coerce").astype("float64").abs() > MAX_INT).fillna(False)
        bad = (df[col].notna() & (num.isna() | (num != np.round(num)) | huge)).to_numpy()
        where(bad, col, NOT_INTEGER)
        if not nullable:
            where(df[col].isna(), col, MISSING)
        df[col] = num.where(~bad).astype("Int64")
    where((df["run"] < 1).fillna(False), "run", RUN_BELOW_ONE)
    if weighted:
        missing, bad, num = count_problems(df[COUNT_COLUMN])
        where(missing, COUNT_COLUMN, MISSING)
        where(bad, COUNT_COLUMN, COUNT_MESSAGE)
        df[COUNT_COLUMN] = num.where(~(missing | bad), 0).astype("int64")

    status = df["status"].astype("string")
    where(status.notna() & ~status.isin(STATUSES), "status", one_of_message(STATUSES))

    known = set(catalog.clusters)
    unknown_cluster = df["cluster_id"].notna() & ~df["cluster_id"].isin(known)
    where(unknown_cluster, "cluster_id", unknown_cluster_message(catalog.source, known))
    rows.raise_any()


def _resolve_orderings(rows: _RowProblems, catalog: ToolCatalog) -> pd.Series:
    """``ordering`` from ``rotation`` where missing, every ordering checked, ``n_candidates`` = the cluster's tools
    shown; returns ``n_listed``, the length of the whole list shown (issue 20: it may offer other tools too)."""
    df = rows.df
    assigned = df["cluster_id"].notna()
    k = df["cluster_id"].map({c: catalog.n_tools(c) for c in set(catalog.clusters)}).astype("Int64")
    df["n_candidates"] = df["n_candidates"].fillna(k)
    # ordering from rotation where missing (a row without a cluster keeps its rotation and gets no ordering)
    need = df["ordering"].isna() & df["rotation"].notna() & assigned
    rot_bad = need & ((df["rotation"] < 1) | (df["rotation"] > k)).fillna(False)
    rows.where(rot_bad, "rotation", ROTATION_RANGE)
    need &= ~rot_bad
    if need.any():
        pairs = df.loc[need, ["cluster_id", "rotation"]]
        uniq = pairs.drop_duplicates()
        lookup = {(c, r): "|".join(catalog.rotation(c, r)) for c, r in zip(uniq["cluster_id"], uniq["rotation"])}
        df.loc[need, "ordering"] = [lookup[cr] for cr in zip(pairs["cluster_id"], pairs["rotation"])]
        df.loc[need, "n_candidates"] = k[need]
    # An ordering is the whole list shown, in order: every name once, at least one tool of the row's cluster. Names
    # outside the cluster are other tools offered with it (another cluster's, send_email, ...; issue 20).
    # n_candidates = the cluster's tools shown; the list may be longer (n_listed).
    n_listed = df["n_candidates"].astype("Int64").copy()
    unassigned_ord = df["ordering"].notna() & ~assigned
    if unassigned_ord.any():   # the list shown to a row without a cluster: its length, nothing to check against
        n_listed[unassigned_ord.to_numpy()] = [len(str(o).split("|")) for o in df.loc[unassigned_ord, "ordering"]]
    has_ord = df["ordering"].notna() & assigned
    if has_ord.any():
        # each distinct (cluster, ordering) is checked once; rows find theirs by code (no per-row Python objects)
        mask = has_ord.to_numpy()
        (cu, ou), inv = _pair_codes(df["cluster_id"], df["ordering"], mask)
        bad_combo, length = {}, np.zeros((len(cu), 2), dtype=np.int64)
        for j, (c, o) in enumerate(zip(cu, ou)):
            shown = str(o).split("|")
            members_c = set(catalog.tools(c))
            seq = [t for t in shown if t in members_c]
            length[j] = (len(seq), len(shown))
            if (message := ordering_message(c, o, seq)) is not None:
                bad_combo[j] = message
        if bad_combo:
            for i, j in zip(np.flatnonzero(mask), inv.tolist()):
                if j in bad_combo:
                    rows.add(i, "ordering", bad_combo[j])
        df.loc[has_ord, "n_candidates"] = length[inv, 0]
        n_listed[mask] = length[inv, 1]
    if not assigned.all():   # a row without a cluster: the cluster's tools shown are unknown (0) unless given
        df["n_candidates"] = df["n_candidates"].fillna(0)
    return n_listed


def _check_choices(rows: _RowProblems, catalog: ToolCatalog, ok: np.ndarray, n_listed: pd.Series) -> pd.Series:
    """An ``ok`` row names a tool of its cluster, a position within the list shown and an integer rank; returns
    the given ranks as numbers."""
    df, where = rows.df, rows.where
    where(ok & df["chosen_tool"].isna().to_numpy(), "chosen_tool", OK_WITHOUT_TOOL)
    members = set(zip(catalog.table["cluster_id"], catalog.table["tool_id"]))
    named = ok & df["chosen_tool"].notna().to_numpy()
    (cu, tu), inv = _pair_codes(df["cluster_id"], df["chosen_tool"], named)   # each distinct pair checked once
    bad_tools = {j for j, ct in enumerate(zip(cu, tu)) if ct not in members}
    if bad_tools:
        for i, j in zip(np.flatnonzero(named), inv.tolist()):
            if j in bad_tools:
                rows.add(i, "chosen_tool", not_in_cluster_message(df["chosen_tool"].iat[i], df["cluster_id"].iat[i]))
    n_listed = n_listed.fillna(df["n_candidates"].astype("Int64"))
    pos = df["chosen_position"]
    out_of_range = (pos.notna() & ((pos < 1) | (pos > n_listed))).fillna(False).to_numpy()
    where(out_of_range, "chosen_position", POSITION_RANGE)
    rank_in = pd.to_numeric(df["chosen_rank"], errors="coerce")
    bad_rank = (df["chosen_rank"].notna() & (rank_in.isna() | (rank_in != np.round(rank_in)))).to_numpy()
    where(bad_rank, "chosen_rank", NOT_INTEGER)
    rows.raise_any()
    return rank_in


def _derive_ranks(rows: _RowProblems, catalog: ToolCatalog, ok: np.ndarray, has_ord: np.ndarray,
                  rank_in: pd.Series) -> None:
    """``chosen_position`` from the ordering where missing, then ``chosen_rank`` (checked within 1..K)."""
    df = rows.df
    # chosen_position from ordering where missing
    derive = ok & df["chosen_position"].isna().to_numpy() & df["ordering"].notna().to_numpy()
    if derive.any():
        sel = df.loc[derive, ["ordering", "chosen_tool"]]
        uniq = sel.drop_duplicates()
        position_of: dict = {}
        for o, t in zip(uniq["ordering"], uniq["chosen_tool"]):
            shown = str(o).split("|")
            position_of[(o, t)] = shown.index(t) + 1 if t in shown else pd.NA
        df.loc[derive, "chosen_position"] = [position_of[ot] for ot in zip(sel["ordering"].to_numpy(object),
                                                                           sel["chosen_tool"].to_numpy(object))]
    # chosen_rank: the rank of the chosen tool among its cluster's tools as shown (= chosen_position when the list
    # is the cluster's tools, or when no list is given). Derived whenever the list is known (a given value is then
    # recomputed: a log edited in its chosen_position stays consistent); kept as given only without a list.
    rank = pd.arrays.IntegerArray(np.zeros(len(df), dtype=np.int64), np.ones(len(df), dtype=bool))   # all NA
    no_ord = ~has_ord
    # no list given: the rank as given (an aggregated log without lists keeps it), else the position; no rank
    # without a position (a blanked position means the order is unknown)
    if no_ord.any():
        given_pos = df["chosen_position"].astype("Int64")
        rank_in = rank_in.astype("Float64").astype("Int64")
        rank[no_ord] = rank_in.fillna(given_pos).where(given_pos.notna()).to_numpy()[no_ord]
    with_ord = ok & has_ord
    if with_ord.any():
        # from the position (as given, or derived from the tool): the cluster's tools up to that position
        uniq, codes = _pair_codes(df["cluster_id"], df["ordering"], with_ord, df["chosen_position"])
        ranks = [_rank_at(str(o).split("|"), set(catalog.tools(c)), p) for c, o, p in zip(*uniq)]
        rank[with_ord] = pd.array(ranks, dtype="Int64")[codes]
    out_rank = (pd.Series(rank).notna() & ((pd.Series(rank) < 1) | (pd.Series(rank) > df["n_candidates"]))
                ).fillna(False).to_numpy()
    df["chosen_rank"] = rank
    rows.where(out_rank, "chosen_rank", RANK_RANGE)
    rows.raise_any()


#: Stack valid logs that share a catalog without validating every row again (False: :meth:`SelectionLog.concat`
#: always goes through :meth:`SelectionLog.from_frame`; tests compare the two).
_FAST_CONCAT = True


def _check_stacked(frame: pd.DataFrame, duplicates: str) -> pd.DataFrame:
    """What :func:`_validate` does to a stack of validated tables of one catalog: the same columns in the same order
    and dtypes, and the duplicate check (with the same messages) across the parts."""
    df = frame.reset_index(drop=True)
    weighted = COUNT_COLUMN in df.columns
    extras = [c for c in df.columns if c not in LOG_COLUMNS and c != COUNT_COLUMN]
    _check_duplicates(df, extras, df["ordering"], df["source_file"].astype(str).to_numpy(),
                      df["source_row"].to_numpy(), weighted, duplicates)
    out = {c: df[c] for c in list(_DESIGN) + extras + list(_ATTEMPT) + ([COUNT_COLUMN] if weighted else [])}
    for col, dtype in LOG_COLUMNS.items():
        if out[col].dtype != dtype:
            out[col] = out[col].astype(dtype)
        elif isinstance(out[col].array, pd.arrays.ArrowStringArray):
            out[col] = _one_chunk(out[col])
    if weighted and out[COUNT_COLUMN].dtype != "int64":
        out[COUNT_COLUMN] = out[COUNT_COLUMN].astype("int64")
    return pd.DataFrame(out)


def _one_chunk(col: pd.Series) -> pd.Series:
    """An Arrow-backed text column in one piece: stacking leaves one chunk per part, and every later take (counting,
    grouping) on many chunks costs about four times as much as on one."""
    chunks = col.array.__arrow_array__()
    if getattr(chunks, "num_chunks", 1) <= 1:
        return col
    return pd.Series(pd.arrays.ArrowStringArray(chunks.combine_chunks()), index=col.index, name=col.name)


def _check_duplicates(df, extras, given_ordering, files, rows, weighted, duplicates) -> None:
    """Raise naming both rows when two attempts (aggregated: two cells) have the same identity."""
    problems = []
    # An attempt is identified by its design, query and the list it was shown: the rotation and/or the ordering
    # as given (shuffled lists without a rotation id are distinct attempts; an `attempt` or `epoch` column
    # is a design column and separates repeats of the same list).
    ident = df[list(_DESIGN) + extras + ["cluster_id", "query_id", "rotation"]].assign(ordering=given_ordering)
    if weighted:
        # Aggregated rows are cells, not attempts: many rows share a query and a list and differ in the outcome.
        # A cell is identified by the attempt identity plus the outcome; the same cell twice is an error (its
        # attempts would be counted twice; an aggregated file lists each cell once).
        ident = ident.assign(**{c: df[c] for c in CELL_OUTCOME})
    dup = ident.duplicated(keep="first").to_numpy()
    if dup.any() and (weighted or duplicates != "count"):
        gid = ident.groupby(list(ident.columns), dropna=False, sort=False).ngroup().to_numpy()
        first_of = np.full(gid.max() + 1, -1, dtype=np.int64)
        uniq, first_idx = np.unique(gid, return_index=True)
        first_of[uniq] = first_idx
        for i in np.flatnonzero(dup):
            j = first_of[gid[i]]
            values = {k: _plain(v) for k, v in ident.iloc[i].items()}
            if values["rotation"] is not None:
                values.pop("ordering")
            message = duplicate_cell_message if weighted else duplicate_message
            problems.append(problem(files[i], rows[i], "query_id", message(
                values, int(rows[j]), files[j] if files[j] != files[i] else None)))
        raise SelectionLogError(problems)


#: Columns that, with the attempt identity, identify a cell of an aggregated log.
def _pair_codes(*cols_and_mask) -> tuple[tuple, np.ndarray]:
    """``(distinct values, codes)`` of the rows of ``mask`` over two or three columns (``a, b, mask[, c]``):
    ``distinct`` holds one list per column (the value combinations present, missing values as ``pd.NA``) and
    ``codes[i]`` the combination of the i-th row of ``mask``. Each column is factorised whole (no take of its
    text), the combinations found with NumPy."""
    a, b, mask, *rest = cols_and_mask
    mask = np.asarray(mask, dtype=bool)
    cols = [a, b, *rest]
    codes, uniques = [], []
    for col in cols:
        c, u = pd.factorize(col, use_na_sentinel=False)
        codes.append(np.asarray(c, dtype=np.int64)[mask])
        uniques.append(list(u))
    combo = np.zeros(int(mask.sum()), dtype=np.int64)
    for c, u in zip(codes, uniques):       # one code per combination so far, times the next column's values
        combo = np.unique(combo * max(len(u), 1) + c, return_inverse=True)[1].reshape(-1).astype(np.int64)
    first = np.unique(combo, return_index=True)[1]
    distinct = tuple([u[k] for k in c[first].tolist()] for c, u in zip(codes, uniques))
    return distinct, combo


def _rank_at(shown, members, position):
    """Rank among the cluster's tools (``members``) of the tool shown at 1-based ``position``; NA when unknown
    or when that tool is not one of the cluster's."""
    if position is None or position is pd.NA or not (1 <= int(position) <= len(shown)):
        return pd.NA
    if shown[int(position) - 1] not in members:
        return pd.NA
    return sum(1 for t in shown[: int(position)] if t in members)


def _id_strings(col: pd.Series) -> pd.Series:
    """Ids as strings; integral numbers (from CSV/JSON) lose any '.0'."""
    if pd.api.types.is_numeric_dtype(col) and not pd.api.types.is_bool_dtype(col):
        num = pd.to_numeric(col)
        if ((num % 1 == 0) | num.isna()).all():
            return num.astype("Int64").astype("string")
    return col.astype("string")
