"""One result contract (issue 24): every exported result type builds from small real data and implements

- ``to_frame()``: a tidy :class:`pandas.DataFrame` (string column names, unique, no column MultiIndex);
- ``to_dict()``: a mapping with string keys that is strict JSON (``json.dumps(..., allow_nan=False)``);
- ``_repr_html_()``: a compact, escaped HTML fragment (the headline table of ``toolbias_stats._display``);
- ``__str__``: the text the command line prints (no raw control characters);
- ``__repr__``: that text in short, bounded (at most 2,000 characters; the shared ``TextReprMixin.__repr__``);
- ``summary``: one sense only (see :data:`SUMMARY_SENSE`).

The exported classes are discovered from ``__all__`` of the package and of every subpackage; each must be listed
once, either in :data:`BUILDERS` (results: the full contract), :data:`COMPONENTS` (parts of a result, reached from
a built result: strict-JSON ``to_dict``) or :data:`NOT_RESULTS` (inputs and containers, with the reason). A new
exported class that is in none of them fails :func:`test_every_exported_class_is_classified`.
"""

from __future__ import annotations

import atexit
import dataclasses
import functools
import importlib
import inspect
import json
import pkgutil
import re
import shutil
import warnings
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from tiny_study import MALICIOUS_TOOL, tiny_study

import toolbias_stats as tbs

ROOT = Path(__file__).resolve().parent.parent
BB = ROOT / "data" / "biasbusters"
EXP = ROOT / "data" / "experiments"


def _quiet(fn):
    """Builders run with warnings silenced (small data warns on purpose) and are cached (built once)."""
    @functools.wraps(fn)
    @functools.cache
    def wrapper():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return fn()
    return wrapper


# -- small real inputs -----------------------------------------------------------------------------------------
@_quiet
def _tiny():
    return tiny_study()


@_quiet
def _authors():
    return tbs.read_feature_table(BB / "authors_features.json")


@_quiet
def _experiments_log():
    return tbs.read_study(EXP / "study.toml").log


@_quiet
def _choice_sim():
    from toolbias_stats.choicemodel import simulate_logit_log

    feats = np.array([[-1.5, 0.3], [-1.0, -1.2], [-0.5, 0.8], [0.0, -0.4], [0.3, 1.1], [0.6, -0.9]])
    log = simulate_logit_log(n_tools=6, set_size=3, n_queries=80, n_lists=2, worths=np.zeros(6), features=feats,
                              beta=np.array([0.6, 0.0]), rng=11)
    table = pd.DataFrame({"tool_id": [f"t{i + 1}" for i in range(6)], "cluster_id": "all",
                          "api_index": range(1, 7), "f1": feats[:, 0], "f2": feats[:, 1]})
    return log, tbs.ToolFeatures(table=table, feature_names=("f1", "f2"))


def _tool(name):
    return {"tool_name": name, "tool_title": name.split("&&")[0], "tool_description": f"does {name}",
            "api_title": name.split("&&")[-1], "api_description": "None"}


