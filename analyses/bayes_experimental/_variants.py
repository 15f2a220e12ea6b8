"""The experimental variants of the Bayesian model (issue 22's attempts; moved out of the package in issue 38).

None of them passes its own checks on the vendored study (``docs/bayes.md``, the attempt sections), so the
package (``toolbias_stats.models.bayes``) keeps only ``v1`` and ``v2``; these live here, for the analyses that
reproduce the record. They extend the package's private model (:class:`ModelVariant`, ``_ModelSpec``).
"""

from __future__ import annotations

from dataclasses import dataclass

from toolbias_stats.models.bayes import _result
from toolbias_stats.models.bayes._common import ALL_PRIORS as _PACKAGE_PRIORS
from toolbias_stats.models.bayes._common import MODEL_VARIANTS as _PACKAGE_VARIANTS
from toolbias_stats.models.bayes._common import ModelVariant

#: Priors only the experimental variants use: ``lambda_sd`` the HalfNormal scale of the boost ``lambda[m]`` of a
#: query's needed tool and ``eps_max`` the largest share ``epsilon[m, c]`` of queries that need a tool
#: (``model="query-mixture"``; ``epsilon = eps_max * expit(t)``; 1 = unbounded, the default: bounding it at 0.5
#: made the chains split, docs/bayes.md).
EXPERIMENTAL_PRIORS = {"lambda_sd": 3.0, "eps_max": 1.0}
ALL_PRIORS = {**_PACKAGE_PRIORS, **EXPERIMENTAL_PRIORS}

# ---- the four switches of the query mixture's attempts (module level; monkeypatch them in analyses) -----------
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
#: the query mixture's class sums as one JAX function under NumPyro (False: PyTensor's graph everywhere)
JAX_KERNEL = True


@dataclass(frozen=True)
class ExperimentalVariant(ModelVariant):
    """A variant with the experimental terms (the package's :class:`ModelVariant` plus these flags).

    Attributes
    ----------
    query_urn : bool, default False
        (d) the Dirichlet-multinomial's urn runs over all of a query's attempts (every ordering and
        run) instead of one prompt's runs: an attempt picks the tool of an earlier attempt of the same
        query with probability ``i / (kappa + i)``, else draws from the position-adjusted chooser of
        its own ordering (``docs/bayes.md``, "The query-level urn").
    shared_queries : bool, default False
        The query effects are one latent vector per query shared by every LLM that was shown the same
        query (same cluster and ``query_id``), scaled per LLM: ``eta[m, c, q, :] = sigma_eta[m] *
        z[c, q, :]``.
    query_mixture : bool, default False
        Query heterogeneity as a finite mixture summed out analytically: a query of (LLM ``m``, cluster
        ``c``) is indifferent (probability ``1 - epsilon[m, c]``) or needs tool ``j`` (probability
        ``epsilon[m, c] / K``), which adds ``lambda[m]`` to that tool's logit in all its orderings and
        runs; ``logit epsilon[m, c]`` is partially pooled; no latent effect is sampled.
    tool_effects : bool, default True
        The chooser has tool effects ``alpha[m, c, :]``. False (only with ``query_mixture``): the
        indifferent class chooses by position alone and a tool's popularity is carried by the class weights.
    free_class_weights : bool, default False
        The query mixture's class weights are free per (LLM, cluster), ``w[m, c, :] ~ Dirichlet(1, ..., 1)``.
    boost_per_cell : bool, default False
        The query mixture's boost of a needed tool is ``lambda[m, c]`` per (LLM, cluster) instead of ``lambda[m]``.
    """

    query_urn: bool = False
    shared_queries: bool = False
    query_mixture: bool = False
    tool_effects: bool = True
    free_class_weights: bool = False
    boost_per_cell: bool = False

    def priors(self) -> tuple:
        keys = list(super().priors())
        if not self.tool_effects:
            keys = [k for k in keys if k not in ("mu_sd", "sigma_alpha_sd")]
        if self.query_mixture:
            keys += ["lambda_sd"] if self.free_class_weights else ["lambda_sd", "eps_max"]
        return tuple(keys)


