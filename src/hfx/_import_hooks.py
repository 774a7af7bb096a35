"""Post-import hooks: run a registration function when a third-party module is first imported.

``import hfx`` stays light (no torch, no transformers) yet ``custom_generate="thinkmerge"`` must work in any process
that imported hfx: the name hook is installed when ``transformers.generation.utils`` is first imported.

``import hfx`` must not import peft, yet a saved SLAO adapter must load with plain ``PeftModel.from_pretrained`` in
any process that imported hfx. :func:`when_imported` solves this without importing peft eagerly: it places a small
finder on ``sys.meta_path`` that, the first time ``peft`` finishes importing, calls
``hfx.tuners.slao.registration:register`` (which fills PEFT's public type mappings). If the package is already
imported, the hook runs at once. :func:`remove_import_hooks` removes the finder (reversible); nothing else about the
import system changes.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import warnings


_HOOKS: dict[str, list[str]] = {}


def _run_hooks(module_name: str) -> None:
    for target in _HOOKS.pop(module_name, []):
        module, function = target.split(":")
        try:
            getattr(importlib.import_module(module), function)()
        except Exception as err:  # noqa: BLE001 -- a broken optional integration must not break the user's import of `module_name`
            warnings.warn(f"hfx: post-import hook {target} for `{module_name}` failed: {err!r}", stacklevel=2)


class _HookedLoader(importlib.abc.Loader):
    def __init__(self, loader, module_name: str):
        self._loader, self._module_name = loader, module_name

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        module.__loader__ = self._loader
        module.__spec__.loader = self._loader
        self._loader.exec_module(module)
        _run_hooks(self._module_name)

    def __getattr__(self, name):  # get_resource_reader, is_package, ... of the real loader
        return getattr(self._loader, name)


class _PostImportFinder(importlib.abc.MetaPathFinder):
    def __init__(self):
        self._searching: set[str] = set()

    def find_spec(self, fullname, path=None, target=None):
        if fullname not in _HOOKS or fullname in self._searching:
            return None
        self._searching.add(fullname)
        try:
            spec = importlib.util.find_spec(fullname)
        finally:
            self._searching.discard(fullname)
        if spec is None or spec.loader is None:
            return None
        spec.loader = _HookedLoader(spec.loader, fullname)
        return spec


_FINDER = _PostImportFinder()


def when_imported(module_name: str, target: str) -> None:
    """Call ``target`` (``"module:function"``) once ``module_name`` has been imported (now, if it already is)."""
    if module_name in sys.modules:
        _HOOKS.setdefault(module_name, []).append(target)
        _run_hooks(module_name)
        return
    _HOOKS.setdefault(module_name, []).append(target)
    if _FINDER not in sys.meta_path:
        sys.meta_path.insert(0, _FINDER)


def remove_import_hooks() -> None:
    """Drop every pending hook and remove the finder from ``sys.meta_path``."""
    _HOOKS.clear()
    if _FINDER in sys.meta_path:
        sys.meta_path.remove(_FINDER)
