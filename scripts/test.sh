#!/usr/bin/env bash
# The test suite (creates/reuses .venv first). With no arguments (CI) it also runs the linter (ruff, zero findings)
# and builds the documentation site with warnings as errors (about a minute); with arguments only pytest runs
# (e.g. bash scripts/test.sh tests/io). mypy runs inside the suite (tests/test_typing.py).
source "$(dirname "$0")/_env.sh"
cd "$ROOT"
python -m pytest -q "$@"
if [ "$#" -eq 0 ]; then
  python -m ruff check .
  bash scripts/docs.sh
fi
