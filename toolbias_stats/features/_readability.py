"""Readability of tool descriptions (textstat, offline)."""

from __future__ import annotations

import math

__all__ = ["readability", "READABILITY_FEATURES", "textstat_version"]

#: Columns produced by :func:`readability`.
READABILITY_FEATURES = ("flesch_reading_ease", "flesch_kincaid_grade", "word_count")


def textstat_version() -> str:
    """Installed textstat version (recorded in every feature table)."""
    from importlib.metadata import version

    return version("textstat")


def readability(text) -> dict:
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
