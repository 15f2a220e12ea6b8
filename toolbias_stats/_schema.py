"""Column names, dtypes and allowed values of the SelectionLog and ToolCatalog (see docs/schema.md)."""

from __future__ import annotations

import re

__all__ = [
    "SCHEMA_VERSION",
    "STATUSES",
    "LOG_COLUMNS",
    "CATALOG_COLUMNS",
    "standardise_name",
    "function_name",
    "toolbench_key",
    "TOOLBENCH_NAME_LIMIT",
]

SCHEMA_VERSION = "1.0"

#: Allowed values of ``SelectionLog.status``; only ``"ok"`` rows enter selection rates. ``"forced"``: the request
#: left no choice (``tool_choice`` named one tool or forbade calls; API-log readers, issue 13). ``"off_cluster"``: the
#: model called a tool that was offered but belongs to another cluster than the attempt's (issue 20).
STATUSES = ("ok", "no_call", "unknown_tool", "parse_error", "forced", "off_cluster")

#: SelectionLog core columns and their pandas dtypes (extra manifest columns come after ``condition``).
LOG_COLUMNS = {
    "model": "string",
    "run": "int64",
    "condition": "string",
    "cluster_id": "string",
    "query_id": "string",
    "rotation": "Int64",
    "ordering": "string",
    "n_candidates": "int64",
    "chosen_tool": "string",
    "chosen_position": "Int64",
    "chosen_rank": "Int64",
    "status": "string",
    "raw_choice": "string",
    "source_file": "string",
    "source_row": "int64",
}

#: Columns that identify the study design rather than an attempt.
DESIGN_COLUMNS = ("model", "run", "condition")

#: Optional column of aggregated logs: the row stands for this many identical attempts (integer >= 0).
#: Present in ``SelectionLog.data`` (last column) only when the source had it; see docs/schema.md.
COUNT_COLUMN = "count"
#: ``query_id`` of the rows of an aggregated file without a ``query_id`` column: one pseudo-query per
#: (design, cluster), so no query bootstrap is possible (multinomial intervals are reported instead).
AGGREGATED_QUERY_ID = "(aggregated)"

CATALOG_COLUMNS = {
    "tool_id": "string",
    "cluster_id": "string",
    "cluster_name": "string",
    "api_index": "int64",
    "category": "string",
    "tool_name": "string",
    "tool_description": "string",
    "api_name": "string",
    "api_description": "string",
    "required_parameters": "string",
    "optional_parameters": "string",
    "num_parameters": "Int64",
    "created": "datetime64[ns]",
    "url": "string",
}

_NON_WORD = re.compile(r"[^A-Za-z0-9_]+")


def standardise_name(name: str) -> str:
    """Standardise a tool or API name the ToolBench way.

    Lower-case, replace every run of characters outside ``[A-Za-z0-9_]`` by one ``_``, strip
    leading/trailing ``_`` and prefix ``get_`` when the result starts with a digit.

    Parameters
    ----------
    name : str
        A tool or API name as written in the catalog.

    Returns
    -------
    str
        The standardised name (``[a-z0-9_]`` only).

    Examples
    --------
    >>> standardise_name("Text Language by API-Ninjas")
    'text_language_by_api_ninjas'
    >>> standardise_name("/v1/textlanguage")
    'v1_textlanguage'
    >>> standardise_name("3-Day Forecast")
    'get_3_day_forecast'
    """
    out = _NON_WORD.sub("_", str(name).lower()).strip("_")
    out = re.sub("_+", "_", out)
    if out[:1].isdigit():
        out = "get_" + out
    return out


#: ToolBench keeps the last this-many characters of a function name (the OpenAI limit on function names).
TOOLBENCH_NAME_LIMIT = 64


def function_name(api_name: str, tool_name: str, *, truncate: bool = True) -> str:
    """ToolBench function name ``{api}_for_{tool}`` of an endpoint, as ToolBench spells it.

    Parameters
    ----------
    api_name : str
        The endpoint's API name.
    tool_name : str
        The name of the tool the endpoint belongs to.
    truncate : bool, default True
        Keep only the last :data:`TOOLBENCH_NAME_LIMIT` (64) characters, as ToolBench does after standardising
        (the OpenAI limit on function names; issue 36). ``False`` gives the untruncated spelling.

    Returns
    -------
    str
        Both names standardised with :func:`standardise_name`, joined by ``_for_``, the last 64 characters kept.

    Notes
    -----
    Two spellings name the same tool when their :func:`toolbench_key` agree: the untruncated name and its
    truncation share their last 64 characters.

    Examples
    --------
    >>> function_name("/v1/textlanguage", "Text Language by API-Ninjas")
    'v1_textlanguage_for_text_language_by_api_ninjas'
    >>> function_name("Coordinates (latitude, longitude) to address", "Address from to latitude longitude")
    'tude_longitude_to_address_for_address_from_to_latitude_longitude'
    >>> len(function_name("Coordinates (latitude, longitude) to address", "Address from to latitude longitude",
    ...                   truncate=False))
    80
    """
    name = f"{standardise_name(api_name)}_for_{standardise_name(tool_name)}"
    return toolbench_key(name) if truncate else name


def toolbench_key(name: str) -> str:
    """The spelling ToolBench gives a function name: its last :data:`TOOLBENCH_NAME_LIMIT` characters.

    Examples
    --------
    >>> toolbench_key("a" * 70 + "_for_x") == ("a" * 70 + "_for_x")[-64:]
    True
    >>> toolbench_key("geocode_for_maps")
    'geocode_for_maps'
    """
    return str(name)[-TOOLBENCH_NAME_LIMIT:]
