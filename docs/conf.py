"""Sphinx configuration of the toolbias_stats documentation site (built by ``bash scripts/docs.sh``).

The build needs no network: no intersphinx, no remote images, models and data are read offline.
The API reference (``api.rst`` and ``api/<module>.rst``, one page per public module, one generated page per
public function and class) is written here from the public ``__all__`` lists (``_apigen.py``) so that it always
lists the public API; the examples gallery (``examples/*.py``) is executed by sphinx-gallery at every build.
"""
from __future__ import annotations

import os
import re
import shutil
import sys
import warnings
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("MPLBACKEND", "Agg")

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

import toolbias_stats as tbs  # noqa: E402

project = "toolbias_stats"
author = "toolbias_stats developers"
copyright = "2025-2026, toolbias_stats developers"
release = tbs.__version__
version = release

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "numpydoc",
    "myst_parser",
    "sphinx_gallery.gen_gallery",
]

source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build", "**.ipynb_checkpoints", "examples/README.rst", "auto_examples/*.ipynb",
                    "auto_examples/*.py", "auto_examples/*.zip", "auto_examples/*.json"]
# formats.md shows CSV samples in ```csv fences, a lexer Pygments does not have: shown as plain text
suppress_warnings = ["misc.highlighting_failure"]

# -- Markdown (the user guide and the reference pages are plain Markdown that also reads well on the repository)
myst_enable_extensions = ["colon_fence", "deflist"]
myst_heading_anchors = 4  # ``[text](page.md#section-title)`` links resolve

# -- API reference
autosummary_generate = True
autosummary_imported_members = True
autodoc_default_options = {"members": False}
autodoc_typehints = "none"  # numpydoc's Parameters sections carry the types
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_xref_param_type = False
numpydoc_validation_checks: set[str] = set()

# -- Examples gallery: every example runs at build time (each is a few seconds)
sphinx_gallery_conf = {
    "examples_dirs": "examples",
    "gallery_dirs": "auto_examples",
    "filename_pattern": r".*\.py$",  # execute all of them
    "abort_on_example_error": True,
    "download_all_examples": False,
    "remove_config_comments": True,
    "within_subsection_order": "FileNameSortKey",
    "reset_modules": ("matplotlib",),
    "show_memory": False,
    "min_reported_time": 1,
}

# -- HTML
html_theme = "pydata_sphinx_theme"
html_title = f"toolbias_stats {release}"
html_theme_options = {
    "navigation_depth": 2,
    "show_toc_level": 2,
    "navbar_end": ["theme-switcher", "navbar-icon-links"],
    "icon_links": [],
}
html_static_path: list[str] = []
html_show_sourcelink = False

# sphinx-gallery and pandas emit these while examples run; they are not documentation problems
warnings.filterwarnings("ignore", category=UserWarning, message="Matplotlib is currently using agg")


# -- the API reference, generated from the public __all__ lists (docs/_apigen.py): api.rst, api/<module>.rst ---
def _write_api_pages() -> None:
    sys.path.insert(0, str(HERE))
    from _apigen import api_sources

    shutil.rmtree(HERE / "api", ignore_errors=True)   # generated: a module that left the API leaves no page
    (HERE / "api").mkdir()
    for rel, text in api_sources().items():
        (HERE / rel).write_text(text)


_write_api_pages()


# A cell of a simple table that starts with "+ " (e.g. fit_bayes's table of model variants: "+ query effects")
# would start a bullet list inside the table; the plus is text there.
_PLUS_CELL = re.compile(r"^(\s*``[^`]+``(?: \(default\))?\s{2,})\+ ")


def _escape_plus_cells(app, what, name, obj, options, lines):
    lines[:] = [_PLUS_CELL.sub(r"\1\\+ ", ln) for ln in lines]


def setup(app):
    app.connect("autodoc-process-docstring", _escape_plus_cells)
