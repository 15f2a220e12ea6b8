"""Hierarchical Bayesian multinomial-logit model of API (tool) and position effects (PyMC + ArviZ).

The descriptive metrics (:func:`toolbias_stats.selection_bias`) say *how skewed* a model's choices
are; this model says *where the skew comes from*: from which tool is shown (API effect) or from
where it sits in the list (position effect). It is fitted on aggregated counts, one multinomial per
(LLM, cluster, ordering), so its cost grows with the number of distinct orderings, not with calls.
"""

from __future__ import annotations

import itertools
import math
import numbers
import os
import sys
import time
import warnings
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from .._validation import check_by, check_choice, check_rng
from ..exceptions import ConvergenceWarning, DegenerateDataWarning, ExcludedRowsWarning, MisfitWarning
from ..io._counts import load_counts
from .._display import ReprHTMLMixin

__all__ = ["fit_bayes", "BayesResult", "BayesDiagnostics", "PosteriorPredictiveCheck", "ConvergenceWarning",
           "MisfitWarning", "DEFAULT_PRIORS", "SAMPLERS", "PARAMETERIZATIONS", "simulate_choice_log",
           "RHAT_MAX", "ESS_MIN"]

#: Sampler back-ends accepted by :func:`fit_bayes` (see ``docs/bayes.md`` for their timings).
SAMPLERS = ("auto", "pymc", "pymc-numba", "nutpie", "numpyro")
#: Parameterisations of the hierarchy (the same model; they differ only in sampling geometry).
PARAMETERIZATIONS = ("auto", "centered", "noncentered")
#: How to treat BiasBusters-style records whose recorded position disagrees with the ordering.
MISMATCH_POLICIES = ("exclude", "tool", "position")

#: Convergence thresholds: a fit beyond any of them is flagged (warning, JSON, report).
RHAT_MAX = 1.01
ESS_MIN = 400

#: Prior scales (logit scale). Reasons: ``docs/bayes.md`` and the docstring of :func:`fit_bayes`.
DEFAULT_PRIORS = {"mu_sd": 1.5, "sigma_alpha_sd": 1.0, "beta_bar_sd": 1.0, "sigma_beta_sd": 1.0}

#: Extras that provide the optional samplers (``pip install 'toolbias_stats[<extra>]'``).
_EXTRAS = {"nutpie": ("nutpie", "nutpie"), "numpyro": ("numpyro", "numpyro")}

#: "auto" uses the centred parameterisation when every (LLM, cluster) cell has at least this many
#: valid choices per tool and there are enough LLMs to pin down the between-LLM scales; otherwise the
#: likelihood is too weak to beat the funnel of the hierarchy and the non-centred form samples better
#: (simulation: analyses/sbc_bayes.py, 3 LLMs x 20 choices per tool: 88 vs 2 divergences in 8 fits).
_CENTERED_MIN_PER_TOOL = 100
_CENTERED_MIN_LLMS = 5
_CENTERED_MIN_PER_TOOL_ONE_LLM = 10

#: Orderings enumerated exactly for the randomised counterfactual up to this list length (5! = 120).
_EXACT_PERMUTATION_K = 5
#: Beyond it: this many random base permutations, each with all K cyclic shifts (balanced design).
_RANDOM_BASE_PERMUTATIONS = 24

_NEG = -1.0e4  # logit of a padded (not shown) position: exp(-1e4) == 0 in float64


# ---------------------------------------------------------------------------------------------
# results
@dataclass(frozen=True)
class BayesDiagnostics:
    """Convergence diagnostics and sampler settings of one fit.

    Attributes
    ----------
    max_rhat : float
        Largest rank-normalised split R-hat over all identified parameters (alpha, mu, beta,
        beta_bar and the two scales).
    min_ess_bulk, min_ess_tail : float
        Smallest bulk / tail effective sample size over the same parameters.
    divergences : int
        Divergent transitions after warm-up.
    sampler : str
        The back-end that ran (``"pymc"``, ``"pymc-numba"``, ``"nutpie"`` or ``"numpyro"``).
    seconds : float
        Wall time of the fit: model building, compilation, sampling and summaries.
    chains, draws, tune : int
    seed : int
        The integer seed handed to the sampler (derived from ``rng``).
    parameterization : str
        ``"centered"`` or ``"noncentered"`` (after resolving ``"auto"``).
    flags : list of str
        One message per violated threshold (empty when the fit is fine).
    """

    max_rhat: float
    min_ess_bulk: float
    min_ess_tail: float
    divergences: int
    sampler: str
    seconds: float
    chains: int
    draws: int
    tune: int
    seed: int
    parameterization: str
    flags: list = field(default_factory=list)

    @property
    def converged(self) -> bool:
        """True when R-hat <= 1.01, bulk ESS >= 400 and there is no divergence."""
        return not self.flags

    def to_dict(self) -> dict:
        return {"converged": self.converged, "flags": list(self.flags), "max_rhat": _num(self.max_rhat),
                "min_ess_bulk": _num(self.min_ess_bulk), "min_ess_tail": _num(self.min_ess_tail),
                "divergences": int(self.divergences), "sampler": self.sampler, "seconds": _num(self.seconds),
                "chains": self.chains, "draws": self.draws, "tune": self.tune, "seed": self.seed,
                "parameterization": self.parameterization,
                "thresholds": {"max_rhat": RHAT_MAX, "min_ess_bulk": ESS_MIN, "divergences": 0}}


@dataclass(frozen=True)
class PosteriorPredictiveCheck:
    """Observed against replicated choice counts.

    Attributes
    ----------
    table : pandas.DataFrame
        One row per cluster and position: ``observed`` count (all LLMs and orderings),
        ``replicated_mean`` and the ``hdi_prob`` interval ``replicated_low``/``replicated_high``
        of the replicated counts.
    p_value : float
        Posterior predictive p-value of the chi-square discrepancy on the cluster x position
        table, ``P(T(y_rep, theta) >= T(y, theta) | y)`` with ``T = sum (y - E)^2 / E``.
    p_value_rows : float
        The same discrepancy on the finest table the model is fitted to: one cell per LLM,
        cluster, ordering and position. It is the more sensitive check (e.g. of an API x
        position interaction).
    n_draws : int
        Posterior draws used for the replications.
    """

    table: pd.DataFrame
    p_value: float
    p_value_rows: float
    n_draws: int

    def to_dict(self) -> dict:
        return {"p_value": _num(self.p_value), "p_value_rows": _num(self.p_value_rows), "n_draws": self.n_draws,
                "table": _records(self.table)}


