"""Subset-selection mitigation (BiasBusters sec. 4.4): subset quality (Table 2) and the implied selection distribution.

The mitigation asks a small LLM for the subset of candidate tools that can solve a query and then chooses
uniformly from it. Two questions: how good are the subsets (micro precision, micro recall, exact-set match,
overall and per ground-truth set size K; :func:`subset_selection_metrics`), and what selection distribution
does "choose uniformly from the predicted subset" imply per cluster, with its delta_API
(:func:`mitigation_distribution`)?
"""

from __future__ import annotations

import json
import numbers
import os
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import pandas as pd

from .._display import ReprHTMLMixin
from .._resampling import ConfidenceInterval, percentile_ci, query_weights
from .._schema import function_name, toolbench_key
from .._validation import check_confidence_level, check_n_resamples, check_rng
from ..exceptions import SelectionLogError, problem
from ..metrics import calibrated_mean_tv, expected_tv_uniform
from ..metrics._bias import _json_num

if TYPE_CHECKING:
    from ..io import ToolCatalog

__all__ = ["SubsetData", "read_subset_predictions", "read_subset_truth", "read_subset_table", "load_subsets",
           "subset_selection_metrics", "SubsetMetricsResult", "mitigation_distribution", "MitigationResult",
           "SUBSET_METRICS"]

#: The three subset-quality metrics (BiasBusters Table 2).
SUBSET_METRICS = ("micro_precision", "micro_recall", "exact_match")
#: Columns of the generic subset table (CSV / Parquet): one row per (query, candidate tool).
TABLE_COLUMNS = ("query_id", "tool_id", "selected", "correct")

_NAN_CI = ConfidenceInterval(np.nan, np.nan)


@dataclass(frozen=True)
class SubsetData:
    """Subset predictions joined with their ground truth, one entry per query (nothing dropped).

    Attributes
    ----------
    table : pandas.DataFrame
        One row per query: ``query_id`` (str), ``cluster_id`` (str or None), ``predicted`` (frozenset of tool ids;
        empty for an empty prediction), ``correct`` (frozenset), ``candidates`` (frozenset: correct and distractor
        tools), ``k`` (size of the correct set).
    source : dict
        ``{"predictions": path, "truth": path}``.
    diagnostics : dict
        What the predictions held that is not a clean subset of candidates, each entry with its line:
        ``"not_candidates"`` (predicted names that are not candidates of their query, e.g. a truncated or misspelt
        tool name from the LLM; kept in ``predicted``, so they count as false positives) and ``"repeated"``
        (a tool named more than once in one prediction; a subset is a set, so it counts once).

    Examples
    --------
    >>> import toolbias_stats as tbs
    >>> preds = tbs.datasets.path("experiments/mitigation/predictions.jsonl")
    >>> truth = tbs.datasets.path("experiments/mitigation/truth.json")
    >>> data = load_subsets(preds, truth)
    >>> data.table.columns.tolist()
    ['query_id', 'cluster_id', 'predicted', 'correct', 'candidates', 'k']
    >>> len(data.table), sorted(data.diagnostics)
    (200, ['not_candidates', 'repeated'])
    """

    table: pd.DataFrame
    source: dict = field(default_factory=dict)
    diagnostics: dict = field(default_factory=lambda: {"not_candidates": [], "repeated": []})


# ------------------------------------------------------------------------------------------------
# readers
def read_subset_predictions(path: str | os.PathLike[str]) -> dict[str, tuple[int, frozenset[str]]]:
    """Read subset predictions: JSONL, one object ``{"query_id": int, "selected_tools": [tool_id, ...]}`` a line.

    The predictions are LLM output: a tool named twice in one line counts once (a subset is a set; listed by
    :func:`load_subsets` in ``SubsetData.diagnostics["repeated"]``), and a name that is not a candidate of its query
    is a wrong prediction, checked against the truth by :func:`load_subsets`.

    Parameters
    ----------
    path : path-like
        The JSONL file (UTF-8).

    Returns
    -------
    dict
        ``{query_id (str): (line, frozenset of tool ids)}``; an empty list is an empty prediction.

    Raises
    ------
    SelectionLogError
        Malformed JSON, a missing or non-integer ``query_id``, ``selected_tools`` not a list of strings, a
        duplicate query id; every problem as ``file:line:field: message``.

    Examples
    --------
    >>> import toolbias_stats as tbs
    >>> preds = read_subset_predictions(tbs.datasets.path("experiments/mitigation/predictions.jsonl"))
    >>> line, tools = preds["4"]
    >>> line, sorted(tools)
    (4, ['ip_geolocation_for_ip_address_geolocation'])
    """
    return _read_predictions(path)


