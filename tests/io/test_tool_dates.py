"""Tool creation dates: read_tool_dates, the manifest's `tool_dates` and `features` keys."""

import shutil

import pandas as pd
import pytest

import toolbias_stats as tbs
from toolbias_stats.io.readers.biasbusters import read_biasbusters_catalog, read_tool_dates


@pytest.fixture
def catalog(bb_data_dir):
    return read_biasbusters_catalog(bb_data_dir / "clusters.json", api_meta=bb_data_dir / "api_meta.json")


class TestReadToolDates:
    def test_fills_created(self, catalog, tmp_path):
        p = tmp_path / "d.csv"
        p.write_text("tool_id,created,note\nforward_geocode_for_geocode_forward_and_reverse,2022-01-06,x\n"
                     "get_coordinates_for_geolocate,,no date\n")
        out = read_tool_dates(p, catalog=catalog)
        t = out.table.set_index("tool_id")["created"]
        assert t["forward_geocode_for_geocode_forward_and_reverse"] == pd.Timestamp("2022-01-06")
        assert pd.isna(t["get_coordinates_for_geolocate"])
        assert catalog.table["created"].isna().all()          # the input catalog is not modified
        assert out.table["created"].dtype == "datetime64[ns]"

    def test_bundled_file_via_dates_option(self, bb_data_dir):
        cat = read_biasbusters_catalog(bb_data_dir / "clusters.json", api_meta=bb_data_dir / "api_meta.json",
                                       dates=bb_data_dir / "tool_dates.csv")
        assert cat.table["created"].notna().sum() == 43

    def test_errors_name_file_row_and_column(self, catalog, tmp_path):
        p = tmp_path / "d.csv"
        p.write_text("tool_id,created\nnope,2020-01-01\nget_coordinates_for_geolocate,01/02/2020\n"
                     "get_coordinates_for_geolocate,2020-01-01\nget_coordinates_for_geolocate,2020-01-02\n")
        with pytest.raises(tbs.SelectionLogError) as err:
            read_tool_dates(p, catalog=catalog)
        msg = str(err.value)
        assert f"{p}:1:tool_id: unknown tool_id 'nope'" in msg
        assert f"{p}:2:created: expected a date YYYY-MM-DD, got '01/02/2020'" in msg
        assert f"{p}:4:tool_id: tool_id 'get_coordinates_for_geolocate' is listed twice" in msg

    def test_missing_column(self, catalog, tmp_path):
        p = tmp_path / "d.csv"
        p.write_text("tool,created\nx,2020-01-01\n")
        with pytest.raises(tbs.SelectionLogError, match=r"d\.csv:tool_id: required column is missing"):
            read_tool_dates(p, catalog=catalog)


class TestManifestKeys:
    def _copy(self, tmp_path, bb_data_dir, extra):
        for name in ("clusters.json", "api_meta.json", "tool_dates.csv", "authors_features.json"):
            shutil.copy(bb_data_dir / name, tmp_path / name)
        shutil.copy(bb_data_dir / "selection_logs/api_selection_stats_claude.json", tmp_path / "claude.json")
        p = tmp_path / "study.toml"
        p.write_text('catalog = "clusters.json"\napi_meta = "api_meta.json"\nformat = "biasbusters"\n' + extra
                     + '[[logs]]\npath = "claude.json"\nmodel = "c"\n')
        return p

    def test_tool_dates_and_features(self, tmp_path, bb_data_dir):
        p = self._copy(tmp_path, bb_data_dir, 'tool_dates = "tool_dates.csv"\nfeatures = "authors_features.json"\n')
        study = tbs.read_study(p)
        assert study.catalog.table["created"].notna().sum() == 43
        assert study.settings["features"] == str(tmp_path / "authors_features.json")
        assert study.settings["tool_dates"] == str(tmp_path / "tool_dates.csv")

    @pytest.mark.parametrize("key", ["features", "tool_dates"])
    def test_missing_files(self, tmp_path, bb_data_dir, key):
        p = self._copy(tmp_path, bb_data_dir, f'{key} = "gone.csv"\n')
        with pytest.raises(tbs.ManifestError, match=rf"{key}: file not found: .*gone.csv"):
            tbs.read_study(p)

    def test_not_a_string(self, tmp_path, bb_data_dir):
        p = self._copy(tmp_path, bb_data_dir, "features = 3\n")
        with pytest.raises(tbs.ManifestError, match="features: expected a path string, got 3"):
            tbs.read_study(p)

    def test_bundled_study_has_dates_and_reference_date(self, bb_study):
        assert str(bb_study.reference_date) == "2025-09-01"
        assert bb_study.catalog.table["created"].notna().sum() == 43
