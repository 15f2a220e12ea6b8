"""Counterbalanced study designs: which order each query shows the tools (or options) in. See :func:`design_study`."""

from __future__ import annotations

import itertools
import json
import math
import numbers
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeAlias, cast

import numpy as np
import pandas as pd

from .._validation import check_choice, check_rng

if TYPE_CHECKING:
    import os
    from collections.abc import Mapping, Sequence

    from ..design import StudyPlan
    from ..io import ToolCatalog

    #: What :func:`design_study` takes as its catalog: tools (a catalog or a file) or multiple-choice items.
    CatalogLike: TypeAlias = ("ToolCatalog | str | os.PathLike[str] | Mapping[str, Sequence[str]] | pd.DataFrame | "
                              "Sequence[Mapping[str, Any]]")
    #: What :func:`load_queries` takes: ``{cluster_id: [query text, ...]}`` or a queries file.
    QueriesLike: TypeAlias = "Mapping[str, Sequence[str]] | str | os.PathLike[str]"

__all__ = ["design_study", "StudyDesign", "ORDERINGS", "load_catalog", "load_queries", "latin_rows",
           "custom_id", "parse_custom_id"]

#: Accepted ``orderings`` of :func:`design_study`.
ORDERINGS = ("cyclic", "balanced", "all", "random", "pairs")
#: ``orderings="all"`` enumerates K! permutations: refused above this K.
MAX_ALL_K = 7
_SAFE = re.compile(r"^[A-Za-z0-9_]{1,24}$")
_CUSTOM_ID = re.compile(r"^(?P<cluster>[A-Za-z0-9_]+)-(?P<query>q\d+)-o(?P<ordering>\d+)-r(?P<run>\d+)$")


# -- the orderings -------------------------------------------------------------------------------
def latin_rows(k: int, orderings: str = "cyclic") -> list[tuple]:
    """The orderings (permutations of ``0..k-1``) a design cycles through.

    Parameters
    ----------
    k : int
        Number of tools (options) in the list, >= 1.
    orderings : {"cyclic", "balanced", "all", "pairs"}
        ``cyclic``: the k cyclic rotations of the catalog order (a Latin square). ``balanced``: a Williams
        design, a Latin square in which every tool also immediately follows every other tool equally often (k rows
        for even k; for odd k the square and its mirror image, 2k rows, one Latin square after the other).
        ``all``: the k! permutations (k <= 7). ``pairs``: the k(k-1) ordered pairs, each pair next to its reverse.

    Returns
    -------
    list of tuple

    Examples
    --------
    >>> latin_rows(3)
    [(0, 1, 2), (1, 2, 0), (2, 0, 1)]
    >>> latin_rows(4, "balanced")
    [(0, 1, 3, 2), (1, 2, 0, 3), (2, 3, 1, 0), (3, 0, 2, 1)]
    """
    if orderings == "cyclic":
        return [tuple((i + s) % k for i in range(k)) for s in range(k)]
    if orderings == "balanced":
        # Williams (1949): first row 0, 1, k-1, 2, k-2, ...; row s adds s (mod k)
        first, lo, hi = [0], 1, k - 1
        while len(first) < k:
            first.append(lo)
            lo += 1
            if len(first) < k:
                first.append(hi)
                hi -= 1
        rows = [tuple((x + s) % k for x in first) for s in range(k)]
        if k % 2 == 1 and k > 1:
            rows += [tuple(reversed(r)) for r in rows]
        return rows
    if orderings == "all":
        return list(itertools.permutations(range(k)))
    if orderings == "pairs":
        return [p for i, j in itertools.combinations(range(k), 2) for p in ((i, j), (j, i))]
    raise ValueError(f"`orderings` must be one of {list(ORDERINGS)}; got {orderings!r} instead.")


