"""Compact display of result objects: HTML in notebooks (``_repr_html_``), text for ``print``/``str``.

Only display: numbers are rounded here and nowhere else in the result objects; every text cell is HTML-escaped
(tool names come from untrusted logs and catalogs), and control characters are escaped in text.

``str(result)`` is the text the command line prints for that result (the same formatter of :mod:`toolbias_stats._text`,
see :data:`TEXT`); results without a command of their own print their headline table. ``repr(result)`` is that text
in short (at most :data:`MAX_REPR_CHARS` characters). p-values print as :func:`toolbias_stats._format.fmt_p` does
(``< 0.001``, never ``0.000``).
"""

from __future__ import annotations

import html
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd

from ._text import (
    format_agreement_text,
    format_baselines_text,
    format_bayes_text,
    format_bias_table,
    format_choice_accuracy_text,
    format_choice_judge_text,
    format_choice_model_text,
    format_choice_position_text,
    format_explain_text,
    format_probe_result_text,
    format_retrieval_text,
    format_shadow_text,
    format_shift_text,
    format_study_plan_text,
    format_subsets_text,
)

__all__ = ["ReprHTMLMixin", "TextReprMixin", "frame_html", "frame_text", "is_p_column", "short_repr"]

#: Rows shown before the display says how many more there are.
MAX_ROWS = 12


#: Text formatters of result classes that have a command of their own: class name -> function of :mod:`._text` (it
#: takes the result and returns the text the command prints, or None to print the headline table). The classes live
#: in higher layers, so they are named here; the functions are imported normally.
TEXT: dict[str, Callable[[Any], str | None]] = {
    "BiasResult": format_bias_table,
    "OptionPositionBias": format_choice_position_text,
    "GoldPositionAccuracy": format_choice_accuracy_text,
    "JudgeConsistency": format_choice_judge_text,
    "ShiftResult": format_shift_text,
    "SubsetMetricsResult": format_subsets_text,
    "ShadowResult": format_shadow_text,
    "RetrievalResult": format_retrieval_text,
    "AgreementResult": format_agreement_text,
    "BaselineResult": format_baselines_text,
    "ProbeResult": format_probe_result_text,
    "BayesResult": format_bayes_text,
    "ExplainResult": format_explain_text,
    "StudyPlan": format_study_plan_text,
    "ChoiceModelResult": format_choice_model_text,
}

#: ``repr(result)`` shows at most this many characters: the class name and the first lines of ``str(result)``.
MAX_REPR_CHARS = 2000
#: ... at most this many of its lines, each cut to this width.
MAX_REPR_LINES = 12
MAX_REPR_WIDTH = 150

_P_COLUMNS = {"p", "pvalue", "p_value", "spearman_p", "ppc_p"}


def is_p_column(name) -> bool:
    """A column holding p-values (``p_value``, ``p_holm``, ``p_bh``, ``p_adjusted``, ``spearman_p``, ...)."""
    name = str(name).lower()
    return name in _P_COLUMNS or name.startswith(("p_value", "p_holm", "p_bh", "p_adj", "p_cluster", "p_mcnemar",
                                                  "p_first")) or name.endswith("_p")


def _shown(frame: pd.DataFrame, max_rows: int, digits: int) -> pd.DataFrame:
    """The first rows, floats rounded to ``digits`` and p-values formatted as everywhere else."""
    from ._format import fmt_p

    shown = frame.head(max_rows).copy()
    for c in shown.columns:
        if pd.api.types.is_float_dtype(shown[c]):
            vals = shown[c].to_numpy(float)
            if is_p_column(c):
                shown[c] = [("" if not np.isfinite(v) else fmt_p(v, prefix=False)) for v in vals]
            else:
                shown[c] = [("" if not np.isfinite(v) else f"{v:.{digits}f}") for v in vals]
    return shown


def frame_text(frame: pd.DataFrame, *, title: str, note: str | None = None, max_rows: int = 30,
               digits: int = 3) -> str:
    """A plain-text table of ``frame`` (floats rounded, p-values as ``< 0.001``), headed by ``title``.

    Examples
    --------
    >>> print(frame_text(pd.DataFrame({"tool": ["a"], "p_value": [1e-9]}), title="T"))
    T
    tool p_value
       a < 0.001
    """
    shown = _shown(frame, max_rows, digits)
    lines = [title, shown.to_string(index=False) if len(shown.columns) else "(no columns)"]
    if len(frame) > max_rows:
        lines.append(f"... {len(frame) - max_rows} more row(s); .to_frame() has all {len(frame)}.")
    if note:
        lines.append(note)
    return "\n".join(lines)


