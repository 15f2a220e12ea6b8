"""Shared argument checks (one place, messages that name the parameter and state the rule)."""

from __future__ import annotations

import functools
import numbers
import warnings
from typing import Any

import numpy as np

__all__ = ["check_confidence_level", "check_rng", "check_choice", "check_n_resamples", "check_by",
           "renamed_parameter"]


def check_confidence_level(confidence_level) -> float:
    """Return ``confidence_level`` as float, checking 0 < level < 1."""
    if isinstance(confidence_level, bool) or not isinstance(confidence_level, numbers.Real):
        raise ValueError(f"`confidence_level` must be a number in (0, 1); got {confidence_level!r} instead.")
    if not 0 < float(confidence_level) < 1:
        raise ValueError(f"`confidence_level` must be in (0, 1); got {confidence_level!r} instead.")
    return float(confidence_level)


def check_rng(rng) -> np.random.Generator:
    """Normalise ``rng`` (None, int or Generator) into a :class:`numpy.random.Generator`."""
    if rng is None or (isinstance(rng, (numbers.Integral, np.random.SeedSequence)) and not isinstance(rng, bool)):
        return np.random.default_rng(rng if rng is None or isinstance(rng, np.random.SeedSequence) else int(rng))
    if isinstance(rng, np.random.Generator):
        return rng
    raise ValueError(f"`rng` must be None, an int or a numpy.random.Generator; got {type(rng).__name__} instead.")


def check_n_resamples(n_resamples) -> int:
    """Check ``n_resamples`` is a non-negative int (0 disables resampling)."""
    if isinstance(n_resamples, bool) or not isinstance(n_resamples, numbers.Integral) or n_resamples < 0:
        raise ValueError(f"`n_resamples` must be a non-negative integer; got {n_resamples!r} instead.")
    return int(n_resamples)


def check_choice(name: str, value, options) -> str:
    """Check that ``value`` is one of ``options`` (strings); the error lists the valid options."""
    if value not in options:
        opts = ", ".join(repr(o) for o in options)
        raise ValueError(f"`{name}` must be one of {opts}; got {value!r} instead.")
    return value


def check_by(by, columns) -> list[str]:
    """Normalise a grouping spec (None, str, comma-separated str or list) and check the columns exist."""
    if by is None:
        return []
    if isinstance(by, str):
        by = [b.strip() for b in by.split(",") if b.strip()]
    by = list(by)
    missing = [b for b in by if b not in columns]
    if missing:
        raise ValueError(
            f"`by` names column(s) {missing} that the selection log does not have; "
            f"available: {sorted(columns)}."
        )
    return by


class renamed_attribute:
    """A renamed attribute of a result class that keeps working for one release, with a :class:`DeprecationWarning`.

    Examples
    --------
    >>> import warnings
    >>> class R:
    ...     standard_errors = 1.5
    ...     summary = renamed_attribute("summary", "standard_errors", since="0.9")
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     R().summary
    1.5
    >>> str(caught[0].message)[:52]
    '`summary` was renamed `standard_errors` in 0.9; `sum'
    """

    def __init__(self, old: str, new: str, *, since: str, removal: str = "the next minor release") -> None:
        self.old, self.new, self.since, self.removal = old, new, since, removal

    def __get__(self, obj: object, owner: type | None = None) -> Any:
        if obj is None:
            return self
        warnings.warn(f"`{self.old}` was renamed `{self.new}` in {self.since}; `{self.old}` will be removed in "
                      f"{self.removal}.", DeprecationWarning, stacklevel=2)
        return getattr(obj, self.new)


def renamed_parameter(old: str, new: str, *, since: str, removal: str = "the next minor release"):
    """Keep a renamed keyword argument working for one release, with a :class:`DeprecationWarning`.

    The decorated function has only the new name in its signature; a call with the old name is
    forwarded to the new one after a warning; a call with both is a :class:`TypeError`.

    Examples
    --------
    >>> import warnings
    >>> @renamed_parameter("hdi_prob", "confidence_level", since="0.9")
    ... def f(*, confidence_level=0.94):
    ...     return confidence_level
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     f(hdi_prob=0.9)
    0.9
    >>> caught[0].category.__name__, str(caught[0].message)[:48]
    ('DeprecationWarning', '`hdi_prob` was renamed `confidence_level` in 0.9')
    """
    def decorate(func):
        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            if old in kwargs:
                if new in kwargs:
                    raise TypeError(f"{func.__name__}() got both `{old}` (deprecated) and `{new}`; pass only `{new}`.")
                warnings.warn(f"`{old}` was renamed `{new}` in {since}; `{old}` will be removed in {removal}.",
                              DeprecationWarning, stacklevel=2)
                kwargs[new] = kwargs.pop(old)
            return func(*args, **kwargs)

        wrapper.__deprecated_parameters__ = {**getattr(func, "__deprecated_parameters__", {}), old: new}
        return wrapper

    return decorate
