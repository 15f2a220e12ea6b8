"""Tests of the query-level urn variant ``model="query-urn"``: its likelihood against an attempt-by-attempt
computation and scipy, its simulator, its replications, and a recovery check on simulated data."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from bayes_experimental import MODEL_VARIANTS
from bayes_experimental import fit_experimental as fit_bayes
from bayes_experimental._model import ExperimentalSpec as _ModelSpec
from bayes_experimental._model import _urn_order, _urn_terms
from toolbias_stats.models import simulate_bayes_log
from toolbias_stats.models.bayes._design import _attach_prompts, _design

ALPHA = np.array([[[1.2, 0.0, -1.2], [0.0, 0.8, -0.8]],
                  [[1.0, 0.2, -1.2], [-0.6, 1.0, -0.4]]])
BETA_CELL = np.array([[[1.2, 0.0, -1.2], [0.4, 0.1, -0.5]],
                      [[0.8, 0.1, -0.9], [0.2, 0.2, -0.4]]])
KAPPA = np.array([1.5, 6.0])
GAMMA = 0.4
FAST = dict(draws=300, tune=300, chains=2, cores=1, sampler="pymc")


def _quiet(fn, *a, **k):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(*a, **k)


@pytest.fixture(scope="module")
def urn_log():
    return simulate_bayes_log(ALPHA, BETA_CELL, queries=60, runs=3, kappa=KAPPA, kappa_level="query", gamma=GAMMA,
                               rng=11)


@pytest.fixture(scope="module")
def urn_fit(urn_log):
    return _quiet(fit_bayes, urn_log, model="query-urn", rng=4, **FAST)


def _design_of(log):
    return _attach_prompts(_design(log.counts(), ["model"], "exclude"), log, ["model"], "exclude")


def _brute_force_query_loglik(D, alpha, beta_cell, kappa, gamma):
    """Attempt by attempt, in the urn's order: log(kappa p + c_same + gamma c_other) - log(kappa + n_same
    + gamma n_other), plus the prompts' multinomial coefficients (the runs of one prompt are exchangeable)."""
    from scipy.special import gammaln

    pr = D.prompts
    out = np.zeros(pr.Q)
    seen = {}
    for u in _urn_order(pr):
        q, r = pr.query[u], pr.row[u]
        m, c = D.row_llm[r], D.row_cluster[r]
        shown = D.row_tools[r] >= 0
        tools = D.row_tools[r][shown]
        logits = alpha[m, c, tools] + beta_cell[m, c][shown]
        prob = np.exp(logits - logits.max())
        prob /= prob.sum()
        other = seen.setdefault(q, {})                        # earlier prompts of the query, per tool
        same = {}
        y = pr.y[u][shown].astype(int)
        out[q] += gammaln(y.sum() + 1) - gammaln(y + 1).sum()
        k, g = kappa[m, c], gamma[m, c]
        for pos in range(len(tools)):
            for _ in range(y[pos]):
                t = tools[pos]
                out[q] += (np.log(k * prob[pos] + same.get(t, 0) + g * other.get(t, 0))
                           - np.log(k + sum(same.values()) + g * sum(other.values())))
                same[t] = same.get(t, 0) + 1
        for t, v in same.items():
            other[t] = other.get(t, 0) + v
    return out