@_quiet
def _rrb():
    """A six-query RRB-style benchmark and constrained/free predictions (as in tests/toolsense/conftest.py)."""
    import tempfile

    from toolbias_stats import toolsense as ts

    queries = {"e1": ("easy", ["a1&&go"]), "e2": ("easy", ["b1&&go"]), "m1": ("medium", ["c1&&go", "c2&&go"]),
               "m2": ("medium", ["d1&&go", "d2&&go"]), "h1": ("hard", ["e1&&go", "e2&&go", "e3&&go"]),
               "h2": ("hard", ["f1&&go", "f2&&go", "f3&&go"])}
    distract = ["x&&go", "y&&go", MALICIOUS_TOOL + "&&go"]
    preds = {"e1": (["a1&&go", "x&&go"], ["x&&go", "a1&&go"]), "e2": (["x&&go", "b1&&go"], ["x&&go", "y&&go"]),
             "m1": (["c2&&go", "x&&go"], ["c1&&go", "x&&go"]), "m2": (["x&&go", "y&&go"], ["x&&go", "y&&go"]),
             "h1": (["e3&&go", "x&&go"], ["e3&&go", "e1&&go"]), "h2": (["x&&go", "f2&&go"], ["x&&go", "y&&go"])}
    folder = Path(tempfile.mkdtemp(prefix="tbs-contract-"))
    atexit.register(shutil.rmtree, folder, True)
    bench_recs = [{"sample_id": s, "query": f"query {s}", "complexity": tier,
                   "tool": _tool(ans[0]) if tier == "easy" else [_tool(a) for a in ans],
                   "analyzed_tools": [_tool(a) for a in ans + distract]} for s, (tier, ans) in queries.items()]
    (folder / "rrb.jsonl").write_text("".join(json.dumps(r) + "\n" for r in bench_recs), encoding="utf-8")
    (folder / "pred.jsonl").write_text("".join(json.dumps({"sample_id": s, "constrained": c, "free": f}) + "\n"
                                               for s, (c, f) in preds.items()), encoding="utf-8")
    bench = ts.read_rrb(folder / "rrb.jsonl")
    return bench, ts.read_rrb_predictions(folder / "pred.jsonl", bench)


class _LetterEncoder:
    """Bag-of-letters vectors: deterministic and instant (no model download)."""

    def encode(self, texts):
        out = np.zeros((len(texts), 26))
        for i, t in enumerate(texts):
            for ch in t.lower():
                if "a" <= ch <= "z":
                    out[i, ord(ch) - 97] += 1
        return out + 1e-9


# -- builders: one real instance per result type --------------------------------------------------------------
@_quiet
def build_bias():
    return tbs.selection_bias(_tiny().log, by="model", n_resamples=50, n_null=50, rng=1)


@_quiet
def build_calibrated_tv():
    gen = np.random.default_rng(0)
    counts = [gen.multinomial(40, [0.4, 0.3, 0.3], size=2) for _ in range(3)]
    boots = [gen.multinomial(40, [0.4, 0.3, 0.3], size=(30, 2)).reshape(30, 2, 3) for _ in range(3)]
    boots = [b.sum(axis=1) for b in boots]
    return tbs.calibrated_mean_tv([c.sum(axis=0) for c in counts], boots)


@_quiet
def build_correlation():
    return tbs.models.feature_correlations(_authors())


@_quiet
def build_ols():
    return tbs.models.ols_fit(_authors())


@_quiet
def build_ensemble():
    return tbs.models.ensemble_cv(_authors(), schemes=("loco",), n_splits=2, n_repeats=1, n_estimators=5,
                                  n_permutations=1, rng=0)


@_quiet
def build_alignment():
    return tbs.models.model_alignment(_authors(), n_resamples=20, rng=0)


@_quiet
def build_explain():
    return tbs.explain_selection(_authors(), n_estimators=5, n_repeats=1, n_permutations=1, n_resamples=20, rng=0)


@_quiet
def build_choice_explanation():
    log, feats = _choice_sim()
    rates = tbs.selection_bias(log, by="model", n_resamples=0, n_null=0)
    return tbs.explain_selection(feats, rates, ensembles=False, n_resamples=20, rng=3, log=log).choice


@_quiet
def build_bayes():
    from toolbias_stats.models import simulate_bayes_log

    alpha = np.array([[[1.0, 0.0, -1.0], [0.0, 0.5, -0.5]]])
    beta = np.array([[1.0, 0.0, -1.0]])
    log = simulate_bayes_log(alpha, beta, n_per_ordering=20, rng=1)
    return tbs.fit_bayes(log, model="v1", draws=50, tune=50, chains=1, cores=1, sampler="pymc", rng=1)


@_quiet
def build_shift():
    return tbs.selection_shift(_experiments_log(), n_resamples=20, n_permutations=20, rng=0)


