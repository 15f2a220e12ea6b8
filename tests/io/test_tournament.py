"""Issue 36: a tournament of description variants, where the same tool id belongs to several clusters.

The study is written the way a tournament harness writes it: ten description variants of one tool, every pair of
variants a cluster of its own (45 clusters), each pair shown in both orders to a set of queries; a catalog CSV with
one row per (cluster, variant) -- so every variant id appears in nine clusters -- and a table log CSV with one row
per attempt (some attempts end without a call or with an unparseable answer).

Every expected number is recomputed here from the rows with plain pandas: per cluster the share of each variant and
of each position, their TV distances to the uniform, and the means over clusters; the counts per status. Both
engines (pandas, DuckDB) must give exactly those, and the choice model one worth per variant.
"""

from __future__ import annotations

import itertools
import warnings

import numpy as np
import pandas as pd
import pytest

import toolbias_stats as tbs
from toolbias_stats.exceptions import SelectionLogError

VARIANTS = [f"variant_{i}" for i in range(1, 11)]
WORTH = np.linspace(0.0, 1.8, 10)         # true log-odds worths (variant_1 the reference)
POSITION = 0.5                            # true first-position log-odds advantage in a pair


def _tournament(rng, n_queries=8):
    cat, rows = [], []
    for a, b in itertools.combinations(range(10), 2):
        cid = f"{VARIANTS[a]}~{VARIANTS[b]}"
        cat += [dict(cluster_id=cid, tool_id=VARIANTS[a], api_index=1, tool_description=f"text {a}"),
                dict(cluster_id=cid, tool_id=VARIANTS[b], api_index=2, tool_description=f"text {b}")]
        for q in range(n_queries):
            for order in ((a, b), (b, a)):
                u = WORTH[list(order)] + np.array([POSITION, 0.0])
                p = np.exp(u - u.max())
                j = int(rng.choice(2, p=p / p.sum()))
                status = rng.choice(["ok", "no_call", "parse_error"], p=[0.9, 0.06, 0.04])
                ok = status == "ok"
                rows.append(dict(cluster_id=cid, query_id=f"q{q}", ordering="|".join(VARIANTS[i] for i in order),
                                 chosen_tool=VARIANTS[order[j]] if ok else None,
                                 chosen_position=j + 1 if ok else None, status=status))
    return pd.DataFrame(cat), pd.DataFrame(rows)


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    d = tmp_path_factory.mktemp("tournament")
    cat, rows = _tournament(np.random.default_rng(36))
    cat.to_csv(d / "variants.csv", index=False)
    rows.to_csv(d / "log.csv", index=False)
    (d / "study.toml").write_text('name = "tournament"\nformat = "table"\ncatalog = "variants.csv"\n'
                                  '[[logs]]\npath = "log.csv"\nmodel = "m"\n', encoding="utf-8")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        studies = {e: tbs.read_study(d / "study.toml", engine=e) for e in ("pandas", "duckdb")}
    return dict(dir=d, catalog=cat, rows=rows, studies=studies)


def _tv(rates, k):
    return 0.5 * float(np.abs(np.asarray(rates) - 1.0 / k).sum())


def _direct(rows):
    """delta_API, delta_pos (means over clusters) and per-cluster choice counts, straight from the rows."""
    ok = rows[rows["status"] == "ok"]
    d_api, d_pos, counts = [], [], {}
    for cid, part in ok.groupby("cluster_id"):
        a, b = cid.split("~")
        tools = part["chosen_tool"].value_counts().reindex([a, b], fill_value=0)
        pos = part["chosen_position"].astype(int).value_counts().reindex([1, 2], fill_value=0)
        counts[cid] = (tools.tolist(), pos.tolist())
        d_api.append(_tv(tools / tools.sum(), 2))
        d_pos.append(_tv(pos / pos.sum(), 2))
    return float(np.mean(d_api)), float(np.mean(d_pos)), counts


class TestCatalog:
    def test_a_tool_in_nine_clusters_is_read(self, study):
        cat = study["studies"]["pandas"].catalog
        assert len(cat.clusters) == 45 and len(cat) == 90
        assert sum(VARIANTS[0] in cat.tools(c) for c in cat.clusters) == 9
        assert cat.tools("variant_1~variant_2") == ["variant_1", "variant_2"]
        assert cat.aliases()["variant_3"] == "variant_3"

    def test_a_tool_twice_in_one_cluster_is_refused_with_its_row(self):
        table = pd.DataFrame({"tool_id": ["a", "b", "a"], "cluster_id": ["1", "1", "1"]})
        with pytest.raises(SelectionLogError, match=r"<memory>:3:tool_id: duplicate tool_id 'a' in cluster '1'"):
            tbs.ToolCatalog(table)


