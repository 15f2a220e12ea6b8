"""Report fragment (HTML) for the hierarchical Bayesian model.

``render_bayes_section(result)`` returns one ``<section id="bayes">`` to embed in a report page;
:func:`toolbias_stats._text.format_bayes_text` the plain-text summary printed by ``toolbias-stats bayes``. Both
only format a :class:`~toolbias_stats.models.BayesResult`: every number is rounded here, every string that
comes from the data is HTML-escaped, and figures are inline SVG.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from .._format import MISSING, fmt_estimate_ci, fmt_int, fmt_level, fmt_num, fmt_p
from .._text import bayes_disagreements as _disagreements
from .._text import bayes_extra_terms as _extra_terms
from .._text import fit_text as _fit_text
from ._render_html import _e, _svg, _table

if TYPE_CHECKING:
    from ..io import ToolCatalog
    from ..metrics import BiasResult
    from ..models.bayes import BayesResult

__all__ = ["render_bayes_section"]

_SHARED = "(shared)"

#: The priors as written in the report, with the reason for each (keys of DEFAULT_PRIORS).
_PRIOR_TEXT = (
    ("mu_sd", "shared API effects", "mu[c, :] ~ ZeroSumNormal({v:g})",
     ("a pairwise log-odds between two tools has sd {v:g}\u00b7\u221a2; at 95% prior mass one tool may be chosen "
     "about e^(2\u00b7{v:g}\u00b7\u221a2) times as often as another, yet a tool that is never chosen keeps a "
     "finite effect")),
    ("sigma_alpha_sd", "between-LLM scale of API effects", "sigma_alpha ~ HalfNormal({v:g})",
     ("LLMs may disagree by about two log-odds on a tool (a reversal of preference), while the scale stays finite "
     "with few LLMs")),
    ("beta_bar_sd", "shared position effects", "beta_bar ~ ZeroSumNormal({v:g})",
     ("audits report odds factors of 2\u201310 between first and last slot; a pairwise sd of {v:g}\u00b7\u221a2 "
      "covers them")),
    ("sigma_beta_sd", "between-LLM scale of position effects", "sigma_beta ~ HalfNormal({v:g})",
     "LLMs differ widely in position bias (BiasBusters: \u03b4_pos from 0.17 to 0.50)"),
    ("sigma_delta_sd", "per-(LLM, cluster) position deviations", ("delta[m, c, :] = sigma_delta \u00b7 "
     "ZeroSumNormal(1), sigma_delta ~ HalfNormal({v:g})"),
     ("nothing says a cluster changes an LLM's position effects less than LLMs differ from each other, so the same "
     "scale as the between-LLM one; finite, so that a cluster with little data is pulled towards the LLM's effects")),
    ("sigma_eta_sd", "query effects (per LLM)", ("eta[m, c, q, :] = sigma_eta[m] \u00b7 ZeroSumNormal(1), "
     "sigma_eta[m] ~ HalfNormal({v:g})"),
     "a query may need one particular tool (several log-odds) or none; the scale is estimated per LLM"),
    ("rho_a", "intra-prompt correlation", "rho[m] = 1 / (1 + kappa[m]) ~ Beta({v:g}, {b:g})",
     ("repeated attempts of one prompt may be independent (rho = 0: the multinomial) or identical (rho = 1); "
     "Beta(1, 1) takes no side")),
)


def render_bayes_section(result: BayesResult, *, catalog: ToolCatalog | None = None,
                         title: str = "Hierarchical Bayesian model of API and position effects",
                         frequentist: BiasResult | None = None) -> str:
    """HTML fragment ``<section id="bayes">`` for a :class:`~toolbias_stats.models.BayesResult`.

    Parameters
    ----------
    result : BayesResult
        Output of :func:`toolbias_stats.models.fit_bayes`.
    catalog : ToolCatalog, optional
        For tool names in the API-effects figure.
    title : str
        The section heading.
    frequentist : BiasResult, optional
        :func:`toolbias_stats.selection_bias` of the same study, grouped like the fit: where its calibrated
        interval of a δ and the Bayesian interval under the logged orderings do not overlap, the table shows
        the frequentist interval next to the Bayesian one (``BayesResult.compare_frequentist``).

    Returns
    -------
    str
        The section: diagnostics first (a loud banner when the fit did not converge), the model
        and its priors, the implied bias under logged and randomised orderings (each LLM's row says
        whether the model fits its data: the per-query dispersion and cluster x position checks), the position and
        API effects (forest plots and tables), the variance shares, the posterior predictive check
        and the notes.

    Examples
    --------
    A tiny fit (one LLM, two clusters of three tools; 50 draws, too few to converge, but a few seconds):

    >>> import numpy as np
    >>> import toolbias_stats as tbs
    >>> from toolbias_stats.models import simulate_bayes_log
    >>> alpha = np.array([[[1.0, 0.0, -1.0], [0.0, 0.5, -0.5]]])     # API effects: LLM x cluster x tool
    >>> log = simulate_bayes_log(alpha, np.array([[1.0, 0.0, -1.0]]), n_per_ordering=20, rng=1)
    >>> res = tbs.fit_bayes(log, model="v1", draws=50, tune=50, chains=1, cores=1, sampler="pymc", rng=1)
    >>> html = render_bayes_section(res)
    >>> html.startswith('<section id="bayes">'), html.count("<svg") >= 3
    (True, True)
    """
    parts = [f'<section id="bayes">\n<h2>{_e(title)}</h2>',
             _diagnostics_block(result), _model_block(result), _implied_block(result, frequentist),
             _position_block(result), _api_block(result, catalog), _shares_block(result), _scales_block(result),
             _ppc_block(result), _notes_block(result), "</section>"]
    return "\n".join(parts)


# -- blocks ---------------------------------------------------------------------------------------
def _diagnostics_block(result) -> str:
    d = result.diagnostics
    level = fmt_level(result.hdi_prob)
    rows = [("model", _model_label(result)), ("sampler", d.sampler), ("parameterisation", d.parameterization),
            ("chains \u00d7 draws (tune)", f"{d.chains} \u00d7 {fmt_int(d.draws)} ({fmt_int(d.tune)})"),
            ("seed", f"{d.seed} (rng argument: {result.seed})"),
            ("max R-hat", f"{d.max_rhat:.4f}" if np.isfinite(d.max_rhat) else MISSING),
            ("min bulk ESS / tail ESS", f"{fmt_int(d.min_ess_bulk)} / {fmt_int(d.min_ess_tail)}"),
            ("divergences", fmt_int(d.divergences)), ("wall time", f"{d.seconds:.1f} s"),
            ("rows used / excluded", (f"{fmt_int(result.rows['used'])} / "
                                     f"{fmt_int(result.rows['total'] - result.rows['used'])}")),
            ("excluded by reason", ", ".join(f"{k}: {fmt_int(v)}" for k, v in result.rows["excluded"].items())
             or "none"),
            ("intervals", f"{level} highest-density intervals (HDI)")]
    dl = "".join(f"<dt>{_e(k)}</dt><dd>{_e(v)}</dd>" for k, v in rows)
    if d.converged:
        banner = ('<div class="note"><p><strong>Converged</strong> by the package standard: R-hat \u2264 1.01, '
                  "bulk ESS \u2265 400 and no divergent transition.</p></div>")
    else:
        banner = ('<div class="note" style="border-left-color:#b00020;background:#fff0f0">'
                  '<p><strong style="color:#b00020">NOT CONVERGED: do not use these numbers.</strong> '
                  + _e("; ".join(d.flags))
                  + ". Run longer (more draws and tune), or raise target_accept if there are divergences.</p></div>")
    return f'<h3 id="bayes-diagnostics">Diagnostics</h3>\n{banner}\n<dl class="settings">{dl}</dl>'


def _model_label(result) -> str:
    """The variant, and whether it is the default or the announced fall-back from it (docs/bayes.md)."""
    from ..models.bayes import DEFAULT_MODEL
    from ..models.bayes._common import FALLBACK_NOTE

    model = getattr(result, "model", "v1")
    if model == DEFAULT_MODEL:
        return f"{model} (the default)"
    if any(str(w).startswith(FALLBACK_NOTE) for w in result.warnings):
        return f"{model}: {FALLBACK_NOTE}, which cannot fit this study (why: the notes at the end)"
    return model


def _model_block(result) -> str:
    if getattr(result, "model", "v1") == "margin":
        return _margin_model_block(result)
    pri = result.priors
    items = []
    for key, what, formula, why in _PRIOR_TEXT:
        v = pri.get(key)
        if v is None:
            continue
        b = pri.get("rho_b", 1.0)
        items.append(f"<li><strong>{_e(what)}</strong>: <code>{_e(formula.format(v=v, b=b))}</code> \u2014 "
                     f"{_e(why.format(v=v))}</li>")
    single = len(result.llms) == 1
    pool = ("With one LLM nothing is pooled: alpha = mu and beta = beta_bar, and the two scales are not in the "
            "model." if single else
            "API effects are partially pooled across LLMs around shared effects mu; position effects around a "
            "shared beta_bar.")
    model = getattr(result, "model", "v1")
    return f"""<h3 id="bayes-model">Model</h3>
