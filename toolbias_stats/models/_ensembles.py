"""Random forests and gradient boosting with cluster-grouped cross-validation, next to a constant baseline."""

from __future__ import annotations

import numbers
import time
import warnings
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from .._display import ReprHTMLMixin
from .._validation import check_choice, check_rng
from ..exceptions import SmallSampleWarning
from ._design import design

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence
    from typing import Any, Literal

    from ..features import ToolFeatures
    from ..metrics import BiasResult

__all__ = ["ensemble_cv", "random_forest_cv", "gradient_boosting_cv", "grouped_splits", "EnsembleResult",
           "EnsembleFit", "Split", "ESTIMATORS", "SCHEMES"]

#: Estimators: scikit-learn's random forest and xgboost's gradient boosting.
ESTIMATORS = ("random_forest", "gradient_boosting")
#: Validation schemes; every one keeps all tools of a cluster on the same side.
SCHEMES = ("loco", "group_kfold", "holdout")

_FOLD_COLUMNS = ("model", "estimator", "scheme", "repeat", "fold", "n_train", "n_test", "test_clusters", "metric",
                 "value")


@dataclass(frozen=True, eq=False)
class Split:
    """One train/test split: indices into the rows, and which repeat and fold it is.

    Examples
    --------
    >>> grouped_splits(["a", "a", "b", "b", "c"], scheme="loco")[0]
    Split(repeat=1, fold=1, train=array([2, 3, 4]), test=array([0, 1]))
    """

    repeat: int
    fold: int
    train: np.ndarray
    test: np.ndarray


def _is_real(value) -> bool:
    """``isinstance(value, numbers.Real)`` without narrowing the type (mypy has no arithmetic on ``numbers.Real``)."""
    return isinstance(value, numbers.Real)


def grouped_splits(groups: Iterable[Any], *, scheme: Literal["loco", "group_kfold", "holdout"] = "loco",
                   n_splits: int = 5, n_repeats: int = 1, test_size: float = 0.2,
                   rng: int | np.random.Generator | None = None) -> list[Split]:
    """Train/test splits that never put one group's rows on both sides.

    Parameters
    ----------
    groups : array-like
        Group label of every row (the tool's cluster).
    scheme : {"loco", "group_kfold", "holdout"}, default "loco"
        ``"loco"``: leave one cluster out (one fold per cluster, deterministic).
        ``"group_kfold"``: ``n_repeats`` x GroupKFold with ``n_splits`` folds, the groups shuffled
        anew for each repeat. ``"holdout"``: one GroupShuffleSplit with ``test_size`` of the groups.
    n_splits : int, default 5
    n_repeats : int, default 1
        Repeats of ``group_kfold`` (ignored otherwise).
    test_size : float, default 0.2
        Share of groups in the holdout test set.
    rng : None, int or numpy.random.Generator

    Returns
    -------
    list of Split

    Raises
    ------
    ValueError
        Fewer than two groups, ``n_splits`` larger than the number of groups, bad arguments.

    Examples
    --------
    >>> s = grouped_splits(["a", "a", "b", "b", "c"], scheme="loco")
    >>> [sorted(x.test.tolist()) for x in s]
    [[0, 1], [2, 3], [4]]
    """
    from sklearn.model_selection import GroupKFold, GroupShuffleSplit, LeaveOneGroupOut

    check_choice("scheme", scheme, SCHEMES)
    groups = np.asarray(pd.Series(list(groups)).astype(str))
    n_groups = len(np.unique(groups))
    if n_groups < 2:
        raise ValueError(f"grouped cross-validation needs at least two groups (clusters); got {n_groups} instead.")
    _check_int("n_repeats", n_repeats, 1)
    gen = check_rng(rng)
    x = np.zeros((len(groups), 1))
    out = []
    if scheme == "loco":
        for k, (tr, te) in enumerate(LeaveOneGroupOut().split(x, groups=groups), start=1):
            out.append(Split(1, k, tr, te))
    elif scheme == "group_kfold":
        _check_int("n_splits", n_splits, 2)
        if n_splits > n_groups:
            raise ValueError(f"`n_splits` must be at most the number of groups ({n_groups}); got {n_splits} instead.")
        for r in range(1, n_repeats + 1):
            cv = GroupKFold(n_splits=n_splits, shuffle=True, random_state=int(gen.integers(2**31 - 1)))
            for k, (tr, te) in enumerate(cv.split(x, groups=groups), start=1):
                out.append(Split(r, k, tr, te))
    else:
        if isinstance(test_size, bool) or not _is_real(test_size) or not 0 < test_size < 1:
            raise ValueError(f"`test_size` must be a number in (0, 1); got {test_size!r} instead.")
        cv = GroupShuffleSplit(n_splits=1, test_size=test_size, random_state=int(gen.integers(2**31 - 1)))
        tr, te = next(cv.split(x, groups=groups))
        out.append(Split(1, 1, tr, te))
    return out


