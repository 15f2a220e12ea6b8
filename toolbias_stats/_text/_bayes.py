"""Plain text of a :class:`~toolbias_stats.models.BayesResult` (``toolbias-stats bayes``)."""

from __future__ import annotations

import pandas as pd

from .._format import fmt_estimate_ci, fmt_level, fmt_num, fmt_p

__all__ = ["format_bayes_text", "bayes_extra_terms", "fit_text", "bayes_disagreements"]


def bayes_extra_terms(model) -> str:
    """The terms a model variant adds to the linear predictor, as written in the text and the report."""
    return {"cluster-position": " + \u03b4[m, c, pos_o(j)]", "v2": " + \u03b4[m, c, pos_o(j)]",
            "overdispersed": " + \u03b7[m, c, q, j]", "thorough": " + \u03b4[m, c, pos_o(j)] + \u03b7[m, c, q, j]"
            }.get(model, "")


def fit_text(status, short=False) -> str:
    """The fit status of an LLM's row: "yes", "NO: <checks with p-values>" ("NO (<checks>)" when ``short``) or
    "not checked"."""
    fits, failed = status
    if fits is None:
        return "not checked"
    if fits:
        return "yes"
    if short:
        return "NO (" + ", ".join(part.split(" p ")[0] for part in failed.split("; ")) + ")"
    return f"NO: {failed}"


def bayes_disagreements(result, frequentist) -> dict:
    """``{(llm, metric): "x [a, b] (95% calibrated)"}`` where the frequentist calibrated interval and the Bayesian
    HDI under the logged orderings do not overlap (empty without a frequentist result or when grouped otherwise)."""
    if frequentist is None or list(frequentist.by) != list(result.by):
        return {}
    table = result.compare_frequentist(frequentist)
    out = {}
    for r in table[table["disagree"]].itertuples():
        out[(r.llm, r.metric)] = (f"{fmt_estimate_ci(r.freq_corrected, (r.freq_low, r.freq_high))} "
                                  f"({fmt_level(r.freq_level)} calibrated)")
    return out


def _fit_status(result) -> tuple[dict, tuple]:
    """``({llm: (fits, failed checks)}, (low, high))``: each LLM's fit status and the band of PPC p-values that
    pass, as the result reports them in ``to_dict()`` (``implied`` and ``fit_checks``). ``fits`` is True, False,
    or None when no check could run."""
    d = result.to_dict()
    status = {llm: (m["delta_api"]["logged"]["fits"], m["delta_api"]["logged"]["failed_checks"])
              for llm, m in d["implied"].items()}
    return status, tuple(d["fit_checks"]["band"])


def _fit_lines(result, frequentist, status, band) -> list:
    """The lines under the implied-bias table: what ``fits`` means, and the disagreements with the frequentist
    calibrated intervals."""
    note = (f"fits: the per-query dispersion (the LLM's queries) and cluster x position (all LLMs) checks both have "
            f"PPC p in [{band[0]:g}, {band[1]:g}]; where one fails the intervals may cover less than stated.")
    out = [note] + [f"  {llm}: {failed}" for llm, (fits, failed) in status.items()
                    if fits is False and llm in result.llms]
    if frequentist is None:
        return out
    if list(frequentist.by) != list(result.by):
        return out + ["(frequentist intervals grouped otherwise: not compared)"]
    cmp = bayes_disagreements(result, frequentist)
    if not cmp:
        return out + ["Every Bayesian interval under the logged orderings overlaps the frequentist calibrated one."]
    out.append("Bayesian and frequentist calibrated intervals that do not overlap (logged orderings):")
    imp = result.implied[result.implied["orderings"] == "logged"].set_index(["llm", "metric"])
    for (llm, metric), freq in cmp.items():
        b = imp.loc[(llm, metric)]
        out.append(f"  {llm} {metric}: Bayesian {fmt_estimate_ci(b['mean'], (b['hdi_low'], b['hdi_high']))}, "
                   f"frequentist {freq}")
    return out


