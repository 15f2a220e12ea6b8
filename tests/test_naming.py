"""One naming convention across the public API (issue 24).

Every public function and public method of an exported class is checked against the convention written in
``docs/guide/conventions.md``: randomness through ``rng`` (None, an int or a Generator), interval mass through
``confidence_level``, resample counts through ``n_resamples``, grouping through ``by``, engines defaulting to
``"auto"``. Old names keep working for one release through ``renamed_parameter`` with a DeprecationWarning.
"""
from __future__ import annotations

import dataclasses
import importlib
import inspect
import warnings
from pathlib import Path

import numpy as np
import pytest

import toolbias_stats as tbs
from toolbias_stats._validation import renamed_parameter

#: Names the convention replaces, and the name to use instead.
FORBIDDEN = {
    "seed": "rng", "random_state": "rng", "random_seed": "rng",
    "hdi_prob": "confidence_level", "ci_level": "confidence_level", "conf_level": "confidence_level",
    "cred_mass": "confidence_level", "credible_interval": "confidence_level",
    "n_boot": "n_resamples", "n_bootstrap": "n_resamples", "n_bootstraps": "n_resamples", "B": "n_resamples",
    "n_reps": "n_resamples", "reps": "n_resamples", "n_replicates": "n_resamples",
    "group_by": "by", "groupby": "by",
}
# ``groups`` stays: it is an array of group labels (as scikit-learn's ``GroupKFold``), not the columns to group by.

#: Signatures the rules do not apply to, with the reason.
EXEMPT = {
    "toolbias_stats.Study.__init__": "`engine` records which engine read the study; it does not choose one",
}

SUBPACKAGES = ["choice", "choicemodel", "design", "experiments", "features", "io", "metrics", "models", "plots",
               "report", "shadow", "toolsense", "audit", "gate"]


def _public_callables():
    seen, out = set(), []
    modules = [tbs] + [importlib.import_module(f"toolbias_stats.{name}") for name in SUBPACKAGES]
    for module in modules:
        for name in getattr(module, "__all__", []):
            obj = getattr(module, name)
            if id(obj) in seen:
                continue
            seen.add(id(obj))
            if inspect.isfunction(obj):
                out.append((f"{module.__name__}.{name}", obj))
            elif inspect.isclass(obj):
                for attr, member in vars(obj).items():
                    if isinstance(member, (staticmethod, classmethod)):
                        member = member.__func__
                    if not inspect.isfunction(member):
                        continue
                    # a frozen dataclass's generated __init__ lists the fields the result records (e.g. the seed
                    # that was used), not arguments a user passes
                    if attr == "__init__" and dataclasses.is_dataclass(obj):
                        continue
                    if attr.startswith("_") and attr != "__init__":
                        continue
                    out.append((f"{module.__name__}.{name}.{attr}", member))
    return out


CALLABLES = _public_callables()


def test_the_public_api_is_found():
    names = {n.rsplit(".", 1)[-1] for n, _ in CALLABLES}
    assert {"selection_bias", "fit_bayes", "choice_model", "plan_study", "count_table", "read_study"} <= names
    assert len(CALLABLES) > 150


@pytest.mark.parametrize("qualname,func", CALLABLES, ids=[n for n, _ in CALLABLES])
def test_signature_follows_the_convention(qualname, func):
    if qualname in EXEMPT:
        pytest.skip(EXEMPT[qualname])
    params = inspect.signature(func).parameters
    wrong = {p: FORBIDDEN[p] for p in params if p in FORBIDDEN}
    assert not wrong, f"{qualname}: rename {wrong} (old names go through renamed_parameter)"
    if "engine" in params and params["engine"].default is not inspect.Parameter.empty:
        assert params["engine"].default == "auto", f"{qualname}: engine must default to 'auto'"
    if "rng" in params:   # required, None (fresh entropy) or a fixed int seed stated in the docstring
        default = params["rng"].default
        assert default is inspect.Parameter.empty or default is None or type(default) is int, qualname
    if "confidence_level" in params and params["confidence_level"].default is not inspect.Parameter.empty:
        assert 0 < params["confidence_level"].default < 1
    for old, new in getattr(func, "__deprecated_parameters__", {}).items():
        assert old in FORBIDDEN and FORBIDDEN[old] == new and new in params, (qualname, old, new)


