"""Optimizers (the ``torch.optim`` family): :class:`Celo2`, the learned optimizer of arXiv 2602.19142.

Importing this package loads no torch (PEP 562 lazy attributes); ``hfx.optim.Celo2`` imports it on first use.
"""

from .._lazy import attach


_LAZY = {
    "Celo2": ".celo2",
    "Celo2MetaWeights": ".celo2",
}
_SUBMODULES = {"celo2"}

__all__ = sorted([*_LAZY, *_SUBMODULES])  # noqa: PLE0605

__getattr__, __dir__ = attach(__name__, _LAZY, __all__, submodules=_SUBMODULES)
