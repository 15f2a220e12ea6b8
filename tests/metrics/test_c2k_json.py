"""The fast indented JSON writer (issue 37, 2,000 clusters): ``dumps_indented(obj)`` is ``json.dumps(obj,
indent=2)`` byte for byte, on generated objects of every JSON type (and on anything else, through the fallback)."""

from __future__ import annotations

import collections
import enum
import json
import math

import numpy as np
import pytest

from toolbias_stats._json import dumps_indented

STRINGS = ["", "a", "é", "naïve ü", "日本語", "emoji 😀", "\x00\x01\x1f", "quote \" back \\ slash /", "\n\t\r",
           "\ud800 lone surrogate", "\u2028\u2029", "<script>", "   ", "toolbias_stats nested"]
FLOATS = [0.0, -0.0, 1.0, -2.5, 0.1, 1 / 3, 1e300, -1e-300, 5e-324, 1.7976931348623157e308, 123456789.123,
          float("nan"), float("inf"), float("-inf"), 2.0 ** 53, 1e16, 1e-5]
INTS = [0, 1, -1, 2 ** 31, -(2 ** 63), 2 ** 100, 7]


def _leaf(rng):
    kind = rng.integers(0, 6)
    if kind == 0:
        return STRINGS[rng.integers(0, len(STRINGS))]
    if kind == 1:
        return FLOATS[rng.integers(0, len(FLOATS))]
    if kind == 2:
        return INTS[rng.integers(0, len(INTS))]
    if kind == 3:
        return bool(rng.integers(0, 2))
    if kind == 4:
        return None
    return float(rng.normal()) * 10.0 ** int(rng.integers(-8, 8))


def _obj(rng, depth):
    """A random JSON value: nested dicts, lists and tuples (empty ones too) down to ``depth``."""
    if depth == 0 or rng.random() < 0.25:
        return _leaf(rng)
    n = int(rng.integers(0, 6))
    kind = rng.integers(0, 3)
    items = [_obj(rng, depth - 1) for _ in range(n)]
    if kind == 0:
        return {STRINGS[rng.integers(0, len(STRINGS))] + str(i): v for i, v in enumerate(items)}
    return items if kind == 1 else tuple(items)


@pytest.mark.parametrize("seed", range(40))
def test_generated_objects_byte_identical(seed):
    rng = np.random.default_rng(seed)
    for _ in range(25):
        obj = _obj(rng, int(rng.integers(1, 7)))
        assert dumps_indented(obj) == json.dumps(obj, indent=2)


@pytest.mark.parametrize("obj", [
    {}, [], (), {"a": {}}, {"a": []}, [[], {}, ()], [[[]]], {"": {"": {"": []}}},
    {"x": [float("nan"), float("inf"), float("-inf"), -0.0]},
    {"é": "ü", "k": ["\ud83d", "\x7f"]}, "just a string", 3, 2.5, None, True,
    [1, [2, [3, [4, [5]]]]], {"a": 1, "b": [1, 2], "c": {"d": None}},
])
def test_edge_cases(obj):
    assert dumps_indented(obj) == json.dumps(obj, indent=2)


class _Level(enum.IntEnum):
    LOW = 1


class _Name(str):
    pass


@pytest.mark.parametrize("obj", [
    {1: "int key", 2.5: "float key", False: "bool key", None: "none key"},   # keys that are not strings
    {"a": _Level.LOW}, [_Name("subclass of str")], collections.OrderedDict(a=1),
    {"a": collections.OrderedDict(b=[1, 2])}, [True, 1, 1.0, _Level.LOW],
])
def test_unusual_values_fall_back_to_the_standard_library(obj):
    assert dumps_indented(obj) == json.dumps(obj, indent=2)


def test_errors_are_those_of_the_standard_library():
    cyclic: list = []
    cyclic.append(cyclic)
    for bad, error in ((cyclic, ValueError), ({"a": np.float32(1.0)}, TypeError), ({"a": {1, 2}}, TypeError),
                       ({(1, 2): 3}, TypeError)):
        with pytest.raises(error) as ours:
            dumps_indented(bad)
        with pytest.raises(error) as theirs:
            json.dumps(bad, indent=2)
        assert str(ours.value) == str(theirs.value)


def test_a_bias_result_like_object():
    """The shape of ``bias --json``: groups of clusters with rate mappings, interval pairs and nested results."""
    rng = np.random.default_rng(3)
    cluster = {"cluster": "c0", "K": 5, "rates": {f"t{j}": float(rng.random()) for j in range(5)},
               "positions": [1, 2, 3, 4, 5], "position_note": None,
               "delta_api": {"corrected": None, "corrected_ci": [None, None], "ci": [0.1, math.nan], "n_runs": 3,
                             "p_value": 0.5, "ci_note": ""}}
    obj = {"study": "s", "groups": [{"keys": {"model": "m"}, "clusters": [dict(cluster, cluster=f"c{i}")
                                                                         for i in range(50)]}], "warnings": []}
    assert dumps_indented(obj) == json.dumps(obj, indent=2)