@dataclass(frozen=True)
class BayesResult(ReprHTMLMixin):
    """Result of :func:`fit_bayes`.

    Attributes
    ----------
    idata : arviz.InferenceData
        ``posterior`` (alpha, mu, beta, beta_bar, sigma_alpha, sigma_beta, all sum-to-zero
        identified), ``sample_stats``, ``log_likelihood`` (one multinomial per row),
        ``posterior_predictive`` (replicated counts, thinned to at most 1,000 draws),
        ``observed_data`` and ``constant_data`` (the row design). Save with
        ``result.idata.to_netcdf(path)``.
    position_effects : pandas.DataFrame
        One row per LLM and position (``beta``) plus the shared ``beta_bar`` (``llm == "(shared)"``):
        ``mean``, ``sd``, ``hdi_low``, ``hdi_high``.
    first_vs_last : pandas.DataFrame
        Per LLM: ``p_first_beats_last`` = P(beta[first] > beta[last] | data) and the posterior of
        the difference.
    api_effects : pandas.DataFrame
        Shared API effects ``mu`` per cluster and tool (``llm == "(shared)"``) and each LLM's
        ``alpha``, with ``n_used`` (valid choices behind the cell; 0 = a prediction from the hierarchy).
    implied : pandas.DataFrame
        Model-implied ``delta_api`` and ``delta_pos`` per LLM (mean over clusters of the TV to
        uniform of the choice probabilities) under the ``logged`` orderings and under uniformly
        ``randomised`` orderings: ``mean``, ``sd``, ``hdi_low``, ``hdi_high``.
    variance_shares : pandas.DataFrame
        For ``api`` and ``position`` effects: the share of the effects' variance that all LLMs have
        in common (``share_shared``) against the between-LLM part.
    ppc : PosteriorPredictiveCheck
    diagnostics : BayesDiagnostics
    rows : dict
        ``{"total": n, "used": n, "excluded": {reason: n}}``.
    rows_by_llm : dict
        The same per LLM label.
    llms : list of str
        LLM labels (the ``by`` values joined by ``", "``).
    llm_keys : list of dict
    clusters : list of str
    tools : dict
        ``{cluster: [tool_id, ...]}`` (catalog order, tools shown at least once).
    n_positions : int
    by : list of str
    priors : dict
    hdi_prob : float
    mismatch : str
    seed : object
        The ``rng`` argument as given (int or None; ``"generator"`` for a Generator).
    warnings : list of str
    """

    idata: object = field(repr=False)
    position_effects: pd.DataFrame = field(repr=False)
    first_vs_last: pd.DataFrame = field(repr=False)
    api_effects: pd.DataFrame = field(repr=False)
    implied: pd.DataFrame = field(repr=False)
    variance_shares: pd.DataFrame = field(repr=False)
    ppc: PosteriorPredictiveCheck = field(repr=False)
    diagnostics: BayesDiagnostics
    rows: dict
    rows_by_llm: dict = field(repr=False)
    llms: list = field(default_factory=list)
    llm_keys: list = field(default_factory=list, repr=False)
    clusters: list = field(default_factory=list, repr=False)
    tools: dict = field(default_factory=dict, repr=False)
    n_positions: int = 0
    by: list = field(default_factory=list)
    priors: dict = field(default_factory=dict, repr=False)
    hdi_prob: float = 0.94
    mismatch: str = "exclude"
    seed: object = None
    warnings: list = field(default_factory=list, repr=False)

    def to_frame(self) -> pd.DataFrame:
        """Tidy, unrounded table of every summary: one row per quantity.

        Columns: ``quantity`` (``beta``, ``beta_bar``, ``alpha``, ``mu``, ``delta_api``,
        ``delta_pos``, ``share_shared``), ``llm``, ``cluster``, ``tool_id``, ``position``,
        ``orderings``, ``mean``, ``sd``, ``hdi_low``, ``hdi_high``.
        """
        parts = []
        pe = self.position_effects.assign(quantity=np.where(self.position_effects["llm"] == _SHARED, "beta_bar",
                                                            "beta"))
        parts.append(pe)
        ae = self.api_effects.assign(quantity=np.where(self.api_effects["llm"] == _SHARED, "mu", "alpha"))
        parts.append(ae.drop(columns=["api_index", "n_used"]))
        parts.append(self.implied.rename(columns={"metric": "quantity"}))
        vs = self.variance_shares.rename(columns={"share_shared": "mean", "share_shared_sd": "sd",
                                                  "share_low": "hdi_low", "share_high": "hdi_high"})
        parts.append(vs.assign(quantity="share_shared", llm=_SHARED)[["quantity", "llm", "effect", "mean", "sd",
                                                                     "hdi_low", "hdi_high"]])
        out = pd.concat(parts, ignore_index=True, sort=False)
        cols = ["quantity", "llm", "effect", "cluster", "tool_id", "position", "orderings", "mean", "sd", "hdi_low",
                "hdi_high"]
        for c in cols:
            if c not in out.columns:
                out[c] = None
        return out[cols]

    def to_dict(self) -> dict:
        """JSON-ready dict (the output of ``toolbias-stats bayes --json``)."""
        implied = {}
        for llm in self.llms:
            sub = self.implied[self.implied["llm"] == llm]
            implied[llm] = {m: {o: _summary_dict(sub[(sub["metric"] == m) & (sub["orderings"] == o)])
                                for o in ("logged", "randomised")} for m in ("delta_api", "delta_pos")}
        pos = {}
        for llm, sub in self.position_effects.groupby("llm", sort=False):
            pos[llm] = [{"position": int(r.position), **_summary_dict(r)} for r in sub.itertuples()]
        fvl = {r.llm: {"p_first_beats_last": _num(r.p_first_beats_last), **_summary_dict(r)}
               for r in self.first_vs_last.itertuples()}
        api = {}
        for (llm, cluster), sub in self.api_effects.groupby(["llm", "cluster"], sort=False):
            api.setdefault(llm, {})[cluster] = [{"tool_id": r.tool_id, "n_used": int(r.n_used), **_summary_dict(r)}
                                                for r in sub.itertuples()]
        shares = {r.effect: {"mean": _num(r.share_shared), "sd": _num(r.share_shared_sd),
                             "hdi": [_num(r.share_low), _num(r.share_high)],
                             "sd_shared": _num(r.sd_shared), "sd_between": _num(r.sd_between)}
                  for r in self.variance_shares.itertuples()}
        return {
            "model": "hierarchical multinomial logit: softmax(alpha[llm, cluster, tool] + beta[llm, position])",
            "by": self.by, "hdi_prob": self.hdi_prob, "priors": self.priors, "mismatch": self.mismatch,
            "rows": self.rows, "rows_by_llm": self.rows_by_llm,
            "diagnostics": self.diagnostics.to_dict(),
            "position_effects": pos, "first_vs_last": fvl, "api_effects": api,
            "implied": implied, "variance_shares": shares,
            "ppc_p": _num(self.ppc.p_value), "ppc_p_rows": _num(self.ppc.p_value_rows),
            "ppc": self.ppc.to_dict(), "warnings": list(self.warnings),
        }


_SHARED = "(shared)"


