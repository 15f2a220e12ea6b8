"""Input: the SelectionLog and ToolCatalog containers, readers and study manifests."""

from ._catalog import ToolCatalog
from ._counts import COUNT_LEVELS, SelectionCounts, count_table
from ._load import load_selection_log
from ._manifest import ENGINES, FORMATS, Study, read_study
from ._selection_log import SelectionLog
from .readers import (READERS, read_biasbusters, read_biasbusters_catalog, read_biasbusters_queries,
                      read_catalog_table, read_table, read_transcripts)

__all__ = ["ToolCatalog", "SelectionLog", "SelectionCounts", "count_table", "COUNT_LEVELS", "ENGINES", "Study", "read_study", "load_selection_log", "FORMATS", "READERS",
           "read_biasbusters", "read_biasbusters_catalog", "read_biasbusters_queries", "read_table",
           "read_catalog_table", "read_transcripts"]

# API logs of other teams (issue 13)
from .readers import read_anthropic, read_openai, read_otel  # noqa: E402

__all__ += ["read_openai", "read_anthropic", "read_otel"]
