"""The cheaper passes of ``validate`` (issue 37): the same values and messages as the passes they replace."""

from __future__ import annotations

import copy

import numpy as np
import pandas as pd
import pytest

from toolbias_stats.exceptions import SelectionLogError
from toolbias_stats.io import SelectionLog, ToolCatalog
from toolbias_stats.io._counts import finalize_query_orderings
from toolbias_stats.io._selection_log import _pair_codes
from toolbias_stats.io.readers import _clusters, _toolcalls
from toolbias_stats.simulate import simulate_selection_log


def _column(rng, n, values, na=0.1, dtype="string"):
    out = pd.array(rng.choice(values, size=n).tolist(), dtype=dtype)
    out[rng.random(n) < na] = pd.NA
    return pd.Series(out)


@pytest.mark.parametrize("seed", range(4))
def test_pair_codes_give_each_row_its_own_combination(seed):
    """Each masked row's code points at its own values; the combinations are distinct and all present."""
    rng = np.random.default_rng(seed)
    n = 500
    a = _column(rng, n, ["c1", "c2", "c3"])
    b = _column(rng, n, ["x|y", "y|x", "z", "x|y|z"])
    c = _column(rng, n, [1, 2, 3], dtype="Int64")
    mask = rng.random(n) < 0.7
    for cols in ((a, b), (a, b, c)):
        distinct, codes = _pair_codes(cols[0], cols[1], mask, *cols[2:])
        rows = [tuple(col.iloc[i] for col in cols) for i in np.flatnonzero(mask)]
        combos = list(zip(*distinct))
        assert len(codes) == len(rows)
        for row, k in zip(rows, codes.tolist()):
            got = combos[k]
            assert all((g is pd.NA and r is pd.NA) or g == r for g, r in zip(got, row))
        keys = [tuple("<NA>" if v is pd.NA else v for v in t) for t in combos]
        assert len(set(keys)) == len(keys) == len({tuple("<NA>" if v is pd.NA else v for v in r) for r in rows})


def test_pair_codes_of_an_empty_mask():
    a = pd.Series(pd.array(["a", "b"], dtype="string"))
    distinct, codes = _pair_codes(a, a, np.zeros(2, dtype=bool))
    assert distinct == ([], []) and len(codes) == 0


def _catalog():
    return ToolCatalog.from_records([{"tool_id": t, "cluster_id": "c", "api_index": i}
                                     for i, t in enumerate(["a", "b", "c"], start=1)], source="<test>")


def test_bad_orderings_and_tools_are_named_row_by_row_in_order():
    """Problems of repeated bad combinations are reported once per row, in row order (as before)."""
    frame = pd.DataFrame({
        "cluster_id": ["c"] * 6, "query_id": [f"q{i}" for i in range(6)],
        "ordering": ["a|b|c", "a|a|b", "b|c|a", "a|a|b", "c|b|a", "a|b|c"],
        "status": ["ok"] * 6, "chosen_tool": ["a", "a", "b", "a", "zz", "zz"]})
    with pytest.raises(SelectionLogError) as err:
        SelectionLog.from_frame(frame, _catalog(), source="f.csv")
    text = str(err.value)
    assert text.index("f.csv:2") < text.index("f.csv:4")
    assert "f.csv:2:ordering" in text and "f.csv:4:ordering" in text and "f.csv:1:ordering" not in text
    ok = frame.drop(index=[1, 3]).reset_index(drop=True)
    with pytest.raises(SelectionLogError) as err:
        SelectionLog.from_frame(ok, _catalog(), source="f.csv")
    text = str(err.value)
    assert "f.csv:3:chosen_tool" in text and "f.csv:4:chosen_tool" in text and text.index("f.csv:3") < text.index(
        "f.csv:4")


def test_ranks_from_positions_and_missing_positions():
    """Ranks derived per distinct (cluster, list, position), an unknown position gives no rank."""
    frame = pd.DataFrame({
        "cluster_id": ["c"] * 4, "query_id": ["q1", "q2", "q3", "q4"],
        "ordering": ["c|x|a|b", "c|x|a|b", "b|a|c", "b|a|c"], "status": ["ok", "ok", "ok", "no_call"],
        "chosen_tool": ["a", "b", "c", None]})
    cat = _catalog()
    log = SelectionLog.from_frame(frame, cat, source="f.csv")
    assert log.data["chosen_position"].tolist()[:3] == [3, 4, 3]
    assert log.data["chosen_rank"].tolist()[:3] == [2, 3, 3]
    assert log.data["chosen_rank"].isna().tolist() == [False, False, False, True]


def test_query_orderings_summed_on_first_use():
    """The pandas engine's query_orderings equal the eager sum, survive a deep copy, and are kept."""
    log = simulate_selection_log(n_clusters=2, n_queries=6, rng=3).log
    counts = log.counts()
    assert callable(counts.__dict__["_lazy_query_orderings"])
    d = log.data
    ok = (d["status"] == "ok").to_numpy()
    sel = d.loc[ok, list(log.design_columns) + ["cluster_id", "query_id", "ordering"]].copy()
    from toolbias_stats.io._counts import tool_index

    sel["api_index"] = tool_index(log.catalog, d["cluster_id"].to_numpy(object), d["chosen_tool"].to_numpy(object))[ok]
    sel["chosen_rank"] = d.loc[ok, "chosen_rank"].to_numpy(dtype=float, na_value=0).astype(np.int64)
    sel["count"] = 1
    ref = finalize_query_orderings(sel, log.design_columns)
    again = copy.deepcopy(counts)
    d.loc[:, "query_id"] = "edited after counting"          # the counts keep what was counted (copy-on-write)
    pd.testing.assert_frame_equal(counts.query_orderings, ref)
    assert counts.query_orderings is counts.query_orderings        # summed once
    pd.testing.assert_frame_equal(again.query_orderings, ref)
    assert log.counts(level="cluster").query_orderings is None


def test_offered_keeps_the_first_request_of_each_list():
    """What cluster inference reads: the first request of each distinct list, lists or tuples alike, and the
    inferred catalog is the one every request gives."""
    tools = [("a", "b"), ("b", "a"), ("a", "b"), None, (), ("c",), ("b", "a")]
    cols = _toolcalls.AttemptColumns.from_attempts(
        [_toolcalls.Attempt("f", i + 1, None if t is None else list(t), "no_call") for i, t in enumerate(tools)])
    expected = [(["a", "b"], "f", 1), (["b", "a"], "f", 2), (["c"], "f", 6)]
    assert cols.offered() == expected
    cols.tools = tools                                   # the batch reader's tuples
    assert cols.offered() == expected
    every = [(None if t is None else list(t), "f", i + 1) for i, t in enumerate(tools)]
    assert _clusters.infer_catalog(expected).table.equals(_clusters.infer_catalog(every).table)
