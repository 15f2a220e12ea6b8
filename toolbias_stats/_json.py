"""Strict JSON for every ``to_dict()`` of the package: one place that turns numpy / pandas values into plain
Python values and non-finite numbers into ``None`` (``json.dumps(..., allow_nan=False)`` then never fails).

Examples
--------
>>> import numpy as np, pandas as pd
>>> finite(np.float32(0.5)), finite(float("nan")), finite("n/a")
(0.5, None, None)
>>> plain({"n": np.int64(3), "x": [np.inf, 1.5], "ok": np.bool_(True), "missing": pd.NA})
{'n': 3, 'x': [None, 1.5], 'ok': True, 'missing': None}
>>> records(pd.DataFrame({"tool": ["a", "b"], "rate": [0.25, np.nan]}))
[{'tool': 'a', 'rate': 0.25}, {'tool': 'b', 'rate': None}]
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["finite", "plain", "records", "interval_lists"]


def finite(value: Any) -> float | None:
    """``value`` as a Python float, or ``None`` when it is missing, not a number, NaN or infinite.

    Parameters
    ----------
    value : object
        A number (Python, numpy), ``None`` or anything else.

    Returns
    -------
    float or None

    Examples
    --------
    >>> finite(3), finite(None), finite(float("-inf"))
    (3.0, None, None)
    """
    try:
        x = float(value)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


def plain(value: Any, *, fallback: Callable[[Any], Any] | None = None) -> Any:
    """``value`` with numpy scalars as Python scalars, non-finite floats and missing values as ``None``, mappings
    (keys as strings), lists and tuples converted recursively.

    Parameters
    ----------
    value : object
        Anything a result records.
    fallback : callable, optional
        Applied to a value that is none of the JSON types (e.g. ``str``); by default such a value is returned as is.

    Returns
    -------
    object
        A value :func:`json.dumps` writes as strict JSON when its leaves are JSON types.

    Examples
    --------
    >>> plain((np.float64(2.0), float("nan")))
    [2.0, None]
    >>> plain({1: object()}, fallback=lambda v: "object")
    {'1': 'object'}
    """
    if isinstance(value, dict):
        return {str(k): plain(v, fallback=fallback) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v, fallback=fallback) for v in value]
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return float(value) if math.isfinite(value) else None
    if value is None or isinstance(value, (int, str)):
        return value
    if _is_missing(value):
        return None
    return fallback(value) if fallback is not None else value


def _is_missing(value: Any) -> bool:
    try:
        import pandas as pd

        return value is pd.NA or value is pd.NaT
    except ImportError:   # pragma: no cover - pandas is a dependency
        return False


def records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """The rows of ``frame`` as strict-JSON mappings (:func:`plain` applied to every cell).

    Parameters
    ----------
    frame : pandas.DataFrame
        Any table.

    Returns
    -------
    list of dict
        One mapping per row, column name to value.

    Examples
    --------
    >>> import pandas as pd
    >>> records(pd.DataFrame({"n": [1, 2], "ok": [True, False]}))
    [{'n': 1, 'ok': True}, {'n': 2, 'ok': False}]
    """
    return [{str(k): plain(v) for k, v in rec.items()} for rec in frame.to_dict(orient="records")]


def interval_lists(value: Any) -> Any:
    """``value`` in the one JSON shape of every ``--json`` output (issue 36): each pair of interval bounds becomes
    one ``[low, high]`` list, recursively.

    ``ci_low`` / ``ci_high`` become ``ci``, ``<x>_ci_low`` / ``<x>_ci_high`` become ``<x>_ci`` and another
    ``<x>_low`` / ``<x>_high`` pair (``wilson_low``) becomes ``<x>_ci`` (``<x>`` when it already names an
    interval: ``ci_percentile_low`` -> ``ci_percentile``). The key takes the place of the lower bound; a lone
    ``_low`` or ``_high`` key stays as it is.

    Parameters
    ----------
    value : object
        A JSON-ready value (mappings, lists, scalars).

    Returns
    -------
    object

    Examples
    --------
    >>> interval_lists({"rate": 0.5, "ci_low": 0.2, "ci_high": 0.8, "rows": [{"se_ci_low": 1, "se_ci_high": 2}]})
    {'rate': 0.5, 'ci': [0.2, 0.8], 'rows': [{'se_ci': [1, 2]}]}
    >>> interval_lists({"wilson_low": 0.1, "wilson_high": 0.3, "low": 1})
    {'wilson_ci': [0.1, 0.3], 'low': 1}
    """
    if isinstance(value, list):
        return [interval_lists(v) for v in value]
    if not isinstance(value, dict):
        return value
    out: dict = {}
    for k, v in value.items():
        if isinstance(k, str) and k.endswith("_high") and k[:-5] + "_low" in value:
            continue
        if isinstance(k, str) and k.endswith("_low") and k[:-4] + "_high" in value:
            stem = k[:-4]
            named = stem == "ci" or stem.endswith("_ci") or stem.startswith("ci_")
            out[stem if named else stem + "_ci"] = [v, value[stem + "_high"]]
        else:
            out[k] = interval_lists(v)
    return out