# ---------------------------------------------------------------------------------------------
# public entry point
def fit_bayes(log, *, by="model", draws=1000, tune=1000, chains=4, cores=None, sampler="auto",
              parameterization="auto", target_accept=0.8, hdi_prob=0.94, priors=None, mismatch="exclude",
              rng=None, progress=False) -> BayesResult:
    """Fit the hierarchical multinomial-logit model of API and position effects.

    An attempt by LLM ``m`` in cluster ``c`` that shows the tools in ordering ``o`` chooses the
    tool ``j`` with probability ``softmax_j(alpha[m, c, j] + beta[m, pos_o(j)])``, over the tools
    shown. The API effects ``alpha`` are pooled across LLMs around shared effects ``mu``, the
    position effects ``beta`` around a shared ``beta_bar``.

    Parameters
    ----------
    log : SelectionLog, Study or path to a study manifest
    by : str or list of str, default "model"
        Columns whose values define one "LLM" of the model (e.g. ``"model,condition"``).
    draws, tune : int, default 1000
        Posterior draws and warm-up iterations per chain.
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
        scale; otherwise non-centred, which avoids the funnel of a weakly identified scale.
    target_accept : float, default 0.8
        NUTS target acceptance rate (raise it, e.g. to 0.95, if the fit reports divergences).
    hdi_prob : float, default 0.94
        Probability mass of the highest-density intervals (ArviZ's default).
    priors : dict, optional
        Override the prior scales in :data:`DEFAULT_PRIORS` (keys ``mu_sd``, ``sigma_alpha_sd``,
        ``beta_bar_sd``, ``sigma_beta_sd``; positive numbers).
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

    Returns
    -------
    BayesResult
        Summaries (``position_effects``, ``first_vs_last``, ``api_effects``, ``implied``,
        ``variance_shares``, ``ppc``), ``diagnostics`` and the full ``idata``.

    Raises
    ------
    ValueError
        An invalid argument (the message names it) or a log without any usable row.
    ImportError
        ``sampler="nutpie"``/``"numpyro"`` without the optional dependency; the message names
        the pip extra.

    Warns
    -----
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
    ``y[m, c, o, p]`` of choices of position ``p`` (``n[m, c, o]`` in total); each
    ``y[m, c, o, :]`` is Multinomial(``n[m, c, o]``, ``softmax(alpha[m, c, tool_o(p)] + beta[m, p])``)
    over the ``K_o`` positions shown. Clusters may have different sizes, orderings may be any
    permutations (or subsets) of the cluster's tools, and positions are absolute (1 = first).
    Attempts are treated as exchangeable given (LLM, cluster, ordering): heterogeneity between
    queries is not modelled, so the intervals describe these queries, not a population of queries.

    **Hierarchy and identifiability.** ``alpha[m, c, :] = mu[c, :] + sigma_alpha * z[m, c, :]``
    and ``beta[m, :] = beta_bar + sigma_beta * z2[m, :]``, with ``mu[c, :]``, ``z[m, c, :]``,
    ``beta_bar`` and ``z2[m, :]`` zero-sum normal (sum to zero within a cluster / over positions;
    the softmax is blind to a common shift). With one LLM there is nothing to pool: ``alpha = mu``
    and ``beta = beta_bar``, and the scales are not in the model.

    **Priors** (logit scale, :data:`DEFAULT_PRIORS`):

    - ``mu[c, :] ~ ZeroSumNormal(1.5)``: a pairwise log-odds between two tools has sd
      1.5·sqrt(2) = 2.1, so one tool may be picked ~60 times as often as another at 95% prior mass,
      while a tool that is never chosen still gets a finite effect.
    - ``sigma_alpha ~ HalfNormal(1)``: LLMs may disagree by about 2 log-odds on a tool (a reversal
      of preference) but the scale stays finite with few LLMs.
    - ``beta_bar ~ ZeroSumNormal(1)``: position effects reported in audits are odds factors of
      2-10 between first and last; pairwise sd 1.4 covers a factor 16.
    - ``sigma_beta ~ HalfNormal(1)``: LLMs differ widely in position bias (BiasBusters:
      delta_pos from 0.17 to 0.50).

    **Parameterisation.** The centred form samples each (LLM, cluster) cell's effects in its own
    reference coding (the cell's most chosen tool, and the LLM's most chosen position, is 0), which
    keeps the posterior nearly uncorrelated when a cell has a rarely chosen tool; the shared means
    ``mu`` and ``beta_bar`` are integrated out analytically (Normal-Normal) and drawn exactly from
    their conditional posterior after sampling, which removes their funnel with the scales. The
    non-centred form samples ``z`` through PyMC's orthonormal zero-sum basis. Both define the same
    posterior on the identified (sum-to-zero) effects; ``docs/bayes.md`` compares their speed.

    **Implied bias.** For each draw, the choice probabilities of every tool and position are
    averaged over the orderings (``logged``: weighted by the valid choices logged under each;
    ``randomised``: all K! orderings equally, exactly for K <= 5, else 24 random permutations with
    all their K cyclic shifts), and delta = mean over clusters of TV(p, uniform) = ½·Σ|p - 1/K|.
    This is the *true* TV of the fitted chooser, not the plug-in TV of observed rates, which is
    biased upward by sampling noise. Under randomised orderings position effects cannot create
    tool bias (with ``alpha = 0``, delta_api = 0 exactly) and tool effects cannot create position
    bias (with ``beta = 0``, delta_pos = 0 exactly); delta_pos itself does not vanish, since an LLM
    that prefers the first slot still picks it more often whatever is shown there.

    **Variance shares.** Per draw, ``V_shared = mean over clusters and tools of mu^2`` and
    ``V_between = mean over observed (LLM, cluster) cells and tools of (alpha - mu)^2``;
    ``share_shared = V_shared / (V_shared + V_between)`` near 1 means the LLMs agree on which tools
    win. The same for positions with ``beta_bar`` and ``beta``.

    Examples
    --------
    >>> import toolbias_stats as tbs
    >>> from toolbias_stats.models import fit_bayes
    >>> study = tbs.read_study(tbs.datasets.path("biasbusters/study.toml"))   # doctest: +SKIP
    >>> res = fit_bayes(study.log, rng=1)                                      # doctest: +SKIP
    >>> res.diagnostics.converged, res.implied.head()                          # doctest: +SKIP
    """
    t0 = time.perf_counter()
    args = _check_fit_bayes_args(by=by, draws=draws, tune=tune, chains=chains, cores=cores, sampler=sampler,
                                 parameterization=parameterization, target_accept=target_accept,
                                 hdi_prob=hdi_prob, priors=priors, mismatch=mismatch, rng=rng, progress=progress)
    counts = load_counts(log)
    if counts.cells is None:
        raise ValueError("these counts have no per-ordering cells (counted with cells=False); the Bayesian model "
                         "needs them: read the study again with cells=True.")
    by = check_by(by, counts.design_columns)
    args["by"] = by
    seed_repr = rng if isinstance(rng, (numbers.Integral, type(None))) and not isinstance(rng, bool) else "generator"
    if isinstance(seed_repr, numbers.Integral):
        seed_repr = int(seed_repr)
    gen = check_rng(rng)
    caught = []
    design = _design(counts, by, args["mismatch"])
    if design.rows["excluded"]:
        ex = design.rows["excluded"]
        msg = (f"{sum(ex.values())} of {design.rows['total']} rows cannot enter the model and are excluded: "
               f"{ex}")
        warnings.warn(msg, ExcludedRowsWarning, stacklevel=2)
        caught.append(msg)
    param = args["parameterization"]
    if param == "auto":
        per_tool = design.min_per_tool()
        rich = (per_tool >= _CENTERED_MIN_PER_TOOL_ONE_LLM if design.M == 1 else
                design.M >= _CENTERED_MIN_LLMS and per_tool >= _CENTERED_MIN_PER_TOOL)
        param = "centered" if rich else "noncentered"
    sampler_seed = int(gen.integers(0, 2**31 - 1))
    spec = _ModelSpec(design, args["priors"], param)
    raw = _sample(spec, sampler=args["sampler"], draws=args["draws"], tune=args["tune"], chains=args["chains"],
                  cores=args["cores"], seed=sampler_seed, target_accept=args["target_accept"],
                  progress=args["progress"])
    post = spec.derived(raw.posterior, gen)
    diag_vals = _diagnostics(post, raw.sample_stats, design)
    result = _summarise(design, spec, post, raw, diag_vals, args, param, sampler_seed, seed_repr, gen, caught, t0)
    return result


# ---------------------------------------------------------------------------------------------
# argument checks
def _check_fit_bayes_args(*, by, draws, tune, chains, cores, sampler, parameterization, target_accept, hdi_prob,
                          priors, mismatch, rng, progress) -> dict:
    def count(name, v, low):
        if isinstance(v, bool) or not isinstance(v, numbers.Integral) or v < low:
            raise ValueError(f"`{name}` must be an integer >= {low}; got {v!r} instead.")
        return int(v)

    out = {"draws": count("draws", draws, 10), "tune": count("tune", tune, 0), "chains": count("chains", chains, 1)}
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
    for name, v in (("target_accept", target_accept), ("hdi_prob", hdi_prob)):
        if isinstance(v, bool) or not isinstance(v, numbers.Real) or not 0 < float(v) < 1:
            raise ValueError(f"`{name}` must be a number in (0, 1); got {v!r} instead.")
    out["target_accept"] = float(target_accept)
    out["hdi_prob"] = float(hdi_prob)
    merged = dict(DEFAULT_PRIORS)
    if priors is not None:
        if not isinstance(priors, dict):
            raise ValueError(f"`priors` must be a dict with keys {sorted(DEFAULT_PRIORS)}; "
                             f"got {type(priors).__name__} instead.")
        unknown = sorted(set(priors) - set(DEFAULT_PRIORS))
        if unknown:
            raise ValueError(f"`priors` has unknown key(s) {unknown}; valid keys: {sorted(DEFAULT_PRIORS)}.")
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
# design: aggregated counts per (LLM, cluster, ordering)
@dataclass
class _Design:
    llms: list
    llm_keys: list
    clusters: list
    tools: list               # per cluster: tool ids (catalog order, shown at least once)
    K: np.ndarray             # (C,) tools per cluster
    P: int                    # longest list shown
    row_llm: np.ndarray       # (R,)
    row_cluster: np.ndarray   # (R,)
    row_len: np.ndarray       # (R,) positions shown
    row_tools: np.ndarray     # (R, P) tool index (within the cluster) at each position, -1 = padding
    y: np.ndarray             # (R, P) valid choices per position
    orderings: list           # (R,) the ordering strings
    rows: dict
    rows_by_llm: dict

    @property
    def n(self):
        return self.y.sum(1)

    @property
    def M(self):
        return len(self.llms)

    @property
    def C(self):
        return len(self.clusters)

    @property
    def Kmax(self):
        return int(self.K.max())

    def cell_counts(self) -> np.ndarray:
        """(M, C) valid choices per (LLM, cluster)."""
        out = np.zeros((self.M, self.C))
        np.add.at(out, (self.row_llm, self.row_cluster), self.n)
        return out

    def tool_counts(self) -> np.ndarray:
        """(M, C, Kmax) valid choices per tool."""
        out = np.zeros((self.M, self.C, self.Kmax))
        r, p = np.nonzero(self.row_tools >= 0)
        np.add.at(out, (self.row_llm[r], self.row_cluster[r], self.row_tools[r, p]), self.y[r, p])
        return out

    def position_counts(self) -> np.ndarray:
        """(M, P) valid choices per position."""
        out = np.zeros((self.M, self.P))
        np.add.at(out, self.row_llm, self.y)
        return out

    def min_per_tool(self) -> float:
        cc = self.cell_counts()
        obs = cc > 0
        return float((cc / self.K[None, :])[obs].min())


