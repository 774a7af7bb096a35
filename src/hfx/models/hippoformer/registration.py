"""Register mm-TEM / Hippoformer with transformers' Auto classes: kept for callers of the former helpers.

The registration of every hfx architecture now lives in one table, :data:`hfx.utils.artifacts.ARCHITECTURES`, run by
``import hfx`` (lazily, once transformers' Auto modules are imported) and by each configuration / modelling module as
its last statement (:func:`hfx.utils.artifacts.register_module`). These functions call it.
"""

from __future__ import annotations

from hfx.utils.artifacts import register_auto_configs, register_auto_models


def register_configs() -> None:
    """``AutoConfig.register`` for ``"mmtem"`` and ``"hippoformer"`` (and the other hfx architectures)."""
    from . import configuration_hippoformer  # noqa: F401 -- registers as its last statement

    register_auto_configs()


def register_models() -> None:
    """``AutoModel.register`` for both configs (imports the torch modelling code)."""
    from . import modeling_hippoformer  # noqa: F401 -- registers as its last statement

    register_auto_models()


def register() -> None:
    """Both registrations now (idempotent)."""
    register_configs()
    register_models()


__all__ = ["register", "register_configs", "register_models"]
