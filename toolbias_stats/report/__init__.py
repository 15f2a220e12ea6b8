"""Reports: render results as self-contained HTML.

``build_report(study, sections=[...])`` computes and renders the whole report (what ``toolbias-stats report``
writes); ``render_bias_report(study, result)`` writes tables and inline-SVG figures of a
:class:`~toolbias_stats.BiasResult`. Numbers are rounded by the package's internal formatting module and the text
of results (``str(result)``, the command line's output) comes from its internal text layer.
"""

import typing as _typing
import warnings as _warnings

from .._lazy import LazyNames as _LazyNames

_lazy = _LazyNames(__name__)
_lazy.add('._findings', 'Finding', 'key_findings')
_lazy.add('._summary', 'bias_summary')
_lazy.add('._quarto', 'TEMPLATE', 'export_quarto', 'qmd_to_notebook', 'run_notebook')
_lazy.add('._render_html', 'render_bias_report')
_lazy.add('._build', 'build_report', 'default_sections')
_lazy.add('._shadow_html', 'render_shadow_report', 'render_shadow_section')

__all__ = ["build_report", "default_sections", "render_bias_report", "render_shadow_section",
           "render_shadow_report", "key_findings", "Finding", "bias_summary", "export_quarto", "qmd_to_notebook",
           "run_notebook", "TEMPLATE"]

#: Helpers that were public until 0.1.0: name -> (internal module, attribute). They still resolve for one release,
#: with a DeprecationWarning (the Quarto template of 0.1.0, which ``export_quarto`` copied into users' folders,
#: imports four of them).
_DEPRECATED = {**{name: ("toolbias_stats._format", name)
                  for name in ("MISSING", "fmt_num", "fmt_int", "fmt_ci", "fmt_estimate_ci", "fmt_mean_sd", "fmt_p",
                               "fmt_level", "fmt_range")},
               "file_sha256": ("toolbias_stats.report._render_html", "file_sha256")}

if _typing.TYPE_CHECKING:  # the _lazy names, for type checkers (written by rewrite_imports.py)
    from ._build import build_report, default_sections
    from ._findings import Finding, key_findings
    from ._quarto import TEMPLATE, export_quarto, qmd_to_notebook, run_notebook
    from ._render_html import render_bias_report
    from ._shadow_html import render_shadow_report, render_shadow_section
    from ._summary import bias_summary

_lazy_getattr, __dir__ = _lazy.hooks(globals())


def __getattr__(name: str):
    if name in _DEPRECATED:
        import importlib

        module, attr = _DEPRECATED[name]
        _warnings.warn(f"`toolbias_stats.report.{name}` is no longer public and will be removed in the next minor "
                       f"release; it is the internal `{module}.{attr}` (which may change without notice): format "
                       "the numbers in your own code instead.", DeprecationWarning, stacklevel=2)
        return getattr(importlib.import_module(module), attr)
    return _lazy_getattr(name)
