"""Named ``custom_generate`` strategies: ``model.generate(..., custom_generate="thinkmerge")``.

transformers has no registry of named decoding strategies: a string ``custom_generate`` is always treated as a
Hub repo id or a local folder holding ``custom_generate/generate.py`` (and needs ``trust_remote_code=True``).
hfx adds one small, reversible hook, :func:`install_custom_generate_names`, installed by ``import hfx`` (as soon as
``transformers.generation.utils`` is imported, so that ``import hfx`` itself stays light):

* it wraps :meth:`transformers.GenerationMixin.load_custom_generate` (the method ``generate`` calls only for a
  string ``custom_generate``);
* when the string is one of hfx's registered names (``"thinkmerge"``, ``"hfx/thinkmerge"``, ``"rmod"``,
  ``"hfx/rmod"``) **and** no local folder of that name exists, it returns a function that re-enters
  ``model.generate`` with the in-package callable (``custom_generate=hfx.thinkmerge``), so transformers performs its
  usual input preparation and calls hfx's decoding loop. This is installed code: no ``trust_remote_code`` is needed;
* every other value (Hub ids, local folders, callables, ``None``) reaches transformers' original method untouched.

:func:`uninstall_custom_generate_names` restores the original method exactly.
"""

from __future__ import annotations

import functools
import importlib
import os
from collections.abc import Callable


# name -> "module:attribute" of the custom_generate callable
CUSTOM_GENERATE_NAMES: dict[str, str] = {
    "thinkmerge": "hfx.generation.thinkmerge:thinkmerge",
    "hfx/thinkmerge": "hfx.generation.thinkmerge:thinkmerge",
    "rmod": "hfx.generation.rmod:rmod",
    "hfx/rmod": "hfx.generation.rmod:rmod",
}

_ORIGINAL_LOAD = None


def register_custom_generate(name: str, target: str | Callable) -> None:
    """Register ``name`` so that ``generate(custom_generate=name)`` runs ``target``.

    Args:
        name (`str`): the strategy name users pass as ``custom_generate``.
        target (`str` or `Callable`): ``"module:attribute"`` or the callable itself (the signature transformers
            calls a ``custom_generate`` callable with).

    Raises:
        TypeError: if ``name`` is not a string or ``target`` is neither a string nor a callable.
    """
    if not isinstance(name, str) or not name:
        raise TypeError(f"`name` must be a non-empty string, but is {name!r}")
    if not (isinstance(target, str) and ":" in target) and not callable(target):
        raise TypeError(f"`target` must be a 'module:attribute' string or a callable, but is {target!r}")
    CUSTOM_GENERATE_NAMES[name] = target


def resolve_custom_generate(name: str) -> Callable | None:
    """The callable registered under ``name``, or ``None`` if ``name`` is not an hfx strategy name."""
    target = CUSTOM_GENERATE_NAMES.get(name)
    if target is None or callable(target):
        return target
    module, attribute = target.split(":")
    return getattr(importlib.import_module(module), attribute)


def _run_registered(decoding_fn: Callable, model, **generate_arguments):
    # Re-enter generate with the callable: transformers prepares inputs, cache and processors as usual.
    return model.generate(custom_generate=decoding_fn, **generate_arguments)


def _load_custom_generate_with_names(self, pretrained_model_name_or_path=None, trust_remote_code=None, **kwargs):
    name = pretrained_model_name_or_path
    if isinstance(name, str) and name in CUSTOM_GENERATE_NAMES and not os.path.isdir(name):
        decoding_fn = resolve_custom_generate(name)
        return functools.partial(_run_registered, decoding_fn)
    return _ORIGINAL_LOAD(self, pretrained_model_name_or_path, trust_remote_code=trust_remote_code, **kwargs)


def install_custom_generate_names() -> None:
    """Install the name hook on ``GenerationMixin.load_custom_generate`` (idempotent).

    ``import hfx`` does not call this directly (that would import torch and most of transformers): it asks
    :func:`hfx._import_hooks.when_imported` to call it as soon as ``transformers.generation.utils`` is imported, which
    happens before any model can ``generate``.
    """
    from transformers.generation.utils import GenerationMixin

    global _ORIGINAL_LOAD
    if _ORIGINAL_LOAD is None:
        _ORIGINAL_LOAD = GenerationMixin.load_custom_generate
        GenerationMixin.load_custom_generate = _load_custom_generate_with_names


def uninstall_custom_generate_names() -> None:
    """Restore transformers' original ``GenerationMixin.load_custom_generate`` (idempotent)."""
    from transformers.generation.utils import GenerationMixin

    global _ORIGINAL_LOAD
    if _ORIGINAL_LOAD is not None:
        GenerationMixin.load_custom_generate = _ORIGINAL_LOAD
        _ORIGINAL_LOAD = None


def is_installed() -> bool:
    """Whether the name hook is currently installed."""
    from transformers.generation.utils import GenerationMixin

    return GenerationMixin.load_custom_generate is _load_custom_generate_with_names