def _read_predictions(path, with_lists=False):
    """:func:`read_subset_predictions`; with ``with_lists`` also ``{query_id: the list as written}``."""
    path = Path(path)
    if not path.exists():
        raise SelectionLogError(problem(path, None, None, "file not found"))
    problems, out, lists = [], {}, {}
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError:
        raise SelectionLogError(problem(path, None, None, "not UTF-8 text; save the file as UTF-8")) from None
    for i, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            problems.append(problem(path, i, f"col {exc.colno}", f"malformed JSON: {exc.msg}"))
            continue
        except RecursionError:
            problems.append(problem(path, i, None, "JSON nested too deeply"))
            continue
        if not isinstance(obj, dict):
            problems.append(problem(path, i, None, f"expected a JSON object, got {type(obj).__name__}"))
            continue
        qid = obj.get("query_id")
        if isinstance(qid, bool) or not isinstance(qid, numbers.Integral):
            problems.append(problem(path, i, "query_id", f"expected an integer, got {qid!r}"))
            continue
        tools = obj.get("selected_tools")
        if not isinstance(tools, list) or not all(isinstance(t, str) for t in tools):
            problems.append(problem(path, i, "selected_tools", f"expected a list of tool ids (strings), got {tools!r}"))
            continue
        key = str(int(qid))
        if key in out:
            problems.append(problem(path, i, "query_id", f"duplicate query_id {qid} (first on line {out[key][0]})"))
            continue
        out[key] = (i, frozenset(tools))
        lists[key] = tools
    if problems:
        raise SelectionLogError(problems)
    if not out:
        raise SelectionLogError(problem(path, None, None, "no predictions (the file is empty)"))
    return (out, lists) if with_lists else out


def read_subset_truth(path: str | os.PathLike[str]) -> dict[str, dict[str, Any]]:
    """Read the BiasBusters mitigation ground truth (JSON list of queries).

    Each entry is ``{"query_id", "cluster_id", "query", "correct_apis": [{"tool", "api_name"}, ...],
    "distractor_apis": [...]}``; tools are identified by the ToolBench function name
    ``standardise(api_name) + "_for_" + standardise(tool)``, its last 64 characters kept as ToolBench does
    (docs/schema.md, *Standardised names*); predictions may use either spelling.

    Parameters
    ----------
    path : path-like
        The ground-truth JSON file.

    Returns
    -------
    dict
        ``{query_id (str): {"record": i, "cluster_id": str, "correct": frozenset, "candidates": frozenset}}``.

    Raises
    ------
    SelectionLogError
        Malformed JSON, missing fields, an API without ``tool`` / ``api_name``, an empty ``correct_apis``, a
        duplicate query id (``file:record:field: message``).

    Examples
    --------
    >>> import toolbias_stats as tbs
    >>> truth = read_subset_truth(tbs.datasets.path("experiments/mitigation/truth.json"))
    >>> q = truth["4"]
    >>> sorted(q), q["cluster_id"], len(q["correct"]) <= len(q["candidates"])
    (['candidates', 'cluster_id', 'correct', 'record'], '4', True)
    """
    from ..io.readers._common import load_json

    path = Path(path)
    raw = load_json(path)
    if not isinstance(raw, list):
        raise SelectionLogError(problem(path, None, None, "expected a JSON list of query objects"))
    problems: list = []
    out: dict = {}
    for i, e in enumerate(raw, start=1):
        if not isinstance(e, dict):
            problems.append(problem(path, i, None, "expected a JSON object"))
            continue
        qid = e.get("query_id")
        if isinstance(qid, bool) or not isinstance(qid, numbers.Integral):
            problems.append(problem(path, i, "query_id", f"expected an integer, got {qid!r}"))
            continue
        sets = {}
        for fld in ("correct_apis", "distractor_apis"):
            apis = e.get(fld, [] if fld == "distractor_apis" else None)
            if not isinstance(apis, list):
                problems.append(problem(path, i, fld, f"expected a list of {{tool, api_name}} objects, got {apis!r}"))
                continue
            ids = []
            for j, a in enumerate(apis, start=1):
                if not (isinstance(a, dict) and isinstance(a.get("tool"), str)
                        and isinstance(a.get("api_name"), str)):
                    problems.append(problem(path, i, f"{fld}[{j}]",
                                            f"expected {{'tool': str, 'api_name': str}}, got {a!r}"))
                    continue
                ids.append(function_name(a["api_name"], a["tool"]))
            sets[fld] = frozenset(ids)
        if "correct_apis" in sets and not sets["correct_apis"]:
            problems.append(problem(path, i, "correct_apis", "empty: every query needs at least one correct API"))
        key = str(int(qid))
        if key in out:
            problems.append(problem(path, i, "query_id",
                                    f"duplicate query_id {qid} (first in record {out[key]['record']})"))
            continue
        if len(sets) == 2:
            cid = e.get("cluster_id")
            out[key] = {"record": i, "cluster_id": None if cid is None else str(cid), "correct": sets["correct_apis"],
                        "candidates": sets["correct_apis"] | sets["distractor_apis"]}
    if problems:
        raise SelectionLogError(problems)
    return out