<p>Variant <code>{_e(model)}</code>. An attempt by LLM <em>m</em> in cluster <em>c</em> that shows the cluster's
tools in ordering <em>o</em> chooses tool <em>j</em> with probability
softmax<sub>j</sub>(&alpha;[m, c, j] + &beta;[m, pos<sub>o</sub>(j)]{_e(_extra_terms(model))}).
{_e(pool)} &alpha;[m, c, :] = &mu;[c, :] + &sigma;<sub>&alpha;</sub>&middot;z[m, c, :] and
&beta;[m, :] = &beta;&#772; + &sigma;<sub>&beta;</sub>&middot;z<sub>2</sub>[m, :]; every effect sums to zero within a
cluster (API) or over positions, which identifies them. {_e(_likelihood_text(model))}</p>
<p>Weakly informative priors (logit scale):</p>
<ul>{''.join(items)}</ul>"""


def _margin_model_block(result) -> str:
    """The margin model (the default): what it models, its quasi-likelihood and its priors."""
    from ..models.bayes._margin import SPIKE_MASS

    pri = result.priors
    items = []
    for key, what, formula, why in _PRIOR_TEXT:
        v = pri.get(key)
        if v is None:
            continue
        if key == "sigma_alpha_sd":
            what, formula = "between-LLM scale of API effects (one per cluster)", "sigma_alpha[c] ~ HalfNormal({v:g})"
        items.append(f"<li><strong>{_e(what)}</strong>: <code>{_e(formula.format(v=v, b=1.0))}</code> \u2014 "
                     f"{_e(why.format(v=v))}</li>")
    items.append(f"<li><strong>&delta; = 0</strong>: prior mass {SPIKE_MASS:g} on &ldquo;equal worths&rdquo; of each "
                 f"(LLM, cluster) and {SPIKE_MASS:g} on &ldquo;no position effect&rdquo; of each LLM (spike and slab), "
                 "so that the posterior of a &delta; can put mass on exactly 0 (P0 below) when there is no "
                 "effect</li>")
    return f"""<h3 id="bayes-model">Model</h3>
