"""Fixtures for the feature tests: one MiniLM encoder per session, with a temporary embedding cache."""

import pytest


@pytest.fixture(scope="session")
def minilm_cache(tmp_path_factory):
    return tmp_path_factory.mktemp("embedding_cache")


@pytest.fixture(scope="session")
def minilm(minilm_cache):
    """The bundled all-MiniLM-L6-v2, loaded once (encode only a handful of texts with it)."""
    from toolbias_stats.features import Encoder

    enc = Encoder(cache_dir=minilm_cache)
    enc._load()
    return enc
