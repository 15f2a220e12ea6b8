"""Intervals of variance-component contributions: a difference of mean squares (e.g. the run component,
(MS_run - MS_query_x_run) / (Q R)) with few degrees of freedom.

Satterthwaite's chi-square interval gives such a difference a fraction of a degree of freedom when the estimate is
small against its terms, and an upper bound of 1e20 and more (seen on the vendored study). The modified
large-sample interval of Ting, Burdick, Graybill, Jeyaratnam & Lu (1990) (Burdick & Graybill 1992, sec. 3.3) keeps
the coverage and stays finite. Checked here on mean squares drawn from their exact laws, MS_i ~ E_i chi2(df_i) / df_i.
"""

import numpy as np
import pytest

from toolbias_stats.design._components import _component_interval


def _simulate(e_pos, df_pos, e_neg, df_neg, scale, n_sims, gen, df_cap=None):
    theta = scale * (e_pos - e_neg)
    cover, highs = 0, []
    for _ in range(n_sims):
        ms_p = e_pos * gen.chisquare(df_pos) / df_pos
        ms_n = e_neg * gen.chisquare(df_neg) / df_neg
        lo, hi = _component_interval([(scale, ms_p, df_pos), (-scale, ms_n, df_neg)], 0.05, df_cap=df_cap)
        assert 0 <= lo <= hi
        cover += lo <= theta <= hi
        highs.append(hi / (scale * e_pos))
    return cover / n_sims, np.median(highs), np.max(highs)


@pytest.mark.parametrize("e_pos, e_neg", [(1.2, 1.0), (2.0, 1.0), (1.05, 1.0)])
def test_run_component_interval_covers_and_stays_finite(e_pos, e_neg):
    # 3 runs (2 df) against a query x run mean square with 198 df: the run component of the vendored study
    gen = np.random.default_rng(1)
    cover, med_high, max_high = _simulate(e_pos, 2, e_neg, 198, 1 / 500, 2000, gen, df_cap=2)
    assert cover >= 0.93, cover
    # the upper bound is a modest multiple of the positive mean square's expectation (the chi-square interval of
    # the positive mean square alone, 2 df: up to 40 x the largest of 2000 chi2(2) / 2 draws, about 250)
    assert max_high < 1000, max_high
    assert med_high < 60, med_high


def test_positive_only_is_the_chi_square_interval():
    lo, hi = _component_interval([(0.5, 2.0, 10)], 0.05)
    from scipy import stats

    assert lo == pytest.approx(0.5 * 2.0 * 10 / stats.chi2.ppf(0.975, 10))
    assert hi == pytest.approx(0.5 * 2.0 * 10 / stats.chi2.ppf(0.025, 10))


def test_well_determined_difference_keeps_its_coverage():
    gen = np.random.default_rng(2)
    cover, _, _ = _simulate(3.0, 40, 1.0, 400, 1.0, 2000, gen)
    assert 0.93 <= cover <= 0.975, cover
