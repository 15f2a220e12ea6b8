"""SelectionLog -> TOOL-SHADOW turns: every attempt is a turn, its ordering is the manifest.

In a tool-selection study (BiasBusters and every log the package reads) an attempt shows the LLM the
functionally equivalent tools of one cluster in some order and records which one it chose. As a harness
audit: each attempt is a turn, the ``ordering`` is the manifest shown at that turn (positions 1..K), every
tool of the cluster is relevant (they are interchangeable by design) and the chosen tool is the one called.
Description lengths come from the catalog, the turn's text from the study's queries.

Attempts without a valid choice (``status`` other than ``ok``: no call, unknown tool, parse error) carry no
information about *which* position wins. By default they are **excluded** and counted by status
(``ShadowAudit.n_excluded``); ``invalid="keep"`` keeps them as turns in which no tool was called. Attempts
without a recorded ordering (raw transcripts) cannot be placed in a manifest and are always excluded.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Literal

import numpy as np
import pandas as pd

from .._validation import check_by, check_choice
from ..exceptions import ExcludedRowsWarning
from ._io import ShadowAudit

if TYPE_CHECKING:
    from ..io import SelectionLog, Study, ToolCatalog

__all__ = ["audit_from_study", "audit_from_selection_log", "INVALID_POLICIES", "UNITS"]

INVALID_POLICIES = ("exclude", "keep")
#: Resampling / clustering unit: the attempt itself, or the query (all rotations and runs of one query together).
UNITS = ("turn", "query")


def _desc_lengths(catalog) -> dict:
    tab = catalog.table if hasattr(catalog, "table") else catalog.to_frame()
    texts = tab.get("tool_description", pd.Series("", index=tab.index)).fillna("").astype(str)
    if "api_description" in tab.columns:
        texts = texts + " " + tab["api_description"].fillna("").astype(str)
    return dict(zip(tab["tool_id"].astype(str), texts.str.strip().str.len().astype(float)))


def _tool_names(catalog) -> dict:
    tab = catalog.table if hasattr(catalog, "table") else catalog.to_frame()
    if "tool_name" not in tab.columns:
        return {}
    name = tab["tool_name"].fillna("").astype(str)
    if "api_name" in tab.columns:
        name = name + " " + tab["api_name"].fillna("").astype(str)
    return dict(zip(tab["tool_id"].astype(str), name.str.strip()))


def audit_from_selection_log(log: SelectionLog | pd.DataFrame, catalog: ToolCatalog, *,
                             queries: Mapping[str, Sequence[str]] | None = None, by: str | Sequence[str] = "model",
                             invalid: Literal["exclude", "keep"] = "exclude", unit: Literal["turn", "query"] = "turn",
                             name_text: Literal["catalog", "id"] = "catalog") -> ShadowAudit:
    """A :class:`ShadowAudit` from a SelectionLog and its ToolCatalog.

    Parameters
    ----------
    log : SelectionLog or pandas.DataFrame
        Needs ``ordering`` (tool ids joined by ``|``, shown in that order), ``chosen_tool``, ``status``.
    catalog : ToolCatalog
        Description length = characters of ``tool_description`` + ``" "`` + ``api_description``.
    queries : dict, optional
        ``{cluster_id: [query text, ...]}`` (``Study.queries``); query ``q`` of a cluster is item ``q - 1``.
        Gives the turn's task text for domain S.
    by : str or list of str, default "model"
        Columns kept as groups (one harness per LLM).
    invalid : {"exclude", "keep"}, default "exclude"
        Attempts whose status is not ``ok``: left out and counted, or kept with no tool called.
    unit : {"turn", "query"}, default "turn"
        Bootstrap and clustering unit. ``"query"`` keeps every rotation and run of a query of a cluster
        together (their choices are not independent); ``"turn"`` is the paper's turn.
    name_text : {"catalog", "id"}, default "catalog"
        The tool-name text embedded for S: the catalog's ``tool_name + " " + api_name``, or the tool id.

    Returns
    -------
    ShadowAudit
        Tool names are the catalog's ``tool_id``; rows carry ``tool_text`` for the similarity when
        ``name_text="catalog"``.

    Warns
    -----
    ExcludedRowsWarning
        When attempts are left out (counts on ``n_excluded``).

    Examples
    --------
    >>> from toolbias_stats.simulate import simulate_selection_log
    >>> log = simulate_selection_log(n_clusters=2, n_queries=10, rng=0).log
    >>> audit_from_selection_log(log, log.catalog)
    ShadowAudit(100 turns, 10 tools, 500 rows, groups=['model'])
    """
    check_choice("invalid", invalid, INVALID_POLICIES)
    check_choice("unit", unit, UNITS)
    check_choice("name_text", name_text, ("catalog", "id"))
    df = log.to_frame() if hasattr(log, "to_frame") else pd.DataFrame(log)
    by = check_by(by, df.columns)
    if "ordering" not in df.columns:
        raise ValueError("the selection log has no `ordering` column: the manifest of each attempt is unknown.")
    excluded = {}
    no_order = df["ordering"].isna() | (df["ordering"].astype("string").fillna("") == "")
    if no_order.any():
        excluded["no_ordering"] = int(no_order.sum())
    status = df["status"].astype(str)
    bad = (status != "ok") & ~no_order
    if invalid == "exclude" and bad.any():
        for s, n in status[bad].value_counts().items():
            excluded[f"status_{s}"] = int(n)
    keep = ~no_order & ((status == "ok") | (invalid == "keep"))
    d = df.loc[keep].reset_index(drop=True)
    if excluded:
        warnings.warn(f"TOOL-SHADOW adapter: {sum(excluded.values())} attempt(s) excluded ({excluded})",
                      ExcludedRowsWarning, stacklevel=2)
    lengths = _desc_lengths(catalog)
    tools = d["ordering"].astype(str).str.split("|")
    k = tools.str.len().to_numpy()
    turn_ids = np.arange(len(d)).astype(str)
    flat = np.concatenate(tools.to_numpy()) if len(d) else np.array([], dtype=str)
    pos = np.concatenate([np.arange(1, n + 1) for n in k]) if len(d) else np.array([], dtype=int)
    rep = np.repeat(np.arange(len(d)), k)
    chosen = d["chosen_tool"].astype("string").fillna("").to_numpy(str)
    ok = (d["status"].astype(str) == "ok").to_numpy()
    called = ((flat == chosen[rep]) & ok[rep]).astype(np.int8)
    if unit == "turn":
        units = turn_ids
    else:
        keys = [c for c in ("cluster_id", "query_id") if c in d.columns]
        units = d[keys].astype(str).agg("/".join, axis=1).to_numpy() if keys else turn_ids
    rows = pd.DataFrame({"turn_id": turn_ids[rep], "tool_name": flat, "position": pos, "n_tools": k[rep],
                         "called": called, "relevant": np.ones(len(flat), np.int8),
                         "desc_len": pd.Series(flat).map(lengths).to_numpy(float), "unit": units[rep]})
    for c in by:
        rows[c] = d[c].to_numpy()[rep]
    tasks = {}
    if queries:
        for t, c, q in zip(turn_ids, d["cluster_id"].astype(str), d["query_id"].astype(str)):
            lst = queries.get(c)
            if lst and q.isdigit() and 1 <= int(q) <= len(lst):
                tasks[t] = lst[int(q) - 1]
    audit = ShadowAudit.from_frame(rows, tasks=tasks, group_columns=tuple(by),
                                   source={"adapter": "SelectionLog", "invalid": invalid, "unit": unit,
                                           "description_length": "len(tool_description + ' ' + api_description)"},
                                   n_excluded=excluded)
    if name_text == "catalog":
        names = _tool_names(catalog)
        audit.rows["tool_text"] = audit.rows["tool_name"].map(lambda t: names.get(t) or t)
    return audit


def audit_from_study(study: Study, *, by: str | Sequence[str] = "model",
                     invalid: Literal["exclude", "keep"] = "exclude", unit: Literal["turn", "query"] = "turn",
                     name_text: Literal["catalog", "id"] = "catalog") -> ShadowAudit:
    """A :class:`ShadowAudit` from a study (:func:`toolbias_stats.read_study`): its log, catalog and queries.

    See :func:`audit_from_selection_log` for how attempts without a valid call enter.

    Parameters
    ----------
    study : Study
        Its ``log``, ``catalog`` and ``queries`` (the turn's task text for domain S) are used.
    by : str or list of str, default "model"
        Columns kept as groups (one harness per LLM).
    invalid : {"exclude", "keep"}, default "exclude"
        Attempts whose status is not ``ok``: left out and counted, or kept with no tool called.
    unit : {"turn", "query"}, default "turn"
        Bootstrap and clustering unit (see :func:`audit_from_selection_log`).
    name_text : {"catalog", "id"}, default "catalog"
        The tool-name text embedded for S.

    Returns
    -------
    ShadowAudit
        One turn per attempt with a recorded ordering; ``tasks`` holds the text of each turn's query.

    Examples
    --------
    A study built in memory from a simulated log and two queries per cluster (``tbs.read_study`` gives the
    same for a manifest on disk):

    >>> import toolbias_stats as tbs
    >>> from toolbias_stats.simulate import simulate_selection_log
    >>> log = simulate_selection_log(n_clusters=2, n_queries=2, rng=0).log
    >>> study = tbs.Study(log=log, queries={"1": ["weather in Paris", "forecast for Rome"],
    ...                                     "2": ["convert 5 USD to EUR", "exchange rate of the yen"]})
    >>> audit = tbs.shadow.audit_from_study(study, by="model")
    >>> audit
    ShadowAudit(20 turns, 10 tools, 100 rows, groups=['model'])
    >>> audit.tasks["0"]
    'weather in Paris'
    """
    return audit_from_selection_log(study.log, study.catalog, queries=getattr(study, "queries", None), by=by,
                                    invalid=invalid, unit=unit, name_text=name_text)