class TestBothEngines:
    @pytest.mark.parametrize("engine", ["pandas", "duckdb"])
    def test_rows_deltas_and_counts_equal_a_direct_computation(self, study, engine):
        rows = study["rows"]
        d_api, d_pos, counts = _direct(rows)
        s = study["studies"][engine]
        assert s.counts.status_totals() == {st: int((rows["status"] == st).sum()) for st in tbs.STATUSES}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res = tbs.selection_bias(s.counts, by=[], n_resamples=0, n_null=0)
        g = res.groups[0]
        assert g.rows["total"] == len(rows) == g.rows["used"] + sum(g.rows["excluded"].values())
        assert g.rows["excluded"] == {st: int(n) for st, n in rows["status"].value_counts().items() if st != "ok"}
        assert g.delta_api.mean_over_runs == pytest.approx(d_api, abs=1e-12)
        assert g.delta_pos.mean_over_runs == pytest.approx(d_pos, abs=1e-12)
        assert len(g.clusters) == 45
        for c in g.clusters:           # per cluster: the same tool id, counted only where its cluster shows it
            assert (list(c.counts), list(c.position_counts)) == counts[c.cluster]

    def test_engines_agree_on_the_count_tables(self, study):
        a, b = (study["studies"][e].counts for e in ("pandas", "duckdb"))
        pd.testing.assert_frame_equal(a.table, b.table)


class TestChoiceModel:
    def test_one_worth_per_variant_across_its_nine_pairs(self, study):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res = tbs.choice_model(study["studies"]["pandas"].log, by=None, reference="variant_1")
        rows = study["rows"]
        te = res.tool_effects.set_index("tool_id")
        assert sorted(te.index) == sorted(VARIANTS)              # one row per variant, not per (cluster, variant)
        assert res.n_used + res.n_excluded == len(rows)
        assert res.n_used == int((rows["status"] == "ok").sum())
        ok = rows[rows["status"] == "ok"]
        shown = pd.concat([ok["ordering"].str.split("|").str[i] for i in (0, 1)]).value_counts()
        assert te["n_shown"].to_dict() == shown.to_dict()        # each variant's attempts over all nine pairs
        assert te["n_chosen"].to_dict() == ok["chosen_tool"].value_counts().to_dict()
        # the worths recover the truth (720 attempts x 10 parameters): within 3.5 standard errors
        est = te.loc[VARIANTS, "estimate"].to_numpy()
        se = np.where(te.loc[VARIANTS, "se"] > 0, te.loc[VARIANTS, "se"], 1.0)
        assert np.all(np.abs(est - WORTH) < 3.5 * se)
        pos = res.position_effects.set_index("position").loc[2]
        assert pos["ci_low"] < -POSITION < pos["ci_high"]

    def test_a_conditional_logit_by_statsmodels_free_pass(self, study):
        """The worths equal an independent maximum-likelihood fit: a logit of 'first shown wins' on the worth
        difference (a pair's conditional logit is a binary logit), fitted by statsmodels."""
        import statsmodels.api as sm

        ok = study["rows"][study["rows"]["status"] == "ok"]
        first = ok["ordering"].str.split("|").str[0]
        second = ok["ordering"].str.split("|").str[1]
        X = pd.DataFrame(0.0, index=ok.index, columns=VARIANTS[1:])
        for v in VARIANTS[1:]:
            X[v] = (first == v).astype(float) - (second == v).astype(float)
        X.insert(0, "first", 1.0)
        y = (ok["chosen_position"].astype(int) == 1).astype(float)
        ref = sm.Logit(y, X).fit(disp=0)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res = tbs.choice_model(study["studies"]["pandas"].log, by=None, penalty="none", se="model",
                                   reference="variant_1")
        te = res.tool_effects.set_index("tool_id")
        np.testing.assert_allclose(te.loc[VARIANTS[1:], "estimate"], ref.params[VARIANTS[1:]], atol=1e-6)
        np.testing.assert_allclose(te.loc[VARIANTS[1:], "se"], ref.bse[VARIANTS[1:]], rtol=1e-5)
        p2 = res.position_effects.set_index("position").loc[2, "estimate"]
        assert p2 == pytest.approx(-ref.params["first"], abs=1e-6)


class TestReport:
    def test_report_names_every_cluster(self, study, tmp_path):
        from toolbias_stats.cli._commands import main

        out = tmp_path / "report.html"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            rc = main(["report", str(study["dir"] / "study.toml"), "--out", str(out), "--bootstrap", "20",
                       "--null", "20", "--choice-model"])
        assert rc in (0, None)
        text = out.read_text(encoding="utf-8")
        assert "variant_1~variant_10" in text and "variant_9~variant_10" in text
