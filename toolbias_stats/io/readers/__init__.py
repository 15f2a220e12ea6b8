"""Readers: one module per log source, each returning a :class:`~toolbias_stats.SelectionLog`.

Manifest ``format`` names map to readers through :data:`READERS`.
"""

from .biasbusters import read_biasbusters, read_biasbusters_catalog, read_biasbusters_queries
from .table import read_catalog_table, read_table
from .transcripts import read_transcripts

#: Manifest ``format`` -> reader. Every reader has the signature ``read_x(path, *, catalog, meta, **options)``.
READERS = {"biasbusters": read_biasbusters, "table": read_table, "transcripts": read_transcripts}

__all__ = ["READERS", "read_biasbusters", "read_biasbusters_catalog", "read_biasbusters_queries",
           "read_table", "read_catalog_table", "read_transcripts"]