def custom_id(cluster: str, query_id: str, ordering: int, run: int) -> str:
    """The ``custom_id`` of one request: ``{cluster}-{query}-o{ordering}-r{run}``.

    Only letters, digits, ``_`` and ``-`` (what the Anthropic and OpenAI batch APIs accept); 64 characters at
    most. ``cluster`` is the cluster's safe key (its id, or ``c{index}`` when the id has other characters).

    Parameters
    ----------
    cluster : str
        The cluster's safe key.
    query_id : str
        The query's id in the design (``q0001`` ...).
    ordering : int
        1-based index of the ordering among those this query is shown in this run.
    run : int
        The run (1-based).

    Returns
    -------
    str

    Examples
    --------
    >>> custom_id("3", "q0012", 2, 1)
    '3-q0012-o2-r1'
    >>> parse_custom_id("3-q0012-o2-r1")
    {'cluster': '3', 'query': 'q0012', 'ordering': 2, 'run': 1}
    """
    return f"{cluster}-{query_id}-o{int(ordering)}-r{int(run)}"


def parse_custom_id(text: str) -> dict[str, Any]:
    """``{"cluster", "query", "ordering", "run"}`` of a :func:`custom_id`; ValueError for another string.

    Parameters
    ----------
    text : str
        A ``custom_id`` written by :func:`custom_id` (e.g. read back from a provider's results file).

    Returns
    -------
    dict
        ``cluster`` and ``query`` (str), ``ordering`` and ``run`` (int).

    Raises
    ------
    ValueError
        A string that is not ``{cluster}-q{n}-o{n}-r{n}``, named in the message.

    Examples
    --------
    >>> parse_custom_id("c2-q0003-o4-r2")
    {'cluster': 'c2', 'query': 'q0003', 'ordering': 4, 'run': 2}
    >>> parse_custom_id("req-17")
    Traceback (most recent call last):
    ...
    ValueError: not a design custom_id ({cluster}-q{n}-o{n}-r{n}): 'req-17'
    """
    m = _CUSTOM_ID.match(str(text))
    if m is None:
        raise ValueError(f"not a design custom_id ({{cluster}}-q{{n}}-o{{n}}-r{{n}}): {text!r}")
    return {"cluster": m["cluster"], "query": m["query"], "ordering": int(m["ordering"]), "run": int(m["run"])}


# -- inputs --------------------------------------------------------------------------------------
def load_catalog(catalog: ToolCatalog | str | os.PathLike[str]) -> ToolCatalog:
    """A :class:`~toolbias_stats.ToolCatalog` from a catalog object, a manifest, or any catalog file the package reads.

    A BiasBusters ``clusters.json`` (a list of lists) is read with its ``api_meta.json`` and ``cluster_names.json``
    when they lie beside it; other files (CSV, JSONL, Parquet, JSON records) as a catalog table; a ``.toml``
    study manifest gives its catalog.

    Parameters
    ----------
    catalog : ToolCatalog or path-like
        A catalog (returned as it is) or a file: BiasBusters ``clusters.json``, a catalog table, or a study
        manifest.

    Returns
    -------
    ToolCatalog

    Examples
    --------
    >>> import toolbias_stats as tbs
    >>> cat = load_catalog(tbs.datasets.path("biasbusters/clusters.json"))
    >>> len(cat.clusters), len(cat.tools("1"))
    (10, 5)
    """
    from ..io import ToolCatalog
    from ..io._manifest import _is_cluster_list
    from ..io.readers.biasbusters import read_biasbusters_catalog
    from ..io.readers.table import read_catalog_table

    if isinstance(catalog, ToolCatalog):
        return catalog
    path = Path(cast("str | os.PathLike[str]", catalog))
    if path.suffix.lower() == ".toml":
        from ..io import read_study

        return read_study(path, lazy=True).catalog
    if path.exists() and _is_cluster_list(path):
        meta = path.parent / "api_meta.json"
        names = path.parent / "cluster_names.json"
        return read_biasbusters_catalog(path, api_meta=meta if meta.exists() else None,
                                        cluster_names=names if names.exists() else None)
    return read_catalog_table(path)


