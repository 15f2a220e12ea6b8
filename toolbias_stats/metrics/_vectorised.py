"""Cluster-batched kernels of the bias metrics: the same numbers as cluster by cluster, at a cost that grows with
the number of rows rather than with the number of clusters (issue 37).

The metrics of :mod:`._bias` are per-cluster arrays stacked over clusters. Computing them one cluster at a time
costs a NumPy call (and, for the uniform chooser's null draws, a ``Generator.multinomial`` call) per cluster, so a
study with 2,000 clusters of five queries spent 40x longer in Python overhead than in arithmetic. Here consecutive
clusters with the same shape (the same K) are stacked and computed in one call:

* element-wise arithmetic and reductions over the last axis give bit-identical values in a stack;
* ``Generator.multinomial(n, p, size=(G, N, S))`` with ``n`` of shape ``(G, 1, S)`` draws its G x N x S vectors
  in C order, exactly the order of G calls with ``size=(N, S)``: the random stream, hence every draw, is the
  same as cluster by cluster (a test checks it);
* the jackknife's leave-one-query-out means (one value per query of every cluster) are the mean over clusters
  with one cluster's value replaced: computed from the clusters' sums and counts, O(queries x runs) rather than
  O(queries x clusters x runs). This one sums in another order, so it agrees with the loop to rounding
  (about 1e-16 relative), not bit for bit.
"""

from __future__ import annotations

import functools
import math
import sys
import warnings
from collections.abc import Callable, Sequence
from typing import NamedTuple

import numpy as np

from ._tv import SEQUENTIAL_MAX_K, expected_tv_uniform, rates_from_counts, sum_last

__all__: list[str] = []   # private kernels of metrics/_bias.py


#: Arrays of at least this many elements (a cluster's replicate counts: 2,000 x 3 runs x 40 tools are 240,000) are
#: computed one at a time by :func:`stacked` and :func:`centred_null_tv` rather than copied into a stack first: the
#: same operations on the same trailing axes, so the same numbers, without the copy.
LARGE_ARRAY = 1 << 16
#: Elements of one stacked batch (float64: 32 MiB); a study with thousands of clusters is computed in batches of
#: clusters so that the temporaries stay small (the per-call overhead is already amortised at this size).
MAX_BATCH = 1 << 22


