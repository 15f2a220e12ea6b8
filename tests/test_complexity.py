"""Function size in the package (issue 24): no function above cyclomatic complexity 30 (radon) and none above 80
lines of code (non-blank, non-comment lines of the function, its docstring excluded).

A long or branched function is split into named stages (parse -> validate -> build); :data:`EXEMPT` lists what still
exceeds a limit with the reason, and may only shrink (an entry that no longer exceeds fails).
"""
from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

radon_complexity = pytest.importorskip("radon.complexity", reason="radon is a test dependency (requirements.lock)")

PACKAGE_DIR = Path(__file__).resolve().parents[1] / "toolbias_stats"
MAX_COMPLEXITY = 30
MAX_LINES = 80

#: "path/relative/to/package.py:function" -> why it is still above a limit (shrinks only)
EXEMPT: dict[str, str] = {}


def _files():
    return sorted(PACKAGE_DIR.rglob("*.py"))


def _rel(path: Path) -> str:
    return path.relative_to(PACKAGE_DIR).as_posix()


@functools.cache
def complexity_over(limit: int = MAX_COMPLEXITY) -> dict:
    """``{"file.py:function": complexity}`` for every function or method above ``limit`` (radon's count)."""
    out = {}
    for path in _files():
        for block in radon_complexity.cc_visit(path.read_text(encoding="utf-8")):
            items = [block, *getattr(block, "methods", [])] if hasattr(block, "methods") else [block]
            for b in items:
                if b.complexity > limit and not hasattr(b, "methods"):
                    out[f"{_rel(path)}:{b.name}"] = b.complexity
    return out


def lines_of_code(source: str, node: ast.AST) -> int:
    """Non-blank, non-comment lines of a function, its docstring excluded."""
    lines = source.splitlines()
    skip = set()
    body = node.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str):
        skip = set(range(body[0].lineno, body[0].end_lineno + 1))
    return sum(1 for i in range(node.lineno, node.end_lineno + 1)
               if i not in skip and lines[i - 1].strip() and not lines[i - 1].strip().startswith("#"))


@functools.cache
def long_functions(limit: int = MAX_LINES) -> dict:
    """``{"file.py:function": lines of code}`` for every function above ``limit``."""
    out = {}
    for path in _files():
        source = path.read_text(encoding="utf-8")
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = lines_of_code(source, node)
                if n > limit:
                    out[f"{_rel(path)}:{node.name}"] = n
    return out


def test_no_function_above_complexity_30():
    found = {k: v for k, v in complexity_over().items() if k not in EXEMPT}
    assert not found, f"functions above radon complexity {MAX_COMPLEXITY} (split them into stages): {found}"


def test_no_function_above_80_lines():
    found = {k: v for k, v in long_functions().items() if k not in EXEMPT}
    assert not found, f"functions above {MAX_LINES} lines of code (split them into stages): {found}"


def test_exemptions_only_shrink():
    over = set(complexity_over()) | set(long_functions())
    assert not set(EXEMPT) - over, f"no longer above a limit, delete from EXEMPT: {sorted(set(EXEMPT) - over)}"


def test_the_measures_see_a_long_branched_function():
    body = "\n".join(f"    if x == {i}:\n        y = {i}" for i in range(40))
    src = f"def f(x):\n    '''doc\n\n    more'''\n    # comment\n\n{body}\n    return y\n"
    (block,) = radon_complexity.cc_visit(src)
    assert block.complexity == 41
    (node,) = [n for n in ast.walk(ast.parse(src)) if isinstance(n, ast.FunctionDef)]
    assert lines_of_code(src, node) == 1 + 80 + 1
