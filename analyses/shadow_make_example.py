"""Generate the bundled, SIMULATED TOOL-SHADOW example audit in data/shadow/ (deterministic, seed 20251122).

A hypothetical coding-agent harness lists 12 tools (names and descriptions written for this package). For each
turn a task is drawn from hand-written templates, each naming the tools that could serve it (the relevance
labels); whether the harness calls a tool is then simulated from a logistic model with a KNOWN primacy effect:

    logit Pr[called | relevant]   = -0.3 + 1.5 * (1/2 - (position - 1) / 11)    (log OR first vs last = 1.5)
    logit Pr[called | irrelevant] = -4.5

Nothing depends on description length or on the task text (true D = S = 0). Two designs are written:

* ``manifest.json``, ``calls.csv``, ``labels.csv``, ``turns.csv``: 600 turns, one fixed order (the user guide's
  example and the tests);
* ``manifest_reversed.json``, ``calls_ab.csv``, ``labels_ab.csv``, ``turns_ab.csv``: the paper's permuted A/B
  design, 300 tasks each run under the manifest and under its reverse (a ``manifest`` column says which).

Run: ``python analyses/shadow_make_example.py`` (writes data/shadow/, about 1 s).
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np

OUT = Path(__file__).resolve().parents[1] / "data" / "shadow"
SEED = 20251122
POSITION_EFFECT = 1.5

TOOLS = [
    ("read_file", "Read a text file from the workspace and return its contents, optionally a line range."),
    ("search_code", "Search the repository for a regular expression and return matching lines with paths."),
    ("run_shell", ("Run a shell command in the workspace sandbox and return its exit status, stdout and stderr; "
                   "long-running commands are stopped after a timeout.")),
    ("edit_file", "Replace an exact string in a file with new text."),
    ("write_file", "Create or overwrite a file with the given contents."),
    ("list_directory", "List the files and folders under a path, with sizes."),
    ("run_tests", ("Run the project's test suite, or the tests matching a pattern, and summarise failures with "
                   "their tracebacks.")),
    ("git_status", "Show changed, staged and untracked files."),
    ("web_search", "Search the web and return titles, links and snippets of the top results."),
    ("fetch_url", "Download a web page and return it as plain text."),
    ("ask_user", "Ask the user a clarifying question and wait for the answer."),
    ("todo_write", "Record or update the task list for the current session."),
]

TASKS = [
    ("Show me what is in {f}.", ["read_file", "run_shell"]),
    ("Where is the function {fn} defined?", ["search_code", "run_shell"]),
    ("Find every call to {fn} in the code base.", ["search_code", "run_shell"]),
    ("Rename the variable {v} to {w} in {f}.", ["edit_file", "write_file"]),
    ("Create a new file {f} with a hello-world example.", ["write_file", "run_shell"]),
    ("Which files are in the {d} folder?", ["list_directory", "run_shell"]),
    ("Do the tests in {f} still pass?", ["run_tests", "run_shell"]),
    ("What have I changed since the last commit?", ["git_status", "run_shell"]),
    ("Look up the latest release notes of {lib}.", ["web_search", "fetch_url"]),
    ("Summarise the documentation page {url}.", ["fetch_url", "web_search"]),
    ("I am not sure which database to use here; help me decide.", ["ask_user", "web_search"]),
    ("Plan the steps to add logging to {f}.", ["todo_write", "read_file"]),
]
FILES = ["src/app.py", "src/utils/io.py", "tests/test_api.py", "README.md", "setup.cfg", "src/models/user.py"]
FUNCS = ["parse_config", "load_user", "render_page", "retry_request", "compute_total"]
DIRS = ["src", "tests", "docs", "scripts"]
LIBS = ["numpy", "pandas", "requests", "fastapi"]
URLS = ["https://docs.python.org/3/library/csv.html", "https://peps.python.org/pep-0008/"]


def _task(gen):
    k = int(gen.integers(len(TASKS)))
    template, relevant = TASKS[k]
    text = template.format(f=gen.choice(FILES), fn=gen.choice(FUNCS), v="tmp", w="result", d=gen.choice(DIRS),
                           lib=gen.choice(LIBS), url=gen.choice(URLS))
    return text, relevant


def _calls(gen, order, relevant):
    n = len(order)
    out = {}
    for pos, (name, _) in enumerate(order, start=1):
        eta = -0.3 + POSITION_EFFECT * (0.5 - (pos - 1) / (n - 1)) if name in relevant else -4.5
        out[name] = int(gen.random() < 1 / (1 + np.exp(-eta)))
    return out


def _write(path, header, rows):
    with open(path, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh, lineterminator="\n")
        w.writerow(header)
        w.writerows(rows)


def main():
    gen = np.random.default_rng(SEED)
    OUT.mkdir(parents=True, exist_ok=True)
    manifest = [{"name": n, "description": d} for n, d in TOOLS]
    (OUT / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    (OUT / "manifest_reversed.json").write_text(json.dumps(manifest[::-1], indent=2) + "\n", encoding="utf-8")
    # fixed order, 600 turns
    calls, labels, turns = [], [], []
    for t in range(1, 601):
        tid = f"t{t:04d}"
        text, relevant = _task(gen)
        called = _calls(gen, TOOLS, relevant)
        turns.append((tid, text))
        calls += [(tid, n, called[n]) for n, _ in TOOLS]
        labels += [(tid, n, int(n in relevant)) for n, _ in TOOLS]
    _write(OUT / "calls.csv", ("turn_id", "tool_name", "called"), calls)
    _write(OUT / "labels.csv", ("turn_id", "tool_name", "relevant"), labels)
    _write(OUT / "turns.csv", ("turn_id", "task"), turns)
    # permuted A/B: every task under M and under M' (reversed)
    calls, labels, turns = [], [], []
    for t in range(1, 301):
        text, relevant = _task(gen)
        for mname, order in (("manifest.json", TOOLS), ("manifest_reversed.json", TOOLS[::-1])):
            tid = f"ab{t:04d}{'M' if mname == 'manifest.json' else 'R'}"
            called = _calls(gen, order, relevant)
            turns.append((tid, text))
            calls += [(tid, n, called[n], mname) for n, _ in order]
            labels += [(tid, n, int(n in relevant)) for n, _ in order]
    _write(OUT / "calls_ab.csv", ("turn_id", "tool_name", "called", "manifest"), calls)
    _write(OUT / "labels_ab.csv", ("turn_id", "tool_name", "relevant"), labels)
    _write(OUT / "turns_ab.csv", ("turn_id", "task"), turns)
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
