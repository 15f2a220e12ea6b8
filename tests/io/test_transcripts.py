"""Tests for toolbias_stats.io.readers.transcripts (read_transcripts)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pandas as pd
import pytest

from toolbias_stats.exceptions import ExcludedRowsWarning, SelectionLogError
from toolbias_stats.io._catalog import ToolCatalog
from toolbias_stats.io.readers import READERS
from toolbias_stats.io.readers.transcripts import read_transcripts

DATA = Path(__file__).resolve().parents[2] / "data" / "biasbusters"
BASE_MODEL = DATA / "transcripts" / "base_model"
META = {"model": "Qwen3-8B-Base", "condition": "base", "temperature": 0.5}

WHAT_S = "languagedetection_for_what_s_language"
QUICK = "detect_language_for_quick_language_detector"
NINJAS = "v1_textlanguage_for_text_language_by_api_ninjas"
TRANSLATE_V3 = "fast_language_detection_for_translate_v3"
TRANSLATE_ALL = "detect_for_translate_all_languages"


@pytest.fixture(scope="module")
def catalog(bb_catalog):
    return bb_catalog


@pytest.fixture(scope="module")
def base_model_log(catalog):
    # called the way read_study calls readers
    return READERS["transcripts"](BASE_MODEL, catalog=catalog, meta=META, cluster="8")


def _folder(tmp_path: Path, texts: dict) -> Path:
    folder = tmp_path / "react"
    folder.mkdir()
    for name, text in texts.items():
        (folder / name).write_text(text, encoding="utf-8")
    return folder


def _jsonl(tmp_path: Path, records, name="calls.jsonl") -> Path:
    path = tmp_path / name
    path.write_text("\n".join(r if isinstance(r, str) else json.dumps(r) for r in records) + "\n", encoding="utf-8")
    return path


def _openai(name):
    return {"choices": [{"message": {"role": "assistant", "content": None,
                                     "tool_calls": [{"id": "c1", "type": "function",
                                                     "function": {"name": name, "arguments": "{}"}}]}}]}


def _anthropic(name):
    return {"content": [{"type": "text", "text": "Let me check."},
                        {"type": "tool_use", "id": "t1", "name": name, "input": {}}]}


class TestReactFolder:
    def test_rules(self, catalog, tmp_path):
        folder = _folder(tmp_path, {
            "a_ok.txt": f"Thought: use it.\n\nAction: {WHAT_S}\nAction Input: {{'text': 'hola'}}",
            "b_finish.txt": f"Thought: done\nAction: Finish\nAction Input: {{'final_answer': '{QUICK}'}}",
            "c_unknown.txt": "Thought: hmm\nAction: detect_language\nAction Input: {}\n",
            "d_substring.txt": "Action: detect_language_for_translate_v3\nAction Input: {}",
            "e_earliest.txt": f"Action: call quick_language_detector, not {WHAT_S}\n",
            "f_no_action.txt": "Thought: I cannot help with that.\nThe answer is French.",
            "g_next_line.txt": "Thought: x\naction:  \n`detect_for_translate_all_languages`\nAction Input: {}",
            "h_empty_action.txt": "Action\nAction Input: {'text': 'x'}\n",
            "i_only_input.txt": f"Thought: x\nAction Input: {WHAT_S}\n",
            "j_later_name.txt": f"Action: detect\nAction Input: {{}}\nThought: retry\nAction: {NINJAS}\n",
            "k_case.txt": "ACTION: V1_TextLanguage_For_Text_Language_By_API_Ninjas\n",
            "notes.md": f"Action: {WHAT_S}",  # not a transcript: ignored
        })
        log = read_transcripts(folder, catalog=catalog, meta=META, cluster="8")
        d = log.data.set_index("query_id")
        expect = {
            "a_ok": ("ok", WHAT_S, WHAT_S),
            "b_finish": ("no_call", None, "Finish"),
            "c_unknown": ("unknown_tool", None, "detect_language"),
            "d_substring": ("ok", TRANSLATE_V3, "translate_v3"),
            "e_earliest": ("ok", QUICK, "quick_language_detector"),
            "f_no_action": ("parse_error", None, "Thought: I cannot help with that."),
            "g_next_line": ("ok", TRANSLATE_ALL, TRANSLATE_ALL),
            "h_empty_action": ("parse_error", None, "Action\nAction Input: {'text': 'x'}"),
            "i_only_input": ("parse_error", None, "Thought: x"),
            "j_later_name": ("ok", NINJAS, NINJAS),
            "k_case": ("ok", NINJAS, "V1_TextLanguage_For_Text_Language_By_API_Ninjas"),
        }
        assert list(d.index) == sorted(expect)
        for qid, (status, tool, raw) in expect.items():
            row = d.loc[qid]
            assert (row["status"], None if pd.isna(row["chosen_tool"]) else row["chosen_tool"],
                    None if pd.isna(row["raw_choice"]) else row["raw_choice"]) == (status, tool, raw), qid
        assert d["source_row"].tolist() == list(range(1, 12))
        assert set(d["source_file"]) == {str(folder)} and set(d["cluster_id"]) == {"8"}
        assert d["rotation"].isna().all() and d["ordering"].isna().all() and d["chosen_position"].isna().all()
        assert d["n_candidates"].tolist() == [5] * 11
        assert log.design_columns == ["model", "run", "condition", "temperature"]
        diag = log.diagnostics[str(folder)]
        assert diag["status"] == Counter({"ok": 6, "parse_error": 3, "unknown_tool": 1, "no_call": 1})
        assert diag["unresolved"] == Counter({"detect_language": 1})
        assert diag["format"] == "react" and diag["attempts"] == 11

    def test_longest_name_wins_on_ties(self, tmp_path):
        cat = ToolCatalog.from_records([
            {"cluster_id": "1", "tool_name": "Geo", "api_name": "x", "num_parameters": 0},
            {"cluster_id": "1", "tool_name": "Geo Plus", "api_name": "y", "num_parameters": 0},
        ])
        folder = _folder(tmp_path, {"1.txt": "Action: geo_plus\n", "2.txt": "Action: GEO\n",
                                    "3.txt": "Action: geography\n"})
        log = read_transcripts(folder, catalog=cat, meta={"model": "m"}, cluster="1")
        assert log.data["chosen_tool"].tolist()[:2] == ["y_for_geo_plus", "x_for_geo"]
        # a name glued to letters or digits is not a match ("geo" inside "geography")
        assert log.data["status"].tolist()[2] == "unknown_tool"

    def test_whole_catalog_without_cluster(self, catalog, tmp_path):
        folder = _folder(tmp_path, {"1.txt": f"Action: {WHAT_S}\n",
                                    "2.txt": "Action: geocode_for_trueway_geocoding\n"})
        log = read_transcripts(folder, catalog=catalog, meta=META)
        assert log.data["cluster_id"].tolist() == ["8", "1"]
        assert log.data["chosen_tool"].tolist() == [WHAT_S, "geocode_for_trueway_geocoding"]

    def test_cluster_needed_for_rows_without_a_tool(self, catalog, tmp_path):
        folder = _folder(tmp_path, {"1.txt": f"Action: {WHAT_S}\n", "2.txt": "Action: Finish\n"})
        # issue 36: the Finish transcript has no cluster: kept as a row without one, excluded by its status
        with pytest.warns(ExcludedRowsWarning, match=r"1 of 2 attempt.*set `cluster` in the manifest entry"):
            log = read_transcripts(folder, catalog=catalog, meta=META)
        assert log.data["status"].tolist() == ["ok", "no_call"] and log.data["cluster_id"].isna().tolist() == [
            False, True]
        assert log.diagnostics[str(folder)]["unassigned"]["by_status"] == {"no_call": 1}
        # nothing assignable at all: refused, naming the row and the remedy
        (tmp_path / "b").mkdir()
        folder2 = _folder(tmp_path / "b", {"2.txt": "Action: Finish\n"})
        with pytest.raises(SelectionLogError) as err:
            read_transcripts(folder2, catalog=catalog, meta=META)
        msg = str(err.value)
        assert f"{folder2}:1:cluster_id: no attempt can be assigned to a cluster" in msg
        assert "set `cluster` in the manifest entry" in msg

    def test_other_cluster_names_are_not_matched(self, catalog, tmp_path):
        folder = _folder(tmp_path, {"1.txt": "Action: geocode_for_trueway_geocoding\n"})
        log = read_transcripts(folder, catalog=catalog, meta=META, cluster="8")
        assert log.data["status"].tolist() == ["unknown_tool"]

    def test_empty_folder(self, catalog, tmp_path):
        folder = _folder(tmp_path, {"readme.md": "x"})
        with pytest.raises(SelectionLogError, match=r"react: no \*\.txt transcript files in this folder"):
            read_transcripts(folder, catalog=catalog, meta=META, cluster="8")

    def test_not_utf8(self, catalog, tmp_path):
        folder = _folder(tmp_path, {"1.txt": "Action: Finish\n"})
        (folder / "2.txt").write_bytes(b"Action: \xff\xfe\n")
        with pytest.raises(SelectionLogError, match=r"react:2:2\.txt: not UTF-8 text \(line 1, byte 9\)"):
            read_transcripts(folder, catalog=catalog, meta=META, cluster="8")


class TestArguments:
    def test_missing_path(self, catalog, tmp_path):
        with pytest.raises(SelectionLogError, match=r"nothing: file or folder not found"):
            read_transcripts(tmp_path / "nothing", catalog=catalog, meta=META, cluster="8")

    def test_unknown_extension(self, catalog, tmp_path):
        path = tmp_path / "t.json"
        path.write_text("[]")
        with pytest.raises(SelectionLogError, match=r"t\.json: expected a folder of ReAct \*\.txt transcripts"):
            read_transcripts(path, catalog=catalog, meta=META, cluster="8")

    def test_unknown_cluster(self, catalog):
        with pytest.raises(SelectionLogError, match=r"base_model:cluster: unknown cluster '11'"):
            read_transcripts(BASE_MODEL, catalog=catalog, meta=META, cluster=11)

    def test_model_required(self, catalog):
        with pytest.raises(SelectionLogError, match=r"base_model:model: expected a non-empty string"):
            read_transcripts(BASE_MODEL, catalog=catalog, meta={"run": 1}, cluster="8")


class TestJsonl:
    def test_response_shapes(self, catalog, tmp_path):
        path = _jsonl(tmp_path, [
            dict(_openai(QUICK), query_id="q1"),
            {"query_id": "q2", "tool_calls": [{"function": {"name": "what_s_language"}}]},
            {"query_id": "q3", "message": {"role": "assistant", "tool_calls": [{"function": {"name": NINJAS}},
                                                                               {"function": {"name": QUICK}}]}},
            dict(_anthropic(TRANSLATE_V3), query_id="q4"),
            {"query_id": "q5", "message": {"function_call": {"name": TRANSLATE_ALL, "arguments": "{}"}}},
            {"query_id": "q6", "output": [{"type": "reasoning"}, {"type": "function_call", "name": WHAT_S}]},
            "",
            {"query_id": "q7", "choices": [{"message": {"content": "It is French.", "tool_calls": []}}]},
            {"query_id": "q8", "content": [{"type": "text", "text": "French."}]},
            {"query_id": "q9", "tool_calls": [{"function": {"name": "guess_language"}}]},
            {"query_id": "q10", "tool_calls": [{"function": {"arguments": "{}"}}]},
            {"query_id": "q11", "error": {"message": "rate limited"}},
        ])
        log = read_transcripts(path, catalog=catalog, meta=META, cluster="8")
        d = log.data
        assert d["query_id"].tolist() == [f"q{i}" for i in range(1, 12)]
        assert d["status"].tolist() == ["ok"] * 6 + ["no_call", "no_call", "unknown_tool", "parse_error",
                                                     "parse_error"]
        assert d["chosen_tool"].tolist()[:6] == [QUICK, WHAT_S, NINJAS, TRANSLATE_V3, TRANSLATE_ALL, WHAT_S]
        assert d["raw_choice"].tolist()[8] == "guess_language"
        assert d["raw_choice"].tolist()[10] == '{"query_id": "q11", "error": {"message": "rate limited"}}'
        assert d["source_row"].tolist() == [1, 2, 3, 4, 5, 6, 8, 9, 10, 11, 12]  # line numbers; line 7 is blank
        assert set(d["source_file"]) == {str(path)}
        diag = log.diagnostics[str(path)]
        assert diag["unresolved"] == Counter({"guess_language": 1}) and diag["format"] == "jsonl"
        assert diag["status"] == Counter({"ok": 6, "no_call": 2, "unknown_tool": 1, "parse_error": 2})

    def test_tools_give_ordering_and_position(self, catalog, tmp_path):
        shown = [NINJAS, "what_s_language", {"type": "function", "function": {"name": QUICK}},
                 {"name": TRANSLATE_ALL}, TRANSLATE_V3]
        path = _jsonl(tmp_path, [
            dict(_anthropic(QUICK), query_id=1, tools=shown),
            dict(_openai(NINJAS), query_id=2, cluster_id=8, tools=shown),
            dict(_openai("nope"), query_id=3, tools=shown),
        ])
        log = read_transcripts(path, catalog=catalog, meta=META)  # cluster from the tools shown
        d = log.data
        assert d["chosen_position"].tolist()[:2] == [3, 1] and pd.isna(d["chosen_position"].iloc[2])
        assert d["ordering"].iloc[0] == "|".join([NINJAS, WHAT_S, QUICK, TRANSLATE_ALL, TRANSLATE_V3])
        assert d["cluster_id"].tolist() == ["8"] * 3 and d["query_id"].tolist() == ["1", "2", "3"]
        assert d["status"].tolist() == ["ok", "ok", "unknown_tool"]

    def test_cluster_from_chosen_tool_and_query_id_default(self, catalog, tmp_path):
        path = _jsonl(tmp_path, [_openai("geocode_for_trueway_geocoding"), _anthropic(WHAT_S)])
        log = read_transcripts(path, catalog=catalog, meta=META)
        assert log.data["cluster_id"].tolist() == ["1", "8"] and log.data["query_id"].tolist() == ["1", "2"]

    def test_rotation_distinguishes_repeated_queries(self, catalog, tmp_path):
        path = _jsonl(tmp_path, [dict(_openai(WHAT_S), query_id="q", rotation=1),
                                 dict(_openai(WHAT_S), query_id="q", rotation=2)])
        log = read_transcripts(path, catalog=catalog, meta=META, cluster="8")
        assert log.data["rotation"].tolist() == [1, 2]
        assert log.data["chosen_position"].tolist() == [1, 5]

    def test_duplicate_attempt(self, catalog, tmp_path):
        path = _jsonl(tmp_path, [dict(_openai(WHAT_S), query_id="q"), dict(_openai(QUICK), query_id="q")])
        with pytest.raises(SelectionLogError, match=r"calls\.jsonl:2:query_id: duplicate attempt"):
            read_transcripts(path, catalog=catalog, meta=META, cluster="8")

    def test_malformed_line(self, catalog, tmp_path):
        path = _jsonl(tmp_path, [_openai(WHAT_S), '{"choices": [', _openai(QUICK)])
        with pytest.raises(SelectionLogError, match=r"calls\.jsonl:2: malformed JSON \(line 2, column \d+\)"):
            read_transcripts(path, catalog=catalog, meta=META, cluster="8")

    def test_line_not_an_object(self, catalog, tmp_path):
        path = _jsonl(tmp_path, [_openai(WHAT_S), '"just text"'])
        with pytest.raises(SelectionLogError, match=r"calls\.jsonl:2: expected a JSON object per line, got str"):
            read_transcripts(path, catalog=catalog, meta=META, cluster="8")

    def test_empty_file(self, catalog, tmp_path):
        path = _jsonl(tmp_path, [""])
        with pytest.raises(SelectionLogError, match=r"calls\.jsonl: the file is empty"):
            read_transcripts(path, catalog=catalog, meta=META, cluster="8")

    def test_unknown_tools_shown(self, catalog, tmp_path):
        path = _jsonl(tmp_path, [dict(_openai(WHAT_S), tools=[WHAT_S, "mystery_tool"])])
        with pytest.raises(SelectionLogError, match=r"calls\.jsonl:1:tools: tool name\(s\) \['mystery_tool'\]"):
            read_transcripts(path, catalog=catalog, meta=META, cluster="8")

    def test_record_cluster_disagrees(self, catalog, tmp_path):
        path = _jsonl(tmp_path, [dict(_openai(WHAT_S), cluster_id="3")])
        with pytest.raises(SelectionLogError, match=r"calls\.jsonl:1:cluster_id: record says cluster '3' but the "
                                                    r"manifest entry says cluster '8'"):
            read_transcripts(path, catalog=catalog, meta=META, cluster="8")

    def test_cluster_needed(self, catalog, tmp_path):
        path = _jsonl(tmp_path, [_openai("nope"), dict(_openai("nope"), cluster_id=8)])
        # issue 36: line 1 (an unknown name, no cluster_id) is kept without a cluster, excluded as unknown_tool;
        # the record's own cluster_id is enough for line 2
        with pytest.warns(ExcludedRowsWarning, match=r"1 of 2 attempt"):
            log = read_transcripts(path, catalog=catalog, meta=META)
        d = log.data
        assert d["cluster_id"].isna().tolist() == [True, False] and d["cluster_id"].iloc[1] == "8"
        assert d["status"].tolist() == ["unknown_tool", "unknown_tool"] and d["raw_choice"].iloc[0] == "nope"


class TestBiasBustersTranscripts:
    """The 500 vendored Qwen3-8B-Base ReAct transcripts (cluster 8, Language Identification)."""

    def test_api_ninjas_share_is_0_006(self, base_model_log):
        d = base_model_log.data
        assert len(d) == 500
        share = (d["chosen_tool"] == NINJAS).sum() / len(d)  # count / all 500 attempts
        assert share == 0.006

    def test_counts(self, base_model_log):
        log = base_model_log
        d = log.data
        assert d["status"].value_counts().to_dict() == {"ok": 495, "unknown_tool": 4, "parse_error": 1}
        assert d["chosen_tool"].value_counts().to_dict() == {WHAT_S: 237, TRANSLATE_ALL: 132, QUICK: 105,
                                                             TRANSLATE_V3: 18, NINJAS: 3}
        diag = log.diagnostics[str(BASE_MODEL)]
        assert diag["unresolved"] == Counter({"detect": 2, "detect_language": 1,
                                              "DetectLanguageForQuickLanguageDetector": 1})
        assert d["query_id"].iloc[0] == "00001" and d["source_row"].iloc[-1] == 500


class TestJsonlRowValidation:
    def test_bad_rotation_is_named(self, catalog, tmp_path):
        path = _jsonl(tmp_path, [dict(_openai(WHAT_S), rotation="first"), dict(_openai(WHAT_S), rotation=9)])
        with pytest.raises(SelectionLogError) as err:
            read_transcripts(path, catalog=catalog, meta=META, cluster="8")
        assert "calls.jsonl:1:rotation: expected an integer, got 'first'" in str(err.value)
