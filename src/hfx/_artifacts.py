"""Compatibility name of :mod:`hfx.utils.artifacts` (the artifact-identity module lives there, as the style note asks).

Kept because code on other branches and the helper guide import ``hfx._artifacts``; it is the *same module object*
(``sys.modules`` alias), so a monkeypatch of either name affects both and nothing can drift.
"""

import sys

from .utils import artifacts as _artifacts


sys.modules[__name__] = _artifacts
