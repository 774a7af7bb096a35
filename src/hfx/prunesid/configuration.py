"""Hugging Face config classes of the pruned LLaVA models: their own ``model_type``, so that Auto classes never drop
the pruning.

A pruned model saves ``config.json`` with ``"model_type": "prunesid_llava"`` (``prunesid_llava_next``,
``prunesid_llava_next_video``) and the :class:`~hfx.prunesid.PruneSIDConfig` settings under ``"prunesid"``. After
``import hfx`` these types are registered with ``AutoConfig``, ``AutoModel``, ``AutoModelForImageTextToText`` and
``AutoProcessor`` (:mod:`hfx.prunesid.registration`), so ``AutoModelForImageTextToText.from_pretrained(folder)``
builds the PruneSID class. Without hfx, transformers does not know the type and raises instead of silently building
the stock class. Stock ``"llava"`` folders are untouched: they still load as the stock classes.

Each class only adds the ``prunesid`` field (a dict or `None`) to the stock config; everything else is inherited.
Loading a ``prunesid_*`` ``config.json`` without the ``prunesid`` key raises (write ``"prunesid": null`` to load
it unpruned on purpose), and so does a ``config.json`` of an unrelated ``model_type``.
"""

from __future__ import annotations

from huggingface_hub.dataclasses import strict
from transformers.models.llava.configuration_llava import LlavaConfig
from transformers.models.llava_next.configuration_llava_next import LlavaNextConfig
from transformers.models.llava_next_video.configuration_llava_next_video import LlavaNextVideoConfig

from hfx.utils.artifacts import ConfigArtifactMixin


@strict
class PruneSIDLlavaConfig(ConfigArtifactMixin, LlavaConfig):
    """``LlavaConfig`` with the pruning settings; ``model_type = "prunesid_llava"``.

    Args:
        prunesid (`dict`, *optional*): :meth:`hfx.prunesid.PruneSIDConfig.to_dict` output; `None` disables pruning.
        **kwargs: as ``LlavaConfig``.
    """

    model_type = "prunesid_llava"
    prunesid: dict | None = None
    # a stock folder converts (pruning off); a saved PruneSID config must carry `prunesid` (null = off)
    _hfx_loads = ("llava",)
    _hfx_required = ("prunesid",)
    _hfx_required_for = "prunesid_llava"


@strict
class PruneSIDLlavaNextConfig(ConfigArtifactMixin, LlavaNextConfig):
    """``LlavaNextConfig`` with the pruning settings; ``model_type = "prunesid_llava_next"``."""

    model_type = "prunesid_llava_next"
    prunesid: dict | None = None
    # a stock folder converts (pruning off); a saved PruneSID config must carry `prunesid` (null = off)
    _hfx_loads = ("llava_next",)
    _hfx_required = ("prunesid",)
    _hfx_required_for = "prunesid_llava_next"


@strict
class PruneSIDLlavaNextVideoConfig(ConfigArtifactMixin, LlavaNextVideoConfig):
    """``LlavaNextVideoConfig`` with the pruning settings; ``model_type = "prunesid_llava_next_video"``."""

    model_type = "prunesid_llava_next_video"
    prunesid: dict | None = None
    # a stock folder converts (pruning off); a saved PruneSID config must carry `prunesid` (null = off)
    _hfx_loads = ("llava_next_video",)
    _hfx_required = ("prunesid",)
    _hfx_required_for = "prunesid_llava_next_video"


# stock config class -> PruneSID config class
CONFIG_CLASSES = {
    LlavaConfig: PruneSIDLlavaConfig,
    LlavaNextConfig: PruneSIDLlavaNextConfig,
    LlavaNextVideoConfig: PruneSIDLlavaNextVideoConfig,
}


def as_prunesid_config(config, target: type):
    """Return `config` as an instance of `target` (one of the classes above).

    An instance of `target` is returned unchanged. A stock config (e.g. ``LlavaConfig.from_pretrained(...)`` with
    ``config.prunesid`` set by hand) is shallow-copied and its class switched to `target`, which adds no state
    beyond ``prunesid`` (kept if present); the caller's object is not modified.

    Raises:
        TypeError: if `config` is not `target`'s stock parent class (or `target` itself).
    """
    if isinstance(config, target):
        return config
    stock = next((s for s, t in CONFIG_CLASSES.items() if t is target), None)
    if stock is None or type(config) is not stock:
        raise TypeError(
            f"expected a {target.__name__} or {getattr(stock, '__name__', '?')}, got {type(config).__name__}"
        )
    import copy

    new = copy.copy(config)
    prunesid = getattr(config, "prunesid", None)
    new.__class__ = target
    new.prunesid = prunesid
    return new


__all__ = [
    "CONFIG_CLASSES",
    "PruneSIDLlavaConfig",
    "PruneSIDLlavaNextConfig",
    "PruneSIDLlavaNextVideoConfig",
    "as_prunesid_config",
]


def _register_with_auto_classes() -> None:  # see hfx.prunesid.registration (waits while imports are in progress)
    from .registration import register

    register()


_register_with_auto_classes()
