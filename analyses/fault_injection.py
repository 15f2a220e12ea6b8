"""Fault-injection harness (issues 21 and 37): every class of bad input, one line each, so that the next
regression shows up as a diff of ``analyses/fault_injection.txt``.

Usage:  python analyses/fault_injection.py [--out analyses/fault_injection.txt]

Each class builds its inputs in a fresh folder (the builders of ``tests/test_fault_injection.py``), runs the CLI
once (first engine, first command of the class; a class marked ``crash`` in a child process) and prints::

    name | exit code | lines on stderr | nothing written | the message (paths as <dir>)

A class passes when the exit code is 2, stderr holds one message, stdout is empty and nothing was written or
left next to the inputs. The test suite checks every engine and command; this harness is the one-screen view.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import re
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

_PROGRESS = re.compile(r"toolbias-stats \S+: \[ *[\d.]+ s\]")


def _snapshot(d: Path) -> dict:
    return {str(p.relative_to(d)): p.lstat().st_size for p in d.rglob("*") if not p.is_dir()}


def _cli(argv: list, crash: bool) -> tuple:
    if crash:
        import os
        import subprocess

        env = dict(os.environ, PYTHONPATH=str(ROOT))
        proc = subprocess.run([sys.executable, "-m", "toolbias_stats.cli", *argv], capture_output=True, text=True,
                              env=env, timeout=120, check=False)
        return proc.returncode, proc.stdout, proc.stderr
    from toolbias_stats.cli._commands import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except BaseException as exc:   # an escape is what this harness reports
            code = f"{type(exc).__name__} escaped"
    return code, out.getvalue(), err.getvalue()


def _line(name: str, d: Path, code, out: str, err: str, written: bool) -> str:
    lines = [ln for ln in err.splitlines() if ln.strip() and not _PROGRESS.match(ln)]
    ok = code == 2 and len(lines) == 1 and not out and not written and "Traceback" not in err
    msg = (lines[0] if lines else "").replace(str(d), "<dir>")
    msg = msg.split(": error: ", 1)[-1]
    for pattern, repl in ((r"127\.0\.0\.1:\d+", "127.0.0.1:<port>"), (r"process \d+ on host \S+, started \S+;",
                                                                         "process <pid> ...;")):
        msg = re.sub(pattern, repl, msg)   # what changes from run to run
    return (f"{'ok  ' if ok else 'FAIL'} {name:<32} exit={code} lines={len(lines)} "
            f"written={'yes' if written else 'no'} | {msg[:150]}")


def run_cases() -> list:
    import test_fault_injection as t

    out = []
    for case in t.CASES:
        with tempfile.TemporaryDirectory() as tmp:
            d = Path(tmp) / "in"
            d.mkdir()
            manifest = case.build(d)
            before = _snapshot(d)
            command, engine = case.commands[0], case.engines[0]
            argv = [command, str(manifest), "--engine", engine] + (["--n-resamples", "0"] if command == "bias" else [])
            code, o, e = _cli(argv, case.crash)
            out.append(_line(case.name, d, code, o, e, _snapshot(d) != before))
    for ccase in t.COMMAND_CASES:
        with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as stack:
            d = Path(tmp) / "in"
            d.mkdir()
            argv = ccase.build(d, stack)
            before = t._files(d)
            code, o, e = _cli(argv, False)
            out.append(_line(ccase.name, d, code, o, e, t._files(d) != before))
    return out


def run_memory_and_idata() -> list:
    """The classes of ``tests/test_memory_and_idata_faults.py`` (a 2 GB address-space cap, no room to parse,
    the netCDF writer crashing on a full disk)."""
    import os
    import subprocess

    import test_memory_and_idata_faults as m

    out = []
    with tempfile.TemporaryDirectory() as tmp:
        manifest = m._study(Path(tmp) / "in", 168)
        proc = subprocess.run([sys.executable, "-m", "toolbias_stats.cli", "bias", str(manifest), "--n-resamples", "0"],
                              capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=str(ROOT)),
                              preexec_fn=m._cap(2_000_000_000), timeout=120, check=False)
        state = "ok  " if proc.returncode == 0 else "FAIL"
        out.append(f"{state} {'bias_168_rows_under_2gb_cap':<32} exit={proc.returncode} (a valid study: exit 0)")
    for how in ("enospc", "crash"):
        with tempfile.TemporaryDirectory() as tmp:
            import toolbias_stats.models

            saved = toolbias_stats.models.__dict__.get("fit_bayes")
            toolbias_stats.models.fit_bayes = lambda *a, _h=how, **k: m._Result(_h)
            try:
                d = Path(tmp)
                manifest = m._study(d / "in", 40)
                (d / "out").mkdir()
                before = _snapshot(d)
                code, o, e = _cli(["bayes", str(manifest), "--out", str(d / "out" / "fit.nc")], False)
                out.append(_line(f"bayes_idata_full_disk_{how}", d, code, o, e, _snapshot(d) != before))
            finally:
                if saved is None:
                    del toolbias_stats.models.fit_bayes
                else:
                    toolbias_stats.models.fit_bayes = saved
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(Path(__file__).with_suffix(".txt")))
    args = ap.parse_args()
    lines = run_cases() + run_memory_and_idata()
    text = "\n".join(lines) + "\n"
    print(text, end="")
    Path(args.out).write_text(text, encoding="utf-8")
    failed = sum(ln.startswith("FAIL") for ln in lines)
    print(f"{len(lines)} classes, {failed} failed", file=sys.stderr)


if __name__ == "__main__":
    main()