def same_shape_runs(shapes: Sequence[tuple], factor: int = 1, max_size: int = MAX_BATCH) -> list[slice]:
    """Slices of consecutive ``shapes`` that are equal (clusters with the same K and number of runs), each holding
    at most ``max_size`` elements (an array of a shape, times ``factor``; at least one array per slice).

    Examples
    --------
    >>> same_shape_runs([(3, 5), (3, 5), (3, 4), (3, 5)])
    [slice(0, 2, None), slice(2, 3, None), slice(3, 4, None)]
    >>> same_shape_runs([(3, 5)] * 5, max_size=40)
    [slice(0, 2, None), slice(2, 4, None), slice(4, 5, None)]
    """
    out, start = [], 0
    cap = max(1, max_size // max(1, factor * math.prod(int(x) for x in shapes[0]))) if len(shapes) else 1
    for i in range(1, len(shapes) + 1):
        if i == len(shapes) or shapes[i] != shapes[start] or i - start >= cap:
            out.append(slice(start, i))
            start = i
            if i < len(shapes):   # the size of one array of the next run (Python integers: no np.prod per shape)
                cap = max(1, max_size // max(1, factor * math.prod(int(x) for x in shapes[i])))
    return out


def stacked(fn: Callable[[np.ndarray], np.ndarray], arrays: Sequence[np.ndarray], axis: int = 0) -> np.ndarray:
    """``np.stack([fn(a) for a in arrays], axis=axis)`` computed one same-shape run of ``arrays`` at a time.

    ``fn`` must act on the trailing axes only (``fn(a)[..., j]`` depends on ``a[..., j, :]``), as the TV of the
    rates per run does; the runs are stacked on ``axis`` of the inputs.

    Examples
    --------
    >>> a = [np.array([[1.0, 3.0]]), np.array([[2.0, 2.0]]), np.array([[1.0, 0.0, 0.0]])]
    >>> stacked(tv_runs, a)
    array([[0.25      ],
           [0.        ],
           [0.66666667]])
    """
    if not len(arrays):
        raise ValueError("no arrays to stack")
    if arrays[0].size >= LARGE_ARRAY:   # large arrays one at a time: no stacked copy, the overhead amortised
        return np.stack([fn(a) for a in arrays], axis=axis)
    parts = [fn(np.stack(arrays[s], axis=axis)) for s in same_shape_runs([a.shape for a in arrays])]
    return parts[0] if len(parts) == 1 else np.concatenate(parts, axis=axis)


def replicate_tv(arrays: Sequence[np.ndarray]) -> np.ndarray:
    """``stacked(tv_runs, arrays, axis=1)`` of every cluster's replicate counts (R, S, K) or (R, K): (R, C, S) or
    (R, C).

    Where numba is loaded (studies with many clusters load it for the calibrated intervals) and the clusters have at
    most :data:`._tv.SEQUENTIAL_MAX_K` tools, a compiled pass computes every TV with the operations of
    :func:`_fused_abs_sum` in its order (the total summed from the first tool to the last, then ``|n_j / n - 1/K|``
    added from the first tool to the last): the same numbers, without the stacked copy along the clusters' axis and
    the K passes over it (issue 37: 2,000 clusters x 2,000 replicates). A run of clusters with a replicate without
    any valid choice takes :func:`tv_runs` (its NaN).

    Examples
    --------
    >>> a = [np.array([[[1.0, 3.0]]]), np.array([[[2.0, 2.0]]])]      # R = 1, S = 1, K = 2: two clusters
    >>> replicate_tv(a)
    array([[[0.25],
            [0.  ]]])
    """
    kernel = _replicate_tv_kernel()
    first = arrays[0] if len(arrays) else None
    if (kernel is None or first is None or first.ndim not in (2, 3) or not 1 <= first.shape[-1] <= SEQUENTIAL_MAX_K
            or any(a.shape != first.shape or a.dtype != np.float64 for a in arrays)):
        return stacked(tv_runs, arrays, axis=1)
    r, k = first.shape[0], first.shape[-1]
    s = first.shape[1] if first.ndim == 3 else 1
    out = np.empty((r, len(arrays), s))
    for part in same_shape_runs([first.shape] * len(arrays)):
        block = np.stack(arrays[part]).reshape(part.stop - part.start, r, s, k)       # (n, R, S, K)
        if not kernel(block, out, part.start):
            out[:, part] = tv_runs(np.stack(arrays[part], axis=1)).reshape(r, -1, s)
    return out if first.ndim == 3 else out[:, :, 0].copy()


_TV_KERNEL: list = []


def _replicate_tv_kernel():
    """The compiled pass of :func:`replicate_tv`, or None (numba not loaded by the process, or missing)."""
    if not _TV_KERNEL:
        if "numba" not in sys.modules:
            return None
        try:
            import numba
        except ImportError:   # pragma: no cover - numba is installed with the package's model stack
            _TV_KERNEL.append(None)
            return None

        @numba.njit(cache=True, nogil=True)
        def kernel(block, out, start):   # pragma: no cover - compiled
            n, r, s, k = block.shape
            inv = 1.0 / k
            for i in range(n):
                for a in range(r):
                    for b in range(s):
                        total = block[i, a, b, 0] + 0.0
                        for j in range(1, k):
                            total += block[i, a, b, j]
                        if not total > 0:
                            return False
                        acc = 0.0
                        for j in range(k):
                            d = block[i, a, b, j] / total
                            d = d - inv
                            acc += abs(d)
                        out[a, start + i, b] = 0.5 * acc
            return True

        _TV_KERNEL.append(kernel)
    return _TV_KERNEL[0]


class ReplicateMeans(NamedTuple):
    """What the bias engine reads of every cluster's replicate TVs (R, C, S), without them (:func:`replicate_means`):
    ``cluster_means`` (R, C) = ``nanmean(tv, 2)``, ``run_means`` (R, S) = ``nanmean(tv, 1)``, ``norm_run_means``
    (R, S) = ``nanmean(tv / norm[None, :, None], 1)``, ``sums`` the replicate counts summed over runs (a list of
    (R, K)), ``pooled`` (R, C) their TVs (``replicate_tv(sums)``), and ``centred``: for ``nq =
    centred_null_tv(boot, scale)``, ``(nanmean(nq, 2), nanmean(nq, 1))``, or None (no ``scale``)."""

    cluster_means: np.ndarray
    run_means: np.ndarray
    norm_run_means: np.ndarray
    sums: list
    pooled: np.ndarray
    centred: tuple[np.ndarray, np.ndarray] | None


#: The most runs for which the compiled passes reproduce NumPy's means over runs (its sums of fewer than 8 numbers
#: along a contiguous axis go from the first to the last, as :func:`._tv.sum_last`).
MAX_FUSED_RUNS = SEQUENTIAL_MAX_K


def replicate_means(boot: Sequence[np.ndarray], norm: np.ndarray,
                    scale: Sequence[float] | None = None) -> ReplicateMeans | None:
    """:class:`ReplicateMeans` of every cluster's (R, S, K) replicate counts ``boot`` (``norm``: (C,) the clusters'
    ``1 - 1/K``; ``scale``: the centred null's factors, or None), bit for bit the NumPy route (``tv =
    replicate_tv(boot)`` then :func:`nanmean` over its axes, the sums ``b.sum(1)`` and ``replicate_tv`` of them,
    :func:`centred_null_tv` and its means), in one compiled pass per cluster without the (R, C, S) TVs, their
    quotients by ``norm``, the centred values and the clusters' stacked copies (issue 37: 2,000 clusters x 2,000
    replicates), each rate ``n_j / n`` divided once.

    The pass makes NumPy's operations in its order: each total from the first tool to the last (as
    :func:`._tv.sum_last`), ``|n_j / n - 1/K|`` (``|(n_j / n - mean_j) * scale|``) added from the first tool to the
    last, the sums over runs from the first run to the last, the means of the rates over the replicates and over
    clusters from the first to the last (NumPy's order along an axis that is not the last), each of them over the
    values that are not NaN (a replicate-run without a valid choice), divided by their count (:func:`nanmean`'s two
    routes give these numbers). A cluster with one tool or more than :data:`._tv.SEQUENTIAL_MAX_K` takes the NumPy
    functions before its values are added.

    None (the caller takes the NumPy route) where numba is not loaded, the clusters do not share their (R, S) in
    float64, or the runs are one (NumPy then sums over the clusters pairwise) or more than :data:`MAX_FUSED_RUNS`.

    Examples
    --------
    >>> b = [np.array([[[1.0, 3.0], [2.0, 2.0]]]), np.array([[[4.0, 0.0], [1.0, 1.0]]])]   # R = 1, S = 2, K = 2
    >>> out = replicate_means(b, np.array([0.5, 0.5]))
    >>> out is None or (out.cluster_means.tolist(), out.run_means.tolist()) == ([[0.125, 0.25]], [[0.375, 0.0]])
    True
    """
    kernels = _cluster_kernels()
    if kernels is None or not _fused_shapes(boot):
        return None
    r, s = boot[0].shape[:2]
    c = len(boot)
    means, pooled = np.empty((r, c)), np.empty((r, c))
    acc, acc_norm = np.zeros((r, s)), np.zeros((r, s))
    count, count_norm = np.zeros((r, s), dtype=np.int64), np.zeros((r, s), dtype=np.int64)
    centred = scale is not None
    q_means, q_acc, q_count = np.empty((r, c if centred else 0)), np.zeros((r, s)), np.zeros((r, s), dtype=np.int64)
    scratch: dict = {}     # per number of tools: the rates (R, S, K), totals (R, S), means and counts (S, K)
    sums = []
    for i, x in enumerate(boot):
        k = x.shape[-1]
        sc = float(scale[i]) if scale is not None else 1.0
        summed = np.empty((r, k))
        if 2 <= k <= SEQUENTIAL_MAX_K:
            if k not in scratch:
                scratch[k] = (np.empty((r, s, k)), np.empty((r, s)), np.empty((s, k)), np.empty((s, k), dtype=np.int64))
            kernels[0](x, float(norm[i]), i, means, acc, acc_norm, count, count_norm, summed, pooled, *scratch[k])
            if centred:
                kernels[1](sc, i, q_means, q_acc, q_count, *scratch[k])
        else:   # one tool, or more than the compiled pass sums as NumPy does: NumPy's values, then the same additions
            tv = tv_runs(x)                                                             # (R, S); NaN: none
            summed = np.asarray(x, dtype=float).sum(1)            # (compact counts: the same sums, in float64)
            pooled[:, i] = tv_runs(summed)
            with np.errstate(invalid="ignore", divide="ignore"):       # one tool: 0 / 0
                kernels[2](tv, tv / float(norm[i]), i, means, acc, acc_norm, count, count_norm)
            if centred:
                tv = centred_null_tv([x], [sc])[:, 0]
                kernels[2](tv, tv, i, q_means, q_acc, np.zeros((r, s)), q_count, np.zeros((r, s), dtype=np.int64))
        sums.append(summed)
    with np.errstate(invalid="ignore", divide="ignore"):
        return ReplicateMeans(means, acc / count, acc_norm / count_norm, sums, pooled,
                              (q_means, q_acc / q_count) if centred else None)


def _fused_shapes(boot: Sequence[np.ndarray]) -> bool:
    """Whether :func:`replicate_means` takes its compiled passes: (R, S, K) float64 (or :func:`compact_replicates`)
    replicates sharing (R, S), with 2 to :data:`MAX_FUSED_RUNS` runs."""
    if not len(boot):
        return False
    first = boot[0]
    return (first.ndim == 3 and 2 <= first.shape[1] <= MAX_FUSED_RUNS
            and all(a.ndim == 3 and a.shape[:2] == first.shape[:2] and a.dtype in (np.float64, np.uint16)
                    for a in boot))


def compact_replicates(x: np.ndarray) -> np.ndarray:
    """``x`` as uint16 when :func:`replicate_means` can read it (its compiled passes loaded) and every number is an
    integer from +0 to 65,535 (replicate counts: every reader converts them back to float64 exactly), else ``x``
    itself. A quarter of the memory of float64 replicates (issue 37: 2,000 clusters x 2,000 replicates x 3 runs x 10
    tools and positions held 0.96 GB per group while the calibrated intervals of the group before computed).

    Examples
    --------
    >>> x = np.array([[[1.0, 2.0]], [[0.0, 7.0]]])
    >>> c = compact_replicates(x)
    >>> c.dtype in (np.uint16, np.float64) and np.array_equal(c, x)
    True
    >>> compact_replicates(np.array([[[0.5, 2.0]]])).dtype
    dtype('float64')
    """
    kernels = _cluster_kernels()
    if kernels is None or x.dtype != np.float64 or x.ndim != 3:
        return x
    out = np.empty(x.shape, dtype=np.uint16)
    return out if kernels[3](x, out) else x


_CLUSTER_KERNELS: list = []


def _cluster_kernels():
    """The compiled passes of :func:`replicate_means` (three) and of :func:`compact_replicates`, or None (numba not
    loaded by the process, or missing)."""
    if not _CLUSTER_KERNELS:
        if "numba" not in sys.modules:
            return None
        try:
            import numba
        except ImportError:   # pragma: no cover - numba is installed with the package's model stack
            _CLUSTER_KERNELS.append(None)
            return None
        jit = numba.njit(cache=True, nogil=True, error_model="numpy")
        _CLUSTER_KERNELS.append((jit(_replicate_pass), jit(_centred_pass), jit(_add_values), jit(_to_uint16)))
    return _CLUSTER_KERNELS[0]


def _replicate_pass(x, norm, i, means, acc, acc_norm, count, count_norm, summed, pooled, rates, totals,
                    rate_sums, seen):   # pragma: no cover - compiled
    """One cluster's (R, S, K) replicates ``x`` (K >= 2): its mean TV over runs into ``means[:, i]``, its TVs (and
    their quotients by ``norm``) added to ``acc`` (``acc_norm``) with ``count`` (``count_norm``), the sums over runs
    into ``summed``, their TVs into ``pooled[:, i]``; the rates into ``rates``, the totals into ``totals`` and the
    sums of the rates over the replicates with their counts into ``rate_sums`` and ``seen``, for
    :func:`_centred_pass`. NaN where a total is not positive (no valid choice), left out of the sums."""
    r, s, k = x.shape
    inv = 1.0 / k
    for b in range(s):
        for j in range(k):
            rate_sums[b, j] = 0.0
            seen[b, j] = 0
    for a in range(r):
        for j in range(k):
            summed[a, j] = x[a, 0, j]
        for b in range(1, s):
            for j in range(k):
                summed[a, j] += x[a, b, j]
        m = 0.0
        n = 0
        for b in range(s):
            t = x[a, b, 0] + 0.0
            for j in range(1, k):
                t += x[a, b, j]
            totals[a, b] = t
            if t > 0:
                v = 0.0
                for j in range(k):
                    q = x[a, b, j] / t
                    rates[a, b, j] = q
                    rate_sums[b, j] += q
                    seen[b, j] += 1
                    d = q - inv
                    v += abs(d)
                v = 0.5 * v
                m += v
                n += 1
                acc[a, b] += v
                acc_norm[a, b] += v / norm
                count[a, b] += 1
                count_norm[a, b] += 1
        means[a, i] = m / n if n else np.nan
        t = summed[a, 0] + 0.0
        for j in range(1, k):
            t += summed[a, j]
        if t > 0:
            v = 0.0
            for j in range(k):
                d = summed[a, j] / t
                d = d - inv
                v += abs(d)
            pooled[a, i] = 0.5 * v
        else:
            pooled[a, i] = np.nan


def _centred_pass(sc, i, means, acc, count, rates, totals, rate_sums, seen):   # pragma: no cover - compiled
    """After :func:`_replicate_pass` on a cluster: the TVs of its centred rates scaled by ``sc``, averaged over runs
    into ``means[:, i]`` and added to ``acc`` with ``count``. A replicate-run without a valid choice is NaN: left out
    of the rates' means and of the sums."""
    r, s, k = rates.shape
    for b in range(s):
        for j in range(k):
            rate_sums[b, j] = rate_sums[b, j] / seen[b, j] if seen[b, j] else np.nan
    for a in range(r):
        m = 0.0
        n = 0
        for b in range(s):
            if totals[a, b] > 0:
                v = 0.0
                for j in range(k):
                    d = rates[a, b, j] - rate_sums[b, j]
                    d = d * sc
                    v += abs(d)
                v = 0.5 * v
                m += v
                n += 1
                acc[a, b] += v
                count[a, b] += 1
        means[a, i] = m / n if n else np.nan


def _to_uint16(x, out):   # pragma: no cover - compiled
    """``out[...] = x`` where every number of the (R, S, K) ``x`` is an integer from +0 to 65,535 (True), else False
    (``out`` unfinished)."""
    r, s, k = x.shape
    for a in range(r):
        for b in range(s):
            for j in range(k):
                v = x[a, b, j]
                if not (0.0 <= v <= 65535.0 and np.floor(v) == v) or (v == 0.0 and np.signbit(v)):
                    return False
                out[a, b, j] = np.uint16(v)
    return True


def _add_values(tv, tv_norm, i, means, acc, acc_norm, count, count_norm):   # pragma: no cover - compiled
    """One cluster's (R, S) values ``tv`` and ``tv_norm`` computed by NumPy: :func:`_replicate_pass`'s means and
    sums of them (one tool: ``tv_norm`` is 0 / 0, NaN, where ``tv`` is 0)."""
    r, s = tv.shape
    for a in range(r):
        m = 0.0
        n = 0
        for b in range(s):
            v = tv[a, b]
            if not np.isnan(v):
                m += v
                n += 1
                acc[a, b] += v
                count[a, b] += 1
            w = tv_norm[a, b]
            if not np.isnan(w):
                acc_norm[a, b] += w
                count_norm[a, b] += 1
        means[a, i] = m / n if n else np.nan


def tv_runs(counts: np.ndarray) -> np.ndarray:
    """Plug-in TV to uniform of (..., S, K) counts -> (..., S); NaN where a run has no valid choice.

    Examples
    --------
    >>> tv_runs(np.array([[3, 1], [0, 0]]))
    array([0.25,  nan])
    """
    k = counts.shape[-1]
    fused = _fused_abs_sum(counts, lambda d: np.subtract(d, 1.0 / k, out=d))
    if fused is not None:
        return 0.5 * fused
    dev = rates_from_counts(counts)    # a new array: the deviations in place (the same numbers, no temporaries)
    np.subtract(dev, 1.0 / k, out=dev)
    return 0.5 * sum_last(np.abs(dev, out=dev))


def _fused_abs_sum(counts, change: Callable[[np.ndarray], object]) -> np.ndarray | None:
    """``sum_last(np.abs(change(rates_from_counts(counts))))`` computed one tool at a time: the same divisions,
    changes and additions in the same order (so the same numbers) without the (..., K) rates and their passes.
    ``change`` acts in place on one tool's rates (...,); None (not computed) for more than
    :data:`._tv.SEQUENTIAL_MAX_K` tools or a slice without a valid choice (the NaN route of the rates)."""
    k = counts.shape[-1] if np.ndim(counts) else 0
    if not 1 <= k <= SEQUENTIAL_MAX_K:
        return None
    c = np.asarray(counts, dtype=float)
    total = sum_last(c)
    if not (total > 0).all():
        return None
    out = np.zeros(total.shape)          # 0.0 + the first tool's term, as sum_last and NumPy's identity start
    d = np.empty(total.shape)
    for j in range(k):
        np.divide(c[..., j], total, out=d)
        change(d)
        out += np.abs(d, out=d)
    return out


def nanmean(x: np.ndarray, axis: int) -> np.ndarray:
    """``np.nanmean`` without the warning of an all-NaN slice (its mean is NaN).

    An array without NaN takes ``np.mean``: the same sum divided by the same count, so the same numbers, without
    the copy and the count of valid values (issue 37: the replicates' means, once per group, metric and cluster).

    Examples
    --------
    >>> x = np.array([[1.0, np.nan], [3.0, 4.0]])
    >>> nanmean(x, 0), nanmean(x[:, :1], 0)
    (array([2., 4.]), array([2.]))
    """
    x = np.asarray(x)
    if x.dtype == np.float64 and x.size:
        # ``x.mean(axis)`` is this sum divided by the count; a NaN in ``x`` leaves a NaN in its sums (a NaN sum
        # without one, inf - inf, takes the NaN-aware route, which gives the same quotient): no pass to find NaN
        total = np.add.reduce(x, axis=axis)
        if not np.isnan(total).any():
            return total / x.shape[axis]
    elif x.dtype.kind == "f" and x.size and not np.isnan(x).any():
        return x.mean(axis=axis)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return np.nanmean(x, axis=axis)


def uniform_null_tv(gen: np.random.Generator, n_cs: Sequence[np.ndarray], ks: Sequence[float],
                    n_null: int) -> np.ndarray:
    """TV of ``n_null`` uniform-chooser draws per cluster and run: (n_null, C, S).

    ``n_cs[c]`` are cluster c's valid choices per run (S,) and ``ks[c]`` its K. The draws are those of
    ``gen.multinomial(n_cs[c], [1/K] * K, size=(n_null, S))`` cluster after cluster (the same stream).

    Examples
    --------
    >>> gen = np.random.default_rng(0)
    >>> tv = uniform_null_tv(gen, [np.array([10, 20]), np.array([5, 5]), np.array([8, 0])], [5, 5, 4], 3)
    >>> tv.shape, bool(np.isnan(tv[:, 2, 1]).all())
    ((3, 3, 2), True)
    """
    n_cs = [np.asarray(n, dtype=np.int64) for n in n_cs]
    parts = []
    for s in same_shape_runs([(int(k),) + n.shape for n, k in zip(n_cs, ks)], factor=max(1, n_null)):
        k = int(ks[s.start])
        n = np.stack(n_cs[s])                                           # (G, S)
        draws = gen.multinomial(n[:, None, :], np.full(k, 1.0 / k), size=(len(n), n_null, n.shape[1]))
        # the rates are draws / n (their sum is n by construction): rates_from_counts without summing them again
        total = np.where(n > 0, n, 1).astype(float)[:, None, :, None]
        with np.errstate(invalid="ignore"):
            tv = np.where(n[:, None, :] > 0, 0.5 * np.abs(draws / total - 1.0 / k).sum(-1), np.nan)
        parts.append(np.moveaxis(tv, 0, 1))                             # (G, N, S) -> (N, G, S)
    return parts[0] if len(parts) == 1 else np.concatenate(parts, axis=1)


#: The multinomial route's draws are taken on a compiled binary tree of the tools (:mod:`._null_kernel`, a new random
#: stream) when they count at least this many conditional binomials (``n_null`` x the valid cluster-runs' K - 1,
#: which is what ``Generator.multinomial`` draws, about 70 ns each): 40 tools in 10 clusters x 3 runs at 2,000
#: draws are 2.3M. Below it the multinomial draws are kept (the numbers of a seed stay those of earlier versions).
TREE_MIN_BINOMIALS = 1 << 21
#: Only clusters of at least this many tools count towards :data:`TREE_MIN_BINOMIALS` (a vector costs the
#: multinomial K - 1 binomials): studies of fewer tools keep their multinomial draws, hence their numbers, at any
#: size, and the compiled kernel's start-up (numba and LLVM, about 0.4 s of CPU once per process) is paid where a
#: group's draws save more than that.
TREE_MIN_K = 16
#: The most cumulative probabilities the tree's binomial tables may hold (12 bytes each: 48 MiB); more (tens of
#: thousands of valid choices per run) keep the multinomial draws. The k40 shape's tables hold about 1.4M.
TREE_MAX_ENTRIES = 1 << 22


def null_tv_draws(gen: np.random.Generator, n_cs: Sequence[np.ndarray], ks: Sequence[float],
                  n_null: int) -> np.ndarray:
    """The uniform chooser's TV draws (n_null, C, S) of :func:`uniform_null_tv` (NaN: no valid choice), or, when
    the clusters of :data:`TREE_MIN_K` tools or more would count :data:`TREE_MIN_BINOMIALS` binomials or more and
    the tree's tables fit in :data:`TREE_MAX_ENTRIES`, the same law drawn by :func:`tree_null_tv`.

    Examples
    --------
    >>> tv = null_tv_draws(np.random.default_rng(0), [np.array([10, 0])], [5], 4)
    >>> tv.shape, bool(np.isnan(tv[:, 0, 1]).all())
    ((4, 1, 2), True)
    """
    binomials = n_null * sum(int((np.asarray(n) > 0).sum()) * (int(k) - 1) for n, k in zip(n_cs, ks)
                             if int(k) >= TREE_MIN_K)
    if binomials < TREE_MIN_BINOMIALS:
        return uniform_null_tv(gen, n_cs, ks, n_null)
    from ._null_tree_numpy import table_entries  # imports nothing compiled

    entries = sum(table_entries(np.concatenate([np.ravel(n) for n, kk in zip(n_cs, ks) if int(kk) == k]), k)
                  for k in {int(k) for k in ks})
    if entries > TREE_MAX_ENTRIES:      # tables too large to hold (tens of thousands of choices per run)
        return uniform_null_tv(gen, n_cs, ks, n_null)
    return tree_null_tv(gen, n_cs, ks, n_null)


def tree_null_tv(gen: np.random.Generator, n_cs: Sequence[np.ndarray], ks: Sequence[float],
                 n_null: int) -> np.ndarray:
    """:func:`uniform_null_tv`'s law, (n_null, C, S), drawn on a binary tree of the tools
    (:func:`._null_kernel.tree_tv`: per draw K - 1 binomials, each from a cached table) from one seed taken from
    ``gen``: the same seed gives the same draws; the stream is not ``Generator.multinomial``'s.

    The draws are the compiled kernel's where numba is loaded, or where one call draws more than
    :data:`TREE_NUMPY_MAX_BINOMIALS` binomials or tabulates more than :data:`TREE_NUMPY_MAX_ENTRIES`; otherwise its
    NumPy port's (:func:`._null_tree_numpy.tree_tv`, the same numbers bit for bit), so that a study that needs numba
    nowhere else does not load it.

    Examples
    --------
    >>> tv = tree_null_tv(np.random.default_rng(0), [np.array([10, 20]), np.array([8, 0])], [5, 4], 3)
    >>> tv.shape, bool(np.isnan(tv[:, 1, 1]).all()), bool(np.isfinite(tv[:, 0]).all())
    ((3, 2, 2), True, True)
    """
    from ._null_tree_numpy import table_entries

    seed = int(gen.integers(0, 1 << 63))
    n = np.stack([np.asarray(x, dtype=np.int64) for x in n_cs])            # (C, S)
    sims = np.full((n_null,) + n.shape, np.nan)
    k_of = np.array([int(k) for k in ks])
    tree_tv = _tree_sampler(n_null * sum(int(((k_of == k)[:, None] & (n > 0)).sum()) * (int(k) - 1)
                                         for k in set(k_of.tolist())),
                            sum(table_entries(n[k_of == k], k) for k in set(k_of.tolist())))
    first = 0
    for k in sorted(set(k_of.tolist())):                                  # the cells of one K, in (C, S) order
        cells = np.flatnonzero(((k_of == k)[:, None] & (n > 0)).ravel())
        if cells.size:
            sims.reshape(n_null, -1)[:, cells] = tree_tv(n.ravel()[cells], k, n_null, seed, first)
            first += cells.size
    return sims


#: A call of :func:`tree_null_tv` that draws more binomials than this, or whose tables hold more than
#: :data:`TREE_NUMPY_MAX_ENTRIES` numbers, loads numba for the compiled kernel when the process has not loaded it.
#: The NumPy port costs 10-24 ns more a binomial (2.3-3.1x the kernel's CPU a call) and about 0.1 us more a table
#: entry (once per band and process: 0.15 s against 0.013 s at the k40 shape; ``analyses/null_tree_numpy_cost.json``),
#: and loading numba and the kernel about 0.6 s of CPU and 0.12 GiB (issue 37): 2^24 binomials are about 0.3 s more,
#: 2^21 entries about 0.25 s. Below both the port draws them: the same numbers, bit for bit.
TREE_NUMPY_MAX_BINOMIALS = 1 << 24
#: See :data:`TREE_NUMPY_MAX_BINOMIALS` (the k40 shape's tables hold about 1.5M).
TREE_NUMPY_MAX_ENTRIES = 1 << 21


def _tree_sampler(binomials: int, entries: int = 0) -> Callable[..., np.ndarray]:
    """``tree_tv`` of the compiled kernel (numba loaded, or ``binomials`` above :data:`TREE_NUMPY_MAX_BINOMIALS`
    or table ``entries`` above :data:`TREE_NUMPY_MAX_ENTRIES`) or of its NumPy port."""
    if "numba" in sys.modules or binomials > TREE_NUMPY_MAX_BINOMIALS or entries > TREE_NUMPY_MAX_ENTRIES:
        try:
            from ._null_kernel import tree_tv
        except ImportError:   # pragma: no cover - numba is installed with the package's model stack
            pass
        else:
            return tree_tv
    from ._null_tree_numpy import tree_tv as numpy_tree_tv

    return numpy_tree_tv


#: The exact-law route of the uniform null (:func:`uniform_null_means`) is taken when the multinomial route would
#: draw at least this many vectors (n_null x clusters x runs; about a second). Below it the multinomial draws are
#: kept, so a smaller study gives for a given seed the same numbers as before the exact route existed.
EXACT_MIN_DRAWS = 1 << 21
#: The largest per-run law computed by :func:`tv_uniform_pmf` (elementwise operations of its recursion, ~0.1 s);
#: larger (n, K) keep the multinomial draws, whose cost per row is small there (K draws for n rows).
EXACT_MAX_OPS = 1e8
#: The largest support of one cluster's law (its mean over runs); larger ones keep the multinomial draws.
EXACT_MAX_SUPPORT = 1 << 16


def _pmf_ops(n: int, k: int) -> float:
    """Elementwise operations of :func:`tv_uniform_pmf` (n, k)."""
    return (k - 1) * (n + 1) ** 2 * (n * (k - 1) + 1) / 2


@functools.lru_cache(maxsize=1024)
def tv_uniform_pmf(n: int, k: int) -> np.ndarray:
    """Exact law of the plug-in TV to uniform of ``Multinomial(n, [1/K] * K)`` counts.

    ``TV = 1/2 sum_j |x_j / n - 1/K| = sum_j max(K x_j - n, 0) / (n K)`` (the signed terms sum to zero), so TV
    lives on the lattice ``e / (n K)``, ``e = 0 .. n (K - 1)``. The counts are K independent Poisson(n / K)
    conditioned on their sum being n; a recursion over the tools on (running sum, running e) gives the joint law,
    and its row ``sum = n``, normalised, is the law of e. Sums of non-negative terms only (no cancellation):
    exact to floating-point rounding. Cost about ``(K - 1) n^3 (K - 1) / 2`` operations (:func:`_pmf_ops`).

    Returns ``p`` of length ``n (K - 1) + 1``: ``p[e] = P(TV = e / (n K))`` (read-only, cached).

    Examples
    --------
    >>> tv_uniform_pmf(2, 2)        # counts (2,0), (1,1), (0,2): TV 1/2, 0, 1/2
    array([0.5, 0. , 0.5])
    >>> from toolbias_stats.metrics import expected_tv_uniform
    >>> p = tv_uniform_pmf(30, 5)
    >>> bool(np.isclose(p @ (np.arange(p.size) / 150), expected_tv_uniform(30, 5), rtol=1e-12))
    True
    """
    if n < 1 or k < 1:
        raise ValueError(f"need n >= 1 and K >= 1, got n={n}, K={k}")
    if k == 1:
        return _frozen(np.ones(1))
    x = np.arange(n + 1)
    w = _poisson_pmf(x, n / k)
    g = np.maximum(k * x - n, 0)
    width = n * (k - 1) + 1
    f = np.zeros((n + 1, width))
    f[x, g] = w                                                  # one tool: (sum, e) of its own count
    live = [int(i) for i in x if w[i] > 0]
    for _ in range(k - 2):                                       # the tools but the last
        nxt = np.zeros_like(f)
        for i in live:
            nxt[i:, g[i]:] += w[i] * f[:n + 1 - i, :width - g[i]]
        f = nxt
    last = np.zeros(width)                                       # the last tool brings the sum to n
    for i in live:
        last[g[i]:] += w[i] * f[n - i, :width - g[i]]
    return _frozen(last / last.sum())


def _poisson_pmf(x: np.ndarray, mu: float) -> np.ndarray:
    """``scipy.stats.poisson.pmf(x, mu)`` for integers ``x >= 0`` and ``mu > 0``, by the same formula (the same
    numbers, a test checks it) without importing ``scipy.stats`` (0.5-1 s of start-up that ``bias`` does not
    otherwise need).

    Examples
    --------
    >>> _poisson_pmf(np.arange(3), 1.0).round(4)
    array([0.3679, 0.3679, 0.1839])
    """
    from scipy import special

    return np.exp(special.xlogy(x, mu) - special.gammaln(x + 1) - mu)


def _frozen(a: np.ndarray) -> np.ndarray:
    a.setflags(write=False)
    return a


def _cluster_law(ns: tuple, k: int) -> tuple[np.ndarray, np.ndarray] | None:
    """Exact law of a cluster's mean over runs of the uniform chooser's TV, the runs having ``ns`` valid choices
    (each > 0; the runs independent): ``(values, probabilities)``, or None when too large to hold.

    The mean is ``sum_s e_s (L / n_s) / (L K S)`` with ``L = lcm(ns)``: the laws of the runs are convolved on that
    integer lattice (exact), the values divided once at the end.

    Examples
    --------
    >>> v, p = _cluster_law((2, 2), 2)       # the mean of two TVs that are 0 or 1/2 with probability 1/2
    >>> v.tolist(), p.round(12).tolist()
    ([0.0, 0.25, 0.5], [0.25, 0.5, 0.25])
    """
    if any(_pmf_ops(n, k) > EXACT_MAX_OPS for n in set(ns)):
        return None
    lcm = math.lcm(*(int(n) for n in ns))                         # Python integers: no overflow
    if lcm * (k - 1) * len(ns) > 1 << 52:                         # the lattice's integers exact in int64 and float
        return None
    vals: np.ndarray = np.zeros(1, dtype=np.int64)
    probs: np.ndarray = np.ones(1)
    dense = len(ns) * lcm * (k - 1) < 1 << 24                      # the lattice small enough to bin densely
    for n in ns:
        p = tv_uniform_pmf(int(n), int(k))
        e = np.flatnonzero(p)
        outer = (vals[:, None] + (e * (lcm // n))[None, :]).ravel()
        weight = (probs[:, None] * p[e][None, :]).ravel()
        if dense:
            binned = np.bincount(outer, weights=weight)
            vals = np.flatnonzero(binned)
            probs = binned[vals]
        else:
            vals, inverse = np.unique(outer, return_inverse=True)
            probs = np.bincount(inverse.ravel(), weights=weight, minlength=vals.size)
        if vals.size > EXACT_MAX_SUPPORT:
            return None
    return vals / float(lcm * k * len(ns)), probs / probs.sum()


#: Buckets of a sampler's value table (:func:`_value_table`) per value of its law, and their bounds: with 16 buckets
#: per value about 2 % of the uniforms land in a bucket that holds a step of the CDF and need a search.
TABLE_PER_VALUE = 16
TABLE_MIN, TABLE_MAX = 1 << 12, 1 << 18


class Sampler(NamedTuple):
    """An exact law ready for inverse-CDF draws (:func:`inverse_cdf_values`): its ``values``, their cumulative
    probabilities ``cdf`` (the last one infinite), and for B buckets of [0, 1) the value of every uniform in the
    bucket (``table``, B + 1 entries) unless the bucket holds a step of ``cdf`` (``unsure``)."""

    values: np.ndarray
    cdf: np.ndarray
    table: np.ndarray
    unsure: np.ndarray


@functools.lru_cache(maxsize=1024)
def _cluster_sampler(ns: tuple, k: int) -> Sampler | None:
    """:func:`_cluster_law` as a :class:`Sampler`; cached, as the groups and metrics of a study share them (at most
    ~2.4 MiB each). None: no exact law."""
    law = _cluster_law(ns, k)
    if law is None:
        return None
    return _value_table(law[0], law[1])


def _value_table(values: np.ndarray, probs: np.ndarray) -> Sampler:
    """The :class:`Sampler` of a discrete law: B = 16 buckets per value (:data:`TABLE_PER_VALUE`, at least
    :data:`TABLE_MIN`, at most :data:`TABLE_MAX`); bucket b covers ``[b / B, (b + 1) / B)`` widened by a relative
    1e-12 on both sides (more than any rounding of ``u * B``), and is sure when no step of the CDF lies in it, i.e.
    ``searchsorted`` gives the same index at both of its widened ends."""
    cdf = np.cumsum(probs)
    cdf[-1] = np.inf                                           # rounding never leaves a uniform above them all
    buckets = min(max(TABLE_PER_VALUE * probs.size, TABLE_MIN), TABLE_MAX)
    edges = np.arange(buckets + 1) / buckets
    low = np.searchsorted(cdf, edges[:-1] * (1 - 1e-12), side="right")
    high = np.searchsorted(cdf, edges[1:] * (1 + 1e-12), side="right")
    table = values[np.r_[low, low[-1]]]                        # one entry more: u * B never indexes past it
    unsure = np.r_[low != high, True]
    return Sampler(values, cdf, _frozen(table), _frozen(unsure))


def inverse_cdf_values(u: np.ndarray, sampler: Sampler) -> np.ndarray:
    """``values[np.searchsorted(cdf, u, side="right")]`` of a :class:`Sampler` (the inverse-CDF draws of uniforms
    ``u``: value i with probability ``cdf[i] - cdf[i - 1]``): the value of each uniform's bucket, and a binary search
    only for the uniforms in a bucket holding a step of the CDF (about 2 %). The same values as the search for
    every uniform (they are the same indices), in a few vectorised passes (issue 37: 56M draws at 2,000 clusters).

    Examples
    --------
    >>> s = _value_table(np.array([0.0, 0.5, 1.0]), np.array([0.5, 0.25, 0.25]))
    >>> u = np.random.default_rng(0).random(10_000)
    >>> bool((inverse_cdf_values(u, s) == s.values[np.searchsorted(s.cdf, u, side="right")]).all())
    True
    """
    shape, u = np.shape(u), np.ravel(u)
    at = (u * (sampler.table.size - 1)).astype(np.intp)       # the bucket (below B for u < 1; entry B: a guard)
    out = sampler.table[at]
    fix = np.flatnonzero(sampler.unsure[at])
    if fix.size:
        out[fix] = sampler.values[np.searchsorted(sampler.cdf, u[fix], side="right")]
    return out.reshape(shape)


def study_exact_null(n_null: int, n_groups: int, n_clusters: int, n_runs: int) -> bool:
    """Whether a study's groups draw the uniform chooser's null from the exact laws of its cluster-runs even where
    a group alone is below :data:`EXACT_MIN_DRAWS` (the ``study_exact`` of :func:`uniform_null_means`): when the
    whole study's multinomial draws, ``n_null x groups x clusters x runs`` (an upper bound: every group with
    every cluster and run), would reach it. A study of many small groups (240 files, one model each) then costs
    what its rows cost, not groups x clusters multinomial vectors; a small study keeps the numbers of its seed.

    Examples
    --------
    >>> study_exact_null(2000, 7, 10, 3), study_exact_null(2000, 240, 10, 3)
    (False, True)
    """
    return n_null * n_groups * n_clusters * n_runs >= EXACT_MIN_DRAWS


def uniform_null_means(gen: np.random.Generator, n_cs: Sequence[np.ndarray], ks: Sequence[float], n_null: int,
                       missing: np.ndarray, study_exact: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """The uniform chooser's null of a group: ``(null_stat (N,), null_sims (N, C))``.

    ``null_sims[:, c]`` are ``n_null`` draws of cluster c's mean over its runs of the TV of uniform multinomial
    counts with its valid choices ``n_cs[c]`` (S,), ``null_stat`` of the mean over runs of the mean over clusters
    (the same draws); ``missing`` (C, S) marks the runs left out (no valid choice). The same law as
    ``uniform_null_tv`` followed by those means, by one of two routes:

    * multinomial (``uniform_null_tv``): ``n_null x C x S`` draws of K-vectors, a cost that follows clusters x runs;
      taken below :data:`EXACT_MIN_DRAWS` draws (the numbers of a given seed stay those of earlier versions);
    * exact law: each cluster's mean over runs is drawn from its exact law (:func:`_cluster_law`; clusters with the
      same valid choices share it) by inverse CDF (:func:`inverse_cdf_values`): ``n_null x C`` uniforms. Clusters
      whose law is too large to hold (many runs with different n) draw each run from its own law, or keep the
      multinomial draws when a run's law is too large too (large n with large K). ``null_stat`` is the weighted
      sum of the clusters' draws (:func:`_cluster_weights`). When the means over clusters do not factor through
      the clusters' means (a run missing in some clusters only), every cluster and run is drawn from its own exact
      law instead (:func:`_run_draws`, ``n_null x C x S`` uniforms), or by the multinomial route if a law is too
      large.

    ``study_exact`` (:func:`study_exact_null`: the study's draws reach :data:`EXACT_MIN_DRAWS` though this group's
    do not): every valid cluster-run is drawn from its own exact law (:func:`_run_means`, ``n_null x C x S``
    uniforms and no convolution over runs), or by the multinomial route if a run's law is too large.

    Examples
    --------
    >>> gen = np.random.default_rng(0)
    >>> n = [np.array([10, 20]), np.array([5, 5])]
    >>> stat, sims = uniform_null_means(gen, n, [5, 5], 4, np.zeros((2, 2), bool))
    >>> stat.shape, sims.shape, bool(np.allclose(stat, sims.mean(1)))
    ((4,), (4, 2), True)
    """
    n_cs = [np.asarray(n, dtype=np.int64) for n in n_cs]
    missing = np.asarray(missing, dtype=bool)
    valid = ~missing & (np.stack(n_cs) > 0) if n_cs else missing
    weights = _cluster_weights(valid)
    large = n_null * valid.size >= EXACT_MIN_DRAWS
    if study_exact and not large:
        means = _run_means(gen, n_cs, ks, n_null, valid)
        if means is not None:
            return means
    if large and weights is None:
        sims = _run_draws(gen, n_cs, ks, n_null, valid)
        if sims is not None:
            return nanmean(nanmean(sims, 1), 1), nanmean(sims, 2)
    if weights is None or not large:
        sims = null_tv_draws(gen, n_cs, ks, n_null)
        sims[:, missing] = np.nan
        return nanmean(nanmean(sims, 1), 1), nanmean(sims, 2)
    out = np.empty((len(n_cs), n_null))                         # a row per cluster: its draws contiguous
    out[~valid.any(1)] = np.nan                                 # every other row is drawn below (one pass)
    rest: list[int] = []
    for (k, ns), rows in _cluster_laws(n_cs, ks, valid):
        sampler = _cluster_sampler(ns, k)
        if sampler is None:
            rest.extend(rows.tolist())
            continue
        _draw_rows(gen, sampler, out, rows)
    if rest:   # clusters whose law is too large: each run from its own law, else multinomial draws
        rest.sort()
        sub_n, sub_k = [n_cs[c] for c in rest], [ks[c] for c in rest]
        sims = _run_draws(gen, sub_n, sub_k, n_null, valid[rest])
        if sims is None:
            sims = null_tv_draws(gen, sub_n, sub_k, n_null)
            sims[:, ~valid[rest]] = np.nan
        out[rest] = nanmean(sims, 2).T
    seen = np.flatnonzero(weights > 0)
    if seen.size == weights.size:       # every cluster: the same product without copying the draws
        return weights @ out, out.T
    return weights[seen] @ out[seen], out.T


#: Uniforms drawn and mapped to values at a time by :func:`_draw_rows` (512 KiB of float64: the temporaries of
#: :func:`inverse_cdf_values` stay in cache and are never fresh pages).
DRAW_CHUNK = 1 << 16


def _cluster_laws(n_cs: Sequence[np.ndarray], ks: Sequence[float], valid: np.ndarray) -> list[tuple[tuple, np.ndarray]]:
    """The clusters that share an exact law, ``[((K, sorted valid n), clusters ascending), ...]`` sorted by law:
    the clusters with a valid run grouped by K and the sorted valid choices of their runs (one ``np.unique`` of
    the (C, 1 + S) keys rather than a tuple per cluster).

    Examples
    --------
    >>> _cluster_laws([np.array([5, 4]), np.array([4, 5]), np.array([3, 0])], [5, 5, 5],
    ...               np.array([[True, True], [True, True], [True, False]]))
    [((5, (3,)), array([2])), ((5, (4, 5)), array([0, 1]))]
    """
    if not len(n_cs):
        return []
    which = np.flatnonzero(valid.any(1))
    keys = np.sort(np.where(valid[which], np.stack(n_cs)[which], -1), axis=1)   # -1: a run left out (n > 0)
    keys = np.column_stack([np.array([int(ks[c]) for c in which.tolist()], dtype=np.int64), keys])
    uniq, inverse = np.unique(keys, axis=0, return_inverse=True)
    inverse = np.ravel(inverse)
    order = np.argsort(inverse, kind="stable")                 # each law's clusters in ascending order
    bounds = np.cumsum(np.bincount(inverse, minlength=len(uniq)))[:-1]
    laws = {(row[0], tuple(v for v in row[1:] if v >= 0)): rows
            for row, rows in zip(uniq.tolist(), np.split(which[order], bounds))}
    return sorted(laws.items(), key=lambda item: item[0])


def _draw_rows(gen: np.random.Generator, sampler: Sampler, out: np.ndarray, rows: np.ndarray) -> None:
    """``out[rows] = inverse_cdf_values(gen.random((len(rows), N)), sampler)``, a few rows at a time
    (:data:`DRAW_CHUNK` uniforms): ``Generator.random`` fills its doubles one after another, so blocks of rows
    draw the same uniforms as one call (a test checks it), without the 32 MiB temporaries of 2,000 clusters.

    Examples
    --------
    >>> s = _value_table(np.array([0.0, 1.0]), np.array([0.5, 0.5]))
    >>> out = np.full((3, 4), np.nan)
    >>> _draw_rows(np.random.default_rng(0), s, out, np.array([0, 2]))
    >>> bool(np.isnan(out[1]).all()), bool(np.isin(out[[0, 2]], [0.0, 1.0]).all())
    (True, True)
    """
    n_null = out.shape[1]
    step = max(1, DRAW_CHUNK // max(1, n_null))
    buffer = np.empty((min(step, len(rows)), n_null))
    for i in range(0, len(rows), step):
        part = rows[i:i + step]
        block = buffer[:len(part)]
        gen.random(out=block)
        out[part] = inverse_cdf_values(block, sampler)


def _run_draws(gen: np.random.Generator, n_cs: Sequence[np.ndarray], ks: Sequence[float], n_null: int,
               valid: np.ndarray) -> np.ndarray | None:
    """(N, C, S) TVs of the uniform chooser, each valid (cluster, run) drawn from its exact law (NaN elsewhere):
    the route of :func:`uniform_null_means` when the group's mean does not factor through the clusters' means
    (``n_null x C x S`` uniforms). None when some run's law is too large to compute."""
    units: dict[tuple, list] = {}
    for c, s in zip(*np.nonzero(valid)):
        units.setdefault((int(ks[c]), int(n_cs[c][s])), []).append((c, s))
    if any(_pmf_ops(n, k) > EXACT_MAX_OPS for k, n in units):
        return None
    sims = np.full((n_null,) + valid.shape, np.nan)
    for (k, n), cells in sorted(units.items()):
        sampler = _cluster_sampler((n,), k)                  # one run's law: TV = e / (n K)
        if sampler is None:
            return None
        at = np.array(cells)
        sims[:, at[:, 0], at[:, 1]] = inverse_cdf_values(gen.random((n_null, len(cells))), sampler)
    return sims


def _run_means(gen: np.random.Generator, n_cs: Sequence[np.ndarray], ks: Sequence[float], n_null: int,
               valid: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """``(null_stat (N,), null_sims (N, C))`` of :func:`uniform_null_means` with every valid (cluster, run) drawn
    from its own exact law (the ``study_exact`` route): for each distinct (K, n), sorted, ``gen.random((cells,
    N))`` uniforms by inverse CDF, into a (C, S, N) array whose draws are contiguous, then the means over runs
    (per cluster) and over clusters then runs (the group) as sums and counts of the valid cells. None when some
    run's law is too large to compute (:data:`EXACT_MAX_OPS`).

    Examples
    --------
    >>> stat, sims = _run_means(np.random.default_rng(0), [np.array([10, 20]), np.array([5, 0])], [5, 5], 3,
    ...                         np.array([[True, True], [True, False]]))
    >>> stat.shape, sims.shape
    ((3,), (3, 2))
    """
    units: dict[tuple, list] = {}
    cs, ss = np.nonzero(valid)
    for c, s in zip(cs.tolist(), ss.tolist()):
        units.setdefault((int(ks[c]), int(n_cs[c][s])), []).append(c * valid.shape[1] + s)
    if any(_pmf_ops(n, k) > EXACT_MAX_OPS for k, n in units):
        return None
    draws = np.zeros((valid.size, n_null))                      # a row per (cluster, run); 0 where not valid
    for (k, n), cells in sorted(units.items()):
        sampler = _cluster_sampler((n,), k)                      # one run's law: TV = e / (n K)
        if sampler is None:
            return None
        draws[cells] = inverse_cdf_values(gen.random((len(cells), n_null)), sampler)
    cube = draws.reshape(valid.shape + (n_null,))                # (C, S, N)
    with np.errstate(invalid="ignore", divide="ignore"):
        per_cluster = cube.sum(1) / valid.sum(1)[:, None]       # (C, N); NaN: a cluster without a valid run
        per_run = cube.sum(0) / valid.sum(0)[:, None]           # (S, N); NaN: a run without a valid cluster
    seen = valid.any(0)
    return (per_run[seen].mean(0) if seen.any() else np.full(n_null, np.nan)), per_cluster.T


def _cluster_weights(valid: np.ndarray) -> np.ndarray | None:
    """Weights ``a`` (C,) with ``mean_s mean_c TV[c, s] = sum_c a[c] mean_s TV[c, s]`` over the ``valid`` (C, S)
    cells, or None when there are none (a run's cluster count differs between the runs of a cluster).

    Examples
    --------
    >>> _cluster_weights(np.ones((2, 3), bool))
    array([0.5, 0.5])
    >>> _cluster_weights(np.array([[True, True], [True, False]])) is None
    True
    """
    per_run = valid.sum(0)                                       # clusters in each run
    runs = int((per_run > 0).sum())
    if not runs:
        return None
    counts = np.broadcast_to(per_run, valid.shape)
    high = np.where(valid, counts, -1).max(1)                    # the clusters per run over a cluster's runs
    low = np.where(valid, counts, np.iinfo(counts.dtype).max).min(1)
    has = valid.any(1)
    if (has & (high != low)).any():
        return None
    out = np.zeros(valid.shape[0])
    out[has] = valid[has].sum(1) / (runs * high[has])            # integers: the same quotient as in Python
    return out


def uniform_expected_tv(n_cs: Sequence[np.ndarray], ks: Sequence[float]) -> np.ndarray:
    """``np.stack([expected_tv_uniform(n, K) for n, K in zip(n_cs, ks)])``: the uniform chooser's exact expected
    TV per cluster and run (C, S), one call per run of clusters with the same K.

    Examples
    --------
    >>> uniform_expected_tv([np.array([100, 0]), np.array([100, 100])], [5, 5]).round(4)
    array([[0.0794,    nan],
           [0.0794, 0.0794]])
    """
    parts = [expected_tv_uniform(np.stack(n_cs[s]), int(ks[s.start]))
             for s in same_shape_runs([(int(k),) + np.shape(n) for n, k in zip(n_cs, ks)])]
    return parts[0] if len(parts) == 1 else np.concatenate(parts)


def centred_null_tv(boot: Sequence[np.ndarray], scale: Sequence[float]) -> np.ndarray:
    """TV of the centred replicate rates, ``0.5 * sum |(p* - mean p*) * scale|`` per replicate, cluster and run.

    ``boot[c]`` are cluster c's replicate counts (R, S, K); returns (R, C, S) (NaN: no valid choice).

    Examples
    --------
    >>> b = np.array([[[1.0, 0.0]], [[0.0, 1.0]]])       # R = 2, S = 1, K = 2
    >>> centred_null_tv([b, b], [1.0, 2.0])[:, :, 0]
    array([[0.5, 1. ],
           [0.5, 1. ]])
    """
    def one(b, sc):
        per_tool = sc if np.ndim(sc) == 0 else np.asarray(sc)[..., 0]   # the scale of one tool's (R, G, S) rates

        def centre(d):
            np.subtract(d, nanmean(d, 0)[None], out=d)
            np.multiply(d, per_tool, out=d)

        fused = _fused_abs_sum(b, centre)
        if fused is not None:
            return 0.5 * fused
        rates = rates_from_counts(b)                                    # (R, G, S, K); new: changed in place
        np.subtract(rates, nanmean(rates, 0)[None], out=rates)
        np.multiply(rates, sc, out=rates)
        return 0.5 * sum_last(np.abs(rates, out=rates))

    if boot and boot[0].size >= LARGE_ARRAY:   # one cluster at a time: no stacked copy of large replicates
        return np.stack([one(b[:, None], float(sc)) for b, sc in zip(boot, scale)], axis=1)[:, :, 0]
    parts = []
    for s in same_shape_runs([b.shape for b in boot]):
        sc = np.asarray(scale[s], dtype=float)[None, :, None, None]
        parts.append(one(np.stack(boot[s], axis=1), sc))
    return parts[0] if len(parts) == 1 else np.concatenate(parts, axis=1)


def leave_one_out_tv(counts: Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Per-run TV of every cluster without each of its queries, and the cluster of each row.

    ``counts[i]`` are cluster i's per-query counts (Q_i, S, K). Returns ``(tv, cluster)``: ``tv`` (sum Q_i, S)
    is ``tv_runs(counts[i].sum(0) - counts[i][q])`` for the queries of cluster 0, then 1, ...; ``cluster`` the
    row's cluster index. The counts are integers, so their sums are exact in any order.

    Examples
    --------
    >>> tv, c = leave_one_out_tv([np.array([[[1.0, 0.0]], [[0.0, 1.0]]]), np.array([[[2.0, 0.0, 0.0]]])])
    >>> tv[:, 0], c
    (array([0.5, 0.5, nan]), array([0, 0, 1]))
    """
    tvs, which = [], []
    # same (S, K): one call for a run of clusters (its queries' rows together)
    for s in same_shape_runs([c.shape[1:] for c in counts], factor=max((len(c) for c in counts), default=1)):
        part = counts[s]
        sizes = np.array([len(c) for c in part])
        cat = np.concatenate(part)                            # (sum Q, S, K)
        idx = np.repeat(np.arange(len(part)), sizes)
        totals = np.add.reduceat(cat, np.r_[0, np.cumsum(sizes)[:-1]], axis=0) if len(cat) else cat
        tvs.append(tv_runs(totals[idx] - cat))
        which.append(idx + s.start)
    return np.concatenate(tvs), np.concatenate(which)


def jackknife_means(full: np.ndarray, loo: np.ndarray, cluster: np.ndarray) -> np.ndarray:
    """Leave-one-query-out values of the mean over runs of the mean over clusters.

    ``full`` (C, S) holds every cluster's per-run TV; ``loo`` (n, S) a cluster's per-run TV without one of its
    queries and ``cluster`` (n,) which cluster (see :func:`leave_one_out_tv`). Returns, per row,
    ``nanmean_s nanmean_c tv`` where ``tv`` is ``full`` with row ``cluster`` replaced by that row of ``loo``:
    from the clusters' sums and counts, O(n S) rather than the O(n C S) of building every ``tv``.

    Examples
    --------
    >>> full = np.array([[0.2, 0.4], [0.1, np.nan]])
    >>> loo = np.array([[0.0, 0.2], [0.3, 0.5], [np.nan, np.nan]])
    >>> jackknife_means(full, loo, np.array([0, 1, 1])).round(4)
    array([0.125, 0.35 , 0.3  ])
    """
    valid = np.isfinite(full)
    total = np.where(valid, full, 0.0).sum(0)                           # (S,)
    count = valid.sum(0)                                                # (S,)
    ok = np.isfinite(loo)
    s = total - np.where(valid, full, 0.0)[cluster] + np.where(ok, loo, 0.0)
    n = count - valid[cluster] + ok
    with np.errstate(invalid="ignore", divide="ignore"):
        per_run = np.where(n > 0, s / np.where(n > 0, n, 1), np.nan)    # (n, S)
    return nanmean(per_run, 1)


def percentile_cis(distributions: np.ndarray, confidence_level: float) -> tuple[np.ndarray, np.ndarray]:
    """:func:`percentile_ci` of every column of ``distributions`` (R, C): ``(low, high)``, each (C,).

    Columns without a NaN are computed in one ``np.quantile`` call (the same values as column by column); the
    others one by one, ignoring their NaN replicates.

    Examples
    --------
    >>> d = np.array([[0.1, 1.0], [0.2, np.nan], [0.3, 3.0]])
    >>> percentile_cis(d, 0.5)
    (array([0.15, 1.5 ]), array([0.25, 2.5 ]))
    """
    from .._resampling import percentile_ci

    d = np.asarray(distributions, dtype=float)
    alpha = 1 - confidence_level
    low, high = np.full(d.shape[1], np.nan), np.full(d.shape[1], np.nan)
    finite = np.isfinite(d).all(0)
    if finite.any() and len(d):
        low[finite], high[finite] = np.quantile(d[:, finite], [alpha / 2, 1 - alpha / 2], axis=0)
    for j in np.flatnonzero(~finite):
        low[j], high[j] = percentile_ci(d[:, j], confidence_level)
    return low, high
