"""Write the code of an hfx architecture into its saved folder, so plain transformers loads it (``trust_remote_code``).

:func:`save_code` copies the module of each class (its configuration and modelling modules) and every hfx module
they import -- transitively, including imports inside functions -- into the folder, flat, with each hfx import
rewritten to a relative one (``from hfx.utils.validation import check_int`` -> ``from .validation import check_int``,
``from .configuration_x import X`` kept). Nothing else in a file changes, so the copied classes compute exactly what
the installed ones do. :func:`auto_map_for` gives the ``auto_map`` entries (``"modeling_x.XModel"``) that
``AutoConfig`` / ``AutoModel*`` follow with ``trust_remote_code=True``; the config mixins of :mod:`hfx.utils.artifacts`
call both from ``save_pretrained`` (the table of architectures is :data:`hfx.utils.artifacts.ARCHITECTURES`).

transformers finds the files of a local folder with a regex over ``from .name import`` lines, so a module-object
import of an hfx module (``import hfx.x`` or ``from hfx.utils import validation``) cannot be bundled: it is refused
with a `ValueError` naming the module and line.

Only the standard library is imported (this module is copied into the folders too).
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import sys
from pathlib import Path


HEADER = "# Copied by hfx's save_pretrained from `{module}` (imports of hfx modules rewritten to relative ones).\n"


def _module_file(name: str) -> Path:
    module = sys.modules.get(name)
    file = getattr(module, "__file__", None) if module is not None else None
    if file is None:
        spec = importlib.util.find_spec(name)
        file = spec.origin if spec is not None else None
    if file is None or not str(file).endswith(".py"):
        raise ValueError(f"cannot bundle `{name}`: it has no Python source file")
    return Path(file)


def _in_scope(target: str, root: str) -> bool:
    return target == root or target.startswith(root + ".")


def _is_package(name: str) -> bool:
    return _module_file(name).name == "__init__.py"


def _defining_module(base: str, attribute: str, where: str) -> str:
    """The module that defines ``base.attribute`` (``base`` itself unless it is a package re-exporting a name)."""
    if not _is_package(base):
        return base
    try:
        submodule = importlib.util.find_spec(f"{base}.{attribute}") is not None
    except (ImportError, ValueError):
        submodule = False
    if submodule:
        raise ValueError(
            f"cannot bundle {where}: `from {base} import {attribute}` imports a module object; import the names it "
            f"uses instead (`from {base}.{attribute} import ...`)"
        )
    value = getattr(importlib.import_module(base), attribute)
    owner = getattr(value, "__module__", None)
    if not owner or owner == base:
        raise ValueError(f"cannot bundle {where}: `{base}.{attribute}` is defined in a package `__init__`")
    return owner


class _Module:
    """One module to copy: its source, the hfx modules it imports, and the import statements to rewrite."""

    def __init__(self, name: str, root: str):
        self.name = name
        self.file = _module_file(name)
        self.source = self.file.read_text(encoding="utf-8")
        self.package = name if self.file.name == "__init__.py" else name.rpartition(".")[0]
        self.edits: list[tuple[ast.ImportFrom, list[tuple[str, list[ast.alias]]]]] = []
        self.imports: set[str] = set()
        tree = ast.parse(self.source, filename=str(self.file))
        for node in ast.walk(tree):
            where = f"{name} line {getattr(node, 'lineno', '?')}"
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if _in_scope(alias.name, root):
                        raise ValueError(
                            f"cannot bundle {where}: `import {alias.name}` imports a module object; use "
                            f"`from {alias.name} import ...`"
                        )
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = importlib.util.resolve_name("." * node.level + (node.module or ""), self.package)
                elif node.module and _in_scope(node.module, root):
                    base = node.module
                else:
                    continue
                groups: dict[str, list[ast.alias]] = {}
                for alias in node.names:
                    if alias.name == "*":
                        raise ValueError(f"cannot bundle {where}: `from {base} import *`")
                    groups.setdefault(_defining_module(base, alias.name, where), []).append(alias)
                self.imports.update(groups)
                self.edits.append((node, list(groups.items())))

    def rewritten(self, flat: dict[str, str]) -> str:
        lines = self.source.splitlines(keepends=True)
        for node, groups in sorted(self.edits, key=lambda e: e[0].lineno, reverse=True):
            first, last = node.lineno - 1, node.end_lineno - 1
            before, after = lines[first][: node.col_offset], lines[last][node.end_col_offset :]
            if before.strip() or (after.strip() and not after.strip().startswith("#")):
                raise ValueError(f"cannot bundle {self.name} line {node.lineno}: the import shares its line")
            statements = [
                f"from .{flat[module]} import "
                + ", ".join(a.name if a.asname is None else f"{a.name} as {a.asname}" for a in aliases)
                for module, aliases in groups
            ]
            lines[first : last + 1] = [before + f"\n{before}".join(statements) + after]
        return HEADER.format(module=self.name) + "".join(lines)


def _collect(classes) -> tuple[dict[str, _Module], dict[str, str]]:
    roots = [cls.__module__ for cls in classes]
    root = roots[0].partition(".")[0]  # "hfx": absolute imports of other packages stay as they are
    modules: dict[str, _Module] = {}
    todo = list(dict.fromkeys(roots))
    while todo:
        name = todo.pop(0)
        if name in modules:
            continue
        modules[name] = _Module(name, root)
        todo.extend(sorted(m for m in modules[name].imports if m not in modules))
    flat: dict[str, str] = {}
    taken: set[str] = set()
    for name in modules:  # roots first, then in discovery order: short names, longer ones on a clash
        parts = name.split(".")
        for k in range(1, len(parts) + 1):
            candidate = "_".join(parts[-k:])
            if candidate not in taken:
                break
        flat[name] = candidate
        taken.add(candidate)
    return modules, flat


def auto_map_for(classes) -> dict[str, str]:
    """The ``auto_map`` of a folder exposing ``classes`` (a config class first, then model classes): each class's
    Auto class (from :data:`hfx.utils.artifacts.ARCHITECTURES`) -> ``"<file>.<Class>"``."""
    from .artifacts import ARCHITECTURES

    _, flat = _collect(classes)
    targets = {f"{cls.__module__}:{cls.__name__}": cls for cls in classes}
    auto_map = {}
    for entries in ARCHITECTURES.values():
        for auto_class, target in entries.items():
            if target in targets:
                cls = targets[target]
                auto_map[auto_class] = f"{flat[cls.__module__]}.{cls.__name__}"
    return auto_map


def save_code(classes, folder) -> list[Path]:
    """Copy the modules of ``classes`` and the hfx modules they import into ``folder`` (imports made relative).

    Returns:
        `list[Path]`: the files written.

    Raises:
        ValueError: for an import that cannot be bundled (a module-object import of an hfx module, ``*``).
    """
    modules, flat = _collect(classes)
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for name, module in modules.items():
        path = folder / f"{flat[name]}.py"
        path.write_text(module.rewritten(flat), encoding="utf-8")
        written.append(path)
    return written


__all__ = ["auto_map_for", "save_code"]
