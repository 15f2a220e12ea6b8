"""Strict-JSON records for the design results (NaN -> None, numpy scalars -> Python).

A leaf module: imported by :mod:`._components` and :mod:`._plan`, it imports neither.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

__all__ = ["records"]


def records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """JSON-ready records of ``frame`` (NaN and infinities -> None, numpy scalars -> Python scalars).

    Parameters
    ----------
    frame : pandas.DataFrame
        Any table.

    Returns
    -------
    list of dict
        One mapping per row, column name to a value that :func:`json.dumps` writes as strict JSON.

    Examples
    --------
    >>> import numpy as np, pandas as pd
    >>> records(pd.DataFrame({"n": [1, 2], "x": [0.5, np.nan], "ok": [True, False]}))
    [{'n': 1, 'x': 0.5, 'ok': True}, {'n': 2, 'x': None, 'ok': False}]
    """
    out = []
    for rec in frame.to_dict(orient="records"):
        row = {}
        for k, v in rec.items():
            if isinstance(v, (np.integer,)):
                v = int(v)
            elif isinstance(v, (float, np.floating)):
                v = None if not np.isfinite(v) else float(v)
            elif isinstance(v, np.bool_):
                v = bool(v)
            row[k] = v
        out.append(row)
    return out
