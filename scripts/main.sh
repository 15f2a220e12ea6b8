#!/usr/bin/env bash
# The main job: bias report with the "Explaining selection" and Bayesian-model sections, for the bundled
# BiasBusters study -> reports/biasbusters.html (about 1.5 minutes; the first run also encodes the queries,
# ~20 s, cached after)
source "$(dirname "$0")/_env.sh"
cd "$ROOT"
toolbias-stats report data/biasbusters/study.toml --out reports/biasbusters.html --explain --bayes "$@"
