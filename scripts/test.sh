#!/usr/bin/env bash
# The test suite (creates/reuses .venv first). With no arguments (CI) it also runs the linter (ruff, zero findings)
# and builds the documentation site with warnings as errors (about a minute); with arguments only pytest runs
# (e.g. bash scripts/test.sh tests/io). mypy runs inside the suite (tests/test_typing.py).
#
# pytest runs on every core (pytest-xdist: one worker per core, at most 4; a test file stays on one worker, so its
# module fixtures are computed once; PYTEST_XDIST_AUTO_NUM_WORKERS=1 or `-n 0` runs in one process). The tests
# marked `slow` are left out unless a `-m` expression is given: CI runs them in a second, still required step
# (`bash scripts/test.sh -m slow`, see .ci/run); `-m ""` runs everything.
source "$(dirname "$0")/_env.sh"
cd "$ROOT"
MARK=(-m "not slow")
for arg in "$@"; do
  case "$arg" in -m|-m*|--markexpr|--markexpr=*) MARK=() ;; esac
done
python -m pytest -q -n auto --maxprocesses=4 --dist loadfile "${MARK[@]}" "$@"
if [ "$#" -eq 0 ]; then
  python -m ruff check .
  bash scripts/docs.sh
fi
