"""Federated fine-tuning (Flower simulation + PEFT LoRA): :mod:`hfx.federated.devft`, DevFT of arXiv 2508.00041.

Importing this package loads nothing heavy (PEP 562 lazy attributes): torch, transformers, peft, scikit-learn, flwr and
ray load when a feature is first used.
"""

from .._lazy import attach


_LAZY = {
    "DevFTConfig": ".devft",
    "DevFTResult": ".devft",
    "DevFTScheduler": ".devft",
    "StagePlan": ".devft",
    "run_devft": ".devft",
}
_SUBMODULES = {"devft"}

__all__ = sorted([*_LAZY, *_SUBMODULES])  # noqa: PLE0605

__getattr__, __dir__ = attach(__name__, _LAZY, __all__, submodules=_SUBMODULES)
