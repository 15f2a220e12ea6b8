#!/usr/bin/env bash
# The main job: bias report of the bundled BiasBusters study -> reports/biasbusters.html
source "$(dirname "$0")/_env.sh"
cd "$ROOT"
toolbias-stats report data/biasbusters/study.toml --out reports/biasbusters.html "$@"
