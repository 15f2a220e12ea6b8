"""Issue 37: a batch whose clusters are inferred is decoded once (the offered pass hands its columns to the rows).

``validate`` on 100,000 OpenAI batch requests decoded both files twice: once for the tool lists offered (cluster
inference), once for the rows. The offered pass now keeps its columns for the row pass, which takes them only if
both files are unchanged; the log is the same as one read without the hand-off.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import toolbias_stats as tbs
from toolbias_stats.io.readers import _toolcalls

FIX = Path(__file__).resolve().parent / "fixtures" / "api_logs" / "openai"
MANIFEST = ('name = "h"\n[[logs]]\nformat = "openai"\npath = "in.jsonl"\nresponses = "out.jsonl"\n'
            'model = "gpt-4o-mini"\n')


def _study(tmp_path):
    shutil.copy(FIX / "chat_batch_input.jsonl", tmp_path / "in.jsonl")
    shutil.copy(FIX / "chat_batch_output.jsonl", tmp_path / "out.jsonl")
    (tmp_path / "study.toml").write_text(MANIFEST, encoding="utf-8")
    return tmp_path / "study.toml"


def _counting(monkeypatch):
    calls = []
    real = _toolcalls.read_batch_columns

    def counted(*a, **k):
        calls.append(a[0])
        return real(*a, **k)

    monkeypatch.setattr(_toolcalls, "read_batch_columns", counted)
    return calls


def test_inferred_batch_is_decoded_once_and_reads_the_same(tmp_path, monkeypatch):
    study = _study(tmp_path)
    calls = _counting(monkeypatch)
    log = tbs.read_study(study).log
    assert len(calls) == 1
    assert not _toolcalls._HANDOFF                          # taken, not kept
    # the same rows as with the hand-off emptied before the row pass
    monkeypatch.setattr(_toolcalls, "_HANDOFF", _NoKeep())
    again = tbs.read_study(study).log
    assert len(calls) == 3
    assert log.data.equals(again.data)


def test_a_changed_file_is_read_again(tmp_path, monkeypatch):
    from toolbias_stats.io.readers import openai

    _study(tmp_path)
    src, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    calls = _counting(monkeypatch)
    assert openai.offered_openai(src, out) and len(_toolcalls._HANDOFF) == 1
    first = openai.read_openai(src, responses=out, meta={"model": "gpt-4o-mini"})
    assert len(calls) == 1                                  # the rows took the offered pass's columns
    openai.offered_openai(src, out)
    with out.open("a", encoding="utf-8") as f:
        f.write("\n")                                       # the same results, another size: not what was handed off
    second = openai.read_openai(src, responses=out, meta={"model": "gpt-4o-mini"})
    assert len(calls) == 3
    assert first.data.equals(second.data)


class _NoKeep(dict):
    def __setitem__(self, key, value):                      # the offered pass keeps nothing
        pass
