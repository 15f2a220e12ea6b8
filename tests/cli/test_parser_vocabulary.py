"""One CLI vocabulary (issue 40): the parser of every command walked and checked.

- every option has help text (deprecated spellings are hidden: their help is ``argparse.SUPPRESS``);
- one option name has one meaning across commands: the same dest, the same kind of action and of value
  (flag / value / file / folder), overlapping choices; the names of :data:`VOCABULARY` fill the dest it declares;
- every older spelling of :data:`ALIASES` parses to the new option's dest with the same value, is hidden from
  ``--help`` and says the new name on stderr; and every hidden option is in the table;
- one ``--seed`` default; ``--center`` / ``--no-center`` one pair with the default stated in each help;
- ``docs/cli.md`` lists the vocabulary and every alias.
"""

from __future__ import annotations

import argparse
import itertools
import json
import re
from collections import defaultdict
from pathlib import Path

import pytest

from toolbias_stats.cli._commands import _COMMANDS, build_parser, main
from toolbias_stats.cli._vocabulary import ALIASES, DEFAULT_SEED, VOCABULARY, _Deprecated

ROOT = Path(__file__).resolve().parents[2]
STUDY = ROOT / "data" / "biasbusters" / "study.toml"

#: The fewest arguments each command parses with (positionals and required options).
MINIMAL = {
    "validate": ["s.toml"], "bias": ["s.toml"], "report": ["s.toml"], "features": ["s.toml"],
    "explain": ["s.toml"], "bayes": ["s.toml"], "shift": ["s.toml"], "subsets": ["p.jsonl"],
    "toolsense score": ["--benchmark", "rrb", "--predictions", "p.jsonl"], "toolsense agreement": ["a.csv"],
    "toolsense baselines": [], "toolsense report": ["--out", "r.html"], "shadow": [], "plan": ["s.toml"],
    "choice": ["s.toml"], "design": ["c.json", "q.json"], "run": ["d", "--base-url", "u", "--model", "m"],
    "choice-model": ["s.toml"], "check": ["s.toml"], "compare": ["a.toml", "b.toml", "--max-shift", "0.1"],
}

#: Older spellings whose name is, elsewhere, a current option of another meaning (or an older spelling of
#: another one): each keeps its own command's old meaning for one release. This list may only shrink.
SHADOWED = {
    ("bayes", "--model"), ("design", "--out"), ("design", "--format"), ("plan", "--format"),
    ("explain", "--features"), ("choice-model", "--position"), ("explain", "--permutations"),
    ("shift", "--permutations"), ("compare", "--permutations"),
}


def _walk(parser, path=()):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _walk(sub, path + (name,))
        elif action.option_strings and not isinstance(action, (argparse._HelpAction, argparse._VersionAction)):
            yield " ".join(path), action


@pytest.fixture(scope="module")
def options():
    return list(_walk(build_parser()))


def _commands(parser):
    out = {}

    def walk(p, path):
        subs = [a for a in p._actions if isinstance(a, argparse._SubParsersAction)]
        if not subs and path:
            out[" ".join(path)] = p
        for a in subs:
            for name, sub in a.choices.items():
                walk(sub, path + (name,))
    walk(parser, ())
    return out


def _name(action) -> str:
    """The option's name: its first long spelling (``--out`` of ``-o/--out``, ``--center`` of the pair)."""
    return next(o for o in action.option_strings if o.startswith("--"))


def _value_kind(action) -> str:
    if action.nargs == 0:
        return "flag"
    metavar = str(action.metavar or "")
    if metavar == "DIR":
        return "folder"
    if metavar == "FILE" or re.fullmatch(r"[A-Z_\[\]=]*\.?[A-Za-z_]*\.[a-z0-9]+|FILE\.[a-z]+", metavar):
        return "file"
    return "value"


def _meaning(action):
    kind = "append" if isinstance(action, argparse._AppendAction) else type(action).__name__.strip("_")
    if action.nargs == 0:
        kind = "flag"   # store_true, store_false and --x/--no-x pairs are one kind: a switch
    return action.dest, kind, _value_kind(action)


def test_the_parser_has_the_commands_and_options(options):
    """Every listed command (toolsense's four sub-commands counted once) and about a hundred option names."""
    commands = {c.split()[0] for c, _ in options}
    assert commands == set(_COMMANDS) and len(commands) == 17
    names = {o for _, a in options if not isinstance(a, _Deprecated) for o in a.option_strings if o.startswith("--")}
    assert 90 <= len(names) <= 130, len(names)


