"""Rebuild data/embeddings/all-MiniLM-L6-v2.npz: the default encoder's vectors of the bundled studies' texts.

The vectors are those a cold run of ``tool_features`` computes (the same per-cluster encoding calls), for the
catalog descriptions and for the ToolBench descriptions (``--texts toolbench``), keyed by sha256 of the text
(first occurrence kept). Run from the repository root: ``python scripts/bundle_embeddings.py``.
"""

from __future__ import annotations

import sys

import numpy as np

from toolbias_stats.datasets import data_dir
from toolbias_stats.features import tool_features
from toolbias_stats.features._similarity import BUNDLED_EMBEDDINGS, Encoder, bundled_identity, write_embedding_store
from toolbias_stats.io import read_study

STUDIES = ("biasbusters/study.toml",)
TEXT_COLUMNS = (("tool_description", "api_description"), ("toolbench_tool_description", "toolbench_api_description"))


class _Recording(Encoder):
    """An encoder without cache that remembers every text it encodes and its vector (first occurrence)."""

    seen: dict

    def _encode(self, texts):
        vecs = super()._encode(texts)
        for t, v in zip(texts, vecs):
            self.seen.setdefault(t, v)
        return vecs


def main() -> int:
    enc = _Recording(cache_dir=False)
    enc.seen = {}
    for name in STUDIES:
        study = read_study(data_dir() / name, lazy=True)
        for cols in TEXT_COLUMNS:
            if all(c in study.catalog.table.columns for c in cols):
                tool_features(study, encoder=enc, cache_dir=False, text_columns=cols)
    texts = list(enc.seen)
    out = data_dir() / BUNDLED_EMBEDDINGS
    out.parent.mkdir(parents=True, exist_ok=True)
    write_embedding_store(out, texts, np.stack([enc.seen[t] for t in texts]),
                          identity=bundled_identity(enc.name, enc.path))
    print(f"wrote {out}: {len(texts)} texts, identity {bundled_identity(enc.name, enc.path)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
