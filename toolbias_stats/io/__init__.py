"""Input: the SelectionLog and ToolCatalog containers, readers and study manifests."""

import typing as _typing

from .._lazy import LazyNames as _LazyNames

_lazy = _LazyNames(__name__)
_lazy.submodules('readers')   # were attributes after the eager imports
_lazy.add('._catalog', 'ToolCatalog')
_lazy.add('._counts', 'COUNT_LEVELS', 'SelectionCounts')
_lazy.add('._load', 'count_table', 'load_selection_log', 'read_study')
_lazy.add('._manifest', 'ENGINES', 'FORMATS', 'Study')
_lazy.add('._selection_log', 'SelectionLog')
_lazy.add('._study_design', 'DeclaredDesign')
_lazy.add('.readers', 'READERS', 'read_biasbusters', 'read_biasbusters_catalog', 'read_biasbusters_queries',
           'read_catalog_table', 'read_table', 'read_transcripts')

__all__ = ["ToolCatalog", "SelectionLog", "SelectionCounts", "count_table", "COUNT_LEVELS", "ENGINES", "Study",
           "read_study", "load_selection_log", "FORMATS", "READERS",
           "read_biasbusters", "read_biasbusters_catalog", "read_biasbusters_queries", "read_table",
           "read_catalog_table", "read_transcripts"]

# API logs of other teams (issue 13)
_lazy.add('.readers', 'read_anthropic', 'read_openai', 'read_otel', 'read_mcp', 'read_langchain')

__all__ += ["read_openai", "read_anthropic", "read_otel", "read_mcp", "read_langchain"]
__all__ += ["DeclaredDesign"]   # issue 35: the declared study design

# issue 40: the ChoiceLog type sits beside SelectionLog (its readers are in io/); toolbias_stats.choice re-exports it
_lazy.add('._choice_log', 'ChoiceLog')
__all__ += ["ChoiceLog"]

if _typing.TYPE_CHECKING:  # the _lazy names, for type checkers (written by rewrite_imports.py)
    from . import readers as readers
    from ._catalog import ToolCatalog
    from ._choice_log import ChoiceLog
    from ._counts import COUNT_LEVELS, SelectionCounts
    from ._load import count_table, load_selection_log, read_study
    from ._manifest import ENGINES, FORMATS, Study
    from ._selection_log import SelectionLog
    from ._study_design import DeclaredDesign
    from .readers import (
        READERS,
        read_anthropic,
        read_biasbusters,
        read_biasbusters_catalog,
        read_biasbusters_queries,
        read_catalog_table,
        read_langchain,
        read_mcp,
        read_openai,
        read_otel,
        read_table,
        read_transcripts,
    )

__getattr__, __dir__ = _lazy.hooks(globals())
