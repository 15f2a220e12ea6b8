"""Reader for lm-evaluation-harness per-sample files (``samples_<task>_<date>.jsonl``) of multiple-choice tasks.

``lm_eval --log_samples --output_path DIR`` writes ``DIR/<model>/results_<date>.json`` (the aggregate, with
``model_name``) and one ``DIR/<model>/samples_<task>_<date>.jsonl`` per task (``<model>`` is the model name with
``/`` and other path characters replaced by ``__``; with ``--output_path name.json`` both go next to ``name.json``).

Schema followed: lm-eval 0.4.13 (``lm_eval/evaluator.py``, where each logged sample is built, and
``lm_eval/loggers/evaluation_tracker.py::save_results_samples``, which writes it). One JSON object per
line with

- ``doc_id`` (int), ``doc`` (the task's document), ``target`` (``str(doc_to_target(doc))``: an
  option index such as ``"2"``, an option text, or a list such as ``"[0, 2]"``),
- ``arguments``: ``{"gen_args_0": {"arg_0": context, "arg_1": continuation}, "gen_args_1": ...}``,
  one loglikelihood request per option, **in the order of the task's choices**,
- ``resps`` (``[[[ll, is_greedy]], ...]``) and ``filtered_resps`` (``[[ll, is_greedy], ...]``),
  stringified by lm-eval (``"-4.25"``, ``"False"``),
- ``filter``, ``metrics`` (e.g. ``["acc", "acc_norm"]``), hashes, and each metric's value
  (``"acc": 1.0``).

The option the model "chooses" is the argmax of the loglikelihoods (lm-eval's ``acc``; the first on
ties, as ``numpy.argmax``). lm-eval never shuffles options, so position p is the task's p-th choice.
"""

from __future__ import annotations

import ast
import glob as _glob
import json
import math
import re
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import numpy as np
import pandas as pd

from ...exceptions import SelectionLogError, problem
from ._common import add_meta, check_meta, utf8_message, utf8_position

if TYPE_CHECKING:
    from .._choice_log import ChoiceLog
    from ._common import Meta, PathLike

__all__ = ["read_lm_eval", "samples_files", "LM_EVAL_SCHEMA"]

#: The lm-evaluation-harness version whose sample-file schema this reader follows.
LM_EVAL_SCHEMA = "lm-eval 0.4.13"
_NAME = re.compile(r"^samples_(?P<task>.+)_(?P<date>\d{4}-\d{2}-\d{2}T[\d\-.]+)\.jsonl$")
_SCORES = ("acc", "acc_norm")


