"""Studies for the gate tests: simulated fair and biased choosers written as table studies, and the bundled one."""

from __future__ import annotations

import pytest

from toolbias_stats.simulate import simulate_selection_log


def write_study(d, name, sim_log):
    """A table study (manifest + Parquet log + catalog) in folder ``d``; returns the manifest path."""
    d.mkdir(parents=True, exist_ok=True)
    sim_log.write(d / f"{name}.parquet")
    sim_log.catalog.to_frame()[["tool_id", "cluster_id"]].to_csv(d / f"{name}_catalog.csv", index=False)
    manifest = d / f"{name}.toml"
    manifest.write_text(f'format = "table"\ncatalog = "{name}_catalog.csv"\n[[logs]]\npath = "{name}.parquet"\n')
    return manifest


@pytest.fixture(scope="session")
def studies(tmp_path_factory):
    """``{"fair": manifest, "biased": manifest, "biased_new": manifest}`` (5 clusters x 5 tools x 40 queries)."""
    d = tmp_path_factory.mktemp("gate-studies")
    fair = simulate_selection_log(n_clusters=5, n_queries=40, rng=1)
    biased = simulate_selection_log(n_clusters=5, n_queries=40, position_probs=[3, 1, 1, 1, 1], rng=2)
    return {"fair": write_study(d, "fair", fair.log), "biased": write_study(d, "biased", biased.log),
            "fair_truth": fair, "biased_truth": biased}
