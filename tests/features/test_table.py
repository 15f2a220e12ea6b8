"""ToolFeatures: computed features on the vendored catalog, centring, reading user feature tables."""

import json
import re
import warnings

import numpy as np
import pandas as pd
import pytest

import toolbias_stats as tbs
from toolbias_stats.exceptions import DegenerateDataWarning, SelectionLogError
from toolbias_stats.features import PAPER_FEATURES, ToolFeatures, center_by_cluster, read_feature_table, tool_features

TOOLBENCH = ("toolbench_tool_description", "toolbench_api_description")


@pytest.fixture(scope="module")
def own(bb_study):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DegenerateDataWarning)
        return tool_features(bb_study, encoder=False, text_columns=TOOLBENCH)


@pytest.fixture(scope="module")
def authors(bb_study, bb_data_dir):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DegenerateDataWarning)
        return read_feature_table(bb_data_dir / "authors_features.json", catalog=bb_study.catalog)


class TestToolFeatures:
    def test_one_row_per_tool_offline(self, own, bb_study):
        tab = own.to_frame()
        assert len(tab) == 50 and tab["tool_id"].tolist() == bb_study.catalog.table["tool_id"].tolist()
        assert list(tab.columns[:3]) == ["tool_id", "cluster_id", "api_index"]
        assert set(PAPER_FEATURES) - {"avg_similarity_tool_desc", "avg_similarity_api_desc"} <= set(own.feature_names)
        assert own.reference_date.isoformat() == "2025-09-01"
        assert own.provenance["reference_date_source"].startswith("study manifest")
        assert own.provenance["textstat"] == "0.7.8"
        assert own.missing == {"age_days": own.missing["age_days"]} and len(own.missing["age_days"]) == 7

    @pytest.mark.parametrize("feature", ["desc_name_length_sum", "flesch_reading_ease", "positive_word_count",
                                         "age_days"])
    def test_reproduces_the_authors_text_features(self, own, authors, feature):
        """On the ToolBench texts the authors used, our extractors give their values for all 50 APIs."""
        a = authors.table.set_index("tool_id")[feature]
        o = own.table.set_index("tool_id")[feature].reindex(a.index)
        np.testing.assert_allclose(o.to_numpy(), a.to_numpy(), rtol=0, atol=1e-9, equal_nan=True)

    def test_num_params_is_the_catalogs_and_the_authors_is_api_metas(self, own, authors, bb_study, bb_data_dir):
        """The authors counted parameters from api_meta.json; clusters.json (our catalog) lists fewer for 26 APIs."""
        meta = json.loads((bb_data_dir / "api_meta.json").read_text())
        tools = {(int(c), i): t for c in bb_study.catalog.clusters for i, t in enumerate(bb_study.catalog.tools(c))}
        from_meta = pd.Series({tools[(m["cluster_id"], m["api"])]: float(m["num_parameters"]) for m in meta})
        a = authors.table.set_index("tool_id")["num_params"]
        pd.testing.assert_series_equal(a, from_meta.reindex(a.index), check_names=False)
        o = own.table.set_index("tool_id")["num_params"]
        cat = bb_study.catalog.table.set_index("tool_id")["num_parameters"].astype(float)
        pd.testing.assert_series_equal(o, cat.reindex(o.index), check_names=False)
        assert int((o.reindex(a.index) != a).sum()) == 26

    def test_catalog_texts_are_the_default(self, bb_study):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DegenerateDataWarning)
            f = tool_features(bb_study, encoder=False)
        assert f.provenance["text_columns"] == ["tool_description", "api_description"]

    def test_reference_date_argument_wins_and_today_default(self, bb_study):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DegenerateDataWarning)
            f = tool_features(bb_study, encoder=False, reference_date="2026-09-01")
            g = tool_features(bb_study.catalog, encoder=False)
        shift = f.table["age_days"] - own_age(bb_study)
        assert set(shift.dropna().unique()) == {365.0}
        assert g.provenance["reference_date_source"].startswith("today")

    def test_missing_dates_warn(self, bb_study):
        with pytest.warns(DegenerateDataWarning, match=r"age_days: 7 tool\(s\)"):
            tool_features(bb_study, encoder=False)

    def test_similarity_on_a_tiny_catalog(self, minilm):
        cat = tbs.ToolCatalog.from_records([
            {"cluster_id": "1", "tool_name": "A", "api_name": "a", "num_parameters": 1,
             "tool_description": "Weather forecast for any city.", "api_description": "Get the forecast."},
            {"cluster_id": "1", "tool_name": "B", "api_name": "b", "num_parameters": 2,
             "tool_description": "What is the weather in Paris?", "api_description": None},
            {"cluster_id": "2", "tool_name": "C", "api_name": "c", "num_parameters": 0,
             "tool_description": "x", "api_description": "y"}])
        q = {"1": ["What is the weather in Paris?"]}
        with pytest.warns(DegenerateDataWarning):
            f = tool_features(cat, q, encoder=minilm, reference_date="2025-01-01")
        t = f.table.set_index("tool_id")
        assert t.at["b_for_b", "avg_similarity_tool_desc"] == pytest.approx(1.0, abs=1e-6)   # identical text
        assert np.isnan(t.at["b_for_b", "avg_similarity_api_desc"])                        # no description
        assert np.isnan(t.at["c_for_c", "avg_similarity_tool_desc"])                       # no queries
        assert 0 < t.at["a_for_a", "avg_similarity_tool_desc"] < 1
        assert f.provenance["encoder"]["encoder"] == "all-MiniLM-L6-v2"

    def test_bad_arguments(self, bb_study):
        msg = "`catalog` must be a ToolCatalog or a Study; got dict instead."
        with pytest.raises(ValueError, match=re.escape(msg)):
            tool_features({}, encoder=False)
        with pytest.raises(ValueError, match="does not have"):
            tool_features(bb_study, encoder=False, text_columns=("nope", "api_description"))
        with pytest.raises(ValueError, match="`text_columns` must name two columns"):
            tool_features(bb_study, encoder=False, text_columns=("tool_description",))