@_quiet
def build_trend():
    res = tbs.selection_shift(_experiments_log(), between="temperature", base=0.5, n_resamples=20,
                              n_permutations=20, rng=0)
    assert res.trends, "the temperature sweep gives a trend"
    return res.trends[0]


@_quiet
def build_subsets():
    return tbs.subset_selection_metrics(EXP / "mitigation" / "predictions.jsonl", EXP / "mitigation" / "truth.json",
                                        n_resamples=20, rng=0)


@_quiet
def build_mitigation():
    from toolbias_stats.experiments import mitigation_distribution

    return mitigation_distribution(EXP / "mitigation" / "predictions.jsonl", EXP / "mitigation" / "truth.json",
                                   n_resamples=20, rng=0)


@_quiet
def build_toolcount():
    from toolbias_stats.experiments import tool_count_bias

    return tool_count_bias(tbs.read_study(EXP / "toolcount.toml").log)


@_quiet
def build_components():
    return tbs.variance_components(_tiny().log, n_resamples=20, rng=0)


@_quiet
def build_plan():
    return tbs.plan_study(_tiny().log, target=0.2, n_draws=100, rng=0)


@_quiet
def _choice_log():
    return tbs.read_choice_study(ROOT / "data" / "choice" / "choice_study.toml")


@_quiet
def build_option_position():
    return tbs.option_position_bias(_choice_log(), n_resamples=20, n_null=20, rng=0)


@_quiet
def build_gold_position():
    return tbs.accuracy_by_gold_position(_choice_log(), n_resamples=20, rng=0)


@_quiet
def build_judge():
    return tbs.judge_consistency(_choice_log(), n_resamples=20, rng=0)


@_quiet
def build_choice_model():
    log, _ = _choice_sim()
    return tbs.choice_model(log, n_resamples=0, rng=0)


@_quiet
def build_shadow():
    from toolbias_stats.shadow import simulate_audit

    return tbs.tool_shadow(simulate_audit(120, 6, rng=1), encoder=False, n_resamples=20, n_weight_draws=20, rng=1)


@_quiet
def build_ab():
    return tbs.shadow.ab_primary_outcome([1] * 6 + [0] * 2 + [1, 0], [0] * 6 + [1] * 2 + [1, 0])


@_quiet
def build_calibration():
    return tbs.shadow.calibration_in_the_large([55.0, 61, 70, 48, 66], [50.0, 58, 72, 49, 60])


@_quiet
def build_discrimination():
    gen = np.random.default_rng(0)
    y = gen.integers(0, 2, 60)
    return tbs.shadow.discrimination_auc(np.round(gen.normal(y * 0.8, 1.0), 1), y)


@_quiet
def build_retrieval():
    bench, preds = _rrb()
    return tbs.toolsense.retrieval_recall(bench, {"m": preds}, k=(1, 2), n_resamples=20, rng=0)


@_quiet
def build_comparison():
    bench, preds = _rrb()
    other = preds.assign(constrained=preds["free"])          # a second configuration: free answers as constrained
    res = tbs.toolsense.retrieval_recall(bench, {"m": preds, "n": other}, k=(1, 2), n_resamples=20, rng=0)
    return tbs.toolsense.compare_configurations(res, k=[1, 2])


@_quiet
def build_probe():
    from toolbias_stats import toolsense as ts

    qa = ts.read_probe("qa")
    return ts.probe_accuracy(qa, pd.DataFrame({"id": qa.items["id"], "answer": "Yes"}))


@_quiet
def build_probe_correlation():
    x = [0.55, 0.33, 0.23, 0.41, 0.29, 0.73, 0.75, 0.62, 0.40, 0.31, 0.45, 0.50]
    y = [0.44, 0.43, 0.27, 0.43, 0.31, 0.55, 0.48, 0.52, 0.37, 0.30, 0.40, 0.47]
    return tbs.toolsense.probe_recall_correlation(x, y, labels=[f"<b>m{i}</b>" for i in range(12)])


