"""The issue-13 example of an aggregated log, written as files a team could publish, then analysed by the CLI.

"Edit A chosen 1,101 times, original 59 times" per model and pair of tool descriptions: a catalog of description
pairs (each pair is a cluster of K = 2 tools), one CSV of counts without query ids or positions, and a manifest.
The other three cells are illustrative numbers (this is a worked example of the format, not a study).

Usage::

    .venv/bin/python analyses/aggregated_example.py /tmp/aggregated_example
    .venv/bin/toolbias-stats bias /tmp/aggregated_example/study.toml --seed 1
    .venv/bin/toolbias-stats bias /tmp/aggregated_example/study.toml --seed 1 --json

The script also runs the first command and prints its output.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd

#: (model, pair of descriptions) -> (edit A chosen, original chosen, no tool call)
COUNTS = {
    ("model-x", "pair1"): (1101, 59, 3), ("model-x", "pair2"): (610, 550, 0),
    ("model-y", "pair1"): (700, 460, 12), ("model-y", "pair2"): (590, 570, 1),
}


def write_example(out: Path) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    pairs = []
    for pair in ("pair1", "pair2"):
        pairs += [{"tool_id": f"{pair}_original", "cluster_id": pair, "tool_description": "original description"},
                  {"tool_id": f"{pair}_edit_a", "cluster_id": pair, "tool_description": "edited description (A)"}]
    pd.DataFrame(pairs).to_csv(out / "pairs.csv", index=False)
    cells = []
    for (model, pair), (edit, orig, none) in COUNTS.items():
        cells += [{"model": model, "cluster_id": pair, "status": "ok", "chosen_tool": f"{pair}_edit_a", "count": edit},
                  {"model": model, "cluster_id": pair, "status": "ok", "chosen_tool": f"{pair}_original",
                   "count": orig},
                  {"model": model, "cluster_id": pair, "status": "no_call", "chosen_tool": None, "count": none}]
    pd.DataFrame(cells).to_csv(out / "counts.csv", index=False)
    (out / "study.toml").write_text(
        '# Aggregated counts: one row per model, pair of descriptions and outcome, with a `count` column.\n'
        'name = "description edits (aggregated counts)"\nformat = "table"\ncatalog = "pairs.csv"\n\n'
        '[[logs]]\npath = "counts.csv"\n', encoding="utf-8")
    return out / "study.toml"


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    out = Path(argv[0] if argv else "/tmp/aggregated_example")
    manifest = write_example(out)
    print(f"wrote {manifest}\n")
    print((out / "counts.csv").read_text(encoding="utf-8"))
    from toolbias_stats.cli._commands import main as cli

    return cli(["bias", str(manifest), "--seed", "1"])


if __name__ == "__main__":
    sys.exit(main())
