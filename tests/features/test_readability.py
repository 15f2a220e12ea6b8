"""Readability (textstat 0.7.8, offline): a hand-computed sentence and edge cases."""

import math

import pytest

from toolbias_stats.features import readability


class TestReadability:
    def test_known_sentence(self):
        # 6 words, 1 sentence, 6 syllables:
        # FRE = 206.835 - 1.015 * 6/1 - 84.6 * 6/6 = 116.145; FKGL = 0.39 * 6 + 11.8 * 1 - 15.59 = -1.45
        r = readability("The cat sat on the mat.")
        assert r["flesch_reading_ease"] == pytest.approx(116.145, abs=1e-9)
        assert r["flesch_kincaid_grade"] == pytest.approx(-1.45, abs=1e-9)
        assert r["word_count"] == 6

    def test_two_sentences(self):
        # 8 words, 2 sentences; syllables: the(1) cat(1) sat(1) down(1) dogs(1) ran(1) a(1) way(1)... via Pyphen
        r = readability("The cat sat down. The dogs ran away.")
        assert r["word_count"] == 8
        assert r["flesch_reading_ease"] == pytest.approx(206.835 - 1.015 * 4 - 84.6 * 9 / 8, abs=1e-9)

    @pytest.mark.parametrize("text", ["", "   ", None, float("nan"), "!!!"])
    def test_no_words_is_nan(self, text):
        r = readability(text)
        assert math.isnan(r["flesch_reading_ease"]) and math.isnan(r["flesch_kincaid_grade"])
        assert r["word_count"] == 0

    def test_textstat_needs_no_download(self, monkeypatch):
        # textstat 0.7.8 uses Pyphen's bundled dictionaries; no NLTK / CMU data is fetched
        import socket

        def no_network(*a, **k):
            raise AssertionError("network access attempted")

        monkeypatch.setattr(socket, "create_connection", no_network)
        assert readability("Reliable geocoding for every address on earth.")["word_count"] == 7


class TestReadabilityCache:
    """Issue 14 (features CLI start-up): cached readability needs neither textstat nor its CMU dictionary."""

    def test_cached_values_equal_fresh_ones(self, tmp_path, monkeypatch):
        from toolbias_stats.features import _readability as R

        texts = ["The cat sat on the mat.", "", "Get real-time weather data for any city worldwide."]
        fresh = [R.readability(t) for t in texts]
        first = R.readability_many(texts, cache_dir=tmp_path)
        monkeypatch.setattr(R, "readability", lambda t: (_ for _ in ()).throw(AssertionError("not cached")))
        second = R.readability_many(texts, cache_dir=tmp_path)
        for a, b, c in zip(fresh, first, second):
            for k in a:
                assert (a[k] == b[k] == c[k]) or all(x != x for x in (a[k], b[k], c[k]))   # NaN for no words

    def test_cache_disabled(self, tmp_path):
        from toolbias_stats.features._readability import readability_many

        assert readability_many(["One two three."], cache_dir=False)[0]["word_count"] == 3
        assert not any(tmp_path.iterdir())
