"""Generate the SIMULATED example study of ``data/experiments/`` (issue 8). Every number in it is simulated.

The catalog, cluster names and queries are the vendored BiasBusters ones (``data/biasbusters/``); the selections
are drawn from multinomial-logit choosers with known tool and position weights (written to
``data/experiments/truth.json``), in the BiasBusters selection-stats format (``[qid, cluster_id, api_index,
position]``; an absent qid is an attempt without a valid call):

* ``SIMULATED-A``: metadata perturbations (Fig. 5 style): ``base`` (2 runs), ``desc_swap`` on clusters 6, 8, 9, 10 only
  (manifest key ``clusters``), ``scramble_all`` (every cluster);
* ``SIMULATED-B``: mitigation (Table 5 style): ``base`` and ``mitigated`` (uniform choice within a predicted subset);
* ``SIMULATED-C``: temperature sweep 0.0 / 0.5 / 1.0 (Fig. 9 style; preferences flatten with temperature);
* ``SIMULATED-D``: continued pre-training on cluster 8 only (Fig. 17 style): ``epoch`` 0, 0.33, 0.67, 1.0, target
  endpoint ``v1_textlanguage_for_text_language_by_api_ninjas`` at shares 0.006, 0.122, 0.122, 0.128.

Plus ``toolcount.toml`` (``SIMULATED-E``, table format: each query shown subsets of K = 2, 3, 4 and all 5 tools,
App. J style) and a mitigation benchmark (``mitigation/truth.json``, ``mitigation/predictions.jsonl``): 200 queries with
ground-truth sets of size K = 2..5 and simulated subset predictions (precision ~0.99, recall ~0.88).

Usage: ``python analyses/experiments_make_example.py`` (seed 20251122; rewrites the files).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

import toolbias_stats as tbs
from toolbias_stats.experiments import choice_probabilities

OUT = Path(__file__).resolve().parents[1] / "data" / "experiments"
SEED = 20251122
C, K, Q = 10, 5, 100
TARGET = "v1_textlanguage_for_text_language_by_api_ninjas"


def draw(gen, tool_pref, pos_pref, clusters=None, p_no_call=0.03):
    """BiasBusters records for every (cluster, query, rotation) of the covered clusters."""
    _, _, choice_p = choice_probabilities(tool_pref, pos_pref)          # (C, R, J)
    recs = []
    for c in range(C):
        if clusters is not None and str(c + 1) not in clusters:
            continue
        for q in range(Q):
            for r in range(K):
                if gen.random() < p_no_call:
                    continue
                j = int(gen.choice(K, p=choice_p[c, r]))              # 0-based position
                api = (j + r) % K                                      # 0-based api shown there
                qid = c * Q * K + q * K + r + 1
                recs.append([qid, c + 1, api + 1, j + 1])
    return recs


def main():
    gen = np.random.default_rng(SEED)
    cat = tbs.read_study(tbs.datasets.path("biasbusters/study.toml"), lazy=True).catalog
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "logs").mkdir(exist_ok=True)
    entries, truth = [], {}

    def emit(name, recs, **meta):
        path = OUT / "logs" / f"{name}.json"
        path.write_text(json.dumps(recs, separators=(",", ":")), encoding="utf-8")
        entries.append({"path": f"logs/{name}.json", **meta})

    pos_a = np.array([0.34, 0.20, 0.17, 0.15, 0.14])
    # SIM-A: perturbations
    base_a = gen.dirichlet(np.full(K, 0.8), size=C) + 0.02
    swap = base_a.copy()
    for c in range(C):                       # description swap: the favourite and the least chosen trade places
        i, j = np.argmax(swap[c]), np.argmin(swap[c])
        swap[c, [i, j]] = swap[c, [j, i]]
    scramble = 0.35 * base_a + 0.65 * gen.dirichlet(np.full(K, 2.0), size=C)
    common = {"temperature": 0.5, "epoch": 0.0}
    for run in (1, 2):
        emit(f"sim_a_base_run{run}", draw(gen, base_a, pos_a), model="SIMULATED-A", run=run, condition="base", **common)
    emit("sim_a_desc_swap", draw(gen, swap, pos_a, clusters={"6", "8", "9", "10"}), model="SIMULATED-A", run=1,
         condition="desc_swap", clusters=["6", "8", "9", "10"], **common)
    emit("sim_a_scramble_all", draw(gen, scramble, pos_a), model="SIMULATED-A", run=1, condition="scramble_all",
         **common)
    truth["SIMULATED-A"] = {"position_weights": pos_a.tolist(), "base": base_a.tolist(), "desc_swap": swap.tolist(),
                      "scramble_all": scramble.tolist()}
    # SIM-B: mitigation
    base_b = gen.dirichlet(np.full(K, 0.5), size=C) + 0.01
    mitig = np.ones((C, K))
    mitig[6, 2] = 0.45                       # one weather API stays under-used (as in the paper's Fig. 6)
    emit("sim_b_base", draw(gen, base_b, pos_a), model="SIMULATED-B", run=1, condition="base", **common)
    emit("sim_b_mitigated", draw(gen, mitig, None), model="SIMULATED-B", run=1, condition="mitigated", **common)
    truth["SIMULATED-B"] = {"position_weights_base": pos_a.tolist(), "base": base_b.tolist(),
                            "mitigated": mitig.tolist()}
    # SIM-C: temperature sweep (weights ** (1 / (0.5 + T)))
    base_c = gen.dirichlet(np.full(K, 0.7), size=C) + 0.02
    truth["SIMULATED-C"] = {}
    for t in (0.0, 0.5, 1.0):
        w = base_c ** (1.0 / (0.5 + t))
        pw = pos_a ** (1.0 / (0.5 + t))
        emit(f"sim_c_temperature_{t:.1f}", draw(gen, w, pw), model="SIMULATED-C", run=1, condition="base",
             temperature=t, epoch=0.0)
        truth["SIMULATED-C"][f"{t:.1f}"] = {"tool_weights": w.tolist(), "position_weights": pw.tolist()}
    # SIM-D: continued pre-training, cluster 8 only
    tools8 = cat.tools("8")
    ti = tools8.index(TARGET)
    others = np.array([0.45, 0.25, 0.2, 0.1])
    truth["SIMULATED-D"] = {"target": TARGET}
    for ep, share in ((0.0, 0.006), (0.33, 0.122), (0.67, 0.122), (1.0, 0.128)):
        w = np.ones((C, K))
        row = np.insert(others * (1 - share), ti, share)
        w[7] = row
        emit(f"sim_d_epoch_{ep:.2f}", draw(gen, w, None, clusters={"8"}, p_no_call=0.0), model="SIMULATED-D", run=1,
             condition="base", temperature=0.5, epoch=ep, clusters=["8"])
        truth["SIMULATED-D"][f"{ep:.2f}"] = row.tolist()
    (OUT / "truth.json").write_text(json.dumps(truth, indent=1), encoding="utf-8")
    write_manifest(entries)
    write_mitigation(gen, cat)
    write_tool_count(gen, cat)


def write_manifest(entries):
    lines = ["# SIMULATED example study for `toolbias-stats shift` and `report --experiments` (issue 8).",
             "# Every selection here is SIMULATED (analyses/experiments_make_example.py, seed 20251122); the catalog",
             "# and queries are the vendored BiasBusters ones. Provenance: PROVENANCE.md beside this file.", "",
             'name = "SIMULATED experiments (perturbations, mitigation, temperature sweep, continued pre-training)"',
             'format = "biasbusters"', 'catalog = "../biasbusters/clusters.json"',
             'api_meta = "../biasbusters/api_meta.json"', 'cluster_names = "../biasbusters/cluster_names.json"',
             'queries = "../biasbusters/queries.json"', ""]
    for e in entries:
        lines.append("[[logs]]")
        for k, v in e.items():
            if isinstance(v, str):
                lines.append(f'{k} = "{v}"')
            elif isinstance(v, list):
                lines.append(f"{k} = [" + ", ".join(f'"{x}"' for x in v) + "]")
            else:
                lines.append(f"{k} = {v}")
        lines.append("")
    (OUT / "study.toml").write_text("\n".join(lines), encoding="utf-8")


def write_mitigation(gen, cat):
    """200 queries: correct set = K of the cluster's tools (K = 2..5), 3 distractors from other clusters."""
    (OUT / "mitigation").mkdir(exist_ok=True)
    tab = cat.table
    truth, preds = [], []
    qid = 0
    for k in (2, 3, 4, 5):
        for _ in range(50):
            qid += 1
            c = str(int(gen.integers(1, C + 1)))
            own = tab[tab["cluster_id"] == c]
            pick = own.iloc[np.sort(gen.choice(len(own), size=k, replace=False))]
            other = tab[tab["cluster_id"] != c]
            dis = other.iloc[gen.choice(len(other), size=3, replace=False)]
            correct = [{"tool": t, "api_name": a} for t, a in zip(pick["tool_name"], pick["api_name"])]
            distract = [{"tool": t, "api_name": a} for t, a in zip(dis["tool_name"], dis["api_name"])]
            truth.append({"query_id": qid, "cluster_id": int(c), "query": f"SIMULATED query {qid} (cluster {c})",
                          "correct_apis": correct, "distractor_apis": distract})
            ids = [tbs.function_name(a["api_name"], a["tool"]) for a in correct]
            dids = [tbs.function_name(a["api_name"], a["tool"]) for a in distract]
            keep = [t for t in ids if gen.random() < 0.88]
            if gen.random() < 0.03:
                keep.append(dids[0])
            preds.append({"query_id": qid, "selected_tools": keep})
    (OUT / "mitigation" / "truth.json").write_text(json.dumps(truth, indent=1), encoding="utf-8")
    (OUT / "mitigation" / "predictions.jsonl").write_text("\n".join(json.dumps(p) for p in preds) + "\n",
                                                          encoding="utf-8")


