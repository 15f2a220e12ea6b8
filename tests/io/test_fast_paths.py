"""Shortcuts of the read path (issue 23) give exactly what full validation gives.

``read_biasbusters`` builds the validated table itself when its own checks already guarantee it, and
``SelectionLog.concat`` does not validate every row of parts that are already valid against the same catalog. Each
shortcut has a switch; with it off, the table goes through ``SelectionLog.from_frame`` as before. Here both routes
must give identical tables (values, dtypes, column order), diagnostics and error messages.
"""

import json
import warnings

import numpy as np
import pandas as pd
import pytest

import toolbias_stats as tbs
from toolbias_stats.exceptions import SelectionLogError
from toolbias_stats.io import _selection_log
from toolbias_stats.io.readers import biasbusters
from toolbias_stats.io.readers.biasbusters import _int_records, read_biasbusters
from toolbias_stats.simulate import simulate_selection_log

FILES = ["api_selection_stats_chatgpt_no_func.json", "api_selection_stats_claude-2.json",
         "api_selection_stats_toolllama-3.json"]


def _both(monkeypatch, fn, *switches):
    """``fn()`` with the shortcut(s) on, then off (``_RECORDS``: without msgspec): (fast, reference)."""
    out = []
    for fast in (True, False):
        for module, name in switches:
            on = getattr(module, name) if name == "_RECORDS" else True
            monkeypatch.setattr(module, name, on if fast else (None if name == "_RECORDS" else False))
        out.append(fn())
    return out


def _same_log(a, b):
    pd.testing.assert_frame_equal(a.data, b.data, check_exact=True)
    assert list(a.data.columns) == list(b.data.columns)
    assert a.diagnostics == b.diagnostics
    pd.testing.assert_frame_equal(a.catalog.table, b.catalog.table)


def _error(fn):
    with pytest.raises(SelectionLogError) as info:
        fn()
    return str(info.value)


READER = ((biasbusters, "_FAST"),)
CONCAT = ((_selection_log, "_FAST_CONCAT"),)


