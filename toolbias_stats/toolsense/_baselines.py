"""Offline retrieval baselines on the RRB (BM25, MiniLM dense) and tool-selection bias among correct tools.

The rankers return prediction frames in the format of :func:`read_rrb_predictions` (the ranking as the
``constrained`` list: a retriever only ever returns catalog tools), so the baselines are scored by exactly
the same code as a model. Ties are broken at random (seeded), never by the file's pool order, which
places the anchor tool first for 389 of the 500 queries.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol

import numpy as np
import pandas as pd

from .._display import ReprHTMLMixin
from .._resampling import ConfidenceInterval, percentile_ci
from .._validation import check_choice, check_n_resamples, check_rng
from ..metrics import expected_tv_uniform, tv_to_uniform
from ._retrieval import RetrievalResult, _ci_json, _num, retrieval_recall

if TYPE_CHECKING:
    from ._io import RRBBenchmark

__all__ = ["tool_text", "bm25_rankings", "dense_rankings", "retrieval_baselines", "BaselineResult",
           "correct_set_bias", "CorrectSetBiasResult", "SCOPES"]

#: Where a retriever searches: the query's 14-tool candidate pool, or every tool of the file.
SCOPES: tuple[Literal["pool", "catalog"], ...] = ("pool", "catalog")


class TextEncoder(Protocol):
    """What the dense ranker needs of an encoder: ``encode(list of str) -> (n, dim) array``."""

    def encode(self, texts: list[str], /) -> Any:
        ...


def tool_text(tools: pd.DataFrame) -> list[str]:
    """The text a retriever sees for each tool (title, description, endpoint and its description).

    The text is ``"title: description. endpoint: endpoint description"``.

    Parameters
    ----------
    tools : pandas.DataFrame
        Columns ``tool_title``, ``tool_description``, ``api_title``, ``api_description`` (``RRBBenchmark.tools``).

    Returns
    -------
    list of str
        One text per row; an endpoint description that is missing, ``"None"`` or equal to its title is left out.

    Examples
    --------
    >>> t = pd.DataFrame([{"tool_title": "QR", "tool_description": "Make QR codes", "api_title": "Get",
    ...                    "api_description": "None"}])
    >>> tool_text(t)
    ['QR: Make QR codes. Get']
    """
    out = []
    for r in tools.itertuples(index=False):
        parts = [f"{r.tool_title}: {r.tool_description}".strip(": ")]
        ep = str(r.api_title or "")
        desc = str(r.api_description or "")
        if desc and desc != "None" and desc != ep:
            ep = f"{ep}: {desc}"
        out.append(f"{parts[0]}. {ep}".strip(". "))
    return out


def _rank(scores, names, k, gen):
    """Top-k names by score, ties broken by a random permutation (not by input order)."""
    tie = gen.permutation(len(scores))
    order = np.lexsort((tie, -np.asarray(scores, dtype=float)))
    return tuple(names[i] for i in order[:k])


def _rankings(benchmark, score_matrix_fn, scope, k, gen):
    q = benchmark.queries
    names = benchmark.tools["tool_name"].tolist()
    index = {n: i for i, n in enumerate(names)}
    rows = []
    scores = score_matrix_fn()  # (n_queries, n_tools)
    for i, (sid, pool) in enumerate(zip(q["sample_id"], q["pool"])):
        if scope == "pool":
            cand = [index[p] for p in pool]
            ranked = _rank(scores[i, cand], [names[j] for j in cand], k, gen)
        else:
            ranked = _rank(scores[i], names, k, gen)
        rows.append({"sample_id": sid, "constrained": ranked, "free": None})
    return pd.DataFrame(rows)


def bm25_rankings(benchmark: RRBBenchmark, *, scope: Literal["pool", "catalog"] = "pool", k: int = 50,
                  rng: np.random.Generator | int | None = None) -> pd.DataFrame:
    """BM25 (``bm25s``, Lucene variant, k1 = 1.5, b = 0.75, English stop words) rankings of the RRB queries.

    The index holds every tool of the file (so IDF is the catalog's); ``scope="pool"`` ranks the 14 candidates
    of each query, ``scope="catalog"`` all 4,901 tools.

    Parameters
    ----------
    benchmark : RRBBenchmark
    scope : {"pool", "catalog"}, default "pool"
    k : int, default 50
        Length of each ranking (at most the pool's 14 with ``scope="pool"``).
    rng : None, int or numpy.random.Generator
        For breaking ties at random.

    Returns
    -------
    pandas.DataFrame
        ``sample_id``, ``constrained`` (top-k names), ``free`` (None).

    Examples
    --------
    >>> from toolbias_stats.toolsense import read_rrb, retrieval_recall
    >>> rrb = read_rrb()
    >>> ranked = bm25_rankings(rrb, k=5, rng=0)
    >>> ranked.shape, len(ranked["constrained"].iloc[0])
    ((500, 3), 5)
    >>> res = retrieval_recall(rrb, ranked, k=[1, 5], n_resamples=0)
    >>> round(res.estimates[("model", "all", 1)]["rc"].estimate, 3)
    0.546
    """
    import bm25s

    check_choice("scope", scope, SCOPES)
    gen = check_rng(rng)
    corpus = tool_text(benchmark.tools)

    def scores():
        tok = bm25s.tokenize(corpus, stopwords="en", show_progress=False)
        ret = bm25s.BM25()
        ret.index(tok, show_progress=False)
        qtok = bm25s.tokenize(benchmark.queries["query"].tolist(), stopwords="en", show_progress=False,
                              return_ids=False)
        return np.vstack([ret.get_scores(t) if t else np.zeros(len(corpus)) for t in qtok])

    return _rankings(benchmark, scores, scope, k, gen)


def dense_rankings(benchmark: RRBBenchmark, *, encoder: TextEncoder | None = None,
                   scope: Literal["pool", "catalog"] = "pool", k: int = 50,
                   rng: np.random.Generator | int | None = None) -> pd.DataFrame:
    """Dense rankings by cosine similarity of sentence embeddings (default: the bundled MiniLM, offline, cached).

    Parameters
    ----------
    benchmark : RRBBenchmark
    encoder : object with ``encode(list of str) -> (n, d) array``, optional
        Default :class:`toolbias_stats.features.Encoder` (all-MiniLM-L6-v2 with the on-disk embedding cache).
    scope : {"pool", "catalog"}
    k : int
    rng : for tie-breaking

    Returns
    -------
    pandas.DataFrame
        ``sample_id``, ``constrained`` (top-k names by cosine similarity), ``free`` (None).

    Examples
    --------
    >>> import numpy as np
    >>> class Letters:   # a toy encoder: letter counts (the default is the bundled MiniLM)
    ...     def encode(self, texts):
    ...         return np.array([[t.lower().count(c) for c in "abcdefghijklmnopqrstuvwxyz "] for t in texts], float)
    >>> from toolbias_stats.toolsense import read_rrb
    >>> ranked = dense_rankings(read_rrb(), encoder=Letters(), k=3, rng=0)
    >>> ranked.shape, len(ranked["constrained"].iloc[0]), bool(ranked["free"].isna().all())
    ((500, 3), 3, True)
    """
    check_choice("scope", scope, SCOPES)
    gen = check_rng(rng)
    if encoder is None:
        from ..features import Encoder

        encoder = Encoder()

    def scores():
        t = np.asarray(encoder.encode(tool_text(benchmark.tools)), dtype=float)
        qv = np.asarray(encoder.encode(benchmark.queries["query"].tolist()), dtype=float)
        t /= np.linalg.norm(t, axis=1, keepdims=True)
        qv /= np.linalg.norm(qv, axis=1, keepdims=True)
        return qv @ t.T

    return _rankings(benchmark, scores, scope, k, gen)


@dataclass(frozen=True, eq=False)
class BaselineResult(ReprHTMLMixin):
    """Result of :func:`retrieval_baselines`.

    Attributes
    ----------
    recall : RetrievalResult
        Configurations ``"<method>/<scope>"``; the ranking is scored as ``rc`` (Recall@k).
    rankings : dict
        The prediction frames per configuration.
    seconds : dict
        Wall time per method (encoding included for ``dense``).
    encoder : dict or None
        Provenance of the encoder.
    correct_set : dict
        ``{config: CorrectSetBiasResult}`` for the catalog-scope rankings.
    notes : list of str

    Examples
    --------
    >>> from toolbias_stats.toolsense import read_rrb
    >>> res = retrieval_baselines(read_rrb(), methods=["bm25"], scopes=["pool"], k=[1, 5], n_resamples=100, rng=0)
    >>> res.to_frame().query("tier == 'all'")[["config", "k", "n", "recall", "hits"]]
          config  k    n  recall  hits
    6  bm25/pool  1  500   0.546   273
    7  bm25/pool  5  500   0.900   450
    >>> sorted(res.correct_set), res.notes[0]
    (['bm25/pool'], 'Recall@k within the 14-tool pool is 1 for k >= 14 by construction.')
    """

    recall: RetrievalResult
    rankings: dict = field(repr=False)
    seconds: dict = field(default_factory=dict)
    encoder: dict | None = None
    correct_set: dict = field(default_factory=dict)
    notes: list = field(default_factory=list)

    def to_frame(self) -> pd.DataFrame:
        t = self.recall.to_frame()
        keep = ["config", "tier", "k", "n", "rc", "rc_hits", "rc_low", "rc_high", "rc_percentile_low",
                "rc_percentile_high"]
        return t[keep].rename(columns={"rc": "recall", "rc_hits": "hits", "rc_low": "ci_low", "rc_high": "ci_high",
                                       "rc_percentile_low": "pct_low", "rc_percentile_high": "pct_high"})

    def to_dict(self) -> dict:
        rows = []
        for c in self.recall.configs:
            method, scope = c.split("/")
            for r in self.recall.rows(c):
                rows.append({"method": method, "scope": scope, "tier": r["tier"], "k": r["k"], "n": r["n"],
                             "recall": r["rc"]})
        return {"whose": "ours (toolbias_stats baselines on the vendored RRB), not the paper's",
                "ks": self.recall.ks, "n_resamples": self.recall.n_resamples,
                "confidence_level": self.recall.confidence_level, "ci_method": self.recall.ci_method,
                "seconds": self.seconds, "encoder": self.encoder, "rows": rows,
                "correct_set_bias": {c: r.to_dict() for c, r in self.correct_set.items()}, "notes": self.notes}


def retrieval_baselines(benchmark: RRBBenchmark, *, methods: Sequence[Literal["bm25", "dense"]] = ("bm25", "dense"),
                        scopes: Sequence[Literal["pool", "catalog"]] = SCOPES,
                        k: Sequence[int] = (1, 5, 10, 50), encoder: TextEncoder | None = None,
                        n_resamples: int = 2000, confidence_level: float = 0.95,
                        rng: np.random.Generator | int | None = None) -> BaselineResult:
    """BM25 and dense retrieval Recall@k on the RRB, per tier, within the pool and over the union catalog.

    Parameters
    ----------
    benchmark : RRBBenchmark
    methods : sequence of {"bm25", "dense"}
    scopes : sequence of {"pool", "catalog"}
    k : sequence of int
    encoder : see :func:`dense_rankings`
    n_resamples, confidence_level, rng : as in :func:`retrieval_recall`

    Returns
    -------
    BaselineResult

    Notes
    -----
    Within the pool, Recall@k is 1 for every k >= 14 (the pool has 14 tools). These numbers are measured
    by this package; the paper's BM25 / text-embedding-3-large rows use another protocol (Stage-2 hard
    split, its own catalog).

    Examples
    --------
    Dense retrieval within each query's pool with a toy encoder:

    >>> import numpy as np
    >>> class Letters:   # a toy encoder: letter counts (the default is the bundled MiniLM)
    ...     def encode(self, texts):
    ...         return np.array([[t.lower().count(c) for c in "abcdefghijklmnopqrstuvwxyz "] for t in texts], float)
    >>> from toolbias_stats.toolsense import read_rrb
    >>> res = retrieval_baselines(read_rrb(), methods=["dense"], scopes=["pool"], k=[1, 14], encoder=Letters(),
    ...                           n_resamples=0, rng=0)
    >>> res.to_frame().query("tier == 'all'")[["config", "k", "recall"]].round(3)   # the pool has 14 tools
           config   k  recall
    6  dense/pool   1   0.318
    7  dense/pool  14   1.000
    >>> res.recall.configs, res.encoder is None
    (['dense/pool'], True)
    """
    gen = check_rng(rng)
    check_n_resamples(n_resamples)
    ks = sorted({int(x) for x in k})
    for m in methods:
        check_choice("methods", m, ("bm25", "dense"))
    for s in scopes:
        check_choice("scopes", s, SCOPES)
    rankings, seconds = {}, {}
    enc_info = None
    for m in methods:
        t0 = time.perf_counter()
        if m == "dense" and encoder is None:
            from ..features import Encoder

            encoder = Encoder()
        for s in scopes:
            kk = max(ks) if s == "catalog" else len(benchmark.queries["pool"].iloc[0])
            if m == "bm25":
                rankings[f"{m}/{s}"] = bm25_rankings(benchmark, scope=s, k=kk, rng=gen)
            else:
                rankings[f"{m}/{s}"] = dense_rankings(benchmark, encoder=encoder, scope=s, k=kk, rng=gen)
        seconds[m] = time.perf_counter() - t0
        if m == "dense" and encoder is not None and hasattr(encoder, "describe"):
            enc_info = encoder.describe()
    # pool rankings hold 14 names: pad k beyond the pool with the full pool (Recall@k = Recall@14)
    recall = retrieval_recall(benchmark, rankings, k=ks, n_resamples=n_resamples, confidence_level=confidence_level,
                              rng=gen)
    correct = {c: correct_set_bias(benchmark, r, rng=gen) for c, r in rankings.items()}
    notes = ["Recall@k within the 14-tool pool is 1 for k >= 14 by construction.",
             "Ties in scores are broken at random (seeded), never by the file's pool order (anchor first in 389/500)."]
    return BaselineResult(recall=recall, rankings=rankings, seconds=seconds, encoder=enc_info, correct_set=correct,
                          notes=notes)


# -- selection bias among equally correct tools ---------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class CorrectSetBiasResult(ReprHTMLMixin):
    """Result of :func:`correct_set_bias`.

    Attributes
    ----------
    table : pandas.DataFrame
        One row per answer-set size K (and ``"all"``): ``k_answers``, ``n`` (queries whose ranking contains a
        correct tool), ``delta`` (TV to uniform of which answer slot is ranked first), ``null_expected`` (exact
        expected TV of a retriever that picks uniformly among the correct tools, same n), ``excess``
        (delta - null_expected), ``ci_low``, ``ci_high`` (query-bootstrap percentile), ``p_value``
        (Monte-Carlo, uniform chooser), ``first_listed_share`` (share won by the first-listed answer, usually
        the anchor) and ``first_listed_expected`` (1/K).
    counts : dict
        ``{K: counts per answer slot}``.
    n_null : int

    Examples
    --------
    The file's pool order puts the anchor (the first-listed answer) first far more often than 1/K:

    >>> import pandas as pd
    >>> from toolbias_stats.toolsense import read_rrb
    >>> rrb = read_rrb()
    >>> in_order = pd.DataFrame({"sample_id": rrb.queries["sample_id"], "constrained": rrb.queries["pool"]})
    >>> res = correct_set_bias(rrb, in_order, n_resamples=100, n_null=100, rng=0)
    >>> res.to_frame()[["k_answers", "n", "first_listed_share", "first_listed_expected"]].iloc[-1:].round(3)
      k_answers    n  first_listed_share  first_listed_expected
    7       all  333               0.865                  0.286
    >>> res.counts[2]   # queries with two correct tools: which answer slot was ranked first
    [44, 2]
    """

    table: pd.DataFrame
    counts: dict
    n_resamples: int
    n_null: int
    confidence_level: float

    def to_frame(self) -> pd.DataFrame:
        return self.table.copy()

    def to_dict(self) -> dict:
        rows = [{k: (_num(v) if isinstance(v, (float, np.floating)) else
                     int(v) if isinstance(v, np.integer) else v) for k, v in r.items()}
                for r in self.table.to_dict(orient="records")]
        for r in rows:
            r["ci"] = _ci_json((r.pop("ci_low"), r.pop("ci_high")))
        return {"rows": rows, "n_resamples": self.n_resamples, "n_null": self.n_null,
                "confidence_level": self.confidence_level}


def correct_set_bias(benchmark: RRBBenchmark, predictions: pd.DataFrame, *,
                     decoding: Literal["constrained", "free"] = "constrained", min_answers: int = 2,
                     n_resamples: int = 2000, n_null: int = 2000, confidence_level: float = 0.95,
                     rng: np.random.Generator | int | None = None) -> CorrectSetBiasResult:
    """How evenly a ranker puts each of several correct tools first: delta_API over the correct set.

    For every query with ``K >= min_answers`` correct tools whose ranking contains one of them, the
    "choice" is the answer slot (position in the benchmark's answer list) of the highest-ranked correct tool.
    A ranker without preference among equally correct tools picks each slot with probability 1/K; the
    statistic is BiasBusters' ``delta = TV(P, U_K)`` per K (queries with the same K form a cluster) and the
    n-weighted mean over K (``"all"``), with the package's exact uniform-chooser expectation
    (:func:`~toolbias_stats.expected_tv_uniform`) and a Monte-Carlo p-value.

    Parameters
    ----------
    benchmark : RRBBenchmark
    predictions : pandas.DataFrame
        A prediction frame (one ranking per query).
    decoding : {"constrained", "free"}
    min_answers : int, default 2
    n_resamples, n_null : int, default 2000
    confidence_level : float
    rng : None, int or Generator

    Returns
    -------
    CorrectSetBiasResult

    Examples
    --------
    A ranker that lists the pool in reverse file order:

    >>> import pandas as pd
    >>> from toolbias_stats.toolsense import read_rrb
    >>> rrb = read_rrb()
    >>> reverse = pd.DataFrame({"sample_id": rrb.queries["sample_id"],
    ...                         "constrained": [p[::-1] for p in rrb.queries["pool"]]})
    >>> res = correct_set_bias(rrb, reverse, n_resamples=100, n_null=100, rng=0)
    >>> res.to_frame()[["k_answers", "n", "delta", "null_expected"]].round(3)
      k_answers    n  delta  null_expected
    0         2   46  0.457          0.059
    1         3  121  0.435          0.051
    2         4   28  0.464          0.129
    3         5   74  0.357          0.093
    4         6   46  0.572          0.132
    5         7   16  0.589          0.248
    6         8    2  0.875          0.766
    7       all  333  0.452          0.093
    """
    check_choice("decoding", decoding, ("constrained", "free"))
    gen = check_rng(rng)
    q = benchmark.queries
    pred = predictions.set_index("sample_id")[decoding].reindex(q["sample_id"])
    slots: dict = {}
    for ans, lst in zip(q["answers"], pred):
        if len(ans) < min_answers or lst is None or (isinstance(lst, float) and np.isnan(lst)):
            continue
        pos = {a: i for i, a in enumerate(ans)}
        first = next((pos[n] for n in lst if n in pos), None)
        if first is not None:
            slots.setdefault(len(ans), []).append(first)
    level = confidence_level
    rows, counts_out = [], {}
    total_n = sum(len(v) for v in slots.values())
    agg: dict[str, Any] = {"delta": 0.0, "null": 0.0, "boot": np.zeros(n_resamples), "nulls": np.zeros(n_null),
                           "first": 0.0, "first_exp": 0.0}
    for kk in sorted(slots):
        s = np.asarray(slots[kk])
        n = s.size
        counts = np.bincount(s, minlength=kk)
        counts_out[kk] = counts.tolist()
        delta = float(tv_to_uniform(counts / n))
        null = float(expected_tv_uniform(n, kk))
        boot = gen.multinomial(n, counts / n, size=n_resamples) / n if n_resamples else np.empty((0, kk))
        boot_tv = tv_to_uniform(boot) if n_resamples else np.empty(0)
        nulls = tv_to_uniform(gen.multinomial(n, np.full(kk, 1 / kk), size=n_null) / n)
        ci = percentile_ci(boot_tv, level) if n_resamples else ConfidenceInterval(np.nan, np.nan)
        p = (1 + np.sum(nulls >= delta - 1e-12)) / (n_null + 1)
        rows.append({"k_answers": kk, "n": n, "delta": delta, "null_expected": null, "excess": delta - null,
                     "ci_low": ci[0], "ci_high": ci[1], "p_value": float(p), "first_listed_share": counts[0] / n,
                     "first_listed_expected": 1 / kk})
        w = n / total_n
        agg["delta"] += w * delta
        agg["null"] += w * null
        agg["boot"] = agg["boot"] + w * boot_tv if n_resamples else agg["boot"]
        agg["nulls"] += w * nulls
        agg["first"] += w * counts[0] / n
        agg["first_exp"] += w / kk
    if rows:
        ci = percentile_ci(agg["boot"], level) if n_resamples else ConfidenceInterval(np.nan, np.nan)
        p = (1 + np.sum(agg["nulls"] >= agg["delta"] - 1e-12)) / (n_null + 1)
        rows.append({"k_answers": "all", "n": total_n, "delta": agg["delta"], "null_expected": agg["null"],
                     "excess": agg["delta"] - agg["null"], "ci_low": ci[0], "ci_high": ci[1], "p_value": float(p),
                     "first_listed_share": agg["first"], "first_listed_expected": agg["first_exp"]})
    columns = ["k_answers", "n", "delta", "null_expected", "excess", "ci_low", "ci_high", "p_value",
               "first_listed_share", "first_listed_expected"]        # also when no query has enough answers
    return CorrectSetBiasResult(table=pd.DataFrame(rows, columns=columns), counts=counts_out,
                                n_resamples=n_resamples, n_null=n_null, confidence_level=level)
