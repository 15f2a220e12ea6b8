# Sourced by scripts/main.sh and scripts/test.sh: create or reuse the project's virtual environment.
# Installs torch 2.13.0 (CPU wheel) first so that sentence-transformers does not pull a CUDA build,
# then the exact pins of requirements.lock, then this package in editable mode.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${TOOLBIAS_VENV:-$ROOT/.venv}"
PY="${PYTHON:-$(command -v python3.11 || command -v python3)}"
STAMP="$VENV/.toolbias-$(cat "$ROOT/requirements.lock" "$ROOT/pyproject.toml" | sha256sum | cut -c1-16)"
if [ ! -f "$STAMP" ]; then
  echo "setting up $VENV (one-off, about a minute) ..." >&2
  "$PY" -m venv "$VENV"
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check torch==2.13.0 2>&1 | grep -v "^WARNING: Location" >&2 || true
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check -r "$ROOT/requirements.lock" 2>&1 | grep -v "^WARNING: Location" >&2 || true
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check --no-deps -e "$ROOT" 2>&1 | grep -v "^WARNING: Location" >&2 || true
  # setuptools leaves a build-time egg-info in the source tree; the installed metadata (entry points, the
  # editable marker Inspect uses to namespace the extension's solvers) is the venv's dist-info
  rm -rf "$ROOT/toolbias_stats.egg-info"
  "$VENV/bin/python" -W ignore -c "import torch, sentence_transformers, pymc, xgboost, textstat, toolbias_stats" \
    || { echo "environment check failed: see the pip output above" >&2; exit 1; }
  touch "$STAMP"
fi
export PATH="$VENV/bin:$PATH"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
