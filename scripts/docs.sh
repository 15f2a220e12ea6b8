#!/usr/bin/env bash
# Build the documentation site: bash scripts/docs.sh  ->  docs/_build/html/index.html
# Warnings are errors (-W --keep-going: every warning is listed, then the build fails). Needs no network: the
# examples gallery runs offline on bundled and simulated data. Extra arguments go to sphinx-build
# (e.g. -E to rebuild everything).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/_env.sh"
cd "$ROOT"
if ! python -c "import sphinx, numpydoc, myst_parser, pydata_sphinx_theme, sphinx_gallery" 2>/dev/null; then
  echo "installing the documentation tools (pip install -e '.[docs]' pins) ..." >&2
  python -m pip install -q --disable-pip-version-check "sphinx==9.0.4" "pydata-sphinx-theme==0.24.0" \
    "numpydoc==1.11.0" "myst-parser==5.2.0" "sphinx-gallery==0.22.1"
fi
export MPLBACKEND=Agg PYTHONWARNINGS="${PYTHONWARNINGS:-ignore::DeprecationWarning}"
rm -rf docs/generated docs/auto_examples  # generated sources: always fresh
exec python -m sphinx -b html -W --keep-going -j 1 -q "$@" docs docs/_build/html
