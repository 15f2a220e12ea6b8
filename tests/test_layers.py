"""The import edges that import-linter cannot see: ``"toolbias_stats.module:function"`` registry strings.

The layers themselves are import-linter contracts (``[tool.importlinter]`` in ``pyproject.toml``, run by
``tests/test_import_contracts.py`` and ``lint-imports``; issue 40). A string such as the display registry's
``"toolbias_stats.report._text:format_bias_table"`` is imported by name at run time, so no import tool sees it; this
file reads such strings with :mod:`ast` and holds them to the same layers (the ``layers`` contract's table, read from
``pyproject.toml``). Today's string edges that break the layers are listed in :data:`ALLOWED` (they only shrink: a
stale entry fails). When no registry string is left, :func:`test_string_edges_remain` fails: delete this file.
"""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

import pytest

PACKAGE = "toolbias_stats"
ROOT = Path(__file__).resolve().parent.parent
PACKAGE_DIR = ROOT / PACKAGE

#: Today's upward string edges (importer, imported) -> why. Removed at merge by the text branch (issue 40: the
#: formatters move to the text layer and the ``_display.TEXT`` registry goes).
ALLOWED = {
    ("toolbias_stats._display", "toolbias_stats.report._text"):
        "TEXT registry: str(result) is the CLI text, formatted in report/ (removed at merge by the text branch)",
    ("toolbias_stats._display", "toolbias_stats.report._experiments_html"):
        "TEXT registry: str(ShiftResult/SubsetMetricsResult) (removed at merge by the text branch)",
    ("toolbias_stats._display", "toolbias_stats.report._shadow_html"):
        "TEXT registry: str(ShadowResult) (removed at merge by the text branch)",
    ("toolbias_stats._display", "toolbias_stats.report._toolsense_html"):
        "TEXT registry: str(ToolSense results) (removed at merge by the text branch)",
    ("toolbias_stats._display", "toolbias_stats.report._bayes_html"):
        "TEXT registry: str(BayesResult) (removed at merge by the text branch)",
}

_REGISTRY = re.compile(r"^(toolbias_stats(?:\.\w+)+):\w+$")


def layers(pyproject: Path = ROOT / "pyproject.toml") -> list:
    """The ``layers`` contract's layers, lowest first, as lists of full module names."""
    config = tomllib.loads(pyproject.read_text(encoding="utf-8"))["tool"]["importlinter"]
    (contract,) = [c for c in config["contracts"] if c.get("id") == "layers"]
    (container,) = contract["containers"]
    return [[f"{container}.{m.strip()}" for m in re.split(r"[:|]", layer)] for layer in reversed(contract["layers"])]


def rank(module: str, table: list) -> int | None:
    """Index of the layer holding ``module`` (a listed module or a descendant); ``None`` outside the table."""
    for i, mods in enumerate(table):
        if any(module == m or module.startswith(m + ".") for m in mods):
            return i
    return None


def module_name(path: Path, package_dir: Path = PACKAGE_DIR) -> str:
    parts = list(path.relative_to(package_dir.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def string_edges(package_dir: Path = PACKAGE_DIR) -> dict:
    """``{(importer, imported module): line}`` of every ``"toolbias_stats.x:attr"`` string constant."""
    out = {}
    for path in sorted(package_dir.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                m = _REGISTRY.match(node.value)
                if m:
                    out.setdefault((module_name(path, package_dir), m.group(1)), node.lineno)
    return out


def upward(edges: dict, table: list) -> dict:
    """The edges whose imported module sits in a higher layer than the importer: ``{edge: why}``."""
    out = {}
    for a, b in edges:
        ra, rb = rank(a, table), rank(b, table)
        if ra is None or rb is None:
            out[(a, b)] = f"not in the layers table: {a if ra is None else b}"
        elif rb > ra:
            out[(a, b)] = f"upward string edge: layer {ra} -> layer {rb}"
    return out


@pytest.fixture(scope="module")
def edges():
    return string_edges()


def test_string_edges_remain(edges):
    assert edges, "no registry string is left: delete tests/test_layers.py (import-linter sees every edge now)"


def test_no_new_upward_string_edge(edges):
    new = {k: v for k, v in upward(edges, layers()).items() if k not in ALLOWED}
    assert not new, "registry strings that break the layers:\n" + "\n".join(
        f"  {a} -> {b} (line {edges[(a, b)]}): {why}" for (a, b), why in sorted(new.items()))


def test_allow_list_only_shrinks(edges):
    stale = sorted(k for k in ALLOWED if k not in upward(edges, layers()))
    assert not stale, f"no longer violations: delete them from ALLOWED in {__file__}: {stale}"


# -- the check itself, on synthetic modules ------------------------------------------------------------------------
def test_a_registry_string_pointing_up_is_found(tmp_path):
    pkg = tmp_path / PACKAGE
    (pkg / "report").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "_display.py").write_text('TEXT = {"A": "toolbias_stats.report._text:fmt", "B": "not:a registry"}\n')
    (pkg / "report" / "_text.py").write_text('X = "toolbias_stats._display:TEXT"\n')
    found = string_edges(pkg)
    assert found == {("toolbias_stats._display", "toolbias_stats.report._text"): 1,
                     ("toolbias_stats.report._text", "toolbias_stats._display"): 1}
    table = layers()
    assert upward(found, table) == {("toolbias_stats._display", "toolbias_stats.report._text"):
                                    f"upward string edge: layer {rank('toolbias_stats._display', table)} -> "
                                    f"layer {rank('toolbias_stats.report', table)}"}


def test_the_layers_table_is_read_from_the_contract():
    table = layers()
    assert rank("toolbias_stats._resampling", table) == 0
    assert rank("toolbias_stats.io.readers.table", table) < rank("toolbias_stats.metrics._bias", table) \
        < rank("toolbias_stats.choice._stats", table) < rank("toolbias_stats.cli", table)
    assert rank("toolbias_stats.choice", table) == rank("toolbias_stats.experiments._shift", table)
    assert rank("toolbias_stats", table) is None and rank("toolbias_stats._version", table) is None
