"""Request writers: a :class:`StudyDesign` as provider batch files, with the manifest that reads the results back.

``write_requests(design, out)`` writes into the folder ``out``:

- ``requests-run{r}.jsonl``: one request per line, the tools in the designed order (one file per run: the
  SelectionLog's ``run`` comes from the manifest entry that reads the file);
- ``study.toml``: a study manifest with one ``[[logs]]`` entry per run (``format = "openai"`` or
  ``"anthropic"``, ``responses = "responses-run{r}.jsonl"``): once the provider's result files are saved
  under those names (or written by ``toolbias-stats run``), ``toolbias-stats bias study.toml`` reads them with
  the existing importers;
- ``catalog.csv`` (the tools, with the function name each was sent under), ``queries.json`` (every query of
  the designed clusters, so that ``toolbias-stats plan --out-dir`` can size a larger study from this one),
  ``design.csv`` (the design table) and ``design.json`` (settings, balance, files). See docs/audit.md.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import pandas as pd

from .._output import atomic_folder, safe_cell, spreadsheet_safe, write_text
from .._validation import check_choice

if TYPE_CHECKING:
    from ..io import ToolCatalog
    from ._design import StudyDesign

__all__ = ["write_requests", "FORMATS", "ENDPOINTS", "tool_schema", "send_name", "atomic_write_text",
           "DEFAULT_MODEL", "read_design"]

#: ``--format`` values of ``toolbias-stats design``.
FORMATS = ("openai-batch", "anthropic-batch", "chat-jsonl")
#: OpenAI request shapes: Chat Completions (``/v1/chat/completions``) or Responses (``/v1/responses``).
ENDPOINTS = ("chat", "responses")
#: ``model`` written when none is given (``toolbias-stats run --model`` replaces it in the manifest).
DEFAULT_MODEL = "unnamed-model"
_NAME_OK = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_PARAM_TYPES = {"string": "string", "str": "string", "text": "string", "number": "number", "float": "number",
                "double": "number", "integer": "integer", "int": "integer", "boolean": "boolean", "bool": "boolean",
                "array": "array", "list": "array", "object": "object", "dict": "object"}


#: A cluster id that is a plain number (``-1``): a spreadsheet reads it as a number, not as a formula.
_NUMBER = re.compile(r"^[+-]?\d+(\.\d+)?$")


def send_name(tool_id: str) -> str:
    """The function name a tool is sent under: its id when the providers accept it (``[A-Za-z0-9_-]``, at most
    64 characters), else the id with other characters replaced by ``_``, cut to 55 characters and suffixed with
    8 hex digits of its SHA-256 (stable and unique).

    Parameters
    ----------
    tool_id : str
        The catalog's tool id.

    Returns
    -------
    str
        A function name of at most 64 characters from ``[A-Za-z0-9_-]``.

    Examples
    --------
    >>> send_name("geocode_for_maps")
    'geocode_for_maps'
    >>> len(send_name("x" * 80))
    64
    """
    if _NAME_OK.match(tool_id):
        return tool_id
    base = re.sub(r"[^A-Za-z0-9_-]+", "_", tool_id)[:55].strip("_") or "tool"
    return f"{base}_{hashlib.sha256(tool_id.encode('utf-8')).hexdigest()[:8]}"


def _params(raw) -> list:
    if raw is None or (isinstance(raw, float) and raw != raw) or raw is pd.NA:
        return []
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except json.JSONDecodeError:
            return []
    return raw if isinstance(raw, list) else []


def tool_schema(row: Mapping[str, Any] | Any) -> tuple[str, dict[str, Any]]:
    """``(description, JSON-schema parameters)`` of one catalog row.

    The description joins the tool's and the API's descriptions; parameters come from ``required_parameters``
    and ``optional_parameters`` (ToolBench lists of ``{name, type, description, default}``; ToolBench types such
    as ``STRING`` map to JSON-schema types, unknown ones to ``string``). A tool without parameters takes an empty
    object.

    Parameters
    ----------
    row : mapping or row object
        One catalog row: a dict, or a row of ``DataFrame.itertuples()`` (attributes). Reads ``tool_description``,
        ``api_description``, ``tool_name`` / ``tool_id`` (the description when there is none) and
        ``required_parameters`` / ``optional_parameters`` (lists, or their JSON text).

    Returns
    -------
    tuple of (str, dict)
        The description sent with the tool and its JSON-schema ``parameters`` object.

    Examples
    --------
    >>> desc, schema = tool_schema({"tool_id": "geo", "tool_description": "Geocoding.",
    ...                             "api_description": "Forward geocoding.",
    ...                             "required_parameters": [{"name": "address", "type": "STRING"}],
    ...                             "optional_parameters": '[{"name": "limit", "type": "NUMBER"}]'})
    >>> desc
    'Geocoding. Forward geocoding.'
    >>> schema  # doctest: +NORMALIZE_WHITESPACE
    {'type': 'object', 'properties': {'address': {'type': 'string'}, 'limit': {'type': 'number'}},
     'required': ['address']}
    """
    get = row.get if isinstance(row, dict) else (lambda k, d=None: getattr(row, k, d))
    texts = [get(k) for k in ("tool_description", "api_description")]
    parts = [t.strip() for t in texts if isinstance(t, str) and t.strip() and t.strip() != "None"]
    desc = " ".join(dict.fromkeys(parts)) or str(get("tool_name") or get("tool_id"))
    props, required = {}, []
    for kind in ("required_parameters", "optional_parameters"):
        for p in _params(get(kind)):
            if not isinstance(p, dict) or not isinstance(p.get("name"), str) or not p["name"]:
                continue
            spec: dict[str, Any] = {"type": _PARAM_TYPES.get(str(p.get("type", "string")).lower(), "string")}
            if spec["type"] == "array":
                spec["items"] = {}
            if isinstance(p.get("description"), str) and p["description"].strip():
                spec["description"] = p["description"].strip()
            props[p["name"]] = spec
            if kind == "required_parameters":
                required.append(p["name"])
    schema = {"type": "object", "properties": props}
    if required:
        schema["required"] = required
    return desc, schema


def atomic_write_text(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file in the same folder and an atomic rename.

    :func:`toolbias_stats._output.write_text`: a failure (a full disk, a read-only folder) or a terminating
    signal leaves no temporary file; failures raise :class:`~toolbias_stats._output.OutputError` naming
    ``path``."""
    write_text(path, text, option="the file")


