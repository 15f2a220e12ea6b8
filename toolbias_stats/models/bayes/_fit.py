"""``fit_bayes``: argument checks, the fit, and the summaries that make a :class:`BayesResult`."""

from __future__ import annotations

import dataclasses
import math
import numbers
import os
import time
import warnings
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from ...io import SelectionCounts, SelectionLog

import numpy as np
import pandas as pd

from ..._validation import check_choice, check_rng, renamed_parameter
from ...exceptions import DegenerateDataWarning, ExcludedRowsWarning, MisfitWarning
from ._common import (
    _SHARED,
    ALL_PRIORS,
    DEFAULT_MODEL,
    FALLBACK_MODEL,
    FALLBACK_NOTE,
    LOGIT_DEFAULTS,
    MARGIN_DEFAULTS,
    MISMATCH_POLICIES,
    MODEL_VARIANTS,
    MODELS,
    MOVED_MODELS,
    PARAMETERIZATIONS,
    SAMPLERS,
    _summ,
)
from ._design import _attach_prompts, _design
from ._loglik import pointwise_query_loglik, row_loglik
from ._model import _ModelSpec
from ._result import BayesDiagnostics, BayesResult
from ._sampling import _diagnostics, _sample
from ._summaries import _implied_logged, _implied_randomised, _ppc, _thin
from ._tables import (
    _api_table,
    _convergence_flags,
    _counts_and_rows,  # noqa: F401 (the analyses import it from here)
    _fit_inputs,
    _position_tables,
    _variance_shares,
)

#: "auto" uses the centred parameterisation when every (LLM, cluster) cell has at least this many
#: valid choices per tool and there are enough LLMs to pin down the between-LLM scales; otherwise the
#: likelihood is too weak to beat the funnel of the hierarchy and the non-centred form samples better
#: (simulation: analyses/sbc_bayes.py, 3 LLMs x 20 choices per tool: 88 vs 2 divergences in 8 fits).
_CENTERED_MIN_PER_TOOL = 100
_CENTERED_MIN_LLMS = 5
_CENTERED_MIN_PER_TOOL_ONE_LLM = 10
#: Posterior draws used for the implied bias of a variant with query effects (per-query work).
_QUERY_IMPLIED_DRAWS = 1000


