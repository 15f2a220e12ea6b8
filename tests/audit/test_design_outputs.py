"""Issue 37: what `toolbias-stats design` writes. Formula cells are neutralised in its CSV files (and the study
still reads back); a full disk, a read-only place or an output folder that holds the inputs ends in one message
naming the path, exit 2, and nothing written or left behind."""

from __future__ import annotations

import csv
import errno
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from fake_openai_server import FakeOpenAI

import toolbias_stats as tbs
from toolbias_stats._output import FORMULA_PREFIXES
from toolbias_stats.audit._runner import run_study
from toolbias_stats.cli._commands import main

FORMULA = '=HYPERLINK("http://evil.example","x")'


def _inputs(d: Path, cluster: str = "c1") -> tuple[Path, Path]:
    """A catalog with formula-like names and descriptions, and queries with formula-like text."""
    rows = [{"tool_id": t, "cluster_id": cluster, "description": FORMULA, "tool_name": t} for t in ("@a", "b", "-c")]
    rows += [{"tool_id": t, "cluster_id": "plain", "description": "+1", "tool_name": t} for t in ("d", "e")]
    with (d / "cat.csv").open("w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    (d / "queries.csv").write_text(f"cluster_id,query\n{cluster},q1\n{cluster},=q2\nplain,@q3\n", encoding="utf-8")
    return d / "cat.csv", d / "queries.csv"


def _run(capsys, *argv):
    code = main([str(a) for a in argv])
    res = capsys.readouterr()
    return code, res.out, res.err


def _one_error(err: str, command: str = "design") -> str:
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith(f"toolbias-stats {command}: error: "), err
    return lines[0]


def _listing(d: Path) -> list:
    return sorted(str(p.relative_to(d)) for p in d.rglob("*"))


class TestFormulaCells:
    def test_csv_files_are_neutralised_and_the_study_reads_back(self, tmp_path, capsys, monkeypatch):
        for var in ("http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY"):
            monkeypatch.delenv(var, raising=False)
        cat, queries = _inputs(tmp_path)
        out = tmp_path / "s"
        code, _, err = _run(capsys, "design", cat, queries, "--out-dir", out)
        assert code == 0, err
        for name, keys in (("design.csv", set()), ("catalog.csv", {"tool_id", "cluster_id"})):
            with (out / name).open(encoding="utf-8") as fh:
                for row in csv.DictReader(fh):
                    for col, cell in row.items():
                        if col not in keys:
                            assert not cell.startswith(FORMULA_PREFIXES), (name, col, cell)
        catalog = (out / "catalog.csv").read_text(encoding="utf-8")
        assert "'=HYPERLINK" in catalog and "'@a" in catalog and "'+1" in catalog
        # the keys stay as sent: tool ids are send names ([A-Za-z0-9_-]), so the answers resolve
        with FakeOpenAI() as srv:
            run_study(out, base_url=srv.base_url, model="m")
        log = tbs.read_study(out / "study.toml").log.data
        n_requests = sum(1 for _ in (out / "requests-run1.jsonl").open())
        assert len(log) == n_requests and (log["status"] == "ok").all()

    def test_formula_like_cluster_is_refused(self, tmp_path, capsys):
        cat, queries = _inputs(tmp_path, cluster="=c(1)")
        code, out, err = _run(capsys, "design", cat, queries, "--out-dir", tmp_path / "s")
        assert code == 2 and out == ""
        line = _one_error(err)
        assert "cluster_id: cluster '=c(1)' starts with '='" in line
        assert not (tmp_path / "s").exists()


class TestOutputFaults:
    def test_full_disk(self, tmp_path, capsys, monkeypatch):
        cat, queries = _inputs(tmp_path)
        before = _listing(tmp_path)
        calls = {"n": 0}
        real_fsync = os.fsync

        def fsync(fd):
            calls["n"] += 1
            if calls["n"] == 3:                     # the third file of the design fills the disk
                raise OSError(errno.ENOSPC, "No space left on device")
            return real_fsync(fd)

        monkeypatch.setattr(os, "fsync", fsync)
        code, out, err = _run(capsys, "design", cat, queries, "--out-dir", tmp_path / "s")
        assert code == 2 and out == ""
        assert f"cannot write --out-dir {tmp_path / 's'}: no space left on the device; nothing was written" in \
            _one_error(err)
        assert _listing(tmp_path) == before         # no folder, no temporary folder

    def test_full_disk_real_tmpfs(self, tmp_path, capsys, bb_data_dir):
        mnt = tmp_path / "mnt"
        mnt.mkdir()
        if os.geteuid() != 0 or not shutil.which("mount") or subprocess.run(
                ["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mnt)], check=False,
                capture_output=True).returncode:
            pytest.skip("cannot mount a small tmpfs here (needs root); the simulated full disk covers it")
        try:
            code, out, err = _run(capsys, "design", bb_data_dir / "clusters.json", bb_data_dir / "queries.json",
                                  "--out-dir", mnt / "s")
            assert code == 2 and out == ""
            assert "no space left on the device; nothing was written" in _one_error(err)
            assert list(mnt.iterdir()) == []
        finally:
            subprocess.run(["umount", str(mnt)], check=False)

    def test_read_only_place(self, tmp_path, capsys, monkeypatch):
        cat, queries = _inputs(tmp_path)
        before = _listing(tmp_path)
        real_mkdir = os.mkdir

        def read_only(path, *a, **kw):
            if Path(path).parent == tmp_path:
                raise OSError(errno.EROFS, "Read-only file system", str(path))
            return real_mkdir(path, *a, **kw)

        monkeypatch.setattr(os, "mkdir", read_only)
        code, out, err = _run(capsys, "design", cat, queries, "--out-dir", tmp_path / "s")
        assert code == 2 and out == ""
        assert f"cannot write --out-dir {tmp_path / 's'}: read-only file system" in _one_error(err)
        assert _listing(tmp_path) == before

    def test_out_under_a_file(self, tmp_path, capsys):
        cat, queries = _inputs(tmp_path)
        before = _listing(tmp_path)
        code, _, err = _run(capsys, "design", cat, queries, "--out-dir", tmp_path / "cat.csv" / "s")
        assert code == 2 and str(tmp_path / "cat.csv") in _one_error(err)
        assert _listing(tmp_path) == before

    def test_out_is_the_folder_of_the_inputs(self, tmp_path, capsys):
        cat, queries = _inputs(tmp_path)
        before = {p: p.read_bytes() for p in tmp_path.iterdir()}
        code, _, err = _run(capsys, "design", cat, queries, "--out-dir", tmp_path)
        line = _one_error(err)
        assert code == 2 and f"--out-dir {tmp_path} contains an input of this command" in line
        assert {p: p.read_bytes() for p in tmp_path.iterdir()} == before

    def test_existing_empty_folder_is_filled(self, tmp_path, capsys):
        cat, queries = _inputs(tmp_path)
        (tmp_path / "s").mkdir()
        code, _, err = _run(capsys, "design", cat, queries, "--out-dir", tmp_path / "s")
        assert code == 0, err
        assert json.loads((tmp_path / "s" / "design.json").read_text())["requests"] == 8
        assert not [p for p in tmp_path.iterdir() if p.name.endswith((".tmp", ".old"))]
