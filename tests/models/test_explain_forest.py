"""The explanation models' random forest (models._ensembles._BaggedTrees) is scikit-learn's RandomForestRegressor
bit for bit: same trees from the same seed, same predictions, same cross-validated scores and importances."""

import numpy as np
import pandas as pd
import pytest
from sklearn.ensemble import RandomForestRegressor

from toolbias_stats.models import _ensembles
from toolbias_stats.models._ensembles import _BaggedTrees, _make, _params

pytestmark = pytest.mark.skipif(not _BaggedTrees.available(), reason="scikit-learn release not checked")


@pytest.mark.parametrize("case", range(12))
def test_predictions_equal_random_forest_regressor(case):
    rng = np.random.default_rng(case)
    n, p = int(rng.integers(3, 60)), int(rng.integers(1, 9))
    x = rng.normal(size=(n, p))
    if case % 3 == 0:
        x[:, 0] = np.round(x[:, 0])                       # ties in a feature
    if case % 4 == 1:
        x[:, -1] = 1.0                                    # a constant feature
    y = rng.normal(size=n) if case % 5 else np.round(rng.normal(size=n))
    depth = None if case % 2 else int(rng.integers(1, 5))
    xt = np.vstack([x[:3], rng.normal(size=(9, p))])
    ref = RandomForestRegressor(n_estimators=37, max_depth=depth, random_state=case + 100).fit(x, y)
    ours = _BaggedTrees(37, depth, case + 100).fit(x, y)
    np.testing.assert_array_equal(ours.predict(xt), ref.predict(xt))
    for mine, theirs in zip(ours.trees_, ref.estimators_):
        np.testing.assert_array_equal(mine.threshold, theirs.tree_.threshold)


def test_used_only_with_one_job():
    assert isinstance(_make("random_forest", _params("random_forest", 5, None, 0.05, 1), 1), _BaggedTrees)
    assert isinstance(_make("random_forest", _params("random_forest", 5, None, 0.05, 2), 1), RandomForestRegressor)


def test_cross_validation_identical_to_the_library_forest(monkeypatch):
    import toolbias_stats as tbs
    from toolbias_stats.features import read_feature_table

    feats = read_feature_table(tbs.datasets.path("biasbusters/authors_features.json"))
    kw = dict(estimator="random_forest", n_estimators=15, n_repeats=2, n_permutations=3, rng=5)
    fast = _ensembles.ensemble_cv(feats, **kw)
    monkeypatch.setattr(_BaggedTrees, "available", classmethod(lambda cls: False))
    slow = _ensembles.ensemble_cv(feats, **kw)
    pd.testing.assert_frame_equal(fast.to_frame(), slow.to_frame(), check_exact=True)
    pd.testing.assert_frame_equal(fast.importances_frame(), slow.importances_frame(), check_exact=True)
    pd.testing.assert_frame_equal(fast.summary_frame(), slow.summary_frame(), check_exact=True)


def test_gradient_boosting_identical_with_one_openmp_thread(monkeypatch):
    import contextlib

    import toolbias_stats as tbs
    from toolbias_stats.features import read_feature_table

    feats = read_feature_table(tbs.datasets.path("biasbusters/authors_features.json"))
    kw = dict(estimator="gradient_boosting", n_estimators=20, n_repeats=1, n_permutations=2, rng=9)
    limited = _ensembles.ensemble_cv(feats, **kw)
    monkeypatch.setattr(_ensembles, "_openmp_limit", lambda n_jobs: contextlib.nullcontext())
    default = _ensembles.ensemble_cv(feats, **kw)
    pd.testing.assert_frame_equal(limited.to_frame(), default.to_frame(), check_exact=True)
    pd.testing.assert_frame_equal(limited.importances_frame(), default.importances_frame(), check_exact=True)
