"""The package works where it is installed (issue 39).

Builds the sdist and the wheel from a copy of the sources (``python -m build``), checks both with ``twine check
--strict`` and checks that they hold every bundled data file (package data ``toolbias_stats/_data``, a symbolic link
to the repository's ``data/``: one copy in git). Then installs the wheel into a fresh virtual environment with the
locked dependencies (torch 2.13.0 first, then ``requirements.lock``, then the wheel without dependencies: the order
of ``scripts/_env.sh``) and, from a temporary folder outside the checkout, runs the command line on the bundled
study found through ``toolbias_stats.datasets``: ``validate``, ``check`` and ``report``. The report must be the
same file as the one the checkout writes (it holds input hashes and file names relative to the manifest, no absolute
paths and no time stamps, so the two are byte for byte equal).

The dependencies are installed from a local wheelhouse (``$TOOLBIAS_WHEELHOUSE``, default
``~/.cache/toolbias_stats/wheelhouse``), filled once by ``pip download`` (needs the package index once, about
800 MB); later runs install offline (``--no-index``, ``--no-compile``): about 35 s of CPU time.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LOCK = ROOT / "requirements.lock"
TORCH = "torch==2.13.0"   # as scripts/_env.sh: the CPU wheel first
REPORT_ARGS = ["--bootstrap", "200", "--null", "200", "--seed", "1"]


def _run(cmd, **kw):
    out = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, check=False, **kw)
    assert out.returncode == 0, f"{cmd} failed ({out.returncode}):\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}"
    return out


def _data_files() -> list[str]:
    return sorted(str(p.relative_to(ROOT / "data")) for p in (ROOT / "data").rglob("*") if p.is_file())


def _wheelhouse() -> Path:
    default = Path.home() / ".cache" / "toolbias_stats" / "wheelhouse"
    return Path(os.environ.get("TOOLBIAS_WHEELHOUSE", default))


def _pip_install(python: Path, *args):
    """Install into the venv of ``python`` from the wheelhouse; fill it from the index when something is missing."""
    house = _wheelhouse()
    house.mkdir(parents=True, exist_ok=True)
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "--python", python]
    offline = pip + ["install", "-q", "--no-index", "--no-compile", "--find-links", house, *args]
    first = subprocess.run([str(c) for c in offline], capture_output=True, text=True, check=False)
    if first.returncode != 0:
        _run(pip + ["download", "-q", "-d", house, *args])
        _run(offline)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """``(sdist, wheel)`` built from a copy of the sources (the checkout is left untouched: no build/, egg-info)."""
    tmp = tmp_path_factory.mktemp("wheel-build")
    src = tmp / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, src / name)
    shutil.copytree(ROOT / "data", src / "data")
    # symlinks=True keeps toolbias_stats/_data a link to ../data, as in git
    shutil.copytree(ROOT / "toolbias_stats", src / "toolbias_stats", symlinks=True,
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    assert (src / "toolbias_stats" / "_data").is_symlink()
    dist = tmp / "dist"
    _run([sys.executable, "-m", "build", "--no-isolation", "--outdir", dist, src])
    return next(dist.glob("*.tar.gz")), next(dist.glob("*.whl"))


def test_data_is_one_copy_in_git():
    link = ROOT / "toolbias_stats" / "_data"
    assert link.is_symlink() and os.readlink(link) == "../data"
    from toolbias_stats import datasets

    assert datasets.data_dir() == (ROOT / "data").resolve()


def test_twine_check(built):
    out = _run([sys.executable, "-m", "twine", "check", "--strict", *built])
    assert out.stdout.count("PASSED") == 2


def test_distributions_hold_every_data_file(built):
    sdist, wheel = built
    want = _data_files()
    assert "biasbusters/study.toml" in want and "embeddings/all-MiniLM-L6-v2.npz" in want
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        got = sorted(n.removeprefix("toolbias_stats/_data/") for n in names if n.startswith("toolbias_stats/_data/"))
        assert got == want
        npz = z.read("toolbias_stats/_data/embeddings/all-MiniLM-L6-v2.npz")
        assert hashlib.sha256(npz).digest() == hashlib.sha256(
            (ROOT / "data/embeddings/all-MiniLM-L6-v2.npz").read_bytes()).digest()
        assert not [n for n in names if n.startswith("data/")], "the data ship once, inside the package"
    with tarfile.open(sdist) as t:
        members = {m.name.split("/", 1)[1]: m for m in t.getmembers() if "/" in m.name}
    in_sdist = sorted(n.removeprefix("toolbias_stats/_data/") for n, m in members.items()
                      if n.startswith("toolbias_stats/_data/") and m.isfile())
    assert in_sdist == want


# ~70 s (a virtual environment with the locked stack installed, three CLI runs; the first run fills the wheelhouse
# from the index, about 800 MB): CI runs it in its own step (`bash scripts/test.sh -m slow`)
@pytest.mark.slow
def test_installed_wheel_runs_outside_the_checkout(built, tmp_path):
    _, wheel = built
    # the checkout's report (this interpreter, the sources on the path) runs while the environment is installed
    here = tmp_path / "checkout"
    here.mkdir()
    dev_env = {**os.environ, "PYTHONPATH": str(ROOT), "MPLBACKEND": "Agg"}
    checkout_report = subprocess.Popen(
        [sys.executable, "-m", "toolbias_stats.cli", "report", str(ROOT / "data/biasbusters/study.toml"), "--out",
         str(here / "checkout.html"), *REPORT_ARGS], cwd=here, env=dev_env, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True)
    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", venv])
    python = venv / "bin" / "python"
    _pip_install(python, TORCH)
    _pip_install(python, "-r", LOCK)
    _run([sys.executable, "-m", "pip", "--python", python, "install", "-q", "--no-deps", "--no-index", wheel])
    _run([sys.executable, "-m", "pip", "--python", python, "check"])

    work = tmp_path / "elsewhere"
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(PATH=f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}", HF_HUB_OFFLINE="1",
               TRANSFORMERS_OFFLINE="1", MPLBACKEND="Agg")
    probe = ("import json, toolbias_stats, toolbias_stats.datasets as d\n"
             "from toolbias_stats.features._similarity import _bundled_path\n"
             "print(json.dumps({'package': toolbias_stats.__file__, 'study': str(d.path('biasbusters/study.toml')),"
             " 'vectors': _bundled_path().is_file()}))")
    where = json.loads(_run([python, "-c", probe], cwd=work, env=env).stdout)
    site = venv.resolve() / "lib"
    assert Path(where["package"]).resolve().is_relative_to(site), where
    study = Path(where["study"])
    assert study.resolve().is_relative_to(site) and where["vectors"], where

    exe = venv / "bin" / "toolbias-stats"
    out = json.loads(_run([exe, "validate", study, "--json"], cwd=work, env=env).stdout)
    assert out["rows"] == 105_500
    check = subprocess.run([str(exe), "check", str(study), "--max-delta-pos", "0.35", "--bootstrap", "200",
                            "--no-plan", "--junit", "gate.xml"], cwd=work, env=env, capture_output=True, text=True,
                           check=False)
    assert check.returncode == 1, check.stderr   # some BiasBusters models are beyond 0.35
    assert (work / "gate.xml").is_file()

    # the report from the wheel, and the checkout's (started above)
    _run([exe, "report", study, "--out", work / "wheel.html", *REPORT_ARGS], cwd=work, env=env)
    out, err = checkout_report.communicate(timeout=600)
    assert checkout_report.returncode == 0, err[-3000:]
    wheel_page = (work / "wheel.html").read_text(encoding="utf-8")
    checkout_page = (here / "checkout.html").read_text(encoding="utf-8")
    assert str(venv) not in wheel_page and str(ROOT) not in checkout_page   # no absolute paths recorded
    assert wheel_page == checkout_page