def load_queries(queries: QueriesLike) -> dict[str, list[str]]:
    """``{cluster_id: [query text, ...]}`` from a dict, a manifest, a BiasBusters ``queries.json`` or a table.

    A table (CSV, JSONL, Parquet) needs the columns ``cluster_id`` and ``query`` (or ``query_text``); rows keep
    their file order within each cluster.

    Parameters
    ----------
    queries : dict or path-like
        ``{cluster_id: [query text, ...]}`` (returned with str keys and texts), a study manifest (its queries),
        a BiasBusters ``queries.json``, or a table (``.csv``, ``.jsonl``/``.ndjson``, ``.parquet``, ``.json``
        records).

    Returns
    -------
    dict
        ``{cluster_id: [query text, ...]}``.

    Raises
    ------
    SelectionLogError
        A missing file, an unknown file type, a missing column, a row without cluster or query text: each
        named by file, row and field (every bad row at once).

    Examples
    --------
    >>> import toolbias_stats as tbs
    >>> qs = load_queries(tbs.datasets.path("biasbusters/queries.json"))
    >>> sorted(qs, key=int)[:3], len(qs["1"])
    (['1', '2', '3'], 100)
    >>> load_queries({1: ["find x"]})
    {'1': ['find x']}
    """
    from ..exceptions import SelectionLogError, problem

    if isinstance(queries, dict):
        return {str(c): [str(q) for q in qs] for c, qs in queries.items()}
    path = Path(cast("str | os.PathLike[str]", queries))
    if not path.exists():
        raise SelectionLogError(problem(path, None, None, "queries file not found"))
    suffix = path.suffix.lower()
    if suffix == ".toml":
        from ..io import read_study

        study = read_study(path, lazy=True)
        if not study.queries:
            raise SelectionLogError(problem(path, None, "queries", "the manifest names no queries file"))
        return study.queries
    if suffix == ".json":
        found = _biasbusters_queries(path)
        if found is not None:
            return found
    return _query_map(path, _query_table(path, suffix))


def _biasbusters_queries(path: Path) -> dict | None:
    """A ``.json`` file that starts as a list of objects read as a BiasBusters ``queries.json`` (None if not)."""
    from ..exceptions import SelectionLogError

    with path.open(encoding="utf-8") as fh:
        head = fh.read(200).lstrip()
    if head.startswith("[") and head[1:].lstrip().startswith("{"):
        try:
            from ..io.readers.biasbusters import read_biasbusters_queries

            return read_biasbusters_queries(path)
        except SelectionLogError:
            pass
    return None


def _query_table(path: Path, suffix: str) -> pd.DataFrame:
    """The rows of a queries table (CSV, JSONL, Parquet, JSON records)."""
    from ..exceptions import SelectionLogError, problem

    if suffix == ".csv":
        return pd.read_csv(path, dtype=str, keep_default_na=False)
    if suffix in (".jsonl", ".ndjson"):
        return pd.read_json(path, lines=True, dtype=False)
    if suffix == ".parquet":
        return pd.read_parquet(path)
    if suffix == ".json":
        return pd.read_json(path, dtype=False)
    raise SelectionLogError(problem(path, None, None, f"unknown queries file type {suffix!r} (expected a "
                                                      "BiasBusters queries.json, CSV, JSONL, Parquet or a "
                                                      "study manifest)"))


def _query_map(path: Path, frame: pd.DataFrame) -> dict:
    """``{cluster_id: [query text, ...]}`` of a queries table, every bad row reported."""
    from ..exceptions import SelectionLogError, problem

    text_col = "query" if "query" in frame.columns else "query_text" if "query_text" in frame.columns else None
    missing = [c for c, ok in (("cluster_id", "cluster_id" in frame.columns), ("query", text_col)) if not ok]
    if missing:
        raise SelectionLogError([problem(path, None, c, "required queries column is missing") for c in missing])
    out: dict = {}
    problems = []
    for i, (c, q) in enumerate(zip(frame["cluster_id"], frame[text_col]), start=1):
        if c is None or (isinstance(c, float) and math.isnan(c)) or str(c).strip() == "":
            problems.append(problem(path, i, "cluster_id", "missing value"))
        elif not isinstance(q, str) or not q.strip():
            problems.append(problem(path, i, text_col, f"expected a query text, got {q!r}"))
        else:
            key = str(int(c)) if isinstance(c, float) and float(c).is_integer() else str(c)
            out.setdefault(key, []).append(q)
    if problems:
        raise SelectionLogError(problems)
    return out


