"""The report's provenance hashes every input file (issue 20): the logs and every side file of every format."""

from __future__ import annotations

import hashlib
import re
import shutil
from pathlib import Path

from tiny_study import tiny_study as _tiny_study  # tests/ is on sys.path (conftest.py)

import toolbias_stats as tbs
from toolbias_stats.cli._commands import main
from toolbias_stats.report._provenance import SIDE_FILE_KEYS, input_files

API = Path(__file__).resolve().parents[1] / "io" / "fixtures" / "api_logs" / "openai"


def _sha(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


def _provenance_rows(html_text: str) -> dict:
    """``{file as shown: (kind, sha256)}`` from the report's input-file table."""
    rows = re.findall(r'<tr><td>([^<]*)</td><td class="path">([^<]*)</td><td class="num">[^<]*</td>'
                      r'<td class="hash">([^<]*)</td></tr>', html_text)
    return {path: (kind, digest) for kind, path, digest in rows}


def test_openai_report_hashes_the_responses_file(tmp_path, capsys):
    # the OpenAI batch output holds the choices: before, it was missing from the provenance table
    for f in ("chat_batch_input.jsonl", "chat_batch_output.jsonl"):
        shutil.copy(API / f, tmp_path / f)
    (tmp_path / "study.toml").write_text(
        'format = "openai"\n[[logs]]\npath = "chat_batch_input.jsonl"\nresponses = "chat_batch_output.jsonl"\n'
        'model = "gpt-4o-mini"\n', encoding="utf-8")
    out = tmp_path / "r.html"
    assert main(["report", str(tmp_path / "study.toml"), "--out", str(out), "--bootstrap", "0", "--null", "0"]) == 0
    rows = _provenance_rows(out.read_text(encoding="utf-8"))
    assert rows["study.toml"] == ("manifest", _sha(tmp_path / "study.toml"))
    assert rows["chat_batch_input.jsonl"] == ("log", _sha(tmp_path / "chat_batch_input.jsonl"))
    assert rows["chat_batch_output.jsonl"] == ("responses", _sha(tmp_path / "chat_batch_output.jsonl"))


def test_every_side_file_key_study_level_and_per_entry(tmp_path):
    files = {key: tmp_path / f"{key}.dat" for key in SIDE_FILE_KEYS}
    for key, p in files.items():
        p.write_text(f"content of {key}\n", encoding="utf-8")
    entry_resp = tmp_path / "sub" / "resp2.jsonl"
    entry_resp.parent.mkdir()
    entry_resp.write_text("second responses\n", encoding="utf-8")
    study_keys = ("catalog", "api_meta", "cluster_names", "queries", "tool_dates", "features", "clusters_file")
    manifest = tmp_path / "study.toml"
    manifest.write_text("".join(f'{k} = "{files[k].name}"\n' for k in study_keys)
                        + '[[logs]]\npath = "a.csv"\nresponses = "responses.dat"\n'
                        + '[[logs]]\npath = "b.csv"\nresponses = "sub/resp2.jsonl"\n', encoding="utf-8")
    study = _tiny_study().replace(path=manifest)
    got = {(kind, Path(p).resolve()) for kind, p, _ in input_files(study) if kind != "log"}
    want = {("manifest", manifest.resolve()), ("responses", entry_resp.resolve())}
    want |= {(SIDE_FILE_KEYS[k], files[k].resolve()) for k in SIDE_FILE_KEYS}
    assert got == want
    n_logs = sum(1 for kind, _, _ in input_files(study) if kind == "log")
    rows = sum(n for kind, _, n in input_files(study) if kind == "log")
    assert n_logs >= 1 and rows == len(study.log.data)                # every row's file is listed


def test_bundled_biasbusters_inputs_include_tool_dates():
    study = tbs.read_study(tbs.datasets.path("biasbusters/study.toml"), lazy=True)
    kinds = {kind: p for kind, p, _ in input_files(study)}
    for kind in ("manifest", "catalog", "api meta", "cluster names", "queries", "tool dates", "log"):
        assert kind in kinds
