"""Issue 40: one text layer. The formatters live in ``toolbias_stats._text`` (results layer) and are imported
normally; ``_display.TEXT`` holds functions, not "module:function" strings; the report's former helper names
(``fmt_*``, ``MISSING``, ``file_sha256``) are no longer public and warn for one release."""

from __future__ import annotations

import ast
import warnings
from pathlib import Path

import pytest

import toolbias_stats._format as core_format
import toolbias_stats.report as report
from toolbias_stats import _display, _text
from toolbias_stats.report._render_html import file_sha256

TEXT_DIR = Path(_text.__file__).parent
OLD = ["MISSING", "fmt_num", "fmt_int", "fmt_ci", "fmt_estimate_ci", "fmt_mean_sd", "fmt_p", "fmt_level", "fmt_range",
       "file_sha256"]


def test_the_registry_holds_functions_of_the_text_layer():
    assert _display.TEXT, "the registry is not empty"
    for name, formatter in _display.TEXT.items():
        assert callable(formatter) and formatter.__module__.startswith("toolbias_stats._text."), name
        assert getattr(_text, formatter.__name__) is formatter, f"{formatter.__name__} is exported by _text"


def test_text_modules_import_core_modules_only():
    """The text layer works from the results' attributes: no import of metrics, models, analysis, plots, report or
    cli, not even for annotations (import-linter counts ``TYPE_CHECKING`` imports too)."""
    allowed = {"toolbias_stats._format"}
    for path in sorted(TEXT_DIR.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.level:   # ``from ._bias`` stays inside, ``from .._x`` not
                target = f"toolbias_stats.{node.module}" if node.level == 2 else f"level {node.level}"
                assert node.level == 1 or target in allowed, f"{path.name}:{node.lineno} imports {target}"
            elif isinstance(node, ast.ImportFrom | ast.Import):
                names = [node.module] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names]
                assert not any(str(n).startswith("toolbias_stats") for n in names), f"{path.name}:{node.lineno}"


@pytest.mark.parametrize("name", OLD)
def test_former_public_helpers_warn_and_still_work(name):
    assert name not in report.__all__ and name not in dir(report)
    with pytest.warns(DeprecationWarning, match=rf"`toolbias_stats\.report\.{name}` is no longer public"):
        value = getattr(report, name)
    assert value is (file_sha256 if name == "file_sha256" else getattr(core_format, name))


def test_public_report_names_do_not_warn():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert callable(report.build_report) and callable(report.render_bias_report)
    with pytest.raises(AttributeError, match="no attribute 'fmt_nope'"):
        report.fmt_nope
