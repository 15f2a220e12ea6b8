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

import warnings
from collections.abc import Callable, Sequence

import numpy as np

from ._tv import expected_tv_uniform, rates_from_counts

__all__: list[str] = []   # private kernels of metrics/_bias.py


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
    for i in range(1, len(shapes) + 1):
        cap = max(1, max_size // max(1, factor * int(np.prod(shapes[start]))))
        if i == len(shapes) or shapes[i] != shapes[start] or i - start >= cap:
            out.append(slice(start, i))
            start = i
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
    parts = [fn(np.stack(arrays[s], axis=axis)) for s in same_shape_runs([a.shape for a in arrays])]
    return parts[0] if len(parts) == 1 else np.concatenate(parts, axis=axis)


def tv_runs(counts: np.ndarray) -> np.ndarray:
    """Plug-in TV to uniform of (..., S, K) counts -> (..., S); NaN where a run has no valid choice.

    Examples
    --------
    >>> tv_runs(np.array([[3, 1], [0, 0]]))
    array([0.25,  nan])
    """
    k = counts.shape[-1]
    return 0.5 * np.abs(rates_from_counts(counts) - 1.0 / k).sum(-1)


def nanmean(x: np.ndarray, axis: int) -> np.ndarray:
    """``np.nanmean`` without the warning of an all-NaN slice (its mean is NaN)."""
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
        rates = rates_from_counts(b)                                    # (R, G, S, K)
        return 0.5 * np.abs((rates - nanmean(rates, 0)[None]) * sc).sum(-1)

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
    from ._bootstrap import percentile_ci

    d = np.asarray(distributions, dtype=float)
    alpha = 1 - confidence_level
    low, high = np.full(d.shape[1], np.nan), np.full(d.shape[1], np.nan)
    finite = np.isfinite(d).all(0)
    if finite.any() and len(d):
        low[finite], high[finite] = np.quantile(d[:, finite], [alpha / 2, 1 - alpha / 2], axis=0)
    for j in np.flatnonzero(~finite):
        low[j], high[j] = percentile_ci(d[:, j], confidence_level)
    return low, high
