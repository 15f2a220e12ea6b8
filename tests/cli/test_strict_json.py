"""Issue 14: every `--json` output is strict RFC 8259 JSON (null, never NaN/Infinity); JavaScript's JSON.parse
rejected the bundled study's `bias --json` (`corrected_ci: [NaN, NaN]` for clusters)."""

from __future__ import annotations

import json

import pytest

from toolbias_stats.cli._commands import main

STUDY = "data/biasbusters/study.toml"


def _strict(text):
    def refuse(constant):
        raise ValueError(f"non-standard JSON constant {constant}")
    return json.loads(text, parse_constant=refuse)


@pytest.mark.parametrize("argv", [
    ["validate", STUDY, "--json"],
    ["bias", STUDY, "--json", "--bootstrap", "50", "--null", "50"],
    ["bias", STUDY, "--json", "--bootstrap", "0", "--null", "0", "--by", "model,run"],
    ["explain", STUDY, "--json", "--no-ensembles", "--no-similarity"],
], ids=["validate", "bias", "bias-point", "explain"])
def test_json_is_strict(argv, capsys, request):
    argv = [str(request.config.rootpath / a) if a == STUDY else a for a in argv]
    code = main(argv)
    out = capsys.readouterr()
    assert code == 0, out.err
    doc = _strict(out.out)
    assert doc