def read_subset_table(path: str | os.PathLike[str]) -> SubsetData:
    """Read the generic subset table (CSV or Parquet): one row per (query, candidate tool).

    Columns ``query_id``, ``tool_id``, ``selected`` (0/1: in the predicted subset), ``correct`` (0/1: can solve the
    query), optional ``cluster_id``. A query whose rows are all ``selected = 0`` is an empty prediction.

    Parameters
    ----------
    path : path-like
        A ``.csv`` file, or ``.parquet`` / ``.pq``.

    Returns
    -------
    SubsetData
        One entry per query; ``source`` names the table for both the predictions and the truth.

    Raises
    ------
    SelectionLogError
        A missing column, a value of ``selected``/``correct`` other than 0/1, a duplicate (query_id, tool_id), a
        query without a correct tool (``file:row:column: message``; rows are 1-based data rows).

    Examples
    --------
    Query 1 predicts the correct tool and a distractor; query 2 predicts nothing:

    >>> import pathlib, tempfile
    >>> csv = "query_id,tool_id,selected,correct\\n1,a,1,1\\n1,b,1,0\\n2,a,0,1\\n2,c,0,0\\n"
    >>> with tempfile.TemporaryDirectory() as d:
    ...     f = pathlib.Path(d, "subsets.csv")
    ...     _ = f.write_text(csv)
    ...     data = read_subset_table(f)
    >>> [(q, sorted(p), sorted(c)) for q, p, c in data.table[["query_id", "predicted", "correct"]].values]
    [('1', ['a', 'b'], ['a']), ('2', [], ['a'])]
    """
    path = Path(path)
    if not path.exists():
        raise SelectionLogError(problem(path, None, None, "file not found"))
    try:
        frame = pd.read_parquet(path) if path.suffix.lower() in (".parquet", ".pq") else \
            pd.read_csv(path, dtype=str, keep_default_na=False)
    except Exception as exc:
        raise SelectionLogError(problem(path, None, None, f"cannot read the table: {exc}")) from None
    problems = [problem(path, None, c, "required column is missing") for c in TABLE_COLUMNS if c not in frame.columns]
    if problems:
        raise SelectionLogError(problems)
    for col in ("selected", "correct"):
        vals = pd.to_numeric(frame[col], errors="coerce")
        for r in np.flatnonzero(~vals.isin([0, 1]).to_numpy()):
            v = frame[col].iloc[r]
            shown = v.item() if hasattr(v, "item") else v
            problems.append(problem(path, int(r) + 1, col, f"expected 0 or 1, got {shown!r}"))
        frame[col] = vals
    frame["query_id"] = frame["query_id"].astype(str)
    frame["tool_id"] = frame["tool_id"].astype(str)
    dup = frame.duplicated(["query_id", "tool_id"], keep="first").to_numpy()
    for r in np.flatnonzero(dup):
        problems.append(problem(path, int(r) + 1, "tool_id",
                                f"duplicate row for query {frame['query_id'].iloc[r]!r}, "
                                f"tool {frame['tool_id'].iloc[r]!r}"))
    if problems:
        raise SelectionLogError(problems)
    rows = []
    for qid, d in frame.groupby("query_id", sort=False):
        correct = frozenset(d.loc[d["correct"] == 1, "tool_id"])
        if not correct:
            problems.append(problem(path, int(d.index[0]) + 1, "correct", f"query {qid!r} has no correct tool"))
            continue
        cid = d["cluster_id"].iloc[0] if "cluster_id" in d.columns else None
        rows.append({"query_id": qid, "cluster_id": None if cid is None or cid != cid else str(cid),
                     "predicted": frozenset(d.loc[d["selected"] == 1, "tool_id"]), "correct": correct,
                     "candidates": frozenset(d["tool_id"]), "k": len(correct)})
    if problems:
        raise SelectionLogError(problems)
    return SubsetData(pd.DataFrame(rows), {"predictions": str(path), "truth": str(path)})