def _write_file(path: Path, text: str) -> None:
    """Write a file of a design being built in its temporary folder (an ``OSError`` is reported for the folder
    by :func:`~toolbias_stats._output.atomic_folder`)."""
    with open(path, "w", encoding="utf-8", newline="\n") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())


def _toml_str(text: str) -> str:
    return json.dumps(str(text), ensure_ascii=False)      # a JSON string is a valid TOML basic string


def write_requests(design: StudyDesign, out: str | os.PathLike[str], *,
                   format: Literal["openai-batch", "anthropic-batch", "chat-jsonl"] = "chat-jsonl",
                   endpoint: Literal["chat", "responses"] = "chat", model: str | None = None,
                   system: str | None = None, max_tokens: int = 1024,
                   inputs: Iterable[str | os.PathLike[str] | None] = ()) -> dict[str, Any]:
    """Write a design's requests, its catalog and a ``study.toml`` that reads the results back.

    Parameters
    ----------
    design : StudyDesign
        From :func:`~toolbias_stats.audit.design_study` (a tool catalog, not multiple-choice items).
    out : path-like
        The folder to write (created; it must not already hold a design: ``design.json``).
    format : {"openai-batch", "anthropic-batch", "chat-jsonl"}, default "chat-jsonl"
        ``openai-batch``: OpenAI Batch API input lines ``{"custom_id", "method", "url", "body"}`` (Chat
        Completions or, with ``endpoint="responses"``, Responses bodies); ``anthropic-batch``: Message Batches
        requests ``{"custom_id", "params"}``; ``chat-jsonl``: ``{"custom_id", "query_id", "body"}`` with Chat
        Completions bodies for OpenAI-compatible servers (vLLM, llama.cpp, Ollama), the input of
        ``toolbias-stats run`` (which sets ``model`` when the body has none).
    endpoint : {"chat", "responses"}, default "chat"
        OpenAI request shape (``openai-batch`` only).
    model : str, optional
        The model named in each request and in the manifest. Required by the batch formats (their APIs need
        it in every line); ``chat-jsonl`` without it leaves it to ``toolbias-stats run --model``.
    system : str, optional
        A system prompt sent with every request.
    max_tokens : int, default 1024
        ``max_tokens`` of Anthropic requests (required by that API); OpenAI requests leave the default.
    inputs : sequence of path-like
        The files the design was read from: no output may be one of them.

    Returns
    -------
    dict
        ``{"out", "files", "requests", "format"}`` (what ``design.json`` also records).

    Raises
    ------
    ValueError
        Multiple-choice designs, an unknown format, a batch format without ``model``, a folder that already
        holds a design, an output path that is an input or a folder that holds one, a formula-like cluster id;
        :class:`~toolbias_stats._output.OutputError` (a ``ValueError``) when the folder cannot be written (a
        full disk, a read-only file system), naming it. All files are written into a temporary folder beside
        ``out`` and renamed into place at the end, so a failure leaves ``out`` as it was.

    Notes
    -----
    Tools are sent under :func:`send_name` (the tool id unless it is longer than 64 characters or has characters
    the APIs refuse); ``catalog.csv`` uses the name sent as ``tool_id`` (and keeps the catalog's id in
    ``source_tool_id``) so that the importers resolve every answer. The query id reaches the OpenAI importer
    through ``metadata.query_id`` (OpenAI bodies) or the line's ``query_id`` (``chat-jsonl``); Anthropic requests
    cannot carry it, so that importer keys queries by their text (two identical query texts in one cluster are
    then one query, and their requests become repeated ``attempt`` s).

    Examples
    --------
    >>> import tempfile
    >>> from pathlib import Path
    >>> import toolbias_stats as tbs
    >>> cat = tbs.ToolCatalog.from_records([{"cluster_id": "1", "tool_id": t} for t in "abc"])
    >>> design = tbs.design_study(cat, {"1": ["find x", "find y"]}, orderings="cyclic")
    >>> out = Path(tempfile.mkdtemp()) / "study"
    >>> written = write_requests(design, out, format="openai-batch", model="gpt-4.1-mini")
    >>> written["requests"], sorted(p.name for p in out.iterdir())  # doctest: +NORMALIZE_WHITESPACE
    (6, ['catalog.csv', 'design.csv', 'design.json', 'queries.json', 'requests-run1.jsonl', 'study.toml'])
    """
    check_choice("format", format, FORMATS)
    check_choice("endpoint", endpoint, ENDPOINTS)
    catalog = _check_request_args(design, format, endpoint, model)
    out = _output_folder(out)
    runs = sorted(int(r) for r in design.table["run"].unique())
    names = {t: send_name(t) for t in catalog.table["tool_id"]}
    if len(set(names.values())) < len(names):
        raise ValueError("two tools map to the same function name; rename them in the catalog.")
    files = _output_files(out, runs, inputs)
    shape = {"openai-batch": "openai-" + endpoint, "anthropic-batch": "anthropic", "chat-jsonl": "chat"}[format]
    # every file goes into a temporary folder beside --out-dir, renamed into place at the end: a full disk, a
    # read-only folder or a signal leaves --out-dir as it was (issue 37)
    with atomic_folder(out, option="--out-dir", inputs=[p for p in inputs if p is not None]) as tmp:
        counts = _write_request_lines(design, catalog, tmp, files, runs, names, shape, model, system, max_tokens)
        _write_inputs(design, catalog, tmp, files, names)
        fmt = "anthropic" if format == "anthropic-batch" else "openai"
        _write_file(tmp / files["manifest"], _manifest(design, fmt, files, runs, model or DEFAULT_MODEL))
        summary = {"format": format, "endpoint": endpoint if format == "openai-batch" else None,
                   "model": model, "system": system, "files": dict(files),
                   "requests": int(sum(counts.values())), "requests_per_run": counts, **design.to_dict()}
        summary["settings"] = {k: v for k, v in summary["settings"].items() if not k.startswith("_")}
        _write_file(tmp / files["summary"], json.dumps(summary, indent=2, default=str) + "\n")
    return {"out": str(out), "files": files, "requests": int(sum(counts.values())), "format": format}