def read_lm_eval(path: PathLike, *, meta: Meta = None, score: Literal["acc", "acc_norm"] = "acc",
                 item: str | None = None, options: str | None = None, tie: str | None = None,
                 task_prefix: bool | None = None) -> ChoiceLog:
    """Read lm-eval ``samples_<task>_<date>.jsonl`` files of multiple-choice tasks into a ChoiceLog.

    Parameters
    ----------
    path : path-like or str
        A samples file (one JSON object per line); or a folder, as lm-eval's ``--output_path DIR``
        writes it (``DIR/<model>/samples_<task>_<date>.jsonl``), whose every ``samples_*.jsonl``
        file is read (searched recursively); or a glob pattern (``"out/*/samples_arc_*.jsonl"``).
    meta : dict, optional
        Design metadata: ``model``, ``run``, ``condition``, extras. Without ``model``, each file's
        model is the ``model_name`` of the ``results_<date>.json`` lm-eval wrote next to it in the
        same evaluation (same date); without either it is an error. ``task`` defaults to the task of
        the file name (``samples_arc_easy_2025-01-01T00-00-00.jsonl`` -> ``arc_easy``).
    score : {"acc", "acc_norm"}, default "acc"
        Which choice rule gives the chosen option: argmax of the loglikelihoods (``acc``) or of
        loglikelihood per character of the continuation (``acc_norm``; lm-eval divides by the length
        of the choice text, here of the continuation without its leading delimiter). When the line
        records that metric, the recomputed correctness must agree with it.
    item : str, optional
        The field that identifies the same question across its rotations or shuffles, as a dotted
        path into the line (``"doc.item"``: the ``item`` of the task's document). Rows with the same
        value are one item, the resampling unit of every bootstrap, across files and tasks too.
        Default: each line is its own item, ``doc_id`` (prefixed with the task, ``arc_easy:12``,
        when files of several tasks are read together, since doc ids restart in every task).
    options : str, optional
        The field holding the option texts in the order shown, as a dotted path into the line
        (``"doc.choices"``; ``"doc.choices.text"`` for ARC-style documents). Letter tasks (MMLU's
        template) score the continuations ``" A"``, ``" B"``, ... and show the texts in the prompt:
        the rotations of a question then share their continuations and differ only in
        ``doc.choices``. With ``options`` the shown options are those texts (so each rotation is a
        different order of the same options; ``option_ids`` is null, the identity being the text);
        the list must have one text per continuation. Without it, a file whose continuations are
        letters beside a ``doc.choices`` list of as many texts is noted in ``diagnostics``
        (``letter_choices``) and ``toolbias-stats validate`` says to set it.
    tie : str, optional
        Pairwise judges with a tie verdict: the continuation that declares the two answers equal (``"C"``,
        ``"tie"``; compared without surrounding spaces and case). Where the loglikelihoods pick it, the row's
        status is ``tie`` (no chosen position); it is not one of the options shown (``n_options`` = the
        other continuations, or the ``options`` texts, which then hold one text fewer than the continuations).
    task_prefix : bool, optional
        Without ``item``: whether item ids are ``task:doc_id``. Default: when the files read hold
        several tasks (:func:`~toolbias_stats.choice.read_choice_study` decides it for the whole
        study, so that two entries with different tasks do not share doc ids).

    Returns
    -------
    ChoiceLog
        One row per line: ``item_id``, ``options`` = the continuations (or the contexts, for tasks
        whose options are contexts, such as winogrande), ``chosen_position``, ``gold_position``
        (from ``target``), ``raw_answer`` = the loglikelihoods (JSON), status ``ok``
        (``invalid_answer`` when the loglikelihoods are not finite). ``diagnostics`` has one entry
        per file (its model and where it came from, rows, statuses).

    Raises
    ------
    SelectionLogError
        A missing file, a folder or glob with no samples file, a line that is not JSON (a truncated
        file), a missing key (``item`` included), a number of responses different from the number of
        options (a changed choice list), a target that is not one of the options, a recorded ``acc``
        that disagrees with the loglikelihoods, a model that cannot be determined, the same model and
        task in two files (two evaluations); each named by file, line and field.

    Examples
    --------
    A samples file of two lines: one question shown in two option orders (``doc.item`` ties them together):

    >>> import json, tempfile
    >>> from pathlib import Path
    >>> from toolbias_stats.io.readers.lm_eval import read_lm_eval
    >>> def sample(doc_id, options, logliks, target):
    ...     args = {f"gen_args_{i}": {"arg_0": "Which tool geocodes?\\nAnswer:", "arg_1": " " + o}
    ...             for i, o in enumerate(options)}
    ...     return {"doc_id": doc_id, "doc": {"item": "q0"}, "target": str(target), "arguments": args,
    ...             "filtered_resps": [[str(x), "False"] for x in logliks]}
    >>> path = Path(tempfile.mkdtemp()) / "samples_tool_mcq_2025-01-01T00-00-00.jsonl"
    >>> lines = [sample(0, ["geo_a", "geo_b"], [-1.2, -0.7], 0), sample(1, ["geo_b", "geo_a"], [-0.9, -1.1], 1)]
    >>> _ = path.write_text("\\n".join(json.dumps(x) for x in lines))
    >>> log = read_lm_eval(path, meta={"model": "org/model"}, item="doc.item")
    >>> log
    ChoiceLog(2 rows, status={'ok': 2}, items=1)
    >>> log.data[["item_id", "options", "chosen_position", "gold_position"]]
      item_id             options  chosen_position  gold_position
    0      q0  ["geo_a", "geo_b"]                2              1
    1      q0  ["geo_b", "geo_a"]                1              2
    """
    from .._choice_log import ChoiceLog

    _check_options(score, item, options, tie)
    files = samples_files(path)
    meta = dict(meta or {})
    plan, problems = [], []
    for f in files:
        m_meta = dict(meta)
        m = _NAME.match(f.name)
        m_meta.setdefault("task", m.group("task") if m else f.stem)
        origin = "manifest"
        if "model" not in m_meta:
            model, origin = _model_from_results(f)
            if model is None:
                problems.append(problem(f, None, "model", "lm-eval sample files do not name the model and no "
                                                          f"results_*.json of the same evaluation is next to it "
                                                          f"({origin}); give `model` (manifest entry or meta)"))
                continue
            m_meta["model"] = model
        try:
            plan.append((f, check_meta(m_meta, f), origin))
        except SelectionLogError as exc:
            problems.extend(exc.problems)
    if problems:
        raise SelectionLogError(problems)
    seen: dict[tuple, object] = {}
    for f, m_meta, _ in plan:
        key = (m_meta["model"], m_meta["task"], m_meta["run"], m_meta["condition"])
        if key in seen:
            problems.append(problem(f, None, "task", f"model {key[0]!r} and task {key[1]!r} are also in {seen[key]} "
                                                     "(two evaluations of the same task?); point `path` at one of "
                                                     "them (a file or a glob), or give each its own [[logs]] entry "
                                                     "with a different `run`"))
        seen.setdefault(key, f)
    if problems:
        raise SelectionLogError(problems)
    several_tasks = len({m_meta["task"] for _, m_meta, _ in plan}) > 1 if task_prefix is None else bool(task_prefix)
    frames, diag = [], {}
    for f, m_meta, origin in plan:
        rows = _read_file(f, score, item, problems, options, tie)
        if rows is None:
            continue
        frame = add_meta(pd.DataFrame(rows), m_meta)
        letters = _letter_note(frame, item, f, problems)
        if item is None and several_tasks:
            frame["item_id"] = m_meta["task"] + ":" + frame["item_id"]
        diag[str(f)] = {"format": "lm_eval", "schema": LM_EVAL_SCHEMA, "score": score, "attempts": len(frame),
                        "status": Counter(frame["status"]), "filters": sorted(set(frame["_filter"])),
                        "model": m_meta["model"], "model_from": origin, "task": m_meta["task"],
                        "item": item or ("task:doc_id" if several_tasks else "doc_id"),
                        "options": options or "continuations", "tie": tie}
        if letters:
            diag[str(f)]["letter_choices"] = letters
        frames.append(frame.drop(columns=["_filter", "_letters_beside"]))
    if problems:
        raise SelectionLogError(problems)
    frame = frames[0] if len(frames) == 1 else pd.concat(frames, ignore_index=True)
    return ChoiceLog.from_frame(frame, diagnostics=diag, source=str(path))


