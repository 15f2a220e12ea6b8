"""Size of the "no change" permutation tests of selection_shift when the two levels have different numbers of runs.

Regression for issue 21: with unequal runs the permutation used to swap (paired) or re-allocate (independent) each
query's runs pooled into one block, so every permuted pair of levels had about equal sample sizes while the observed
pair did not; the permutation law was too narrow (per-tool size 8.4-8.8%, shift 21-24% at nominal 5%). A small version
of ``analyses/shift_pvalue_size.py`` (SIMULATED studies, no true change).
"""

import warnings

import numpy as np
import pytest

from toolbias_stats import SelectionLog
from toolbias_stats.experiments import selection_shift, simulate_conditions

C, K = 5, 5
PREFS = np.array([0.4, 0.25, 0.15, 0.12, 0.08])


def unequal_runs_study(gen, *, runs_base=1, runs_level=3, n_queries=40, design="paired", query_effect=0.0):
    """Both levels draw from the same chooser (no change); the base has ``runs_base`` runs, the level ``runs_level``."""
    prefs = np.stack([gen.permutation(PREFS) for _ in range(C)])
    log = simulate_conditions({"base": (prefs, None), "level": (prefs, None)}, n_queries=n_queries,
                              n_runs=max(runs_base, runs_level), query_effect=query_effect, rng=gen.integers(2**63))
    tab = log.to_frame()
    keep = (((tab["condition"] == "base") & (tab["run"] <= runs_base))
            | ((tab["condition"] == "level") & (tab["run"] <= runs_level)))
    tab = tab[keep].reset_index(drop=True)
    if design == "independent":
        tab["query_id"] = np.where(tab["condition"] == "level", "L" + tab["query_id"].astype(str), tab["query_id"])
    return SelectionLog.from_frame(tab, log.catalog, source="<simulated>")


def rejection_rates(n_studies, seed, **kw):
    """Share of per-tool and of shift_api p-values <= 0.05 over simulated studies without any change."""
    gen = np.random.default_rng(seed)
    tools, shift, method = [], [], set()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(n_studies):
            res = selection_shift(unequal_runs_study(gen, **kw).counts(), by=[], n_resamples=0, n_permutations=200,
                                  rng=gen.integers(2**63))
            tools.append(res.tools_frame()["p_value"].to_numpy())
            shift.append(res.groups[0].shift_api.p_value)
            method.add(res.groups[0].shift_api.null_method)
    return float(np.mean(np.concatenate(tools) <= 0.05)), float(np.mean(np.array(shift) <= 0.05)), method


@pytest.mark.parametrize("design, method", [("paired", "permute valid choices within query and list"),
                                            ("independent", "re-allocate queries (runs averaged)")])
def test_size_with_unequal_runs(design, method):
    # 30 studies x 25 tools; before the fix: per-tool 0.09-0.10, shift 0.2-0.3
    per_tool, shift, methods = rejection_rates(30, 21, design=design)
    assert methods == {method}
    assert per_tool <= 0.065
    assert shift <= 0.10


