"""MCQ / QA probing accuracy (Wilson interval, exact test against chance) and the knowledge-retrieval correlation."""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import numpy.typing as npt
import pandas as pd

from .._display import ReprHTMLMixin
from .._resampling import ConfidenceInterval
from .._validation import check_choice, check_confidence_level
from ..exceptions import DegenerateDataWarning, SmallSampleWarning
from ._io import _norm, read_probe  # noqa: F401  (read_probe: doctest)
from ._retrieval import _ci_json, _num

if TYPE_CHECKING:
    from ._io import ProbeBenchmark

__all__ = ["probe_accuracy", "ProbeResult", "probe_recall_correlation", "ProbeCorrelationResult"]

#: Fewer configurations than this make the Fisher-z interval of Pearson's r a rough guide only.
SMALL_N = 10


@dataclass(frozen=True)
class ProbeResult(ReprHTMLMixin):
    """Exact-match accuracy on an MCQ or QA probe.

    Attributes
    ----------
    kind : str
        ``"mcq"`` or ``"qa"``.
    n : int
        Probes scored (every probe of the benchmark).
    n_correct : int
    accuracy : float
    ci : ConfidenceInterval
        Wilson score interval (``statsmodels.stats.proportion.proportion_confint(method="wilson")``).
    chance : float
        0.25 (MCQ) or 0.5 (QA).
    p_value : float
        Exact binomial test of ``accuracy = chance`` (``scipy.stats.binomtest``, ``alternative``).
    alternative : str
    n_invalid : int
        Answers that are none of the options (scored as wrong).
    confidence_level : float
    ci_method : str

    Examples
    --------
    Answering "Yes" to every yes/no probe of the QA benchmark (half of the answers are "Yes"):

    >>> import pandas as pd
    >>> qa = read_probe("qa")
    >>> res = probe_accuracy(qa, pd.DataFrame({"id": qa.items["id"], "answer": "Yes"}))
    >>> res.to_frame()[["benchmark", "n", "n_correct", "accuracy", "ci_low", "ci_high", "chance"]].round(3)
      benchmark    n  n_correct  accuracy  ci_low  ci_high  chance
    0        qa  500        250       0.5   0.456    0.544     0.5
    """

    kind: str
    n: int
    n_correct: int
    accuracy: float
    ci: ConfidenceInterval
    chance: float
    p_value: float
    alternative: str = "two-sided"
    n_invalid: int = 0
    confidence_level: float = 0.95
    ci_method: str = "wilson"

    def to_dict(self) -> dict[str, Any]:
        """The documented JSON of ``toolsense score --benchmark mcq|qa --json``."""
        return {"benchmark": self.kind, "n": int(self.n), "n_correct": int(self.n_correct),
                "accuracy": {"estimate": _num(self.accuracy), "ci": _ci_json(self.ci)}, "chance": self.chance,
                "p_value": _num(self.p_value), "alternative": self.alternative, "n_invalid": int(self.n_invalid),
                "confidence_level": self.confidence_level, "ci_method": self.ci_method}

    def to_frame(self) -> pd.DataFrame:
        return pd.DataFrame([{"benchmark": self.kind, "n": self.n, "n_correct": self.n_correct,
                              "accuracy": self.accuracy, "ci_low": self.ci.low, "ci_high": self.ci.high,
                              "chance": self.chance, "p_value": self.p_value, "n_invalid": self.n_invalid}])


def probe_accuracy(benchmark: ProbeBenchmark, predictions: pd.DataFrame, *, confidence_level: float = 0.95,
                   alternative: Literal["two-sided", "greater", "less"] = "two-sided") -> ProbeResult:
    """Exact-match accuracy of MCQ/QA answers with a Wilson interval and an exact test against chance.

    Parameters
    ----------
    benchmark : ProbeBenchmark
        From :func:`read_probe`.
    predictions : pandas.DataFrame
        ``id``, ``answer`` (from :func:`read_probe_predictions`); every probe must have one answer.
    confidence_level : float, default 0.95
    alternative : {"two-sided", "greater", "less"}, default "two-sided"
        Of the binomial test against chance (two-sided: configurations below chance are of interest too).

    Returns
    -------
    ProbeResult

    Notes
    -----
    An answer is correct when it equals the correct option after trimming white space and ignoring case
    (MCQ: the option text; QA: Yes/No). Accuracy = correct / n over all probes; the Wilson interval treats
    probes as independent trials (each probe is a different tool).

    Examples
    --------
    >>> import pandas as pd
    >>> qa = read_probe("qa")
    >>> res = probe_accuracy(qa, pd.DataFrame({"id": qa.items["id"], "answer": "Yes"}))
    >>> res.accuracy, res.p_value
    (0.5, 1.0)
    """
    from scipy.stats import binomtest
    from statsmodels.stats.proportion import proportion_confint

    level = check_confidence_level(confidence_level)
    check_choice("alternative", alternative, ("two-sided", "greater", "less"))
    items = benchmark.items
    pred = predictions.drop_duplicates("id") if "id" in predictions.columns else None
    if pred is None or len(pred) != len(predictions):
        raise ValueError("`predictions` must have one row per probe `id` (no duplicates).")
    ans = pred.set_index("id")["answer"].reindex(items["id"])
    if ans.isna().any():
        raise ValueError(f"{int(ans.isna().sum())} probes have no prediction, e.g. "
                         f"{items['id'][ans.isna().to_numpy()].tolist()[:3]}.")
    given = [_norm(a) for a in ans]
    correct = np.array([g == _norm(c) for g, c in zip(given, items["answer"])])
    invalid = int(sum(g not in {_norm(o) for o in opts} for g, opts in zip(given, items["options"])))
    n, x = len(correct), int(correct.sum())
    lo, hi = proportion_confint(x, n, alpha=1 - level, method="wilson")
    p = binomtest(x, n, benchmark.chance, alternative=alternative).pvalue
    return ProbeResult(kind=benchmark.kind, n=n, n_correct=x, accuracy=x / n, ci=ConfidenceInterval(lo, hi),
                       chance=benchmark.chance, p_value=float(p), alternative=alternative, n_invalid=invalid,
                       confidence_level=level)


