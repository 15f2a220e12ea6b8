"""Tool age in days relative to a reference date."""

from __future__ import annotations

import datetime as _dt
from collections.abc import Iterable
from typing import Any

import numpy as np
import pandas as pd

__all__ = ["age_days", "check_reference_date"]


def check_reference_date(reference_date: _dt.date | str | None) -> _dt.date:
    """Normalise a reference date (``datetime.date``, ``datetime``, ``pandas.Timestamp`` or ISO string).

    ``None`` means today (local date). A bad value raises ``ValueError`` naming the parameter.

    Parameters
    ----------
    reference_date : datetime.date, datetime.datetime, pandas.Timestamp, str or None
        The date (a datetime gives its date; a string is ``YYYY-MM-DD``).

    Returns
    -------
    datetime.date

    Examples
    --------
    >>> check_reference_date("2025-09-01")
    datetime.date(2025, 9, 1)
    >>> check_reference_date("1 Sept 2025")
    Traceback (most recent call last):
    ...
    ValueError: `reference_date` must be a date (YYYY-MM-DD); got '1 Sept 2025' instead.
    """
    if reference_date is None:
        return _dt.date.today()
    if isinstance(reference_date, pd.Timestamp):
        if pd.isna(reference_date):
            raise ValueError("`reference_date` must be a date; got NaT instead.")
        return reference_date.date()
    if isinstance(reference_date, _dt.datetime):
        return reference_date.date()
    if isinstance(reference_date, _dt.date):
        return reference_date
    if isinstance(reference_date, str):
        try:
            return _dt.date.fromisoformat(reference_date.strip())
        except ValueError:
            pass
    raise ValueError(f"`reference_date` must be a date (YYYY-MM-DD); got {reference_date!r} instead.")


def age_days(created: Iterable[Any], *, reference_date: _dt.date | str | None) -> np.ndarray:
    """Days from each creation date to ``reference_date``.

    Parameters
    ----------
    created : array-like of dates
        Creation dates (anything :func:`pandas.to_datetime` reads); missing values stay missing.
    reference_date : date or str
        The date at which ages are measured (see :func:`check_reference_date`).

    Returns
    -------
    numpy.ndarray of float
        ``reference_date - created`` in whole days (time of day is ignored); NaN where the date
        is missing. A date after ``reference_date`` gives a negative age (not clipped).

    Notes
    -----
    Ages enter the models after cluster-mean centring, which removes the reference date:
    ``(R - c_i) - mean_j (R - c_j) = mean_j c_j - c_i``. Any reference date therefore gives the
    same centred ages; it only matters for uncentred output.

    Examples
    --------
    >>> age_days(["2025-08-31", None, "2024-09-01"], reference_date="2025-09-01").tolist()
    [1.0, nan, 365.0]
    """
    ref = pd.Timestamp(check_reference_date(reference_date))
    dates = pd.to_datetime(pd.Series(list(created), dtype=object), errors="raise").dt.normalize()
    days = (ref - dates).dt.days
    return days.to_numpy(dtype=float, na_value=np.nan)
