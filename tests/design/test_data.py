"""The per-cell arrays of a pilot (design/_data.py) against an independent row-by-row construction."""

import dataclasses
import warnings

import numpy as np
import pandas as pd
import pytest

from toolbias_stats.design._data import pilot_groups
from toolbias_stats.simulate import simulate_selection_log


def _pilot():
    """Two models; failed attempts (no valid choice); some attempts absent; one query missing in one run."""
    logs = [simulate_selection_log(n_clusters=3, n_tools=4, n_queries=6, n_runs=2, p_no_call=0.2, model=m,
                                   rng=i).log for i, m in enumerate(["m1", "m2"])]
    d = pd.concat([lg.data for lg in logs], ignore_index=True)
    drop = np.random.default_rng(5).choice(len(d), 25, replace=False)       # absent attempts
    d = d.drop(index=drop).reset_index(drop=True)
    return dataclasses.replace(logs[0], data=d)


def _expected_cluster(rows, tools, k_pos):
    """Indicator arrays from the rows one at a time (levels sorted as the design's axes)."""
    queries, runs, rots = (sorted(rows[c].unique()) for c in ("query_id", "run", "rotation"))
    x_api = np.zeros((len(queries), len(runs), len(rots), len(tools)))
    x_pos = np.zeros((len(queries), len(runs), len(rots), k_pos))
    for r in rows.itertuples(index=False):
        cell = (queries.index(r.query_id), runs.index(r.run), rots.index(r.rotation))
        if r.status == "ok" and r.chosen_tool in tools:
            x_api[cell + (tools.index(r.chosen_tool),)] = 1.0
        if r.status == "ok" and not pd.isna(r.chosen_position):
            x_pos[cell + (int(r.chosen_position) - 1,)] = 1.0
    return queries, runs, rots, x_api, x_pos


def test_log_layout_arrays_match_a_row_by_row_construction():
    log = _pilot()
    groups, layout, by = pilot_groups(log, "model")
    assert (layout, by) == ("log", ["model"])
    assert [g.keys for g in groups] == [{"model": "m1"}, {"model": "m2"}]
    d = log.data
    for g in groups:
        sub = d[d["model"] == g.keys["model"]]
        status = sub["status"].value_counts()
        assert g.rows["total"] == len(sub) and g.rows["used"] == int(status.get("ok", 0))
        assert sum(g.rows["excluded"].values()) == len(sub) - g.rows["used"] > 0
        assert [cd.cluster for cd in g.clusters] == [c for c in log.catalog.clusters if c in set(sub["cluster_id"])]
        for cd in g.clusters:
            rows = sub[sub["cluster_id"] == cd.cluster]
            queries, runs, rots, x_api, x_pos = _expected_cluster(rows, list(log.catalog.tools(cd.cluster)),
                                                                  cd.k_pos)
            assert (cd.queries, cd.runs, cd.rotations) == (queries, runs, rots)
            np.testing.assert_array_equal(cd.x_api, x_api)
            np.testing.assert_array_equal(cd.o_api, x_api.sum(-1))
            np.testing.assert_array_equal(cd.x_pos, x_pos)
            assert cd.n == 1 and cd.n_absent == x_api[..., 0].size - len(rows)
    assert sum(cd.n_absent for g in groups for cd in g.clusters) == 25


def test_a_group_with_repeated_attempts_is_counted_and_the_others_keep_the_log_layout():
    log = _pilot()
    d = log.data
    extra = d[d["model"] == "m2"].iloc[:3]                 # the same (query, run, rotation) twice in m2
    log2 = dataclasses.replace(log, data=pd.concat([d, extra], ignore_index=True))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        groups, layout, _ = pilot_groups(log2, ["model"])
    assert layout == "mixed"
    assert [(g.keys["model"], g.layout) for g in groups] == [("m1", "log"), ("m2", "counts")]
    assert groups[1].rows["total"] == (d["model"] == "m2").sum() + 3


def test_no_grouping_and_unknown_input():
    log = _pilot()
    one = dataclasses.replace(log, data=log.data[log.data["model"] == "m1"].reset_index(drop=True))
    groups, layout, by = pilot_groups(one, None)
    assert (len(groups), layout, by, groups[0].keys) == (1, "log", [], {})
    with pytest.warns(UserWarning, match="vary within"):       # both models pooled: attempts repeat -> counts
        groups, layout, _ = pilot_groups(log, None)
    assert (len(groups), layout, groups[0].rows["total"]) == (1, "counts", len(log.data))
    with pytest.raises(TypeError, match="must be a SelectionLog"):
        pilot_groups(3.5, "model")
