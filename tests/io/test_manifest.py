"""Study manifests: the bundled study, metadata columns, and one clear error per bad manifest."""

import re
import shutil

import pytest

import toolbias_stats as tbs


class TestBundledStudy:
    def test_rows_models_and_columns(self, bb_study):
        log = bb_study.log
        assert len(log) == 21 * 5000 + 500
        assert log.data.groupby("model").size().to_dict()["Qwen3-8B-Base"] == 500
        assert set(log.data["run"].unique()) == {1, 2, 3}
        # extra manifest keys become columns and numbers stay numbers
        assert log.data["temperature"].dtype.kind == "f" and (log.data["temperature"] == 0.5).all()
        assert log.design_columns == ["model", "run", "condition", "temperature", "top_p"]
        assert bb_study.queries["8"][0]
        assert len(bb_study.catalog) == 50

    def test_base_model_transcripts_share(self, bb_study):
        d = bb_study.log.data
        base = d[d["model"] == "Qwen3-8B-Base"]
        share = (base["chosen_tool"] == "v1_textlanguage_for_text_language_by_api_ninjas").sum() / len(base)
        assert share == pytest.approx(0.006, abs=1e-12)


def _manifest(tmp_path, body, data_dir):
    for name in ("clusters.json", "api_meta.json", "cluster_names.json"):
        shutil.copy(data_dir / name, tmp_path / name)
    shutil.copy(data_dir / "selection_logs/api_selection_stats_claude.json", tmp_path / "claude.json")
    p = tmp_path / "study.toml"
    p.write_text('catalog = "clusters.json"\napi_meta = "api_meta.json"\nformat = "biasbusters"\n' + body)
    return p


class TestBadManifests:
    def test_malformed_toml(self, tmp_path, bb_data_dir):
        p = _manifest(tmp_path, '[[logs]]\npath = "claude.json\nmodel = "x"\n', bb_data_dir)
        with pytest.raises(tbs.ManifestError, match=rf"{p}:\d+: malformed TOML"):
            tbs.read_study(p)

    def test_missing_manifest(self, tmp_path):
        with pytest.raises(tbs.ManifestError, match=re.escape("nope.toml: manifest file not found")):
            tbs.read_study(tmp_path / "nope.toml")

    def test_missing_log_file(self, tmp_path, bb_data_dir):
        p = _manifest(tmp_path, '[[logs]]\npath = "gone.json"\nmodel = "x"\n', bb_data_dir)
        with pytest.raises(tbs.ManifestError, match=rf"{p}:logs\[1\]:path: file not found: .*gone.json"):
            tbs.read_study(p)

    @pytest.mark.parametrize("line,field,text", [
        ('run = "2"', "run", "expected an integer >= 1, got '2'"),
        ("run = 0", "run", "expected an integer >= 1, got 0"),
        ("model = 3", "model", "expected a string, got 3"),
        ("condition = 1.5", "condition", "expected a string, got 1.5"),
        ("temperature = [0.5]", "temperature", "expected a scalar"),
        ('format = "csv"', "format", f"expected one of {list(tbs.io.FORMATS)}, got 'csv'"),
        ("path = 5", "path", "expected a path string, got 5"),
        ('cluster = "8"', "cluster", "format 'biasbusters' takes no 'cluster' option"),
    ])
    def test_key_of_wrong_type(self, tmp_path, bb_data_dir, line, field, text):
        body = '[[logs]]\npath = "claude.json"\nmodel = "x"\n'
        key = line.split(" = ")[0]
        body = "\n".join(ln for ln in body.splitlines() if not ln.startswith(key + " ")) + "\n" + line + "\n"
        p = _manifest(tmp_path, body, bb_data_dir)
        with pytest.raises(tbs.ManifestError) as err:
            tbs.read_study(p)
        assert f"{p}:logs[1]:{field}: {text}" in str(err.value)

    def test_no_logs(self, tmp_path, bb_data_dir):
        p = _manifest(tmp_path, "", bb_data_dir)
        with pytest.raises(tbs.ManifestError, match=r"logs: expected at least one \[\[logs\]\] table"):
            tbs.read_study(p)

    def test_duplicate_attempts_across_entries(self, tmp_path, bb_data_dir):
        body = '[[logs]]\npath = "claude.json"\nmodel = "x"\n[[logs]]\npath = "claude.json"\nmodel = "x"\n'
        p = _manifest(tmp_path, body, bb_data_dir)
        with pytest.raises(tbs.SelectionLogError, match=r"claude.json:1:query_id: duplicate attempt .*'model': 'x'"):
            tbs.read_study(p)

    def test_same_file_as_two_runs_is_fine(self, tmp_path, bb_data_dir):
        body = ('[[logs]]\npath = "claude.json"\nmodel = "x"\n'
                '[[logs]]\npath = "claude.json"\nmodel = "x"\nrun = 2\n')
        study = tbs.read_study(_manifest(tmp_path, body, bb_data_dir))
        assert len(study.log) == 10000

    def test_unknown_cluster_in_log(self, tmp_path, bb_data_dir):
        p = _manifest(tmp_path, '[[logs]]\npath = "bad.json"\nmodel = "x"\n', bb_data_dir)
        (tmp_path / "bad.json").write_text("[[1, 1, 1, 1], [5001, 11, 1, 1]]")
        with pytest.raises(tbs.SelectionLogError, match=r"bad.json:2:cluster_id: unknown cluster id 11"):
            tbs.read_study(p)


class TestEntryClusters:
    """Issue 8: a per-entry ``clusters = [...]`` key (targeted conditions)."""

    def test_entry_clusters_restricts_attempts(self, tmp_path, bb_data_dir):
        (tmp_path / "part.json").write_text("[[2501, 6, 1, 1], [3501, 8, 2, 2]]")
        body = ('[[logs]]\npath = "claude.json"\nmodel = "x"\n'
                '[[logs]]\npath = "part.json"\nmodel = "x"\ncondition = "swap"\nclusters = ["6", 8]\n')
        study = tbs.read_study(_manifest(tmp_path, body, bb_data_dir))
        d = study.log.data
        swap = d[d["condition"] == "swap"]
        assert sorted(swap["cluster_id"].unique()) == ["6", "8"] and len(swap) == 1000
        assert "clusters" not in study.log.design_columns

    def test_clusters_must_be_a_list(self, tmp_path, bb_data_dir):
        body = '[[logs]]\npath = "claude.json"\nmodel = "x"\nclusters = "8"\n'
        with pytest.raises(tbs.ManifestError, match=r"logs\[1\]:clusters: expected a non-empty list of cluster ids"):
            tbs.read_study(_manifest(tmp_path, body, bb_data_dir))

    def test_clusters_only_for_biasbusters_format(self, tmp_path, bb_data_dir):
        body = '[[logs]]\npath = "claude.json"\nmodel = "x"\nformat = "table"\nclusters = ["8"]\n'
        with pytest.raises(tbs.ManifestError, match=r"logs\[1\]:clusters: format 'table' takes no 'clusters' option"):
            tbs.read_study(_manifest(tmp_path, body, bb_data_dir))