@_quiet
def build_agreement():
    recs = [{"item_id": f"u{u}", "rater": f"r{r}", "label": str((u + (r == 2 and u % 3 == 0)) % 3),
             "tier": "easy" if u < 6 else "hard"} for u in range(12) for r in range(3)]
    return tbs.toolsense.agreement(pd.DataFrame(recs), by="tier", n_resamples=20, rng=0)


@_quiet
def build_baselines():
    bench, _ = _rrb()
    return tbs.toolsense.retrieval_baselines(bench, encoder=_LetterEncoder(), k=(1, 2), n_resamples=20, rng=0)


@_quiet
def build_correct_set():
    bench, preds = _rrb()
    return tbs.toolsense.correct_set_bias(bench, preds, n_resamples=20, n_null=20, rng=0)


@_quiet
def build_run():
    """A real (tiny) run: 2 clusters x 2 queries against the fake OpenAI-compatible server on 127.0.0.1."""
    import os
    import tempfile

    from fake_openai_server import FakeOpenAI

    from toolbias_stats.audit import design_study, run_study, write_requests
    from toolbias_stats.io.readers.biasbusters import read_biasbusters_catalog

    catalog = read_biasbusters_catalog(BB / "clusters.json", api_meta=BB / "api_meta.json",
                                       cluster_names=BB / "cluster_names.json")
    tmp = Path(tempfile.mkdtemp(prefix="tbs-contract-run-"))
    atexit.register(shutil.rmtree, tmp, True)
    out = tmp / "s"
    write_requests(design_study(catalog, BB / "queries.json", n_queries=2, clusters=list(catalog.clusters)[:2]),
                   out)
    saved = {v: os.environ.pop(v, None) for v in ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY",
                                                    "all_proxy", "ALL_PROXY", "NO_PROXY")}
    os.environ["NO_PROXY"] = "127.0.0.1,localhost"
    try:
        with FakeOpenAI((0.5, 0.2, 0.1, 0.1, 0.1), seed=1) as srv:
            return run_study(out, base_url=srv.base_url, model="fake-model", concurrency=2, backoff=0.01)
    finally:
        os.environ.pop("NO_PROXY", None)
        os.environ.update({k: v for k, v in saved.items() if v is not None})


@_quiet
def build_gate():
    from toolbias_stats.simulate import simulate_selection_log

    sim = simulate_selection_log(n_clusters=2, n_queries=12, position_probs=[3, 1, 1, 1, 1], rng=1)
    return tbs.check_selection_bias(sim.log, max_delta_api=0.1, max_delta_pos=0.1, n_resamples=50, plan=False,
                                    rng=1)


#: Result types (full contract) -> a builder returning a real instance.
BUILDERS = {
    "BiasResult": build_bias,
    "TVResult": lambda: build_bias().groups[0].delta_api,
    "CalibratedTV": build_calibrated_tv,
    "CorrelationResult": build_correlation,
    "OLSResult": build_ols,
    "EnsembleResult": build_ensemble,
    "AlignmentResult": build_alignment,
    "ExplainResult": build_explain,
    "ChoiceExplanation": build_choice_explanation,
    "BayesResult": build_bayes,
    "ShiftResult": build_shift,
    "TrendResult": build_trend,
    "SubsetMetricsResult": build_subsets,
    "MitigationResult": build_mitigation,
    "ToolCountResult": build_toolcount,
    "VarianceComponents": build_components,
    "StudyPlan": build_plan,
    "OptionPositionBias": build_option_position,
    "GoldPositionAccuracy": build_gold_position,
    "JudgeConsistency": build_judge,
    "ChoiceModelResult": build_choice_model,
    "ShadowResult": build_shadow,
    "ABOutcome": build_ab,
    "CalibrationResult": build_calibration,
    "DiscriminationResult": build_discrimination,
    "RetrievalResult": build_retrieval,
    "ComparisonResult": build_comparison,
    "ProbeResult": build_probe,
    "ProbeCorrelationResult": build_probe_correlation,
    "AgreementResult": build_agreement,
    "BaselineResult": build_baselines,
    "CorrectSetBiasResult": build_correct_set,
    "RunResult": build_run,
    "GateResult": build_gate,
}