<p>Variant <code>margin</code> (the default): the collapsed margin model. The &delta;s this section reports are
total-variation distances to uniform of two margins of each (LLM <em>m</em>, cluster <em>c</em>) cell, the
probabilities of its tools and of its positions; the model puts its parameters on those margins:
softmax(a[m, c, :]) over the cluster's tools with
a[m, c, :] = &mu;[c, :] + &sigma;<sub>&alpha;</sub>[c]&middot;z[m, c, :], and softmax(b[m, c, :]) over the positions
with b[m, c, :] = &beta;&#772; + &sigma;<sub>&beta;</sub>&middot;z<sub>&beta;</sub>[m, :] +
&sigma;<sub>&delta;</sub>&middot;z<sub>&gamma;</sub>[m, c, :]; every effect sums to zero over tools or positions.
A cell's counts, pooled over its queries, orderings and runs, enter as multinomials divided by the cell's Pearson
dispersion &phi; of its queries' counts (floored at 1): a quasi-likelihood whose centre is the pooled frequencies
under any heterogeneity of queries and whose width carries its design effect, since a query keeps its preferences
across its orderings and runs. It is not a chooser of tools from a list, so it has no &ldquo;randomised
orderings&rdquo; counterfactual (<code>--variant v2</code> or the choice model give one).</p>
<p>Weakly informative priors (logit scale):</p>
<ul>{''.join(items)}</ul>"""


def _likelihood_text(model) -> str:
    parts = []
    if model in ("cluster-position", "v2", "thorough"):
        parts.append("Each (LLM, cluster) has its own position effects \u03b2[m, :] + \u03b4[m, c, :], partially "
                     "pooled towards the LLM's (\u03b4 zero-sum normal with scale \u03c3_\u03b4).")
    if model in ("overdispersed", "thorough"):
        parts.append("Every query q has its own tool effects \u03b7[m, c, q, :] (zero-sum normal, scale "
                     "\u03c3_\u03b7[m]), shared by all its orderings and runs: the queries are a sample from a "
                     "population of queries.")
    if model in ("overdispersed", "v2", "thorough"):
        parts.append("The repeated attempts of one prompt (the same query in the same ordering, e.g. the runs) "
                     "share one set of choice probabilities drawn from Dirichlet(\u03ba[m]\u00b7p): a "
                     "Dirichlet-multinomial per prompt whose intra-prompt correlation \u03c1 = 1/(1 + \u03ba) is "
                     "estimated (\u03ba \u2192 \u221e is the multinomial).")
    else:
        parts.append("The model is fitted to counts aggregated per (LLM, cluster, ordering). Attempts are treated "
                     "as exchangeable within such a cell: differences between queries and the agreement of repeated "
                     "runs are not modelled, so the intervals describe these queries rather than a population of "
                     "queries.")
    return " ".join(parts)


def _fmt_prob(v) -> str:
    """A posterior probability: three decimals, "< 0.001" / "> 0.999" at the ends (exact 0 and 1 as such)."""
    if v is None or not np.isfinite(v):
        return MISSING
    if 0 < v < 0.001:
        return "< 0.001"
    if 0.999 < v < 1:
        return "> 0.999"
    return f"{v:.3f}"


def _margin_implied_block(result, frequentist=None) -> str:
    """The margin model's implied δ under the logged orderings, with P0 and P(δ < margin), per LLM (the table) and
    per (LLM, cluster) (collapsed), the fit column and the frequentist interval where they disagree."""
    cells = result.implied_cells
    level = fmt_level(result.hdi_prob)
    margin = float(cells["margin"].iloc[0])
    status = _fit_status(result)
    cmp = _disagreements(result, frequentist)

    def summary(r, other=None):
        txt = fmt_estimate_ci(r.mean, (r.hdi_low, r.hdi_high))
        extra = (f'<br><span class="warning">frequentist {_e(other)}: the intervals do not overlap</span>'
                 if other else "")
        return (f'<td class="num">{_e(txt)}{extra}</td><td class="num">{_e(_fmt_prob(r.p0))}</td>'
                f'<td class="num">{_e(_fmt_prob(r.p_below_margin))}</td>')

    by = {(r.llm, r.cluster, r.metric): r for r in cells.itertuples()}
    body = []
    for llm in result.llms:
        row = [f"<td>{_e(llm)}</td>"]
        for metric in ("delta_api", "delta_pos"):
            row.append(summary(by[(llm, _SHARED, metric)], cmp.get((llm, metric))))
        fits = status[llm]
        cls = "" if fits[0] else ' class="warning"'
        row.append(f"<td{cls}>{_e(_fit_text(fits))}</td>")
        body.append("<tr>" + "".join(row) + "</tr>")
    sub = (f'<th class="num">mean [{_e(level)} HDI]</th><th class="num">P0</th>'
           f'<th class="num">P(&delta; &lt; {_e(f"{margin:g}")})</th>')
    head = ('<tr><th rowspan="2">LLM</th><th colspan="3" class="num">&delta;<sub>API</sub></th>'
            '<th colspan="3" class="num">&delta;<sub>pos</sub></th><th rowspan="2">model fits the data?</th></tr>'
            f"<tr>{sub}{sub}</tr>")
    table = _table(head, body, caption="Model-implied bias under the logged orderings (TV to uniform, mean over "
                                       "clusters), its posterior probability of being 0 and of being below the "
                                       "margin")
    detail = []
    for llm in result.llms:
        for cl in result.clusters:
            if (llm, cl, "delta_api") in by:
                detail.append(f"<tr><td>{_e(llm)}</td><td>{_e(cl)}</td>{summary(by[(llm, cl, 'delta_api')])}"
                              f"{summary(by[(llm, cl, 'delta_pos')])}</tr>")
    dtable = _table('<tr><th rowspan="2">LLM</th><th rowspan="2">cluster</th><th colspan="3" class="num">&delta;'
                    '<sub>API</sub></th><th colspan="3" class="num">&delta;<sub>pos</sub></th></tr>'
                    f"<tr>{sub}{sub}</tr>", detail)
    return f"""<h3 id="bayes-implied">Implied bias under the logged orderings</h3>
{table}
<details><summary>Per LLM and cluster ({len(detail)} cells)</summary>{dtable}</details>
{_fit_note(result, frequentist, cmp)}
<div class="note"><p><strong>How to read this.</strong> Each &delta; is the TV distance to uniform of the modelled
tool (&delta;<sub>API</sub>) or position (&delta;<sub>pos</sub>) probabilities of an (LLM, cluster) under the
orderings the harness logged, averaged over the LLM's clusters: the true &delta; of these choices, not the plug-in TV
of observed rates, which sampling noise inflates. <strong>P0</strong> is the posterior probability that the
&delta; is exactly 0 (equal worths of the cell's tools, or no position effect of the LLM; for an LLM's
&delta;<sub>API</sub>, all its cells at once), so an interval can be [0, 0]; <strong>P(&delta; &lt; margin)</strong>
is the posterior probability that the bias is smaller than {_e(f"{margin:g}")} (<code>--delta-margin</code>,
<code>delta_margin=</code>). The model has no chooser to re-order, so there is no &ldquo;randomised orderings&rdquo;
column: <code>--variant v2</code> or the choice model give that counterfactual.</p></div>"""


def _implied_block(result, frequentist=None) -> str:
    if getattr(result, "implied_cells", None) is not None:
        return _margin_implied_block(result, frequentist)
    imp = result.implied
    level = fmt_level(result.hdi_prob)
    status = _fit_status(result)
    cmp = _disagreements(result, frequentist)
    body = []
    for llm in result.llms:
        cells = [f"<td>{_e(llm)}</td>"]
        for metric in ("delta_api", "delta_pos"):
            for scen in ("logged", "randomised"):
                r = imp[(imp["llm"] == llm) & (imp["metric"] == metric) & (imp["orderings"] == scen)]
                txt = MISSING if r.empty else fmt_estimate_ci(r["mean"].iloc[0], (r["hdi_low"].iloc[0],
                                                                                  r["hdi_high"].iloc[0]))
                other = cmp.get((llm, metric)) if scen == "logged" else None
                extra = (f'<br><span class="warning">frequentist {_e(other)}: the intervals do not overlap</span>'
                         if other else "")
                cells.append(f'<td class="num">{_e(txt)}{extra}</td>')
        fits = status[llm]
        cls = "" if fits[0] else ' class="warning"'
        cells.append(f"<td{cls}>{_e(_fit_text(fits))}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    head = ('<tr><th rowspan="2">LLM</th><th colspan="2" class="num">&delta;<sub>API</sub></th>'
            '<th colspan="2" class="num">&delta;<sub>pos</sub></th><th rowspan="2">model fits the data?</th></tr>'
            '<tr><th class="num">logged orderings</th><th class="num">randomised orderings</th>'
            '<th class="num">logged orderings</th><th class="num">randomised orderings</th></tr>')
    table = _table(head, body, caption=f"Model-implied bias (TV to uniform, mean over clusters) [{level} HDI]")
    fit_note = _fit_note(result, frequentist, cmp)
    return f"""<h3 id="bayes-implied">Implied bias: logged vs randomised orderings</h3>
{table}
{fit_note}
<div class="note"><p><strong>How to read this.</strong> Each &delta; is the TV distance to uniform of the fitted
chooser's choice probabilities, averaged over the orderings the harness logged, or over uniformly random orderings
of each cluster's tools (&ldquo;what if the harness shuffled the list&rdquo;). These are the biases of the fitted
chooser itself, not plug-in TVs of observed rates, so they sit below the descriptive &delta;s, which sampling noise
inflates. Under random orderings position effects can no longer create tool bias (&delta;<sub>API</sub> then
reflects the API effects alone), but &delta;<sub>pos</sub> does not vanish: an LLM that prefers the first slot still
picks it more often, whatever is shown there. For a design that already balances tools over positions (cyclic
rotations) the two columns nearly agree; for a fixed list the logged &delta;<sub>API</sub> also contains the
position effect.</p></div>"""


def _fit_status(result):
    from ..models.bayes._checks import fit_status

    return fit_status(result)


def _fit_note(result, frequentist, cmp) -> str:
    """What the fit column and the frequentist comparison mean (and when the comparison could not be made)."""
    from ..models.bayes._checks import PPC_BAND

    lo, hi = PPC_BAND
    text = (f"<strong>Does the model fit the data it summarises?</strong> An LLM's row passes when its per-query "
            f"dispersion check (its own queries) and the cluster &times; position check (one table over all LLMs) "
            f"both have posterior predictive p-values in [{lo:g}, {hi:g}]; where one fails, its intervals rest on a "
            "model that does not reproduce that feature of the data and may cover the truth less often than "
            "stated (the per-query dispersion: too narrow when queries differ more than the model allows).")
    if frequentist is None:
        comp = ""
    elif list(frequentist.by) != list(result.by):
        comp = (f" The frequentist intervals are grouped by {_e(', '.join(map(str, frequentist.by)) or 'nothing')}, "
                f"the Bayesian fit by {_e(', '.join(map(str, result.by)))}: not compared.")
    elif cmp:
        comp = (" Where the Bayesian interval under the logged orderings and the frequentist calibrated interval "
                "of the same &delta; (bias-corrected, bias table above) do not overlap, the frequentist one is shown "
                "beside it: the two rest on different assumptions, and a disagreement usually means the model misses "
                "a feature of the data (see the fit column).")
    else:
        comp = (" The Bayesian intervals under the logged orderings overlap the frequentist calibrated intervals of "
                "the bias table for every LLM and &delta;.")
    return f'<div class="note"><p>{text}{comp}</p></div>'


def _position_block(result) -> str:
    from ..plots import plot_position_effects

    svg = _svg(plot_position_effects(result), title="Position effects per LLM with highest-density intervals")
    level = fmt_level(result.hdi_prob)
    fvl = result.first_vs_last
    body = []
    for r in fvl.itertuples():
        body.append(f"<tr><td>{_e(r.llm)}</td><td class=\"num\">{_e(fmt_num(r.p_first_beats_last))}</td>"
                    f"<td class=\"num\">{_e(fmt_estimate_ci(r.mean, (r.hdi_low, r.hdi_high)))}</td></tr>")
    last = int(result.n_positions)
    head = ("<tr><th>LLM</th><th class=\"num\">P(first beats last)</th>"
            f"<th class=\"num\">&beta;[1] &minus; &beta;[{last}] [{_e(level)} HDI]</th></tr>")
    table = _table(head, body, caption=f"Position 1 against position {last}: the posterior probability that the "
                                       "first slot is preferred, and the logit difference")
    pe = result.position_effects
    det = []
    for r in pe.itertuples():
        det.append(f"<tr><td>{_e(r.llm)}</td><td class=\"num\">{_e(r.position)}</td>"
                   f"<td class=\"num\">{_e(fmt_estimate_ci(r.mean, (r.hdi_low, r.hdi_high)))}</td>"
                   f"<td class=\"num\">{_e(fmt_num(r.sd))}</td></tr>")
    dtable = _table(f"<tr><th>LLM</th><th class=\"num\">position</th><th class=\"num\">&beta; [{_e(level)} HDI]</th>"
                    "<th class=\"num\">sd</th></tr>", det)
    cluster_html = ""
    cpe = getattr(result, "cluster_position_effects", None)
    if cpe is not None and not cpe.empty:
        rows = [f"<tr><td>{_e(r.llm)}</td><td>{_e(r.cluster)}</td><td class=\"num\">{_e(r.position)}</td>"
                f"<td class=\"num\">{_e(fmt_estimate_ci(r.mean, (r.hdi_low, r.hdi_high)))}</td>"
                f"<td class=\"num\">{_e(fmt_num(r.delta_mean))}</td></tr>" for r in cpe.itertuples()]
        ctable = _table(f"<tr><th>LLM</th><th>cluster</th><th class=\"num\">position</th>"
                        f"<th class=\"num\">&beta;[m, c, p] [{_e(level)} HDI]</th>"
                        "<th class=\"num\">&delta; (mean)</th></tr>", rows)
        cluster_html = ("<details><summary>Position effects per LLM and cluster (&beta; + &delta;)</summary>"
                        f"{ctable}</details>")
    return f"""<h3 id="bayes-position">Position effects</h3>