@dataclass(frozen=True)
class ProbeCorrelationResult(ReprHTMLMixin):
    """Pearson correlation between probe accuracy and retrieval recall across configurations.

    Attributes
    ----------
    n : int
        Configurations.
    r : float
    ci : ConfidenceInterval
        Fisher z interval (``scipy.stats.pearsonr(...).confidence_interval()``); large-sample, rough for n < 10.
    p_value : float
        Exact test of r = 0 under bivariate normality (scipy).
    labels : list
    notes : list of str

    Examples
    --------
    >>> res = probe_recall_correlation([0.21, 0.35, 0.33, 0.48, 0.52, 0.61, 0.58, 0.70, 0.74, 0.80],
    ...                                [0.10, 0.22, 0.30, 0.28, 0.41, 0.39, 0.55, 0.50, 0.62, 0.71])
    >>> res.to_frame()[["n", "r", "ci_low", "ci_high"]].round(3)
        n      r  ci_low  ci_high
    0  10  0.939   0.757    0.986
    """

    n: int
    r: float
    ci: ConfidenceInterval
    p_value: float
    confidence_level: float = 0.95
    labels: list = field(default_factory=list)
    notes: list = field(default_factory=list)

    def to_frame(self) -> pd.DataFrame:
        """One row: ``n``, ``r``, its interval and p-value (unrounded)."""
        return pd.DataFrame([{"n": self.n, "r": self.r, "ci_low": self.ci[0], "ci_high": self.ci[1],
                              "p_value": self.p_value, "confidence_level": self.confidence_level}])

    def to_dict(self) -> dict:
        return {"n": self.n, "r": _num(self.r), "ci": _ci_json(self.ci), "p_value": _num(self.p_value),
                "confidence_level": self.confidence_level, "labels": list(self.labels), "notes": list(self.notes)}


def probe_recall_correlation(accuracy: npt.ArrayLike, recall: npt.ArrayLike, *, labels: Sequence[str] | None = None,
                             confidence_level: float = 0.95) -> ProbeCorrelationResult:
    """Correlation between knowledge (probe accuracy) and retrieval (recall) across configurations (paper §5.3).

    Parameters
    ----------
    accuracy, recall : sequence of float
        One value per configuration (e.g. Stage-1 MCQ accuracy and Stage-2 Rc@50).
    labels : sequence of str, optional
    confidence_level : float, default 0.95

    Returns
    -------
    ProbeCorrelationResult

    Warns
    -----
    SmallSampleWarning
        With fewer than 10 configurations: the Fisher z interval is a large-sample approximation and each
        configuration weighs heavily (the paper's n = 14 is small too); said in ``notes``.

    Examples
    --------
    Ten configurations (fewer would warn that the interval is rough); ``r`` is Pearson's, as numpy computes it:

    >>> import numpy as np
    >>> acc = [0.21, 0.35, 0.33, 0.48, 0.52, 0.61, 0.58, 0.70, 0.74, 0.80]
    >>> rec = [0.10, 0.22, 0.30, 0.28, 0.41, 0.39, 0.55, 0.50, 0.62, 0.71]
    >>> res = probe_recall_correlation(acc, rec)
    >>> round(res.r, 4) == round(float(np.corrcoef(acc, rec)[0, 1]), 4), res.n
    (True, 10)
    >>> [round(x, 3) for x in res.ci], res.p_value < 0.001
    ([0.757, 0.986], True)
    """
    from scipy.stats import pearsonr

    level = check_confidence_level(confidence_level)
    x = np.asarray(accuracy, dtype=float)
    y = np.asarray(recall, dtype=float)
    if x.shape != y.shape or x.ndim != 1:
        raise ValueError(f"`accuracy` and `recall` must be 1-d of the same length; got {x.shape} and {y.shape}.")
    ok = np.isfinite(x) & np.isfinite(y)
    x, y = x[ok], y[ok]
    n = int(x.size)
    notes = []
    if n < 3 or np.ptp(x) == 0 or np.ptp(y) == 0:
        warnings.warn("correlation needs at least 3 configurations with varying values", DegenerateDataWarning,
                      stacklevel=2)
        return ProbeCorrelationResult(n=n, r=np.nan, ci=ConfidenceInterval(np.nan, np.nan), p_value=np.nan,
                                      confidence_level=level, labels=list(labels or []), notes=["degenerate input"])
    res = pearsonr(x, y)
    lo, hi = res.confidence_interval(confidence_level=level) if n > 3 else (np.nan, np.nan)
    if n < SMALL_N:
        msg = (f"n = {n} configurations is small: the Fisher z interval is a large-sample approximation and a "
               "single configuration can move r a lot")
        warnings.warn(msg, SmallSampleWarning, stacklevel=2)
        notes.append(msg)
    else:
        notes.append(f"n = {n} configurations: each point is a configuration, not a query; r describes "
                     "configurations, and the interval ignores the sampling error of each accuracy and recall")
    return ProbeCorrelationResult(n=n, r=float(res.statistic), ci=ConfidenceInterval(lo, hi),
                                  p_value=float(res.pvalue), confidence_level=level, labels=list(labels or []),
                                  notes=notes)
