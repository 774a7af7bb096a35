"""Shared mechanisms written once: argument validation (:mod:`hfx.utils.validation`), statistics for evidence
scripts (:mod:`hfx.utils.stats`). Submodules load on first use."""

from .._lazy import attach


__all__ = ["stats", "validation"]
__getattr__, __dir__ = attach(__name__, {}, __all__, submodules=__all__)
