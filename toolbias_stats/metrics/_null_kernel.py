"""Compiled draws of the uniform chooser's TV for many tools (issue 37: K = 40 tools per cluster).

``Generator.multinomial(n, [1/K] * K)`` draws a vector as K - 1 conditional binomials, each a BTPE draw whose set-up
(square roots, logarithms) is paid again since every call has another ``n``: about 70 ns a binomial, so 60,000
vectors of 40 tools cost 0.16 s, and a study of 7 groups and two metrics 2.3 s. Here a vector is drawn on a binary
tree of the tools: a node of ``r`` tools holding ``t`` choices sends ``Binomial(t, floor(r / 2) / r)`` of them to its
left half and the rest to its right one (the same multinomial law: splitting a multinomial's cells in two gives a
binomial, and given it the two halves are independent multinomials). The nodes of one size share their
binomial laws, whose totals ``t`` stay within a few hundred values, so each law's cumulative probabilities are
computed once (:func:`tables`) and a draw is one uniform, a guide-table look-up and a step or two (Chen & Asau
1974). The leaves' counts give ``e = sum_j max(K x_j - n, 0)`` and the TV ``e / (n K)`` (the lattice of
:func:`._vectorised.tv_uniform_pmf`).

Every vector has its own SplitMix64 stream (Steele, Lea & Flood 2014), seeded by hashing (seed, vector index), as
the bootstrap weights kernel does. A total outside its table (below about 1e-9 probability by construction) is
drawn from the same law computed on the spot (:func:`_binomial_cdf`), so the law is exact to rounding everywhere.
This module imports numba; :mod:`._vectorised` imports it only where numba is loaded already or one call's draws
are many, and otherwise takes the NumPy port of :mod:`._null_tree_numpy` (the same numbers), which also holds the
tree, the ranges of the tables and :func:`table_entries`.
"""

from __future__ import annotations

import functools
import math

import numba
import numpy as np

from ._null_tree_numpy import CUT, WIDTH_ADD, WIDTH_SD, banded, ranges, table_entries
from ._null_tree_numpy import tree as _tree

__all__ = ["table_entries", "tables", "tree_tv"]

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_S11, _S27, _S30, _S31 = (np.uint64(s) for s in (11, 27, 30, 31))
#: a law's support is cut where its probabilities fall below this fraction of the mode's (a tail mass below
#: about 1e-18 of the total: under the 2^-53 resolution of the uniforms)
_CUT = CUT
#: half-width of a node size's table of totals, in standard deviations of its total, plus a margin of totals:
#: a total outside it is beyond 7 SD (and 20) of its mean, below about 1e-9 probability (Bernstein's inequality),
#: and is drawn from its law computed on the spot (the same draw as from a table: only slower)
_WIDTH_SD, _WIDTH_ADD = WIDTH_SD, WIDTH_ADD


@numba.njit(inline="always")
def _mix(z):
    """SplitMix64's output function (a bijective 64-bit hash)."""
    z = (z ^ (z >> _S30)) * _M1
    z = (z ^ (z >> _S27)) * _M2
    return z ^ (z >> _S31)


@numba.njit(cache=True)
def _binomial_cdf(t, p, buf):
    """Cumulative probabilities of ``Binomial(t, p)`` over ``[lo, lo + size)`` written to ``buf``; returns
    ``(lo, size)``. The support is cut where the probabilities fall below ``_CUT`` times the mode's (walked out
    from the mode by the ratio of consecutive terms); the kept terms are normalised and the last cumulative
    probability is infinite (a uniform never lies above it). ``buf`` must hold ``t + 1`` values."""
    if t == 0 or p <= 0.0:
        buf[0] = np.inf
        return 0, 1
    if p >= 1.0:
        buf[0] = np.inf
        return t, 1
    mode = min(int((t + 1) * p), t)
    q = 1.0 - p
    ratio_up, ratio_down = p / q, q / p
    # walk down from the mode, storing the terms in reverse from the end of buf, then copy forward
    lo = mode
    v = 1.0
    while lo > 0:
        v *= lo / (t - lo + 1.0) * ratio_down
        if v < _CUT:
            break
        lo -= 1
    hi = mode
    v = 1.0
    while hi < t:
        v *= (t - hi) / (hi + 1.0) * ratio_up
        if v < _CUT:
            break
        hi += 1
    size = hi - lo + 1
    # the terms relative to the mode's, from the mode outwards (the same recursion as above)
    v = 1.0
    buf[mode - lo] = 1.0
    for x in range(mode, lo, -1):
        v *= x / (t - x + 1.0) * ratio_down
        buf[x - 1 - lo] = v
    v = 1.0
    for x in range(mode, hi):
        v *= (t - x) / (x + 1.0) * ratio_up
        buf[x + 1 - lo] = v
    total = 0.0
    for i in range(size):
        total += buf[i]
    acc = 0.0
    for i in range(size):
        acc += buf[i]
        buf[i] = acc / total
    buf[size - 1] = np.inf
    return lo, size