@dataclass(frozen=True, eq=False)
class EnsembleFit:
    """Cross-validated performance and importances of one estimator for one LLM.

    Attributes
    ----------
    model : str
    n : int
        Rows used (complete cases).
    n_excluded : int
    n_clusters : int
    scores : pandas.DataFrame
        One row per scheme: ``r2``, ``rmse`` (pooled out-of-fold; for ``group_kfold`` the mean
        over repeats, with ``r2_sd`` / ``rmse_sd`` across repeats), ``baseline_r2``,
        ``baseline_rmse`` (constant prediction = mean of the training fold), ``r2_gain``
        (``r2 - baseline_r2``), ``beats_baseline`` and ``n_folds``.
    folds : pandas.DataFrame
        One row per scheme, repeat, fold and metric (``r2``, ``rmse``, ``baseline_r2``,
        ``baseline_rmse``) on the fold's test rows.
    importances : pandas.DataFrame
        Out-of-fold permutation importance per feature: ``mean``, ``sd``, ``min``, ``max``
        across folds, ``share_positive`` and ``n_folds`` (increase in test MSE when the
        feature is shuffled within the test fold).
    importance_folds : pandas.DataFrame
        The per-fold importances (feature x fold).

    Examples
    --------
    Six clusters of four tools whose selection rate rises with ``f1``; a small forest:

    >>> import numpy as np
    >>> import pandas as pd
    >>> import toolbias_stats as tbs
    >>> gen = np.random.default_rng(0)
    >>> table = pd.DataFrame({"tool_id": [f"t{i}" for i in range(24)], "cluster_id": np.repeat(list("abcdef"), 4),
    ...                       "f1": gen.normal(size=24), "f2": gen.normal(size=24)})
    >>> feats = tbs.ToolFeatures(table=table, feature_names=("f1", "f2"))
    >>> rates = pd.DataFrame({"model": "m", "tool_id": table["tool_id"], "rate": 0.25 + 0.1 * table["f1"]})
    >>> fit = ensemble_cv(feats, rates, n_estimators=10, n_repeats=1, n_permutations=2, schemes=["loco"],
    ...                   rng=1).fit_for("m")
    >>> fit.n, fit.n_clusters, fit.score("loco", "r2") > fit.score("loco", "baseline_r2")
    (24, 6, True)
    """

    model: str
    n: int
    n_excluded: int
    n_clusters: int
    scores: pd.DataFrame
    folds: pd.DataFrame
    importances: pd.DataFrame
    importance_folds: pd.DataFrame

    def score(self, scheme: str = "loco", metric: str = "r2") -> float:
        """One summary number, e.g. ``score("loco", "r2")``."""
        row = self.scores[self.scores["scheme"] == scheme]
        return float(row[metric].iloc[0]) if len(row) else np.nan

    def to_dict(self, primary: str = "loco") -> dict[str, Any]:
        schemes = {}
        for row in self.scores.to_dict(orient="records"):
            schemes[row["scheme"]] = {k: (int(v) if k in ("n_folds", "n_repeats") else _num(v))
                                      for k, v in row.items() if k != "scheme"}
        imp = {r["feature"]: {"mean": _num(r["mean"]), "sd": _num(r["sd"]), "min": _num(r["min"]),
                              "max": _num(r["max"]), "share_positive": _num(r["share_positive"]),
                              "n_folds": int(r["n_folds"])}
               for r in self.importances.to_dict(orient="records")}
        main = primary if primary in schemes else (next(iter(schemes)) if schemes else None)
        get = (lambda k: schemes[main][k]) if main else (lambda k: None)
        return {"cv_scheme": main, "cv_r2": get("r2"), "cv_rmse": get("rmse"), "baseline_r2": get("baseline_r2"),
                "baseline_rmse": get("baseline_rmse"), "beats_baseline": get("beats_baseline"), "n": self.n,
                "n_excluded": self.n_excluded, "n_clusters": self.n_clusters, "schemes": schemes, "importances": imp}


