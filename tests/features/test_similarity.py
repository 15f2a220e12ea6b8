"""Similarity features: offline encoder, cosine means, the on-disk cache (keyed by encoder and text)."""

import re

import numpy as np
import pytest

from toolbias_stats.features import Encoder, default_cache_dir, mean_cosine_similarity


class TestMeanCosineSimilarity:
    def test_identical_vectors_give_one(self):
        v = np.array([[0.3, -1.2, 4.0]])
        assert mean_cosine_similarity(v, v)[0] == pytest.approx(1.0)

    def test_hand_computed(self):
        q = np.array([[1.0, 0.0], [0.0, 2.0]])            # unit vectors e1, e2
        t = np.array([[1.0, 1.0], [-3.0, 0.0]])
        # mean(cos(e1, t), cos(e2, t)): (1/sqrt2 + 1/sqrt2)/2 and (-1 + 0)/2
        np.testing.assert_allclose(mean_cosine_similarity(q, t), [1 / np.sqrt(2), -0.5])

    def test_zero_vector_is_nan(self):
        assert np.isnan(mean_cosine_similarity(np.ones((2, 2)), np.zeros((1, 2)))[0])


class TestEncoder:
    def test_identical_texts_have_similarity_one(self, minilm):
        text = "Convert a street address into latitude and longitude."
        vecs = minilm.encode([text, text])
        assert vecs.shape == (2, 384) and vecs.dtype == np.float32
        assert mean_cosine_similarity(vecs[:1], vecs[1:])[0] == pytest.approx(1.0, abs=1e-6)

    def test_related_texts_are_closer_than_unrelated(self, minilm):
        q, near, far = minilm.encode(["What is the weather in Paris tomorrow?",
                                      "Multi-day weather forecast for a city.",
                                      "Validate the syntax of an email address."])
        assert mean_cosine_similarity(q[None], near[None])[0] > mean_cosine_similarity(q[None], far[None])[0] + 0.2

    def test_second_run_encodes_nothing(self, minilm, minilm_cache):
        texts = ["Geocode an address.", "Reverse geocode coordinates.", "Geocode an address."]
        first = minilm.encode(texts)
        again = Encoder(cache_dir=minilm_cache)          # a new object: nothing in memory
        second = again.encode(texts)
        assert again.n_encoded == 0 and again.n_cached == 2 and again._model is None
        np.testing.assert_array_equal(first, second)

    def test_cache_files_are_plain_npy_keyed_by_encoder_and_text(self, minilm, minilm_cache):
        import hashlib

        minilm.encode(["cache key check"])
        key = hashlib.sha256((minilm.id + "\0" + "cache key check").encode()).hexdigest()
        assert minilm.key("cache key check") == key
        f = minilm.cache_dir / key[:2] / f"{key}.npy"
        assert f.is_relative_to(minilm_cache)
        assert np.load(f, allow_pickle=False).shape == (384,)

    def test_corrupt_cache_entry_is_recomputed(self, minilm, tmp_path):
        enc = Encoder(cache_dir=tmp_path)
        enc._model = minilm._model                        # share the loaded model
        v = enc.encode(["corrupt me"])
        k = enc.key("corrupt me")
        (enc.cache_dir / k[:2] / f"{k}.npy").write_bytes(b"not an array")
        enc2 = Encoder(cache_dir=tmp_path)
        enc2._model = minilm._model
        np.testing.assert_allclose(enc2.encode(["corrupt me"]), v, atol=1e-6)
        assert enc2.n_encoded == 1

    def test_cache_off(self, minilm):
        enc = Encoder(cache_dir=False)
        assert enc.cache_dir is None

    def test_default_encoder_id_is_name_plus_fingerprint(self, minilm):
        assert minilm.name == "all-MiniLM-L6-v2"
        assert minilm.id.startswith("all-MiniLM-L6-v2|") and len(minilm.id.split("|")[1]) == 16
        assert Encoder("sentence-transformers/all-MiniLM-L6-v2", cache_dir=False).id == minilm.id

    def test_missing_model_is_a_clear_error(self, tmp_path):
        enc = Encoder("no-such-org/no-such-model-xyz", cache_dir=tmp_path)
        with pytest.raises(FileNotFoundError, match="could not be loaded offline"):
            enc.encode(["x"])

    def test_path_that_is_a_file_is_refused(self, tmp_path):
        f = tmp_path / "model.bin"
        f.write_bytes(b"")
        with pytest.raises(FileNotFoundError, match="is not a folder"):
            Encoder(f)

    def test_bad_batch_size(self):
        with pytest.raises(ValueError, match=re.escape("`batch_size` must be a positive integer; got 0 instead.")):
            Encoder(cache_dir=False, batch_size=0)


class TestCacheDir:
    def test_env_variable(self, monkeypatch, tmp_path):
        monkeypatch.setenv("TOOLBIAS_CACHE_DIR", str(tmp_path / "c"))
        assert default_cache_dir() == tmp_path / "c"

    def test_default_under_user_cache(self, monkeypatch, tmp_path):
        monkeypatch.delenv("TOOLBIAS_CACHE_DIR", raising=False)
        monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
        assert default_cache_dir() == tmp_path / "toolbias_stats"
