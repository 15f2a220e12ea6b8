"""The toolbias-stats command line: Table 1 from --json, format round trips, validate, errors."""

import json

import pytest
from reference.table1 import TABLE1

from toolbias_stats.cli._commands import main

STUDY = "data/biasbusters/study.toml"


def _run(capsys, *argv):
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def _check_table1(groups):
    by_model = {g["keys"]["model"]: g for g in groups}
    for model, values in TABLE1.items():
        for metric, (mean, sd) in zip(("delta_api", "delta_pos", "delta_model"), values):
            got = by_model[model][metric]
            assert got["mean_over_runs"] == pytest.approx(mean, abs=5e-4), (model, metric)
            assert got["sd_over_runs"] == pytest.approx(sd, abs=5e-4 + 1e-9), (model, metric)


@pytest.fixture(scope="module")
def bias_json(request):
    import io
    from contextlib import redirect_stdout

    buf = io.StringIO()
    with redirect_stdout(buf):
        code = main(["bias", str(request.config.rootpath / STUDY), "--by", "model", "--json", "--bootstrap", "300",
                     "--null", "300", "--seed", "1"])
    assert code == 0
    return json.loads(buf.getvalue())


class TestBiasJson:
    def test_reproduces_table1(self, bias_json):
        _check_table1(bias_json["groups"])

    def test_documented_shape(self, bias_json):
        g = bias_json["groups"][0]
        assert set(g) >= {"keys", "rows", "delta_api", "delta_pos", "delta_model", "clusters"}
        assert set(g["rows"]) == {"total", "used", "excluded"}
        for key in ("mean_over_runs", "sd_over_runs", "pooled", "ci", "null_expected", "p_value", "corrected",
                    "corrected_ci"):
            assert key in g["delta_api"]
        lo, hi = g["delta_api"]["ci"]
        assert lo <= g["delta_api"]["mean_over_runs"] <= hi or lo <= g["delta_api"]["pooled"] <= hi
        c = g["clusters"][0]
        assert set(c) >= {"cluster", "K", "n_used", "rates", "position_rates", "delta_api", "delta_pos"}
        assert sum(c["rates"].values()) == pytest.approx(1.0)
        assert len(c["position_rates"]) == c["K"]

    def test_transcripts_group_has_no_positions(self, bias_json):
        base = next(g for g in bias_json["groups"] if g["keys"]["model"] == "Qwen3-8B-Base")
        assert base["delta_pos"] is None and base["delta_model"] is None
        assert base["rows"]["total"] == 500
        assert base["clusters"][0]["rates"]["v1_textlanguage_for_text_language_by_api_ninjas"] == pytest.approx(
            3 / base["rows"]["used"])

    def test_rows_used_plus_excluded(self, bias_json):
        for g in bias_json["groups"]:
            assert g["rows"]["used"] + sum(g["rows"]["excluded"].values()) == g["rows"]["total"]


@pytest.mark.parametrize("suffix", [".csv", ".jsonl", ".parquet"])
def test_round_trip_formats_give_table1(tmp_path, capsys, bb_study, bb_data_dir, suffix):
    data = bb_study.log.data
    from toolbias_stats import SelectionLog

    log = SelectionLog(data[data["model"] != "Qwen3-8B-Base"].reset_index(drop=True), bb_study.catalog)
    log.write(tmp_path / f"all{suffix}")
    (tmp_path / "study.toml").write_text(
        f'format = "table"\ncatalog = "{bb_data_dir / "clusters.json"}"\napi_meta = "{bb_data_dir / "api_meta.json"}"\n'
        f'[[logs]]\npath = "all{suffix}"\nmodel = "ignored-when-the-file-has-it"\n'.replace(
            'model = "ignored-when-the-file-has-it"\n', ""))
    code, out, err = _run(capsys, "bias", str(tmp_path / "study.toml"), "--json", "--bootstrap", "0", "--null", "0")
    assert code == 0, err
    _check_table1(json.loads(out)["groups"])


class TestValidate:
    def test_text(self, capsys, request):
        code, out, _ = _run(capsys, "validate", str(request.config.rootpath / STUDY))
        assert code == 0
        assert "105500 rows" in out and "api_selection_stats_claude.json" in out
        assert "recorded position disagrees with the rotation formula" in out
        assert "unresolved names" in out

    def test_json(self, capsys, request):
        code, out, err = _run(capsys, "validate", str(request.config.rootpath / STUDY), "--json")
        assert code == 0, err
        doc = json.loads(out)
        assert doc["rows"] == 105500 and len(doc["files"]) == 22 and doc["clusters"][-1] == "10"
        assert sum(doc["by_status"].values()) == 105500


class TestErrors:
    def test_bad_manifest_exit_code_and_message(self, capsys, tmp_path):
        p = tmp_path / "s.toml"
        p.write_text("[[logs]\n")
        code, out, err = _run(capsys, "bias", str(p))
        assert code == 2 and out == ""
        assert f"{p}:1: malformed TOML" in err

    def test_report_writes_nothing_on_error(self, capsys, tmp_path):
        p = tmp_path / "s.toml"
        p.write_text('catalog = "missing.json"\n[[logs]]\npath = "x.json"\nmodel = "m"\nformat = "biasbusters"\n')
        out_file = tmp_path / "r.html"
        code, _, err = _run(capsys, "report", str(p), "--out", str(out_file))
        assert code == 2 and "file not found" in err
        assert not out_file.exists() and not list(tmp_path.glob("*.tmp"))

    def test_bad_by_column(self, capsys, request):
        code, _, err = _run(capsys, "bias", str(request.config.rootpath / STUDY), "--by", "nope", "--bootstrap", "0")
        assert code == 2 and "`by` names column(s) ['nope']" in err


