"""Lazy loading of a package's public names on first use (PEP 562, as scipy and scikit-image do).

A package's ``__init__`` lists where each public name lives; nothing is imported until the name is first
looked up, so ``import toolbias_stats`` and ``toolbias-stats --help`` do not pay for pandas, scipy.stats or
the model stack. ``from pkg import name``, ``pkg.name``, ``from pkg import *`` and ``dir(pkg)`` behave as
with eager imports; a resolved name is cached in the package's namespace (so ``mock.patch`` works too).

Examples
--------
>>> import toolbias_stats as tbs
>>> "selection_bias" in dir(tbs)
True
>>> tbs.tv_to_uniform([1, 0])
0.5
"""

from __future__ import annotations

import importlib
import warnings

__all__ = ["LazyNames"]


class LazyNames:
    """Registry of a package's lazily imported names; ``hooks`` returns its ``__getattr__`` and ``__dir__``."""

    def __init__(self, package: str):
        self.package = package
        self.names: dict[str, tuple[str, str | None]] = {}   # public name -> (module, attribute or None)
        self.renamed: dict[str, tuple[str, str]] = {}       # old name -> (new name, message)

    def add(self, module: str, *names: str) -> None:
        """``add("._bias", "selection_bias", "MODELS as BAYES_MODELS")`` mirrors ``from ._bias import ...``."""
        for spec in names:
            attr, _, alias = (s.strip() for s in spec.partition(" as "))
            self.names[alias or attr] = (module, attr)

    def submodules(self, *names: str) -> None:
        """``submodules("io", "metrics")`` mirrors ``from . import io, metrics``."""
        for name in names:
            self.names[name] = ("." + name, None)

    def rename(self, old: str, new: str, *, since: str, removal: str = "the next minor release") -> None:
        """Keep ``old`` importable for one release as a deprecated alias of the public name ``new``.

        Every lookup of ``old`` (``pkg.old``, ``from pkg import old``) warns with a :class:`DeprecationWarning`
        naming ``new``; ``old`` is in neither ``__all__`` nor ``dir(pkg)``.
        """
        message = f"`{self.package}.{old}` was renamed `{new}` in {since}; `{old}` will be removed in {removal}."
        self.renamed[old] = (new, message)

    def hooks(self, namespace: dict):
        """The module-level ``__getattr__`` and ``__dir__`` of the package whose globals are ``namespace``."""
        names, package, renamed = self.names, self.package, self.renamed

        def __getattr__(name: str):
            if name in renamed:
                new, message = renamed[name]
                warnings.warn(message, DeprecationWarning, stacklevel=2)
                return namespace[new] if new in namespace else __getattr__(new)
            try:
                module, attr = names[name]
            except KeyError:
                raise AttributeError(f"module {package!r} has no attribute {name!r}") from None
            mod = importlib.import_module(module, package)
            value = mod if attr is None else getattr(mod, attr)
            namespace[name] = value   # cached: the next lookup does not come here
            return value

        def __dir__():
            return sorted(set(namespace) | set(names))

        return __getattr__, __dir__