# ---------------------------------------------------------------------------------------------
# public entry point
@renamed_parameter("hdi_prob", "confidence_level", since="0.1.0")
def fit_bayes(log: SelectionLog | SelectionCounts, *, model: str | None = None, by: str | Sequence[str] = "model",
              draws: int = 1000, tune: int | None = None, chains: int = 4, cores: int | None = None,
              sampler: Literal["auto", "numpyro", "pymc", "pymc-numba", "nutpie"] = "auto",
              parameterization: Literal["auto", "centered", "noncentered"] = "auto",
              target_accept: float | None = None, confidence_level: float = 0.94,
              priors: Mapping[str, float] | None = None, mismatch: Literal["exclude", "tool", "position"] = "exclude",
              rng: np.random.Generator | int | None = None, progress: bool = False,
              delta_margin: float | None = None) -> BayesResult:
    """Fit the hierarchical Bayesian model of API and position effects.

    An attempt by LLM ``m`` in cluster ``c`` that shows the tools in ordering ``o`` chooses the
    tool ``j`` with probability ``softmax_j(alpha[m, c, j] + beta[m, pos_o(j)])``, over the tools
    shown (the main-effects model, ``model="v1"``). The API effects ``alpha`` are pooled across LLMs
    around shared effects ``mu``, the position effects ``beta`` around a shared ``beta_bar``. The
    variants add terms to it (``docs/bayes.md`` compares them on the BiasBusters study; the experimental
    query models of issue 22, none of which passes its own checks, moved to ``analyses/bayes_experimental``):

    ========================  =======================================================================
    ``"v1"``                  main effects; one multinomial per (LLM, cluster, ordering)
    ``"v2"``                  + per-(LLM, cluster) position deviations ``delta[m, c, :]``
                              (``beta[m, c, :] = beta[m, :] + delta[m, c, :]``, partially pooled) and a
                              Dirichlet-multinomial per prompt (LLM, cluster, query, ordering) over its
                              repeated runs
    ``"margin"`` (default)    the collapsed margin model (not a logit chooser): parameters on the tool
                              and position margins of each (LLM, cluster), the pooled counts tempered
                              by each cell's per-query Pearson dispersion, spike-and-slab on δ = 0;
                              sampled by NumPyro only (``docs/bayes.md``, "The margin model")
    ========================  =======================================================================

    Parameters
    ----------
    log : SelectionLog, Study, SelectionCounts or path to a study manifest
        The variants with a Dirichlet-multinomial or query effects need to know which attempts
        belong to one query: a SelectionLog or a Study with its rows (counts alone do not keep that).
    model : {"margin", "v2", "v1"}, optional
        The variant (see above). Not given: ``"margin"`` (:data:`DEFAULT_MODEL`), whose likelihood carries query
        heterogeneity; where the study or the other arguments rule it out (lists that do not show every tool of
        the cluster, clusters of different sizes, NumPyro missing, ``sampler`` PyMC or nutpie, a
        ``parameterization`` or ``priors`` only the logit variants have), ``"v2"`` is fitted instead and
        *announced*: ``result.model == "v2"``, a UserWarning saying why, and the same note first in
        ``result.warnings`` (``docs/bayes.md``, "The default model"). Named explicitly, ``"margin"`` on such a
        study raises its ValueError (as does the default given ``delta_margin``, which only it uses), and
        ``"v2"`` / ``"v1"`` reproduce their earlier results for a seed (``"v1"``: the first version's).
        ``"margin"`` needs the log's rows, lists that show every tool of the cluster and NumPyro; it adds
        ``result.implied_cells`` (δ per LLM and per (LLM, cluster) with its probability of being 0 and
        ``P(δ < delta_margin)``).
        The experimental variants (``"cluster-position"``, ``"thorough"``, ``"query-mixture"``, ...) are no
        longer in the package: naming one raises a ValueError that says where they are.
    by : str or list of str, default "model"
        Columns whose values define one "LLM" of the model (e.g. ``"model,condition"``).
    draws : int, default 1000
        Posterior draws per chain.
    tune : int, optional
        Warm-up iterations per chain (default 1000; 500 for ``model="margin"``).
    chains : int, default 4
    cores : int, optional
        Processes for the chains (PyMC) / threads (nutpie) / devices (numpyro); default
        ``min(chains, os.cpu_count())``.
    sampler : {"auto", "pymc", "pymc-numba", "nutpie", "numpyro"}, default "auto"
        ``"numpyro"``: NumPyro's NUTS on the JAX-compiled model, the fastest (``docs/bayes.md``;
        needs the ``numpyro`` extra); ``"pymc"``: PyMC's NUTS with PyTensor's C back-end (core
        dependencies only; bit-for-bit reproducible, and cheap to recompile for many small fits);
        ``"pymc-numba"``: the same sampler with the model compiled by numba (samples faster, but a
        freshly compiled and a cached build may differ in the last bits, so a seed reproduces a fit
        only on the same build); ``"nutpie"`` needs its extra. ``"auto"`` is ``"numpyro"`` when jax
        and numpyro are installed, else ``"pymc"``; the back-end used is recorded in
        ``result.diagnostics.sampler``. Draws differ between back-ends, so the same seed
        reproduces a fit only with the same back-end.
    parameterization : {"auto", "centered", "noncentered"}, default "auto"
        Same model, different sampling geometry. ``"auto"`` is centred when the likelihood
        dominates (at least 5 LLMs and 100 valid choices per tool in every (LLM, cluster) cell; one
        LLM: 10 per tool), where a non-centred hierarchy would correlate every offset with its
        scale; otherwise non-centred, which avoids the funnel of a weakly identified scale. Query
        effects are always non-centred (a query has few attempts).
    target_accept : float, optional
        NUTS target acceptance rate (default 0.8; 0.9 for ``model="margin"``; raise it, e.g. to 0.95, if the fit
        reports divergences).
    confidence_level : float, default 0.94
        Probability mass of the highest-density intervals. It is 0.94, not the 0.95 of the package's
        frequentist intervals, on purpose: 94 % is ArviZ's (and the Bayesian workflow literature's)
        HDI convention, chosen so that a credible interval is not read as a 95 % confidence interval;
        the bundled study's v2 results (and their fingerprints) were published at 0.94. Pass 0.95 to
        put the two side by side at the same level. ``hdi_prob`` is the deprecated name of this
        argument, and the result keeps it as ``BayesResult.hdi_prob``.
    priors : dict, optional
        Override prior scales: the main effects' ``mu_sd``, ``sigma_alpha_sd``, ``beta_bar_sd``,
        ``sigma_beta_sd`` (:data:`DEFAULT_PRIORS`) and, for the variants that have the term,
        ``sigma_delta_sd``, ``rho_a``, ``rho_b`` (:data:`EXTENSION_PRIORS`); positive numbers.
    mismatch : {"exclude", "tool", "position"}, default "exclude"
        Rows whose ``chosen_position`` disagrees with the position of ``chosen_tool`` in
        ``ordering`` (a quirk of the BiasBusters files) contradict themselves: ``"exclude"``
        counts them as excluded (reason ``position_mismatch``), ``"tool"`` trusts the tool,
        ``"position"`` trusts the recorded position (the tool shown there is taken as chosen).
    rng : None, int or numpy.random.Generator
        Seeds the sampler and the posterior predictive draws: the same integer gives identical
        output.
    progress : bool, default False
        Show the sampler's progress bar.
    delta_margin : float, optional
        ``model="margin"`` only: the margin of ``P(δ < delta_margin)`` in ``result.implied_cells`` (default
        0.02); a ValueError with the other variants.

    Returns
    -------
    BayesResult
        Summaries (``position_effects``, ``first_vs_last``, ``api_effects``, ``implied``,
        ``variance_shares``, ``ppc``, ``scales``, ``cluster_position_effects``), ``diagnostics``
        and the full ``idata``.

    Raises
    ------
    ValueError
        An invalid argument (the message names it; an experimental variant that moved out of the
        package: where it is now), a log without any usable row, or a variant that needs the queries
        given counts only.
    ImportError
        ``sampler="nutpie"``/``"numpyro"`` without the optional dependency; the message names
        the pip extra.

    Warns
    -----
    UserWarning
        ``model`` not given and the margin model cannot fit the study or the arguments: ``"v2"`` was fitted; the
        message (also ``result.warnings[0]``) says why.
    ExcludedRowsWarning
        Rows were excluded (no valid choice, unknown ordering, position mismatch); the counts
        are in ``result.rows``.
    ConvergenceWarning
        R-hat > 1.01, bulk ESS < 400 or a divergence. The same flags are in
        ``result.diagnostics.flags`` and ``result.warnings``.
    MisfitWarning
        A posterior predictive p-value below 0.05.
    DegenerateDataWarning
        A cluster was shown with lists of different lengths to one LLM (its implied delta_pos is
        left out).

    Notes
    -----
    **Likelihood.** Rows with a valid choice and a known ordering are aggregated into counts
    ``y[m, c, o, p]`` of choices of position ``p`` (``n[m, c, o]`` in total); in v1 each
    ``y[m, c, o, :]`` is Multinomial(``n[m, c, o]``, ``softmax(alpha[m, c, tool_o(p)] + beta[m, p])``)
    over the ``K_o`` positions shown. Clusters may have different sizes, orderings may be any
    permutations (or subsets) of the cluster's tools, and positions are absolute (1 = first).
    v1 treats attempts as exchangeable given (LLM, cluster, ordering). The Dirichlet-multinomial
    variants treat the repeated attempts of one *prompt* (the same query shown in the same ordering
    to the same LLM, e.g. the runs) as draws from one set of choice probabilities
    ``pi ~ Dirichlet(kappa[m, c] * p)``: their intra-prompt correlation ``rho = 1 / (1 + kappa)`` is
    estimated, and ``kappa -> infinity`` gives back the multinomial. Query effects make the queries
    a sample from a population of queries.

    **Hierarchy and identifiability.** ``alpha[m, c, :] = mu[c, :] + sigma_alpha * z[m, c, :]``
    and ``beta[m, :] = beta_bar + sigma_beta * z2[m, :]``, with ``mu[c, :]``, ``z[m, c, :]``,
    ``beta_bar`` and ``z2[m, :]`` zero-sum normal (sum to zero within a cluster / over positions;
    the softmax is blind to a common shift). With one LLM there is nothing to pool: ``alpha = mu``
    and ``beta = beta_bar``, and the scales are not in the model. Per-cluster deviations
    ``delta[m, c, :] = sigma_delta * z3[m, c, :]`` and query effects
    ``eta[m, c, q, :] = sigma_eta[m] * z4[m, c, q, :]`` are zero-sum normal as well.

    **Priors** (logit scale, :data:`DEFAULT_PRIORS`, :data:`EXTENSION_PRIORS`; reasons in
    ``docs/bayes.md``):

    - ``mu[c, :] ~ ZeroSumNormal(1.5)``: a pairwise log-odds between two tools has sd
      1.5·sqrt(2) = 2.1, so one tool may be picked ~60 times as often as another at 95% prior mass,
      while a tool that is never chosen still gets a finite effect.
    - ``sigma_alpha ~ HalfNormal(1)``: LLMs may disagree by about 2 log-odds on a tool (a reversal
      of preference) but the scale stays finite with few LLMs.
    - ``beta_bar ~ ZeroSumNormal(1)``: position effects reported in audits are odds factors of
      2-10 between first and last; pairwise sd 1.4 covers a factor 16.
    - ``sigma_beta ~ HalfNormal(1)``: LLMs differ widely in position bias (BiasBusters:
      delta_pos from 0.17 to 0.50).
    - ``sigma_delta ~ HalfNormal(1)``: nothing says a cluster changes an LLM's position effects
      less than LLMs differ from each other, so the same scale as ``sigma_beta``; finite, so that a
      cluster with little data is pulled towards the LLM's effects.
    - ``sigma_eta[m] ~ HalfNormal(1)``: queries may need a particular tool (several log-odds) or
      none; the scale is per LLM.
    - ``rho[m, c] = 1 / (1 + kappa[m, c]) ~ Beta(1, 1)``, per (LLM, cluster): any intra-prompt
      correlation from none (independent runs, the multinomial) to complete (a prompt always gets the
      same answer).

    **Parameterisation.** The centred form samples each (LLM, cluster) cell's effects in its own
    reference coding (the cell's most chosen tool, and the LLM's or cell's most chosen position,
    is 0), which keeps the posterior nearly uncorrelated when a cell has a rarely chosen tool; the
    shared means ``mu`` and ``beta_bar`` are integrated out analytically (Normal-Normal) and drawn
    exactly from their conditional posterior after sampling, which removes their funnel with the
    scales. The non-centred form samples ``z`` through PyMC's orthonormal zero-sum basis. Both
    define the same posterior on the identified (sum-to-zero) effects; ``docs/bayes.md`` compares
    their speed.

    **Implied bias.** For each draw, the choice probabilities of every tool and position are
    averaged over the orderings (``logged``: weighted by the valid choices logged under each;
    ``randomised``: all K! orderings equally, exactly for K <= 5, else 24 random permutations with
    all their K cyclic shifts), and delta = mean over clusters of TV(p, uniform) = ½·Σ|p - 1/K|.
    This is the *true* TV of the fitted chooser, not the plug-in TV of observed rates, which is
    biased upward by sampling noise. The Dirichlet-multinomial leaves the mean choice probabilities
    of a prompt at the softmax, so the formula is the same; with per-cluster position effects each
    (LLM, cluster) uses its own; with query effects the probabilities are those of the queries in
    the log (averaged over them). Under randomised orderings position effects cannot create tool
    bias and tool effects cannot create position bias; delta_pos itself does not vanish, since an
    LLM that prefers the first slot still picks it more often whatever is shown there.

    **Variance shares.** Per draw, ``V_shared = mean over clusters and tools of mu^2`` and
    ``V_between = mean over observed (LLM, cluster) cells and tools of (alpha - mu)^2``;
    ``share_shared = V_shared / (V_shared + V_between)`` near 1 means the LLMs agree on which tools
    win. The same for positions with ``beta_bar`` and ``beta`` (and, with per-cluster position
    effects, ``V_cluster`` = mean of ``delta^2`` in the denominator).

    Examples
    --------
    A tiny simulated study (one LLM, two clusters of three tools, every ordering shown 20 times) and a deliberately
    short single chain, so that the example runs in seconds; it warns that it has not converged. On the vendored
    study the defaults (``fit_bayes(tbs.read_study(tbs.datasets.path("biasbusters/study.toml")).log, rng=1)``:
    the margin model, 4 chains of 500 + 1,000 draws) converge in about 35 s on two cores.

    >>> import warnings
    >>> import numpy as np
    >>> from toolbias_stats.models import fit_bayes, simulate_bayes_log
    >>> alpha = np.array([[[1.0, 0.0, -1.0], [0.0, 0.5, -0.5]]])     # API effects: LLM x cluster x tool
    >>> log = simulate_bayes_log(alpha, np.array([[1.0, 0.0, -1.0]]), n_per_ordering=20, rng=1)
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore")
    ...     res = fit_bayes(log, model="v1", draws=50, tune=50, chains=1, cores=1, sampler="pymc", rng=1)
    >>> print(res.implied[["llm", "metric", "orderings"]].to_string(index=False))
     llm    metric  orderings
    llm1 delta_api     logged
    llm1 delta_pos     logged
    llm1 delta_api randomised
    llm1 delta_pos randomised
    >>> bool((res.implied["hdi_low"] <= res.implied["mean"]).all()), res.diagnostics.converged
    (True, False)

    The margin model (``fit_bayes(log, model="margin", rng=1)``: about 20 s on a small study, JAX's compilation
    included; ``result.implied_cells`` has δ with its probability of being 0) needs the log's rows, which say
    which attempts belong to one query; counts alone are refused before anything is sampled:

    >>> log = simulate_bayes_log(np.zeros((2, 1, 4)), np.array([[1.0, 0.0, 0.0, -1.0], [0.0, 0.0, 0.0, 0.0]]),
    ...                          queries=20, runs=3, sigma_eta=1.0, rng=1)
    >>> try:
    ...     fit_bayes(log.counts(), model="margin")
    ... except ValueError as exc:
    ...     print(str(exc)[:59])
    model='margin' needs to know which attempts belong to one q
    """
    t0 = time.perf_counter()
    note = None
    if model is None:
        model, reason, log = _default_model(log, by=by, sampler=sampler, parameterization=parameterization,
                                            priors=priors, mismatch=mismatch, delta_margin=delta_margin)
        if reason is not None:   # announced before the fit, and first among the result's notes
            note = (f"{FALLBACK_NOTE}, which cannot fit this study: {reason}. Pass model={FALLBACK_MODEL!r} (CLI: "
                    f"--variant {FALLBACK_MODEL}) to choose it and silence this note (docs/bayes.md, \"The default "
                    "model\").")
            warnings.warn(note, UserWarning, stacklevel=3)
    result = _fit(log, model=model, by=by, draws=draws, tune=tune, chains=chains, cores=cores, sampler=sampler,
                  parameterization=parameterization, target_accept=target_accept,
                  confidence_level=confidence_level, priors=priors, mismatch=mismatch, rng=rng, progress=progress,
                  delta_margin=delta_margin, t0=t0)
    return result if note is None else dataclasses.replace(result, warnings=[note, *result.warnings])