def test_every_option_has_help(options):
    missing = [f"{c} {_name(a)}" for c, a in options
               if not isinstance(a, _Deprecated) and (not a.help or a.help == argparse.SUPPRESS)]
    assert not missing, missing


def test_one_meaning_per_option_name(options):
    """Each visible option name has one (dest, action kind, value kind) across commands, overlapping choices,
    and the dest the vocabulary declares; each dest is filled by one option name."""
    meanings = defaultdict(set)
    choices = defaultdict(list)
    names_of_dest = defaultdict(set)
    for command, action in options:
        if isinstance(action, _Deprecated):
            continue
        for name in action.option_strings:
            meanings[name].add(_meaning(action))
            if action.choices is not None:
                choices[name].append((command, set(action.choices)))
        names_of_dest[action.dest].add(_name(action))
    two = {name: m for name, m in meanings.items() if len(m) > 1}
    assert not two, two
    for name, sets in choices.items():
        for (c1, s1), (c2, s2) in itertools.pairwise(sets):
            assert s1 & s2, f"{name}: {c1} offers {sorted(s1)}, {c2} offers {sorted(s2)}"
    for name, (dest, meaning) in VOCABULARY.items():
        assert meaning and name in meanings, name
        assert {m[0] for m in meanings[name]} == {dest}, name
    assert not {d: n for d, n in names_of_dest.items() if len(n) > 1}


def test_every_shared_option_name_is_declared(options):
    """An option name used by two commands (or toolsense sub-commands) has its one meaning in VOCABULARY."""
    users = defaultdict(set)
    for command, action in options:
        if not isinstance(action, _Deprecated):
            users[_name(action)].add(command)
    shared = {name for name, commands in users.items() if len(commands) > 1}
    assert not shared - set(VOCABULARY), sorted(shared - set(VOCABULARY))


def test_every_hidden_option_is_a_listed_alias(options):
    hidden = {(c, o) for c, a in options if isinstance(a, _Deprecated) for o in a.option_strings}
    listed = {(c, old) for c, table in ALIASES.items() for old in table}
    assert hidden == listed
    for _, a in options:
        if isinstance(a, _Deprecated):
            assert a.help == argparse.SUPPRESS and a.default == argparse.SUPPRESS


def test_shadowed_aliases_only_shrink(options):
    """An older spelling that is a current option of another meaning elsewhere (or two aliases of one name
    with different targets) is listed in SHADOWED; the list may only shrink."""
    current = {}
    for _, a in options:
        if not isinstance(a, _Deprecated):
            for o in a.option_strings:
                current[o] = a.dest
    targets = defaultdict(set)
    for _, a in options:
        if isinstance(a, _Deprecated):
            targets[a.option_strings[0]].add(a.dest)
    shadowed = set()
    for c, a in options:
        if isinstance(a, _Deprecated):
            old = a.option_strings[0]
            if (old in current and current[old] != a.dest) or len(targets[old]) > 1:
                shadowed.add((c, old))
    assert shadowed == SHADOWED


def _value(action):
    if action.choices is not None:
        return str(list(action.choices)[-1])
    if action.type is int:
        return "7"
    if action.type is float:
        return "0.9"
    return "x.nc" if action.dest == "out" else "given"


@pytest.mark.parametrize("command, old, new", [(c, o, n) for c, t in ALIASES.items() for o, n in t.items()])
def test_alias_parses_to_the_new_option(command, old, new, capsys):
    parser = build_parser(command.split()[0])
    sub = _commands(parser)[command]
    target = next(a for a in sub._actions if new in a.option_strings)
    value = _value(target)
    base = command.split() + MINIMAL[command]
    with_new = vars(parser.parse_args(base + [new, value]))
    assert capsys.readouterr().err == ""
    with_old = vars(parser.parse_args(base + [old, value]))
    err = capsys.readouterr().err
    assert with_old.pop("spellings_") == {target.dest: old}
    assert with_old == with_new
    assert err == f"toolbias-stats {command}: note: {old} is deprecated; use {new} (same meaning)\n"
    shown = sub.format_help()
    assert new in shown and not re.search(rf"(?<![\w-]){re.escape(old)}(?![\w-])", shown.split("options:")[1]
                                          .replace(new, "")), f"{old} shown in {command} --help"


