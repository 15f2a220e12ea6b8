"""mypy on the package (issue 24): no type error outside the listed debt, and the debt list only shrinks.

``pyproject.toml`` configures mypy and lists the modules that still carry type errors (``ignore_errors``). This
test runs mypy with the same settings but without that list, and requires the modules with errors to be exactly
the listed ones: a new error in any other module fails, and a module that has been fixed must leave the list.
"""
from __future__ import annotations

import sys
import tomllib
from pathlib import Path

import pytest

api = pytest.importorskip("mypy.api", reason="mypy is a test dependency (requirements.lock)")

ROOT = Path(__file__).resolve().parents[1]


def _config():
    cfg = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["mypy"]
    debt, sections = set(), []
    for override in cfg.get("overrides", []):
        modules = override["module"] if isinstance(override["module"], list) else [override["module"]]
        if override.get("ignore_errors"):
            debt |= set(modules)
        else:
            sections.append((modules, {k: v for k, v in override.items() if k != "module"}))
    return cfg, debt, sections


def _ini(cfg, sections) -> str:
    def value(v):
        return str(v) if not isinstance(v, bool) else ("True" if v else "False")

    lines = ["[mypy]"] + [f"{k} = {value(v)}" for k, v in cfg.items() if k not in ("overrides", "files")]
    for modules, opts in sections:
        lines.append(f"[mypy-{','.join(modules)}]")
        lines += [f"{k} = {value(v)}" for k, v in opts.items()]
    return "\n".join(lines) + "\n"


def test_type_errors_only_in_the_listed_debt(tmp_path):
    cfg, debt, sections = _config()
    ini = tmp_path / "mypy.ini"
    ini.write_text(_ini(cfg, sections), encoding="utf-8")
    limit = sys.getrecursionlimit()
    try:
        out, err, status = api.run(["--config-file", str(ini), "--cache-dir", str(tmp_path / "cache"),
                                    "--no-error-summary", str(ROOT / "toolbias_stats")])
    finally:   # mypy raises the interpreter's recursion limit; later tests (deeply nested JSON) depend on it
        sys.setrecursionlimit(limit)
    assert status in (0, 1), err
    with_errors = set()
    for line in out.splitlines():
        path, _, rest = line.partition(":")
        if " error: " not in rest:
            continue
        rel = Path(path).resolve().relative_to(ROOT).with_suffix("")
        parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
        with_errors.add(".".join(parts))
    new = sorted(with_errors - debt)
    fixed = sorted(debt - with_errors)
    assert not new, "type errors in modules outside the debt list:\n" + "\n".join(
        line for line in out.splitlines() if any(m.replace(".", "/") in line for m in new))
    assert not fixed, f"no type errors left in {fixed}: remove them from the debt list in pyproject.toml"