@dataclass(frozen=True, eq=False)
class EnsembleResult(ReprHTMLMixin):
    """Result of :func:`ensemble_cv`.

    Attributes
    ----------
    estimator : str
        ``"random_forest"`` or ``"gradient_boosting"``.
    fits : list of EnsembleFit
    feature_names : list of str
    center : bool
    schemes : list of str
    params : dict
        Estimator hyper-parameters and validation settings (n_splits, n_repeats, test_size,
        n_permutations, importance scheme).
    seed : int, None or "generator"
    dropped_features : list of str
    warnings : list of str
    notes : list of str
    elapsed_s : float

    Examples
    --------

    >>> import numpy as np
    >>> import pandas as pd
    >>> import toolbias_stats as tbs
    >>> gen = np.random.default_rng(0)
    >>> table = pd.DataFrame({"tool_id": [f"t{i}" for i in range(24)], "cluster_id": np.repeat(list("abcdef"), 4),
    ...                       "f1": gen.normal(size=24), "f2": gen.normal(size=24)})
    >>> feats = tbs.ToolFeatures(table=table, feature_names=("f1", "f2"))
    >>> rates = pd.DataFrame({"model": "m", "tool_id": table["tool_id"], "rate": 0.25 + 0.1 * table["f1"]})
    >>> res = ensemble_cv(feats, rates, n_estimators=10, n_repeats=1, n_permutations=2, schemes=["loco"], rng=1)
    >>> res.summary_frame()[["model", "estimator", "scheme", "beats_baseline"]]
      model      estimator scheme  beats_baseline
    0     m  random_forest   loco            True
    """

    estimator: str
    fits: list
    feature_names: list
    center: bool
    schemes: list
    params: dict
    seed: object
    dropped_features: list = field(default_factory=list)
    warnings: list = field(default_factory=list)
    notes: list = field(default_factory=list)
    elapsed_s: float = np.nan

    def to_frame(self) -> pd.DataFrame:
        """Tidy, unrounded: one row per LLM, scheme, repeat, fold and metric."""
        parts = [f.folds for f in self.fits]
        return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=list(_FOLD_COLUMNS))

    def summary_frame(self) -> pd.DataFrame:
        """One row per LLM and scheme: cross-validated R^2 / RMSE next to the constant baseline."""
        parts = []
        for f in self.fits:
            s = f.scores.copy()
            s.insert(0, "model", f.model)
            s.insert(1, "estimator", self.estimator)
            s["n"] = f.n
            parts.append(s)
        return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()

    def importances_frame(self) -> pd.DataFrame:
        """One row per LLM and feature: permutation importance summarised across folds."""
        parts = []
        for f in self.fits:
            t = f.importances.copy()
            t.insert(0, "model", f.model)
            t.insert(1, "estimator", self.estimator)
            parts.append(t)
        return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()

    def fit_for(self, model: str) -> EnsembleFit:
        for f in self.fits:
            if f.model == model:
                return f
        raise KeyError(f"no fit for model {model!r}; have {[f.model for f in self.fits]}")

    def to_dict(self) -> dict:
        return {f.model: f.to_dict() for f in self.fits}


