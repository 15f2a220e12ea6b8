"""Cost of one log-density + gradient of the collapsed margin model (``analyses/bayes_margin.py``) on the vendored
study and on the simulator's design; writes ``analyses/bayes_margin_cost.json`` (wall and CPU milliseconds).

Run: ``python analyses/bayes_margin_cost.py``.
"""

from __future__ import annotations

import json
import os
import time
import warnings
from pathlib import Path

HERE = Path(__file__).resolve().parent


def cost(data, reps=100):
    from bayes_margin import build_model

    model = build_model(data)
    f, g = model.compile_logp(), model.compile_dlogp()
    ip = model.initial_point()
    g(ip)
    t0, c0 = time.perf_counter(), time.process_time()
    for _ in range(reps):
        f(ip)
        g(ip)
    return {"queries": int(len(data["T"])), "cells": int(data["M"] * data["C"]), "K": int(data["K"]),
            "wall_ms": 1000 * (time.perf_counter() - t0) / reps, "cpu_ms": 1000 * (time.process_time() - c0) / reps}


def main():
    from bayes_margin import design_of, margin_data
    from bayes_query_sim import simulate

    from toolbias_stats.io._load import load_selection_log

    warnings.simplefilter("ignore")
    out = {"load_average": os.getloadavg()[0]}
    out["vendored"] = cost(margin_data(design_of(load_selection_log(str(HERE.parent / "data/biasbusters/study.toml")))))
    out["simulator"] = cost(margin_data(design_of(simulate(1.0, 1000))))
    (HERE / "bayes_margin_cost.json").write_text(json.dumps(out, indent=1))
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
