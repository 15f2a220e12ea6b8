"""Sphinx configuration of the toolbias_stats documentation site (built by ``bash scripts/docs.sh``).

The build needs no network: no intersphinx, no remote images, models and data are read offline.
The API reference (``api.rst``) is written here from ``toolbias_stats.__all__`` so that it always lists the
public API; the examples gallery (``examples/*.py``) is executed by sphinx-gallery at every build.
"""
from __future__ import annotations

import inspect
import os
import re
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


# -- the API page, generated from toolbias_stats.__all__ -------------------------------------------------------
_SECTIONS = [
    ("Reading logs and studies", lambda n, o: n.startswith("read_") or n in {
        "load_selection_log", "count_table", "standardise_name", "function_name"}),
    ("Bias metrics and intervals", lambda n, o: n in {
        "selection_bias", "calibrated_mean_tv", "tv_distance", "tv_to_uniform", "normalised_tv",
        "expected_tv_uniform"}),
    ("Explanations and models", lambda n, o: n in {
        "tool_features", "explain_selection", "feature_correlations", "ols_fit", "model_alignment", "fit_bayes",
        "choice_model", "tool_shadow"}),
    ("Experiments, design and audits", lambda n, o: n in {
        "selection_shift", "subset_selection_metrics", "variance_components", "plan_study", "design_study",
        "write_requests", "run_study"}),
    ("Choice studies (multiple choice and judges)", lambda n, o: n in {
        "option_position_bias", "accuracy_by_gold_position", "judge_consistency"}),
]


def _write_api_page() -> None:
    names = list(dict.fromkeys(tbs.__all__))
    objs = {n: getattr(tbs, n) for n in names}
    modules = [n for n in names if inspect.ismodule(objs[n])]
    errors = [n for n in names if inspect.isclass(objs[n]) and issubclass(objs[n], (Exception, Warning))]
    classes = [n for n in names if inspect.isclass(objs[n]) and n not in errors]
    functions = [n for n in names if callable(objs[n]) and not inspect.isclass(objs[n])]
    data = [n for n in names if n not in modules + errors + classes + functions]

    def table(title: str, items: list[str], toctree: bool = True) -> str:
        if not items:
            return ""
        out = [title, "-" * len(title), "", ".. autosummary::"]
        if toctree:
            out.append("   :toctree: generated")
        out.append("")
        out += [f"   {n}" for n in items]
        return "\n".join(out) + "\n\n"

    text = ["API reference", "=============", "",
            "Everything below is importable from the top-level package (``import toolbias_stats as tbs``) and is",
            "generated from the docstrings. The examples in the docstrings run as doctests in the test suite.", "",
            ".. currentmodule:: toolbias_stats", ""]
    left = list(functions)
    for title, pick in _SECTIONS:
        chosen = [n for n in left if pick(n, objs[n])]
        left = [n for n in left if n not in chosen]
        text.append(table(title, chosen))
    text.append(table("Other functions", left))
    text.append(table("Results and data classes", classes))
    text.append(table("Exceptions and warnings", errors))
    text.append(table("Subpackages", modules))
    if data:
        text += ["Constants", "---------", ""]
        for n in data:
            text += [f".. py:data:: {n}", f"   :value: {objs[n]!r}"[:200], ""]
    (HERE / "api.rst").write_text("\n".join(text))


_write_api_page()


# -- the user guide's list of reference pages: every Markdown page at the top of docs/ ----------------------------
_NOT_TOPICS = {"index", "getting_started"}


def _topics(app, docname, source):
    if docname != "guide/index":
        return
    pages = sorted(p.stem for p in HERE.glob("*.md") if p.stem not in _NOT_TOPICS)
    source[0] = source[0].replace("<!-- reference pages -->", "\n".join(f"../{p}" for p in pages))


# A cell of a simple table that starts with "+ " (e.g. fit_bayes's table of model variants: "+ query effects")
# would start a bullet list inside the table; the plus is text there.
_PLUS_CELL = re.compile(r"^(\s*``[^`]+``(?: \(default\))?\s{2,})\+ ")


def _escape_plus_cells(app, what, name, obj, options, lines):
    lines[:] = [_PLUS_CELL.sub(r"\1\\+ ", ln) for ln in lines]


def setup(app):
    app.connect("source-read", _topics)
    app.connect("autodoc-process-docstring", _escape_plus_cells)
