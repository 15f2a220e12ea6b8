"""design_study: counterbalanced orderings (issue 25). Balance is checked by counting the design table here,
independently of the design's own balance report."""

from __future__ import annotations

import itertools
import math
from collections import Counter

import numpy as np
import pandas as pd
import pytest

import toolbias_stats as tbs
from toolbias_stats.audit import custom_id, design_study, latin_rows, parse_custom_id


def _catalog(ks):
    recs = [{"cluster_id": str(c), "tool_id": f"t{c}_{j}"} for c, k in enumerate(ks, start=1) for j in range(k)]
    return tbs.ToolCatalog.from_records(recs)


def _queries(n, clusters):
    return {str(c): [f"query {i} of cluster {c}" for i in range(n)] for c in clusters}


def _position_counts(table):
    """{cluster: Counter((tool, position))} counted from the design table."""
    out = {}
    for cid, order in zip(table["cluster_id"], table["ordering"]):
        for p, t in enumerate(order.split("|")):
            out.setdefault(cid, Counter())[(t, p)] += 1
    return out


def _spread(counter, tools, positions):
    vals = [counter.get((t, p), 0) for t in tools for p in range(positions)]
    return max(vals) - min(vals)


class TestLatinRows:
    @pytest.mark.parametrize("k", range(2, 11))
    @pytest.mark.parametrize("kind", ["cyclic", "balanced"])
    def test_every_square_is_latin(self, k, kind):
        rows = latin_rows(k, kind)
        assert all(sorted(r) == list(range(k)) for r in rows)
        n_squares = len(rows) // k
        assert len(rows) == k * n_squares
        for s in range(n_squares):          # each Latin square: every tool once at every position
            block = rows[s * k:(s + 1) * k]
            for p in range(k):
                assert sorted(r[p] for r in block) == list(range(k))

    @pytest.mark.parametrize("k", range(2, 11))
    def test_williams_first_order_carryover_balance(self, k):
        # every ordered pair (a, b), a != b, is adjacent (a immediately before b) equally often
        rows = latin_rows(k, "balanced")
        pairs = Counter((r[i], r[i + 1]) for r in rows for i in range(k - 1))
        assert set(pairs) == {(a, b) for a in range(k) for b in range(k) if a != b}
        assert len(set(pairs.values())) == 1

    def test_all_and_pairs(self):
        assert len(latin_rows(4, "all")) == math.factorial(4) == len(set(latin_rows(4, "all")))
        pairs = latin_rows(4, "pairs")
        assert sorted(pairs) == sorted((i, j) for i in range(4) for j in range(4) if i != j)

    def test_unknown(self):
        with pytest.raises(ValueError, match="`orderings` must be one of"):
            latin_rows(3, "diagonal")