def _fit(log, *, model, by, draws, tune, chains, cores, sampler, parameterization, target_accept,
         confidence_level, priors, mismatch, rng, progress, delta_margin, t0) -> BayesResult:
    """``fit_bayes`` with a named ``model``."""
    defaults = MARGIN_DEFAULTS if model == "margin" else LOGIT_DEFAULTS
    tune = int(defaults["tune"]) if tune is None else tune
    target_accept = float(defaults["target_accept"]) if target_accept is None else target_accept
    args = _check_fit_bayes_args(model=model, by=by, draws=draws, tune=tune, chains=chains, cores=cores,
                                 sampler=sampler, parameterization=parameterization, target_accept=target_accept,
                                 hdi_prob=confidence_level, priors=priors, mismatch=mismatch, rng=rng,
                                 progress=progress)
    if args["model"] == "margin":
        from ._margin_fit import fit_margin

        args["delta_margin"] = _check_margin_args(args, sampler, parameterization, delta_margin)
        return fit_margin(log, args, MODEL_VARIANTS["margin"], t0)
    if delta_margin is not None:
        raise ValueError(f"`delta_margin` is used by model='margin' only; got it with model={args['model']!r}.")
    return _fit_variant(log, args, MODEL_VARIANTS[args["model"]], _ModelSpec, t0)