def test_report_with_explain_section(capsys, tmp_path, monkeypatch, request):
    """`report --explain` renders the explain section into the page (ensembles and encoder off for speed)."""
    from toolbias_stats.report import _build

    real = _build.explain_study

    def fast(study, **kw):
        kw.update(ensembles=False, encoder=False, n_resamples=50)
        return real(study, **kw)

    monkeypatch.setattr(_build, "explain_study", fast)
    out = tmp_path / "r.html"
    code, _, err = _run(capsys, "report", str(request.config.rootpath / STUDY), "--out", str(out),
                        "--bootstrap", "50", "--null", "50", "--explain")
    assert code == 0, err
    page = out.read_text()
    assert '<section id="explain">' in page and '<a href="#explain">Explaining selection</a>' in page
    assert page.index('id="explain"') < page.index('id="notes"')


class TestEngines:
    """Issue 7: `--engine` gives the same JSON through pandas and DuckDB; strict JSON; validate from counts."""

    @pytest.fixture(scope="class")
    @classmethod
    def table_study(cls, tmp_path_factory, bb_study, bb_data_dir):
        from toolbias_stats import SelectionLog

        d = tmp_path_factory.mktemp("engines")
        data = bb_study.log.data
        SelectionLog(data[data["model"].isin(["GPT-4.1 mini", "Qwen3 235B"])].reset_index(drop=True),
                     bb_study.catalog).write(d / "two.parquet")
        (d / "study.toml").write_text(f'format = "table"\ncatalog = "{bb_data_dir / "clusters.json"}"\n'
                                      f'api_meta = "{bb_data_dir / "api_meta.json"}"\n[[logs]]\npath = "two.parquet"\n')
        return d / "study.toml"

    @staticmethod
    def _strict(text):
        def refuse(c):
            raise ValueError(c)
        return json.loads(text, parse_constant=refuse)

    def test_duckdb_equals_pandas(self, capsys, table_study):
        args = ["bias", str(table_study), "--json", "--bootstrap", "200", "--null", "200", "--seed", "3"]
        code_a, out_a, err_a = _run(capsys, *args, "--engine", "duckdb")
        code_b, out_b, err_b = _run(capsys, *args, "--engine", "pandas")
        assert code_a == 0 and code_b == 0, (err_a, err_b)
        a, b = self._strict(out_a), self._strict(out_b)
        assert _close(a["groups"], b["groups"])

    def test_poisson_weights(self, capsys, table_study):
        code, out, err = _run(capsys, "bias", str(table_study), "--json", "--bootstrap", "100", "--null", "0",
                              "--bootstrap-weights", "poisson")
        assert code == 0, err
        doc = self._strict(out)
        assert doc["bootstrap"] == "poisson"
        lo, hi = doc["groups"][0]["delta_api"]["ci"]
        assert lo < doc["groups"][0]["delta_api"]["mean_over_runs"] < hi

    def test_validate_from_counts(self, capsys, table_study):
        code, out, err = _run(capsys, "validate", str(table_study), "--json", "--engine", "duckdb")
        assert code == 0, err
        doc = self._strict(out)
        assert doc["engine"] == "duckdb" and doc["rows"] == 30000
        assert doc["files"][0]["total"] == 30000 and doc["models"] == ["GPT-4.1 mini", "Qwen3 235B"]
        code, out, err = _run(capsys, "validate", str(table_study), "--engine", "duckdb")
        assert code == 0 and "30000 rows" in out and "engine duckdb" in out


def _close(a, b, path=""):
    """Equal JSON structures, numbers to 1e-12 relative."""
    if isinstance(a, dict):
        assert a.keys() == b.keys(), path
        return all(_close(a[k], b[k], f"{path}.{k}") for k in a)
    if isinstance(a, list):
        assert len(a) == len(b), path
        return all(_close(x, y, f"{path}[{i}]") for i, (x, y) in enumerate(zip(a, b)))
    if isinstance(a, float) and isinstance(b, float):
        assert a == pytest.approx(b, rel=1e-12, abs=0), path
        return True
    assert a == b, path
    return True


class TestIssue14Catalog:
    def test_catalog_with_only_ids_is_accepted_and_validate_says_so(self, capsys, tmp_path, bb_study):
        """A catalog with only tool_id, cluster_id (all many teams have) was refused; now it defaults."""
        from toolbias_stats import SelectionLog

        cat = bb_study.catalog.to_frame()[["tool_id", "cluster_id"]]
        cat.to_csv(tmp_path / "catalog.csv", index=False)
        data = bb_study.log.data
        SelectionLog(data[data["model"] == "Qwen3 235B"].reset_index(drop=True), bb_study.catalog).write(
            tmp_path / "log.parquet")
        (tmp_path / "study.toml").write_text('format = "table"\ncatalog = "catalog.csv"\n'
                                             '[[logs]]\npath = "log.parquet"\n')
        code, out, err = _run(capsys, "validate", str(tmp_path / "study.toml"), "--json")
        assert code == 0, err
        doc = json.loads(out)
        assert doc["catalog_defaults"] == ["api_index", "tool_name", "api_name", "num_parameters"]
        code, out, err = _run(capsys, "validate", str(tmp_path / "study.toml"))
        assert "catalog defaults: the catalog has no api_index, tool_name, api_name, num_parameters" in out
        code, out, err = _run(capsys, "bias", str(tmp_path / "study.toml"), "--json", "--bootstrap", "0")
        assert code == 0, err
        # the catalog's row order is its cluster order here, so Table 1 is unchanged
        g = json.loads(out)["groups"][0]
        assert g["delta_api"]["mean_over_runs"] == pytest.approx(TABLE1["Qwen3 235B"][0][0], abs=5e-4)