def ensemble_cv(features: ToolFeatures, rates: BiasResult | ToolFeatures | pd.DataFrame | None = None, *,
                estimator: Literal["random_forest", "gradient_boosting"] = "random_forest", center: bool = True,
                feature_names: Sequence[str] | None = None, schemes: Sequence[str] = SCHEMES, n_splits: int = 5,
                n_repeats: int = 5, test_size: float = 0.2, n_estimators: int = 200, max_depth: int | None = None,
                learning_rate: float = 0.05, n_permutations: int = 10, importance_scheme: str = "loco",
                rng: int | np.random.Generator | None = None, n_jobs: int = 1,
                progress: bool = False) -> EnsembleResult:
    """Cross-validate a random forest or gradient boosting per LLM, grouped by cluster, against a constant baseline.

    Parameters
    ----------
    features : ToolFeatures
    rates : BiasResult, DataFrame or None
        Per-LLM selection rates; None uses the rates the feature table carries.
    estimator : {"random_forest", "gradient_boosting"}, default "random_forest"
        ``sklearn.ensemble.RandomForestRegressor`` or ``xgboost.XGBRegressor``.
    center : bool, default True
        Centre features and rates on their cluster means (as for the paper's forests).
    feature_names : sequence of str, optional
        Default: the paper's seven features when present, else every feature.
    schemes : sequence of {"loco", "group_kfold", "holdout"}, default all three
        Leave-one-cluster-out, repeated GroupKFold, and one grouped held-out split.
    n_splits : int, default 5
        Folds of ``group_kfold``.
    n_repeats : int, default 5
        Repeats of ``group_kfold`` (new group shuffle each time).
    test_size : float, default 0.2
        Share of clusters held out by ``holdout``.
    n_estimators : int, default 200
        Trees (forest) or boosting rounds.
    max_depth : int, optional
        Tree depth; default unlimited for the forest, 3 for boosting.
    learning_rate : float, default 0.05
        Boosting only.
    n_permutations : int, default 10
        Shuffles per feature and fold for the permutation importance (0 skips importances).
    importance_scheme : str, default "loco"
        Scheme whose test folds give the permutation importances (its first repeat).
    rng : None, int or numpy.random.Generator
        The only source of randomness (splits, estimator seeds, permutations): the same seed
        gives identical output.
    n_jobs : int, default 1
        Threads per estimator.
    progress : bool, default False
        Progress bar over LLMs.

    Returns
    -------
    EnsembleResult

    Warns
    -----
    SmallSampleWarning
        When an LLM has fewer than 3 clusters (no grouped CV possible; its scores are NaN).
    DegenerateDataWarning
        For dropped features.

    Notes
    -----
    Rows are the tools with every feature and the rate present. Every scheme keeps all tools
    of a cluster on one side of each split, so the score measures prediction for *unseen
    clusters* of tools. For each test fold the estimator is fitted on the training fold, and the
    **constant baseline** predicts the training fold's mean. ``r2`` and ``rmse`` are computed
    from the pooled out-of-fold predictions (every row predicted once per repeat;
    ``r2 = 1 - SSE / SST`` with SST about the mean of all rows), the same for the baseline.
    A negative ``r2_gain`` means the model predicts unseen clusters *worse than a constant*
    (BiasBusters F.1 reports exactly that for random forests).

    Permutation importance (Breiman 2001) is computed out of fold: in each test fold of
    ``importance_scheme`` every feature is shuffled ``n_permutations`` times and the mean rise
    of the test MSE recorded; ``mean``/``sd`` are across folds. Importances of a model that
    does not beat the baseline describe noise and should not be read as explanations.

    Examples
    --------
    Six clusters of four tools whose selection rate rises with ``f1`` (``f2`` is noise); a small forest:

    >>> import numpy as np
    >>> import pandas as pd
    >>> import toolbias_stats as tbs
    >>> gen = np.random.default_rng(0)
    >>> table = pd.DataFrame({"tool_id": [f"t{i}" for i in range(24)], "cluster_id": np.repeat(list("abcdef"), 4),
    ...                       "f1": gen.normal(size=24), "f2": gen.normal(size=24)})
    >>> feats = tbs.ToolFeatures(table=table, feature_names=("f1", "f2"))
    >>> rates = pd.DataFrame({"model": "m", "tool_id": table["tool_id"], "rate": 0.25 + 0.1 * table["f1"]})
    >>> res = ensemble_cv(feats, rates, n_estimators=10, n_repeats=1, n_permutations=2, rng=1)
    >>> res.summary_frame()[["model", "scheme", "beats_baseline", "n_folds"]]
      model       scheme  beats_baseline  n_folds
    0     m         loco            True        6
    1     m  group_kfold            True        5
    2     m      holdout            True        1
    >>> imp = res.fit_for("m").importances.set_index("feature")["mean"]
    >>> bool(imp["f1"] > 0.001 > abs(imp["f2"]))    # shuffling f1 hurts the predictions, shuffling f2 does not
    True
    """
    t0 = time.perf_counter()
    check_choice("estimator", estimator, ESTIMATORS)
    schemes = [schemes] if isinstance(schemes, str) else list(schemes)
    if not schemes:
        raise ValueError("`schemes` must name at least one of 'loco', 'group_kfold', 'holdout'; got none instead.")
    for s in schemes:
        check_choice("schemes", s, SCHEMES)
    _check_int("n_splits", n_splits, 2)
    _check_int("n_repeats", n_repeats, 1)
    _check_int("n_estimators", n_estimators, 1)
    _check_int("n_permutations", n_permutations, 0)
    if max_depth is not None:
        _check_int("max_depth", max_depth, 1)
    check_choice("importance_scheme", importance_scheme, SCHEMES)
    seed = rng if isinstance(rng, (int, type(None))) else "generator"
    gen = check_rng(rng)
    caught: list = []
    d = design(features, rates, center=center, feature_names=feature_names, caught=caught)
    names = list(d.feature_names)
    params = _params(estimator, n_estimators, max_depth, learning_rate, n_jobs)
    fits = []
    models = d.models
    if progress:
        from tqdm.auto import tqdm

        models = tqdm(models, desc=estimator.replace("_", " "), unit="LLM", leave=False)
    with _openmp_limit(n_jobs):
        for m in models:
            child = np.random.default_rng(gen.integers(2**63 - 1))
            fits.append(_fit_one(m, d.frames[m], names, estimator, params, schemes, n_splits, n_repeats,
                                 test_size, n_permutations, importance_scheme, child, caught))
    notes = list(d.notes) + [
        "complete cases; every split keeps a cluster's tools together (groups = clusters)",
        "r2 / rmse: pooled out-of-fold predictions; baseline: the training fold's mean",
        "permutation importance: out of fold, rise in test MSE, spread across folds",
    ]
    settings = dict(params, n_splits=n_splits, n_repeats=n_repeats, test_size=test_size,
                    n_permutations=n_permutations, importance_scheme=importance_scheme)
    return EnsembleResult(estimator=estimator, fits=fits, feature_names=names, center=d.center, schemes=schemes,
                          params=settings, seed=seed, dropped_features=list(d.dropped_features), warnings=caught,
                          notes=notes, elapsed_s=time.perf_counter() - t0)


