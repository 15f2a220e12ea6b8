"""ChoiceLog: one row per multiple-choice (or pairwise-judge) answer, the unit "option shown at position p"."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from os import PathLike
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from ..exceptions import SelectionLogError, problem
from ._row_rules import MISSING, REQUIRED_COLUMN, one_of_message

if TYPE_CHECKING:
    from ._selection_log import SelectionLog

__all__ = ["ChoiceLog", "CHOICE_STATUSES", "CHOICE_COLUMNS"]

#: Allowed ``status`` values; only ``"ok"`` rows have a chosen position. ``"tie"``: a judge that declared the
#: compared answers equal (a verdict, counted by :func:`~toolbias_stats.choice.judge_consistency`).
CHOICE_STATUSES = ("ok", "tie", "no_answer", "invalid_answer", "multiple_answers", "error")

#: Core columns (after the design columns ``model, run, condition`` and extras) and their dtypes.
CHOICE_COLUMNS = {
    "item_id": "string",
    "epoch": "int64",
    "n_options": "int64",
    "options": "string",          # JSON list of the option texts, in the order shown
    "option_ids": "string",       # original option ids in the order shown, "|"-joined; null when unknown
    "chosen_position": "Int64",   # 1-based; null unless status == "ok"
    "gold_position": "Int64",     # 1-based position of the single gold option; null without (one) gold
    "gold_positions": "string",   # all gold positions "|"-joined (several for multiple-answer items)
    "status": "string",
    "raw_answer": "string",
    "question": "string",
    "source_file": "string",
    "source_row": "int64",
}
#: Statuses of a ChoiceLog -> statuses of a SelectionLog (:meth:`ChoiceLog.to_selection_log`).
_TO_SELECTION = {"ok": "ok", "tie": "no_call", "no_answer": "no_call", "invalid_answer": "unknown_tool",
                 "multiple_answers": "parse_error", "error": "parse_error"}


@dataclass(frozen=True, eq=False)
class ChoiceLog:
    """Multiple-choice answers, one row per item presentation (item x epoch x order shown).

    Build it with a reader (:func:`~toolbias_stats.io.readers.inspect_ai_log.read_inspect_choices`,
    :func:`~toolbias_stats.io.readers.lm_eval.read_lm_eval`, :func:`read_choice_study`) or
    :meth:`from_frame`, which validates.

    Parameters
    ----------
    data : pandas.DataFrame
        Design columns (``model``, ``run``, ``condition``, extras such as ``task``) then the
        columns of :data:`CHOICE_COLUMNS` (see docs/choice.md).
    diagnostics : dict
        Reader notes keyed by source file.

    Notes
    -----
    An *item* (``item_id``) is the resampling unit of every bootstrap (the analogue of a query);
    a *position* is an option slot 1..K. Rows without a valid answer stay, with a status.

    Examples
    --------
    Two yes/no items, each shown in both orders:

    >>> import json
    >>> import pandas as pd
    >>> frame = pd.DataFrame({"item_id": ["q1", "q1", "q2", "q2"], "n_options": 2,
    ...                       "options": [json.dumps(["yes", "no"]), json.dumps(["no", "yes"])] * 2,
    ...                       "chosen_position": [1, 1, 1, 2], "status": "ok"})
    >>> log = ChoiceLog.from_frame(frame)
    >>> log
    ChoiceLog(4 rows, status={'ok': 4}, items=2)
    >>> log.to_selection_log().counts().status_totals()["ok"]
    4
    """

    data: pd.DataFrame
    diagnostics: dict = field(default_factory=dict)

    @classmethod
    def from_frame(cls, frame: pd.DataFrame, *, diagnostics: Mapping[str, Any] | None = None,
                   source: str = "<frame>") -> ChoiceLog:
        """Validate ``frame`` (all problems in one :class:`SelectionLogError`, named by file and row)."""
        return cls(_validate(frame, source), dict(diagnostics or {}))

    @classmethod
    def concat(cls, logs: Iterable[ChoiceLog]) -> ChoiceLog:
        logs = list(logs)
        if not logs:
            raise ValueError("`logs` must contain at least one ChoiceLog; got an empty sequence instead.")
        diag = {}
        for lg in logs:
            diag.update(lg.diagnostics)
        return cls.from_frame(pd.concat([lg.data for lg in logs], ignore_index=True), diagnostics=diag,
                              source="<concat>")

    # -- views ----------------------------------------------------------------------------
    @property
    def design_columns(self) -> list[str]:
        return [c for c in self.data.columns if c not in CHOICE_COLUMNS]

    @property
    def option_lists(self) -> list[list[str]]:
        """The options of every row, in the order shown."""
        return [json.loads(o) for o in self.data["options"]]

    def to_frame(self) -> pd.DataFrame:
        """The rows (a copy) plus derived ``chosen_option``, ``gold_option`` and ``correct`` columns."""
        out = self.data.copy()
        opts = self.option_lists
        pos = out["chosen_position"].astype("float").to_numpy()
        gold = out["gold_position"].astype("float").to_numpy()
        out["chosen_option"] = pd.array([o[int(p) - 1] if np.isfinite(p) else None for o, p in zip(opts, pos)],
                                        dtype="string")
        out["gold_option"] = pd.array([o[int(g) - 1] if np.isfinite(g) else None for o, g in zip(opts, gold)],
                                      dtype="string")
        out["correct"] = pd.array([None if not np.isfinite(g) else bool(np.isfinite(p) and p == g)
                                   for p, g in zip(pos, gold)], dtype="boolean")
        return out

    def summary(self, by: Sequence[str] = ("source_file",)) -> pd.DataFrame:
        """Rows by status per ``by`` group, with totals."""
        by = list(by)
        counts = self.data.groupby(by + ["status"], sort=False).size().unstack("status", fill_value=0)
        for s in CHOICE_STATUSES:
            if s not in counts.columns:
                counts[s] = 0
        counts = counts[list(CHOICE_STATUSES)]
        counts.insert(0, "total", counts.sum(axis=1))
        return counts.reset_index()

    def write(self, path: str | PathLike[str]) -> Path:
        """Write the rows as ``.csv``, ``.jsonl`` or ``.parquet`` (reads back with :func:`read_choice_table`).

        In CSV, text starting with ``= + - @`` gets a leading ``'`` (spreadsheet formulas); the others stay raw.
        """
        from .._output import atomic_path, spreadsheet_safe

        path = Path(path)
        suffix = path.suffix.lower()
        if suffix not in (".csv", ".jsonl", ".ndjson", ".parquet"):
            raise ValueError(f"`path` must end in .csv, .jsonl or .parquet; got {path.name!r} instead.")
        with atomic_path(path, option="path") as tmp:   # nothing partial on failure (issue 21)
            if suffix == ".csv":   # text starting with = + - @ is quoted for spreadsheets; JSONL/Parquet stay raw
                spreadsheet_safe(self.data).to_csv(tmp, index=False)
            elif suffix in (".jsonl", ".ndjson"):
                self.data.to_json(tmp, orient="records", lines=True, force_ascii=False)
            else:
                self.data.to_parquet(tmp, index=False)
        return path

    def to_selection_log(self, *, identity: str = "position") -> SelectionLog:
        """The same answers as a :class:`~toolbias_stats.SelectionLog`, so the tool machinery applies.

        One cluster per number of options (``"K=4"``); its "tools" are the option slots
        (``identity="position"``: tool ``"K=4:2"`` is whatever option is shown second, so delta_API
        equals delta_pos) or the original option letters (``identity="original"``: tool
        ``"K=4:C"`` is the item's third option in the source order, wherever it is shown; needs
        ``option_ids`` on every row, e.g. Inspect's solver shuffling, or positions when the source
        never shuffles, as lm-eval). ``query_id`` is the item, ``epoch`` and ``attempt`` (the n-th
        presentation of the item with the same order) become design columns. Statuses map
        ``tie`` and ``no_answer -> no_call`` (no option chosen), ``invalid_answer -> unknown_tool``,
        ``multiple_answers`` and
        ``error -> parse_error``.
        """
        from ._catalog import ToolCatalog
        from ._selection_log import SelectionLog

        if identity not in ("position", "original"):
            raise ValueError(f"`identity` must be 'position' or 'original'; got {identity!r} instead.")
        d = self.data
        if identity == "original" and d["option_ids"].isna().any():
            raise ValueError("identity='original' needs the original option ids on every row (`option_ids`); "
                             "this log has rows without them (e.g. Inspect dataset shuffling records only the "
                             "shown order). Use identity='position'.")
        ks = sorted(int(k) for k in d["n_options"].unique())
        cat_rows = [{"tool_id": f"K={k}:{_letter(p)}", "cluster_id": f"K={k}", "api_index": p + 1,
                     "cluster_name": f"{k} options", "tool_name": f"option {_letter(p)}"} for k in ks for p in range(k)]
        catalog = ToolCatalog.from_records(cat_rows, source="<choice options>")
        design = self.design_columns
        frame = d[design].copy()
        k = d["n_options"].astype(int).to_numpy()
        if identity == "position":
            letters = [[_letter(p) for p in range(kk)] for kk in k]
        else:
            letters = [ids.split("|") for ids in d["option_ids"]]
        frame["epoch"] = d["epoch"].to_numpy()
        frame["cluster_id"] = [f"K={kk}" for kk in k]
        frame["query_id"] = d["item_id"].to_numpy()
        frame["ordering"] = ["|".join(f"K={kk}:{x}" for x in ls) for kk, ls in zip(k, letters)]
        pos = d["chosen_position"].astype("float").to_numpy()
        frame["chosen_tool"] = [f"K={kk}:{ls[int(p) - 1]}" if np.isfinite(p) else None
                                for kk, ls, p in zip(k, letters, pos)]
        frame["status"] = d["status"].map(_TO_SELECTION).to_numpy()
        frame["raw_choice"] = d["raw_answer"].to_numpy()
        frame["source_file"] = d["source_file"].to_numpy()
        frame["source_row"] = d["source_row"].to_numpy()
        frame.insert(len(design) + 1, "attempt",
                     frame.groupby(design + ["epoch", "query_id", "ordering"], sort=False, dropna=False).cumcount() + 1)
        return SelectionLog.from_frame(frame, catalog, diagnostics=self.diagnostics, source="<choice log>")

    def __len__(self):
        return len(self.data)

    def __repr__(self):
        st = self.data["status"].value_counts().to_dict()
        return f"ChoiceLog({len(self.data)} rows, status={st}, items={self.data['item_id'].nunique()})"


def _letter(i: int) -> str:
    return chr(ord("A") + i) if i < 26 else f"O{i + 1}"


def read_choice_table(path: str | PathLike[str]) -> ChoiceLog:
    """Read a ChoiceLog written by :meth:`ChoiceLog.write` (``.csv``, ``.jsonl`` or ``.parquet``).

    Parameters
    ----------
    path : path-like
        The file; its suffix names the format.

    Returns
    -------
    ChoiceLog
        Validated again (problems named by file and row).

    Raises
    ------
    SelectionLogError
        A missing file, another suffix, or rows that break the schema.

    Examples
    --------
    >>> import json, tempfile
    >>> from pathlib import Path
    >>> import pandas as pd
    >>> frame = pd.DataFrame({"item_id": ["q1", "q1"], "n_options": 2, "status": "ok", "chosen_position": [1, 1],
    ...                       "options": [json.dumps(["yes", "no"]), json.dumps(["no", "yes"])]})
    >>> path = ChoiceLog.from_frame(frame).write(Path(tempfile.mkdtemp()) / "answers.csv")
    >>> read_choice_table(path)
    ChoiceLog(2 rows, status={'ok': 2}, items=1)
    """
    path = Path(path)
    if not path.exists():
        raise SelectionLogError(problem(path, None, None, "file not found"))
    suffix = path.suffix.lower()
    if suffix == ".csv":
        frame = pd.read_csv(path, dtype={"item_id": str, "option_ids": str, "gold_positions": str})
    elif suffix in (".jsonl", ".ndjson"):
        frame = pd.read_json(path, lines=True, dtype={"item_id": str, "gold_positions": str})
    elif suffix == ".parquet":
        frame = pd.read_parquet(path)
    else:
        raise SelectionLogError(problem(path, None, None, "expected a .csv, .jsonl or .parquet file"))
    return ChoiceLog.from_frame(frame, source=str(path))


# ---------------------------------------------------------------------------------------------
def _validate(frame: pd.DataFrame, source: str) -> pd.DataFrame:
    """A checked choice log: columns completed -> every row checked -> dtypes -> duplicate presentations."""
    df = _prepare_choices(frame, source)
    files = df["source_file"].astype(str).to_numpy()
    rows = df["source_row"].to_numpy()
    df["item_id"] = df["item_id"].map(lambda v: v if pd.isna(v) else (str(int(v)) if isinstance(v, float)
                                                                        and float(v).is_integer() else str(v)))
    problems = []
    for i in range(len(df)):
        problems.extend(_row_problems(df, i, (files[i], rows[i])))
    if problems:
        raise SelectionLogError(problems)
    for col, dtype in CHOICE_COLUMNS.items():
        df[col] = df[col].astype(dtype)
    for col in ("run",):
        df[col] = df[col].astype("int64")
    for col in ("model", "condition"):
        df[col] = df[col].astype("string")
    design = [c for c in df.columns if c not in CHOICE_COLUMNS]
    key = design + ["item_id", "epoch", "options"]
    dup = df.duplicated(key, keep=False)
    if dup.any():
        for _, grp in df[dup].groupby(key, sort=False, dropna=False):
            a, b = grp.index[:2]
            problems.append(problem(files[b], rows[b], "item_id",
                                    f"duplicate presentation of item {df.at[b, 'item_id']!r} (same design, epoch and "
                                    f"options) as {files[a]}:{rows[a]}"))
        raise SelectionLogError(problems)
    return df[design + list(CHOICE_COLUMNS)]


def _prepare_choices(frame: pd.DataFrame, source: str) -> pd.DataFrame:
    """A copy with the required columns checked and the optional ones filled (defaults, ``source_row``, nulls)."""
    df = pd.DataFrame(frame).copy().reset_index(drop=True)
    if len(df) == 0:
        raise SelectionLogError(problem(source, None, None, "the choice log is empty (no rows)"))
    problems = [problem(source, None, col, REQUIRED_COLUMN)
                for col in ("item_id", "n_options", "options", "status") if col not in df.columns]
    if problems:
        raise SelectionLogError(problems)
    for col, val in {"model": "unknown", "run": 1, "condition": "base", "epoch": 1, "source_file": source}.items():
        if col not in df.columns:
            df[col] = val
    if "source_row" not in df.columns:
        df["source_row"] = np.arange(1, len(df) + 1)
    for col in CHOICE_COLUMNS:
        if col not in df.columns:
            df[col] = pd.NA
    return df


def _shown_options(value) -> list | None:
    """The option texts of a row (a JSON list of strings), None when ``value`` is not one."""
    try:
        opts = json.loads(value)
    except (TypeError, ValueError):
        return None
    return opts if isinstance(opts, list) and all(isinstance(o, str) for o in opts) else None


def _row_problems(df: pd.DataFrame, i: int, where: tuple[Any, Any]) -> list[str]:
    """The problems of row ``i`` (``where`` = its file and row): item id, status, options and positions."""
    out = []
    if pd.isna(df.at[i, "item_id"]):
        out.append(problem(*where, "item_id", MISSING))
    st = df.at[i, "status"]
    if st not in CHOICE_STATUSES:
        out.append(problem(*where, "status", one_of_message(CHOICE_STATUSES).format(value=st)))
    opts = _shown_options(df.at[i, "options"])
    k = df.at[i, "n_options"]
    if opts is None:
        return out + [problem(*where, "options", "expected a JSON list of option texts")]
    if pd.isna(k) or int(k) != len(opts) or len(opts) < 2:
        return out + [problem(*where, "n_options", f"{k!r} does not match the {len(opts)} options shown "
                                                   "(at least 2 needed)")]
    k = int(k)
    ids = df.at[i, "option_ids"]
    if not pd.isna(ids) and len(str(ids).split("|")) != k:
        out.append(problem(*where, "option_ids", f"expected {k} ids, got {ids!r}"))
    for col in ("chosen_position", "gold_position"):
        v = df.at[i, col]
        if not pd.isna(v) and not (float(v).is_integer() and 1 <= int(v) <= k):
            out.append(problem(*where, col, f"expected a position in 1..{k}, got {v!r}"))
    cp = df.at[i, "chosen_position"]
    if st == "ok" and pd.isna(cp):
        out.append(problem(*where, "chosen_position", "missing for an 'ok' row"))
    if st != "ok" and st in CHOICE_STATUSES and not pd.isna(cp):
        out.append(problem(*where, "chosen_position", f"must be empty for a {st!r} row"))
    return out