class TestBalance:
    """Acceptance: for cyclic and balanced designs each tool's count at each position differs by at most one
    within a cluster; K = 2..10, several query counts, complete and incomplete designs, 1 or 2 runs."""

    @pytest.mark.parametrize("kind", ["cyclic", "balanced"])
    @pytest.mark.parametrize("k", range(2, 11))
    def test_at_most_one_apart(self, kind, k):
        rows_in_square = len(latin_rows(k, kind))
        for n_queries in (1, 2, 3, 7, 10):
            for n_orderings in sorted({None, 1, 2, max(1, k - 1), rows_in_square}, key=lambda v: v or 0):
                if n_orderings is not None and n_orderings > rows_in_square:
                    continue
                for runs in (1, 2):
                    d = design_study(_catalog([k, k]), _queries(n_queries, [1, 2]), orderings=kind,
                                     n_orderings=n_orderings, runs=runs)
                    counts = _position_counts(d.table)
                    spread = _spread(counts["1"], [f"t1_{j}" for j in range(k)], k)
                    assert spread <= 1, (kind, k, n_queries, n_orderings, runs)
                    row = d.balance.set_index("cluster_id").loc["1"]
                    assert row["spread"] == spread and bool(row["balanced"])
                    n = rows_in_square if n_orderings is None else n_orderings
                    assert len(d.table[d.table.cluster_id == "1"]) == n_queries * n * runs

    @pytest.mark.parametrize("k", [2, 3, 5, 8])
    def test_complete_latin_square_per_query(self, k):
        d = design_study(_catalog([k]), _queries(4, [1]), orderings="cyclic")
        for _, sub in d.table.groupby(["query_id", "run"]):
            counts = Counter((t, p) for o in sub["ordering"] for p, t in enumerate(o.split("|")))
            assert set(counts.values()) == {1} and len(counts) == k * k
        assert d.balance["design"].tolist() == ["latin square"] and bool(d.balance["complete"].all())

    def test_incomplete_is_reported(self):
        d = design_study(_catalog([5]), _queries(7, [1]), orderings="balanced", n_orderings=2)
        b = d.balance.iloc[0]
        assert b["design"] == "balanced incomplete" and not b["complete"] and b["balanced"]

    def test_random_balance_is_reported_not_promised(self):
        d = design_study(_catalog([6]), _queries(5, [1]), orderings="random", rng=3)
        counts = _position_counts(d.table)["1"]
        spread = _spread(counts, [f"t1_{j}" for j in range(6)], 6)
        assert d.balance.iloc[0]["spread"] == spread and d.balance.iloc[0]["design"] == "random"
        if spread > 1:
            assert any("differ by more than one" in w for w in d.warnings)

    def test_same_seed_same_design(self):
        a = design_study(_catalog([5]), _queries(5, [1]), orderings="random", rng=11).table
        b = design_study(_catalog([5]), _queries(5, [1]), orderings="random", rng=11).table
        c = design_study(_catalog([5]), _queries(5, [1]), orderings="random", rng=12).table
        pd.testing.assert_frame_equal(a, b)
        assert not a["ordering"].equals(c["ordering"])

    def test_pairs_tournament(self):
        d = design_study(_catalog([4]), _queries(3, [1]), orderings="pairs")
        for _, sub in d.table.groupby("query_id"):
            pairs = [tuple(o.split("|")) for o in sub["ordering"]]
            assert len(pairs) == 12 and all((b, a) in pairs for a, b in pairs)
        counts = _position_counts(d.table)["1"]
        assert _spread(counts, [f"t1_{j}" for j in range(4)], 2) == 0
        assert d.settings["kind"] == "pairs"

    def test_all_permutations(self):
        d = design_study(_catalog([3]), _queries(2, [1]), orderings="all")
        for _, sub in d.table.groupby("query_id"):
            assert sorted(sub["ordering"]) == sorted("|".join(f"t1_{i}" for i in p)
                                                     for p in itertools.permutations(range(3)))


class TestChoiceItems:
    def test_options_balanced_per_item(self):
        items = {"item1": ["red", "green", "blue", "black"], "item2": ["yes", "no"]}
        d = design_study(items, orderings="cyclic", runs=2)
        assert set(d.table["cluster_id"]) == {"item1", "item2"}
        counts = _position_counts(d.table)
        assert _spread(counts["item1"], [f"item1::{i}" for i in range(1, 5)], 4) == 0
        assert d.settings["kind"] == "choice"
        assert d.settings["option_text"]["item1::3"] == "blue"

    def test_records(self):
        d = design_study([{"item_id": "a", "options": ["x", "y", "z"]}], orderings="balanced")
        assert len(d.table) == 6          # odd K: the Williams square and its mirror


class TestCustomIds:
    def test_unique_and_decodable(self, bb_catalog, bb_data_dir):
        d = design_study(bb_catalog, bb_data_dir / "queries.json", n_queries=3, runs=2)
        assert d.table["custom_id"].is_unique
        for rec in d.table.head(20).itertuples():
            parsed = parse_custom_id(rec.custom_id)
            assert parsed == {"cluster": rec.cluster_id, "query": rec.query_id, "ordering": rec.ordering_index,
                              "run": rec.run}
        assert d.table["custom_id"].str.fullmatch(r"[A-Za-z0-9_-]{1,64}").all()

    def test_unsafe_cluster_ids_get_index_keys(self):
        cat = tbs.ToolCatalog.from_records([{"cluster_id": "geo/coding", "tool_id": t} for t in "ab"])
        d = design_study(cat, {"geo/coding": ["q"]})
        assert d.table["custom_id"].tolist() == [custom_id("c1", "q0001", 1, 1), custom_id("c1", "q0001", 2, 1)]

    def test_parse_rejects(self):
        with pytest.raises(ValueError, match="not a design custom_id"):
            parse_custom_id("hello")


