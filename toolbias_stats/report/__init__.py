"""Reports: render results as self-contained HTML; all rounding and display formatting lives here.

``build_report(study, sections=[...])`` computes and renders the whole report (what ``toolbias-stats report``
writes); ``render_bias_report(study, result)`` writes tables and inline-SVG figures of a
:class:`~toolbias_stats.BiasResult`; the ``fmt_*`` helpers format numbers, intervals and p-values.
"""

import typing as _typing

from .._lazy import LazyNames as _LazyNames

_lazy = _LazyNames(__name__)
_lazy.add('._format', 'MISSING', 'fmt_ci', 'fmt_estimate_ci', 'fmt_int', 'fmt_level', 'fmt_mean_sd', 'fmt_num',
           'fmt_p', 'fmt_range')
_lazy.add('._findings', 'Finding', 'key_findings')
_lazy.add('._summary', 'bias_summary')
_lazy.add('._quarto', 'TEMPLATE', 'export_quarto', 'qmd_to_notebook', 'run_notebook')
_lazy.add('._render_html', 'file_sha256', 'render_bias_report')
_lazy.add('._build', 'build_report', 'default_sections')
_lazy.add('._shadow_html', 'render_shadow_report', 'render_shadow_section')

__all__ = ["build_report", "default_sections", "render_bias_report", "file_sha256", "render_shadow_section",
           "render_shadow_report", "key_findings", "Finding", "bias_summary", "export_quarto", "qmd_to_notebook",
           "run_notebook", "TEMPLATE", "MISSING", "fmt_num", "fmt_int", "fmt_ci", "fmt_estimate_ci",
           "fmt_mean_sd", "fmt_p", "fmt_level", "fmt_range"]

if _typing.TYPE_CHECKING:  # the _lazy names, for type checkers (written by rewrite_imports.py)
    from ._build import build_report, default_sections
    from ._findings import Finding, key_findings
    from ._format import MISSING, fmt_ci, fmt_estimate_ci, fmt_int, fmt_level, fmt_mean_sd, fmt_num, fmt_p, fmt_range
    from ._quarto import TEMPLATE, export_quarto, qmd_to_notebook, run_notebook
    from ._render_html import file_sha256, render_bias_report
    from ._shadow_html import render_shadow_report, render_shadow_section
    from ._summary import bias_summary

__getattr__, __dir__ = _lazy.hooks(globals())
