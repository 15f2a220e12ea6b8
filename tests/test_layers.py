"""One-way layers over the package's import graph (issue 24); the contract is written down in docs/architecture.md.

The graph is read with :mod:`ast` from the source files (nothing is imported): module-level and function-level
``import`` / ``from ... import`` statements, relative imports resolved, and the ``"toolbias_stats.module:function"``
strings of the display registry (imported by name at run time). A module may import modules of its own layer and of
the layers below it (:data:`LAYERS`, lowest first). The analysis subpackages are peers in one layer: one may import
another only through its public ``__init__`` (``toolbias_stats.choice``, not ``toolbias_stats.choice._log``).

Today's code breaks the contract in a few places; those imports are listed in :data:`ALLOWED` (importer, imported,
why) and today's import cycles in :data:`ALLOWED_CYCLES`, so that the check passes now, any NEW violation or cycle
fails, and an entry that is no longer needed fails too (delete it: the lists only shrink).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

PACKAGE = "toolbias_stats"
PACKAGE_DIR = Path(__file__).resolve().parent.parent / PACKAGE

#: The layers, lowest first: (name, module prefixes). A module belongs to the layer of its longest matching prefix.
#: Arrows of the data flow (readers -> SelectionLog -> SelectionCounts -> metrics/models -> results -> plots ->
#: report -> CLI) become this import order: the SelectionLog type sits below the readers that construct it.
LAYERS = (
    ("core", ("toolbias_stats._schema", "toolbias_stats._validation", "toolbias_stats.exceptions",
              "toolbias_stats._memory", "toolbias_stats._output", "toolbias_stats.datasets", "toolbias_stats._lazy",
              "toolbias_stats._format", "toolbias_stats._json", "toolbias_stats._multitest")),
    ("selection_log", ("toolbias_stats.io._catalog", "toolbias_stats.io._row_rules",
                       "toolbias_stats.io._study_design", "toolbias_stats.io._selection_log")),
    ("readers", ("toolbias_stats.io.readers", "toolbias_stats.io._clusters", "toolbias_stats.io._manifest",
                 "toolbias_stats.io._dataset")),
    ("selection_counts", ("toolbias_stats.io._counts", "toolbias_stats.io.engines", "toolbias_stats.io._load",
                          "toolbias_stats.io")),
    ("results", ("toolbias_stats._display", "toolbias_stats._text")),
    ("metrics_models", ("toolbias_stats.metrics", "toolbias_stats.models", "toolbias_stats.features",
                        "toolbias_stats.simulate")),
    ("analysis", ("toolbias_stats.experiments", "toolbias_stats.choice", "toolbias_stats.choicemodel",
                  "toolbias_stats.toolsense", "toolbias_stats.shadow", "toolbias_stats.design",
                  "toolbias_stats.audit", "toolbias_stats.gate")),
    ("api", ("toolbias_stats",)),
    ("plots", ("toolbias_stats.plots",)),
    ("report", ("toolbias_stats.report",)),
    ("cli", ("toolbias_stats.cli",)),
)

#: Layers whose top-level packages are peers: one may import another's public ``__init__`` only.
PEER_LAYERS = {"analysis"}

#: Entries of :data:`LAYERS` that name one module only (a package ``__init__``), not a prefix: a new module
#: ``toolbias_stats._x`` or ``toolbias_stats.io._x`` must be placed in the table on purpose.
EXACT = {"toolbias_stats", "toolbias_stats.io"}

#: Today's violations: (importer, imported) -> why. Shrinks only (a stale entry fails the check). Counted: 4
#: (2 readers -> choice._log, 1 models -> choicemodel, 1 SelectionLog -> SelectionCounts); was 10 (the text
#: formatters moved down from report/ into the results layer, toolbias_stats._text, imported normally: the 5 registry
#: strings of _display and choicemodel -> report went); before that 14.
ALLOWED = {
    ("toolbias_stats.io._selection_log", "toolbias_stats.io._counts"):
        "SelectionLog.counts() builds SelectionCounts (function-level import)",
    ("toolbias_stats.io.readers.inspect_ai_log", "toolbias_stats.choice._log"):
        "the Inspect reader builds a ChoiceLog, whose type lives in choice/",
    ("toolbias_stats.io.readers.lm_eval", "toolbias_stats.choice._log"):
        "the lm-eval reader builds a ChoiceLog, whose type lives in choice/",
    ("toolbias_stats.models._explain_choice", "toolbias_stats.choicemodel"):
        "the attempt-level explanation fits a choice model (function-level import)",
}

def _modules(names: str) -> frozenset:
    """``"io._load cli._audit ."`` -> full module names (``.`` is the package root)."""
    return frozenset(PACKAGE if n == "." else f"{PACKAGE}.{n}" for n in names.split())


#: Today's import cycles (strongly connected components of more than one module) -> why. A cycle found must lie
#: inside one of them; one that no longer overlaps any found cycle fails (delete it). Counted: none (was 2 cycles
#: of 19 and 2 modules: the io/ tangle and design/_components <-> design/_plan; before that 55, 19 and 9).
ALLOWED_CYCLES: dict = {}

_REGISTRY = re.compile(r"^(toolbias_stats(?:\.\w+)+):\w+$")


# -- the graph ----------------------------------------------------------------------------------------------------
def module_files(package_dir: Path = PACKAGE_DIR) -> dict:
    """``{module name: (path, is_package)}`` for every ``.py`` file of the package."""
    out = {}
    for path in sorted(package_dir.rglob("*.py")):
        parts = list(path.relative_to(package_dir.parent).with_suffix("").parts)
        is_pkg = parts[-1] == "__init__"
        out[".".join(parts[:-1] if is_pkg else parts)] = (path, is_pkg)
    return out


def _known(name: str, modules) -> str | None:
    """The longest prefix of ``name`` that is a module of the package (``None`` outside the package)."""
    while name:
        if name in modules:
            return name
        name = name.rpartition(".")[0]
    return None


def imports_of(module: str, is_package: bool, source: str, modules) -> dict:
    """``{imported module: first line}`` of one module's source: every import statement at any depth (module
    level, functions, methods, ``try`` blocks), relative imports resolved, plus ``"toolbias_stats.x:attr"``
    registry strings. Imports of a name from a package resolve to the submodule when one has that name."""
    found = {}

    def add(target, line):
        target = _known(target, modules)
        if target is not None and target != module:
            found.setdefault(target, line)

    tree = ast.parse(source)
    # imports under ``if TYPE_CHECKING:`` exist for annotations only (no run-time edge): not part of the graph
    typing_only = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            typing_only |= {id(n) for stmt in node.body for n in ast.walk(stmt)}
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.Import):
            for alias in node.names:
                add(alias.name, node.lineno)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".") if is_package else module.split(".")[:-1]
                base = base[:len(base) - (node.level - 1)]
                base = ".".join(base + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                add(sub if sub in modules else base, node.lineno)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            m = _REGISTRY.match(node.value)
            if m:
                add(m.group(1), node.lineno)
    return found


def _is_type_checking(test: ast.expr) -> bool:
    """``TYPE_CHECKING`` or ``typing.TYPE_CHECKING`` as an ``if`` condition."""
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def import_graph(package_dir: Path = PACKAGE_DIR) -> dict:
    """``{module: {imported module: line}}`` over the whole package."""
    modules = module_files(package_dir)
    return {m: imports_of(m, is_pkg, path.read_text(encoding="utf-8"), modules)
            for m, (path, is_pkg) in modules.items()}


def layer_of(module: str, layers=LAYERS):
    """``(rank, layer name, matched prefix)`` of a module, or ``None`` when no layer claims it."""
    best = None
    for rank, (name, prefixes) in enumerate(layers):
        for p in prefixes:
            matches = module == p or (p not in EXACT and module.startswith(p + "."))
            if matches and (best is None or len(p) > len(best[2])):
                best = (rank, name, p)
    return best


def violations(graph: dict, layers=LAYERS, peer_layers=PEER_LAYERS) -> dict:
    """``{(importer, imported): rule broken}``: an import of a higher layer, or a peer's private module."""
    out = {}
    for a, targets in graph.items():
        la = layer_of(a, layers)
        for b in targets:
            lb = layer_of(b, layers)
            if la is None or lb is None:
                continue
            if lb[0] > la[0]:
                out[(a, b)] = f"upward: {la[1]} imports {lb[1]}"
            elif la[1] == lb[1] in peer_layers and la[2] != lb[2] and b != lb[2]:
                out[(a, b)] = f"peer's private module: {la[2]} imports {b} (use {lb[2]})"
    return out


