"""Issue 37: memory caps and the netCDF writer on a full disk end in one message (exit 2), never a crash.

- ``bias`` under ``prlimit --as=2000000000`` died with SIGSEGV on a 168-row study: pyarrow's default allocator
  (mimalloc, used by pandas 3 for text) reserved a 1 GiB arena, and DuckDB had no room left to start.
- pandas' CSV parser threads die with SIGSEGV when an allocation fails under a cap: the room is checked first.
- NumPy's ``MemoryError`` and DuckDB's out-of-memory outside the counting were tracebacks.
- ``bayes --idata`` on a full disk: the HDF5 writer printed its errors and the interpreter died with SIGSEGV.
"""

from __future__ import annotations

import errno
import json
import os
import resource
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from toolbias_stats.cli._commands import main

_HEADER = "cluster_id,query_id,rotation,chosen_tool,status\n"
CATALOG = "tool_id,cluster_id\nt1,c1\nt2,c1\nt3,c1\nt4,c1\n"


def _study(d: Path, n: int) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    (d / "catalog.csv").write_text(CATALOG, encoding="utf-8")
    (d / "l.csv").write_text(_HEADER + "".join(f"c1,q{i},{i % 4 + 1},t{i % 3 + 1},ok\n" for i in range(n)),
                             encoding="utf-8")
    (d / "study.toml").write_text('format = "table"\ncatalog = "catalog.csv"\n\n[[logs]]\npath = "l.csv"\n'
                                  'model = "m"\n', encoding="utf-8")
    return d / "study.toml"


def _files(d: Path) -> dict:
    return {str(p.relative_to(d)): p.stat().st_size for p in d.rglob("*") if p.is_file()}


def _env() -> dict:
    import toolbias_stats

    env = {k: v for k, v in os.environ.items() if k != "ARROW_DEFAULT_MEMORY_POOL"}
    return dict(env, PYTHONPATH=str(Path(toolbias_stats.__file__).resolve().parents[1]))


def _cap(nbytes: int):
    return lambda: resource.setrlimit(resource.RLIMIT_AS, (nbytes, resource.RLIM_INFINITY))


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="address-space limits as on Linux")
def test_bias_runs_under_a_2gb_address_space_cap(tmp_path):
    """Before: SIGSEGV (exit -11) with no message on 168 rows, DuckDB engine. After: the result, 168 rows used."""
    manifest = _study(tmp_path / "in", 168)
    proc = subprocess.run([sys.executable, "-m", "toolbias_stats.cli", "bias", str(manifest), "--n-resamples", "0",
                           "--null", "0", "--json"], capture_output=True, text=True, env=_env(), timeout=120,
                          preexec_fn=_cap(2_000_000_000), check=False)
    assert proc.returncode == 0, (proc.returncode, proc.stderr[-2000:])
    rows = json.loads(proc.stdout)
    text = json.dumps(rows)
    assert '"n_used": 168' in text or '"n_attempts": 168' in text or "168" in text


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="address-space limits as on Linux")
def test_pandas_read_without_room_is_one_message(tmp_path):
    """A CSV whose parse needs more address space than the cap leaves: one message naming the file, the limit and
    what to change (before: pandas' parser threads died with SIGSEGV)."""
    manifest = _study(tmp_path / "in", 300_000)   # ~7 MB: ~110 MB to parse, more than the 40 MB left
    before = _files(tmp_path / "in")
    script = ("import resource, sys\n"
              "from toolbias_stats.cli._commands import main\n"
              "import pandas, pyarrow, scipy.special\n"
              "vm = int([l.split()[1] for l in open('/proc/self/status') if l.startswith('VmSize')][0]) * 1024\n"
              "resource.setrlimit(resource.RLIMIT_AS, (vm + 40_000_000, resource.RLIM_INFINITY))\n"
              f"sys.exit(main(['bias', {str(manifest)!r}, '--engine', 'pandas', '--n-resamples', '0']))\n")
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=_env(), timeout=120,
                          check=False)
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-2000:])
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("toolbias-stats bias: error: "), proc.stderr[-2000:]
    assert f"{manifest.parent}/l.csv: reading this file with pandas needs about" in lines[0]
    assert "(ulimit -v / prlimit --as): raise that limit, or use --engine duckdb" in lines[0]
    assert proc.stdout == "" and _files(tmp_path / "in") == before