def write_tool_count(gen, cat, n_queries=30):
    """SIMULATED-E (App. J style, table format): each query is shown subsets of K = 2, 3, 4 and all 5 tools of its
    cluster in a random order; the chooser has tool weights (Dirichlet) and position weights."""
    import pandas as pd

    pos_w = np.array([0.34, 0.20, 0.17, 0.15, 0.14])
    rows = []
    for c in cat.clusters:
        tools = list(cat.tools(c))
        w = dict(zip(tools, gen.dirichlet(np.full(K, 0.8)) + 0.02))
        subsets = {k: list(gen.choice(tools, size=k, replace=False)) for k in (2, 3, 4)} | {5: tools}
        for q in range(1, n_queries + 1):
            for k, shown in subsets.items():
                order = list(gen.permutation(shown))
                p = np.array([w[t] for t in order]) * pos_w[:k]
                j = int(gen.choice(k, p=p / p.sum()))
                rows.append({"cluster_id": c, "query_id": str(q), "ordering": "|".join(order), "status": "ok",
                             "chosen_tool": order[j], "chosen_position": j + 1})
    (OUT / "logs" / "sim_e_tool_count.csv").write_text(pd.DataFrame(rows).to_csv(index=False), encoding="utf-8")
    (OUT / "toolcount.toml").write_text("\n".join([
        "# SIMULATED tool-count example (App. J style) for `toolbias_stats.experiments.tool_count_bias` and",
        "# `toolbias-stats report --experiments`; generated by analyses/experiments_make_example.py (seed 20251122).",
        'name = "SIMULATED tool count (subsets of 2-5 tools shown)"',
        'catalog = "../biasbusters/clusters.json"', 'api_meta = "../biasbusters/api_meta.json"',
        'cluster_names = "../biasbusters/cluster_names.json"', "",
        "[[logs]]", 'path = "logs/sim_e_tool_count.csv"', 'format = "table"', 'model = "SIMULATED-E"', ""]),
        encoding="utf-8")


if __name__ == "__main__":
    main()
