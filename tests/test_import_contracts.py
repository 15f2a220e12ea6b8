"""The import rules as import-linter contracts (issue 40; ``[tool.importlinter]`` in ``pyproject.toml``).

``lint-imports`` from the repository root runs the same check. The contracts: ``layers`` (the package's layers,
lowest = core, exhaustive over the modules of ``toolbias_stats/``), ``io-layers`` (inside ``io/``: the SelectionLog
type below the readers below SelectionCounts), ``private-modules`` (a package's ``_private`` modules are imported
only from inside it, for the packages already clean) and ``acyclic`` (no import cycle between the subpackages).
Their ``ignore_imports`` entries are listed here too (:data:`ALLOWED_IGNORES`): a new one fails, the lists only
shrink (an entry that no longer matches an import fails ``lint-imports`` itself), and at most
:data:`MAX_IGNORES` of them are permanent. The synthetic package at the end shows that each contract bites.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

pytest.importorskip("importlinter", reason="import-linter is in the test extra (requirements.lock pins it)")

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = ROOT / "pyproject.toml"
CONTRACTS = {"layers": "layers", "io-layers": "layers", "private-modules": "private_modules",
             "acyclic": "acyclic_siblings"}

#: (contract id, ignored import) -> why. Shrinks only.
ALLOWED_IGNORES = {
    ("layers", "toolbias_stats.models._explain_choice -> toolbias_stats.choicemodel"):
        "the attempt-level explanation fits a choice model (function-level import)",
    ("io-layers", "toolbias_stats.io._selection_log -> toolbias_stats.io._counts"):
        "SelectionLog.counts() builds SelectionCounts (function-level import)",
}
#: At most this many ignored imports in all.
MAX_IGNORES = 3


def _config(path: Path = PYPROJECT) -> dict:
    return tomllib.loads(path.read_text(encoding="utf-8"))["tool"]["importlinter"]


def _lint(config: Path, capsys) -> tuple[int, str]:
    """``lint-imports --config config`` in process: (exit code, report)."""
    import importlinter.api  # noqa: F401  (configures import-linter's adapters)
    from importlinter.cli import lint_imports

    capsys.readouterr()
    code = lint_imports(config_filename=str(config), no_cache=True, no_logo=True)
    return code, " ".join(capsys.readouterr().out.split())


def test_the_package_keeps_its_import_contracts(capsys):
    code, report = _lint(PYPROJECT, capsys)
    assert code == 0, report
    assert f"{len(CONTRACTS)} kept, 0 broken" in report


def test_the_contracts_are_the_declared_ones():
    contracts = {c["id"]: c for c in _config()["contracts"]}
    assert {k: c["type"] for k, c in contracts.items()} == CONTRACTS
    assert contracts["layers"]["exhaustive"] and contracts["io-layers"]["exhaustive"]
    assert "depth" not in contracts["acyclic"]   # every level: no package cycle inside io/, models/, ... either
    assert _config()["exclude_type_checking_imports"] is True
    # a stale ignore fails lint-imports only with the default alerting ("error"): nobody may relax it
    assert not any("unmatched_ignore_imports_alerting" in c for c in contracts.values())


def test_ignore_lists_only_shrink():
    found = {(c["id"], imp) for c in _config()["contracts"] for imp in c.get("ignore_imports", ())}
    new = sorted(found - set(ALLOWED_IGNORES))
    assert not new, f"new ignore_imports entries (fix the import instead): {new}"
    stale = sorted(set(ALLOWED_IGNORES) - found)
    assert not stale, f"delete them from ALLOWED_IGNORES in {__file__}: {stale}"
    permanent = [k for k in found if not ALLOWED_IGNORES[k].startswith("TEMPORARY")]
    assert len(permanent) <= MAX_IGNORES


# -- each contract bites, on a synthetic package --------------------------------------------------------------------
FAKE_CONFIG = """
[tool.importlinter]
root_package = "fakepkg"
exclude_type_checking_imports = true

[[tool.importlinter.contracts]]
id = "layers"
name = "layers"
type = "layers"
containers = ["fakepkg"]
exhaustive = true
layers = ["high", "low : other", "core"]

[[tool.importlinter.contracts]]
id = "private-modules"
name = "private modules"
type = "private_modules"
packages_with_private_modules = ["fakepkg.low", "fakepkg.other"]

[[tool.importlinter.contracts]]
id = "acyclic"
name = "acyclic"
type = "acyclic_siblings"
ancestors = ["fakepkg"]
"""

FAKE = {
    "__init__.py": "",
    "core.py": "X = 1\n",
    "low/__init__.py": "from ._impl import f\n",
    "low/_impl.py": "from .. import core\n\ndef f():\n    return core.X\n",
    "other/__init__.py": "from ..low import f\n",
    "high/__init__.py": "from ..low import f\nfrom ..other import f as g\n",
}


@pytest.fixture
def fake(tmp_path, monkeypatch):
    """A clean synthetic package ``fakepkg``; returns ``(config path, writer of one module)``."""
    monkeypatch.syspath_prepend(str(tmp_path))

    def write(name: str, text: str) -> None:
        path = tmp_path / "fakepkg" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")

    for name, text in FAKE.items():
        write(name, text)
    config = tmp_path / "pyproject.toml"
    config.write_text(FAKE_CONFIG, encoding="utf-8")
    return config, write


def test_a_clean_package_passes(fake, capsys):
    code, report = _lint(fake[0], capsys)
    assert code == 0 and "3 kept, 0 broken" in report, report


def test_a_deliberate_upward_import_breaks_the_layers_and_makes_a_cycle(fake, capsys):
    config, write = fake
    write("low/_impl.py", FAKE["low/_impl.py"] + "\ndef h():\n    from .. import high\n    return high\n")
    code, report = _lint(config, capsys)
    assert code == 1
    assert "fakepkg.low is not allowed to import fakepkg.high" in report
    assert "fakepkg.low._impl -> fakepkg.high" in report
    assert "No cycles are allowed in fakepkg" in report and "2 broken" in report


def test_a_peers_private_module_breaks_but_its_package_does_not(fake, capsys):
    config, write = fake
    write("other/_use.py", "from ..low import f\n")
    assert _lint(config, capsys)[0] == 0
    write("other/_use.py", "from ..low._impl import f\n")
    code, report = _lint(config, capsys)
    assert code == 1 and "fakepkg.other._use -> fakepkg.low._impl" in report and "1 broken" in report


def test_a_module_outside_the_layers_breaks_the_exhaustive_contract(fake, capsys):
    config, write = fake
    write("_new.py", "")
    code, report = _lint(config, capsys)
    assert code == 1 and "fakepkg._new" in report


def test_type_checking_imports_are_not_edges(fake, capsys):
    config, write = fake
    write("low/_typed.py", "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .. import high\n")
    assert _lint(config, capsys)[0] == 0
    # the form of the generated typing blocks in the package __init__s (rewrite_imports.py)
    write("low/_typed.py", "import typing as _typing\nif _typing.TYPE_CHECKING:\n    from .. import high\n")
    assert _lint(config, capsys)[0] == 0
    write("low/_typed.py", "if True:\n    from .. import high\n")
    assert _lint(config, capsys)[0] == 1
