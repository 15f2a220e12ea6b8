"""Fault injection through the CLI (issue 21): bad input never crashes and never passes silently.

Every case builds a small study whose inputs hold one fault, runs ``toolbias-stats validate`` and ``bias``
through each engine it applies to, and checks what a user sees:

- exit code 2;
- one message on stderr (``toolbias-stats CMD: error: ...``) naming the file and, where the fault is in a
  row or a field, the row and the field (the case lists the fragments);
- the same message from every engine (paths aside);
- no traceback, nothing on stdout, and no file written or left next to the inputs.

To add a case, append a :class:`Case` to :data:`CASES`: a builder that writes the inputs into a directory and
returns the manifest, and the fragments the message must contain. ``crash=True`` runs it in a child process
(a fault that killed the interpreter must not take pytest down); ``engines`` adds ``"dask"`` for Parquet
inputs. Each case here failed before the fix that made it pass (traceback, hang, crash, raw SQL text, a
message without file / row / field, or silent acceptance).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pytest

from toolbias_stats.cli._commands import main

CATALOG = ("tool_id,cluster_id\n" + "".join(f"t{i},c1\n" for i in range(1, 5))
           + "".join(f"u{i},c2\n" for i in range(1, 4)))
ENGINES = ("pandas", "duckdb")


@dataclass(frozen=True)
class Case:
    """One class of bad input: ``build(dir) -> manifest path``; ``expect``: fragments of the one message
    (``{dir}`` stands for the input directory)."""

    name: str
    build: Callable[[Path], Path]
    expect: tuple
    engines: tuple = ENGINES
    commands: tuple = ("validate", "bias")
    crash: bool = False
    timeout: float = 120.0


# ----------------------------------------------------------------------------------------------------------
# builders
def _study(d: Path, log_name: str, log, *, catalog: str = CATALOG, extra: str = "") -> Path:
    (d / "catalog.csv").write_text(catalog, encoding="utf-8")
    if isinstance(log, bytes):
        (d / log_name).write_bytes(log)
    elif isinstance(log, pd.DataFrame):
        log.to_parquet(d / log_name)
    elif log is not None:
        (d / log_name).write_text(log, encoding="utf-8")
    manifest = d / "study.toml"
    manifest.write_text(f'format = "table"\ncatalog = "catalog.csv"\n\n[[logs]]\npath = "{log_name}"\nmodel = "m"\n'
                        f"{extra}", encoding="utf-8")
    return manifest


def _jsonl(*lines) -> str:
    return "".join((ln if isinstance(ln, str) else json.dumps(ln)) + "\n" for ln in lines)


def _ok(**kw) -> dict:
    return {"cluster_id": "c1", "query_id": "q1", "rotation": 1, "chosen_tool": "t1", "status": "ok", **kw}


_HEADER = "cluster_id,query_id,rotation,chosen_tool,status\n"


def _csv(*rows) -> str:
    return _HEADER + "".join(r + "\n" for r in rows)


def manifest_directory(d):
    (d / "study.toml").mkdir()
    return d / "study.toml"


def manifest_dev_zero(d):
    os.symlink("/dev/zero", d / "study.toml")   # an endless file: refused by name, never read
    return d / "study.toml"


def manifest_latin1(d):
    m = _study(d, "l.csv", _csv("c1,q1,1,t1,ok"))
    m.write_bytes(m.read_bytes() + 'name = "caf\xe9"\n'.encode("latin-1"))
    return m


def deep_jsonl(d):
    deep = '{"cluster_id": "c1", "query_id": "q1", "x": ' + "[" * 50000 + "]" * 50000 + "}"
    return _study(d, "l.jsonl", _jsonl(deep))


def rotation_infinity(d):
    return _study(d, "l.jsonl", _jsonl(_ok(query_id="q0"), '{"cluster_id": "c1", "query_id": "q1", "rotation": '
                                       'Infinity, "chosen_tool": "t1", "status": "ok"}'))


def position_1e400(d):
    return _study(d, "l.jsonl", _jsonl(_ok(query_id="q0"), '{"cluster_id": "c1", "query_id": "q1", "rotation": 1, '
                                       '"chosen_position": 1e400, "chosen_tool": "t1", "status": "ok"}'))


def rotation_infinity_parquet(d):
    frame = pd.DataFrame([_ok(query_id="q0"), _ok(rotation=float("inf"))])
    return _study(d, "l.parquet", frame)


def position_contradicts_rotation(d):
    # rotation 2 shows t2, t3, t4, t1: t1 is at position 4, the row says 1
    return _study(d, "l.csv", "cluster_id,query_id,rotation,chosen_tool,status,chosen_position\n"
                              "c1,q1,1,t1,ok,1\nc1,q2,2,t1,ok,1\n")


def duplicate_status_column(d):
    return _study(d, "l.csv", "cluster_id,query_id,rotation,chosen_tool,status,status\nc1,q1,1,t1,ok,no_call\n")


def duplicate_json_key(d):
    return _study(d, "l.jsonl", _jsonl(_ok(query_id="q0"), '{"cluster_id": "c1", "query_id": "q1", "rotation": 1, '
                                       '"chosen_tool": "t1", "status": "ok", "status": "no_call"}'))


def pipe_in_tool_id(d):
    return _study(d, "l.csv", _csv("c1,q1,1,t2,ok"), catalog="tool_id,cluster_id\nt|1,c1\nt2,c1\n")


def no_call_with_tool(d):
    return _study(d, "l.csv", _csv("c1,q1,1,t1,ok", "c1,q2,1,t2,no_call"))


def api_index_all_equal(d):
    return _study(d, "l.csv", _csv("c1,q1,1,t1,ok"), catalog="tool_id,cluster_id,api_index\nt1,c1,1\nt2,c1,1\n"
                                                           "t3,c1,1\n")


def negative_num_parameters(d):
    return _study(d, "l.csv", _csv("c1,q1,1,t1,ok"), catalog="tool_id,cluster_id,num_parameters\nt1,c1,2\n"
                                                           "t2,c1,-3\n")


def one_tool_cluster(d):
    return _study(d, "l.csv", _csv("c1,q1,1,t1,ok"), catalog="tool_id,cluster_id\nt1,c1\nt2,c1\nx1,solo\n")


def ten_thousand_tools(d):
    catalog = "tool_id,cluster_id\n" + "".join(f"t{i},c1\n" for i in range(1, 10001))
    return _study(d, "l.csv", _csv(*[f"c1,q{i},1,t{i},ok" for i in range(1, 30)]), catalog=catalog)


def ragged_csv_row(d):
    return _study(d, "l.csv", _csv("c1,q1,1,t1,ok", "c1,q2,t1,ok", "c1,q3,1,t1,ok"))


def struct_column(d):
    frame = pd.DataFrame([_ok(query_id="q0"), _ok()])
    frame["status"] = [None, {"code": "ok"}]   # a nested value where a status belongs
    return _study(d, "l.parquet", frame)


def reserved_design_column(d):
    return _study(d, "l.csv", "k,cluster_id,query_id,rotation,chosen_tool,status\n5,c1,q1,1,t1,ok\n",
                  extra='design = ["k"]\n')


OPENAI_FIX = Path(__file__).resolve().parent / "io" / "fixtures" / "api_logs" / "openai"


def _openai_study(d: Path, requests: str, responses: str) -> Path:
    (d / "study.toml").write_text(f'format = "openai"\nclusters = "infer"\n\n[[logs]]\npath = "{requests}"\n'
                                  f'responses = "{responses}"\nmodel = "m"\n', encoding="utf-8")
    return d / "study.toml"


def openai_deep_line(d):
    """An OpenAI Batch output line nested deeper than the JSON parser goes (a RecursionError before)."""
    (d / "in.jsonl").write_bytes((OPENAI_FIX / "chat_batch_input.jsonl").read_bytes())
    lines = (OPENAI_FIX / "chat_batch_output.jsonl").read_text(encoding="utf-8").splitlines()
    lines[2] = "[" * 50000 + "]" * 50000
    (d / "out.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return _openai_study(d, "in.jsonl", "out.jsonl")


def openai_dev_zero(d):
    """An OpenAI requests file that is an endless device: refused by name, never read."""
    (d / "out.jsonl").write_bytes((OPENAI_FIX / "chat_batch_output.jsonl").read_bytes())
    os.symlink("/dev/zero", d / "in.jsonl")
    return _openai_study(d, "in.jsonl", "out.jsonl")


# -- issue 37: names that print alike, NUL characters, quietly lost values, partitioned logs --------------------
def lookalike_tool_cyrillic(d):
    return _study(d, "l.csv", _csv("c1,q1,1,t1,ok"), catalog="tool_id,cluster_id\ngeo_a,c1\nge\u043e_a,c1\nt1,c1\n")


def lookalike_tool_fullwidth(d):
    return _study(d, "l.csv", _csv("c1,q1,1,t1,ok"), catalog="tool_id,cluster_id\nwx_a,c1\nwx_\uff41,c1\nt1,c1\n")


def lookalike_model_column(d):
    m = _study(d, "l.csv", "model," + _HEADER + "m1,c1,q1,1,t1,ok\nm1\u200b,c1,q2,1,t2,ok\n")
    m.write_text(m.read_text(encoding="utf-8").replace('model = "m"\n', ""), encoding="utf-8")
    return m


def lookalike_model_entries(d):
    m = _study(d, "a.csv", _csv("c1,q1,1,t1,ok"))
    (d / "b.csv").write_text(_csv("c1,q1,1,t2,ok"), encoding="utf-8")
    m.write_text(m.read_text(encoding="utf-8").replace('model = "m"', 'model = "m1"')
                 + '\n[[logs]]\npath = "b.csv"\nmodel = "m1\u200b"\n', encoding="utf-8")
    return m


def nul_csv(d):
    return _study(d, "l.csv", _csv("c1,q1,1,t1,ok", "c1,q2,1,t\x002,ok"))


def nul_jsonl(d):
    return _study(d, "l.jsonl", _jsonl(_ok(query_id="q0"), _ok(query_id="q\x001")))


def nul_parquet(d):
    return _study(d, "l.parquet", pd.DataFrame([_ok(query_id="q0"), _ok(query_id="q\x001")]))


def nul_catalog(d):
    return _study(d, "l.csv", _csv("c1,q1,1,t1,ok"), catalog="tool_id,cluster_id,tool_name\nt1,c1,a\nt2,c1,b\x00c\n")


def rotation_nan(d):
    """Issue 37: ``NaN`` (which Python's JSON parser accepts) read as a missing rotation: the row left the
    position analysis silently (delta_pos 0.3337 -> 0.3283 on the study of the report)."""
    return _study(d, "l.jsonl", _jsonl(_ok(query_id="q0"), '{"cluster_id": "c1", "query_id": "q1", "rotation": NaN, '
                                       '"chosen_tool": "t1", "status": "ok"}'))


def big_cell(d):
    return _study(d, "l.csv", _csv("c1,q1,1,t1,ok", "c1,q2,1,t2,ok" + "x" * 1_000_000))


def empty_tool_id(d):
    return _study(d, "l.csv", _csv("c1,q1,1,t1,ok"), catalog="tool_id,cluster_id,api_name\nt1,c1,a\n,c1,t3\n"
                                                           "t4,c1,d\n")


BB = Path(__file__).resolve().parents[1] / "toolbias_stats" / "_data" / "biasbusters"


def _bb_study(d, clusters: str, names: str) -> Path:
    (d / "clusters.json").write_text(clusters, encoding="utf-8")
    (d / "cluster_names.json").write_text(names, encoding="utf-8")
    (d / "log.json").write_bytes((BB / "selection_logs" / "api_selection_stats_chatgpt_no_func.json").read_bytes())
    (d / "study.toml").write_text('format = "biasbusters"\ncatalog = "clusters.json"\ncluster_names = '
                                  '"cluster_names.json"\n\n[[logs]]\npath = "log.json"\nmodel = "m"\n',
                                  encoding="utf-8")
    return d / "study.toml"


def clusters_json_key_twice(d):
    text = (BB / "clusters.json").read_text(encoding="utf-8")
    return _bb_study(d, text.replace('"category": "Mapping",', '"category": "Mapping",\n      "category": "x",', 1),
                     (BB / "cluster_names.json").read_text(encoding="utf-8"))


def cluster_name_list(d):
    names = json.loads((BB / "cluster_names.json").read_text(encoding="utf-8"))
    names["2"] = ["Coordinates", "Address"]
    return _bb_study(d, (BB / "clusters.json").read_text(encoding="utf-8"), json.dumps(names))


def tool_dates_is_the_log(d):
    m = _study(d, "l.csv", _csv("c1,q1,1,t1,ok"))
    m.write_text('tool_dates = "l.csv"\n' + m.read_text(encoding="utf-8"), encoding="utf-8")
    return m


def _parts(d, manifest_logs: str, b_header: str = _HEADER) -> Path:
    (d / "parts").mkdir()
    (d / "parts" / "a.csv").write_text(_csv("c1,q1,1,t1,ok", "c1,q2,2,t2,ok"), encoding="utf-8")
    (d / "parts" / "b.csv").write_text(b_header + "c1,q3,1,t1,ok\n", encoding="utf-8")
    (d / "catalog.csv").write_text(CATALOG, encoding="utf-8")
    (d / "study.toml").write_text(f'format = "table"\ncatalog = "catalog.csv"\n\n{manifest_logs}', encoding="utf-8")
    return d / "study.toml"


def part_listed_twice(d):
    return _parts(d, '[[logs]]\npath = ["parts/a.csv", "parts/b.csv", "parts/a.csv"]\nmodel = "m"\n')


def folder_and_its_part(d):
    return _parts(d, '[[logs]]\npath = "parts"\nmodel = "m"\n\n[[logs]]\npath = "parts/b.csv"\nmodel = "m"\n')


def part_other_schema(d):
    return _parts(d, '[[logs]]\npath = "parts"\nmodel = "m"\n', b_header=_HEADER.replace("status", "state"))


def part_dangling_link(d):
    m = _parts(d, '[[logs]]\npath = "parts"\nmodel = "m"\n')
    os.symlink("gone.csv", d / "parts" / "c.csv")
    return m


def part_fifo(d):
    m = _parts(d, '[[logs]]\npath = "parts"\nmodel = "m"\n')
    os.mkfifo(d / "parts" / "c.csv")
    return m


CASES = [
    Case("manifest_directory", manifest_directory, ("{dir}/study.toml:", "got a directory")),
    Case("manifest_dev_zero", manifest_dev_zero, ("{dir}/study.toml:", "device"), crash=True, timeout=60),
    Case("manifest_not_utf8", manifest_latin1, ("{dir}/study.toml:", "not UTF-8")),
    Case("deep_jsonl", deep_jsonl, ("{dir}/l.jsonl:1:", "nested too deeply")),
    Case("rotation_infinity", rotation_infinity, ("{dir}/l.jsonl:2:rotation:", "expected an integer, got inf")),
    Case("position_1e400", position_1e400, ("{dir}/l.jsonl:2:chosen_position:", "expected an integer, got inf")),
    Case("rotation_infinity_parquet", rotation_infinity_parquet,
         ("{dir}/l.parquet:2:rotation:", "expected an integer, got inf"), engines=ENGINES + ("dask",),
         commands=("validate",)),
    Case("position_contradicts_rotation", position_contradicts_rotation,
         ("{dir}/l.csv:2:chosen_position:", "contradicts the list shown")),
    Case("duplicate_status_column", duplicate_status_column, ("{dir}/l.csv:status:", "names this column twice")),
    Case("duplicate_json_key", duplicate_json_key, ("{dir}/l.jsonl:2:status:", "appears twice")),
    Case("pipe_in_tool_id", pipe_in_tool_id, ("{dir}/catalog.csv:1:tool_id:", "contains '|'")),
    Case("no_call_with_tool", no_call_with_tool, ("{dir}/l.csv:2:chosen_tool:", "status is 'no_call' but a tool")),
    Case("api_index_all_equal", api_index_all_equal, ("{dir}/catalog.csv:api_index:", "cluster 'c1'")),
    Case("negative_num_parameters", negative_num_parameters, ("{dir}/catalog.csv:2:num_parameters:", ">= 0")),
    Case("one_tool_cluster", one_tool_cluster, ("{dir}/catalog.csv:cluster_id:", "cluster 'solo' has 1 tool")),
    Case("ten_thousand_tools", ten_thousand_tools, ("{dir}/catalog.csv:cluster_id:", "has 10000 tools"),
         crash=True, timeout=60),
    Case("ragged_csv_row", ragged_csv_row, ("{dir}/l.csv:2:", "expected 5 fields, got 4 (line 3)")),
    Case("struct_column", struct_column, ("{dir}/l.parquet:2:status:", "expected a scalar value"),
         engines=ENGINES + ("dask",), commands=("validate",)),
    Case("reserved_design_column", reserved_design_column, ("{dir}/l.csv:k:", "reserved")),
    Case("openai_deep_line", openai_deep_line, ("{dir}/out.jsonl:3:", "nested too deeply"), engines=("pandas",)),
    Case("openai_dev_zero", openai_dev_zero, ("/dev/zero:", "device"), engines=("pandas",), crash=True, timeout=60),
    # issue 37
    Case("lookalike_tool_cyrillic", lookalike_tool_cyrillic,
         ("{dir}/catalog.csv:2:tool_id:", "'ge\\u043e_a' (U+043E CYRILLIC SMALL LETTER O)", "'geo_a' (ASCII only)")),
    Case("lookalike_tool_fullwidth", lookalike_tool_fullwidth,
         ("{dir}/catalog.csv:2:tool_id:", "U+FF41 FULLWIDTH LATIN SMALL LETTER A", "'wx_a'")),
    Case("lookalike_model_column", lookalike_model_column,
         ("{dir}/l.csv:2:model:", "'m1\\u200b' (U+200B ZERO WIDTH SPACE)", "{dir}/l.csv:1")),
    Case("lookalike_model_entries", lookalike_model_entries,
         ("{dir}/study.toml:logs[2]:model:", "U+200B ZERO WIDTH SPACE", "{dir}/study.toml:logs[1]")),
    Case("nul_csv", nul_csv, ("{dir}/l.csv:2:chosen_tool:", "NUL character")),
    Case("nul_jsonl", nul_jsonl, ("{dir}/l.jsonl:2:query_id:", "NUL character")),
    Case("nul_parquet", nul_parquet, ("{dir}/l.parquet:2:query_id:", "NUL character")),
    Case("nul_catalog", nul_catalog, ("{dir}/catalog.csv:2:tool_name:", "NUL character")),
    Case("rotation_nan", rotation_nan, ("{dir}/l.jsonl:2:rotation:", "NaN is not a JSON value")),
    Case("big_cell", big_cell, ("{dir}/l.csv:2:status:", "1000002 bytes", "131072"),
         commands=("validate", "bias", "report")),
    Case("empty_tool_id", empty_tool_id, ("{dir}/catalog.csv:2:tool_id:", "missing value")),
    Case("clusters_json_key_twice", clusters_json_key_twice, ("{dir}/clusters.json:5:category:", "twice"),
         engines=("pandas",)),
    Case("cluster_name_list", cluster_name_list, ("{dir}/cluster_names.json:2:", "expected a cluster name"),
         engines=("pandas",)),
    Case("tool_dates_is_the_log", tool_dates_is_the_log,
         ("{dir}/study.toml:tool_dates:", "log file (logs[1].path)", "a file of its own (a CSV of tool_id, created)")),
    Case("part_listed_twice", part_listed_twice, ("{dir}/parts/a.csv:", "counted twice")),
    Case("folder_and_its_part", folder_and_its_part,
         ("{dir}/study.toml:logs[2]:path:", "{dir}/parts/b.csv is also read by logs[1]", "counted twice")),
    Case("part_other_schema", part_other_schema, ("{dir}/parts/b.csv:", "missing ['status']", "['state']")),
    Case("part_dangling_link", part_dangling_link, ("{dir}/parts/c.csv:", "symbolic link to a missing file")),
    Case("part_fifo", part_fifo, ("{dir}/parts/c.csv:", "FIFO"), crash=True, timeout=60),
]


# ----------------------------------------------------------------------------------------------------------
def _snapshot(d: Path) -> dict:
    return {str(p.relative_to(d)): (p.lstat().st_size, p.lstat().st_mtime_ns) for p in d.rglob("*")}


def _run(case: Case, command: str, engine: str, manifest: Path, capsys):
    argv = [command, str(manifest), "--engine", engine] + (["--n-resamples", "0"] if command == "bias" else [])
    if command == "report":   # written outside the input folder (and never, since the input is refused)
        argv += ["--out", str(manifest.parent.parent / "report.html")]
    if case.crash:
        import toolbias_stats

        env = dict(os.environ, PYTHONPATH=str(Path(toolbias_stats.__file__).resolve().parents[1]))
        try:
            proc = subprocess.run([sys.executable, "-m", "toolbias_stats.cli", *argv], capture_output=True, text=True,
                                  timeout=case.timeout, env=env, check=False)
        except subprocess.TimeoutExpired:
            pytest.fail(f"{case.name}: no answer within {case.timeout} s")
        return proc.returncode, proc.stdout, proc.stderr
    try:
        code = main(argv)
    except BaseException as exc:   # any escape is the failure this module looks for
        pytest.fail(f"{case.name}: {type(exc).__name__} escaped the CLI: {exc}"[:2000])
    out = capsys.readouterr()
    return code, out.out, out.err


def _params():
    for case in CASES:
        for engine in case.engines:
            for command in case.commands:
                yield pytest.param(case, engine, command, id=f"{case.name}-{engine}-{command}")


@pytest.mark.parametrize("case, engine, command", list(_params()))
def test_fault(case, engine, command, tmp_path, capsys):
    d = tmp_path / "in"
    d.mkdir()
    manifest = case.build(d)
    before = _snapshot(d)
    code, out, err = _run(case, command, engine, manifest, capsys)
    assert "Traceback" not in err and "Error:" not in err.split("error:", 1)[-1][:40], err[-3000:]
    assert code == 2, (code, out[-2000:], err[-2000:])
    assert out == "", out[-2000:]
    # report's progress lines ("[   0.0 s] reading ...") aside
    lines = [ln for ln in err.splitlines() if ln.strip() and not re.match(r"toolbias-stats \S+: \[ *[\d.]+ s\]", ln)]
    assert len(lines) == 1 and lines[0].startswith(f"toolbias-stats {command}: error: "), err[-3000:]
    for fragment in case.expect:
        assert fragment.format(dir=d) in lines[0], (fragment, lines[0])
    for raw in ("Binder Error", "sample_size", "Parser Error", "Conversion Error", "Invalid Input Error"):
        assert raw not in lines[0]
    assert _snapshot(d) == before, "a file was written or left next to the inputs"


@pytest.mark.parametrize("case", [c for c in CASES if not c.crash], ids=lambda c: c.name)
def test_engines_give_the_same_message(case, tmp_path, capsys):
    messages = {}
    for engine in ("pandas", "duckdb"):
        d = tmp_path / engine
        d.mkdir()
        manifest = case.build(d)
        code = main(["validate", str(manifest), "--engine", engine])
        err = capsys.readouterr().err
        assert code == 2
        messages[engine] = err.replace(str(d), "<dir>")
    assert messages["pandas"] == messages["duckdb"]


def test_look_alike_tools_are_refused_case_is_warned(tmp_path, capsys):
    """Issue 37: NFC / NFD forms and a zero-width space print the same: refused, both spellings named with their
    code points (issue 21 only warned). Tools that differ only in case are visible: still a warning."""
    catalog = "tool_id,cluster_id\nM\u00e9t\u00e9o,c1\nMe\u0301te\u0301o,c1\nweather,c1\n"
    manifest = _study(tmp_path, "l.csv", _csv("c1,q1,1,weather,ok"), catalog=catalog)
    for engine in ENGINES:
        assert main(["validate", str(manifest), "--engine", engine]) == 2
        err = capsys.readouterr().err
        assert "catalog.csv:2:tool_id: tool id 'Me\\u0301te\\u0301o' (U+0301 COMBINING ACUTE ACCENT)" in err, err
        assert "'M\\xe9t\\xe9o' (U+00E9 LATIN SMALL LETTER E WITH ACUTE) at row 1" in err, err
    (tmp_path / "catalog.csv").write_text("tool_id,cluster_id\nWeather,c1\nweather,c1\n", encoding="utf-8")
    for engine in ENGINES:
        assert main(["validate", str(manifest), "--engine", engine]) == 0
        assert "WARNING: catalog cluster 'c1' has tools that look identical" in capsys.readouterr().out


# ----------------------------------------------------------------------------------------------------------
# Issue 37: faults of the commands that write (design, run) and of the engines, one line per class. A builder
# gets the input folder and an ExitStack (servers and held locks live until the command has run) and returns
# the command line; ``{dir}`` in ``expect`` stands for the folder. Checked as above: exit code 2, one message
# with the fragments, nothing on stdout, nothing written or left in the folder.
@dataclass(frozen=True)
class CommandCase:
    name: str
    build: Callable
    expect: tuple


def _files(d: Path) -> dict:
    """Every file under ``d`` with its size and time (folders' times change when a lock comes and goes)."""
    return {k: v for k, v in _snapshot(d).items() if not (d / k).is_dir()}


def _design_inputs(d: Path, cluster: str = "c1") -> list:
    (d / "cat.csv").write_text("tool_id,cluster_id\n" + "".join(f"t{i},{cluster}\n" for i in range(1, 4)))
    (d / "queries.csv").write_text(f"cluster_id,query\n{cluster},find x\n{cluster},find y\n")
    return [str(d / "cat.csv"), str(d / "queries.csv")]


def _run_folder(d: Path) -> Path:
    from toolbias_stats import ToolCatalog
    from toolbias_stats.audit import design_study, write_requests

    cat = pd.DataFrame({"tool_id": ["t1", "t2", "t3"], "cluster_id": "c1"})
    write_requests(design_study(ToolCatalog(cat), {"c1": ["find x", "find y"]}), d / "s")
    return d / "s"


def _loopback(stack, answer) -> str:
    """A loopback HTTP server answering every request with ``answer(handler)``; its origin."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # http.server's name
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            answer(self)

        do_GET = do_POST

        def log_message(self, *args):
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    stack.callback(httpd.server_close)
    stack.callback(httpd.shutdown)
    return f"http://127.0.0.1:{httpd.server_address[1]}"


def run_cross_origin_redirect(d, stack):
    def record(h):
        raise AssertionError("the second origin was contacted")

    other = _loopback(stack, record)

    def redirect(h):
        h.send_response(302)
        h.send_header("Location", other + "/v1/chat/completions")
        h.send_header("Content-Length", "0")
        h.end_headers()

    return ["run", str(_run_folder(d)), "--base-url", _loopback(stack, redirect) + "/v1", "--model", "m"]


def run_locked_folder(d, stack):
    from toolbias_stats.audit._lock import folder_lock

    folder = _run_folder(d)
    stack.enter_context(folder_lock(folder))        # another run holds the folder
    return ["run", str(folder), "--base-url", "http://127.0.0.1:9/v1", "--model", "m"]


COMMAND_CASES = [
    CommandCase("design_formula_cluster", lambda d, s: ["design", *_design_inputs(d, "=c(1)"), "--out-dir",
                                                        str(d / "out")], ("cluster_id: cluster '=c(1)'", "formula")),
    CommandCase("design_out_holds_inputs", lambda d, s: ["design", *_design_inputs(d), "--out-dir", str(d)],
                ("--out-dir {dir} contains an input",)),
    CommandCase("design_out_under_a_file", lambda d, s: ["design", *_design_inputs(d), "--out-dir",
                                                         str(d / "cat.csv" / "out")], ("{dir}/cat.csv",)),
    CommandCase("run_max_requests_zero", lambda d, s: ["run", str(_run_folder(d)), "--base-url",
                                                       "http://127.0.0.1:9/v1", "--model", "m", "--max-requests",
                                                       "0"], ("--max-requests must be at least 1",)),
    CommandCase("run_cross_origin_redirect", run_cross_origin_redirect, ("redirecting to another origin",)),
    CommandCase("run_locked_folder", run_locked_folder, ("{dir}/s is in use by another run (process ",)),
]


@pytest.mark.parametrize("case", COMMAND_CASES, ids=lambda c: c.name)
def test_command_fault(case, tmp_path, capsys, monkeypatch):
    import contextlib

    for var in ("http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(var, raising=False)
    d = tmp_path / "in"
    d.mkdir()
    with contextlib.ExitStack() as stack:
        argv = case.build(d, stack)
        before = _files(d)
        try:
            code = main(argv)
        except BaseException as exc:   # any escape is the failure this module looks for
            pytest.fail(f"{case.name}: {type(exc).__name__} escaped the CLI: {exc}"[:2000])
        out = capsys.readouterr()
        after = _files(d)
    assert code == 2 and out.out == "", (code, out.out[-2000:], out.err[-2000:])
    lines = [ln for ln in out.err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith(f"toolbias-stats {argv[0]}: error: "), out.err[-3000:]
    for fragment in case.expect:
        assert fragment.format(dir=d) in lines[0], (fragment, lines[0])
    assert after == before, "a file was written or left next to the inputs"


def _wide_cluster(d: Path) -> Path:
    """Issue 37: 32 tools in the largest cluster and a query whose 2 attempts are both no_call (DuckDB said
    `cannot convert NA to integer`)."""
    catalog = "tool_id,cluster_id\n" + "".join(f"t{i},big\n" for i in range(1, 33)) + "a,small\nb,small\n"
    return _study(d, "l.csv", _csv("big,q1,1,t1,ok", "big,q2,1,t2,ok", "small,q5,1,a,ok", "small,q6,1,b,ok",
                                   "small,q9,1,,no_call", "small,q9,2,,no_call"), catalog=catalog)


VALID_CASES = [("wide_cluster_all_no_call", _wide_cluster)]


@pytest.mark.parametrize("name, build", VALID_CASES, ids=[c[0] for c in VALID_CASES])
def test_valid_study_same_answer_every_engine(name, build, tmp_path, capsys):
    outputs = {}
    for engine in ENGINES:
        d = tmp_path / engine
        d.mkdir()
        code = main(["bias", str(build(d)), "--engine", engine, "--n-resamples", "0", "--null", "0", "--json"])
        out = capsys.readouterr()
        assert code == 0, out.err
        outputs[engine] = out.out.replace(str(d), "<dir>")
    assert outputs["pandas"] == outputs["duckdb"]