<figure>{svg}<figcaption>Position effects &beta; (logit scale) per LLM and position with {_e(level)} HDIs; open
markers: the shared mean &beta;&#772;.{' With per-cluster deviations these are an LLM&#8217;s typical position effects;'
 ' each cluster&#8217;s are in the collapsed table below.' if cluster_html else ''}</figcaption></figure>
{table}
<details><summary>All position effects as a table</summary>{dtable}</details>
{cluster_html}"""


def _api_block(result, catalog) -> str:
    from ..plots import plot_api_effects

    svg = _svg(plot_api_effects(result, catalog=catalog), title="API effects per cluster and tool")
    level = fmt_level(result.hdi_prob)
    ae = result.api_effects
    shared = ae[ae["llm"] == _SHARED]
    body = [f"<tr><td>{_e(r.cluster)}</td><td class=\"path\">{_e(r.tool_id)}</td>"
            f"<td class=\"num\">{_e(fmt_estimate_ci(r.mean, (r.hdi_low, r.hdi_high)))}</td>"
            f"<td class=\"num\">{_e(fmt_int(r.n_used))}</td></tr>" for r in shared.itertuples()]
    table = _table(f"<tr><th>cluster</th><th>tool_id</th><th class=\"num\">&mu; [{_e(level)} HDI]</th>"
                   "<th class=\"num\">choices (all LLMs)</th></tr>", body)
    return f"""<h3 id="bayes-api">API effects</h3>