def _choice_items(items) -> dict:
    """``{item_id: [option, ...]}`` of multiple-choice items (a mapping, or records / a DataFrame with
    ``item_id`` and ``options``)."""
    if isinstance(items, dict):
        return {str(k): [str(o) for o in v] for k, v in items.items()}
    frame = pd.DataFrame(items)
    if "item_id" not in frame.columns or "options" not in frame.columns:
        raise ValueError("multiple-choice items need `item_id` and `options` (a list per item); got columns "
                         f"{list(frame.columns)} instead.")
    return {str(i): [str(o) for o in opts] for i, opts in zip(frame["item_id"], frame["options"])}


def _is_choice_items(obj) -> bool:
    if isinstance(obj, pd.DataFrame):
        return "options" in obj.columns
    if isinstance(obj, dict):
        return bool(obj) and all(isinstance(v, (list, tuple)) for v in obj.values())
    if isinstance(obj, (list, tuple)):
        return bool(obj) and all(isinstance(r, dict) and "options" in r for r in obj)
    return False


# -- result --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class StudyDesign:
    """Result of :func:`design_study`: one row per request to send.

    Attributes
    ----------
    table : pandas.DataFrame
        ``cluster_id``, ``query_id`` (``q0001``... in the queries file's order), ``query`` (the text; for
        multiple-choice items the item id), ``run``, ``ordering_index`` (1-based index among the orderings this
        query is shown in this run), ``row`` (index of the ordering in :func:`latin_rows`, -1 for random ones),
        ``ordering`` (tool ids in the order shown, ``|``-joined; the SelectionLog's ``ordering``) and
        ``custom_id``.
    catalog : ToolCatalog or None
        The tools (None for multiple-choice items).
    balance : pandas.DataFrame
        One row per cluster: ``k`` (tools), ``queries``, ``orderings_per_query``, ``min_count`` / ``max_count``
        (over tools x positions of how often a tool is shown at a position), ``spread`` (max - min),
        ``balanced`` (spread <= 1), ``complete`` (every query shows every tool at every position in every run)
        and ``design`` ("latin square", "balanced incomplete", "random" ...).
    settings : dict
        ``orderings``, ``n_orderings``, ``runs``, ``n_queries``, ``seed``, ``kind`` ("tools", "choice" or
        "pairs") and, when planned, the plan's target and choice.
    plan : StudyPlan or None
    warnings : list of str

    Examples
    --------
    >>> import toolbias_stats as tbs
    >>> cat = tbs.ToolCatalog.from_records([{"cluster_id": "1", "tool_id": t} for t in "abcd"])
    >>> d = tbs.design_study(cat, {"1": ["find x", "find y"]}, orderings="balanced", n_orderings=2)
    >>> d
    StudyDesign(4 requests, 1 clusters, orderings='balanced', runs=1, balanced)
    >>> d.balance[["k", "orderings_per_query", "spread", "complete", "design"]].to_dict("records")
    [{'k': 4, 'orderings_per_query': 2, 'spread': 0, 'complete': False, 'design': 'balanced incomplete'}]
    >>> d.position_counts().query("tool_id == 'a'")["count"].tolist()    # 'a' once at each position
    [1, 1, 1, 1]
    """

    table: pd.DataFrame
    catalog: ToolCatalog | None
    balance: pd.DataFrame
    settings: dict
    plan: StudyPlan | None = field(default=None, repr=False)
    warnings: list = field(default_factory=list)

    def to_frame(self) -> pd.DataFrame:
        """The design table (a copy)."""
        return self.table.copy()

    def position_counts(self) -> pd.DataFrame:
        """How often each tool is shown at each position, per cluster: ``cluster_id, tool_id, position, count``
        (positions 1-based; zeros included)."""
        rows = []
        for cid, sub in self.table.groupby("cluster_id", sort=False):
            tools = _cluster_tools(self, cid)
            counts = {(t, p): 0 for t in tools for p in range(1, _n_shown(sub) + 1)}
            for order in sub["ordering"]:
                for p, t in enumerate(order.split("|"), start=1):
                    counts[(t, p)] = counts.get((t, p), 0) + 1
            rows += [{"cluster_id": cid, "tool_id": t, "position": p, "count": n} for (t, p), n in counts.items()]
        return pd.DataFrame(rows)

    def to_dict(self) -> dict:
        """JSON-ready summary: settings, balance per cluster, number of requests, warnings."""
        bal = json.loads(self.balance.to_json(orient="records"))
        return {"settings": dict(self.settings), "requests": len(self.table), "balance": bal,
                "warnings": list(self.warnings)}

    def __len__(self):
        return len(self.table)

    def __repr__(self):
        ok = bool(self.balance["balanced"].all()) if len(self.balance) else True
        return (f"StudyDesign({len(self.table)} requests, {self.balance.shape[0]} clusters, "
                f"orderings={self.settings['orderings']!r}, runs={self.settings['runs']}, "
                f"{'balanced' if ok else 'NOT balanced'})")


