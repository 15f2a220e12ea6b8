"""Every public name, as a snapshot: an addition or a removal is a deliberate change (issue 40).

The snapshot ``tests/public_names.txt`` has one line per public module of ``toolbias_stats`` (every module whose
dotted path has no component starting with ``_``) and one line ``module.name`` per name in that module's
``__all__``, sorted. When the public surface changes on purpose, regenerate it with one command and commit it
with the change::

    python tests/test_public_names.py --update

Names that were renamed keep working for one release through a deprecation hook; they are not in ``__all__``
and so not in the snapshot. The tests below check those hooks and that the names removed from the surface in
issue 40 are gone.
"""
from __future__ import annotations

import importlib
import pkgutil
import sys
import warnings
from pathlib import Path

import pytest

SNAPSHOT = Path(__file__).with_name("public_names.txt")
UPDATE = "python tests/test_public_names.py --update"


def public_names() -> list[str]:
    """The sorted lines of the snapshot: public modules, and ``module.name`` for each name in their ``__all__``."""
    import toolbias_stats

    modules = [toolbias_stats.__name__]
    for info in pkgutil.walk_packages(toolbias_stats.__path__, "toolbias_stats."):
        if not any(part.startswith("_") for part in info.name.split(".")[1:]):
            modules.append(info.name)
    lines = set()
    for name in modules:
        module = importlib.import_module(name)
        lines.add(name)
        lines.update(f"{name}.{attr}" for attr in getattr(module, "__all__", ()))
    return sorted(lines)


def _diff(expected: list[str], actual: list[str]) -> str:
    added = sorted(set(actual) - set(expected))
    removed = sorted(set(expected) - set(actual))
    return (f"the public surface changed: {len(added)} name(s) added, {len(removed)} removed\n"
            + "".join(f"  + {n}\n" for n in added) + "".join(f"  - {n}\n" for n in removed)
            + f"If this is deliberate, regenerate the snapshot with `{UPDATE}` and commit it.")


def test_public_names_match_the_snapshot():
    expected = SNAPSHOT.read_text(encoding="utf-8").splitlines()
    actual = public_names()
    if actual != expected:
        pytest.fail(_diff(expected, actual), pytrace=False)


def test_the_diff_names_additions_and_removals():
    message = _diff(["toolbias_stats.a", "toolbias_stats.b"], ["toolbias_stats.b", "toolbias_stats.c"])
    assert "1 name(s) added, 1 removed" in message
    assert "  + toolbias_stats.c\n" in message and "  - toolbias_stats.a\n" in message
    assert UPDATE in message


def test_every_name_in_all_is_listed_by_its_module():
    # __all__ and the lazy registry (``dir``) agree, so every snapshot line names something importable
    missing = []
    for line in public_names():
        module_name, _, attr = line.rpartition(".")
        if line not in sys.modules and attr not in dir(sys.modules[module_name]):
            missing.append(line)
    assert not missing, missing


@pytest.mark.parametrize("module, name", [("toolbias_stats.plots", "group_label"),
                                          ("toolbias_stats.plots", "tool_labels"),
                                          ("toolbias_stats.shadow", "BANNER")])
def test_helpers_are_no_longer_public(module, name):
    mod = importlib.import_module(module)
    assert name not in mod.__all__ and name not in dir(mod)
    with pytest.raises(AttributeError, match=name):
        getattr(mod, name)


@pytest.mark.parametrize("module, new", [("toolbias_stats.choicemodel", "simulate_logit_log"),
                                         ("toolbias_stats.models", "simulate_bayes_log"),
                                         ("toolbias_stats.models.bayes", "simulate_bayes_log")])
def test_the_old_simulator_name_warns_and_names_its_replacement(module, new):
    mod = importlib.import_module(module)
    assert "simulate_choice_log" not in mod.__all__ and new in mod.__all__
    with pytest.warns(DeprecationWarning, match=f"{module}.simulate_choice_log` was renamed `{new}`"):
        old = mod.simulate_choice_log
    assert old is getattr(mod, new)
    with pytest.warns(DeprecationWarning):   # every use warns, not only the first (the old name is not cached)
        assert importlib.import_module(module).simulate_choice_log is old


def test_the_two_simulators_are_different_functions():
    from toolbias_stats.choicemodel import simulate_logit_log
    from toolbias_stats.models import simulate_bayes_log

    assert simulate_logit_log is not simulate_bayes_log
    with warnings.catch_warnings():
        warnings.simplefilter("error")   # the new names do not warn
        from toolbias_stats.models import simulate_bayes_log as again
    assert again is simulate_bayes_log


if __name__ == "__main__":
    if sys.argv[1:] != ["--update"]:
        sys.exit(f"usage: {UPDATE}")
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    lines = public_names()
    SNAPSHOT.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"wrote {SNAPSHOT} ({len(lines)} lines)")