def _check_options(score, item, options, tie) -> None:
    """The reader options (ValueError naming the argument)."""
    if tie is not None and (not isinstance(tie, str) or not tie.strip()):
        raise ValueError(f"`tie` must be the text of the tie continuation, such as 'C' or 'tie'; got {tie!r} instead.")
    if score not in _SCORES:
        raise ValueError(f"`score` must be one of {list(_SCORES)}; got {score!r} instead.")
    for name, value in (("item", item), ("options", options)):
        if value is not None and (not isinstance(value, str) or not value or any(not k for k in value.split("."))):
            raise ValueError(f"`{name}` must be a field name or dotted path such as 'doc.{name}'; got {value!r} "
                             "instead.")


def samples_files(path) -> list[Path]:
    """The samples files a path names: the file itself, every ``samples_*.jsonl`` under a folder, or a glob's matches.

    Raises
    ------
    SelectionLogError
        Nothing there, or a folder / glob without any samples file.
    """
    text = str(path)
    p = Path(path)
    if p.is_dir():
        found = sorted(x for x in p.rglob("samples_*.jsonl") if x.is_file())
        if not found:
            raise SelectionLogError(problem(p, None, None, "folder holds no lm-eval samples_<task>_<date>.jsonl file "
                                                           "(run lm_eval with --log_samples --output_path)"))
        return found
    if p.exists():
        return [p]
    if any(c in text for c in "*?["):
        found = sorted(Path(x) for x in _glob.glob(text, recursive=True) if Path(x).is_file())
        if not found:
            raise SelectionLogError(problem(text, None, None, "no file matches this pattern"))
        return found
    raise SelectionLogError(problem(p, None, None, "file not found"))


