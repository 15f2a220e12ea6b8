"""Reader for Inspect AI eval logs (``.eval`` and ``.json``), through inspect_ai's own log reader.

Two views of one log:

- :func:`read_inspect` (manifest ``format = "inspect"``): tool-calling samples -> a
  :class:`~toolbias_stats.SelectionLog`, one row per sample and epoch: the tools offered to the
  model, in order, and its first tool call.
- :func:`read_inspect_choices` (choice studies, ``toolbias_stats.choice``): multiple-choice samples
  -> a :class:`~toolbias_stats.choice.ChoiceLog`, one row per sample and epoch: the option shown at
  each position, the chosen position and the gold position.

``inspect_ai`` is an optional dependency (``pip install "toolbias-stats[inspect]"``), imported only here.
The log format was learned from inspect-ai 0.3.285 (``EvalLog``/``EvalSample``/``ModelEvent`` and the
``multiple_choice`` solver and ``choice`` scorer); see docs/formats.md.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from ...exceptions import SelectionLogError, problem
from .._catalog import ToolCatalog
from .._selection_log import SelectionLog
from ._common import add_meta, check_meta, unassigned_rows

if TYPE_CHECKING:
    from .._choice_log import ChoiceLog
    from ._common import Meta, PathLike

__all__ = ["read_inspect", "read_inspect_choices", "offered_inspect", "inspect_log_files", "INSPECT_SUFFIXES"]

#: Suffixes of Inspect log files (a folder is read file by file, in name order).
INSPECT_SUFFIXES = (".eval", ".json")
_EXTRA = 'inspect_ai is needed to read Inspect AI logs; install the extra: pip install "toolbias-stats[inspect]"'
#: How Inspect's ``choice`` scorer says that the solver shuffled the choices (inspect_ai/scorer/_choice.py).
_SHUFFLED = "Choices were shuffled before generating a response, the following was sent to the model:"
_ANSWER = re.compile(r"ANSWER\s*:\s*([^\n]*)", re.IGNORECASE)


def _inspect_log_api():
    """``inspect_ai.log.read_eval_log``, imported lazily with a message naming the extra."""
    try:
        from inspect_ai.log import read_eval_log
    except ImportError as exc:  # pragma: no cover - exercised only without the extra
        raise ImportError(_EXTRA) from exc
    return read_eval_log


def inspect_log_files(path) -> list[Path]:
    """The log files of ``path``: the file itself, or the ``*.eval`` / ``*.json`` files of a folder (name order)."""
    path = Path(path)
    if not path.exists():
        raise SelectionLogError(problem(path, None, None, "file or folder not found"))
    if path.is_dir():
        files = sorted((p for p in path.iterdir() if p.is_file() and p.suffix.lower() in INSPECT_SUFFIXES
                        and not p.name.startswith(".") and p.name != "logs.json"), key=lambda p: p.name)
        if not files:
            raise SelectionLogError(problem(path, None, None, "no Inspect logs (*.eval, *.json) in this folder"))
        return files
    if path.suffix.lower() not in INSPECT_SUFFIXES:
        raise SelectionLogError(problem(path, None, None, f"expected an Inspect log (.eval or .json) or a folder of "
                                                          f"them; got {path.name!r} instead"))
    return [path]


def _read_log(path: Path):
    """Read one log with inspect_ai; any failure becomes a SelectionLogError naming the file (and line)."""
    read_eval_log = _inspect_log_api()
    try:
        log = read_eval_log(str(path))
    except Exception as exc:  # inspect raises ValueError, zipfile/pydantic errors, ...
        msg = str(exc).splitlines()[0][:300] if str(exc) else type(exc).__name__
        m = re.search(r"line (\d+)", msg)
        raise SelectionLogError(problem(path, int(m.group(1)) if m else None, None,
                                        f"cannot read this Inspect log ({type(exc).__name__}: {msg}); is it "
                                        "truncated or not an Inspect log?")) from None
    samples = list(log.samples or [])
    expected = getattr(log.results, "total_samples", None) if log.results is not None else None
    if not samples:
        raise SelectionLogError(problem(path, None, "samples", f"the log has no samples (status {log.status!r}); "
                                                               "was it written with log_samples=False?"))
    if expected is not None and len(samples) != expected:
        raise SelectionLogError(problem(path, None, "samples", f"the log holds {len(samples)} samples but its results "
                                                               f"count {expected}: truncated or incomplete log"))
    return log, samples


def _design(meta, log, path):
    meta = dict(meta or {})
    meta.setdefault("model", str(log.eval.model))
    meta.setdefault("task", str(log.eval.task))
    return check_meta(meta, path)


# ---------------------------------------------------------------------------------------
# tool calls
def read_inspect(path: PathLike, *, catalog: ToolCatalog, meta: Meta = None,
                 cluster: str | None = None) -> SelectionLog:
    """Read Inspect AI eval logs of tool-calling samples into a SelectionLog, one row per sample and epoch.

    Parameters
    ----------
    path : path-like
        An Inspect log (``.eval`` or ``.json``) or a folder of them (read in name order).
    catalog : ToolCatalog
        The tools whose names are recognised (tool names are matched like
        :func:`~toolbias_stats.read_transcripts` does: ``tool_id``, ToolBench function name or
        standardised name, case-insensitively).
    meta : dict, optional
        Design metadata: ``model`` (default: the log's model, e.g. ``"openai/gpt-4o"``), ``run``,
        ``condition`` and extra scalar keys; ``task`` defaults to the log's task name.
    cluster : str, optional
        The cluster every sample belongs to (manifest key ``cluster``); by default the cluster of
        the tools offered.

    Returns
    -------
    SelectionLog
        Design columns ``model, run, condition, task, epoch`` (+ ``meta`` extras). ``query_id`` is
        the sample id, ``source_file`` the log and ``source_row`` the 1-based index of the sample in
        it. ``diagnostics[file]`` counts statuses, samples with several tool calls in the deciding
        model turn (``several_calls``) and unresolved names.

    Raises
    ------
    SelectionLogError
        A file that inspect_ai cannot read (truncated, not a log), a log whose sample count
        disagrees with its results, offered tools that are not catalog tools or span several
        clusters, a row whose cluster cannot be told; each named by file and sample.
    ImportError
        inspect_ai is not installed (the message names the ``inspect`` extra).

    Notes
    -----
    Per sample (``EvalSample``) and epoch:

    - the **deciding model call** is the first ``ModelEvent`` whose output holds a tool call, or
      the first ``ModelEvent`` when none does; its ``tools`` (``ToolInfo`` names, in the order
      given to the model) are the candidates and become ``ordering``;
    - its first tool call is the choice: a catalog tool -> ``ok``; another name ->
      ``unknown_tool`` (``raw_choice`` keeps the name); no tool call in any model call ->
      ``no_call``; a tool call that Inspect could not parse (``parse_error`` set) -> ``parse_error``;
    - several tool calls in the deciding turn: the first one counts (as for every reader) and the
      sample is counted in ``diagnostics[file]["several_calls"]`` (rows in ``multiple_calls_rows``);
    - a ``tool_choice`` that names one tool (``ToolFunction``) or forbids calls (``"none"``) left no choice:
      ``forced`` (``raw_choice`` says what was forced and what the model did). Inspect gives the model only
      the named tool, so the list offered is not in the log: ``ordering`` is null and the cluster is that
      tool's;
    - no tool call: ``raw_choice`` keeps the first 200 characters of the answer;
    - a sample that ended in an error (``sample.error``) without a tool call -> ``parse_error``
      with the error message as ``raw_choice``;
    - a log without model events (events not logged): the first assistant message with tool calls
      gives the choice and the ordering is unknown (null).

    Examples
    --------
    The bundled Inspect AI eval log (a mock model choosing among 5 geocoding tools shown in 5 rotations; reading
    it needs the ``inspect`` extra):

    >>> import toolbias_stats as tbs
    >>> from toolbias_stats.io.readers import read_catalog_table
    >>> p = tbs.datasets.path
    >>> catalog = read_catalog_table(p("choice/tools_catalog.csv"))
    >>> read_inspect(p("choice/logs/geocoding_tools.eval"), catalog=catalog, cluster="geocoding")
    SelectionLog(200 rows, status={'ok': 192, 'no_call': 8}, clusters=1)
    """
    files = inspect_log_files(path)
    parts, diagnostics, problems = [], {}, []
    for f in files:
        try:
            frame, diag = _tool_rows(f, catalog, meta, cluster)
        except SelectionLogError as exc:
            problems.extend(exc.problems)
            continue
        parts.append(frame)
        diagnostics[str(f)] = diag
    if problems:
        raise SelectionLogError(problems)
    frame = pd.concat(parts, ignore_index=True) if len(parts) > 1 else parts[0]
    return SelectionLog.from_frame(frame, catalog, diagnostics=diagnostics, source=str(path))


def _tool_rows(f: Path, catalog, meta, cluster):
    from .transcripts import _id_str, _Matcher

    log, samples = _read_log(f)
    meta = _design(meta, log, f)
    if cluster is not None:
        cluster = _id_str(cluster)
        if cluster not in catalog.clusters:
            raise SelectionLogError(problem(f, None, "cluster", f"unknown cluster {cluster!r} (catalog has "
                                                                f"{catalog.clusters})"))
    matcher = _Matcher(catalog, cluster)
    rows, problems, several = [], [], []
    for i, s in enumerate(samples, start=1):
        where = f"sample {s.id!r} epoch {s.epoch}"
        offered, call, n_calls, parse_err, forced, text = _deciding_call(s)
        ordering, cid = None, cluster
        if forced is not None and forced != "none":
            # Inspect passes only the named tool to the model: the list is not in the log, the cluster is the tool's
            t = matcher.resolve(forced)
            offered = None
            if cid is None and t is not None:
                cid = matcher.cluster_of(t)
        if offered:
            ids = [matcher.resolve(n) for n in offered]
            unknown = [n for n, t in zip(offered, ids) if t is None]
            if unknown:
                problems.append(problem(f, i, "tools", f"{where}: tool(s) {unknown} offered to the model are not "
                                                       "catalog tools (of the cluster)"))
                continue
            if cid is None:   # the cluster of the set offered (a tool may be in several clusters; issue 36)
                cid, bad = matcher.cluster_of_shown(ids, offered)
                if bad:
                    problems.append(problem(f, i, "tools", f"{where}: {bad.replace('shown', 'offered', 1)}"))
                    continue
            ordering = "|".join(ids)
        if call is not None and forced is None and parse_err is None and n_calls > 1:
            several.append(i)
        cid, tool, status, raw = _sample_outcome(s, matcher, cid, call, parse_err, forced, text)
        # issue 36: a sample whose cluster cannot be decided (no tools offered or resolved) is a row without a
        # cluster, excluded by its status
        rows.append((int(s.epoch), cid, str(s.id), None, ordering, tool, status, raw, str(f), i))
    if problems:
        raise SelectionLogError(problems)
    frame = pd.DataFrame(rows, columns=["epoch", "cluster_id", "query_id", "rotation", "ordering", "chosen_tool",
                                        "status", "raw_choice", "source_file", "source_row"])
    frame["source_row"] = frame["source_row"].astype(np.int64)
    frame["epoch"] = frame["epoch"].astype(np.int64)
    epoch = frame.pop("epoch")
    frame = add_meta(frame, meta)
    frame.insert(len(meta), "epoch", epoch)
    diag = {"format": "inspect", "task": str(log.eval.task), "log_model": str(log.eval.model),
            "inspect_version": (log.eval.packages or {}).get("inspect_ai"),
            "attempts": len(frame), "status": Counter(frame["status"]), "several_calls": len(several),
            "multiple_calls_rows": several,
            "unresolved": Counter(frame.loc[frame["status"] == "unknown_tool", "raw_choice"])}
    un = unassigned_rows(frame, f, "set `cluster` in the manifest")
    if un is not None:
        diag["unassigned"] = un
    return frame, diag


def _sample_outcome(s, matcher, cid, call, parse_err, forced, text):
    """``(cluster, tool, status, raw)`` of a tool-calling sample whose offered list gave cluster ``cid`` (or None)."""
    tool, raw = None, call
    if forced is not None:
        return cid, None, "forced", f"tool_choice forced {forced}; the model called {call or 'no tool'}"
    if parse_err is not None:
        return cid, None, "parse_error", parse_err
    if call is None:
        if s.error is not None:
            return cid, None, "parse_error", str(getattr(s.error, "message", s.error))[:500]
        return cid, None, "no_call", (text or None) and text[:200]
    tool = matcher.resolve(call)
    status = "ok" if tool is not None else "unknown_tool"
    if tool is not None and cid is None:
        cid = matcher.cluster_of(tool)
    if tool is not None and (cid is None or tool not in matcher.index.members[cid]):
        # a tool of several clusters that nothing decides, or of another cluster than the one offered
        status, tool = "off_cluster", None
    return cid, tool, status, raw


def offered_inspect(path, **_) -> list[tuple]:
    """``(tool names offered, file, sample index)`` of every sample that was offered tools (for inferring clusters)."""
    out = []
    for f in inspect_log_files(path):
        _, samples = _read_log(f)
        for i, s in enumerate(samples, start=1):
            offered, forced = _deciding_call(s)[0], _deciding_call(s)[4]
            if offered and forced is None:  # a forced call shows only the forced tool (or none)
                out.append((list(offered), str(f), i))
    return out


def _deciding_call(sample):
    """``(offered names, first call name, calls in that turn, parse error, forced tool_choice, answer text)``.

    ``forced`` is the name of the tool a ``ToolFunction`` tool_choice named, ``"none"`` when calls were forbidden,
    else None.
    """
    models = [e for e in (sample.events or []) if getattr(e, "event", None) == "model"]
    for e in models:
        calls = _calls(e.output)
        if calls:
            return ([t.name for t in e.tools], calls[0].function, len(calls), _call_error(calls[0]),
                    _forced(e.tool_choice), _text(e.output))
    if models:
        e = models[0]
        return [t.name for t in e.tools] or None, None, 0, None, _forced(e.tool_choice), _text(e.output)
    for m in sample.messages or []:  # events not logged: fall back to the message history
        calls = getattr(m, "tool_calls", None) if getattr(m, "role", None) == "assistant" else None
        if calls:
            return None, calls[0].function, len(calls), _call_error(calls[0]), None, None
    return None, None, 0, None, None, None


def _forced(tool_choice):
    if tool_choice is None or tool_choice in ("auto", "any"):
        return None
    if tool_choice == "none":
        return "none"
    name = getattr(tool_choice, "name", None)
    return name if isinstance(name, str) else None


def _text(output) -> str:
    try:
        return str(output.completion or "").strip()
    except Exception:  # an output without choices
        return ""


def _calls(output):
    if output is None or not output.choices:
        return []
    return list(output.choices[0].message.tool_calls or [])


def _call_error(call):
    err = getattr(call, "parse_error", None)
    return None if not err else f"{call.function}: {err}"[:500]


# ---------------------------------------------------------------------------------------
# multiple choice
def read_inspect_choices(path: PathLike, *, meta: Meta = None, scorer: str | None = None,
                         tie: str | None = None) -> ChoiceLog:
    """Read the multiple-choice samples of Inspect AI eval logs into a ChoiceLog (one row per sample and epoch).

    Parameters
    ----------
    path : path-like
        An Inspect log (``.eval`` / ``.json``) or a folder of them.
    meta : dict, optional
        Design metadata (``model`` defaults to the log's model, ``task`` to its task name).
    scorer : str, optional
        Name of the score that holds the ``choice`` scorer's verdict (default: the score named
        ``"choice"`` when there is one, else none).
    tie : str, optional
        Pairwise judges whose tie verdict is a choice of its own (a model-graded pairwise task with choices such
        as ``["answer one", "answer two", "Tie"]``): the text of that choice (compared without surrounding spaces
        and case; manifest key ``tie``). It is a verdict, not an option: the row shows the other choices
        (``n_options`` = 2 for a pair), picking it is the status ``tie``, and a target naming it has no gold
        position. Every sample must list it exactly once.

    Returns
    -------
    ChoiceLog

    Raises
    ------
    SelectionLogError
        An unreadable or truncated log, a sample without ``choices`` (a tool-calling sample: read
        it with :func:`read_inspect`), a shuffled listing that does not match the sample's choices
        (a changed choice list), a target letter beyond the choices; named by file and sample.

    Notes
    -----
    Inspect records the shown order in one of two ways, and the reader follows both:

    - **Dataset shuffling** (``shuffle_choices=True`` when the dataset is read, the documented way):
      ``sample.choices`` are the choices in the order shown and ``sample.target`` is the letter of
      the gold choice in that order. The original order is not in the log, so an option is
      identified by its text.
    - **Solver shuffling** (``multiple_choice(shuffle=True)``, deprecated): ``sample.choices`` and
      the message history are put back in the original order, and the ``choice`` scorer's
      explanation holds the listing that was actually sent (``A) ...``) and the answer in the shown
      letters (``Shuffled answer: ANSWER: B``). The reader parses that listing (matching it
      against the choices' texts), so the positions are those the model saw and ``option_ids``
      keeps each shown option's original letter.

    ``item_id`` is ``sample.metadata["item_id"]`` when the sample has one (several samples showing one
    item in different orders, e.g. rotations or the two orders of a judged pair), else the sample id.

    The chosen letters come from the ``choice`` score's explanation when shuffled, else from its
    ``answer``, else from the final output (``ANSWER: X``, the multiple_choice template). One
    letter inside the choices -> ``ok``; ``tie`` (``ANSWER: tie``) on a two-choice sample -> ``tie`` (a
    pairwise judge declaring the answers equal, :func:`~toolbias_stats.choice.judge_consistency`); none ->
    ``no_answer``; a letter beyond the choices or unparseable text -> ``invalid_answer``; several letters ->
    ``multiple_answers``; a sample error -> ``error``.

    Examples
    --------
    The bundled Inspect AI eval log of a multiple-choice task whose options were rotated (needs the ``inspect``
    extra):

    >>> import toolbias_stats as tbs
    >>> read_inspect_choices(tbs.datasets.path("choice/logs/mc_rotated.eval"))
    ChoiceLog(320 rows, status={'ok': 320}, items=80)
    """
    from .._choice_log import ChoiceLog

    files = inspect_log_files(path)
    frames, diagnostics, problems = [], {}, []
    for f in files:
        try:
            log, samples = _read_log(f)
        except SelectionLogError as exc:
            problems.extend(exc.problems)
            continue
        m = _design(meta, log, f)
        rows = []
        for i, s in enumerate(samples, start=1):
            try:
                rows.append(_choice_row(f, i, s, scorer, tie))
            except SelectionLogError as exc:
                problems.extend(exc.problems)
        if not rows:
            continue
        frame = pd.DataFrame(rows)
        frame = add_meta(frame, m)
        frames.append(frame)
        diagnostics[str(f)] = {"format": "inspect", "task": str(log.eval.task), "attempts": len(frame),
                               "status": Counter(frame["status"]),
                               "solver_shuffled": int(frame["shuffled_by_solver"].sum())}
    if problems:
        raise SelectionLogError(problems)
    frame = pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]
    frame = frame.drop(columns="shuffled_by_solver")
    return ChoiceLog.from_frame(frame, diagnostics=diagnostics, source=str(path))


def _letter(i: int) -> str:
    return chr(ord("A") + i)


def _choice_row(f, i, s, scorer_name, tie=None):
    """One multiple-choice sample as a ChoiceLog row: the options as shown, the answer and the gold positions."""
    where = f"sample {s.id!r} epoch {s.epoch}"
    choices = list(s.choices or [])
    if not choices:
        raise SelectionLogError(problem(f, i, "choices", f"{where} has no choices (not a multiple-choice sample; read "
                                                         "tool-calling samples with format 'inspect' in a study)"))
    k = len(choices)
    score = _sample_score(f, i, s, scorer_name, where)
    shown, ids, order, letters, raw, shuffled = _shown_and_answer(f, i, choices, score, where)
    completion = s.output.completion if s.output is not None else ""
    if not letters:  # nothing marked: classify the model's own text (empty -> no answer)
        raw = completion
        letters = _answer_letters(completion)
    gold_pos = [order.index(g) + 1 for g in _gold(f, i, s, k, where)]
    status, chosen = _status(letters, k, raw, s)
    if tie is not None:   # the tie verdict is a choice of the task, not an option shown (issue 36)
        shown, ids, gold_pos, status, chosen = _without_tie(f, i, where, tie, shown, ids, gold_pos, status, chosen)
        k = len(shown)
    return {
        "item_id": str((s.metadata or {}).get("item_id", s.id)), "epoch": int(s.epoch), "n_options": k,
        "options": json.dumps(list(map(str, shown)), ensure_ascii=False),
        "option_ids": None if ids is None else "|".join(ids),
        "chosen_position": chosen,
        "gold_position": gold_pos[0] if len(gold_pos) == 1 else None,
        "gold_positions": "|".join(map(str, sorted(gold_pos))) if gold_pos else None,
        "status": status, "raw_answer": str(raw)[:500] if raw else None,
        "question": _input_text(s)[:2000], "source_file": str(f), "source_row": i,
        "shuffled_by_solver": shuffled,
    }


def _without_tie(f, i, where, tie: str, shown, ids, gold_pos, status, chosen):
    """The row without the choice that declares a tie: the other options (positions after it move up by one), the
    status ``tie`` when it was picked, and no gold position for a target naming it."""
    t = tie.strip().casefold()
    hits = [j for j, c in enumerate(shown) if str(c).strip().casefold() == t]
    if len(hits) != 1:
        raise SelectionLogError(problem(f, i, "choices", f"{where}: {len(hits)} choices read {tie!r} (the manifest's "
                                                         "`tie`): the tie verdict must be exactly one of them"))
    j = hits[0] + 1                       # its 1-based position as shown

    def moved(p):
        return p if p < j else p - 1

    if status == "ok" and chosen == j:
        status, chosen = "tie", None
    elif status == "ok":
        chosen = moved(chosen)
    shown = [c for p, c in enumerate(shown, start=1) if p != j]
    ids = None if ids is None else [x for p, x in enumerate(ids, start=1) if p != j]
    return shown, ids, [moved(g) for g in gold_pos if g != j], status, chosen


def _sample_score(f, i, s, scorer_name, where):
    """The sample's choice score (``scorer_name``, else a score called "choice"), or None."""
    if not s.scores:
        return None
    name = scorer_name or ("choice" if "choice" in s.scores else None)
    if name is None:
        return None
    if name not in s.scores:
        raise SelectionLogError(problem(f, i, "scores", f"{where} has no score {name!r} (has {sorted(s.scores)})"))
    return s.scores[name]


def _shown_and_answer(f, i, choices, score, where):
    """``(shown, ids, order, letters, raw, shuffled)``: the options in the order shown (a solver's shuffle is read
    back from the choice scorer's explanation), their letters when shuffled, each shown option's original index,
    the answer letters and the raw answer."""
    explanation = str(getattr(score, "explanation", "") or "")
    shuffled = explanation.startswith(_SHUFFLED)
    if not shuffled:
        raw = str(score.answer) if score is not None and score.answer is not None else ""
        letters = [t.strip() for t in raw.replace(",", " ").split()]
        return choices, None, list(range(len(choices))), letters, raw, False
    order = _parse_listing(explanation[len(_SHUFFLED):].split("\nShuffled answer:")[0], choices)
    if order is None:
        raise SelectionLogError(problem(f, i, "choices", f"{where}: the shuffled listing in the choice scorer's "
                                                         "explanation does not match the sample's choices "
                                                         "(changed choice list?)"))
    answer_text = explanation.split("Shuffled answer:", 1)[1] if "Shuffled answer:" in explanation else ""
    return ([choices[j] for j in order], [_letter(j) for j in order], order, _answer_letters(answer_text),
            answer_text.strip(), True)


def _gold(f, i, s, k, where) -> list[int]:
    """Original indices of the target letters (they refer to sample.choices: the shown order for dataset
    shuffling, the original for a solver's)."""
    target = s.target if isinstance(s.target, list) else [s.target]
    gold_orig = []
    for t in target:
        for tok in str(t).replace(",", " ").split():
            if len(tok) != 1 or not tok.isalpha() or ord(tok.upper()) - 65 >= k:
                raise SelectionLogError(problem(f, i, "target", f"{where}: target {tok!r} is not a letter of the "
                                                                f"{k} choices"))
            gold_orig.append(ord(tok.upper()) - 65)
    return gold_orig


def _status(letters, k, raw, s):
    if not letters:
        if s.error is not None:
            return "error", None
        return ("no_answer" if not str(raw or "").strip() else "invalid_answer"), None
    if len(letters) > 1:
        return "multiple_answers", None
    tok = letters[0]
    if k == 2 and tok.strip(".").lower() == "tie":   # a pairwise judge declaring the two answers equal
        return "tie", None
    if len(tok) != 1 or not tok.isalpha() or ord(tok.upper()) - 65 >= k:
        return "invalid_answer", None
    return "ok", ord(tok.upper()) - 64


def _answer_letters(text: str) -> list[str]:
    m = _ANSWER.search(text or "")
    if m is None:
        return []
    return [t.strip() for t in m.group(1).replace(",", " ").split() if t.strip()]


def _parse_listing(listing: str, choices) -> list[int] | None:
    """Original indices of the options in a listing ``A) text\\nB) text\\n...`` (None when it does not match)."""
    text = listing.strip("\n")
    remaining = list(range(len(choices)))
    order = []
    for p in range(len(choices)):
        prefix = f"{_letter(p)}) "
        if not text.startswith(prefix):
            return None
        text = text[len(prefix):]
        nxt = f"\n{_letter(p + 1)}) " if p + 1 < len(choices) else None
        hit = None
        for j in sorted(remaining, key=lambda j: -len(str(choices[j]))):
            c = str(choices[j])
            if text.startswith(c) and (text[len(c):].startswith(nxt) if nxt else not text[len(c):].strip()):
                hit = j
                break
        if hit is None:
            return None
        order.append(hit)
        remaining.remove(hit)
        text = text[len(str(choices[hit])) + 1:]
    return order


def _input_text(s) -> str:
    inp = s.input
    if isinstance(inp, str):
        return inp
    for m in reversed(inp or []):
        if getattr(m, "role", None) == "user":
            return str(m.text)
    return ""
