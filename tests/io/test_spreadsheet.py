"""Issue 20, "Spreadsheets and hand-made tables": a selection log kept in a spreadsheet, exported as CSV.

The file is written the way a spreadsheet exports "CSV UTF-8": a byte-order mark, CRLF line ends, minimal
quoting (Python's ``csv`` excel dialect, which is Excel's). The team's columns have their own names (mapped in
the manifest), there is no ``status`` and no ``cluster_id`` column, names are typed by hand (case, spaces,
decomposed accents), lists are written as ``a | b``, JSON lists or Python lists, there are ``date`` and ``notes``
columns, and some queries were shown the same shuffled list twice. Every number is checked against a direct
pandas computation from the generating ground truth, through the pandas and DuckDB engines.
"""

from __future__ import annotations

import csv
import json
import unicodedata

import numpy as np
import pandas as pd
import pytest

from toolbias_stats.cli._commands import main
from toolbias_stats.exceptions import SelectionLogError
from toolbias_stats.io import count_table, read_study
from toolbias_stats.io._catalog import ToolCatalog
from toolbias_stats.io.readers._spreadsheet import normalise_name, parse_ordering
from toolbias_stats.io.readers.table import read_table

CLUSTERS = {"weather": ["OpenWeather", "Météo_API", "weatherstack", "Tomorrow_io"],
            "mail": ["send_mail", "Mailgun", "postmark"]}
ENGINES = ["pandas", "duckdb"]


def _messy(name: str, rng) -> str:
    """A tool name as someone types it: case changed, spaces around it, accents decomposed (NFD)."""
    out = name
    k = rng.integers(4)
    if k == 1:
        out = out.lower()
    elif k == 2:
        out = out.upper()
    elif k == 3:
        out = f"  {out} "
    if rng.random() < 0.5:
        out = unicodedata.normalize("NFD", out)
    return out


def _ordering_cell(names, rng) -> str:
    k = rng.integers(3)
    if k == 0:
        return " | ".join(names)
    if k == 1:
        return json.dumps(names, ensure_ascii=False)
    return repr(names)        # a Python list, as pasted from a notebook


def make_sheet(tmp_path, n_queries=30, seed=0):
    """The spreadsheet export, the manifest, and the ground truth (one row per attempt, clean ids)."""
    rng = np.random.default_rng(seed)
    truth, sheet = [], []
    for q in range(n_queries):
        cluster = list(CLUSTERS)[q % 2]
        tools = CLUSTERS[cluster]
        for temp in (0.0, 0.7):
            order = [str(t) for t in rng.permutation(tools)]
            shown = [_messy(t, rng) for t in order]
            cell = _ordering_cell(shown, rng)
            u = rng.random()
            if u < 0.1:
                pick, status, tool, pos = "", "no_call", None, None
            elif u < 0.2:
                pick, status, tool, pos = "SendGrid v3", "unknown_tool", None, None
            else:
                # biased chooser: the first listed half of the time, else uniform
                idx = 0 if rng.random() < 0.5 else int(rng.integers(len(tools)))
                tool, pos, status = order[idx], idx + 1, "ok"
                pick = _messy(tool, rng)
            repeats = 2 if rng.random() < 0.15 else 1       # the same list shown again (no attempt column)
            for _ in range(repeats):
                truth.append({"model": "gpt-x", "temperature": temp, "cluster_id": cluster, "query_id": f"Q{q}",
                              "status": status, "chosen_tool": tool, "chosen_position": pos, "k": len(tools)})
                sheet.append({"Model": "gpt-x", "Query": f"Q{q}", "temperature": temp, "Tools shown": cell,
                              "Pick": pick, "Position": "" if pos is None else pos,
                              "date": f"2025-03-0{1 + q % 9}", "notes": "looks fine, =1+1" if q % 7 == 0 else ""})
    path = tmp_path / "sheet.csv"
    with path.open("w", encoding="utf-8-sig", newline="") as fh:     # Excel's "CSV UTF-8": BOM + CRLF
        writer = csv.DictWriter(fh, fieldnames=list(sheet[0]), dialect="excel")
        writer.writeheader()
        writer.writerows(sheet)
    catalog = tmp_path / "catalog.csv"
    catalog.write_text("tool_id,cluster_id\n" + "".join(f"{t},{c}\n" for c, ts in CLUSTERS.items() for t in ts),
                       encoding="utf-8")
    manifest = tmp_path / "study.toml"
    manifest.write_text('name = "sheet"\nformat = "table"\ncatalog = "catalog.csv"\n\n[[logs]]\npath = "sheet.csv"\n'
                        'design = ["temperature"]\n'
                        'columns = {Model = "model", Query = "query_id", "Tools shown" = "ordering", '
                        'Pick = "chosen_tool", Position = "chosen_position"}\n', encoding="utf-8")
    return path, manifest, pd.DataFrame(truth)