def _model_from_results(f: Path):
    """``(model_name, where)`` from the results file of the same evaluation (same date id), or ``(None, reason)``."""
    m = _NAME.match(f.name)
    if not m:
        return None, "the file name has no lm-eval date"
    date = m.group("date")
    # --output_path DIR -> results_<date>.json; --output_path name.json -> name_<date>.json (same folder)
    cands = [c for c in sorted(f.parent.glob(f"*_{date}.json")) if c.is_file()]
    for c in cands:
        try:
            with c.open(encoding="utf-8") as fh:
                doc = json.load(fh)
        except (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError):
            continue
        name = doc.get("model_name") if isinstance(doc, dict) else None
        if isinstance(name, str) and name:
            return name, str(c)
    return None, f"looked for *_{date}.json in {f.parent}"


def _letter_note(frame: pd.DataFrame, item, f: Path, problems: list) -> dict | None:
    """Rows whose continuations are letters beside a ``doc.choices``-style list (options not read from it): the
    note for ``diagnostics``; with ``item``, rotations that then look like duplicate presentations are an error
    that names the fix."""
    field = frame["_letters_beside"].dropna()
    if field.empty:
        return None
    name = field.iloc[0]
    note = {"rows": int(len(field)), "field": name,
            "note": f"the continuations are letters (A, B, ...) and {name} holds the option texts: the position "
                    f"identifies only a letter; add options = \"{name}\" to the manifest entry so that each "
                    "rotation is a different order of the same options"}
    if item is not None:
        dup = frame.duplicated(["item_id", "options"], keep="first")
        if dup.any():
            first = frame.index[dup][0]
            problems.append(problem(f, int(frame.at[first, "source_row"]), "options",
                                    f"item {frame.at[first, 'item_id']!r} is shown with the same letter "
                                    f"continuations again (a rotation of {name}?); {note['note']}"))
    return note


def _read_file(path: Path, score: str, item, problems: list, options: str | None = None, tie: str | None = None):
    """Rows of one samples file, or None after adding its problems to ``problems``."""
    before = len(problems)
    rows = []
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError:
        problems.append(problem(path, None, None, utf8_message(utf8_position(path))))
        return None
    except OSError as exc:
        problems.append(problem(path, None, None, f"cannot read the file ({exc.strerror or exc})"))
        return None
    for ln, text in enumerate(lines, start=1):
        if not text.strip():
            continue
        try:
            rec = json.loads(text)
        except json.JSONDecodeError as exc:
            problems.append(problem(path, ln, f"col {exc.colno}", f"malformed JSON ({exc.msg}); truncated file?"))
            continue
        except RecursionError:
            problems.append(problem(path, ln, None, "JSON nested too deeply"))
            continue
        if not isinstance(rec, dict):
            problems.append(problem(path, ln, None, f"expected a JSON object, got {type(rec).__name__}"))
            continue
        try:
            row = _row(rec, path, ln, score, options, tie)
            if item is not None:
                row["item_id"] = _item(rec, item)
            rows.append(row)
        except _Bad as exc:
            problems.append(problem(path, ln, exc.field, exc.msg))
    if len(problems) > before:
        return None
    if not rows:
        problems.append(problem(path, None, None, "no samples in this file"))
        return None
    return rows


def _item(rec: dict, item: str) -> str:
    """The value at the dotted path ``item`` of a line, as a string."""
    x = rec
    for i, key in enumerate(item.split(".")):
        if not isinstance(x, dict) or key not in x:
            where = ".".join(item.split(".")[:i + 1])
            raise _Bad(item, f"missing key {where!r} (the manifest's `item` names the field that identifies the "
                             "question across its rotations)")
        x = x[key]
    if isinstance(x, bool) or not isinstance(x, (str, int, float)) or x == "":
        raise _Bad(item, f"expected a non-empty string or number identifying the question, got {x!r}")
    if isinstance(x, float):
        if not math.isfinite(x):
            raise _Bad(item, f"expected a finite number, got {x!r}")
        return str(int(x)) if x.is_integer() else repr(x)
    return str(x)


class _Bad(Exception):
    def __init__(self, field, msg):
        super().__init__(msg)
        self.field, self.msg = field, msg


