"""Readers of the ToolSense benchmarks, of model predictions on them and of annotation tables.

Every reader checks every line and raises one :class:`ToolSenseError` (a
:class:`~toolbias_stats.SelectionLogError`) that lists the problems as ``file:line:field: message``;
nothing is returned, nothing is written, when any problem is found. Line numbers are 1-based lines of
the JSONL file (for CSV: the header is line 1, so the first record is line 2).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import pandas as pd

from ..exceptions import SelectionLogError, problem

__all__ = ["ToolSenseError", "RRBBenchmark", "ProbeBenchmark", "read_rrb", "read_probe", "read_rrb_predictions",
           "read_probe_predictions", "read_annotations", "bundled_path", "TIERS", "PROBE_KINDS", "CHANCE"]

#: RRB ambiguity tiers, in the paper's order.
TIERS = ("easy", "medium", "hard")
#: The two probing benchmarks.
PROBE_KINDS = ("mcq", "qa")
#: Accuracy of a random guesser (paper, section 4 "Evaluation metrics").
CHANCE = {"mcq": 0.25, "qa": 0.5}
#: Fields of a tool object.
TOOL_FIELDS = ("tool_name", "tool_title", "tool_description", "api_title", "api_description")

_BUNDLED = {"rrb": "toolsense-realistic-retrieval.jsonl", "mcq": "toolsense-mcq.jsonl", "qa": "toolsense-qa.jsonl"}

#: Error templates (tests import them).
MSG_JSON = "malformed JSON ({err})"
MSG_DUPLICATE = "duplicate id {id!r} (first on line {first})"
MSG_UNKNOWN_ID = "id {id!r} is not in the benchmark {bench}"
MSG_MISSING = "required field is missing"
MSG_NOT_LIST = "expected a list of tool names (ranked best first), got {got}"
MSG_TWO_LABELS = "rater {rater!r} gives item {item!r} a second label {label!r} (first {first!r} on line {line})"


class ToolSenseError(SelectionLogError):
    """Invalid ToolSense benchmark, prediction or annotation input (lists ``file:line:field: message``).

    Examples
    --------
    >>> import tempfile, pathlib
    >>> with tempfile.TemporaryDirectory() as d:
    ...     f = pathlib.Path(d, "preds.jsonl")
    ...     _ = f.write_text('{"id": "q1", "answer": "Yes"}\\n{"id": "q1", "answer": "No"}\\n')
    ...     try:
    ...         read_probe_predictions(f, read_probe("qa"))
    ...     except ToolSenseError as err:
    ...         print(err.n_problems, err.problems[0].split(":", 1)[1])
    2 1:id: id 'q1' is not in the benchmark QA
    """


def bundled_path(kind: Literal["rrb", "mcq", "qa"]) -> Path:
    """Path of a vendored benchmark file (``kind`` in ``"rrb"``, ``"mcq"``, ``"qa"``) under ``data/toolsense``.

    Parameters
    ----------
    kind : {"rrb", "mcq", "qa"}
        The Realistic Retrieval Benchmark or one of the two probing benchmarks.

    Returns
    -------
    pathlib.Path
        The JSONL file.

    Examples
    --------
    >>> bundled_path("rrb").name
    'toolsense-realistic-retrieval.jsonl'
    """
    from ..datasets import data_dir

    if kind not in _BUNDLED:
        raise ValueError(f"`kind` must be one of {list(_BUNDLED)}; got {kind!r} instead.")
    return data_dir() / "toolsense" / _BUNDLED[kind]


@dataclass(frozen=True, eq=False)
class RRBBenchmark:
    """The Realistic Retrieval Benchmark as tidy frames.

    Attributes
    ----------
    queries : pandas.DataFrame
        One row per query: ``sample_id``, ``query``, ``tier`` (easy/medium/hard), ``tool`` (the file's
        ground truth: a str for easy queries, a list of str for medium/hard), ``answers`` (always a tuple of
        tool names), ``n_answers``, ``pool`` (tuple of the 14 candidate names in file order), ``source_line``.
    tools : pandas.DataFrame
        The union catalog: one row per distinct ``tool_name`` with its title and descriptions.
    path : str

    Examples
    --------
    >>> rrb = read_rrb()
    >>> rrb.n, len(rrb.tools), len(rrb.tool_names())
    (500, 4901, 4901)
    >>> first = rrb.queries.iloc[0]
    >>> str(first["tier"]), int(first["n_answers"]), len(first["pool"])
    ('easy', 1, 14)
    """

    queries: pd.DataFrame
    tools: pd.DataFrame
    path: str

    @property
    def n(self) -> int:
        return len(self.queries)

    def tool_names(self) -> frozenset[str]:
        """Every tool name of the file (pools and answers)."""
        return frozenset(self.tools["tool_name"])


@dataclass(frozen=True, eq=False)
class ProbeBenchmark:
    """An MCQ or yes/no QA probe as a tidy frame.

    Attributes
    ----------
    kind : str
        ``"mcq"`` or ``"qa"``.
    items : pandas.DataFrame
        One row per probe: ``id``, ``question``, ``answer`` (the correct answer), ``options`` (tuple: for MCQ
        the correct answer then the three distractors, for QA ``("Yes", "No")``), ``tool_name``, ``source_line``.
    chance : float
        Accuracy of a random guesser (0.25 for MCQ, 0.5 for QA).
    path : str

    Examples
    --------
    >>> mcq = read_probe("mcq")
    >>> mcq.kind, mcq.n, mcq.chance
    ('mcq', 496, 0.25)
    >>> item = mcq.items.iloc[0]
    >>> item["answer"], item["options"]
    ('Thailand', ('Thailand', 'Japan', 'Singapore', 'Indonesia'))
    """

    kind: str
    items: pd.DataFrame
    chance: float
    path: str

    @property
    def n(self) -> int:
        return len(self.items)


# -- JSONL plumbing --------------------------------------------------------------------------------
def _jsonl(path, problems):
    """Yield (line number, object) for each non-blank line; malformed lines become problems."""
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"{p}: no such file")
    with p.open(encoding="utf-8") as fh:
        for i, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line, parse_constant=_reject_constant)
            except ValueError as exc:
                problems.append(problem(p, i, None, MSG_JSON.format(err=exc)))
                continue
            if not isinstance(obj, dict):
                problems.append(problem(p, i, None, f"expected a JSON object, got {type(obj).__name__}"))
                continue
            yield i, obj


def _reject_constant(name):
    raise ValueError(f"non-standard JSON constant {name}")


def _mapping(columns, defaults):
    """User column names -> our names (``columns`` maps ours to theirs, as for selection logs)."""
    columns = dict(columns or {})
    unknown = set(columns) - set(defaults)
    if unknown:
        raise ValueError(f"`columns` has unknown key(s) {sorted(unknown)}; valid keys: {list(defaults)}.")
    return {k: columns.get(k, k) for k in defaults}


def _tool(obj, path, line, field, problems):
    if not isinstance(obj, dict) or not isinstance(obj.get("tool_name"), str) or not obj["tool_name"]:
        problems.append(problem(path, line, field, "expected a tool object with a non-empty `tool_name`"))
        return None
    return {k: (None if obj.get(k) is None else str(obj.get(k))) for k in TOOL_FIELDS}


# -- benchmarks ------------------------------------------------------------------------------------
def read_rrb(path: str | os.PathLike[str] | None = None) -> RRBBenchmark:
    """Read the Realistic Retrieval Benchmark (JSONL).

    Parameters
    ----------
    path : path-like, optional
        Default: the vendored ``data/toolsense/toolsense-realistic-retrieval.jsonl``.

    Returns
    -------
    RRBBenchmark

    Raises
    ------
    ToolSenseError
        Malformed lines, missing fields, unknown tiers, duplicate ``sample_id``, answers outside the pool,
        one tool name with two different descriptions (all listed as ``file:line:field``).

    Examples
    --------
    >>> rrb = read_rrb()
    >>> rrb.queries["tier"].value_counts(sort=False).to_dict()
    {'easy': 167, 'medium': 167, 'hard': 166}
    >>> len(rrb.tools)
    4901
    """
    path = Path(path) if path is not None else bundled_path("rrb")
    problems: list = []
    rows: list = []
    seen: dict = {}
    catalog: dict = {}
    for line, obj in _jsonl(path, problems):
        bad = False
        for f in ("sample_id", "query", "tool", "analyzed_tools", "complexity"):
            if f not in obj:
                problems.append(problem(path, line, f, MSG_MISSING))
                bad = True
        if bad:
            continue
        sid = str(obj["sample_id"])
        if sid in seen:
            problems.append(problem(path, line, "sample_id", MSG_DUPLICATE.format(id=sid, first=seen[sid])))
            continue
        seen[sid] = line
        tier = obj["complexity"]
        if tier not in TIERS:
            problems.append(problem(path, line, "complexity", f"expected one of {list(TIERS)}, got {tier!r}"))
            continue
        gt = obj["tool"]
        gt_list = [gt] if isinstance(gt, dict) else gt if isinstance(gt, list) else None
        if not gt_list:
            problems.append(problem(path, line, "tool", "expected a tool object or a non-empty list of them"))
            continue
        answers = [_tool(t, path, line, "tool", problems) for t in gt_list]
        pool_raw = obj["analyzed_tools"] if isinstance(obj["analyzed_tools"], list) else None
        if not pool_raw:
            problems.append(problem(path, line, "analyzed_tools", "expected a non-empty list of tool objects"))
            continue
        pool = [_tool(t, path, line, "analyzed_tools", problems) for t in pool_raw]
        if any(t is None for t in answers + pool):
            continue
        for t in answers + pool:
            old = catalog.get(t["tool_name"])
            if old is None:
                catalog[t["tool_name"]] = t
            elif old != t:
                problems.append(problem(path, line, "tool_name",
                                        f"{t['tool_name']!r} has a description that differs from an earlier line"))
        pool_names = tuple(t["tool_name"] for t in pool)
        ans = tuple(dict.fromkeys(t["tool_name"] for t in answers))
        outside = [a for a in ans if a not in pool_names]
        if outside:
            problems.append(problem(path, line, "tool", f"answer(s) {outside} are not in the candidate pool"))
        rows.append({"sample_id": sid, "query": str(obj["query"]), "tier": tier,
                     "tool": ans[0] if isinstance(gt, dict) else list(ans), "answers": ans, "n_answers": len(ans),
                     "pool": pool_names, "source_line": line})
    if problems:
        raise ToolSenseError(problems)
    if not rows:
        raise ToolSenseError([problem(path, None, None, "no queries in the file")])
    queries = pd.DataFrame(rows)
    queries["tier"] = pd.Categorical(queries["tier"], categories=list(TIERS))
    tools = pd.DataFrame(list(catalog.values()), columns=list(TOOL_FIELDS))
    return RRBBenchmark(queries=queries, tools=tools, path=str(path))


def read_probe(kind: Literal["mcq", "qa"], path: str | os.PathLike[str] | None = None) -> ProbeBenchmark:
    """Read the MCQ (``kind="mcq"``) or yes/no QA (``kind="qa"``) probing benchmark (JSONL).

    Parameters
    ----------
    kind : {"mcq", "qa"}
    path : path-like, optional
        Default: the vendored file under ``data/toolsense``.

    Returns
    -------
    ProbeBenchmark

    Raises
    ------
    ToolSenseError
        Malformed lines, missing fields, duplicate ids, a QA answer other than Yes/No, an MCQ without
        three distractors.

    Examples
    --------
    >>> mcq = read_probe("mcq")
    >>> mcq.n, mcq.chance
    (496, 0.25)
    """
    if kind not in PROBE_KINDS:
        raise ValueError(f"`kind` must be one of {list(PROBE_KINDS)}; got {kind!r} instead.")
    path = Path(path) if path is not None else bundled_path(kind)
    problems: list = []
    rows: list = []
    seen: dict = {}
    need = ("id", "question", "correct_answer", "wrong_answers", "tool") if kind == "mcq" else \
        ("id", "question", "answer", "tool")
    for line, obj in _jsonl(path, problems):
        missing = [f for f in need if f not in obj]
        for f in missing:
            problems.append(problem(path, line, f, MSG_MISSING))
        if missing:
            continue
        pid = str(obj["id"])
        if pid in seen:
            problems.append(problem(path, line, "id", MSG_DUPLICATE.format(id=pid, first=seen[pid])))
            continue
        seen[pid] = line
        tool = _tool(obj["tool"], path, line, "tool", problems)
        if kind == "mcq":
            wrong = obj["wrong_answers"]
            if not isinstance(wrong, list) or len(wrong) != 3:
                problems.append(problem(path, line, "wrong_answers", "expected a list of 3 distractors"))
                continue
            answer = str(obj["correct_answer"])
            options = (answer, *(str(w) for w in wrong))
        else:
            answer = str(obj["answer"])
            if _norm(answer) not in ("yes", "no"):
                problems.append(problem(path, line, "answer", f"expected 'Yes' or 'No', got {answer!r}"))
                continue
            answer = "Yes" if _norm(answer) == "yes" else "No"
            options = ("Yes", "No")
        if tool is None:
            continue
        rows.append({"id": pid, "question": str(obj["question"]), "answer": answer, "options": options,
                     "tool_name": tool["tool_name"], "source_line": line})
    if problems:
        raise ToolSenseError(problems)
    if not rows:
        raise ToolSenseError([problem(path, None, None, "no items in the file")])
    return ProbeBenchmark(kind=kind, items=pd.DataFrame(rows), chance=CHANCE[kind], path=str(path))


def _norm(s) -> str:
    """Exact-match normalisation: surrounding white space and case are ignored."""
    return " ".join(str(s).split()).casefold()


# -- predictions -----------------------------------------------------------------------------------
RRB_PRED_COLUMNS = ("sample_id", "constrained", "free")
PROBE_PRED_COLUMNS = ("id", "answer")


def read_rrb_predictions(path: str | os.PathLike[str], benchmark: RRBBenchmark, *,
                         columns: Mapping[str, str] | None = None,
                         k: int | Sequence[int] | None = None) -> pd.DataFrame:
    """Read ranked RRB predictions (JSONL) and check them against the benchmark.

    Each line is ``{"sample_id": ..., "constrained": [name, ...], "free": [name, ...]}``: the top-k tool
    names under trie-constrained and free decoding, best first. Either list may be absent (in every line:
    a decoding is present for all queries or for none).

    Parameters
    ----------
    path : path-like
    benchmark : RRBBenchmark
    columns : dict, optional
        Our field name -> the file's (keys ``sample_id``, ``constrained``, ``free``), e.g.
        ``{"sample_id": "qid", "free": "unconstrained"}``.
    k : int or sequence of int, optional
        When given, every present list must have at least ``max(k)`` entries (Recall@k of a shorter list
        is undefined), else an error names the line and field.

    Returns
    -------
    pandas.DataFrame
        One row per prediction line: ``sample_id``, ``constrained``, ``free`` (tuples of str or None),
        ``source_line``; in the benchmark's query order is *not* required (scoring aligns by id).

    Raises
    ------
    ToolSenseError
        Malformed JSON, ids absent from the benchmark, duplicate ids, lists that are not lists of strings,
        lists shorter than ``max(k)``, a decoding present on some lines only, benchmark queries without a
        prediction line.

    Examples
    --------
    A file that ranks each query's candidate pool in file order (constrained decoding only):

    >>> import json, pathlib, tempfile
    >>> rrb = read_rrb()
    >>> lines = [json.dumps({"sample_id": s, "constrained": list(p)})
    ...          for s, p in zip(rrb.queries["sample_id"], rrb.queries["pool"])]
    >>> with tempfile.TemporaryDirectory() as d:
    ...     f = pathlib.Path(d, "preds.jsonl")
    ...     _ = f.write_text("\\n".join(lines) + "\\n")
    ...     preds = read_rrb_predictions(f, rrb, k=[1, 5])
    >>> preds.shape, len(preds["constrained"].iloc[0]), bool(preds["free"].isna().all())
    ((500, 4), 14, True)
    """
    cols = _mapping(columns, RRB_PRED_COLUMNS)
    path = Path(path)
    kmax = None if k is None else max(_as_ks(k))
    known = set(benchmark.queries["sample_id"])
    problems: list = []
    rows: list = []
    seen: dict = {}
    for line, obj in _jsonl(path, problems):
        sid = obj.get(cols["sample_id"])
        if sid is None:
            problems.append(problem(path, line, cols["sample_id"], MSG_MISSING))
            continue
        sid = str(sid)
        if sid in seen:
            problems.append(problem(path, line, cols["sample_id"], MSG_DUPLICATE.format(id=sid, first=seen[sid])))
            continue
        seen[sid] = line
        if sid not in known:
            problems.append(problem(path, line, cols["sample_id"], MSG_UNKNOWN_ID.format(id=sid, bench="RRB")))
            continue
        row = {"sample_id": sid, "source_line": line}
        for dec in ("constrained", "free"):
            val = obj.get(cols[dec])
            if val is None:
                row[dec] = None
                continue
            if not isinstance(val, list) or not all(isinstance(v, str) for v in val):
                problems.append(problem(path, line, cols[dec], MSG_NOT_LIST.format(got=_describe(val))))
                row[dec] = None
                continue
            if kmax is not None and len(val) < kmax:
                problems.append(problem(path, line, cols[dec],
                                        f"list has {len(val)} entries but k={kmax} was requested (k larger than "
                                        "the list)"))
            row[dec] = tuple(val)
        rows.append(row)
    frame = pd.DataFrame(rows, columns=["sample_id", "constrained", "free", "source_line"])
    for dec in ("constrained", "free"):
        present = frame[dec].notna()
        if present.any() and not present.all():
            first = frame.loc[~present, "source_line"].iloc[0]
            problems.append(problem(path, int(first), cols[dec],
                                    f"decoding {dec!r} is absent here but present on other lines; give it for "
                                    "every query or for none"))
    if not problems:
        absent = [s for s in benchmark.queries["sample_id"] if s not in seen]
        if absent:
            problems.append(problem(path, None, cols["sample_id"],
                                    f"{len(absent)} benchmark queries have no prediction, e.g. {absent[:3]}"))
    if problems:
        raise ToolSenseError(problems)
    return frame


def read_probe_predictions(path: str | os.PathLike[str], benchmark: ProbeBenchmark, *,
                           columns: Mapping[str, str] | None = None) -> pd.DataFrame:
    """Read MCQ/QA predictions (JSONL ``{"id": ..., "answer": ...}``) and check the ids.

    The answer is the chosen option's text for MCQ (compared with the correct answer after trimming white
    space and ignoring case) and ``Yes``/``No`` for QA. Answers that are none of the options are kept and
    count as wrong (reported as ``invalid``).

    Parameters
    ----------
    path : path-like
    benchmark : ProbeBenchmark
    columns : dict, optional
        Our field name -> the file's (keys ``id``, ``answer``).

    Returns
    -------
    pandas.DataFrame
        ``id``, ``answer`` (str), ``source_line``.

    Raises
    ------
    ToolSenseError
        Malformed JSON, missing fields, duplicate ids, ids absent from the benchmark, probes without a
        prediction.

    Examples
    --------
    Answers written with another field name (``pred``), mapped with ``columns``:

    >>> import json, pathlib, tempfile
    >>> qa = read_probe("qa")
    >>> lines = [json.dumps({"id": i, "pred": "yes"}) for i in qa.items["id"]]
    >>> with tempfile.TemporaryDirectory() as d:
    ...     f = pathlib.Path(d, "qa_preds.jsonl")
    ...     _ = f.write_text("\\n".join(lines))
    ...     preds = read_probe_predictions(f, qa, columns={"answer": "pred"})
    >>> preds.columns.tolist(), len(preds), preds["answer"].iloc[0]
    (['id', 'answer', 'source_line'], 500, 'yes')
    """
    cols = _mapping(columns, PROBE_PRED_COLUMNS)
    path = Path(path)
    known = set(benchmark.items["id"])
    problems: list = []
    rows: list = []
    seen: dict = {}
    for line, obj in _jsonl(path, problems):
        pid = obj.get(cols["id"])
        if pid is None:
            problems.append(problem(path, line, cols["id"], MSG_MISSING))
            continue
        pid = str(pid)
        if pid in seen:
            problems.append(problem(path, line, cols["id"], MSG_DUPLICATE.format(id=pid, first=seen[pid])))
            continue
        seen[pid] = line
        if pid not in known:
            problems.append(problem(path, line, cols["id"],
                                    MSG_UNKNOWN_ID.format(id=pid, bench=benchmark.kind.upper())))
            continue
        ans = obj.get(cols["answer"])
        if ans is None or isinstance(ans, (dict, list)):
            problems.append(problem(path, line, cols["answer"],
                                    MSG_MISSING if ans is None else f"expected a string, got {_describe(ans)}"))
            continue
        rows.append({"id": pid, "answer": str(ans), "source_line": line})
    if not problems:
        absent = [s for s in benchmark.items["id"] if s not in seen]
        if absent:
            problems.append(problem(path, None, cols["id"],
                                    f"{len(absent)} benchmark items have no prediction, e.g. {absent[:3]}"))
    if problems:
        raise ToolSenseError(problems)
    return pd.DataFrame(rows, columns=["id", "answer", "source_line"])


ANNOTATION_COLUMNS = ("item_id", "rater", "label")


def read_annotations(path: str | os.PathLike[str], *, columns: Mapping[str, str] | None = None,
                     groups: Sequence[str] | None = None) -> pd.DataFrame:
    """Read an annotation table (CSV with ``item_id, rater, label``; optional grouping columns).

    Parameters
    ----------
    path : path-like
    columns : dict, optional
        Our name -> the file's (keys ``item_id``, ``rater``, ``label``).
    groups : sequence of str, optional
        Further columns to keep (e.g. ``["benchmark", "tier"]``); by default every other column of the file
        is kept. Group values must be constant within an item.

    Returns
    -------
    pandas.DataFrame
        ``item_id``, ``rater``, ``label`` (all str), the group columns, ``source_line`` (the header is line 1).

    Raises
    ------
    ToolSenseError
        Missing columns, empty cells, a rater with two labels for one item (even when equal), an item whose
        group value changes between lines.

    Notes
    -----
    For the RRB, where annotators mark which of the 14 candidates match a query, write one item per
    (query, candidate) with a binary label (``item_id = "<sample_id>::<tool_name>"``).

    Examples
    --------
    >>> import pathlib, tempfile
    >>> csv = "item_id,rater,label,tier\\nq1,ann1,1,easy\\nq1,ann2,1,easy\\nq2,ann1,0,hard\\nq2,ann2,1,hard\\n"
    >>> with tempfile.TemporaryDirectory() as d:
    ...     f = pathlib.Path(d, "annotations.csv")
    ...     _ = f.write_text(csv)
    ...     ann = read_annotations(f)
    >>> ann.columns.tolist(), ann["source_line"].tolist()
    (['item_id', 'rater', 'label', 'tier', 'source_line'], [2, 3, 4, 5])
    """
    cols = _mapping(columns, ANNOTATION_COLUMNS)
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such file")
    try:
        raw = pd.read_csv(path, dtype=str, keep_default_na=False)
    except (pd.errors.ParserError, UnicodeDecodeError) as exc:
        raise ToolSenseError([problem(path, None, None, f"not a readable CSV ({exc})")]) from None
    problems = [problem(path, 1, c, "required column is missing") for c in cols.values() if c not in raw.columns]
    if problems:
        raise ToolSenseError(problems)
    extra = [c for c in raw.columns if c not in cols.values()] if groups is None else list(groups)
    for g in extra:
        if g not in raw.columns:
            problems.append(problem(path, 1, g, "grouping column is missing"))
    if problems:
        raise ToolSenseError(problems)
    df = pd.DataFrame({k: raw[v].str.strip() for k, v in cols.items()})
    for g in extra:
        df[g] = raw[g].str.strip()
    df["source_line"] = range(2, len(df) + 2)
    first: dict = {}
    group_of: dict = {}
    for rec in df.itertuples(index=False):
        line = rec.source_line
        empty = [k for k in ANNOTATION_COLUMNS if getattr(rec, k) == ""]
        for k in empty:
            problems.append(problem(path, line, cols[k], "empty value"))
        if empty:
            continue
        key = (rec.item_id, rec.rater)
        if key in first:
            lab, ln = first[key]
            problems.append(problem(path, line, cols["label"],
                                    MSG_TWO_LABELS.format(rater=rec.rater, item=rec.item_id, label=rec.label,
                                                          first=lab, line=ln)))
            continue
        first[key] = (rec.label, line)
        if extra:
            gv = tuple(df.at[line - 2, g] for g in extra)
            old = group_of.setdefault(rec.item_id, (gv, line))
            if old[0] != gv:
                problems.append(problem(path, line, ",".join(extra),
                                        f"item {rec.item_id!r} has group {gv} here but {old[0]} on line {old[1]}"))
    if problems:
        raise ToolSenseError(problems)
    if df.empty:
        raise ToolSenseError([problem(path, None, None, "no annotations in the file")])
    return df


def _as_ks(k) -> list:
    if isinstance(k, (int,)) and not isinstance(k, bool):
        k = [k]
    ks = sorted({int(x) for x in k})
    if not ks or any(x < 1 for x in ks) or any(isinstance(x, bool) for x in k):
        raise ValueError(f"`k` must be positive integers; got {k!r} instead.")
    return ks


def _describe(v) -> str:
    if isinstance(v, list):
        return "a list with non-string entries"
    if isinstance(v, float) and not math.isfinite(v):
        return repr(v)
    return type(v).__name__