class TestInputs:
    def test_bundled_biasbusters_files(self, bb_data_dir):
        d = design_study(bb_data_dir / "clusters.json", bb_data_dir / "queries.json", n_queries=2)
        assert len(d) == 10 * 2 * 5
        # the sibling api_meta.json gives the authors' tool ids
        assert d.catalog.tools("1")[0] == "forward_geocode_for_geocode_forward_and_reverse"

    def test_manifest_as_catalog_and_queries(self, bb_data_dir):
        d = design_study(bb_data_dir / "study.toml", bb_data_dir / "study.toml", n_queries=1, clusters=["2"])
        assert set(d.table["cluster_id"]) == {"2"} and len(d) == 5

    def test_csv_queries(self, tmp_path):
        p = tmp_path / "q.csv"
        p.write_text("cluster_id,query\n1,find a\n1,find b\n", encoding="utf-8")
        d = design_study(_catalog([3]), p)
        assert d.table["query"].unique().tolist() == ["find a", "find b"]

    def test_csv_queries_missing_column(self, tmp_path):
        p = tmp_path / "q.csv"
        p.write_text("cluster,query\n1,find a\n", encoding="utf-8")
        with pytest.raises(tbs.SelectionLogError, match="cluster_id: required queries column is missing"):
            design_study(_catalog([3]), p)

    @pytest.mark.parametrize("kwargs, message", [
        ({"orderings": "spiral"}, "`orderings` must be one of"),
        ({"n_orderings": 4}, "`n_orderings` = 4 exceeds the 3 orderings"),
        ({"n_orderings": 0}, "`n_orderings` must be a positive integer"),
        ({"runs": 0}, "`runs` must be a positive integer"),
        ({"clusters": ["9"]}, r"unknown cluster\(s\) \['9'\]"),
        ({"target_width": 0.05}, "planning needs both"),
    ])
    def test_bad_arguments(self, kwargs, message):
        with pytest.raises(ValueError, match=message):
            design_study(_catalog([3]), _queries(2, [1]), **kwargs)

    def test_no_queries(self):
        with pytest.raises(ValueError, match="`queries` is required"):
            design_study(_catalog([3]))
        with pytest.raises(ValueError, match="no queries for cluster"):
            design_study(_catalog([3]), {"7": ["q"]})

    def test_all_refuses_large_k(self):
        with pytest.raises(ValueError, match="K <= 7 only"):
            design_study(_catalog([8]), _queries(1, [1]), orderings="all")


class TestPlanned:
    def test_sizes_come_from_plan_study(self):
        pilot = np.array([[0.4, 0.3, 0.2, 0.1], [0.25, 0.25, 0.25, 0.25]])
        d = design_study(_catalog([4, 4]), _queries(400, [1, 2]), target_width=0.05, pilot=pilot, rng=5,
                         plan_options={"n_draws": 300})
        ref = tbs.plan_study(pilot, target=0.05, target_kind="width", metrics=("delta_api", "delta_pos"),
                             n_draws=300, rng=np.random.default_rng(5))
        row = ref.cheapest.iloc[0]
        assert d.settings["plan"]["queries"] == int(row["queries"]) and d.settings["plan"]["target"]["value"] == 0.05
        assert d.settings["runs"] == int(row["runs"])
        assert d.settings["plan"]["orderings"] == int(row["rotations"])
        assert d.table.groupby("cluster_id")["query_id"].nunique().tolist() == [int(row["queries"])] * 2
        assert d.plan is not None and any("planned with plan_study" in w for w in d.warnings)

    def test_plan_with_explicit_sizes_is_an_error(self):
        with pytest.raises(ValueError, match="do not also give"):
            design_study(_catalog([4]), _queries(5, [1]), target_width=0.05, pilot=np.full((1, 4), 0.25),
                         n_queries=3)
