"""Register mm-TEM / Hippoformer with transformers' Auto classes (run by ``import hfx``, lazily).

``import hfx`` must not import transformers, so :func:`register_configs` runs from a post-import hook on
``transformers.models.auto.configuration_auto`` and :func:`register_models` from one on
``transformers.models.auto.modeling_auto`` (see :func:`hfx._import_hooks.when_imported`). After that,
``AutoConfig.for_model("mmtem")``, ``AutoModel.from_pretrained(folder)`` (-> :class:`MMTEMModel` /
:class:`HippoformerForNextObservation`) work for saved folders. Only new model types are added (``exist_ok=True``).
"""

from __future__ import annotations


TRIGGER_MODULES = {
    "transformers.models.auto.configuration_auto": "register_configs",
    "transformers.models.auto.modeling_auto": "register_models",
}


def register_configs() -> None:
    """``AutoConfig.register`` for ``"mmtem"`` and ``"hippoformer"``."""
    from transformers.models.auto.configuration_auto import AutoConfig

    from .configuration_hippoformer import HippoformerConfig, MMTEMConfig

    AutoConfig.register(MMTEMConfig.model_type, MMTEMConfig, exist_ok=True)
    AutoConfig.register(HippoformerConfig.model_type, HippoformerConfig, exist_ok=True)


def register_models() -> None:
    """``AutoModel.register`` for both configs (imports the torch modelling code).

    If the modelling module is half-way through its own import (its ``from transformers import PreTrainedModel``
    imported the Auto module whose hook called this), nothing happens here: the modelling module calls this function
    again as its last statement.
    """
    import sys

    modeling = sys.modules.get(__package__ + ".modeling_hippoformer")
    if modeling is not None and "HippoformerForNextObservation" not in vars(modeling):
        return
    from transformers.models.auto.modeling_auto import AutoModel

    from .configuration_hippoformer import HippoformerConfig, MMTEMConfig
    from .modeling_hippoformer import HippoformerForNextObservation, MMTEMModel

    register_configs()
    AutoModel.register(MMTEMConfig, MMTEMModel, exist_ok=True)
    AutoModel.register(HippoformerConfig, HippoformerForNextObservation, exist_ok=True)


def register() -> None:
    """Both registrations now (idempotent)."""
    register_configs()
    register_models()


__all__ = ["TRIGGER_MODULES", "register", "register_configs", "register_models"]
