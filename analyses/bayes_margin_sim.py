"""Simulation study of the collapsed margin model (``analyses/bayes_margin.py``), issue 38.

Data: the independent simulator of ``analyses/bayes_query_sim.py`` (4 LLMs x 2 clusters x K = 4 tools,
20 queries x all 4 cyclic rotations x 3 runs, choices from softmax(alpha + beta + u[query]), u ~ N(0, sd^2)
shared by every ordering and run of a query; LLM 1 has no position effect, cluster 2 has tools of equal worth).

Truth: the margins the model's parameters describe, computed from the simulator's true parameters: a new
query's probabilities of each tool and of each position in a (LLM, cluster) cell, averaged over the logged
orderings (the 4 rotations, equal weights) and over the query population (Monte Carlo nodes closed under the
cyclic shifts of the tools and under sign, so an equal-worth cluster's tool margin is exactly uniform and an
LLM without position effects has exactly uniform position margins). delta = TV to uniform; effects = the
margins' centred logs.

Run: ``python analyses/bayes_margin_sim.py --studies 40`` appends one line per fit to
``analyses/bayes_margin_sim.jsonl``; ``--summary`` writes the coverage table to ``analyses/bayes_margin_sim.json``.
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
OUT = HERE / "bayes_margin_sim.jsonl"
QUANTITIES = ("delta_api_cell", "delta_pos", "delta_api", "a", "b")


def true_margins(sd, nodes=16384, seed=7):
    """True tool and position margins (M, C, K) of the simulator's cells (simulator's LLM / cluster / tool order)."""
    from bayes_query_sim import ALPHA, BETA, C, K, M

    z = np.random.default_rng(seed).standard_normal((nodes, K))
    z = np.concatenate([np.roll(z, s, axis=1) for s in range(K)])
    u = sd * np.concatenate([z, -z])                                       # (N, K) query effects by tool
    tools = np.zeros((M, C, K))
    pos = np.zeros((M, C, K))
    for m in range(M):
        for c in range(C):
            for r in range(K):
                order = np.roll(np.arange(K), -r)                           # tool at each position
                lg = ALPHA[m, c, order][None] + BETA[m][None] + u[:, order]
                p = np.exp(lg - lg.max(1, keepdims=True))
                p = (p / p.sum(1, keepdims=True)).mean(0)                  # by position
                pos[m, c] += p / K
                tools[m, c, order] += p / K
    return tools, pos


def truths(design, sd):
    tools, pos = true_margins(sd)
    li = [int(s.replace("llm", "")) - 1 for s in design.llms]
    ci = [int(s.replace("k", "")) - 1 for s in design.clusters]
    ti = [[int(t.split("tool")[1]) - 1 for t in design.tools[c]] for c in range(len(ci))]
    tl = np.stack([np.stack([tools[m, ci[c], ti[c]] for c in range(len(ci))]) for m in li])
    ps = pos[li][:, ci]
    tv_api = 0.5 * np.abs(tl - 1 / tl.shape[-1]).sum(-1)
    tv_pos = 0.5 * np.abs(ps - 1 / ps.shape[-1]).sum(-1)
    la, lb = np.log(tl), np.log(ps)
    return {"delta_api_cell": tv_api, "delta_api": tv_api.mean(-1), "delta_pos": tv_pos.mean(-1),
            "a": la - la.mean(-1, keepdims=True), "b": lb - lb.mean(-1, keepdims=True)}


def covers(draws, truth, prob=0.94, tol=1e-9):
    from toolbias_stats.models.bayes._common import _hdi

    x = draws.reshape(len(draws), -1)
    lo, hi = _hdi(x, prob)
    t = np.asarray(truth).ravel()
    return ((lo - tol <= t) & (t <= hi + tol)).astype(int).tolist()


class Refitter:
    """One compiled model reused for every study of the same shape (``pm.set_data``)."""

    def __init__(self):
        self.model = None

    def fit(self, data, draws, tune, chains, seed):

        from bayes_margin import build_model, sample, set_data

        if self.model is None:
            self.model = build_model(data)
        else:
            set_data(self.model, data)
        return sample(self.model, draws=draws, tune=tune, chains=chains, cores=1, seed=seed)


def one_fit(refit, sd, seed, draws, tune, chains, w0):
    from bayes_margin import design_of, diagnostics, margin_data, summarise
    from bayes_query_sim import simulate

    D = design_of(simulate(sd, seed))
    data = margin_data(D)
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        idata = refit.fit(data, draws, tune, chains, seed)
    sec = time.perf_counter() - t0
    post = summarise(idata, margin=0.02, gen=seed, w0=w0)
    tr = truths(D, sd)
    rec = {"sd": sd, "seed": seed, "w0": w0, "seconds": sec, **diagnostics(idata), "llms": list(D.llms),
           "clusters": list(D.clusters), "p_no_position": post["p_no_position"].tolist(),
           "p_equal_worth": post["p_equal_worth"].tolist()}
    for q in QUANTITIES:
        rec[q] = covers(post[q], tr[q])
        rec[q + "_mean"] = post[q].mean(0).ravel().tolist()
    return rec


# ---------------------------------------------------------------------------------------------
# the study in three steps, so the fits can run on another machine with JAX and NumPyro only:
# export (simulate here: the package's log and design) -> worker (NumPyro fits, raw draws) -> collect (here)
def export(path, studies, sds, start=0):
    """Simulate the studies and write their margin data and truths to ``path`` (.npz) and ``path.json``."""
    from bayes_margin import design_of, margin_data
    from bayes_query_sim import simulate

    arrs, meta = {}, []
    for i in range(start, start + studies):
        for sd in sds:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                D = design_of(simulate(sd, 1000 + i))
            data = margin_data(D)
            j = len(meta)
            for k in ("T", "Pc", "cell", "qllm", "qcluster"):
                arrs[f"{k}_{j}"] = data[k]
            for k, v in truths(D, sd).items():
                arrs[f"truth_{k}_{j}"] = v
            meta.append({"sd": sd, "seed": 1000 + i, "M": data["M"], "C": data["C"], "K": data["K"],
                         "llms": list(D.llms), "clusters": list(D.clusters)})
    np.savez_compressed(path, **arrs)
    Path(str(path) + ".json").write_text(json.dumps(meta))


def _load(path):
    z = np.load(path)
    meta = json.loads(Path(str(path) + ".json").read_text())
    return z, meta


def run_batched(path, likelihood="dm", pooling="hier", batch=20, draws=500, tune=500, chains=2, w0=0.2,
                out=OUT, keep_draws=None):
    """Fit the exported studies with the NumPyro twin, ``batch`` data sets at a time (one ``jax.vmap``,
    :func:`bayes_margin.sample_numpyro_batch`), and append one line per fit to ``out``; fits already there
    (same seed, sd, likelihood, pooling, w0) are skipped, so an interrupted run resumes. ``keep_draws``: a folder
    for the draws of ``a`` and ``b`` (float32, one .npz per batch), for :func:`recollect` at another ``w0``."""
    from bayes_margin import numpyro_diagnostics, sample_numpyro_batch

    z, meta = _load(path)
    done = set()
    if Path(out).exists():
        for line in Path(out).read_text().splitlines():
            r = json.loads(line)
            done.add((r["seed"], r["sd"], r.get("likelihood"), r.get("pooling"), r["w0"]))
    todo = [j for j, m in enumerate(meta) if (m["seed"], m["sd"], likelihood, pooling, w0) not in done]
    priors = {"sigma_alpha_sd": 0.0} if pooling == "none" else None
    for b0 in range(0, len(todo), batch):
        js = todo[b0:b0 + batch]
        datas = []
        for j in js:
            d = {k: z[f"{k}_{j}"] for k in ("T", "Pc", "cell", "qllm", "qcluster")}
            d.update(M=meta[j]["M"], C=meta[j]["C"], K=meta[j]["K"])
            datas.append(d)
        t0, c0 = time.perf_counter(), time.process_time()
        res = sample_numpyro_batch(datas, draws=draws, tune=tune, chains=chains, seed=meta[js[0]]["seed"],
                                   likelihood=likelihood, pooling=pooling)
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        if keep_draws:
            Path(keep_draws).mkdir(parents=True, exist_ok=True)
            arrs = {f"{k}_{j}": raw[k].astype(np.float32) for j, (raw, _) in zip(js, res) for k in ("a", "b")}
            diags = {str(j): numpyro_diagnostics(raw, div) for j, (raw, div) in zip(js, res)}
            np.savez(Path(keep_draws) / f"{likelihood}_{pooling}_{b0}.npz", diag=json.dumps(diags), **arrs)
        with Path(out).open("a") as f:
            for j, (raw, div) in zip(js, res):
                rec = _record(z, meta, j, raw, numpyro_diagnostics(raw, div), likelihood, pooling, w0, priors)
                rec.update(batch_wall_s=wall, batch_cpu_s=cpu, batch=len(js))
                f.write(json.dumps(rec) + "\n")
        print(likelihood, pooling, f"{b0 + len(js)}/{len(todo)}", f"wall {wall:.0f} s cpu {cpu:.0f} s", flush=True)


def _record(z, meta, j, raw, diag, likelihood, pooling, w0, priors, interval="hdi"):
    """One fit's line: coverage (HDI and equal-tailed), posterior means and truths of every quantity."""
    import arviz as az
    from bayes_margin import summarise

    m = meta[j]
    idata = az.from_dict(posterior={"a": np.asarray(raw["a"], float), "b": np.asarray(raw["b"], float)})
    post = summarise(idata, priors=priors, margin=0.02, gen=m["seed"], w0=w0)
    rec = {"sd": m["sd"], "seed": m["seed"], "w0": w0, "likelihood": likelihood, "pooling": pooling,
           "sampler": "numpyro-batch", **diag, "llms": m["llms"], "clusters": m["clusters"],
           "p_no_position": post["p_no_position"].tolist(), "p_equal_worth": post["p_equal_worth"].tolist()}
    for q in QUANTITIES:
        tr = z[f"truth_{q}_{j}"]
        rec[q] = covers(post[q], tr)
        rec[q + "_et"] = covers_et(post[q], tr)
        rec[q + "_mean"] = post[q].mean(0).ravel().tolist()
        rec[q + "_truth"] = np.asarray(tr).ravel().tolist()
    return rec