def _field(rec: dict, dotted: str):
    """The value at a dotted path of a line (``_Bad`` naming the path when a key is missing)."""
    x = rec
    for i, key in enumerate(dotted.split(".")):
        if not isinstance(x, dict) or key not in x:
            raise _Bad(dotted, f"missing key {'.'.join(dotted.split('.')[:i + 1])!r}")
        x = x[key]
    return x


def _shown_texts(rec: dict, options: str, k: int) -> list[str]:
    """The option texts of a line from the manifest's ``options`` field, one per continuation."""
    texts = _field(rec, options)
    if not isinstance(texts, list) or not all(isinstance(t, (str, int, float)) and not isinstance(t, bool)
                                              for t in texts):
        raise _Bad(options, f"expected a list of option texts, got {str(texts)[:80]!r}")
    if len(texts) != k:
        raise _Bad(options, f"{len(texts)} option texts for {k} scored continuations")
    return [str(t).strip() for t in texts]


_LETTER = re.compile(r"^\(?([A-Z])[).:]?$")


def _letters_beside(rec: dict, conts: list[str]) -> str | None:
    """``"doc.choices"`` (or ``"doc.choices.text"``) when the continuations are the letters A, B, ... and the doc
    holds a list of as many option texts beside them; else None."""
    letters = [_LETTER.match(c.strip()) for c in conts]
    if not all(letters) or [m.group(1) for m in letters if m] != [_letter(i) for i in range(len(conts))]:
        return None
    doc = rec.get("doc")
    ch = doc.get("choices") if isinstance(doc, dict) else None
    if isinstance(ch, list) and len(ch) == len(conts):
        return "doc.choices"
    if isinstance(ch, dict) and isinstance(ch.get("text"), list) and len(ch["text"]) == len(conts):
        return "doc.choices.text"
    return None


