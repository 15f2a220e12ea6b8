"""The documentation's structure, checked without building it (``bash scripts/docs.sh`` builds it, warnings as errors).

* ``docs/`` holds no JSON (analysis results live next to their scripts in ``analyses/``);
* every page of the user guide links into the API reference at least once (a MyST role such as
  ``{func}`toolbias_stats.selection_bias```);
* no page title carries an issue number, nor does any heading of the user pages (the record in ``docs/dev/`` may
  name issues in its sections);
* every page sits in exactly one toctree (one index entry per topic);
* every name of every public ``__all__`` has an entry in the API reference that ``docs/conf.py`` generates
  (``docs/_apigen.py``), and every public function and class has a generated page. The names are read from the
  package at test time, so that adding or removing a public name needs no change here.
"""
from __future__ import annotations

import importlib
import importlib.util
import re
from pathlib import Path
from types import ModuleType

import pytest

DOCS = Path(__file__).resolve().parent.parent / "docs"
#: Generated at build time (gitignored): not sources.
GENERATED = {"_build", "auto_examples", "generated", "api"}
ROLE = re.compile(r"\{(?:py:)?(?:func|class|meth|mod|data|obj|attr|exc)\}`[^`]+`")
ISSUE = re.compile(r"\bissues?\s+#?\d+|#\d+\b", re.IGNORECASE)   # "issue 22", "issues 21 and 35", "#22"


def _sources(suffix: str) -> list[Path]:
    return sorted(p for p in DOCS.rglob(f"*{suffix}")
                  if not GENERATED & set(p.relative_to(DOCS).parts[:-1]))


def _prose(text: str) -> list[str]:
    """The lines outside fenced code blocks (``` or :::), without the fences."""
    out, fence = [], False
    for line in text.splitlines():
        if line.lstrip().startswith(("```", ":::")):
            fence = not fence
            continue
        if not fence:
            out.append(line)
    return out


def _headings(path: Path) -> list[str]:
    return [ln for ln in _prose(path.read_text(encoding="utf-8")) if re.match(r"#{1,6} ", ln)]


def _apigen() -> ModuleType:
    spec = importlib.util.spec_from_file_location("_apigen", DOCS / "_apigen.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_docs_hold_no_json():
    found = [str(p.relative_to(DOCS)) for p in _sources(".json")]
    assert not found, f"JSON belongs next to the analysis that wrote it (analyses/), not in docs/: {found}"


def test_every_guide_page_links_into_the_api():
    pages = sorted((DOCS / "guide").glob("*.md"))
    assert len(pages) >= 15
    bare = [p.name for p in pages if not any(ROLE.search(ln) for ln in _prose(p.read_text(encoding="utf-8")))]
    assert not bare, f"guide pages without a link into the API reference ({{func}}`...` etc.): {bare}"


def test_no_issue_numbers_in_titles():
    bad = []
    for page in _sources(".md"):
        heads = _headings(page)
        user = "dev" not in page.relative_to(DOCS).parts
        checked = heads if user else heads[:1]   # the record may name issues in its sections, not in its title
        bad += [f"{page.relative_to(DOCS)}: {h}" for h in checked if ISSUE.search(h)]
    assert not bad, "issue numbers belong in the changelog and the record, not in headings:\n" + "\n".join(bad)


def _toctree_entries(page: Path) -> list[str]:
    """The documents a Markdown page's ```{toctree} blocks list, as paths relative to docs/ without suffix."""
    entries, inside, lines = [], False, page.read_text(encoding="utf-8").splitlines()
    for line in lines:
        s = line.strip()
        if s.startswith("```{toctree}"):
            inside = True
            continue
        if inside and s.startswith("```"):
            inside = False
        elif inside and s and not s.startswith(":"):
            target = (page.parent / s).resolve().relative_to(DOCS.resolve())
            entries.append(target.as_posix())
    return entries


def test_every_page_has_one_index_entry():
    listed: dict[str, int] = {}
    for page in _sources(".md"):
        for entry in _toctree_entries(page):
            listed[entry] = listed.get(entry, 0) + 1
    pages = {p.relative_to(DOCS).with_suffix("").as_posix() for p in _sources(".md")} - {"index"}
    twice = {p: n for p, n in listed.items() if n > 1}
    missing = sorted(pages - set(listed))
    assert not twice, f"pages listed in more than one toctree: {twice}"
    assert not missing, f"pages in no toctree: {missing}"


def _autosummary(text: str) -> tuple[list[tuple[str, bool]], list[str]]:
    """(entry, in a :toctree: table) of every autosummary table of a page, and its ``py:data`` names."""
    entries: list[tuple[str, bool]] = []
    data = re.findall(r"^\.\. py:data:: (\S+)$", text, re.MULTILINE)
    blocks = re.split(r"^\.\. autosummary::\n", text, flags=re.MULTILINE)[1:]
    for block in blocks:
        toctree = False
        for line in block.splitlines():
            if not line.strip():
                continue
            if not line.startswith("   "):
                break
            if line.strip().startswith(":toctree:"):
                toctree = True
            elif not line.strip().startswith(":"):
                entries.append((line.strip().lstrip("~"), toctree))
    return entries, data


def test_every_public_name_has_an_api_entry():
    gen = _apigen()
    sources = gen.api_sources()
    public = gen.public_names()
    assert {"toolbias_stats", "toolbias_stats.plots", "toolbias_stats.report"} <= set(public)
    pages: dict[str, str] = {}
    for module in public:
        path = "api.rst" if module == "toolbias_stats" else f"api/{module}.rst"
        assert path in sources, f"no API page for {module}"
        pages[module] = sources[path]
    documented: set[str] = set()   # full names with a generated page
    for module, text in pages.items():
        entries, _ = _autosummary(text)
        documented |= {f"{module}.{e}" for e, toc in entries if toc}
    missing, unlinked = [], []
    for module, names in public.items():
        mod = importlib.import_module(module)
        entries, data = _autosummary(pages[module])
        by_last = {e.rsplit(".", 1)[-1]: e for e, _ in entries}
        for name in names:
            obj = getattr(mod, name)
            if name in data:
                continue
            if name not in by_last:
                missing.append(f"{module}.{name}")
                continue
            if isinstance(obj, ModuleType):
                continue
            entry = by_last[name]
            full = entry if entry.startswith("toolbias_stats.") else f"{module}.{entry}"
            home, _, attr = full.rpartition(".")
            if full not in documented or getattr(importlib.import_module(home), attr) is not obj:
                unlinked.append(f"{module}.{name} -> {full}")
    assert not missing, f"public names without an entry in the API reference: {missing}"
    assert not unlinked, f"public functions/classes whose entry has no generated page: {unlinked}"


@pytest.mark.parametrize("page", ["plots", "report"])
def test_plots_and_report_have_function_pages(page):
    text = _apigen().api_sources()[f"api/toolbias_stats.{page}.rst"]
    entries, _ = _autosummary(text)
    mod = importlib.import_module(f"toolbias_stats.{page}")
    functions = [n for n in mod.__all__ if callable(getattr(mod, n)) and not isinstance(getattr(mod, n), type)]
    assert functions and {n for n, toc in entries if toc} >= set(functions)
