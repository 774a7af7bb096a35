"""Shared mechanisms written once: argument validation (:mod:`hfx.utils.validation`), artifact identity
(:mod:`hfx.utils.artifacts`, with :mod:`hfx.utils.remote_code` for the code of saved folders), statistics for evidence
scripts (:mod:`hfx.utils.stats`). Submodules load on first use."""

from .._lazy import attach


__all__ = ["artifacts", "remote_code", "stats", "validation"]
__getattr__, __dir__ = attach(__name__, {}, __all__, submodules=__all__)
