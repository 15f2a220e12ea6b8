"""Levels of a design column: numeric or not, sorted, matched to a requested base, coded per row."""

from __future__ import annotations

import numbers
from typing import SupportsFloat, cast

import numpy as np
import pandas as pd


def _replace(obj, **kw):
    from dataclasses import replace

    return replace(obj, **kw)


def _is_numeric(col) -> bool:
    return (pd.api.types.is_numeric_dtype(col) and not pd.api.types.is_bool_dtype(col)
            and not isinstance(col.dtype, pd.CategoricalDtype))


def _levels(col) -> list:
    vals = pd.unique(col.dropna()) if not isinstance(col.dtype, pd.CategoricalDtype) else \
        pd.unique(col.dropna().astype(object))
    vals = [_py(v) for v in vals]
    if _is_numeric(col):
        return sorted(vals)
    return sorted(vals, key=lambda v: (0, int(v), "") if str(v).isdigit() else (1, 0, str(v)))


def _match_level(base, levels, numeric):
    for lv in levels:
        if _same(lv, base, numeric):
            return lv
    return None


def _same(a, b, numeric=None) -> bool:
    if isinstance(a, numbers.Number) and not isinstance(a, bool):
        try:
            return bool(np.isclose(float(cast(SupportsFloat, a)), float(b), rtol=0, atol=1e-12))
        except (TypeError, ValueError):
            return False
    return str(a) == str(b)


def _level_codes(col, levels):
    """Index of each row's level in ``levels`` (-1 for a missing value); compared once per distinct value."""
    inv, uniques = pd.factorize(col.astype(object), use_na_sentinel=True)
    code_of = np.array([next((i for i, lv in enumerate(levels) if _same(lv, _py(u))), -1) for u in uniques] + [-1],
                       dtype=np.int64)
    return code_of[inv]


def _py(v):
    if isinstance(v, np.generic):
        return v.item()
    return v