class TestUrnLikelihood:
    def test_variant_is_registered(self):
        v = MODEL_VARIANTS["query-urn"]
        assert v.query_urn and v.dirichlet and v.cluster_position and not v.query_effects
        assert not getattr(MODEL_VARIANTS["v2"], "query_urn", False)      # the package's v2 has no such flag

    def test_terms_by_hand(self):
        """Two prompts of one query: c counts the earlier attempts of the same query with the same tool."""
        from toolbias_stats.models.bayes._design import _Prompts

        pr = _Prompts(row=np.array([1, 0]), query=np.array([0, 0]), y=np.array([[0, 2], [1, 1]]),
                      query_llm=np.array([0]), query_cluster=np.array([0]), query_ids=["q"])
        row_tools = np.array([[0, 1], [1, 0]])                    # row 0 shows (t0, t1), row 1 (t1, t0)
        (u, p, cs, co), (ud, ns, no) = _urn_terms(pr, row_tools)
        # urn order: prompt 1 (row 0) first: t0 once, t1 once (nothing earlier); then prompt 0 (row 1):
        # t0 (its position 2) twice, after 0 and 1 same-prompt picks of t0 and 1 earlier pick in the query
        got = sorted(zip(u.tolist(), p.tolist(), cs.tolist(), co.tolist()))
        assert got == [(0, 1, 0, 1), (0, 1, 1, 1), (1, 0, 0, 0), (1, 1, 0, 0)]
        den = sorted(zip(ud.tolist(), ns.tolist(), no.tolist()))
        assert den == [(0, 0, 2), (0, 1, 2), (1, 0, 0), (1, 1, 0)]

    def test_query_loglik_against_attempt_by_attempt(self, urn_fit):
        """The LOO unit (all attempts of a query) equals a plain loop over attempts at three draws."""
        from toolbias_stats.models.bayes._compare import query_loglik

        ll = query_loglik(urn_fit).values.reshape(-1, urn_fit._spec.design.prompts.Q)
        D, post = urn_fit._spec.design, urn_fit._post
        for s in (0, 11, ll.shape[0] - 1):
            expected = _brute_force_query_loglik(D, post["alpha"][s], post["beta_cell"][s], post["kappa"][s],
                                                 post["gamma"][s])
            np.testing.assert_allclose(ll[s], expected, rtol=1e-9, atol=1e-9)

    def test_one_ordering_per_query_is_the_dirichlet_multinomial(self):
        """With a single ordering the urn is the prompt-level Dirichlet-multinomial (scipy)."""
        from scipy.stats import dirichlet_multinomial

        log = simulate_bayes_log(ALPHA[:1, :1], BETA_CELL[:1, :1], queries=15, runs=4, orderings="fixed",
                                  kappa=2.0, kappa_level="query", rng=3)
        D = _design_of(log)
        alpha = np.array([[[0.3, -0.1, -0.2]]])
        beta = np.array([[[0.5, 0.0, -0.5]]])
        got = _brute_force_query_loglik(D, alpha, beta, np.array([[2.0]]), np.array([[0.4]]))
        logits = alpha[0, 0, D.row_tools[0]] + beta[0, 0]
        prob = np.exp(logits) / np.exp(logits).sum()
        pr = D.prompts
        want = np.array([dirichlet_multinomial.logpmf(pr.y[u].astype(int), 2.0 * prob, pr.n[u]) for u in range(pr.Q)])
        np.testing.assert_allclose(got[pr.query], want, rtol=1e-10)

    def test_model_sufficient_statistics_match_the_terms(self, urn_log):
        D = _design_of(urn_log)
        spec = _ModelSpec(D, {}, "centered", MODEL_VARIANTS["query-urn"])
        n_attempts = D.prompts.y.sum()
        assert spec.urn_num_w.sum() == n_attempts                  # one numerator term per attempt
        assert spec.urn_den_w.sum() == n_attempts                  # one normaliser term per attempt
        assert spec.urn_den[:, 2].max() == 6                       # at most 2 earlier orderings x 3 runs


class TestSimulator:
    def test_query_urn_correlates_a_query_across_orderings(self):
        """Small kappa: a query keeps its tool whatever the order; large kappa: independent attempts."""
        a = np.zeros((1, 1, 3))
        b = np.zeros((1, 3))
        agree = []
        for kap in (0.05, 1e6):
            log = simulate_bayes_log(a, b, queries=200, runs=2, kappa=kap, kappa_level="query", rng=1)
            d = log.data
            agree.append(d.groupby("query_id")["chosen_tool"].nunique().eq(1).mean())
        assert agree[0] > 0.9 and agree[1] < 0.05

    def test_bad_level(self):
        with pytest.raises(ValueError, match="`kappa_level` must be 'prompt' or 'query'"):
            simulate_bayes_log(ALPHA, BETA_CELL, queries=2, kappa=1.0, kappa_level="cluster")


class TestFit:
    def test_recovers_kappa_and_effects(self, urn_fit):
        res = urn_fit
        # short chains on 240 queries: a rough convergence check (divergences, if any, are flagged)
        assert res.model == "query-urn" and res.diagnostics.max_rhat < 1.05
        assert (res.diagnostics.divergences == 0) == (not any("divergent" in f for f in res.diagnostics.flags))
        for name, truth in (("kappa", KAPPA[:, None]), ("gamma", np.full((2, 1), GAMMA))):   # kappa per LLM
            lo, hi = np.quantile(res._post[name], [0.005, 0.995], axis=0)
            assert np.all((lo < truth) & (truth < hi)), name
        assert set(res.scales["quantity"]) >= {"kappa", "rho", "gamma"}
        bc = res._post["beta_cell"].mean(0)[..., :3]
        truth = BETA_CELL - BETA_CELL.mean(-1, keepdims=True)
        assert np.abs(bc - truth).max() < 0.35

    def test_dispersion_check_passes_on_its_own_data(self, urn_fit):
        assert 0.02 < urn_fit.ppc.p_value_dispersion < 0.98
        assert 0.02 < urn_fit.ppc.p_value < 0.98
