"""Embeddings shipped with the package (data/embeddings): keyed by encoder identity and sha256 of the text,
equal to freshly computed vectors, used only for the default encoder and only with the cache on."""

import hashlib

import numpy as np
import pytest

from toolbias_stats.datasets import data_dir
from toolbias_stats.features import Encoder
from toolbias_stats.features._similarity import (
    BUNDLED_EMBEDDINGS,
    bundled_identity,
    read_embedding_store,
    write_embedding_store,
)


@pytest.fixture(scope="module")
def store(minilm):
    got = read_embedding_store(data_dir() / BUNDLED_EMBEDDINGS, identity=bundled_identity(minilm.name, minilm.path))
    assert got is not None, "the shipped embeddings do not match the installed default encoder"
    return got


@pytest.fixture(scope="module")
def study_texts():
    """The texts tool_features encodes for the bundled study (queries, catalog and ToolBench descriptions)."""
    from toolbias_stats.io import read_study

    study = read_study(data_dir() / "biasbusters/study.toml", lazy=True)
    texts = [str(q) for qs in study.queries.values() for q in qs]
    tab = study.catalog.table
    for col in ("tool_description", "api_description", "toolbench_tool_description", "toolbench_api_description"):
        texts += [str(v).strip() for v in tab[col] if isinstance(v, str) and v.strip()]
    return list(dict.fromkeys(texts))


def test_every_text_of_the_bundled_study_is_shipped(store, study_texts):
    index, vectors = store
    missing = [t for t in study_texts if hashlib.sha256(t.encode()).hexdigest() not in index]
    assert missing == []
    assert vectors.dtype == np.float32 and vectors.shape == (len(index), 384)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


def test_shipped_vectors_equal_freshly_computed_ones(minilm, store, study_texts):
    index, vectors = store
    rng = np.random.default_rng(23)
    sample = [study_texts[i] for i in rng.choice(len(study_texts), size=24, replace=False)]
    fresh = Encoder(cache_dir=False)
    fresh._model = minilm._model                                   # share the loaded model
    computed = fresh.encode(sample)
    assert fresh.n_encoded == len(sample)
    shipped = np.stack([vectors[index[hashlib.sha256(t.encode()).hexdigest()]] for t in sample])
    np.testing.assert_allclose(shipped, computed, atol=1e-5, rtol=0)


def test_encoder_reads_shipped_vectors_without_loading_the_model(store, study_texts, tmp_path):
    index, vectors = store
    enc = Encoder(cache_dir=tmp_path)
    got = enc.encode(study_texts[:5] + study_texts[:1])
    assert enc.n_encoded == 0 and enc.n_cached == 5 and enc._model is None
    want = np.stack([vectors[index[hashlib.sha256(t.encode()).hexdigest()]] for t in study_texts[:5]])
    np.testing.assert_array_equal(got[:5], want)
    np.testing.assert_array_equal(got[5], want[0])


def test_cache_off_ignores_shipped_vectors(minilm, study_texts):
    enc = Encoder(cache_dir=False)
    enc._model = minilm._model
    enc.encode(study_texts[:2])
    assert enc.n_encoded == 2 and enc.n_cached == 0


def test_other_encoders_have_no_shipped_vectors(tmp_path):
    assert bundled_identity("my-model", tmp_path) is None
    assert bundled_identity("all-MiniLM-L6-v2", None) is None


def test_store_round_trip_and_identity_mismatch(tmp_path):
    f = tmp_path / "e.npz"
    write_embedding_store(f, ["x", "y"], np.array([[1.0, 0.0], [0.6, 0.8]]), identity="m|1")
    index, vecs = read_embedding_store(f, identity="m|1")
    assert vecs.dtype == np.float32
    np.testing.assert_array_equal(vecs[index[hashlib.sha256(b"y").hexdigest()]], np.float32([0.6, 0.8]))
    assert read_embedding_store(f, identity="m|2") is None              # another model or version: encode
    assert read_embedding_store(tmp_path / "absent.npz", identity="m|1") is None
    (tmp_path / "bad.npz").write_bytes(b"not a zip")
    assert read_embedding_store(tmp_path / "bad.npz", identity="m|1") is None
    (tmp_path / "cut.npz").write_bytes(f.read_bytes()[:200])                # a truncated zip
    assert read_embedding_store(tmp_path / "cut.npz", identity="m|1") is None
    with pytest.raises(ValueError, match="distinct"):
        write_embedding_store(f, ["x", "x"], np.eye(2), identity="m|1")


def test_no_pickle_in_the_shipped_file():
    with np.load(data_dir() / BUNDLED_EMBEDDINGS, allow_pickle=False) as z:   # would raise on object arrays
        assert sorted(z.files) == ["identity", "keys", "vectors"]