def _design(counts, by, mismatch) -> _Design:
    """The model's data from the counts' ``cells`` (one row per design, cluster, ordering, status, chosen
    tool and recorded position, with a ``count``): multinomial counts per (LLM, cluster, ordering)."""
    d = counts.cells
    w = d["count"].to_numpy(dtype=np.int64)
    total = int(w.sum())
    if by:
        labels = d[by].astype(str).agg(", ".join, axis=1) if len(by) > 1 else d[by[0]].astype(str)
    else:
        labels = pd.Series("all", index=d.index)
    labels = labels.astype(object).to_numpy()
    n_cells = len(d)
    reason = np.full(n_cells, None, dtype=object)
    status = d["status"].astype(str).to_numpy()
    reason[status != "ok"] = status[status != "ok"]
    ordering = d["ordering"].astype(object).to_numpy()
    unknown = np.array([o is None or o is pd.NA or (isinstance(o, float) and np.isnan(o)) for o in ordering])
    reason[(reason == None) & unknown] = "ordering_unknown"  # noqa: E711 (element-wise on an object array)
    live = np.flatnonzero(reason == None)  # noqa: E711
    chosen_tool = d["chosen_tool"].astype(object).to_numpy()
    chosen_pos = d["chosen_position"].to_numpy(dtype=float, na_value=np.nan)
    pos0 = np.full(n_cells, -1, dtype=np.int64)
    for i in live:
        shown = str(ordering[i]).split("|")
        t = chosen_tool[i]
        p_tool = shown.index(t) if t in shown else -1
        p_rec = int(chosen_pos[i]) - 1 if np.isfinite(chosen_pos[i]) else p_tool
        if p_tool < 0 and mismatch != "position":
            reason[i] = "chosen_not_shown"
        elif p_rec != p_tool and p_rec >= 0:
            if mismatch == "exclude":
                reason[i] = "position_mismatch"
            elif mismatch == "tool":
                pos0[i] = p_tool
            else:
                pos0[i] = p_rec
        else:
            pos0[i] = p_tool
    use = reason == None  # noqa: E711

    def by_reason(sel):
        ex = pd.Series(w[sel & ~use]).groupby(reason[sel & ~use].astype(str)).sum().sort_values(ascending=False)
        return {str(k): int(v) for k, v in ex.items()}

    everything = np.ones(n_cells, dtype=bool)
    rows = {"total": total, "used": int(w[use].sum()), "excluded": by_reason(everything)}
    rows_by_llm = {}
    for lab in pd.unique(labels):
        sel = labels == lab
        rows_by_llm[str(lab)] = {"total": int(w[sel].sum()), "used": int(w[sel & use].sum()),
                                 "excluded": by_reason(sel)}
    if not use.any():
        raise ValueError(f"no row has a valid choice and a known ordering, so the model has nothing to fit "
                         f"(excluded: {rows['excluded']}).")
    sub = pd.DataFrame({"llm": labels[use], "cluster": d["cluster_id"].astype(str).to_numpy()[use],
                        "ordering": ordering[use].astype(str), "pos": pos0[use], "count": w[use]})
    llms = sorted(pd.unique(sub["llm"]), key=_natural)
    present = set(sub["cluster"])
    catalog = counts.catalog
    clusters_all = [c for c in catalog.clusters if c in present]
    tools, keep = [], []
    for c in clusters_all:
        shown = set()
        for o in sub.loc[sub["cluster"] == c, "ordering"].unique():
            shown.update(o.split("|"))
        tl = [t for t in catalog.tools(c) if t in shown]
        if len(tl) >= 2:
            tools.append(tl)
            keep.append(c)
    if len(keep) < len(clusters_all):
        single = sub["cluster"].isin(set(clusters_all) - set(keep))
        n_single = int(sub.loc[single, "count"].sum())
        rows["used"] -= n_single
        rows["excluded"]["single_tool_cluster"] = n_single
        for lab, n in sub.loc[single].groupby("llm")["count"].sum().items():
            rows_by_llm[lab]["used"] -= int(n)
            rows_by_llm[lab]["excluded"]["single_tool_cluster"] = int(n)
        sub = sub[~single]
        if sub.empty:
            raise ValueError("every cluster with usable rows shows a single tool: there is no choice to model.")
        llms = [lab for lab in llms if lab in set(sub["llm"])]
    clusters = keep
    llm_keys = []
    for lab in llms:
        first = d.loc[labels == lab, by].iloc[0] if by else {}
        llm_keys.append({b: (first[b].item() if hasattr(first[b], "item") else first[b]) for b in by})
    agg = sub.groupby(["llm", "cluster", "ordering", "pos"], sort=False)["count"].sum().reset_index()
    llm_idx = {lab: i for i, lab in enumerate(llms)}
    cl_idx = {c: i for i, c in enumerate(clusters)}
    keys = agg[["llm", "cluster", "ordering"]].drop_duplicates()
    keys = keys.assign(m=keys["llm"].map(llm_idx), c=keys["cluster"].map(cl_idx))
    keys = keys.sort_values(["m", "c", "ordering"], kind="stable").reset_index(drop=True)
    lengths = keys["ordering"].str.count(r"\|").to_numpy() + 1
    P = int(lengths.max())
    R = len(keys)
    row_tools = np.full((R, P), -1, dtype=np.int64)
    tool_index = [{t: j for j, t in enumerate(tl)} for tl in tools]
    for r, (c, o) in enumerate(zip(keys["c"], keys["ordering"])):
        shown = o.split("|")
        row_tools[r, :len(shown)] = [tool_index[c][t] for t in shown]
    row_of = {(a, b, o): r for r, (a, b, o) in enumerate(zip(keys["llm"], keys["cluster"], keys["ordering"]))}
    y = np.zeros((R, P))
    for a, b, o, p, n in zip(agg["llm"], agg["cluster"], agg["ordering"], agg["pos"], agg["count"]):
        y[row_of[(a, b, o)], p] += n
    return _Design(llms=list(llms), llm_keys=[llm_keys[i] for i in range(len(llms))],
                   clusters=clusters, tools=tools, K=np.array([len(t) for t in tools]), P=P,
                   row_llm=keys["m"].to_numpy(np.int64), row_cluster=keys["c"].to_numpy(np.int64),
                   row_len=lengths.astype(np.int64), row_tools=row_tools, y=y,
                   orderings=keys["ordering"].tolist(), rows=rows, rows_by_llm=rows_by_llm)


# ---------------------------------------------------------------------------------------------
# the PyMC model
def _embedding(refs, k):
    """0/1 tensor E[..., f, j] sending free coordinate f to tool j, skipping the reference tool ``refs``."""
    refs = np.asarray(refs)
    e = np.zeros(refs.shape + (k - 1, k))
    for idx in np.ndindex(refs.shape):
        others = [j for j in range(k) if j != refs[idx]]
        e[idx + (np.arange(k - 1), others)] = 1.0
    return e


def _zerosum_extend(x, xp):
    """PyMC's zero-sum basis: K-1 free coordinates -> a vector that sums to zero (orthonormal map)."""
    n = x.shape[-1] + 1
    s = x.sum(-1, keepdims=True)
    norm = s / (np.sqrt(n) + n)
    fill = norm - s / np.sqrt(n)
    return xp.concatenate([x, fill], axis=-1) - norm


