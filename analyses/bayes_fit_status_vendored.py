"""Issue 38: the fit status and the frequentist comparison of the default Bayesian model on the vendored study.

Fits ``fit_bayes`` (model v2, the default until issue 38's flip; seed 20251121) and ``selection_bias`` (2,000
query-bootstrap replicates, same seed, grouped by model) on the bundled BiasBusters study and writes, per LLM and
metric, the implied δ under the logged orderings with its 94% HDI, the frequentist bias-corrected δ with its 95%
calibrated interval, whether the intervals overlap, and the fit status of the LLM's rows (per-query dispersion and
cluster x position checks), to ``analyses/bayes_fit_status_vendored.json``.

Usage:  nice python analyses/bayes_fit_status_vendored.py [--draws 1000] [--chains 4]
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--draws", type=int, default=1000)
    ap.add_argument("--chains", type=int, default=4)
    ap.add_argument("--seed", type=int, default=20251121)
    ap.add_argument("--out", default=str(HERE / "bayes_fit_status_vendored.json"))
    args = ap.parse_args()
    import toolbias_stats as tbs
    from toolbias_stats.models import fit_bayes

    study = tbs.read_study(tbs.datasets.path("biasbusters/study.toml"))
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = fit_bayes(study.log, model="v2", draws=args.draws, tune=args.draws, chains=args.chains, rng=args.seed)
        t1 = time.perf_counter()
        bias = tbs.selection_bias(study.counts, by="model", rng=args.seed)
    t2 = time.perf_counter()
    table = res.compare_frequentist(bias)
    out = {"model": res.model, "draws": args.draws, "chains": args.chains, "seed": args.seed,
           "converged": res.diagnostics.converged, "flags": res.diagnostics.flags,
           "fit_s": t1 - t0, "selection_bias_s": t2 - t1,
           "fit_checks": json.loads(res.fit_checks().to_json(orient="records")),
           "comparison": json.loads(table.to_json(orient="records")),
           "n_disagree": int(table["disagree"].sum()), "n_rows": len(table),
           "n_llms_fitting": int(sum(1 for llm in res.llms if res.to_frame().query("llm == @llm")["fits"].iloc[0]))}
    Path(args.out).write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    print(table.to_string())
    print(f"{out['n_disagree']} of {out['n_rows']} deltas disagree; {out['n_llms_fitting']} of {len(res.llms)} LLMs "
          f"fit both checks; fit {out['fit_s']:.0f} s, selection_bias {out['selection_bias_s']:.0f} s")


if __name__ == "__main__":
    main()
