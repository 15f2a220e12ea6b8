#!/usr/bin/env bash
# The main job: bias report (with the "Explaining selection" section) of the bundled BiasBusters study
# -> reports/biasbusters.html (about a minute; the first run also encodes the queries, ~20 s, cached after)
source "$(dirname "$0")/_env.sh"
cd "$ROOT"
toolbias-stats report data/biasbusters/study.toml --out reports/biasbusters.html --explain "$@"