def _tv(counts: np.ndarray) -> float:
    p = counts / counts.sum()
    return 0.5 * float(np.abs(p - 1 / len(counts)).sum())


def direct(truth: pd.DataFrame):
    """δ_API, δ_pos per (temperature, cluster) and per temperature, computed directly with pandas."""
    out = {}
    for temp, g in truth.groupby("temperature"):
        per = {}
        for cluster, c in g.groupby("cluster_id"):
            ok = c[c["status"] == "ok"]
            tools = CLUSTERS[cluster]
            api = np.array([(ok["chosen_tool"] == t).sum() for t in tools], dtype=float)
            pos = np.array([(ok["chosen_position"] == i).sum() for i in range(1, len(tools) + 1)], dtype=float)
            per[cluster] = {"api": _tv(api), "pos": _tv(pos), "n_used": len(ok),
                            "excluded": c.loc[c["status"] != "ok", "status"].value_counts().to_dict(),
                            "tools": dict(zip(tools, api.astype(int))), "positions": pos.astype(int).tolist()}
        out[temp] = {"clusters": per, "api": np.mean([v["api"] for v in per.values()]),
                     "pos": np.mean([v["pos"] for v in per.values()])}
    return out


@pytest.fixture
def sheet(tmp_path):
    return make_sheet(tmp_path)


class TestSpreadsheetExport:
    def test_file_is_a_spreadsheet_export(self, sheet):
        raw = sheet[0].read_bytes()
        assert raw.startswith(b"\xef\xbb\xbf") and b"\r\n" in raw and raw.count(b"\r\n") == raw.count(b"\n")

    @pytest.mark.parametrize("engine", ENGINES)
    def test_counts_equal_direct_computation(self, sheet, engine):
        _, manifest, truth = sheet
        study = read_study(manifest, engine=engine)
        counts = study.counts
        assert study.engine == engine
        assert counts.design_columns == ("model", "run", "condition", "temperature")   # date, notes ignored
        ref = direct(truth)
        tab = counts.table
        # rows in = used + excluded by reason
        assert counts.n_rows == len(truth)
        totals = counts.status_totals()
        assert {k: v for k, v in totals.items() if v} == truth["status"].value_counts().to_dict()
        for (temp, cluster), g in tab.groupby(["temperature", "cluster_id"]):
            want = ref[temp]["clusters"][cluster]
            assert int(g["n_ok"].sum()) == want["n_used"]
            k = len(CLUSTERS[cluster])
            assert [int(g[f"tool_{i}"].sum()) for i in range(1, k + 1)] == list(want["tools"].values())
            assert [int(g[f"pos_{i}"].sum()) for i in range(1, k + 1)] == want["positions"]
            for st, n in want["excluded"].items():
                assert int(g[f"n_{st}"].sum()) == n

    @pytest.mark.parametrize("engine", ENGINES)
    def test_bias_cli_equals_direct_computation(self, sheet, engine, capsys):
        _, manifest, truth = sheet
        code = main(["bias", str(manifest), "--engine", engine, "--bootstrap", "0", "--by", "model,temperature",
                     "--json"])
        out = json.loads(capsys.readouterr().out)
        assert code == 0
        ref = direct(truth)
        groups = {g["keys"]["temperature"]: g for g in out["groups"]}
        assert sorted(groups) == [0.0, 0.7]
        for temp, g in groups.items():
            assert g["delta_api"]["mean_over_runs"] == pytest.approx(ref[temp]["api"], rel=1e-12)
            assert g["delta_pos"]["mean_over_runs"] == pytest.approx(ref[temp]["pos"], rel=1e-12)
            for c in g["clusters"]:
                want = ref[temp]["clusters"][c["cluster"]]
                assert c["n_used"] == want["n_used"]
                assert c["delta_api"]["mean_over_runs"] == pytest.approx(want["api"], rel=1e-12)
                assert c["delta_pos"]["mean_over_runs"] == pytest.approx(want["pos"], rel=1e-12)

    @pytest.mark.parametrize("engine", ENGINES)
    def test_validate_says_what_was_derived(self, sheet, engine, capsys):
        path, manifest, truth = sheet
        assert main(["validate", str(manifest), "--engine", engine, "--json"]) == 0
        out = json.loads(capsys.readouterr().out)
        notes = out["diagnostics"][str(path)]["notes"]
        n = len(truth)
        assert notes[next(k for k in notes if k.startswith("no status column"))] == n
        assert notes["no cluster_id column: cluster inferred from the tools shown"] == n
        assert notes["columns ignored (not mapped, not in `design`): date, notes"] == 2
        repeats = int(truth.duplicated().sum())
        assert repeats > 0
        assert notes["repeated attempts (the same query shown the same list again), counted as separate "
                     "attempts"] == repeats
        assert notes["picks matched only after normalising the name (NFC, trim, case)"] > 0
        assert main(["validate", str(manifest), "--engine", engine]) == 0
        text = capsys.readouterr().out
        assert "columns ignored" in text and "status derived" in text

    def test_engines_give_identical_notes_and_counts(self, sheet):
        _, manifest, _ = sheet
        a, b = read_study(manifest, engine="pandas").counts, read_study(manifest, engine="duckdb").counts
        pd.testing.assert_frame_equal(a.table, b.table, check_dtype=False, check_categorical=False)
        da, db = next(iter(a.diagnostics.values())), next(iter(b.diagnostics.values()))
        assert da["notes"] == db["notes"]

    def test_raw_text_kept(self, sheet):
        _, manifest, _ = sheet
        log = read_study(manifest, engine="pandas").log
        ok = log.data[log.data["status"] == "ok"]
        normalised = ok[ok["raw_choice"].notna()]
        assert len(normalised) > 0
        assert all(normalise_name(r) == normalise_name(t) for r, t in zip(normalised["raw_choice"],
                                                                          normalised["chosen_tool"]))
        unknown = log.data[log.data["status"] == "unknown_tool"]
        assert set(unknown["raw_choice"]) == {"SendGrid v3"}