def load_subsets(predictions: SubsetData | str | Path | Mapping[str, Sequence[str]],
                 truth: str | Path | Mapping[str, Mapping[str, Any]] | None = None, *,
                 missing: Literal["raise", "empty"] = "raise") -> SubsetData:
    """Join predictions with the ground truth into :class:`SubsetData`, checking every query and tool.

    Parameters
    ----------
    predictions : SubsetData, path (JSONL predictions, or a CSV/Parquet subset table) or dict
        ``{query_id: [tool_id, ...]}`` is accepted as an in-memory form.
    truth : path or dict, optional
        The ground-truth JSON (needed unless ``predictions`` is a table or SubsetData).
    missing : {"raise", "empty"}, default "raise"
        A truth query without a prediction is an error, or (``"empty"``) an empty prediction.

    Returns
    -------
    SubsetData
        Its ``diagnostics`` list, with their lines, the predicted names that are not candidates of their query
        and the tools named twice in one prediction.

    Raises
    ------
    SelectionLogError
        A predicted query absent from the truth, a truth query without a prediction (``missing="raise"``); each
        named by file, line and field (and, from the readers, unreadable lines and duplicate query ids).

    Notes
    -----
    Subset predictions are LLM output. A predicted name that is not a candidate of its query (a truncated or
    misspelt tool name) is a wrong prediction, not an input error: it stays in the predicted set, so it is a
    false positive (precision's denominator counts it, the exact match fails), as in BiasBusters' Table 2. A tool
    named twice in one prediction counts once (the paper's subsets are sets). Both are listed in ``diagnostics``.

    Examples
    --------
    >>> import toolbias_stats as tbs
    >>> preds = tbs.datasets.path("experiments/mitigation/predictions.jsonl")
    >>> truth = tbs.datasets.path("experiments/mitigation/truth.json")
    >>> data = load_subsets(preds, truth)
    >>> len(data.table), data.table["k"].value_counts().sort_index().to_dict()
    (200, {2: 50, 3: 50, 4: 50, 5: 50})
    """
    if isinstance(predictions, SubsetData):
        return predictions
    if missing not in ("raise", "empty"):
        raise ValueError(f"`missing` must be one of 'raise', 'empty'; got {missing!r} instead.")
    if isinstance(predictions, (str, Path)) and Path(predictions).suffix.lower() in (".csv", ".parquet", ".pq"):
        return read_subset_table(predictions)
    if truth is None:
        raise ValueError("`truth` is required with JSONL or in-memory predictions; got None.")
    ppath = str(predictions) if isinstance(predictions, (str, Path)) else "<predictions>"
    tpath = str(truth) if isinstance(truth, (str, Path)) else "<truth>"
    if isinstance(predictions, (str, Path)):
        preds, lists = _read_predictions(predictions, with_lists=True)
    else:
        preds, lists = {}, {}
        for i, (k, v) in enumerate(dict(predictions).items(), start=1):
            if isinstance(v, (str, bytes)) or not all(isinstance(t, str) for t in v):
                raise ValueError(f"`predictions` must map query ids to lists of tool ids; query {k!r} has {v!r}.")
            preds[str(k)], lists[str(k)] = (i, frozenset(v)), list(v)
    gt = read_subset_truth(truth) if isinstance(truth, (str, Path)) else truth
    problems, rows = [], []
    diagnostics: dict[str, list[dict[str, Any]]] = {"not_candidates": [], "repeated": []}
    for qid, (line, tools) in list(preds.items()):
        if qid not in gt:
            problems.append(problem(ppath, line, "query_id", f"query {qid} is not in the ground truth {tpath}"))
            continue
        # ToolBench keeps the last 64 characters of a function name: both spellings name the same candidate
        spelt = _toolbench_spellings(gt[qid]["candidates"])
        lists[qid] = [spelt.get(toolbench_key(t), t) for t in lists.get(qid, [])]
        tools = frozenset(spelt.get(toolbench_key(t), t) for t in tools)
        preds[qid] = (line, tools)
        for tool in sorted(tools - gt[qid]["candidates"]):
            diagnostics["not_candidates"].append({"line": line, "query_id": qid, "tool": tool})
        for tool, times in Counter(lists.get(qid, [])).items():
            if times > 1:
                diagnostics["repeated"].append({"line": line, "query_id": qid, "tool": tool, "times": times})
    for qid, g in gt.items():
        if qid not in preds and missing == "raise":
            problems.append(problem(tpath, g["record"], "query_id", f"query {qid} has no prediction in {ppath} "
                                                                     "(an empty prediction must be given as [])"))
    if problems:
        raise SelectionLogError(problems)
    for qid, g in gt.items():
        pred = preds[qid][1] if qid in preds else frozenset()
        rows.append({"query_id": qid, "cluster_id": g["cluster_id"], "predicted": pred, "correct": g["correct"],
                     "candidates": g["candidates"], "k": len(g["correct"])})
    return SubsetData(pd.DataFrame(rows), {"predictions": ppath, "truth": tpath}, diagnostics)


