"""The tree draws of :mod:`._null_kernel` in NumPy, bit for bit (issue 37: K = 40 without numba).

:func:`tree_tv` gives the numbers of :func:`._null_kernel.tree_tv` for the same arguments without importing numba
(its import and first cached function cost about 0.6 s of CPU and 0.12 GiB of resident memory, more than the k40
shape's whole null): the same SplitMix64 streams, the same binomial tables computed by the same floating-point
operations in the same order, and the same guide-table look-ups, vectorised over draws and over the nodes of one
level of the tree.

- The uniform of the ``m``-th inner node (in the tree's order) of a draw is the stream's ``m + 1``-th output: the
  kernel adds the golden gamma once per inner node, so every node's state is known in advance and all the
  uniforms of a draw are computed at once.
- A law's terms relative to its mode are running products of the ratios of consecutive terms (``np.cumprod`` is
  the kernel's sequential product, term after term), cut at the first term below ``_CUT`` (the kernel's walk
  computes the same products); their running sums (``np.cumsum``, sequential; zeros before and after a row's
  support add nothing) divided by the last give the cumulative probabilities.
- A total beyond its table is drawn from its law computed on the spot (as the kernel does, the same draw).

The node sizes' ranges of totals (:func:`ranges`), the bands (:func:`band`) and :func:`table_entries` live here,
so that deciding on the tree imports nothing compiled. :mod:`._vectorised` takes this port unless numba is loaded.
"""

from __future__ import annotations

import functools
import math

import numpy as np

__all__ = ["band", "banded", "ranges", "table_entries", "tables", "tree", "tree_tv"]

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
#: a law's support is cut where its probabilities fall below this fraction of the mode's (the kernel's ``_CUT``)
CUT = 1e-20
#: half-width of a node size's table of totals, in SD of its total, plus a margin of totals (the kernel's)
WIDTH_SD, WIDTH_ADD = 7.0, 20
#: draws (rows) of one vectorised pass: about 2^18 uniforms, so that its arrays stay a few MiB
_CHUNK = 1 << 18


def _mix(z: np.ndarray) -> np.ndarray:
    """SplitMix64's output function on a uint64 array (in place; returned)."""
    tmp = np.empty_like(z)
    for shift, mult in ((30, _M1), (27, _M2), (31, None)):
        np.right_shift(z, np.uint64(shift), out=tmp)
        np.bitwise_xor(z, tmp, out=z)
        if mult is not None:
            np.multiply(z, mult, out=z)
    return z


