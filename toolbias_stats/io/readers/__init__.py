"""Readers: one module per log source, each returning a :class:`~toolbias_stats.SelectionLog`.

Manifest ``format`` names map to readers through :data:`READERS`. Each reader module (and pandas, msgspec,
inspect_ai behind it) is imported on first use: ``import toolbias_stats.io.readers`` costs next to nothing,
``from toolbias_stats.io.readers import read_openai`` imports the OpenAI reader only, and looking up a format in
:data:`READERS` / :data:`OFFERED` imports that format's reader.

Examples
--------
>>> from toolbias_stats.io import readers
>>> sorted(readers.READERS)
['anthropic', 'biasbusters', 'inspect', 'langchain', 'mcp', 'openai', 'otel', 'table', 'transcripts']
>>> readers.READERS["table"] is readers.read_table
True
>>> "otel" in readers.OFFERED
True
"""

from __future__ import annotations

import importlib
import typing as _typing
from collections.abc import Callable, Iterator, MutableMapping
from typing import TYPE_CHECKING, Any

from ..._lazy import LazyNames as _LazyNames

if TYPE_CHECKING:
    from .anthropic import offered_anthropic as offered_anthropic
    from .anthropic import read_anthropic
    from .biasbusters import read_biasbusters, read_biasbusters_catalog, read_biasbusters_queries
    from .inspect_ai_log import offered_inspect as offered_inspect
    from .inspect_ai_log import read_inspect
    from .langchain import offered_langchain as offered_langchain
    from .langchain import read_langchain
    from .mcp import offered_mcp as offered_mcp
    from .mcp import read_mcp
    from .openai import offered_openai as offered_openai
    from .openai import read_openai
    from .otel import offered_otel as offered_otel
    from .otel import read_otel
    from .table import read_catalog_table, read_table
    from .transcripts import read_transcripts

_lazy = _LazyNames(__name__)
_lazy.add(".biasbusters", "read_biasbusters", "read_biasbusters_catalog", "read_biasbusters_queries")
_lazy.add(".table", "read_catalog_table", "read_table")
_lazy.add(".transcripts", "read_transcripts")
# API logs of other teams (issue 13): OpenAI, Anthropic, OpenTelemetry GenAI traces
_lazy.add(".anthropic", "offered_anthropic", "read_anthropic")
_lazy.add(".openai", "offered_openai", "read_openai")
_lazy.add(".otel", "offered_otel", "read_otel")
# Inspect AI eval logs (issue 13; inspect_ai is an optional extra, imported only when a log is read)
_lazy.add(".inspect_ai_log", "offered_inspect", "read_inspect")
# Agent traces (issue 36): MCP client sessions, LangChain / LangSmith run exports
_lazy.add(".mcp", "offered_mcp", "read_mcp")
_lazy.add(".langchain", "offered_langchain", "read_langchain")


class _LazyFunctions(MutableMapping):
    """A ``{name: function}`` table whose functions are imported from their modules on first lookup.

    Built from ``{name: "module:function"}`` (modules relative to this package); a function set later (a plugin's
    reader) is kept as given. Iterating, ``len`` and ``in`` import nothing.

    Parameters
    ----------
    specs : Mapping[str, str]
        ``{name: "module:function"}``, e.g. ``{"table": ".table:read_table"}``.

    Examples
    --------
    >>> table = _LazyFunctions({"table": ".table:read_table"})
    >>> "table" in table, len(table)
    (True, 1)
    >>> table["table"].__name__
    'read_table'
    """

    def __init__(self, specs: dict[str, str]):
        self._specs = dict(specs)
        self._loaded: dict[str, Callable[..., Any]] = {}

    def __getitem__(self, name: str) -> Callable[..., Any]:
        fn = self._loaded.get(name)
        if fn is None:
            module, _, attr = self._specs[name].partition(":")
            fn = self._loaded[name] = getattr(importlib.import_module(module, __name__), attr)
        return fn

    def __setitem__(self, name: str, fn: Callable[..., Any]) -> None:
        self._specs[name] = ""
        self._loaded[name] = fn

    def __delitem__(self, name: str) -> None:
        del self._specs[name]
        self._loaded.pop(name, None)

    def __iter__(self) -> Iterator[str]:
        return iter(self._specs)

    def __len__(self) -> int:
        return len(self._specs)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({sorted(self._specs)})"


#: Manifest ``format`` -> reader. Every reader has the signature ``read_x(path, *, catalog, meta, **options)``.
READERS = _LazyFunctions({"biasbusters": ".biasbusters:read_biasbusters", "table": ".table:read_table",
                         "transcripts": ".transcripts:read_transcripts", "openai": ".openai:read_openai",
                         "anthropic": ".anthropic:read_anthropic", "otel": ".otel:read_otel",
                         "inspect": ".inspect_ai_log:read_inspect", "mcp": ".mcp:read_mcp",
                         "langchain": ".langchain:read_langchain"})
#: Formats that can infer their clusters ("the exact set of tools offered"): format -> ``offered(path, **options)``
#: returning ``[(tool names, file, line), ...]``.
OFFERED = _LazyFunctions({"openai": ".openai:offered_openai", "anthropic": ".anthropic:offered_anthropic",
                         "otel": ".otel:offered_otel", "inspect": ".inspect_ai_log:offered_inspect",
                         "mcp": ".mcp:offered_mcp", "langchain": ".langchain:offered_langchain"})

__all__ = ["READERS", "read_biasbusters", "read_biasbusters_catalog", "read_biasbusters_queries",
           "read_table", "read_catalog_table", "read_transcripts",
           "OFFERED", "read_openai", "read_anthropic", "read_otel", "read_inspect", "read_mcp", "read_langchain"]

if _typing.TYPE_CHECKING:  # the _lazy names, for type checkers (written by rewrite_imports.py)
    from .anthropic import offered_anthropic as offered_anthropic
    from .anthropic import read_anthropic
    from .biasbusters import read_biasbusters, read_biasbusters_catalog, read_biasbusters_queries
    from .inspect_ai_log import offered_inspect as offered_inspect
    from .inspect_ai_log import read_inspect
    from .langchain import offered_langchain as offered_langchain
    from .langchain import read_langchain
    from .mcp import offered_mcp as offered_mcp
    from .mcp import read_mcp
    from .openai import offered_openai as offered_openai
    from .openai import read_openai
    from .otel import offered_otel as offered_otel
    from .otel import read_otel
    from .table import read_catalog_table, read_table
    from .transcripts import read_transcripts

__getattr__, __dir__ = _lazy.hooks(globals())
