"""Fixtures of the TOOL-SHADOW tests: the bundled simulated example and a fake encoder (no model load)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "data" / "shadow"


class FakeEncoder:
    """Deterministic bag-of-words hashing encoder: unit vectors, shared words -> positive cosine."""

    def __init__(self, dim=64):
        self.dim = dim
        self.calls = 0

    def encode(self, texts):
        self.calls += 1
        out = np.zeros((len(texts), self.dim))
        for i, t in enumerate(texts):
            for w in str(t).lower().replace("_", " ").split():
                h = int(hashlib.sha256(w.strip(".,?!'\"").encode()).hexdigest(), 16)
                out[i, h % self.dim] += 1.0
            out[i, (i * 7) % self.dim] += 0.01
        return out / np.linalg.norm(out, axis=1, keepdims=True)


@pytest.fixture
def fake_encoder():
    return FakeEncoder()


@pytest.fixture(scope="session")
def shadow_data():
    return DATA


@pytest.fixture(scope="session")
def example_audit():
    from toolbias_stats.shadow import read_shadow_audit

    return read_shadow_audit(DATA / "manifest.json", DATA / "calls.csv", DATA / "labels.csv",
                             turns=DATA / "turns.csv")


def strict_json(text):
    import json

    def refuse(c):
        raise ValueError(f"non-RFC 8259 constant {c}")

    return json.loads(text, parse_constant=refuse)