<figure>{svg}<figcaption>Shared API effects &mu; per cluster and tool (black, {_e(level)} HDI) and each LLM's
posterior mean &alpha; (coloured ticks; logit scale, summing to zero within a cluster).</figcaption></figure>
<details><summary>Shared API effects as a table</summary>{table}</details>"""


def _shares_block(result) -> str:
    vs = result.variance_shares
    level = fmt_level(result.hdi_prob)
    body = []
    for r in vs.itertuples():
        what = "API effects (which tools win)" if r.effect == "api" else "position effects"
        body.append(f"<tr><td>{_e(what)}</td>"
                    f"<td class=\"num\">{_e(fmt_estimate_ci(r.share_shared, (r.share_low, r.share_high)))}</td>"
                    f"<td class=\"num\">{_e(fmt_num(r.sd_shared))}</td><td class=\"num\">{_e(fmt_num(r.sd_between))}"
                    "</td></tr>")
    table = _table(f"<tr><th>effect</th><th class=\"num\">shared share [{_e(level)} HDI]</th>"
                   "<th class=\"num\">sd shared</th><th class=\"num\">sd between LLMs</th></tr>", body)
    note = ("Only one LLM: the shares are not defined." if len(result.llms) == 1 else
            "Share of the effects' variance that all LLMs have in common (finite-population variances per draw: "
            "shared = mean of &mu;&sup2;, between = mean of (&alpha; &minus; &mu;)&sup2;). Near 1: the LLMs agree on "
            "which tools (or slots) win; near 0: each LLM has its own favourites.")
    return f"""<h3 id="bayes-shares">Do the LLMs agree? Variance shares</h3>
{table}
<p class="muted">{note}</p>"""


def _scales_block(result) -> str:
    sc = getattr(result, "scales", None)
    if sc is None or sc.empty:
        return ""
    level = fmt_level(result.hdi_prob)
    what = {"sigma_alpha": "between-LLM sd of API effects", "sigma_beta": "between-LLM sd of position effects",
            "sigma_delta": "sd of per-cluster position deviations", "sigma_eta": "sd of query effects",
            "kappa": "Dirichlet concentration \u03ba", "rho": "intra-prompt correlation \u03c1 = 1/(1+\u03ba)"}
    has_cluster = "cluster" in sc.columns
    main = sc[sc["quantity"] != "kappa"]
    body = [f"<tr><td>{_e(what.get(r.quantity, r.quantity))}</td><td>{_e(r.llm)}</td>"
            f"<td>{_e(r.cluster if has_cluster and isinstance(r.cluster, str) else '')}</td>"
            f"<td class=\"num\">{_e(fmt_estimate_ci(r.mean, (r.hdi_low, r.hdi_high)))}</td></tr>"
            for r in main.itertuples()]
    table = _table(f"<tr><th>parameter</th><th>LLM</th><th>cluster</th>"
                   f"<th class=\"num\">posterior mean [{_e(level)} HDI]</th></tr>", body)
    table = table if len(body) <= 12 else f"<details><summary>All scales ({len(body)})</summary>{table}</details>"
    rho = sc[sc["quantity"] == "rho"]
    lead = ""
    if not rho.empty:
        per = rho.groupby("llm", sort=False)["mean"].agg(["min", "median", "max"])
        items = "".join(f"<li>{_e(llm)}: median {_e(fmt_num(r['median']))} (clusters {_e(fmt_num(r['min']))}"
                        f"\u2013{_e(fmt_num(r['max']))})</li>" for llm, r in per.iterrows())
        lead = f"<p>Intra-prompt correlation &rho; of repeated runs, per LLM:</p><ul>{items}</ul>"
    return f"""<h3 id="bayes-scales">Scales and dispersion</h3>
{lead}
{table}
<p class="muted">&rho; near 1: repeated runs of a prompt almost always give the same answer, so a prompt counts
as far fewer than its attempts; near 0: the runs are independent draws.</p>"""


def _ppc_block(result) -> str:
    from ..plots import plot_bayes_ppc

    ppc = result.ppc
    model = getattr(result, "model", "v1")
    svg = _svg(plot_bayes_ppc(result), title="Posterior predictive check: observed and replicated counts")
    disp = getattr(ppc, "dispersion", None)
    p_disp = getattr(ppc, "p_value_dispersion", float("nan"))
    if model == "margin":
        return _margin_ppc_block(result, svg, _dispersion_html(result))
    reasons = []
    if ppc.p_value < 0.05:
        reasons.append("the choices per cluster and position are further from the model than its replications "
                       "(position effects that differ between clusters)")
    if ppc.p_value_rows < 0.05:
        reasons.append("within an (LLM, cluster) the choices under particular lists deviate from additive tool and "
                       "position effects (an interaction of the list shown with the choice that no variant models; "
                       "the effects are averages over the lists shown)")
    if disp is not None and np.isfinite(p_disp) and p_disp < 0.05:
        reasons.append("queries differ from each other more than the model allows (queries that need a particular "
                       "tool); intervals for cell-level and query-level claims are then too narrow (the default model, "
                       "margin, carries the heterogeneity of queries in its likelihood: docs/bayes.md)")
    if model == "v1" and min(ppc.p_value, ppc.p_value_rows) < 0.05:
        verdict = ("<strong>The main-effects model misfits</strong>: the observed counts are further from the "
                   "model's expectation than its own replications. Position and API effects then interact (e.g. a "
                   "position effect that differs between clusters, or queries that are not exchangeable). The "
                   "effects above are averages over that heterogeneity and their intervals are too narrow; "
                   "model='v2' adds per-cluster position effects and a Dirichlet-multinomial per prompt, and the "
                   "default model, margin, carries the heterogeneity of queries in its likelihood.")
    elif reasons:
        verdict = "<strong>Misfit</strong>: " + _e("; ".join(reasons)) + "."
    else:
        verdict = "The replications reproduce the observed counts: no sign of misfit at these resolutions."
    disp_html = _dispersion_html(result)
    disp_p = (f", {_e(fmt_p(p_disp))} on the per-query dispersion" if disp is not None else "")
    return f"""<h3 id="bayes-ppc">Posterior predictive check</h3>