#: Parts of a result (reached from a built result): ``to_dict()`` is strict JSON where the part has one.
COMPONENTS = {
    "GroupBias": lambda: build_bias().groups[0],
    "ClusterBias": lambda: build_bias().groups[0].clusters[0],
    "OLSFit": lambda: build_ols().fits[0],
    "EnsembleFit": lambda: build_ensemble().fits[0],
    "BayesDiagnostics": lambda: build_bayes().diagnostics,
    "PosteriorPredictiveCheck": lambda: build_bayes().ppc,
    "ShiftGroup": lambda: build_shift().groups[0],
    "ShiftEstimate": lambda: build_shift().groups[0].shift_api,
    "ChangeEstimate": lambda: build_shift().groups[0].change["delta_api"],
    "ShadowGroup": lambda: build_shadow().groups[0],
    "DomainScore": lambda: next(iter(build_shadow().groups[0].domains.values())),
    "PBSScore": lambda: next(iter(build_shadow().groups[0].pbs.values())),
    "ShadowWeights": lambda: build_shadow().weights,
    "RecallEstimate": lambda: next(iter(build_retrieval().estimates.values()))["rc"],
    "ISEstimate": lambda: next(iter(build_retrieval().estimates.values()))["is"],
    "ConfidenceInterval": lambda: build_bias().groups[0].delta_api.ci,
    "GateDecision": lambda: build_gate().decisions[0],
    "Finding": lambda: __import__("toolbias_stats.report._findings", fromlist=["x"]).key_findings(
        build_bias(), _tiny().catalog)[0],
}

#: Exported classes that are not results: inputs, containers and helpers (to_frame where they hold a table).
NOT_RESULTS = {
    "SelectionLog": "input container (rows of a log); summary(by) = attempts by status",
    "SelectionCounts": "input container (counts); summary(by) = attempts by status",
    "ChoiceLog": "input container (choice rows); summary(by) = rows by status",
    "ToolCatalog": "input container (the tools)",
    "Study": "input container (manifest + log + catalog)",
    "ShadowAudit": "input container (an audit's turns and calls)",
    "RRBBenchmark": "input container (a retrieval benchmark)",
    "ProbeBenchmark": "input container (a probe benchmark)",
    "SubsetData": "input container (subset predictions and truth)",
    "ToolFeatures": "input container (the feature table); has to_frame/_repr_html_/__str__ for display",
    "StudyDesign": "a design to send (input of write_requests), not an analysis result",
    "DeclaredDesign": "the declared study design (unit, replicates, factors, strata) that a log carries, an input",
    "Encoder": "a sentence encoder (helper)",
    "Split": "one cross-validation split (train/test indices) of grouped_splits: a helper, not a result",
}

#: ``summary`` has one sense: on input containers the method ``summary(by=...)`` (rows/attempts by status per
#: group). A result gives ``summary_frame()`` (one row per group/model: the headline numbers). Two results had a
#: DataFrame FIELD named ``summary`` (the table of their ``summary_frame()``); it is now ``overview``, and the old
#: name works for one release with a DeprecationWarning. No result may add a ``summary`` attribute.
SUMMARY_SENSE = {"method": {"SelectionLog", "SelectionCounts", "ChoiceLog"},
                 "summary_frame": {"OLSResult", "EnsembleResult", "VarianceComponents", "GoldPositionAccuracy"},
                 "deprecated_alias": {"VarianceComponents", "GoldPositionAccuracy"}}

_SUBPACKAGE_SKIP = {"toolbias_stats.cli"}


