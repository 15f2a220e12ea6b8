"""ChoiceModelResult: the frozen result of :func:`toolbias_stats.choice_model`."""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from .._display import ReprHTMLMixin, frame_html
from .._json import plain as _num

__all__ = ["ChoiceModelResult"]


def _records(frame: pd.DataFrame, cols):
    out = []
    for rec in frame[cols].to_dict(orient="records"):
        out.append({k: _num(v) for k, v in rec.items()})
    return out


def _with_keys(frame: pd.DataFrame, keys: dict) -> pd.DataFrame:
    f = frame.copy()
    for i, (k, v) in enumerate(keys.items()):
        f.insert(i, k, v)
    return f


@dataclass(frozen=True, eq=False)
class ChoiceModelResult(ReprHTMLMixin):
    """Conditional (or mixed) logit of tool choice: worths, position effects, features, fit and implied bias.

    Attributes
    ----------
    tool_effects : pandas.DataFrame
        By-keys, ``tool_id``, ``component``, ``reference_tool``, ``estimate`` (log-odds relative to the
        reference tool of its component; 0 for the reference), ``se``, ``ci_low``, ``ci_high``,
        ``n_shown``, ``n_chosen`` (attempts).
    position_effects : pandas.DataFrame
        By-keys, ``position`` (1..K), ``estimate`` (log-odds relative to position 1), ``se``, ``ci_low``,
        ``ci_high``, ``share`` (implied choice share of the position among K tools of equal worth) with
        ``share_ci_low`` / ``share_ci_high`` (delta method).
    feature_effects : pandas.DataFrame
        By-keys, ``feature``, ``estimate`` (log-odds per unit), ``se``, ``ci_low``, ``ci_high``, ``kind``
        (``feature``, ``feature_x`` / ``position_x`` for interactions with design columns).
    implied_bias : pandas.DataFrame
        By-keys, ``cluster_id``, ``orderings`` (``observed``, ``logged``: the fit with the lists shown,
        ``shuffled``: the fit with every list uniformly permuted), ``delta_api``, ``delta_pos``
        (TV distances to uniform), ``n_attempts``.
    fit_table : pandas.DataFrame
        By-keys, ``cluster_id``, ``position``, ``observed``, ``expected``, ``pearson_residual``.
    groups : pandas.DataFrame
        One row per group: keys, ``n_used``, ``n_excluded``, ``excluded`` (by reason), ``converged``,
        ``fitted`` (False for a group without a usable attempt), ``loglik``, ``n_params``, ``n_queries``,
        ``n_components``, ``sigma`` / ``sigma_se`` (mixed logit),
        Pearson ``dispersion`` over queries x tools with ``dispersion_df`` and ``dispersion_p``, Wald
        (``wald_stat``, ``wald_df``, ``wald_df_resid``, ``wald_p``) and likelihood-ratio (``lr_stat``,
        ``lr_deff``, ``lr_p``) tests of no position effect: with query-clustered intervals ``wald_p`` refers
        ``wald_stat (G - q) / (q (G - 1))`` to ``F(q, G - q)`` (``wald_df_resid = G - q``, G queries) and
        ``lr_p`` refers ``lr_stat / (lr_deff q)`` to ``F(q, G - q)``, ``lr_deff`` the Rao-Scott design effect
        of the position terms; with ``se="model"`` both use ``chi2(q)`` (``wald_df_resid`` inf, ``lr_deff`` 1).
        Position heterogeneity between queries (issue 35): ``position_dispersion`` (Pearson dispersion of each
        query's first-position choices against the fit, 1 when queries share one position effect) with
        ``position_dispersion_df`` / ``position_dispersion_p``, ``se_ratio`` (interval SE over the model-based SE of
        the position terms), ``position_heterogeneity`` (either beyond its threshold) and ``interval_advice``
        (which interval to trust, in words).
    components : pandas.DataFrame
        By-keys, ``tool_id``, ``component`` (1-based), ``reference_tool``: which tools are compared.
    not_compared : dict
        Per group label: catalog tools never shown in a used list (no worth is estimated for them).
    settings : dict
        The call parameters (provenance).
    warnings : tuple of str

    Examples
    --------
    >>> import toolbias_stats as tbs
    >>> from toolbias_stats.choicemodel import simulate_logit_log
    >>> res = tbs.choice_model(simulate_logit_log(n_tools=4, set_size=3, n_queries=40, rng=2), by=None)
    >>> res.method
    'conditional logit; Firth-penalised; query-clustered sandwich intervals'
    >>> res.position_effects["estimate"].round(1).tolist()     # true values 0, -0.4, -0.6
    [0.0, -0.4, -0.8]
    >>> res.tool_effects[["tool_id", "estimate"]].round(1).to_dict("list")
    {'tool_id': ['t1', 't2', 't3', 't4'], 'estimate': [0.0, 0.3, 0.5, 1.7]}
    >>> res.groups[["n_used", "n_excluded", "converged", "n_queries"]].to_dict("records")
    [{'n_used': 160, 'n_excluded': 0, 'converged': True, 'n_queries': 40}]
    >>> res.to_frame().columns.tolist()
    ['term_type', 'term', 'estimate', 'se', 'ci_low', 'ci_high']
    """

    tool_effects: pd.DataFrame
    position_effects: pd.DataFrame
    feature_effects: pd.DataFrame
    implied_bias: pd.DataFrame
    fit_table: pd.DataFrame
    groups: pd.DataFrame
    components: pd.DataFrame
    not_compared: dict
    settings: dict
    warnings: tuple = ()
    _raw: list = field(default_factory=list, repr=False)

    @classmethod
    def from_groups(cls, out: list[dict[str, Any]], settings: Mapping[str, Any],
                    warns: Sequence[str]) -> ChoiceModelResult:
        def cat(name):
            frames = [_with_keys(g[name], g["keys"]) for g in out if len(g[name])]
            frames = [f for f in frames if len(f)]
            return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()

        rows = []
        for g in out:
            d, h = g["dispersion"], g["heterogeneity"]
            rows.append(dict(**g["keys"], n_used=g["n_used"], n_excluded=g["n_excluded"], excluded=g["excluded"],
                             fitted=g.get("fitted", True), converged=g["converged"], loglik=g["loglik"],
                             n_params=g["n_params"], n_queries=g["n_queries"],
                             n_components=int(g["components"]["component"].max()) if len(g["components"]) else 0,
                             sigma=g["sigma"], sigma_se=g["sigma_se"], dispersion=d["dispersion"],
                             dispersion_df=d["df"], dispersion_p=d["p_value"], wald_stat=g["wald_stat"],
                             wald_df=g["wald_df"], wald_df_resid=g["wald_df_resid"], wald_p=g["wald_p"],
                             lr_stat=g["lr_stat"], lr_deff=g["lr_deff"], lr_p=g["lr_p"],
                             position_dispersion=h["position_dispersion"],
                             position_dispersion_df=h["position_dispersion_df"],
                             position_dispersion_p=h["position_dispersion_p"], se_ratio=h["se_ratio"],
                             position_heterogeneity=h["detected"], interval_advice=h["advice"]))
        not_compared = {(", ".join(f"{k}={v}" for k, v in g["keys"].items()) or "all"): g["not_compared"]
                        for g in out}
        return cls(cat("tool_effects"), cat("position_effects"), cat("feature_effects"), cat("implied_bias"),
                   cat("fit_table"), pd.DataFrame(rows), cat("components"), not_compared, dict(settings),
                   tuple(warns), list(out))

    # -- views ---------------------------------------------------------------------------------------------
    @property
    def by(self) -> tuple:
        return tuple(self.settings["by"])

    @property
    def n_used(self) -> int:
        return int(self.groups["n_used"].sum())

    @property
    def n_excluded(self) -> int:
        return int(self.groups["n_excluded"].sum())

    @property
    def converged(self) -> bool:
        """Whether every fitted group converged (groups without a usable attempt are not fitted)."""
        g = self.groups
        return bool(g.loc[g["fitted"], "converged"].all())

    @property
    def method(self) -> str:
        s = self.settings
        kind = "mixed logit (query x tool random effects, simulated ML)" if s["mixed"] else "conditional logit"
        pen = {"firth": "Firth-penalised", "prior": f"normal prior sd {s['prior_scale']}", "none": "maximum likelihood"}
        se = {"sandwich": "query-clustered sandwich", "bootstrap": "query bootstrap", "model": "model-based"}[s["se"]]
        return f"{kind}; {pen[s['penalty']]}; {se} intervals"

    def to_frame(self) -> pd.DataFrame:
        """Every coefficient in one tidy table: by-keys, ``term_type``, ``term``, estimate, se, CI."""
        parts = []
        cols = ["estimate", "se", "ci_low", "ci_high"]
        if len(self.tool_effects):
            f = self.tool_effects.rename(columns={"tool_id": "term"})
            parts.append(f[list(self.by) + ["term"] + cols].assign(term_type="tool"))
        if len(self.position_effects):
            f = self.position_effects.assign(term=self.position_effects["position"].astype(str))
            parts.append(f[list(self.by) + ["term"] + cols].assign(term_type="position"))
        if len(self.feature_effects):
            f = self.feature_effects.rename(columns={"feature": "term"})
            parts.append(f[list(self.by) + ["term"] + cols].assign(term_type="feature"))
        if self.settings["mixed"]:
            g = self.groups
            parts.append(g[list(self.by)].assign(term="sigma", estimate=g["sigma"], se=g["sigma_se"],
                                                 ci_low=g["sigma"] - 1.959963984540054 * g["sigma_se"],
                                                 ci_high=g["sigma"] + 1.959963984540054 * g["sigma_se"],
                                                 term_type="random_effect_sd"))
        out = pd.concat(parts, ignore_index=True)
        return out[list(self.by) + ["term_type", "term"] + cols]

    def to_dict(self) -> dict:
        """Strict-JSON-ready dict (NaN -> None): settings, warnings and one entry per group."""
        groups = []
        for i, g in enumerate(self._raw):
            row = self.groups.iloc[i]
            keys = {k: _num(v) for k, v in g["keys"].items()}
            ref = sorted(set(g["tool_effects"]["reference_tool"])) if len(g["tool_effects"]) else []
            if not len(g["position_effects"]):
                g = {**g, "position_effects": pd.DataFrame(columns=["position"])}
            if not len(g["tool_effects"]):
                g = {**g, "tool_effects": pd.DataFrame(columns=["tool_id", "reference_tool"])}
            if not len(g["feature_effects"]):
                g = {**g, "feature_effects": pd.DataFrame(columns=["feature"])}
            groups.append({
                "keys": keys,
                "reference_tool": ref[0] if len(ref) == 1 else ref,
                "position_effects": [{"position": int(r["position"]), "estimate": _num(r["estimate"]),
                                      "se": _num(r["se"]), "ci": [_num(r["ci_low"]), _num(r["ci_high"])],
                                      "share": _num(r["share"]),
                                      "share_ci": [_num(r["share_ci_low"]), _num(r["share_ci_high"])]}
                                     for _, r in g["position_effects"].iterrows() if r["position"] >= 2],
                "tool_effects": [{"tool_id": r["tool_id"], "estimate": _num(r["estimate"]), "se": _num(r["se"]),
                                  "ci": [_num(r["ci_low"]), _num(r["ci_high"])], "reference_tool": r["reference_tool"],
                                  "component": int(r["component"]), "n_shown": int(r["n_shown"]),
                                  "n_chosen": int(r["n_chosen"])}
                                 for _, r in g["tool_effects"].iterrows()
                                 if r["tool_id"] != r["reference_tool"]],
                "feature_effects": [{"feature": r["feature"], "estimate": _num(r["estimate"]), "se": _num(r["se"]),
                                     "ci": [_num(r["ci_low"]), _num(r["ci_high"])], "kind": r["kind"]}
                                    for _, r in g["feature_effects"].iterrows()],
                "random_effect_sd": (None if g["sigma"] is None else
                                     {"estimate": _num(g["sigma"]), "se": _num(g["sigma_se"]),
                                      "ci": [_num(max(0.0, g["sigma"] - g["z"] * g["sigma_se"])),
                                             _num(g["sigma"] + g["z"] * g["sigma_se"])]}),
                "implied_bias": _records(g["implied_bias"], list(g["implied_bias"].columns))
                if len(g["implied_bias"]) else [],
                "no_position_effect": {"wald_stat": _num(row["wald_stat"]), "df": _num(row["wald_df"]),
                                       "df_resid": _num(row["wald_df_resid"]),
                                       "wald_p": _num(row["wald_p"]), "lr_stat": _num(row["lr_stat"]),
                                       "lr_design_effect": _num(row["lr_deff"]), "lr_p": _num(row["lr_p"])},
                "covariance": {"terms": [f"{k}:{t}" for k, t in g.get("terms", [])],
                               "matrix": [[_num(v) for v in row] for row in g["cov"]] if g.get("terms") else []},
                "dispersion": {k: _num(v) for k, v in g["dispersion"].items()},
                "position_heterogeneity": {k: (v if isinstance(v, (bool, str)) else _num(v))
                                           for k, v in g["heterogeneity"].items()},
                "n_used": int(g["n_used"]), "n_excluded": int(g["n_excluded"]),
                "excluded": {str(k): int(v) for k, v in g["excluded"].items()},
                "n_queries": _num(g["n_queries"]), "n_components": int(row["n_components"]),
                "not_compared": list(g["not_compared"]),
                "loglik": _num(g["loglik"]), "fitted": bool(g.get("fitted", True)),
                "converged": bool(g["converged"]),
            })
        s = {k: (list(v) if isinstance(v, tuple) else v) for k, v in self.settings.items()}
        return {"method": self.method, "settings": s, "warnings": list(self.warnings), "groups": groups}

    def covariance(self, keys: Mapping[str, Any] | None = None) -> pd.DataFrame:
        """The interval covariance of one group's coefficients (original scale), labelled ``kind:term``.

        Parameters
        ----------
        keys : dict, optional
            The group's by-values (default: the only group).

        Returns
        -------
        pandas.DataFrame
            Square, indexed and labelled by ``tool:<id>``, ``position:<p>``, ``feature:<name>``, ... (the
            reference tools, fixed at 0, are left out).
        """
        g = self._group(keys)
        labels = [f"{k}:{t}" for k, t in g.get("terms", [])]
        return pd.DataFrame(g["cov"] if labels else None, index=labels, columns=labels)

    def contrast(self, tool_a: str, tool_b: str, keys: Mapping[str, Any] | None = None) -> dict:
        """The difference of two tools' worths ``worth[a] - worth[b]`` (log-odds) with its interval.

        The standard error comes from the interval covariance of the two worths (a reference tool has worth 0
        and no variance), the interval is ``estimate ± z · se`` at the fit's confidence level. Both tools must be
        in the same component of the comparison graph.

        Returns
        -------
        dict
            By-keys, ``tool_a``, ``tool_b``, ``estimate``, ``se``, ``ci_low``, ``ci_high``, ``p_value`` (two-sided
            Wald test of equal worths).

        Examples
        --------
        >>> import toolbias_stats as tbs
        >>> from toolbias_stats.choicemodel import simulate_logit_log
        >>> res = tbs.choice_model(simulate_logit_log(n_tools=4, set_size=3, n_queries=40, rng=2), by=None)
        >>> c = res.contrast("t4", "t2")
        >>> round(c["estimate"], 1), bool(c["ci_low"] > 0)
        (1.4, True)
        """
        import numpy as np
        from scipy import stats

        g = self._group(keys)
        comp = g["components"].set_index("tool_id")["component"]
        for t in (tool_a, tool_b):
            if t not in comp.index:
                raise ValueError(f"tool {t!r} is not shown in any used list of group {g['keys'] or 'all'}; tools: "
                                 f"{sorted(comp.index)[:20]}.")
        if comp[tool_a] != comp[tool_b]:
            raise ValueError(f"tools {tool_a!r} and {tool_b!r} are in different components of the comparison graph "
                             "(never compared, directly or through other tools): their worths cannot be contrasted.")
        idx = {t: i for i, (k, t) in enumerate(g["terms"]) if k == "tool"}
        L = np.zeros(len(g["terms"]))
        if tool_a in idx:
            L[idx[tool_a]] += 1.0
        if tool_b in idx:
            L[idx[tool_b]] -= 1.0
        est = float(L @ g["theta"])
        se = float(np.sqrt(max(L @ g["cov"] @ L, 0.0)))
        z = float(g["z"])
        p = float(2 * stats.norm.sf(abs(est) / se)) if se > 0 else float("nan")
        return {**g["keys"], "tool_a": tool_a, "tool_b": tool_b, "estimate": est, "se": se, "ci_low": est - z * se,
                "ci_high": est + z * se, "p_value": p}

    def _group(self, keys):
        fitted = [g for g in self._raw if g.get("terms")]
        if keys is None:
            if len(fitted) != 1:
                raise ValueError(f"the result has {len(fitted)} fitted groups; name one with `keys` "
                                 f"({[g['keys'] for g in fitted][:5]}).")
            return fitted[0]
        for g in fitted:
            if {k: str(v) for k, v in g["keys"].items()} == {k: str(v) for k, v in dict(keys).items()}:
                return g
        raise ValueError(f"no fitted group with keys {dict(keys)}; groups: {[g['keys'] for g in fitted][:5]}.")

    # -- display -------------------------------------------------------------------------------------------
    def _headline(self):
        pos = self.position_effects
        note = (f"{self.method}. Rows used {self.n_used}, excluded {self.n_excluded}. "
                f"Tool effects: {len(self.tool_effects)} rows in .tool_effects.")
        return "Choice model: position effects (log-odds vs position 1)", pos, note

    def _repr_html_(self) -> str:
        title, frame, note = self._headline()
        parts = [frame_html(frame, title=title, note=note)]
        if len(self.feature_effects):
            parts.append(frame_html(self.feature_effects, title="Feature effects (log-odds per unit)"))
        tests = self.groups[list(self.by) + ["converged", "wald_stat", "wald_df", "wald_p", "dispersion"]]
        parts.append(frame_html(tests, title="No position effect (Wald) and per-query dispersion"))
        if self.warnings:
            parts.append("<ul>" + "".join(f"<li>{html.escape(w)}</li>" for w in self.warnings) + "</ul>")
        return "".join(parts)