def _toolbench_spellings(candidates) -> dict:
    """``{last 64 characters: candidate}`` for the candidates whose ToolBench spelling is unambiguous."""
    seen: dict = {}
    for c in candidates:
        seen.setdefault(toolbench_key(c), []).append(c)
    return {k: v[0] for k, v in seen.items() if len(v) == 1}


# ------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class SubsetMetricsResult(ReprHTMLMixin):
    """Result of :func:`subset_selection_metrics`.

    Attributes
    ----------
    overall : dict
        ``{"n": queries, metric: (estimate, ConfidenceInterval)}`` for the three :data:`SUBSET_METRICS`.
    by_group : list of dict
        The same per value of ``by`` (``{"k": 2, "n": 300, ...}``).
    by : str or None
    n_resamples : int
    confidence_level : float
    counts : dict
        ``{"queries", "true_positives", "predicted", "correct", "empty_predictions", "not_candidates",
        "repeated_tools"}`` over all queries: ``not_candidates`` predicted names that are not candidates of their
        query (false positives, part of ``predicted``), ``repeated_tools`` names given more than once in one
        prediction (counted once).
    diagnostics : dict
        ``SubsetData.diagnostics``: each not-candidate name and repeated tool with its line and query.

    Examples
    --------
    >>> import toolbias_stats as tbs
    >>> preds = tbs.datasets.path("experiments/mitigation/predictions.jsonl")
    >>> truth = tbs.datasets.path("experiments/mitigation/truth.json")
    >>> res = subset_selection_metrics(preds, truth, n_resamples=100, rng=0)
    >>> res.to_frame().query("group == 'overall'")[["metric", "estimate", "ci_low", "ci_high", "n"]].round(3)
                metric  estimate  ci_low  ci_high    n
    0  micro_precision     0.994   0.989    0.998  200
    1     micro_recall     0.886   0.865    0.910  200
    2      exact_match     0.650   0.572    0.715  200
    >>> res.counts["queries"], res.counts["empty_predictions"]
    (200, 1)
    """

    overall: dict
    by_group: list
    by: str | None
    n_resamples: int
    confidence_level: float
    counts: dict
    seed: object = None
    diagnostics: dict = field(default_factory=lambda: {"not_candidates": [], "repeated": []})
    source: dict = field(default_factory=dict)

    def to_frame(self) -> pd.DataFrame:
        """One row per group (``overall`` first) and metric: estimate, ci_low, ci_high, n."""
        rows = []
        for label, d in [("overall", self.overall)] + [(str(g[self.by]), g) for g in self.by_group]:
            for m in SUBSET_METRICS:
                est, ci = d[m]
                rows.append({"group": label, "by": None if label == "overall" else self.by, "metric": m,
                             "estimate": est, "ci_low": ci.low, "ci_high": ci.high, "n": d["n"]})
        return pd.DataFrame(rows)

    def to_dict(self) -> dict:
        """The JSON of ``toolbias-stats subsets --json`` (``overall`` and ``by_k``)."""
        def block(d):
            return {"n": int(d["n"]), **{m: {"estimate": _json_num(d[m][0]), "ci": [_json_num(x) for x in d[m][1]]}
                                         for m in SUBSET_METRICS}}

        key = "by_k" if self.by == "k" else f"by_{self.by}"
        return {"n_resamples": self.n_resamples, "confidence_level": self.confidence_level,
                "seed": self.seed if isinstance(self.seed, (int, type(None))) else repr(self.seed),
                "counts": {k: int(v) for k, v in self.counts.items()}, "overall": block(self.overall),
                "by": self.by, key: [{self.by: _json_num(g[self.by]), **block(g)} for g in self.by_group],
                "diagnostics": {k: [dict(d) for d in v] for k, v in self.diagnostics.items()}}