# -- write_requests's stages: check -> the folder and its files -> the request lines -> the inputs ---
def _check_request_args(design: StudyDesign, format: str, endpoint: str, model: str | None) -> ToolCatalog:
    """The design's catalog, after checking that requests can be written for it in this format."""
    if design.catalog is None:
        raise ValueError("request files are written for tool catalogs; a multiple-choice design is run through "
                         "the Inspect solver (toolbias_stats/order_choices).")
    if format != "chat-jsonl" and not model:
        raise ValueError(f"`model` is required for {format!r}: the batch API needs it in every request.")
    if endpoint == "responses" and format != "openai-batch":
        raise ValueError("`endpoint='responses'` applies to format 'openai-batch' only.")
    for cid in design.catalog.clusters:
        text = str(cid)
        if safe_cell(text) != text and not _NUMBER.match(text):
            raise ValueError(f"{design.catalog.source}:cluster_id: cluster {text!r} starts with {text[:1]!r}, "
                             "which a spreadsheet runs as a formula (catalog.csv and design.csv open in "
                             "spreadsheets); rename the cluster.")
    return design.catalog


def _output_folder(out: str | os.PathLike) -> Path:
    """The output folder, refused when it is a file or already holds a design."""
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise ValueError(f"--out-dir {out} exists and is not a folder.")
    if (out / "design.json").exists():
        raise ValueError(f"{out} already holds a design (design.json); choose a new folder (a design is never "
                         "overwritten: its results may already be arriving).")
    return out


