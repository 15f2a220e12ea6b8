"""Cross-model alignment (BiasBusters Fig. 15): correlation matrix and cluster-bootstrap intervals."""


import numpy as np
import pandas as pd
import pytest

from toolbias_stats.exceptions import SmallSampleWarning
from toolbias_stats.models import model_alignment


@pytest.fixture(scope="module")
def align(authors):
    return model_alignment(authors, n_resamples=300, rng=5)


class TestModelAlignment:
    def test_matrix_is_pearson_of_rate_vectors(self, align, authors):
        wide = authors.selection_rates.pivot(index="tool_id", columns="model", values="rate")
        np.testing.assert_allclose(align.matrix.loc[wide.columns, wide.columns], wide.corr(), atol=1e-12)
        assert np.allclose(np.diag(align.matrix), 1)

    def test_intervals(self, align):
        t = align.to_frame()
        assert len(t) == 15 and (t["n_tools"] == 50).all()
        assert ((t["ci_low"] <= t["r"]) & (t["r"] <= t["ci_high"])).all()
        assert align.bootstrap_distribution.shape == (300, 15)
        assert align.resample == "cluster"

    def test_seeded(self, authors, align):
        again = model_alignment(authors, n_resamples=300, rng=5)
        pd.testing.assert_frame_equal(again.to_frame(), align.to_frame())

    def test_spearman_and_tool_resampling(self, authors):
        res = model_alignment(authors, method="spearman", resample="tool", n_resamples=50, rng=1)
        wide = authors.selection_rates.pivot(index="tool_id", columns="model", values="rate")
        np.testing.assert_allclose(res.matrix.loc[wide.columns, wide.columns], wide.corr("spearman"), atol=1e-12)

    def test_pair_with_too_few_common_clusters_has_no_interval(self):
        rates = pd.DataFrame({"model": ["a"] * 6 + ["b"] * 3,
                              "cluster_id": ["1", "1", "1", "2", "2", "2", "1", "1", "1"],
                              "tool_id": ["t1", "t2", "t3", "t4", "t5", "t6", "t1", "t2", "t3"],
                              "rate": [0.5, 0.3, 0.2, 0.1, 0.1, 0.8, 0.6, 0.3, 0.1]})
        with pytest.warns(SmallSampleWarning, match="need at least 3 clusters in common"):
            res = model_alignment(rates, n_resamples=20, rng=0)
        assert np.isnan(res.ci_low.at["a", "b"]) and res.n_tools.at["a", "b"] == 3
        assert res.matrix.at["a", "b"] == pytest.approx(np.corrcoef([0.5, 0.3, 0.2], [0.6, 0.3, 0.1])[0, 1])

    def test_no_resamples(self, authors):
        res = model_alignment(authors, n_resamples=0)
        assert res.to_frame()["ci_low"].isna().all()
        assert set(res.to_dict()) >= {"models", "matrix", "ci_low", "ci_high"}

    @pytest.mark.parametrize("kw,msg", [({"method": "kendall"}, "`method` must be one of 'pearson', 'spearman'"),
                                        ({"resample": "query"}, "`resample` must be one of 'cluster', 'tool'"),
                                        ({"n_resamples": -1}, "`n_resamples` must be a non-negative integer")])
    def test_bad_arguments(self, authors, kw, msg):
        with pytest.raises(ValueError, match=msg):
            model_alignment(authors, **kw)