def subset_selection_metrics(predictions: SubsetData | str | Path | Mapping[str, Sequence[str]],
                             truth: str | Path | Mapping[str, Mapping[str, Any]] | None = None, *,
                             by: Literal["k", "cluster_id"] | None = "k", n_resamples: int = 2000,
                             confidence_level: float = 0.95, missing: Literal["raise", "empty"] = "raise",
                             rng: np.random.Generator | int | None = None) -> SubsetMetricsResult:
    """Subset-selection quality: micro precision, micro recall and exact-set match (BiasBusters Table 2).

    Parameters
    ----------
    predictions : path, dict or SubsetData
        JSONL predictions (``{"query_id": int, "selected_tools": [tool_id, ...]}`` per line), a CSV/Parquet subset
        table (then ``truth`` is not needed), ``{query_id: [tool_id, ...]}``, or :func:`load_subsets` output.
    truth : path or dict, optional
        BiasBusters ground truth JSON (:func:`read_subset_truth`).
    by : {"k", "cluster_id"} or None, default "k"
        Break-down: ``k`` is the size of the ground-truth set.
    n_resamples : int, default 2000
        Query-bootstrap replicates (queries resampled with replacement, within each group for the group rows).
    confidence_level : float, default 0.95
    missing : {"raise", "empty"}, default "raise"
        See :func:`load_subsets`.
    rng : None, int or numpy.random.Generator

    Returns
    -------
    SubsetMetricsResult

    Notes
    -----
    With ``P_q`` the predicted and ``T_q`` the correct set of query ``q``:
    micro precision ``= sum |P_q & T_q| / sum |P_q|`` (NaN without any prediction), micro recall
    ``= sum |P_q & T_q| / sum |T_q|``, exact-set match ``= mean 1{P_q == T_q}``. An empty prediction is a query
    with ``|P_q| = 0`` (recall 0 for it, never dropped). A predicted name that is not a candidate of its query
    (LLM output: a truncated or misspelt name) is in ``P_q`` and not in ``T_q``: a false positive, listed with its
    line in ``diagnostics``. Percentile intervals from the query bootstrap.

    Examples
    --------
    >>> res = subset_selection_metrics({"1": ["a"], "2": ["b", "c"]},
    ...     {"1": {"record": 1, "cluster_id": "1", "correct": frozenset("a"), "candidates": frozenset("ab")},
    ...      "2": {"record": 2, "cluster_id": "1", "correct": frozenset("b"), "candidates": frozenset("bc")}},
    ...     n_resamples=0)
    >>> round(res.overall["micro_precision"][0], 3), res.overall["micro_recall"][0], res.overall["exact_match"][0]
    (0.667, 1.0, 0.5)
    """
    data = load_subsets(predictions, truth, missing=missing)
    confidence_level = check_confidence_level(confidence_level)
    n_resamples = check_n_resamples(n_resamples)
    if by not in ("k", "cluster_id", None):
        raise ValueError(f"`by` must be one of 'k', 'cluster_id', None; got {by!r} instead.")
    seed = rng if isinstance(rng, (int, type(None))) else "generator"
    gen = check_rng(rng)
    t = data.table
    tp = np.array([len(p & c) for p, c in zip(t["predicted"], t["correct"])], dtype=float)
    npred = np.array([len(p) for p in t["predicted"]], dtype=float)
    ntrue = t["k"].to_numpy(dtype=float)
    exact = np.array([p == c for p, c in zip(t["predicted"], t["correct"])], dtype=float)
    parts = np.stack([tp, npred, ntrue, exact], axis=1)                               # (Q, 4)

    def block(idx):
        x = parts[idx]
        out = {"n": len(x)}
        est = _ratios(x.sum(0)[None, :], len(x))[0]
        boot = _ratios(query_weights(len(x), n_resamples, gen) @ x, len(x)) if n_resamples and len(x) else None
        for j, m in enumerate(SUBSET_METRICS):
            out[m] = (float(est[j]), percentile_ci(boot[:, j], confidence_level) if boot is not None else _NAN_CI)
        return out

    overall = block(np.arange(len(t)))
    groups = []
    if by is not None:
        vals = t[by].to_numpy(dtype=object)
        for v in sorted(set(vals), key=lambda v: (str(type(v)), v if v is not None else "")):
            g = block(np.flatnonzero(vals == v))
            groups.append({by: v if not isinstance(v, np.generic) else v.item(), **g})
    counts = {"queries": len(t), "true_positives": tp.sum(), "predicted": npred.sum(), "correct": ntrue.sum(),
              "empty_predictions": int((npred == 0).sum()), "not_candidates": len(data.diagnostics["not_candidates"]),
              "repeated_tools": len(data.diagnostics["repeated"])}
    return SubsetMetricsResult(overall=overall, by_group=groups, by=by, n_resamples=n_resamples,
                               confidence_level=confidence_level, counts=counts, seed=seed,
                               diagnostics=data.diagnostics, source=dict(data.source))


