"""Issue 37: DuckDB refused valid studies with ``cannot convert NA to integer``.

With 32 or more tools in the largest cluster a query with many attempts is counted column by column
(``count_if(api_index = i)``), and a query whose attempts all lack a pick (every one ``no_call``) had NULL
there instead of 0. Both engines must give the same counts and the same command output.
"""

from __future__ import annotations

import warnings

import pandas as pd
import pytest

import toolbias_stats as tbs
from toolbias_stats.cli._commands import main


def _study(d, n_big: int, *, rotations: int = 2):
    """The issue's reproducer: ``n_big`` tools in cluster ``big``, tools a, b in ``small``; in ``small`` query
    q9 has ``rotations`` attempts, all ``no_call``."""
    (d / "catalog.csv").write_text("tool_id,cluster_id\n" + "".join(f"t{i},big\n" for i in range(1, n_big + 1))
                                   + "a,small\nb,small\n", encoding="utf-8")
    rows = ["big,q1,1,t1,ok", "big,q2,1,t2,ok", "big,q3,2,t3,ok", "big,q4,1,t5,ok", "small,q5,1,a,ok",
            "small,q6,1,b,ok", "small,q7,2,a,ok", "small,q8,1,b,ok"]
    rows += [f"small,q9,{r},,no_call" for r in range(1, rotations + 1)]
    (d / "log.csv").write_text("cluster_id,query_id,rotation,chosen_tool,status\n" + "\n".join(rows) + "\n",
                               encoding="utf-8")
    (d / "study.toml").write_text('format = "table"\ncatalog = "catalog.csv"\n\n[[logs]]\npath = "log.csv"\n'
                                  'model = "m"\n', encoding="utf-8")
    return d / "study.toml"


@pytest.mark.parametrize("n_big, rotations", [(32, 2), (33, 2), (64, 2), (65, 2), (32, 1), (5, 2)])
def test_engines_give_the_same_counts(tmp_path, n_big, rotations):
    manifest = _study(tmp_path, n_big, rotations=rotations)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        a = tbs.read_study(manifest, engine="duckdb")
        b = tbs.read_study(manifest, engine="pandas")
    pd.testing.assert_frame_equal(a.counts.table, b.counts.table)
    pd.testing.assert_frame_equal(a.counts.cells, b.counts.cells)
    q9 = a.counts.table[a.counts.table["query_id"] == "q9"].iloc[0]
    assert q9["n_no_call"] == rotations and q9.filter(like="tool_").sum() == 0 and q9.filter(like="pos_").sum() == 0
    assert a.counts.table.filter(like="tool_").to_numpy().sum() == 8          # the 8 valid picks


@pytest.mark.parametrize("command", ["validate", "bias", "report"])
def test_commands_agree_on_the_reproducer(tmp_path, capsys, command):
    manifest = _study(tmp_path, 32)
    out = {}
    for engine in ("pandas", "duckdb"):
        argv = [command, str(manifest), "--engine", engine]
        if command == "bias":
            argv += ["--bootstrap", "0", "--null", "0", "--json"]
        if command == "report":
            argv += ["--bootstrap", "0", "--out", str(tmp_path / f"r-{engine}.html")]
        code = main(argv)
        captured = capsys.readouterr()
        assert code == 0, captured.err
        out[engine] = captured.out
    if command == "bias":
        assert out["pandas"] == out["duckdb"]             # the same JSON document
    elif command == "validate":                           # the same totals (the engine's name aside)
        for engine, text in out.items():
            assert f"engine {engine}" in text and "no_call" in text
    else:
        assert all((tmp_path / f"r-{e}.html").stat().st_size > 0 for e in out)