def recollect(path, keep_draws, likelihood, pooling, w0, out=OUT):
    """The lines of :func:`run_batched` from kept draws, at another spike mass ``w0`` (no refit)."""
    z, meta = _load(path)
    priors = {"sigma_alpha_sd": 0.0} if pooling == "none" else None
    n = 0
    with Path(out).open("a") as f:
        for fn in sorted(Path(keep_draws).glob(f"{likelihood}_{pooling}_*.npz")):
            d = np.load(fn)
            diags = json.loads(str(d["diag"]))
            for js, diag in diags.items():
                j = int(js)
                raw = {"a": d[f"a_{j}"], "b": d[f"b_{j}"]}
                f.write(json.dumps(_record(z, meta, j, raw, diag, likelihood, pooling, w0, priors)) + "\n")
                n += 1
    return n


def covers_et(draws, truth, prob=0.94, tol=1e-9):
    """Coverage of the equal-tailed interval (quantiles (1 - prob)/2 and (1 + prob)/2)."""
    x = draws.reshape(len(draws), -1)
    lo, hi = np.quantile(x, [(1 - prob) / 2, (1 + prob) / 2], axis=0)
    t = np.asarray(truth).ravel()
    return ((lo - tol <= t) & (t <= hi + tol)).astype(int).tolist()


