"""Decoding methods as ``custom_generate`` callables (transformers' home for generation strategies).

* :mod:`hfx.generation.thinkmerge` -- ThinkMerge (arXiv 2512.02874).
* :mod:`hfx.generation.rmod` -- RMOD, robust multi-objective controlled decoding (arXiv 2503.08796).
* :mod:`hfx.generation.budget_forcing` -- budget forcing (s1; arXiv 2501.19393, used by arXiv 2510.06135).
* :mod:`hfx.generation.registry` -- the hook that resolves ``custom_generate="thinkmerge"`` / ``"rmod"``.
"""

from hfx._lazy import attach

from .registry import (
    CUSTOM_GENERATE_NAMES,
    CUSTOM_GENERATE_TOKENIZER_ARGUMENTS,
    install_custom_generate_names,
    register_custom_generate,
    resolve_custom_generate,
    uninstall_custom_generate_names,
)


# `hfx.generation.rmod` / `.thinkmerge` after a bare `import hfx` (submodules load on first access)
__getattr__ = attach(__name__, {}, (), submodules=("thinkmerge", "rmod", "budget_forcing"))[0]