def _output_files(out: Path, runs: list, inputs: Iterable) -> dict[str, Any]:
    """The names of the files to write, refused when one of them is an input."""
    files: dict[str, Any] = {"catalog": "catalog.csv", "design": "design.csv", "manifest": "study.toml",
                             "summary": "design.json", "queries": "queries.json",
                             "requests": {r: f"requests-run{r}.jsonl" for r in runs},
                             "responses": {r: f"responses-run{r}.jsonl" for r in runs}}
    targets = [out / files[k] for k in ("catalog", "design", "manifest", "summary", "queries")]
    targets += [out / f for f in files["requests"].values()]
    ins = {Path(p).resolve() for p in inputs if p is not None}
    clash = [str(t) for t in targets if t.resolve() in ins]
    if clash:
        raise ValueError(f"output file(s) {clash} would overwrite an input; choose another --out-dir folder.")
    return files


def _write_request_lines(design: StudyDesign, catalog: ToolCatalog, out: Path, files: dict, runs: list,
                         names: dict, shape: str, model: str | None, system: str | None, max_tokens: int) -> dict:
    """Write one requests file per run; ``{run: lines written}``."""
    tools = {}
    for row in catalog.table.itertuples(index=False):
        desc, schema = tool_schema(row)
        tools[row.tool_id] = (names[row.tool_id], desc, schema)
    counts = {}
    for r in runs:
        lines = []
        for rec in design.table[design.table["run"] == r].itertuples(index=False):
            order = rec.ordering.split("|")
            lines.append(json.dumps(_request(shape, rec, [tools[t] for t in order], model, system, max_tokens),
                                    ensure_ascii=False))
        _write_file(out / files["requests"][r], "\n".join(lines) + "\n")
        counts[r] = len(lines)
    return counts


