"""`toolbias-stats features` and `toolbias-stats explain`: outputs, the documented JSON, errors (exit 2)."""

import argparse
import json
import warnings

import numpy as np
import pandas as pd
import pytest
from reference.table4 import OLS_R2, TABLE4

from toolbias_stats.cli._explain import add_parsers, run_explain, run_features

STUDY = "data/biasbusters/study.toml"
AUTHORS = "data/biasbusters/authors_features.json"
FAST = ["--trees", "10", "--repeats", "1", "--permutations", "2", "--bootstrap", "50"]


def _run(capsys, *argv):
    p = argparse.ArgumentParser(prog="toolbias-stats")
    add_parsers(p.add_subparsers(dest="command", required=True))
    args = p.parse_args([str(a) for a in argv])
    code = {"features": run_features, "explain": run_explain}[args.command](args)
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture
def root(request):
    return request.config.rootpath


@pytest.fixture
def tiny_study(tmp_path):
    """3 clusters x 3 tools, 3 queries each, a table-format log of one model; dates for 8 of 9 tools."""
    rows, log = [], []
    texts = {"1": ("Forecast the weather for a city.", "Daily weather forecast."),
             "2": ("Validate an email address.", "Check email syntax and mailbox."),
             "3": ("Translate text between languages.", "Translate a sentence.")}
    for c in ("1", "2", "3"):
        for j in range(3):
            rows.append({"cluster_id": c, "tool_name": f"T{c}{j}", "api_name": "run", "num_parameters": j,
                         "tool_description": texts[c][0] + " " * j + ("Fast and reliable." if j == 2 else ""),
                         "api_description": texts[c][1], "created": "" if (c, j) == ("3", 0) else f"202{j}-01-0{c}"})
    pd.DataFrame(rows).to_csv(tmp_path / "catalog.csv", index=False)
    queries = [{"cluster_id": c, "queries": [f"{texts[c][0]} please", "help me", texts[c][1]]} for c in texts]
    (tmp_path / "queries.json").write_text(json.dumps(queries))
    for c in ("1", "2", "3"):
        for q in range(12):
            log.append({"cluster_id": c, "query_id": str(q), "status": "ok",
                        "chosen_tool": f"run_for_t{c}{q % 3 if q < 9 else 2}"})
    pd.DataFrame(log).to_csv(tmp_path / "log.csv", index=False)
    (tmp_path / "study.toml").write_text('format = "table"\ncatalog = "catalog.csv"\nqueries = "queries.json"\n'
                                         'reference_date = 2025-01-01\n[[logs]]\npath = "log.csv"\nmodel = "m1"\n')
    return tmp_path / "study.toml"


class TestFeaturesCommand:
    def test_csv_one_row_per_tool(self, capsys, root, tmp_path):
        out = tmp_path / "sub" / "features.csv"
        code, stdout, _ = _run(capsys, "features", root / STUDY, "--no-similarity", "--out", out)
        assert code == 0 and f"wrote {out}" in stdout
        tab = pd.read_csv(out)
        assert len(tab) == 50 and tab["tool_id"].is_unique
        assert (tab["reference_date"] == "2025-09-01").all()
        assert tab["age_days"].isna().sum() == 7
        assert {"desc_name_length_sum", "num_params", "flesch_reading_ease", "flesch_kincaid_grade", "word_count",
                "positive_word_count", "positive_word_rate"} <= set(tab.columns)

    def test_parquet_with_provenance(self, capsys, root, tmp_path):
        import pyarrow.parquet as pq

        out = tmp_path / "f.parquet"
        code, _, _ = _run(capsys, "features", root / STUDY, "--no-similarity", "--reference-date", "2026-01-01",
                          "--texts", "toolbench", "--out", out)
        assert code == 0
        t = pq.read_table(out)
        prov = json.loads(t.schema.metadata[b"toolbias_stats"])
        assert prov["reference_date"] == "2026-01-01" and prov["reference_date_source"] == "argument"
        assert prov["text_columns"] == ["toolbench_tool_description", "toolbench_api_description"]
        assert len(t) == 50

    def test_stdout_csv(self, capsys, root):
        code, stdout, err = _run(capsys, "features", root / STUDY, "--no-similarity")
        assert code == 0 and stdout.startswith("tool_id,cluster_id,api_index,")
        assert len(stdout.strip().splitlines()) == 51 and "age_days: 7 tool(s)" in err

    def test_similarity_with_the_default_encoder(self, capsys, tiny_study, tmp_path):
        out = tmp_path / "f.csv"
        cache = tmp_path / "cache"
        code, _, _ = _run(capsys, "features", tiny_study, "--cache-dir", cache, "--out", out, "--center")
        assert code == 0
        tab = pd.read_csv(out)
        assert tab["avg_similarity_tool_desc"].notna().all()
        np.testing.assert_allclose(tab.groupby("cluster_id")["avg_similarity_api_desc"].mean(), 0, atol=1e-9)
        assert any(cache.rglob("*.npy"))
        # second run: everything from the cache, identical output
        out2 = tmp_path / "g.csv"
        assert _run(capsys, "features", tiny_study, "--cache-dir", cache, "--out", out2, "--center")[0] == 0
        pd.testing.assert_frame_equal(pd.read_csv(out2), tab)

    @pytest.mark.parametrize("extra,msg", [
        (["--out", "f.txt"], "--out must end in .csv, .parquet, .pq; got"),
        (["--reference-date", "yesterday"], "`reference_date` must be a date (YYYY-MM-DD); got 'yesterday'"),
        (["--encoder", "no-such/model-here"], "could not be loaded offline"),
    ])
    def test_errors_exit_2_and_write_nothing(self, capsys, tiny_study, tmp_path, extra, msg):
        if "--out" not in extra:
            extra = extra + ["--out", str(tmp_path / "never.csv")]
        else:
            extra = ["--out", str(tmp_path / extra[1])]
        code, _, err = _run(capsys, "features", tiny_study, "--cache-dir", tmp_path / "c", *extra)
        assert code == 2 and err.startswith("toolbias-stats features: error:") and msg in err
        assert not list(tmp_path.glob("never*")) and not list(tmp_path.glob("f.txt*"))

    def test_missing_manifest(self, capsys, tmp_path):
        code, _, err = _run(capsys, "features", tmp_path / "nope.toml", "--no-similarity")
        assert code == 2 and "manifest file not found" in err


