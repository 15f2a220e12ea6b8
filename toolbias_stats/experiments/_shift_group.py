"""One ``by`` group of :func:`~toolbias_stats.experiments.selection_shift`: the count tensors of every level, their
bootstrap replicates and permutations, and the comparisons with the base level."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pandas as pd

from .._resampling import ConfidenceInterval, percentile_ci, resampled_counts
from .._schema import STATUSES
from ..exceptions import DegenerateDataWarning
from ..metrics import rates_from_counts
from ..metrics._bias import _tensors
from ._shift_levels import _level_codes, _py, _same
from ._shift_results import MIN_UNITS, PAIRED_OVERLAP, ChangeEstimate, ShiftEstimate, ShiftGroup, TrendResult
from ._shift_stats import _delta, _mean_rates, _nanmean, _nansd, calibrated_mean_shift

#: ``null_method`` of paired comparisons (issue 35): within (query, list shown) where the counts keep the lists
#: (``SelectionCounts.query_orderings``), else within query.
PAIRED_NULL_ORDERING = "permute valid choices within query and list"
PAIRED_NULL = "permute valid choices within query"


def _text_keys(frame, cols):
    """One text key per row from ``cols`` (numbers and ids spelled as the count tables spell them)."""
    from ..io._counts import _as_text

    if not cols:
        return np.zeros(len(frame), dtype=object)
    parts = [np.array(["\x00" if pd.isna(v) else _as_text(v) for v in frame[c].astype(object)], dtype=object)
             for c in cols]
    out = parts[0]
    for p in parts[1:]:
        out = out + "\x1f" + p
    return out


def _mid_p(null, obs):
    """Permutation p-values with ties counted half (mid-p, Lancaster 1961), column by column.

    ``(#{T* > T} + (1 + #{T* = T}) / 2) / (1 + N)``: the mean of the randomised permutation p-value, which is
    exactly uniform under the null. A per-tool difference takes few values when a level has few valid choices,
    and counting every tie in full made the test conservative (size 1.4-3.0% at nominal 5% in the small-level and
    85%-missing designs of issue 35; ``analyses/shift_design_size.py``).

    Examples
    --------
    >>> import numpy as np
    >>> _mid_p(np.array([[0.0], [0.1], [0.1], [0.2]]), np.array([0.1])).round(3).tolist()   # (1 + 3/2) / 5
    [0.5]
    """
    tol = 1e-12
    greater = np.sum(null > obs[None, :] + tol, axis=0)
    ties = np.sum(np.abs(null - obs[None, :]) <= tol, axis=0)
    return (greater + 0.5 * (1 + ties)) / (1 + null.shape[0])


def _ordering_units(orderings, slot_design, ctx):
    """Per cluster, the valid choices as ``(U, S, K)`` tensors of tools and positions whose units are (query, list
    shown): under "no change" only attempts that saw the same query in the same list are exchangeable (a chooser
    that prefers a tool puts its choices at the positions the lists give that tool; dealing a query's positions
    across lists loses that and the null law of ``shift_pos`` comes out too wide: size 0.8% at nominal 5% with
    balanced runs, issue 35). ``{}`` where the counts do not keep the lists; a cluster whose per-list counts do
    not add up to its per-query counts is left out (the query-level null is used for it)."""
    if orderings is None or not len(orderings):
        return {}
    design = [c for c in slot_design.columns if c != "_slot"]
    slot_of = dict(zip(_text_keys(slot_design, design), slot_design["_slot"].to_numpy()))
    rows = orderings
    s_idx = np.array([slot_of.get(k, -1) for k in _text_keys(rows, design)], dtype=np.int64)
    rows = rows[s_idx >= 0]
    s_idx = s_idx[s_idx >= 0]
    out = {}
    cl_text = rows["cluster_id"].astype(object).to_numpy()
    for c in ctx.clusters:
        here = cl_text == str(c)
        if not here.any():
            continue
        part = rows[here]
        unit, _ = pd.factorize(pd.Series(_text_keys(part, ["query_id", "ordering"])))
        n_u, n_s = int(unit.max()) + 1, ctx.n_runs
        k_api = ctx.api[c].shape[-1]
        t = part["api_index"].to_numpy(np.int64) - 1
        r = part["chosen_rank"].to_numpy(np.int64) - 1
        n = part["count"].to_numpy(np.int64)
        s = s_idx[here]
        ua = np.zeros((n_u, n_s, k_api))
        ok = (t >= 0) & (t < k_api)
        np.add.at(ua, (unit[ok], s[ok], t[ok]), n[ok])
        if not np.array_equal(ua.sum(0), ctx.api[c].sum(0)):
            continue
        up = None
        if ctx.pos[c] is not None:
            k_pos = ctx.pos[c].shape[-1]
            up = np.zeros((n_u, n_s, k_pos))
            okp = (r >= 0) & (r < k_pos)
            np.add.at(up, (unit[okp], s[okp], r[okp]), n[okp])
            if not np.array_equal(up.sum(0), ctx.pos[c].sum(0)):
                continue
        out[c] = (ua, up)
    return out


def deal_within_units(x, strata, n_perm, gen):
    """Permutations of valid choices within each unit under "no change": ``(n_perm, S, K)`` summed over units.

    Parameters
    ----------
    x : ndarray, shape (Q, S, K)
        Counts per unit (query), run slot and category (tool or position), integral.
    strata : ndarray, shape (S,)
        The combination of the other factors of each slot: choices move only between slots of one combination.
    n_perm : int
    gen : numpy.random.Generator

    Returns
    -------
    ndarray, shape (n_perm, S, K)
        Each permutation deals a unit's valid choices (of the slots of one stratum) at random to those slots,
        keeping the number of valid choices of every (unit, slot): missing choices stay where they were, so that
        a change in missingness is not read as a change in selection. Each permutation shuffles every unit's
        choices among the unit's places (one sort of random keys per permutation, blocks of permutations at a
        time): the law of the multivariate hypergeometric deal, at a cost that grows with the valid choices, not
        with units x categories (the units of the paired null are (query, list shown), issue 35).

    Examples
    --------
    >>> import numpy as np
    >>> x = np.array([[[3, 0], [0, 1]], [[1, 1], [0, 0]]])   # 2 units, 2 slots, 2 tools
    >>> out = deal_within_units(x, np.array([0, 0]), 4000, np.random.default_rng(0))
    >>> out.sum(-1)[0].tolist(), out.sum(1)[0].tolist()     # slot sizes and tool totals are kept
    ([5.0, 1.0], [4.0, 2.0])
    >>> bool(abs(out[:, 1, 1].mean() - 0.25) < 0.02)       # unit 1's one slot-2 choice is tool 2 with p = 1/4
    True
    """
    x = np.rint(np.asarray(x, dtype=float)).astype(np.int64)
    _, s, k = x.shape
    out = np.zeros((n_perm, s, k))
    strata = np.asarray(strata, dtype=np.int64)
    uq, us, uk = np.nonzero(x > 0)
    reps = x[uq, us, uk]
    if not reps.size or not n_perm:
        return out
    # one entry per valid choice; the exchangeable sets are (unit, stratum of the slot), in blocks
    group = np.repeat(uq * (int(strata.max()) + 1) + strata[us], reps)
    slot, cat = np.repeat(us, reps), np.repeat(uk, reps)
    order = np.argsort(group, kind="stable")
    group, slot, cat = group[order].astype(float), slot[order], cat[order]
    m = cat.size
    chunk = max(1, 2_000_000 // m)
    for lo in range(0, n_perm, chunk):
        n = min(chunk, n_perm - lo)
        # a uniform in [0, 1) added to the block number shuffles every block in place: the slots stay where they
        # are (their numbers of valid choices are kept) and the categories are dealt at random among them
        perm = np.argsort(group[None, :] + gen.random((n, m)), axis=1)
        idx = (np.arange(n)[:, None] * s + slot[None, :]) * k + cat[perm]
        out[lo:lo + n] = np.bincount(idx.ravel(), minlength=n * s * k).reshape(n, s, k)
    return out


def _mover_change(parts, conf):
    """``corrected`` and ``corrected_ci`` of a change in delta: the calibrated delta of each level (valid choices,
    runs pooled; :func:`~toolbias_stats.calibrated_mean_tv`) and the MOVER interval of their difference.

    MOVER (Zou & Donner 2008): for ``d = e_L - e_B`` with intervals ``[l, u]`` of each,
    ``lo = d - sqrt((e_L - l_L)^2 + (u_B - e_B)^2)`` and ``hi = d + sqrt((u_L - e_L)^2 + (e_B - l_B)^2)``; a sum over
    parts (delta_model = (delta_API + delta_pos) / 2) adds the squares. Each calibrated interval follows the plug-in
    kink of its own level, which the percentile interval of the difference does not (a base without effect: covered
    in 35% of studies, issue 35). The two levels' estimates are treated as independent: conservative when paired.

    *At the boundary.* Where the level whose bound enters a limit has an interval reaching 0 (the base for the upper
    limit, the level for the lower), its distance enters linearly, not in quadrature (:func:`_radius`): the upper
    limit is then ``u_L - l_B = u_L``, which holds with the level's own one-sided coverage since ``delta_B >= 0``. The
    quadrature assumes estimates roughly symmetric about their truths, which an estimate held at 0 or above is not
    (the calibrated delta of a base without effect averages 0.014, not 0): from a base without a position effect to
    a level with one (0 -> 0.045) the quadrature's upper limit fell below the truth in 8.8% of 250 studies, this
    limit in 2.6% of 500 (coverage 97.4%; ``analyses/shift_design_size.py``, cell ``pos0to45``).
    """
    from ..metrics import calibrated_mean_tv

    est, low, high = 0.0, 0.0, 0.0
    for p in parts:
        cal = {}
        for side in ("b", "l"):
            counts = [np.rint(x).astype(np.int64) for x in p["c" + side]]
            boots = [np.rint(np.nan_to_num(x)).astype(np.int64) for x in p["bc" + side]]
            if any(x.sum() == 0 for x in counts) or boots[0].shape[0] < 20:   # the calibration needs 20 replicates
                return {}
            cal[side] = calibrated_mean_tv(counts, boots, confidence_level=conf)
        b, lv = cal["b"], cal["l"]
        est += lv.estimate - b.estimate
        low += _radius(lv.estimate - lv.ci_low, b.ci_high - b.estimate, lv.ci_low <= 0) ** 2
        high += _radius(lv.ci_high - lv.estimate, b.estimate - b.ci_low, b.ci_low <= 0) ** 2
    n = len(parts)
    est /= n
    lo, hi = max(est - np.sqrt(low) / n, -1.0), min(est + np.sqrt(high) / n, 1.0)
    return {"corrected": float(est), "corrected_ci": ConfidenceInterval(float(lo), float(hi))}


def _agree_with_test(lo, hi, p, alpha):
    """Per-tool intervals that exclude 0 only where the permutation test rejects at ``alpha``: otherwise the bound
    nearer 0 is moved to 0.

    The percentile interval of a share difference is too short on the side of a level with few valid choices (a
    rare tool's count is small and its bootstrap law skewed: intervals below a true 0 in 6.6-7.4% of studies with
    85% missing or 24 attempts, issue 35); the exact test decides whether 0 is excluded.

    Examples
    --------
    >>> import numpy as np
    >>> lo, hi = _agree_with_test(np.array([-0.2, 0.01, 0.02]), np.array([-0.01, 0.1, 0.2]),
    ...                           np.array([0.3, 0.2, 0.01]), 0.05)
    >>> lo.tolist(), hi.tolist()
    ([-0.2, 0.0, 0.02], [0.0, 0.1, 0.2])
    """
    lo, hi = np.array(lo, dtype=float), np.array(hi, dtype=float)
    keep = ~(np.asarray(p, dtype=float) > alpha)           # NaN p (no test): intervals as they are
    lo = np.where((lo > 0) & ~keep, 0.0, lo)
    hi = np.where((hi < 0) & ~keep, 0.0, hi)
    return lo, hi


def _radius(own, other, at_boundary):
    """One part's distance from the change to a MOVER limit: ``sqrt(own^2 + other^2)``, or ``own + other`` when
    ``at_boundary`` (the level whose lower bound enters the limit has an interval reaching 0; see
    :func:`_mover_change`).

    Examples
    --------
    >>> float(_radius(0.03, 0.04, False)), float(_radius(0.03, 0.04, True))
    (0.05, 0.07)
    """
    return own + other if at_boundary else float(np.hypot(own, other))


class _GroupData:
    """Per-cluster count tensors of every level of one ``by`` group, and their bootstrap replicates."""

    def __init__(self, sub, catalog, between, base, levels, others, keys, pairing, n_resamples, gen, caught,
                 numeric, replicates=("run",), orderings=None):
        self.keys, self.between, self.base, self.gen, self.caught = keys, between, base, gen, caught
        self.n_resamples = n_resamples
        self.note = ""
        self.levels = levels
        self.others = [lv for lv in levels if not _same(lv, base)]
        self.numeric = numeric
        sub = sub.copy()
        # one "run" = one combination of the design columns other than by/between; sorted by level first so
        # that every level's runs are contiguous on the run axis
        sub["_level"] = _level_codes(sub[between], levels)
        run_cols = ["_level"] + others
        slot = sub.groupby(run_cols, sort=True, dropna=False, observed=True).ngroup().to_numpy()
        # the design values of every slot (before "run" is overwritten by the slot index)
        slot_design = sub[[between] + others].assign(_slot=slot).drop_duplicates([between] + others)
        sub["run"] = slot
        level_of_run = sub.groupby("run", sort=True)["_level"].first().to_numpy()
        # the other factors' combination of each run slot (replicates left out): under "no change" a unit's valid
        # choices are exchangeable between the slots of one combination, never across combinations (issue 35)
        factor_cols = [c for c in others if c not in set(replicates)]
        if factor_cols:
            firsts = sub.groupby("run", sort=True)[factor_cols].first()
            self.slot_stratum = firsts.groupby(factor_cols, sort=True, dropna=False, observed=True).ngroup().to_numpy()
        else:
            self.slot_stratum = np.zeros(len(level_of_run), dtype=np.int64)
        self.runs_of = {i: np.flatnonzero(level_of_run == i) for i in range(len(levels))}
        self.n_runs = len(level_of_run)
        present = set(sub["cluster_id"].unique())
        self.clusters = [c for c in catalog.clusters if c in present]
        self.catalog = catalog
        self.k = {}
        self.api, self.pos, self.qmask, self.rows = {}, {}, {}, {}
        by_cluster = dict(iter(sub.groupby("cluster_id", sort=False, observed=True)))
        for c in self.clusters:
            part = by_cluster[c]
            api, pos, tools = _tensors(part, catalog, c, np.arange(self.n_runs), caught, keys)
            self.k[c] = (api.k, None if pos is None else pos.k, tools)
            self.api[c] = api.counts
            self.pos[c] = None if pos is None else pos.counts
            # which queries each level has attempts for (any status)
            q_codes, _ = pd.factorize(part["query_id"], sort=True)
            att = part[[f"n_{s}" for s in STATUSES]].to_numpy().sum(1)
            mask = np.zeros((api.counts.shape[0], len(levels)), dtype=bool)
            np.logical_or.at(mask, (q_codes, part["_level"].to_numpy()), att > 0)
            self.qmask[c] = mask
            self.rows[c] = {i: (int(att[part["_level"].to_numpy() == i].sum()),
                                int(part["n_ok"].to_numpy()[part["_level"].to_numpy() == i].sum()))
                            for i in range(len(levels))}
        self.pairing = self._pairing(pairing)
        self.boot_api, self.boot_pos = self._bootstrap()
        # the units of the paired null: (query, list shown) where the counts keep the lists, else queries
        self.units = _ordering_units(orderings, slot_design, self) if self.pairing == "paired" else {}

    # -- design -----------------------------------------------------------------------------
    def _idx(self, level):
        return next(i for i, lv in enumerate(self.levels) if _same(lv, level))

    def _pairing(self, pairing):
        if pairing != "auto":
            return pairing
        b = self._idx(self.base)
        for lv in self.others:
            i = self._idx(lv)
            # only clusters both levels were run on (a targeted condition covers some clusters only)
            both = [m for m in self.qmask.values() if m[:, b].any() and m[:, i].any()]
            inter = sum(int((m[:, b] & m[:, i]).sum()) for m in both)
            # of the smaller level's queries (issue 35: a level of a few repeated attempts on the base's queries is
            # paired; the valid choices of shared queries are what the null makes exchangeable)
            smaller = min(sum(int(m[:, b].sum()) for m in both), sum(int(m[:, i].sum()) for m in both))
            if smaller == 0 or inter / smaller < PAIRED_OVERLAP:
                return "independent"
        return "paired"

    def _bootstrap(self):
        """Replicate counts (R, S, K) per cluster, api and pos, on the full run axis."""
        r = self.n_resamples
        boot_api, boot_pos = {}, {}
        for c in self.clusters:
            api, pos = self.api[c], self.pos[c]
            if not r:
                boot_api[c] = boot_pos[c] = None
                continue
            if self.pairing == "paired":
                reps = resampled_counts([api] + ([] if pos is None else [pos]), r, self.gen)
                boot_api[c] = reps[0]
                boot_pos[c] = None if pos is None else reps[1]
            else:
                ba = np.zeros((r,) + api.shape[1:])
                bp = None if pos is None else np.zeros((r,) + pos.shape[1:])
                for i in range(len(self.levels)):
                    q = self.qmask[c][:, i]
                    runs = self.runs_of[i]
                    if not q.any():
                        continue
                    targets = [api[q][:, runs]] + ([] if pos is None else [pos[q][:, runs]])
                    reps = resampled_counts(targets, r, self.gen)
                    ba[:, runs] = reps[0]
                    if pos is not None:
                        bp[:, runs] = reps[1]
                boot_api[c], boot_pos[c] = ba, bp
        return boot_api, boot_pos

    # -- one comparison ---------------------------------------------------------------------
    def compare(self, level, n_perm, conf) -> ShiftGroup | None:
        b, i = self._idx(self.base), self._idx(level)
        rb, rl = self.runs_of[b], self.runs_of[i]
        keys = {**self.keys, self.between: _py(level)}
        clusters = [c for c in self.clusters
                    if self.api[c][:, rb].sum() > 0 and self.api[c][:, rl].sum() > 0]
        dropped = [c for c in self.clusters if c not in clusters]
        if not clusters:
            msg = f"group {keys}: no cluster has valid choices in both {self.base!r} and {level!r}; skipped"
            warnings.warn(msg, DegenerateDataWarning, stacklevel=5)
            self.caught.append(msg)
            return None
        if dropped:
            msg = (f"group {keys}: clusters {dropped} lack valid choices in one of the two levels and are left out "
                   f"of this comparison ({len(clusters)} clusters compared)")
            self.caught.append(msg)
        pos_clusters = [c for c in clusters if self.pos[c] is not None
                        and self.pos[c][:, rb].sum() > 0 and self.pos[c][:, rl].sum() > 0]
        self.note = self._few_units(clusters, rb, rl, level)
        perms = {c: self._permute(c, rb, rl, b, i, n_perm) for c in clusters} if n_perm else {}
        null_method = next(iter(perms.values()))[2] if perms else "none"

        api = self._target_stats(self.api, self.boot_api, clusters, "api", rb, rl, perms, n_perm)
        pos = self._target_stats(self.pos, self.boot_pos, pos_clusters, "pos", rb, rl, perms, n_perm) \
            if pos_clusters else None
        shift_api = self._shift_estimate("shift_api", api, conf, null_method)
        shift_pos = self._shift_estimate("shift_pos", pos, conf, null_method) if pos else None
        change = {"delta_api": self._change("delta_api", [api], conf),
                  "delta_pos": self._change("delta_pos", [pos], conf) if pos else None,
                  "delta_model": self._change("delta_model", [api, pos], conf) if pos and pos_clusters == clusters
                  else None}
        crow = self._cluster_rows(clusters, pos_clusters, api, pos, b, i, conf)
        trow = self._tool_rows(clusters, api, rb, rl, perms, n_perm, conf)
        rows = {"base": {"attempts": sum(self.rows[c][b][0] for c in clusters),
                         "valid": sum(self.rows[c][b][1] for c in clusters)},
                "level": {"attempts": sum(self.rows[c][i][0] for c in clusters),
                          "valid": sum(self.rows[c][i][1] for c in clusters)}}
        return ShiftGroup(keys=keys, base=_py(self.base), pairing=self.pairing, n_clusters=len(clusters),
                          clusters=crow, shift_api=shift_api, shift_pos=shift_pos, change=change,
                          tools=pd.DataFrame(trow), rows=rows)

    def _few_units(self, clusters, rb, rl, level):
        """Why no bootstrap interval is given (a level with valid choices on fewer than MIN_UNITS queries of a
        compared cluster), or ``""``."""
        few = []
        for c in clusters:
            for name, runs in ((self.base, rb), (level, rl)):
                n = int((self.api[c][:, runs].sum(axis=(1, 2)) > 0).sum())
                if n < MIN_UNITS:
                    few.append(f"{name!r} has valid choices on {n} queries of cluster {c}")
        if not few:
            return ""
        return ("no interval: " + "; ".join(few[:3]) + ("; ..." if len(few) > 3 else "")
                + f" (a query bootstrap needs at least {MIN_UNITS}; the permutation p-value stays exact)")

    def _cluster_rows(self, clusters, pos_clusters, api, pos, b, i, conf):
        """The per-cluster table of one comparison: shifts with intervals, delta at the base and at the level."""
        r = self.n_resamples if not self.note else 0
        crow = []
        for j, c in enumerate(clusters):
            row = {"cluster": str(c), "K": int(self.k[c][0]), "n_base": self.rows[c][b][1],
                   "n_level": self.rows[c][i][1], "shift_api": float(api["shift"][j]),
                   "shift_api_ci": list(percentile_ci(api["bshift"][j], conf)) if r else [np.nan, np.nan],
                   "delta_api_base": float(api["db"][j]), "delta_api": float(api["dl"][j])}
            if pos and c in pos_clusters:
                jj = pos_clusters.index(c)
                row.update({"shift_pos": float(pos["shift"][jj]),
                            "shift_pos_ci": list(percentile_ci(pos["bshift"][jj], conf)) if r else [np.nan, np.nan],
                            "delta_pos_base": float(pos["db"][jj]), "delta_pos": float(pos["dl"][jj])})
            else:
                row.update({"shift_pos": np.nan, "shift_pos_ci": [np.nan, np.nan], "delta_pos_base": np.nan,
                            "delta_pos": np.nan})
            crow.append(row)
        return crow

    def _tool_rows(self, clusters, api, rb, rl, perms, n_perm, conf):
        """The per-tool shares of one comparison, with intervals and permutation p-values."""
        r = self.n_resamples
        trow = []
        for j, c in enumerate(clusters):
            tools = self.k[c][2]
            pb = _mean_rates(self.api[c][:, rb].sum(0))
            pl = _mean_rates(self.api[c][:, rl].sum(0))
            if r and not self.note:
                lo, hi = np.nanquantile(api["bdiff"][j], [(1 - conf) / 2, 1 - (1 - conf) / 2], axis=0)
            else:
                lo = hi = np.full(len(tools), np.nan)
            if n_perm:
                pd_ = api["pdiff"][j]
                # the observed difference in the representation the permutations use (runs pooled or not), so
                # that it and its permutation distribution are the same statistic; with equal runs this is pl - pb
                obs = _mean_rates(perms[c][4][..., :len(tools)]) - _mean_rates(perms[c][3][..., :len(tools)])
                pv = _mid_p(np.abs(pd_), np.abs(obs))
            else:
                pv = np.full(len(tools), np.nan)
            lo, hi = _agree_with_test(lo, hi, pv, 1 - conf)
            for t, tool in enumerate(tools):
                trow.append({"cluster": str(c), "tool_id": tool, "api_index": t + 1, "share_base": float(pb[t]),
                             "share": float(pl[t]), "difference": float(pl[t] - pb[t]), "ci_low": float(lo[t]),
                             "ci_high": float(hi[t]), "p_value": float(pv[t])})
        return trow

    def _target_stats(self, tensors, boots, cl, kind, rb, rl, perms, n_perm):
        """Per-cluster observed / bootstrap / permutation values of the shift and of delta."""
        r = self.n_resamples
        out = {"shift": [], "pooled": [], "diff": [], "bdiff": [], "bshift": [], "db": [], "dl": [],
               "bdb": [], "bdl": [], "norm": [], "pshift": [], "pdelta_b": [], "pdelta_l": [], "pdiff": [],
               "pstat_obs": [], "pdelta_obs": [], "cb": [], "cl": [], "bcb": [], "bcl": []}
        for c in cl:
            t = tensors[c]
            ob, ol = t[:, rb].sum(0), t[:, rl].sum(0)
            pb, pl = _mean_rates(ob), _mean_rates(ol)
            out["diff"].append(pl - pb)
            out["shift"].append(0.5 * np.abs(pl - pb).sum())
            out["pooled"].append(0.5 * np.abs(rates_from_counts(ol.sum(0)) - rates_from_counts(ob.sum(0))).sum())
            out["db"].append(_delta(ob))
            out["dl"].append(_delta(ol))
            out["cb"].append(ob.sum(0))
            out["cl"].append(ol.sum(0))
            k = t.shape[-1]
            out["norm"].append(1 - 1 / k)
            if r:
                bt = boots[c]
                bb, bl = bt[:, rb], bt[:, rl]
                d = _mean_rates(bl) - _mean_rates(bb)
                out["bdiff"].append(d)
                out["bshift"].append(0.5 * np.abs(d).sum(-1))
                out["bdb"].append(_delta(bb))
                out["bdl"].append(_delta(bl))
                out["bcb"].append(bb.sum(1))
                out["bcl"].append(bl.sum(1))
            if n_perm:
                pb_, pl_, _, ob_, ol_, off = perms[c]
                sl = slice(0, k) if kind == "api" else slice(off, off + k)
                qb, ql = pb_[..., sl], pl_[..., sl]
                d = _mean_rates(ql) - _mean_rates(qb)
                out["pshift"].append(0.5 * np.abs(d).sum(-1))
                out["pdiff"].append(d)
                out["pdelta_b"].append(_delta(qb))
                out["pdelta_l"].append(_delta(ql))
                o = _mean_rates(ol_[..., sl]) - _mean_rates(ob_[..., sl])
                out["pstat_obs"].append(0.5 * np.abs(o).sum())
                out["pdelta_obs"].append(_delta(ol_[..., sl]) - _delta(ob_[..., sl]))
        return out

    def _permute(self, c, rb, rl, b, i, n_perm):
        """Permuted (base, level) counts (N, S', K_api + K_pos) of cluster ``c`` under "no change".

        Returns ``(perm_base, perm_level, method, obs_base, obs_level, pos_offset)``; ``obs_*`` are the
        unpermuted counts in the same representation (runs pooled or not).
        """
        api, pos = self.api[c], self.pos[c]
        joined = api if pos is None else np.concatenate([api, pos], axis=-1)     # (Q, S, K + Kp)
        off = api.shape[-1]
        gen = self.gen
        if self.pairing == "paired":
            slots = np.concatenate([rb, rl])
            strata = self.slot_stratum[slots]
            u_api, u_pos = self.units.get(c, (api, pos))
            parts = [deal_within_units(u_api[:, slots], strata, n_perm, gen)]
            if pos is not None:
                parts.append(deal_within_units(u_pos[:, slots], strata, n_perm, gen))
            perm = np.concatenate(parts, axis=-1)
            obs = joined[:, slots].sum(0)
            nb = len(rb)
            method = PAIRED_NULL_ORDERING if c in self.units else PAIRED_NULL
            return perm[:, :nb], perm[:, nb:], method, obs[:nb], obs[nb:], off
        # independent: re-allocate whole queries (runs pooled) between the levels
        mb, ml = self.qmask[c][:, b], self.qmask[c][:, i]
        yb = joined[mb][:, rb].sum(1)
        yl = joined[ml][:, rl].sum(1)
        method = "re-allocate queries (runs pooled)"
        if len(rb) != len(rl):
            # a query carries the mean of its runs' counts, so that one run by more cannot weigh more where it is
            # moved (pooled blocks would balance the levels' sample sizes in every permutation: too narrow a law)
            yb, yl = yb / len(rb), yl / len(rl)
            method = "re-allocate queries (runs averaged)"
        y = np.concatenate([yb, yl])                                              # (Qb + Ql, K)
        nb = len(yb)
        order = np.argsort(gen.random((n_perm, len(y))), axis=1)
        m = np.zeros((n_perm, len(y)))
        np.put_along_axis(m, order[:, :nb], 1.0, axis=1)
        pb = (m @ y)[:, None, :]
        pl = y.sum(0)[None, None, :] - pb
        return pb, pl, method, yb.sum(0)[None], yl.sum(0)[None], off

    def _shift_estimate(self, name, st, conf, null_method) -> ShiftEstimate:
        shift = np.array(st["shift"])
        stat = float(shift.mean())
        kw: dict = {"note": self.note}
        if self.n_resamples and not self.note:
            boot = np.stack(st["bshift"], axis=1).mean(1)
            cal = calibrated_mean_shift(st["diff"], st["bdiff"], confidence_level=conf)
            kw.update(ci=percentile_ci(boot, conf), corrected=cal.estimate,
                      corrected_ci=ConfidenceInterval(cal.ci_low, cal.ci_high),
                      standard_error=float(np.nanstd(boot, ddof=1)), bootstrap_distribution=boot)
        if st["pshift"]:
            perm = np.stack(st["pshift"], axis=1).mean(1)
            obs = float(np.mean(st["pstat_obs"]))
            kw.update(null_expected=float(np.mean(perm)), null_method=null_method,
                      p_value=float((1 + np.sum(perm >= obs - 1e-12)) / (1 + len(perm))))
            ci = kw.get("corrected_ci")
            if ci is not None and ci.low > 0 and kw["p_value"] > (1 - conf) / 2:
                # a lower bound above 0 says "a shift at the one-sided level (1 - conf) / 2"; the exact permutation
                # test decides that, not the bootstrap law of the noise (which is too narrow when a level has few
                # valid choices: lower bounds above a true 0 in 5.6% of studies with 85% missing, issue 35)
                kw["corrected_ci"] = ConfidenceInterval(0.0, ci.high)
        return ShiftEstimate(metric=name, mean_over_clusters=stat, sd_over_clusters=_nansd(shift),
                             pooled=float(np.mean(st["pooled"])), n_clusters=len(shift), confidence_level=conf, **kw)

    def _change(self, name, parts, conf) -> ChangeEstimate:
        """Change in delta (level - base); ``parts`` = [api] or [api, pos] (delta_model averages them)."""
        def avg(key, stack_axis=None):
            vals = []
            for p in parts:
                x = np.asarray(p[key]) if stack_axis is None else np.stack(p[key], axis=stack_axis)
                vals.append(_nanmean(x, 0 if stack_axis is None else stack_axis))
            return sum(vals) / len(vals)

        def avg_norm(key_b, key_l, stack_axis=None):
            vals = []
            for p in parts:
                nb = np.asarray(p["norm"])
                xb = np.asarray(p[key_b]) if stack_axis is None else np.stack(p[key_b], axis=1)
                xl = np.asarray(p[key_l]) if stack_axis is None else np.stack(p[key_l], axis=1)
                vals.append(_nanmean((xl - xb) / nb, 0 if stack_axis is None else 1))
            return sum(vals) / len(vals)

        base_v, val = float(avg("db")), float(avg("dl"))
        kw: dict[str, Any] = {"normalised_estimate": float(avg_norm("db", "dl")), "note": self.note}
        if self.n_resamples and not self.note:
            boot = avg("bdl", 1) - avg("bdb", 1)
            kw.update(ci=percentile_ci(boot, conf), normalised_ci=percentile_ci(avg_norm("bdb", "bdl", 1), conf),
                      standard_error=float(np.nanstd(boot, ddof=1)), bootstrap_distribution=boot)
            kw.update(_mover_change(parts, conf))
        if parts[0]["pdelta_b"]:
            perm = avg("pdelta_l", 1) - avg("pdelta_b", 1)
            obs = float(avg("pdelta_obs"))
            # centred on the null law's mean (the observed value included, so that it stays exchangeable with the
            # permuted ones): with unequal valid counts the plug-in bias of the two deltas differs, so the law of
            # the change under "no change" is not centred at 0 (issue 35)
            centre = (float(np.sum(perm)) + obs) / (len(perm) + 1)
            kw["p_value"] = float((1 + np.sum(np.abs(perm - centre) >= abs(obs - centre) - 1e-12)) / (1 + len(perm)))
        return ChangeEstimate(metric=name, base_value=base_v, value=val, estimate=val - base_v, **kw)

    # -- trend over a numeric column ----------------------------------------------------------
    def trend(self, conf) -> TrendResult | None:
        common = [c for c in self.clusters if all(self.api[c][:, self.runs_of[i]].sum() > 0
                                                  for i in range(len(self.levels)))]
        if not common:
            msg = f"group {self.keys}: no cluster has valid choices at every level; no trend"
            self.caught.append(msg)
            return None
        pos_common = [c for c in common if self.pos[c] is not None
                      and all(self.pos[c][:, self.runs_of[i]].sum() > 0 for i in range(len(self.levels)))]
        x = np.array([float(lv) for lv in self.levels])
        est, boot = {}, {}
        for m, tensors, boots, cl in (("delta_api", self.api, self.boot_api, common),
                                      ("delta_pos", self.pos, self.boot_pos, pos_common)):
            if not cl:
                continue
            est[m] = np.array([np.mean([_delta(tensors[c][:, self.runs_of[i]].sum(0)) for c in cl])
                               for i in range(len(self.levels))])
            boot[m] = np.stack([_nanmean(np.stack([_delta(boots[c][:, self.runs_of[i]]) for c in cl], 1), 1)
                                for i in range(len(self.levels))], axis=1)            # (R, L)
        if "delta_pos" in est and pos_common == common:
            est["delta_model"] = (est["delta_api"] + est["delta_pos"]) / 2
            boot["delta_model"] = (boot["delta_api"] + boot["delta_pos"]) / 2
        xc = x - x.mean()
        denom = float((xc ** 2).sum())
        slopes, rows = {}, []
        for m in est:
            s = float((xc * (est[m] - est[m].mean())).sum() / denom) if denom > 0 else np.nan
            bs = ((boot[m] - _nanmean(boot[m], 1)[:, None]) * xc[None]).sum(1) / denom if denom > 0 else \
                np.full(len(boot[m]), np.nan)
            slopes[m] = (s, percentile_ci(bs, conf))
            for i, lv in enumerate(self.levels):
                ci = percentile_ci(boot[m][:, i], conf)
                rows.append({"level": _py(lv), "metric": m, "estimate": float(est[m][i]), "ci_low": ci.low,
                             "ci_high": ci.high, "n_clusters": len(common if m == "delta_api" else pos_common)})
        return TrendResult(keys=dict(self.keys), levels=pd.DataFrame(rows), slopes=slopes, clusters=list(common))
