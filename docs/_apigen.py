"""The sources of the API reference, written from the public ``__all__`` lists (used by ``conf.py`` and the tests).

Public modules are ``toolbias_stats`` and every module below it whose dotted name has no part starting with ``_``
and that declares ``__all__`` (the command line, ``toolbias_stats.cli``, is documented in ``docs/cli.md``).
Every function and class gets one generated page (autosummary ``:toctree:``), under the shallowest public module
that exports it: ``selection_bias`` is ``toolbias_stats.selection_bias``, and the table of
``toolbias_stats.metrics`` links to that page. Constants are described on the page of each module that lists them.
:func:`api_sources` returns the files (``api.rst`` and ``api/<module>.rst``) without writing them, so that
``tests/test_docs_structure.py`` can check them without a build.
"""
from __future__ import annotations

import importlib
import inspect
import pkgutil
from collections.abc import Callable
from types import ModuleType
from typing import Any

PACKAGE = "toolbias_stats"
#: Modules not documented in the API reference (and why).
SKIP = {"toolbias_stats.cli": "the command line: docs/cli.md"}

#: Sections of the top-level page: (title, which function names go there). The rest are "Other functions".
SECTIONS: list[tuple[str, Callable[[str], bool]]] = [
    ("Reading logs and studies", lambda n: n.startswith("read_") or n in {
        "load_selection_log", "count_table", "standardise_name", "function_name"}),
    ("Bias metrics and intervals", lambda n: n in {
        "selection_bias", "calibrated_mean_tv", "tv_distance", "tv_to_uniform", "normalised_tv",
        "expected_tv_uniform"}),
    ("Explanations and models", lambda n: n in {
        "tool_features", "explain_selection", "feature_correlations", "ols_fit", "model_alignment", "fit_bayes",
        "choice_model", "tool_shadow"}),
    ("Experiments, design and audits", lambda n: n in {
        "selection_shift", "subset_selection_metrics", "variance_components", "plan_study", "design_study",
        "write_requests", "run_study"}),
    ("Choice studies (multiple choice and judges)", lambda n: n in {
        "option_position_bias", "accuracy_by_gold_position", "judge_consistency"}),
]


def public_modules() -> list[ModuleType]:
    """The public modules, shallowest first (``toolbias_stats`` itself first)."""
    top = importlib.import_module(PACKAGE)
    found, queue = [top], [top]
    while queue:
        pkg = queue.pop(0)
        if not hasattr(pkg, "__path__"):
            continue
        children = []
        for info in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda i: i.name):
            name = f"{pkg.__name__}.{info.name}"
            if info.name.startswith("_") or name in SKIP:
                continue
            mod = importlib.import_module(name)
            children.append(mod)
        found += [m for m in children if hasattr(m, "__all__")]
        queue += children
    found.sort(key=lambda m: m.__name__.count("."))   # stable: breadth first, by name within a depth
    return found


def _kind(obj: Any) -> str:
    if inspect.ismodule(obj):
        return "module"
    if inspect.isclass(obj):
        return "error" if issubclass(obj, (Exception, Warning)) else "class"
    if inspect.isroutine(obj):
        return "function"
    return "data"


def _entries(modules: list[ModuleType]) -> dict[str, list[tuple[str, str, str]]]:
    """Per module: (name, kind, target) for each name of ``__all__``; target is the documented full name."""
    canonical: dict[tuple[int, str], str] = {}
    out: dict[str, list[tuple[str, str, str]]] = {}
    for mod in modules:
        rows = []
        for name in dict.fromkeys(mod.__all__):
            obj = getattr(mod, name)
            kind = _kind(obj)
            full = f"{mod.__name__}.{name}"
            if kind == "module":
                full = obj.__name__
            elif kind in {"function", "class", "error"}:
                full = canonical.setdefault((id(obj), name), full)
            rows.append((name, kind, full))
        out[mod.__name__] = rows
    return out