def _default_model(log, *, by, sampler, parameterization, priors, mismatch, delta_margin):
    """``(model, reason, log)`` for ``fit_bayes(log)`` without ``model``: :data:`DEFAULT_MODEL` with ``reason``
    None, or :data:`FALLBACK_MODEL` with the reason the default cannot fit (``docs/bayes.md``, "The default
    model"). ``log`` comes back read when it was a path (read once). Invalid arguments and input errors are left to
    the fit, which names them; ``delta_margin`` asks for the margin model, so it keeps the margin model's error."""
    from ._margin import _have_numpyro, margin_data

    v2_only = sorted(set(priors or {}) & (set(ALL_PRIORS) - set(MODEL_VARIANTS[DEFAULT_MODEL].priors())))
    if isinstance(sampler, str) and sampler in SAMPLERS and sampler not in ("auto", "numpyro"):
        reason = f"sampler={sampler!r} was asked for, and the margin model is sampled by NumPyro only"
    elif isinstance(parameterization, str) and parameterization in PARAMETERIZATIONS and parameterization != "auto":
        reason = (f"parameterization={parameterization!r} was asked for, and the margin model has its own "
                  "parameterisation")
    elif isinstance(priors, dict) and v2_only:
        reason = f"priors {v2_only} were given, which only the logit variants use"
    elif not _have_numpyro():
        reason = "NumPyro (JAX), which samples the margin model, is not installed (pip install numpyro jax)"
    else:
        args: dict[str, Any] = {"by": by, "rng": None}
        counts, rows, _ = _fit_inputs(log, args, MODEL_VARIANTS[DEFAULT_MODEL])   # counts alone: v2 cannot either
        if isinstance(log, (str, os.PathLike)):
            log = rows
        mism = mismatch if isinstance(mismatch, str) and mismatch in MISMATCH_POLICIES else "exclude"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            design = _attach_prompts(_design(counts, args["by"], mism), rows, args["by"], mism)
        try:
            margin_data(design)
            return DEFAULT_MODEL, None, log
        except ValueError as exc:
            reason = (str(exc).replace("model='margin' needs", "the margin model needs").split(" Use model=")[0]
                      .rstrip("."))
    if delta_margin is not None:
        return DEFAULT_MODEL, None, log        # the margin model's own error, or its fit
    return FALLBACK_MODEL, reason, log