def test_equal_runs_permute_valid_choices_within_query():
    gen = np.random.default_rng(5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = selection_shift(unequal_runs_study(gen, runs_base=2, runs_level=2).counts(), by=[], n_resamples=0,
                              n_permutations=50, rng=1)
    assert res.groups[0].shift_api.null_method == "permute valid choices within query and list"


class TestDealWithinUnits:
    """Issue 35: a unit's valid choices are dealt to its slots, keeping every (unit, slot) count of valid choices."""

    def test_margins_are_kept_and_the_deal_is_hypergeometric(self):
        from scipy.stats import hypergeom

        from toolbias_stats.experiments._shift_group import deal_within_units

        # unit 0: slot 0 holds 3 of tool 0, slot 1 holds 1 of tool 1, slot 2 holds 2 of tool 2; unit 1: slot 0 only
        x = np.array([[[3, 0, 0], [0, 1, 0], [0, 0, 2]], [[1, 1, 0], [0, 0, 0], [0, 0, 0]]])
        out = deal_within_units(x, np.zeros(3, dtype=int), 20000, np.random.default_rng(0))
        np.testing.assert_array_equal(out.sum(-1), np.tile([5, 1, 2], (20000, 1)))     # slot sizes kept
        np.testing.assert_array_equal(out.sum(1), np.tile([4, 2, 2], (20000, 1)))      # choices kept
        # slot 2 (2 draws from unit 0's pool of 3 + 1 + 2): tool-0 count is hypergeometric(6, 3, 2); unit 1 stays
        law = hypergeom(6, 3, 2)
        freq = np.bincount(out[:, 2, 0].astype(int), minlength=3) / 20000
        np.testing.assert_allclose(freq, law.pmf(np.arange(3)), atol=0.01)

    def test_choices_never_move_between_strata(self):
        from toolbias_stats.experiments._shift_group import deal_within_units

        x = np.array([[[2, 0], [0, 2], [1, 0], [0, 1]]])
        out = deal_within_units(x, np.array([0, 1, 0, 1]), 2000, np.random.default_rng(1))
        np.testing.assert_array_equal(out[:, 0] + out[:, 2], np.tile([3, 0], (2000, 1)))
        np.testing.assert_array_equal(out[:, 1] + out[:, 3], np.tile([0, 3], (2000, 1)))


# ------------------------------------------------------------------------------------------------
# the report's per-tool highlight (issue 21): only a rise that survives Holm across levels x clusters x tools
def no_change_sweep(gen, n_queries=40):
    """A numeric sweep (temperature 0 -> 1) on 5 clusters x 5 tools = 25 tools, same chooser at both levels."""
    prefs = np.stack([gen.permutation(PREFS) for _ in range(C)])
    return simulate_conditions({0.0: (prefs, None), 1.0: (prefs, None)}, n_queries=n_queries, column="temperature",
                               rng=gen.integers(2**63))


def highlighted(res):
    from toolbias_stats.report._experiments_html import render_experiments_section

    return "tool shares across temperature" in render_experiments_section([res])


def highlights_a_tool(res):
    """The report's decision without drawing the section's figures (most of its time): the section draws the
    highlighted tool's shares exactly when the sweep has trends and ``tool_highlight`` finds a tool."""
    from toolbias_stats.report._experiments_html import tool_highlight

    return bool(res.numeric and res.trends) and tool_highlight(res)[0] is not None


def test_report_highlights_no_tool_when_nothing_changed():
    # before the fix the report highlighted the largest rise whenever its unadjusted interval excluded 0:
    # 14 of these 30 studies (about 45% in analyses/shift_pvalue_size.py)
    gen = np.random.default_rng(26)
    hits = 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(30):
            res = selection_shift(no_change_sweep(gen).counts(), between="temperature", base=0.0, by=[],
                                  n_resamples=100, n_permutations=2000, rng=gen.integers(2**63))
            hits += highlights_a_tool(res)
    assert hits <= 3


def test_report_still_highlights_a_real_rise():
    gen = np.random.default_rng(3)
    prefs = np.stack([gen.permutation(PREFS) for _ in range(C)])
    risen = prefs.copy()
    risen[2] = [0.05, 0.05, 0.05, 0.05, 0.8]                     # cluster 3: the last tool takes over
    log = simulate_conditions({0.0: (prefs, None), 1.0: (risen, None)}, n_queries=40, column="temperature", rng=4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = selection_shift(log.counts(), between="temperature", base=0.0, by=[], n_resamples=100,
                              n_permutations=2000, rng=5)
    tf = res.tools_frame()
    assert {"p_adjusted", "p_adjusted_bh", "significant"} <= set(tf.columns)
    top = tf.loc[tf["difference"].idxmax()]
    assert top["cluster"] == "3" and top["significant"] and highlighted(res) and highlights_a_tool(res)
    d = res.to_dict()["groups"][0]["tools"]
    assert sum(t["significant"] for t in d) == int(tf["significant"].sum())


def test_per_tool_adjustment_is_statsmodels_over_every_level_cluster_and_tool():
    from statsmodels.stats.multitest import multipletests

    gen = np.random.default_rng(8)
    prefs = np.stack([gen.permutation(PREFS) for _ in range(C)])
    log = simulate_conditions({"base": (prefs, None), "a": (prefs, None), "b": (prefs[:, ::-1], None)},
                              n_queries=20, rng=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = selection_shift(log.counts(), by=[], n_resamples=0, n_permutations=300, rng=1)
    tf = res.tools_frame()
    assert len(tf) == 2 * C * K
    np.testing.assert_allclose(tf["p_adjusted"], multipletests(tf["p_value"], method="holm")[1])
    np.testing.assert_allclose(tf["p_adjusted_bh"], multipletests(tf["p_value"], method="fdr_bh")[1])
    np.testing.assert_array_equal(tf["significant"], tf["p_adjusted"] <= 0.05)
    # the levels x metrics family is unchanged by the per-tool one
    f = res.to_frame()
    np.testing.assert_allclose(f["p_adjusted"], multipletests(f["p_value"], method="holm")[1])


def test_example_study_highlights_the_exposed_endpoint_with_the_default_permutations():
    import toolbias_stats as tbs
    from toolbias_stats.report._experiments_html import tool_highlight

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        study = tbs.read_study(tbs.datasets.path("experiments/study.toml"))
        res = selection_shift(study, between="epoch", base=0, by="model", n_resamples=100, n_permutations=2000, rng=1)
    best, n_tests = tool_highlight(res)
    assert n_tests == 15 and best["tool_id"].startswith("v1_textlanguage") and best["p_adjusted"] <= 0.05
