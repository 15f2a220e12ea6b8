"""Constants, model variants and small helpers shared by the pieces of the Bayesian model."""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

import numpy as np
import pandas as pd

#: Sampler back-ends accepted by :func:`fit_bayes` (see ``docs/bayes.md`` for their timings).
SAMPLERS = ("auto", "pymc", "pymc-numba", "nutpie", "numpyro")
#: Parameterisations of the hierarchy (the same model; they differ only in sampling geometry).
PARAMETERIZATIONS = ("auto", "centered", "noncentered")
#: How to treat BiasBusters-style records whose recorded position disagrees with the ordering.
MISMATCH_POLICIES = ("exclude", "tool", "position")

#: Convergence thresholds: a fit beyond any of them is flagged (warning, JSON, report).
RHAT_MAX = 1.01
ESS_MIN = 400

#: Prior scales of the main-effects (v1) part, logit scale. Reasons: ``docs/bayes.md``.
DEFAULT_PRIORS = {"mu_sd": 1.5, "sigma_alpha_sd": 1.0, "beta_bar_sd": 1.0, "sigma_beta_sd": 1.0}
#: Priors of the extensions (used only by the variants that have the term):
#: ``sigma_delta_sd`` the HalfNormal scale of the per-(LLM, cluster) position deviations,
#: ``sigma_eta_sd`` the HalfNormal scale of the query effects, ``rho_a``/``rho_b`` the Beta prior of
#: the intra-prompt correlation rho = 1 / (1 + kappa) of the Dirichlet-multinomial, ``lambda_sd`` the
#: HalfNormal scale of the boost ``lambda[m]`` of a query's needed tool and ``eps_max`` the largest share
#: ``epsilon[m, c]`` of queries that need a tool (``model="query-mixture"``; ``epsilon = eps_max * expit(t)``;
#: 1 = unbounded, the default: bounding it at 0.5 made the chains split, docs/bayes.md).
EXTENSION_PRIORS = {"sigma_delta_sd": 1.0, "sigma_eta_sd": 1.0, "rho_a": 1.0, "rho_b": 1.0, "lambda_sd": 3.0,
                    "eps_max": 1.0}
ALL_PRIORS = {**DEFAULT_PRIORS, **EXTENSION_PRIORS}


@dataclass(frozen=True)
class ModelVariant:
    """One named variant of the model: which terms it adds to the main effects.

    Attributes
    ----------
    name : str
    cluster_position : bool
        (a) per-(LLM, cluster) position deviations ``delta[m, c, :]``.
    dirichlet : bool
        (b) a Dirichlet-multinomial likelihood per prompt (LLM, cluster, query, ordering) over its
        repeated attempts (runs), with concentration ``kappa[m, c]`` per (LLM, cluster).
    query_effects : bool
        Query random effects ``eta[m, c, q, :]`` on the tools, shared by all orderings and runs of
        a query.
    description : str
    query_urn : bool, default False
        (d) the Dirichlet-multinomial's urn runs over all of a query's attempts (every ordering and
        run) instead of one prompt's runs: an attempt picks the tool of an earlier attempt of the same
        query with probability ``i / (kappa + i)``, else draws from the position-adjusted chooser of
        its own ordering; experimental, not the default (``docs/bayes.md``, "The query-level urn").
    shared_queries : bool, default False
        The query effects are one latent vector per query shared by every LLM that was shown the same
        query (same cluster and ``query_id``), scaled per LLM: ``eta[m, c, q, :] = sigma_eta[m] *
        z[c, q, :]`` (a query that "needs" a tool needs it for every LLM; far fewer latent effects).
    query_mixture : bool, default False
        Query heterogeneity as a finite mixture summed out analytically: a query of (LLM ``m``, cluster
        ``c``) is indifferent (probability ``1 - epsilon[m, c]``) or needs tool ``j`` (probability
        ``epsilon[m, c] / K``), which adds ``lambda[m]`` to that tool's logit in all its orderings and
        runs; ``logit epsilon[m, c]`` is partially pooled; no latent effect is sampled.
    tool_effects : bool, default True
        The chooser has tool effects ``alpha[m, c, :]`` (pooled around ``mu``). False (only with
        ``query_mixture``): the indifferent class chooses by position alone and a tool's popularity is
        carried by the class weights (identified: ``docs/bayes.md``, "Fifth attempt").
    free_class_weights : bool, default False
        The query mixture's class weights are free per (LLM, cluster), ``w[m, c, :] ~ Dirichlet(1, ..., 1)``
        over the K + 1 classes, instead of ``1 - epsilon, epsilon / K, ...``.
    boost_per_cell : bool, default False
        The query mixture's boost of a needed tool is ``lambda[m, c]`` per (LLM, cluster) instead of
        ``lambda[m]`` per LLM.
    """

    name: str
    cluster_position: bool
    dirichlet: bool
    query_effects: bool
    description: str
    query_urn: bool = False
    shared_queries: bool = False
    query_mixture: bool = False
    tool_effects: bool = True
    free_class_weights: bool = False
    boost_per_cell: bool = False

    @property
    def needs_queries(self) -> bool:
        """Whether the variant needs the query of each attempt (the row-level log, not only counts)."""
        return self.dirichlet or self.query_effects

    def priors(self) -> tuple:
        keys = list(DEFAULT_PRIORS) if self.tool_effects else ["beta_bar_sd", "sigma_beta_sd"]
        if self.cluster_position:
            keys.append("sigma_delta_sd")
        if self.query_effects:
            keys.append("sigma_eta_sd")
        if self.dirichlet:
            keys += ["rho_a", "rho_b"]
        if self.query_mixture:
            keys += ["lambda_sd"] if self.free_class_weights else ["lambda_sd", "eps_max"]
        return tuple(keys)