def _cluster_tools(design, cid):
    items = design.settings.get("_tools") or {}
    return items.get(cid) or design.catalog.tools(cid)


def _n_shown(sub):
    return len(sub["ordering"].iloc[0].split("|"))


# -- main function -------------------------------------------------------------------------------
def design_study(catalog: CatalogLike, queries: QueriesLike | None = None, *,
                 orderings: Literal["cyclic", "balanced", "all", "random", "pairs"] = "cyclic",
                 n_orderings: int | None = None, runs: int = 1, n_queries: int | None = None,
                 clusters: Sequence[str] | None = None, target_width: float | None = None, pilot: Any = None,
                 plan_options: Mapping[str, Any] | None = None, plan: StudyPlan | None = None,
                 rng: np.random.Generator | int | None = None) -> StudyDesign:
    """A counterbalanced design: which tools (or options) each request shows, in which order.

    Parameters
    ----------
    catalog : ToolCatalog, path, or multiple-choice items
        The clusters of equivalent tools (a :class:`~toolbias_stats.ToolCatalog` or any catalog file the package
        reads, see :func:`load_catalog`). Multiple-choice items instead: ``{item_id: [option, ...]}`` or records /
        a DataFrame with ``item_id`` and ``options``; each item is then its own cluster, shown once per ordering
        (``queries`` is not used).
    queries : dict or path
        ``{cluster_id: [query text, ...]}`` or a queries file (:func:`load_queries`). Required for a catalog.
    orderings : {"cyclic", "balanced", "all", "random", "pairs"}, default "cyclic"
        ``cyclic``: rotations of the catalog order (a Latin square); ``balanced``: a Williams square (also
        balanced for which tool precedes which); ``all``: every permutation; ``random``: an independent uniform
        permutation per request (balance only in expectation; reported); ``pairs``: a tournament of
        description variants, every ordered pair of the cluster's tools (each pair in both orders).
    n_orderings : int, optional
        Orderings per query and run (default: all rows of the chosen square, i.e. K for ``cyclic``, K or 2K for
        ``balanced``, K! for ``all``, K for ``random``, K(K-1) for ``pairs``). Fewer than the square's rows makes
        a **balanced incomplete** design: the square's rows are dealt out in turn over the queries and runs of a
        cluster, so each tool's count at each position still differs by at most one within the cluster
        (reported in :attr:`StudyDesign.balance`).
    runs : int, default 1
        Repetitions of every query (the SelectionLog's ``run``); later runs continue the deal of orderings.
    n_queries : int, optional
        Queries per cluster (the first ones of the file; default all).
    clusters : sequence of str, optional
        Clusters to design (default all clusters of the catalog that have queries).
    target_width : float, optional
        With ``pilot``: size the design with :func:`~toolbias_stats.plan_study` (the cheapest queries x runs x
        orderings whose expected CI half-width of delta_API and delta_pos is at most ``target_width``); an
        explicit ``n_queries`` / ``runs`` / ``n_orderings`` is then an error.
    pilot : pilot study, VarianceComponents or array_like
        What :func:`~toolbias_stats.plan_study` takes (a SelectionLog, a manifest, assumed distributions ...).
    plan_options : dict, optional
        Extra keyword arguments of :func:`~toolbias_stats.plan_study` (``metrics``, ``n_draws``, ...).
    plan : StudyPlan, optional
        A plan already made with a target (``toolbias-stats plan --out-dir``): its cheapest design gives
        the sizes (instead of ``target_width`` and ``pilot``).
    rng : None, int or numpy.random.Generator
        Used by ``orderings="random"`` and the planner only; the same seed gives the same design.

    Returns
    -------
    StudyDesign

    Raises
    ------
    ValueError
        An unknown ``orderings``, ``n_orderings`` larger than the square (or < 1), a cluster without queries,
        ``all`` with K > 7, planning arguments together with explicit sizes.

    Notes
    -----
    Within a cluster the requests are numbered ``g = ((run - 1) Q + q) n + j`` (query ``q`` of ``Q``, ordering
    ``j`` of ``n``) and request ``g`` shows row ``g mod R`` of the square (``R`` rows). Every row of a Latin
    square puts each tool at each position once, so tool ``t`` is shown at position ``p`` as often as the rows
    that put it there are dealt: with a deal in turn these counts differ by at most one. For odd K the Williams
    design is two Latin squares one after the other, and the argument holds for each.

    Examples
    --------
    >>> import toolbias_stats as tbs
    >>> cat = tbs.ToolCatalog.from_records([{"cluster_id": "1", "tool_id": t} for t in "abc"])
    >>> d = design_study(cat, {"1": ["find x", "find y"]}, orderings="cyclic")
    >>> d.table[["query_id", "ordering", "custom_id"]].head(3).to_dict("records")  # doctest: +NORMALIZE_WHITESPACE
    [{'query_id': 'q0001', 'ordering': 'a|b|c', 'custom_id': '1-q0001-o1-r1'},
     {'query_id': 'q0001', 'ordering': 'b|c|a', 'custom_id': '1-q0001-o2-r1'},
     {'query_id': 'q0001', 'ordering': 'c|a|b', 'custom_id': '1-q0001-o3-r1'}]
    >>> bool(d.balance["balanced"].all())
    True
    """
    check_choice("orderings", orderings, ORDERINGS)
    seed = rng if isinstance(rng, (int, type(None))) else "generator"
    gen = check_rng(rng)
    warnings_: list = []
    choice, cat, tools, qmap, option_text = _design_inputs(catalog, queries)
    wanted = _wanted_clusters(clusters, tools, qmap, orderings)
    n_queries, runs, n_orderings, plan = _design_sizes(plan, target_width, pilot, plan_options, n_queries, runs,
                                                       n_orderings, gen, warnings_)
    rows: list = []
    balance = []
    keys = _safe_keys(wanted)
    for cid in wanted:
        cluster_rows, bal_row = _cluster_design(cid, tools[cid], qmap[cid], keys[cid], orderings, n_orderings, runs,
                                                n_queries, plan, gen, warnings_)
        rows += cluster_rows
        balance.append(bal_row)
    table = pd.DataFrame(rows, columns=["cluster_id", "query_id", "query", "run", "ordering_index", "row",
                                        "ordering", "custom_id"])
    table["run"] = table["run"].astype(np.int64)
    bal = pd.DataFrame(balance)
    unbalanced = bal.loc[~bal["balanced"], "cluster_id"].tolist()
    if unbalanced:
        warnings_.append(f"cluster(s) {unbalanced}: tool counts per position differ by more than one "
                         f"(orderings={orderings!r}); see .balance")
    settings = {"orderings": orderings, "n_orderings": n_orderings, "runs": runs, "n_queries": n_queries,
                "seed": seed, "kind": "choice" if choice else ("pairs" if orderings == "pairs" else "tools"),
                "cluster_keys": keys}
    if not choice:
        settings["_queries"] = {c: list(qmap[c]) for c in wanted}    # every query (a pilot's plan may use more)
    if choice:
        settings["_tools"] = tools
        settings["option_text"] = option_text
    if plan is not None:
        settings["plan"] = {"target": dict(plan.target), "queries": n_queries, "runs": runs,
                            "orderings": n_orderings}
    return StudyDesign(table=table, catalog=cat, balance=bal, settings=settings, plan=plan, warnings=warnings_)


