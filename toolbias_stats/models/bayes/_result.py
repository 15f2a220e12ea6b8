"""Frozen result objects of :func:`fit_bayes`: the fit, its diagnostics and its posterior predictive check."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from ..._display import ReprHTMLMixin

if TYPE_CHECKING:
    from ...metrics import BiasResult
from ._checks import PPC_BAND, compare_frequentist, fit_checks, fit_status
from ._common import _SHARED, ESS_MIN, RHAT_MAX, _num, _records, _summary_dict

__all__ = ["BayesResult", "BayesDiagnostics", "PosteriorPredictiveCheck"]

#: What each variant fits, in words (the ``model`` key of ``to_dict``).
_MODEL_TEXT = {
    "v1": "hierarchical multinomial logit: softmax(alpha[llm, cluster, tool] + beta[llm, position])",
    "v2": "hierarchical logit: softmax(alpha[llm, cluster, tool] + beta[llm, position] + delta[llm, cluster, "
          "position]), Dirichlet-multinomial per (llm, cluster, query, ordering)",
    "margin": "collapsed margin model: softmax(a[llm, cluster, tool]) and softmax(b[llm, cluster, position]) are the "
              "cell's tool and position margins, quasi-likelihood of the pooled counts tempered by each cell's "
              "per-query Pearson dispersion, spike-and-slab on delta = 0",
}


_NEG = -1.0e4  # logit of a padded (not shown) position: exp(-1e4) == 0 in float64


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

    Examples
    --------
    :func:`fit_bayes` builds it (``result.diagnostics``); by hand:

    >>> from toolbias_stats.models.bayes import BayesDiagnostics
    >>> d = BayesDiagnostics(max_rhat=1.004, min_ess_bulk=1250.0, min_ess_tail=1500.0, divergences=0,
    ...                      sampler="numpyro", seconds=31.0, chains=4, draws=1000, tune=1000, seed=1,
    ...                      parameterization="centered")
    >>> d.converged, d.to_dict()["thresholds"]
    (True, {'max_rhat': 1.01, 'min_ess_bulk': 400, 'divergences': 0})
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
    p_value_dispersion : float
        Posterior predictive p-value of the per-query dispersion (NaN when the fit had only counts,
        without the queries): ``T = sum over queries and tools of (t - E)^2 / E`` with ``t`` the
        choices of a tool over all orderings and runs of a query and ``E`` its expectation under the
        model (see :func:`query_dispersion`). It checks whether the model reproduces how much queries
        differ from each other. For variants with query effects the replications are new queries
        from the fitted population.
    dispersion : pandas.DataFrame or None
        The dispersion per LLM and overall (``llm == "(all)"``): ``queries``, ``observed``,
        ``replicated_mean``, ``replicated_low``/``replicated_high``, ``ratio`` (observed / replicated
        mean) and ``p_value``; for ``model="margin"`` also ``no_joint_share``, the share of the checked
        (posterior draw, cell) pairs whose tool and position margins no chooser has under the logged
        orderings.

    Examples
    --------
    :func:`fit_bayes` builds it (``result.ppc``); by hand:

    >>> import pandas as pd
    >>> from toolbias_stats.models.bayes import PosteriorPredictiveCheck
    >>> t = pd.DataFrame({"cluster": ["1", "1"], "position": [1, 2], "observed": [60, 40],
    ...                   "replicated_mean": [58.2, 41.8], "replicated_low": [49, 33], "replicated_high": [67, 51]})
    >>> ppc = PosteriorPredictiveCheck(table=t, p_value=0.42, p_value_rows=0.31, n_draws=1000)
    >>> ppc.to_dict()["p_value"], len(ppc.to_dict()["table"])
    (0.42, 2)
    """

    table: pd.DataFrame
    p_value: float
    p_value_rows: float
    n_draws: int
    p_value_dispersion: float = float("nan")
    dispersion: pd.DataFrame = None

    def to_dict(self) -> dict:
        out = {"p_value": _num(self.p_value), "p_value_rows": _num(self.p_value_rows), "n_draws": self.n_draws,
               "table": _records(self.table)}
        if self.dispersion is not None:
            out["p_value_dispersion"] = _num(self.p_value_dispersion)
            out["dispersion"] = _records(self.dispersion)
        return out


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
    model : str
        The variant fitted (``"v1"`` or ``"v2"``; see :data:`MODELS`).
    cluster_position_effects : pandas.DataFrame or None
        Variants with per-(LLM, cluster) position effects: one row per LLM, cluster and position
        with ``beta[m, c, p] = beta[m, p] + delta[m, c, p]`` (``mean``, ``sd``, ``hdi_low``,
        ``hdi_high``) and ``delta_mean`` (the cluster's deviation from the LLM's position effect).
    scales : pandas.DataFrame
        The scale and dispersion parameters of the variant (``sigma_alpha``, ``sigma_beta``,
        ``sigma_delta``, ``sigma_eta`` per LLM, ``kappa`` per LLM and cluster and the intra-prompt
        correlation ``rho = 1 / (1 + kappa)``): ``quantity``, ``llm``, ``cluster``, ``mean``, ``sd``,
        ``hdi_low``, ``hdi_high``.
    implied_cells : pandas.DataFrame or None
        ``model="margin"`` only: the implied δ (logged orderings) per LLM (``cluster == "(shared)"``, the mean
        over its clusters) and per (LLM, cluster), ``metric`` (``delta_api``, ``delta_pos``), ``mean``, ``sd``,
        ``hdi_low``, ``hdi_high`` of its spike-and-slab posterior, ``p0`` (the posterior probability of δ = 0:
        equal worths of the cell's tools, no position effect of the LLM; for an LLM's δ_API, all its cells), and
        ``p_below_margin`` = P(δ < ``margin``) for the user's ``margin``.

    Examples
    --------
    A tiny simulated study and a deliberately short chain (it warns that it has not converged; see
    :func:`fit_bayes` for real settings). ``to_frame()`` is one row per quantity:

    >>> import warnings
    >>> import numpy as np
    >>> from toolbias_stats.models import fit_bayes, simulate_bayes_log
    >>> alpha = np.array([[[1.0, 0.0, -1.0], [0.0, 0.5, -0.5]]])     # API effects: LLM x cluster x tool
    >>> log = simulate_bayes_log(alpha, np.array([[1.0, 0.0, -1.0]]), n_per_ordering=20, rng=1)
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore")
    ...     res = fit_bayes(log, model="v1", draws=50, tune=50, chains=1, cores=1, sampler="pymc", rng=1)
    >>> res.to_frame().columns.tolist()[:4], res.diagnostics.draws
    (['quantity', 'llm', 'effect', 'cluster'], 50)
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
    model: str = "v1"
    cluster_position_effects: pd.DataFrame = field(default=None, repr=False)
    scales: pd.DataFrame = field(default=None, repr=False)
    implied_cells: pd.DataFrame = field(default=None, repr=False)
    # the fitted model and its draws, for compare_bayes (not part of the result's value)
    _spec: object = field(default=None, repr=False, compare=False)
    _post: object = field(default=None, repr=False, compare=False)

    def to_frame(self) -> pd.DataFrame:
        """Tidy, unrounded table of every summary: one row per quantity.

        Columns: ``quantity`` (``beta``, ``beta_bar``, ``alpha``, ``mu``, ``delta_api``,
        ``delta_pos``, ``share_shared``; with the variants' extensions also ``beta_cell``
        (per-cluster position effects) and the scales ``sigma_alpha``, ``sigma_beta``,
        ``sigma_delta``, ``sigma_eta``, ``kappa``, ``rho``), ``llm``, ``cluster``, ``tool_id``,
        ``position``, ``orderings``, ``mean``, ``sd``, ``hdi_low``, ``hdi_high``, and beside every
        interval whether the model fits the data it summarises: ``fits`` (False when the per-query
        dispersion check of the row's LLM or the cluster x position check has a p-value outside
        [0.05, 0.95]; None when neither could run) and ``failed_checks`` (the failing checks with
        their p-values; :meth:`fit_checks` has them all).
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
        if self.cluster_position_effects is not None:
            parts.append(self.cluster_position_effects.drop(columns=["delta_mean"]).assign(quantity="beta_cell"))
        if self.scales is not None:
            parts.append(self.scales)
        if self.implied_cells is not None:
            cells = self.implied_cells[self.implied_cells["cluster"] != _SHARED]
            parts.append(cells.assign(quantity=cells["metric"] + "_cell", orderings="logged")
                         .drop(columns=["metric", "p0", "p_below_margin", "margin"]))
        out = pd.concat(parts, ignore_index=True, sort=False)
        cols = ["quantity", "llm", "effect", "cluster", "tool_id", "position", "orderings", "mean", "sd", "hdi_low",
                "hdi_high"]
        for c in cols:
            if c not in out.columns:
                out[c] = None
        out = out[cols]
        status = fit_status(self)
        out["fits"] = pd.Series([status.get(llm, (None, ""))[0] for llm in out["llm"]], dtype=object)
        out["failed_checks"] = [status.get(llm, (None, ""))[1] for llm in out["llm"]]
        return out

    def fit_checks(self) -> pd.DataFrame:
        """The posterior predictive checks behind ``fits``: per LLM (and ``"(shared)"``) the per-query dispersion
        and the cluster x position check, with ``p_value`` and ``fits`` (see ``docs/bayes.md``, Outputs)."""
        return fit_checks(self)

    def compare_frequentist(self, bias: BiasResult) -> pd.DataFrame:
        """The implied δ (logged orderings) next to :func:`~toolbias_stats.selection_bias`'s calibrated interval
        of the same LLMs, with ``disagree`` = the intervals do not overlap (:func:`._checks.compare_frequentist`)."""
        return compare_frequentist(self, bias)

    def to_dict(self) -> dict:
        """JSON-ready dict (the output of ``toolbias-stats bayes --json``)."""
        implied = {}
        status = fit_status(self)
        for llm in self.llms:
            sub = self.implied[self.implied["llm"] == llm]
            fit = {"fits": status[llm][0], "failed_checks": status[llm][1]}
            implied[llm] = {m: {o: {**_summary_dict(sub[(sub["metric"] == m) & (sub["orderings"] == o)]), **fit}
                                for o in ("logged", "randomised")} for m in ("delta_api", "delta_pos")}
        pos = {}
        for llm, sub in self.position_effects.groupby("llm", sort=False):
            pos[llm] = [{"position": int(r.position), **_summary_dict(r)} for r in sub.itertuples()]
        fvl = {r.llm: {"p_first_beats_last": _num(r.p_first_beats_last), **_summary_dict(r)}
               for r in self.first_vs_last.itertuples()}
        api: dict = {}
        for (llm, cluster), sub in self.api_effects.groupby(["llm", "cluster"], sort=False):
            api.setdefault(llm, {})[cluster] = [{"tool_id": r.tool_id, "n_used": int(r.n_used), **_summary_dict(r)}
                                                for r in sub.itertuples()]
        shares = {r.effect: {"mean": _num(r.share_shared), "sd": _num(r.share_shared_sd),
                             "hdi": [_num(r.share_low), _num(r.share_high)],
                             "sd_shared": _num(r.sd_shared), "sd_between": _num(r.sd_between)}
                  for r in self.variance_shares.itertuples()}
        out = {
            "model": _MODEL_TEXT.get(self.model, self.model), "variant": self.model,
            "by": self.by, "hdi_prob": self.hdi_prob, "priors": self.priors, "mismatch": self.mismatch,
            "rows": self.rows, "rows_by_llm": self.rows_by_llm,
            "diagnostics": self.diagnostics.to_dict(),
            "position_effects": pos, "first_vs_last": fvl, "api_effects": api,
            "implied": implied, "variance_shares": shares,
            "ppc_p": _num(self.ppc.p_value), "ppc_p_rows": _num(self.ppc.p_value_rows),
            "ppc": self.ppc.to_dict(), "warnings": list(self.warnings),
            "fit_checks": {"band": list(PPC_BAND), "checks": _records(fit_checks(self))},
        }
        if self.scales is not None:
            out["scales"] = _records(self.scales)
        if self.cluster_position_effects is not None:
            cpe: dict = {}
            for (llm, cluster), sub in self.cluster_position_effects.groupby(["llm", "cluster"], sort=False):
                cpe.setdefault(llm, {})[cluster] = [{"position": int(r.position), "delta": _num(r.delta_mean),
                                                     **_summary_dict(r)} for r in sub.itertuples()]
            out["cluster_position_effects"] = cpe
        if self.ppc.dispersion is not None:
            out["ppc_p_dispersion"] = _num(self.ppc.p_value_dispersion)
        if self.implied_cells is not None:
            out["delta_margin"] = _num(self.implied_cells["margin"].iloc[0])
            out["implied_cells"] = _records(self.implied_cells.drop(columns=["margin"]))
        return out

