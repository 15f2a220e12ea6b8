"""Fixtures for the model tests: the authors' feature table (read once)."""

import warnings

import pytest


@pytest.fixture(scope="session")
def authors(bb_data_dir):
    from toolbias_stats.features import read_feature_table

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return read_feature_table(bb_data_dir / "authors_features.json")


@pytest.fixture
def toy():
    """Three clusters x four tools, one feature that drives the rate, one noise feature, two LLMs."""
    import numpy as np
    import pandas as pd

    from toolbias_stats.features import ToolFeatures

    rng = np.random.default_rng(0)
    rows, rates = [], []
    for c in range(1, 7):
        x = rng.normal(size=4)
        w = np.exp(2 * x)
        for j in range(4):
            tid = f"c{c}t{j}"
            rows.append({"tool_id": tid, "cluster_id": str(c), "api_index": j + 1, "signal": x[j],
                         "noise": rng.normal()})
            rates.append({"model": "follows", "tool_id": tid, "rate": w[j] / w.sum()})
            rates.append({"model": "uniform", "tool_id": tid, "rate": 0.25 + 0.01 * rng.normal()})
    table = pd.DataFrame(rows)
    return ToolFeatures(table=table, feature_names=("signal", "noise")), pd.DataFrame(rates)
