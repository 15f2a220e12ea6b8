"""Coverage of the variance-component intervals: Satterthwaite's interval of a difference of mean squares (used
before) against the modified large-sample (MLS) interval now in ``toolbias_stats.design``.

A component such as the run component is ``theta = c (E[MS_run] - E[MS_query x run])``; its interval comes from the
two mean squares, ``MS_i ~ E_i chi2(df_i) / df_i``, drawn here from those exact laws (the answer is known). The
settings follow the vendored study: 3 runs (2 df, capped at S - 1 = 2) against 198 df, and a well-determined
difference (40 vs 400 df). Prints coverage and the median / largest upper bound in units of ``c E[MS_run]``.

Usage: ``python analyses/variance_component_ci_coverage.py [--sims 10000] [--seed 1]``
Figures (10,000 draws per setting, seed 1) are in docs/design.md and the README.
"""

from __future__ import annotations

import argparse

import numpy as np
from scipy import stats

from toolbias_stats.design._components import _component_interval


def satterthwaite(terms, alpha, df_cap=None):
    """The interval used before (written here with scipy as the reference): Satterthwaite's degrees of freedom for
    the whole linear combination; a non-positive estimate gets [0, upper] from its positive terms alone."""
    est = sum(a * m for a, m, _ in terms)
    pos = [(a, m, d) for a, m, d in terms if a * m > 0 and d > 0]
    base = est if est > 0 else sum(a * m for a, m, _ in pos)
    use = terms if est > 0 else pos
    denom = sum((a * m) ** 2 / d for a, m, d in use if d > 0)
    if base <= 0 or denom <= 0:
        return 0.0, 0.0
    nu = base**2 / denom
    if df_cap is not None:
        nu = min(nu, df_cap)
    with np.errstate(divide="ignore", over="ignore"):   # a fraction of a degree of freedom: no finite bound
        lo, hi = base * nu / stats.chi2.ppf([1 - alpha / 2, alpha / 2], nu)
    return (float(lo) if est > 0 else 0.0), float(hi)


SETTINGS = [  # (label, E_pos, df_pos, E_neg, df_neg, scale, df_cap)
    ("run component, E ratio 1.05 (2 vs 198 df)", 1.05, 2, 1.0, 198, 1 / 500, 2),
    ("run component, E ratio 1.2 (2 vs 198 df)", 1.2, 2, 1.0, 198, 1 / 500, 2),
    ("run component, E ratio 2 (2 vs 198 df)", 2.0, 2, 1.0, 198, 1 / 500, 2),
    ("well determined, E ratio 3 (40 vs 400 df)", 3.0, 40, 1.0, 400, 1.0, None),
]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sims", type=int, default=10_000)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args(argv)
    gen = np.random.default_rng(args.seed)
    print(f"{'setting':46s} {'method':13s} {'coverage':>8s} {'median hi':>10s} {'max hi':>10s}")
    for label, e_p, df_p, e_n, df_n, scale, cap in SETTINGS:
        theta = scale * (e_p - e_n)
        ms_p = e_p * gen.chisquare(df_p, args.sims) / df_p
        ms_n = e_n * gen.chisquare(df_n, args.sims) / df_n
        for name, f in (("Satterthwaite", satterthwaite), ("MLS", _component_interval)):
            ints = np.array([f([(scale, p, df_p), (-scale, n, df_n)], 0.05, df_cap=cap) for p, n in zip(ms_p, ms_n)])
            cover = np.mean((ints[:, 0] <= theta) & (theta <= ints[:, 1]))
            with np.errstate(over="ignore"):
                hi = ints[:, 1] / (scale * e_p)
            print(f"{label:46s} {name:13s} {cover:8.3f} {np.median(hi):10.3g} {np.max(hi):10.3g}")


if __name__ == "__main__":
    main()