def cycles(graph: dict) -> list:
    """Strongly connected components with more than one module (Tarjan, iterative), largest first."""
    index, low, on_stack, stack, out = {}, {}, set(), [], []
    nodes = sorted(set(graph) | {t for ts in graph.values() for t in ts})
    counter = 0
    for root in nodes:
        if root in index:
            continue
        work = [(root, iter(sorted(graph.get(root, ()))))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            v, it = work[-1]
            advanced = False
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph.get(w, ())))))
                    advanced = True
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = set()
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.add(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(frozenset(comp))
    return sorted(out, key=lambda c: (-len(c), sorted(c)))


# -- the package -------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def graph():
    return import_graph()


def test_every_module_has_a_layer(graph):
    missing = sorted(m for m in graph if layer_of(m) is None)
    assert not missing, f"modules in no layer (add their prefix to LAYERS in {__file__}): {missing}"


def test_no_new_layer_violation(graph):
    found = violations(graph)
    new = {k: v for k, v in found.items() if k not in ALLOWED}
    assert not new, "imports that break the layers (see docs/architecture.md):\n" + "\n".join(
        f"  {a} -> {b} (line {graph[a][b]}): {why}" for (a, b), why in sorted(new.items()))


def test_allow_list_only_shrinks(graph):
    found = violations(graph)
    stale = sorted(k for k in ALLOWED if k not in found)
    assert not stale, f"no longer violations: delete them from ALLOWED in {__file__}: {stale}"


def test_no_new_import_cycle(graph):
    found = cycles(graph)
    new = [c for c in found if not any(c <= allowed for allowed in ALLOWED_CYCLES)]
    assert not new, "new import cycles (strongly connected components):\n" + "\n".join(
        f"  {len(c)} modules: {sorted(c)}" for c in new)
    stale = [sorted(a)[:3] for a in ALLOWED_CYCLES if not any(c & a for c in found)]
    assert not stale, f"cycles that are gone: delete them from ALLOWED_CYCLES: {stale}"


def test_the_graph_is_not_vacuous(graph):
    """The reader sees the package: >100 modules and >400 imports, function-level ones included."""
    assert len(graph) > 100 and sum(map(len, graph.values())) > 400
    assert "toolbias_stats.io._counts" in graph["toolbias_stats.io._selection_log"]    # inside a method
    assert "toolbias_stats._text" in graph["toolbias_stats._display"]                  # module level


# -- the check itself, on synthetic modules ------------------------------------------------------------------------
SYNTHETIC = {
    "toolbias_stats.metrics._fake": (False, ("import numpy\nfrom .._schema import STATUSES\n"
                                             "def f():\n    from ..report import _text\n    return _text\n")),
    "toolbias_stats.report._text": (False, "from ..metrics import _fake\n"),
    "toolbias_stats.report": (True, "from . import _text\n"),
    "toolbias_stats.metrics": (True, "from ._fake import f\n"),
    "toolbias_stats._schema": (False, "STATUSES = ()\n"),
    "toolbias_stats.shadow._score": (False, "from ..choice._log import ChoiceLog\nfrom ..choice import ChoiceLog\n"),
    "toolbias_stats.choice._log": (False, "class ChoiceLog: ...\n"),
    "toolbias_stats.choice": (True, "from ._log import ChoiceLog\n"),
    "toolbias_stats.shadow": (True, "from ._score import *\n"),
}


def _synthetic_graph():
    modules = {m: (None, is_pkg) for m, (is_pkg, _) in SYNTHETIC.items()}
    return {m: imports_of(m, is_pkg, src, modules) for m, (is_pkg, src) in SYNTHETIC.items()}


def test_a_deliberate_upward_import_fails_the_check():
    g = _synthetic_graph()
    assert g["toolbias_stats.metrics._fake"] == {"toolbias_stats._schema": 2, "toolbias_stats.report._text": 4}
    found = violations(g)
    assert found[("toolbias_stats.metrics._fake", "toolbias_stats.report._text")] == \
        "upward: metrics_models imports report"
    assert ("toolbias_stats.report._text", "toolbias_stats.metrics._fake") not in found      # downward is fine
    assert ("toolbias_stats.metrics._fake", "toolbias_stats._schema") not in found
    with pytest.raises(AssertionError, match=re.escape("metrics._fake -> toolbias_stats.report._text")):
        new = {k: v for k, v in found.items() if k not in ALLOWED}
        assert not new, "\n".join(f"{a} -> {b}" for a, b in new)


def test_a_peers_private_module_fails_but_its_init_does_not():
    found = violations(_synthetic_graph())
    assert found[("toolbias_stats.shadow._score", "toolbias_stats.choice._log")].startswith("peer's private module")
    assert ("toolbias_stats.shadow._score", "toolbias_stats.choice") not in found


def test_cycles_are_found_with_function_level_imports():
    g = _synthetic_graph()
    found = cycles(g)
    assert frozenset({"toolbias_stats.metrics._fake", "toolbias_stats.report._text"}) in found
    assert all(len(c) > 1 for c in found)
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [frozenset({"a", "b", "c"})]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_a_new_module_outside_the_table_has_no_layer():
    assert layer_of("toolbias_stats._version") is None and layer_of("toolbias_stats.io._rules") is None
    assert layer_of("toolbias_stats.io")[1] == "selection_counts" and layer_of("toolbias_stats")[1] == "api"
    assert layer_of("toolbias_stats.experiments._shift_parts")[1] == "analysis"


def test_relative_imports_resolve():
    modules = {"toolbias_stats.io.readers.table": (None, False), "toolbias_stats.io.readers": (None, True),
               "toolbias_stats.io._catalog": (None, False), "toolbias_stats.io": (None, True),
               "toolbias_stats.exceptions": (None, False), "toolbias_stats": (None, True)}
    src = ("from ...exceptions import SelectionLogError\nfrom .._catalog import ToolCatalog\n"
           "from .. import _catalog\nfrom . import table\nimport toolbias_stats.io\nfrom ... import __version__\n")
    got = imports_of("toolbias_stats.io.readers.anthropic", False, src, modules)
    assert set(got) == {"toolbias_stats.exceptions", "toolbias_stats.io._catalog", "toolbias_stats.io.readers.table",
                        "toolbias_stats.io", "toolbias_stats"}
    pkg = imports_of("toolbias_stats.io", True, "from ._catalog import ToolCatalog\n", modules)
    assert set(pkg) == {"toolbias_stats.io._catalog"}


def test_type_checking_imports_are_not_edges():
    modules = {"toolbias_stats.a": None, "toolbias_stats.b": None, "toolbias_stats.c": None}
    src = ("from typing import TYPE_CHECKING\nimport typing\nif TYPE_CHECKING:\n    from . import b\n"
           "if typing.TYPE_CHECKING:\n    import toolbias_stats.c\nelse:\n    pass\n")
    assert imports_of("toolbias_stats.a", False, src, modules) == {}
    src2 = "if TYPE_CHECKING:\n    pass\nelse:\n    from . import b\n"
    assert imports_of("toolbias_stats.a", False, src2, modules) == {"toolbias_stats.b": 4}
