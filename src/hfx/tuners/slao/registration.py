"""Registration of the ``"SLAO"`` PEFT type (idempotent, imports only torch and peft).

PEFT 0.21.2's ``register_peft_method`` only accepts names of its closed ``PeftType`` enum, so hfx fills the mapping
dicts it would fill (``hf_integration.md`` section 4.1), keyed by :data:`~hfx.tuners.slao.config.SLAO_PEFT_TYPE`: an
:class:`~hfx.tuners.slao.config.ExternalPeftType`, a ``str`` equal to ``"SLAO"`` that also has ``.value`` / ``.name``
like a ``PeftType`` member. That is enough for ``get_peft_model``, training, ``save_pretrained`` (``"peft_type":
"SLAO"``), ``PeftConfig`` / ``PeftModel.from_pretrained``, ``merge_and_unload`` and transformers' ``load_adapter`` /
``AutoModel*.from_pretrained(adapter_dir)``. Nothing in PEFT is patched. It must run in the process that loads an SLAO
adapter: ``import hfx`` arranges it as soon as peft is imported, and importing :mod:`hfx.tuners.slao` does it too.
``PeftMixedModel`` (``get_peft_model(..., mixed=True)``) keeps its own closed list of types and refuses SLAO with
PEFT's error message.
"""

from __future__ import annotations

import sys


_REGISTERED = False
_OWN_MODULES = ("hfx.tuners.slao.config", "hfx.tuners.slao.layer", "hfx.tuners.slao.model")


def _own_import_in_progress() -> bool:
    """True while one of SLAO's own modules is executing (it imported peft, which fired hfx's post-import hook)."""
    for name in _OWN_MODULES:
        module = sys.modules.get(name)
        if module is not None and getattr(getattr(module, "__spec__", None), "_initializing", False):
            return True
    return False


def register() -> bool:
    """Make PEFT aware of SLAO (``"SLAO"`` -> :class:`SLAOConfig`, :class:`SLAOModel`, prefix ``"lora_"``).

    Idempotent and cheap after the first call; never overwrites an entry another library put under ``"SLAO"``.
    When called while :mod:`hfx.tuners.slao` itself is being imported (its ``import peft`` fires hfx's post-import
    hook), it does nothing: the package registers at the end of its own import.

    Returns:
        `bool`: `True` when this call registered SLAO, `False` when it was already registered (or deferred).
    """
    global _REGISTERED
    if _REGISTERED or _own_import_in_progress():
        return False
    from peft.mapping import (
        PEFT_TYPE_TO_CONFIG_MAPPING,
        PEFT_TYPE_TO_PREFIX_MAPPING,
        PEFT_TYPE_TO_TUNER_MAPPING,
    )

    from .config import SLAO_PEFT_TYPE, SLAOConfig
    from .model import SLAOModel

    PEFT_TYPE_TO_CONFIG_MAPPING.setdefault(SLAO_PEFT_TYPE, SLAOConfig)
    PEFT_TYPE_TO_TUNER_MAPPING.setdefault(SLAO_PEFT_TYPE, SLAOModel)
    PEFT_TYPE_TO_PREFIX_MAPPING.setdefault(SLAO_PEFT_TYPE, SLAOModel.prefix)
    _REGISTERED = True
    return True


def is_registered() -> bool:
    """Whether PEFT's mappings resolve ``"SLAO"`` to hfx's classes."""
    from peft.mapping import PEFT_TYPE_TO_TUNER_MAPPING

    from .model import SLAOModel

    return PEFT_TYPE_TO_TUNER_MAPPING.get("SLAO") is SLAOModel


__all__ = ["is_registered", "register"]