<figure>{svg}<figcaption>Observed choices per cluster and position (all LLMs and orderings) against the
{_e(fmt_level(result.hdi_prob))} interval of {_e(fmt_int(ppc.n_draws))} replications.</figcaption></figure>
{disp_html}
<p>Chi-square discrepancy PPC p-values: {_e(fmt_p(ppc.p_value))} on the cluster &times; position table,
{_e(fmt_p(ppc.p_value_rows))} on the LLM &times; cluster &times; ordering &times; position table{disp_p}.</p>
<div class="note"><p>{verdict}</p></div>"""


def _margin_ppc_block(result, svg, disp_html) -> str:
    """The margin model's two checks, each against the band [0.05, 0.95] at both ends (docs/bayes.md)."""
    from ..models.bayes._checks import PPC_BAND

    lo, hi = PPC_BAND
    ppc = result.ppc
    reasons = []
    if not lo <= ppc.p_value <= hi:
        reasons.append(f"the cluster \u00d7 position table ({fmt_p(ppc.p_value)}): position effects differ between "
                       "clusters more (or less) than the model allows")
    disp = ppc.dispersion
    per = disp[disp["llm"].isin(result.llms)] if disp is not None else disp
    if per is not None:
        for r in per.itertuples():
            if r.p_value < lo:
                reasons.append(f"the per-query dispersion of {r.llm} ({fmt_p(r.p_value)}): its queries differ more "
                               "than the cell's dispersion allows, so its intervals may be too narrow")
            elif r.p_value > hi:
                reasons.append(f"the per-query dispersion of {r.llm} ({fmt_p(r.p_value)}): its tool counts are less "
                               "variable than multinomial (e.g. a position-only chooser under cyclic rotations), so "
                               "its \u03b4_API intervals are wider than the data need")
    verdict = (f"<strong>Outside the band [{lo:g}, {hi:g}]</strong>: " + _e("; ".join(reasons)) + "."
               if reasons else f"Both checks are inside [{lo:g}, {hi:g}] for every LLM: no sign of misfit.")
    return f"""<h3 id="bayes-ppc">Posterior predictive check</h3>
<figure>{svg}<figcaption>Observed choices per cluster and position (all LLMs and orderings) against the
{_e(fmt_level(result.hdi_prob))} interval of {_e(fmt_int(ppc.n_draws))} replications.</figcaption></figure>
{disp_html}
<p>Chi-square discrepancy PPC p-values: {_e(fmt_p(ppc.p_value))} on the cluster &times; position table,
{_e(fmt_p(ppc.p_value_dispersion))} on the per-query dispersion (all LLMs; per LLM in the table). The margin model
fits the tool and position margins, not the choices under each list, so the finer LLM &times; cluster &times;
ordering &times; position table is not checked. A p-value near 1 fails as well as one near 0: the replications are
then far more variable than the data.</p>
<div class="note"><p>{verdict}</p></div>"""


