"""Command-line interface ``toolbias-stats`` (wiring only: parse arguments, call the API, print)."""
