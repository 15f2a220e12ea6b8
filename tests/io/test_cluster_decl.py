"""Clusters without a catalog (issue 13): declared in the manifest, read from a clusters_file, or inferred."""

from __future__ import annotations

from pathlib import Path

import pytest

import toolbias_stats as tbs
from toolbias_stats.exceptions import ManifestError, SelectionLogError
from toolbias_stats.io.readers._clusters import catalog_for, declared_catalog, infer_catalog, inferred_cluster_id

FIX = Path(__file__).resolve().parent / "fixtures" / "api_logs"
BATCH_IN, BATCH_OUT = FIX / "openai" / "chat_batch_input.jsonl", FIX / "openai" / "chat_batch_output.jsonl"
DECL = 'clusters = {geocoding = ["geo_a", "geo_b", "geo_c"], weather = ["wx_a", "wx_b"]}\n'
ENTRY = f'[[logs]]\npath = "{BATCH_IN}"\nresponses = "{BATCH_OUT}"\nmodel = "m"\nmodel_override = true\n'


def _study(tmp_path, text):
    p = tmp_path / "study.toml"
    p.write_text(text, encoding="utf-8")
    return p


class TestDeclaredCatalog:
    def test_tools_and_order(self):
        cat = declared_catalog({"geo": ["b", "a"], "wx": ["c"]})
        assert cat.clusters == ["geo", "wx"] and cat.tools("geo") == ["b", "a"]

    def test_tool_in_two_clusters(self):
        # issue 36: a tool may be in several clusters (a tournament's pairs) ...
        cat = declared_catalog({"a~b": ["a", "b"], "a~c": ["a", "c"], "b~c": ["b", "c"]})
        assert cat.tools("a~c") == ["a", "c"] and len(cat) == 6
        # ... but a cluster inside another could never be told apart from it
        with pytest.raises(ManifestError, match=r"clusters.wx: every tool of cluster 'wx' is also in cluster 'geo'"):
            declared_catalog({"geo": ["a", "b"], "wx": ["a"]})
        with pytest.raises(ManifestError, match=r"clusters.geo: tool\(s\) \['a'\] declared twice in this cluster"):
            declared_catalog({"geo": ["a", "b", "a"]})

    @pytest.mark.parametrize("bad", [{"geo": []}, {"geo": "a"}, {"geo": ["a", 3]}, {"geo": ["a", ""]}])
    def test_bad_values(self, bad):
        with pytest.raises(ManifestError, match=r"clusters.geo: expected a non-empty list of tool names"):
            declared_catalog(bad)


class TestInference:
    def test_exact_sets(self):
        cat = infer_catalog([(["b", "a"], "f", 1), (["a", "b"], "f", 2), (["x", "y", "z"], "f", 3)])
        assert cat.clusters == ["a+b", "x+y+z"] and cat.tools("a+b") == ["a", "b"]

    def test_overlapping_sets_name_both_requests(self):
        with pytest.raises(SelectionLogError) as err:
            infer_catalog([(["a", "b"], "f.jsonl", 1), (["a", "b"], "f.jsonl", 2), (["a", "b", "c"], "f.jsonl", 7)])
        msg = str(err.value)
        assert msg.startswith("f.jsonl:7:tools: the tool list changes within one cluster")
        assert "f.jsonl:1 offers ['a', 'b']" in msg and "they share ['a', 'b']" in msg

    def test_long_ids_are_shortened_stably(self):
        tools = [f"some_long_tool_name_{i}" for i in range(10)]
        cid = inferred_cluster_id(tools)
        assert len(cid) < 90 and cid == inferred_cluster_id(list(reversed(tools))) and "10 tools" in cid

    def test_catalog_for_needs_one_source(self, bb_catalog):
        with pytest.raises(ValueError, match="either `catalog` or `clusters`"):
            catalog_for([], catalog=bb_catalog, clusters="infer")
        with pytest.raises(TypeError, match="`clusters` must be"):
            catalog_for([], clusters=3)


