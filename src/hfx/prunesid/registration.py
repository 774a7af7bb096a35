"""Register the PruneSID LLaVA classes with the transformers Auto classes (run by ``import hfx``, lazily).

After ``import hfx``, a folder saved from a pruned model (``"model_type": "prunesid_llava"`` /
``"prunesid_llava_next"`` / ``"prunesid_llava_next_video"``) loads as the PruneSID classes through
``AutoConfig``, ``AutoModel``, ``AutoModelForImageTextToText`` and ``AutoProcessor``; stock ``"llava"`` folders keep
loading as the stock classes (only new model types are added, nothing is replaced).

``import hfx`` must not import transformers, so :func:`register` runs from post-import hooks
(:func:`hfx._import_hooks.when_imported`) on the transformers modules it needs: the Auto modules, the LLaVA
configuration / modeling / processing modules and a few outer modules (``modeling_utils``, ``pipelines``, ...).
Each call registers what is ready and waits for the rest: a piece waits while a module it depends on is half-way
through its import (found as a ``<module>`` frame on the stack: e.g. ``modeling_llava`` imports
``transformers.models.auto`` before it defines its classes, so the Auto module's hook can fire while
``modeling_llava`` is incomplete; registration then happens at ``modeling_llava``'s own hook). Nothing is registered
while any transformers import is in progress (even the LLaVA config modules read the Auto model mappings).
Every registration uses ``exist_ok=True``, so calling :func:`register` again is harmless.
"""

from __future__ import annotations

import sys


_T = "transformers.models."
CONFIG_MODULES = {
    _T + "llava.configuration_llava": "LlavaConfig",
    _T + "llava_next.configuration_llava_next": "LlavaNextConfig",
    _T + "llava_next_video.configuration_llava_next_video": "LlavaNextVideoConfig",
}
MODELING_MODULES = {
    _T + "llava.modeling_llava": "LlavaForConditionalGeneration",
    _T + "llava_next.modeling_llava_next": "LlavaNextForConditionalGeneration",
    _T + "llava_next_video.modeling_llava_next_video": "LlavaNextVideoForConditionalGeneration",
}
PROCESSING_MODULES = {
    _T + "llava.processing_llava": "LlavaProcessor",
    _T + "llava_next.processing_llava_next": "LlavaNextProcessor",
}
AUTO_MODULES = {
    "configs": (_T + "auto.configuration_auto", "AutoConfig"),
    "models": (_T + "auto.modeling_auto", "AutoModelForImageTextToText"),
    "processors": (_T + "auto.processing_auto", "AutoProcessor"),
}
# every module whose import should (re)try the registration: see `hfx/__init__.py`. The infrastructure modules are
# there because they are often the outer, still incomplete import when an Auto module's hook fires first; their
# completion retries.
TRIGGER_MODULES = (
    *(module for module, _ in AUTO_MODULES.values()),
    *CONFIG_MODULES,
    *MODELING_MODULES,
    *PROCESSING_MODULES,
    _T + "auto.tokenization_auto",
    _T + "auto.image_processing_auto",
    _T + "auto.feature_extraction_auto",
    _T + "auto.video_processing_auto",
    "transformers.configuration_utils",
    "transformers.modeling_utils",
    "transformers.processing_utils",
    "transformers.generation.utils",
    "transformers.pipelines",
    "transformers.trainer",
)
_PACKAGES = ("transformers", "huggingface_hub")

_DONE: set[str] = set()
_RUNNING = False  # re-entrancy guard: registering imports LLaVA modules whose own hooks call `register` again


def _defined(module: str, name: str) -> bool:
    """`module` is imported and already defines `name` (not merely half-way through its import)."""
    mod = sys.modules.get(module)
    return mod is not None and name in vars(mod)


def _not_half_imported(modules: dict[str, str]) -> bool:
    """None of `modules` is in the middle of its import (absent modules are fine: importing them is safe)."""
    return all(module not in sys.modules or _defined(module, name) for module, name in modules.items())