# -- design_study's stages: inputs -> clusters -> sizes -> one cluster's rows and balance ---------
def _design_inputs(catalog: Any, queries: Any) -> tuple[bool, Any, dict, dict, dict]:
    """``(choice, catalog, tools, queries, option_text)``: the clusters' members and query texts."""
    if _is_choice_items(catalog):
        items = _choice_items(catalog)
        if not items:
            raise ValueError("no multiple-choice items given.")
        tools = {k: [f"{k}::{i + 1}" for i in range(len(v))] for k, v in items.items()}
        option_text = {f"{k}::{i + 1}": o for k, v in items.items() for i, o in enumerate(v)}
        return True, None, tools, {k: [k] for k in items}, option_text
    cat = load_catalog(catalog)
    if queries is None:
        raise ValueError("`queries` is required with a tool catalog: {cluster_id: [query text, ...]} or a "
                         "queries file.")
    qmap = load_queries(queries)
    return False, cat, {c: cat.tools(c) for c in cat.clusters}, qmap, {}


def _wanted_clusters(clusters: Any, tools: dict, qmap: dict, orderings: str) -> list:
    """The clusters to design, checked: known, with queries, with at least 2 tools (at most 7 for ``all``)."""
    wanted = [str(c) for c in clusters] if clusters is not None else [c for c in tools if c in qmap]
    unknown = [c for c in wanted if c not in tools]
    if unknown:
        raise ValueError(f"`clusters` names unknown cluster(s) {unknown}; the catalog has {list(tools)}.")
    empty = [c for c in wanted if not qmap.get(c)]
    if empty or not wanted:
        raise ValueError(f"no queries for cluster(s) {empty or list(tools)}; the queries cover {sorted(qmap)}.")
    small = [c for c in wanted if len(tools[c]) < 2]
    if small:
        raise ValueError(f"cluster(s) {small} have fewer than 2 tools: there is no order to balance.")
    if orderings == "all" and max(len(tools[c]) for c in wanted) > MAX_ALL_K:
        raise ValueError(f"`orderings='all'` enumerates K! permutations; K <= {MAX_ALL_K} only (use 'balanced' or "
                         "'cyclic').")
    return wanted


