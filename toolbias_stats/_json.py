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

import json
import math
from collections.abc import Callable
from json.encoder import encode_basestring_ascii
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["finite", "plain", "records", "interval_lists", "dumps_indented"]


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


# -- ``json.dumps(obj, indent=2)``, byte for byte, faster (issue 37) ------------------------------------------------
#: The standard library's C encoder (CPython); None elsewhere, where ``json.dumps`` itself writes everything.
_c_make_encoder: Any = getattr(json.encoder, "c_make_encoder", None)

_SCALARS = frozenset({str, int, float, bool, type(None)})
_KEYS = frozenset({str})
_PADS: list[str] = []
_FLAT: list = []


class _Unusual(Exception):
    """A value the fast writer leaves to the standard library (anything but plain dicts, lists, tuples, str keys
    and str / int / float / bool / None leaves)."""


def _refuse(value: Any) -> Any:
    raise _Unusual


def _grow(depth: int) -> None:
    """Make the indents (a newline and ``2 d`` spaces) and the C encoders of scalar containers (at ``d``: their item
    separator carries the newline and the indent of the items) of every depth ``d <= depth``."""
    while len(_PADS) <= depth + 1:
        _PADS.append("\n" + "  " * len(_PADS))
    while len(_FLAT) <= depth:
        _FLAT.append(_c_make_encoder(None, _refuse, encode_basestring_ascii, None, ": ", "," + _PADS[len(_FLAT) + 1],
                                     False, False, True))


def _scalar(v: Any, t: type) -> str:
    """The text of a str, int, float, bool or None as the standard library writes it (NaN and infinities too)."""
    if t is str:
        return encode_basestring_ascii(v)
    if t is float:
        return float.__repr__(v) if math.isfinite(v) else "NaN" if v != v else "Infinity" if v > 0 else "-Infinity"
    if t is int:
        return int.__repr__(v)
    return "true" if v is True else "false" if v is False else "null"


def _write(o: Any, depth: int, out: list) -> None:
    """Append the chunks of ``o`` (a dict, list or tuple) at ``depth`` to ``out``."""
    t = type(o)
    if t is dict:
        if not o:
            out.append("{}")
            return
        if not set(map(type, o)) <= _KEYS:
            raise _Unusual
        values, opening, closing = o.values(), "{", "}"
    elif t is list or t is tuple:
        if not o:
            out.append("[]")
            return
        values, opening, closing = o, "[", "]"
    else:
        raise _Unusual
    if len(_FLAT) <= depth:
        _grow(depth)
    inner = _PADS[depth + 1]
    if set(map(type, values)) <= _SCALARS:   # only scalars: one call of the C encoder
        out.append(opening + inner + "".join(_FLAT[depth](o, 0))[1:-1] + _PADS[depth] + closing)
        return
    sep = "," + inner
    out.append(opening + inner)
    first = True
    scalars, encode = _SCALARS, encode_basestring_ascii
    if t is dict:
        for k, v in o.items():
            if not first:
                out.append(sep)
            first = False
            tv = type(v)
            if tv is str:
                out.append(encode(k) + ": " + encode(v))
            elif tv is float and v - v == 0:   # finite
                out.append(encode(k) + ": " + float.__repr__(v))
            elif tv in scalars:
                out.append(encode(k) + ": " + _scalar(v, tv))
            else:
                out.append(encode(k) + ": ")
                _write(v, depth + 1, out)
    else:
        for v in o:
            if not first:
                out.append(sep)
            first = False
            tv = type(v)
            if tv in scalars:
                out.append(_scalar(v, tv))
            else:
                _write(v, depth + 1, out)
    out.append(_PADS[depth] + closing)


def dumps_indented(obj: Any) -> str:
    """``json.dumps(obj, indent=2)``, the same text, a few times faster on large results.

    The standard library writes indented JSON in pure Python, one generator step per token (issue 37: 1.3 s of
    CPU for the 58 MB output of 2,000 clusters). Here every list or mapping whose items are all scalars is written by
    the standard library's C encoder in one call (its item separator carries the newline and the indent), the others
    item by item. Anything else (other types, keys that are not strings, subclasses, cycles, errors) is written by
    ``json.dumps(obj, indent=2)`` itself, which also raises its own errors.

    Parameters
    ----------
    obj : object
        A JSON-ready value.

    Returns
    -------
    str
        Exactly ``json.dumps(obj, indent=2)``.

    Examples
    --------
    >>> obj = {"a": [1, 2.5, float("nan")], "b": {"c": None, "d": []}, "é": "x"}
    >>> dumps_indented(obj) == json.dumps(obj, indent=2)
    True
    >>> print(dumps_indented({"a": [1, {}], "b": True}))
    {
      "a": [
        1,
        {}
      ],
      "b": true
    }
    """
    t = type(obj)
    if _c_make_encoder is None or not (t is dict or t is list or t is tuple):
        return json.dumps(obj, indent=2)
    out: list = []
    try:
        _write(obj, 0, out)
    except Exception:   # anything unusual: the standard library decides (and raises its own errors)
        return json.dumps(obj, indent=2)
    return "".join(out)
