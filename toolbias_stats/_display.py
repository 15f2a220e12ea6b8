"""Compact display of result objects: HTML in notebooks (``_repr_html_``), text for ``print``/``str``.

Only display: numbers are rounded here and nowhere else in the result objects; every text cell is HTML-escaped
(tool names come from untrusted logs and catalogs), and control characters are escaped in text.

``str(result)`` is the text the command line prints for that result (the same formatter, see :data:`TEXT`);
results without a command of their own print their headline table. p-values print as
:func:`~toolbias_stats.report.fmt_p` does (``< 0.001``, never ``0.000``).
"""

from __future__ import annotations

import html

import numpy as np
import pandas as pd

__all__ = ["ReprHTMLMixin", "TextReprMixin", "frame_html", "frame_text", "is_p_column"]

#: Rows shown before the display says how many more there are.
MAX_ROWS = 12


#: Text formatters of result classes that have a command of their own: class name -> "module:function" (the
#: function takes the result and returns the text the command prints, or None to print the headline table).
TEXT = {
    "BiasResult": "toolbias_stats.report._text:format_bias_table",
    "OptionPositionBias": "toolbias_stats.report._text:format_choice_position_text",
    "GoldPositionAccuracy": "toolbias_stats.report._text:format_choice_accuracy_text",
    "JudgeConsistency": "toolbias_stats.report._text:format_choice_judge_text",
    "ShiftResult": "toolbias_stats.report._experiments_html:format_shift_text",
    "SubsetMetricsResult": "toolbias_stats.report._experiments_html:format_subsets_text",
    "ShadowResult": "toolbias_stats.report._shadow_html:format_shadow_text",
    "RetrievalResult": "toolbias_stats.report._toolsense_html:format_retrieval_text",
    "AgreementResult": "toolbias_stats.report._toolsense_html:format_agreement_text",
    "BaselineResult": "toolbias_stats.report._toolsense_html:format_baselines_text",
    "ProbeResult": "toolbias_stats.report._text:format_probe_result_text",
    "BayesResult": "toolbias_stats.report._bayes_html:format_bayes_text",
    "ExplainResult": "toolbias_stats.report._text:format_explain_text",
    "StudyPlan": "toolbias_stats.report._text:format_study_plan_text",
}

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
    """``str(result)`` / ``print(result)``: the command line's text for the result, else its headline table.

    The (dataclass) ``repr`` is left alone: it shows every field, which is what a debugger wants.
    """

    def _text(self) -> str:
        spec = TEXT.get(type(self).__name__)
        if spec is not None:
            import importlib

            module, func = spec.split(":")
            text = getattr(importlib.import_module(module), func)(self)
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


class ReprHTMLMixin(TextReprMixin):
    """``_repr_html_`` for frozen result dataclasses: the headline table (``_headline``, else ``to_frame``)."""

    def _headline(self):
        return type(self).__name__, self.to_frame(), None

    def _repr_html_(self) -> str:
        title, frame, note = self._headline()
        return frame_html(frame, title=title, note=note)