def _design_sizes(plan: Any, target_width: Any, pilot: Any, plan_options: Any, n_queries: Any, runs: Any,
                  n_orderings: Any, gen: np.random.Generator, warnings_: list) -> tuple[Any, int, Any, Any]:
    """``(n_queries, runs, n_orderings, plan)``: as given, from a plan, or planned from a pilot."""
    if plan is not None:
        if target_width is not None or pilot is not None or n_queries is not None or n_orderings is not None \
                or runs != 1:
            raise ValueError("`plan` gives the sizes; do not also give `target_width`, `pilot`, `n_queries`, "
                             "`n_orderings` or `runs`.")
        n_queries, runs, n_orderings, msgs = _sizes_from(plan, "the plan's target")
        warnings_ += msgs
    elif target_width is not None or pilot is not None:
        if target_width is None or pilot is None:
            raise ValueError("planning needs both `target_width` and `pilot`.")
        if n_queries is not None or n_orderings is not None or runs != 1:
            raise ValueError("with `target_width` the planner chooses queries, runs and orderings; do not also "
                             "give `n_queries`, `n_orderings` or `runs`.")
        n_queries, runs, n_orderings, plan, msgs = _from_plan(pilot, target_width, plan_options, gen)
        warnings_ += msgs
    runs = _count("runs", runs)
    n_queries = None if n_queries is None else _count("n_queries", n_queries)
    return n_queries, runs, n_orderings, plan


def _cluster_design(cid: str, members: list, texts: list, key: str, orderings: str, n_orderings: Any, runs: int,
                    n_queries: int | None, plan: Any, gen: np.random.Generator,
                    warnings_: list) -> tuple[list, dict]:
    """One cluster's request rows and its balance row."""
    k = len(members)
    square = latin_rows(k, orderings) if orderings != "random" else None
    n_rows = len(square) if square is not None else k
    n = n_rows if n_orderings is None else _count("n_orderings", n_orderings)
    if square is not None and n > n_rows:
        if plan is not None:
            warnings_.append(f"cluster {cid!r}: the plan asks for {n} orderings per query; the {orderings} "
                             f"design has {n_rows} (using {n_rows})")
            n = n_rows
        else:
            raise ValueError(f"`n_orderings` = {n} exceeds the {n_rows} orderings of the {orderings!r} design for "
                             f"cluster {cid!r} (K = {k}); use more queries or runs instead.")
    q_count = len(texts) if n_queries is None else min(n_queries, len(texts))
    if n_queries is not None and n_queries > len(texts):
        warnings_.append(f"cluster {cid!r}: {n_queries} queries asked for, the queries file has {len(texts)} "
                         f"(using {len(texts)})")
    width = max(4, len(str(q_count)))
    rows = []
    for run in range(1, runs + 1):
        for qi in range(q_count):
            qid = f"q{qi + 1:0{width}d}"
            for j in range(n):
                g = ((run - 1) * q_count + qi) * n + j
                if square is None:
                    perm, r_idx = tuple(int(x) for x in gen.permutation(k)), -1
                else:
                    r_idx = g % n_rows
                    perm = square[r_idx]
                rows.append({"cluster_id": cid, "query_id": qid, "query": texts[qi], "run": run,
                             "ordering_index": j + 1, "row": r_idx,
                             "ordering": "|".join(members[x] for x in perm),
                             "custom_id": custom_id(key, qid, j + 1, run)})
    kind_of = ("random" if square is None else "tournament (ordered pairs)" if orderings == "pairs" else None)
    return rows, _balance_row(cid, members, rows, orderings, q_count, n, n_rows, kind_of)