def tree(k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[tuple[int, int]]]:
    """The halving tree of ``k`` tools: per node its size class (-1: a leaf) and first child (the second is next
    to it), the leaves, and the classes' (size, left size)."""
    sizes, left = [k], [-1]
    i = 0
    while i < len(sizes):
        r = sizes[i]
        if r > 1:
            left[i] = len(sizes)
            sizes += [r // 2, r - r // 2]
            left += [-1, -1]
        i += 1
    classes = sorted({(r, r // 2) for r in sizes if r > 1}, reverse=True)
    index = {c[0]: j for j, c in enumerate(classes)}
    kind = [index[r] if r > 1 else -1 for r in sizes]
    leaves = [j for j, r in enumerate(sizes) if r == 1]
    return (np.array(kind, dtype=np.int64), np.array(left, dtype=np.int64), np.array(leaves, dtype=np.int64),
            classes)


def ranges(k: int, n_min: int, n_max: int, width_sd: float | None = None, width_add: int | None = None
           ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The node sizes' (size, left size, lowest total, highest total) of the tables for totals ``n`` in
    ``[n_min, n_max]``: a node of ``r`` tools holds ``Binomial(n, r / k)`` choices; its table covers ``n r / k``
    within ``width_sd`` standard deviations plus ``width_add`` of either end of the range (default
    :data:`WIDTH_SD` and :data:`WIDTH_ADD`)."""
    width_sd = WIDTH_SD if width_sd is None else width_sd
    width_add = WIDTH_ADD if width_add is None else width_add
    _, _, _, classes = tree(k)
    r = np.array([c[0] for c in classes], dtype=np.int64)
    a = np.array([c[1] for c in classes], dtype=np.int64)
    frac = r / k
    sd = np.sqrt(n_max * frac * (1 - frac))
    t_lo = np.maximum(0, np.floor(n_min * frac - width_sd * sd - width_add)).astype(np.int64)
    t_hi = np.minimum(n_max, np.ceil(n_max * frac + width_sd * sd + width_add)).astype(np.int64)
    t_lo[r == k], t_hi[r == k] = n_min, n_max                 # the root holds n itself
    return r, a, t_lo, np.maximum(t_hi, t_lo - 1)             # an empty range: every total computed on the spot


def table_entries(ns: np.ndarray, k: int) -> int:
    """About how many cumulative probabilities :func:`tree_tv` would tabulate for ``ns`` (the memory is 12 bytes
    each): the bands' node sizes times their totals times the binomials' supports (about 19 SD wide, as cut at
    ``CUT``). Without importing or compiling anything.

    Examples
    --------
    >>> 500_000 < table_entries(np.array([4600, 4620]), 40) < 2_000_000
    True
    """
    total = 0
    for lo, hi in {band(int(n)) for n in np.asarray(ns).ravel().tolist() if n > 0}:
        r, a, t_lo, t_hi = ranges(int(k), lo, hi)
        p = a / r
        sd = np.sqrt(np.maximum(t_hi, 0) * p * (1 - p))
        total += int(((t_hi - t_lo + 1) * (2 * np.ceil(9.5 * sd) + 3)).sum())
    return total


def band(n: int) -> tuple[int, int]:
    """The range of totals whose tables are built together with ``n``'s (and cached): ``n`` rounded down and up
    to a multiple of a power of two near ``n / 32`` (at least 16), so that the groups of a study share them."""
    step = max(16, 1 << max(0, n.bit_length() - 6))
    lo = n // step * step
    return lo, lo + step - 1


def _walk(t: np.ndarray, start: np.ndarray, steps: int, p: float, up: bool) -> tuple[np.ndarray, np.ndarray]:
    """The kernel's walk from the mode ``start`` of ``Binomial(t, p)`` (one row per total), ``steps`` terms at most:
    the terms relative to the mode's, (rows, steps), and per row how many are kept (the walk stops at the first
    below ``CUT``, or at 0 / ``t``; -1: not decided within ``steps``)."""
    q = 1.0 - p
    i = np.arange(steps)
    if up:
        x = start[:, None] + i                                   # the term at x + 1 from the one at x
        room = t - start                                         # terms up to t
        f = (t[:, None] - x) / (x + 1.0) * (p / q)
    else:
        x = start[:, None] - i                                   # the term at x - 1 from the one at x
        room = start.copy()                                      # terms down to 0
        f = x / (t[:, None] - x + 1.0) * (q / p)
    v = np.multiply.accumulate(f, axis=1)                        # the kernel's running product, term after term
    inside = i[None, :] < room[:, None]
    cut = (v < CUT) & inside
    first = np.where(cut.any(axis=1), cut.argmax(axis=1), -1)
    kept = np.where(first >= 0, first, np.where(room <= steps, room, -1))
    return v, kept


def _laws(t: np.ndarray, p: float) -> tuple[list[np.ndarray], np.ndarray]:
    """The kernel's ``_binomial_cdf(t, p)`` for every total of ``t`` (one law: ``p`` in (0, 1)): the cumulative
    probabilities per total (the last one infinite) and their lowest values."""
    t = np.asarray(t, dtype=np.int64)
    mode = np.minimum(((t + 1) * p).astype(np.int64), t)
    steps = int(math.ceil(12 * math.sqrt(max(1.0, float(t.max()) * p * (1 - p))))) + 40
    while True:
        down, n_down = _walk(t, mode, min(steps, int(mode.max()) + 1), p, up=False)
        up, n_up = _walk(t, mode, min(steps, int((t - mode).max()) + 1), p, up=True)
        if (n_down >= 0).all() and (n_up >= 0).all():
            break
        steps *= 2
    d, u = down.shape[1], up.shape[1]
    terms = np.zeros((t.size, d + 1 + u))
    cols = np.arange(d)
    terms[:, :d] = np.where(cols[None, :] < n_down[:, None], down, 0.0)[:, ::-1]     # mode - d .. mode - 1
    terms[:, d] = 1.0
    terms[:, d + 1:] = np.where(np.arange(u)[None, :] < n_up[:, None], up, 0.0)       # mode + 1 .. mode + u
    acc = np.cumsum(terms, axis=1)                               # sequential sums; the zeros add nothing
    cdf = acc / acc[:, -1:]
    first = d - n_down
    out = []
    for row, (s, e) in enumerate(zip(first.tolist(), (d + 1 + n_up).tolist())):
        c = cdf[row, s:e].copy()
        c[-1] = np.inf
        out.append(c)
    return out, mode - n_down


def _law(t: int, p: float) -> tuple[np.ndarray, int]:
    """The cumulative probabilities of ``Binomial(t, p)`` and their lowest value (the kernel's ``_binomial_cdf``)."""
    if t == 0 or p <= 0.0:
        return np.array([np.inf]), 0
    if p >= 1.0:
        return np.array([np.inf]), t
    cdfs, lows = _laws(np.array([t]), p)
    return cdfs[0], int(lows[0])


@functools.lru_cache(maxsize=4)
def tables(k: int, n_min: int, n_max: int) -> tuple:
    """The tree of ``k`` tools and its binomial tables for totals in ``[n_min, n_max]``, as the kernel's
    ``tables``: (node class, node left child, leaves, class offsets, lowest totals, highest totals, cumulative
    probabilities, guide, meta (cdf start, size, lowest value, guide start, guide size), sizes, left sizes)."""
    node_class, node_left, leaves, _ = tree(k)
    r, a, t_lo, t_hi = ranges(k, n_min, n_max)
    cdfs: list[np.ndarray] = []
    lows: list[np.ndarray] = []
    for c in range(r.size):
        p = a[c] / r[c]
        ts = np.arange(t_lo[c], t_hi[c] + 1, dtype=np.int64)
        zero = ts == 0
        if zero.any():                                           # Binomial(0, p): one value, 0
            cdfs.append(np.array([np.inf]))
            lows.append(np.zeros(1, dtype=np.int64))
        rest = ts[~zero]
        for s in range(0, rest.size, 256):                       # a few MiB of terms at a time
            part, low = _laws(rest[s:s + 256], p)
            cdfs += part
            lows.append(low)
    sizes = np.array([c.size for c in cdfs], dtype=np.int64)
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
    meta = np.stack([starts, sizes, np.concatenate(lows) if lows else np.zeros(0, np.int64), starts, sizes],
                    axis=1).astype(np.int64).reshape(-1, 5)
    cdf = np.concatenate(cdfs) if cdfs else np.zeros(0)
    guide = np.empty(cdf.size, dtype=np.int32)
    for start, size, law in zip(starts.tolist(), sizes.tolist(), cdfs):
        starts_of = np.arange(size) / size * (1 - 1e-12)         # below the bucket's start, whatever the rounding
        guide[start:start + size] = np.searchsorted(law, starts_of, side="right")
    class_off = np.concatenate([[0], np.cumsum(t_hi - t_lo + 1)[:-1]]).astype(np.int64)
    return node_class, node_left, leaves, class_off, t_lo, t_hi, cdf, guide, meta, r, a


def _levels(node_class: np.ndarray, node_left: np.ndarray) -> list[np.ndarray]:
    """The inner nodes level by level (parents before children), in the tree's order within a level."""
    depth = np.zeros(node_class.size, dtype=np.int64)
    for i in range(node_class.size):
        if node_class[i] >= 0:
            depth[node_left[i]] = depth[node_left[i] + 1] = depth[i] + 1
    inner = np.flatnonzero(node_class >= 0)
    return [inner[depth[inner] == d] for d in np.unique(depth[inner]).tolist()]


def _uniforms(seed: int, ids: np.ndarray, draws: np.ndarray, n_null: int, ranks: np.ndarray
              ) -> tuple[np.ndarray, np.ndarray]:
    """The kernel's uniforms of the inner nodes ranked ``ranks`` (their places in the stream), (len(ranks), rows):
    row ``(ids[i], draws[i])``'s stream; and the 64 random bits they come from (``u = (bits >> 11) 2^-53``)."""
    z = ids.astype(np.uint64) * np.uint64(n_null) + draws.astype(np.uint64) + _GOLDEN
    s = _mix(z)
    s += np.uint64(seed)
    s = _mix(s)
    steps = (ranks.astype(np.uint64) + np.uint64(1)) * _GOLDEN                # wraps modulo 2^64, as the adds
    bits = _mix(steps[:, None] + s[None, :])
    return (bits >> np.uint64(11)) * (1.0 / 9007199254740992.0), bits


class _Class:
    """One node size's tables laid out for vectorised look-ups. Every total's cumulative probabilities are padded
    to one width with infinities (``flat``: row after row), and a guide of ``2^bits`` buckets per total splits
    [0, 1) evenly: a uniform's bucket is the top ``bits`` of its random bits, exactly. The draw is the count of
    probabilities at or below the uniform (the kernel's, found by any search that starts at or below it). A bucket
    with no probability strictly inside it holds that count for every uniform in it: the guide holds the draw
    itself. Another holds ``-1 -`` the flat index of the first probability above its start, where the search
    steps on from; ``base`` is per total its lowest value minus its flat offset (the draw is ``base[row] + index``)."""

    def __init__(self, cdfs: list[np.ndarray], lows: np.ndarray, t_lo: int, p: float):
        self.t_lo, self.rows, self.p = t_lo, len(cdfs), p           # no rows: every total computed on the spot
        if not cdfs:
            cdfs, lows = [np.array([np.inf])], np.zeros(1, dtype=np.int64)
        rows = len(cdfs)
        width = max(c.size for c in cdfs)
        cdf = np.full((rows, width), np.inf)
        for i, c in enumerate(cdfs):
            cdf[i, :c.size] = c
        self.bits = min(52, max(1, int(width - 1).bit_length() + 1))  # two to four times as many buckets as values
        buckets = 1 << self.bits
        edges = np.arange(buckets + 1) / buckets                     # exact: the buckets' starts and ends
        self.base = lows.astype(np.int64) - np.arange(rows) * width
        kind = np.int32 if rows * width + int(lows.max(initial=0)) + width < 2**31 else np.int64
        self.guide = np.empty(rows * buckets, dtype=kind)
        step = max(1, (1 << 18) // buckets)                          # a few MiB of counts at a time
        for r0 in range(0, rows, step):
            block = cdf[r0:r0 + step]
            # per bucket: the values at or below its start, and the values below its end (a bincount per row)
            at_start = self._counts(np.searchsorted(edges, block, side="left"), buckets)
            below_end = self._counts(np.searchsorted(edges[1:], block, side="right"), buckets)
            offset = (np.arange(r0, r0 + len(block)) * width)[:, None]
            guide = np.where(below_end == at_start, at_start + lows[r0:r0 + step, None], -1 - (at_start + offset))
            self.guide[r0 * buckets:(r0 + len(block)) * buckets] = guide.ravel()
        self.flat = cdf.ravel()

    @staticmethod
    def _counts(first: np.ndarray, buckets: int) -> np.ndarray:
        """Per row and bucket ``b``, how many values have ``first <= b``: (rows, buckets)."""
        rows = first.shape[0]
        first = first + (np.arange(rows) * (buckets + 2))[:, None]
        count = np.bincount(first.ravel(), minlength=rows * (buckets + 2)).reshape(rows, buckets + 2)[:, :buckets]
        return np.cumsum(count, axis=1)


@functools.lru_cache(maxsize=4)
def _layout(k: int, n_min: int, n_max: int) -> tuple[tuple, list[_Class]]:
    """The tree of :func:`tables` (k, n_min, n_max) (node class, node left child, leaves) and its node sizes'
    :class:`_Class` layouts."""
    tab = tables.__wrapped__(k, n_min, n_max)                   # not kept: the layouts hold what the draws need
    class_off, t_lo, t_hi, cdf, meta, r, a = tab[3], tab[4], tab[5], tab[6], tab[8], tab[9], tab[10]
    out = []
    for c in range(r.size):
        rows = meta[class_off[c]:class_off[c] + t_hi[c] - t_lo[c] + 1]
        cdfs = [cdf[s:s + n] for s, n in zip(rows[:, 0].tolist(), rows[:, 1].tolist())]
        out.append(_Class(cdfs, rows[:, 2], int(t_lo[c]), a[c] / r[c]))
    return tab[:3], out


def _draw(t: np.ndarray, u: np.ndarray, bits: np.ndarray, law: _Class) -> np.ndarray:
    """The left halves' counts of nodes of one size: totals ``t``, uniforms ``u`` and their random bits (same
    shapes). A uniform's bucket ``floor(u 2^b)`` is its bits' top ``b`` (``u`` is the top 53 bits times 2^-53)."""
    shape = t.shape
    t, u = t.ravel(), u.ravel()
    row = t - law.t_lo
    inside = row.view(np.uint64) < law.rows                      # a negative row wraps above
    safe = inside.all()
    if not safe:
        row = np.where(inside, row, 0)
    index = row << law.bits
    index += (bits.ravel() >> np.uint64(64 - law.bits)).view(np.int64)
    x = law.guide[index].astype(np.int64)                        # the draw, or where its search starts
    open_ = np.flatnonzero(x < 0)
    if open_.size:
        at = -1 - x[open_]
        uu = u[open_]
        more = np.flatnonzero(law.flat[at] <= uu)
        while more.size:                                         # the steps after the bucket's start
            at[more] += 1
            more = more[law.flat[at[more]] <= uu[more]]
        x[open_] = law.base[row[open_]] + at
    if not safe:                                                 # beyond the tables: the same law, computed now
        for i in np.flatnonzero(~inside).tolist():
            cdf, low = _law(int(t[i]), law.p)
            x[i] = low + int(np.searchsorted(cdf, u[i], side="right"))
    return x.reshape(shape)


def _pass(out: np.ndarray, ns: np.ndarray, ids: np.ndarray, k: int, seed: int, laws: list[_Class],
          node_class: np.ndarray, node_left: np.ndarray, leaves: np.ndarray) -> None:
    """``out[d, j]`` (a view (n_null, cells)) for every draw and cell of one band, a chunk of rows at a time: the
    nodes of one level and size at once. Each node's totals are a contiguous row of a scratch array, the rows
    ordered group after group and then the leaves, so that a group's parents and all the leaves are slices."""
    rank = np.cumsum(node_class >= 0) - 1                        # an inner node's place in the stream
    found = [nodes for level in _levels(node_class, node_left)
             for c in np.unique(node_class[level]).tolist() for nodes in [level[node_class[level] == c]]]
    where = np.empty(node_class.size, dtype=np.int64)            # a node's row in the scratch array
    where[np.concatenate(found + [leaves])] = np.arange(node_class.size)
    starts = np.cumsum([0] + [nodes.size for nodes in found]).tolist()
    groups = [(at, at + nodes.size, where[node_left[nodes]], where[node_left[nodes] + 1], laws[node_class[nodes[0]]])
              for nodes, at in zip(found, starts)]
    order = np.concatenate([rank[nodes] for nodes in found])
    n_null, first_leaf = out.shape[0], starts[-1]
    rows = max(1, _CHUNK // max(1, order.size))
    total = n_null * ns.size
    for s in range(0, total, rows):
        flat = np.arange(s, min(total, s + rows))
        j, d = flat // n_null, flat % n_null                     # cell-major, as the kernel's loops
        u, bits = _uniforms(seed, ids[j], d, n_null, order)     # the groups' nodes one after another
        t = np.empty((node_class.size, flat.size), dtype=np.int64)
        n = ns[j]
        t[0] = n
        for a, b, left, right, law in groups:
            parent = t[a:b]
            x = _draw(parent, u[a:b], bits[a:b], law)
            t[left] = x
            np.subtract(parent, x, out=x)
            t[right] = x
        leaf = t[first_leaf:]
        leaf *= k
        leaf -= n
        e = np.maximum(leaf, 0, out=leaf).sum(axis=0)
        out[d, j] = e * (1.0 / (n * k))


def tree_tv(ns: np.ndarray, k: int, n_null: int, seed: int, first: int = 0) -> np.ndarray:
    """:func:`._null_kernel.tree_tv` without numba, bit for bit: TV to uniform of ``n_null`` draws of
    ``Multinomial(n, [1/k] * k)`` for every ``n`` of ``ns`` (each > 0), ``(n_null, len(ns))``; draw ``d`` of
    ``ns[j]`` comes from the stream of (seed, (first + j) * n_null + d).

    Examples
    --------
    >>> tv = tree_tv(np.array([10, 200]), 40, 3, seed=1)
    >>> tv.shape, bool(((tv >= 0) & (tv <= 1)).all())
    ((3, 2), True)
    >>> bool((tree_tv(np.array([200]), 40, 3, seed=1, first=1) == tv[:, 1:]).all())
    True
    """
    def fill(part, ns_band, ids, lo, hi):
        tab, laws = _layout(int(k), lo, hi)
        _pass(part, ns_band, ids, int(k), int(seed), laws, tab[0], tab[1], tab[2])

    return banded(ns, k, n_null, first, fill)


def banded(ns: np.ndarray, k: int, n_null: int, first: int, fill) -> np.ndarray:
    """The frame both tree draws share (this port's and :func:`._null_kernel.tree_tv`): checks, the answer for
    ``k == 1``, and the cells grouped by their table band; ``fill(part, ns[at], at + first, lo, hi)`` writes the
    ``(n_null, len(at))`` draws of one band's cells ``at`` into ``part``."""
    ns = np.ascontiguousarray(ns, dtype=np.int64)
    out = np.empty((n_null, ns.size))
    if not ns.size or not n_null:
        return out
    if (ns < 1).any() or k < 1:
        raise ValueError("tree_tv needs n >= 1 and K >= 1")
    if k == 1:
        out[:] = 0.0
        return out
    bands: dict[tuple[int, int], list[int]] = {}
    for j, n in enumerate(ns.tolist()):
        bands.setdefault(band(n), []).append(j)
    for (lo, hi), cells in sorted(bands.items()):
        at = np.array(cells, dtype=np.int64)
        part = np.empty((n_null, at.size))
        fill(part, ns[at], at + first, lo, hi)
        out[:, at] = part
    return out