def _table(title: str, rows: list[tuple[str, str, str]], module: str, toctree: str) -> list[str]:
    """Names defined here: an autosummary with a generated page each. Names documented elsewhere (the top-level
    package re-exports many): a second table linking to their pages (autosummary generates the pages only of a
    ``:toctree:`` table, and it prefixes its entries with the current module, so the two cannot share one)."""
    here = [n for n, _, full in rows if full == f"{module}.{n}"]
    there = [full for n, _, full in rows if full != f"{module}.{n}"]
    out: list[str] = []
    if here:
        out += [title, "-" * len(title), "", ".. autosummary::", f"   :toctree: {toctree}", ""]
        out += [f"   {n}" for n in here] + [""]
    if there:
        also = f"{title} re-exported here"
        out += [also, "-" * len(also), "", ".. autosummary::", ""] + [f"   ~{f}" for f in there] + [""]
    return out


def _data(mod: ModuleType, rows: list[tuple[str, str, str]]) -> list[str]:
    if not rows:
        return []
    out = ["Constants", "---------", ""]
    for name, _, _ in rows:
        obj = getattr(mod, name)
        text = repr(obj).replace("\n", " ")
        out.append(f".. py:data:: {name}")
        if len(text) <= 100 and not hasattr(obj, "__fspath__"):
            out.append(f"   :value: {text}")
        else:
            out.append(f"   :type: {type(obj).__name__}")
        out.append("")
    return out


def _module_page(mod: ModuleType, rows: list[tuple[str, str, str]], toctree: str,
                 children: list[str], top: bool) -> list[str]:
    name = mod.__name__
    by_kind = {k: [r for r in rows if r[1] == k] for k in ("function", "class", "error", "data", "module")}
    text: list[str] = []
    if top:
        text += ["API reference", "=============", "",
                 ("Everything in the first tables is importable from the top-level package "
                  "(``import toolbias_stats as tbs``); the subpackages at the end list the rest, each name linked "
                  "to its page. Every page is generated from the docstrings, whose examples run as doctests in "
                  "the test suite."), "", f".. currentmodule:: {name}", ""]
        left = by_kind["function"]
        for title, pick in SECTIONS:
            chosen = [r for r in left if pick(r[0])]
            left = [r for r in left if r not in chosen]
            text += _table(title, chosen, name, toctree)
        text += _table("Other functions", left, name, toctree)
    else:
        text += [name, "=" * len(name), "", f".. automodule:: {name}", ""]
        text += _table("Functions", by_kind["function"], name, toctree)
    text += _table("Classes", by_kind["class"], name, toctree)
    text += _table("Exceptions and warnings", by_kind["error"], name, toctree)
    text += _data(mod, by_kind["data"])
    subs = sorted(set([r[2] for r in by_kind["module"]] + children))
    if subs:
        title = "Subpackages and modules"
        rel = [s[len(name) + 1:] if s.startswith(name + ".") else f"~{s}" for s in subs]   # full: a warning
        text += [title, "-" * len(title), "", ".. autosummary::", ""] + [f"   {s}" for s in rel] + [""]
        text += [".. toctree::", "   :hidden:", ""] + [f"   {'api/' if top else ''}{s}" for s in subs] + [""]
    return text


def api_sources() -> dict[str, str]:
    """``{path relative to docs/: reStructuredText}`` of ``api.rst`` and one ``api/<module>.rst`` per module."""
    modules = public_modules()
    entries = _entries(modules)
    names = [m.__name__ for m in modules]

    def children(parent: str) -> list[str]:
        return [n for n in names if n != parent and n.rsplit(".", 1)[0] == parent]

    files = {}
    for mod in modules:
        top = mod.__name__ == PACKAGE
        lines = _module_page(mod, entries[mod.__name__], "generated" if top else "../generated",
                             children(mod.__name__), top)
        files["api.rst" if top else f"api/{mod.__name__}.rst"] = "\n".join(lines) + "\n"
    return files


def public_names() -> dict[str, list[str]]:
    """``{module: its __all__}`` for every public module (what the API reference must cover)."""
    return {m.__name__: list(dict.fromkeys(m.__all__)) for m in public_modules()}