def _write_inputs(design: StudyDesign, catalog: ToolCatalog, out: Path, files: dict, names: dict) -> None:
    """Write the catalog (under the names sent), the design table and the queries."""
    cat = catalog.to_frame()
    if "source_tool_id" not in cat.columns:       # a catalog written by an earlier design keeps its sources
        cat.insert(1, "source_tool_id", cat["tool_id"])
    cat["tool_id"] = cat["tool_id"].map(names)
    # text a spreadsheet would run as a formula gets a leading ' (issue 37); the keys the importer joins on stay
    # as sent: tool ids are send names (no formula can be spelled in [A-Za-z0-9_-]) and formula-like cluster
    # ids are refused up front (_check_request_args)
    keys = cat[["tool_id", "cluster_id"]]
    cat = spreadsheet_safe(cat)
    cat[["tool_id", "cluster_id"]] = keys
    _write_file(out / files["catalog"], cat.to_csv(index=False))
    _write_file(out / files["design"], spreadsheet_safe(design.table).to_csv(index=False))
    queries = design.settings.get("_queries") or {c: list(dict.fromkeys(sub["query"]))
                                                  for c, sub in design.table.groupby("cluster_id", sort=False)}
    _write_file(out / files["queries"], json.dumps([{"cluster_id": c, "queries": q} for c, q in queries.items()],
                                                         ensure_ascii=False, indent=1) + "\n")


def _request(shape, rec, tools, model, system, max_tokens) -> dict:
    query, qid = rec.query, rec.query_id
    if shape == "anthropic":
        params = {"model": model, "max_tokens": int(max_tokens),
                  "messages": [{"role": "user", "content": query}],
                  "tools": [{"name": n, "description": d, "input_schema": s} for n, d, s in tools]}
        if system:
            params["system"] = system
        return {"custom_id": rec.custom_id, "params": params}
    if shape == "openai-responses":
        body = {"model": model, "input": [{"role": "user", "content": query}],
                "tools": [{"type": "function", "name": n, "description": d, "parameters": s, "strict": False}
                          for n, d, s in tools],
                "metadata": {"query_id": qid, "cluster_id": rec.cluster_id, "custom_id": rec.custom_id}}
        if system:
            body["instructions"] = system
        return {"custom_id": rec.custom_id, "method": "POST", "url": "/v1/responses", "body": body}
    messages = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": query}]
    body = {"messages": messages,
            "tools": [{"type": "function", "function": {"name": n, "description": d, "parameters": s}}
                      for n, d, s in tools]}
    if model:
        body = {"model": model, **body}
    if shape == "openai-chat":
        body["metadata"] = {"query_id": qid, "cluster_id": rec.cluster_id, "custom_id": rec.custom_id}
        return {"custom_id": rec.custom_id, "method": "POST", "url": "/v1/chat/completions", "body": body}
    return {"custom_id": rec.custom_id, "query_id": qid, "cluster_id": rec.cluster_id, "run": int(rec.run),
            "body": body}


def _manifest(design, fmt, files, runs, model) -> str:
    s = design.settings
    lines = ["# Written by toolbias-stats design (docs/audit.md). Save each run's results as its `responses` file",
             "# (or let `toolbias-stats run` write them), then: toolbias-stats bias study.toml",
             f"name = {_toml_str('audit design: ' + s['orderings'] + ' orderings')}",
             f"format = {_toml_str(fmt)}",
             f"catalog = {_toml_str(files['catalog'])}",
             f"queries = {_toml_str(files['queries'])}   # every query of the designed clusters (BiasBusters format)",
             ""]
    for r in runs:
        lines += ["[[logs]]", f"path = {_toml_str(files['requests'][r])}",
                  f"responses = {_toml_str(files['responses'][r])}", f"model = {_toml_str(model)}", f"run = {r}",
                  'condition = "base"']
        if s.get("kind") == "pairs":
            lines.append("subsets = true")
        lines.append("")
    return "\n".join(lines)


def read_design(study_dir) -> dict:
    """The ``design.json`` of a folder written by :func:`write_requests` (ValueError naming the folder when
    it has none)."""
    path = Path(study_dir) / "design.json"
    if not path.exists():
        raise ValueError(f"{study_dir} holds no design (design.json); write one with `toolbias-stats design`.")
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}:{exc.lineno}: malformed JSON: {exc.msg}") from None
