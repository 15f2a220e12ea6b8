"""Readability of tool descriptions (textstat, offline)."""

from __future__ import annotations

import hashlib
import json
import math
import os
from pathlib import Path
from typing import Any

__all__ = ["readability", "readability_many", "READABILITY_FEATURES", "textstat_version"]

#: Columns produced by :func:`readability`.
READABILITY_FEATURES = ("flesch_reading_ease", "flesch_kincaid_grade", "word_count")


def textstat_version() -> str:
    """Installed textstat version (recorded in every feature table)."""
    from importlib.metadata import version

    return version("textstat")


def readability(text: str | float | None) -> dict[str, Any]:
    """Flesch reading ease, Flesch-Kincaid grade and word count of one text, with textstat.

    Parameters
    ----------
    text : str or None
        The text; the BiasBusters features use the tool description and the API description
        joined by one space.

    Returns
    -------
    dict
        ``flesch_reading_ease``, ``flesch_kincaid_grade`` (float) and ``word_count`` (int), all
        NaN when the text has no word (textstat would report a reading ease of 0 for it).

    Notes
    -----
    ``FRE = 206.835 - 1.015 * words / sentences - 84.6 * syllables / words`` and
    ``FKGL = 0.39 * words / sentences + 11.8 * syllables / words - 15.59`` (Kincaid et al. 1975),
    with textstat's English counts: words by ``lexicon_count`` (whitespace tokens with
    punctuation removed), sentences by its sentence splitter, syllables from the Pyphen
    hyphenation dictionary. textstat 0.7.8 is pinned because 0.7.9 and later download NLTK's
    CMU dictionary at run time, which fails offline; 0.7.8 needs no download.

    Examples
    --------
    >>> r = readability("The cat sat on the mat.")
    >>> round(r["flesch_reading_ease"], 3), round(r["flesch_kincaid_grade"], 2), r["word_count"]
    (116.145, -1.45, 6)
    """
    import textstat

    text = "" if text is None or (isinstance(text, float) and math.isnan(text)) else str(text)
    words = int(textstat.lexicon_count(text, removepunct=True)) if text.strip() else 0
    if words == 0:
        return {"flesch_reading_ease": math.nan, "flesch_kincaid_grade": math.nan, "word_count": 0}
    return {
        "flesch_reading_ease": float(textstat.flesch_reading_ease(text)),
        "flesch_kincaid_grade": float(textstat.flesch_kincaid_grade(text)),
        "word_count": words,
    }


def readability_many(texts, *, cache_dir=None) -> list[dict]:
    """:func:`readability` of several texts, with an on-disk cache beside the embedding cache.

    textstat's syllable counts load the CMU pronouncing dictionary (about 1 s per process); a cached text
    needs neither. The cache key is the text and the textstat version, so a new textstat recomputes.

    Parameters
    ----------
    texts : sequence of str
    cache_dir : path-like, None or False
        Cache root (default :func:`~toolbias_stats.features._similarity.default_cache_dir`); ``False``
        disables the cache.
    """
    if cache_dir is False:
        return [readability(t) for t in texts]
    from ._similarity import default_cache_dir

    root = (default_cache_dir() if cache_dir is None else Path(cache_dir).expanduser()) / "readability"
    version = textstat_version()
    out = []
    for t in texts:
        key = hashlib.sha256(f"textstat {version}\0{t}".encode()).hexdigest()
        f = root / key[:2] / f"{key}.json"
        try:
            out.append(json.loads(f.read_text(encoding="utf-8")))
            continue
        except (OSError, ValueError):
            pass
        r = readability(t)
        try:
            f.parent.mkdir(parents=True, exist_ok=True)
            tmp = f.with_suffix(f".{os.getpid()}.tmp")         # one per process (concurrent runs, test workers)
            tmp.write_text(json.dumps(r), encoding="utf-8")      # NaN is fine here: read back by Python only
            tmp.replace(f)
        except OSError:
            pass                                                  # a read-only cache only costs time
        out.append(r)
    return out
