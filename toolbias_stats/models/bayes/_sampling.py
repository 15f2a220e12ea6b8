"""Running NUTS on a model (PyMC, PyMC-numba, nutpie or NumPyro) and the convergence diagnostics."""

from __future__ import annotations

import contextlib
import os
import sys
import warnings
from typing import Any

import numpy as np

#: Extras that provide the optional samplers (``pip install 'toolbias_stats[<extra>]'``).
_EXTRAS = {"nutpie": ("nutpie", "nutpie"), "numpyro": ("numpyro", "numpyro")}


class _Raw:
    def __init__(self, posterior, sample_stats):
        self.posterior = posterior
        self.sample_stats = sample_stats


def _sample(spec, *, sampler, draws, tune, chains, cores, seed, target_accept, progress, initvals=None) -> _Raw:
    """Run NUTS on ``spec``'s model; ``initvals`` (experimental, issue 22): starting points of the chains.

    ``initvals`` is None (PyMC's jittered default start, unchanged) or one mapping, or a sequence of ``chains``
    mappings, from free-variable names to arrays of their shapes; the chains then start exactly there (no
    jitter: spread them yourself, e.g. with posterior draws of an earlier fit). NumPyro and PyMC only.
    """
    if initvals is not None and sampler not in ("numpyro", "pymc", "pymc-numba"):
        raise ValueError(f"initvals needs sampler='numpyro' or 'pymc' (got {sampler!r})")
    if sampler == "numpyro":
        _jax_compilation_cache()                # before anything imports jax (``_require`` does)
    if sampler in _EXTRAS:
        _require(sampler)
    if sampler == "numpyro" and "jax" not in sys.modules and "XLA_FLAGS" not in os.environ:
        # jax reads this once, at import: one CPU "device" per core lets the chains run in parallel
        os.environ["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={cores}"
    import pymc as pm

    # the back-end, for a model extension that builds a different graph for NumPyro (analyses/bayes_experimental)
    spec.sampler = sampler
    model = spec.build()
    start = None if initvals is None else _check_initvals(model, initvals, chains)
    with warnings.catch_warnings():
        # PyMC's own convergence messages are replaced by ours (one place, with thresholds)
        warnings.simplefilter("ignore", UserWarning)
        warnings.simplefilter("ignore", RuntimeWarning)
        warnings.simplefilter("ignore", FutureWarning)
        with model:
            if sampler in ("pymc", "pymc-numba"):
                kw: dict[str, Any] = {"compile_kwargs": {"mode": "NUMBA"}} if sampler == "pymc-numba" else {}
                if start is not None:
                    kw.update(initvals=start, init="adapt_diag")      # adapt_diag: no jitter on the start
                idata = pm.sample(draws=draws, tune=tune, chains=chains, cores=cores, random_seed=seed,
                                  target_accept=target_accept, progressbar=progress, quiet=not progress,
                                  compute_convergence_checks=False, idata_kwargs={"log_likelihood": False}, **kw)
            elif sampler == "nutpie":
                idata = pm.sample(draws=draws, tune=tune, chains=chains, cores=cores, random_seed=seed,
                                  target_accept=target_accept, progressbar=progress, nuts_sampler="nutpie",
                                  compute_convergence_checks=False)
            else:
                nkw: dict[str, Any] = {"chain_method": "parallel"}
                skw: dict[str, Any] = {}
                if start is not None:
                    nkw["jitter"] = False
                    skw["initvals"] = start
                with _jitted_initial_point_check():
                    idata = pm.sample(draws=draws, tune=tune, chains=chains, random_seed=seed,
                                      target_accept=target_accept, progressbar=progress, nuts_sampler="numpyro",
                                      compute_convergence_checks=False, nuts_sampler_kwargs=nkw, **skw)
    return _Raw(idata.posterior, idata.sample_stats)


def _check_initvals(model, initvals, chains) -> list:
    """Validate ``initvals`` against the model's free variables: a list of ``chains`` {name: array} dicts."""
    from collections.abc import Mapping, Sequence

    if isinstance(initvals, Mapping):
        initvals = [initvals] * chains
    if not isinstance(initvals, Sequence) or isinstance(initvals, str) or len(initvals) != chains:
        raise ValueError(f"initvals must be a mapping or a sequence of {chains} mappings (one per chain)")
    shapes = _free_shapes(model)
    out = []
    for i, iv in enumerate(initvals):
        if not isinstance(iv, Mapping):
            raise ValueError(f"initvals[{i}] must be a mapping of free-variable names to arrays")
        unknown = sorted(set(iv) - set(shapes))
        if unknown:
            raise ValueError(f"initvals[{i}]: unknown variable(s) {unknown}; the model's free variables are "
                             f"{sorted(shapes)}")
        chain = {}
        for name, val in iv.items():
            arr = np.asarray(val, dtype=float)
            if arr.shape != shapes[name]:
                raise ValueError(f"initvals[{i}][{name!r}] has shape {arr.shape}, the variable {shapes[name]}")
            if not np.all(np.isfinite(arr)):
                raise ValueError(f"initvals[{i}][{name!r}] has non-finite values")
            chain[name] = arr
        out.append(chain)
    return out


def _free_shapes(model) -> dict:
    """{free-variable name: shape} of a PyMC model."""
    point = model.initial_point()
    return {rv.name: tuple(np.shape(point[model.rvs_to_values[rv].name])) for rv in model.free_RVs}


#: where NumPyro's compiled XLA programs are kept between processes (``"0"``: not kept); default: the
#: ``jax`` folder of the package's cache (``$TOOLBIAS_CACHE_DIR``, else ``~/.cache/toolbias_stats``)
JAX_CACHE_ENV = "TOOLBIAS_STATS_JAX_CACHE"


def _jax_compilation_cache() -> None:
    """Keep JAX's compiled programs on disk so that a later fit of the same model skips XLA compilation.

    A NumPyro fit of v2 on the bundled study compiles ~30 XLA programs (~5 s of a ~30 s fit); with JAX's
    persistent cache (in the ``jax`` folder of :func:`toolbias_stats.features.default_cache_dir`, beside the
    embedding cache) a later process loads them instead. The cached program is the one that would be
    compiled, so a seed gives the same draws (checked in the tests). A cache directory the user chose
    (``JAX_COMPILATION_CACHE_DIR`` or ``jax.config``) is left alone; ``TOOLBIAS_STATS_JAX_CACHE=0``
    turns this off, any other value is the directory. Nothing happens when the directory cannot be made.
    """
    choice = os.environ.get(JAX_CACHE_ENV, "")
    if choice == "0" or os.environ.get("JAX_COMPILATION_CACHE_DIR"):
        return
    if not choice:
        from ...features import default_cache_dir

        choice = str(default_cache_dir() / "jax")
    try:
        os.makedirs(choice, exist_ok=True)
    except OSError:
        return
    if "jax" not in sys.modules:
        # read by jax at import; every program, not only those that take a second to compile
        os.environ["JAX_COMPILATION_CACHE_DIR"] = choice
        os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")
        os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES", "0")
        return
    import jax

    if jax.config.jax_compilation_cache_dir is None:
        jax.config.update("jax_compilation_cache_dir", choice)


@contextlib.contextmanager
def _jitted_initial_point_check():
    """Let PyMC check the chains' jittered starting points with a jit-compiled log-density.

    Before NumPyro starts, PyMC (5.x) evaluates the model's log-density at each chain's jittered starting
    point with the JAX function un-jitted, i.e. operation by operation, which compiles every operation
    separately: ~130 XLA compilations and ~1 s per chain on the bundled study. The values only decide
    whether a starting point is finite (else it draws another), so a jit-compiled twin of the same function
    picks the same points and the sampling is unchanged. Where PyMC's internals differ, nothing is changed.
    """
    try:
        import jax
        from pymc.sampling import jax as pm_jax

        original = pm_jax._get_batched_jittered_initial_points
    except (ImportError, AttributeError):
        yield
        return

    def jitted(*args, logp_fn=None, **kwargs):
        return original(*args, logp_fn=None if logp_fn is None else jax.jit(logp_fn), **kwargs)

    pm_jax._get_batched_jittered_initial_points = jitted
    try:
        yield
    finally:
        pm_jax._get_batched_jittered_initial_points = original


def _require(sampler):
    module, extra = _EXTRAS[sampler]
    try:
        __import__(module)
    except ImportError as exc:
        raise ImportError(f"sampler={sampler!r} needs the optional dependency {module!r}; install it with "
                          f"pip install 'toolbias_stats[{extra}]'") from exc


def _identified(post, design) -> dict:
    """Flattened (chain, draw, n) arrays of every identified parameter (padding dropped).

    The gate covers every effect and scale the summaries report (alpha, mu, beta, beta_bar, the
    per-cluster position effects, the sigmas and kappa of the cells with data); the individual query
    effects are nuisance parameters that are averaged over and are gated through their scale.
    """
    nch, ndr = post["shape"]
    out = {}
    valid_tool = np.arange(design.Kmax)[None, :] < design.K[:, None]           # (C, Kmax)
    out["mu"] = post["mu"][:, valid_tool].reshape(nch, ndr, -1)
    out["alpha"] = post["alpha"][:, :, valid_tool].reshape(nch, ndr, -1)
    out["beta"] = post["beta"].reshape(nch, ndr, -1)
    out["beta_bar"] = post["beta_bar"].reshape(nch, ndr, -1)
    if "beta_cell" in post:
        shown = np.arange(design.P)[None, :] < design.K[:, None]                # positions a cluster can have
        out["beta_cell"] = post["beta_cell"][:, :, shown].reshape(nch, ndr, -1)
    for k in ("sigma_alpha", "sigma_beta", "sigma_delta"):
        if k in post:
            out[k] = post[k].reshape(nch, ndr)
    for k in ("kappa", "gamma", "sigma_eta", "lambda", "epsilon", "sigma_alpha_c"):
        if k in post:
            if k in ("kappa", "gamma", "epsilon"):
                seen = design.cell_counts() > 0                                  # kappa of cells with data
                out[k] = post[k][:, seen].reshape(nch, ndr, -1)
                continue
            out[k] = post[k].reshape(nch, ndr, -1)
    return out


def _diagnostics(post, sample_stats, design) -> dict:
    import arviz as az
    import xarray as xr

    ident = _identified(post, design)
    nch = post["shape"][0]
    ds = xr.Dataset({name: xr.DataArray(arr if arr.ndim == 3 else arr[..., None], dims=("chain", "draw", name + "_i"))
                     for name, arr in ident.items()})
    rh = az.rhat(ds, method="rank") if nch >= 2 else None
    eb = az.ess(ds, method="bulk")
    et = az.ess(ds, method="tail")

    def extreme(d, fn):
        vals = np.concatenate([np.ravel(d[v].values) for v in d.data_vars])
        vals = vals[np.isfinite(vals)]
        return float(fn(vals)) if vals.size else np.nan

    div = int(np.asarray(sample_stats["diverging"]).sum()) if "diverging" in sample_stats else 0
    return {"max_rhat": extreme(rh, np.max) if rh is not None else np.nan, "min_ess_bulk": extreme(eb, np.min),
            "min_ess_tail": extreme(et, np.min), "divergences": div}