class TestBiasBustersReader:
    @pytest.mark.parametrize("name", FILES)
    @pytest.mark.parametrize("options", [{}, {"position": "rotation"}])
    def test_bundled_files(self, monkeypatch, bb_catalog, bb_data_dir, name, options):
        meta = {"model": "m", "temperature": 0.5, "run": 2, "flag": True, "note": "x", "condition": "c"}
        fast, ref = _both(monkeypatch, lambda: read_biasbusters(bb_data_dir / "selection_logs" / name,
                                                                catalog=bb_catalog, meta=meta, **options), *READER)
        _same_log(fast, ref)
        assert fast.data["status"].value_counts()["no_call"] > 0      # absent qids are rows too

    def test_subset_of_clusters_and_missing_qids(self, monkeypatch, bb_catalog, bb_data_dir, tmp_path):
        raw = json.loads((bb_data_dir / "selection_logs" / FILES[1]).read_text())
        sub = [r for r in raw if r[1] in (2, 8)][::3]
        path = tmp_path / "sub.json"
        path.write_text(json.dumps(sub))
        fast, ref = _both(monkeypatch, lambda: read_biasbusters(path, catalog=bb_catalog, meta={"model": "m"},
                                                                clusters=["8", "2"]), *READER)
        _same_log(fast, ref)
        assert set(fast.data["cluster_id"]) == {"2", "8"} and len(fast.data) == 2 * 500

    def test_shared_columns_are_not_changed_through_a_log(self, bb_catalog, bb_data_dir):
        path = bb_data_dir / "selection_logs" / FILES[0]
        first = read_biasbusters(path, catalog=bb_catalog, meta={"model": "m"})
        reference = first.data.copy()
        first.data.loc[0, ["model", "cluster_id", "query_id", "ordering"]] = ["x", "2", "99", "a|b"]
        first.data.loc[1, "rotation"] = 4
        again = read_biasbusters(path, catalog=bb_catalog, meta={"model": "m"})
        pd.testing.assert_frame_equal(again.data, reference, check_exact=True)

    def test_design_keys_named_like_schema_columns_take_the_full_route(self, monkeypatch, bb_catalog, tmp_path):
        path = tmp_path / "one.json"
        path.write_text("[[507, 2, 3, 2]]")
        calls = []
        original = tbs.SelectionLog.from_frame.__func__
        monkeypatch.setattr(tbs.SelectionLog, "from_frame",
                            classmethod(lambda cls, *a, **k: calls.append(1) or original(cls, *a, **k)))
        read_biasbusters(path, catalog=bb_catalog, meta={"model": "m"})
        assert calls == []
        log = read_biasbusters(path, catalog=bb_catalog, meta={"model": "m", "chosen_rank": 3})
        assert calls == [1] and log.data["chosen_rank"].notna().sum() == 1

    def test_errors_found_by_validation_are_unchanged(self, monkeypatch, bb_catalog, tmp_path):
        path = tmp_path / "one.json"
        path.write_text("[[507, 2, 3, 2]]")
        fast, ref = _both(monkeypatch, lambda: _error(lambda: read_biasbusters(
            path, catalog=bb_catalog, meta={"model": "m", "run": 2**60})), *READER)
        assert fast == ref and "run: expected an integer" in fast

    @pytest.mark.parametrize("records", [
        [[1, 1, True, 1]], [[1, 1, 1.0, 1]], [[1, 1, "1", 1]], [[1, 1, 1]], [[1, 1, 1, 1, 1]], [{"qid": 1}],
        [[1, 1, 1, 2**62]], [[1, 1, 1, -2**62]], [[1, 1, 1, 10**30]], [[1, 1, 1, None]], [[1, 1, 1, 1], 5]])
    def test_records_the_array_shortcut_leaves_to_the_checks(self, records):
        assert _int_records(records) is None

    def test_plain_records_become_the_array(self):
        raw = [[1, 1, 1, 1], [2**62 - 1, 10, 5, -(2**62) + 1]]
        arr = _int_records(raw)
        assert arr.dtype == np.int64 and arr.tolist() == raw


BAD_FILES = [
    "[[1, 11, 1, 1]]", "[[1, 1, 6, 1]]", "[[1, 1, 1, 9]]", "[[1, 1, 1, 1], [1, 1, 2, 1]]", "[[501, 1, 1, 1]]",
    '[[1, 1, "a", 1]]', "[[1, 1, 1]]", "[[1000000000000000000000000000000, 1, 1, 1]]",
    "[[18446744073709551615, 1, 1, 1]]",
    "[[4611686018427387904, 1, 1, 1]]", "[[1, 1, true, 1]]", "[[1, 1, 1.0, 1]]", "[[1, 1, 1e0, 1]]", "[[1, 1, NaN, 1]]",
    "[[1, 1, 1, 1],\n [2, 1, 2", "[]", "{}", "[[1, 1, 1, 1]] x", "\ufeff[[1, 1, 1, 1]]", "[[1, 1, 01, 1]]",
    "[[1, 1, 1, 1],]", "[[7, 2, 1, 1]]", "",
]