def _check_margin_args(args, sampler, parameterization, delta_margin) -> float:
    """The margin model is sampled by NumPyro in its own parameterisation; ``delta_margin`` in (0, 1)."""
    from ._margin import require_numpyro

    if sampler not in ("auto", "numpyro"):
        raise ValueError(f"model='margin' is sampled with NumPyro only (sampler='auto' or 'numpyro'); got "
                         f"sampler={sampler!r}.")
    if parameterization != "auto":
        raise ValueError("model='margin' has its own parameterisation (mixed centred / non-centred, docs/bayes.md); "
                         f"`parameterization` must be 'auto', got {parameterization!r}.")
    require_numpyro()
    args["sampler"] = "numpyro"
    m = MARGIN_DEFAULTS["delta_margin"] if delta_margin is None else delta_margin
    if isinstance(m, bool) or not isinstance(m, numbers.Real) or not 0 < float(m) < 1:
        raise ValueError(f"`delta_margin` must be a number in (0, 1); got {delta_margin!r} instead.")
    return float(m)


def _fit_variant(log, args: dict, variant, spec_cls, t0: float) -> BayesResult:
    """The fit of ``variant`` with the model class ``spec_cls`` (``_ModelSpec``, or a model extension's subclass:
    ``analyses/bayes_experimental``), after the argument checks."""
    args["variant"] = variant
    rng = args["rng"]
    counts, rows_log, seed_repr = _fit_inputs(log, args, variant)
    by = args["by"]
    gen = check_rng(rng)
    caught = []
    design = _design(counts, by, args["mismatch"])
    if rows_log is not None:
        design = _attach_prompts(design, rows_log, by, args["mismatch"])
    if design.rows["excluded"]:
        ex = design.rows["excluded"]
        msg = (f"{sum(ex.values())} of {design.rows['total']} rows cannot enter the model and are excluded: "
               f"{ex}")
        warnings.warn(msg, ExcludedRowsWarning, stacklevel=3)
        caught.append(msg)
    param = args["parameterization"]
    if param == "auto":
        per_tool = design.min_per_tool()
        rich = (per_tool >= _CENTERED_MIN_PER_TOOL_ONE_LLM if design.M == 1 else
                design.M >= _CENTERED_MIN_LLMS and per_tool >= _CENTERED_MIN_PER_TOOL)
        param = "centered" if rich else "noncentered"
    sampler_seed = int(gen.integers(0, 2**31 - 1))
    spec = spec_cls(design, args["priors"], param, variant)
    raw = _sample(spec, sampler=args["sampler"], draws=args["draws"], tune=args["tune"], chains=args["chains"],
                  cores=args["cores"], seed=sampler_seed, target_accept=args["target_accept"],
                  progress=args["progress"])
    post = spec.derived(raw.posterior, gen)
    diag_vals = _diagnostics(post, raw.sample_stats, design)
    return _summarise(design, spec, post, raw, diag_vals, args, param, sampler_seed, seed_repr, gen, caught, t0)


