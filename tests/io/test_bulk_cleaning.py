"""Issue 37, 2,000 clusters: the catalog and the distinct cell combinations are cleaned in bulk, with the answers of
the one-at-a-time definitions.

- :class:`ToolCatalog` builds every cluster's tools in one pass over the sorted table and looks at the clusters one
  by one only where one ``api_index`` is given twice; the reference sorts each cluster's rows by ``api_index``.
- :func:`prepare_combos` cleans each distinct case once (``rotation`` only matters with a ``chosen_position``);
  the reference cleans every combination with :func:`_prepare_one`, as the package did before.
"""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest

from toolbias_stats.exceptions import SelectionLogError
from toolbias_stats.io._catalog import ToolCatalog
from toolbias_stats.io.readers import _spreadsheet as sp


def _reference_index(cat: ToolCatalog) -> dict:
    """Every cluster's tools in ``api_index`` order, one sorted frame per cluster (the per-cluster definition)."""
    return {c: list(sub.sort_values("api_index")["tool_id"]) for c, sub in cat.table.groupby("cluster_id", sort=False)}


def test_catalog_order_matches_the_per_cluster_sort():
    rng = np.random.default_rng(3)
    rows = []
    for c in ["10", "2", "01", "1", "b", "a"]:     # numeric ids sort numerically ("01" and "1" share a key)
        k = int(rng.integers(2, 7))
        rows += [{"cluster_id": c, "tool_id": f"t{c}_{j}", "api_index": int(i)}
                 for j, i in enumerate(rng.permutation(k) + 1)]
    rows = [rows[i] for i in rng.permutation(len(rows))]
    cat = ToolCatalog(pd.DataFrame(rows))
    assert {c: cat.tools(c) for c in cat.clusters} == _reference_index(cat)
    assert cat.clusters == list(_reference_index(cat))
    for c in cat.clusters:   # api_index 1..K is the catalog order
        sub = pd.DataFrame(rows).query("cluster_id == @c").sort_values("api_index")
        assert cat.tools(c) == sub["tool_id"].tolist()


_OWN_PLACE = "each tool of a cluster needs its own place in the catalog order"


def test_catalog_problems_named_as_before():
    table = pd.DataFrame({"tool_id": ["a", "b", "c", "d", "e|f", "g"], "cluster_id": ["2", "2", "1", "1", "3", "3"],
                          "api_index": [1, 1, 2, 2, 1, 2], "num_parameters": [-1, None, 2, -3, 0, 1]})
    with pytest.raises(SelectionLogError) as err:
        ToolCatalog(table, source="cat.csv")
    assert str(err.value).splitlines()[1:] == [
        "cat.csv:5:tool_id: tool id 'e|f' contains '|', which separates the tools of an ordering; rename the tool",
        "cat.csv:1:num_parameters: expected a number of parameters >= 0, got -1",
        "cat.csv:4:num_parameters: expected a number of parameters >= 0, got -3",
        f"cat.csv:api_index: cluster '2': api_index 1 is given to 2 tools (['a', 'b']); {_OWN_PLACE}",
        f"cat.csv:api_index: cluster '1': api_index 2 is given to 2 tools (['c', 'd']); {_OWN_PLACE}"]


def _reference_combos(combos, catalog, **opts) -> pd.DataFrame:
    """Every combination cleaned on its own (the definition :func:`prepare_combos` must equal)."""
    names, cols = sp._names_of(catalog), set(combos.columns)
    res = [sp._prepare_one(rec, cols, names, catalog, **opts) for rec in combos.to_dict(orient="records")]
    frame = pd.DataFrame({k: [r[k] for r in res] for k in sp._NEW_COLUMNS}, index=combos.index)
    frame["position_new"] = pd.array(frame["position_new"], dtype="Int64")
    for c in ("cluster_new", "ordering_new", "tool_new", "status_new", "raw_new", "problem_column", "problem"):
        frame[c] = frame[c].astype("string")
    return frame


_CATALOG = ToolCatalog.from_records([{"cluster_id": c, "tool_id": t} for c, tools in
                                     (("1", ["a_api", "b_api", "c"]), ("2", ["x", "y", "1", "True"])) for t in tools])
#: cell values of every kind: ids as text, int, float and bool (1, 1.0 and True must stay apart), missing values,
#: names typed by hand, lists as text and as Python lists (unhashable)
_VALUES = {"cluster_id": ["1", "2", 1, 2.0, None, np.nan, "3", True, pd.NA],
           "ordering": [None, "a_api|b_api|c", "c|a_api|b_api", "x|y|1|True", '["x","y"]', "A_API, b_api,c", "q|r",
                        ["x", "y"]],
           "rotation": [1, 2, 3, 1.0, "2", None, 9, True],
           "chosen_tool": ["a_api", " B_API", "c", "x", 1, 1.0, True, "True", None, np.nan, "", "zzz", pd.NA],
           "status": ["ok", "no_call", "unknown_tool", None, "weird"],
           "chosen_position": [1, 2, 3, 2.0, None, "1", True]}


@pytest.mark.parametrize("n_keys", range(1, 7))
def test_prepare_combos_equals_one_at_a_time(n_keys):
    rng = np.random.default_rng(n_keys)
    checked = 0
    for keys in itertools.combinations(list(_VALUES), n_keys):
        n = int(rng.integers(1, 40))
        combos = pd.DataFrame({k: [_VALUES[k][i] for i in rng.integers(0, len(_VALUES[k]), n)] for k in keys},
                              dtype=object)
        combos["n"] = 1
        combos.index += 5     # the result keeps the combinations' index
        for opts in ({"positions": "error", "own_format": False}, {"positions": "recompute", "own_format": True},
                     {"positions": "recompute", "own_format": False}):
            pd.testing.assert_frame_equal(sp.prepare_combos(combos, _CATALOG, **opts),
                                          _reference_combos(combos, _CATALOG, **opts))
            checked += 1
    assert checked >= 3


def test_rotation_read_only_with_a_position(monkeypatch):
    calls = []
    real = sp._prepare_one
    monkeypatch.setattr(sp, "_prepare_one", lambda rec, *a, **k: calls.append(rec) or real(rec, *a, **k))
    combos = pd.DataFrame({"cluster_id": ["1"] * 6, "rotation": [1, 2, 3, 1, 2, 3],
                           "chosen_tool": ["a_api"] * 3 + ["b_api"] * 3, "status": ["ok"] * 6, "n": 1}, dtype=object)
    out = sp.prepare_combos(combos, _CATALOG)
    assert len(calls) == 2 and out["tool_new"].tolist() == ["a_api"] * 3 + ["b_api"] * 3
    calls.clear()
    combos["chosen_position"] = [1, 3, 2, 2, 1, 3]      # each rotation's list decides the position of the pick
    out = sp.prepare_combos(combos, _CATALOG)
    assert len(calls) == 6
    assert out["problem"].isna().all()
    bad = combos.assign(chosen_position=[1, 1, 1, 2, 2, 2])
    assert sp.prepare_combos(bad, _CATALOG)["problem"].notna().tolist() == [False, True, True, False, True, True]