def exported_classes() -> dict:
    """``{class name: class}`` for every class (exceptions and warnings aside) in a package ``__all__``."""
    names = ["toolbias_stats"]
    for info in pkgutil.walk_packages(tbs.__path__, prefix="toolbias_stats."):
        if info.ispkg and info.name not in _SUBPACKAGE_SKIP and not info.name.startswith("toolbias_stats.cli."):
            names.append(info.name)
    out = {}
    for name in names:
        mod = importlib.import_module(name)
        for attr in getattr(mod, "__all__", ()):
            obj = getattr(mod, attr, None)
            if inspect.isclass(obj) and not issubclass(obj, (BaseException, Warning)):
                out.setdefault(obj.__name__, obj)
    return out


def test_every_exported_class_is_classified():
    classes = exported_classes()
    listed = [*BUILDERS, *COMPONENTS, *NOT_RESULTS]
    assert len(listed) == len(set(listed)), "a class is listed twice"
    missing = sorted(set(classes) - set(listed))
    assert not missing, f"exported classes without a builder or a classification: {missing}"
    stale = sorted(set(listed) - set(classes))
    assert not stale, f"classified but no longer exported: {stale}"
    results = sorted(n for n in classes if n.endswith("Result"))
    assert set(results) <= set(BUILDERS), f"a *Result type must have a builder: {set(results) - set(BUILDERS)}"


def test_discovery_finds_the_known_results():
    """The discovery is not vacuous: it sees results of the top level and of subpackages."""
    classes = exported_classes()
    assert {"BiasResult", "ProbeCorrelationResult", "ChoiceModelResult", "RunResult"} <= set(classes)
    assert len([n for n in classes if n in BUILDERS]) == len(BUILDERS) >= 30


_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


@pytest.mark.parametrize("name", sorted(BUILDERS))
def test_result_contract(name):
    res = BUILDERS[name]()
    cls = exported_classes()[name]
    assert type(res) is cls
    assert dataclasses.is_dataclass(res) and type(res).__dataclass_params__.frozen, "results are frozen"

    frame = res.to_frame()
    assert isinstance(frame, pd.DataFrame)
    assert not isinstance(frame.columns, pd.MultiIndex)
    assert all(isinstance(c, str) for c in frame.columns), list(frame.columns)
    assert frame.columns.is_unique, list(frame.columns)
    assert len(frame) > 0, "a real result has at least one row"
    nested = [c for c in frame.columns if frame[c].dtype == object and frame[c].map(
        lambda v: isinstance(v, (list, tuple, dict, set, np.ndarray, pd.DataFrame))).any()]
    assert not nested, f"tidy: scalar cells only; nested values in {nested}"

    d = res.to_dict()
    assert isinstance(d, Mapping) and all(isinstance(k, str) for k in d)
    text = json.dumps(d, allow_nan=False)
    assert json.loads(text) == json.loads(json.dumps(res.to_dict(), allow_nan=False))   # deterministic

    page = res._repr_html_()
    assert isinstance(page, str) and page.startswith("<div") and page.rstrip().endswith("</div>")
    assert "<script" not in page and "<b>" not in page, "untrusted text is escaped"
    assert len(page) < 60_000, f"compact: {len(page)} characters"

    s = str(res)
    assert isinstance(s, str) and s.strip()
    assert not _CONTROL.search(s.replace("\n", "")), "control characters are escaped"

    _assert_bounded_repr(res, s)

    if name in SUMMARY_SENSE["deprecated_alias"]:
        with pytest.warns(DeprecationWarning, match="`summary` was renamed `overview`"):
            old = res.summary
        pd.testing.assert_frame_equal(old, res.summary_frame())
        pd.testing.assert_frame_equal(res.overview, res.summary_frame())
    else:
        assert not hasattr(type(res), "summary"), "results give summary_frame(), not summary"
    if name in SUMMARY_SENSE["summary_frame"]:
        assert isinstance(res.summary_frame(), pd.DataFrame) and len(res.summary_frame())
    else:
        assert not hasattr(res, "summary_frame"), "add the class to SUMMARY_SENSE['summary_frame']"


