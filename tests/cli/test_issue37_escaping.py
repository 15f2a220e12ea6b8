"""Issue 37: text from logs never acts on a terminal (``features`` stdout, the notes of ``choice-model`` and
``explain``) and never runs as a spreadsheet formula (``design.csv`` and ``catalog.csv`` written by ``design``).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from toolbias_stats.cli._commands import main

EVIL = "evil\x1b]0;pwn\x07\x1b[2J\u202e"   # OSC title, bell, clear screen, bidi override
FORMULA = '=HYPERLINK("http://evil.example","x")'


def _assert_escaped(text):
    assert "\x1b" not in text and "\x07" not in text and "\u202e" not in text, text[:2000]


def build(tmp_path: Path) -> Path:
    """Two clusters of three tools whose names and descriptions carry escape sequences; model ``EVIL`` picks,
    model ``EVIL + 'b'`` never picks (its group cannot be fitted: a note naming it)."""
    rows, cat = [], ["tool_id,cluster_id,tool_name,description"]
    for c in ("c1", "c2"):
        for t in range(1, 4):
            desc = f"Finds {EVIL} things {t} " + FORMULA.replace('"', '""')
            cat.append(f'{c}t{t}{EVIL},{c},"{EVIL}{c}t{t}","{desc}"')
    for model, status in ((EVIL, "ok"), (EVIL + "b", "no_call")):
        for c in ("c1", "c2"):
            for q in range(6):
                for rot in (1, 2, 3):
                    tool = f"{c}t{(q + rot) % 3 + 1}{EVIL}" if status == "ok" else ""
                    rows.append(f'"{model}",{c},q{q},{rot},{tool},{status}')
    (tmp_path / "catalog.csv").write_text("\n".join(cat) + "\n", encoding="utf-8")
    (tmp_path / "log.csv").write_text("model,cluster_id,query_id,rotation,chosen_tool,status\n" + "\n".join(rows)
                                      + "\n", encoding="utf-8")
    queries = [{"cluster_id": c, "queries": [f"find {EVIL} {i}" for i in range(3)]} for c in ("c1", "c2")]
    (tmp_path / "queries.json").write_text(json.dumps(queries), encoding="utf-8")
    # a feature table whose constant column is named with escape sequences (explain notes it as dropped)
    (tmp_path / "features.csv").write_text(f'tool_id,cluster_id,score,"{EVIL}const"\n' + "".join(
        f'"{c}t{t}{EVIL}",{c},{t * (1 + (c == "c2"))},1\n' for c in ("c1", "c2") for t in range(1, 4)),
        encoding="utf-8")
    (tmp_path / "study.toml").write_text('format = "table"\ncatalog = "catalog.csv"\nqueries = "queries.json"\n'
                                         '[[logs]]\npath = "log.csv"\n', encoding="utf-8")
    return tmp_path


@pytest.fixture
def study(tmp_path):
    return build(tmp_path)


def _run(capsys, *argv):
    code = main([str(a) for a in argv])
    res = capsys.readouterr()
    return code, res.out, res.err


@pytest.mark.parametrize("argv", [
    ["features", "{s}", "--no-similarity"],
    ["explain", "{s}", "--features", "{f}", "--no-ensembles", "--bootstrap", "0", "--permutations", "0"],
    ["choice-model", "{s}", "--by", "model"],
], ids=lambda a: a[0])
def test_no_escape_sequence_reaches_the_terminal(capsys, study, argv):
    paths = {"{s}": study / "study.toml", "{f}": study / "features.csv"}
    code, out, err = _run(capsys, *[paths.get(a, a) for a in argv])
    _assert_escaped(out)
    _assert_escaped(err)
    assert code == 0, err