class TestJsonDecoding:
    """msgspec decodes a clean file in one go; anything else goes to the standard library and the checks."""

    @pytest.mark.parametrize("text", BAD_FILES)
    def test_the_same_error_with_and_without_msgspec(self, monkeypatch, bb_catalog, tmp_path, text):
        path = tmp_path / "bad.json"
        path.write_text(text, encoding="utf-8")
        fast, ref = _both(monkeypatch, lambda: _error(lambda: read_biasbusters(path, catalog=bb_catalog,
                                                                               meta={"model": "m"})),
                          (biasbusters, "_RECORDS"))
        assert fast == ref and str(path) in fast

    def test_clean_files_decode_the_same(self, monkeypatch, bb_catalog, bb_data_dir, tmp_path):
        assert biasbusters._RECORDS is not None      # msgspec is a dependency
        texts = ["[[1, 1, 1, 1]]", "[[1, 1, 1, 1], [2, 1, 2, 1]]", " [[507, 2, 3, 2]]\n",
                 (bb_data_dir / "selection_logs" / FILES[0]).read_text()]
        for i, text in enumerate(texts):
            path = tmp_path / f"ok{i}.json"
            path.write_text(text)
            fast, ref = _both(monkeypatch, lambda p=path: read_biasbusters(p, catalog=bb_catalog, meta={"model": "m"}),
                              (biasbusters, "_RECORDS"))
            _same_log(fast, ref)

    def test_decoder_leaves_unclean_records_to_the_checks(self, tmp_path):
        for text in BAD_FILES:
            path = tmp_path / "x.json"
            path.write_text(text, encoding="utf-8")
            arr = biasbusters._decode_records(path)
            assert arr is None or (arr.ndim == 2 and arr.shape[1] == 4)


class TestConcat:
    def test_bundled_study(self, monkeypatch, bb_data_dir):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fast, ref = _both(monkeypatch, lambda: tbs.read_study(bb_data_dir / "study.toml").log, *READER, *CONCAT)
        _same_log(fast, ref)
        assert len(fast.data) == 105_500

    def test_simulated_parts_with_extra_columns(self, monkeypatch):
        sim = simulate_selection_log(n_clusters=3, n_queries=20, n_runs=2, p_no_call=0.2, rng=3).log
        d = sim.data
        parts = [tbs.SelectionLog.from_frame(d[d["run"] == 1].assign(temperature=0.5), sim.catalog),
                 tbs.SelectionLog.from_frame(d[d["run"] == 2].drop(columns=["ordering"]).assign(seed=7), sim.catalog)]
        fast, ref = _both(monkeypatch, lambda: tbs.SelectionLog.concat(parts), *CONCAT)
        _same_log(fast, ref)

    def test_weighted_and_unweighted_parts(self, monkeypatch):
        sim = simulate_selection_log(n_clusters=3, n_queries=20, n_runs=2, rng=4).log
        d = sim.data
        parts = [tbs.SelectionLog.from_frame(d[d["run"] == 1], sim.catalog).aggregate(),
                 tbs.SelectionLog.from_frame(d[d["run"] == 2], sim.catalog)]
        fast, ref = _both(monkeypatch, lambda: tbs.SelectionLog.concat(parts), *CONCAT)
        _same_log(fast, ref)
        assert fast.weighted and fast.n_attempts == len(d)

    @pytest.mark.parametrize("aggregate", [False, True])
    def test_the_same_attempt_in_two_parts(self, monkeypatch, aggregate):
        sim = simulate_selection_log(n_clusters=2, n_queries=10, rng=5).log
        part = sim.aggregate() if aggregate else sim
        twin = tbs.SelectionLog.from_frame(part.data.assign(source_file="other.csv"), sim.catalog)
        fast, ref = _both(monkeypatch, lambda: _error(lambda: tbs.SelectionLog.concat([part, twin])), *CONCAT)
        assert fast == ref and ("duplicate cell" if aggregate else "duplicate attempt") in fast

    def test_repeats_allowed_when_a_part_allows_them(self, monkeypatch):
        sim = simulate_selection_log(n_clusters=2, n_queries=10, rng=6).log
        twin = tbs.SelectionLog(sim.data.assign(source_file="other.csv"), sim.catalog,
                                {"other.csv": {"duplicates": "count"}})
        fast, ref = _both(monkeypatch, lambda: tbs.SelectionLog.concat([sim, twin]), *CONCAT)
        _same_log(fast, ref)
        assert len(fast.data) == 2 * len(sim.data)
