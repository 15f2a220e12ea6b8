"""Compact HTML display of result objects in notebooks (Jupyter calls ``_repr_html_``).

Only display: numbers are rounded here and nowhere else in the result objects; every text cell is HTML-escaped
(tool names come from untrusted logs and catalogs).
"""

from __future__ import annotations

import html

import numpy as np
import pandas as pd

__all__ = ["ReprHTMLMixin", "frame_html"]

#: Rows shown before the display says how many more there are.
MAX_ROWS = 12


def frame_html(frame: pd.DataFrame, *, title: str, note: str | None = None, max_rows: int = MAX_ROWS,
               digits: int = 3) -> str:
    """A small escaped HTML table of ``frame`` (floats rounded to ``digits``), headed by ``title``."""
    shown = frame.head(max_rows).copy()
    for c in shown.columns:
        if pd.api.types.is_float_dtype(shown[c]):
            shown[c] = [("" if not np.isfinite(v) else f"{v:.{digits}f}") for v in shown[c].to_numpy(float)]
    table = shown.to_html(index=False, escape=True, border=0, na_rep="")
    more = (f"<p><em>{len(frame) - max_rows} more row(s); <code>.to_frame()</code> has all {len(frame)}.</em></p>"
            if len(frame) > max_rows else "")
    extra = f"<p>{html.escape(note)}</p>" if note else ""
    return (f'<div class="toolbias-result"><p><strong>{html.escape(title)}</strong></p>{table}{more}{extra}'
            "</div>")


class ReprHTMLMixin:
    """``_repr_html_`` for frozen result dataclasses: the headline table (``_headline``, else ``to_frame``)."""

    def _headline(self):
        return type(self).__name__, self.to_frame(), None

    def _repr_html_(self) -> str:
        title, frame, note = self._headline()
        return frame_html(frame, title=title, note=note)