def random_forest_cv(features: ToolFeatures, rates: BiasResult | ToolFeatures | pd.DataFrame | None = None,
                     **kwargs: Any) -> EnsembleResult:
    """:func:`ensemble_cv` with ``estimator="random_forest"`` (scikit-learn ``RandomForestRegressor``).

    Parameters
    ----------
    features : ToolFeatures
    rates : BiasResult, ToolFeatures, DataFrame or None
        Per-LLM selection rates; None uses the rates the feature table carries.
    **kwargs
        Any other argument of :func:`ensemble_cv`.

    Returns
    -------
    EnsembleResult

    Examples
    --------
    >>> import numpy as np
    >>> import pandas as pd
    >>> import toolbias_stats as tbs
    >>> gen = np.random.default_rng(0)
    >>> table = pd.DataFrame({"tool_id": [f"t{i}" for i in range(24)], "cluster_id": np.repeat(list("abcdef"), 4),
    ...                       "f1": gen.normal(size=24), "f2": gen.normal(size=24)})
    >>> feats = tbs.ToolFeatures(table=table, feature_names=("f1", "f2"))
    >>> rates = pd.DataFrame({"model": "m", "tool_id": table["tool_id"], "rate": 0.25 + 0.1 * table["f1"]})
    >>> res = random_forest_cv(feats, rates, n_estimators=10, n_repeats=1, n_permutations=2, schemes=["loco"], rng=1)
    >>> res.summary_frame()[["estimator", "beats_baseline"]]
           estimator  beats_baseline
    0  random_forest            True
    """
    return ensemble_cv(features, rates, estimator="random_forest", **kwargs)


def gradient_boosting_cv(features: ToolFeatures, rates: BiasResult | ToolFeatures | pd.DataFrame | None = None,
                         **kwargs: Any) -> EnsembleResult:
    """:func:`ensemble_cv` with ``estimator="gradient_boosting"`` (xgboost ``XGBRegressor``).

    Parameters
    ----------
    features : ToolFeatures
    rates : BiasResult, ToolFeatures, DataFrame or None
        Per-LLM selection rates; None uses the rates the feature table carries.
    **kwargs
        Any other argument of :func:`ensemble_cv`.

    Returns
    -------
    EnsembleResult

    Examples
    --------
    >>> import numpy as np
    >>> import pandas as pd
    >>> import toolbias_stats as tbs
    >>> gen = np.random.default_rng(0)
    >>> table = pd.DataFrame({"tool_id": [f"t{i}" for i in range(24)], "cluster_id": np.repeat(list("abcdef"), 4),
    ...                       "f1": gen.normal(size=24), "f2": gen.normal(size=24)})
    >>> feats = tbs.ToolFeatures(table=table, feature_names=("f1", "f2"))
    >>> rates = pd.DataFrame({"model": "m", "tool_id": table["tool_id"], "rate": 0.25 + 0.1 * table["f1"]})
    >>> res = gradient_boosting_cv(feats, rates, n_estimators=10, n_repeats=1, n_permutations=2, schemes=["loco"],
    ...                            rng=1)
    >>> res.summary_frame()[["estimator", "beats_baseline"]]
               estimator  beats_baseline
    0  gradient_boosting            True
    """
    return ensemble_cv(features, rates, estimator="gradient_boosting", **kwargs)