def _ratios(sums, n):
    """(R, 4) sums of tp, n_pred, n_true, exact -> (R, 3) precision, recall, exact-match rate."""
    with np.errstate(invalid="ignore", divide="ignore"):
        prec = np.where(sums[:, 1] > 0, sums[:, 0] / np.where(sums[:, 1] > 0, sums[:, 1], 1), np.nan)
        rec = sums[:, 0] / sums[:, 2]
        em = sums[:, 3] / n
    return np.stack([prec, rec, em], axis=1)


# ------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class MitigationResult(ReprHTMLMixin):
    """Result of :func:`mitigation_distribution`: the selection distribution "uniform over the predicted subset".

    Attributes
    ----------
    shares : pandas.DataFrame
        Per cluster and tool: ``share`` (expected selection rate), ``ci_low``, ``ci_high``, ``uniform`` (1/K).
    clusters : pandas.DataFrame
        Per cluster: ``K``, ``n_queries``, ``n_selecting`` (non-empty predictions), ``outside_share`` (mass on
        predicted tools outside the cluster's tool set, removed before the TV), ``delta_api`` with CI,
        ``null_expected``.
    delta_api : float
        Mean over clusters of TV(P, U).
    ci : ConfidenceInterval
        Percentile query-bootstrap interval of ``delta_api``.
    corrected : float
    corrected_ci : ConfidenceInterval
        Bias-corrected value and calibrated interval (:func:`~toolbias_stats.calibrated_mean_tv`).
    n_resamples : int
    confidence_level : float

    Examples
    --------
    >>> import toolbias_stats as tbs
    >>> preds = tbs.datasets.path("experiments/mitigation/predictions.jsonl")
    >>> truth = tbs.datasets.path("experiments/mitigation/truth.json")
    >>> res = mitigation_distribution(preds, truth, n_resamples=100, rng=0)
    >>> res.to_frame()[["cluster", "K", "n_queries", "n_selecting"]].head(3)   # one query of cluster 3 selects none
      cluster  K  n_queries  n_selecting
    0       1  5         24           24
    1       2  5         26           26
    2       3  5         26           25
    >>> res.shares.groupby("cluster")["share"].sum().round(6).unique().tolist()   # a distribution per cluster
    [1.0]
    """

    shares: pd.DataFrame
    clusters: pd.DataFrame
    delta_api: float
    ci: ConfidenceInterval
    corrected: float
    corrected_ci: ConfidenceInterval
    n_resamples: int
    confidence_level: float

    def to_frame(self) -> pd.DataFrame:
        return self.clusters.copy()

    def to_dict(self) -> dict:
        return {"delta_api": _json_num(self.delta_api), "ci": [_json_num(x) for x in self.ci],
                "corrected": _json_num(self.corrected), "corrected_ci": [_json_num(x) for x in self.corrected_ci],
                "n_resamples": self.n_resamples, "confidence_level": self.confidence_level,
                "clusters": [{k: _json_num(v) for k, v in r.items()} for r in self.clusters.to_dict("records")]}


