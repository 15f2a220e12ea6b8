"""A tiny synthetic study shared by the plot and report tests (2 clusters x 3 tools, 2 models x 2 runs).

Tool, API, model and cluster names carry HTML/markup on purpose, to test escaping.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

import toolbias_stats as tbs

MALICIOUS_TOOL = "<script>alert(1)</script>"
MALICIOUS_API = '<img src="http://evil.example/x.png" onerror="alert(2)">'
MODEL_A = 'Model "A" & Co'
MODEL_B = "model-b"
UNRESOLVED = "<b>bad&name</b>"


def tiny_catalog():
    recs = []
    for cid, cname, tools in (("1", "Geocoding <b>", [MALICIOUS_TOOL, "Cost $5 or $10 API", "Plain Tool"]),
                              ("2", "Weather", ["Sunny", "Rainy", "Windy"])):
        for t in tools:
            api = MALICIOUS_API if t == MALICIOUS_TOOL else f"get {t}"
            recs.append({"cluster_id": cid, "cluster_name": cname, "tool_name": t, "api_name": api,
                         "num_parameters": 1})
    return tbs.ToolCatalog.from_records(recs, source="<tiny>")


def tiny_log(catalog, *, with_unpositioned=False):
    """2 models x 2 runs x 2 clusters x 6 queries x 3 rotations, a few no_call rows; optionally a third
    model whose positions are unknown."""
    rng = np.random.default_rng(0)
    rows = []
    for model, p in {MODEL_A: [0.6, 0.3, 0.1], MODEL_B: [0.34, 0.33, 0.33]}.items():
        for run in (1, 2):
            for cid in catalog.clusters:
                tools = catalog.tools(cid)
                for q in range(6):
                    for rot in (1, 2, 3):
                        status = "no_call" if (q == 5 and rot == 3 and run == 2) else "ok"
                        tool = tools[rng.choice(3, p=p)]
                        rows.append({"model": model, "run": run, "cluster_id": cid, "query_id": f"q{q}",
                                     "rotation": rot, "status": status, "temperature": 0.5,
                                     "chosen_tool": tool if status == "ok" else None})
    if with_unpositioned:
        for cid in catalog.clusters:
            tools = catalog.tools(cid)
            for q in range(6):
                rows.append({"model": "no-positions", "run": 1, "cluster_id": cid, "query_id": f"q{q}",
                             "rotation": None, "status": "ok", "temperature": 0.5, "chosen_tool": tools[q % 3]})
    diagnostics = {"<frame>": {"position_mismatch": 3, "unresolved": {UNRESOLVED: 2}}}
    return tbs.SelectionLog.from_frame(pd.DataFrame(rows), catalog, diagnostics=diagnostics)


def tiny_study():
    catalog = tiny_catalog()
    return tbs.Study(log=tiny_log(catalog), catalog=catalog, name="tiny <study> & co")
