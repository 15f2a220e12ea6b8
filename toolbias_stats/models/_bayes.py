"""Compatibility shim: the Bayesian model now lives in :mod:`toolbias_stats.models.bayes`.

Every name that used to be importable from here still is (public and the private helpers that
scripts used).
"""

from .bayes import *  # noqa: F403
from .bayes import __all__  # noqa: F401
from .bayes._common import (  # noqa: F401
    _NEG,
    _SHARED,
    _basis,
    _hdi,
    _natural,
    _num,
    _records,
    _softmax_masked,
    _summ,
    _summary_dict,
    _zerosum_extend,
)
from .bayes._design import _Design, _design  # noqa: F401
from .bayes._fit import (  # noqa: F401
    _CENTERED_MIN_LLMS,
    _CENTERED_MIN_PER_TOOL,
    _CENTERED_MIN_PER_TOOL_ONE_LLM,
    _check_fit_bayes_args,
    _inference_data,
    _summarise,
)
from .bayes._model import _draw_pooled_mean, _embedding, _ModelSpec, _pooled_normal_logp  # noqa: F401
from .bayes._sampling import _EXTRAS, _diagnostics, _identified, _require, _sample  # noqa: F401
from .bayes._summaries import (  # noqa: F401
    _EXACT_PERMUTATION_K,
    _RANDOM_BASE_PERMUTATIONS,
    _implied_logged,
    _implied_randomised,
    _permutations,
    _ppc,
)
