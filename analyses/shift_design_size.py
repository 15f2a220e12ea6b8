"""Size and coverage of selection_shift under the designs of issue 35: unequal runs, missing choices, small levels.

**SIMULATED** studies analysed through the public API (our own simulator: a multinomial-logit chooser with tool
weights .40 .25 .15 .12 .08 in a random order per cluster, optional per-query log-preference effects, every query
shown in all K = 5 cyclic rotations per run, paired queries). Missing choices (``no_call``) are drawn per attempt
with a rate per (level, run), independently of the choice the chooser would have made.

Cells (``--cells``; the names are those of the JSON and of docs/experiments.md):

* ``runs85``: base 2 runs (the second with 85% ``no_call``) vs level 1 run; ``runs0``: the same without missing
  choices; ``runs30``: 30% ``no_call`` in every run; ``level85``: 85% in the level's only run.
* ``miss60`` / ``miss85``: 1 run each, the level's ``no_call`` rate 60% / 85%, the base's 0.
* ``small3`` / ``small24``: the level holds 3 / 24 attempts per cluster (random queries and rotations) against a
  base of 2 runs x 40 queries x 5 rotations = 400 attempts per cluster; true shift 0.
* ``pos0to45``: base without a position effect, level with one (true delta_pos 0 -> about 0.045).

Per study: per-tool p-values and intervals, shift_api / shift_pos p-values and calibrated intervals, and the
change in delta_api / delta_pos / delta_model (p-values and intervals). Rates are over studies (per-tool rates
over every tool of every study); the Monte-Carlo error is sqrt(r (1 - r) / n). Results: ``shift_design_size.json``
beside this script (each cell's summary over the chunks finished so far; ``studies`` says how many).
``python analyses/shift_design_size.py --n-studies 500 --jobs 3`` (chunks of ``--chunk`` studies in parallel).
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from toolbias_stats import SelectionLog
from toolbias_stats.experiments import choice_probabilities, selection_shift, simulate_conditions

C, K = 3, 5
PREFS = np.array([0.40, 0.25, 0.15, 0.12, 0.08])
POS_EFFECT = np.array([1.33, 1.0, 1.0, 1.0, 1.0])        # first listed position x1.33: delta_pos 0.045
#: cell -> (runs base, runs level, no_call rate per base run, no_call rate per level run, level attempts, position)
CELLS = {
    "runs85": (2, 1, (0.0, 0.85), (0.0,), None, False),
    "runs0": (2, 1, (0.0, 0.0), (0.0,), None, False),
    "runs30": (2, 1, (0.3, 0.3), (0.3,), None, False),
    "level85": (2, 1, (0.0, 0.0), (0.85,), None, False),
    "miss60": (1, 1, (0.0,), (0.6,), None, False),
    "miss85": (1, 1, (0.0,), (0.85,), None, False),
    "small3": (2, 1, (0.0, 0.0), (0.0,), 3, False),
    "small24": (2, 1, (0.0, 0.0), (0.0,), 24, False),
    "pos0to45": (1, 1, (0.0,), (0.0,), None, True),
}
DELTAS = ("delta_api", "delta_pos", "delta_model")


def truth(prefs, position):
    """True delta_api / delta_pos / delta_model of base and level (no query effect: the rates are exact)."""
    out = {}
    for name, pp in (("base", None), ("level", POS_EFFECT if position else None)):
        p_api, p_pos, _ = choice_probabilities(prefs, pp)
        api = 0.5 * np.abs(p_api - 1 / K).sum(1).mean()
        pos = 0.5 * np.abs(p_pos - 1 / K).sum(1).mean()
        out[name] = {"delta_api": api, "delta_pos": pos, "delta_model": (api + pos) / 2}
    return {m: out["level"][m] - out["base"][m] for m in DELTAS}


def study(gen, cell, n_queries=40, query_effect=0.5):
    """One simulated study of ``cell`` and the true changes in delta."""
    runs_b, runs_l, miss_b, miss_l, n_small, position = CELLS[cell]
    prefs = np.stack([gen.permutation(PREFS) for _ in range(C)])
    qe = 0.0 if position else query_effect
    log = simulate_conditions({"base": (prefs, None), "level": (prefs, POS_EFFECT if position else None)},
                              n_queries=n_queries, n_runs=max(runs_b, runs_l), query_effect=qe,
                              rng=gen.integers(2**63))
    tab = log.to_frame()
    base, run = (tab["condition"] == "base").to_numpy(), tab["run"].to_numpy()
    keep = np.where(base, run <= runs_b, run <= runs_l)
    if n_small is not None:     # the level keeps n_small random attempts per cluster
        pick = np.zeros(len(tab), dtype=bool)
        for c in tab["cluster_id"].unique():
            rows = np.flatnonzero(~base & (run == 1) & (tab["cluster_id"] == c).to_numpy())
            pick[gen.choice(rows, n_small, replace=False)] = True
        keep &= base | pick
    rate = np.where(base, np.array(miss_b + (0,))[np.minimum(run, runs_b) - 1],
                    np.array(miss_l + (0,))[np.minimum(run, runs_l) - 1])
    missing = gen.random(len(tab)) < rate
    tab.loc[missing, "status"] = "no_call"
    tab.loc[missing, "chosen_tool"] = None
    tab = tab[keep].drop(columns=["chosen_position", "chosen_rank"]).reset_index(drop=True)
    return SelectionLog.from_frame(tab, log.catalog, source="<simulated>"), truth(prefs, position)


def one(res, true):
    """The per-study outcomes of one result."""
    g = res.groups[0]
    tf = res.tools_frame()
    out = {"tool_p": tf["p_value"].to_numpy(float).tolist(),
           "tool_lo": tf["ci_low"].to_numpy(float).tolist(), "tool_hi": tf["ci_high"].to_numpy(float).tolist()}
    for m in ("shift_api", "shift_pos"):
        s = getattr(g, m)
        out[m] = (s.p_value, s.corrected_ci.low if s.corrected_ci else np.nan,
                  s.corrected_ci.high if s.corrected_ci else np.nan)
    for m in DELTAS:
        ch = g.change.get(m)
        out[m] = (ch.p_value, ch.ci.low, ch.ci.high, true[m], ch.corrected_ci.low, ch.corrected_ci.high)
    return out


def rate(x):
    x = np.asarray(x, dtype=float)
    x = x[np.isfinite(x)]
    r = float(x.mean()) if x.size else float("nan")
    return {"rate": r, "mc_error": float(np.sqrt(r * (1 - r) / x.size)) if x.size else float("nan"), "n": int(x.size)}


def summarise(cell, runs, seconds):
    """Rates over the studies of one cell (size where the truth is no change, coverage and its misses)."""
    null = not CELLS[cell][5]
    row = {"cell": cell, "studies": len(runs), "seconds": round(seconds, 1)}
    p = np.concatenate([r["tool_p"] for r in runs])
    lo, hi = np.concatenate([r["tool_lo"] for r in runs]), np.concatenate([r["tool_hi"] for r in runs])
    given = np.isfinite(lo)
    if null:
        row["per_tool_size"] = rate(p <= 0.05)
        row["per_tool_cover"] = rate(np.where(given, (lo <= 0) & (hi >= 0), np.nan))
        row["per_tool_miss_low"] = rate(np.where(given, hi < 0, np.nan))
        row["per_tool_miss_high"] = rate(np.where(given, lo > 0, np.nan))
        for m in ("shift_api", "shift_pos"):
            v = np.array([r[m] for r in runs], dtype=float)
            row[f"{m}_size"] = rate(v[:, 0] <= 0.05)
            row[f"{m}_cover0"] = rate(np.where(np.isfinite(v[:, 1]), v[:, 1] <= 1e-12, np.nan))
            row[f"{m}_interval_refused"] = float(np.mean(~np.isfinite(v[:, 1])))
    for m in DELTAS:
        v = np.array([r[m] for r in runs], dtype=float)
        ok = np.isfinite(v[:, 1])
        if null:
            row[f"{m}_size"] = rate(v[:, 0] <= 0.05)
        row[f"{m}_true"] = float(np.mean(v[:, 3]))
        row[f"{m}_interval_refused"] = float(np.mean(~ok))
        for tag, a, b in (("percentile", 1, 2), ("corrected", 4, 5)):   # the percentile ci and the MOVER corrected_ci
            lo_, hi_, t = v[:, a], v[:, b], v[:, 3]
            ok_ = np.isfinite(lo_)
            row[f"{m}_{tag}_cover"] = rate(np.where(ok_, (lo_ <= t + 1e-12) & (hi_ >= t - 1e-12), np.nan))
            row[f"{m}_{tag}_miss_low"] = rate(np.where(ok_, hi_ < t - 1e-12, np.nan))    # interval below the truth
            row[f"{m}_{tag}_miss_high"] = rate(np.where(ok_, lo_ > t + 1e-12, np.nan))   # interval above the truth
    return row


def run_chunk(cell, chunk, n_studies, seed, n_resamples, n_permutations):
    """``n_studies`` studies of ``cell`` (chunk ``chunk``: its own random stream): ``(cell, outcomes, seconds)``."""
    gen = np.random.default_rng([seed, list(CELLS).index(cell), chunk])
    start, runs = time.time(), []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(n_studies):
            log, true = study(gen, cell)
            res = selection_shift(log.counts(), by=[], n_resamples=n_resamples, n_permutations=n_permutations,
                                  rng=gen.integers(2**63))
            runs.append(one(res, true))
    return cell, runs, time.time() - start, chunk


def pct(r, mc=True):
    """``4.8% (±1.0)``: a rate with its Monte-Carlo error, in percent."""
    if not isinstance(r, dict) or not np.isfinite(r.get("rate", np.nan)):
        return "–"
    return f"{100 * r['rate']:.1f}%" + (f" (±{100 * r['mc_error']:.1f})" if mc else "")


def markdown(results):
    """The two tables of docs/experiments.md from the JSON: size of the tests, coverage of the intervals."""
    lines = ["| cell | studies | per-tool | shift_api | shift_pos | Δδ_API | Δδ_pos | Δδ_model |",
             "|---|---|---|---|---|---|---|---|"]
    for cell, r in results.items():
        if "per_tool_size" not in r:
            continue
        lines.append(f"| {cell} | {r['studies']} | {pct(r['per_tool_size'])} | {pct(r['shift_api_size'])} | "
                     f"{pct(r['shift_pos_size'])} | {pct(r['delta_api_size'])} | {pct(r['delta_pos_size'])} | "
                     f"{pct(r['delta_model_size'])} |")
    lines += ["", ("| cell | metric | truth | percentile `ci`: cover (miss low / high) | `corrected_ci`: cover "
                   "(miss low / high) | refused |"), "|---|---|---|---|---|---|"]
    for cell, r in results.items():
        if "per_tool_cover" in r:
            lines.append(f"| {cell} | per-tool share | 0 | {pct(r['per_tool_cover'])} ({pct(r['per_tool_miss_low'], 0)}"
                         f" / {pct(r['per_tool_miss_high'], 0)}) | – | |")
            for m in ("shift_api", "shift_pos"):
                c0 = r[f"{m}_cover0"]
                miss = f"{100 * (1 - c0['rate']):.1f}%" if np.isfinite(c0["rate"]) else "–"
                lines.append(f"| {cell} | {m} | 0 | – | {pct(c0)} (– / {miss}) | "
                             f"{100 * r[f'{m}_interval_refused']:.0f}% |")
        for m in DELTAS:
            lines.append(f"| {cell} | {m} | {r[f'{m}_true']:.3f} | {pct(r[f'{m}_percentile_cover'])} "
                         f"({pct(r[f'{m}_percentile_miss_low'], 0)} / {pct(r[f'{m}_percentile_miss_high'], 0)}) | "
                         f"{pct(r[f'{m}_corrected_cover'])} ({pct(r[f'{m}_corrected_miss_low'], 0)} / "
                         f"{pct(r[f'{m}_corrected_miss_high'], 0)}) | {100 * r[f'{m}_interval_refused']:.0f}% |")
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--n-studies", type=int, default=500)
    ap.add_argument("--n-resamples", type=int, default=200)
    ap.add_argument("--n-permutations", type=int, default=400)
    ap.add_argument("--cells", default=",".join(CELLS))
    ap.add_argument("--seed", type=int, default=35)
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--chunk", type=int, default=50, help="studies per work item (cells advance chunk by chunk)")
    ap.add_argument("--raw", default="", help="folder for each chunk's outcomes (a later run skips those done)")
    ap.add_argument("--reverse", action="store_true", help="last chunks first (a second run beside a first one)")
    ap.add_argument("--out", default=str(Path(__file__).with_suffix(".json")))
    ap.add_argument("--table", action="store_true", help="print the docs tables from --out and stop")
    args = ap.parse_args(argv)
    if args.table:
        print(markdown(json.loads(Path(args.out).read_text())))
        return
    cells = args.cells.split(",")
    n_chunks = -(-args.n_studies // args.chunk)
    # chunk by chunk, every cell in turn: a run stopped early keeps a summary of every cell over what it finished
    work = [(c, k, min(args.chunk, args.n_studies - k * args.chunk), args.seed, args.n_resamples,
             args.n_permutations) for k in range(n_chunks) for c in cells]
    out = Path(args.out)
    raw = Path(args.raw) if args.raw else None
    if raw is not None:
        raw.mkdir(parents=True, exist_ok=True)
        # chunks another run (or an earlier, stopped one) finished are read back, not run again
        work = [w for w in work if not (raw / f"{w[0]}_{w[1]}.json").exists()]
    done: dict = {c: [] for c in cells}
    secs: dict = dict.fromkeys(cells, 0.0)

    def save(result):   # the cell's summary over every chunk finished so far
        cell, runs, seconds, _ = result
        if raw is not None:
            if runs:
                (raw / f"{cell}_{result[3]}.json").write_text(json.dumps({"runs": runs, "seconds": seconds},
                                                                         default=float))
            loaded = [json.loads(f.read_text()) for f in sorted(raw.glob(f"{cell}_*.json"))]
            done[cell] = [r for x in loaded for r in x["runs"]]
            secs[cell] = sum(x["seconds"] for x in loaded)
        else:
            done[cell] += runs
            secs[cell] += seconds
        r = summarise(cell, done[cell], secs[cell])
        old = json.loads(out.read_text()) if out.exists() else {}
        old[cell] = r
        out.write_text(json.dumps(old, indent=1, default=float) + "\n")
        print(json.dumps({k: (v["rate"] if isinstance(v, dict) else v) for k, v in r.items()}, default=float),
              flush=True)

    work = work[::-1] if args.reverse else work
    if args.jobs > 1:
        from concurrent.futures import ProcessPoolExecutor, as_completed

        with ProcessPoolExecutor(args.jobs) as ex:
            for fut in as_completed([ex.submit(run_chunk, *w) for w in work]):
                save(fut.result())
    else:
        for w in work:
            save(run_chunk(*w))
    if raw is not None:   # every cell's summary over every chunk in the folder (also those of other runs)
        for cell in cells:
            if list(raw.glob(f"{cell}_*.json")):
                save((cell, [], 0.0, None))


if __name__ == "__main__":
    pd.set_option("display.width", 200)
    main()
