"""Exceptions and warning classes of toolbias_stats.

Errors about user input are :class:`ValueError` subclasses that name the file, the row and
the field; warnings are emitted with ``stacklevel=2`` so that they point at the caller.
"""

from __future__ import annotations

__all__ = [
    "SelectionLogError",
    "ManifestError",
    "DegenerateDataWarning",
    "SmallSampleWarning",
    "ExcludedRowsWarning",
    "ConvergenceWarning",
    "MisfitWarning",
]

#: How many problems a :class:`SelectionLogError` message lists before it summarises.
MAX_LISTED_PROBLEMS = 20


class SelectionLogError(ValueError):
    """Invalid selection log, catalog or manifest input.

    Readers check every row, collect all problems and raise one error. The message lists the
    first :data:`MAX_LISTED_PROBLEMS` problems as ``file:row:field: message``; the full list is
    kept on :attr:`problems`.

    Parameters
    ----------
    problems : list of str or str
        One entry per problem, each already formatted as ``file:row:field: message``.
    total : int, optional
        How many problems there are when ``problems`` lists only some of them (an engine that checks
        millions of rows in SQL keeps at most 1,000 per check); :attr:`n_problems` holds it.
    """

    def __init__(self, problems, total=None):
        if isinstance(problems, str):
            problems = [problems]
        self.problems = list(problems)
        self.n_problems = max(len(self.problems), int(total or 0))
        shown = self.problems[:MAX_LISTED_PROBLEMS]
        msg = "\n".join(shown)
        if self.n_problems > len(shown):
            msg += f"\n... and {self.n_problems - len(shown)} more problem(s)"
        if self.n_problems > 1:
            msg = f"{self.n_problems} problems in the input:\n{msg}"
        super().__init__(msg)


class ManifestError(SelectionLogError):
    """Invalid study manifest (TOML): syntax, wrong key types, missing files."""


class DegenerateDataWarning(RuntimeWarning):
    """The data cannot support the statistic (e.g. a cluster without any valid choice); NaN is returned."""


class SmallSampleWarning(RuntimeWarning):
    """Too few observations for the requested method to be reliable."""


class ExcludedRowsWarning(UserWarning):
    """Rows without a valid selection were excluded from a statistic (counts are on the result)."""


class ConvergenceWarning(RuntimeWarning):
    """The sampler did not converge by the package's standard (R-hat, ESS or divergences)."""


class MisfitWarning(UserWarning):
    """The posterior predictive check rejects the model (p-value below 0.05)."""


def problem(file, row, field, message) -> str:
    """Format one problem as ``file:row:field: message`` (row may be None)."""
    where = f"{file}"
    if row is not None:
        where += f":{row}"
    if field is not None:
        where += f":{field}"
    return f"{where}: {message}"