@numba.njit(cache=True)
def _build(classes_r, classes_a, t_lo, t_hi, width):
    """Cumulative probabilities and guide tables of ``Binomial(t, a / r)`` for every node size ``r`` (left half
    ``a``) and total ``t`` in ``[t_lo, t_hi]``: flat arrays and, per table, (cdf start, size, lowest value, guide
    start, guide size)."""
    n_tab = 0
    for c in range(classes_r.size):
        n_tab += t_hi[c] - t_lo[c] + 1
    meta = np.empty((n_tab, 5), dtype=np.int64)
    cdf = np.empty(max(1, n_tab * width), dtype=np.float64)
    buf = np.empty(int(t_hi.max()) + 1 if t_hi.size else 1, dtype=np.float64)
    at, tab = 0, 0
    for c in range(classes_r.size):
        p = classes_a[c] / classes_r[c]
        for t in range(t_lo[c], t_hi[c] + 1):
            lo, size = _binomial_cdf(t, p, buf)
            if at + size > cdf.size:                          # grow (rare: width is an estimate)
                bigger = np.empty(2 * (at + size), dtype=np.float64)
                bigger[:at] = cdf[:at]
                cdf = bigger
            cdf[at:at + size] = buf[:size]
            meta[tab, 0], meta[tab, 1], meta[tab, 2] = at, size, lo
            at += size
            tab += 1
    guide = np.empty(at, dtype=np.int32)                    # one bucket per support value
    for i in range(n_tab):
        start, size = meta[i, 0], meta[i, 1]
        meta[i, 3], meta[i, 4] = start, size
        j = 0
        for b in range(size):
            low = b / size * (1 - 1e-12)                      # below the bucket's end, whatever the rounding
            while cdf[start + j] <= low:
                j += 1
            guide[start + b] = j
    return cdf[:at].copy(), guide, meta


@numba.njit(cache=True)
def _computed_draw(t, p, u, buf):
    """The inverse-CDF draw of ``Binomial(t, p)`` at ``u`` from its law computed now (a total beyond the tables)."""
    lo, _ = _binomial_cdf(t, p, buf)
    at = 0
    while buf[at] <= u:
        at += 1
    return lo + at