# -- internals -------------------------------------------------------------------------------------
def _params(estimator, n_estimators, max_depth, learning_rate, n_jobs):
    if estimator == "random_forest":
        return {"library": "scikit-learn", "class": "RandomForestRegressor", "n_estimators": n_estimators,
                "max_depth": max_depth, "n_jobs": n_jobs}
    return {"library": "xgboost", "class": "XGBRegressor", "n_estimators": n_estimators,
            "max_depth": 3 if max_depth is None else max_depth, "learning_rate": float(learning_rate),
            "subsample": 0.8, "colsample_bytree": 0.8, "tree_method": "hist", "n_jobs": n_jobs}


def _openmp_limit(n_jobs):
    """One OpenMP thread while fitting with ``n_jobs=1``.

    xgboost trains with ``n_jobs`` threads but sets up each fit's data (labels, the booster reset) with OpenMP's
    default team; with 40-odd rows those threads only wait, and on a busy machine the waiting cost 60 % of the
    boosting time. The fitted models do not depend on it (the test compares).
    """
    from contextlib import nullcontext

    if n_jobs != 1:
        return nullcontext()
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover - a scikit-learn dependency
        return nullcontext()
    return threadpool_limits(limits=1, user_api="openmp")


def _make(estimator, params, seed):
    if estimator == "random_forest":
        if params["n_jobs"] == 1 and _BaggedTrees.available():
            return _BaggedTrees(params["n_estimators"], params["max_depth"], seed)
        from sklearn.ensemble import RandomForestRegressor

        return RandomForestRegressor(n_estimators=params["n_estimators"], max_depth=params["max_depth"],
                                     random_state=seed, n_jobs=params["n_jobs"])
    from xgboost import XGBRegressor

    return XGBRegressor(n_estimators=params["n_estimators"], max_depth=params["max_depth"],
                        learning_rate=params["learning_rate"], subsample=params["subsample"],
                        colsample_bytree=params["colsample_bytree"], tree_method=params["tree_method"],
                        n_jobs=params["n_jobs"], random_state=seed, verbosity=0)