def _requests(rec: dict) -> tuple[list[str], str, list[float]]:
    """``(options, question, loglikelihoods)`` of a line: its requests' continuations (or contexts) and scores."""
    for key in ("doc_id", "arguments", "target"):
        if key not in rec:
            raise _Bad(key, "missing key (is this an lm-eval samples_*.jsonl line?)")
    resps = rec.get("filtered_resps", rec.get("resps"))
    if resps is None:
        raise _Bad("filtered_resps", "missing key (neither filtered_resps nor resps)")
    args = _arguments(rec["arguments"])
    lls = [_loglik(r) for r in resps]
    n_args = len(args)
    if "acc_mutual_info" in (rec.get("metrics") or []) and n_args == len(lls) and n_args % 2 == 0:
        args, lls = args[: n_args // 2], lls[: n_args // 2]  # second half: unconditional requests
    if len(lls) != len(args):
        raise _Bad("filtered_resps", f"{len(lls)} responses for {len(args)} options (changed choice list?)")
    if len(args) < 2:
        raise _Bad("arguments", f"{len(args)} option(s): not a multiple-choice sample")
    contexts = [a[0] for a in args]
    conts = [a[1] for a in args]
    if len(set(contexts)) == 1:
        return conts, contexts[0], lls
    if len(set(conts)) == 1:  # options are contexts (winogrande-style "multiple input" tasks)
        return contexts, conts[0], lls
    raise _Bad("arguments", "the requests differ in both context and continuation: not one multiple-choice item")


def _row(rec: dict, path: Path, ln: int, score: str, options_field: str | None = None,
         tie: str | None = None) -> dict:
    options, question, lls = _requests(rec)
    k = len(options)
    j = _tie_index(options, tie)
    shown = (_shown_texts(rec, options_field, k - (j is not None)) if options_field else
             [o.strip() for i, o in enumerate(options) if i != j])
    gold = _gold(rec["target"], options, shown if j is None else None)
    arr = np.array(lls, dtype=float)
    if score == "acc_norm":
        lengths = np.array([float(len(o.lstrip())) or 1.0 for o in options])
        arr = arr / lengths
    status, chosen = ("ok", int(np.argmax(arr)) + 1) if np.all(np.isfinite(arr)) else ("invalid_answer", None)
    if status == "ok" and score in rec and len(gold) >= 1 and isinstance(rec[score], (int, float)):
        recomputed = float(chosen in gold)
        if not math.isclose(float(rec[score]), recomputed):
            raise _Bad(score, f"the line records {score} = {rec[score]} but the argmax of its loglikelihoods is "
                              f"option {chosen} and the gold option(s) {gold}: the responses do not match the "
                              "options (changed choice list or another filter?)")
    if j is not None:   # the tie continuation is a verdict, not an option: positions after it move up by one
        status, chosen = ("tie", None) if chosen == j + 1 else (status, chosen if chosen is None or chosen <= j
                                                                 else chosen - 1)
        gold = [g if g <= j else g - 1 for g in gold if g != j + 1]
    kk = len(shown)
    return {"item_id": str(rec["doc_id"]), "epoch": 1, "n_options": kk,
            "options": json.dumps(shown, ensure_ascii=False),
            "option_ids": None if options_field else "|".join(_letter(i) for i in range(k) if i != j),
            "chosen_position": chosen, "gold_position": gold[0] if len(gold) == 1 else None,
            "gold_positions": "|".join(map(str, gold)) if gold else None, "status": status,
            "raw_answer": json.dumps(lls), "question": str(question)[:2000], "source_file": str(path),
            "source_row": ln, "_filter": str(rec.get("filter", "")),
            "_letters_beside": None if options_field or j is not None else _letters_beside(rec, options)}


def _tie_index(options: list[str], tie: str | None) -> int | None:
    """The index of the continuation that declares a tie (the manifest's ``tie``, compared without surrounding
    spaces and case), or None."""
    if tie is None:
        return None
    stripped = [o.strip().casefold() for o in options]
    t = tie.strip().casefold()
    if stripped.count(t) > 1:
        raise _Bad("tie", f"{stripped.count(t)} continuations read {tie!r}: the tie verdict must be one of them")
    return stripped.index(t) if t in stripped else None


def _letter(i: int) -> str:
    return chr(ord("A") + i) if i < 26 else f"O{i + 1}"


def _arguments(a):
    """``arguments`` as a list of (context, continuation); the dict form of the file or a plain list."""
    if isinstance(a, dict):
        keys = sorted(a, key=lambda k: int(re.sub(r"\D", "", k) or 0))
        out = []
        for key in keys:
            v = a[key]
            if not isinstance(v, dict) or "arg_0" not in v or "arg_1" not in v:
                raise _Bad("arguments", f"{key} is not a (context, continuation) request")
            out.append((str(v["arg_0"]), str(v["arg_1"])))
        return out
    if isinstance(a, list) and all(isinstance(x, (list, tuple)) and len(x) >= 2 for x in a):
        return [(str(x[0]), str(x[1])) for x in a]
    raise _Bad("arguments", "expected {gen_args_i: {arg_0, arg_1}} or a list of (context, continuation) pairs")


def _loglik(r) -> float:
    """A loglikelihood from one response: ``[ll, is_greedy]``, ``[[ll, is_greedy]]`` or ``ll``, numbers or strings."""
    x = r
    while isinstance(x, (list, tuple)):
        if not x:
            raise _Bad("filtered_resps", f"empty response {r!r}")
        x = x[0]
    try:
        return float(x)
    except (TypeError, ValueError):
        raise _Bad("filtered_resps", f"not a loglikelihood: {r!r}") from None


def _gold(target, options, shown=None) -> list[int]:
    """1-based gold positions from lm-eval's ``str(target)`` (an index, a continuation or a shown text)."""
    t = target
    if isinstance(t, str):
        s = t.strip()
        if re.fullmatch(r"-?\d+", s):
            t = int(s)
        elif s.startswith("[") and s.endswith("]"):
            try:
                t = ast.literal_eval(s)
            except (ValueError, SyntaxError):
                t = s
    if isinstance(t, bool):
        raise _Bad("target", f"unknown option {target!r}")
    if isinstance(t, int):
        if not 0 <= t < len(options):
            raise _Bad("target", f"unknown option: index {t} is not one of the {len(options)} options")
        return [t + 1]
    if isinstance(t, list):
        out = []
        for x in t:
            out.extend(_gold(x, options, shown))
        return sorted(set(out))
    for texts in ([o.strip() for o in options], shown or []):
        if str(t).strip() in texts:
            return [texts.index(str(t).strip()) + 1]
    raise _Bad("target", f"unknown option: {str(target)[:80]!r} is neither an option index nor an option text")
