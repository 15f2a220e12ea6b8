"""The batched per-group tensors (``_group_tensors``) equal the per-cluster ones (``_cluster_tensors``) bit for bit:
clusters of different K, a cluster with no valid run, weighted (integer) counts, rows without a query id, lists of
different lengths (the warning, in the clusters' order), and the bias outputs through both paths."""

import types
import warnings

import numpy as np
import pandas as pd
import pytest

from toolbias_stats._schema import STATUSES
from toolbias_stats.metrics._bias_tensors import _cluster_tensors, _Columns, _group_tensors


class _Catalog:
    def __init__(self, sizes):
        self.sizes = sizes
        self.clusters = list(sizes)

    def tools(self, c):
        return [f"{c}_t{i}" for i in range(self.sizes[c])]


def _table(seed=0):
    """A count table: clusters of K = 2, 3, 3, 5, 2, rows per (query, run), weighted counts, some rows with no query
    id, a cluster with no valid choice, and one shown lists of two lengths."""
    rng = np.random.default_rng(seed)
    sizes = {"a": 2, "b": 3, "c": 3, "d": 5, "e": 2, "f": 3}
    k_max = max(sizes.values())
    rows = []
    for c, k in sizes.items():
        for q in rng.choice(12, size=rng.integers(1, 8), replace=False):
            for run in (1, 2, 3):
                if rng.random() < 0.2 and c != "f":
                    continue
                tool = np.zeros(k_max, dtype=np.int64)
                pos = np.zeros(k_max, dtype=np.int64)
                if c != "e":   # e: no valid choice in any run
                    tool[:k] = rng.integers(0, 4, size=k)                  # weighted: counts above 1
                    if c != "c":                                           # c: no position known
                        pos[:k] = rng.integers(0, 3, size=k)
                        pos[0] += c == "f"                                   # f: a known position in every row
                n_cand = k + (1 if c == "f" and run == 2 else 0)          # f: lists of two lengths
                query = None if (c == "b" and q % 3 == 0) else f"q{q:02d}"   # b: some rows without a query id
                row = {"query_id": query, "cluster_id": c, "run": run, "n_candidates": n_cand}
                row.update({f"tool_{i + 1}": tool[i] for i in range(k_max)})
                row.update({f"pos_{i + 1}": pos[i] for i in range(k_max)})
                row.update({f"n_{s}": int(tool.sum()) if s == "ok" else 1 for s in STATUSES})
                rows.append(row)
    table = pd.DataFrame(rows).sample(frac=1.0, random_state=seed).reset_index(drop=True)
    return table, _Catalog(sizes)


def _both(table, catalog):
    columns = _Columns(table)
    runs = np.sort(table["run"].unique())
    code = columns.cluster_code
    clusters = [c for c in catalog.clusters if c in set(table["cluster_id"])]
    parts = [np.flatnonzero(code == columns.cluster_ids.index(c)) for c in clusters]
    one_caught, all_caught = [], []
    with warnings.catch_warnings(record=True) as one_w:
        warnings.simplefilter("always")
        one = [_cluster_tensors(columns, p, catalog, c, runs, one_caught, {"g": 1}) for c, p in zip(clusters, parts)]
    with warnings.catch_warnings(record=True) as all_w:
        warnings.simplefilter("always")
        batched, seen = _group_tensors(columns, parts, catalog, clusters, runs, all_caught, {"g": 1})
    return clusters, parts, columns, one, batched, seen, (one_caught, [str(w.message) for w in one_w]), \
        (all_caught, [str(w.message) for w in all_w])


def _same(x, y):
    return (x is None and y is None) or (x is not None and y is not None and x.k == y.k
                                          and x.counts.dtype == y.counts.dtype and x.counts.shape == y.counts.shape
                                          and x.counts.tobytes() == y.counts.tobytes())


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_batched_tensors_equal_per_cluster(seed):
    table, catalog = _table(seed)
    clusters, parts, columns, one, batched, seen, one_msgs, all_msgs = _both(table, catalog)
    assert len(clusters) == 6
    for c, part, (a1, p1, t1), (a2, p2, t2), s in zip(clusters, parts, one, batched, seen):
        assert _same(a1, a2), c
        assert _same(p1, p2), c
        assert t1 == t2
        assert s == (int(columns.pos[part].sum()) > 0)
    assert one_msgs == all_msgs
    # the cases the fixture is built to hold
    got = dict(zip(clusters, batched))
    assert got["e"][0].counts.sum() == 0 and got["e"][1] is None          # no valid choice
    assert got["c"][1] is None and got["c"][0].counts.sum() > 0            # no position known
    assert got["f"][1] is None and any("cluster f" in m for m in all_msgs[0])   # lists of two lengths
    assert got["d"][0].k == 5 and got["a"][0].k == 2 and got["a"][0].counts.max() > 1   # K, weights


def test_batched_tensors_unknown_queries_one_pseudo_query():
    """Rows without a query id count in the cluster's first query cell, as the per-cluster function does."""
    table, catalog = _table(0)
    table.loc[table["cluster_id"] == "d", "query_id"] = None
    clusters, _, _, one, batched, *_ = _both(table, catalog)
    d = dict(zip(clusters, batched))["d"][0]
    assert d.counts.shape[0] == 1
    for (a1, p1, _), (a2, p2, _) in zip(one, batched):
        assert _same(a1, a2) and _same(p1, p2)


def test_cluster_stats_rows_at_once_equal_row_by_row():
    """``_Metric._cluster_stats``: the clusters valid in every run reduced together give each row's own mean, bit for
    bit; rows with a NaN run (no valid choice there) or no valid run at all keep the row-by-row value."""
    from toolbias_stats.metrics._bias_engine import _Metric

    rng = np.random.default_rng(5)
    for s in (1, 2, 3, 8, 9, 17):
        obs = rng.random((500, s))
        obs[rng.random((500, s)) < 0.1] = np.nan
        obs[7] = np.nan

        stub = types.SimpleNamespace(per_cluster_obs=obs, clusters=list(range(len(obs))))
        got = _Metric._cluster_stats.func(stub)
        want = np.array([row[np.isfinite(row)].mean() if np.isfinite(row).any() else np.nan for row in obs])
        assert got.tobytes() == want.tobytes()
        assert np.isnan(got[7])
