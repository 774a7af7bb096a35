"""Availability checks for optional features (``importlib.util.find_spec`` + ``lru_cache``, as in TRL/transformers)."""

import importlib.util
from functools import lru_cache


@lru_cache
def _is_available(name: str) -> bool:
    return importlib.util.find_spec(name) is not None


def is_trl_available() -> bool:
    return _is_available("trl")


def is_peft_available() -> bool:
    return _is_available("peft")


def is_diffusers_available() -> bool:
    return _is_available("diffusers")


def is_gguf_available() -> bool:
    return _is_available("gguf")


def is_kornia_available() -> bool:
    return _is_available("kornia")


def is_sentence_transformers_available() -> bool:
    return _is_available("sentence_transformers")


def require(name: str, feature: str, extra: str = "dev") -> None:
    """Raise an ``ImportError`` naming the missing package and how to install it."""
    if not _is_available(name):
        raise ImportError(f"{feature} needs the `{name}` package. Install it with `pip install 'hfx[{extra}]'`.")
