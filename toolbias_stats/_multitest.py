"""Holm's step-down adjusted p-values, computed as :func:`statsmodels.stats.multitest.multipletests` does
(``method="holm"``; the same arithmetic, so the same numbers bit for bit) but without the full garbage collection
that statsmodels runs inside that branch: in a process that has loaded a large library (torch for the sentence
encoder) each such ``gc.collect()`` costs tens of milliseconds, and the experiments adjust once per group and per
permutation study. Benjamini-Hochberg (``method="fdr_bh"``) has no such cost and still comes from statsmodels.
``tests/test_multitest.py`` compares this function with statsmodels.

Examples
--------
>>> holm_adjusted([0.01, 0.04, 0.03, 0.5])
array([0.04, 0.09, 0.09, 0.5 ])
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

__all__ = ["holm_adjusted"]


def holm_adjusted(p: npt.ArrayLike) -> np.ndarray:
    """Holm-adjusted p-values of ``p`` (in the input order; capped at 1).

    Parameters
    ----------
    p : array_like, 1-d
        Unadjusted p-values (finite).

    Returns
    -------
    numpy.ndarray
        ``max over j <= rank(i) of min(1, (m - j + 1) p_(j))``, in the order of ``p``.

    Examples
    --------
    >>> holm_adjusted([0.2, 0.01])
    array([0.2 , 0.02])
    """
    pvals = np.asarray(p)
    order = np.argsort(pvals)
    ranked = np.take(pvals, order)
    adjusted = np.maximum.accumulate(ranked * np.arange(len(ranked), 0, -1))
    adjusted[adjusted > 1] = 1
    out = np.empty_like(adjusted)
    out[order] = adjusted
    return out