def _dispersion_html(result) -> str:
    """The per-query dispersion check as a figure and a collapsed table ("" when the fit had no queries)."""
    from ..plots import plot_bayes_dispersion

    disp = getattr(result.ppc, "dispersion", None)
    disp_html = ""
    if disp is not None:
        dsvg = _svg(plot_bayes_dispersion(result), title="Posterior predictive check of the per-query dispersion")
        body = [f"<tr><td>{_e(r.llm)}</td><td class=\"num\">{_e(fmt_int(r.queries))}</td>"
                f"<td class=\"num\">{_e(fmt_num(r.observed, 0))}</td>"
                f"<td class=\"num\">{_e(fmt_estimate_ci(r.replicated_mean, (r.replicated_low, r.replicated_high), 0))}"
                f"</td><td class=\"num\">{_e(fmt_num(r.ratio))}</td><td class=\"num\">{_e(fmt_p(r.p_value))}</td></tr>"
                for r in disp.itertuples()]
        table = _table("<tr><th>LLM</th><th class=\"num\">queries</th><th class=\"num\">observed</th>"
                       "<th class=\"num\">replicated [HDI]</th><th class=\"num\">ratio</th>"
                       "<th class=\"num\">PPC p</th></tr>", body,
                       caption="Per-query dispersion: sum over queries of the Pearson chi-square of each query's tool "
                               "counts (all its orderings and runs) against the model's expectation")
        disp_html = f"""<figure>{dsvg}<figcaption>Per-query dispersion per LLM, observed against the
{_e(fmt_level(result.hdi_prob))} interval of its replications (both divided by the replicated mean).
</figcaption></figure>
<details><summary>Per-query dispersion as a table</summary>{table}</details>"""
    return disp_html


def _notes_block(result) -> str:
    if not result.warnings:
        return '<h3 id="bayes-notes">Notes</h3>\n<p class="muted">No warnings.</p>'
    items = "".join(f'<li class="warning">{_e(w)}</li>' for w in result.warnings)
    return f'<h3 id="bayes-notes">Notes</h3>\n<ul class="notes">{items}</ul>'
