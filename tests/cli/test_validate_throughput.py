"""Issue 37, `validate` throughput: what the speed-ups must not change (no timings here; those are in
benchmarks/bench_validate.py). The parser and the whole `validate` of an API-log study import no SciPy / DuckDB /
model stack; the CLI's spelt-out bootstrap weights are the library's; the status counts an engine gives per file
come in one fixed order."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from toolbias_stats._resampling import BOOTSTRAP_WEIGHTS
from toolbias_stats._schema import STATUSES
from toolbias_stats.cli import _commands
from toolbias_stats.cli._commands import main

FIXTURES = Path(__file__).resolve().parents[1] / "io" / "fixtures" / "api_logs" / "openai"
NOT_NEEDED = ["scipy", "duckdb", "numba", "sklearn", "statsmodels", "matplotlib", "pymc", "dask"]


def _batch_study(tmp_path: Path) -> Path:
    for name in ("chat_batch_input.jsonl", "chat_batch_output.jsonl"):
        shutil.copy(FIXTURES / name, tmp_path / name)
    study = tmp_path / "study.toml"
    study.write_text('name = "chat"\n\n[[logs]]\nformat = "openai"\npath = "chat_batch_input.jsonl"\n'
                     'responses = "chat_batch_output.jsonl"\n', encoding="utf-8")
    return study


def test_choices_spelt_out_agree():
    from toolbias_stats.io import ENGINES

    assert _commands.BOOTSTRAP_WEIGHTS == BOOTSTRAP_WEIGHTS
    assert tuple(ENGINES) == _commands.ENGINES


def test_validate_of_a_batch_imports_no_statistics_stack(tmp_path):
    """In a fresh interpreter: building the validate parser, then the whole command, imports none of these."""
    study = _batch_study(tmp_path)
    script = ("import io, contextlib, json, sys\n"
              "from toolbias_stats.cli._commands import build_parser, main\n"
              "build_parser('validate')\n"
              "after_parser = sorted(sys.modules)\n"
              "with contextlib.redirect_stdout(io.StringIO()):\n"
              f"    rc = main(['validate', {str(study)!r}, '--json'])\n"
              "print(json.dumps([rc, after_parser, sorted(sys.modules)]))")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
    rc, after_parser, after_validate = json.loads(out.strip().splitlines()[-1])
    assert rc == 0
    assert not [m for m in NOT_NEEDED if m in after_parser]
    assert not [m for m in NOT_NEEDED if m in after_validate]
    assert "pandas" in after_validate     # the log itself is a DataFrame


def test_status_in_order_only_for_engine_counts():
    diag = {"a.csv": {"rows": 6, "engine": "duckdb", "status": {"parse_error": 1, "zzz": 1, "ok": 3, "no_call": 1},
                      "attempt_status": {"no_call": 2, "ok": 5}},
            "b.jsonl": {"format": "openai", "status": {"no_call": 1, "ok": 2}},
            "c": {"rows": 1, "engine": "dask", "status": {"forced": 1, "ok": 0}}}
    out = _commands._status_in_order(diag)
    assert list(out["a.csv"]["status"]) == ["ok", "no_call", "parse_error", "zzz"]
    assert list(out["a.csv"]["attempt_status"]) == ["ok", "no_call"]
    assert list(out["b.jsonl"]["status"]) == ["no_call", "ok"]            # a reader's own order stays
    assert list(out["c"]["status"]) == ["ok", "forced"]
    assert out == diag and next(iter(diag["a.csv"]["status"])) == "parse_error"   # same values; input unchanged


def test_validate_json_engine_status_keys_in_schema_order(tmp_path, capsys):
    """A table study counted by DuckDB: every file's status keys in the schema's order, the same on every run."""
    pd = pytest.importorskip("pandas")
    pytest.importorskip("duckdb")
    pd.DataFrame({"tool_id": ["t1", "t2"], "cluster_id": "c"}).to_csv(tmp_path / "catalog.csv", index=False)
    status = ["parse_error", "ok", "unknown_tool", "no_call"] * 5
    pd.DataFrame({"cluster_id": "c", "query_id": range(20), "rotation": 1,
                  "chosen_tool": [("t1" if s == "ok" else None) for s in status], "status": status,
                  "raw_choice": [("x" if s == "unknown_tool" else None) for s in status]}
                 ).to_csv(tmp_path / "log.csv", index=False)
    (tmp_path / "study.toml").write_text('name = "t"\ncatalog = "catalog.csv"\n\n[[logs]]\nformat = "table"\n'
                                         'path = "log.csv"\nmodel = "m"\n', encoding="utf-8")
    outs = []
    for _ in range(2):
        assert main(["validate", str(tmp_path / "study.toml"), "--json", "--engine", "duckdb"]) == 0
        outs.append(capsys.readouterr().out)
    assert outs[0] == outs[1]
    doc = json.loads(outs[0])
    (diag,) = doc["diagnostics"].values()
    assert list(diag["status"]) == [s for s in STATUSES if s in diag["status"]]
    assert list(doc["files"][0])[2:] == ["ok", "no_call", "unknown_tool", "parse_error"]
