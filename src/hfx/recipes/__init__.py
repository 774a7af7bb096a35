"""Training recipes that chain several Hugging Face trainers: :mod:`hfx.recipes.fluent` (fluent alignment).

Importing this package loads nothing heavy (PEP 562 lazy attributes): torch, transformers, trl and peft load when a
feature is first used.
"""

from .._lazy import attach


_LAZY = {
    "ConstitutionJudge": ".fluent",
    "FluentAlignmentConfig": ".fluent",
    "run_fluent_alignment": ".fluent",
}
_SUBMODULES = {"fluent"}

__all__ = sorted([*_LAZY, *_SUBMODULES])  # noqa: PLE0605

__getattr__, __dir__ = attach(__name__, _LAZY, __all__, submodules=_SUBMODULES)
