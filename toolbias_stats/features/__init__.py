"""Tool features for explaining selection: similarity, readability, age, promotional wording, length, parameters.

:func:`tool_features` computes one row per tool from a catalog and the cluster's queries
(BiasBusters Table 3, plus a few more); :func:`read_feature_table` reads a table someone else
made (e.g. the authors' ``authors_features.json``); :meth:`ToolFeatures.center` subtracts
cluster means as in the paper. Only :class:`Encoder` touches the disk (model and embedding cache).
"""

import typing as _typing

from .._lazy import LazyNames as _LazyNames

_lazy = _LazyNames(__name__)
_lazy.add('._age', 'age_days', 'check_reference_date')
_lazy.add('._promotional', 'DEFAULT_PROMOTIONAL_WORDS', 'TOKEN_PATTERN', 'promotional_words', 'tokenize')
_lazy.add('._readability', 'READABILITY_FEATURES', 'readability')
_lazy.add('._similarity', 'DEFAULT_ENCODER', 'Encoder', 'default_cache_dir', 'mean_cosine_similarity')
_lazy.add('._table', 'EXTRA_FEATURES', 'ID_COLUMNS', 'PAPER_FEATURES', 'ToolFeatures', 'center_by_cluster',
           'read_feature_table', 'tool_features')

__all__ = ["tool_features", "read_feature_table", "ToolFeatures", "center_by_cluster", "PAPER_FEATURES",
           "EXTRA_FEATURES", "ID_COLUMNS", "Encoder", "DEFAULT_ENCODER", "default_cache_dir",
           "mean_cosine_similarity", "readability", "READABILITY_FEATURES", "promotional_words", "tokenize",
           "DEFAULT_PROMOTIONAL_WORDS", "TOKEN_PATTERN", "age_days", "check_reference_date"]

if _typing.TYPE_CHECKING:  # the _lazy names, for type checkers (written by rewrite_imports.py)
    from ._age import age_days, check_reference_date
    from ._promotional import DEFAULT_PROMOTIONAL_WORDS, TOKEN_PATTERN, promotional_words, tokenize
    from ._readability import READABILITY_FEATURES, readability
    from ._similarity import DEFAULT_ENCODER, Encoder, default_cache_dir, mean_cosine_similarity
    from ._table import (
        EXTRA_FEATURES,
        ID_COLUMNS,
        PAPER_FEATURES,
        ToolFeatures,
        center_by_cluster,
        read_feature_table,
        tool_features,
    )

__getattr__, __dir__ = _lazy.hooks(globals())