def test_one_seed_default(options):
    seeds = {c: a.default for c, a in options if a.dest == "seed" and not isinstance(a, _Deprecated)}
    assert len(seeds) == 17 and set(seeds.values()) == {DEFAULT_SEED}
    assert all(f"default {DEFAULT_SEED}" in a.help for c, a in options if a.dest == "seed")


def test_center_is_one_pair_with_its_default_stated():
    for command, default, said in (("features", False, "--no-center"), ("explain", True, "--center")):
        sub = _commands(build_parser(command))[command]
        action = next(a for a in sub._actions if a.dest == "center")
        assert isinstance(action, argparse.BooleanOptionalAction)
        assert action.option_strings == ["--center", "--no-center"] and action.default is default
        assert f"default here: {said}" in action.help
        parser = build_parser(command)
        assert parser.parse_args([command, "s.toml", "--center"]).center is True
        assert parser.parse_args([command, "s.toml", "--no-center"]).center is False


def test_docs_list_the_vocabulary_and_the_aliases():
    text = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    for name in VOCABULARY:
        assert f"`{name}" in text, name
    for command, table in ALIASES.items():
        for old, new in table.items():
            assert re.search(rf"\| `{re.escape(command)}` \| `{re.escape(old)}` \| `{re.escape(new)}` \|", text), \
                (command, old)


def test_old_and_new_spellings_give_the_same_json(capsys):
    """`bias --bootstrap 30` and `bias --n-resamples 30` print the same JSON (the old one adds one note)."""
    common = ["bias", str(STUDY), "--engine", "pandas", "--null", "30", "--seed", "3", "--json"]
    assert main(common + ["--n-resamples", "30"]) == 0
    new = capsys.readouterr()
    assert main(common + ["--bootstrap", "30"]) == 0
    old = capsys.readouterr()
    assert json.loads(old.out) == json.loads(new.out) and old.out == new.out
    note = "toolbias-stats bias: note: --bootstrap is deprecated; use --n-resamples (same meaning)\n"
    assert new.err == "" and old.err == note


def test_features_json_is_the_table_it_writes(capsys):
    """`features --json` (new: every command whose result is printed has --json) holds the CSV's rows and values."""
    import io

    import pandas as pd

    argv = ["features", str(STUDY), "--no-similarity"]
    assert main(argv) == 0
    csv = pd.read_csv(io.StringIO(capsys.readouterr().out))
    assert main([*argv, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    table = pd.DataFrame(out["tools"])
    assert out["features"] and set(out["features"]) <= set(table.columns) and out["centered"] is False
    assert len(table) == len(csv) == 50 and list(table.columns) == list(csv.columns)
    pd.testing.assert_frame_equal(table[out["features"]], csv[out["features"]], check_dtype=False)
    assert out["reference_date"] == csv["reference_date"].iloc[0] and out["out"] is None


@pytest.mark.parametrize("extra, message", [
    ([], "the report needs an output: --out FILE.html, or --out-dir DIR for --format qmd"),
    (["--out", "r.html", "--out-dir", "d"], "give --out FILE (html) or --out-dir DIR (qmd), not both"),
    (["--format", "html", "--out-dir", "d"], "--out-dir names the folder of --format qmd"),
])
def test_report_output_is_a_file_or_a_folder(extra, message, capsys, tmp_path):
    """`report -o FILE` writes the page, `--out-dir DIR` the Quarto folder; a wrong combination exits 2 before
    any work and writes nothing."""
    assert main(["report", str(STUDY), *extra]) == 2
    assert message in capsys.readouterr().err
    assert not list(tmp_path.iterdir())


def test_report_out_dir_is_the_old_format_qmd_out():
    from toolbias_stats.cli._commands import _report_target

    parser = build_parser("report")
    new = parser.parse_args(["report", "s.toml", "--out-dir", "d"])
    old = parser.parse_args(["report", "s.toml", "--format", "qmd", "--out", "d"])
    _report_target(new)
    _report_target(old)
    assert (new.format, new.target, new.target_option) == ("qmd", "d", "--out-dir")
    assert (old.format, old.target, old.target_option) == ("qmd", "d", "--out")
    html = parser.parse_args(["report", "s.toml", "-o", "r.html"])
    _report_target(html)
    assert (html.format, html.target) == ("html", "r.html")
