"""The experimental variants of the Bayesian model, moved out of the package in issue 38.

``toolbias_stats.models.fit_bayes`` fits only the variants we stand behind (``v1``, ``v2``); the query models of
issue 22's attempts (``cluster-position``, ``overdispersed``, ``thorough``, ``query-urn``, ``query-shared``,
``query-mixture``, ``query-mixture-id``), none of which passes its own checks on the vendored study
(``docs/bayes.md``, the attempt sections), live here, for the analyses that reproduce that record::

    import sys; sys.path.insert(0, "analyses")        # from the repository root (scripts in analyses/ need nothing)
    from bayes_experimental import fit_experimental
    res = fit_experimental(log, model="query-mixture", draws=300, tune=300, chains=2, sampler="pymc", rng=1)

``fit_experimental`` takes ``fit_bayes``'s arguments and returns a :class:`~toolbias_stats.models.BayesResult`;
it also fits the package's variants (the same as ``fit_bayes``). The four module switches of the query mixture
(``_MIXTURE_TIED``, ``_MIXTURE_FREE``, ``_MIXTURE_FREE_PRIOR``, ``_MIXTURE_POOLED``) and ``JAX_KERNEL`` are in
:mod:`bayes_experimental._variants`. The checks (formerly suite tests) are in ``checks/`` (see its README).
"""

from __future__ import annotations

import time

from ._model import ExperimentalSpec
from ._variants import ALL_PRIORS, ALL_VARIANTS, EXPERIMENTAL_PRIORS, EXPERIMENTAL_VARIANTS, MODEL_VARIANTS, MODELS

__all__ = ["fit_experimental", "ExperimentalSpec", "EXPERIMENTAL_VARIANTS", "EXPERIMENTAL_PRIORS", "ALL_VARIANTS",
           "ALL_PRIORS", "MODEL_VARIANTS", "MODELS"]


def fit_experimental(log, *, model="v2", by="model", draws=1000, tune=1000, chains=4, cores=None, sampler="auto",
                     parameterization="auto", target_accept=0.8, confidence_level=0.94, priors=None,
                     mismatch="exclude", rng=None, progress=False):
    """``fit_bayes`` for every variant, the experimental ones included (same arguments, same result type)."""
    from toolbias_stats.models.bayes._fit import _check_fit_bayes_args, _fit_variant

    t0 = time.perf_counter()
    args = _check_fit_bayes_args(model=model, by=by, draws=draws, tune=tune, chains=chains, cores=cores,
                                 sampler=sampler, parameterization=parameterization, target_accept=target_accept,
                                 hdi_prob=confidence_level, priors=priors, mismatch=mismatch, rng=rng,
                                 progress=progress, variants=ALL_VARIANTS, all_priors=ALL_PRIORS)
    v = args["priors"].get("eps_max")
    if v is not None and v > 1:
        raise ValueError(f"`priors['eps_max']` is a probability and must be at most 1; got {v!r} instead.")
    return _fit_variant(log, args, ALL_VARIANTS[model], ExperimentalSpec, t0)
