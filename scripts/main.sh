#!/usr/bin/env bash
# The main job: bias report with the "Explaining selection" and Bayesian-model sections, for the bundled
# BiasBusters study -> reports/biasbusters.html (about a minute expected on 2 idle cores; the sentence
# embeddings of the study ship in data/embeddings, so even the first run encodes nothing). With its output
# redirected it prints one line per stage (elapsed seconds) on stderr. Timings: benchmarks/bench_main.py.
source "$(dirname "$0")/_env.sh"
cd "$ROOT"
toolbias-stats report data/biasbusters/study.toml --out reports/biasbusters.html --explain --bayes "$@"
