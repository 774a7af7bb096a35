"""One PEP 562 lazy-attribute helper for every hfx package ``__init__`` (the ``_attach`` pattern of huggingface_hub).

A package lists ``name -> module`` (absolute, or relative to the package such as ``".config"``) and gets a module-level
``__getattr__`` that imports the defining module on first access and caches the value in the package namespace, plus
a ``__dir__`` returning the public names. Submodules listed in ``submodules`` resolve as attributes too.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterable, Mapping


def attach(package: str, lazy: Mapping[str, str], public: Iterable[str], submodules: Iterable[str] = ()):
    """Return ``(__getattr__, __dir__)`` for ``package``.

    Args:
        package (`str`): the package's ``__name__``.
        lazy (`Mapping[str, str]`): public name -> module defining it (absolute or relative to ``package``).
        public (`Iterable[str]`): what ``dir(package)`` lists (its ``__all__``).
        submodules (`Iterable[str]`, *optional*): submodule names that resolve as attributes (``package.name``).
    """
    public, submodules = list(public), frozenset(submodules)

    def __getattr__(name):
        if name in lazy:
            value = getattr(importlib.import_module(lazy[name], package), name)
            vars(sys.modules[package])[name] = value
            return value
        if name in submodules:
            return importlib.import_module(f"{package}.{name}")
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    def __dir__():
        return public

    return __getattr__, __dir__