def wilson(k, n, z=1.959964):
    """Wilson score interval (95 %) of a binomial proportion k / n: the Monte-Carlo error of a coverage."""
    if n == 0:
        return float("nan"), float("nan")
    p = k / n
    c = (p + z * z / (2 * n)) / (1 + z * z / n)
    h = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return float(c - h), float(c + h)


#: the table's lines: (name, quantity, which units: "all", "zero" (truth 0) or "nonzero")
LINES = (("delta_API per cell, all", "delta_api_cell", "all"),
         ("delta_API, equal-worth cells (truth 0)", "delta_api_cell", "zero"),
         ("delta_API, unequal cells", "delta_api_cell", "nonzero"),
         ("delta_API per LLM (mean over clusters)", "delta_api", "all"),
         ("delta_pos per LLM, all", "delta_pos", "all"),
         ("delta_pos, the LLM without position effects (truth 0)", "delta_pos", "zero"),
         ("delta_pos, LLMs with position effects", "delta_pos", "nonzero"),
         ("tool effects a", "a", "all"),
         ("position effects b", "b", "all"))


def summary(path=OUT):
    """Coverage per (likelihood, pooling, sd) and table line, of the HDI and of the equal-tailed interval, with
    Wilson 95 % intervals; plus the fits' diagnostics, the bias of the unequal cells' delta_API and their P0."""
    recs = [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]
    groups: dict = {}
    for r in recs:
        groups.setdefault((r.get("likelihood", "dm"), r.get("pooling", "hier"), r["w0"], r["sd"]), []).append(r)
    rows = []
    for (lik, pool, w0, sd), grp in sorted(groups.items()):
        base = {"likelihood": lik, "pooling": pool, "w0": w0, "sd": sd, "studies": len(grp)}
        for name, q, which in LINES:
            row = {**base, "line": name}
            for kind, key in (("hdi", q), ("et", q + "_et")):
                hits = []
                for r in grp:
                    t = np.asarray(r[q + "_truth"])
                    sel = np.ones(len(t), bool) if which == "all" else (t < 1e-12 if which == "zero" else t >= 1e-12)
                    hits += np.asarray(r[key])[sel].tolist()
                k, n = int(np.sum(hits)), len(hits)
                lo, hi = wilson(k, n)
                row.update({f"{kind}_n": n, f"{kind}_covered": k, f"{kind}_pct": 100 * k / max(n, 1),
                            f"{kind}_wilson95": [100 * lo, 100 * hi]})
            rows.append(row)
        err, p0, per_llm = [], [], {}
        for r in grp:
            t = np.asarray(r["delta_api_cell_truth"]).reshape(len(r["llms"]), -1)
            hit = np.asarray(r["delta_api_cell"]).reshape(t.shape)
            for i, name in enumerate(r["llms"]):
                per_llm.setdefault(name, []).extend(hit[i][t[i] >= 1e-12].tolist())
            t = np.asarray(r["delta_api_cell_truth"])
            m = np.asarray(r["delta_api_cell_mean"])
            err += (m - t)[t >= 1e-12].tolist()
            p0 += np.asarray(r["p_equal_worth"]).ravel()[t >= 1e-12].tolist()
        rows.append({**base, "line": "fits", "rhat_max": max(r["max_rhat"] for r in grp),
                     "ess_bulk_min": min(r["min_ess_bulk"] for r in grp),
                     "divergent_fits": sum(r["divergences"] > 0 for r in grp),
                     "unequal_delta_api_bias": float(np.mean(err)), "unequal_delta_api_rmse": float(
                         np.sqrt(np.mean(np.square(err)))), "unequal_p0_mean": float(np.mean(p0)),
                     "unequal_p0_max": float(np.max(p0)), "unequal_p0_gt_0.03": int(np.sum(np.array(p0) > 0.03)),
                     "unequal_delta_api_hdi_coverage_per_llm": {k: float(np.mean(v)) for k, v in sorted(
                         per_llm.items())}})
    return rows


