"""Issue 36: a row whose cluster cannot be decided is kept (cluster_id missing), excluded by its status and counted.

The log is an agent's OpenTelemetry spans as the official instrumentation writes them, without tool definitions,
with ``web_search`` calls in the middle of runs (tests/io/test_agent_traces.py builds them): two calls of a run that
only searched have no cluster. Every analysis reads the log and accounts for every row: rows in = rows used + rows
excluded, by status, through both engines; ``validate`` prints and writes how many rows have no cluster.
"""

from __future__ import annotations

import json
import warnings

import pandas as pd
import pytest

import toolbias_stats as tbs
from toolbias_stats.cli._commands import main
from toolbias_stats.exceptions import SelectionLogError
from toolbias_stats.simulate import simulate_selection_log


def _agent_traces():
    """tests/io/test_agent_traces.py (the OTel agent runs are built there), loaded by path."""
    import importlib.util
    from pathlib import Path

    spec = importlib.util.spec_from_file_location("_agent_traces", Path(__file__).with_name("test_agent_traces.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


_AT = _agent_traces()
CLUSTERS_OTEL, _otel_agent_runs = _AT.CLUSTERS_OTEL, _AT._otel_agent_runs


@pytest.fixture(scope="module")
def traces(tmp_path_factory):
    d = tmp_path_factory.mktemp("unassigned")
    path, exp = _otel_agent_runs(d)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        log = tbs.read_otel(path, clusters=CLUSTERS_OTEL)
    table = log.write(d / "log.csv")
    log.catalog.to_frame().to_csv(d / "catalog.csv", index=False)
    (d / "study.toml").write_text('name = "traces"\nformat = "table"\ncatalog = "catalog.csv"\n'
                                  '[[logs]]\npath = "log.csv"\n', encoding="utf-8")
    return dict(dir=d, log=log, exp=exp, table=table)


def _expected_rows(exp):
    excluded = {s: int(n) for s, n in exp["status"].value_counts().items() if s != "ok"}
    return {"total": len(exp), "used": int((exp["status"] == "ok").sum()), "excluded": excluded}


def test_the_log_keeps_the_rows_without_a_cluster(traces):
    d, exp = traces["log"].data, traces["exp"]
    none = d["cluster_id"].isna()
    assert list(d.loc[none, "source_row"]) == [45, 46] and set(d.loc[none, "status"]) == {"unknown_tool"}
    assert set(d.loc[none, "raw_choice"]) == {"web_search"} and d.loc[none, "chosen_tool"].isna().all()
    assert (d.loc[none, "n_candidates"] == 0).all()          # the cluster's tools shown: none known
    assert len(d) == len(exp) == 48


def test_engines_count_them_alike(traces):
    counts = {e: tbs.read_study(traces["dir"] / "study.toml", engine=e).counts for e in ("pandas", "duckdb")}
    pd.testing.assert_frame_equal(counts["pandas"].table, counts["duckdb"].table)
    pd.testing.assert_frame_equal(counts["pandas"].table, traces["log"].counts().table)
    # rows without a cluster are no unit of the bootstrap: the units are the assigned (cluster, query) pairs
    d = traces["log"].data
    units = len(set(zip(d.loc[d["cluster_id"].notna(), "cluster_id"], d.loc[d["cluster_id"].notna(), "query_id"])))
    assert counts["pandas"].n_units == counts["duckdb"].n_units == traces["log"].n_units == units
    none = counts["duckdb"].table["cluster_id"].isna()
    assert int(counts["duckdb"].table.loc[none, "n_unknown_tool"].sum()) == 2 and none.sum() == 2   # two queries


def test_bias_excludes_them_by_status(traces):
    for engine in ("pandas", "duckdb"):
        counts = tbs.read_study(traces["dir"] / "study.toml", engine=engine).counts
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            g = tbs.selection_bias(counts, n_resamples=20, n_null=20, rng=0).groups[0]
        # rows in 48 = used 43 + excluded 5 unknown_tool (three searches placed in their run's cluster, two not)
        assert g.rows == _expected_rows(traces["exp"]) == {"total": 48, "used": 43,
                                                           "excluded": {"unknown_tool": 5}}, engine
        assert sorted(cb.cluster for cb in g.clusters) == sorted(CLUSTERS_OTEL)


def test_choice_model_and_bayes_design_exclude_them(tmp_path):
    # the choice model needs the lists shown: a simulated log with three rows that no cluster could be given
    log = simulate_selection_log(n_clusters=2, n_queries=6, rng=1).log
    extra = pd.DataFrame({"query_id": ["u1", "u2", "u3"], "status": ["unknown_tool", "off_cluster", "no_call"],
                          "raw_choice": ["web_search", "send_email", "I cannot"], "source_row": [901, 902, 903],
                          "ordering": [None, "web_search|send_email", None]})
    frame = pd.concat([log.data, extra.assign(model="simulated", run=1, condition="base",
                                              source_file="<extra>")], ignore_index=True)
    log = tbs.SelectionLog.from_frame(frame, log.catalog)
    assert log.data["cluster_id"].isna().sum() == 3
    want = {"unknown_tool": 1, "off_cluster": 1, "no_call": 1}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = tbs.choice_model(log, by=None)
    g = res.to_dict()["groups"][0]
    assert (g["n_used"], g["n_excluded"]) == (60, 3) and g["excluded"] == want
    from toolbias_stats.models.bayes._design import _design

    design = _design(log.counts(), ["model"], "exclude")
    assert design.rows == {"total": 63, "used": 60, "excluded": want}
    # written and read back through both engines: the same counts
    path = log.write(tmp_path / "log.csv")
    duck = tbs.count_table(path, catalog=log.catalog, engine="duckdb")
    pd.testing.assert_frame_equal(duck.table, log.counts().table)


def test_a_valid_choice_still_needs_its_cluster(tmp_path):
    log = simulate_selection_log(n_clusters=1, n_queries=2, rng=0).log
    frame = log.data.copy()
    frame.loc[0, "cluster_id"] = None
    with pytest.raises(SelectionLogError, match=r"<simulated>:1:cluster_id: missing value"):
        tbs.SelectionLog.from_frame(frame, log.catalog)
    frame.to_csv(tmp_path / "log.csv", index=False)
    with pytest.raises(SelectionLogError, match=r"log.csv:1:cluster_id: missing value"):
        tbs.count_table(tmp_path / "log.csv", catalog=log.catalog, engine="duckdb")


def test_validate_prints_and_writes_them(traces, capsys):
    study = str(traces["dir"] / "study.toml")
    assert main(["validate", study]) == 0
    out = capsys.readouterr().out
    assert "unassigned (no cluster could be decided): 2 attempt(s) (excluded: unknown_tool 2)" in out
    assert "off_cluster (a call to an offered tool outside the attempt's cluster): 0 attempt(s) in all" in out
    assert main(["validate", study, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["unassigned"] == {"rows": 2, "by_status": {"unknown_tool": 2}}
    assert doc["clusters"] == sorted(CLUSTERS_OTEL) and doc["rows"] == 48


def test_report_runs(traces, tmp_path, capsys):
    out = tmp_path / "report.html"
    assert main(["report", str(traces["dir"] / "study.toml"), "--out", str(out), "--bootstrap", "20"]) == 0
    html = out.read_text(encoding="utf-8")
    assert "unknown_tool" in html