def test_deprecated_name_still_works_with_a_warning():
    @renamed_parameter("hdi_prob", "confidence_level", since="0.1.0")
    def f(x, *, confidence_level=0.94):
        return x, confidence_level

    assert inspect.signature(f).parameters.keys() == {"x", "confidence_level"}
    with pytest.warns(DeprecationWarning, match="`hdi_prob` was renamed `confidence_level`"):
        assert f(1, hdi_prob=0.5) == (1, 0.5)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert f(1, confidence_level=0.8) == (1, 0.8)
    with pytest.raises(TypeError, match="both `hdi_prob`"):
        f(1, hdi_prob=0.5, confidence_level=0.8)


def test_fit_bayes_accepts_the_old_interval_name():
    with pytest.warns(DeprecationWarning, match="`hdi_prob` was renamed"), pytest.raises((TypeError, ValueError)):
        tbs.fit_bayes("not a log", hdi_prob=0.9)


def test_count_table_engine_auto_equals_duckdb(tmp_path):
    from toolbias_stats.simulate import simulate_selection_log

    log = simulate_selection_log(n_clusters=2, n_queries=6, rng=3).log
    path = log.write(tmp_path / "log.csv")
    auto = tbs.count_table(path, catalog=log.catalog)
    duck = tbs.count_table(path, catalog=log.catalog, engine="duckdb")
    assert auto.engine == "duckdb"
    assert auto.table.equals(duck.table)


@pytest.mark.parametrize("rng", [7, np.random.default_rng(7)], ids=["int", "Generator"])
def test_rng_accepts_an_int_or_a_generator(rng):
    from toolbias_stats.simulate import simulate_selection_log

    log = simulate_selection_log(n_clusters=2, n_queries=10, rng=1).log
    res = tbs.selection_bias(log, n_resamples=50, rng=rng)
    ref = tbs.selection_bias(log, n_resamples=50, rng=np.random.default_rng(7))
    assert res.to_frame().equals(ref.to_frame())


def test_export_quarto_accepts_the_old_seed_name(tmp_path):
    study = tmp_path / "missing.toml"
    with pytest.warns(DeprecationWarning, match="`seed` was renamed `rng`"), pytest.raises((OSError, ValueError)):
        tbs.report.export_quarto(study, tmp_path / "out", seed=3)
    with pytest.raises(ValueError, match="`rng` must be an int seed"):
        tbs.report.export_quarto(study, tmp_path / "out", rng=np.random.default_rng(0))


# -- annotations and docstrings of the same public API (issue 24: "type hints on the public API", "every public
# function has a numpydoc docstring with Parameters, Returns and a runnable Example", "no skipped main calls") ------
def _missing_annotations(func) -> list:
    sig = inspect.signature(func)
    missing = [p.name for p in list(sig.parameters.values())
               if p.name not in ("self", "cls") and p.annotation is inspect.Parameter.empty]
    if sig.return_annotation is inspect.Signature.empty and func.__name__ != "__init__":
        missing.append("return")
    return missing


@pytest.mark.parametrize("qualname,func", CALLABLES, ids=[n for n, _ in CALLABLES])
def test_public_signature_is_annotated(qualname, func):
    missing = _missing_annotations(func)
    assert not missing, f"{qualname}: annotate {missing}"


FUNCTIONS = [(n, f) for n, f in CALLABLES if f.__qualname__ == f.__name__]   # module-level functions


@pytest.mark.parametrize("qualname,func", FUNCTIONS, ids=[n for n, _ in FUNCTIONS])
def test_public_function_has_a_numpydoc_docstring_with_an_example(qualname, func):
    doc = inspect.getdoc(func) or ""
    params = [p for p in inspect.signature(func).parameters if p not in ("self", "cls")]
    sections = {s for s in ("Parameters", "Returns", "Yields", "Examples") if f"\n{s}\n---" in f"\n{doc}"}
    wanted = {"Examples"} | ({"Parameters"} if params else set())
    missing = sorted(wanted - sections) + ([] if sections & {"Returns", "Yields"} else ["Returns"])
    assert not missing, f"{qualname}: docstring lacks {missing}"
    assert ">>> " in doc.split("\nExamples\n", 1)[1], f"{qualname}: the Examples section has no runnable line"


def test_no_doctest_is_skipped():
    package = Path(tbs.__file__).parent
    skipped = [f"{p.relative_to(package)}:{i}" for p in sorted(package.rglob("*.py"))
               for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1) if "doctest: +SKIP" in line]
    assert not skipped, f"doctest lines skipped (make the example run fast instead): {skipped}"


def test_the_annotation_check_sees_a_missing_hint():
    def f(a: int, b, *, c: str = "x"):
        return a

    def g(a: int) -> int:
        return a

    assert _missing_annotations(f) == ["b", "return"]
    assert _missing_annotations(g) == []