def format_bayes_text(result, frequentist=None) -> str:
    """Plain-text summary of a :class:`~toolbias_stats.models.BayesResult` (``toolbias-stats bayes``).

    Each LLM's row of the implied bias says whether the model fits that LLM's data (``fits``: the per-query
    dispersion and cluster x position checks); with ``frequentist`` (:func:`toolbias_stats.selection_bias` of the
    same study, grouped like the fit) a row follows the table for every δ whose frequentist calibrated interval
    does not overlap the Bayesian one under the logged orderings.
    """
    d = result.diagnostics
    level = fmt_level(result.hdi_prob)
    lines = []
    if not d.converged:
        lines += ["!" * 78, "NOT CONVERGED: " + "; ".join(d.flags), ("Do not use these numbers; run longer "
                  "(--draws/--tune) or raise the target acceptance."), "!" * 78, ""]
    model = getattr(result, "model", "v1")
    cells = getattr(result, "implied_cells", None)
    if cells is not None:    # the margin model (the default): not a chooser of tools from a list
        lines.append(f"Hierarchical Bayesian model, variant {model}: the tool and position margins softmax(a[llm, "
                     f"cluster, tool]), softmax(b[llm, cluster, position]) of every cell, quasi-likelihood tempered "
                     f"by the per-query dispersion, spike-and-slab on delta = 0; {level} HDIs.")
    else:
        lines.append(f"Hierarchical Bayesian model, variant {model}: softmax(alpha[llm, cluster, tool] + "
                     f"beta[llm, position]{bayes_extra_terms(model)}); {level} HDIs.")
    lines.append(f"sampler {d.sampler} ({d.parameterization}), {d.chains} chains x {d.draws} draws "
                 f"(+{d.tune} tune), seed {d.seed}; {d.seconds:.1f} s. max R-hat "
                 f"{d.max_rhat:.4f}, min bulk ESS {d.min_ess_bulk:.0f}, min tail ESS {d.min_ess_tail:.0f}, "
                 f"divergences {d.divergences}.")
    lines.append(f"rows: {result.rows['used']} used of {result.rows['total']}; excluded: {result.rows['excluded']}")
    lines.append("")
    rows = []
    imp = result.implied
    fvl = result.first_vs_last.set_index("llm")
    status, band = _fit_status(result)
    for llm in result.llms:
        row = {"LLM": llm}
        for metric in ("delta_api", "delta_pos"):
            for scen in ("logged", "randomised"):
                r = imp[(imp["llm"] == llm) & (imp["metric"] == metric) & (imp["orderings"] == scen)]
                if cells is not None and scen == "randomised":    # the margin model: P0 and P(delta < margin)
                    c = cells[(cells["llm"] == llm) & (cells["cluster"] == "(shared)") & (cells["metric"] == metric)]
                    row[f"{metric} P0"] = fmt_num(c["p0"].iloc[0])
                    row[f"P({metric} < {c['margin'].iloc[0]:g})"] = fmt_num(c["p_below_margin"].iloc[0])
                    continue
                row[f"{metric} ({scen})"] = fmt_estimate_ci(r["mean"].iloc[0], (r["hdi_low"].iloc[0],
                                                                                r["hdi_high"].iloc[0]))
        row["P(first>last)"] = fmt_num(fvl.loc[llm, "p_first_beats_last"])
        row["fits"] = fit_text(status[llm], short=True)
        rows.append(row)
    lines.append("Implied bias (TV to uniform of the fitted chooser, mean over clusters):" if cells is None else
                 "Implied bias under the logged orderings (TV to uniform of the modelled margins, mean over clusters; "
                 "P0 = P(delta = 0 | data)):")
    lines.append(pd.DataFrame(rows).to_string(index=False))
    lines += _fit_lines(result, frequentist, status, band)
    lines.append("")
    vs = result.variance_shares
    for r in vs.itertuples():
        lines.append(f"shared share of {r.effect} effects: "
                     f"{fmt_estimate_ci(r.share_shared, (r.share_low, r.share_high))}"
                     f" (sd shared {fmt_num(r.sd_shared)}, sd between LLMs {fmt_num(r.sd_between)})")
    sc = getattr(result, "scales", None)
    if sc is not None:
        for q in ("sigma_delta", "sigma_eta"):
            sub = sc[sc["quantity"] == q]
            if not sub.empty:
                lines.append(f"{q}: " + ", ".join(f"{r.llm} {fmt_estimate_ci(r.mean, (r.hdi_low, r.hdi_high))}"
                                                   for r in sub.itertuples()))
        rho = sc[sc["quantity"] == "rho"]
        if not rho.empty:
            per = rho.groupby("llm", sort=False)["mean"].agg(["min", "median", "max"])
            lines.append("rho (intra-prompt correlation, median and range over clusters): " + ", ".join(
                f"{llm} {fmt_num(r['median'])} ({fmt_num(r['min'])}-{fmt_num(r['max'])})" for llm, r in per.iterrows()))
    disp = ""
    if getattr(result.ppc, "dispersion", None) is not None:
        disp = f", {fmt_p(result.ppc.p_value_dispersion)} (per-query dispersion)"
    finest = "" if cells is not None else f"{fmt_p(result.ppc.p_value_rows)} (finest table)"
    lines.append(f"posterior predictive check: {fmt_p(result.ppc.p_value)} (cluster x position)"
                 + (f", {finest}" if finest else "") + disp)
    if result.warnings:
        lines += ["", "Notes:"] + [f"  - {w}" for w in result.warnings]
    return "\n".join(lines)
