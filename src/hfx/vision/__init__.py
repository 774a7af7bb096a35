"""Visual reasoning methods: :mod:`hfx.vision.crd` (concept-level rule decomposition of visual scenes)."""

from hfx._lazy import attach


_LAZY = {
    "CRDPipeline": "hfx.vision.crd",
    "CRDConfig": "hfx.vision.crd",
    "AttributeProposer": "hfx.vision.crd",
    "VLMConceptProposer": "hfx.vision.crd",
}
_SUBMODULES = {"crd"}
__all__ = sorted([*_LAZY, *_SUBMODULES])  # noqa: PLE0605

__getattr__, __dir__ = attach(__name__, _LAZY, __all__, submodules=_SUBMODULES)
