"""Issue 36: a team's spreadsheet as they keep it -- an .xlsx workbook written by openpyxl, tool lists typed with
commas or semicolons, their own status words (``http_status`` 200 / 204 / 500) translated by a ``columns`` value
map -- read through both engines, with rows in = rows used + rows excluded by reason and delta_API, delta_pos and
the counts equal to a direct pandas computation."""

from __future__ import annotations

import random
import warnings

import numpy as np
import pandas as pd
import pytest

import toolbias_stats as tbs
from toolbias_stats.exceptions import SelectionLogError
from toolbias_stats.io.readers.table import read_table, split_columns

openpyxl = pytest.importorskip("openpyxl")

CLUSTERS = {"geocoding": ["geo_a", "geo_b", "geo_c"], "weather": ["weather_a", "weather_b"]}
STATUS = {200: "ok", 204: "no_call", 500: "parse_error"}
COLUMNS = ('columns = {query = "query_id", cluster = "cluster_id", tools = "ordering", pick = "chosen_tool", '
           'http_status = {to = "status", values = {"200" = "ok", "204" = "no_call", "500" = "parse_error"}}}\n')


def _sheet(path, n=120, seed=36):
    """A workbook as a team fills it in: numbers as numbers, lists as typed text, a notes column."""
    rng = random.Random(seed)
    wb = openpyxl.Workbook()
    ws = wb.active
    ws.title = "runs"
    ws.append(["model", "query", "cluster", "tools", "pick", "http_status", "notes"])
    rows = []
    for i in range(n):
        cluster = "geocoding" if i % 2 == 0 else "weather"
        tools = CLUSTERS[cluster]
        k = (i // 2) % len(tools)
        shown = tools[k:] + tools[:k]
        code = 500 if i % 17 == 3 else 204 if i % 13 == 5 else 200
        pick = rng.choices(shown, weights=[3] + [1] * (len(shown) - 1))[0] if code == 200 else None
        sep = "; " if i % 3 == 0 else ", "
        model = "gpt-4o-mini" if i % 4 < 2 else "claude-sonnet-4-5"
        ws.append([model, f"q{i // 2}", cluster, sep.join(shown), pick, code, "checked" if i % 5 == 0 else None])
        rank = shown.index(pick) + 1 if pick else None
        rows.append((model, cluster, STATUS[code], pick, rank))
    wb.save(path)
    return pd.DataFrame(rows, columns=["model", "cluster", "status", "tool", "rank"])


def _catalog_csv(path):
    path.write_text("tool_id,cluster_id\n" + "".join(f"{t},{c}\n" for c, ts in CLUSTERS.items() for t in ts))
    return path


def _tv_mean(ok, column, support):
    tvs = []
    for c, part in ok.groupby("cluster"):
        rates = part[column].value_counts(normalize=True).reindex(support[c], fill_value=0.0)
        tvs.append(0.5 * float(np.abs(rates.to_numpy() - 1.0 / len(support[c])).sum()))
    return float(np.mean(tvs))


@pytest.mark.parametrize("engine", ["pandas", "duckdb"])
def test_xlsx_with_value_map_and_typed_lists(tmp_path, engine):
    exp = _sheet(tmp_path / "runs.xlsx")
    _catalog_csv(tmp_path / "tools.csv")
    (tmp_path / "study.toml").write_text('catalog = "tools.csv"\nformat = "table"\n' + COLUMNS +
                                         '[[logs]]\npath = "runs.xlsx"\n', encoding="utf-8")
    study = tbs.read_study(tmp_path / "study.toml", engine=engine)
    counts = study.counts
    assert counts.engine == engine
    assert counts.status_totals() == {s: int((exp["status"] == s).sum()) for s in tbs.STATUSES}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = tbs.selection_bias(counts, by=["model"], n_resamples=0, n_null=0)
    ranks = {c: list(range(1, len(t) + 1)) for c, t in CLUSTERS.items()}
    for g, (model, part) in zip(res.groups, exp.groupby("model")):
        assert g.keys == {"model": model}
        ok = part[part["status"] == "ok"]
        excluded = {s: int(n) for s, n in part["status"].value_counts().items() if s != "ok"}
        assert g.rows["total"] == len(part) == g.rows["used"] + sum(g.rows["excluded"].values())
        assert g.rows["used"] == len(ok) and g.rows["excluded"] == excluded
        assert g.delta_api.mean_over_runs == pytest.approx(_tv_mean(ok, "tool", CLUSTERS), abs=1e-12)
        assert g.delta_pos.mean_over_runs == pytest.approx(_tv_mean(ok, "rank", ranks), abs=1e-12)
        for cb in g.clusters:
            sel = ok[ok["cluster"] == cb.cluster]
            assert list(cb.counts) == [int((sel["tool"] == t).sum()) for t in cb.tools]


def test_rows_and_messages(tmp_path):
    exp = _sheet(tmp_path / "runs.xlsx", n=30)
    cat = tbs.io.readers.read_catalog_table(_catalog_csv(tmp_path / "tools.csv"))
    cols = {"query": "query_id", "cluster": "cluster_id", "tools": "ordering", "pick": "chosen_tool",
            "http_status": {"to": "status", "values": {"200": "ok", "204": "no_call", "500": "parse_error"}}}
    log = read_table(tmp_path / "runs.xlsx", catalog=cat, columns=cols)
    d = log.data
    assert list(d["status"]) == list(exp["status"]) and list(d["model"]) == list(exp["model"])
    assert list(d["source_row"]) == list(range(1, 31))
    assert set(d["ordering"].str.count(r"\|")) == {1, 2}            # "a, b" and "a; b" read as lists
    # a status word the map does not know is an error naming the row, as any bad status
    wb = openpyxl.load_workbook(tmp_path / "runs.xlsx")
    wb.active.cell(row=4, column=6, value=404)
    wb.save(tmp_path / "bad.xlsx")
    with pytest.raises(SelectionLogError, match=r"bad.xlsx:3:status: expected one of .*got '404'"):
        read_table(tmp_path / "bad.xlsx", catalog=cat, columns=cols)
    with pytest.raises(SelectionLogError, match=r"columns.*expected"):
        split_columns({"http_status": {"to": "status", "values": {"500": 3}}}, "f.csv")
    (tmp_path / "junk.xlsx").write_bytes(b"not a zip")
    with pytest.raises(SelectionLogError, match=r"not a readable \.xlsx workbook"):
        read_table(tmp_path / "junk.xlsx", catalog=cat)


@pytest.mark.parametrize("engine", ["pandas", "duckdb"])
def test_value_map_on_csv_same_through_both_engines(tmp_path, engine):
    exp = _sheet(tmp_path / "runs.xlsx", n=40)
    frame = pd.read_excel(tmp_path / "runs.xlsx")
    frame.to_csv(tmp_path / "runs.csv", index=False)
    _catalog_csv(tmp_path / "tools.csv")
    (tmp_path / "study.toml").write_text('catalog = "tools.csv"\nformat = "table"\n' + COLUMNS +
                                         '[[logs]]\npath = "runs.csv"\n', encoding="utf-8")
    counts = tbs.read_study(tmp_path / "study.toml", engine=engine).counts
    assert counts.status_totals() == {s: int((exp["status"] == s).sum()) for s in tbs.STATUSES}
