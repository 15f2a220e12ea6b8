#!/usr/bin/env bash
# The test suite (creates/reuses .venv first). With no arguments (CI) it also builds the documentation site with
# warnings as errors (about a minute); with arguments only pytest runs (e.g. bash scripts/test.sh tests/io).
source "$(dirname "$0")/_env.sh"
cd "$ROOT"
python -m pytest -q "$@"
if [ "$#" -eq 0 ]; then
  bash scripts/docs.sh
fi
