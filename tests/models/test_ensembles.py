"""Random forest / gradient boosting with grouped CV: no cluster leakage, constant baseline, reproducibility."""

import warnings

import numpy as np
import pandas as pd
import pytest

from toolbias_stats.exceptions import SmallSampleWarning
from toolbias_stats.models import ensemble_cv, gradient_boosting_cv, grouped_splits, random_forest_cv

FAST = dict(n_estimators=15, n_repeats=2, n_permutations=3)


class TestGroupedSplits:
    @pytest.mark.parametrize("scheme,kw", [("loco", {}), ("group_kfold", {"n_splits": 3, "n_repeats": 4}),
                                           ("holdout", {"test_size": 0.3})])
    def test_no_cluster_on_both_sides(self, scheme, kw):
        groups = np.repeat([f"c{i}" for i in range(10)], 5)
        splits = grouped_splits(groups, scheme=scheme, rng=3, **kw)
        for s in splits:
            assert not set(groups[s.train]) & set(groups[s.test])
            assert len(s.train) + len(s.test) == len(groups) and len(s.test)
        if scheme != "holdout":  # every row is tested once per repeat
            for r in {s.repeat for s in splits}:
                tested = np.concatenate([s.test for s in splits if s.repeat == r])
                assert sorted(tested) == list(range(len(groups)))

    def test_loco_has_one_fold_per_cluster(self):
        groups = ["a", "a", "b", "c", "c"]
        assert [sorted(set(np.asarray(groups)[s.test])) for s in grouped_splits(groups)] == [["a"], ["b"], ["c"]]

    def test_repeats_differ_and_seed_reproduces(self):
        g = np.repeat(list("abcdefgh"), 3)
        a = grouped_splits(g, scheme="group_kfold", n_splits=4, n_repeats=3, rng=1)
        b = grouped_splits(g, scheme="group_kfold", n_splits=4, n_repeats=3, rng=1)
        assert all(np.array_equal(x.test, y.test) for x, y in zip(a, b))
        firsts = {tuple(sorted(s.test)) for s in a if s.fold == 1}
        assert len(firsts) > 1

    @pytest.mark.parametrize("kw,msg", [
        ({"groups": ["a", "a"]}, "needs at least two groups"),
        ({"groups": ["a", "b"], "scheme": "group_kfold", "n_splits": 3}, "`n_splits` must be at most the number"),
        ({"groups": ["a", "b"], "scheme": "nope"}, "`scheme` must be one of 'loco', 'group_kfold', 'holdout'"),
        ({"groups": ["a", "b"], "scheme": "holdout", "test_size": 1.5}, r"`test_size` must be a number in \(0, 1\)"),
    ])
    def test_bad_arguments(self, kw, msg):
        groups = kw.pop("groups")
        with pytest.raises(ValueError, match=msg):
            grouped_splits(groups, **kw)


class TestEnsembleCV:
    def test_cv_never_trains_on_a_test_cluster(self, authors):
        """The recorded folds: test clusters of LOCO are single clusters, and all clusters appear once."""
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res = random_forest_cv(authors, rng=0, schemes=["loco"], **FAST)
        f = res.fit_for("Qwen").folds
        loco = f[(f["scheme"] == "loco") & (f["metric"] == "r2")]
        assert sorted(loco["test_clusters"], key=int) == [str(i) for i in range(1, 11)]

    def test_scores_next_to_the_baseline(self, authors):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res = random_forest_cv(authors, rng=0, **FAST)
        s = res.summary_frame()
        assert set(s["scheme"]) == {"loco", "group_kfold", "holdout"}
        assert {"r2", "rmse", "baseline_r2", "baseline_rmse", "r2_gain", "beats_baseline"} <= set(s.columns)
        np.testing.assert_allclose(s["r2_gain"], s["r2"] - s["baseline_r2"])
        # the constant predicts the training mean; with centred rates it is ~0 and R^2 ~ 0 (slightly below)
        assert (s["baseline_r2"] <= 1e-12).all()
        assert (s.loc[s["scheme"] != "holdout", "baseline_r2"] > -0.05).all()   # one held-out split is noisier
        # BiasBusters F.1: forests often do worse than a constant; our output must say so plainly
        assert (~s["beats_baseline"]).sum() >= 6
        d = res.to_dict()["Gemini"]
        assert {"cv_r2", "cv_rmse", "baseline_r2", "baseline_rmse", "importances"} <= set(d)

    def test_learns_a_strong_signal(self, toy):
        feats, rates = toy
        res = gradient_boosting_cv(feats, rates, rng=0, schemes=["loco"], n_estimators=60, n_permutations=5)
        fit = res.fit_for("follows")
        assert fit.score("loco", "r2") > 0.5 and fit.scores["beats_baseline"].iloc[0]
        imp = fit.importances.set_index("feature")["mean"]
        assert imp["signal"] > 10 * abs(imp["noise"])

    @pytest.mark.parametrize("estimator", ["random_forest", "gradient_boosting"])
    def test_same_seed_same_output(self, toy, estimator):
        feats, rates = toy
        a = ensemble_cv(feats, rates, estimator=estimator, rng=7, **FAST)
        b = ensemble_cv(feats, rates, estimator=estimator, rng=7, **FAST)
        pd.testing.assert_frame_equal(a.to_frame(), b.to_frame())
        pd.testing.assert_frame_equal(a.importances_frame(), b.importances_frame())
        c = ensemble_cv(feats, rates, estimator=estimator, rng=8, **FAST)
        assert not a.to_frame()["value"].equals(c.to_frame()["value"])

    def test_importance_spread_across_folds(self, toy):
        feats, rates = toy
        res = random_forest_cv(feats, rates, rng=1, schemes=["loco"], **FAST)
        imp = res.fit_for("follows").importances
        assert (imp["n_folds"] == 6).all() and imp["sd"].notna().all()
        assert len(res.fit_for("follows").importance_folds) == 6 * 2

    def test_too_few_clusters(self, toy):
        feats, rates = toy
        few = rates[rates["tool_id"].str.startswith(("c1", "c2"))]
        with pytest.warns(SmallSampleWarning, match="needs at least 3"):
            res = random_forest_cv(feats, few, rng=0, **FAST)
        assert res.fit_for("follows").scores.empty

    @pytest.mark.parametrize("kw,msg", [
        ({"estimator": "svm"}, "`estimator` must be one of 'random_forest', 'gradient_boosting'"),
        ({"schemes": ["kfold"]}, "`schemes` must be one of"),
        ({"n_estimators": 0}, "`n_estimators` must be an integer >= 1; got 0 instead."),
        ({"n_permutations": -1}, "`n_permutations` must be an integer >= 0"),
        ({"rng": "x"}, "`rng` must be None, an int or a numpy.random.Generator"),
    ])
    def test_bad_arguments(self, toy, kw, msg):
        feats, rates = toy
        with pytest.raises(ValueError, match=msg):
            ensemble_cv(feats, rates, **kw)
