"""Reader for lm-evaluation-harness per-sample files (``samples_<task>_<date>.jsonl``) of multiple-choice tasks.

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
import json
import math
import re
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd

from ...exceptions import SelectionLogError, problem
from ._common import add_meta, check_meta, utf8_message, utf8_position

__all__ = ["read_lm_eval", "LM_EVAL_SCHEMA"]

#: The lm-evaluation-harness version whose sample-file schema this reader follows.
LM_EVAL_SCHEMA = "lm-eval 0.4.13"
_NAME = re.compile(r"^samples_(?P<task>.+)_(?P<date>\d{4}-\d{2}-\d{2}T[\d\-.]+)\.jsonl$")
_SCORES = ("acc", "acc_norm")


def read_lm_eval(path, *, meta=None, score: str = "acc"):
    """Read an lm-eval ``samples_<task>_<date>.jsonl`` file of a multiple-choice task into a ChoiceLog.

    Parameters
    ----------
    path : path-like
        The samples file (one JSON object per line).
    meta : dict, optional
        Design metadata: ``model`` (required unless given here; lm-eval writes it in the folder
        name, not the file), ``run``, ``condition``, extras. ``task`` defaults to the task of the
        file name (``samples_arc_easy_2025-01-01T00-00-00.jsonl`` -> ``arc_easy``).
    score : {"acc", "acc_norm"}, default "acc"
        Which choice rule gives the chosen option: argmax of the loglikelihoods (``acc``) or of
        loglikelihood per character of the continuation (``acc_norm``; lm-eval divides by the length
        of the choice text, here of the continuation without its leading delimiter). When the line
        records that metric, the recomputed correctness must agree with it.

    Returns
    -------
    ChoiceLog
        One row per line: ``item_id`` = ``doc_id``, ``options`` = the continuations (or the
        contexts, for tasks whose options are contexts, such as winogrande), ``chosen_position``,
        ``gold_position`` (from ``target``), ``raw_answer`` = the loglikelihoods (JSON), status
        ``ok`` (``invalid_answer`` when the loglikelihoods are not finite).

    Raises
    ------
    SelectionLogError
        A missing file, a line that is not JSON (a truncated file), a missing key, a number of
        responses different from the number of options (a changed choice list), a target that is
        not one of the options, a recorded ``acc`` that disagrees with the loglikelihoods; each
        named by file, line and field.
    """
    from ...choice._log import ChoiceLog

    path = Path(path)
    if score not in _SCORES:
        raise ValueError(f"`score` must be one of {list(_SCORES)}; got {score!r} instead.")
    if not path.exists():
        raise SelectionLogError(problem(path, None, None, "file not found"))
    meta = dict(meta or {})
    m = _NAME.match(path.name)
    meta.setdefault("task", m.group("task") if m else path.stem)
    if "model" not in meta:
        raise SelectionLogError(problem(path, None, "model", "lm-eval sample files do not name the model; give "
                                                             "`model` (manifest entry or meta)"))
    meta = check_meta(meta, path)
    rows, problems = [], []
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError:
        raise SelectionLogError(problem(path, None, None, utf8_message(utf8_position(path)))) from None
    for ln, text in enumerate(lines, start=1):
        if not text.strip():
            continue
        try:
            rec = json.loads(text)
        except json.JSONDecodeError as exc:
            problems.append(problem(path, ln, f"col {exc.colno}", f"malformed JSON ({exc.msg}); truncated file?"))
            continue
        if not isinstance(rec, dict):
            problems.append(problem(path, ln, None, f"expected a JSON object, got {type(rec).__name__}"))
            continue
        try:
            rows.append(_row(rec, path, ln, score))
        except _Bad as exc:
            problems.append(problem(path, ln, exc.field, exc.msg))
    if problems:
        raise SelectionLogError(problems)
    if not rows:
        raise SelectionLogError(problem(path, None, None, "no samples in this file"))
    frame = add_meta(pd.DataFrame(rows), meta)
    diag = {str(path): {"format": "lm_eval", "schema": LM_EVAL_SCHEMA, "score": score, "attempts": len(frame),
                        "status": Counter(frame["status"]), "filters": sorted(set(r["_filter"] for r in rows))}}
    frame = frame.drop(columns="_filter")
    return ChoiceLog.from_frame(frame, diagnostics=diag, source=str(path))


class _Bad(Exception):
    def __init__(self, field, msg):
        super().__init__(msg)
        self.field, self.msg = field, msg


def _row(rec: dict, path: Path, ln: int, score: str) -> dict:
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
        options, question = conts, contexts[0]
    elif len(set(conts)) == 1:  # options are contexts (winogrande-style "multiple input" tasks)
        options, question = contexts, conts[0]
    else:
        raise _Bad("arguments", "the requests differ in both context and continuation: not one multiple-choice item")
    k = len(options)
    gold = _gold(rec["target"], options)
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
    return {"item_id": str(rec["doc_id"]), "epoch": 1, "n_options": k,
            "options": json.dumps([o.strip() for o in options], ensure_ascii=False),
            "option_ids": "|".join(_letter(i) for i in range(k)),
            "chosen_position": chosen, "gold_position": gold[0] if len(gold) == 1 else None,
            "gold_positions": "|".join(map(str, gold)) if gold else None, "status": status,
            "raw_answer": json.dumps(lls), "question": str(question)[:2000], "source_file": str(path),
            "source_row": ln, "_filter": str(rec.get("filter", ""))}


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


def _gold(target, options) -> list[int]:
    """1-based gold positions from lm-eval's ``str(target)``."""
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
            out.extend(_gold(x, options))
        return sorted(set(out))
    stripped = [o.strip() for o in options]
    if str(t).strip() in stripped:
        return [stripped.index(str(t).strip()) + 1]
    raise _Bad("target", f"unknown option: {str(target)[:80]!r} is neither an option index nor an option text")