# ---------------------------------------------------------------------------------------------
# argument checks
def _check_fit_bayes_args(*, model, by, draws, tune, chains, cores, sampler, parameterization, target_accept,
                          hdi_prob, priors, mismatch, rng, progress, variants=None, all_priors=None) -> dict:
    """The checked arguments of ``fit_bayes`` as a dict; ``variants`` and ``all_priors`` (default: the package's)
    let a model extension check its own variants and priors the same way."""
    variants = MODEL_VARIANTS if variants is None else variants
    all_priors = ALL_PRIORS if all_priors is None else all_priors

    def count(name, v, low):
        if isinstance(v, bool) or not isinstance(v, numbers.Integral) or v < low:
            raise ValueError(f"`{name}` must be an integer >= {low}; got {v!r} instead.")
        return int(v)

    if isinstance(model, str) and model in MOVED_MODELS and model not in variants:
        raise ValueError(f"model={model!r} is an experimental variant that did not pass its own checks and moved out "
                         "of the package (issue 38): it lives in the repository's analyses/bayes_experimental "
                         "(bayes_experimental.fit_experimental(log, model=...)); the package fits "
                         f"{', '.join(repr(m) for m in MODELS)} (docs/bayes.md).")
    if not isinstance(model, str) or model not in variants:
        raise ValueError(f"`model` must be one of {', '.join(repr(m) for m in variants)}; got {model!r} instead "
                         "(see docs/bayes.md for what each variant fits).")
    out: dict[str, Any] = {"model": model, "rng": rng, "by": by}
    out.update({"draws": count("draws", draws, 10), "tune": count("tune", tune, 0),
                "chains": count("chains", chains, 1)})
    if cores is None:
        cores = min(out["chains"], os.cpu_count() or 1)
    out["cores"] = count("cores", cores, 1)
    out["sampler"] = check_choice("sampler", sampler, SAMPLERS)
    if out["sampler"] == "auto":
        import importlib.util

        have = all(importlib.util.find_spec(m) is not None for m in ("jax", "numpyro"))
        out["sampler"] = "numpyro" if have else "pymc"
    out["parameterization"] = check_choice("parameterization", parameterization, PARAMETERIZATIONS)
    out["mismatch"] = check_choice("mismatch", mismatch, MISMATCH_POLICIES)
    for name, v in (("target_accept", target_accept), ("confidence_level", hdi_prob)):
        if isinstance(v, bool) or not isinstance(v, numbers.Real) or not 0 < float(v) < 1:
            raise ValueError(f"`{name}` must be a number in (0, 1); got {v!r} instead.")
    out["target_accept"] = float(target_accept)
    out["hdi_prob"] = float(hdi_prob)
    used = variants[model].priors()
    merged = {k: all_priors[k] for k in used}
    if priors is not None:
        if not isinstance(priors, dict):
            raise ValueError(f"`priors` must be a dict with keys {sorted(used)}; "
                             f"got {type(priors).__name__} instead.")
        unknown = sorted(set(priors) - set(all_priors))
        if unknown:
            raise ValueError(f"`priors` has unknown key(s) {unknown}; valid keys: {sorted(all_priors)}.")
        unused = sorted(set(priors) - set(used))
        if unused:
            raise ValueError(f"`priors` key(s) {unused} are not used by model={model!r}; its keys: {sorted(used)}.")
        for k, v in priors.items():
            if isinstance(v, bool) or not isinstance(v, numbers.Real) or not math.isfinite(v) or v <= 0:
                raise ValueError(f"`priors[{k!r}]` must be a positive number; got {v!r} instead.")
            merged[k] = float(v)
    out["priors"] = merged
    if not isinstance(progress, bool):
        raise ValueError(f"`progress` must be True or False; got {progress!r} instead.")
    out["progress"] = progress
    check_rng(rng)  # validates the type without consuming the caller's generator
    return out


# ---------------------------------------------------------------------------------------------
# summaries


def _scales_table(D, post, prob):
    rows = []
    for name in ("sigma_alpha", "sigma_beta", "sigma_delta"):
        if name in post:
            sm = _summ(post[name], prob)
            rows.append({"quantity": name, "llm": _SHARED, **{k: float(v) for k, v in sm.items()}})
    if "sigma_eta" in post:
        sm = _summ(post["sigma_eta"], prob)
        for m, lab in enumerate(D.llms):
            rows.append({"quantity": "sigma_eta", "llm": lab, **{k: float(v[m]) for k, v in sm.items()}})
    if "lambda" in post and post["lambda"].ndim == 2:
        sm = _summ(post["lambda"], prob)
        for m, lab in enumerate(D.llms):
            rows.append({"quantity": "lambda", "llm": lab, **{k: float(v[m]) for k, v in sm.items()}})
    if "kappa" in post:
        seen = D.cell_counts() > 0
        pairs = [("kappa", post["kappa"]), ("rho", 1.0 / (1.0 + post["kappa"]))]
        if "gamma" in post:
            pairs.append(("gamma", post["gamma"]))
        if "epsilon" in post:
            pairs.append(("epsilon", post["epsilon"]))
        if "lambda" in post and post["lambda"].ndim == 3:                       # per (LLM, cluster)
            pairs.append(("lambda", post["lambda"]))
        for name, arr in pairs:
            sm = _summ(arr, prob)
            for m, lab in enumerate(D.llms):
                for c, cl in enumerate(D.clusters):
                    if seen[m, c]:
                        rows.append({"quantity": name, "llm": lab, "cluster": cl,
                                     **{k: float(v[m, c]) for k, v in sm.items()}})
    return pd.DataFrame(rows, columns=["quantity", "llm", "cluster", "mean", "sd", "hdi_low", "hdi_high"])


