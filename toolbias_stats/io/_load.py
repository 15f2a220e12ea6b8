"""One dispatcher from anything we accept to a SelectionLog."""

from __future__ import annotations

from pathlib import Path

from ._selection_log import SelectionLog

__all__ = ["load_selection_log"]

_ACCEPTED = "a SelectionLog, a Study, or a path to a study manifest (.toml)"


def load_selection_log(obj) -> SelectionLog:
    """Return a SelectionLog for ``obj``.

    Parameters
    ----------
    obj : SelectionLog, Study or path-like
        A SelectionLog passes through unchanged; a :class:`Study` gives its ``log``; a path to a
        ``.toml`` manifest is read with :func:`read_study`. (Single table files need a catalog:
        use :func:`read_table`.)

    Raises
    ------
    TypeError
        For any other input; the message lists the accepted inputs.

    Examples
    --------
    >>> from toolbias_stats.simulate import simulate_selection_log
    >>> log = simulate_selection_log(n_clusters=2, n_queries=5, rng=0).log
    >>> load_selection_log(log) is log
    True
    """
    from ._manifest import Study, read_study

    if isinstance(obj, SelectionLog):
        return obj
    if isinstance(obj, Study):
        return obj.log
    if isinstance(obj, (str, Path)) and Path(obj).suffix.lower() == ".toml":
        return read_study(obj).log
    raise TypeError(f"cannot load a selection log from {type(obj).__name__}; expected {_ACCEPTED}.")