def _assert_bounded_repr(res, text):
    """``repr`` is the shared bounded one: ``<ClassName>``, the first lines of ``str``, what is left out."""
    from toolbias_stats._display import MAX_REPR_CHARS, TextReprMixin

    assert type(res).__repr__ is TextReprMixin.__repr__, "the dataclass repr (every field) is not the result's repr"
    r = repr(res)
    assert len(r) <= MAX_REPR_CHARS == 2_000, len(r)
    head, *shown = r.split("\n")
    assert head == f"<{type(res).__name__}>"
    lines = text.rstrip("\n").splitlines()
    if shown and shown[-1].startswith("... "):
        left = int(shown[-1].split()[1])
        assert shown[-1] == f"... {left} more line{'s' if left > 1 else ''}; str(result) has all {len(lines)}"
        shown = shown[:-1]
        assert len(shown) + left == len(lines)
    else:
        assert len(shown) == len(lines)
    for got, line in zip(shown, lines, strict=False):   # the text's own lines, long ones cut
        assert got == line or (got.endswith("...") and line.startswith(got[:-3]))


def test_repr_is_bounded_on_the_bundled_study():
    """The acceptance case: ``repr(selection_bias(<bundled study>))`` was 250,137 characters (every cluster's
    bootstrap table); now it is the head of the bias table in at most 2,000."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = tbs.selection_bias(tbs.read_study(BB / "study.toml"), n_resamples=0, n_null=0)
    text = str(res)
    assert len(text.splitlines()) > 12
    _assert_bounded_repr(res, text)
    assert repr(res).splitlines()[1].startswith("Tool-selection bias (TV to uniform)")
    # its exported parts too: a group's plain dataclass repr was 34,752 characters (every cluster's counts)
    group, cluster = res.groups[0], res.groups[0].clusters[0]
    for part in (group, cluster):
        assert len(repr(part)) <= 300, repr(part)
    assert repr(group).startswith(f"GroupBias(keys={group.keys!r}, clusters={len(group.clusters)},")
    assert f"delta_api={group.delta_api.mean_over_runs:.4g}" in repr(group)
    assert repr(cluster).startswith(f"ClusterBias(cluster={cluster.cluster!r}, K={cluster.K},")


def test_repr_never_raises():
    """A result whose text cannot be made still has a repr (debuggers and pytest call repr on anything)."""
    from toolbias_stats._display import ReprHTMLMixin

    @dataclasses.dataclass(frozen=True)
    class Broken(ReprHTMLMixin):
        x: int = 1

        def to_frame(self):
            raise RuntimeError("no table")

    assert repr(Broken()) == "<Broken (str() failed: RuntimeError)>"


@pytest.mark.parametrize("name", sorted(COMPONENTS))
def test_component_to_dict_is_strict_json(name):
    part = COMPONENTS[name]()
    assert type(part) is exported_classes()[name]
    if hasattr(part, "to_dict"):
        d = part.to_dict()
        assert isinstance(d, Mapping) and all(isinstance(k, str) for k in d)
        json.dumps(d, allow_nan=False)


@pytest.mark.parametrize("name", sorted(SUMMARY_SENSE["method"]))
def test_summary_method_is_counts_by_status(name):
    """On input containers ``summary(by)`` is one row per group: ``total`` and one column per status."""
    from toolbias_stats import choice

    def counts():
        return _tiny().log.counts()

    obj = {"SelectionLog": lambda: _tiny().log, "SelectionCounts": counts, "ChoiceLog": _choice_log}[name]()
    by = ["model"]
    table = obj.summary(by=by)
    statuses = choice.CHOICE_STATUSES if name == "ChoiceLog" else tbs.STATUSES
    assert list(table.columns[:2]) == ["model", "total"] and set(statuses) <= set(table.columns)
    assert (table["total"] == table[list(statuses)].sum(axis=1)).all()
