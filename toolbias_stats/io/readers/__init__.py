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

# API logs of other teams (issue 13): OpenAI, Anthropic, OpenTelemetry GenAI traces
from .anthropic import offered_anthropic, read_anthropic  # noqa: E402
from .openai import offered_openai, read_openai  # noqa: E402
from .otel import offered_otel, read_otel  # noqa: E402

READERS.update(openai=read_openai, anthropic=read_anthropic, otel=read_otel)
#: Formats that can infer their clusters ("the exact set of tools offered"): format -> ``offered(path, **options)``
#: returning ``[(tool names, file, line), ...]``.
OFFERED = {"openai": offered_openai, "anthropic": offered_anthropic, "otel": offered_otel}
__all__ += ["OFFERED", "read_openai", "read_anthropic", "read_otel"]

# Inspect AI eval logs (issue 13; inspect_ai is an optional extra, imported only when a log is read)
from .inspect_ai_log import offered_inspect, read_inspect  # noqa: E402

READERS["inspect"] = read_inspect
OFFERED["inspect"] = offered_inspect
__all__ += ["read_inspect"]