#: The named variants of ``fit_bayes(..., model=...)``.
MODEL_VARIANTS = {
    "v1": ModelVariant("v1", False, False, False,
                       "main effects: softmax(alpha[llm, cluster, tool] + beta[llm, position]), one multinomial per "
                       "(LLM, cluster, ordering)"),
    "cluster-position": ModelVariant("cluster-position", True, False, False,
                                     "main effects + per-(LLM, cluster) position deviations delta[llm, cluster, "
                                     "position]"),
    "overdispersed": ModelVariant("overdispersed", False, True, True,
                                  "main effects + query effects eta[llm, cluster, query, tool] shared by a query's "
                                  "orderings + a Dirichlet-multinomial per prompt (LLM, cluster, query, ordering) "
                                  "over its runs"),
    "v2": ModelVariant("v2", True, True, False,
                       "main effects + per-(LLM, cluster) position deviations + a Dirichlet-multinomial per prompt "
                       "(LLM, cluster, query, ordering) over its runs"),
    "thorough": ModelVariant("thorough", True, True, True,
                             "v2 + query effects eta[llm, cluster, query, tool] shared by all orderings and runs "
                             "of a query"),
    "query-urn": ModelVariant("query-urn", True, True, False,
                              "main effects + per-(LLM, cluster) position deviations + a query-level Polya urn over "
                              "all orderings and runs of a query (an attempt copies an earlier attempt's tool, those "
                              "of other orderings weighted gamma, or draws from its ordering's chooser); "
                              "experimental", query_urn=True),
    "query-shared": ModelVariant("query-shared", True, True, True,
                                 "v2 + query effects shared by the LLMs: eta[llm, cluster, query, tool] = "
                                 "sigma_eta[llm] * z[cluster, query, tool], one latent vector per query for all LLMs",
                                 shared_queries=True),
    "query-mixture": ModelVariant("query-mixture", True, True, False,
                                  "v2 + query heterogeneity summed out: a query is indifferent or needs one tool "
                                  "(probability epsilon[llm, cluster] / K each), whose logit then gets "
                                  "+lambda[llm] in all its orderings and runs; experimental", query_mixture=True),
    "query-mixture-id": ModelVariant("query-mixture-id", True, True, False,
                                     "per-(LLM, cluster) position effects + a Dirichlet-multinomial per prompt + "
                                     "query classes summed out: a query is indifferent (chooses by position alone) "
                                     "or needs tool j (+lambda[llm, cluster] on its logit), with free class weights "
                                     "w[llm, cluster, :] that carry the tools' popularity (no tool effects alpha: "
                                     "identified); experimental", query_mixture=True, tool_effects=False,
                                     free_class_weights=True, boost_per_cell=True),
}
#: Names accepted by ``model=``.
MODELS = tuple(MODEL_VARIANTS)
#: The variant ``fit_bayes`` fits unless told otherwise (chosen by the evidence in docs/bayes.md).
DEFAULT_MODEL = "v2"

