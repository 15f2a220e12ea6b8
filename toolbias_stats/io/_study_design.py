"""DeclaredDesign: what is independent in a study (unit, replicates, factors, strata), declared once (issue 35).

Below both containers that carry it (:class:`~toolbias_stats.io.SelectionLog`,
:class:`~toolbias_stats.io.SelectionCounts`; a choice study's ``ChoiceLog`` can carry it too).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["DeclaredDesign", "REPLICATE_COLUMNS", "DESIGN_KEYS", "ERR_DESIGN_COLUMN"]

#: Design columns that are replicates unless the manifest says otherwise: repeats of one condition (runs, repeated
#: requests of the same query and list numbered by the API-log readers' ``attempt`` column). ``epoch`` is not among
#: them by default: an Inspect epoch is a replicate, a continued pre-training epoch a factor; declare it.
REPLICATE_COLUMNS = ("run", "attempt", "repeat", "replicate")
#: Keys of a declared design (the manifest's ``[design]`` table, :meth:`SelectionLog.with_design`).
DESIGN_KEYS = ("unit", "replicates", "factors", "strata")
#: Units a design may name: the rows' query id (a choice study's item id is its query id).
_UNITS = ("query_id", "query", "item")
ERR_DESIGN_COLUMN = ("`{key}` names {names}, which {verb} not a design column of this log; the design columns are "
                     "{cols}.")


@dataclass(frozen=True)
class DeclaredDesign:
    """What is independent in a study, declared once: the unit, the replicates, the factors and the strata.

    Every interval and test of the package reads it: bootstraps resample **units** within **strata**,
    sandwiches cluster on units, **replicates** (runs, epochs, repeated requests) are pooled or averaged and never
    compared, and only **factors** are compared (the report's Experiments section, ``selection_shift``).

    Parameters
    ----------
    unit : str, default "query_id"
        The column whose values are the independent units (a query; an item of a choice study).
    replicates : tuple of str, default ()
        Design columns that number repeats of one condition: ``run``, ``attempt`` (repeated requests of the
        same query and list), an Inspect ``epoch`` (declared), ...
    factors : tuple of str, default ()
        Design columns that results compare: ``model``, ``condition``, ``temperature``, any declared column.
    strata : tuple of str, default ``("cluster_id", "n_candidates")``
        Columns within which units are resampled (a cluster, the number of options K).
    source : str, default "columns"
        ``"columns"`` (derived from the column names), ``"declared"`` (set by a manifest's ``[design]`` table
        or :meth:`SelectionLog.with_design`).

    Notes
    -----
    Derived from a log's design columns (:meth:`from_columns`): the columns named in :data:`REPLICATE_COLUMNS`
    (``run``, ``attempt``, ``repeat``, ``replicate``) are replicates, every other design column is a factor
    (``epoch`` too: an Inspect epoch is a replicate, a training epoch a factor; declare which). A declaration
    moves named columns between the two; every design column is exactly one of them.
    A choice study (``ChoiceLog``) can carry the same object with ``unit="item"``.

    Examples
    --------
    >>> d = DeclaredDesign.from_columns(["model", "run", "condition", "attempt", "temperature"])
    >>> d.replicates, d.factors
    (('run', 'attempt'), ('model', 'condition', 'temperature'))
    >>> print(d.describe(n_units=40).replace("; ", chr(10)))
    unit query_id (40 units)
    replicates: run, attempt
    factors: model, condition, temperature
    strata: cluster_id, n_candidates
    >>> DeclaredDesign.from_columns(["model", "run", "seed"], declared={"replicates": ["seed"]}).factors
    ('model',)
    """

    unit: str = "query_id"
    replicates: tuple[str, ...] = ()
    factors: tuple[str, ...] = ()
    strata: tuple[str, ...] = ("cluster_id", "n_candidates")
    source: str = "columns"

    @classmethod
    def from_columns(cls, columns: Sequence[str], *, declared: Mapping[str, Any] | DeclaredDesign | None = None
                     ) -> DeclaredDesign:
        """The design of a log with these design columns, with an optional declaration applied.

        Parameters
        ----------
        columns : sequence of str
            The log's design columns (``model``, ``run``, ``condition`` and the extra columns).
        declared : mapping or DeclaredDesign, optional
            ``{"unit": ..., "replicates": [...], "factors": [...], "strata": [...]}`` (any subset).

        Raises
        ------
        ValueError
            An unknown key, a name that is not a design column, a column declared both a replicate and a factor.
        """
        cols = [str(c) for c in columns]
        reps = [c for c in cols if c in REPLICATE_COLUMNS]
        unit, source = "query_id", "columns"
        strata: tuple[str, ...] = ("cluster_id", "n_candidates")
        if declared is not None:
            decl = declared.to_dict() if isinstance(declared, DeclaredDesign) else dict(declared)
            decl.pop("source", None)
            decl.pop("n_units", None)
            _check_declared(decl, cols)
            reps = [c for c in cols if (c in reps or c in decl.get("replicates", ()))
                    and c not in decl.get("factors", ())]
            unit = str(decl.get("unit", unit))
            strata = tuple(str(s) for s in decl.get("strata", strata))
            source = "declared"
        factors = tuple(c for c in cols if c not in reps)
        return cls(unit=unit, replicates=tuple(reps), factors=factors, strata=strata, source=source)

    def is_factor(self, column: str) -> bool:
        """Whether results may compare the levels of ``column`` (a factor, not a replicate)."""
        return column in self.factors

    def describe(self, n_units: int | None = None) -> str:
        """One line for ``validate`` and results: unit (with the number of units), replicates, factors, strata."""
        units = f" ({n_units} units)" if n_units is not None else ""
        parts = [f"unit {self.unit}{units}", "replicates: " + (", ".join(self.replicates) or "none"),
                 "factors: " + (", ".join(self.factors) or "none"), "strata: " + (", ".join(self.strata) or "none")]
        return "; ".join(parts)

    def to_dict(self) -> dict:
        """The design as plain lists (JSON-ready)."""
        return {"unit": self.unit, "replicates": list(self.replicates), "factors": list(self.factors),
                "strata": list(self.strata), "source": self.source}


def _check_declared(decl: Mapping[str, Any], cols: list[str]) -> None:
    """A declaration's keys and names (ValueError naming the key and the design columns)."""
    unknown = [k for k in decl if k not in DESIGN_KEYS]
    if unknown:
        raise ValueError(f"the design takes the keys {list(DESIGN_KEYS)}; got {unknown} instead.")
    if "unit" in decl and decl["unit"] not in _UNITS:
        raise ValueError(f"`unit` must be one of {list(_UNITS)}; got {decl['unit']!r} instead.")
    for key in ("replicates", "factors", "strata"):
        value = decl.get(key, ())
        if isinstance(value, str) or not all(isinstance(v, str) for v in value):
            raise ValueError(f"`{key}` must be a list of column names; got {value!r} instead.")
    for key in ("replicates", "factors"):
        bad = [v for v in decl.get(key, ()) if v not in cols]
        if bad:
            raise ValueError(ERR_DESIGN_COLUMN.format(key=key, names=bad, verb="is" if len(bad) == 1 else "are",
                                                      cols=cols))
    both = set(decl.get("replicates", ())) & set(decl.get("factors", ()))
    if both:
        raise ValueError(f"{sorted(both)} cannot be both a replicate and a factor; declare each column once.")
