"""Decoding methods as ``custom_generate`` callables (transformers' home for generation strategies).

* :mod:`hfx.generation.thinkmerge` -- ThinkMerge (arXiv 2512.02874).
* :mod:`hfx.generation.rmod` -- RMOD, robust multi-objective controlled decoding (arXiv 2503.08796).
* :mod:`hfx.generation.registry` -- the hook that resolves ``custom_generate="thinkmerge"`` / ``"rmod"``.
"""

from .registry import (
    CUSTOM_GENERATE_NAMES,
    install_custom_generate_names,
    register_custom_generate,
    resolve_custom_generate,
    uninstall_custom_generate_names,
)


def __getattr__(name):
    # `hfx.generation.rmod` / `.thinkmerge` after a bare `import hfx` (submodules load on first access)
    if name in ("thinkmerge", "rmod"):
        import importlib

        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