def mitigation_distribution(predictions: SubsetData | str | Path | Mapping[str, Sequence[str]],
                            truth: str | Path | Mapping[str, Mapping[str, Any]] | None = None, *,
                            catalog: ToolCatalog | None = None, n_resamples: int = 2000,
                            confidence_level: float = 0.95, missing: Literal["raise", "empty"] = "raise",
                            rng: np.random.Generator | int | None = None) -> MitigationResult:
    """Per-cluster selection distribution implied by "choose uniformly from the predicted subset", and its delta_API.

    Parameters
    ----------
    predictions, truth, missing
        As for :func:`subset_selection_metrics` (the truth must give each query's ``cluster_id``).
    catalog : ToolCatalog, optional
        Gives each cluster's K tools; without it a cluster's tools are the union of its queries' correct tools.
    n_resamples : int, default 2000
    confidence_level : float, default 0.95
    rng : None, int or numpy.random.Generator

    Returns
    -------
    MitigationResult

    Notes
    -----
    Query ``q`` with a non-empty predicted subset ``P_q`` gives each tool in it the probability ``1/|P_q|``; the
    cluster's distribution ``P_c`` is the mean over its queries with a non-empty prediction, restricted to the
    cluster's tools and renormalised (the removed mass is reported as ``outside_share``). A query with an empty
    prediction makes no selection and is counted. ``delta_API = mean_c TV(P_c, U_K)``, with a query-bootstrap
    interval and the bias-corrected value of :func:`~toolbias_stats.calibrated_mean_tv` (expected-choice weights
    are fractional counts; their bootstrap law is what the calibration uses).

    Examples
    --------
    Two queries of one cluster of three tools: ``{a}`` and ``{a, b}`` give a the share (1 + 1/2) / 2:

    >>> truth = {"1": {"record": 1, "cluster_id": "1", "correct": frozenset("ab"), "candidates": frozenset("abc")},
    ...          "2": {"record": 2, "cluster_id": "1", "correct": frozenset("abc"), "candidates": frozenset("abc")}}
    >>> res = mitigation_distribution({"1": ["a"], "2": ["a", "b"]}, truth, n_resamples=0)
    >>> res.shares[["tool_id", "share", "uniform"]].round(3)
      tool_id  share  uniform
    0       a   0.75    0.333
    1       b   0.25    0.333
    2       c   0.00    0.333
    >>> round(res.delta_api, 4)   # TV to uniform: (0.75 - 1/3)
    0.4167
    """
    data = load_subsets(predictions, truth, missing=missing)
    confidence_level = check_confidence_level(confidence_level)
    n_resamples = check_n_resamples(n_resamples)
    gen = check_rng(rng)
    t = data.table
    if t["cluster_id"].isna().any():
        raise ValueError("mitigation_distribution needs the cluster_id of every query; the ground truth lacks it for "
                         f"{int(t['cluster_id'].isna().sum())} queries.")
    share_rows, cluster_rows, obs, boots = [], [], [], []
    clusters = sorted(t["cluster_id"].unique(), key=lambda x: (0, int(x), "") if str(x).isdigit() else (1, 0, str(x)))
    for c in clusters:
        d = t[t["cluster_id"] == c]
        tools = list(catalog.tools(c)) if catalog is not None and c in catalog.clusters else \
            sorted(set().union(*d["correct"]))
        k = len(tools)
        idx = {tool: j for j, tool in enumerate(tools)}
        w = np.zeros((len(d), k))
        outside = 0.0
        for r, pred in enumerate(d["predicted"]):
            for tool in pred:
                if tool in idx:
                    w[r, idx[tool]] += 1.0 / len(pred)
                else:
                    outside += 1.0 / len(pred)
        selecting = int((d["predicted"].map(len) > 0).sum())
        total = w.sum()
        p = w.sum(0) / total if total > 0 else np.full(k, np.nan)
        tv = 0.5 * np.abs(p - 1.0 / k).sum() if total > 0 else np.nan
        if n_resamples and total > 0:
            b = query_weights(len(d), n_resamples, gen) @ w                                # (R, K)
            bp = b / np.where(b.sum(1, keepdims=True) > 0, b.sum(1, keepdims=True), np.nan)
            lo, hi = np.nanquantile(bp, [(1 - confidence_level) / 2, 1 - (1 - confidence_level) / 2], axis=0)
            btv = 0.5 * np.abs(bp - 1.0 / k).sum(1)
            obs.append(w.sum(0))
            boots.append(b)
        else:
            lo = hi = np.full(k, np.nan)
            btv = np.empty(0)
        for j, tool in enumerate(tools):
            share_rows.append({"cluster": c, "tool_id": tool, "share": float(p[j]), "ci_low": float(lo[j]),
                               "ci_high": float(hi[j]), "uniform": 1.0 / k})
        ci = percentile_ci(btv, confidence_level) if btv.size else _NAN_CI
        cluster_rows.append({"cluster": c, "K": k, "n_queries": len(d), "n_selecting": selecting,
                             "outside_share": outside / selecting if selecting else np.nan, "delta_api": tv,
                             "ci_low": ci.low, "ci_high": ci.high,
                             "null_expected": float(expected_tv_uniform(selecting, k)) if selecting else np.nan,
                             "_btv": btv})
    frame = pd.DataFrame(cluster_rows)
    delta = float(np.nanmean(frame["delta_api"])) if len(frame) else np.nan
    ci, corrected, corrected_ci = _NAN_CI, np.nan, _NAN_CI
    if n_resamples and boots:
        btv = np.nanmean(np.stack([r for r in frame["_btv"] if len(r)], axis=1), axis=1)
        ci = percentile_ci(btv, confidence_level)
        if n_resamples >= 20:
            cal = calibrated_mean_tv(obs, boots, confidence_level=confidence_level)
            corrected, corrected_ci = cal.estimate, ConfidenceInterval(cal.ci_low, cal.ci_high)
    frame = frame.drop(columns="_btv")
    return MitigationResult(shares=pd.DataFrame(share_rows), clusters=frame, delta_api=delta, ci=ci,
                            corrected=corrected, corrected_ci=corrected_ci, n_resamples=n_resamples,
                            confidence_level=confidence_level)