class _BaggedTrees:
    """``RandomForestRegressor(n_estimators, max_depth=max_depth, random_state=seed)`` (defaults otherwise) for
    dense, complete data, built with scikit-learn's own tree builder but without the per-tree estimator objects.

    scikit-learn spends about 0.9 ms of Python per tree (cloning, parameter checks, sample-weight checks) on
    top of building it; with 40-odd rows that is nearly all of the time, and the explanation models fit
    252 forests of 200 trees. This class performs the forest's steps with the same random numbers: the
    forest's ``RandomState(seed)`` draws one seed per tree; each tree's bootstrap counts come from a fresh
    ``RandomState(tree seed)`` (``randint(0, n, n)``), its splitter gets another fresh one; ``BestSplitter``
    with all features, squared error, ``min_samples_split=2``, ``min_samples_leaf=1``, depth-first
    building (the random states are re-seeded, which equals fresh ones); the prediction is the sum of the
    trees' predictions in order, divided by their number (float32 inputs, float64 sums). The result is
    bit-for-bit that of ``RandomForestRegressor`` (tests/models/test_explain_forest.py checks predictions on
    random data and the whole BiasBusters cross-validation); used only with ``n_jobs=1`` and a scikit-learn
    release it was checked against, otherwise ``RandomForestRegressor`` itself is used.
    """

    _TESTED = ("1.9.",)

    def __init__(self, n_estimators, max_depth, seed):
        self.n_estimators = int(n_estimators)
        self.max_depth = max_depth
        self.seed = seed
        self.trees_ = []

    @classmethod
    def available(cls) -> bool:
        try:
            import sklearn
            from sklearn.tree._criterion import MSE  # noqa: F401
            from sklearn.tree._splitter import BestSplitter  # noqa: F401
            from sklearn.tree._tree import DepthFirstTreeBuilder, Tree  # noqa: F401
        except ImportError:  # pragma: no cover - private modules moved
            return False
        return sklearn.__version__.startswith(cls._TESTED)

    def fit(self, x, y):
        from sklearn.tree._criterion import MSE
        from sklearn.tree._splitter import BestSplitter
        from sklearn.tree._tree import DepthFirstTreeBuilder, Tree

        x32 = np.ascontiguousarray(x, dtype=np.float32)
        y2 = np.ascontiguousarray(np.reshape(y, (-1, 1)), dtype=np.float64)
        n, p = x32.shape
        max_int = np.iinfo(np.int32).max
        depth = max_int if self.max_depth is None else int(self.max_depth)
        forest_rs = np.random.RandomState(self.seed)
        seeds = [forest_rs.randint(max_int) for _ in range(self.n_estimators)]
        n_outputs = np.array([1], dtype=np.intp)
        # re-seeding gives the state of a fresh RandomState(s) (1.5 us instead of 100 us for a new object)
        boot_rs, split_rs = np.random.RandomState(0), np.random.RandomState(0)
        trees = []
        for s in seeds:
            boot_rs.seed(s)
            split_rs.seed(s)
            counts = boot_rs.randint(0, n, n).astype(np.int32)
            weight = np.bincount(counts, minlength=n).astype(np.float64)
            splitter = BestSplitter(MSE(1, n), p, 1, 0.0, split_rs, None)
            tree = Tree(p, n_outputs, 1)
            DepthFirstTreeBuilder(splitter, 2, 1, 0.0, depth, 0.0).build(tree, x32, y2, weight, None)
            trees.append(tree)
        self.trees_ = trees
        return self

    def predict(self, x):
        x32 = np.ascontiguousarray(x, dtype=np.float32)
        out = np.zeros(x32.shape[0], dtype=np.float64)
        for tree in self.trees_:
            out += tree.predict(x32).reshape(x32.shape[0], -1)[:, 0]
        out /= len(self.trees_)
        return out


