"""Exceptions and warning classes of toolbias_stats.

Errors about user input are :class:`ValueError` subclasses that name the file, the row and
the field; warnings are emitted with ``stacklevel=2`` so that they point at the caller.
"""

from __future__ import annotations

from collections.abc import Iterable

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

    Examples
    --------
    >>> err = SelectionLogError(["log.csv:3:status: 'okay' is not a status", "log.csv:7:run: 'x' is not an integer"])
    >>> print(err)
    2 problems in the input:
    log.csv:3:status: 'okay' is not a status
    log.csv:7:run: 'x' is not an integer
    >>> err.n_problems, isinstance(err, ValueError)
    (2, True)
    >>> SelectionLogError(["log.csv:3:status: bad"], total=1500).n_problems
    1500
    """

    def __init__(self, problems: Iterable[str] | str, total: int | None = None) -> None:
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
    """Invalid study manifest (TOML): syntax, wrong key types, missing files.

    Examples
    --------
    >>> err = ManifestError("study.toml:files: no file matches 'runs/*.jsonl'")
    >>> print(err)
    study.toml:files: no file matches 'runs/*.jsonl'
    >>> isinstance(err, SelectionLogError)
    True
    """


class DegenerateDataWarning(RuntimeWarning):
    """The data cannot support the statistic (e.g. a cluster without any valid choice); NaN is returned.

    Examples
    --------
    >>> import warnings
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     warnings.warn("cluster 'c1' has no valid choice", DegenerateDataWarning)
    >>> caught[0].category.__name__, issubclass(DegenerateDataWarning, RuntimeWarning)
    ('DegenerateDataWarning', True)
    """


class SmallSampleWarning(RuntimeWarning):
    """Too few observations for the requested method to be reliable.

    Examples
    --------
    >>> import warnings
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     warnings.warn("only 3 queries: the bootstrap interval is unreliable", SmallSampleWarning)
    >>> caught[0].category.__name__, issubclass(SmallSampleWarning, RuntimeWarning)
    ('SmallSampleWarning', True)
    """


class ExcludedRowsWarning(UserWarning):
    """Rows without a valid selection were excluded from a statistic (counts are on the result).

    Examples
    --------
    >>> import warnings
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     warnings.warn("12 rows excluded (no_call)", ExcludedRowsWarning)
    >>> caught[0].category.__name__, issubclass(ExcludedRowsWarning, UserWarning)
    ('ExcludedRowsWarning', True)
    """


class ConvergenceWarning(RuntimeWarning):
    """The sampler did not converge by the package's standard (R-hat, ESS or divergences).

    Examples
    --------
    >>> import warnings
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     warnings.warn("R-hat 1.08 above 1.01", ConvergenceWarning)
    >>> caught[0].category.__name__, issubclass(ConvergenceWarning, RuntimeWarning)
    ('ConvergenceWarning', True)
    """


class MisfitWarning(UserWarning):
    """The posterior predictive check rejects the model (p-value below 0.05).

    Examples
    --------
    >>> import warnings
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     warnings.warn("posterior predictive p = 0.012", MisfitWarning)
    >>> caught[0].category.__name__, issubclass(MisfitWarning, UserWarning)
    ('MisfitWarning', True)
    """


def problem(file: object, row: object, field: object, message: str) -> str:
    """Format one problem as ``file:row:field: message`` (row may be None).

    Parameters
    ----------
    file : str or path
    row : int or None
        Omitted from the text when None.
    field : str or None
        Omitted from the text when None.
    message : str

    Returns
    -------
    str

    Examples
    --------
    >>> problem("log.csv", 3, "status", "'okay' is not a status")
    "log.csv:3:status: 'okay' is not a status"
    >>> problem("study.toml", None, "files", "missing")
    'study.toml:files: missing'
    """
    where = f"{file}"
    if row is not None:
        where += f":{row}"
    if field is not None:
        where += f":{field}"
    return f"{where}: {message}"