def _balance_row(cid: str, members: list, rows: list, orderings: str, q_count: int, n: int, n_rows: int,
                 kind: str | None) -> dict:
    """How evenly one cluster's rows put each tool at each position (a row of :attr:`StudyDesign.balance`)."""
    k = len(members)
    shown = 2 if orderings == "pairs" else k
    counts = np.zeros((k, shown), dtype=np.int64)
    index = {t: i for i, t in enumerate(members)}
    per_query: dict = {}
    for r in rows:
        order = r["ordering"].split("|")
        for p, t in enumerate(order):
            counts[index[t], p] += 1
        per_query.setdefault((r["query_id"], r["run"]), set()).update((t, p) for p, t in enumerate(order))
    complete = all(len(s) == k * shown for s in per_query.values()) and orderings != "pairs"
    spread = int(counts.max() - counts.min())
    if kind is None:
        kind = ("latin square" if n == n_rows and orderings in ("cyclic", "balanced") and complete else
                "all permutations" if orderings == "all" and n == n_rows else "balanced incomplete")
    return {"cluster_id": cid, "k": k, "queries": q_count, "orderings_per_query": n,
            "min_count": int(counts.min()), "max_count": int(counts.max()), "spread": spread,
            "balanced": spread <= 1, "complete": complete, "design": kind}


def _count(name, value):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise ValueError(f"`{name}` must be a positive integer; got {value!r} instead.")
    return int(value)


def _safe_keys(cluster_ids) -> dict:
    """Cluster key used in custom_ids: the id when it is short and safe, else ``c{index}`` (1-based)."""
    keys = {}
    for i, c in enumerate(cluster_ids, start=1):
        keys[c] = c if _SAFE.match(c) else f"c{i}"
    if len(set(keys.values())) < len(keys):
        keys = {c: f"c{i}" for i, c in enumerate(cluster_ids, start=1)}
    return keys


def _from_plan(pilot, target_width, plan_options, gen):
    """(queries, runs, orderings, plan, warnings) of the cheapest design that reaches ``target_width``."""
    from ..design import plan_study

    opts = {"metrics": ("delta_api", "delta_pos"), "n_draws": 1000}
    opts.update(plan_options or {})
    plan = plan_study(pilot, target=float(target_width), target_kind="width", rng=gen, **opts)
    q, s, r, msgs = _sizes_from(plan, f"a CI half-width of {target_width}")
    return q, s, r, plan, msgs


def _sizes_from(plan, what):
    """(queries, runs, orderings, warnings) of a plan's cheapest design (the largest over the pilot's groups)."""
    cheap = plan.cheapest
    if plan.target.get("value") is None or not len(cheap):
        raise ValueError("the plan has no target, so no cheapest design: give a target (e.g. --target-width).")
    if not bool(cheap["feasible"].all()):
        reason = "; ".join(str(r) for r in cheap["reason"] if r)
        raise ValueError(f"no design reaches {what}: {reason}")
    q, s, r = int(cheap["queries"].max()), int(cheap["runs"].max()), int(cheap["rotations"].max())
    return q, s, r, [(f"planned with plan_study: {q} queries per cluster x {s} runs x {r} orderings "
                      f"({plan.target['kind']} target {plan.target['value']:g})")]
