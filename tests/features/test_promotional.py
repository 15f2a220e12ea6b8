"""Promotional words: the authors' 19-word lexicon, tokenisation, user extensions."""

import math

import pytest

from toolbias_stats.features import DEFAULT_PROMOTIONAL_WORDS, promotional_words, tokenize


class TestPromotionalWords:
    def test_default_lexicon_is_the_authors(self):
        assert DEFAULT_PROMOTIONAL_WORDS == (
            "good", "great", "excellent", "effective", "efficient", "simple", "reliable", "affordable", "powerful",
            "fast", "easy", "robust", "accurate", "ideal", "best", "innovative", "highly", "top", "advanced")

    def test_known_text(self):
        text = "The BEST, most reliable API: fast & easy. Fastest? Top-notch, highly-rated and reliable!"
        # tokens: the best most reliable api fast easy fastest top notch highly rated and reliable (14)
        # matches: best, reliable, fast, easy, top, highly, reliable = 7 ("fastest" is not "fast")
        out = promotional_words(text)
        assert out == {"positive_word_count": 7, "positive_word_rate": pytest.approx(50.0), "n_tokens": 14}

    def test_no_tokens(self):
        out = promotional_words("")
        assert out["positive_word_count"] == 0 and math.isnan(out["positive_word_rate"])

    def test_extended_lexicon(self):
        words = DEFAULT_PROMOTIONAL_WORDS + ("seamless",)
        assert promotional_words("A seamless, fast API", lexicon=words)["positive_word_count"] == 2
        assert promotional_words("A seamless, fast API")["positive_word_count"] == 1

    def test_custom_lexicon_is_case_insensitive(self):
        assert promotional_words("Blazing BLAZING blazing", lexicon=["Blazing"])["positive_word_count"] == 3

    @pytest.mark.parametrize("lexicon,msg", [
        ("fast", "`lexicon` must be a list of words, not one string; got 'fast' instead."),
        (["state of the art"], "`lexicon` entries must be single word tokens"),
        ([], "`lexicon` must contain at least one word; got an empty lexicon instead."),
        ([3], "`lexicon` entries must be single word tokens"),
    ])
    def test_bad_lexicon(self, lexicon, msg):
        with pytest.raises(ValueError, match=msg.replace("(", r"\(").replace(")", r"\)")):
            promotional_words("x", lexicon=lexicon)

    def test_tokenize(self):
        assert tokenize("Geo-IP: 3000+ lookups/day") == ["geo", "ip", "3000", "lookups", "day"]
