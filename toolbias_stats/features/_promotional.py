"""Promotional wording: counts of words from a documented, user-extensible lexicon."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from typing import Any

__all__ = ["DEFAULT_PROMOTIONAL_WORDS", "TOKEN_PATTERN", "promotional_words", "tokenize", "check_lexicon"]

#: The lexicon of the BiasBusters authors (19 words), matched on lower-cased word tokens.
DEFAULT_PROMOTIONAL_WORDS = (
    "good", "great", "excellent", "effective", "efficient", "simple", "reliable", "affordable", "powerful", "fast",
    "easy", "robust", "accurate", "ideal", "best", "innovative", "highly", "top", "advanced",
)

#: Word tokens: maximal runs of Unicode letters, digits and underscores (Python ``re`` ``\w+``).
TOKEN_PATTERN = r"\w+"
_TOKEN = re.compile(TOKEN_PATTERN)


def tokenize(text: str | float | None) -> list[str]:
    """Lower-cased word tokens of ``text`` (``re.findall(r"\\w+", text.lower())``).

    Parameters
    ----------
    text : str or None
        The text; None or NaN (a missing description) has no tokens.

    Returns
    -------
    list of str

    Examples
    --------
    >>> tokenize("A fast, highly-reliable API!")
    ['a', 'fast', 'highly', 'reliable', 'api']
    """
    if text is None or (isinstance(text, float) and math.isnan(text)):
        return []
    return _TOKEN.findall(str(text).lower())


def check_lexicon(lexicon) -> tuple[str, ...]:
    """Validate a lexicon: an iterable of single word tokens, returned lower-cased and de-duplicated.

    Raises
    ------
    ValueError
        A string instead of a list of words, an empty lexicon, or an entry that is not exactly
        one word token (e.g. ``"state of the art"``).
    """
    if lexicon is None:
        return DEFAULT_PROMOTIONAL_WORDS
    if isinstance(lexicon, str):
        raise ValueError(f"`lexicon` must be a list of words, not one string; got {lexicon!r} instead.")
    words = []
    for w in lexicon:
        toks = tokenize(w) if isinstance(w, str) else []
        if len(toks) != 1 or toks[0] != str(w).lower().strip():
            raise ValueError(f"`lexicon` entries must be single word tokens (matched against {TOKEN_PATTERN!r} "
                             f"tokens); got {w!r} instead.")
        words.append(toks[0])
    if not words:
        raise ValueError("`lexicon` must contain at least one word; got an empty lexicon instead.")
    return tuple(dict.fromkeys(words))


def promotional_words(text: str | float | None, *, lexicon: Iterable[str] | None = None) -> dict[str, Any]:
    """Count promotional words in a text.

    Parameters
    ----------
    text : str or None
    lexicon : sequence of str, optional
        Words to count; default :data:`DEFAULT_PROMOTIONAL_WORDS` (the BiasBusters authors' 19
        words). Extend it with ``DEFAULT_PROMOTIONAL_WORDS + ("seamless", "blazing")``.

    Returns
    -------
    dict
        ``positive_word_count`` (int: token occurrences, repeats counted),
        ``positive_word_rate`` (per 100 tokens of the same tokenizer; NaN for a text without tokens)
        and ``n_tokens``.

    Notes
    -----
    Matching is on whole lower-cased tokens of :data:`TOKEN_PATTERN`: ``"Fastest"`` is not
    ``"fast"`` and ``"highly-rated"`` contains ``"highly"``. With the default lexicon this
    reproduces the authors' ``positive_word_count`` for all 50 BiasBusters APIs (on their
    ToolBench description texts).

    Examples
    --------
    >>> promotional_words("A fast, reliable and FAST geocoder. The best!")
    {'positive_word_count': 4, 'positive_word_rate': 50.0, 'n_tokens': 8}
    """
    words = set(check_lexicon(lexicon))
    toks = tokenize(text)
    count = sum(t in words for t in toks)
    return {"positive_word_count": int(count),
            "positive_word_rate": 100.0 * count / len(toks) if toks else math.nan,
            "n_tokens": len(toks)}
