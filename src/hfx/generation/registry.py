"""Named ``custom_generate`` strategies: ``model.generate(..., custom_generate="thinkmerge")``.

transformers has no registry of named decoding strategies: a string ``custom_generate`` is always treated as a
Hub repo id or a local folder holding ``custom_generate/generate.py`` (and needs ``trust_remote_code=True``).
hfx adds one small, reversible hook, :func:`install_custom_generate_names`, installed by ``import hfx`` (as soon as
``transformers.generation.utils`` is imported, so that ``import hfx`` itself stays light). It wraps
:meth:`transformers.GenerationMixin.load_custom_generate`, the method transformers calls for a string
``custom_generate`` and, with ``from_pretrained(..., trust_remote_code=True)``, for the repo being loaded
(``adjust_generation_fn``).

**Resolution order** of a string ``custom_generate`` (and of a repo loaded with ``trust_remote_code=True``):

1. a **local folder** of that name (``os.path.isdir``) goes to transformers (its ``custom_generate/generate.py``);
2. otherwise a **registered hfx name** (:data:`CUSTOM_GENERATE_NAMES`: ``"thinkmerge"``, ``"hfx/thinkmerge"``,
   ``"rmod"``, ``"hfx/rmod"``, ``"budget_forcing"``, ``"hfx/budget_forcing"``) runs the in-package callable: no ``trust_remote_code``, no download. The hook
   re-enters the model class's ``generate`` with the callable, so transformers prepares inputs, cache and processors
   as usual;
3. every other value (Hub ids, cached repos, callables, ``None``) reaches transformers' original method untouched.

So a Hub repo whose id is a registered name (``"hfx/thinkmerge"``) is shadowed by the in-package method; hfx's
publishers never default to such an id (``hfx publish thinkmerge`` uses ``your-username/thinkmerge`` unless told
otherwise, and refuses a registered name). To run such a repo's own code, pass its snapshot's local path, or call
:func:`uninstall_custom_generate_names` first.

**The tokenizer.** transformers 5.x drops ``tokenizer=`` before calling a ``custom_generate`` callable (so stop strings
fail with "could not locate a tokenizer"). A name resolved here sees the ``generate`` arguments first: stop strings
become a ``StopStringCriteria`` built with the tokenizer, and the tokenizer is passed to the callable under the
name registered with :func:`register_custom_generate` (ThinkMerge: ``think_end_tokenizer``).

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
    "budget_forcing": "hfx.generation.budget_forcing:budget_forcing",
    "hfx/budget_forcing": "hfx.generation.budget_forcing:budget_forcing",
}

# name -> the callable's parameter that receives `generate(..., tokenizer=tok)` (transformers drops `tokenizer`)
CUSTOM_GENERATE_TOKENIZER_ARGUMENTS: dict[str, str] = {
    "thinkmerge": "think_end_tokenizer",
    "hfx/thinkmerge": "think_end_tokenizer",
    "budget_forcing": "think_end_tokenizer",
    "hfx/budget_forcing": "think_end_tokenizer",
}

_ORIGINAL_LOAD = None


def register_custom_generate(name: str, target: str | Callable, *, tokenizer_argument: str | None = None) -> None:
    """Register ``name`` so that ``generate(custom_generate=name)`` runs ``target``.

    A registered name shadows a Hub repo of the same id (see the module docstring for the resolution order): prefer
    names without a namespace, which no new Hub repo can have.

    Args:
        name (`str`): the strategy name users pass as ``custom_generate``.
        target (`str` or `Callable`): ``"module:attribute"`` or the callable itself (the signature transformers
            calls a ``custom_generate`` callable with).
        tokenizer_argument (`str`, *optional*): the callable's keyword parameter that should receive
            ``generate(..., tokenizer=tok)`` (transformers does not pass ``tokenizer`` to callables).

    Raises:
        TypeError: if ``name`` is not a string, ``target`` is neither a string nor a callable, or
            ``tokenizer_argument`` is not a string.
    """
    if not isinstance(name, str) or not name:
        raise TypeError(f"`name` must be a non-empty string, but is {name!r}")
    if not (isinstance(target, str) and ":" in target) and not callable(target):
        raise TypeError(f"`target` must be a 'module:attribute' string or a callable, but is {target!r}")
    if tokenizer_argument is not None and not isinstance(tokenizer_argument, str):
        raise TypeError(f"`tokenizer_argument` must be a string or None, but is {tokenizer_argument!r}")
    CUSTOM_GENERATE_NAMES[name] = target
    if tokenizer_argument is None:
        CUSTOM_GENERATE_TOKENIZER_ARGUMENTS.pop(name, None)
    else:
        CUSTOM_GENERATE_TOKENIZER_ARGUMENTS[name] = tokenizer_argument


def resolve_custom_generate(name: str) -> Callable | None:
    """The callable registered under ``name``, or ``None`` if ``name`` is not an hfx strategy name."""
    target = CUSTOM_GENERATE_NAMES.get(name)
    if target is None or callable(target):
        return target
    module, attribute = target.split(":")
    return getattr(importlib.import_module(module), attribute)


def _run_registered(decoding_fn: Callable, tokenizer_argument: str | None, *args, model=None, **generate_arguments):
    """What a registered name resolves to: ``generate`` of the model's class with the in-package callable.

    Called as ``f(model=model, **generate_arguments)`` for ``generate(custom_generate=name)``, and as
    ``f(*user_args, model=model, **user_kwargs)`` once ``from_pretrained(name, trust_remote_code=True)`` made it the
    model's ``generate``. The class's ``generate`` is called (not ``model.generate``, which may be this function).
    """
    if model is None:
        raise TypeError("a registered custom_generate method needs `model=`")
    from hfx.generation.thinkmerge.generate import route_tokenizer

    custom_generate = generate_arguments.pop("custom_generate", None)
    if custom_generate is not None:  # another method was asked for on a model whose `generate` is this one
        return type(model).generate(model, *args, custom_generate=custom_generate, **generate_arguments)
    generate_arguments = route_tokenizer(model, generate_arguments, tokenizer_argument)
    # re-enter generate with the callable: transformers prepares inputs, cache and processors as usual
    return type(model).generate(model, *args, custom_generate=decoding_fn, **generate_arguments)


def _load_custom_generate_with_names(self, pretrained_model_name_or_path=None, trust_remote_code=None, **kwargs):
    name = pretrained_model_name_or_path
    if isinstance(name, str) and name in CUSTOM_GENERATE_NAMES and not os.path.isdir(name):
        decoding_fn = resolve_custom_generate(name)
        return functools.partial(_run_registered, decoding_fn, CUSTOM_GENERATE_TOKENIZER_ARGUMENTS.get(name))
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