def _has_query_effects(args) -> bool:
    v = args["variant"]
    return v.query_effects or getattr(v, "query_mixture", False)


def _implied_table(D, post, prob, gen, caught, spec=None):
    """Model-implied delta_API and delta_pos per LLM (mean over the clusters it was logged on), under the
    logged and under uniformly random orderings; returns the table and the permutation methods used."""
    M, C = D.M, D.C
    llm_names = D.llms
    observed = D.cell_counts() > 0                                              # (M, C)
    ipost = _thin(post, _QUERY_IMPLIED_DRAWS)[0] if "eta" in post else post
    tva_log, tvp_log = _implied_logged(ipost, D, spec=spec)
    tva_rnd, tvp_rnd, perm_methods = _implied_randomised(ipost, D, gen, spec=spec)
    mixed = [(llm_names[m], D.clusters[c]) for m in range(M) for c in range(C)
             if observed[m, c] and np.isnan(tvp_log[0, m, c])]
    if mixed:
        msg = (f"lists of different lengths were shown in {len(mixed)} (LLM, cluster) cell(s) (e.g. {mixed[0]}); "
               "their logged-orderings delta_pos is undefined and left out of the means")
        warnings.warn(msg, DegenerateDataWarning, stacklevel=5)
        caught.append(msg)
    rows = []
    for metric, scen, tv in (("delta_api", "logged", tva_log), ("delta_pos", "logged", tvp_log),
                             ("delta_api", "randomised", tva_rnd), ("delta_pos", "randomised", tvp_rnd)):
        vals = np.where(observed[None], tv, np.nan)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            per_llm = np.nanmean(vals, axis=2)                                  # (S, M)
        sm = _summ(per_llm, prob)
        for m, lab in enumerate(llm_names):
            rows.append({"llm": lab, "metric": metric, "orderings": scen, "n_clusters": int(observed[m].sum()),
                         **{k: float(v[m]) for k, v in sm.items()}})
    return pd.DataFrame(rows), perm_methods


def _misfit_warnings(ppc, args, caught):
    """A MisfitWarning for every posterior predictive p-value below 0.05, naming the table."""
    checks = [("cluster x position", ppc.p_value), ("LLM x cluster x ordering x position", ppc.p_value_rows)]
    if ppc.dispersion is not None:
        checks.append(("per-query dispersion", ppc.p_value_dispersion))
    hints = {"cluster x position": "position effects differ between clusters more than the model allows",
             "LLM x cluster x ordering x position": ("within an (LLM, cluster) the choices under particular lists "
                                                     "deviate from additive tool and position effects"),
             "per-query dispersion": "queries differ from each other more than the model allows"
                                     + ("" if _has_query_effects(args)
                                        else "; its intervals are then too narrow (docs/bayes.md)")}
    for name, pv in checks:
        if pv < 0.05:
            if args["model"] == "v1" and name != "per-query dispersion":
                # the first version's message, unchanged
                msg = (f"posterior predictive check: p = {pv:.3f} on the {name} counts; the main-effects model "
                       "misfits (consider an API x position interaction or a per-cluster position effect)")
            else:
                ptxt = f"p = {pv:.3f}" + (" (no replication as extreme)" if pv == 0 else "")
                msg = (f"posterior predictive check: {ptxt} on the {name} counts; model={args['model']!r} "
                       f"misfits ({hints[name]})")
            warnings.warn(msg, MisfitWarning, stacklevel=5)
            caught.append(msg)


def _summarise(design, spec, post, raw, diag_vals, args, param, sampler_seed, seed_repr, gen, caught, t0):
    import arviz as az
    import xarray as xr

    D = design
    prob = args["hdi_prob"]
    llm_names = D.llms
    position_effects, first_vs_last, cluster_position = _position_tables(D, post, prob)
    api_effects = _api_table(D, post, prob)
    implied, perm_methods = _implied_table(D, post, prob, gen, caught, spec)
    variance_shares = _variance_shares(D, post, prob)
    ppc, yrep, sel = _ppc(post, spec, gen, prob)
    _misfit_warnings(ppc, args, caught)
    flags = _convergence_flags(diag_vals, caught)
    idata = _inference_data(post, raw, spec, yrep, sel, az, xr)
    diagnostics = BayesDiagnostics(
        max_rhat=diag_vals["max_rhat"], min_ess_bulk=diag_vals["min_ess_bulk"],
        min_ess_tail=diag_vals["min_ess_tail"], divergences=diag_vals["divergences"], sampler=args["sampler"],
        seconds=time.perf_counter() - t0, chains=args["chains"], draws=args["draws"], tune=args["tune"],
        seed=sampler_seed, parameterization=param, flags=flags)
    idata.posterior.attrs.update({"sampler": args["sampler"], "parameterization": param, "seed": sampler_seed,
                                  "randomised_orderings": "; ".join(f"K={k}: {v}" for k, v in perm_methods.items())})
    if args["model"] != "v1":
        idata.posterior.attrs["model"] = args["model"]
    return BayesResult(
        idata=idata, position_effects=position_effects, first_vs_last=first_vs_last, api_effects=api_effects,
        implied=implied, variance_shares=variance_shares, ppc=ppc, diagnostics=diagnostics, rows=D.rows,
        rows_by_llm=D.rows_by_llm, llms=list(llm_names), llm_keys=D.llm_keys, clusters=list(D.clusters),
        tools={c: list(t) for c, t in zip(D.clusters, D.tools)}, n_positions=D.P, by=list(args["by"]),
        priors=dict(args["priors"]), hdi_prob=prob, mismatch=args["mismatch"], seed=seed_repr, warnings=caught,
        model=args["model"], cluster_position_effects=cluster_position, scales=_scales_table(D, post, prob),
        _spec=spec, _post=post)


