"""Issue 35: one declared study design (unit, replicates, factors, strata) on SelectionLog and SelectionCounts."""

import warnings

import numpy as np
import pytest

import toolbias_stats as tbs
from toolbias_stats.cli._commands import main
from toolbias_stats.exceptions import ManifestError
from toolbias_stats.io import SelectionLog, Study
from toolbias_stats.io._selection_log import ERR_DESIGN_COLUMN, DeclaredDesign
from toolbias_stats.simulate import simulate_selection_log

DATA = tbs.datasets.path("experiments/study.toml").parent


def small_log():
    return simulate_selection_log(n_clusters=2, n_queries=6, rng=0).log


def with_attempts(log, n=2):
    """The log's rows sent ``n`` times: the API readers number such repeats in an ``attempt`` column."""
    frame = log.to_frame()
    import pandas as pd

    parts = [frame.assign(attempt=a) for a in range(1, n + 1)]
    out = pd.concat(parts, ignore_index=True)
    out["source_row"] = np.arange(1, len(out) + 1)
    return SelectionLog.from_frame(out, log.catalog)


class TestStudyDesign:
    def test_defaults_from_the_columns(self):
        d = DeclaredDesign.from_columns(["model", "run", "condition", "attempt", "temperature", "epoch"])
        assert d.unit == "query_id" and d.source == "columns"
        assert d.replicates == ("run", "attempt")
        assert d.factors == ("model", "condition", "temperature", "epoch")   # an epoch is declared, not guessed
        assert d.strata == ("cluster_id", "n_candidates")

    def test_declaration_moves_columns(self):
        d = DeclaredDesign.from_columns(["model", "run", "epoch"],
                                        declared={"replicates": ["epoch"], "factors": ["run"]})
        assert d.replicates == ("epoch",) and d.factors == ("model", "run") and d.source == "declared"

    @pytest.mark.parametrize("declared, text", [
        ({"replicates": ["seed"]}, ERR_DESIGN_COLUMN.format(key="replicates", names=["seed"], verb="is",
                                                            cols=["model", "run"])),
        ({"levels": ["run"]}, "the design takes the keys ['unit', 'replicates', 'factors', 'strata']; got ['levels']"),
        ({"replicates": "run"}, "`replicates` must be a list of column names; got 'run' instead."),
        ({"replicates": ["run"], "factors": ["run"]}, "['run'] cannot be both a replicate and a factor"),
        ({"unit": "run"}, "`unit` must be one of ['query_id', 'query', 'item']; got 'run' instead."),
    ])
    def test_bad_declarations_are_named(self, declared, text):
        with pytest.raises(ValueError) as exc:
            DeclaredDesign.from_columns(["model", "run"], declared=declared)
        assert text in str(exc.value)

    def test_describe_and_dict(self):
        d = DeclaredDesign.from_columns(["model", "run"])
        assert d.describe(12) == ("unit query_id (12 units); replicates: run; factors: model; "
                                  "strata: cluster_id, n_candidates")
        assert d.to_dict() == {"unit": "query_id", "replicates": ["run"], "factors": ["model"],
                               "strata": ["cluster_id", "n_candidates"], "source": "columns"}


class TestSelectionLogDesign:
    def test_attempt_column_is_a_replicate(self):
        log = with_attempts(small_log())
        assert log.design.replicates == ("run", "attempt") and "attempt" not in log.design.factors
        assert log.n_units == 12
        assert log.counts().design == log.design and log.counts().n_units == 12

    def test_with_design_travels_with_the_log(self):
        log = small_log().with_design(factors=["run"])
        assert log.design.factors == ("model", "run", "condition") and log.design.replicates == ()
        assert log.aggregate().design == log.design
        run2 = SelectionLog.from_frame(log.to_frame().assign(run=2), log.catalog)
        assert SelectionLog.concat([run2, log]).design == log.design
        counts = log.counts()
        assert counts.design == log.design
        assert counts.with_design(replicates=["run"]).design.replicates == ("run",)
        assert counts.collapse("cluster").design == log.design

    def test_with_design_checks_at_once(self):
        with pytest.raises(ValueError, match="is not a design column"):
            small_log().with_design(replicates=["attempt"])


MANIFEST = """
name = "design test"
format = "biasbusters"
catalog = "{d}/../biasbusters/clusters.json"
queries = "{d}/../biasbusters/queries.json"
{design}
[[logs]]
path = "{d}/logs/sim_b_base.json"
model = "SIMULATED-B"
run = 1
condition = "base"
temperature = 0.5
"""


class TestManifestDesign:
    def read(self, tmp_path, design):
        p = tmp_path / "study.toml"
        p.write_text(MANIFEST.format(d=DATA, design=design))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return tbs.read_study(p, engine="pandas")

    def test_design_table_declares(self, tmp_path):
        study = self.read(tmp_path, '[design]\nreplicates = ["temperature"]\n')
        assert study.log.design.replicates == ("run", "temperature")
        assert study.counts.design.replicates == ("run", "temperature")

    def test_without_design_table(self, tmp_path):
        study = self.read(tmp_path, "")
        assert study.counts.design.factors == ("model", "condition", "temperature")

    def test_unknown_key(self, tmp_path):
        with pytest.raises(ManifestError, match="design:levels: unknown design key"):
            self.read(tmp_path, '[design]\nlevels = ["temperature"]\n')

    def test_unknown_column(self, tmp_path):
        with pytest.raises(ManifestError, match=r"study.toml:design: `replicates` names \['seed'\], which is not a "
                                                r"design column of this log; the design columns are \['model', 'run'"):
            self.read(tmp_path, '[design]\nreplicates = ["seed"]\n')

    def test_validate_prints_the_design(self, tmp_path, capsys):
        p = tmp_path / "study.toml"
        p.write_text(MANIFEST.format(d=DATA, design='[design]\nreplicates = ["temperature"]\n'))
        assert main(["validate", str(p)]) == 0
        out = capsys.readouterr().out
        assert "design: unit query_id (1000 units); replicates: run, temperature; factors: model, condition" in out

    def test_study_from_a_log(self):
        study = Study(with_attempts(small_log()), settings={"design": {"factors": ["attempt"]}})
        assert study.log.design.factors == ("model", "condition", "attempt")
        assert study.counts.design.factors == ("model", "condition", "attempt")