class TestManifest:
    def test_declared_table(self, tmp_path):
        study = tbs.read_study(_study(tmp_path, 'format = "openai"\n' + DECL + ENTRY))
        assert study.settings["cluster_source"]["kind"] == "declared"
        assert study.settings["cluster_source"]["detail"].startswith("declared in the manifest (study.toml)")
        assert sorted(set(study.log.data["cluster_id"])) == ["geocoding", "weather"]
        assert study.catalog.tools("weather") == ["wx_a", "wx_b"]

    def test_declared_per_entry(self, tmp_path):
        study = tbs.read_study(_study(tmp_path, 'format = "openai"\n' + ENTRY + DECL))
        assert study.settings["cluster_source"]["kind"] == "declared"
        assert "clusters" not in study.log.design_columns

    def test_clusters_file(self, tmp_path):
        (tmp_path / "c.csv").write_text("tool_id,cluster_id\ngeo_a,1\ngeo_b,1\ngeo_c,1\nwx_a,2\nwx_b,2\n")
        study = tbs.read_study(_study(tmp_path, 'format = "openai"\nclusters_file = "c.csv"\n' + ENTRY))
        assert study.settings["cluster_source"]["kind"] == "file"
        assert sorted(set(study.log.data["cluster_id"])) == ["1", "2"]

    @pytest.mark.parametrize("decl", ['clusters = "infer"\n', ""])
    def test_inferred(self, tmp_path, decl):
        study = tbs.read_study(_study(tmp_path, 'format = "openai"\n' + decl + ENTRY))
        assert study.settings["cluster_source"]["kind"] == "inferred"
        assert study.catalog.clusters == ["geo_a+geo_b+geo_c", "wx_a+wx_b"]

    def test_text_report_says_which(self, tmp_path):
        from toolbias_stats._text import format_validation

        study = tbs.read_study(_study(tmp_path, 'format = "openai"\n' + DECL + ENTRY))
        text = format_validation(study, study.log.summary())
        assert "clusters: declared in the manifest (study.toml): 2 cluster(s), 5 tool(s)" in text

    def test_html_report_says_which(self, tmp_path):
        from toolbias_stats.report import render_bias_report

        study = tbs.read_study(_study(tmp_path, 'format = "openai"\nclusters = "infer"\n' + ENTRY))
        with pytest.warns(Warning):
            res = tbs.selection_bias(study, n_resamples=20, n_null=20, rng=0)
        page = render_bias_report(study, res)
        assert ("<dt>clusters</dt><dd>inferred as the exact set of tools offered in each request: 2 cluster(s), "
                "5 tool(s)</dd>") in page

    def test_declaration_and_catalog(self, tmp_path, bb_data_dir):
        text = f'format = "openai"\ncatalog = "{bb_data_dir / "clusters.json"}"\n' + DECL + ENTRY
        with pytest.raises(ManifestError, match=r"logs\[1\]:catalog: give either a catalog or cluster declarations"):
            tbs.read_study(_study(tmp_path, text))

    @pytest.mark.parametrize("value, msg", [
        ('"guess"', "expected a non-empty list of cluster ids, got 'guess' \\(or, to declare clusters, a table"),
        ("5", "expected a non-empty list of cluster ids, got 5 \\(or, to declare clusters, a table")])
    def test_bad_clusters_value(self, tmp_path, value, msg):
        with pytest.raises(ManifestError, match=rf"logs\[1\]:clusters: {msg}"):
            tbs.read_study(_study(tmp_path, 'format = "openai"\n' + ENTRY + f"clusters = {value}\n"))

    def test_catalog_for_some_entries_only(self, tmp_path, bb_data_dir):
        text = ('format = "openai"\n' + ENTRY + f'catalog = "{bb_data_dir / "clusters.json"}"\n'
                + ENTRY.replace('model = "m"', 'model = "n"'))
        with pytest.raises(ManifestError, match=r"logs\[2\]:catalog: no catalog given while logs\[1\] names one"):
            tbs.read_study(_study(tmp_path, text))

    def test_missing_clusters_file(self, tmp_path):
        with pytest.raises(ManifestError, match=r"logs\[1\]:clusters_file: file not found"):
            tbs.read_study(_study(tmp_path, 'format = "openai"\nclusters_file = "nope.csv"\n' + ENTRY))

    def test_entries_declaring_different_clusters(self, tmp_path):
        text = ('format = "openai"\n' + ENTRY + DECL + ENTRY.replace('model = "m"', 'model = "n"')
                + 'clusters = "infer"\n')
        with pytest.raises(ManifestError, match="declare different clusters"):
            tbs.read_study(_study(tmp_path, text))

    def test_subsets_must_be_boolean_and_only_for_api_formats(self, tmp_path, bb_data_dir):
        with pytest.raises(ManifestError, match=r"logs\[1\]:subsets: expected true or false"):
            tbs.read_study(_study(tmp_path, 'format = "openai"\n' + ENTRY + 'subsets = "yes"\n'))
        text = (f'catalog = "{bb_data_dir / "clusters.json"}"\nformat = "biasbusters"\n[[logs]]\n'
                f'path = "{bb_data_dir / "selection_logs" / "api_selection_stats_claude.json"}"\nmodel = "x"\n'
                'responses = "x.jsonl"\n')
        with pytest.raises(ManifestError, match=r"format 'biasbusters' takes no 'responses' option"):
            tbs.read_study(_study(tmp_path, text))

    def test_format_that_cannot_infer_still_needs_a_catalog(self, tmp_path):
        (tmp_path / "t.csv").write_text("cluster_id,query_id,status\n1,1,no_call\n")
        with pytest.raises(ManifestError, match=r"logs\[1\]:catalog: no catalog given"):
            tbs.read_study(_study(tmp_path, '[[logs]]\npath = "t.csv"\nformat = "table"\nmodel = "m"\n'))

    def test_declared_clusters_work_for_the_table_format(self, tmp_path):
        (tmp_path / "t.csv").write_text("cluster_id,query_id,status,chosen_tool\ngeo,1,ok,geo_b\ngeo,2,no_call,\n")
        study = tbs.read_study(_study(tmp_path, 'clusters = {geo = ["geo_a", "geo_b"]}\n'
                                                '[[logs]]\npath = "t.csv"\nformat = "table"\nmodel = "m"\n'))
        assert study.log.data["status"].tolist() == ["ok", "no_call"]
        assert study.settings["cluster_source"]["kind"] == "declared"

    def test_issue8_cluster_list_still_means_run_on(self, tmp_path, bb_data_dir):
        (tmp_path / "part.json").write_text("[[2501, 6, 1, 1], [3501, 8, 2, 2]]")
        text = (f'catalog = "{bb_data_dir / "clusters.json"}"\nformat = "biasbusters"\n[[logs]]\n'
                f'path = "part.json"\nmodel = "x"\nclusters = ["6", 8]\n')
        study = tbs.read_study(_study(tmp_path, text))
        assert sorted(study.log.data["cluster_id"].unique()) == ["6", "8"]
        assert "cluster_source" not in study.settings