@pytest.fixture(scope="module")
def explain_json(request):
    import contextlib
    import io

    root = request.config.rootpath
    p = argparse.ArgumentParser()
    add_parsers(p.add_subparsers(dest="command", required=True))
    args = p.parse_args(["explain", str(root / STUDY), "--features", str(root / AUTHORS), "--json", *FAST])
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert run_explain(args) == 0
    return json.loads(buf.getvalue())


class TestExplainCommand:
    def test_table4_from_json(self, explain_json):
        models = explain_json["models"]
        for feature, per in TABLE4.items():
            for llm, (r, p) in per.items():
                got = models[llm]["pearson"][feature]
                assert got["r"] == pytest.approx(r, abs=1e-3 + 1e-9) and got["p"] == pytest.approx(p, abs=1e-3 + 1e-9)
                assert set(got) >= {"r", "p", "ci", "n", "p_holm", "p_bh"}

    def test_ols_r2_from_json(self, explain_json):
        for llm, r2 in OLS_R2.items():
            ols = explain_json["models"][llm]["ols"]
            assert ols["r2"] == pytest.approx(r2, abs=1e-3) and "adj_r2" in ols
            assert set(ols["coefficients"]) == {"Intercept", *TABLE4}

    def test_documented_shape(self, explain_json):
        j = explain_json
        assert j["center"] is True and j["feature_source"].endswith("authors_features.json")
        assert sorted(j["models"]) == ["ChatGPT 3.5", "ChatGPT 4.1", "DeepSeek", "Gemini", "Qwen", "ToolLLaMA"]
        for est in ("random_forest", "gradient_boosting"):
            m = j["models"]["Qwen"][est]
            assert set(m) >= {"cv_r2", "cv_rmse", "baseline_r2", "baseline_rmse", "importances", "schemes"}
            assert set(m["schemes"]) == {"loco", "group_kfold", "holdout"}
            assert set(m["importances"]) == set(TABLE4)
        a = j["alignment"]
        assert len(a["models"]) == 6 and np.shape(a["matrix"]) == (6, 6) and np.shape(a["ci_low"]) == (6, 6)
        assert j["targets"].startswith("selection rates carried by the feature table")
        assert any("rows per predictor" in w for w in j["warnings"])

    def test_text_output_and_no_center(self, capsys, root):
        code, stdout, _ = _run(capsys, "explain", root / STUDY, "--features", root / AUTHORS, "--no-ensembles",
                               "--no-center", "--bootstrap", "20")
        assert code == 0 and "uncentred" in stdout and "OLS" in stdout and "random forest" not in stdout

    def test_targets_from_the_logs_with_own_features(self, capsys, tiny_study, tmp_path):
        feats = tmp_path / "own.csv"
        assert _run(capsys, "features", tiny_study, "--no-similarity", "--out", feats)[0] == 0
        code, stdout, err = _run(capsys, "explain", tiny_study, "--features", feats, "--json", *FAST)
        assert code == 0, err
        j = json.loads(stdout)
        assert list(j["models"]) == ["m1"] and j["targets"].startswith("selection rates per model in the study")
        assert j["models"]["m1"]["pearson"]["num_params"]["n"] == 9

    def test_manifest_features_key(self, capsys, tiny_study, tmp_path):
        feats = tmp_path / "own.csv"
        assert _run(capsys, "features", tiny_study, "--no-similarity", "--out", feats)[0] == 0
        text = tiny_study.read_text().replace('reference_date', 'features = "own.csv"\nreference_date')
        tiny_study.write_text(text)
        code, stdout, _ = _run(capsys, "explain", tiny_study, "--json", "--no-ensembles", "--bootstrap", "10")
        assert code == 0 and json.loads(stdout)["feature_source"].endswith("own.csv")

    def test_bad_feature_table(self, capsys, root, tmp_path):
        bad = tmp_path / "bad.csv"
        bad.write_text("tool_id,x\nnope_for_nothing,1\n")
        code, stdout, err = _run(capsys, "explain", root / STUDY, "--features", bad, "--json")
        assert code == 2 and stdout == ""
        assert "toolbias-stats explain: error:" in err
        assert "bad.csv:1:tool_id: unknown tool_id 'nope_for_nothing'" in err
