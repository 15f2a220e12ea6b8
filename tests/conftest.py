"""Shared fixtures: the bundled BiasBusters catalog and study (read once per session)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

# lets tests import the reference values in tests/reference/
sys.path.insert(0, str(Path(__file__).resolve().parent))

# NumPyro fits in the tests keep no compiled programs on disk (tests/models/test_bayes_cache.py tests the cache)
os.environ.setdefault("TOOLBIAS_STATS_JAX_CACHE", "0")

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "data" / "biasbusters"


@pytest.fixture(scope="session")
def bb_catalog():
    from toolbias_stats.io.readers.biasbusters import read_biasbusters_catalog

    return read_biasbusters_catalog(DATA / "clusters.json", api_meta=DATA / "api_meta.json",
                                    cluster_names=DATA / "cluster_names.json")


@pytest.fixture(scope="session")
def bb_study():
    import toolbias_stats as tbs

    return tbs.read_study(DATA / "study.toml")


@pytest.fixture(scope="session")
def bb_data_dir():
    return DATA