#: The experimental variants (``fit_experimental(..., model=...)``); names as they were in the package.
EXPERIMENTAL_VARIANTS = {
    "cluster-position": ExperimentalVariant("cluster-position", True, False, False,
                                            "main effects + per-(LLM, cluster) position deviations delta[llm, "
                                            "cluster, position]"),
    "overdispersed": ExperimentalVariant("overdispersed", False, True, True,
                                         "main effects + query effects eta[llm, cluster, query, tool] shared by a "
                                         "query's orderings + a Dirichlet-multinomial per prompt (LLM, cluster, "
                                         "query, ordering) over its runs"),
    "thorough": ExperimentalVariant("thorough", True, True, True,
                                    "v2 + query effects eta[llm, cluster, query, tool] shared by all orderings and "
                                    "runs of a query"),
    "query-urn": ExperimentalVariant("query-urn", True, True, False,
                                     "main effects + per-(LLM, cluster) position deviations + a query-level Polya "
                                     "urn over all orderings and runs of a query (an attempt copies an earlier "
                                     "attempt's tool, those of other orderings weighted gamma, or draws from its "
                                     "ordering's chooser); experimental", query_urn=True),
    "query-shared": ExperimentalVariant("query-shared", True, True, True,
                                        "v2 + query effects shared by the LLMs: eta[llm, cluster, query, tool] = "
                                        "sigma_eta[llm] * z[cluster, query, tool], one latent vector per query for "
                                        "all LLMs", shared_queries=True),
    "query-mixture": ExperimentalVariant("query-mixture", True, True, False,
                                         "v2 + query heterogeneity summed out: a query is indifferent or needs one "
                                         "tool (probability epsilon[llm, cluster] / K each), whose logit then gets "
                                         "+lambda[llm] in all its orderings and runs; experimental",
                                         query_mixture=True),
    "query-mixture-id": ExperimentalVariant("query-mixture-id", True, True, False,
                                            "per-(LLM, cluster) position effects + a Dirichlet-multinomial per prompt "
                                            "+ query classes summed out: a query is indifferent (chooses by position "
                                            "alone) or needs tool j (+lambda[llm, cluster] on its logit), with free "
                                            "class weights w[llm, cluster, :] that carry the tools' popularity (no "
                                            "tool effects alpha: identified); experimental", query_mixture=True,
                                            tool_effects=False, free_class_weights=True, boost_per_cell=True),
}
#: Every variant a script can fit: the package's (v1, v2, ...) and the experimental ones.
ALL_VARIANTS = {**{k: v for k, v in _PACKAGE_VARIANTS.items() if not v.margin},  # the margin model: fit_bayes only
                **EXPERIMENTAL_VARIANTS}
#: The old name of the registry (the checks and scripts index it by variant name).
MODEL_VARIANTS = ALL_VARIANTS
MODELS = tuple(ALL_VARIANTS)

# the result's one-line formula of each experimental variant (BayesResult.to_json()["model"])
_result._MODEL_TEXT.update({
    "cluster-position": "hierarchical multinomial logit: softmax(alpha[llm, cluster, tool] + beta[llm, position] "
                        "+ delta[llm, cluster, position])",
    "overdispersed": "hierarchical logit: softmax(alpha[llm, cluster, tool] + beta[llm, position] + eta[llm, cluster, "
                     "query, tool]), Dirichlet-multinomial per (llm, cluster, query, ordering)",
    "thorough": "hierarchical logit: softmax(alpha[llm, cluster, tool] + beta[llm, position] + delta[llm, cluster, "
                "position] + eta[llm, cluster, query, tool]), Dirichlet-multinomial per (llm, cluster, query, "
                "ordering)",
    "query-shared": "hierarchical logit: softmax(alpha[llm, cluster, tool] + beta[llm, position] + delta[llm, "
                    "cluster, position] + sigma_eta[llm] * z[cluster, query, tool]) with the query effects z shared "
                    "by the LLMs, Dirichlet-multinomial per (llm, cluster, query, ordering)",
    "query-mixture": "hierarchical logit: softmax(alpha[llm, cluster, tool] + beta[llm, position] + delta[llm, "
                     "cluster, position] + lambda[llm] * 1(tool = the tool the query needs)), the query indifferent "
                     "with probability 1 - epsilon[llm, cluster] (classes summed out), Dirichlet-multinomial per "
                     "(llm, cluster, query, ordering)",
    "query-mixture-id": "position-only logit: softmax(beta[llm, position] + delta[llm, cluster, position] + "
                        "lambda[llm, cluster] * 1(tool = the tool the query needs)), a query indifferent or needing "
                        "tool j with free class weights w[llm, cluster, :] (classes summed out), "
                        "Dirichlet-multinomial per (llm, cluster, query, ordering)",
})