class _ModelSpec:
    """The PyMC model of a design, and the map from its free parameters to the identified effects."""

    def __init__(self, design: _Design, priors: dict, parameterization: str):
        self.design = design
        self.priors = priors
        self.param = parameterization
        self.hier = design.M > 1
        D = design
        tc = D.tool_counts()
        pc = D.position_counts()
        cc = D.cell_counts()
        # K groups: clusters with the same number of tools share tensors
        self.groups = []
        offset = 0
        for k in sorted(set(D.K.tolist())):
            cg = np.flatnonzero(D.K == k)
            pooled = tc[:, cg, :k].sum(0)
            ref_c = pooled.argmax(-1)
            cell = tc[:, cg, :k]
            ref_mc = np.where(cc[:, cg] > 0, cell.argmax(-1), ref_c[None, :])
            if not self.hier:
                ref_c = ref_mc[0]
            self.groups.append({"k": int(k), "clusters": cg, "ref_c": ref_c, "ref_mc": ref_mc, "offset": offset,
                                "E_a": _embedding(ref_mc, k)})
            offset += D.M * len(cg) * k
        self.n_alpha = offset
        P = D.P
        self.ref_b = int(pc.sum(0).argmax())
        self.ref_m = np.where(pc.sum(1) > 0, pc.argmax(1), self.ref_b)
        if not self.hier:
            self.ref_b = int(self.ref_m[0])
        self.E_b = _embedding(self.ref_m, P)
        # row-level gather indices into the flat alpha / beta vectors
        R = len(D.y)
        G = np.zeros((R, P), dtype=np.int64)
        grp_of = {int(c): g for g in self.groups for c in g["clusters"]}
        local = {int(c): i for g in self.groups for i, c in enumerate(g["clusters"])}
        for r in range(R):
            g = grp_of[int(D.row_cluster[r])]
            base = g["offset"] + (D.row_llm[r] * len(g["clusters"]) + local[int(D.row_cluster[r])]) * g["k"]
            L = D.row_len[r]
            G[r, :L] = base + D.row_tools[r, :L]
        mask = D.row_tools >= 0
        self.G = G
        self.B = np.where(mask, D.row_llm[:, None] * P + np.arange(P)[None, :], 0)
        self.neg = np.where(mask, 0.0, _NEG)
        self.a_cnt = np.bincount(G[mask], weights=D.y[mask], minlength=self.n_alpha)
        self.b_cnt = np.bincount(self.B[mask], weights=D.y[mask], minlength=D.M * P)
        self.n = D.n

    # -- building --------------------------------------------------------------------------------
    def build(self):
        import pymc as pm
        import pytensor.tensor as pt

        D, pr = self.design, self.priors
        M, P = D.M, D.P
        centred = self.param == "centered"
        with pm.Model() as model:
            alphas = []
            sa = pm.HalfNormal("sigma_alpha", pr["sigma_alpha_sd"]) if self.hier else None
            for g in self.groups:
                k, ng = g["k"], len(g["clusters"])
                sfx = f"_k{k}"
                if centred:
                    # each cell in its own reference coding (its most chosen tool = 0); the prior is put on
                    # the orthonormal zero-sum coordinates u, with mu integrated out analytically
                    a_f = pm.Flat("alpha_free" + sfx, shape=(M, ng, k - 1))
                    e_a = pm.Data("embed_alpha" + sfx, g["E_a"])
                    alpha = (a_f[..., None] * e_a).sum(-2)                            # (M, ng, k)
                    u = (alpha[..., None, :] * _basis(k)).sum(-1)                     # (M, ng, k-1)
                    pm.Potential("alpha_prior" + sfx, _pooled_normal_logp(u, sa, pr["mu_sd"], M, ng * (k - 1), pt))
                else:
                    mu_f = pm.Normal("mu_free" + sfx, 0.0, pr["mu_sd"], shape=(ng, k - 1))
                    mu = _zerosum_extend(mu_f, pt)
                    if self.hier:
                        z = pm.Normal("z_alpha" + sfx, 0.0, 1.0, shape=(M, ng, k - 1))
                        alpha = mu[None] + sa * _zerosum_extend(z, pt)
                    else:
                        alpha = mu[None]
                alphas.append(alpha.reshape((-1,)))
            alpha_flat = alphas[0] if len(alphas) == 1 else pt.concatenate(alphas)
            sb = pm.HalfNormal("sigma_beta", pr["sigma_beta_sd"]) if self.hier else None
            s_bb = pr["beta_bar_sd"]
            if centred:
                b_f = pm.Flat("beta_free", shape=(M, P - 1))
                beta = (b_f[..., None] * pm.Data("embed_beta", self.E_b)).sum(-2)     # (M, P)
                u = (beta[..., None, :] * _basis(P)).sum(-1)
                pm.Potential("beta_prior", _pooled_normal_logp(u[:, None, :], sb, s_bb, M, P - 1, pt))
            else:
                bb_f = pm.Normal("beta_bar_free", 0.0, s_bb, shape=(P - 1,))
                bb = _zerosum_extend(bb_f, pt)
                if self.hier:
                    z2 = pm.Normal("z_beta", 0.0, 1.0, shape=(M, P - 1))
                    beta = bb[None] + sb * _zerosum_extend(z2, pt)
                else:
                    beta = bb[None]
            beta_flat = beta.reshape((-1,))
            # multinomial log-likelihood (without the constant coefficient): the linear part from
            # sufficient statistics, the normaliser from one gather per (row, position)
            # (data as pm.Data: a second design of the same shapes reuses the compiled model)
            G = pm.Data("gather_alpha", self.G)
            B = pm.Data("gather_beta", self.B)
            logits = alpha_flat[G] + beta_flat[B] + pm.Data("pad", self.neg)
            lse = pt.logsumexp(logits, axis=1)
            pm.Potential("loglik", pt.dot(pm.Data("alpha_counts", self.a_cnt), alpha_flat)
                         + pt.dot(pm.Data("beta_counts", self.b_cnt), beta_flat)
                         - pt.dot(pm.Data("row_totals", self.n), lse))
        return model

    # -- free parameters -> identified effects (numpy, per draw) -----------------------------------
    def derived(self, posterior, gen) -> dict:
        """``{"alpha": (S, M, C, Kmax), "mu": (S, C, Kmax), "beta": (S, M, P), "beta_bar": (S, P),
        "sigma_alpha": (S,), "sigma_beta": (S,)}``, all sum-to-zero; S = chains x draws, NaN padding.

        In the centred form ``mu`` and ``beta_bar`` were integrated out of the sampled density;
        each draw gets one exact draw from their conditional posterior given the LLM effects and
        the scale (which does not depend on the data), so the joint draws are posterior draws.
        """
        D = self.design
        nch, ndr = posterior.sizes["chain"], posterior.sizes["draw"]
        S = nch * ndr

        def get(name):
            return np.asarray(posterior[name].values, dtype=float).reshape((S,) + posterior[name].shape[2:])

        M, C, Kmax = D.M, D.C, D.Kmax
        alpha = np.full((S, M, C, Kmax), np.nan)
        mu = np.full((S, C, Kmax), np.nan)
        centred = self.param == "centered"
        sa = get("sigma_alpha") if self.hier else None
        sb = get("sigma_beta") if self.hier else None
        for g in self.groups:
            k, cg, sfx = g["k"], g["clusters"], f"_k{g['k']}"
            if centred:
                a_ = np.einsum("smcf,mcfk->smck", get("alpha_free" + sfx), g["E_a"])
                a_ = a_ - a_.mean(-1, keepdims=True)
                m_ = _draw_pooled_mean(a_, sa, self.priors["mu_sd"], gen) if self.hier else a_[:, 0]
            else:
                m_ = _zerosum_extend(get("mu_free" + sfx), np)
                a_ = (m_[:, None] + sa[:, None, None, None] * _zerosum_extend(get("z_alpha" + sfx), np)
                      if self.hier else m_[:, None])
            mu[:, cg, :k] = m_ - m_.mean(-1, keepdims=True)
            alpha[:, :, cg, :k] = a_ - a_.mean(-1, keepdims=True)
        if centred:
            beta = np.einsum("smf,mfp->smp", get("beta_free"), self.E_b)
            beta = beta - beta.mean(-1, keepdims=True)
            bb = (_draw_pooled_mean(beta[:, :, None, :], sb, self.priors["beta_bar_sd"], gen)[:, 0]
                  if self.hier else beta[:, 0])
        else:
            bb = _zerosum_extend(get("beta_bar_free"), np)
            beta = (bb[:, None] + sb[:, None, None] * _zerosum_extend(get("z_beta"), np)
                    if self.hier else bb[:, None])
        bb = bb - bb.mean(-1, keepdims=True)
        beta = beta - beta.mean(-1, keepdims=True)
        out = {"alpha": alpha, "mu": mu, "beta": beta, "beta_bar": bb, "shape": (nch, ndr)}
        if self.hier:
            out["sigma_alpha"] = sa
            out["sigma_beta"] = sb
        return out


def _basis(k):
    """(k-1, k) orthonormal rows spanning the zero-sum vectors (PyMC's ZeroSumNormal basis)."""
    return _zerosum_extend(np.eye(k - 1), np)


def _pooled_normal_logp(u, sigma, s_mean, M, n_coord, pt):
    """log p(u) of effects u (M, G, F) in orthonormal zero-sum coordinates, with the shared mean integrated out.

    Per coordinate (g, f) the M values are ``u[m] = mean + sigma * e[m]`` with ``mean ~ N(0, s_mean^2)``:
    jointly ``N(0, sigma^2 I + s_mean^2 J)``. With one LLM (``sigma`` None) it is ``N(0, s_mean^2)``.
    """
    if sigma is None:
        return -(u ** 2).sum() / (2 * s_mean ** 2)
    q1 = (u ** 2).sum(0)
    q2 = u.sum(0) ** 2
    s2, v = s_mean ** 2, sigma ** 2
    quad = (q1 - s2 * q2 / (v + M * s2)).sum() / (2 * v)
    return -quad - n_coord * ((M - 1) * pt.log(sigma) + 0.5 * pt.log(v + M * s2))


def _draw_pooled_mean(effects, sigma, s_mean, gen):
    """One draw of the shared mean given the LLM effects (S, M, G, K) and the scale (S,): Normal-Normal."""
    M = effects.shape[1]
    k = effects.shape[-1]
    H = _basis(k)
    u = effects @ H.T                                                           # (S, M, G, k-1)
    prec = 1.0 / s_mean ** 2 + M / sigma ** 2                                   # (S,)
    mean = u.sum(1) / sigma[:, None, None] ** 2 / prec[:, None, None]
    draw = mean + gen.standard_normal(mean.shape) / np.sqrt(prec)[:, None, None]
    return draw @ H                                                             # (S, G, k)


# ---------------------------------------------------------------------------------------------
# sampling
class _Raw:
    def __init__(self, posterior, sample_stats):
        self.posterior = posterior
        self.sample_stats = sample_stats