@pytest.mark.parametrize("error", ["numpy", "duckdb"])
def test_out_of_memory_is_one_message(error, tmp_path, capsys, monkeypatch):
    """NumPy's MemoryError and DuckDB's OutOfMemoryException while computing: one message, exit 2."""
    import toolbias_stats.metrics

    class OutOfMemoryException(Exception):   # DuckDB's class name (what the CLI recognises)
        pass

    def fail(*args, **kwargs):
        raise MemoryError("Unable to allocate 7.45 GiB") if error == "numpy" else OutOfMemoryException(
            "Out of Memory Error: could not allocate block of size 256.0 KiB (953.6 MiB/953.6 MiB used)")

    monkeypatch.setattr(toolbias_stats.metrics, "selection_bias", fail, raising=False)
    manifest = _study(tmp_path / "in", 40)
    code = main(["bias", str(manifest), "--n-resamples", "10", "--engine", "pandas"])
    out = capsys.readouterr()
    lines = out.err.strip().splitlines()
    assert code == 2 and out.out == "" and len(lines) == 1, out.err
    assert lines[0].startswith("toolbias-stats bias: error: out of memory (said: ")
    assert "TOOLBIAS_DUCKDB_MEMORY_LIMIT" in lines[0] and "--n-resamples" in lines[0]


# ----------------------------------------------------------------------------------------------------------
class _Idata:
    def __init__(self, how: str) -> None:
        self.how = how

    def to_netcdf(self, path: str) -> str:
        with open(path, "wb") as fh:
            fh.write(b"\x89HDF\r\n\x1a\n" + b"\0" * 4096)   # a partial file
        if self.how == "enospc":   # what h5py raises on a full disk, before the interpreter dies at exit
            raise RuntimeError("Can't write data (file write failed: errno = 28, error message = 'No space left "
                               "on device')")
        os.kill(os.getpid(), signal.SIGSEGV)   # the crash seen inside the netCDF writer
        return path


class _Result:
    def __init__(self, how: str) -> None:
        self.idata = _Idata(how)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="the writer's child process needs fork")
@pytest.mark.parametrize("how, reason", [("enospc", "no space left on the device"),
                                         ("crash", "the netcdf writer failed (killed by signal 11)")])
def test_bayes_idata_full_disk_is_one_message(how, reason, tmp_path, capsys, monkeypatch):
    """``bayes --idata OUT.nc`` whose writer fails (full disk) or crashes: one message naming the path, exit 2,
    no partial file; this process survives (the writer runs in a child)."""
    import toolbias_stats.models

    monkeypatch.setattr(toolbias_stats.models, "fit_bayes", lambda *a, **k: _Result(how), raising=False)
    manifest = _study(tmp_path / "in", 40)
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    code = main(["bayes", str(manifest), "--out", str(out_dir / "fit.nc")])
    out = capsys.readouterr()
    lines = out.err.strip().splitlines()
    assert code == 2 and out.out == "" and len(lines) == 1, (code, out.err)
    expected = f"toolbias-stats bayes: error: cannot write --out {out_dir / 'fit.nc'}: {reason}; nothing was written."
    assert lines[0] == expected
    assert list(out_dir.iterdir()) == []


def test_write_in_child_reports_enospc():
    from toolbias_stats._output import write_in_child

    def full():
        raise OSError(errno.ENOSPC, "No space left on device")

    with pytest.raises(OSError) as info:
        write_in_child(full)
    assert info.value.errno == errno.ENOSPC


def test_duckdb_oom_while_reading_is_one_line(tmp_path, capsys, monkeypatch):
    """DuckDB's out-of-memory met while reading a file (a full spill folder did this on a 1 MiB tmpfs) came with
    DuckDB's SQL advice over 8 lines: now one line naming the limit, the spill folder and what to change."""
    import toolbias_stats.io
    from toolbias_stats.exceptions import SelectionLogError

    said = ("l.csv: cannot read the file: Out of Memory Error: could not allocate block of size 30.5 MiB (27.9 KiB/"
            "28.6 MiB used)\n\nPossible solutions:\n* Reducing the number of threads (SET threads=X)\n")

    def fail(*args, **kwargs):
        raise SelectionLogError(said)

    monkeypatch.setattr(toolbias_stats.io, "read_study", fail, raising=False)
    code = main(["bias", str(_study(tmp_path / "in", 10)), "--n-resamples", "0"])
    out = capsys.readouterr()
    lines = out.err.strip().splitlines()
    assert code == 2 and out.out == "" and len(lines) == 1, out.err
    assert "could not allocate block of size 30.5 MiB" in lines[0] and "SET threads" not in lines[0]
    assert "TOOLBIAS_DUCKDB_MEMORY_LIMIT" in lines[0] and "toolbias_stats_duckdb" in lines[0] and "TMPDIR" in lines[0]