def _outer_imports() -> set[str]:
    """transformers / huggingface_hub modules whose import is in progress *around* this call.

    A module that is half-way through its import has its ``<module>`` frame on the stack (suspended at an import
    statement). A post-import hook runs after its own module's code has returned, so that module is complete and
    not listed.
    """
    names, frame = set(), sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_name == "<module>":
            name = frame.f_globals.get("__name__", "")
            if name.split(".", 1)[0] in _PACKAGES:
                names.add(name)
        frame = frame.f_back
    return names


# our own modules that register() imports; each calls register() as its last statement, so a registration that had to
# wait for one of them (half-imported: no `__all__` yet) happens when it completes
OWN_MODULES = ("hfx.prunesid.configuration", "hfx.prunesid.modeling", "hfx.prunesid.processing")


def _ready(piece: str, outer: set[str]) -> bool:
    auto_module, auto_name = AUTO_MODULES[piece]
    if not _defined(auto_module, auto_name):
        return False
    if any(m in sys.modules and "__all__" not in vars(sys.modules[m]) for m in OWN_MODULES):
        return False  # one of our modules is half-way through its import; it calls register() when done
    if outer:  # even the LLaVA config modules reach into half of transformers (their docstring decorator
        return False  # reads the Auto model mappings): wait until no transformers import is in progress
    needs = dict(CONFIG_MODULES)
    if piece == "models":
        needs.update(MODELING_MODULES)
    if piece == "processors":
        needs.update(PROCESSING_MODULES)
    return _not_half_imported(needs) and (piece == "configs" or "configs" in _DONE)


def register_configs() -> None:
    from transformers.models.auto.configuration_auto import AutoConfig

    from .configuration import PruneSIDLlavaConfig, PruneSIDLlavaNextConfig, PruneSIDLlavaNextVideoConfig

    for cls in (PruneSIDLlavaConfig, PruneSIDLlavaNextConfig, PruneSIDLlavaNextVideoConfig):
        AutoConfig.register(cls.model_type, cls, exist_ok=True)


def register_models() -> None:
    from transformers.models.auto.modeling_auto import AutoModel, AutoModelForImageTextToText

    from . import modeling

    pairs = [
        (modeling.PruneSIDLlavaModel, modeling.PruneSIDLlavaForConditionalGeneration),
        (modeling.PruneSIDLlavaNextModel, modeling.PruneSIDLlavaNextForConditionalGeneration),
        (modeling.PruneSIDLlavaNextVideoModel, modeling.PruneSIDLlavaNextVideoForConditionalGeneration),
    ]
    for inner, generation in pairs:
        AutoModel.register(inner.config_class, inner, exist_ok=True)
        AutoModelForImageTextToText.register(generation.config_class, generation, exist_ok=True)


def register_processors() -> None:
    from transformers.models.auto.processing_auto import AutoProcessor

    from .configuration import PruneSIDLlavaConfig, PruneSIDLlavaNextConfig
    from .processing import PruneSIDLlavaNextProcessor, PruneSIDLlavaProcessor

    AutoProcessor.register(PruneSIDLlavaConfig, PruneSIDLlavaProcessor, exist_ok=True)
    AutoProcessor.register(PruneSIDLlavaNextConfig, PruneSIDLlavaNextProcessor, exist_ok=True)


_STEPS = {"configs": register_configs, "models": register_models, "processors": register_processors}


def register() -> None:
    """Register whatever is ready (configs first, then models and processors); safe to call any number of times."""
    global _RUNNING
    if _RUNNING:  # re-entrant call from a hook fired by our own imports
        return
    _RUNNING = True
    try:
        outer = _outer_imports()
        for piece, step in _STEPS.items():
            if piece not in _DONE and _ready(piece, outer):
                step()
                _DONE.add(piece)
    finally:
        _RUNNING = False


def registered() -> frozenset[str]:
    """The pieces registered so far in this process (``"configs"``, ``"models"``, ``"processors"``)."""
    return frozenset(_DONE)


__all__ = ["TRIGGER_MODULES", "register", "register_configs", "register_models", "register_processors", "registered"]