def _catalog():
    return ToolCatalog.from_records([{"tool_id": t, "cluster_id": c} for c, ts in CLUSTERS.items() for t in ts])


def _csv(path, text):
    path.write_text(text, encoding="utf-8")
    return path


def _read(engine):
    if engine == "pandas":
        return read_table
    return lambda path, **kw: count_table(path, engine=engine, **kw)


@pytest.mark.parametrize("engine", ENGINES)
class TestHandMadeTables:
    def test_position_contradicting_the_list_is_an_error(self, engine, tmp_path):
        path = _csv(tmp_path / "p.csv", "model,query_id,ordering,chosen_tool,chosen_position\n"
                                        "m,1,send_mail|Mailgun|postmark,Mailgun,2\n"
                                        "m,2,send_mail|Mailgun|postmark,postmark,1\n")
        with pytest.raises(SelectionLogError) as err:
            _read(engine)(path, catalog=_catalog())
        msg = str(err.value)
        assert "p.csv:2:chosen_position: position 1 contradicts the list shown: 'postmark' is at position 3" in msg
        assert "p.csv:1:" not in msg

    def test_position_contradicting_the_rotation_is_an_error(self, engine, tmp_path):
        path = _csv(tmp_path / "r.csv", "model,cluster_id,query_id,rotation,chosen_tool,status,chosen_position\n"
                                        "m,mail,1,2,Mailgun,ok,2\n")
        with pytest.raises(SelectionLogError, match=r"r\.csv:1:chosen_position: position 2 contradicts the list "
                                                     r"shown: 'Mailgun' is at position 1"):
            _read(engine)(path, catalog=_catalog())

    def test_position_recomputed_on_request(self, engine, tmp_path):
        path = _csv(tmp_path / "p.csv", "model,query_id,ordering,chosen_tool,chosen_position\n"
                                        "m,1,send_mail|Mailgun|postmark,Mailgun,2\n"
                                        "m,2,send_mail|Mailgun|postmark,postmark,1\n")
        counts = _read(engine)(path, catalog=_catalog(), positions="recompute")
        if engine == "pandas":
            counts = counts.counts()
        assert counts.table[["pos_1", "pos_2", "pos_3"]].sum().tolist() == [0, 1, 1]
        notes = counts.diagnostics[str(path)]["notes"]
        assert notes["chosen_position contradicted the list shown; recomputed from the list"] == 1

    def test_strict_duplicates_and_attempt_ids(self, engine, tmp_path):
        body = "model,query_id,ordering,chosen_tool\n" + "m,1,send_mail|Mailgun|postmark,Mailgun\n" * 2
        path = _csv(tmp_path / "d.csv", body)
        with pytest.raises(SelectionLogError, match=r"d\.csv:2:query_id: duplicate attempt"):
            _read(engine)(path, catalog=_catalog(), duplicates="error")
        ids = _csv(tmp_path / "ids.csv", "model,query_id,attempt_id,ordering,chosen_tool\n"
                                         "m,1,a,send_mail|Mailgun|postmark,Mailgun\n"
                                         "m,1,b,send_mail|Mailgun|postmark,Mailgun\n"
                                         "m,1,a,send_mail|Mailgun|postmark,Mailgun\n")
        with pytest.raises(SelectionLogError) as err:
            _read(engine)(ids, catalog=_catalog())
        msg = str(err.value)
        assert "ids.csv:3:attempt_id: duplicate attempt id" in msg and "first seen at row 1" in msg
        assert "ids.csv:2:" not in msg

    def test_attempt_id_is_not_a_design_column(self, engine, tmp_path):
        ids = _csv(tmp_path / "ids.csv", "model,query_id,attempt_id,ordering,chosen_tool\n"
                                         "m,1,a,send_mail|Mailgun|postmark,Mailgun\n"
                                         "m,1,b,send_mail|Mailgun|postmark,Mailgun\n")
        counts = _read(engine)(ids, catalog=_catalog())
        if engine == "pandas":
            counts = counts.counts()
        assert counts.n_rows == 2 and counts.design_columns == ("model", "run", "condition")

    def test_missing_model(self, engine, tmp_path):
        path = _csv(tmp_path / "m.csv", "query_id,ordering,chosen_tool\n1,send_mail|Mailgun|postmark,Mailgun\n")
        with pytest.raises(SelectionLogError) as err:
            _read(engine)(path, catalog=_catalog())
        assert str(err.value).count("\n") == 0 and "m.csv:model: no `model` column" in str(err.value)

    @pytest.mark.parametrize("cell", ['"[""a"", ""b"""', '"[1, 2, 3]"', '"{""a"": 1}"'])
    def test_bad_list_cells_are_clear_errors(self, engine, tmp_path, cell):
        path = _csv(tmp_path / "l.csv", f"model,query_id,ordering,chosen_tool\nm,1,{cell},Mailgun\n")
        with pytest.raises(SelectionLogError, match=r"l\.csv:1:ordering: expected"):
            _read(engine)(path, catalog=_catalog())

    def test_jsonl_list_ordering(self, engine, tmp_path):
        path = tmp_path / "l.jsonl"
        path.write_text(json.dumps({"model": "m", "query_id": 1, "ordering": [" postmark", "MAILGUN", "send_mail"],
                                    "chosen_tool": "mailgun", "chosen_position": 2}) + "\n", encoding="utf-8")
        counts = _read(engine)(path, catalog=_catalog())
        if engine == "pandas":
            counts = counts.counts()
        assert counts.table[["tool_2", "pos_2", "n_ok"]].iloc[0].tolist() == [1, 1, 1]

    def test_cluster_cannot_be_inferred(self, engine, tmp_path):
        path = _csv(tmp_path / "c.csv", "model,query_id,ordering,chosen_tool\nm,1,send_mail|OpenWeather,send_mail\n")
        with pytest.raises(SelectionLogError, match=r"c\.csv:1:cluster_id: no cluster_id column and the cluster "
                                                     r"cannot be inferred"):
            _read(engine)(path, catalog=_catalog())

    def test_unknown_design_column_named(self, engine, tmp_path):
        path = _csv(tmp_path / "u.csv", "model,query_id,ordering,chosen_tool\nm,1,send_mail|Mailgun|postmark,x\n")
        with pytest.raises(SelectionLogError, match=r"u\.csv:design: design column 'temp' is not a column"):
            _read(engine)(path, catalog=_catalog(), design=["temp"])


class TestParseOrdering:
    @pytest.mark.parametrize("cell, want", [("a | b|c ", ["a", "b", "c"]), ('["a", "b"]', ["a", "b"]),
                                            ("['a', 'b']", ["a", "b"]), (["a", " b"], ["a", "b"])])
    def test_accepted(self, cell, want):
        assert parse_ordering(cell) == (want, None)

    def test_never_evaluates_code(self):
        items, msg = parse_ordering("[__import__('os').system('true')]")
        assert items is None and "expected" in msg
