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
#: ``sigma_eta_sd`` the HalfNormal scale of query effects, ``rho_a``/``rho_b`` the Beta prior of
#: the intra-prompt correlation rho = 1 / (1 + kappa) of the Dirichlet-multinomial.
EXTENSION_PRIORS = {"sigma_delta_sd": 1.0, "sigma_eta_sd": 1.0, "rho_a": 1.0, "rho_b": 1.0}
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
    margin : bool
        The collapsed margin model (its own fit, ``_margin_fit``): parameters on the tool and position margins
        of every (LLM, cluster), query heterogeneity through each cell's per-query dispersion.
    """

    name: str
    cluster_position: bool
    dirichlet: bool
    query_effects: bool
    description: str
    margin: bool = False

    @property
    def needs_queries(self) -> bool:
        """Whether the variant needs the query of each attempt (the row-level log, not only counts)."""
        return self.dirichlet or self.query_effects or self.margin

    def priors(self) -> tuple:
        keys = list(DEFAULT_PRIORS)
        if self.cluster_position:
            keys.append("sigma_delta_sd")
        if self.query_effects:
            keys.append("sigma_eta_sd")
        if self.dirichlet:
            keys += ["rho_a", "rho_b"]
        return tuple(keys)


#: The named variants of ``fit_bayes(..., model=...)``: the ones we stand behind (issue 38). The experimental
#: query models of issue 22 (:data:`MOVED_MODELS`), none of which passes its own checks (docs/bayes.md), live in
#: the repository's ``analyses/bayes_experimental``.
MODEL_VARIANTS = {
    "v1": ModelVariant("v1", False, False, False,
                       "main effects: softmax(alpha[llm, cluster, tool] + beta[llm, position]), one multinomial per "
                       "(LLM, cluster, ordering)"),
    "v2": ModelVariant("v2", True, True, False,
                       "main effects + per-(LLM, cluster) position deviations + a Dirichlet-multinomial per prompt "
                       "(LLM, cluster, query, ordering) over its runs"),
    "margin": ModelVariant("margin", True, False, False,
                           "collapsed margin model: the tool and position margins of every (LLM, cluster), "
                           "quasi-likelihood tempered by the cells' per-query dispersion, spike-and-slab on "
                           "delta = 0 (NumPyro)", margin=True),
}
#: Names accepted by ``model=``.
MODELS = tuple(MODEL_VARIANTS)
#: The variant ``fit_bayes`` fits unless told otherwise (issue 38, docs/bayes.md "The default model"): the margin
#: model, whose likelihood carries query heterogeneity.
DEFAULT_MODEL = "margin"
#: What ``fit_bayes`` fits, announced, when ``model`` is not given and the study or the arguments rule the default
#: out (lists that do not show every tool, clusters of different sizes, no NumPyro, a PyMC / nutpie sampler, a
#: parameterisation or priors only the logit variants have). ``model="margin"`` given explicitly keeps its error.
FALLBACK_MODEL = "v2"
#: How the announcement of a fall-back starts (``result.warnings[0]``, the CLI's note, the report).
FALLBACK_NOTE = f"model={FALLBACK_MODEL!r} was fitted instead of the default {DEFAULT_MODEL!r}"
#: The margin model's defaults where they differ from v1 / v2's (``tune``, ``target_accept``), and the margin of
#: ``P(delta < margin)``.
MARGIN_DEFAULTS: dict[str, float] = {"tune": 500, "target_accept": 0.9, "delta_margin": 0.02}
#: The other variants' defaults of the same arguments.
LOGIT_DEFAULTS: dict[str, float] = {"tune": 1000, "target_accept": 0.8}
#: Variants that moved to ``analyses/bayes_experimental`` (issue 38): naming one says where it is.
MOVED_MODELS = ("cluster-position", "overdispersed", "thorough", "query-urn", "query-shared", "query-mixture",
                "query-mixture-id")

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