def own_age(study):
    from toolbias_stats.features import age_days

    return age_days(study.catalog.table["created"], reference_date="2025-09-01")


class TestCentring:
    def test_nan_ignored_in_cluster_mean(self):
        df = pd.DataFrame({"cluster_id": ["1", "1", "1", "2"], "x": [1.0, 2.0, np.nan, 7.0]})
        assert center_by_cluster(df, ["x"])["x"].tolist()[:2] == [-0.5, 0.5]
        assert np.isnan(center_by_cluster(df, ["x"])["x"][2])

    def test_center_method(self, authors):
        c = authors.center()
        assert c.centered and c.center() is c
        means = c.table.groupby("cluster_id")[list(c.feature_names)].mean()
        np.testing.assert_allclose(means.to_numpy(), 0, atol=1e-9)


class TestReadFeatureTable:
    def test_authors_table(self, authors):
        assert isinstance(authors, ToolFeatures)
        assert authors.feature_names == PAPER_FEATURES
        assert len(authors.table) == 50
        assert sorted(authors.selection_rates["model"].unique()) == [
            "ChatGPT 3.5", "ChatGPT 4.1", "DeepSeek", "Gemini", "Qwen", "ToolLLaMA"]
        sums = authors.selection_rates.groupby(["model", "cluster_id"])["rate"].sum()
        np.testing.assert_allclose(sums, 1.0)
        assert authors.table.loc[0, "tool_id"] == "forward_geocode_for_geocode_forward_and_reverse"
        assert authors.missing["age_days"] and len(authors.missing["age_days"]) == 7

    def test_without_catalog_ids_are_cluster_slash_index(self, bb_data_dir):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            f = read_feature_table(bb_data_dir / "authors_features.json")
        assert f.table["tool_id"].iloc[:2].tolist() == ["1/1", "1/2"]

    @pytest.mark.parametrize("suffix", [".csv", ".parquet"])
    def test_flat_round_trip(self, authors, tmp_path, suffix):
        wide = authors.selection_rates.pivot(index="tool_id", columns="model", values="rate")
        wide.columns = [f"selection_rate.{m}" for m in wide.columns]
        tab = authors.to_frame().merge(wide, left_on="tool_id", right_index=True)
        tab["reference_date"] = "2025-09-01"
        path = tmp_path / f"f{suffix}"
        tab.to_csv(path, index=False) if suffix == ".csv" else tab.to_parquet(path, index=False)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            back = read_feature_table(path)
        pd.testing.assert_frame_equal(back.table, authors.table)
        pd.testing.assert_frame_equal(back.selection_rates, authors.selection_rates)
        assert back.reference_date.isoformat() == "2025-09-01"

    def test_errors_name_file_row_and_field(self, tmp_path, bb_study):
        p = tmp_path / "bad.json"
        p.write_text(json.dumps([
            {"cluster_id": 1, "api": 0, "x": "high", "selection_rate": {"m": 0.5}},
            {"cluster_id": 1, "api": 9, "x": 1.0},
            {"cluster_id": 99, "api": 0, "x": 2.0, "selection_rate": {"m": 1.5}},
            {"cluster_id": 1, "api": 0, "x": 2.0},
        ]))
        with pytest.raises(SelectionLogError) as err:
            read_feature_table(p, catalog=bb_study.catalog)
        msg = str(err.value)
        assert f"{p}:1:x: expected a number (or empty), got 'high'" in msg
        assert f"{p}:2:api: index 9 outside the cluster's 5 tools" in msg
        assert f"{p}:3:cluster_id: unknown cluster '99'" in msg
        assert f"{p}:3:selection_rate.m: expected a selection rate in [0, 1], got 1.5" in msg
        assert f"{p}:4:tool_id: tool 'forward_geocode_for_geocode_forward_and_reverse' also in row 1" in msg

    @pytest.mark.parametrize("with_catalog", [False, True])
    @pytest.mark.parametrize("suffix", [".csv", ".json"])
    def test_empty_tool_id_without_an_index_column_names_file_row_and_field(self, tmp_path, bb_study, suffix,
                                                                             with_catalog):
        # a table identified by tool_id (cluster_id present, no api_index / api): a row without a tool_id cannot be
        # identified; it used to end in a raw TypeError (None compared with an int / put in an int64 column)
        tool = bb_study.catalog.table["tool_id"].iloc[0]
        p = tmp_path / f"feats{suffix}"
        if suffix == ".csv":
            p.write_text(f"tool_id,cluster_id,x\n{tool},1,1.0\n,1,2.0\n")
        else:
            p.write_text(json.dumps([{"tool_id": tool, "cluster_id": 1, "x": 1.0},
                                     {"tool_id": None, "cluster_id": 1, "x": 2.0}]))
        with pytest.raises(SelectionLogError) as err:
            read_feature_table(p, catalog=bb_study.catalog if with_catalog else None)
        assert str(err.value) == (f"{p}:2:tool_id: missing tool_id (the table has no `api_index` or `api` column "
                                  "to identify the row by its cluster instead)")

    @pytest.mark.parametrize("name,content,msg", [
        ("f.txt", "x", "expected a file ending in .csv, .json, .parquet, .pq"),
        ("f.json", "{", "malformed JSON"),
        ("f.json", "{}", "expected a non-empty JSON list of objects"),
        ("f.csv", "a,b\n1,2\n", "identify tools by a `tool_id` column"),
        ("f.csv", "tool_id,cluster_id\nt,1\n", "no feature columns"),
    ])
    def test_bad_files(self, tmp_path, name, content, msg):
        p = tmp_path / name
        p.write_text(content)
        with pytest.raises(SelectionLogError, match=msg):
            read_feature_table(p)

    def test_missing_file(self, tmp_path):
        with pytest.raises(SelectionLogError, match="file not found"):
            read_feature_table(tmp_path / "nope.csv")