def markdown(rows, variants):
    """The coverage table (HDI; n, %, Wilson 95 %) of the given (likelihood, pooling, w0) variants, sd 0 | sd 1, as
    Markdown."""
    out = []
    for lik, pool, w0 in variants:
        out += [f"**likelihood `{lik}`, pooling `{pool}`, spike mass w0 = {w0}**", "",
                "| quantity (94 % HDI) | sd = 0: covered / n = % [Wilson 95 %] | sd = 1.0 |", "|---|---|---|"]
        sel = [r for r in rows if (r["likelihood"], r["pooling"], r["w0"]) == (lik, pool, w0)]
        for name, _, _ in LINES:
            cells = []
            for sd in (0.0, 1.0):
                r = next((x for x in sel if x["sd"] == sd and x["line"] == name), None)
                cells.append("—" if r is None else f"{r['hdi_covered']}/{r['hdi_n']} = {r['hdi_pct']:.1f} % "
                             f"[{r['hdi_wilson95'][0]:.1f}, {r['hdi_wilson95'][1]:.1f}]")
            out.append(f"| {name} | {cells[0]} | {cells[1]} |")
        fits = {x["sd"]: x for x in sel if x["line"] == "fits"}
        key = "unequal_delta_api_hdi_coverage_per_llm"
        per = " | ".join(", ".join(f"{v * 100:.1f}" for v in fits[sd][key].values()) if sd in fits else "—"
                         for sd in (0.0, 1.0))
        out.append(f"| δ_API of the unequal cells, per LLM 1–4 (%) | {per} |")
        for key, fmt in (("unequal_delta_api_bias", "{:+.4f}"), ("unequal_p0_mean", "{:.4f}"),
                         ("unequal_p0_max", "{:.3f}"), ("rhat_max", "{:.3f}"), ("ess_bulk_min", "{:.0f}"),
                         ("divergent_fits", "{}"), ("studies", "{}")):
            out.append(f"| {key} | " + " | ".join(fmt.format(fits[sd][key]) if sd in fits else "—"
                                                 for sd in (0.0, 1.0)) + " |")
        out.append("")
    return "\n".join(out)


