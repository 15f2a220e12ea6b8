"""Issue 37: ``toolbias-stats bias`` counts by its ``--by`` columns only (``read_study(..., count_by=...)``).

Its output must be byte for byte what counting by every design column gives, on both engines and for every
``--by`` (a design column included), and a ``--by`` naming no column must fail with the same message. The other
commands read every column.
"""

from __future__ import annotations

import numpy as np
import pytest

import toolbias_stats.io
from toolbias_stats.cli._commands import main
from toolbias_stats.simulate import simulate_selection_log

DESIGN = ["design0", "design1", "prompt"]


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    """A Parquet log with two integer design columns and a text one, random per row."""
    d = tmp_path_factory.mktemp("count_by")
    sim = simulate_selection_log(n_clusters=3, n_queries=10, n_runs=2, tool_probs=[5, 3, 1, 1, 1],
                                 position_probs=[3, 2, 1, 1, 1], p_no_call=0.08, rng=7)
    frame = sim.log.data.drop(columns=["source_file", "source_row"]).copy()
    rng = np.random.default_rng(3)
    frame["design0"] = rng.integers(0, 3, len(frame))
    frame["design1"] = rng.integers(0, 3, len(frame))
    frame["prompt"] = rng.choice(["long", "short"], len(frame))
    frame.to_parquet(d / "log.parquet")
    sim.log.catalog.table.to_csv(d / "catalog.csv", index=False)
    (d / "study.toml").write_text('name = "design"\nformat = "table"\ncatalog = "catalog.csv"\n\n[[logs]]\n'
                                  f'path = "log.parquet"\ndesign = {DESIGN!r}\n'.replace("'", '"'), encoding="utf-8")
    return d / "study.toml"


def _run(capsys, argv):
    code = main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.fixture()
def calls(monkeypatch):
    """The ``count_by`` of every read_study call; ``calls.full = True`` drops it (every column, as before)."""
    real = toolbias_stats.io.read_study
    seen: list = []

    def spy(*args, count_by=None, **kw):
        seen.append(count_by)
        return real(*args, count_by=None if spy.full else count_by, **kw)

    spy.full = False
    spy.seen = seen
    monkeypatch.setattr(toolbias_stats.io, "read_study", spy)
    return spy


@pytest.mark.parametrize("engine", ["duckdb", "pandas"])
@pytest.mark.parametrize("by", ["model", "model,design0", "prompt, model", "design1"])
@pytest.mark.parametrize("resamples", ["0", "40"])
def test_bias_output_is_unchanged(study, capsys, calls, engine, by, resamples):
    argv = ["bias", str(study), "--by", by, "--engine", engine, "--n-resamples", resamples, "--null", "30",
            "--json"]
    narrowed = _run(capsys, argv)
    calls.full = True
    full = _run(capsys, argv)
    assert narrowed[0] == 0 and narrowed == full
    assert calls.seen == [[c.strip() for c in by.split(",")], [c.strip() for c in by.split(",")]]


def test_bias_text_and_a_bad_by(study, capsys, calls):
    argv = ["bias", str(study), "--n-resamples", "0", "--null", "20"]
    narrowed = _run(capsys, argv)
    calls.full = True
    assert narrowed[0] == 0 and narrowed == _run(capsys, argv)
    calls.full = False
    bad = ["bias", str(study), "--by", "model,desing0", "--n-resamples", "0", "--null", "20", "--json"]
    narrowed = _run(capsys, bad)
    calls.full = True
    assert narrowed[0] == 2 and narrowed == _run(capsys, bad)
    assert "desing0" in narrowed[2] and "design1" in narrowed[2]   # the full list of columns


def test_other_commands_read_every_column(study, capsys, calls):
    code, out, _ = _run(capsys, ["validate", str(study), "--json"])
    assert code == 0 and calls.seen == [None]
    for c in DESIGN:
        assert f'"{c}"' in out
