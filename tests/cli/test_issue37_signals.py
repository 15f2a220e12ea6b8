"""Issue 37: SIGTERM or SIGHUP while an output is written leaves no temporary file; the process then ends
as the signal asks (status -signal), with the previous output, if any, untouched."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SIGNALS = [signal.SIGTERM, signal.SIGHUP]

# The writer starts with the default action for SIGHUP, as under a shell: a suite started under `nohup` ignores
# SIGHUP, the child inherits that, and the package rightly leaves an ignored signal ignored.
WRITER = """
import signal, sys, time
signal.signal(signal.SIGHUP, signal.SIG_DFL)
from pathlib import Path
from toolbias_stats._output import atomic_folder, atomic_path
kind, out = sys.argv[1], Path(sys.argv[2])
if kind == "file":
    with atomic_path(out) as tmp:
        tmp.write_text("new")
        print("ready", flush=True)
        time.sleep(30)
else:
    with atomic_folder(out) as tmp:
        (tmp / "a.txt").write_text("new")
        print("ready", flush=True)
        time.sleep(30)
"""


def _env():
    return {**os.environ, "PYTHONPATH": str(ROOT)}


def _leftovers(d: Path) -> list:
    return sorted(p.name for p in d.rglob("*") if p.name.endswith((".tmp", ".old")) or ".tmp" in p.name)


@pytest.mark.parametrize("sig", SIGNALS, ids=lambda s: s.name)
@pytest.mark.parametrize("kind", ["file", "folder"])
def test_signal_while_writing(tmp_path, sig, kind):
    out = tmp_path / ("report.html" if kind == "file" else "qmd")
    if kind == "file":
        out.write_text("old")
    else:
        out.mkdir()
        (out / "a.txt").write_text("old")
    proc = subprocess.Popen([sys.executable, "-c", WRITER, kind, str(out)], env=_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "ready"
    assert _leftovers(tmp_path)                          # the temporary output exists now
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == -sig, err                  # ended by the signal, as without the clean-up
    assert "Traceback" not in err
    assert _leftovers(tmp_path) == []
    assert (out if kind == "file" else out / "a.txt").read_text() == "old"


def test_design_killed_mid_write_leaves_no_temporary_files(tmp_path, bb_data_dir):
    """The CLI end to end: `design` of the whole vendored study, SIGTERM as soon as its temporary folder
    appears."""
    out = tmp_path / "s"
    proc = subprocess.Popen([sys.executable, "-m", "toolbias_stats.cli", "design", str(bb_data_dir / "clusters.json"),
                             str(bb_data_dir / "queries.json"), "--out", str(out), "--runs", "3"], env=_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not _leftovers(tmp_path) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.001)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode in (-signal.SIGTERM, 0), err
    assert "Traceback" not in err
    assert _leftovers(tmp_path) == []
    if proc.returncode != 0:
        assert not out.exists()                          # all or nothing


# -- standard output on a full disk (issue 37: `bias --json > file`) --------------------------------------------
def _study(d: Path) -> Path:
    (d / "catalog.csv").write_text("tool_id,cluster_id\n" + "".join(f"t{i},c1\n" for i in range(1, 6)))
    (d / "log.csv").write_text("cluster_id,query_id,rotation,chosen_tool,status\n"
                               + "".join(f"c1,q{q},{r},t{(q + r) % 5 + 1},ok\n" for q in range(20) for r in (1, 2)))
    (d / "study.toml").write_text('format = "table"\ncatalog = "catalog.csv"\n[[logs]]\npath = "log.csv"\n'
                                  'model = "m"\n')
    return d / "study.toml"


BIAS = ["-m", "toolbias_stats.cli", "bias", "--n-resamples", "0", "--null", "0", "--json"]


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
def test_stdout_on_a_full_device(tmp_path):
    with open("/dev/full", "w") as full:
        proc = subprocess.run([sys.executable, *BIAS, str(_study(tmp_path))], env=_env(), stdout=full,
                              stderr=subprocess.PIPE, text=True, timeout=120, check=False)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    want = "toolbias-stats bias: error: cannot write standard output: no space left on the device; nothing was written."
    assert lines == [want], proc.stderr


def test_stdout_file_on_a_full_tmpfs(tmp_path):
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mnt)],
                                           capture_output=True, check=False).returncode:
        pytest.skip("cannot mount a small tmpfs here (needs root); /dev/full covers it")
    try:
        filler = mnt / "filler"
        with open(filler, "wb") as fh, contextlib.suppress(OSError):   # leave ~1 KiB: less than the document
            fh.write(b"x" * (64 * 1024 - 1024))
        out = mnt / "out.json"
        with open(out, "w") as fh:
            proc = subprocess.run([sys.executable, *BIAS, str(_study(tmp_path))], env=_env(), stdout=fh,
                                  stderr=subprocess.PIPE, text=True, timeout=120, check=False)
        assert proc.returncode == 2, proc.stderr
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and f"cannot write standard output ({out}): no space left on the device" in lines[0]
        assert out.stat().st_size == 0                    # no partial document left
    finally:
        subprocess.run(["umount", str(mnt)], check=False)
