"""From design to logs: counterbalanced study designs, provider request files, a resumable runner and an
Inspect AI extension (issue 25). See docs/audit.md.

:func:`design_study` decides which order each request shows the tools (or options) in; :func:`write_requests`
writes the requests in the providers' batch formats with a ``study.toml`` that reads the results back with the
existing importers; :func:`run_study` sends a folder's requests to an OpenAI-compatible endpoint, resumably.
"""

import typing as _typing

from .._lazy import LazyNames as _LazyNames

_lazy = _LazyNames(__name__)
_lazy.add('._design', 'ORDERINGS', 'StudyDesign', 'custom_id', 'design_study', 'latin_rows', 'load_catalog',
           'load_queries', 'parse_custom_id')
_lazy.add('._requests', 'ENDPOINTS', 'FORMATS', 'send_name', 'tool_schema', 'write_requests')
_lazy.add('._runner', 'RunResult', 'run_study')

__all__ = ["design_study", "StudyDesign", "ORDERINGS", "latin_rows", "custom_id", "parse_custom_id", "load_catalog",
           "load_queries", "write_requests", "FORMATS", "ENDPOINTS", "send_name", "tool_schema", "run_study",
           "RunResult"]

if _typing.TYPE_CHECKING:  # the _lazy names, for type checkers (written by rewrite_imports.py)
    from ._design import (
        ORDERINGS,
        StudyDesign,
        custom_id,
        design_study,
        latin_rows,
        load_catalog,
        load_queries,
        parse_custom_id,
    )
    from ._requests import ENDPOINTS, FORMATS, send_name, tool_schema, write_requests
    from ._runner import RunResult, run_study

__getattr__, __dir__ = _lazy.hooks(globals())