def _sample(spec, *, sampler, draws, tune, chains, cores, seed, target_accept, progress) -> _Raw:
    if sampler in _EXTRAS:
        _require(sampler)
    if sampler == "numpyro" and "jax" not in sys.modules and "XLA_FLAGS" not in os.environ:
        # jax reads this once, at import: one CPU "device" per core lets the chains run in parallel
        os.environ["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={cores}"
    import pymc as pm

    model = spec.build()
    with warnings.catch_warnings():
        # PyMC's own convergence messages are replaced by ours (one place, with thresholds)
        warnings.simplefilter("ignore", UserWarning)
        warnings.simplefilter("ignore", RuntimeWarning)
        warnings.simplefilter("ignore", FutureWarning)
        with model:
            if sampler in ("pymc", "pymc-numba"):
                kw = {"compile_kwargs": {"mode": "NUMBA"}} if sampler == "pymc-numba" else {}
                idata = pm.sample(draws=draws, tune=tune, chains=chains, cores=cores, random_seed=seed,
                                  target_accept=target_accept, progressbar=progress, quiet=not progress,
                                  compute_convergence_checks=False, idata_kwargs={"log_likelihood": False}, **kw)
            elif sampler == "nutpie":
                idata = pm.sample(draws=draws, tune=tune, chains=chains, cores=cores, random_seed=seed,
                                  target_accept=target_accept, progressbar=progress, nuts_sampler="nutpie",
                                  compute_convergence_checks=False)
            else:
                idata = pm.sample(draws=draws, tune=tune, chains=chains, random_seed=seed, target_accept=target_accept,
                                  progressbar=progress, nuts_sampler="numpyro", compute_convergence_checks=False,
                                  nuts_sampler_kwargs={"chain_method": "parallel"})
    return _Raw(idata.posterior, idata.sample_stats)


def _require(sampler):
    module, extra = _EXTRAS[sampler]
    try:
        __import__(module)
    except ImportError as exc:
        raise ImportError(f"sampler={sampler!r} needs the optional dependency {module!r}; install it with "
                          f"pip install 'toolbias_stats[{extra}]'") from exc


# ---------------------------------------------------------------------------------------------
# diagnostics and summaries
def _identified(post, design) -> dict:
    """Flattened (chain, draw, n) arrays of every identified parameter (padding dropped)."""
    nch, ndr = post["shape"]
    out = {}
    valid_tool = np.arange(design.Kmax)[None, :] < design.K[:, None]           # (C, Kmax)
    out["mu"] = post["mu"][:, valid_tool].reshape(nch, ndr, -1)
    out["alpha"] = post["alpha"][:, :, valid_tool].reshape(nch, ndr, -1)
    out["beta"] = post["beta"].reshape(nch, ndr, -1)
    out["beta_bar"] = post["beta_bar"].reshape(nch, ndr, -1)
    for k in ("sigma_alpha", "sigma_beta"):
        if k in post:
            out[k] = post[k].reshape(nch, ndr)
    return out


def _diagnostics(post, sample_stats, design) -> dict:
    import arviz as az
    import xarray as xr

    ident = _identified(post, design)
    nch = post["shape"][0]
    ds = xr.Dataset({name: xr.DataArray(arr if arr.ndim == 3 else arr[..., None], dims=("chain", "draw", name + "_i"))
                     for name, arr in ident.items()})
    rh = az.rhat(ds, method="rank") if nch >= 2 else None
    eb = az.ess(ds, method="bulk")
    et = az.ess(ds, method="tail")

    def extreme(d, fn):
        vals = np.concatenate([np.ravel(d[v].values) for v in d.data_vars])
        vals = vals[np.isfinite(vals)]
        return float(fn(vals)) if vals.size else np.nan

    div = int(np.asarray(sample_stats["diverging"]).sum()) if "diverging" in sample_stats else 0
    return {"max_rhat": extreme(rh, np.max) if rh is not None else np.nan, "min_ess_bulk": extreme(eb, np.min),
            "min_ess_tail": extreme(et, np.min), "divergences": div}


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


def _implied_logged(post, design, chunk=256):
    """(S, M, C) TV of tools and of positions under the logged orderings (NaN where undefined)."""
    D = design
    S = post["alpha"].shape[0]
    M, C, Kmax, P = D.M, D.C, D.Kmax, D.P
    mask = D.row_tools >= 0
    tools = np.where(mask, D.row_tools, 0)
    cells = D.row_llm * C + D.row_cluster
    n = D.n
    ncell = np.bincount(cells, weights=n, minlength=M * C)
    w = n / ncell[cells]
    # positions: a cell's delta_pos needs one list length
    lens = pd.DataFrame({"cell": cells, "L": D.row_len}).groupby("cell")["L"].agg(["min", "max"])
    uniform_len = np.zeros(M * C, dtype=bool)
    L_cell = np.zeros(M * C, dtype=np.int64)
    uniform_len[lens.index] = (lens["min"] == lens["max"]).to_numpy()
    L_cell[lens.index] = lens["max"].to_numpy()
    starts = np.r_[0, np.flatnonzero(np.diff(cells)) + 1]
    cell_ids = cells[starts]
    tv_api = np.full((S, M * C), np.nan)
    tv_pos = np.full((S, M * C), np.nan)
    K_cell = np.repeat(D.K[None, :], M, 0).ravel()[cell_ids]
    tool_valid = np.arange(Kmax)[None, :] < K_cell[:, None]
    pos_valid = np.arange(P)[None, :] < L_cell[cell_ids][:, None]
    r_idx, p_idx = np.nonzero(mask)
    for a in range(0, S, chunk):
        al = post["alpha"][a:a + chunk].reshape(-1, M * C * Kmax)
        be = post["beta"][a:a + chunk].reshape(-1, M * P)
        s = al.shape[0]
        logits = al[:, (cells * Kmax)[:, None] + tools] + be[:, D.row_llm[:, None] * P + np.arange(P)[None, :]]
        prob = _softmax_masked(logits, mask[None]) * w[None, :, None]           # (s, R, P)
        p_pos = np.add.reduceat(prob, starts, axis=1)                           # (s, cells, P)
        by_tool = np.zeros((s, len(D.y), Kmax))
        by_tool[:, r_idx, tools[r_idx, p_idx]] = prob[:, r_idx, p_idx]
        p_tool = np.add.reduceat(by_tool, starts, axis=1)                       # (s, cells, Kmax)
        u_t = 1.0 / K_cell[None, :, None]
        tv_api[a:a + s, cell_ids] = 0.5 * np.where(tool_valid[None], np.abs(p_tool - u_t), 0).sum(-1)
        u_p = 1.0 / L_cell[cell_ids][None, :, None]
        tvp = 0.5 * np.where(pos_valid[None], np.abs(p_pos - u_p), 0).sum(-1)
        tv_pos[a:a + s, cell_ids] = np.where(uniform_len[cell_ids][None], tvp, np.nan)
    return tv_api.reshape(S, M, C), tv_pos.reshape(S, M, C)


def _permutations(k, gen):
    if k <= _EXACT_PERMUTATION_K:
        return np.array(list(itertools.permutations(range(k))), dtype=np.int64), "exact"
    base = np.stack([gen.permutation(k) for _ in range(_RANDOM_BASE_PERMUTATIONS)])
    shifts = np.stack([np.roll(b, s) for b in base for s in range(k)])
    return shifts, f"{_RANDOM_BASE_PERMUTATIONS} random permutations x {k} cyclic shifts"


def _implied_randomised(post, design, gen, target=2_000_000):
    """(S, M, C) TV of tools and positions if every list were a uniformly random ordering of the cluster.

    With ``ea = exp(alpha)``, ``eb = exp(beta)`` and ordering ``s`` putting tool ``j`` at position
    ``pos_s(j)``, the denominator is ``den_s = sum_j ea_j eb_pos_s(j)``; then
    ``P(tool j) = ea_j mean_s eb_pos_s(j) / den_s`` and ``P(position p) = eb_p mean_s ea_tool_s(p) / den_s``:
    three batched matrix products per chunk of draws instead of a softmax per ordering.
    """
    D = design
    S = post["alpha"].shape[0]
    M, C = D.M, D.C
    tv_api = np.full((S, M, C), np.nan)
    tv_pos = np.full((S, M, C), np.nan)
    methods = {}
    for k in sorted(set(D.K.tolist())):
        cg = np.flatnonzero(D.K == k)
        if k > D.P:
            methods[k] = "not computed: lists this long were never shown"
            continue
        perms, how = _permutations(k, gen)
        methods[k] = how
        n_perm = len(perms)
        inv = np.argsort(perms, axis=1)                                         # inv[s, j] = position of tool j
        onehot = np.zeros((n_perm, k, k))                                       # [s, p, j] = 1 if tool j at p
        onehot[np.repeat(np.arange(n_perm), k), np.tile(np.arange(k), n_perm), perms.ravel()] = 1.0
        onehot = onehot.reshape(n_perm, k * k)
        chunk = max(1, target // (M * len(cg) * n_perm * k))
        for a in range(0, S, chunk):
            al = post["alpha"][a:a + chunk][:, :, cg, :k]                       # (s, M, cg, k)
            be = post["beta"][a:a + chunk][:, :, :k]                            # (s, M, k)
            ea = np.exp(al - al.max(-1, keepdims=True))
            eb = np.exp(be - be.max(-1, keepdims=True))
            ebp = eb[:, :, inv]                                                 # (s, M, n_perm, k): eb at pos_s(j)
            den = ea @ ebp.swapaxes(-1, -2)                                     # (s, M, cg, n_perm)
            w = 1.0 / den
            p_tool = ea * (w @ ebp) / n_perm                                    # (s, M, cg, k)
            q = (w @ onehot).reshape(w.shape[:-1] + (k, k))                     # [.., p, j]
            p_pos = eb[:, :, None, :] * (q @ ea[..., None])[..., 0] / n_perm    # (s, M, cg, k)
            s = al.shape[0]
            tv_api[a:a + s][:, :, cg] = 0.5 * np.abs(p_tool - 1.0 / k).sum(-1)
            tv_pos[a:a + s][:, :, cg] = 0.5 * np.abs(p_pos - 1.0 / k).sum(-1)
    return tv_api, tv_pos, methods


def _ppc(post, spec, gen, prob_hdi, max_draws=1000):
    """Replicated counts per row and the two chi-square posterior predictive p-values."""
    D = spec.design
    nch, ndr = post["shape"]
    thin = max(1, math.ceil(nch * ndr / max_draws))
    sel = (np.arange(nch)[:, None] * ndr + np.arange(0, ndr, thin)[None, :]).ravel()
    C, Kmax, P = D.C, D.Kmax, D.P
    mask = D.row_tools >= 0
    tools = np.where(mask, D.row_tools, 0)
    cells = D.row_llm * C + D.row_cluster
    al = post["alpha"][sel].reshape(len(sel), -1)
    be = post["beta"][sel].reshape(len(sel), -1)
    logits = al[:, (cells * Kmax)[:, None] + tools] + be[:, D.row_llm[:, None] * P + np.arange(P)[None, :]]
    p = _softmax_masked(logits, mask[None])                                     # (s, R, P)
    n = D.n.astype(np.int64)
    yrep = gen.multinomial(n, p)                                                # (s, R, P)
    E = n[None, :, None] * p

    def chi2(obs, exp):
        return np.where(exp > 0, (obs - exp) ** 2 / np.where(exp > 0, exp, 1), 0).sum((-1, -2))

    t_obs = chi2(D.y[None], E)
    t_rep = chi2(yrep, E)
    p_rows = float(np.mean(t_rep >= t_obs))
    # cluster x position table (all LLMs and orderings)
    onehot = np.zeros((C, len(D.y)))
    onehot[D.row_cluster, np.arange(len(D.y))] = 1
    obs_cp = onehot @ D.y                                                       # (C, P)
    rep_cp = np.einsum("cr,srp->scp", onehot, yrep)
    E_cp = np.einsum("cr,srp->scp", onehot, E)
    p_cp = float(np.mean(chi2(rep_cp, E_cp) >= chi2(obs_cp[None], E_cp)))
    lo, hi = _hdi(rep_cp, prob_hdi)
    shown = np.zeros((C, P), dtype=bool)
    for c in range(C):
        shown[c, : D.row_len[D.row_cluster == c].max()] = True
    cs, ps = np.nonzero(shown)
    table = pd.DataFrame({"cluster": [D.clusters[c] for c in cs], "position": ps + 1,
                          "observed": obs_cp[cs, ps], "replicated_mean": rep_cp.mean(0)[cs, ps],
                          "replicated_low": lo[cs, ps], "replicated_high": hi[cs, ps]})
    check = PosteriorPredictiveCheck(table=table, p_value=p_cp, p_value_rows=p_rows, n_draws=len(sel))
    return check, yrep, sel


def _summarise(design, spec, post, raw, diag_vals, args, param, sampler_seed, seed_repr, gen, caught, t0):
    import arviz as az
    import xarray as xr

    D = design
    prob = args["hdi_prob"]
    S = post["alpha"].shape[0]
    M, C, Kmax, P = D.M, D.C, D.Kmax, D.P
    llm_names = D.llms
    cc = D.cell_counts()
    tc = D.tool_counts()

    # position effects
    rows = []
    for m, lab in enumerate(llm_names):
        sm = _summ(post["beta"][:, m, :], prob)
        for p in range(P):
            rows.append({"llm": lab, "position": p + 1, **{k: float(v[p]) for k, v in sm.items()}})
    sm = _summ(post["beta_bar"], prob)
    for p in range(P):
        rows.append({"llm": _SHARED, "position": p + 1, **{k: float(v[p]) for k, v in sm.items()}})
    position_effects = pd.DataFrame(rows)
    diff = post["beta"][:, :, 0] - post["beta"][:, :, P - 1]                   # (S, M)
    sm = _summ(diff, prob)
    first_vs_last = pd.DataFrame({"llm": llm_names, "p_first_beats_last": (diff > 0).mean(0),
                                  "first_position": 1, "last_position": P,
                                  **{k: v for k, v in sm.items()}})

    # API effects
    rows = []
    sm_mu = _summ(post["mu"], prob)
    sm_a = _summ(post["alpha"], prob)
    for c, cl in enumerate(D.clusters):
        for j, t in enumerate(D.tools[c]):
            rows.append({"llm": _SHARED, "cluster": cl, "tool_id": t, "api_index": j + 1,
                         "n_used": int(tc[:, c, :].sum()), **{k: float(v[c, j]) for k, v in sm_mu.items()}})
    for m, lab in enumerate(llm_names):
        for c, cl in enumerate(D.clusters):
            for j, t in enumerate(D.tools[c]):
                rows.append({"llm": lab, "cluster": cl, "tool_id": t, "api_index": j + 1,
                             "n_used": int(cc[m, c]), **{k: float(v[m, c, j]) for k, v in sm_a.items()}})
    api_effects = pd.DataFrame(rows)

    # implied bias: mean over the clusters each LLM was logged on
    observed = cc > 0                                                           # (M, C)
    tva_log, tvp_log = _implied_logged(post, D)
    tva_rnd, tvp_rnd, perm_methods = _implied_randomised(post, D, gen)
    mixed = [(llm_names[m], D.clusters[c]) for m in range(M) for c in range(C)
             if observed[m, c] and np.isnan(tvp_log[0, m, c])]
    if mixed:
        msg = (f"lists of different lengths were shown in {len(mixed)} (LLM, cluster) cell(s) (e.g. {mixed[0]}); "
               "their logged-orderings delta_pos is undefined and left out of the means")
        warnings.warn(msg, DegenerateDataWarning, stacklevel=3)
        caught.append(msg)
    rows = []
    implied_draws = {}
    for metric, scen, tv in (("delta_api", "logged", tva_log), ("delta_pos", "logged", tvp_log),
                             ("delta_api", "randomised", tva_rnd), ("delta_pos", "randomised", tvp_rnd)):
        vals = np.where(observed[None], tv, np.nan)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            per_llm = np.nanmean(vals, axis=2)                                  # (S, M)
        implied_draws[(metric, scen)] = per_llm
        sm = _summ(per_llm, prob)
        for m, lab in enumerate(llm_names):
            rows.append({"llm": lab, "metric": metric, "orderings": scen, "n_clusters": int(observed[m].sum()),
                         **{k: float(v[m]) for k, v in sm.items()}})
    implied = pd.DataFrame(rows)

    # variance shares
    rows = []
    valid_tool = np.arange(Kmax)[None, :] < D.K[:, None]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        v_shared_api = np.nanmean(np.where(valid_tool[None], post["mu"] ** 2, np.nan).reshape(S, -1), 1)
        dev = (post["alpha"] - post["mu"][:, None]) ** 2
        dev = np.where((observed[:, :, None] & valid_tool[None])[None], dev, np.nan)
        v_between_api = np.nanmean(dev.reshape(S, -1), 1)
        v_shared_pos = (post["beta_bar"] ** 2).mean(1)
        v_between_pos = ((post["beta"] - post["beta_bar"][:, None]) ** 2).mean((1, 2))
    for eff, vs, vb in (("api", v_shared_api, v_between_api), ("position", v_shared_pos, v_between_pos)):
        if M > 1:
            share = vs / (vs + vb)
            sm = _summ(share, prob)
            rows.append({"effect": eff, "share_shared": float(sm["mean"]), "share_shared_sd": float(sm["sd"]),
                         "share_low": float(sm["hdi_low"]), "share_high": float(sm["hdi_high"]),
                         "sd_shared": float(np.sqrt(vs).mean()), "sd_between": float(np.sqrt(vb).mean())})
        else:
            rows.append({"effect": eff, "share_shared": np.nan, "share_shared_sd": np.nan, "share_low": np.nan,
                         "share_high": np.nan, "sd_shared": float(np.sqrt(vs).mean()), "sd_between": np.nan})
    variance_shares = pd.DataFrame(rows)

    # posterior predictive check
    ppc, yrep, sel = _ppc(post, spec, gen, prob)
    for name, pv in (("cluster x position", ppc.p_value), ("LLM x cluster x ordering x position", ppc.p_value_rows)):
        if pv < 0.05:
            msg = (f"posterior predictive check: p = {pv:.3f} on the {name} counts; the main-effects model misfits "
                   "(consider an API x position interaction or a per-cluster position effect)")
            warnings.warn(msg, MisfitWarning, stacklevel=3)
            caught.append(msg)

    # diagnostics
    flags = []
    if np.isfinite(diag_vals["max_rhat"]) and diag_vals["max_rhat"] > RHAT_MAX:
        flags.append(f"R-hat {diag_vals['max_rhat']:.4f} > {RHAT_MAX}")
    if not np.isfinite(diag_vals["max_rhat"]):
        flags.append("R-hat not computable (fewer than 2 chains)")
    if diag_vals["min_ess_bulk"] < ESS_MIN:
        flags.append(f"bulk ESS {diag_vals['min_ess_bulk']:.0f} < {ESS_MIN}")
    if diag_vals["divergences"] > 0:
        flags.append(f"{diag_vals['divergences']} divergent transition(s)")
    if flags:
        msg = "NOT CONVERGED: " + "; ".join(flags) + (" (run longer with more --draws/--tune, or raise "
                                                       "target_accept if there are divergences)")
        warnings.warn(msg, ConvergenceWarning, stacklevel=3)
        caught.insert(0, msg)

    idata = _inference_data(post, raw, spec, yrep, sel, az, xr)
    diagnostics = BayesDiagnostics(
        max_rhat=diag_vals["max_rhat"], min_ess_bulk=diag_vals["min_ess_bulk"],
        min_ess_tail=diag_vals["min_ess_tail"], divergences=diag_vals["divergences"], sampler=args["sampler"],
        seconds=time.perf_counter() - t0, chains=args["chains"], draws=args["draws"], tune=args["tune"],
        seed=sampler_seed, parameterization=param, flags=flags)
    idata.posterior.attrs.update({"sampler": args["sampler"], "parameterization": param, "seed": sampler_seed,
                                  "randomised_orderings": "; ".join(f"K={k}: {v}" for k, v in perm_methods.items())})
    return BayesResult(
        idata=idata, position_effects=position_effects, first_vs_last=first_vs_last, api_effects=api_effects,
        implied=implied, variance_shares=variance_shares, ppc=ppc, diagnostics=diagnostics, rows=D.rows,
        rows_by_llm=D.rows_by_llm, llms=list(llm_names), llm_keys=D.llm_keys, clusters=list(D.clusters),
        tools={c: list(t) for c, t in zip(D.clusters, D.tools)}, n_positions=P, by=list(args["by"]),
        priors=dict(args["priors"]),
        hdi_prob=prob, mismatch=args["mismatch"], seed=seed_repr, warnings=caught)


def _inference_data(post, raw, spec, yrep, sel, az, xr):
    """Assemble the ArviZ container (identified effects, stats, likelihood, replications, data)."""
    D = spec.design
    nch, ndr = post["shape"]
    S = nch * ndr
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
    posterior = xr.Dataset(pv, coords={**coords, "tool_id": (("cluster", "tool"), tool_ids.astype(str))})
    # pointwise log-likelihood of every row (full multinomial, with its coefficient)
    from scipy.special import gammaln

    mask = D.row_tools >= 0
    tools = np.where(mask, D.row_tools, 0)
    cells = D.row_llm * C + D.row_cluster
    al = post["alpha"].reshape(S, -1)
    be = post["beta"].reshape(S, -1)
    logits = al[:, (cells * Kmax)[:, None] + tools] + be[:, D.row_llm[:, None] * P + np.arange(P)[None, :]]
    z = np.where(mask[None], logits, -np.inf)
    lse = np.log(np.exp(z - z.max(-1, keepdims=True)).sum(-1)) + z.max(-1)
    ll = (np.where(mask[None], D.y[None] * logits, 0).sum(-1) - D.n[None] * lse
          + gammaln(D.n + 1)[None] - gammaln(D.y + 1).sum(-1)[None])
    row_coords = {"row": np.arange(len(D.y))}
    log_lik = xr.Dataset({"y": xr.DataArray(ll.reshape(nch, ndr, -1), dims=("chain", "draw", "row"))},
                         coords={"chain": coords["chain"], "draw": coords["draw"], **row_coords})
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
    return az.InferenceData(posterior=posterior, sample_stats=stats, log_likelihood=log_lik,
                            posterior_predictive=pp, observed_data=obs, constant_data=const)


# ---------------------------------------------------------------------------------------------
# simulation with known effects (tests, recovery, calibration)
def simulate_choice_log(alpha, beta, *, n_per_ordering=20, orderings="rotations", rng=None, model_names=None):
    """Simulate a SelectionLog from the model itself, with known API and position effects.

    Parameters
    ----------
    alpha : array_like of shape (M, C, K) or list of (M, K_c) arrays
        API effects per LLM, cluster and tool (any shift within a cluster is irrelevant). A list
        gives clusters of different sizes.
    beta : array_like of shape (M, P)
        Position effects per LLM, ``P >= max K``.
    n_per_ordering : int, default 20
        Attempts per (LLM, cluster, ordering); each attempt is one query shown in that ordering.
    orderings : {"rotations", "random", "fixed"} or int, default "rotations"
        ``"rotations"``: the K cyclic rotations of the catalog order; ``"random"``: a fresh
        uniformly random permutation per attempt; ``"fixed"``: always the catalog order; an int
        ``r``: r random permutations, each shown ``n_per_ordering`` times.
    rng : None, int or numpy.random.Generator
    model_names : list of str, optional
        LLM names (default ``"llm1"``, ``"llm2"``, ...).

    Returns
    -------
    SelectionLog
        Tools are named ``"c{c}_t{j}"`` (cluster ``"c"`` + 1-based index); positions 1-based.

    Examples
    --------
    >>> import numpy as np
    >>> log = simulate_choice_log(np.zeros((1, 2, 3)), np.zeros((1, 3)), n_per_ordering=2, rng=0)
    >>> len(log), sorted(log.data["cluster_id"].unique())
    (12, ['1', '2'])
    """
    from ..io._catalog import ToolCatalog
    from ..io._selection_log import SelectionLog

    gen = check_rng(rng)
    if isinstance(alpha, (list, tuple)) and not np.isscalar(alpha[0]) and np.ndim(alpha[0]) == 2:
        per_cluster = [np.asarray(a, dtype=float) for a in alpha]
    else:
        a = np.asarray(alpha, dtype=float)
        if a.ndim != 3:
            raise ValueError(f"`alpha` must have shape (M, C, K) or be a list of (M, K_c) arrays; "
                             f"got shape {a.shape} instead.")
        per_cluster = [a[:, c, :] for c in range(a.shape[1])]
    beta = np.asarray(beta, dtype=float)
    M = per_cluster[0].shape[0]
    if beta.ndim != 2 or beta.shape[0] != M or beta.shape[1] < max(p.shape[1] for p in per_cluster):
        raise ValueError(f"`beta` must have shape (M, P) with M = {M} and P >= the largest K; "
                         f"got shape {beta.shape} instead.")
    names = list(model_names) if model_names is not None else [f"llm{m + 1}" for m in range(M)]
    records = [{"cluster_id": str(c + 1), "tool_name": f"c{c + 1}_t{j + 1}", "api_name": "endpoint",
                "num_parameters": 1} for c, a in enumerate(per_cluster) for j in range(a.shape[1])]
    catalog = ToolCatalog.from_records(records, source="<simulated>")
    frames = []
    for c, a in enumerate(per_cluster):
        k = a.shape[1]
        tools = np.array(catalog.tools(str(c + 1)), dtype=object)
        for m in range(M):
            if orderings == "rotations":
                perms = np.stack([np.roll(np.arange(k), -r) for r in range(k)])
                perms = np.repeat(perms, n_per_ordering, axis=0)
            elif orderings == "fixed":
                perms = np.repeat(np.arange(k)[None], n_per_ordering, axis=0)
            elif orderings == "random":
                perms = np.stack([gen.permutation(k) for _ in range(n_per_ordering * k)])
            elif isinstance(orderings, numbers.Integral) and not isinstance(orderings, bool) and orderings >= 1:
                base = np.stack([gen.permutation(k) for _ in range(int(orderings))])
                perms = np.repeat(base, n_per_ordering, axis=0)
            else:
                raise ValueError("`orderings` must be 'rotations', 'random', 'fixed' or a positive int; "
                                 f"got {orderings!r} instead.")
            logits = a[m][perms] + beta[m, :k][None, :]
            p = np.exp(logits - logits.max(1, keepdims=True))
            p /= p.sum(1, keepdims=True)
            u = gen.random(len(perms))
            pos = np.minimum((u[:, None] > np.cumsum(p, 1)).sum(1), k - 1)
            chosen = tools[perms[np.arange(len(perms)), pos]]
            frames.append(pd.DataFrame({
                "model": names[m], "cluster_id": str(c + 1), "query_id": [str(i + 1) for i in range(len(perms))],
                "ordering": ["|".join(tools[p_]) for p_ in perms], "chosen_tool": chosen,
                "chosen_position": pos + 1, "status": "ok"}))
    frame = pd.concat(frames, ignore_index=True)
    frame["source_file"] = "<simulated>"
    return SelectionLog.from_frame(frame, catalog, source="<simulated>")


# ---------------------------------------------------------------------------------------------
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
