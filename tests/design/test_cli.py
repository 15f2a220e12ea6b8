"""`toolbias-stats plan` (JSON shape, text, errors) and `report --plan`."""

import json

import pytest

from toolbias_stats.cli._commands import main
from toolbias_stats.simulate import simulate_selection_log


def _strict(text):
    def bad(x):
        raise ValueError(f"non-finite JSON constant {x}")
    return json.loads(text, parse_constant=bad)


@pytest.fixture(scope="module")
def manifest(tmp_path_factory):
    d = tmp_path_factory.mktemp("plan")
    sim = simulate_selection_log(n_clusters=3, n_queries=30, n_runs=2, tool_probs=[5, 2, 1, 1, 1],
                                 position_probs=[3, 1, 1, 1, 1], model='model <"A">', rng=1)
    sim.log.write(d / "log.parquet")
    sim.log.catalog.to_frame()[["tool_id", "cluster_id"]].to_csv(d / "catalog.csv", index=False)
    (d / "study.toml").write_text('format = "table"\ncatalog = "catalog.csv"\n[[logs]]\npath = "log.parquet"\n')
    one = simulate_selection_log(n_clusters=2, n_queries=1, n_runs=2, rng=0)
    one.log.write(d / "one.parquet")
    one.log.catalog.to_frame()[["tool_id", "cluster_id"]].to_csv(d / "one_catalog.csv", index=False)
    (d / "one.toml").write_text('format = "table"\ncatalog = "one_catalog.csv"\n[[logs]]\npath = "one.parquet"\n')
    return d


def test_json_shape(manifest, capsys):
    assert main(["plan", str(manifest / "study.toml"), "--target-width", "0.02", "--cost-per-call", "0.002",
                 "--queries", "20,40", "--runs", "1,2", "--bootstrap", "50", "--draws", "500", "--json"]) == 0
    out = _strict(capsys.readouterr().out)
    assert {"study", "manifest", "version", "target", "confidence_level", "alpha", "power", "correlation",
            "cost_per_call", "by", "groups", "grid", "components", "warnings", "run_effect"} <= set(out)
    assert out["target"] == {"kind": "width", "value": 0.02, "metrics": ["delta_api", "delta_pos"]}
    assert out["cost_per_call"] == 0.002 and out["by"] == ["model"]
    (g,) = out["groups"]
    assert g["keys"] == {"model": 'model <"A">'}
    assert g["pilot"] == {"queries": 30, "runs": 2, "rotations": 5, "clusters": 3, "calls": 900}
    for m in ("delta_api", "delta_pos"):
        assert set(g["achieved"][m]) == {"estimate", "expected_estimate", "half_width", "error_half_width", "mde",
                                         "shift_half_width", "mds", "null_critical"}
        assert 0 < g["achieved"][m]["half_width"] < g["achieved"][m]["mde"] < 1
    ch = g["cheapest"]
    assert ch["feasible"] and ch["cost"] == pytest.approx(ch["calls"] * 0.002)
    assert all(ch["metrics"][m]["half_width"] <= 0.02 for m in ("delta_api", "delta_pos"))
    assert len(out["grid"]) == 2 * 2 * 2
    assert {"queries", "runs", "rotations", "calls", "cost", "half_width", "mde", "mds"} <= set(out["grid"][0])
    comp = out["components"]
    assert comp["layout"] == "log"
    assert {r["component"] for r in comp["components"]} == {"query", "rotation", "run", "query_x_run", "attempt",
                                                            "cluster"}


def test_text_and_mde_target(manifest, capsys):
    assert main(["plan", str(manifest / "study.toml"), "--target-mde", "0.1", "--metrics", "delta_api",
                 "--queries", "20", "--runs", "1", "--bootstrap", "0", "--draws", "500"]) == 0
    text = capsys.readouterr().out
    assert "Is this study big enough?" in text and "Cheapest design with mde <= 0.1" in text
    assert "variance from: query" in text


def test_errors(manifest, capsys):
    assert main(["plan", str(manifest / "study.toml"), "--target-width", "0"]) == 2
    assert "`target` must be a positive number" in capsys.readouterr().err
    assert main(["plan", str(manifest / "study.toml"), "--target-width", "-1"]) == 2
    assert main(["plan", str(manifest / "one.toml"), "--target-width", "0.02"]) == 2
    assert "at least 2 queries per cluster" in capsys.readouterr().err
    assert main(["plan", str(manifest / "study.toml"), "--by", "nope"]) == 2
    assert "does not have" in capsys.readouterr().err
    assert main(["plan", str(manifest / "study.toml"), "--queries", "ten"]) == 2
    with pytest.raises(SystemExit):
        main(["plan", str(manifest / "study.toml"), "--target-width", "0.02", "--target-mde", "0.1"])


def test_report_section(manifest, tmp_path, capsys):
    out = tmp_path / "r.html"
    assert main(["report", str(manifest / "study.toml"), "--out", str(out), "--bootstrap", "50", "--null", "50",
                 "--plan", "--no-experiments"]) == 0
    page = out.read_text()
    assert '<section id="design">' in page and "Is this study big enough?" in page
    assert "model &lt;&quot;A&quot;&gt;" in page and 'model <"A">' not in page
    assert "MDE vs fair" in page and "<svg" in page


def test_report_qmd_refuses_plan(manifest, tmp_path, capsys):
    assert main(["report", str(manifest / "study.toml"), "--out", str(tmp_path / "q"), "--format", "qmd",
                 "--plan"]) == 2
    assert "--plan are HTML-only" in capsys.readouterr().err
