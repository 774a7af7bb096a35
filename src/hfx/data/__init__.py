"""Data generators: ``hfx.data.tail`` (TAIL-style Turing-machine-imitation chain-of-thought data, arXiv 2507.13332).

Sub-packages load on first attribute access, so ``import hfx.data`` imports neither ``datasets`` nor torch.
"""

from .._lazy import attach


_LAZY: dict[str, str] = {}
_SUBMODULES = {"tail"}

__all__ = sorted(_SUBMODULES)  # noqa: PLE0605

__getattr__, __dir__ = attach(__name__, _LAZY, __all__, submodules=_SUBMODULES)