def print_table(rows):
    for r in rows:
        head = (f"{r['likelihood']:5s} {r['pooling']:7s} w0={r['w0']} sd={r['sd']:.1f} n={r['studies']:2d} "
                f"{r['line']:55s}")
        if r["line"] == "fits":
            print(head, {k: (round(v, 4) if isinstance(v, float) else v) for k, v in r.items()
                         if k not in ("likelihood", "pooling", "w0", "sd", "studies", "line")})
        else:
            print(head, " ".join(f"{kind} {r[kind + '_covered']}/{r[kind + '_n']} = {r[kind + '_pct']:.1f}% "
                                 f"[{r[kind + '_wilson95'][0]:.1f}, {r[kind + '_wilson95'][1]:.1f}]"
                                 for kind in ("hdi", "et")))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--studies", type=int, default=40)
    ap.add_argument("--sd", default="0,1.0")
    ap.add_argument("--draws", type=int, default=500)
    ap.add_argument("--tune", type=int, default=500)
    ap.add_argument("--chains", type=int, default=2)
    ap.add_argument("--w0", type=float, default=0.2)
    ap.add_argument("--start", type=int, default=0)
    ap.add_argument("--summary", action="store_true")
    ap.add_argument("--export", help="write the studies' data and truths to this .npz")
    ap.add_argument("--batched", help="fit the studies of this exported .npz with the batched NumPyro twin")
    ap.add_argument("--likelihood", default="dm")
    ap.add_argument("--pooling", default="hier")
    ap.add_argument("--batch", type=int, default=20)
    ap.add_argument("--keep-draws", help="folder for the draws (a, b) of --batched, one .npz per batch")
    ap.add_argument("--recollect", help="the --keep-draws folder: summarise again at --w0 (needs --data)")
    ap.add_argument("--data", help="the exported .npz (for --recollect)")
    a = ap.parse_args()
    if a.export:
        return export(a.export, a.studies, [float(s) for s in a.sd.split(",")], a.start)
    if a.batched:
        return run_batched(a.batched, a.likelihood, a.pooling, a.batch, a.draws, a.tune, a.chains, a.w0,
                           keep_draws=a.keep_draws)
    if a.recollect:
        print(recollect(a.data, a.recollect, a.likelihood, a.pooling, a.w0), "fits")
        return
    if a.summary:
        rows = summary()
        (HERE / "bayes_margin_sim.json").write_text(json.dumps(rows, indent=1))
        print_table(rows)
        variants = sorted({(r["likelihood"], r["pooling"], r["w0"]) for r in rows})
        (HERE / "bayes_margin_sim.md").write_text(markdown(rows, variants))
        return
    refit = Refitter()
    for i in range(a.start, a.start + a.studies):
        for sd in [float(s) for s in a.sd.split(",")]:
            rec = one_fit(refit, sd, 1000 + i, a.draws, a.tune, a.chains, a.w0)
            with OUT.open("a") as f:
                f.write(json.dumps(rec) + "\n")
            print(sd, i, round(rec["seconds"], 1), rec["max_rhat"], rec["divergences"], flush=True)


if __name__ == "__main__":
    main()