@numba.njit(cache=True)
def _kernel(out, ns, ids, k, seed, node_class, node_left, leaves, class_off, t_lo, t_hi, cdf, guide, meta,
            classes_r, classes_a):
    """``out[d, j]``: the TV of draw ``d`` for ``ns[j]`` choices, from the stream of (seed, ids[j] * n_null + d).

    Two draws go down the tree side by side (their table look-ups overlap: about 25 % faster than one at a time;
    each keeps its own stream, so the numbers are those of one at a time)."""
    n_null = out.shape[0]
    n_nodes = node_class.size
    ta = np.empty(n_nodes, dtype=np.int64)
    tb = np.empty(n_nodes, dtype=np.int64)
    buf = np.empty(int(ns.max()) + 1, dtype=np.float64)
    for j in range(ns.size):
        n = ns[j]
        scale = 1.0 / (n * k)
        for d0 in range(0, n_null, 2):
            d1 = d0 + 1 if d0 + 1 < n_null else d0            # an odd last draw: drawn twice, written once
            sa = _mix(seed + _mix(np.uint64(ids[j] * n_null + d0) + _GOLDEN))
            sb = _mix(seed + _mix(np.uint64(ids[j] * n_null + d1) + _GOLDEN))
            ta[0] = n
            tb[0] = n
            for i in range(n_nodes):                            # parents before children
                c = node_class[i]
                if c < 0:
                    continue
                t1, t2 = ta[i], tb[i]
                sa += _GOLDEN
                sb += _GOLDEN
                u1 = (_mix(sa) >> _S11) * (1.0 / 9007199254740992.0)
                u2 = (_mix(sb) >> _S11) * (1.0 / 9007199254740992.0)
                if t_lo[c] <= min(t1, t2) and max(t1, t2) <= t_hi[c]:
                    tab1, tab2 = class_off[c] + t1 - t_lo[c], class_off[c] + t2 - t_lo[c]
                    st1, st2 = meta[tab1, 0], meta[tab2, 0]
                    a1 = guide[st1 + min(int(u1 * meta[tab1, 1]), meta[tab1, 1] - 1)]
                    a2 = guide[st2 + min(int(u2 * meta[tab2, 1]), meta[tab2, 1] - 1)]
                    a1 += cdf[st1 + a1] <= u1                   # the usual single step, without a branch
                    a2 += cdf[st2 + a2] <= u2
                    while cdf[st1 + a1] <= u1:
                        a1 += 1
                    while cdf[st2 + a2] <= u2:
                        a2 += 1
                    x1, x2 = meta[tab1, 2] + a1, meta[tab2, 2] + a2
                else:                                           # beyond the tables: the same law, computed now
                    x1 = _computed_draw(t1, classes_a[c] / classes_r[c], u1, buf)
                    x2 = _computed_draw(t2, classes_a[c] / classes_r[c], u2, buf)
                left = node_left[i]
                ta[left], ta[left + 1] = x1, t1 - x1
                tb[left], tb[left + 1] = x2, t2 - x2
            e1 = 0
            e2 = 0
            for leaf in leaves:                                 # branch-free: a compare and a select
                e1 += max(k * ta[leaf] - n, 0)
                e2 += max(k * tb[leaf] - n, 0)
            out[d0, j] = e1 * scale
            out[d1, j] = e2 * scale


@functools.lru_cache(maxsize=4)
def tables(k: int, n_min: int, n_max: int) -> tuple:
    """The tree of ``k`` tools and its binomial tables for totals ``n`` in ``[n_min, n_max]`` (arguments of
    :func:`_kernel` after ``seed``). A node of ``r`` tools holds ``Binomial(n, r / k)`` choices: its table covers
    ``n r / k`` within ``_WIDTH_SD`` standard deviations plus ``_WIDTH_ADD`` of either end of the range."""
    node_class, node_left, leaves, _ = _tree(k)
    r, a, t_lo, t_hi = _ranges(k, n_min, n_max)
    width = int(2 * math.ceil(10 * math.sqrt(max(1.0, n_max / 4))) + 8)
    cdf, guide, meta = _build(r, a, t_lo, t_hi, width)
    class_off = np.concatenate([[0], np.cumsum(t_hi - t_lo + 1)[:-1]]).astype(np.int64)
    return node_class, node_left, leaves, class_off, t_lo, t_hi, cdf, guide, meta, r, a


def _ranges(k: int, n_min: int, n_max: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The node sizes' (size, left size, lowest total, highest total) of :func:`tables` (this module's widths)."""
    return ranges(k, n_min, n_max, _WIDTH_SD, _WIDTH_ADD)


def tree_tv(ns: np.ndarray, k: int, n_null: int, seed: int, first: int = 0) -> np.ndarray:
    """TV to uniform of ``n_null`` draws of ``Multinomial(n, [1/k] * k)`` for every ``n`` of ``ns`` (each > 0):
    ``(n_null, len(ns))``; draw ``d`` of ``ns[j]`` comes from the stream of (seed, (first + j) * n_null + d), so
    the numbers do not depend on how the cells are split between calls or bands.

    Examples
    --------
    >>> tv = tree_tv(np.array([10, 200]), 40, 3, seed=1)
    >>> tv.shape, bool(((tv >= 0) & (tv <= 1)).all())
    ((3, 2), True)
    >>> bool((tree_tv(np.array([200]), 40, 3, seed=1, first=1) == tv[:, 1:]).all())
    True
    """
    def fill(part, ns_band, ids, lo, hi):
        _kernel(part, ns_band, ids, int(k), np.uint64(seed), *tables(int(k), lo, hi))

    return banded(ns, k, n_null, first, fill)
