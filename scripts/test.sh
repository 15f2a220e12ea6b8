#!/usr/bin/env bash
# The test suite (creates/reuses .venv first).
source "$(dirname "$0")/_env.sh"
cd "$ROOT"
python -m pytest -q "$@"