def frame_html(frame: pd.DataFrame, *, title: str, note: str | None = None, max_rows: int = MAX_ROWS,
               digits: int = 3) -> str:
    """A small escaped HTML table of ``frame`` (floats rounded to ``digits``), headed by ``title``."""
    shown = _shown(frame, max_rows, digits)
    table = shown.to_html(index=False, escape=True, border=0, na_rep="")
    more = (f"<p><em>{len(frame) - max_rows} more row(s); <code>.to_frame()</code> has all {len(frame)}.</em></p>"
            if len(frame) > max_rows else "")
    extra = f"<p>{html.escape(note)}</p>" if note else ""
    return (f'<div class="toolbias-result"><p><strong>{html.escape(title)}</strong></p>{table}{more}{extra}'
            "</div>")


class TextReprMixin:
    """``str(result)`` / ``print(result)``: the command line's text for the result, else its headline table;
    ``repr(result)``: the same text in short (:func:`short_repr`, at most :data:`MAX_REPR_CHARS` characters).

    The bounded ``repr`` is given to every subclass, dataclasses included: :meth:`__init_subclass__` puts it in the
    subclass's namespace before ``@dataclass`` runs, and ``@dataclass`` does not replace a ``__repr__`` that the
    class already has. A subclass that defines its own ``__repr__`` keeps it. The fields are in
    ``dataclasses.asdict(result)`` / ``to_dict()``; a plain dataclass ``repr`` of a result printed every cluster's
    bootstrap table (250,137 characters for ``selection_bias`` of the bundled study).
    """

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "__repr__" not in cls.__dict__:
            cls.__repr__ = TextReprMixin.__repr__   # type: ignore[method-assign]

    def _text(self) -> str:
        formatter = TEXT.get(type(self).__name__)
        if formatter is not None:
            text = formatter(self)
            if text is not None:   # None: no command text for this instance, the headline table below
                return text
        if hasattr(self, "_headline"):
            title, frame, note = self._headline()
        else:
            title, frame, note = type(self).__name__, self.to_frame(), None  # type: ignore[attr-defined]
        return frame_text(frame, title=title, note=note)

    def __str__(self) -> str:
        from ._output import term_safe

        return term_safe(self._text())

    def __repr__(self) -> str:
        try:
            text = str(self)
        except Exception as exc:   # a repr must not raise (debuggers, logging, pytest call it on anything)
            return f"<{type(self).__name__} (str() failed: {type(exc).__name__})>"
        return short_repr(type(self).__name__, text)


def short_repr(name: str, text: str, *, max_chars: int = MAX_REPR_CHARS, max_lines: int = MAX_REPR_LINES,
               width: int = MAX_REPR_WIDTH) -> str:
    """``<name>`` and the first lines of ``text``, each cut to ``width`` characters, in at most ``max_chars``;
    a last line says how many lines are left out.

    Examples
    --------
    >>> print(short_repr("BiasResult", "head\\n" + "\\n".join(f"row {i}" for i in range(30)), max_lines=3))
    <BiasResult>
    head
    row 0
    row 1
    ... 28 more lines; str(result) has all 31
    >>> len(short_repr("X", "y" * 10_000)) <= MAX_REPR_CHARS
    True
    """
    lines = text.rstrip("\n").splitlines() or [""]
    head = f"<{name}>"
    shown: list[str] = []
    budget = max_chars - len(head) - 60   # room for the last line
    for line in lines[:max_lines]:
        line = line if len(line) <= width else line[:width - 3] + "..."
        if len(line) + 1 > budget:
            break
        shown.append(line)
        budget -= len(line) + 1
    out = "\n".join([head, *shown])
    left = len(lines) - len(shown)
    if left:
        out += f"\n... {left} more line{'s' if left > 1 else ''}; str(result) has all {len(lines)}"
    return out


class ReprHTMLMixin(TextReprMixin):
    """``_repr_html_`` for frozen result dataclasses: the headline table (``_headline``, else ``to_frame``)."""

    def _headline(self):
        return type(self).__name__, self.to_frame(), None

    def _repr_html_(self) -> str:
        title, frame, note = self._headline()
        return frame_html(frame, title=title, note=note)