def _inference_data(post, raw, spec, yrep, sel, az, xr):
    """Assemble the ArviZ container (identified effects, stats, likelihood, replications, data)."""
    D = spec.design
    nch, ndr = post["shape"]
    C, Kmax, P = D.C, D.Kmax, D.P
    tool_ids = np.full((C, Kmax), "", dtype=object)
    for c, tl in enumerate(D.tools):
        tool_ids[c, :len(tl)] = tl
    coords = {"chain": np.arange(nch), "draw": np.arange(ndr), "llm": list(D.llms), "cluster": list(D.clusters),
              "tool": np.arange(1, Kmax + 1), "position": np.arange(1, P + 1)}

    def da(arr, dims):
        return xr.DataArray(arr.reshape((nch, ndr) + arr.shape[1:]), dims=("chain", "draw") + dims)

    pv = {"alpha": da(post["alpha"], ("llm", "cluster", "tool")), "mu": da(post["mu"], ("cluster", "tool")),
          "beta": da(post["beta"], ("llm", "position")), "beta_bar": da(post["beta_bar"], ("position",))}
    for k in ("sigma_alpha", "sigma_beta"):
        if k in post:
            pv[k] = da(post[k], ())
    if "beta_cell" in post:
        pv["beta_cell"] = da(post["beta_cell"], ("llm", "cluster", "position"))
        pv["delta"] = da(post["delta"], ("llm", "cluster", "position"))
        pv["sigma_delta"] = da(post["sigma_delta"], ())
    if "kappa" in post:
        pv["kappa"] = da(post["kappa"], ("llm", "cluster"))
        pv["rho"] = da(1.0 / (1.0 + post["kappa"]), ("llm", "cluster"))
    if "gamma" in post:
        pv["gamma"] = da(post["gamma"], ("llm", "cluster"))
    if "lambda" in post:
        pv["lambda"] = da(post["lambda"], ("llm",) if post["lambda"].ndim == 2 else ("llm", "cluster"))
        pv["epsilon"] = da(post["epsilon"], ("llm", "cluster"))
    if "sigma_eta" in post:
        pv["sigma_eta"] = da(post["sigma_eta"], ("llm",))
    posterior = xr.Dataset(pv, coords={**coords, "tool_id": (("cluster", "tool"), tool_ids.astype(str))})
    row_coords = {"row": np.arange(len(D.y))}
    ll_vars = {}
    if not (spec.dm or spec.qe):
        # pointwise log-likelihood of every row (full multinomial, with its coefficient), as in v1
        ll_vars["y"] = xr.DataArray(row_loglik(post, D).reshape(nch, ndr, -1), dims=("chain", "draw", "row"))
    q_coords = {}
    if D.prompts is not None and not spec.qe:
        # the same per (LLM, cluster, query): the unit every variant can be compared on (compare_bayes)
        llq = pointwise_query_loglik(post, spec)
        ll_vars["y_query"] = xr.DataArray(llq.reshape(nch, ndr, -1), dims=("chain", "draw", "query"))
        q_coords = _query_coords(D)
    log_lik = xr.Dataset(ll_vars, coords={"chain": coords["chain"], "draw": coords["draw"],
                                          **(row_coords if "y" in ll_vars else {}), **q_coords})
    nd = len(sel) // nch
    pp = xr.Dataset({"y": xr.DataArray(yrep.reshape(nch, nd, len(D.y), P).astype(np.int32),
                                       dims=("chain", "draw", "row", "position"))},
                    coords={"chain": coords["chain"], "draw": np.arange(nd), "row": row_coords["row"],
                            "position": coords["position"]})
    obs = xr.Dataset({"y": xr.DataArray(D.y.astype(np.int64), dims=("row", "position"))},
                     coords={**row_coords, "position": coords["position"]})
    const = xr.Dataset({
        "row_llm": xr.DataArray(np.array(D.llms, dtype=object)[D.row_llm].astype(str), dims=("row",)),
        "row_cluster": xr.DataArray(np.array(D.clusters, dtype=object)[D.row_cluster].astype(str), dims=("row",)),
        "row_ordering": xr.DataArray(np.array(D.orderings, dtype=object).astype(str), dims=("row",)),
        "row_length": xr.DataArray(D.row_len, dims=("row",)),
    }, coords=row_coords)
    stats = raw.sample_stats
    groups = {"posterior": posterior, "sample_stats": stats, "posterior_predictive": pp, "observed_data": obs,
              "constant_data": const}
    if ll_vars:
        groups["log_likelihood"] = log_lik
    return az.InferenceData(**groups)


def _query_coords(D):
    pr = D.prompts
    return {"query": np.arange(pr.Q),
            "query_llm": ("query", np.array(D.llms, dtype=object)[pr.query_llm].astype(str)),
            "query_cluster": ("query", np.array(D.clusters, dtype=object)[pr.query_cluster].astype(str)),
            "query_id": ("query", np.array(pr.query_ids, dtype=object).astype(str))}
