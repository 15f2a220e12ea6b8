"""Display formatting of numbers, intervals and p-values: the only place where results are rounded.

Every function returns plain text (no HTML); the HTML renderer escapes it like any other string.
Missing values (None, NaN, an interval that was not computed) are shown as :data:`MISSING`.

Examples
--------
>>> fmt_estimate_ci(0.36965, (0.35637, 0.37798))
'0.370 [0.356, 0.378]'
>>> fmt_p(0.0004999)
'p < 0.001'
>>> fmt_p(0.0196, prefix=False)
'0.020'
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable, Sequence
from typing import SupportsFloat, cast

__all__ = ["MISSING", "fmt_num", "fmt_int", "fmt_ci", "fmt_estimate_ci", "fmt_mean_sd", "fmt_p", "fmt_level",
           "fmt_range"]

#: Shown for a value that is missing or was not computed.
MISSING = "\u2014"

#: Default number of decimals for TV distances and rates (TV lies in [0, 1]; three decimals = 0.1 point).
DIGITS = 3

#: A value that may be shown as a number: anything ``float()`` accepts, or None for missing.
Number = SupportsFloat | None


def _finite(x: object) -> bool:
    if x is None or isinstance(x, bool):
        return False
    try:
        return math.isfinite(float(cast(SupportsFloat, x)))
    except (TypeError, ValueError):
        return False


def fmt_num(x: Number, digits: int = DIGITS) -> str:
    """A number with a fixed number of decimals.

    Parameters
    ----------
    x : float or None
    digits : int, default 3

    Returns
    -------
    str
        ``"0.370"``; :data:`MISSING` for None or a non-finite value. Negative zero prints as ``0.000``.

    Examples
    --------
    >>> fmt_num(0.36965)
    '0.370'
    >>> fmt_num(float("nan"))
    '\u2014'
    """
    if not _finite(x):
        return MISSING
    out = f"{float(cast(SupportsFloat, x)):.{digits}f}"
    return out[1:] if out.startswith("-") and float(out) == 0 else out


def fmt_int(n: Number) -> str:
    """A count with thousands separators: ``14997 -> "14,997"``; :data:`MISSING` when missing.

    Parameters
    ----------
    n : int, float or None
        The count; a float is rounded to the nearest integer.

    Returns
    -------
    str
        ``"14,997"``; :data:`MISSING` for None or a non-finite value.

    Examples
    --------
    >>> fmt_int(14997)
    '14,997'
    """
    if not _finite(n):
        return MISSING
    return f"{round(float(cast(SupportsFloat, n))):,}"


def fmt_ci(ci: Sequence[Number] | None, digits: int = DIGITS) -> str:
    """A confidence interval as ``"[low, high]"``.

    Parameters
    ----------
    ci : ConfidenceInterval or (low, high) or None
    digits : int, default 3

    Returns
    -------
    str
        :data:`MISSING` when the interval is missing or either bound is not finite.

    Examples
    --------
    >>> fmt_ci((0.35637, 0.37798))
    '[0.356, 0.378]'
    """
    if ci is None:
        return MISSING
    low, high = ci
    if not (_finite(low) and _finite(high)):
        return MISSING
    return f"[{fmt_num(low, digits)}, {fmt_num(high, digits)}]"


def fmt_estimate_ci(estimate: Number, ci: Sequence[Number] | None, digits: int = DIGITS) -> str:
    """An estimate followed by its interval: ``"0.370 [0.356, 0.378]"``.

    Parameters
    ----------
    estimate : float or None
    ci : ConfidenceInterval or (low, high) or None
    digits : int, default 3

    Returns
    -------
    str
        ``"estimate [low, high]"``; only the estimate when the interval is missing; :data:`MISSING` when
        the estimate is missing.

    Examples
    --------
    >>> fmt_estimate_ci(0.344, (float("nan"), float("nan")))
    '0.344'
    """
    est = fmt_num(estimate, digits)
    if est == MISSING:
        return MISSING
    interval = fmt_ci(ci, digits)
    return est if interval == MISSING else f"{est} {interval}"


def fmt_mean_sd(mean: Number, sd: Number, digits: int = DIGITS) -> str:
    """``"mean ± sd"`` (the paper's Table 1 style); only the mean when ``sd`` is missing.

    Parameters
    ----------
    mean : float or None
    sd : float or None
    digits : int, default 3

    Returns
    -------
    str
        ``"0.370 ± 0.005"``; :data:`MISSING` when the mean is missing.

    Examples
    --------
    >>> fmt_mean_sd(0.3696, 0.0052)
    '0.370 \u00b1 0.005'
    """
    m = fmt_num(mean, digits)
    if m == MISSING:
        return MISSING
    s = fmt_num(sd, digits)
    return m if s == MISSING else f"{m} \u00b1 {s}"


def fmt_p(p: Number, *, prefix: bool = True, threshold: float = 0.001) -> str:
    """A p-value: three decimals, or ``< 0.001`` below the threshold.

    Parameters
    ----------
    p : float or None
    prefix : bool, default True
        Prepend ``"p "`` (``"p = 0.020"``, ``"p < 0.001"``); without it ``"0.020"``, ``"< 0.001"``.
    threshold : float, default 0.001
        Values below are shown as ``< threshold``.

    Returns
    -------
    str
        :data:`MISSING` when ``p`` is missing.

    Examples
    --------
    >>> fmt_p(0.0123)
    'p = 0.012'
    >>> fmt_p(0.0005, prefix=False)
    '< 0.001'
    """
    if not _finite(p):
        return MISSING
    value = float(cast(SupportsFloat, p))
    if value < threshold:
        body = f"< {threshold:g}"
        return f"p {body}" if prefix else body
    body = f"{value:.3f}"
    return f"p = {body}" if prefix else body


def fmt_level(level: Number) -> str:
    """A confidence level as a percentage: ``0.95 -> "95%"``, ``0.975 -> "97.5%"``.

    Parameters
    ----------
    level : float or None
        A level in (0, 1).

    Returns
    -------
    str
        The percentage without trailing zeros; :data:`MISSING` when missing.

    Examples
    --------
    >>> fmt_level(0.95)
    '95%'
    """
    if not _finite(level):
        return MISSING
    return f"{100 * float(cast(SupportsFloat, level)):.10g}%"


def fmt_range(values: Iterable[object], digits: int = DIGITS) -> str:
    """The range of some numbers: ``"0.036"`` when they agree at display precision, else ``"0.036\u20130.044"``.

    Parameters
    ----------
    values : iterable of numbers
        Non-numbers and non-finite values are ignored.
    digits : int, default 3

    Returns
    -------
    str
        One number, or ``"low\u2013high"``; :data:`MISSING` when no finite number is left.

    Examples
    --------
    >>> fmt_range([0.0357, 0.0441, 0.0360])
    '0.036\u20130.044'
    """
    vals = [float(cast(SupportsFloat, v)) for v in values if isinstance(v, numbers.Number) and _finite(v)]
    if not vals:
        return MISSING
    lo, hi = fmt_num(min(vals), digits), fmt_num(max(vals), digits)
    return lo if lo == hi else f"{lo}\u2013{hi}"