#: The query mixture's class weights: ``epsilon * softmax(alpha)[j]`` (True) or ``epsilon / K`` (False).
_MIXTURE_TIED = False
#: The query mixture's class weights free per (LLM, cluster): Dirichlet(1, ..., 1) over the K + 1 classes
#: (True; experimental, docs/bayes.md) instead of ``1 - epsilon, epsilon / K, ...`` (False).
_MIXTURE_FREE = False
#: Experimental prior of the free class weights (sixth attempt, docs/bayes.md): None = Dirichlet(1, ..., 1)
#: (unchanged); ``(b1, b0, a)``: ``epsilon = 1 - w_0 ~ Beta(b1, b0)`` and the needed tools' shares
#: ``w_j / epsilon ~ Dirichlet(a, ..., a)``, independent (Dirichlet(1) is ``(K, 1, 1)``).
_MIXTURE_FREE_PRIOR: tuple | None = None
#: The query mixture's epsilon[m, c]: partially pooled on the logit scale (True) or Uniform(0, 1) each.
_MIXTURE_POOLED = True

_NEG = -1.0e4  # logit of a padded (not shown) position: exp(-1e4) == 0 in float64
_SHARED = "(shared)"


# ---------------------------------------------------------------------------------------------
def _zerosum_extend(x, xp):
    """PyMC's zero-sum basis: K-1 free coordinates -> a vector that sums to zero (orthonormal map)."""
    n = x.shape[-1] + 1
    s = x.sum(-1, keepdims=True)
    norm = s / (np.sqrt(n) + n)
    fill = norm - s / np.sqrt(n)
    return xp.concatenate([x, fill], axis=-1) - norm


def _basis(k):
    """(k-1, k) orthonormal rows spanning the zero-sum vectors (PyMC's ZeroSumNormal basis)."""
    return _zerosum_extend(np.eye(k - 1), np)


def _hdi(samples, prob):
    """Highest-density interval along axis 0 of ``samples`` (S, ...) -> (low, high) arrays."""
    x = np.sort(np.asarray(samples, dtype=float), axis=0)
    n = x.shape[0]
    width = max(int(math.floor(prob * n)), 1)
    if width >= n:
        return x[0], x[-1]
    gaps = x[width:] - x[: n - width]
    i = np.nanargmin(np.where(np.isnan(gaps), np.inf, gaps), axis=0)
    lo = np.take_along_axis(x, i[None], 0)[0]
    hi = np.take_along_axis(x, (i + width)[None], 0)[0]
    return lo, hi


def _summ(samples, prob) -> dict:
    s = np.asarray(samples, dtype=float)
    lo, hi = _hdi(s, prob)
    return {"mean": s.mean(0), "sd": s.std(0, ddof=1), "hdi_low": lo, "hdi_high": hi}


def _softmax_masked(logits, mask):
    z = np.where(mask, logits, -np.inf)
    z = z - z.max(-1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(-1, keepdims=True)


def _summary_dict(r) -> dict:
    if isinstance(r, pd.DataFrame):
        if r.empty:
            return {"mean": None, "sd": None, "hdi": [None, None]}
        r = next(r.itertuples())
    return {"mean": _num(r.mean), "sd": _num(r.sd), "hdi": [_num(r.hdi_low), _num(r.hdi_high)]}


def _records(df: pd.DataFrame) -> list:
    return [{k: _num(v) for k, v in rec.items()} for rec in df.to_dict(orient="records")]


def _num(v):
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    if isinstance(v, (numbers.Integral, np.integer)):
        return int(v)
    if isinstance(v, (numbers.Real, np.floating)):
        return None if not np.isfinite(v) else float(v)
    return v


def _natural(x):
    return (0, int(x), "") if str(x).isdigit() else (1, 0, str(x))