def _fit_one(model, frame, names, estimator, params, schemes, n_splits, n_repeats, test_size, n_perm,
             importance_scheme, gen, caught) -> EnsembleFit:
    ok = frame[["y", *names]].notna().all(axis=1)
    data = frame.loc[ok].reset_index(drop=True)
    x = data[names].to_numpy(dtype=float)
    y = data["y"].to_numpy(dtype=float)
    groups = data["cluster_id"].astype(str).to_numpy()
    n_clusters = len(np.unique(groups))
    score_rows: list[dict] = []
    fold_rows: list[dict] = []
    imp_rows: list[dict] = []
    if n_clusters < 3 or not names:
        msg = (f"{model}: {n_clusters} cluster(s) with complete rows: grouped cross-validation needs at least 3; "
               f"{estimator} scores are NaN")
        warnings.warn(msg, SmallSampleWarning, stacklevel=3)
        caught.append(msg)
    else:
        for scheme in schemes:
            k = min(n_splits, n_clusters) if scheme == "group_kfold" else n_splits
            splits = grouped_splits(groups, scheme=scheme, n_splits=k, n_repeats=n_repeats, test_size=test_size,
                                    rng=gen)
            repeats = sorted({s.repeat for s in splits})
            r2s, rmses, b_r2s, b_rmses = [], [], [], []
            for r in repeats:
                oof = np.full(len(y), np.nan)
                base = np.full(len(y), np.nan)
                for s in (s for s in splits if s.repeat == r):
                    est = _make(estimator, params, int(gen.integers(2**31 - 1)))
                    est.fit(x[s.train], y[s.train])
                    pred = est.predict(x[s.test])
                    oof[s.test] = pred
                    base[s.test] = y[s.train].mean()
                    yt = y[s.test]
                    label = ",".join(sorted(np.unique(groups[s.test]), key=_natural))
                    for metric, value in (("r2", _r2(yt, pred)), ("rmse", _rmse(yt, pred)),
                                          ("baseline_r2", _r2(yt, base[s.test])),
                                          ("baseline_rmse", _rmse(yt, base[s.test]))):
                        fold_rows.append({"model": model, "estimator": estimator, "scheme": scheme, "repeat": r,
                                          "fold": s.fold, "n_train": len(s.train), "n_test": len(s.test),
                                          "test_clusters": label, "metric": metric, "value": value})
                    if scheme == importance_scheme and r == repeats[0] and n_perm:
                        imp_rows.extend({"feature": f, "fold": s.fold, "test_clusters": label, "importance": v}
                                        for f, v in zip(names, _perm_importance(est, x[s.test], yt, n_perm, gen)))
                done = np.isfinite(oof)
                r2s.append(_r2(y[done], oof[done]))
                rmses.append(_rmse(y[done], oof[done]))
                b_r2s.append(_r2(y[done], base[done]))
                b_rmses.append(_rmse(y[done], base[done]))
            r2, b_r2 = float(np.mean(r2s)), float(np.mean(b_r2s))
            score_rows.append({
                "scheme": scheme, "r2": r2, "rmse": float(np.mean(rmses)),
                "r2_sd": float(np.std(r2s, ddof=1)) if len(r2s) > 1 else np.nan,
                "rmse_sd": float(np.std(rmses, ddof=1)) if len(rmses) > 1 else np.nan,
                "baseline_r2": b_r2, "baseline_rmse": float(np.mean(b_rmses)), "r2_gain": r2 - b_r2,
                "beats_baseline": bool(np.mean(rmses) < np.mean(b_rmses)), "n_folds": len(splits),
                "n_repeats": len(repeats)})
    scores = pd.DataFrame(score_rows, columns=["scheme", "r2", "rmse", "r2_sd", "rmse_sd", "baseline_r2",
                                               "baseline_rmse", "r2_gain", "beats_baseline", "n_folds", "n_repeats"])
    folds = pd.DataFrame(fold_rows, columns=list(_FOLD_COLUMNS))
    per_fold = pd.DataFrame(imp_rows, columns=["feature", "fold", "test_clusters", "importance"])
    summary = []
    for f in names:
        v = per_fold.loc[per_fold["feature"] == f, "importance"].to_numpy(dtype=float)
        summary.append({"feature": f, "mean": float(v.mean()) if v.size else np.nan,
                        "sd": float(v.std(ddof=1)) if v.size > 1 else np.nan,
                        "min": float(v.min()) if v.size else np.nan, "max": float(v.max()) if v.size else np.nan,
                        "share_positive": float((v > 0).mean()) if v.size else np.nan, "n_folds": int(v.size)})
    return EnsembleFit(model=model, n=len(y), n_excluded=int((~ok).sum()), n_clusters=n_clusters, scores=scores,
                       folds=folds, importances=pd.DataFrame(summary, columns=["feature", "mean", "sd", "min", "max",
                                                                                "share_positive", "n_folds"]),
                       importance_folds=per_fold)


def _perm_importance(est, x, y, n_perm, gen) -> np.ndarray:
    """Mean rise in MSE when each column of the test fold is shuffled (all shuffles in one predict call)."""
    m, p = x.shape
    base = np.mean((y - est.predict(x)) ** 2)
    stacked = np.repeat(x[None, None], p, axis=0).repeat(n_perm, axis=1)    # (p, R, m, p)
    for j in range(p):
        for r in range(n_perm):
            stacked[j, r, :, j] = x[gen.permutation(m), j]
    pred = est.predict(stacked.reshape(-1, p)).reshape(p, n_perm, m)
    mse = ((pred - y[None, None]) ** 2).mean(axis=2)                        # (p, R)
    return mse.mean(axis=1) - base


def _r2(y, pred) -> float:
    y = np.asarray(y, dtype=float)
    if y.size < 2:
        return np.nan
    sst = float(((y - y.mean()) ** 2).sum())
    if sst <= 0:
        return np.nan
    return 1.0 - float(((y - pred) ** 2).sum()) / sst


def _rmse(y, pred) -> float:
    y = np.asarray(y, dtype=float)
    return float(np.sqrt(np.mean((y - pred) ** 2))) if y.size else np.nan


def _check_int(name, value, minimum):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
        raise ValueError(f"`{name}` must be an integer >= {minimum}; got {value!r} instead.")
    return int(value)


def _natural(x):
    return (0, int(x), "") if str(x).isdigit() else (1, 0, str(x))


def _num(v):
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    try:
        v = float(v)
    except (TypeError, ValueError):
        return None
    return v if np.isfinite(v) else None
