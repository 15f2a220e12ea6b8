"""Simulation study: coverage of ``calibrated_mean_tv`` for the mean TV bias.

Design (honest version of the real study): C = 10 clusters x 100 queries x 5
cyclic rotations, every choice valid (n = 500 per cluster). Per simulated study
the per-query count matrix is built, the query-level bootstrap is done here
(multinomial weights over queries times the per-query count matrix, vectorised),
and ``calibrated_mean_tv`` is called. The plain percentile bootstrap of the
plug-in is reported for comparison.

Targets
-------
``target="api"``
    Each query/rotation picks a tool from the chooser's ``p`` (randomly permuted
    per cluster). Optional per-query heterogeneity: ``p_q ~ Dirichlet(conc * p)``
    (the cluster-level truth stays ``p``).
``target="pos"``
    The chooser's ``p`` is a *position* effect, ``beta = log p`` (permuted per
    cluster). Optionally the model also has a fixed tool preference
    ``alpha = tool_pref`` on one tool per cluster (or per query). With cyclic
    rotations, in rotation ``r`` tool ``j`` sits at position ``(j + r) mod K``
    and the choice probability over positions is ``softmax(beta_k +
    alpha_{(k - r) mod K})``. The true position distribution is computed
    exactly as the average over the 5 rotations. With a strong tool preference
    the positional counts vary far less than multinomial (a model always picking
    the same tool spreads its choices evenly over positions by design).

Run ``python analyses/calibration_tv.py`` for the Markdown tables.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats as sps

try:  # normal case: package importable
    from toolbias_stats.metrics._calibrated import calibrated_mean_tv
except ImportError:  # pragma: no cover - running from a checkout without __init__
    _path = Path(__file__).resolve().parents[1] / "toolbias_stats" / "metrics" / "_calibrated.py"
    _spec = importlib.util.spec_from_file_location("_calibrated", _path)
    _mod = importlib.util.module_from_spec(_spec)
    sys.modules["_calibrated"] = _mod
    _spec.loader.exec_module(_mod)
    calibrated_mean_tv = _mod.calibrated_mean_tv

SCENARIOS: dict[str, tuple[float, ...]] = {
    "strong": (0.40, 0.25, 0.15, 0.12, 0.08),
    "mild": (0.26, 0.22, 0.20, 0.18, 0.14),
    "at_1/K": (0.35, 0.20, 0.20, 0.15, 0.10),
    "tiny": (0.22, 0.21, 0.20, 0.19, 0.18),
    "uniform": (0.20, 0.20, 0.20, 0.20, 0.20),
}

N_CLUSTERS = 10
N_QUERIES = 100
N_ROTATIONS = 5


def _tv_uniform(p: np.ndarray) -> np.ndarray:
    k = p.shape[-1]
    return 0.5 * np.abs(p - 1.0 / k).sum(axis=-1)


def _softmax(z: np.ndarray) -> np.ndarray:
    z = z - z.max(axis=-1, keepdims=True)
    ez = np.exp(z)
    return ez / ez.sum(axis=-1, keepdims=True)


def rotation_probs(beta: np.ndarray, alpha: np.ndarray) -> np.ndarray:
    """Choice probabilities over positions for each cyclic rotation.

    ``beta`` (..., K) position utilities, ``alpha`` (..., K) tool utilities.
    Returns (..., R=K, K): entry ``[r, k]`` = P(choose position k | rotation r),
    where position k holds tool ``(k - r) mod K``.
    """
    k = beta.shape[-1]
    r = np.arange(k)[:, None]
    pos = np.arange(k)[None, :]
    tool_at = (pos - r) % k  # (R, K)
    util = beta[..., None, :] + alpha[..., tool_at]
    return _softmax(util)


def true_position_distribution(beta: np.ndarray, alpha: np.ndarray) -> np.ndarray:
    """Exact population position distribution: average over the K rotations."""
    return rotation_probs(beta, alpha).mean(axis=-2)


def simulate_study(
    p,
    rng: np.random.Generator,
    *,
    target: str = "api",
    n_resamples: int = 500,
    n_clusters: int = N_CLUSTERS,
    n_queries: int = N_QUERIES,
    n_rotations: int = N_ROTATIONS,
    tool_pref: float = 0.0,
    pref_per_query: bool = False,
    dirichlet_conc: float | None = None,
):
    """Simulate one study; return (counts, boot_counts, truth, per-query counts)."""
    p = np.asarray(p, dtype=float)
    k = p.size
    perms = np.argsort(rng.random((n_clusters, k)), axis=1)
    p_c = p[perms]  # (C, K), permuted per cluster
    if target == "api":
        if dirichlet_conc is None:
            probs = np.broadcast_to(p_c[:, None, None, :], (n_clusters, n_queries, n_rotations, k))
        else:
            pq = rng.gamma(dirichlet_conc * p_c[:, None, :], size=(n_clusters, n_queries, k))
            pq /= pq.sum(axis=-1, keepdims=True)
            probs = np.broadcast_to(pq[:, :, None, :], (n_clusters, n_queries, n_rotations, k))
        truth = float(_tv_uniform(p_c).mean())
    elif target == "pos":
        if n_rotations != k:
            raise ValueError("target='pos' needs n_rotations == K (full cyclic design)")
        beta = np.log(p_c)  # (C, K)
        if pref_per_query:
            fav = rng.integers(0, k, size=(n_clusters, n_queries))
        else:
            fav = np.broadcast_to(rng.integers(0, k, size=(n_clusters, 1)), (n_clusters, n_queries))
        alpha = tool_pref * (np.arange(k)[None, None, :] == fav[..., None])  # (C, Q, K)
        probs = rotation_probs(np.broadcast_to(beta[:, None, :], alpha.shape), alpha)  # (C,Q,R,K)
        # truth: the favourite tool visits every position once over the rotations,
        # so the exact distribution does not depend on which tool is favoured.
        alpha0 = tool_pref * (np.arange(k) == 0).astype(float)
        truth_p = true_position_distribution(beta, np.broadcast_to(alpha0, beta.shape))
        truth = float(_tv_uniform(truth_p).mean())
        if truth < 1e-12:  # exactly uniform up to rounding
            truth = 0.0
    else:
        raise ValueError(f"target must be 'api' or 'pos', got {target!r}")

    cum = np.cumsum(probs, axis=-1)
    u = rng.random(probs.shape[:-1])
    choice = np.minimum((u[..., None] > cum).sum(axis=-1), k - 1)  # (C, Q, R)
    per_query = (choice[..., None] == np.arange(k)).sum(axis=2)  # (C, Q, K)
    counts = per_query.sum(axis=1)  # (C, K)
    # query-level bootstrap: multinomial weights over queries x per-query counts
    w = rng.multinomial(n_queries, np.full(n_queries, 1.0 / n_queries), size=(n_clusters, n_resamples))
    boot = np.matmul(w.astype(np.float64), per_query.astype(np.float64))  # (C, B, K)
    return list(counts), list(boot), truth, per_query


def percentile_boot_ci(counts, boot, level=0.95):
    t_star = np.mean([_tv_uniform(b / b.sum(axis=1, keepdims=True)) for b in boot], axis=0)
    a = (1 - level) / 2
    return np.quantile(t_star, [a, 1 - a])


def run_calibration(
    n_studies: int = 200,
    n_resamples: int = 500,
    rng=20240601,
    scenarios=None,
    target: str = "api",
    *,
    tool_pref: float = 0.0,
    pref_per_query: bool = False,
    dirichlet_conc: float | None = None,
    confidence_level: float = 0.95,
) -> pd.DataFrame:
    """Coverage study. Returns one row per scenario.

    Columns: truth, coverage, miss_low (truth < ci_low), miss_high (truth >
    ci_high), mean_width, mean_estimate, bias, rmse, mean_plugin, pctboot_cover
    (plain percentile bootstrap of the plug-in), reject_rate (p-value of the
    uniformity test < 1 - confidence_level), ks_p_uniform (KS test of the
    null p-values against U(0,1), only when truth == 0), var_ratio (bootstrap
    variance of the cluster proportions / multinomial p(1-p)/n), sec_per_call.
    """
    rng = np.random.default_rng(rng)
    if scenarios is None:
        scenarios = SCENARIOS
    elif not isinstance(scenarios, dict):
        scenarios = {name: SCENARIOS[name] for name in scenarios}
    rows = []
    for name, p in scenarios.items():
        est, lo, hi, pv, pl, pb_cov, vr, secs = [], [], [], [], [], [], [], []
        truth = None
        for _ in range(n_studies):
            counts, boot, truth, _pq = simulate_study(
                p, rng, target=target, n_resamples=n_resamples,
                tool_pref=tool_pref, pref_per_query=pref_per_query,
                dirichlet_conc=dirichlet_conc,
            )
            t0 = time.perf_counter()
            res = calibrated_mean_tv(counts, boot, confidence_level=confidence_level)
            secs.append(time.perf_counter() - t0)
            est.append(res.estimate)
            lo.append(res.ci_low)
            hi.append(res.ci_high)
            pv.append(res.p_value_uniform)
            pl.append(res.plugin)
            b_lo, b_hi = percentile_boot_ci(counts, boot, confidence_level)
            pb_cov.append(b_lo <= truth <= b_hi)
            ph = np.array([c / c.sum() for c in counts])
            mult = ph * (1 - ph) / np.array([c.sum() for c in counts])[:, None]
            bv = np.array([(b / b.sum(axis=1, keepdims=True)).var(axis=0) for b in boot])
            ok = mult > 0
            vr.append(float(np.mean(bv[ok] / mult[ok])) if ok.any() else np.nan)
        est, lo, hi, pv = map(np.asarray, (est, lo, hi, pv))
        eps = 1e-12
        cover = (lo - eps <= truth) & (truth <= hi + eps)
        rows.append(
            dict(
                target=target,
                scenario=name,
                truth=truth,
                n_studies=n_studies,
                coverage=cover.mean(),
                miss_low=np.mean(truth < lo - eps),
                miss_high=np.mean(truth > hi + eps),
                mean_width=np.mean(hi - lo),
                mean_estimate=est.mean(),
                bias=est.mean() - truth,
                rmse=np.sqrt(np.mean((est - truth) ** 2)),
                mean_plugin=np.mean(pl),
                pctboot_cover=np.mean(pb_cov),
                reject_rate=np.mean(pv < 1 - confidence_level),
                ks_p_uniform=(sps.kstest(pv, "uniform").pvalue if truth == 0 else np.nan),
                var_ratio=np.mean(vr),
                sec_per_call=np.mean(secs),
            )
        )
    return pd.DataFrame(rows)


def _fmt(df: pd.DataFrame) -> str:
    cols = ["target", "scenario", "truth", "coverage", "miss_low", "miss_high", "mean_width",
            "mean_estimate", "rmse", "mean_plugin", "pctboot_cover", "reject_rate",
            "ks_p_uniform", "var_ratio", "sec_per_call"]
    d = df[cols].copy()
    if _has_tabulate():
        return d.to_markdown(index=False, floatfmt=".3f")

    def cell(v):
        return f"{v:.3f}" if isinstance(v, (float, np.floating)) else str(v)

    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in d.itertuples(index=False)]
    return "\n".join(lines)


def _has_tabulate() -> bool:
    try:
        import tabulate  # noqa: F401
        return True
    except ImportError:
        return False


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n-studies", type=int, default=200)
    ap.add_argument("--n-resamples", type=int, default=500)
    ap.add_argument("--seed", type=int, default=20240601)
    ap.add_argument("--quick", action="store_true", help="main tables only")
    args = ap.parse_args(argv)
    runs = [
        ("api", dict()),
        ("pos", dict()),
        ("pos", dict(tool_pref=3.0)),
    ]
    extra = [
        ("api, per-query heterogeneity Dirichlet(20 p)", "api", dict(dirichlet_conc=20.0), None),
        ("pos, strong tool preference (alpha=5), favourite per query", "pos",
         dict(tool_pref=5.0, pref_per_query=True), None),
        ("pos, strong tool preference (alpha=5) per cluster", "pos", dict(tool_pref=5.0), None),
    ]
    for i, (target, kw) in enumerate(runs):
        t0 = time.perf_counter()
        df = run_calibration(args.n_studies, args.n_resamples, args.seed + i, target=target, **kw)
        print(f"\n### target={target} {kw or ''} ({time.perf_counter() - t0:.0f} s)\n")
        print(_fmt(df))
    if not args.quick:
        for j, (title, target, kw, sc) in enumerate(extra):
            t0 = time.perf_counter()
            df = run_calibration(args.n_studies, args.n_resamples, args.seed + 100 + j,
                                 target=target, scenarios=sc, **kw)
            print(f"\n### {title} ({time.perf_counter() - t0:.0f} s)\n")
            print(_fmt(df))


if __name__ == "__main__":
    main()
